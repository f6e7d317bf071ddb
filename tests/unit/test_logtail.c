/* test_logtail.c — the last lines of a log file: cut first line, '\r'
 * redraws, blank lines, the line and byte bounds. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "logtail.h"
#include "util.h"

struct row {
	const char *in;
	bool at_start;
	size_t max_lines;
	const char *want; /* NULL: nothing */
	size_t lines;
};

static void
test_lines_table(void **state)
{
	static const struct row rows[] = {
		{"a\nb\nc\n", true, 20, "> a\n> b\n> c", 3},
		{"a\nb\nc", true, 20, "> a\n> b\n> c", 3},
		{"a\nb\nc\n", true, 2, "> b\n> c", 2},
		{"cut\nb\nc\n", false, 20, "> b\n> c", 2},
		{"only a cut line\n", false, 20, "> only a cut line", 1},
		{"only a cut line", false, 20, "> only a cut line", 1},
		{"a\n\nb\n\n  \n\r\n", true, 20, "> a\n> \n> b", 3},
		{"50%\r100%\r\ndone\r\n", true, 20, "> 100%\n> done", 2},
		{"", true, 20, NULL, 0},
		{"\n\n \t\n", true, 20, NULL, 0},
		{"x\n", true, 0, NULL, 0},
	};

	(void)state;
	for (size_t i = 0; i < ARRAY_SIZE(rows); i++) {
		const struct row *r = &rows[i];
		size_t n = 99;
		char *got =
			logtail_lines(r->in, strlen(r->in), r->at_start, r->max_lines, "> ", &n);

		if (!r->want) {
			assert_null(got);
		} else {
			assert_non_null(got);
			assert_string_equal(got, r->want);
		}
		assert_int_equal(n, r->lines);
		free(got);
	}
}

static void
test_read_bounds(void **state)
{
	char path[] = "/tmp/test_logtail.XXXXXX";
	int fd = mkstemp(path);
	size_t n;
	char *got;
	FILE *f;

	(void)state;
	assert_true(fd >= 0);
	f = fdopen(fd, "w");
	for (int i = 0; i < 1000; i++) {
		fprintf(f, "line %d\n", i);
	}
	fclose(f);
	got = logtail_read(path, "", &n);
	assert_int_equal(n, LOGTAIL_MAX_LINES);
	assert_true(strncmp(got, "line 980\n", 9) == 0);
	assert_true(strlen(got) > 8 && strcmp(got + strlen(got) - 8, "line 999") == 0);
	free(got);

	/* One line longer than the byte bound, then a short one. */
	f = fopen(path, "w");
	for (int i = 0; i < 2 * LOGTAIL_MAX_BYTES; i++) {
		fputc('x', f);
	}
	fputs("\nend\n", f);
	fclose(f);
	got = logtail_read(path, "", &n);
	assert_string_equal(got, "end");
	assert_int_equal(n, 1);
	free(got);

	unlink(path);
	assert_null(logtail_read(path, "", &n));
	assert_int_equal(n, 0);
	assert_null(logtail_read("/dev/null", "", &n));
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_lines_table),
		cmocka_unit_test(test_read_bounds),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
