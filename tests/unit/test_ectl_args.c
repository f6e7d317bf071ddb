/* elasticctl's command line: global options anywhere, each command's own
 * options and arguments, and every malformed flag refused with a reason that
 * names it (elasticctl then exits 2). */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ectl_args.h"
#include "util.h"

struct args_case {
	const char *argv[8];
	const char *error; /* a substring of the reason, NULL: parses */
	enum ectl_cmd cmd;
	const char *socket;
	const char *run_id;
	bool json, help, follow, use_stderr;
	long long since, lines, rank;
	const char *sig;
	int nparams;
};

#define DEF .lines = 10, .rank = -1

static const struct args_case cases[] = {
	{{NULL}, NULL, ECTL_CMD_HELP, .help = true, DEF},
	{{"--help"}, NULL, ECTL_CMD_HELP, .help = true, DEF},
	{{"status"}, NULL, ECTL_CMD_STATUS, DEF},
	{{"-s", "/x.sock", "status", "--json"},
	 NULL,
	 ECTL_CMD_STATUS,
	 "/x.sock",
	 .json = true,
	 DEF},
	{{"--socket=/y", "status"}, NULL, ECTL_CMD_STATUS, "/y", DEF},
	{{"-s/z", "status"}, NULL, ECTL_CMD_STATUS, "/z", DEF},
	{{"status", "-j", "job1"}, NULL, ECTL_CMD_STATUS, NULL, "job1", DEF},
	{{"--job", "job1", "status", "--help"},
	 NULL,
	 ECTL_CMD_STATUS,
	 NULL,
	 "job1",
	 .help = true,
	 DEF},
	{{"events", "-f", "--since", "12"},
	 NULL,
	 ECTL_CMD_EVENTS,
	 .follow = true,
	 .since = 12,
	 DEF},
	{{"events", "--since=0"}, NULL, ECTL_CMD_EVENTS, DEF},
	{{"logs", "3", "-n", "50", "--stderr"},
	 NULL,
	 ECTL_CMD_LOGS,
	 .use_stderr = true,
	 .lines = 50,
	 .rank = 3},
	{{"logs", "-n5", "0", "-f"}, NULL, ECTL_CMD_LOGS, .follow = true, .lines = 5, .rank = 0},
	{{"signal", "USR1"}, NULL, ECTL_CMD_SIGNAL, .sig = "USR1", DEF},
	{{"signal", "SIGTERM", "1"},
	 NULL,
	 ECTL_CMD_SIGNAL,
	 .sig = "SIGTERM",
	 .lines = 10,
	 .rank = 1},
	{{"signal", "9"}, NULL, ECTL_CMD_SIGNAL, .sig = "9", DEF},
	{{"restart"}, NULL, ECTL_CMD_RESTART, DEF},
	{{"stop"}, NULL, ECTL_CMD_STOP, DEF},
	{{"dump", "--json"}, NULL, ECTL_CMD_DUMP, .json = true, DEF},
	{{"metrics"}, NULL, ECTL_CMD_METRICS, DEF},
	{{"loglevel", "level=debug"}, NULL, ECTL_CMD_VERB, DEF, .nparams = 1},
	{{"frobnicate", "a=1", "b=2"}, NULL, ECTL_CMD_VERB, DEF, .nparams = 2},
	{{"help", "logs"}, NULL, ECTL_CMD_HELP, .help = true, DEF},
	{{"dump_traceback"}, NULL, ECTL_CMD_VERB, DEF},
	{{"x9_"}, NULL, ECTL_CMD_VERB, DEF},
	{{"--", "status"}, NULL, ECTL_CMD_STATUS, DEF},
	/* malformed */
	{{"-x", "status"}, "unknown option '-x'"},
	{{"status", "--colour"}, "unknown option '--colour'"},
	{{"status", "-s"}, "-s needs a value"},
	{{"logs", "0", "-n", "abc"}, "-n: expected an integer from 1 to 100000, not 'abc'"},
	{{"logs", "0", "--lines=0"}, "--lines: expected an integer from 1 to 100000, not '0'"},
	{{"logs", "0", "-n", "100001"}, "-n: expected"},
	{{"events", "--since", "-1"}, "--since: expected an integer from 0"},
	{{"events", "--follow=yes"}, "--follow takes no value, not 'yes'"},
	{{"status", "-f"}, "-f is not an option of 'status'"},
	{{"logs", "0", "--since", "3"}, "--since is not an option of 'logs'"},
	{{"--stderr"}, "--stderr needs a command"},
	{{"logs"}, "logs: missing RANK"},
	{{"logs", "x"}, "RANK: expected an integer from 0 to 65535, not 'x'"},
	{{"logs", "1", "2"}, "logs: unexpected argument '2'"},
	{{"status", "now"}, "status: unexpected argument 'now'"},
	{{"signal", "WINCHY"},
	 "SIG: expected a signal name (USR1, SIGUSR1) or number, not 'WINCHY'"},
	{{"signal", "USR1", "-"}, "RANK: expected"},
	{{"frobnicate", "oops"}, "frobnicate: expected NAME=VALUE, not 'oops'"},
	{{"help", "nope"}, "help: no command 'nope'"},
	/* verb names go into the request path: the agent's rule, [a-z0-9_]{1,64} */
	{{"a b"}, "'a b' is not a command or handler name"},
	{{"a b", "--help"}, "'a b' is not a command or handler name"},
	{{"-s", "/x", "x?y=1"}, "'x?y=1' is not a command"},
	{{"../status"}, "'../status' is not a command"},
	{{"Status"}, "'Status' is not a command"},
	{{"ping\r\nX: 1"}, "is not a command"},
	{{""}, "'' is not a command"},
	{{"caf\xc3\xa9"}, "is not a command"},
	{{"a12345678901234567890123456789012345678901234567890123456789012345"},
	 "is not a command"},
};

static void
test_parse(void **state)
{
	for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
		const struct args_case *c = &cases[i];
		char *argv[10] = {"elasticctl"};
		int argc = 1;
		struct ectl_args a;
		char *err = NULL;
		int r;

		for (; c->argv[argc - 1]; argc++) {
			argv[argc] = (char *)c->argv[argc - 1];
		}
		r = ectl_args_parse(argc, argv, &a, &err);
		printf("# case %zu (%s ...): %d %s\n", i, c->argv[0] ? c->argv[0] : "", r,
		       err ? err : "");
		if (c->error) {
			assert_int_equal(r, -EINVAL);
			assert_non_null(strstr(err, c->error));
		} else {
			assert_int_equal(r, 0);
			assert_int_equal(a.cmd, c->cmd);
			assert_true(c->socket ? a.socket && !strcmp(a.socket, c->socket)
					      : !a.socket);
			assert_true(c->run_id ? a.run_id && !strcmp(a.run_id, c->run_id)
					      : !a.run_id);
			assert_int_equal(a.json, c->json);
			assert_int_equal(a.help, c->help);
			assert_int_equal(a.follow, c->follow);
			assert_int_equal(a.use_stderr, c->use_stderr);
			assert_int_equal(a.since, c->since);
			assert_int_equal(a.lines, c->lines);
			assert_int_equal(a.rank, c->rank);
			assert_true(c->sig ? a.sig && !strcmp(a.sig, c->sig) : !a.sig);
			if (c->cmd == ECTL_CMD_VERB) {
				assert_int_equal(strv_length((char *const *)a.params), c->nparams);
			}
		}
		free(err);
		ectl_args_release(&a);
	}
}

static void
test_table(void **state)
{
	/* Every command has a summary, a synopsis, and is found by its name. */
	for (const struct ectl_command *c = ectl_commands; c->name; c++) {
		assert_ptr_equal(ectl_command_find(c->name), c);
		assert_non_null(c->summary);
		assert_non_null(c->synopsis);
		assert_true(c->max_args < 0 || c->max_args >= c->min_args);
	}
	assert_null(ectl_command_find("nodes-that-do-not-exist"));
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_parse),
		cmocka_unit_test(test_table),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
