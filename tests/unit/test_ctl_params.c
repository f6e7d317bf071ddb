/* The control plane's pure parts: query-string parsing and parameter
 * validation as torch 2.x's WorkerServer handlers (lower-case names known to
 * the handler, booleans exactly true/false, integers in range, 400 reasons),
 * the handler table's own consistency, the default socket paths, and the
 * parser of worker-server responses used by the proxy. */
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
#include <sys/stat.h>

#include "ctl.h"
#include "ctl_handlers.h"
#include "ctl_params.h"
#include "ctl_proxy.h"
#include "util.h"

/* ---- query parsing ----------------------------------------------------------- */

struct parse_case {
	const char *name;
	const char *query;
	int ret;
	size_t n;
	const char *pairs[6][2];
	const char *reason; /* a substring of the reason, for errors */
};

static const struct parse_case parse_cases[] = {
	{"empty", "", 0, 0, {{NULL}}, NULL},
	{"one", "rank=1", 0, 1, {{"rank", "1"}}, NULL},
	{"two", "rank=1&stream=stderr", 0, 2, {{"rank", "1"}, {"stream", "stderr"}}, NULL},
	{"empty pairs skipped", "&a=1&&b=2&", 0, 2, {{"a", "1"}, {"b", "2"}}, NULL},
	{"no equals: empty value", "follow", 0, 1, {{"follow", ""}}, NULL},
	{"empty value", "level=", 0, 1, {{"level", ""}}, NULL},
	{"equals in value", "a=b=c", 0, 1, {{"a", "b=c"}}, NULL},
	{"plus is a space", "msg=a+b", 0, 1, {{"msg", "a b"}}, NULL},
	{"percent escapes", "msg=%41%2b%2F%7e", 0, 1, {{"msg", "A+/~"}}, NULL},
	{"escaped name", "f%6Fllow=true", 0, 1, {{"follow", "true"}}, NULL},
	{"duplicates kept for validation", "a=1&a=2", 0, 2, {{"a", "1"}, {"a", "2"}}, NULL},
	{"upper case kept for validation", "Rank=1", 0, 1, {{"Rank", "1"}}, NULL},
	{"empty name", "=1", -EINVAL, 0, {{NULL}}, "empty parameter name"},
	{"bad escape", "a=%zz", -EINVAL, 0, {{NULL}}, "bad percent-encoding"},
	{"truncated escape", "a=%4", -EINVAL, 0, {{NULL}}, "bad percent-encoding"},
	{"lone percent", "a=%", -EINVAL, 0, {{NULL}}, "bad percent-encoding"},
	{"NUL byte", "a=%00", -EINVAL, 0, {{NULL}}, "NUL byte"},
	{"control bytes shown as ?", "a=\x01%zz", -EINVAL, 0, {{NULL}}, "in '?%zz'"},
};

static void
test_query_parse(void **state)
{
	for (size_t i = 0; i < ARRAY_SIZE(parse_cases); i++) {
		const struct parse_case *t = &parse_cases[i];
		struct ctl_query q = {0};
		char *err = NULL;
		int r = ctl_query_parse(t->query, strlen(t->query), &q, &err);

		if (r != t->ret) {
			fail_msg("%s: got %d (%s), want %d", t->name, r, err ? err : "", t->ret);
		}
		if (r == 0) {
			assert_null(err);
			if (q.n != t->n) {
				fail_msg("%s: %zu pairs, want %zu", t->name, q.n, t->n);
			}
			for (size_t k = 0; k < q.n; k++) {
				assert_string_equal(q.p[k].name, t->pairs[k][0]);
				assert_string_equal(q.p[k].value, t->pairs[k][1]);
			}
		} else {
			assert_non_null(err);
			if (!strstr(err, t->reason)) {
				fail_msg("%s: reason '%s' lacks '%s'", t->name, err, t->reason);
			}
			assert_null(strchr(err, '\n'));
		}
		free(err);
		ctl_query_release(&q);
		assert_int_equal(q.n, 0);
	}
}

static void
test_query_limits(void **state)
{
	struct ctl_query q = {0};
	char *err = NULL, *s;
	char big[CTL_QUERY_MAX + 2];

	/* CTL_PARAMS_MAX pairs fit, one more does not. */
	s = xstrdup("");
	for (int i = 0; i < CTL_PARAMS_MAX; i++) {
		char *next = xasprintf("%s%sp%d=%d", s, i ? "&" : "", i, i);

		free(s);
		s = next;
	}
	assert_int_equal(ctl_query_parse(s, strlen(s), &q, &err), 0);
	assert_int_equal(q.n, CTL_PARAMS_MAX);
	assert_int_equal(ctl_query_parse("x=1", 3, &q, &err), -EINVAL);
	assert_non_null(strstr(err, "more than 32 parameters"));
	free(err);
	err = NULL;
	ctl_query_release(&q);
	free(s);

	/* A name and a value at their limits; one byte more is refused. */
	s = xasprintf("%0*d=%0*d", CTL_PARAM_NAME_MAX, 0, CTL_PARAM_VALUE_MAX, 0);
	assert_int_equal(ctl_query_parse(s, strlen(s), &q, &err), 0);
	ctl_query_release(&q);
	free(s);
	s = xasprintf("%0*d=1", CTL_PARAM_NAME_MAX + 1, 0);
	assert_int_equal(ctl_query_parse(s, strlen(s), &q, &err), -EINVAL);
	assert_non_null(strstr(err, "parameter name longer than 64 bytes"));
	free(err);
	err = NULL;
	ctl_query_release(&q);
	free(s);
	s = xasprintf("v=%0*d", CTL_PARAM_VALUE_MAX + 1, 0);
	assert_int_equal(ctl_query_parse(s, strlen(s), &q, &err), -EINVAL);
	assert_non_null(strstr(err, "Invalid value for v: longer than 4096 bytes"));
	free(err);
	err = NULL;
	ctl_query_release(&q);
	free(s);

	/* The whole string. */
	memset(big, 'a', sizeof(big));
	assert_int_equal(ctl_query_parse(big, CTL_QUERY_MAX + 1, &q, &err), -EINVAL);
	assert_non_null(strstr(err, "longer than"));
	free(err);
	ctl_query_release(&q);

	/* Appending a form body to a query string. */
	assert_int_equal(ctl_query_parse("a=1", 3, &q, &err), 0);
	assert_int_equal(ctl_query_parse("b=2", 3, &q, &err), 0);
	assert_int_equal(q.n, 2);
	assert_string_equal(q.p[1].name, "b");
	ctl_query_release(&q);
}

/* ---- validation ----------------------------------------------------------------- */

static const char *const streams[] = {"stdout", "stderr", NULL};

static const struct ctl_param_spec spec[] = {
	{.name = "rank", .type = CTL_PARAM_INT, .min = 0, .max = 7},
	{.name = "stream", .type = CTL_PARAM_CHOICE, .choices = streams},
	{.name = "follow", .type = CTL_PARAM_BOOL},
	{.name = "signal", .type = CTL_PARAM_SIGNAL},
	{.name = "note", .type = CTL_PARAM_STRING},
};

static const struct ctl_param_spec required_spec[] = {
	{.name = "signal", .type = CTL_PARAM_SIGNAL, .required = true},
};

struct validate_case {
	const char *name;
	const char *query;
	const char *reason; /* NULL: accepted */
	/* When accepted: which are set, and their values. */
	bool set[5];
	long long i[5];
	bool b;
};

#define BAD(n, q, r)                                                                               \
	{                                                                                          \
		.name = n, .query = q, .reason = r                                                 \
	}

static const struct validate_case validate_cases[] = {
	{"nothing", "", NULL, {0}, {0}, false},
	{"int", "rank=3", NULL, {1, 0, 0, 0, 0}, {3}, false},
	{"int bounds", "rank=0", NULL, {1}, {0}, false},
	{"int max", "rank=7", NULL, {1}, {7}, false},
	{"choice", "stream=stderr", NULL, {0, 1}, {0, 1}, false},
	{"bool true", "follow=true", NULL, {0, 0, 1}, {0}, true},
	{"bool false", "follow=false", NULL, {0, 0, 1}, {0}, false},
	{"signal name", "signal=SIGUSR1", NULL, {0, 0, 0, 1}, {0, 0, 0, SIGUSR1}, false},
	{"signal short name", "signal=TERM", NULL, {0, 0, 0, 1}, {0, 0, 0, SIGTERM}, false},
	{"signal number", "signal=10", NULL, {0, 0, 0, 1}, {0, 0, 0, 10}, false},
	{"string", "note=anything+at+all", NULL, {0, 0, 0, 0, 1}, {0}, false},
	{"all",
	 "rank=1&stream=stdout&follow=true&signal=9&note=x",
	 NULL,
	 {1, 1, 1, 1, 1},
	 {1, 0, 0, 9},
	 true},
	/* torch 2.x's words for booleans and unknown names. */
	BAD("bool True", "follow=True", "Invalid value for follow valid values are true or false"),
	BAD("bool 1", "follow=1", "Invalid value for follow valid values are true or false"),
	BAD("bool empty", "follow", "Invalid value for follow valid values are true or false"),
	BAD("unknown", "unknownkey=1",
	    "Invalid parameters - unexpected param passed in: unknownkey"),
	BAD("upper case", "Rank=1",
	    "Invalid parameters - unexpected param passed in: Rank (parameter names are "
	    "lower-case)"),
	BAD("camel case", "includeCollectives=true",
	    "unexpected param passed in: includeCollectives (parameter names are lower-case)"),
	BAD("int not a number", "rank=x",
	    "Invalid value for rank: expected an integer from 0 to 7, not 'x'"),
	BAD("int too big", "rank=8",
	    "Invalid value for rank: expected an integer from 0 to 7, not '8'"),
	BAD("int negative", "rank=-1", "expected an integer from 0 to 7, not '-1'"),
	BAD("int spaces", "rank=+1", "not ' 1'"),
	BAD("int empty", "rank=", "not ''"),
	BAD("choice wrong", "stream=both",
	    "Invalid value for stream: expected stdout or stderr, not 'both'"),
	BAD("choice case", "stream=STDOUT", "expected stdout or stderr, not 'STDOUT'"),
	BAD("signal wrong", "signal=SIGFOO", "Invalid value for signal: expected a signal name"),
	BAD("signal zero", "signal=0", "Invalid value for signal"),
	BAD("signal too big", "signal=65", "Invalid value for signal"),
	BAD("duplicate", "rank=1&rank=1", "Invalid parameters - rank given more than once"),
	BAD("first problem wins", "follow=yes&bogus=1", "Invalid value for follow"),
	BAD("first problem wins, unknown first", "bogus=1&follow=yes",
	    "unexpected param passed in: bogus"),
	BAD("long text shown cut",
	    "rank=12345678901234567890123456789012345678901234567890123456789012345",
	    "not '1234567890123456789012345678901234567890123456789012345678901234...'"),
};

static void
test_validate(void **state)
{
	for (size_t i = 0; i < ARRAY_SIZE(validate_cases); i++) {
		const struct validate_case *t = &validate_cases[i];
		struct ctl_param_value v[ARRAY_SIZE(spec)];
		struct ctl_query q = {0};
		char *err = NULL;
		int r;

		assert_int_equal(ctl_query_parse(t->query, strlen(t->query), &q, &err), 0);
		r = ctl_params_validate(spec, ARRAY_SIZE(spec), &q, v, &err);
		if (!t->reason) {
			if (r != 0) {
				fail_msg("%s: refused: %s", t->name, err);
			}
			for (size_t k = 0; k < ARRAY_SIZE(spec); k++) {
				if (v[k].set != t->set[k]) {
					fail_msg("%s: %s set=%d", t->name, spec[k].name, v[k].set);
				}
				if (v[k].set && spec[k].type != CTL_PARAM_BOOL &&
				    spec[k].type != CTL_PARAM_STRING && v[k].i != t->i[k]) {
					fail_msg("%s: %s=%lld, want %lld", t->name, spec[k].name,
						 v[k].i, t->i[k]);
				}
				if (v[k].set) {
					assert_non_null(v[k].s);
				} else {
					assert_null(v[k].s);
				}
			}
			if (v[2].set) {
				assert_int_equal(v[2].b, t->b);
			}
		} else {
			if (r != -EINVAL) {
				fail_msg("%s: accepted, want '%s'", t->name, t->reason);
			}
			if (!strstr(err, t->reason)) {
				fail_msg("%s: reason '%s' lacks '%s'", t->name, err, t->reason);
			}
			free(err);
		}
		ctl_query_release(&q);
	}
}

static void
test_validate_required(void **state)
{
	struct ctl_param_value v[1];
	struct ctl_query q = {0};
	char *err = NULL;

	assert_int_equal(ctl_params_validate(required_spec, 1, &q, v, &err), -EINVAL);
	assert_string_equal(err, "Invalid parameters - missing parameter: signal");
	free(err);
	assert_int_equal(ctl_query_parse("signal=HUP", 10, &q, &err), 0);
	assert_int_equal(ctl_params_validate(required_spec, 1, &q, v, &err), 0);
	assert_int_equal(v[0].i, SIGHUP);
	ctl_query_release(&q);

	/* A handler without parameters refuses any. */
	assert_int_equal(ctl_query_parse("x=1", 3, &q, &err), 0);
	assert_int_equal(ctl_params_validate(NULL, 0, &q, v, &err), -EINVAL);
	assert_string_equal(err, "Invalid parameters - unexpected param passed in: x");
	free(err);
	ctl_query_release(&q);
}

static void
test_names(void **state)
{
	static const struct {
		const char *name;
		bool valid;
	} cases[] = {
		{"rank", true},  {"dump_traceback", true}, {"a1", true},   {"", false},
		{"Rank", false}, {"a-b", false},           {"a b", false}, {"ä", false},
		{"x/y", false},
	};

	for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
		if (ctl_param_name_valid(cases[i].name) != cases[i].valid) {
			fail_msg("'%s': want %d", cases[i].name, cases[i].valid);
		}
	}
}

/* Every handler and parameter name in the table is valid, unique and fits. */
static void
test_handler_table(void **state)
{
	static const char *const expected[] = {
		"ping",    "status", "events",  "logs",    "nodes", "metrics", "dump_traceback",
		"restart", "drain",  "exclude", "readmit", "stop",  "signal",  "loglevel"};

	assert_int_equal(ctl_n_handlers, ARRAY_SIZE(expected));
	for (size_t i = 0; i < ctl_n_handlers; i++) {
		const struct ctl_handler *h = &ctl_handlers[i];

		assert_string_equal(h->name, expected[i]);
		assert_true(ctl_param_name_valid(h->name));
		assert_ptr_equal(ctl_handler_find(h->name), h);
		assert_non_null(h->run);
		assert_non_null(h->summary);
		assert_true(h->n_params <= CTL_HANDLER_PARAMS_MAX);
		for (size_t k = 0; k < h->n_params; k++) {
			assert_true(ctl_param_name_valid(h->params[k].name));
			assert_non_null(h->params[k].help);
			for (size_t j = 0; j < k; j++) {
				assert_string_not_equal(h->params[j].name, h->params[k].name);
			}
		}
	}
	assert_null(ctl_handler_find("nope"));
	assert_null(ctl_handler_find("PING"));
	/* What changes the agent's state needs POST. */
	assert_false(ctl_handler_find("restart")->read_only);
	assert_false(ctl_handler_find("drain")->read_only);
	assert_false(ctl_handler_find("stop")->read_only);
	assert_false(ctl_handler_find("signal")->read_only);
	assert_false(ctl_handler_find("loglevel")->read_only);
	assert_true(ctl_handler_find("nodes")->read_only);
	assert_true(ctl_handler_find("status")->read_only);
}

/* ---- socket paths ------------------------------------------------------------------- */

static void
test_default_path(void **state)
{
	static const struct {
		const char *env[3];
		const char *run_id;
		unsigned uid;
		const char *want;
	} cases[] = {
		{{"RUNTIME_DIRECTORY=/run/elasticd/job1", "XDG_RUNTIME_DIR=/run/user/1000"},
		 "job1",
		 1000,
		 "/run/elasticd/job1/elasticd.sock"},
		{{"RUNTIME_DIRECTORY=/run/a:/run/b"}, "x", 0, "/run/a/elasticd.sock"},
		{{"RUNTIME_DIRECTORY=relative"}, "x", 0, "/run/elasticd/x.sock"},
		{{NULL}, "job1", 0, "/run/elasticd/job1.sock"},
		{{"XDG_RUNTIME_DIR=/run/user/0"}, "job1", 0, "/run/elasticd/job1.sock"},
		{{"XDG_RUNTIME_DIR=/run/user/1000"},
		 "job1",
		 1000,
		 "/run/user/1000/elasticd/job1.sock"},
		{{"XDG_RUNTIME_DIR="}, "job1", 1000, "/tmp/elasticd-1000/job1.sock"},
		{{NULL}, "job1", 1000, "/tmp/elasticd-1000/job1.sock"},
		{{NULL}, "a/../b c", 0, "/run/elasticd/a_.._b_c.sock"},
		{{NULL}, "", 0, "/run/elasticd/none.sock"},
		{{NULL}, NULL, 0, "/run/elasticd/none.sock"},
		{{NULL}, "Job-1.x_y", 0, "/run/elasticd/Job-1.x_y.sock"},
	};

	for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
		char *p = ctl_default_path((char *const *)cases[i].env, cases[i].run_id,
					   (uid_t)cases[i].uid);

		if (strcmp(p, cases[i].want) != 0) {
			fail_msg("case %zu: '%s', want '%s'", i, p, cases[i].want);
		}
		free(p);
	}
}

static void
test_worker_dir(void **state)
{
	char *d = ctl_worker_dir_for("/run/elasticd/job1.sock");

	assert_string_equal(d, "/run/elasticd/job1.workers");
	free(d);
	d = ctl_worker_dir_for("/x/ctl");
	assert_string_equal(d, "/x/ctl.workers");
	free(d);
	d = ctl_worker_dir_for(".sock");
	assert_string_equal(d, ".sock.workers");
	free(d);
}

/* ---- worker-server responses -------------------------------------------------------- */

struct response_case {
	const char *name;
	const char *raw;
	bool eof;
	int ret;
	int status;
	const char *ctype;
	const char *body;
};

#define RESP_ERR(n, r, e, ret_)                                                                    \
	{                                                                                          \
		.name = n, .raw = r, .eof = e, .ret = ret_                                         \
	}

static const struct response_case response_cases[] = {
	{"content-length",
	 "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 4\r\n\r\npong", false, 1,
	 200, "text/plain", "pong"},
	{"bare LF", "HTTP/1.1 200 OK\nContent-Length: 2\n\nok", false, 1, 200, NULL, "ok"},
	{"header case and spaces", "HTTP/1.1 404 Not Found\r\ncontent-length:  3 \r\n\r\nabc",
	 false, 1, 404, NULL, "abc"},
	{"no reason phrase", "HTTP/1.1 500\r\nContent-Length: 0\r\n\r\n", false, 1, 500, NULL, ""},
	{"chunked",
	 "HTTP/1.1 200 OK\r\nTransfer-Encoding: "
	 "chunked\r\n\r\n3\r\nabc\r\n2;x=y\r\nde\r\n0\r\n\r\n",
	 false, 1, 200, NULL, "abcde"},
	{"chunked with trailer",
	 "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n1\r\na\r\n0\r\nX-T: 1\r\n\r\n",
	 false, 1, 200, NULL, "a"},
	{"until close", "HTTP/1.0 200 OK\r\n\r\nsome body", true, 1, 200, NULL, "some body"},
	RESP_ERR("until close, not yet", "HTTP/1.0 200 OK\r\n\r\nsome body", false, 0),
	{"interim 100",
	 "HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 1\r\n\r\nx", false, 1,
	 200, NULL, "x"},
	{"204 without body", "HTTP/1.1 204 No Content\r\n\r\n", false, 1, 204, NULL, ""},
	RESP_ERR("partial header", "HTTP/1.1 200 OK\r\nContent-Le", false, 0),
	RESP_ERR("partial body", "HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nabc", false, 0),
	RESP_ERR("partial chunk", "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nab",
		 false, 0),
	RESP_ERR("truncated body", "HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nabc", true,
		 -EPROTO),
	RESP_ERR("truncated header", "HTTP/1.1 200 OK\r\n", true, -EPROTO),
	RESP_ERR("empty", "", true, -EPROTO),
	RESP_ERR("not HTTP", "SSH-2.0-OpenSSH\r\n\r\n", false, -EPROTO),
	RESP_ERR("bad status", "HTTP/1.1 2x0 OK\r\n\r\n", false, -EPROTO),
	RESP_ERR("HTTP/2", "HTTP/2.0 200 OK\r\n\r\n", false, -EPROTO),
	RESP_ERR("bad length", "HTTP/1.1 200 OK\r\nContent-Length: -1\r\n\r\n", false, -EPROTO),
	RESP_ERR("conflicting lengths",
		 "HTTP/1.1 200 OK\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\nab", false,
		 -EPROTO),
	RESP_ERR("bad chunk size", "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n",
		 false, -EPROTO),
	RESP_ERR("chunk without CRLF",
		 "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n1\r\nab\r\n0\r\n\r\n", false,
		 -EPROTO),
	RESP_ERR("gzip", "HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip\r\n\r\n", false, -EPROTO),
	RESP_ERR("huge length", "HTTP/1.1 200 OK\r\nContent-Length: 99999999999\r\n\r\n", false,
		 -EFBIG),
	RESP_ERR("huge chunk",
		 "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nfffffffffff\r\n", false,
		 -EFBIG),
};

static void
test_response_parse(void **state)
{
	for (size_t i = 0; i < ARRAY_SIZE(response_cases); i++) {
		const struct response_case *t = &response_cases[i];
		struct ctl_proxy_response r = {0};
		char *err = NULL;
		int ret = ctl_proxy_parse_response(t->raw, strlen(t->raw), t->eof, &r, &err);

		if (ret != t->ret) {
			fail_msg("%s: got %d (%s), want %d", t->name, ret, err ? err : "", t->ret);
		}
		if (ret == 1) {
			assert_int_equal(r.status, t->status);
			if (t->ctype) {
				assert_string_equal(r.content_type, t->ctype);
			} else {
				assert_null(r.content_type);
			}
			assert_int_equal(r.body_len, strlen(t->body));
			assert_memory_equal(r.body, t->body, r.body_len);
			assert_int_equal(r.body[r.body_len], '\0');
		} else if (ret < 0) {
			assert_non_null(err);
		} else {
			assert_null(err);
		}
		free(err);
		ctl_proxy_response_release(&r);
	}
}

static void
test_response_limits(void **state)
{
	size_t n = CTL_PROXY_HEADERS_MAX + 10;
	char *raw = xmalloc(n);
	struct ctl_proxy_response r = {0};
	char *err = NULL;

	/* A header section that never ends is refused once too long. */
	memcpy(raw, "HTTP/1.1 200 OK\r\nX: ", 20);
	memset(raw + 20, 'a', n - 20);
	assert_int_equal(ctl_proxy_parse_response(raw, n, false, &r, &err), -EFBIG);
	free(err);
	free(raw);

	/* A body is bytes, NUL included (torch's dump_nccl_trace_pickle). */
	{
		static const char bin[] = "HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\na\0b\0c";

		assert_int_equal(ctl_proxy_parse_response(bin, sizeof(bin) - 1, false, &r, &err),
				 1);
		assert_int_equal(r.body_len, 5);
		assert_memory_equal(r.body, "a\0b\0c", 6);
		ctl_proxy_response_release(&r);
	}
}

static void
test_dir_check(void **state)
{
	static const struct {
		mode_t mode;
		uid_t owner;
		const char *who; /* NULL: accepted */
	} rows[] = {
		{S_IFDIR | 0700, 1000, NULL},
		{S_IFDIR | 0755, 1000, NULL},
		{S_IFDIR | 0755, 0, NULL},
		{S_IFDIR | 01777, 0, NULL},
		{S_IFDIR | 01770, 0, NULL},
		{S_IFDIR | 0777, 0, "its group and others"},
		{S_IFDIR | 01777, 1000, "its group and others"},
		{S_IFDIR | 0775, 1000, "its group"},
		{S_IFDIR | 0757, 1000, "others"},
		{S_IFDIR | 0703, 0, "others"},
	};

	(void)state;
	for (size_t i = 0; i < ARRAY_SIZE(rows); i++) {
		char *err = NULL;
		int r = ctl_dir_check("/d", rows[i].mode, rows[i].owner, &err);

		if (!rows[i].who) {
			assert_int_equal(r, 0);
			assert_null(err);
			continue;
		}
		assert_int_equal(r, -EPERM);
		assert_non_null(strstr(err, rows[i].who));
		assert_non_null(strstr(err, "chmod go-w /d"));
		free(err);
	}
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_query_parse),     cmocka_unit_test(test_query_limits),
		cmocka_unit_test(test_validate),        cmocka_unit_test(test_validate_required),
		cmocka_unit_test(test_names),           cmocka_unit_test(test_handler_table),
		cmocka_unit_test(test_default_path),    cmocka_unit_test(test_worker_dir),
		cmocka_unit_test(test_dir_check),       cmocka_unit_test(test_response_parse),
		cmocka_unit_test(test_response_limits),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
