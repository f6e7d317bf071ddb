/* test_events.c — the Event / RdzvEvent model, its JSON, torchrun's worker
 * status events, and the recorder (sinks, ring, subscribers).
 *
 * Golden lines were produced by torch 1.13's own `Event.serialize` /
 * `RdzvEvent.serialize` and `SimpleElasticAgent._construct_event` (hostname
 * patched to "node1.example.com"). They are written with ` for " to stay
 * readable; J() turns them back. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "events.h"
#include "util.h"

static char *tmpdir;

static int
group_setup(void **state)
{
	char tmpl[] = "/tmp/test_events.XXXXXX";

	(void)state;
	json_object_seed(1);
	umask(022);
	if (!mkdtemp(tmpl)) {
		return -1;
	}
	tmpdir = xstrdup(tmpl);
	return 0;
}

static int
group_teardown(void **state)
{
	char *cmd = xasprintf("rm -rf '%s'", tmpdir);
	int r = system(cmd);

	(void)state;
	free(cmd);
	free(tmpdir);
	return r == 0 ? 0 : -1;
}

/* A golden line with ` for ": a static copy with the quotes put back. */
static const char *
J(const char *s)
{
	static char bufs[4][4096];
	static int next;
	char *b = bufs[next++ % 4];
	size_t i;

	for (i = 0; s[i] && i + 1 < sizeof(bufs[0]); i++) {
		b[i] = s[i] == '`' ? '"' : s[i];
	}
	b[i] = '\0';
	return b;
}

static char *
path_in_tmp(const char *name)
{
	return xasprintf("%s/%s", tmpdir, name);
}

static char *
slurp(const char *path)
{
	char *buf = NULL;

	assert_int_equal(read_file(path, 1 << 24, &buf, NULL), 0);
	return buf;
}

static size_t
count_lines(const char *s)
{
	size_t n = 0;

	for (; *s; s++) {
		n += *s == '\n';
	}
	return n;
}

/* ---- names --------------------------------------------------------------- */

static void
test_names(void **state)
{
	enum event_source src;
	enum node_state ns;
	enum events_sink sink;
	static const struct {
		const char *name;
		int ret;
		enum events_sink sink;
	} sinks[] = {
		{"null", 0, EVENTS_SINK_NULL},       {"console", 0, EVENTS_SINK_CONSOLE},
		{"file", 0, EVENTS_SINK_FILE},       {"dynamic_rendezvous", 0, EVENTS_SINK_NULL},
		{"File", -EINVAL, EVENTS_SINK_NULL}, {"", -EINVAL, EVENTS_SINK_NULL},
		{NULL, -EINVAL, EVENTS_SINK_NULL},
	};

	(void)state;
	assert_string_equal(event_source_name(EVENT_SOURCE_AGENT), "AGENT");
	assert_string_equal(event_source_name(EVENT_SOURCE_WORKER), "WORKER");
	assert_int_equal(event_source_from_name("WORKER", &src), 0);
	assert_int_equal(src, EVENT_SOURCE_WORKER);
	assert_int_equal(event_source_from_name("worker", &src), -EINVAL);
	assert_int_equal(event_source_from_name(NULL, &src), -EINVAL);
	assert_string_equal(node_state_name(NODE_STATE_INIT), "INIT");
	assert_string_equal(node_state_name(NODE_STATE_RUNNING), "RUNNING");
	assert_string_equal(node_state_name(NODE_STATE_SUCCEEDED), "SUCCEEDED");
	assert_string_equal(node_state_name(NODE_STATE_FAILED), "FAILED");
	assert_int_equal(node_state_from_name("SUCCEEDED", &ns), 0);
	assert_int_equal(ns, NODE_STATE_SUCCEEDED);
	assert_int_equal(node_state_from_name("DONE", &ns), -EINVAL);
	for (size_t i = 0; i < ARRAY_SIZE(sinks); i++) {
		sink = EVENTS_SINK_NULL;
		assert_int_equal(events_sink_from_name(sinks[i].name, &sink), sinks[i].ret);
		assert_int_equal(sink, sinks[i].sink);
	}
	assert_string_equal(events_sink_name(EVENTS_SINK_FILE), "file");
	assert_string_equal(events_sink_name(EVENTS_SINK_CONSOLE), "console");
	assert_string_equal(events_sink_name(EVENTS_SINK_NULL), "null");
}

/* ---- Event serialisation -------------------------------------------------- */

enum md_type {
	MD_END,
	MD_STR,
	MD_INT,
	MD_DBL,
	MD_BOOL,
	MD_NULL,
};

struct md {
	enum md_type t;
	const char *key;
	const char *s;
	long long i;
	double d;
};

struct ser_case {
	const char *name;
	enum event_source source;
	int64_t timestamp;
	struct md md[12];
	const char *want; /* with ` for " */
	bool lossy;       /* bytes that are not UTF-8: read back as U+FFFD */
};

#define S(k, v)                                                                                    \
	{                                                                                          \
		.t = MD_STR, .key = (k), .s = (v)                                                  \
	}
#define I(k, v)                                                                                    \
	{                                                                                          \
		.t = MD_INT, .key = (k), .i = (v)                                                  \
	}
#define D(k, v)                                                                                    \
	{                                                                                          \
		.t = MD_DBL, .key = (k), .d = (v)                                                  \
	}
#define B(k, v)                                                                                    \
	{                                                                                          \
		.t = MD_BOOL, .key = (k), .i = (v)                                                 \
	}
#define N(k)                                                                                       \
	{                                                                                          \
		.t = MD_NULL, .key = (k)                                                           \
	}

static const struct ser_case ser_cases[] = {
	{.name = "x",
	 .source = EVENT_SOURCE_AGENT,
	 .want = "{`name`: `x`, `source`: `AGENT`, `timestamp`: 0, `metadata`: {}}"},
	{.name = "torchelastic.worker.status.SUCCEEDED",
	 .source = EVENT_SOURCE_WORKER,
	 .timestamp = 1700000000123,
	 .md = {S("s", "a\"b\\c/d"), I("i", -42), I("big", 9223372036854775807LL), D("f", 0.1),
		B("t", 1), N("n")},
	 .want = "{`name`: `torchelastic.worker.status.SUCCEEDED`, `source`: `WORKER`, "
		 "`timestamp`: "
		 "1700000000123, `metadata`: {`s`: `a\\`b\\\\c/d`, `i`: -42, `big`: "
		 "9223372036854775807, `f`: 0.1, `t`: true, `n`: null}}"},
	{.name = "u",
	 .source = EVENT_SOURCE_AGENT,
	 .md = {S("\xc3\xa9", "na\xc3\xafve \xe2\x80\x93 \xe2\x98\x83 \xf0\x9f\x98\x80"),
		S("ctl", "\x01\x1f\x7f\t\n\r\b\f")},
	 .want = "{`name`: `u`, `source`: `AGENT`, `timestamp`: 0, `metadata`: {`\\u00e9`: "
		 "`na\\u00efve \\u2013 \\u2603 \\ud83d\\ude00`, `ctl`: "
		 "`\\u0001\\u001f\\u007f\\t\\n\\r\\b\\f`}}"},
	{.name = "floats",
	 .source = EVENT_SOURCE_AGENT,
	 .md = {D("a", 1e16), D("b", 1e-05), D("c", 100.0), D("d", -0.0), D("e", 123456789.125),
		D("f", 1.5e300), D("g", 0.0001), D("h", 5e-324), D("i", 1e15)},
	 .want = "{`name`: `floats`, `source`: `AGENT`, `timestamp`: 0, `metadata`: {`a`: 1e+16, "
		 "`b`: 1e-05, `c`: 100.0, `d`: -0.0, `e`: 123456789.125, `f`: 1.5e+300, `g`: "
		 "0.0001, `h`: 5e-324, `i`: 1000000000000000.0}}"},
	/* Not torch's: bytes that are not UTF-8 become U+FFFD (a Python str has
	 * none); a negative timestamp is still an integer. */
	{.name = "bad\xff",
	 .source = EVENT_SOURCE_WORKER,
	 .timestamp = -5,
	 .md = {S("k", "a\xc3(b")},
	 .want = "{`name`: `bad\\ufffd`, `source`: `WORKER`, `timestamp`: -5, `metadata`: {`k`: "
		 "`a\\ufffd(b`}}",
	 .lossy = true},
	/* Setting a key again replaces its value in place, as a dict. */
	{.name = "again",
	 .source = EVENT_SOURCE_AGENT,
	 .timestamp = 1,
	 .md = {I("a", 1), I("b", 2), S("a", "one"), S("c", NULL)},
	 .want = "{`name`: `again`, `source`: `AGENT`, `timestamp`: 1, `metadata`: {`a`: `one`, "
		 "`b`: 2, `c`: null}}"},
};

static void
build_event(const struct ser_case *c, struct elastic_event *ev)
{
	elastic_event_init(ev, c->name, c->source, c->timestamp);
	for (size_t k = 0; c->md[k].t != MD_END; k++) {
		const struct md *m = &c->md[k];
		int r = -1;

		switch (m->t) {
		case MD_STR:
			r = elastic_event_set_string(ev, m->key, m->s);
			break;
		case MD_INT:
			r = elastic_event_set_int(ev, m->key, m->i);
			break;
		case MD_DBL:
			r = elastic_event_set_double(ev, m->key, m->d);
			break;
		case MD_BOOL:
			r = elastic_event_set_bool(ev, m->key, m->i != 0);
			break;
		case MD_NULL:
			r = elastic_event_set_null(ev, m->key);
			break;
		case MD_END:
			break;
		}
		assert_int_equal(r, 0);
	}
}

static void
test_event_serialize(void **state)
{
	(void)state;
	for (size_t i = 0; i < ARRAY_SIZE(ser_cases); i++) {
		const struct ser_case *c = &ser_cases[i];
		struct elastic_event ev, back;
		size_t len = 0;
		char *line, *err = NULL, *again;

		build_event(c, &ev);
		line = elastic_event_serialize(&ev, &len);
		assert_string_equal(line, J(c->want));
		assert_int_equal(len, strlen(line));

		/* Read back: equal, and the same bytes again. */
		assert_int_equal(elastic_event_deserialize(line, len, &back, &err), 0);
		assert_null(err);
		assert_true(elastic_event_equal(&ev, &back) == !c->lossy);
		again = elastic_event_serialize(&back, NULL);
		assert_string_equal(again, line);
		free(again);
		free(line);
		elastic_event_release(&back);
		elastic_event_release(&ev);
	}
}

static void
test_event_setters(void **state)
{
	struct elastic_event ev, zero = {0};

	(void)state;
	elastic_event_init(&ev, NULL, EVENT_SOURCE_AGENT, 0);
	assert_string_equal(ev.name, "");
	assert_int_equal(elastic_event_set_double(&ev, "nan", NAN), -EDOM);
	assert_int_equal(elastic_event_set_double(&ev, "inf", INFINITY), -EDOM);
	assert_int_equal(elastic_event_set_double(&ev, "-inf", -INFINITY), -EDOM);
	assert_int_equal(elastic_event_set_int(&ev, NULL, 1), -EINVAL);
	assert_int_equal(elastic_event_set_string(&ev, "\xff", "x"), -EINVAL);
	assert_int_equal(json_object_size(ev.metadata), 0);
	elastic_event_release(&ev);
	assert_null(ev.name);
	assert_null(ev.metadata);
	elastic_event_release(&ev); /* twice is fine */
	elastic_event_release(&zero);
	/* A released event has no metadata to set. */
	assert_int_equal(elastic_event_set_int(&ev, "a", 1), -EINVAL);
}

static void
test_event_equal(void **state)
{
	struct elastic_event a, b;

	(void)state;
	elastic_event_init(&a, "n", EVENT_SOURCE_AGENT, 5);
	elastic_event_init(&b, "n", EVENT_SOURCE_AGENT, 5);
	assert_true(elastic_event_equal(&a, &b));
	elastic_event_set_int(&a, "x", 1);
	assert_false(elastic_event_equal(&a, &b));
	elastic_event_set_double(&b, "x", 1.0);
	assert_false(elastic_event_equal(&a, &b)); /* 1 is not 1.0 */
	elastic_event_set_int(&b, "x", 1);
	assert_true(elastic_event_equal(&a, &b));
	elastic_event_set_int(&a, "y", 2);
	elastic_event_set_int(&a, "z", 3);
	elastic_event_set_int(&b, "z", 3);
	elastic_event_set_int(&b, "y", 2);
	assert_false(elastic_event_equal(&a, &b)); /* order counts: it is the output */
	elastic_event_release(&b);
	elastic_event_init(&b, "n", EVENT_SOURCE_WORKER, 5);
	assert_false(elastic_event_equal(&a, &b));
	elastic_event_release(&a);
	elastic_event_release(&b);
}

/* ---- Event parsing ----------------------------------------------------- */

/* Lines torch writes (and what it does not write but reads), read exactly. */
static const char *const event_ok_lines[] = {
	"{`name`: `x`, `source`: `AGENT`, `timestamp`: 0, `metadata`: {}}",
	/* torchrun 1.13's worker status event (_construct_event). */
	("{`name`: `torchelastic.worker.status.FAILED`, `source`: `WORKER`, `timestamp`: 0, "
	 "`metadata`: {`run_id`: `job-7`, `global_rank`: 3, `group_rank`: 1, `worker_id`: `4242`, "
	 "`role`: `trainer`, `hostname`: `node1.example.com`, `state`: `FAILED`, "
	 "`total_run_time`: 12, `rdzv_backend`: `static`, `raw_error`: "
	 "`{\\`message\\`: \\`<NONE>\\`}`, `metadata`: `{\\`group_world_size\\`: 2, "
	 "\\`entry_point\\`: \\`python3\\`, \\`local_rank\\`: [1], \\`role_rank\\`: [3], "
	 "\\`role_world_size\\`: [4]}`, `agent_restarts`: 2}}"),
	/* A torchrun watchdog event: a raw name, not torchelastic.*. */
	("{`name`: `watchdog started`, `source`: `AGENT`, `timestamp`: 0, `metadata`: "
	 "{`state`: `RUNNING`}}"),
	"{`name`: `t`, `source`: `WORKER`, `timestamp`: -1, `metadata`: {`x`: -1.5e-07}}",
};

static void
test_event_deserialize_ok(void **state)
{
	(void)state;
	for (size_t i = 0; i < ARRAY_SIZE(event_ok_lines); i++) {
		const char *line = J(event_ok_lines[i]);
		struct elastic_event ev;
		char *err = NULL, *again;
		char *nl = xasprintf("%s\n", line);

		assert_int_equal(elastic_event_deserialize(line, strlen(line), &ev, &err), 0);
		assert_null(err);
		again = elastic_event_serialize(&ev, NULL);
		assert_string_equal(again, line);
		free(again);
		elastic_event_release(&ev);

		/* A trailing newline is part of a line of a file. */
		assert_int_equal(elastic_event_deserialize(nl, strlen(nl), &ev, &err), 0);
		elastic_event_release(&ev);
		free(nl);
	}
}

static void
test_event_defaults(void **state)
{
	const char *line = J("{`source`: `WORKER`, `name`: `n`}");
	struct elastic_event ev;
	char *s;

	(void)state;
	/* torch's defaults: timestamp 0, metadata {}; output in field order. */
	assert_int_equal(elastic_event_deserialize(line, strlen(line), &ev, NULL), 0);
	assert_int_equal(ev.timestamp, 0);
	assert_int_equal(ev.source, EVENT_SOURCE_WORKER);
	s = elastic_event_serialize(&ev, NULL);
	assert_string_equal(s,
			    J("{`name`: `n`, `source`: `WORKER`, `timestamp`: 0, `metadata`: {}}"));
	free(s);
	elastic_event_release(&ev);
	line = J("{`name`:`n`,`source`:`AGENT`,`timestamp`:9,`metadata`:{`k`:true}}");
	assert_int_equal(elastic_event_deserialize(line, strlen(line), &ev, NULL), 0);
	s = elastic_event_serialize(&ev, NULL);
	assert_string_equal(s, J("{`name`: `n`, `source`: `AGENT`, `timestamp`: 9, `metadata`: "
				 "{`k`: true}}"));
	free(s);
	elastic_event_release(&ev);
}

struct err_case {
	const char *line; /* with ` for " */
	const char *want; /* substring of the error */
};

static const struct err_case event_err_cases[] = {
	{"", "not valid JSON"},
	{"   ", "not valid JSON"},
	{"[]", "not a JSON object but an array"},
	{"{}", "Event: 'name' is missing"},
	{"{`name`: 1, `source`: `AGENT`}", "Event: 'name' must be a string, not an integer"},
	{"{`name`: `x`}", "Event: 'source' is missing"},
	{"{`name`: `x`, `source`: `agent`}",
	 "Event: 'source' must be \"AGENT\" or \"WORKER\", not \"agent\""},
	{"{`name`: `x`, `source`: null}", "'source' must be \"AGENT\" or \"WORKER\", not null"},
	{"{`name`: `x`, `source`: `AGENT`, `timestamp`: 1.5}",
	 "Event: 'timestamp' must be an integer, not a float"},
	{"{`name`: `x`, `source`: `AGENT`, `timestamp`: true}",
	 "'timestamp' must be an integer, not a boolean"},
	{"{`name`: `x`, `source`: `AGENT`, `timestamp`: `0`}",
	 "'timestamp' must be an integer, not a string"},
	{"{`name`: `x`, `source`: `AGENT`, `metadata`: []}",
	 "Event: 'metadata' must be an object, not an array"},
	{"{`name`: `x`, `source`: `AGENT`, `metadata`: null}", "'metadata' must be an object"},
	{"{`name`: `x`, `source`: `AGENT`, `metadata`: {`a`: [1]}}",
	 "Event: metadata \"a\" must be a string, integer, float, boolean or null, not an array"},
	{"{`name`: `x`, `source`: `AGENT`, `metadata`: {`a`: {}}}", "not an object"},
	{"{`name`: `x`, `source`: `AGENT`, `metadata`: {`a`: [[1]]}}", "nested too deeply"},
	{"{`name`: `x`, `source`: `AGENT`, `extra`: 1}", "Event: unknown key \"extra\""},
	{"{`name`: `x`, `source`: `AGENT`, `n\\u00e9`: 1}", "unknown key \"n\\u00e9\""},
	{"{`name`: `x`, `name`: `y`, `source`: `AGENT`}", "duplicate object key"},
	{"{`name`: `x`, `source`: `AGENT`} x", "not valid JSON"},
	{"{`name`: `x`, `source`: `AGENT`}{}", "not valid JSON"},
	{"{`name`: `a\\u0000b`, `source`: `AGENT`}", "not valid JSON"},
	{"{`name`: `x`, `source`: `AGENT`, `timestamp`: 99999999999999999999}", "too big integer"},
	{"{`name`: `x`, `source`: `AGENT`, `metadata`: {`f`: NaN}}", "not valid JSON"},
	{"{`name`: `x`, `source`: `AGENT`, `metadata`: {`f`: 1e999}}", "not valid JSON"},
	{"{`name`: `\xff`, `source`: `AGENT`}", "not valid JSON"},
	{"{`name`: `\\ud800`, `source`: `AGENT`}", "not valid JSON"},
	{"{`name`: `x`,\n `source`: `AGENT`}", "more than one line"},
	{"[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]"
	 "]]]]]]]]]]]]]]",
	 "nested too deeply"},
	{"{`a`: `[[[[[[[[[[`}", "unknown key \"a\""}, /* brackets inside strings do not count */
};

static void
test_event_deserialize_errors(void **state)
{
	(void)state;
	for (size_t i = 0; i < ARRAY_SIZE(event_err_cases); i++) {
		const char *line = J(event_err_cases[i].line);
		struct elastic_event ev = {.name = (char *)"untouched"};
		char *err = NULL;

		assert_int_equal(elastic_event_deserialize(line, strlen(line), &ev, &err), -EINVAL);
		assert_non_null(err);
		if (!strstr(err, event_err_cases[i].want)) {
			fail_msg("case %zu: '%s' lacks '%s'", i, err, event_err_cases[i].want);
		}
		assert_string_equal(ev.name, "untouched");
		free(err);
		/* reterr may be NULL. */
		assert_int_equal(elastic_event_deserialize(line, strlen(line), &ev, NULL), -EINVAL);
	}
}

static void
test_event_too_long(void **state)
{
	size_t n = EVENTS_LINE_MAX + 1;
	char *line = xmalloc(n + 1);
	struct elastic_event ev;
	char *err = NULL;

	(void)state;
	memset(line, ' ', n);
	line[n] = '\0';
	memcpy(line, "{}", 2);
	assert_int_equal(elastic_event_deserialize(line, n, &ev, &err), -EINVAL);
	assert_non_null(strstr(err, "line too long"));
	free(err);
	/* Exactly at the limit (plus its newline) is parsed. */
	line[EVENTS_LINE_MAX - 1] = '\n';
	assert_int_equal(elastic_event_deserialize(line, EVENTS_LINE_MAX, &ev, &err), -EINVAL);
	assert_non_null(strstr(err, "'name' is missing"));
	free(err);
	assert_int_equal(elastic_event_deserialize(NULL, 0, &ev, &err), -EINVAL);
	free(err);
	free(line);
}

/* ---- RdzvEvent --------------------------------------------------------- */

struct rdzv_case {
	struct rdzv_event ev;
	const char *want; /* with ` for " */
};

static const struct rdzv_case rdzv_cases[] = {
	{{.name = "dynamic_rendezvous.py:DynamicRendezvousHandler.next_rendezvous",
	  .run_id = "job1",
	  .message = "m",
	  .hostname = "host",
	  .pid = 123,
	  .node_state = NODE_STATE_RUNNING},
	 "{`name`: `dynamic_rendezvous.py:DynamicRendezvousHandler.next_rendezvous`, `run_id`: "
	 "`job1`, `message`: `m`, `hostname`: `host`, `pid`: 123, `node_state`: `RUNNING`, "
	 "`master_endpoint`: ``, `rank`: null, `local_id`: null, `error_trace`: ``}"},
	{{.name = "n",
	  .run_id = "r",
	  .message = "msg",
	  .hostname = "h.example.com",
	  .pid = 1,
	  .node_state = NODE_STATE_FAILED,
	  .master_endpoint = "ep:1",
	  .has_rank = true,
	  .rank = 3,
	  .has_local_id = true,
	  .local_id = 0,
	  .error_trace = "Traceback\n  x"},
	 "{`name`: `n`, `run_id`: `r`, `message`: `msg`, `hostname`: `h.example.com`, `pid`: 1, "
	 "`node_state`: `FAILED`, `master_endpoint`: `ep:1`, `rank`: 3, `local_id`: 0, "
	 "`error_trace`: `Traceback\\n  x`}"},
	{{.name = "n", .run_id = "r", .message = "", .hostname = "", .node_state = NODE_STATE_INIT},
	 "{`name`: `n`, `run_id`: `r`, `message`: ``, `hostname`: ``, `pid`: 0, `node_state`: "
	 "`INIT`, `master_endpoint`: ``, `rank`: null, `local_id`: null, `error_trace`: ``}"},
	{{.name = "n",
	  .run_id = "r",
	  .message = "",
	  .hostname = "",
	  .node_state = NODE_STATE_SUCCEEDED,
	  .has_local_id = true,
	  .local_id = 7},
	 "{`name`: `n`, `run_id`: `r`, `message`: ``, `hostname`: ``, `pid`: 0, `node_state`: "
	 "`SUCCEEDED`, `master_endpoint`: ``, `rank`: null, `local_id`: 7, `error_trace`: ``}"},
	/* NULL strings are "". */
	{{.node_state = NODE_STATE_INIT},
	 "{`name`: ``, `run_id`: ``, `message`: ``, `hostname`: ``, `pid`: 0, `node_state`: "
	 "`INIT`, `master_endpoint`: ``, `rank`: null, `local_id`: null, `error_trace`: ``}"},
};

static void
test_rdzv_serialize(void **state)
{
	(void)state;
	for (size_t i = 0; i < ARRAY_SIZE(rdzv_cases); i++) {
		struct rdzv_event back;
		size_t len;
		char *line = rdzv_event_serialize(&rdzv_cases[i].ev, &len), *again, *err = NULL;

		assert_string_equal(line, J(rdzv_cases[i].want));
		assert_int_equal(len, strlen(line));
		assert_int_equal(rdzv_event_deserialize(line, len, &back, &err), 0);
		assert_null(err);
		assert_true(rdzv_event_equal(&back, &rdzv_cases[i].ev));
		again = rdzv_event_serialize(&back, NULL);
		assert_string_equal(again, line);
		free(again);
		free(line);
		rdzv_event_release(&back);
		rdzv_event_release(&back); /* released twice is fine */
	}
}

static void
test_rdzv_equal(void **state)
{
	struct rdzv_event a = rdzv_cases[1].ev, b = rdzv_cases[1].ev;

	(void)state;
	assert_true(rdzv_event_equal(&a, &b));
	b.rank = 4;
	assert_false(rdzv_event_equal(&a, &b));
	b = a;
	b.has_rank = false;
	assert_false(rdzv_event_equal(&a, &b));
	b = a;
	b.node_state = NODE_STATE_RUNNING;
	assert_false(rdzv_event_equal(&a, &b));
	b = a;
	b.error_trace = NULL;
	assert_false(rdzv_event_equal(&a, &b));
	a.master_endpoint = "";
	b = a;
	b.master_endpoint = NULL;
	assert_true(rdzv_event_equal(&a, &b));
}

static const struct err_case rdzv_err_cases[] = {
	{"{`name`: `n`}", "RdzvEvent: 'run_id' is missing"},
	{"{`name`: `n`, `run_id`: `r`, `message`: `m`, `hostname`: `h`, `node_state`: `INIT`}",
	 "RdzvEvent: 'pid' is missing"},
	{"{`name`: `n`, `run_id`: `r`, `message`: `m`, `hostname`: `h`, `pid`: 1}",
	 "RdzvEvent: 'node_state' is missing"},
	{"{`name`: `n`, `run_id`: `r`, `message`: `m`, `hostname`: `h`, `pid`: `1`, "
	 "`node_state`: `INIT`}",
	 "RdzvEvent: 'pid' must be an integer, not a string"},
	{"{`name`: `n`, `run_id`: `r`, `message`: `m`, `hostname`: `h`, `pid`: null, "
	 "`node_state`: `INIT`}",
	 "'pid' must be an integer, not null"},
	{"{`name`: `n`, `run_id`: 5, `message`: `m`, `hostname`: `h`, `pid`: 1, `node_state`: "
	 "`INIT`}",
	 "RdzvEvent: 'run_id' must be a string, not an integer"},
	{"{`name`: `n`, `run_id`: `r`, `message`: `m`, `hostname`: `h`, `pid`: 1, `node_state`: "
	 "`DONE`}",
	 "RdzvEvent: 'node_state' must be \"INIT\", \"RUNNING\", \"SUCCEEDED\" or \"FAILED\", "
	 "not \"DONE\""},
	{"{`name`: `n`, `run_id`: `r`, `message`: `m`, `hostname`: `h`, `pid`: 1, `node_state`: "
	 "`INIT`, `rank`: 1.5}",
	 "RdzvEvent: 'rank' must be an integer or null, not a float"},
	{"{`name`: `n`, `run_id`: `r`, `message`: `m`, `hostname`: `h`, `pid`: 1, `node_state`: "
	 "`INIT`, `local_id`: `0`}",
	 "'local_id' must be an integer or null, not a string"},
	{"{`name`: `n`, `run_id`: `r`, `message`: `m`, `hostname`: `h`, `pid`: 1, `node_state`: "
	 "`INIT`, `master_endpoint`: null}",
	 "'master_endpoint' must be a string, not null"},
	{"{`name`: `n`, `run_id`: `r`, `message`: `m`, `hostname`: `h`, `pid`: 1, `node_state`: "
	 "`INIT`, `timestamp`: 1}",
	 "RdzvEvent: unknown key \"timestamp\""},
	{"{`name`: `n`, `node_state`: `INIT`, `node_state`: `INIT`}", "duplicate object key"},
};

static void
test_rdzv_deserialize_errors(void **state)
{
	(void)state;
	for (size_t i = 0; i < ARRAY_SIZE(rdzv_err_cases); i++) {
		const char *line = J(rdzv_err_cases[i].line);
		struct rdzv_event ev = {.name = "untouched"};
		char *err = NULL;

		assert_int_equal(rdzv_event_deserialize(line, strlen(line), &ev, &err), -EINVAL);
		assert_non_null(err);
		if (!strstr(err, rdzv_err_cases[i].want)) {
			fail_msg("case %zu: '%s' lacks '%s'", i, err, rdzv_err_cases[i].want);
		}
		assert_string_equal(ev.name, "untouched");
		free(err);
	}
}

static void
test_rdzv_defaults(void **state)
{
	const char *line = J("{`pid`: 9, `node_state`: `FAILED`, `hostname`: `h`, `message`: "
			     "`m`, `run_id`: `r`, `name`: `n`, `rank`: null}");
	struct rdzv_event ev;
	char *s;

	(void)state;
	assert_int_equal(rdzv_event_deserialize(line, strlen(line), &ev, NULL), 0);
	assert_false(ev.has_rank);
	assert_false(ev.has_local_id);
	assert_string_equal(ev.master_endpoint, "");
	assert_string_equal(ev.error_trace, "");
	s = rdzv_event_serialize(&ev, NULL);
	assert_string_equal(s, J("{`name`: `n`, `run_id`: `r`, `message`: `m`, `hostname`: `h`, "
				 "`pid`: 9, `node_state`: `FAILED`, `master_endpoint`: ``, "
				 "`rank`: null, `local_id`: null, `error_trace`: ``}"));
	free(s);
	rdzv_event_release(&ev);
}

/* ---- any line ---------------------------------------------------------- */

static void
test_parse_line(void **state)
{
	const char *ev_line = J(event_ok_lines[2]);
	const char *rdzv_line = J(rdzv_cases[1].want);
	struct events_line l;
	char *err = NULL, *s;

	(void)state;
	assert_int_equal(events_parse_line(ev_line, strlen(ev_line), &l, &err), 0);
	assert_int_equal(l.kind, EVENTS_KIND_EVENT);
	assert_string_equal(l.event.name, "watchdog started");
	s = events_line_serialize(&l, NULL);
	assert_string_equal(s, ev_line);
	free(s);
	events_line_release(&l);

	assert_int_equal(events_parse_line(rdzv_line, strlen(rdzv_line), &l, &err), 0);
	assert_int_equal(l.kind, EVENTS_KIND_RDZV);
	assert_int_equal(l.rdzv.rank, 3);
	s = events_line_serialize(&l, NULL);
	assert_string_equal(s, rdzv_line);
	free(s);
	events_line_release(&l);

	s = (char *)J("{`name`: `x`}");
	assert_int_equal(events_parse_line(s, strlen(s), &l, &err), -EINVAL);
	assert_non_null(strstr(err, "neither an Event (no 'source') nor an RdzvEvent"));
	free(err);
	/* An Event with a node_state key is an Event with an unknown key. */
	s = (char *)J("{`name`: `x`, `source`: `AGENT`, `node_state`: `INIT`}");
	assert_int_equal(events_parse_line(s, strlen(s), &l, &err), -EINVAL);
	assert_non_null(strstr(err, "Event: unknown key \"node_state\""));
	free(err);
	s = (char *)J("{`name`: `x`, `node_state`: `INIT`}");
	assert_int_equal(events_parse_line(s, strlen(s), &l, &err), -EINVAL);
	assert_non_null(strstr(err, "RdzvEvent: 'run_id' is missing"));
	free(err);
	assert_int_equal(events_parse_line("nope", 4, &l, &err), -EINVAL);
	assert_non_null(strstr(err, "not valid JSON"));
	free(err);
}

/* ---- torchrun's worker status events ------------------------------------- */

static void
test_status_events(void **state)
{
	/* torch 1.13's _construct_event, plus torch 2.x's trailing duration_ms. */
	const struct events_status worker = {
		.state = "FAILED",
		.source = EVENT_SOURCE_WORKER,
		.run_id = "job-7",
		.role = "trainer",
		.hostname = "node1.example.com",
		.rdzv_backend = "static",
		.entry_point = "python3",
		.group_rank = 1,
		.group_world_size = 2,
		.total_run_time = 12,
		.agent_restarts = 2,
		.raw_error = "{\"message\": \"<NONE>\"}",
		.worker = true,
		.global_rank = 3,
		.local_rank = 1,
		.role_rank = 3,
		.role_world_size = 4,
		.worker_pid = 4242,
	};
	struct events_status agent = worker;
	struct elastic_event ev;
	char *s;

	(void)state;
	elastic_event_init_status(&ev, &worker);
	s = elastic_event_serialize(&ev, NULL);
	assert_string_equal(
		s,
		J("{`name`: `torchelastic.worker.status.FAILED`, `source`: `WORKER`, `timestamp`: "
		  "0, `metadata`: {`run_id`: `job-7`, `global_rank`: 3, `group_rank`: 1, "
		  "`worker_id`: `4242`, `role`: `trainer`, `hostname`: `node1.example.com`, "
		  "`state`: `FAILED`, `total_run_time`: 12, `rdzv_backend`: `static`, "
		  "`raw_error`: `{\\`message\\`: \\`<NONE>\\`}`, `metadata`: "
		  "`{\\`group_world_size\\`: 2, \\`entry_point\\`: \\`python3\\`, "
		  "\\`local_rank\\`: [1], \\`role_rank\\`: [3], \\`role_world_size\\`: [4]}`, "
		  "`agent_restarts`: 2, `duration_ms`: null}}"));
	free(s);
	elastic_event_release(&ev);

	agent.state = "SUCCEEDED";
	agent.source = EVENT_SOURCE_AGENT;
	agent.worker = false;
	agent.raw_error = NULL;
	elastic_event_init_status(&ev, &agent);
	s = elastic_event_serialize(&ev, NULL);
	assert_string_equal(
		s, J("{`name`: `torchelastic.worker.status.SUCCEEDED`, `source`: `AGENT`, "
		     "`timestamp`: 0, `metadata`: {`run_id`: `job-7`, `global_rank`: null, "
		     "`group_rank`: 1, `worker_id`: null, `role`: `trainer`, `hostname`: "
		     "`node1.example.com`, `state`: `SUCCEEDED`, `total_run_time`: 12, "
		     "`rdzv_backend`: `static`, `raw_error`: null, `metadata`: "
		     "`{\\`group_world_size\\`: 2, \\`entry_point\\`: \\`python3\\`}`, "
		     "`agent_restarts`: 2, `duration_ms`: null}}"));
	free(s);
	elastic_event_release(&ev);

	/* torch 2.x's record_duration events; before the first round group_rank
	 * and group_world_size are null. */
	agent.state = "RENDEZVOUS";
	agent.timestamp = 1700000000000;
	agent.group_rank = -1;
	agent.group_world_size = -1;
	agent.has_duration = true;
	agent.duration_ms = 12.5;
	elastic_event_init_status(&ev, &agent);
	s = elastic_event_serialize(&ev, NULL);
	assert_string_equal(
		s, J("{`name`: `torchelastic.worker.status.RENDEZVOUS`, `source`: `AGENT`, "
		     "`timestamp`: 1700000000000, `metadata`: {`run_id`: `job-7`, `global_rank`: "
		     "null, `group_rank`: null, `worker_id`: null, `role`: `trainer`, `hostname`: "
		     "`node1.example.com`, `state`: `RENDEZVOUS`, `total_run_time`: 12, "
		     "`rdzv_backend`: `static`, `raw_error`: null, `metadata`: "
		     "`{\\`group_world_size\\`: null, \\`entry_point\\`: \\`python3\\`}`, "
		     "`agent_restarts`: 2, `duration_ms`: 12.5}}"));
	free(s);
	elastic_event_release(&ev);

	/* A worker never started has no worker_id; a NaN duration is null. */
	agent = worker;
	agent.worker_pid = 0;
	agent.has_duration = true;
	agent.duration_ms = NAN;
	agent.state = NULL;
	elastic_event_init_status(&ev, &agent);
	assert_string_equal(ev.name, "torchelastic.worker.status.UNKNOWN");
	assert_true(json_is_null(json_object_get(ev.metadata, "worker_id")));
	assert_true(json_is_null(json_object_get(ev.metadata, "duration_ms")));
	elastic_event_release(&ev);
}

/* ---- the recorder ------------------------------------------------------- */

static void
make_event(struct elastic_event *ev, const char *name, long long i)
{
	elastic_event_init(ev, name, EVENT_SOURCE_AGENT, 1000 + i);
	elastic_event_set_int(ev, "i", i);
}

static int
record_one(struct events *e, const char *name, long long i)
{
	struct elastic_event ev;
	int r;

	make_event(&ev, name, i);
	r = events_record(e, &ev);
	elastic_event_release(&ev);
	return r;
}

static void
test_disabled(void **state)
{
	struct events *e = events_new(4);
	struct events_stats st;

	(void)state;
	assert_false(events_enabled(NULL));
	assert_false(events_enabled(e));
	assert_int_equal(events_get_sink(e), EVENTS_SINK_NULL);
	assert_int_equal(events_get_sink(NULL), EVENTS_SINK_NULL);
	/* Null sink, no subscriber: nothing is built, nothing kept. */
	assert_int_equal(record_one(e, "a", 1), 0);
	assert_int_equal(events_record_rdzv(e, "n", NODE_STATE_INIT, -1, "%s", "m"), 0);
	assert_int_equal(events_last_seq(e), 0);
	assert_int_equal(events_first_seq(e), 0);
	assert_null(events_ring_get(e, 1));
	events_get_stats(e, &st);
	assert_int_equal(st.recorded, 0);
	/* A NULL recorder takes everything. */
	assert_int_equal(record_one(NULL, "a", 1), 0);
	assert_int_equal(events_record_rdzv(NULL, "n", NODE_STATE_INIT, -1, "m"), 0);
	assert_int_equal(events_last_seq(NULL), 0);
	assert_null(events_ring_get(NULL, 1));
	events_get_stats(NULL, &st);
	assert_int_equal(st.recorded, 0);
	events_free(e);
	events_free(NULL);
}

struct seen {
	size_t n;
	uint64_t seqs[16];
	char names[16][32];
	struct events *e;
	int self_id;
	int other_id;
	int nested_ret;
};

static void
seen_cb(const struct events_entry *entry, void *arg)
{
	struct seen *s = arg;

	if (s->n < ARRAY_SIZE(s->seqs)) {
		s->seqs[s->n] = entry->seq;
		snprintf(s->names[s->n], sizeof(s->names[0]), "%s", entry->name);
	}
	assert_int_equal(strlen(entry->line), entry->len);
	assert_int_equal(entry->line[0], '{');
	s->n++;
	if (s->e) {
		s->nested_ret = record_one(s->e, "nested", 0);
	}
}

static void
test_ring(void **state)
{
	struct events *e = events_new(3);
	struct seen s = {0};
	const struct events_entry *en;
	struct events_stats st;
	int id;

	(void)state;
	id = events_subscribe(e, seen_cb, &s);
	assert_true(id > 0);
	assert_true(events_enabled(e));
	for (int i = 1; i <= 5; i++) {
		assert_int_equal(record_one(e, "ev", i), 0);
	}
	assert_int_equal(s.n, 5);
	assert_int_equal(s.seqs[4], 5);
	assert_int_equal(events_last_seq(e), 5);
	assert_int_equal(events_first_seq(e), 3);
	assert_null(events_ring_get(e, 2));
	assert_null(events_ring_get(e, 6));
	assert_null(events_ring_get(e, 0));
	for (uint64_t q = 3; q <= 5; q++) {
		char *want;

		en = events_ring_get(e, q);
		assert_non_null(en);
		assert_int_equal(en->seq, q);
		assert_int_equal(en->kind, EVENTS_KIND_EVENT);
		assert_int_equal(en->timestamp, 1000 + (int64_t)q);
		assert_string_equal(en->name, "ev");
		want = xasprintf("{\"name\": \"ev\", \"source\": \"AGENT\", \"timestamp\": %d, "
				 "\"metadata\": {\"i\": %d}}",
				 1000 + (int)q, (int)q);
		assert_string_equal(en->line, want);
		assert_int_equal(en->len, strlen(want));
		free(want);
	}
	assert_int_equal(events_record_rdzv(e, "rdzv_x.c:f", NODE_STATE_RUNNING, 2, "hi %d", 7), 0);
	en = events_ring_get(e, 6);
	assert_int_equal(en->kind, EVENTS_KIND_RDZV);
	assert_string_equal(en->name, "rdzv_x.c:f");
	assert_true(en->timestamp > 1600000000000LL);
	events_get_stats(e, &st);
	assert_int_equal(st.recorded, 6);
	assert_int_equal(st.ring_dropped, 3);
	assert_int_equal(st.write_errors, 0);

	/* Unsubscribed, with the null sink: disabled again. */
	events_unsubscribe(e, id);
	events_unsubscribe(e, id);
	events_unsubscribe(e, 12345);
	assert_false(events_enabled(e));
	assert_int_equal(record_one(e, "ev", 7), 0);
	assert_int_equal(events_last_seq(e), 6);
	events_free(e);
}

static void
test_ring_size_zero(void **state)
{
	struct events *e = events_new(0);
	struct seen s = {0};

	(void)state;
	events_subscribe(e, seen_cb, &s);
	assert_int_equal(record_one(e, "a", 1), 0);
	assert_int_equal(record_one(e, "b", 2), 0);
	assert_int_equal(s.n, 2);
	assert_string_equal(s.names[1], "b");
	assert_int_equal(events_last_seq(e), 2);
	assert_int_equal(events_first_seq(e), 0);
	assert_null(events_ring_get(e, 2));
	events_free(e);

	/* A huge size is capped. */
	e = events_new((size_t)EVENTS_RING_MAX * 4);
	events_subscribe(e, seen_cb, &s);
	for (int i = 0; i < EVENTS_RING_MAX + 2; i++) {
		s.n = 0;
		record_one(e, "x", i);
	}
	assert_int_equal(events_first_seq(e), 3);
	assert_int_equal(events_last_seq(e), EVENTS_RING_MAX + 2);
	events_free(e);
}

static void
test_ring_bytes_and_too_big(void **state)
{
	struct events *e = events_new(100);
	struct seen s = {0};
	struct elastic_event ev;
	struct events_stats st;
	size_t big = EVENTS_LINE_MAX - 200;
	char *value = xmalloc(big + 1);

	(void)state;
	memset(value, 'v', big);
	value[big] = '\0';
	events_subscribe(e, seen_cb, &s);
	for (int i = 0; i < 10; i++) {
		elastic_event_init(&ev, "big", EVENT_SOURCE_WORKER, i);
		elastic_event_set_string(&ev, "v", value);
		assert_int_equal(events_record(e, &ev), 0);
		elastic_event_release(&ev);
	}
	/* 10 lines of ~1 MiB do not fit in EVENTS_RING_BYTES_MAX. */
	assert_int_equal(events_last_seq(e), 10);
	assert_true(events_first_seq(e) > 1);
	assert_true((events_last_seq(e) - events_first_seq(e) + 1) * big <= EVENTS_RING_BYTES_MAX);
	assert_non_null(events_ring_get(e, 10));

	/* Over the line limit: refused, no sequence number used. */
	free(value);
	value = xmalloc(EVENTS_LINE_MAX + 1);
	memset(value, 'w', EVENTS_LINE_MAX);
	value[EVENTS_LINE_MAX] = '\0';
	elastic_event_init(&ev, "huge", EVENT_SOURCE_WORKER, 0);
	elastic_event_set_string(&ev, "v", value);
	s.n = 0;
	assert_int_equal(events_record(e, &ev), -E2BIG);
	assert_int_equal(s.n, 0);
	assert_int_equal(events_last_seq(e), 10);
	events_get_stats(e, &st);
	assert_int_equal(st.too_big, 1);
	elastic_event_release(&ev);
	free(value);
	events_free(e);
}

static void
unsub_self_cb(const struct events_entry *entry, void *arg)
{
	struct seen *s = arg;

	s->n++;
	events_unsubscribe(s->e, s->self_id);
	if (s->other_id) {
		events_unsubscribe(s->e, s->other_id);
	}
}

static void
test_subscribers(void **state)
{
	struct events *e = events_new(8);
	struct seen a = {0}, b = {0}, c = {0};

	(void)state;
	/* A subscriber that records is refused (-EBUSY), the outer record is not. */
	a.e = e;
	a.nested_ret = 1;
	a.self_id = events_subscribe(e, seen_cb, &a);
	assert_int_equal(record_one(e, "x", 1), 0);
	assert_int_equal(a.nested_ret, -EBUSY);
	assert_int_equal(a.n, 1);
	assert_int_equal(events_last_seq(e), 1);
	a.e = NULL;

	/* b removes itself and c during a dispatch: c is not called, a is. */
	b.e = e;
	b.self_id = events_subscribe(e, unsub_self_cb, &b);
	c.self_id = events_subscribe(e, seen_cb, &c);
	b.other_id = c.self_id;
	assert_int_equal(record_one(e, "y", 2), 0);
	assert_int_equal(a.n, 2);
	assert_int_equal(b.n, 1);
	assert_int_equal(c.n, 0);
	assert_int_equal(record_one(e, "z", 3), 0);
	assert_int_equal(a.n, 3);
	assert_int_equal(b.n, 1);
	assert_int_equal(c.n, 0);
	assert_true(events_enabled(e));
	events_unsubscribe(e, a.self_id);
	assert_false(events_enabled(e));
	events_free(e);
}

static void
test_file_sink(void **state)
{
	_cleanup_free_ char *path = path_in_tmp("sub/dir/events.jsonl");
	struct events *e1 = events_new(4), *e2 = events_new(0);
	struct stat st;
	char *err = NULL, *text, *p;
	size_t n = 0;

	(void)state;
	assert_int_equal(events_set_sink(e1, EVENTS_SINK_FILE, path, &err), 0);
	assert_null(err);
	assert_true(events_enabled(e1));
	assert_int_equal(events_get_sink(e1), EVENTS_SINK_FILE);
	assert_int_equal(stat(path, &st), 0);
	assert_int_equal(st.st_mode & 0777, 0644);
	assert_int_equal(events_set_sink(e2, EVENTS_SINK_FILE, path, &err), 0);
	/* Two writers append to one file, alternately: whole lines only. */
	for (int i = 0; i < 50; i++) {
		assert_int_equal(record_one(i % 2 ? e1 : e2, i % 2 ? "one" : "two", i), 0);
	}
	assert_int_equal(events_record_rdzv(e1, "rdzv_t.c:f", NODE_STATE_FAILED, -1, "boom"), 0);
	events_free(e1);
	events_free(e2);
	text = slurp(path);
	assert_int_equal(count_lines(text), 51);
	for (p = text; *p; n++) {
		char *nl = strchr(p, '\n');
		struct events_line l;

		assert_non_null(nl);
		assert_int_equal(events_parse_line(p, (size_t)(nl - p + 1), &l, &err), 0);
		if (n < 50) {
			assert_int_equal(json_integer_value(json_object_get(l.event.metadata, "i")),
					 (long long)n);
		} else {
			assert_int_equal(l.kind, EVENTS_KIND_RDZV);
			assert_string_equal(l.rdzv.error_trace, "boom");
			assert_int_equal(l.rdzv.pid, getpid());
		}
		events_line_release(&l);
		p = nl + 1;
	}
	free(text);

	/* Appends: a second recorder adds to what is there. */
	e1 = events_new(1);
	assert_int_equal(events_set_sink(e1, EVENTS_SINK_FILE, path, NULL), 0);
	record_one(e1, "again", 1);
	/* Switching to null closes the file and disables. */
	assert_int_equal(events_set_sink(e1, EVENTS_SINK_NULL, NULL, NULL), 0);
	assert_false(events_enabled(e1));
	record_one(e1, "dropped", 1);
	events_free(e1);
	text = slurp(path);
	assert_int_equal(count_lines(text), 52);
	assert_null(strstr(text, "dropped"));
	free(text);
}

static void
test_file_sink_errors(void **state)
{
	struct events *e = events_new(1);
	_cleanup_free_ char *file = path_in_tmp("plain");
	_cleanup_free_ char *under = path_in_tmp("plain/x.jsonl");
	_cleanup_free_ char *fifo = path_in_tmp("fifo");
	char *err = NULL;
	int fd;

	(void)state;
	assert_int_equal(events_set_sink(e, EVENTS_SINK_FILE, NULL, &err), -EINVAL);
	assert_string_equal(err, "the event log needs a file name");
	free(err);
	assert_int_equal(events_set_sink(e, EVENTS_SINK_FILE, "", NULL), -EINVAL);
	assert_int_equal(events_set_sink(e, EVENTS_SINK_FILE, tmpdir, &err), -EISDIR);
	assert_non_null(strstr(err, "cannot open the event log '"));
	assert_non_null(strstr(err, "Is a directory"));
	free(err);
	fd = open(file, O_WRONLY | O_CREAT, 0644);
	assert_true(fd >= 0);
	close(fd);
	assert_int_equal(events_set_sink(e, EVENTS_SINK_FILE, under, &err), -ENOTDIR);
	free(err);
	assert_int_equal(events_get_sink(e), EVENTS_SINK_NULL);
	/* A FIFO nobody reads is refused at once, never waited on. */
	assert_int_equal(mkfifo(fifo, 0600), 0);
	assert_int_equal(events_set_sink(e, EVENTS_SINK_FILE, fifo, &err), -ENXIO);
	free(err);
	events_free(e);
}

static void
test_fifo_sink(void **state)
{
	_cleanup_free_ char *fifo = path_in_tmp("fifo2");
	struct events *e = events_new(2);
	struct events_stats st;
	char buf[512];
	ssize_t n;
	int rfd, r = 0;

	(void)state;
	assert_int_equal(mkfifo(fifo, 0600), 0);
	rfd = open(fifo, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
	assert_true(rfd >= 0);
	assert_int_equal(events_set_sink(e, EVENTS_SINK_FILE, fifo, NULL), 0);
	assert_int_equal(record_one(e, "p", 1), 0);
	n = read(rfd, buf, sizeof(buf) - 1);
	assert_true(n > 0);
	buf[n] = '\0';
	assert_string_equal(buf, "{\"name\": \"p\", \"source\": \"AGENT\", \"timestamp\": 1001, "
				 "\"metadata\": {\"i\": 1}}\n");
	/* Nobody reads: once the pipe is full, lines are dropped, not waited for. */
	for (int i = 0; i < 100000 && r == 0; i++) {
		r = record_one(e, "fill", i);
	}
	assert_int_equal(r, -EAGAIN);
	events_get_stats(e, &st);
	assert_int_equal(st.write_errors, 1);
	assert_int_equal(st.last_errno, EAGAIN);
	/* The event still reached the ring. */
	assert_non_null(events_ring_get(e, events_last_seq(e)));
	close(rfd);
	events_free(e);
}

static void
test_console_sink(void **state)
{
	_cleanup_free_ char *path = path_in_tmp("console");
	struct events *e = events_new(1);
	int saved = dup(STDERR_FILENO), fd;
	char *text;

	(void)state;
	fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
	assert_true(fd >= 0 && saved >= 0);
	dup2(fd, STDERR_FILENO);
	close(fd);
	assert_int_equal(events_set_sink(e, EVENTS_SINK_CONSOLE, NULL, NULL), 0);
	assert_true(events_enabled(e));
	record_one(e, "c", 1);
	events_free(e); /* stderr stays open */
	assert_true(fcntl(STDERR_FILENO, F_GETFD) >= 0);
	dup2(saved, STDERR_FILENO);
	close(saved);
	text = slurp(path);
	assert_string_equal(text, "{\"name\": \"c\", \"source\": \"AGENT\", \"timestamp\": 1001, "
				  "\"metadata\": {\"i\": 1}}\n");
	free(text);
}

static void
test_record_rdzv(void **state)
{
	struct events *e = events_new(4);
	struct seen s = {0};
	struct rdzv_event ev;
	const struct events_entry *en;
	char *err = NULL;

	(void)state;
	events_subscribe(e, seen_cb, &s);
	/* Defaults: pid getpid(), local_id null, hostname the FQDN, run_id "". */
	assert_int_equal(events_record_rdzv(e, "a.c:f", NODE_STATE_INIT, -1, "x"), 0);
	en = events_ring_get(e, 1);
	assert_int_equal(rdzv_event_deserialize(en->line, en->len, &ev, &err), 0);
	assert_int_equal(ev.pid, getpid());
	assert_false(ev.has_local_id);
	assert_string_equal(ev.hostname, host_fqdn());
	assert_string_equal(ev.run_id, "");
	assert_string_equal(ev.error_trace, "");
	rdzv_event_release(&ev);

	events_set_identity(e, "job", "node7", 77, 0);
	events_set_identity(e, "job", "node7", 77, 0); /* again: replaces */
	assert_int_equal(events_record_rdzv(e, "rdzv_c10d.c:next_rendezvous", NODE_STATE_FAILED, 2,
					    "RendezvousTimeoutError: %s after %d s", "timed out",
					    600),
			 0);
	en = events_ring_get(e, 2);
	assert_string_equal(
		en->line,
		"{\"name\": \"rdzv_c10d.c:next_rendezvous\", \"run_id\": \"job\", \"message\": "
		"\"RendezvousTimeoutError: timed out after 600 s\", \"hostname\": \"node7\", "
		"\"pid\": 77, \"node_state\": \"FAILED\", \"master_endpoint\": \"\", \"rank\": 2, "
		"\"local_id\": 0, \"error_trace\": \"RendezvousTimeoutError: timed out after 600 "
		"s\"}");

	/* A full RdzvEvent as the caller fills it in. */
	ev = rdzv_cases[1].ev;
	assert_int_equal(events_record_rdzv_event(e, &ev), 0);
	assert_string_equal(events_ring_get(e, 3)->line, J(rdzv_cases[1].want));
	events_free(e);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_names),
		cmocka_unit_test(test_event_serialize),
		cmocka_unit_test(test_event_setters),
		cmocka_unit_test(test_event_equal),
		cmocka_unit_test(test_event_deserialize_ok),
		cmocka_unit_test(test_event_defaults),
		cmocka_unit_test(test_event_deserialize_errors),
		cmocka_unit_test(test_event_too_long),
		cmocka_unit_test(test_rdzv_serialize),
		cmocka_unit_test(test_rdzv_equal),
		cmocka_unit_test(test_rdzv_deserialize_errors),
		cmocka_unit_test(test_rdzv_defaults),
		cmocka_unit_test(test_parse_line),
		cmocka_unit_test(test_status_events),
		cmocka_unit_test(test_disabled),
		cmocka_unit_test(test_ring),
		cmocka_unit_test(test_ring_size_zero),
		cmocka_unit_test(test_ring_bytes_and_too_big),
		cmocka_unit_test(test_subscribers),
		cmocka_unit_test(test_file_sink),
		cmocka_unit_test(test_file_sink_errors),
		cmocka_unit_test(test_fifo_sink),
		cmocka_unit_test(test_console_sink),
		cmocka_unit_test(test_record_rdzv),
	};

	return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
