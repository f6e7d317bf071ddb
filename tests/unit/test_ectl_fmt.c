/* What elasticctl prints: the table renderer (widths, "-" for missing cells,
 * colour only when asked), the status table against a golden text, one line
 * per event kind, dump_traceback sections in rank order, durations, the
 * overlap of two readings of a followed log, and the escaping of control
 * characters in text for a terminal. TZ=UTC (tests/meson.build). */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ectl_fmt.h"
#include "util.h"

/* What fn printed to a memory stream. */
#define CAPTURE(out, call)                                                                         \
	do {                                                                                       \
		size_t _n;                                                                         \
		FILE *_f = open_memstream(&(out), &_n);                                            \
		call;                                                                              \
		fclose(_f);                                                                        \
	} while (0)

static void
test_table(void **state)
{
	static const char *const header[] = {"A", "LONGER", "LAST"};
	const char *cells[] = {"x", NULL, "end", "wide cell", "2", "z"};
	const char *colors[] = {NULL, NULL, NULL, NULL, ECTL_RED, NULL};
	struct ectl_table t = {3, 2, header, cells, colors};
	char *out;

	CAPTURE(out, ectl_table_print(_f, &t, false));
	assert_string_equal(out, "A          LONGER  LAST\n"
				 "x          -       end\n"
				 "wide cell  2       z\n");
	free(out);
	CAPTURE(out, ectl_table_print(_f, &t, true));
	assert_string_equal(out,
			    "\033[1mA\033[0m          \033[1mLONGER\033[0m  \033[1mLAST\033[0m\n"
			    "x          -       end\n"
			    "wide cell  \033[31m2\033[0m       z\n");
	free(out);
}

static const char status_json[] =
	"{\"run_id\": \"job1\", \"node\": \"n1_42_0\", \"role\": \"default\", \"rdzv_backend\": "
	"\"c10d\", \"node_state\": \"RUNNING\", \"round\": 3, \"group_rank\": 1, "
	"\"group_world_size\": 2, \"world_size\": 4, \"worker_state\": \"HEALTHY\", "
	"\"restart_count\": 1, \"max_restarts\": 3, \"remaining_restarts\": 2, \"uptime_s\": "
	"3725.5, "
	"\"workers\": ["
	"{\"local_rank\": 0, \"global_rank\": 2, \"pid\": 100, \"state\": \"HEALTHY\", "
	"\"exit_status\": null, \"signal\": null, \"cpus\": \"0-3\", \"numa_nodes\": [0], \"gpu\": "
	"\"0000:17:00.0\", \"stdout_log\": \"/l/0/stdout.log\", \"last_output_age_s\": 65},"
	"{\"local_rank\": 1, \"global_rank\": 3, \"pid\": 101, \"state\": \"FAILED\", "
	"\"exit_status\": null, \"signal\": \"SIGKILL\", \"cpus\": null, \"numa_nodes\": [0, 1], "
	"\"gpu\": null, \"stdout_log\": null}]}";

static const char status_text[] = "job:       job1 (c10d, role default)\n"
				  "node:      n1_42_0\n"
				  "round:     3\n"
				  "state:     RUNNING, workers HEALTHY\n"
				  "group:     rank 1 of 2, world size 4\n"
				  "restarts:  1 used, 2 left (--max-restarts 3)\n"
				  "uptime:    1h 02m\n"
				  "\n"
				  "RANK  LOCAL  PID  STATE    EXIT     CPUS  NUMA  GPU           "
				  "OUTPUT      LOG\n"
				  "2     0      100  HEALTHY  -        0-3   0     0000:17:00.0  "
				  "1m 05s ago  /l/0/stdout.log\n"
				  "3     1      101  FAILED   SIGKILL  -     0,1   -             "
				  "-           -\n";

static void
test_status(void **state)
{
	json_t *s = json_loads(status_json, 0, NULL);
	json_t *empty = json_pack("{s:s, s:n, s:[]}", "run_id", "j", "round", "workers");
	char *out;
	int r;

	assert_non_null(s);
	CAPTURE(out, r = ectl_fmt_status(_f, s, false));
	assert_int_equal(r, 0);
	assert_string_equal(out, status_text);
	free(out);
	CAPTURE(out, r = ectl_fmt_status(_f, s, true));
	assert_non_null(strstr(out, "\033[32mRUNNING\033[0m"));
	assert_non_null(strstr(out, "\033[31mFAILED\033[0m"));
	free(out);
	CAPTURE(out, r = ectl_fmt_status(_f, empty, false));
	assert_non_null(strstr(out, "round:     - (no round joined yet)\n"));
	assert_non_null(strstr(out, "\nno workers yet\n"));
	free(out);
	/* a node out of the job says so, not only "INIT, workers STOPPED" */
	json_t *q = json_loads("{\"run_id\": \"j\", \"node_state\": \"INIT\", \"phase\": "
			       "\"quarantined\", \"quarantine\": {\"cooldown_s\": 100.0, "
			       "\"remaining_s\": 98.2, \"failures\": 2, \"quarantines\": 1}, "
			       "\"workers\": []}",
			       0, NULL);

	assert_non_null(q);
	CAPTURE(out, r = ectl_fmt_status(_f, q, false));
	assert_non_null(strstr(out, "state:     INIT, workers -\n"
				    "phase:     quarantined (2 failed attempts), rejoins in 1m 38s "
				    "(quarantine 1)\n"));
	free(out);
	json_decref(q);
	q = json_loads("{\"phase\": \"stopping-group\", \"excluded\": \"xid 79\\u001b[2J\"}", 0,
		       NULL);
	CAPTURE(out, r = ectl_fmt_status(_f, q, false));
	assert_non_null(strstr(out, "phase:     stopping-group, excluded: xid 79\\x1b[2J\n"));
	free(out);
	json_decref(q);
	q = json_loads("{\"phase\": \"health-check\", \"health\": {\"state\": \"unhealthy\", "
		       "\"failures\": 2, \"last_failure\": {\"check\": \"gpus\", \"result\": "
		       "\"exit status 1\"}}}",
		       0, NULL);
	CAPTURE(out, r = ectl_fmt_status(_f, q, false));
	assert_non_null(strstr(out, "phase:     health-check, health unhealthy (2 failed gates; "
				    "gpus: exit status 1)\n"));
	free(out);
	json_decref(q);
	q = json_loads("{\"phase\": \"health-check\", \"health\": {\"state\": "
		       "\"waiting-gpu-memory\", \"failures\": 0}}",
		       0, NULL);
	CAPTURE(out, r = ectl_fmt_status(_f, q, false));
	assert_non_null(strstr(out, "phase:     health-check, waiting for the GPUs' memory"));
	free(out);
	json_decref(q);
	q = json_loads("{\"phase\": \"restarting\", \"next_attempt_in_s\": 28.4}", 0, NULL);
	CAPTURE(out, r = ectl_fmt_status(_f, q, false));
	assert_non_null(
		strstr(out, "phase:     restarting, next attempt in 28s (--restart-backoff)\n"));
	free(out);
	json_decref(q);
	json_t *not_object = json_array();

	CAPTURE(out, r = ectl_fmt_status(_f, not_object, false));
	assert_int_equal(r, -EINVAL);
	free(out);
	json_decref(not_object);
	json_decref(s);
	json_decref(empty);
}

static void
test_events(void **state)
{
	static const char *cases[][2] = {
		{"{\"seq\": 2, \"event\": {\"name\": \"elasticd.agent.started\", \"source\": "
		 "\"AGENT\", \"timestamp\": 1796138944770, \"metadata\": {\"run_id\": \"j\", "
		 "\"pid\": 7, \"local_world_size\": 2, \"raw_error\": null}}}",
		 "#2 2026-12-01 15:29:04.770 AGENT  elasticd.agent.started pid=7 "
		 "local_world_size=2\n"},
		{"{\"seq\": 9, \"event\": {\"name\": \"elasticd.worker.exited\", \"source\": "
		 "\"WORKER\", \"timestamp\": 5, \"metadata\": {\"reason\": \"killed by "
		 "SIGKILL\"}}}",
		 "#9 1970-01-01 00:00:00.005 WORKER elasticd.worker.exited reason='killed by "
		 "SIGKILL'\n"},
		{"{\"seq\": 3, \"event\": {\"name\": \"rdzv_c10d.c:next_rendezvous\", \"run_id\": "
		 "\"j\", \"message\": \"joined\", \"node_state\": \"RUNNING\", \"rank\": 0, "
		 "\"error_trace\": \"\"}}",
		 "#3 -                       RDZV   rdzv_c10d.c:next_rendezvous RUNNING rank 0: "
		 "joined\n"},
		{"{\"seq\": 4, \"event\": {\"name\": \"x\", \"node_state\": \"FAILED\", \"rank\": "
		 "null, \"message\": \"m\", \"error_trace\": \"boom\"}}",
		 "#4 -                       RDZV   x FAILED: m error: boom\n"},
		{"{\"dropped\": 12}", "... 12 earlier events are no longer held by the agent\n"},
		{"not json", "not json\n"},
		{"{\"seq\": 1}", "{\"seq\": 1}\n"},
	};

	for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
		for (int visible = 0; visible <= 1; visible++) {
			char *s = ectl_fmt_event(cases[i][0], visible);

			printf("# %s", s);
			assert_string_equal(s, cases[i][1]);
			free(s);
		}
	}
}

/* What workers control (metadata, messages, lines that are not JSON) reaches
 * a terminal with its control characters made visible. */
static void
test_events_visible(void **state)
{
	static const char *cases[][3] = {
		/* line, raw, visible */
		{"{\"seq\": 5, \"event\": {\"name\": \"n\", \"source\": \"WORKER\", "
		 "\"timestamp\": 0, \"metadata\": {\"m\": \"\\u001b]0;x\\u0007\"}}}",
		 "#5 1970-01-01 00:00:00.000 WORKER n m=\033]0;x\007\n",
		 "#5 1970-01-01 00:00:00.000 WORKER n m=\\x1b]0;x\\x07\n"},
		{"{\"seq\": 6, \"event\": {\"name\": \"\\u009b\", \"message\": \"a\\rb\", "
		 "\"node_state\": \"S\", \"error_trace\": \"T\\n\\u007f\"}}",
		 "#6 -                       RDZV   \xc2\x9b S: a\rb error: T\n\x7f\n",
		 "#6 -                       RDZV   \\xc2\\x9b S: a\\x0db error: T\n\\x7f\n"},
		{"not \033[1mjson\x9b", "not \033[1mjson\x9b\n", "not \\x1b[1mjson\\x9b\n"},
	};

	for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
		for (int visible = 0; visible <= 1; visible++) {
			char *s = ectl_fmt_event(cases[i][0], visible);

			printf("# %s", s);
			assert_string_equal(s, cases[i][1 + visible]);
			free(s);
		}
	}
}

struct visible_case {
	const char *in;
	size_t len;
	const char *out;
};

#define V(in, out)                                                                                 \
	{                                                                                          \
		in, sizeof(in) - 1, out                                                            \
	}

static void
test_visible(void **state)
{
	static const struct visible_case cases[] = {
		V("", ""),
		V("plain text", "plain text"),
		V("lines\nand\ttabs\n", "lines\nand\ttabs\n"),
		V("\033[31mred\033[0m", "\\x1b[31mred\\x1b[0m"),
		V("\033]0;title\007", "\\x1b]0;title\\x07"),
		V("a\rb", "a\\x0db"),
		V("nul\0byte", "nul\\x00byte"),
		V("\x01\x08\x0b\x0c\x1f", "\\x01\\x08\\x0b\\x0c\\x1f"),
		V("del\x7f", "del\\x7f"),
		V(" ~", " ~"),
		/* C1 controls: raw bytes, and U+0080..U+009F encoded in UTF-8 */
		V("\x9b"
		  "2J",
		  "\\x9b"
		  "2J"),
		V("\x80\x85\x9f", "\\x80\\x85\\x9f"),
		V("\xc2\x9b"
		  "2J",
		  "\\xc2\\x9b"
		  "2J"),
		V("\xc2\x80", "\\xc2\\x80"),
		/* UTF-8 text stays, C1-range continuation bytes included */
		V("caf\xc3\xa9", "caf\xc3\xa9"),
		V("\xc2\xa0nbsp", "\xc2\xa0nbsp"),
		V("\xc4\x9b", "\xc4\x9b"),
		V("\xe2\x82\xac", "\xe2\x82\xac"),
		V("\xe2\x82\x9b", "\xe2\x82\x9b"),
		V("\xf0\x9f\x98\x80", "\xf0\x9f\x98\x80"),
		/* not UTF-8: lone lead bytes stay, C1 bytes after them do not */
		V("\xc3", "\xc3"),
		V("\xc3(", "\xc3("),
		V("\xe2\x82", "\xe2\\x82"),
		V("\xc0\x9b", "\xc0\\x9b"),
		V("\xe0\x80\x9b", "\xe0\\x80\\x9b"),
		V("\xed\xa0\x80", "\xed\xa0\\x80"),
		V("\xf4\x90\x80\x80", "\xf4\\x90\\x80\\x80"),
		V("\xff\xfe\xa0", "\xff\xfe\xa0"),
		V("\\x1b stays", "\\x1b stays"),
	};

	for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
		char *s = ectl_fmt_visible(cases[i].in, cases[i].len);

		printf("# case %zu: %s\n", i, s);
		assert_string_equal(s, cases[i].out);
		free(s);
	}
}

static void
test_dump(void **state)
{
	json_t *j =
		json_loads("{\"10\": {\"pid\": 9, \"status\": null, \"error\": \"not running\"},"
			   " \"2\": {\"pid\": 8, \"status\": 200, \"traceback\": \"T2\\n\"},"
			   " \"0\": {\"pid\": 7, \"status\": 200, \"traceback\": \"T0\"}}",
			   0, NULL);
	char *out;
	int r;

	for (int visible = 0; visible <= 1; visible++) {
		CAPTURE(out, r = ectl_fmt_dump(_f, j, visible));
		assert_int_equal(r, 0);
		assert_string_equal(out,
				    "==== local rank 0 (pid 7) ====\nT0\n\n"
				    "==== local rank 2 (pid 8) ====\nT2\n\n"
				    "==== local rank 10 (pid 9) ====\nno traceback: not running\n");
		free(out);
	}
	json_decref(j);
}

/* Tracebacks and errors come from workers: escaped for a terminal only. */
static void
test_dump_visible(void **state)
{
	json_t *j = json_loads("{\"0\": {\"pid\": 7, \"traceback\": \"File \\\"x\\u001b[2J\\\"\\n"
			       "\\tline\\r\\n\"}, \"1\": {\"pid\": 8, \"error\": \"\\u0007gone\"}}",
			       0, NULL);
	char *out;
	int r;

	assert_non_null(j);
	CAPTURE(out, r = ectl_fmt_dump(_f, j, false));
	assert_int_equal(r, 0);
	assert_string_equal(out, "==== local rank 0 (pid 7) ====\nFile \"x\033[2J\"\n\tline\r\n\n"
				 "==== local rank 1 (pid 8) ====\nno traceback: \007gone\n");
	free(out);
	CAPTURE(out, r = ectl_fmt_dump(_f, j, true));
	assert_int_equal(r, 0);
	assert_string_equal(out,
			    "==== local rank 0 (pid 7) ====\nFile \"x\\x1b[2J\"\n\tline\\x0d\n\n"
			    "==== local rank 1 (pid 8) ====\nno traceback: \\x07gone\n");
	free(out);
	json_decref(j);
}

static void
test_duration(void **state)
{
	static const struct {
		double s;
		const char *text;
	} cases[] = {
		{0, "0s"},        {59.9, "59s"},      {60, "1m 00s"},    {3599, "59m 59s"},
		{3600, "1h 00m"}, {86399, "23h 59m"}, {90000, "1d 01h"}, {-5, "0s"},
	};
	char buf[32];

	for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
		assert_string_equal(ectl_fmt_duration(cases[i].s, buf, sizeof(buf)), cases[i].text);
	}
}

static void
test_new_lines(void **state)
{
	static const struct {
		const char *prev, *cur;
		size_t offset;
	} cases[] = {
		{"", "a\nb\n", 0},           {"a\nb\n", "a\nb\n", 4},
		{"a\nb\n", "b\nc\n", 2},     {"a\nb\nc\n", "b\nc\nd\ne\n", 4},
		{"a\nb\n", "x\ny\n", 0},     {"a\nb\npart", "b\npartial\n", 2},
		{"a\nb\n", "a\nb\nhalf", 4}, {"x\n", "a\nx\n", 0},
		{"a\na\n", "a\na\n", 4},
	};

	for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
		printf("# case %zu\n", i);
		assert_int_equal(ectl_fmt_new_lines(cases[i].prev, cases[i].cur), cases[i].offset);
	}
	assert_int_equal(ectl_fmt_complete("a\nb"), 2);
	assert_int_equal(ectl_fmt_complete("ab"), 0);
}

static const char nodes_json[] =
	"{\"run_id\": \"job1\", \"backend\": \"c10d\", \"node\": \"b_20_0\", \"round\": 4, "
	"\"complete\": true, \"closed\": false, \"state_age_s\": 3.2, \"liveness\": "
	"\"heartbeat\", \"participants\": ["
	"{\"node\": \"b_20_0\", \"group_rank\": 0, \"heartbeat_age_s\": 2.0, \"alive\": true},"
	"{\"node\": \"a_10_0\", \"group_rank\": 1, \"heartbeat_age_s\": 75.0, \"alive\": false}],"
	"\"wait_list\": [{\"node\": \"d_40_0\", \"heartbeat_age_s\": null, \"alive\": true}],"
	"\"spares\": [{\"node\": \"e_50_0\", \"heartbeat_age_s\": 0.5, \"alive\": true}],"
	"\"quarantined\": []}";

static const char nodes_text[] = "job:       job1 (c10d)\n"
				 "node:      b_20_0 (*)\n"
				 "round:     4, complete\n"
				 "state:     this node's copy, read 3s ago\n"
				 "liveness:  heartbeats (as of the copy)\n"
				 "quarantined: 0\n"
				 "\n"
				 "LIST         RANK  NODE      HEARTBEAT   ALIVE\n"
				 "participant  0     b_20_0 *  2s ago      yes\n"
				 "participant  1     a_10_0    1m 15s ago  no\n"
				 "waiting      -     d_40_0    -           yes\n"
				 "spare        -     e_50_0    0s ago      yes\n";

static void
test_nodes(void **state)
{
	json_t *n = json_loads(nodes_json, 0, NULL);
	json_t *lease = json_pack("{s:s, s:s, s:n, s:b, s:[]}", "backend", "etcd", "liveness",
				  "lease", "state_age_s", "closed", true, "participants");
	json_t *not_object = json_array();
	char *out;
	int r;

	assert_non_null(n);
	CAPTURE(out, r = ectl_fmt_nodes(_f, n, false));
	assert_int_equal(r, 0);
	assert_string_equal(out, nodes_text);
	free(out);
	CAPTURE(out, r = ectl_fmt_nodes(_f, n, true));
	assert_non_null(strstr(out, "\033[31mno\033[0m"));
	assert_non_null(strstr(out, "\033[32myes\033[0m"));
	free(out);
	CAPTURE(out, r = ectl_fmt_nodes(_f, lease, false));
	assert_non_null(strstr(out, "round:     -, gathering, closed\n"));
	assert_non_null(strstr(out, "never read\n"));
	assert_non_null(strstr(out, "liveness:  leases"));
	assert_non_null(strstr(out, "\nno nodes in the rendezvous yet\n"));
	free(out);
	CAPTURE(out, r = ectl_fmt_nodes(_f, not_object, false));
	assert_int_equal(r, -EINVAL);
	free(out);
	json_decref(n);
	json_decref(lease);
	json_decref(not_object);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_table),        cmocka_unit_test(test_status),
		cmocka_unit_test(test_events),       cmocka_unit_test(test_events_visible),
		cmocka_unit_test(test_visible),      cmocka_unit_test(test_dump),
		cmocka_unit_test(test_dump_visible), cmocka_unit_test(test_duration),
		cmocka_unit_test(test_new_lines),    cmocka_unit_test(test_nodes),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
