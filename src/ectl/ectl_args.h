/* ectl_args.h — elasticctl's command line: global options, the command
 * table (names, synopses, help, which options each takes) and the parser,
 * which is pure: argv in, a struct or a one-line reason naming the flag out. */
#pragma once

#include <stdbool.h>
#include <stdio.h>

/* The commands elasticctl knows. ECTL_CMD_VERB is any other agent handler,
 * run as POST /handler/<verb> with NAME=VALUE parameters. */
enum ectl_cmd {
	ECTL_CMD_HELP,
	ECTL_CMD_STATUS,
	ECTL_CMD_EVENTS,
	ECTL_CMD_LOGS,
	ECTL_CMD_RESTART,
	ECTL_CMD_STOP,
	ECTL_CMD_SIGNAL,
	ECTL_CMD_DUMP,
	ECTL_CMD_METRICS,
	ECTL_CMD_NODES,
	ECTL_CMD_VERB,
};

/* Options a command takes besides -s, -j, --json and --help. */
enum {
	ECTL_OPT_FOLLOW = 1 << 0, /* -f, --follow */
	ECTL_OPT_SINCE = 1 << 1,  /* --since N */
	ECTL_OPT_LINES = 1 << 2,  /* -n, --lines N */
	ECTL_OPT_STDERR = 1 << 3, /* --stderr */
};

/* One row of the command table. */
struct ectl_command {
	const char *name;
	enum ectl_cmd cmd;
	unsigned opts;        /* ECTL_OPT_* */
	int min_args;         /* positional arguments after the name */
	int max_args;         /* -1: any number (NAME=VALUE parameters) */
	const char *synopsis; /* arguments, e.g. "RANK [-f] [-n N] [--stderr]" */
	const char *summary;  /* one line */
	const char *help;     /* the rest of `elasticctl CMD --help`, or NULL */
};

/* A parsed command line. Strings point into argv. */
struct ectl_args {
	const char *socket; /* -s SOCKET, or NULL */
	const char *run_id; /* -j RUN_ID, or NULL */
	bool json;
	bool help;    /* --help: of the command, or of elasticctl without one */
	bool version; /* -V, --version */
	enum ectl_cmd cmd;
	const char *name;                 /* the command word (NULL for none) */
	const struct ectl_command *known; /* its table row, NULL for an unknown verb */
	bool follow;
	long long since; /* events --since (default 0) */
	long long lines; /* logs -n (default 10) */
	bool use_stderr;
	long long rank;      /* logs RANK, signal [RANK]; -1 when not given */
	const char *sig;     /* signal SIG */
	const char **params; /* ECTL_CMD_VERB: its NAME=VALUE arguments, NULL-terminated */
};

/* The row for a command name, or NULL. Verbs that only pass through to the
 * agent (ping, loglevel, drain, ...) have rows too, for their help. */
const struct ectl_command *ectl_command_find(const char *name);

/* Every row, in help order, terminated by a row with a NULL name. */
extern const struct ectl_command ectl_commands[];

/* Parse argv[1..argc) into *ret (zeroed first). Returns 0, or -EINVAL with
 * *reterr a malloc'd one-line reason that names the flag or argument ("-n:
 * expected an integer from 1 to 100000, not 'x'"). No command and no
 * --help/--version is the "help" command. */
int ectl_args_parse(int argc, char *const *argv, struct ectl_args *ret, char **reterr);

/* Free what ectl_args_parse allocated (not the strings, which are argv's). */
void ectl_args_release(struct ectl_args *a);

/* Write elasticctl's usage (no command) or the help of command c to f. */
void ectl_args_usage(FILE *f, const struct ectl_command *c);
