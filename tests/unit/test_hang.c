/* The hang rules' pure core (src/hang/hang.c): a script of inputs (bytes at a
 * time, a rank that exits) per row, and the deadline and fired rule that
 * must follow. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "hang.h"
#include "util.h"

#define S(x) ((uint64_t)((x)*1e6))
#define MAX_STEPS 8

/* One input: at time at (seconds), rank writes text on stream (text NULL
 * with done: the rank exited; text NULL otherwise: nothing). */
struct step {
	double at;
	int rank;
	int stream;
	const char *text;
	bool count_only; /* the bytes' count only (the -r file watch, silence) */
	bool done;
};

struct row {
	const char *name;
	struct hang_rules rules;
	size_t n_ranks;
	struct step steps[MAX_STEPS];
	double deadline; /* expected earliest deadline after the steps; < 0: none */
	double check_at; /* hang_check at this time ... */
	bool fires;      /* ... fires ... */
	enum hang_rule rule;
	int rank;
	double idle;
};

static const struct row rows[] = {
	{"silence: no deadline before the first output",
	 {.silence_s = 2},
	 2,
	 {{0}},
	 -1,
	 100,
	 false},
	{"silence: deadline after the first byte",
	 {.silence_s = 2},
	 2,
	 {{1, 1, 0, "x"}},
	 3,
	 3,
	 true,
	 HANG_RULE_SILENCE,
	 1,
	 2},
	{"silence: output moves it, stderr counts",
	 {.silence_s = 2},
	 1,
	 {{1, 0, 0, "a\n"}, {2.5, 0, 1, "b"}},
	 4.5,
	 4.4,
	 false},
	{"silence: a byte count alone (no text) moves it",
	 {.silence_s = 2},
	 1,
	 {{1, 0, 0, "abc", true}, {3, 0, 0, "d", true}},
	 5,
	 5,
	 true,
	 HANG_RULE_SILENCE,
	 0,
	 2},
	{"silence: the most overdue rank fires",
	 {.silence_s = 2},
	 3,
	 {{1, 0, 0, "a"}, {0.5, 2, 0, "b"}, {1.5, 1, 0, "c"}},
	 2.5,
	 10,
	 true,
	 HANG_RULE_SILENCE,
	 2,
	 9.5},
	{"silence: an exited rank never fires",
	 {.silence_s = 2},
	 1,
	 {{1, 0, 0, "a"}, {1.5, 0, 0, NULL, false, true}},
	 -1,
	 100,
	 false},
	{"cadence: no deadline before a match without a start cutoff",
	 {.cadence = "step [0-9]+", .cadence_s = 3},
	 1,
	 {{1, 0, 0, "loading\n"}},
	 -1,
	 100,
	 false},
	{"cadence: a match sets it, other lines do not move it",
	 {.cadence = "step [0-9]+", .cadence_s = 3},
	 1,
	 {{1, 0, 0, "step 1\n"}, {2, 0, 0, "loss 0.5\n"}},
	 4,
	 4,
	 true,
	 HANG_RULE_CADENCE,
	 0,
	 3},
	{"cadence: a line split over reads matches when it ends",
	 {.cadence = "step [0-9]+", .cadence_s = 3},
	 1,
	 {{1, 0, 0, "ste"}, {2, 0, 0, "p 7\r"}},
	 5,
	 4.9,
	 false},
	{"cadence: an open line does not match yet",
	 {.cadence = "step [0-9]+", .cadence_s = 3},
	 1,
	 {{1, 0, 0, "step 1"}},
	 -1,
	 100,
	 false},
	{"cadence: streams keep their own open lines",
	 {.cadence = "^step [0-9]+$", .cadence_s = 3},
	 1,
	 {{1, 0, 0, "step"}, {1.5, 1, 0, "warn\n"}, {2, 0, 0, " 2\n"}},
	 5,
	 5,
	 true,
	 HANG_RULE_CADENCE,
	 0,
	 3},
	{"cadence-start: no first match in time",
	 {.cadence = "step", .cadence_s = 3, .cadence_start_s = 10},
	 2,
	 {{1, 0, 0, "step\n"}},
	 4,
	 10,
	 true,
	 HANG_RULE_CADENCE,
	 0,
	 9},
	{"cadence-start: fires on the rank that never matched",
	 {.cadence = "step", .cadence_s = 30, .cadence_start_s = 10},
	 2,
	 {{1, 0, 0, "step\n"}},
	 10,
	 10,
	 true,
	 HANG_RULE_CADENCE_START,
	 1,
	 10},
	{"both rules: the earlier deadline wins",
	 {.silence_s = 5, .cadence = "step", .cadence_s = 2},
	 1,
	 {{1, 0, 0, "step\n"}, {2, 0, 0, "noise\n"}},
	 3,
	 3,
	 true,
	 HANG_RULE_CADENCE,
	 0,
	 2},
};

static void
run_row(const struct row *row)
{
	char *err = NULL;
	struct hang *h = hang_new(&row->rules, row->n_ranks, 0, &err);
	struct hang_fired f = {0};
	uint64_t d;

	assert_non_null(h);
	for (size_t i = 0; i < MAX_STEPS; i++) {
		const struct step *s = &row->steps[i];

		if (s->done) {
			hang_rank_done(h, s->rank);
		} else if (s->text) {
			hang_feed(h, s->rank, s->stream, s->count_only ? NULL : s->text,
				  strlen(s->text), S(s->at));
		}
	}
	d = hang_next_deadline(h);
	if (row->deadline < 0) {
		assert_true(d == HANG_NEVER);
	} else {
		assert_int_equal(d, S(row->deadline));
	}
	assert_int_equal(hang_check(h, S(row->check_at), &f), row->fires);
	if (row->fires) {
		assert_int_equal(f.rule, row->rule);
		assert_int_equal(f.local_rank, row->rank);
		assert_true(f.idle_s > row->idle - 1e-6 && f.idle_s < row->idle + 1e-6);
	}
	hang_free(h);
}

static void
test_rows(void **state)
{
	for (size_t i = 0; i < ARRAY_SIZE(rows); i++) {
		print_message("%s\n", rows[i].name);
		run_row(&rows[i]);
	}
}

/* The timer need not move for output that only pushes deadlines out; it must
 * for a deadline that appears or comes earlier. */
static void
test_feed_asks_rearm(void **state)
{
	struct hang_rules r = {
		.silence_s = 2, .cadence = "step", .cadence_s = 0.5, .cadence_start_s = 100};
	struct hang *h = hang_new(&r, 1, 0, &(char *){NULL});

	assert_int_equal(hang_next_deadline(h), S(100));
	assert_true(hang_feed(h, 0, 0, "x", 1, S(1))); /* silence: 3 < 100 */
	assert_int_equal(hang_next_deadline(h), S(3));
	assert_false(hang_feed(h, 0, 0, "y", 1, S(2)));     /* 4: later */
	assert_true(hang_feed(h, 0, 0, "step\n", 5, S(2))); /* cadence: 2.5 < 3 */
	hang_free(h);
}

struct check_row {
	struct hang_rules rules;
	int rc;
	const char *msg;
};

static const struct check_row check_rows[] = {
	{{0}, 0, NULL},
	{{.silence_s = 1}, 0, NULL},
	{{.cadence = "step [0-9]+", .cadence_s = 1}, 0, NULL},
	{{.cadence = "step", .cadence_s = 0}, -EINVAL, "--hang-cadence-interval"},
	{{.cadence = "step (", .cadence_s = 1}, -EINVAL, "not a regular expression"},
	{{.cadence_s = 1}, -EINVAL, "need --hang-cadence"},
	{{.cadence_start_s = 1}, -EINVAL, "need --hang-cadence"},
};

static void
test_rules_check(void **state)
{
	for (size_t i = 0; i < ARRAY_SIZE(check_rows); i++) {
		char *err = NULL;

		assert_int_equal(hang_rules_check(&check_rows[i].rules, &err), check_rows[i].rc);
		if (check_rows[i].msg) {
			assert_non_null(strstr(err, check_rows[i].msg));
		}
		free(err);
	}
	assert_false(hang_rules_on(&(struct hang_rules){0}));
	assert_false(hang_rules_on(&(struct hang_rules){.cadence = ""}));
	assert_true(hang_rules_on(&(struct hang_rules){.silence_s = 0.5}));
}

static void
test_describe(void **state)
{
	struct hang_rules r = {
		.silence_s = 30, .cadence = "step [0-9]+", .cadence_s = 60, .cadence_start_s = 300};
	struct {
		struct hang_fired f;
		const char *text;
	} cases[] = {
		{{HANG_RULE_SILENCE, 2, 30, 31},
		 "hang: silence (no output for 30 s) on local rank 2"},
		{{HANG_RULE_CADENCE, 0, 60, 60},
		 "hang: cadence 'step [0-9]+' (no match for 60 s) on local rank 0"},
		{{HANG_RULE_CADENCE_START, 1, 300, 300},
		 "hang: cadence 'step [0-9]+' (no first match for 300 s) on local rank 1"},
	};

	for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
		char *s = hang_describe(&r, &cases[i].f);

		assert_string_equal(s, cases[i].text);
		free(s);
	}
}

/* A line longer than HANG_LINE_MAX is matched on its start; the rest is
 * dropped, not matched as a line of its own. */
static void
test_long_line(void **state)
{
	struct hang_rules r = {.cadence = "^step", .cadence_s = 1};
	struct hang *h = hang_new(&r, 1, 0, &(char *){NULL});
	size_t n = HANG_LINE_MAX * 2;
	char *buf = xcalloc(1, n + 1);
	struct hang_rank_view v;

	memset(buf, 'x', n);
	memcpy(buf + HANG_LINE_MAX + 10, "step", 4);
	buf[n - 1] = '\n';
	hang_feed(h, 0, 0, buf, n, S(1));
	assert_true(hang_rank(h, 0, &v));
	assert_false(v.matched);
	memcpy(buf, "step", 4);
	hang_feed(h, 0, 0, buf, n, S(2));
	assert_true(hang_rank(h, 0, &v));
	assert_true(v.matched);
	assert_int_equal(v.last_match, S(2));
	assert_false(hang_rank(h, 1, &v));
	free(buf);
	hang_free(h);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_rows),        cmocka_unit_test(test_feed_asks_rearm),
		cmocka_unit_test(test_rules_check), cmocka_unit_test(test_describe),
		cmocka_unit_test(test_long_line),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
