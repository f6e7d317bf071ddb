/* The console half of tee: a prefix at the start of every line, partial
 * lines held back, '\r' redraws, long lines in pieces, flush at end; and the
 * --duplicate-*-filters, which match the console's lines. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdlib.h>
#include <string.h>

#include "linefilter.h"
#include "output.h"
#include "util.h"

struct feed_case {
	const char *name;
	const char *chunks[4]; /* fed one after another */
	bool flush;
	const char *want;
};

static const struct feed_case cases[] = {
	{"one line", {"hello\n"}, false, "[default0]:hello\n"},
	{"two lines in one chunk", {"a\nb\n"}, false, "[default0]:a\n[default0]:b\n"},
	{"line split across chunks",
	 {"hel", "lo\nwor", "ld\n"},
	 false,
	 "[default0]:hello\n[default0]:world\n"},
	{"partial held until flush", {"no newline"}, false, ""},
	{"partial flushed with newline", {"no newline"}, true, "[default0]:no newline\n"},
	{"complete line then partial flushed", {"a\nb"}, true, "[default0]:a\n[default0]:b\n"},
	{"carriage return redraws",
	 {"10%\r20%\r100%\n"},
	 false,
	 "[default0]:10%\r[default0]:20%\r[default0]:100%\n"},
	{"crlf is one line end", {"a\r\nb\r\n"}, false, "[default0]:a\r\n[default0]:b\r\n"},
	{"crlf split across chunks",
	 {"a\r", "\nb\r", "x\n"},
	 false,
	 "[default0]:a\r\n[default0]:b\r[default0]:x\n"},
	{"trailing cr held, flushed", {"50%\r"}, true, "[default0]:50%\r\n"},
	{"empty lines", {"\n\n"}, false, "[default0]:\n[default0]:\n"},
	{"flush with nothing pending", {"x\n"}, true, "[default0]:x\n"},
	{"nothing at all", {NULL}, true, ""},
};

struct seen {
	char *lines; /* every line line_cb was shown, one after another */
	size_t len;
};

static void
seen_line_cb(const char *line, size_t len, void *arg)
{
	struct seen *seen = arg;

	assert_true(len > strlen("[default0]:"));
	assert_memory_equal(line, "[default0]:", strlen("[default0]:"));
	seen->lines = xrealloc(seen->lines, seen->len + len);
	memcpy(seen->lines + seen->len, line, len);
	seen->len += len;
}

static void
test_feed_table(void **state)
{
	for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
		const struct feed_case *c = &cases[i];
		struct prefixer p;
		struct seen seen = {0};
		char *out = NULL;
		size_t len = 0;

		print_message("case: %s\n", c->name);
		prefixer_init(&p, "[default0]:");
		p.line_cb = seen_line_cb;
		p.line_arg = &seen;
		for (size_t k = 0; k < ARRAY_SIZE(c->chunks) && c->chunks[k]; k++) {
			prefixer_feed(&p, c->chunks[k], strlen(c->chunks[k]), &out, &len);
		}
		if (c->flush) {
			prefixer_flush(&p, &out, &len);
		}
		assert_int_equal(len, strlen(c->want));
		if (len > 0) {
			assert_memory_equal(out, c->want, len);
		}
		/* Whole lines only, each shown to line_cb as it was passed on. */
		assert_int_equal(seen.len, len);
		if (len > 0) {
			assert_memory_equal(seen.lines, out, len);
		}
		free(seen.lines);
		free(out);
		prefixer_release(&p);
	}
}

/* A line longer than the hold-back buffer is passed on in pieces, each a
 * prefixed line of its own, and no byte is lost or duplicated. */
static void
test_long_line(void **state)
{
	size_t n = 3 * OUTPUT_MAX_PENDING + 123;
	char *line = xmalloc(n + 1);
	struct prefixer p;
	char *out = NULL;
	size_t len = 0;

	memset(line, 'x', n);
	line[n] = '\n';
	prefixer_init(&p, "[r1]:");
	for (size_t off = 0; off <= n; off += 1000) {
		size_t k = off + 1000 > n + 1 ? n + 1 - off : 1000;

		prefixer_feed(&p, line + off, k, &out, &len);
	}
	prefixer_flush(&p, &out, &len);
	assert_int_equal(out[len - 1], '\n');
	size_t xs = 0, lines = 0;

	for (char *l = out, *end; l < out + len; l = end + 1) {
		end = memchr(l, '\n', (size_t)(out + len - l));
		assert_non_null(end);
		assert_memory_equal(l, "[r1]:", 5);
		assert_true(end - l - 5 > 0);
		for (char *c = l + 5; c < end; c++) {
			assert_int_equal(*c, 'x');
		}
		xs += (size_t)(end - l - 5);
		lines++;
	}
	assert_int_equal(xs, n);
	assert_in_range(lines, 2, n / OUTPUT_MAX_PENDING + 1);
	free(out);
	free(line);
	prefixer_release(&p);
}

/* One byte at a time gives the same result as one chunk. */
static void
test_byte_by_byte(void **state)
{
	const char *in = "alpha\nbe\rta\ngam";
	const char *want = "[p]:alpha\n[p]:be\r[p]:ta\n[p]:gam\n";
	struct prefixer p;
	char *out = NULL;
	size_t len = 0;

	prefixer_init(&p, "[p]:");
	for (size_t i = 0; in[i]; i++) {
		prefixer_feed(&p, in + i, 1, &out, &len);
	}
	prefixer_flush(&p, &out, &len);
	assert_int_equal(len, strlen(want));
	assert_memory_equal(out, want, len);
	free(out);
	prefixer_release(&p);
}

/* After a long line passed on in pieces, a line ended by a '\r' held back
 * across reads ("ab\r" then "\n") ends on its own: the empty line after it
 * is an empty line, not the end of the long line (it was dropped). */
static void
test_empty_line_after_held_cr(void **state)
{
	size_t n = 2 * OUTPUT_MAX_PENDING;
	char *x = xmalloc(n);
	const char *want = "[p]:ab\r\n[p]:\n[p]:end\n";
	struct prefixer p;
	char *out = NULL;
	size_t len = 0;

	memset(x, 'x', n);
	prefixer_init(&p, "[p]:");
	prefixer_feed(&p, x, n, &out, &len);
	prefixer_feed(&p, "ab\r", 3, &out, &len);
	prefixer_feed(&p, "\n\nend\n", 6, &out, &len);
	prefixer_flush(&p, &out, &len);
	assert_true(len > strlen(want));
	assert_memory_equal(out + len - strlen(want), want, strlen(want));
	free(out);
	free(x);
	prefixer_release(&p);
}

/* --duplicate-*-filters: torch's comma_separated_list, ",," a comma. */
static void
test_linefilter_parse(void **state)
{
	static const struct {
		const char *value;
		const char *want; /* pieces joined with '|' */
	} parse_cases[] = {
		{"apple,orange", "apple|orange"},
		{"a,,b", "a,b"},
		{"a,,,b", "a,|b"},
		{"", ""},
		{"x,", "x|"},
		{",,", ","},
		{" spaced , kept ", " spaced | kept "},
	};

	for (size_t i = 0; i < ARRAY_SIZE(parse_cases); i++) {
		char **v = linefilter_parse(parse_cases[i].value);
		char *joined = xstrdup("");

		for (size_t k = 0; v[k]; k++) {
			char *t = xasprintf("%s%s%s", joined, k ? "|" : "", v[k]);

			free(joined);
			joined = t;
		}
		print_message("'%s' -> '%s'\n", parse_cases[i].value, joined);
		assert_string_equal(joined, parse_cases[i].want);
		free(joined);
		strv_free(v);
	}
}

/* "<big>" in a table string stands for a line longer than the console holds
 * back: OUTPUT_MAX_PENDING + 10 'x's. Returns a malloc'd copy. */
#define BIG "<big>"
#define BIG_LEN (OUTPUT_MAX_PENDING + 10)

static char *
expand(const char *s)
{
	const char *big = strstr(s, BIG);
	char *r;

	if (!big) {
		return xstrdup(s);
	}
	r = xmalloc(strlen(s) - strlen(BIG) + BIG_LEN + 1);
	memcpy(r, s, (size_t)(big - s));
	memset(r + (big - s), 'x', BIG_LEN);
	strcpy(r + (big - s) + BIG_LEN, big + strlen(BIG));
	return r;
}

/* torch's `needle in line`, on a line without its prefix. */
static void
test_linefilter_match(void **state)
{
	static const struct {
		const char *filters;
		const char *line;
		bool want;
	} match_cases[] = {
		{"WARN", "WARN: slow\n", true},
		{"WARN", "warn: slow\n", false},
		{"loss,WARN", "step 2 WARN\n", true},
		{"loss,WARN", "step 2\n", false},
		{"", "anything\n", true},
		{"", "\n", true},
		{"x,", "\n", true},
		{"20%", "20%\r", true},
		{"20%", "10%\r", false},
		{"a,,b", "a,b\r\n", true},
		{"a,,b", "a\r\n", false},
		{"end", BIG "end\n", true},
		{"end", BIG "\n", false},
		{"[p0]", "line\n", false},
	};

	for (size_t i = 0; i < ARRAY_SIZE(match_cases); i++) {
		char **needles = linefilter_parse(match_cases[i].filters);
		char *line = expand(match_cases[i].line);

		print_message("case %zu: '%s'\n", i, match_cases[i].filters);
		assert_int_equal(linefilter_match(needles, line, strlen(line)),
				 match_cases[i].want);
		free(line);
		strv_free(needles);
	}
}

struct filtered {
	char *const *needles;
	size_t prefix_len;
	char *kept; /* the lines that match, as tee writes them to filtered_*.log */
	size_t kept_len;
};

static void
grow(char **buf, size_t *len, const char *s, size_t n)
{
	*buf = xrealloc(*buf, *len + n + 1);
	memcpy(*buf + *len, s, n);
	*len += n;
	(*buf)[*len] = '\0';
}

static void
filter_line_cb(const char *line, size_t len, void *arg)
{
	struct filtered *f = arg;

	assert_true(len > f->prefix_len);
	assert_memory_equal(line, "[p0]:", f->prefix_len);
	if (linefilter_match(f->needles, line + f->prefix_len, len - f->prefix_len)) {
		grow(&f->kept, &f->kept_len, line, len);
	}
}

/* The filters see the console's lines: '\r' ends one, a line too long to
 * hold back comes in pieces, the last partial line only at flush. */
static void
test_filtered_lines(void **state)
{
	static const struct {
		const char *filters;
		const char *chunks[5];
		bool flush;
		const char *want;
	} filter_cases[] = {
		{"WARN",
		 {"loss 1.0\nWARN: slow\n", "step 2 ", "WARN again\npartial WA", "RN\n",
		  "tail WARN"},
		 true,
		 "[p0]:WARN: slow\n[p0]:step 2 WARN again\n[p0]:partial WARN\n[p0]:tail WARN\n"},
		{"loss,again",
		 {"loss 1.0\nWARN: slow\n", "step 2 ", "WARN again\npartial WA", "RN\n",
		  "tail WARN"},
		 false,
		 "[p0]:loss 1.0\n[p0]:step 2 WARN again\n"},
		{"",
		 {"loss 1.0\nWARN: slow\n", "step 2 "},
		 true,
		 "[p0]:loss 1.0\n[p0]:WARN: slow\n[p0]:step 2 \n"},
		{"p0", {"loss 1.0\n"}, true, ""},
		{"20%", {"10%\r20%\r100%\n"}, false, "[p0]:20%\r"},
		{"%", {"10%\r20%\r100%\n"}, false, "[p0]:10%\r[p0]:20%\r[p0]:100%\n"},
		{"WA,RN", {"WA\rRN\n"}, false, "[p0]:WA\r[p0]:RN\n"},
		{"WARN", {"WA\rRN\n"}, false, ""},
		{"WARN", {"a\r\nWARN\r\n"}, false, "[p0]:WARN\r\n"},
		{"WARN", {"x 1\r", "\nWARN 2\r", "y\n"}, false, "[p0]:WARN 2\r"},
		{"WARN", {"WARN 50%\r"}, false, ""},
		{"WARN", {"WARN 50%\r"}, true, "[p0]:WARN 50%\r\n"},
		{"needle", {BIG, "needle\n"}, true, "[p0]:needle\n"},
		{"xx", {BIG, "needle\n"}, true, "[p0]:" BIG "\n"},
		{"needle", {BIG "needle\n"}, false, "[p0]:" BIG "needle\n"},
		{"x", {BIG "\r", "\n\n"}, false, "[p0]:" BIG "\r\n"},
	};

	for (size_t i = 0; i < ARRAY_SIZE(filter_cases); i++) {
		char **needles = linefilter_parse(filter_cases[i].filters);
		struct filtered f = {.needles = needles, .prefix_len = strlen("[p0]:")};
		char *want = expand(filter_cases[i].want);
		struct prefixer p;
		char *out = NULL;
		size_t len = 0;

		print_message("case %zu: '%s'\n", i, filter_cases[i].filters);
		prefixer_init(&p, "[p0]:");
		p.line_cb = filter_line_cb;
		p.line_arg = &f;
		for (size_t k = 0; k < ARRAY_SIZE(filter_cases[i].chunks); k++) {
			char *chunk;

			if (!filter_cases[i].chunks[k]) {
				break;
			}
			chunk = expand(filter_cases[i].chunks[k]);
			prefixer_feed(&p, chunk, strlen(chunk), &out, &len);
			free(chunk);
		}
		if (filter_cases[i].flush) {
			prefixer_flush(&p, &out, &len);
		}
		assert_int_equal(f.kept_len, strlen(want));
		if (f.kept_len > 0) {
			assert_memory_equal(f.kept, want, f.kept_len);
		}
		free(want);
		free(out);
		free(f.kept);
		prefixer_release(&p);
		strv_free(needles);
	}
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_feed_table),
		cmocka_unit_test(test_long_line),
		cmocka_unit_test(test_byte_by_byte),
		cmocka_unit_test(test_empty_line_after_held_cr),
		cmocka_unit_test(test_linefilter_parse),
		cmocka_unit_test(test_linefilter_match),
		cmocka_unit_test(test_filtered_lines),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
