/* The console: a reader that does not keep up loses whole lines only, every
 * dropped line is announced with its count and ranks, and console_drain
 * writes what is queued before exit. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <event2/event.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "console.h"
#include "util.h"

struct reader {
	int fd;
	unsigned start_ms; /* read nothing for this long */
	char *buf;
	size_t len;
};

static void *
reader_main(void *arg)
{
	struct reader *r = arg;
	char chunk[65536];
	ssize_t n;

	usleep(r->start_ms * 1000);
	while ((n = read(r->fd, chunk, sizeof(chunk))) > 0) {
		r->buf = xrealloc(r->buf, r->len + (size_t)n + 1);
		memcpy(r->buf + r->len, chunk, (size_t)n);
		r->len += (size_t)n;
		r->buf[r->len] = '\0';
	}
	return NULL;
}

/* Lines "<rank> <i>" (16 bytes) from ranks 0 and 3, 8 MiB in all, into a
 * console nobody reads for now; then drain with a reader: every line is on
 * the console whole or counted in an announcement naming ranks 0 and 3. */
static void
test_drops_are_whole_lines_and_announced(void **state)
{
	struct event_base *base = event_base_new();
	struct reader r = {0};
	struct console *c;
	pthread_t t;
	int p[2];
	size_t n_lines = (8u << 20) / 16, delivered = 0, announced = 0, announced_bytes = 0;
	char *line, *save = NULL;

	assert_int_equal(pipe(p), 0);
	c = console_new(base, p[1]);
	for (size_t i = 0; i < n_lines; i++) {
		char l[17];

		snprintf(l, sizeof(l), "%d %013zu\n", i % 2 ? 3 : 0, i);
		console_write_from(c, l, 16, i % 2 ? 3 : 0);
	}
	assert_true(console_dropped(c) > 0);
	r.fd = p[0];
	assert_int_equal(pthread_create(&t, NULL, reader_main, &r), 0);
	console_drain(c, now_usec() + 10 * USEC_PER_SEC);
	console_free(c);
	close(p[1]);
	pthread_join(t, NULL);
	close(p[0]);
	for (line = strtok_r(r.buf, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
		size_t b, l;

		if (sscanf(line, "elasticd: console too slow: %zu bytes (%zu lines)", &b, &l) ==
		    2) {
			assert_non_null(strstr(line, "from local ranks 0,3 "));
			announced += l;
			announced_bytes += b;
			continue;
		}
		assert_int_equal(strlen(line), 15);
		assert_true(line[0] == '0' || line[0] == '3');
		delivered++;
	}
	assert_int_equal(delivered + announced, n_lines);
	assert_int_equal(announced_bytes, announced * 16);
	free(r.buf);
	event_base_free(base);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_drops_are_whole_lines_and_announced),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
