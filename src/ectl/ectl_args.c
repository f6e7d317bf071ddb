#include "ectl_args.h"

#include <errno.h>
#include <stdint.h>
#include <string.h>

#include "ctl_params.h"
#include "util.h"

#define RANK_MAX 65535 /* elasticd's own bound for a local rank */
#define LINES_MAX 100000

const struct ectl_command ectl_commands[] = {
	{"status", ECTL_CMD_STATUS, 0, 0, 0, "", "the node, its round and its local ranks",
	 "One table for the node (job, round, node state, group rank and world,\n"
	 "restarts used and left, uptime), then one line per local rank (global\n"
	 "rank, pid, state, exit code or signal, CPUs and NUMA nodes, GPU, age of\n"
	 "its last output, log file). --json prints the agent's status object."},
	{"events", ECTL_CMD_EVENTS, ECTL_OPT_FOLLOW | ECTL_OPT_SINCE, 0, 0, "[-f] [--since N]",
	 "the events the agent recorded, one line each",
	 "-f, --follow   keep printing new events as they happen\n"
	 "--since N      only events after sequence number N\n"
	 "--json         the agent's JSON lines, as they are"},
	{"logs", ECTL_CMD_LOGS, ECTL_OPT_FOLLOW | ECTL_OPT_LINES | ECTL_OPT_STDERR, 1, 1,
	 "RANK [-f] [-n N] [--stderr]", "the end of a local rank's log",
	 "-n, --lines N  how many lines from the end (default 10, at most 100000)\n"
	 "--stderr       stderr.log instead of stdout.log\n"
	 "-f, --follow   keep printing new lines until the agent exits (asks it\n"
	 "               once a second; an old agent may miss lines: see BUGS in\n"
	 "               elasticctl(1))"},
	{"restart", ECTL_CMD_RESTART, 0, 0, 0, "",
	 "re-form the worker group now (spends no restart)", NULL},
	{"stop", ECTL_CMD_STOP, 0, 0, 0, "", "stop the workers and the agent, as SIGTERM does",
	 NULL},
	{"signal", ECTL_CMD_SIGNAL, 0, 1, 2, "SIG [RANK]",
	 "send SIG to one local rank's process group, or to all",
	 "SIG is a name (USR1, SIGUSR1) or a number; RANK a local rank."},
	{"dump", ECTL_CMD_DUMP, 0, 0, 0, "", "every local rank's Python tracebacks",
	 "Asks every worker's own server (torch's worker_main()) for its\n"
	 "dump_traceback, and prints one section per local rank."},
	{"metrics", ECTL_CMD_METRICS, 0, 0, 0, "", "the agent's Prometheus metrics", NULL},
	{"nodes", ECTL_CMD_NODES, 0, 0, 0, "", "the whole job's membership, from any node",
	 "The rendezvous as this node's agent last read it from the store:\n"
	 "participants with their group ranks, the wait list, spares (the\n"
	 "redundancy list), quarantined nodes, and each node's heartbeat age\n"
	 "(c10d) or lease (etcd). --json prints the agent's nodes object."},
	{"ping", ECTL_CMD_VERB, 0, 0, -1, "", "check that the agent answers", NULL},
	{"loglevel", ECTL_CMD_VERB, 0, 0, -1, "[level=debug|info|warning|error]",
	 "show or set the agent's log level", NULL},
	{"drain", ECTL_CMD_VERB, 0, 0, -1, "[signal=SIG] [timeout=SECONDS]",
	 "notify the workers, wait for them, leave the job for good",
	 "Sends the workers SIG (default: the agent's first --forward-signals),\n"
	 "waits up to SECONDS (default: its --term-timeout) for them to exit,\n"
	 "stops those still running, and leaves the rendezvous so that the\n"
	 "other nodes re-form without spending a restart. The agent exits 0\n"
	 "when every worker exited 0, else 1."},
	{"exclude", ECTL_CMD_VERB, 0, 0, -1, "[reason=TEXT]",
	 "this node is bad: stop its workers, leave the job, exit 6",
	 "Stops the workers at once (no notice: use drain for that), leaves\n"
	 "the rendezvous so that the other nodes re-form without spending a\n"
	 "restart, and the agent exits 6 (a bad node). TEXT goes to its log,\n"
	 "its elasticd.node.excluded event and its status."},
	{"readmit", ECTL_CMD_VERB, 0, 0, -1, "[node=NAME]",
	 "end a node's quarantine now; it rejoins",
	 "A node quarantined by --quarantine waits out its cooldown out of\n"
	 "the job; readmit ends the wait at once. Without node=, this node's;\n"
	 "with node=NAME (its --local-addr or host name), asked of any agent\n"
	 "of the job: the quarantine ends in the shared rendezvous state and\n"
	 "that node rejoins within seconds."},
	{"help", ECTL_CMD_HELP, 0, 0, 1, "[COMMAND]", "this help, or a command's", NULL},
	{NULL, ECTL_CMD_HELP, 0, 0, 0, NULL, NULL, NULL},
};

const struct ectl_command *
ectl_command_find(const char *name)
{
	for (const struct ectl_command *c = ectl_commands; c->name; c++) {
		if (strcmp(c->name, name) == 0) {
			return c;
		}
	}
	return NULL;
}

enum flag_key {
	FLAG_SOCKET,
	FLAG_JOB,
	FLAG_JSON,
	FLAG_HELP,
	FLAG_VERSION,
	FLAG_FOLLOW,
	FLAG_SINCE,
	FLAG_LINES,
	FLAG_STDERR,
};

/* The flags. opt 0: global; value: takes an argument. */
struct flag {
	enum flag_key key;
	char shrt;
	const char *lng;
	unsigned opt;
	bool value;
};

static const struct flag flags[] = {
	{FLAG_SOCKET, 's', "socket", 0, true},
	{FLAG_JOB, 'j', "job", 0, true},
	{FLAG_JSON, 0, "json", 0, false},
	{FLAG_HELP, 'h', "help", 0, false},
	{FLAG_VERSION, 'V', "version", 0, false},
	{FLAG_FOLLOW, 'f', "follow", ECTL_OPT_FOLLOW, false},
	{FLAG_SINCE, 0, "since", ECTL_OPT_SINCE, true},
	{FLAG_LINES, 'n', "lines", ECTL_OPT_LINES, true},
	{FLAG_STDERR, 0, "stderr", ECTL_OPT_STDERR, false},
};

/* Parse the integer value of flag (as written) into *ret. */
static int
flag_int(const char *flag, const char *v, long long min, long long max, long long *ret,
	 char **reterr)
{
	if (parse_int(v, min, max, ret) < 0) {
		*reterr = xasprintf("%s: expected an integer from %lld to %lld, not '%s'", flag,
				    min, max, v);
		return -EINVAL;
	}
	return 0;
}

/* Store the value v of flag f (written as `as`). */
static int
flag_set(struct ectl_args *a, const struct flag *f, const char *as, const char *v, char **reterr)
{
	switch (f->key) {
	case FLAG_SOCKET:
		a->socket = v;
		return 0;
	case FLAG_JOB:
		a->run_id = v;
		return 0;
	case FLAG_JSON:
		a->json = true;
		return 0;
	case FLAG_HELP:
		a->help = true;
		return 0;
	case FLAG_VERSION:
		a->version = true;
		return 0;
	case FLAG_FOLLOW:
		a->follow = true;
		return 0;
	case FLAG_SINCE:
		return flag_int(as, v, 0, INT64_MAX, &a->since, reterr);
	case FLAG_LINES:
		return flag_int(as, v, 1, LINES_MAX, &a->lines, reterr);
	case FLAG_STDERR:
		a->use_stderr = true;
		return 0;
	}
	return 0;
}

static const struct flag *
flag_find(const char *arg, size_t len, bool is_long)
{
	for (size_t i = 0; i < ARRAY_SIZE(flags); i++) {
		if (is_long ? strlen(flags[i].lng) == len && strncmp(flags[i].lng, arg, len) == 0
			    : flags[i].shrt == arg[0]) {
			return &flags[i];
		}
	}
	return NULL;
}

/* One option at argv[*i]; advances *i past a separate value. Records the
 * command options given in *given and the first one's spelling in *first. */
static int
parse_flag(int argc, char *const *argv, int *i, struct ectl_args *a, unsigned *given, char **first,
	   char **reterr)
{
	const char *arg = argv[*i];
	bool is_long = arg[1] == '-';
	const char *name = arg + (is_long ? 2 : 1);
	const char *eq = is_long ? strchr(name, '=') : NULL;
	size_t len = eq ? (size_t)(eq - name) : strlen(name);
	const struct flag *f = flag_find(name, len, is_long);
	_cleanup_free_ char *as =
		is_long ? xasprintf("--%.*s", (int)len, name) : xasprintf("-%c", name[0]);
	const char *v = NULL;

	if (!f) {
		*reterr = xasprintf("unknown option '%s'", as);
		return -EINVAL;
	}
	if (f->value) {
		v = eq                    ? eq + 1
		    : !is_long && name[1] ? name + 1
		    : *i + 1 < argc       ? argv[++*i]
					  : NULL;
		if (!v) {
			*reterr = xasprintf("%s needs a value", as);
			return -EINVAL;
		}
	} else if (eq || (!is_long && name[1])) {
		*reterr = xasprintf("%s takes no value, not '%s'", as, eq ? eq + 1 : name + 1);
		return -EINVAL;
	}
	if (f->opt && !(*given & f->opt)) {
		*given |= f->opt;
		if (!*first) {
			*first = xstrdup(as);
		}
	}
	return flag_set(a, f, as, v, reterr);
}

/* The positional arguments of the command, checked. */
static int
parse_positional(struct ectl_args *a, const char **pos, int n, char **reterr)
{
	const struct ectl_command *c = a->known;
	int max = c ? c->max_args : -1;

	if ((c && n < c->min_args) || (max >= 0 && n > max)) {
		*reterr = n < c->min_args
				  ? xasprintf("%s: missing %s", a->name, c->synopsis)
				  : xasprintf("%s: unexpected argument '%s'", a->name, pos[max]);
		return -EINVAL;
	}
	switch (a->cmd) {
	case ECTL_CMD_LOGS:
		return flag_int("RANK", pos[0], 0, RANK_MAX, &a->rank, reterr);
	case ECTL_CMD_SIGNAL:
		if (signal_from_name(pos[0]) < 0) {
			*reterr =
				xasprintf("SIG: expected a signal name (USR1, SIGUSR1) or number, "
					  "not '%s'",
					  pos[0]);
			return -EINVAL;
		}
		a->sig = pos[0];
		return n > 1 ? flag_int("RANK", pos[1], 0, RANK_MAX, &a->rank, reterr) : 0;
	case ECTL_CMD_VERB:
		for (int i = 0; i < n; i++) {
			if (!strchr(pos[i], '=') || pos[i][0] == '=') {
				*reterr = xasprintf("%s: expected NAME=VALUE, not '%s'", a->name,
						    pos[i]);
				return -EINVAL;
			}
		}
		return 0;
	case ECTL_CMD_HELP:
		a->help = true;
		a->known = n > 0 ? ectl_command_find(pos[0]) : NULL;
		if (n > 0 && !a->known) {
			*reterr = xasprintf("help: no command '%s'", pos[0]);
			return -EINVAL;
		}
		return 0;
	case ECTL_CMD_STATUS:
	case ECTL_CMD_EVENTS:
	case ECTL_CMD_RESTART:
	case ECTL_CMD_STOP:
	case ECTL_CMD_DUMP:
	case ECTL_CMD_METRICS:
	case ECTL_CMD_NODES:
		return 0;
	}
	return 0;
}

/* Split argv into options (handled) and positional words (*pos, *npos). */
static int
scan(int argc, char *const *argv, struct ectl_args *a, const char **pos, int *npos, unsigned *given,
     char **first, char **reterr)
{
	bool options = true;

	for (int i = 1; i < argc; i++) {
		const char *arg = argv[i];
		int r;

		if (options && strcmp(arg, "--") == 0) {
			options = false;
		} else if (options && arg[0] == '-' && arg[1] != '\0') {
			r = parse_flag(argc, argv, &i, a, given, first, reterr);
			if (r < 0) {
				return r;
			}
		} else {
			pos[(*npos)++] = arg;
		}
	}
	return 0;
}

int
ectl_args_parse(int argc, char *const *argv, struct ectl_args *ret, char **reterr)
{
	const char **pos = xcalloc((size_t)argc + 1, sizeof(*pos));
	_cleanup_free_ char *first = NULL;
	unsigned given = 0;
	int npos = 0;
	int r;

	memset(ret, 0, sizeof(*ret));
	ret->lines = 10;
	ret->rank = -1;
	ret->params = pos;
	r = scan(argc, argv, ret, pos, &npos, &given, &first, reterr);
	if (r < 0) {
		return r;
	}
	ret->name = npos > 0 ? pos[0] : NULL;
	ret->known = ret->name ? ectl_command_find(ret->name) : NULL;
	ret->cmd = !ret->name ? ECTL_CMD_HELP : ret->known ? ret->known->cmd : ECTL_CMD_VERB;
	if (ret->cmd == ECTL_CMD_VERB && !ctl_param_name_valid(ret->name)) {
		/* It goes into the request path as it is: the agent's own rule. */
		*reterr = xasprintf("'%s' is not a command or handler name (handler names are "
				    "1 to %u of a-z, 0-9 and _)",
				    ret->name, CTL_PARAM_NAME_MAX);
		return -EINVAL;
	}
	if (given & ~(ret->known ? ret->known->opts : 0u)) {
		*reterr = ret->name ? xasprintf("%s is not an option of '%s'", first, ret->name)
				    : xasprintf("%s needs a command", first);
		return -EINVAL;
	}
	if (ret->name) {
		memmove(pos, pos + 1, (size_t)npos * sizeof(*pos)); /* the NULL too */
		npos--;
	}
	if (ret->help && ret->cmd != ECTL_CMD_HELP) {
		return 0; /* `CMD --help` ignores the arguments */
	}
	return parse_positional(ret, pos, npos, reterr);
}

void
ectl_args_release(struct ectl_args *a)
{
	free(a->params);
	a->params = NULL;
}

void
ectl_args_usage(FILE *f, const struct ectl_command *c)
{
	if (c) {
		fprintf(f, "usage: elasticctl [-s SOCKET | -j RUN_ID] [--json] %s%s%s\n\n%s.\n",
			c->name, c->synopsis[0] ? " " : "", c->synopsis, c->summary);
		if (c->help) {
			fprintf(f, "\n%s\n", c->help);
		}
		return;
	}
	fputs("usage: elasticctl [-s SOCKET | -j RUN_ID] [--json] COMMAND [ARGS]\n\n"
	      "Talk to the elasticd agent on this machine (elasticctl(1)).\n\n"
	      "  -s, --socket SOCKET  the agent's control socket\n"
	      "  -j, --job RUN_ID     the agent of this run id (--rdzv-id)\n"
	      "      --json           machine-readable output\n"
	      "  -h, --help           help (of a command, after it)\n"
	      "  -V, --version        elasticctl's version\n\nCommands:\n",
	      f);
	for (const struct ectl_command *k = ectl_commands; k->name; k++) {
		fprintf(f, "  %-9s %s\n", k->name, k->summary);
	}
	fputs("\nAny other handler the agent lists (GET /handler/) runs as\n"
	      "  elasticctl NAME [PARAM=VALUE...]\n"
	      "Exit status: 0 done, 1 the agent answered an error, 2 usage,\n"
	      "3 no agent reachable.\n",
	      f);
}
