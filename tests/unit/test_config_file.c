/* test_config_file.c — the --config file: its syntax (config_file_split,
 * config_file_parse: table-driven text -> words/entries or error), and its
 * meaning through config_parse_text / config_parse (precedence command line >
 * PET_* > file > default, the entrypoint rule, the service default of
 * --signals-to-handle, FILE:LINE errors). */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "config.h"
#include "config_file.h"
#include "util.h"

#define ARGV(...) ((const char *const[]){__VA_ARGS__, NULL})
#define NOARGS ((const char *const[]){NULL})
#define ENV(...) ((const char *const[]){__VA_ARGS__, NULL})
#define NOENV ((const char *const[]){NULL})

/* Words joined as [a][b][], for comparisons. */
static char *
join_words(char *const *w)
{
	char *s = xstrdup("");

	for (size_t i = 0; w && w[i]; i++) {
		char *t = xasprintf("%s[%s]", s, w[i]);

		free(s);
		s = t;
	}
	return s;
}

/* ---- config_file_split --------------------------------------------------- */

struct split_case {
	const char *value;
	const char *words; /* joined as [a][b]; NULL: an error containing err */
	const char *err;
};

static const struct split_case split_cases[] = {
	{"", "", NULL},
	{"   \t ", "", NULL},
	{"8", "[8]", NULL},
	{"  8  ", "[8]", NULL},
	{"a b\tc", "[a][b][c]", NULL},
	{"a\r", "[a]", NULL},
	/* Single quotes: everything literal. */
	{"'a b'", "[a b]", NULL},
	{"'a \"b\" \\c $HOME #x'", "[a \"b\" \\c $HOME #x]", NULL},
	{"''", "[]", NULL},
	{"'' ''", "[][]", NULL},
	{"a''", "[a]", NULL},
	{"''a", "[a]", NULL},
	/* Double quotes: \" and \\ only. */
	{"\"a b\"", "[a b]", NULL},
	{"\"\"", "[]", NULL},
	{"\"say \\\"hi\\\"\"", "[say \"hi\"]", NULL},
	{"\"back\\\\slash\"", "[back\\slash]", NULL},
	{"\"keep \\n and \\$x\"", "[keep \\n and \\$x]", NULL},
	{"\"it's\"", "[it's]", NULL},
	/* Unquoted backslash: the next character is literal. */
	{"a\\ b", "[a b]", NULL},
	{"\\'x", "['x]", NULL},
	{"\\#x", "[#x]", NULL},
	{"\\\\", "[\\]", NULL},
	/* Parts next to each other make one word. */
	{"--name='a b'", "[--name=a b]", NULL},
	{"a\"b c\"'d e'f", "[ab cd ef]", NULL},
	/* Comments start at an unquoted '#' that starts a word. */
	{"8 # one per GPU", "[8]", NULL},
	{"#all comment", "", NULL},
	{"a#b", "[a#b]", NULL},
	{"a '#b' \"#c\" #d e", "[a][#b][#c]", NULL},
	/* No expansion of any kind. */
	{"$HOME ~ * ${local_rank} `x` $(y)", "[$HOME][~][*][${local_rank}][`x`][$(y)]", NULL},
	{"--lr 0.1 --out /tmp/out.${local_rank}", "[--lr][0.1][--out][/tmp/out.${local_rank}]",
	 NULL},
	/* Errors. */
	{"'open", NULL, "unterminated ' quote"},
	{"a \"open", NULL, "unterminated \" quote"},
	{"\"a\\\"", NULL, "unterminated \" quote"},
	{"a\\", NULL, "backslash at the end of the line"},
};

static void
test_split(void **state)
{
	for (size_t i = 0; i < ARRAY_SIZE(split_cases); i++) {
		const struct split_case *c = &split_cases[i];
		char **words = NULL, *err = NULL;
		int r = config_file_split(c->value, &words, &err);

		if (c->words) {
			_cleanup_free_ char *got = NULL;

			if (r != 0) {
				fail_msg("split(%s): error %s", c->value, err);
			}
			got = join_words(words);
			if (strcmp(got, c->words) != 0) {
				fail_msg("split(%s): got %s, want %s", c->value, got, c->words);
			}
			assert_null(err);
		} else {
			if (r != -EINVAL || !err || !strstr(err, c->err)) {
				fail_msg("split(%s): r=%d err=%s, want '%s'", c->value, r,
					 err ? err : "(null)", c->err);
			}
		}
		strv_free(words);
		free(err);
	}
}

/* ---- config_file_parse --------------------------------------------------- */

struct parse_case {
	const char *text;
	/* entries as "LINE:KEY=[w][w];..."; NULL: an error equal to err */
	const char *entries;
	const char *err;
};

static const struct parse_case parse_cases[] = {
	{"", "", NULL},
	{"\n\n   \n", "", NULL},
	{"# a comment\n   # another\n", "", NULL},
	{"nproc-per-node = 8\n", "1:nproc-per-node=[8];", NULL},
	{"nproc-per-node=8", "1:nproc-per-node=[8];", NULL},
	{"  nproc_per_node\t=\t8  \r\n", "1:nproc_per_node=[8];", NULL},
	{"\xef\xbb\xbfrole = a\n", "1:role=[a];", NULL},
	{"a = 1\n\n# c\nb = x y\nc =\n", "1:a=[1];4:b=[x][y];5:c=;", NULL},
	{"rdzv-conf = timeout=900,join_timeout=600\n",
	 "1:rdzv-conf=[timeout=900,join_timeout=600];", NULL},
	{"k = v\nk = w\n", "1:k=[v];2:k=[w];", NULL},
	{"args = --x = y\n", "1:args=[--x][=][y];", NULL},
	{"no-newline = at end", "1:no-newline=[at][end];", NULL},
	/* Errors name the file and the line. */
	{"a = 1\njust words\n", NULL, "f.conf:2: expected 'key = value', got 'just words'"},
	{"= 8\n", NULL, "f.conf:1: expected a key before '='"},
	{"--nproc-per-node = 8\n", NULL,
	 "f.conf:1: keys are option names without '--': write 'nproc-per-node = ...'"},
	{"nproc per node = 8\n", NULL,
	 "f.conf:1: invalid key 'nproc per node': keys are option names such as nproc-per-node"},
	{"[section]\n", NULL, "f.conf:1: expected 'key = value', got '[section]'"},
	{"\n\nargs = 'open\n", NULL, "f.conf:3: args: unterminated ' quote"},
	{"a = b\\\nc = d\n", NULL,
	 "f.conf:1: a: a backslash at the end of the line (a setting cannot continue on the next "
	 "line)"},
};

static void
test_parse(void **state)
{
	for (size_t i = 0; i < ARRAY_SIZE(parse_cases); i++) {
		const struct parse_case *c = &parse_cases[i];
		struct config_file f = {0};
		char *err = NULL;
		int r = config_file_parse("f.conf", c->text, strlen(c->text), &f, &err);

		if (c->entries) {
			char *got = xstrdup("");

			if (r != 0) {
				fail_msg("parse(%s): error %s", c->text, err);
			}
			for (size_t k = 0; k < f.n; k++) {
				_cleanup_free_ char *w = join_words(f.entries[k].words);
				char *t = xasprintf("%s%d:%s=%s;", got, f.entries[k].line,
						    f.entries[k].key, w);

				free(got);
				got = t;
			}
			if (strcmp(got, c->entries) != 0) {
				fail_msg("parse(%s): got %s, want %s", c->text, got, c->entries);
			}
			free(got);
		} else {
			if (r != -EINVAL || !err || strcmp(err, c->err) != 0) {
				fail_msg("parse(%s): r=%d err=%s, want '%s'", c->text, r,
					 err ? err : "(null)", c->err);
			}
			assert_int_equal(f.n, 0);
			assert_null(f.entries);
		}
		config_file_release(&f);
		free(err);
	}
}

static void
test_parse_nul_and_len(void **state)
{
	static const char text[] = "a = 1\nb = \0x\n";
	struct config_file f = {0};
	char *err = NULL;

	assert_int_equal(config_file_parse("f", text, sizeof(text) - 1, &f, &err), -EINVAL);
	assert_string_equal(err, "f:2: a NUL byte (this is not a text file)");
	free(err);
	err = NULL;
	/* len, not the NUL, ends the text: only "a = 1\n" is read. */
	assert_int_equal(config_file_parse("f", text, 6, &f, &err), 0);
	assert_int_equal(f.n, 1);
	assert_string_equal(f.entries[0].key, "a");
	config_file_release(&f);
	config_file_release(&f); /* twice is fine */
}

/* ---- the file's meaning -------------------------------------------------- */

static int
parse_text(const char *const *args, const char *const *envp, const char *text, struct config *cfg,
	   char **err)
{
	char *argv[32];
	int argc = 0;

	argv[argc++] = "elasticd";
	for (size_t i = 0; args[i]; i++) {
		assert_true(argc < 31);
		argv[argc++] = (char *)args[i];
	}
	argv[argc] = NULL;
	return config_parse_text(cfg, argc, argv, (char *const *)envp, "/etc/elasticd/job.conf",
				 text, strlen(text), err);
}

static char *
join_ints(const int *v, size_t n)
{
	char *s = xstrdup("");

	for (size_t i = 0; i < n; i++) {
		char *t = xasprintf("%s%s%d", s, i ? "," : "", v[i]);

		free(s);
		s = t;
	}
	return s;
}

/* One field rendered as a string, by a short key. */
static char *
field(const struct config *cfg, const char *key)
{
	if (strcmp(key, "nproc") == 0) {
		return xasprintf("%d", cfg->nproc_per_node);
	}
	if (strcmp(key, "nnodes") == 0) {
		return xasprintf("%d:%d", cfg->min_nodes, cfg->max_nodes);
	}
	if (strcmp(key, "max_restarts") == 0) {
		return xasprintf("%d", cfg->max_restarts);
	}
	if (strcmp(key, "shutdown_timeout") == 0) {
		return xasprintf("%d", cfg->shutdown_timeout);
	}
	if (strcmp(key, "role") == 0) {
		return xstrdup(cfg->role);
	}
	if (strcmp(key, "term_timeout") == 0) {
		return xasprintf("%d", cfg->term_timeout);
	}
	if (strcmp(key, "forward") == 0) {
		return join_ints(cfg->forward_signals, cfg->n_forward_signals);
	}
	if (strcmp(key, "policy") == 0) {
		return xasprintf(
			"%g:%g %d/%g %s %s %d %s", cfg->restart_backoff_min,
			cfg->restart_backoff_max, cfg->restart_window_n, cfg->restart_window_s,
			cfg->n_no_restart_exit_codes ? "codes" : "-",
			cfg->progress_file ? cfg->progress_file : "-", cfg->progress_attempts,
			cfg->exit_codes_detailed ? "detailed" : "torchrun");
	}
	if (strcmp(key, "no_restart_codes") == 0) {
		return join_ints(cfg->no_restart_exit_codes, cfg->n_no_restart_exit_codes);
	}
	if (strcmp(key, "backend") == 0) {
		return xstrdup(cfg->rdzv_backend);
	}
	if (strcmp(key, "endpoint") == 0) {
		return xstrdup(cfg->rdzv_endpoint);
	}
	if (strcmp(key, "rdzv_id") == 0) {
		return xstrdup(cfg->rdzv_id);
	}
	if (strcmp(key, "log_dir") == 0) {
		return xstrdup(cfg->log_dir ? cfg->log_dir : "(null)");
	}
	if (strcmp(key, "standalone") == 0) {
		return xstrdup(cfg->standalone ? "true" : "false");
	}
	if (strcmp(key, "no_python") == 0) {
		return xstrdup(cfg->no_python ? "true" : "false");
	}
	if (strcmp(key, "master_port") == 0) {
		return xasprintf("%d%s", cfg->master_port, cfg->master_port_set ? " set" : "");
	}
	if (strcmp(key, "signals") == 0) {
		return join_ints(cfg->signals, cfg->n_signals);
	}
	if (strcmp(key, "rdzv_conf") == 0) {
		const char *t = config_rdzv_conf_get(cfg, "timeout");

		return xstrdup(t ? t : "(null)");
	}
	if (strcmp(key, "entrypoint") == 0) {
		return xstrdup(cfg->entrypoint);
	}
	if (strcmp(key, "args") == 0) {
		return join_words(cfg->args);
	}
	if (strcmp(key, "config_file") == 0) {
		return xstrdup(cfg->config_file ? cfg->config_file : "(null)");
	}
	fail_msg("unknown field %s", key);
	return NULL;
}

struct expect {
	const char *key;
	const char *value;
};

struct meaning_case {
	const char *text;
	const char *const *argv;
	const char *const *envp;
	struct expect expect[6]; /* when err is NULL */
	const char *err;         /* the whole message */
};

#define F "/etc/elasticd/job.conf"

#define GOOD(text, argv, envp, ...)                                                                \
	{                                                                                          \
		text, argv, envp, {__VA_ARGS__}, NULL                                              \
	}
#define BAD(text, argv, envp, err)                                                                 \
	{                                                                                          \
		text, argv, envp, {{0}}, err                                                       \
	}

static const struct meaning_case meaning_cases[] = {
	/* Values, both spellings, the alias. */
	GOOD("nproc-per-node = 8\nnnodes = 2:4\nrdzv_backend = c10d\nrun-id = job1\n"
	     "entrypoint = train.py\n",
	     NOARGS, NOENV, {"nproc", "8"}, {"nnodes", "2:4"}, {"backend", "c10d"},
	     {"rdzv_id", "job1"}, {"entrypoint", "train.py"}, {"args", ""}),
	GOOD("rdzv-conf = timeout=900,join_timeout=60\n"
	     "rdzv-endpoint = \"node0:29400\"\n"
	     "entrypoint = t\n",
	     NOARGS, NOENV, {"rdzv_conf", "900"}, {"endpoint", "node0:29400"}, {"config_file", F}),
	/* An empty value is the empty string. */
	GOOD("rdzv-endpoint =\nnnodes = 2\nentrypoint = t\n", NOARGS, NOENV, {"endpoint", ""}),
	/* The file's master-port is given, so no switch to c10d (PR 175699). */
	GOOD("entrypoint = t\n", NOARGS, NOENV, {"backend", "c10d"}, {"endpoint", "localhost:0"}),
	GOOD("master-port = 29500\nentrypoint = t\n", NOARGS, NOENV, {"backend", "static"},
	     {"endpoint", ""}),
	/* The restart policy and the signal options (elasticd.conf(5)). */
	GOOD("restart-backoff = 1:60\nrestart-window = 3/3600\nno-restart-exit-codes = 3,42\n"
	     "progress-file = /srv/job/step\nprogress-attempts = 4\nexit-codes = detailed\n"
	     "entrypoint = t\n",
	     NOARGS, NOENV, {"policy", "1:60 3/3600 codes /srv/job/step 4 detailed"},
	     {"no_restart_codes", "3,42"}),
	GOOD("term-timeout = 1800\nforward-signals = SIGUSR2\nentrypoint = t\n", NOARGS, NOENV,
	     {"term_timeout", "1800"}, {"forward", "12"}, {"shutdown_timeout", "30"}),
	/* The environment beats the file, the command line beats both. */
	GOOD("term-timeout = 1800\nrestart-backoff = 1:60\nentrypoint = t\n",
	     ARGV("--restart-backoff", "2:4"), ENV("PET_TERM_TIMEOUT=7"), {"term_timeout", "7"},
	     {"policy", "2:4 0/0 - - 3 torchrun"}),
	BAD("restart-window = 3\nentrypoint = t\n", NOARGS, NOENV,
	    F ":1: restart-window: invalid value '3': expected N/W: at most N failure restarts in "
	      "W seconds (e.g. 3/3600)"),
	/* Flags. */
	GOOD("no-python = true\nentrypoint = ./a.out\n", NOARGS, NOENV, {"no_python", "true"}),
	GOOD("no-python = false\nentrypoint = t\n", NOARGS, NOENV, {"no_python", "false"}),
	GOOD("no-python = yes\nentrypoint = t\n", NOARGS, NOENV, {"no_python", "true"}),
	GOOD("no-python = off\nentrypoint = t\n", NOARGS, NOENV, {"no_python", "false"}),
	GOOD("no-python = 1\nentrypoint = t\n", NOARGS, NOENV, {"no_python", "true"}),
	/* Entrypoint and args. */
	GOOD("entrypoint = train.py\nargs = --lr 0.1 --name \"my run\" 'it''s' --out "
	     "/o.${local_rank}\n",
	     NOARGS, NOENV, {"entrypoint", "train.py"},
	     {"args", "[--lr][0.1][--name][my run][its][--out][/o.${local_rank}]"}),
	BAD("args = --x ''\nentrypoint = a b.py\n", NOARGS, NOENV,
	    F
	    ":2: entrypoint: expected one value, the training script (its arguments go in 'args = "
	    "...')"),
	GOOD("args = --x ''\nentrypoint = 'a b.py'\n", NOARGS, NOENV, {"entrypoint", "a b.py"},
	     {"args", "[--x][]"}),
	/* A command-line entrypoint replaces the file's, args and all. */
	GOOD("entrypoint = file.py\nargs = --from-file\n", ARGV("cli.py", "--from-cli"), NOENV,
	     {"entrypoint", "cli.py"}, {"args", "[--from-cli]"}),
	GOOD("entrypoint = file.py\nargs = --from-file\n", ARGV("cli.py"), NOENV,
	     {"entrypoint", "cli.py"}, {"args", ""}),
	GOOD("entrypoint = file.py\n", ARGV("--", "--odd"), NOENV, {"entrypoint", "--odd"}),
	/* Precedence: command line > environment > file > default. */
	GOOD("max-restarts = 3\nrole = file\nshutdown-timeout = 7\nentrypoint = t\n", NOARGS, NOENV,
	     {"max_restarts", "3"}, {"role", "file"}, {"shutdown_timeout", "7"}),
	GOOD("max-restarts = 3\nrole = file\nentrypoint = t\n", ARGV("--max-restarts", "5"),
	     ENV("PET_MAX_RESTARTS=4", "PET_ROLE=env"), {"max_restarts", "5"}, {"role", "env"}),
	GOOD("max-restarts = 3\nentrypoint = t\n", NOARGS, ENV("PET_MAX_RESTARTS=4"),
	     {"max_restarts", "4"}),
	GOOD("shutdown-timeout = 7\nentrypoint = t\n", NOARGS,
	     ENV("TORCH_ELASTIC_SHUTDOWN_TIMEOUT=9"), {"shutdown_timeout", "9"}),
	GOOD("entrypoint = t\n", NOARGS, NOENV, {"max_restarts", "0"}, {"role", "default"}),
	/* A flag off in the file does not beat PET_*. */
	GOOD("no-python = false\nentrypoint = t\n", NOARGS, ENV("PET_NO_PYTHON=1"),
	     {"no_python", "true"}),
	/* The file's run id and master port count as given (--standalone keeps it). */
	GOOD("standalone = true\nrdzv-id = keep\nmaster-port = 1234\nentrypoint = t\n", NOARGS,
	     NOENV, {"standalone", "true"}, {"rdzv_id", "keep"}, {"backend", "c10d"},
	     {"master_port", "1234 set"}),
	/* As a service SIGHUP is not handled by default... */
	GOOD("entrypoint = t\n", NOARGS, NOENV, {"signals", "15,2,3"}),
	/* ...unless the file, the environment or the command line says so. */
	GOOD("signals-to-handle = SIGTERM,SIGHUP\nentrypoint = t\n", NOARGS, NOENV,
	     {"signals", "15,1"}),
	GOOD("entrypoint = t\n", NOARGS, ENV("PET_SIGNALS_TO_HANDLE=SIGHUP"), {"signals", "1"}),
	GOOD("entrypoint = t\n", ARGV("--signals-to-handle", "SIGTERM,SIGINT,SIGHUP,SIGQUIT"),
	     NOENV, {"signals", "15,2,1,3"}),
	/* Errors: FILE:LINE: reason. */
	BAD("nproc = 8\n", NOARGS, NOENV,
	    F ":1: unknown key 'nproc' (did you mean 'nproc-per-node'?)"),
	BAD("\nbogus-key = 1\n", NOARGS, NOENV, F ":2: unknown key 'bogus-key'"),
	BAD("nproc-per-node = many\n", NOARGS, NOENV,
	    F ":1: nproc-per-node: invalid value 'many': "
	      "expected an integer, cpu, gpu, xpu or auto"),
	BAD("max_restarts = -1\n", NOARGS, NOENV,
	    F ":1: max_restarts: invalid value '-1': must be >= 0"),
	BAD("nproc-per-node = 8 16\n", NOARGS, NOENV,
	    F ":1: nproc-per-node: expected one value, got 2 words; quote a value that contains "
	      "blanks"),
	BAD("standalone = maybe\n", NOARGS, NOENV,
	    F ":1: standalone: expected true or false, got 'maybe'"),
	BAD("standalone =\n", NOARGS, NOENV, F ":1: standalone: expected true or false, got ''"),
	BAD("standalone = yes please\n", NOARGS, NOENV,
	    F ":1: standalone: expected true or false, got 2 words"),
	BAD("role = a\nrole = b\n", NOARGS, NOENV, F ":2: 'role' is already set on line 1"),
	BAD("rdzv-id = a\nrun_id = b\n", NOARGS, NOENV, F ":2: 'rdzv-id' is already set on line 1"),
	BAD("entrypoint = a\nentrypoint = b\n", NOARGS, NOENV,
	    F ":2: 'entrypoint' is already set on line 1"),
	BAD("entrypoint = a\nargs = 1\nargs = 2\n", NOARGS, NOENV,
	    F ":3: 'args' is already set on line 2"),
	BAD("args = --lr 1\n", NOARGS, NOENV, F ":1: 'args' without 'entrypoint'"),
	BAD("args = --lr 1\n", ARGV("t.py"), NOENV, F ":1: 'args' without 'entrypoint'"),
	BAD("entrypoint =\n", NOARGS, NOENV,
	    F
	    ":1: entrypoint: expected one value, the training script (its arguments go in 'args = "
	    "...')"),
	BAD("help = true\n", NOARGS, NOENV, F ":1: 'help' is not a setting"),
	BAD("config = other.conf\n", NOARGS, NOENV,
	    F ":1: 'config' cannot be set in a configuration file (no includes)"),
	BAD("run-path = true\n", NOARGS, NOENV,
	    F ":1: run-path=true: --run-path is not supported by elasticd: it runs the script "
	      "inside a "
	      "Python multiprocessing child; drop --run-path to run it as a process"),
	BAD("role = x\n", NOARGS, NOENV,
	    "the following arguments are required: training_script (or 'entrypoint = ...' in " F
	    ")"),
	/* A bad value is an error even where the command line or PET_* wins. */
	BAD("max-restarts = x\nentrypoint = t\n", ARGV("--max-restarts", "1"), NOENV,
	    F ":1: max-restarts: invalid value 'x': expected an integer"),
	BAD("max-restarts = x\nentrypoint = t\n", NOARGS, ENV("PET_MAX_RESTARTS=1"),
	    F ":1: max-restarts: invalid value 'x': expected an integer"),
	/* The file's syntax errors too. */
	BAD("role = 'x\n", NOARGS, NOENV, F ":1: role: unterminated ' quote"),
};

static void
test_meaning(void **state)
{
	for (size_t i = 0; i < ARRAY_SIZE(meaning_cases); i++) {
		const struct meaning_case *c = &meaning_cases[i];
		struct config cfg;
		char *err = NULL;
		int r = parse_text(c->argv, c->envp, c->text, &cfg, &err);

		if (c->err) {
			if (r != -EINVAL || !err || strcmp(err, c->err) != 0) {
				fail_msg("case %zu (%s): r=%d err=%s\nwant %s", i, c->text, r,
					 err ? err : "(null)", c->err);
			}
		} else {
			if (r != CONFIG_RUN) {
				fail_msg("case %zu (%s): r=%d err=%s", i, c->text, r,
					 err ? err : "(null)");
			}
			for (size_t k = 0; k < ARRAY_SIZE(c->expect) && c->expect[k].key; k++) {
				_cleanup_free_ char *got = field(&cfg, c->expect[k].key);

				if (strcmp(got, c->expect[k].value) != 0) {
					fail_msg("case %zu (%s): %s is '%s', want '%s'", i, c->text,
						 c->expect[k].key, got, c->expect[k].value);
				}
			}
		}
		free(err);
		config_release(&cfg);
	}
}

/* The default of --signals-to-handle: torchrun's on the command line, without
 * SIGHUP as a service (a non-empty NOTIFY_SOCKET, or --config). */
static void
test_service_signals(void **state)
{
	const struct {
		const char *const *argv;
		const char *const *envp;
		const char *signals;
	} cases[] = {
		{ARGV("t"), NOENV, "15,2,1,3"},
		{ARGV("t"), ENV("NOTIFY_SOCKET="), "15,2,1,3"},
		{ARGV("t"), ENV("NOTIFY_SOCKET=/run/systemd/notify"), "15,2,3"},
		{ARGV("t"), ENV("NOTIFY_SOCKET=@x", "PET_SIGNALS_TO_HANDLE=SIGTERM,SIGHUP"),
		 "15,1"},
		{ARGV("--signals-to-handle", "SIGHUP", "t"), ENV("NOTIFY_SOCKET=@x"), "1"},
	};

	for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
		char *argv[8];
		int argc = 0;
		struct config cfg;
		char *err = NULL;
		_cleanup_free_ char *got = NULL;

		argv[argc++] = "elasticd";
		for (size_t k = 0; cases[i].argv[k]; k++) {
			argv[argc++] = (char *)cases[i].argv[k];
		}
		argv[argc] = NULL;
		assert_int_equal(config_parse(&cfg, argc, argv, (char *const *)cases[i].envp, &err),
				 CONFIG_RUN);
		got = join_ints(cfg.signals, cfg.n_signals);
		if (strcmp(got, cases[i].signals) != 0) {
			fail_msg("case %zu: signals %s, want %s", i, got, cases[i].signals);
		}
		config_release(&cfg);
	}
}

/* config_parse reads the file --config names. */
static void
test_read_file(void **state)
{
	char path[] = "/tmp/elasticd-test-config-XXXXXX";
	static const char text[] = "# job\nnproc-per-node = 3\nentrypoint = train.py\n"
				   "args = --epochs 2\n";
	int fd = mkstemp(path);
	char *argv[] = {"elasticd", "--config", path, NULL};
	char *dir_argv[] = {"elasticd", "--config", "/tmp", "t", NULL};
	char *missing_argv[] = {"elasticd", "--config=/nonexistent/elasticd.conf", "t", NULL};
	char *help_argv[] = {"elasticd", "--config", "/nonexistent/x.conf", "--help", NULL};
	struct config cfg;
	char *err = NULL;

	assert_true(fd >= 0);
	assert_int_equal(write_all(fd, text, sizeof(text) - 1), 0);
	close(fd);
	assert_int_equal(config_parse(&cfg, 3, argv, NULL, &err), CONFIG_RUN);
	assert_int_equal(cfg.nproc_per_node, 3);
	assert_string_equal(cfg.entrypoint, "train.py");
	assert_string_equal(cfg.args[0], "--epochs");
	assert_string_equal(cfg.args[1], "2");
	assert_null(cfg.args[2]);
	assert_string_equal(cfg.config_file, path);
	config_release(&cfg);
	unlink(path);

	assert_int_equal(config_parse(&cfg, 4, dir_argv, NULL, &err), -EINVAL);
	assert_string_equal(err, "--config: cannot read '/tmp': not a regular file");
	free(err);
	err = NULL;
	assert_int_equal(config_parse(&cfg, 3, missing_argv, NULL, &err), -EINVAL);
	assert_string_equal(err, "--config: cannot read '/nonexistent/elasticd.conf': No such file "
				 "or directory");
	free(err);
	err = NULL;
	/* --help wins before the file is read. */
	assert_int_equal(config_parse(&cfg, 4, help_argv, NULL, &err), CONFIG_HELP);
	assert_null(err);
}

/* --help names --config and the file layer. */
static void
test_usage(void **state)
{
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);

	assert_non_null(f);
	config_usage(f);
	assert_int_equal(fclose(f), 0);
	/* Unwrap: one space for every run of blanks and newlines. */
	for (char *r = buf, *w = buf;; r++) {
		if (*r == '\n' || *r == ' ') {
			if (w == buf || w[-1] != ' ') {
				*w++ = ' ';
			}
			continue;
		}
		*w++ = *r;
		if (!*r) {
			break;
		}
	}
	assert_non_null(strstr(buf, "--config FILE"));
	assert_non_null(strstr(buf, "elasticd.conf(5)"));
	assert_non_null(strstr(buf, "which beats the --config file"));
	assert_non_null(strstr(buf, "SIGTERM,SIGINT,SIGQUIT"));
	free(buf);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_split),
		cmocka_unit_test(test_parse),
		cmocka_unit_test(test_parse_nul_and_len),
		cmocka_unit_test(test_meaning),
		cmocka_unit_test(test_service_signals),
		cmocka_unit_test(test_read_file),
		cmocka_unit_test(test_usage),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
