/* elasticctl's streaming HTTP/1.1 response parser: framings (Content-Length,
 * chunked with extensions and trailers, until close), malformed heads and
 * chunks, the head limit (body bytes never count against it), and every row
 * fed whole, one byte at a time and split in two at every position; a head
 * in small pieces and its body in large, uneven reads;
 * query escaping. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ectl_http.h"
#include "util.h"

struct resp_case {
	const char *name;
	const char *input;
	int feed; /* what feeding the whole input returns */
	int eof;  /* then what ectl_http_eof returns (when feed is 0) */
	int status;
	const char *body;
	const char *content_type;
};

static const struct resp_case resp_cases[] = {
	{"content-length",
	 "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 4\r\n\r\npong", 1, 1, 200,
	 "pong", "text/plain"},
	{"length then junk ignored", "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nokEXTRA", 1, 1,
	 200, "ok", NULL},
	{"empty body", "HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n", 1, 1, 200, "", NULL},
	{"header case and spaces", "HTTP/1.1 404 Not Found\r\ncontent-length:  3 \r\n\r\nno!", 1, 1,
	 404, "no!", NULL},
	{"chunked",
	 "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n"
	 "A;x=y\r\n0123456789\r\n0\r\n\r\n",
	 1, 1, 200, "abc0123456789", NULL},
	{"chunked trailers",
	 "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n1\r\nz\r\n"
	 "0\r\nX-T: 1\r\n\r\n",
	 1, 1, 200, "z", NULL},
	{"chunked unfinished", "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nab\r\n",
	 0, -EBADMSG, 200, "ab", NULL},
	{"until close", "HTTP/1.0 200 OK\r\n\r\nall of it", 0, 1, 200, "all of it", NULL},
	{"no content 204", "HTTP/1.1 204 No Content\r\n\r\n", 1, 1, 204, "", NULL},
	{"truncated body", "HTTP/1.1 200 OK\r\nContent-Length: 9\r\n\r\nabc", 0, -EBADMSG, 200,
	 "abc", NULL},
	{"truncated head", "HTTP/1.1 200 OK\r\nContent-Len", 0, -EBADMSG, 0, "", NULL},
	{"not http", "SSH-2.0-OpenSSH\r\n\r\n", -EBADMSG, 0, 0, "", NULL},
	{"bad status", "HTTP/1.1 2x0 OK\r\n\r\n", -EBADMSG, 0, 0, "", NULL},
	{"bad length", "HTTP/1.1 200 OK\r\nContent-Length: -1\r\n\r\n", -EBADMSG, 0, 200, "", NULL},
	{"bad chunk size", "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n", -EBADMSG,
	 0, 200, "", NULL},
	{"chunk without crlf", "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n1\r\nab\r\n",
	 -EBADMSG, 0, 200, "a", NULL},
	{"huge chunk size",
	 "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
	 "fffffffffffffffff\r\n",
	 -EBADMSG, 0, 200, "", NULL},
};

/* Checks that the status is known before the body. */
static int
collect(int status, const char *data, size_t len, void *arg)
{
	assert_true(status >= 100 && status <= 599);
	return ectl_http_collect(status, data, len, arg);
}

/* Feed input in pieces of step bytes (0: whole); returns the last result and
 * the body in *b. */
static int
run(const struct resp_case *c, size_t step, struct ectl_http_parser *p, struct ectl_buf *b)
{
	size_t len = strlen(c->input);
	int r = 0;

	ectl_http_parser_init(p);
	ectl_http_collect(0, "", 0, b);
	for (size_t off = 0; off < len && r == 0;) {
		size_t n = step == 0 || len - off < step ? len - off : step;

		r = ectl_http_feed(p, c->input + off, n, collect, b);
		off += n;
	}
	return r;
}

static void
test_response(void **state)
{
	for (size_t i = 0; i < ARRAY_SIZE(resp_cases); i++) {
		const struct resp_case *c = &resp_cases[i];

		for (size_t step = 0; step <= 1; step++) {
			struct ectl_http_parser p;
			struct ectl_buf b = {0};
			int r = run(c, step, &p, &b);

			printf("# %s (step %zu): %d\n", c->name, step, r);
			assert_int_equal(r, c->feed);
			if (r == 0) {
				assert_int_equal(ectl_http_eof(&p), c->eof);
			}
			assert_int_equal(p.status, c->status);
			assert_string_equal(b.data, c->body);
			if (c->content_type) {
				assert_non_null(p.content_type);
				assert_string_equal(p.content_type, c->content_type);
			} else {
				assert_null(p.content_type);
			}
			ectl_http_parser_release(&p);
			free(b.data);
		}
	}
}

/* Feed input as two pieces split at cut; the result, the body in *b. */
static int
run_split(const struct resp_case *c, size_t cut, struct ectl_http_parser *p, struct ectl_buf *b)
{
	int r;

	ectl_http_parser_init(p);
	ectl_http_collect(0, "", 0, b);
	r = ectl_http_feed(p, c->input, cut, collect, b);
	return r != 0 ? r : ectl_http_feed(p, c->input + cut, strlen(c->input) - cut, collect, b);
}

/* Every row, split in two at every position, parses as it does whole. */
static void
test_split_everywhere(void **state)
{
	for (size_t i = 0; i < ARRAY_SIZE(resp_cases); i++) {
		const struct resp_case *c = &resp_cases[i];

		for (size_t cut = 0; cut <= strlen(c->input); cut++) {
			struct ectl_http_parser p;
			struct ectl_buf b = {0};
			int r = run_split(c, cut, &p, &b);

			if (r != c->feed || strcmp(b.data, c->body) != 0) {
				printf("# %s (cut at %zu): %d, body '%s'\n", c->name, cut, r,
				       b.data);
			}
			assert_int_equal(r, c->feed);
			assert_int_equal(p.status, c->status);
			assert_string_equal(b.data, c->body);
			ectl_http_parser_release(&p);
			free(b.data);
		}
	}
}

/* A reply whose head arrives in small pieces and whose body then comes in
 * large, uneven reads: body bytes never count against the head's limit. */
static void
test_large_uneven_reads(void **state)
{
	/* Read sizes in order; after the last nonzero one, it again. */
	static const size_t steps[][4] = {
		{43, 65536, 0, 0}, /* the reviewer's case: 43, then 26 + 65510 */
		{1, 70000, 0, 0},    {7, 65536 + 13, 3, 0}, {69, 65535, 1, 0},
		{10, 20, 100000, 0}, {68, 1, 65536, 0},
	};
	const size_t body_len = 3 * ECTL_HTTP_HEAD_MAX + 17;
	char *head = xasprintf("HTTP/1.1 200 OK\r\nContent-Type: x\r\nContent-Length: %zu\r\n\r\n",
			       body_len);
	size_t head_len = strlen(head);
	size_t len = head_len + body_len;
	char *in = xmalloc(len);

	memcpy(in, head, head_len);
	for (size_t i = 0; i < body_len; i++) {
		in[head_len + i] = (char)('a' + i % 26);
	}
	for (size_t k = 0; k < ARRAY_SIZE(steps); k++) {
		struct ectl_http_parser p;
		struct ectl_buf b = {0};
		size_t off = 0;
		int r = 0;

		ectl_http_parser_init(&p);
		for (size_t j = 0, step = 0; off < len && r == 0; j++) {
			size_t n;

			step = j < 4 && steps[k][j] ? steps[k][j] : step; /* then the last again */
			n = len - off < step ? len - off : step;

			r = ectl_http_feed(&p, in + off, n, collect, &b);
			off += n;
		}
		printf("# steps %zu: %d after %zu of %zu bytes\n", k, r, off, len);
		assert_int_equal(r, 1);
		assert_int_equal(p.status, 200);
		assert_int_equal(b.len, body_len);
		assert_memory_equal(b.data, in + head_len, body_len);
		ectl_http_parser_release(&p);
		free(b.data);
	}
	free(in);
	free(head);
}

static void
test_head_limit(void **state)
{
	struct ectl_http_parser p;
	char *big = xmalloc(ECTL_HTTP_HEAD_MAX + 100);

	memset(big, 'x', ECTL_HTTP_HEAD_MAX + 100);
	memcpy(big, "HTTP/1.1 200 OK\r\nX: ", 20);
	ectl_http_parser_init(&p);
	assert_int_equal(ectl_http_feed(&p, big, ECTL_HTTP_HEAD_MAX + 100, NULL, NULL), -EBADMSG);
	ectl_http_parser_release(&p);
	free(big);
}

static int
refuse(int status, const char *data, size_t len, void *arg)
{
	return -ECANCELED;
}

static void
test_body_error(void **state)
{
	struct ectl_http_parser p;
	const char *in = "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok";
	struct ectl_buf b = {.max = 1};

	ectl_http_parser_init(&p);
	assert_int_equal(ectl_http_feed(&p, in, strlen(in), refuse, NULL), -ECANCELED);
	ectl_http_parser_release(&p);
	ectl_http_parser_init(&p);
	assert_int_equal(ectl_http_feed(&p, in, strlen(in), collect, &b), -EFBIG);
	ectl_http_parser_release(&p);
	free(b.data);
}

/* Appends of one byte cost amortized O(1): the buffer grows geometrically. */
static void
test_collect_grows(void **state)
{
	struct ectl_buf b = {0};
	size_t reallocs = 0;
	size_t cap = 0;

	for (size_t i = 0; i < 1000000; i++) {
		assert_int_equal(ectl_http_collect(200, i % 2 ? "b" : "a", 1, &b), 0);
		reallocs += b.cap != cap;
		cap = b.cap;
	}
	assert_int_equal(b.len, 1000000);
	assert_int_equal(b.data[b.len], '\0');
	assert_memory_equal(b.data + 999998, "ab", 2);
	assert_true(b.cap > b.len && b.cap <= 2 * b.len + 64);
	assert_true(reallocs <= 20);
	free(b.data);
}

static void
test_escape(void **state)
{
	static const char *cases[][2] = {
		{"", ""},
		{"USR1", "USR1"},
		{"a b&c=d", "a%20b%26c%3Dd"},
		{"-._~/", "-._~%2F"},
		{"\xc3\xa9", "%C3%A9"},
	};

	for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
		char *s = ectl_http_escape(cases[i][0]);

		assert_string_equal(s, cases[i][1]);
		free(s);
	}
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_response),
		cmocka_unit_test(test_split_everywhere),
		cmocka_unit_test(test_large_uneven_reads),
		cmocka_unit_test(test_head_limit),
		cmocka_unit_test(test_body_error),
		cmocka_unit_test(test_collect_grows),
		cmocka_unit_test(test_escape),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
