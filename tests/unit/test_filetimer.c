/* torch's FileTimer protocol: request lines and the timer table
 * (torch/distributed/elastic/timer/file_based_local_timer.py). */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "filetimer.h"
#include "util.h"

/* ---- parsing ---------------------------------------------------------------- */

struct parse_row {
	const char *line;
	int rc;
	pid_t pid;
	const char *scope_id;
	double expiration_time;
	int signal;
};

static const struct parse_row parse_rows[] = {
	/* FileTimerClient.acquire, exactly as torch's json.dumps writes it. */
	{"{\"version\": 1, \"pid\": 4242, \"scope_id\": \"/w/train.py#12\", "
	 "\"expiration_time\": 1700000001.25, \"signal\": 9}",
	 0, 4242, "/w/train.py#12", 1700000001.25, 9},
	/* release */
	{"{\"version\": 1, \"pid\": 4242, \"scope_id\": \"s\", \"expiration_time\": -1, "
	 "\"signal\": 0}",
	 0, 4242, "s", -1, 0},
	/* no version, other keys, an integer deadline, CR and blanks around */
	{" {\"pid\": 7, \"scope_id\": \"\", \"expiration_time\": 5, \"signal\": -3, "
	 "\"x\": [1, {\"y\": null}]}\r",
	 0, 7, "", 5, -3},
	/* escapes in the scope (ensure_ascii) */
	{"{\"pid\": 1, \"scope_id\": \"caf\\u00e9#1\", \"expiration_time\": 0.5, \"signal\": 15}",
	 0, 1, "caf\xc3\xa9#1", 0.5, 15},
	/* duplicate keys: the last wins, as json.loads */
	{"{\"pid\": 1, \"pid\": 2, \"scope_id\": \"s\", \"expiration_time\": 1, \"signal\": 9}", 0,
	 2, "s", 1, 9},
	/* malformed */
	{"", -EINVAL},
	{"   ", -EINVAL},
	{"not json", -EINVAL},
	{"{\"pid\": 1, \"scope_id\": \"s\", \"expiration_time\": 1", -EINVAL},
	{"[1, 2]", -EINVAL},
	{"{}", -EINVAL},
	{"{\"scope_id\": \"s\", \"expiration_time\": 1, \"signal\": 9}", -EINVAL},
	{"{\"pid\": 1, \"expiration_time\": 1, \"signal\": 9}", -EINVAL},
	{"{\"pid\": 1, \"scope_id\": \"s\", \"signal\": 9}", -EINVAL},
	{"{\"pid\": 1, \"scope_id\": \"s\", \"expiration_time\": 1}", -EINVAL},
	{"{\"pid\": 0, \"scope_id\": \"s\", \"expiration_time\": 1, \"signal\": 9}", -EINVAL},
	{"{\"pid\": -1, \"scope_id\": \"s\", \"expiration_time\": 1, \"signal\": 9}", -EINVAL},
	{"{\"pid\": 2147483648, \"scope_id\": \"s\", \"expiration_time\": 1, \"signal\": 9}",
	 -EINVAL},
	{"{\"pid\": 1.0, \"scope_id\": \"s\", \"expiration_time\": 1, \"signal\": 9}", -EINVAL},
	{"{\"pid\": true, \"scope_id\": \"s\", \"expiration_time\": 1, \"signal\": 9}", -EINVAL},
	{"{\"pid\": \"1\", \"scope_id\": \"s\", \"expiration_time\": 1, \"signal\": 9}", -EINVAL},
	{"{\"pid\": 1, \"scope_id\": 3, \"expiration_time\": 1, \"signal\": 9}", -EINVAL},
	{"{\"pid\": 1, \"scope_id\": \"a\\u0000b\", \"expiration_time\": 1, \"signal\": 9}",
	 -EINVAL},
	{"{\"pid\": 1, \"scope_id\": \"s\", \"expiration_time\": \"1\", \"signal\": 9}", -EINVAL},
	{"{\"pid\": 1, \"scope_id\": \"s\", \"expiration_time\": Infinity, \"signal\": 9}",
	 -EINVAL},
	{"{\"pid\": 1, \"scope_id\": \"s\", \"expiration_time\": NaN, \"signal\": 9}", -EINVAL},
	{"{\"pid\": 1, \"scope_id\": \"s\", \"expiration_time\": 1, \"signal\": 9.0}", -EINVAL},
	{"{\"pid\": 1, \"scope_id\": \"s\", \"expiration_time\": 1, \"signal\": 4294967305}",
	 -EINVAL},
	{"{\"pid\": 1, \"scope_id\": \"s\", \"expiration_time\": 1, \"signal\": 9}"
	 "{\"pid\": 2}",
	 -EINVAL},
};

static void
test_parse_table(void **state)
{
	(void)state;
	for (size_t i = 0; i < ARRAY_SIZE(parse_rows); i++) {
		const struct parse_row *row = &parse_rows[i];
		struct filetimer_request req = {0};
		char *err = NULL;
		int r = filetimer_parse(row->line, strlen(row->line), &req, &err);

		if (r != row->rc) {
			fail_msg("row %zu '%s': rc %d, expected %d (%s)", i, row->line, r, row->rc,
				 err ? err : "");
		}
		if (r < 0) {
			assert_non_null(err);
			assert_null(req.scope_id);
			free(err);
			continue;
		}
		assert_null(err);
		assert_int_equal(req.pid, row->pid);
		assert_string_equal(req.scope_id, row->scope_id);
		assert_true(req.expiration_time == row->expiration_time);
		assert_int_equal(req.signal, row->signal);
		filetimer_request_release(&req);
		assert_null(req.scope_id);
	}
}

static void
test_parse_length_bound(void **state)
{
	/* PIPE_BUF bytes pass, one more does not. */
	const char *head = "{\"pid\": 1, \"expiration_time\": 1, \"signal\": 9, \"scope_id\": \"";
	char *line = xcalloc(FILETIMER_LINE_MAX + 2, 1);
	struct filetimer_request req = {0};
	char *err = NULL;
	size_t hl = strlen(head);

	(void)state;
	memcpy(line, head, hl);
	memset(line + hl, 'x', FILETIMER_LINE_MAX - hl - 2);
	memcpy(line + FILETIMER_LINE_MAX - 2, "\"}", 2);
	assert_int_equal(filetimer_parse(line, FILETIMER_LINE_MAX, &req, &err), 0);
	assert_int_equal(strlen(req.scope_id), FILETIMER_LINE_MAX - hl - 2);
	filetimer_request_release(&req);
	line[FILETIMER_LINE_MAX] = ' ';
	assert_int_equal(filetimer_parse(line, FILETIMER_LINE_MAX + 1, &req, &err), -E2BIG);
	assert_non_null(err);
	free(err);
	free(line);
}

/* ---- lines ---------------------------------------------------------------- */

struct collected {
	char *text; /* lines joined with '|', too long ones as "!<len>" */
	size_t n;
};

static void
collect(const char *buf, size_t len, bool too_long, void *arg)
{
	struct collected *c = arg;
	char *prev = c->text;

	if (too_long) {
		c->text = xasprintf("%s%s!%zu", prev, c->n ? "|" : "", len);
	} else {
		c->text = xasprintf("%s%s%.*s", prev, c->n ? "|" : "", (int)len, buf);
	}
	free(prev);
	c->n++;
}

struct lines_row {
	const char *chunks[4];
	const char *want;
	size_t kept; /* bytes of a partial line held afterwards */
};

static const struct lines_row lines_rows[] = {
	{{"a\n"}, "a", 0},
	{{"a\nb\n"}, "a|b", 0},
	{{"a", "b", "c\n"}, "abc", 0},
	{{"a\nb", "c\nd"}, "a|bc", 1},
	{{"\n\n"}, "|", 0},
	{{"par", "tial"}, "", 7},
	{{"x\r\n"}, "x\r", 0},
};

static void
test_lines_table(void **state)
{
	(void)state;
	for (size_t i = 0; i < ARRAY_SIZE(lines_rows); i++) {
		struct filetimer_lines *l = xcalloc(1, sizeof(*l));
		struct collected c = {xstrdup("")};

		for (size_t k = 0; k < 4 && lines_rows[i].chunks[k]; k++) {
			const char *ch = lines_rows[i].chunks[k];

			filetimer_lines_feed(l, ch, strlen(ch), collect, &c);
		}
		if (strcmp(c.text, lines_rows[i].want) != 0 || l->len != lines_rows[i].kept) {
			fail_msg("row %zu: '%s' (%zu kept), expected '%s' (%zu)", i, c.text, l->len,
				 lines_rows[i].want, lines_rows[i].kept);
		}
		free(c.text);
		free(l);
	}
}

static void
test_lines_too_long(void **state)
{
	struct filetimer_lines *l = xcalloc(1, sizeof(*l));
	struct collected c = {xstrdup("")};
	char *big = xmalloc(3 * FILETIMER_LINE_MAX);

	(void)state;
	/* Exactly FILETIMER_LINE_MAX bytes fit, in pieces. */
	memset(big, 'x', FILETIMER_LINE_MAX);
	filetimer_lines_feed(l, big, 100, collect, &c);
	filetimer_lines_feed(l, big, FILETIMER_LINE_MAX - 100, collect, &c);
	filetimer_lines_feed(l, "\n", 1, collect, &c);
	assert_int_equal(strlen(c.text), FILETIMER_LINE_MAX);
	free(c.text);
	c = (struct collected){xstrdup("")};
	/* One more byte: reported once, dropped up to its newline, then a good line. */
	memset(big, 'y', 3 * FILETIMER_LINE_MAX);
	filetimer_lines_feed(l, big, FILETIMER_LINE_MAX + 1, collect, &c);
	filetimer_lines_feed(l, big, 2 * FILETIMER_LINE_MAX, collect, &c);
	big[5] = '\n';
	memcpy(big + 6, "ok\nhalf", 7);
	filetimer_lines_feed(l, big, 13, collect, &c);
	assert_string_equal(c.text, "!4096|ok");
	assert_int_equal(l->len, 4);
	free(c.text);
	free(big);
	free(l);
}

/* ---- the table ------------------------------------------------------------ */

static int
apply(struct filetimer_table *t, pid_t pid, const char *scope, double exp, int sig)
{
	struct filetimer_request req = {
		.pid = pid,
		.scope_id = (char *)scope,
		.expiration_time = exp,
		.signal = sig,
	};

	return filetimer_table_apply(t, &req);
}

/* A script of requests, then an expiry at `now` and what it must give. */
struct step {
	pid_t pid; /* 0 ends the requests */
	const char *scope;
	double exp;
	int sig;
	int rc;
};

struct want {
	pid_t pid; /* 0 ends the list */
	int sig;
	const char *scope;
	double exp;
	size_t n_expired;
	size_t n_cleared;
};

struct table_row {
	const char *name;
	struct step steps[8];
	double now;
	struct want want[4];
	size_t left;      /* timers held afterwards */
	double next_left; /* earliest deadline afterwards (when left > 0) */
};

static const struct table_row table_rows[] = {
	{"nothing held", {{0}}, 100, {{0}}, 0, 0},
	{"acquire then release: no expiry",
	 {{10, "a", 50, 9, FILETIMER_SET}, {10, "a", -1, 0, FILETIMER_RELEASED}, {0}},
	 100,
	 {{0}},
	 0,
	 0},
	{"release of an unknown key", {{10, "a", -1, 0, FILETIMER_UNKNOWN}, {0}}, 100, {{0}}, 0, 0},
	{"not yet expired", {{10, "a", 150, 9, FILETIMER_SET}, {0}}, 100, {{0}}, 1, 150},
	{"expires exactly at its deadline (<=)",
	 {{10, "a", 100, 9, FILETIMER_SET}, {0}},
	 100,
	 {{10, 9, "a", 100, 1, 1}, {0}},
	 0,
	 0},
	{"re-acquire replaces the deadline",
	 {{10, "a", 50, 9, FILETIMER_SET}, {10, "a", 150, 15, FILETIMER_REPLACED}, {0}},
	 100,
	 {{0}},
	 1,
	 150},
	{"same scope, two pids are two timers",
	 {{10, "a", 50, 9, FILETIMER_SET}, {11, "a", 150, 9, FILETIMER_SET}, {0}},
	 100,
	 {{10, 9, "a", 50, 1, 1}, {0}},
	 1,
	 150},
	{"a reaped pid loses its unexpired timers too",
	 {{10, "a", 50, 9, FILETIMER_SET}, {10, "b", 500, 9, FILETIMER_SET}, {0}},
	 100,
	 {{10, 9, "a", 50, 1, 2}, {0}},
	 0,
	 0},
	{"first expired timer with a signal > 0, in expiration order",
	 {{10, "late", 90, 15, FILETIMER_SET},
	  {10, "nosig", 10, 0, FILETIMER_SET},
	  {10, "early", 20, 9, FILETIMER_SET},
	  {0}},
	 100,
	 {{10, 9, "early", 20, 3, 3}, {0}},
	 0,
	 0},
	{"no signal > 0: expired and cleared, not signalled",
	 {{10, "a", 10, 0, FILETIMER_SET}, {10, "b", 20, -9, FILETIMER_SET}, {0}},
	 100,
	 {{10, 0, "a", 10, 2, 2}, {0}},
	 0,
	 0},
	{"ties: insertion order, kept by a replacement",
	 {{10, "x", 70, 15, FILETIMER_SET},
	  {10, "y", 50, 9, FILETIMER_SET},
	  {10, "x", 50, 2, FILETIMER_REPLACED},
	  {0}},
	 100,
	 {{10, 2, "x", 50, 2, 2}, {0}},
	 0,
	 0},
	{"pids in order of their earliest expired timer",
	 {{20, "a", 30, 9, FILETIMER_SET},
	  {10, "a", 20, 15, FILETIMER_SET},
	  {30, "a", 200, 9, FILETIMER_SET},
	  {0}},
	 100,
	 {{10, 15, "a", 20, 1, 1}, {20, 9, "a", 30, 1, 1}, {0}},
	 1,
	 200},
};

static void
test_table_rows(void **state)
{
	(void)state;
	for (size_t i = 0; i < ARRAY_SIZE(table_rows); i++) {
		const struct table_row *row = &table_rows[i];
		struct filetimer_table *t = filetimer_table_new(0);
		struct filetimer_expired *ex = NULL;
		size_t n, nw = 0;
		double next = -5;

		for (const struct step *s = row->steps; s->pid; s++) {
			int r = apply(t, s->pid, s->scope, s->exp, s->sig);

			if (r != s->rc) {
				fail_msg("%s: apply(%d, %s) = %d, expected %d", row->name,
					 (int)s->pid, s->scope, r, s->rc);
			}
		}
		n = filetimer_table_expire(t, row->now, &ex);
		while (row->want[nw].pid) {
			nw++;
		}
		if (n != nw) {
			fail_msg("%s: %zu pids expired, expected %zu", row->name, n, nw);
		}
		for (size_t k = 0; k < n; k++) {
			const struct want *w = &row->want[k];

			assert_int_equal(ex[k].pid, w->pid);
			assert_int_equal(ex[k].signal, w->sig);
			assert_string_equal(ex[k].scope_id, w->scope);
			assert_true(ex[k].expiration_time == w->exp);
			assert_int_equal(ex[k].n_expired, w->n_expired);
			assert_int_equal(ex[k].n_cleared, w->n_cleared);
		}
		filetimer_expired_free(ex, n);
		if (filetimer_table_count(t) != row->left) {
			fail_msg("%s: %zu timers left, expected %zu", row->name,
				 filetimer_table_count(t), row->left);
		}
		assert_int_equal(filetimer_table_next(t, &next), row->left > 0);
		if (row->left > 0) {
			assert_true(next == row->next_left);
		} else {
			assert_true(next == -5);
		}
		filetimer_table_free(t);
	}
}

static void
test_table_bound(void **state)
{
	struct filetimer_table *t = filetimer_table_new(2);

	(void)state;
	assert_int_equal(apply(t, 1, "a", 10, 9), FILETIMER_SET);
	assert_int_equal(apply(t, 1, "b", 10, 9), FILETIMER_SET);
	assert_int_equal(apply(t, 1, "c", 10, 9), -ENOSPC);
	/* Replacing and releasing still work when full. */
	assert_int_equal(apply(t, 1, "a", 20, 9), FILETIMER_REPLACED);
	assert_int_equal(apply(t, 1, "b", -1, 0), FILETIMER_RELEASED);
	assert_int_equal(apply(t, 1, "c", 10, 9), FILETIMER_SET);
	assert_int_equal(filetimer_table_count(t), 2);
	filetimer_table_free(t);
	filetimer_table_free(NULL);
	filetimer_expired_free(NULL, 0);
}

static bool
odd_alive(pid_t pid, void *arg)
{
	int *calls = arg;

	(*calls)++;
	return pid % 2 == 1;
}

static void
test_table_prune(void **state)
{
	struct filetimer_table *t = filetimer_table_new(0);
	double next;
	int calls = 0;

	(void)state;
	apply(t, 2, "a", 10, 9);
	apply(t, 3, "a", 30, 9);
	apply(t, 2, "b", 20, 9);
	apply(t, 4, "a", 5, 9);
	assert_int_equal(filetimer_table_prune(t, odd_alive, &calls), 3);
	assert_int_equal(calls, 3); /* once per distinct pid */
	assert_int_equal(filetimer_table_count(t), 1);
	assert_true(filetimer_table_next(t, &next));
	assert_true(next == 30);
	filetimer_table_free(t);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_parse_table), cmocka_unit_test(test_parse_length_bound),
		cmocka_unit_test(test_lines_table), cmocka_unit_test(test_lines_too_long),
		cmocka_unit_test(test_table_rows),  cmocka_unit_test(test_table_bound),
		cmocka_unit_test(test_table_prune),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
