/* fuzz_filetimer.c — libFuzzer target: the input is what workers wrote to
 * the FileTimer FIFO, delivered in reads of varying sizes. Every line goes
 * through the parser into a small bounded table; the table is expired at a
 * few instants and must end empty, every pid it reports once, with a signal
 * chosen from its expired timers. */
#include <errno.h>
#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "filetimer.h"
#include "util.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define TIMERS 16

static void
line_cb(const char *buf, size_t len, bool too_long, void *arg)
{
	struct filetimer_table *t = arg;
	struct filetimer_request req = {0};
	char *err = NULL;
	int r;

	if (len > FILETIMER_LINE_MAX) {
		abort();
	}
	if (too_long) {
		return;
	}
	r = filetimer_parse(buf, len, &req, &err);
	if (r < 0) {
		if (!err || req.scope_id) {
			abort();
		}
		free(err);
		return;
	}
	if (err || req.pid <= 0 || !req.scope_id) {
		abort();
	}
	r = filetimer_table_apply(t, &req);
	if (r < 0 && (r != -ENOSPC || filetimer_table_count(t) != TIMERS)) {
		abort();
	}
	if (filetimer_table_count(t) > TIMERS) {
		abort();
	}
	filetimer_request_release(&req);
}

static void
check_expired(struct filetimer_table *t, double now)
{
	struct filetimer_expired *ex = NULL;
	size_t before = filetimer_table_count(t), cleared = 0;
	size_t n = filetimer_table_expire(t, now, &ex);

	for (size_t i = 0; i < n; i++) {
		if (ex[i].n_expired == 0 || ex[i].n_cleared < ex[i].n_expired || !ex[i].scope_id ||
		    ex[i].expiration_time > now || ex[i].signal < 0) {
			abort();
		}
		for (size_t j = 0; j < i; j++) {
			if (ex[j].pid == ex[i].pid) {
				abort();
			}
		}
		cleared += ex[i].n_cleared;
	}
	if (filetimer_table_count(t) != before - cleared) {
		abort();
	}
	filetimer_expired_free(ex, n);
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct filetimer_table *t = filetimer_table_new(TIMERS);
	struct filetimer_lines *l = xcalloc(1, sizeof(*l));
	size_t off = 0, step = 1;
	double next;

	/* Reads of 1, 2, 4, ... bytes, then the rest. */
	while (off < size) {
		size_t n = size - off < step ? size - off : step;

		filetimer_lines_feed(l, (const char *)data + off, n, line_cb, t);
		off += n;
		step = step < 4096 ? step * 2 : step;
	}
	if (l->len > sizeof(l->buf)) {
		abort();
	}
	check_expired(t, 0);
	if (filetimer_table_next(t, &next) && next <= 0) {
		abort();
	}
	check_expired(t, 1e9);
	check_expired(t, HUGE_VAL);
	if (filetimer_table_count(t) != 0 || filetimer_table_next(t, &next)) {
		abort();
	}
	filetimer_table_free(t);
	free(l);
	return 0;
}
