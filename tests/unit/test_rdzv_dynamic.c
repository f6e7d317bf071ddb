/* The dynamic rendezvous decisions, one table row per rule of torch 2.x's
 * exit / join / close / keep-alive operations (reference rendezvous.md §3.3),
 * then what each action does to the state (§3.2, §3.4, §3.5) and dead-node
 * sanitising (§3.6). States are written in the store encoding, so each row
 * reads like the document the nodes share. */
#include <errno.h>
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <cmocka.h>

#include "rdzv_dynamic.h"
#include "rdzv_state.h"
#include "util.h"

#define S 1000000LL
/* "now" of every row: wall 1000 s, monotonic 500 s. */
#define NOW_WALL (1000 * S)
#define NOW_MONO (500 * S)

static const struct rdzv_settings settings = {
	.min_nodes = 2,
	.max_nodes = 3,
	.last_call_usec = 30 * S,
	.keep_alive_interval_usec = 5 * S,
	.keep_alive_max_attempt = 3,
};

/* Header line: round gen complete closed deadline. */
#define H(round, complete, closed, deadline)                                                       \
	"elasticd-rdzv 1 " #round " 0 " #complete " " #closed " " #deadline "\n"
/* Fresh heartbeats (now - 1 s) and old ones (now - 6 s: keep-alive due). */
#define FRESH "999000000"
#define DUE "994000000"

struct decide_case {
	const char *name;
	enum rdzv_op op;
	const char *state;
	int64_t op_deadline_offset; /* op deadline = NOW_MONO + this */
	enum rdzv_action want;
};

static const struct decide_case cases[] = {
	/* exit */
	{"exit: participant leaves", RDZV_OP_EXIT,
	 H(0, 1, 0, -1) "p me_1_0 0\nh me_1_0 " FRESH "\n", 10 * S,
	 RDZV_ACTION_REMOVE_FROM_PARTICIPANTS},
	{"exit: participant past deadline", RDZV_OP_EXIT, H(0, 1, 0, -1) "p me_1_0 0\n", -1,
	 RDZV_ACTION_ERROR_TIMEOUT},
	{"exit: not a participant", RDZV_OP_EXIT, H(0, 1, 0, -1) "p b_1_0 0\n", 10 * S,
	 RDZV_ACTION_FINISH},
	/* leave (graceful stop): every list, never closing */
	{"leave: participant of a running round", RDZV_OP_LEAVE,
	 H(0, 1, 0, -1) "p a_1_0 0\np me_1_0 1\nh me_1_0 " FRESH "\n", 10 * S,
	 RDZV_ACTION_REMOVE_FROM_PARTICIPANTS},
	{"leave: on the wait list", RDZV_OP_LEAVE, H(0, 1, 0, -1) "p a_1_0 0\nw me_1_0\n", 10 * S,
	 RDZV_ACTION_REMOVE_FROM_WAIT_LIST},
	{"leave: a spare", RDZV_OP_LEAVE, H(0, 1, 0, -1) "p a_1_0 0\nr me_1_0\n", 10 * S,
	 RDZV_ACTION_REMOVE_FROM_REDUNDANCY_LIST},
	{"leave: past deadline", RDZV_OP_LEAVE, H(0, 1, 0, -1) "w me_1_0\n", -1,
	 RDZV_ACTION_ERROR_TIMEOUT},
	{"leave: nowhere (closed)", RDZV_OP_LEAVE, H(0, 1, 1, -1) "p a_1_0 0\n", 10 * S,
	 RDZV_ACTION_FINISH},
	/* join, in torch's order */
	{"join: closed", RDZV_OP_JOIN, H(0, 0, 1, -1), 10 * S, RDZV_ACTION_ERROR_CLOSED},
	/* --quarantine: another agent (pid) of a quarantined host waits; the
	 * quarantined agent itself, or anyone after until, joins. */
	{"join: host quarantined by another agent", RDZV_OP_JOIN,
	 H(0, 0, 0, -1) "q me_2_0 2000000000 1\n", 10 * S, RDZV_ACTION_SYNC},
	{"join: host quarantined, spare slot too", RDZV_OP_JOIN,
	 H(0, 1, 0, -1) "p a_1_0 0\np b_1_0 1\np c_1_0 2\nq me_2_0 2000000000 1\n", 10 * S,
	 RDZV_ACTION_SYNC},
	{"join: the quarantined agent itself (readmitted early)", RDZV_OP_JOIN,
	 H(0, 0, 0, -1) "q me_1_0 2000000000 1\n", 10 * S, RDZV_ACTION_ADD_TO_PARTICIPANTS},
	{"join: quarantine over", RDZV_OP_JOIN, H(0, 0, 0, -1) "q me_2_0 999000000 1\n", 10 * S,
	 RDZV_ACTION_ADD_TO_PARTICIPANTS},
	{"join: another host quarantined", RDZV_OP_JOIN,
	 H(0, 0, 0, -1) "q other_2_0 2000000000 1\n", 10 * S, RDZV_ACTION_ADD_TO_PARTICIPANTS},
	{"join: closed while spare", RDZV_OP_JOIN, H(0, 1, 1, -1) "r me_1_0\n", 10 * S,
	 RDZV_ACTION_GRACEFUL_EXIT},
	{"join: spare, round full, heartbeat fresh", RDZV_OP_JOIN,
	 H(0, 1, 0, -1) "p a_1_0 0\np b_1_0 1\np c_1_0 2\nr me_1_0\nh me_1_0 " FRESH "\n", -1,
	 RDZV_ACTION_SYNC},
	{"join: spare, round full, heartbeat due", RDZV_OP_JOIN,
	 H(0, 1, 0, -1) "p a_1_0 0\np b_1_0 1\np c_1_0 2\nr me_1_0\nh me_1_0 " DUE "\n", -1,
	 RDZV_ACTION_KEEP_ALIVE},
	{"join: spare, a slot freed", RDZV_OP_JOIN,
	 H(0, 1, 0, -1) "p a_1_0 0\np b_1_0 1\nr me_1_0\nh me_1_0 " FRESH "\n", 10 * S,
	 RDZV_ACTION_REMOVE_FROM_REDUNDANCY_LIST},
	{"join: complete and in it", RDZV_OP_JOIN, H(0, 1, 0, -1) "p a_1_0 0\np me_1_0 1\n", -1,
	 RDZV_ACTION_FINISH},
	{"join: past deadline, participant rolls back", RDZV_OP_JOIN, H(0, 0, 0, -1) "p me_1_0 0\n",
	 -1, RDZV_ACTION_REMOVE_FROM_PARTICIPANTS},
	{"join: past deadline, waiting node rolls back", RDZV_OP_JOIN,
	 H(0, 1, 0, -1) "p a_1_0 0\nw me_1_0\n", -1, RDZV_ACTION_REMOVE_FROM_WAIT_LIST},
	{"join: past deadline, nothing to roll back", RDZV_OP_JOIN, H(0, 0, 0, -1), -1,
	 RDZV_ACTION_ERROR_TIMEOUT},
	{"join: past the rollback window", RDZV_OP_JOIN, H(0, 0, 0, -1) "p me_1_0 0\n", -6 * S,
	 RDZV_ACTION_ERROR_TIMEOUT},
	{"join: complete with room, late node", RDZV_OP_JOIN,
	 H(0, 1, 0, -1) "p a_1_0 0\np b_1_0 1\n", 10 * S, RDZV_ACTION_ADD_TO_WAIT_LIST},
	{"join: complete with room, already waiting", RDZV_OP_JOIN,
	 H(0, 1, 0, -1) "p a_1_0 0\np b_1_0 1\nw me_1_0\nh me_1_0 " FRESH "\n", 10 * S,
	 RDZV_ACTION_SYNC},
	{"join: waiting, heartbeat due", RDZV_OP_JOIN,
	 H(0, 1, 0, -1) "p a_1_0 0\np b_1_0 1\nw me_1_0\nh me_1_0 " DUE "\n", 10 * S,
	 RDZV_ACTION_KEEP_ALIVE},
	{"join: complete and full: spare", RDZV_OP_JOIN,
	 H(0, 1, 0, -1) "p a_1_0 0\np b_1_0 1\np c_1_0 2\n", 10 * S,
	 RDZV_ACTION_ADD_TO_REDUNDANCY_LIST},
	{"join: last call over", RDZV_OP_JOIN, H(0, 0, 0, 999000000) "p a_1_0 0\np me_1_0 0\n",
	 10 * S, RDZV_ACTION_MARK_RENDEZVOUS_COMPLETE},
	{"join: last call running", RDZV_OP_JOIN,
	 H(0, 0, 0, 1001000000) "p a_1_0 0\np me_1_0 0\nh me_1_0 " FRESH "\n", 10 * S,
	 RDZV_ACTION_SYNC},
	{"join: below min nodes", RDZV_OP_JOIN, H(0, 0, 0, -1) "p me_1_0 0\nh me_1_0 " FRESH "\n",
	 10 * S, RDZV_ACTION_SYNC},
	{"join: below min, heartbeat due", RDZV_OP_JOIN,
	 H(0, 0, 0, -1) "p me_1_0 0\nh me_1_0 " DUE "\n", 10 * S, RDZV_ACTION_KEEP_ALIVE},
	{"join: min reached but no deadline (post-1.13 guard)", RDZV_OP_JOIN,
	 H(0, 0, 0, -1) "p a_1_0 0\np me_1_0 0\nh me_1_0 " FRESH "\n", 10 * S, RDZV_ACTION_SYNC},
	{"join: open round", RDZV_OP_JOIN, H(3, 0, 0, -1) "p a_1_0 0\n", 10 * S,
	 RDZV_ACTION_ADD_TO_PARTICIPANTS},
	{"join: open round, from the wait list", RDZV_OP_JOIN, H(3, 0, 0, -1) "w me_1_0\n", 10 * S,
	 RDZV_ACTION_ADD_TO_PARTICIPANTS},
	/* close */
	{"close: already closed", RDZV_OP_CLOSE, H(0, 1, 1, -1), -1, RDZV_ACTION_FINISH},
	{"close: past deadline", RDZV_OP_CLOSE, H(0, 1, 0, -1), -1, RDZV_ACTION_ERROR_TIMEOUT},
	{"close: mark it", RDZV_OP_CLOSE, H(0, 1, 0, -1), 10 * S,
	 RDZV_ACTION_MARK_RENDEZVOUS_CLOSED},
	/* keep-alive */
	{"keep-alive: due", RDZV_OP_KEEP_ALIVE, H(0, 1, 0, -1) "p me_1_0 0\nh me_1_0 " DUE "\n",
	 5 * S, RDZV_ACTION_KEEP_ALIVE},
	{"keep-alive: due past its deadline", RDZV_OP_KEEP_ALIVE,
	 H(0, 1, 0, -1) "p me_1_0 0\nh me_1_0 " DUE "\n", -1, RDZV_ACTION_ERROR_TIMEOUT},
	{"keep-alive: fresh", RDZV_OP_KEEP_ALIVE, H(0, 1, 0, -1) "p me_1_0 0\nh me_1_0 " FRESH "\n",
	 5 * S, RDZV_ACTION_FINISH},
	{"keep-alive: removed as dead: no resurrection", RDZV_OP_KEEP_ALIVE,
	 H(0, 1, 0, -1) "p a_1_0 0\n", 5 * S, RDZV_ACTION_FINISH},
};

static struct rdzv_node me;

static void
load(const char *text, struct rdzv_state *st)
{
	assert_int_equal(rdzv_state_decode(text, strlen(text), st), 0);
}

static struct rdzv_ctx
ctx_at(int64_t op_deadline_offset)
{
	struct rdzv_ctx ctx = {
		.settings = &settings,
		.node = &me,
		.now_wall = NOW_WALL,
		.now_mono = NOW_MONO,
		.op_deadline = (uint64_t)(NOW_MONO + op_deadline_offset),
	};

	return ctx;
}

static void
test_decide(void **state)
{
	for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
		struct rdzv_state st;
		struct rdzv_ctx ctx = ctx_at(cases[i].op_deadline_offset);
		enum rdzv_action got;

		load(cases[i].state, &st);
		got = rdzv_decide(cases[i].op, &st, &ctx);
		if (got != cases[i].want) {
			fail_msg("%s: got %s, want %s", cases[i].name, rdzv_action_name(got),
				 rdzv_action_name(cases[i].want));
		}
		rdzv_state_release(&st);
	}
}

struct apply_case {
	const char *name;
	const char *before;
	enum rdzv_action action;
	const char *after;
	bool notable;
};

#define NOWS "1000000000"
static const struct apply_case applies[] = {
	{"keep-alive stamps my heartbeat", H(0, 1, 0, -1) "p me_1_0 0\nh me_1_0 " DUE "\n",
	 RDZV_ACTION_KEEP_ALIVE, H(0, 1, 0, -1) "p me_1_0 0\nh me_1_0 " NOWS "\n", false},
	{"first participant", H(0, 0, 0, -1), RDZV_ACTION_ADD_TO_PARTICIPANTS,
	 H(0, 0, 0, -1) "p me_1_0 0\nh me_1_0 " NOWS "\n", false},
	{"min reached: last call starts", H(0, 0, 0, -1) "p a_1_0 0\nh a_1_0 " FRESH "\n",
	 RDZV_ACTION_ADD_TO_PARTICIPANTS,
	 H(0, 0, 0, 1030000000) "p a_1_0 0\np me_1_0 0\nh a_1_0 " FRESH "\nh me_1_0 " NOWS "\n",
	 true},
	{"max reached: complete at once, ranks by node order",
	 H(0, 0, 0, 1010000000) "p a_2_0 0\np zz_1_0 0\n", RDZV_ACTION_ADD_TO_PARTICIPANTS,
	 H(0, 1, 0, -1) "p a_2_0 0\np me_1_0 1\np zz_1_0 2\nh me_1_0 " NOWS "\n", true},
	{"from the wait list into the round", H(1, 0, 0, -1) "w me_1_0\nh me_1_0 " FRESH "\n",
	 RDZV_ACTION_ADD_TO_PARTICIPANTS, H(1, 0, 0, -1) "p me_1_0 0\nh me_1_0 " NOWS "\n", false},
	{"late node waits", H(0, 1, 0, -1) "p a_1_0 0\n", RDZV_ACTION_ADD_TO_WAIT_LIST,
	 H(0, 1, 0, -1) "p a_1_0 0\nw me_1_0\nh me_1_0 " NOWS "\n", true},
	{"spare to the wait list", H(0, 1, 0, -1) "p a_1_0 0\nr me_1_0\n",
	 RDZV_ACTION_ADD_TO_WAIT_LIST, H(0, 1, 0, -1) "p a_1_0 0\nw me_1_0\nh me_1_0 " NOWS "\n",
	 true},
	{"spare parks", H(0, 1, 0, -1) "p a_1_0 0\np b_1_0 1\np c_1_0 2\n",
	 RDZV_ACTION_ADD_TO_REDUNDANCY_LIST,
	 H(0, 1, 0, -1) "p a_1_0 0\np b_1_0 1\np c_1_0 2\nr me_1_0\nh me_1_0 " NOWS "\n", false},
	{"leave a running round", H(0, 1, 0, -1) "p a_1_0 0\np me_1_0 1\nh me_1_0 " FRESH "\n",
	 RDZV_ACTION_REMOVE_FROM_PARTICIPANTS, H(0, 1, 0, -1) "p a_1_0 0\n", true},
	{"last one out advances the round", H(4, 1, 0, -1) "p me_1_0 0\nw b_1_0\n",
	 RDZV_ACTION_REMOVE_FROM_PARTICIPANTS, H(5, 0, 0, -1) "w b_1_0\n", true},
	{"below min cancels the last call", H(0, 0, 0, 1010000000) "p a_1_0 0\np me_1_0 0\n",
	 RDZV_ACTION_REMOVE_FROM_PARTICIPANTS, H(0, 0, 0, -1) "p a_1_0 0\n", true},
	{"leave a gathering round above min",
	 H(0, 0, 0, 1010000000) "p a_1_0 0\np b_1_0 0\np me_1_0 0\n",
	 RDZV_ACTION_REMOVE_FROM_PARTICIPANTS, H(0, 0, 0, 1010000000) "p a_1_0 0\np b_1_0 0\n",
	 false},
	{"leave the wait list", H(0, 1, 0, -1) "p a_1_0 0\nw me_1_0\nh me_1_0 " FRESH "\n",
	 RDZV_ACTION_REMOVE_FROM_WAIT_LIST, H(0, 1, 0, -1) "p a_1_0 0\n", false},
	{"leave the redundancy list", H(0, 1, 0, -1) "p a_1_0 0\nr me_1_0\nh me_1_0 " FRESH "\n",
	 RDZV_ACTION_REMOVE_FROM_REDUNDANCY_LIST, H(0, 1, 0, -1) "p a_1_0 0\n", false},
	{"complete after the last call", H(2, 0, 0, 999000000) "p b_1_0 0\np me_1_0 0\n",
	 RDZV_ACTION_MARK_RENDEZVOUS_COMPLETE, H(2, 1, 0, -1) "p b_1_0 0\np me_1_0 1\n", true},
	{"rank keys order the ranks, naturally",
	 H(2, 0, 0, 999000000) "p a_1_0@10 0\np b_1_0@9 0\n", RDZV_ACTION_MARK_RENDEZVOUS_COMPLETE,
	 H(2, 1, 0, -1) "p a_1_0@10 1\np b_1_0@9 0\n", true},
	{"keyed nodes first, equal keys by node, fewer leading zeros first",
	 H(2, 0, 0, 999000000) "p a_1_0@k02 0\np b_1_0@k2 0\np c_1_0@k2 0\np d_1_0@k10 0\n"
			       "p me_1_0 0\n",
	 RDZV_ACTION_MARK_RENDEZVOUS_COMPLETE,
	 H(2, 1, 0, -1) "p a_1_0@k02 2\np b_1_0@k2 0\np c_1_0@k2 1\np d_1_0@k10 3\np me_1_0 4\n",
	 true},
	{"close", H(2, 1, 0, -1), RDZV_ACTION_MARK_RENDEZVOUS_CLOSED, H(2, 1, 1, -1), true},
	{"sync changes nothing", H(2, 1, 0, -1), RDZV_ACTION_SYNC, H(2, 1, 0, -1), false},
};

static void
assert_state(const struct rdzv_state *st, const char *want, const char *name)
{
	size_t len;
	char *got = rdzv_state_encode(st, &len);

	if (len != strlen(want) || memcmp(got, want, len) != 0) {
		fail_msg("%s:\n got: %.*s\nwant: %s", name, (int)len, got, want);
	}
	free(got);
}

static void
test_apply(void **state)
{
	for (size_t i = 0; i < ARRAY_SIZE(applies); i++) {
		struct rdzv_state st;
		struct rdzv_ctx ctx = ctx_at(10 * S);
		bool notable;

		load(applies[i].before, &st);
		notable = rdzv_apply(&st, applies[i].action, &ctx);
		assert_state(&st, applies[i].after, applies[i].name);
		if (notable != applies[i].notable) {
			fail_msg("%s: notable %d, want %d", applies[i].name, notable,
				 applies[i].notable);
		}
		rdzv_state_release(&st);
	}
}

static void
test_sanitize(void **state)
{
	static const struct {
		const char *name;
		const char *before;
		const char *after;
		size_t dropped;
		bool notable;
	} rows[] = {
		{"nobody dead", H(0, 1, 0, -1) "p a_1_0 0\nh a_1_0 " FRESH "\n",
		 H(0, 1, 0, -1) "p a_1_0 0\nh a_1_0 " FRESH "\n", 0, false},
		{"exactly at the limit survives", H(0, 1, 0, -1) "p a_1_0 0\nh a_1_0 985000000\n",
		 H(0, 1, 0, -1) "p a_1_0 0\nh a_1_0 985000000\n", 0, false},
		{"dead member of a running round",
		 H(0, 1, 0, -1) "p a_1_0 0\np b_1_0 1\nh a_1_0 " FRESH "\nh b_1_0 984999999\n",
		 H(0, 1, 0, -1) "p a_1_0 0\nh a_1_0 " FRESH "\n", 1, true},
		{"all members dead: next round", H(0, 1, 0, -1) "p a_1_0 0\nh a_1_0 1\n",
		 H(1, 0, 0, -1), 1, true},
		{"dead gatherer below min: last call off",
		 H(0, 0, 0, 1010000000) "p a_1_0 0\np b_1_0 0\nh a_1_0 " FRESH "\nh b_1_0 1\n",
		 H(0, 0, 0, -1) "p a_1_0 0\nh a_1_0 " FRESH "\n", 1, true},
		{"dead waiting and spare nodes",
		 H(0, 1, 0, -1) "p a_1_0 0\nw w_1_0\nr r_1_0\nh a_1_0 " FRESH
				"\nh r_1_0 1\nh w_1_0 1\n",
		 H(0, 1, 0, -1) "p a_1_0 0\nh a_1_0 " FRESH "\n", 2, true},
	};

	for (size_t i = 0; i < ARRAY_SIZE(rows); i++) {
		struct rdzv_state st;
		bool notable = !rows[i].notable;
		size_t n;

		load(rows[i].before, &st);
		n = rdzv_sanitize(&st, &settings, NOW_WALL, &notable);
		assert_state(&st, rows[i].after, rows[i].name);
		assert_int_equal(n, rows[i].dropped);
		assert_int_equal(notable, rows[i].notable);
		rdzv_state_release(&st);
	}
}

/* Admission on behalf of others: each joiner gets what its own JOIN would do,
 * in the order given; members and parked nodes are left alone. */
static void
test_admit(void **state)
{
	static const struct {
		const char *name;
		const char *before;
		const char *joiners; /* space-separated, in order of arrival */
		const char *after;
		size_t admitted;
		bool notable;
	} rows[] = {
		{"two into an empty round: min reached, last call", H(0, 0, 0, -1), "b_1_0 a_1_0",
		 H(0, 0, 0, 1030000000) "p a_1_0 0\np b_1_0 0\nh a_1_0 " NOWS "\nh b_1_0 " NOWS
					"\n",
		 2, true},
		{"one below min: nothing to announce", H(0, 0, 0, -1), "a_1_0",
		 H(0, 0, 0, -1) "p a_1_0 0\nh a_1_0 " NOWS "\n", 1, false},
		{"the max-th completes the round, the next one is a spare",
		 H(0, 0, 0, 1010000000) "p a_1_0 0\np b_1_0 0\n", "c_1_0 d_1_0",
		 H(0, 1, 0, -1) "p a_1_0 0\np b_1_0 1\np c_1_0 2\nr d_1_0\nh c_1_0 " NOWS
				"\nh d_1_0 " NOWS "\n",
		 2, true},
		{"late joiner of a complete round waits", H(0, 1, 0, -1) "p a_1_0 0\n", "z_1_0",
		 H(0, 1, 0, -1) "p a_1_0 0\nw z_1_0\nh z_1_0 " NOWS "\n", 1, true},
		{"members and waiting nodes are not touched",
		 H(0, 1, 0, -1) "p a_1_0 0\nw w_1_0\nh a_1_0 " FRESH "\nh w_1_0 " FRESH "\n",
		 "a_1_0 w_1_0",
		 H(0, 1, 0, -1) "p a_1_0 0\nw w_1_0\nh a_1_0 " FRESH "\nh w_1_0 " FRESH "\n", 0,
		 false},
		{"closed: nobody", H(0, 0, 1, -1), "a_1_0", H(0, 0, 1, -1), 0, false},
	};

	for (size_t i = 0; i < ARRAY_SIZE(rows); i++) {
		struct rdzv_state st;
		struct rdzv_node nodes[4];
		struct rdzv_ctx ctx = ctx_at(-100 * S); /* the writer's own deadline: ignored */
		char *list = xstrdup(rows[i].joiners), *save = NULL;
		size_t n = 0, admitted;
		bool notable = !rows[i].notable;

		for (char *t = strtok_r(list, " ", &save); t; t = strtok_r(NULL, " ", &save)) {
			assert_int_equal(rdzv_node_parse(&nodes[n++], t, strlen(t)), 0);
		}
		load(rows[i].before, &st);
		admitted = rdzv_admit(&st, nodes, n, &ctx, &notable);
		assert_state(&st, rows[i].after, rows[i].name);
		assert_int_equal(admitted, rows[i].admitted);
		assert_int_equal(notable, rows[i].notable);
		rdzv_state_release(&st);
		for (size_t k = 0; k < n; k++) {
			rdzv_node_release(&nodes[k]);
		}
		free(list);
	}
}

/* What next_rendezvous reports for each way a join can end but FINISH. */
static void
test_join_failure(void **state)
{
	static const struct {
		enum rdzv_action a;
		int err;
		const char *msg;
	} rows[] = {
		{RDZV_ACTION_ERROR_CLOSED, -ECONNABORTED, "the rendezvous 'job' is closed"},
		{RDZV_ACTION_ERROR_TIMEOUT, -ETIMEDOUT,
		 "the rendezvous 'job' did not complete within the join timeout of 2.5 s: 1 of at "
		 "least 3 nodes joined round 4"},
		{RDZV_ACTION_GRACEFUL_EXIT, -ESHUTDOWN,
		 "the rendezvous 'job' closed while this node waited as a spare; terminating "
		 "pending "
		 "rendezvous"},
		{RDZV_ACTION_SYNC, -EPROTO, "unexpected rendezvous action SYNC"},
	};

	for (size_t i = 0; i < ARRAY_SIZE(rows); i++) {
		char *msg = NULL;

		assert_int_equal(rdzv_join_failure(rows[i].a, "job", 2500000, 1, 3, 4, &msg),
				 rows[i].err);
		assert_string_equal(msg, rows[i].msg);
		free(msg);
	}
}

/* What a running node (round 0, rank 1 of 2) makes of the state it reads,
 * and of the state's summary (a gen key): the same, save that a closed
 * rendezvous is for the state to say (who closed it), and that a node
 * dropped from the round hears that a member left. */
static void
test_round_check(void **state)
{
	static const struct {
		const char *name;
		const char *state;
		int ret;
		int waiting;
		const char *msg;
		const char *sum_msg; /* NULL: msg */
	} rows[] = {
		{"all there", H(0, 1, 0, -1) "p a_1_0 0\np me_1_0 1\n", 0, 0, NULL, NULL},
		{"closed", H(0, 1, 1, -1) "p a_1_0 0\np me_1_0 1\n", -ECONNABORTED, 0,
		 "the rendezvous was closed by another node (its workers failed or the job ended)",
		 NULL},
		{"next round", H(1, 0, 0, -1), 1, 0,
		 "this node is no longer in round 0 of the rendezvous", NULL},
		{"dropped", H(0, 1, 0, -1) "p a_1_0 0\n", 1, 0,
		 "this node is no longer in round 0 of the rendezvous",
		 "1 of the 2 nodes of round 0 left"},
		{"a member left", H(0, 1, 0, -1) "p me_1_0 1\n", 1, 0,
		 "1 of the 2 nodes of round 0 left", NULL},
		{"late joiners", H(0, 1, 0, -1) "p a_1_0 0\np me_1_0 1\nw x_1_0\nw y_1_0\n", 1, 2,
		 "Detected 2 new nodes from group_rank=1", NULL},
	};

	for (size_t i = 0; i < ARRAY_SIZE(rows); i++) {
		struct rdzv_state st;
		struct rdzv_summary sum;
		char *msg = NULL;
		int waiting = -1, ret = rows[i].ret;

		load(rows[i].state, &st);
		if (rdzv_round_check(&st, &me, 0, 2, 1, &waiting, &msg) != ret) {
			fail_msg("%s: want %d", rows[i].name, ret);
		}
		assert_int_equal(waiting, rows[i].waiting);
		if (rows[i].msg) {
			assert_string_equal(msg, rows[i].msg);
		}
		free(msg);
		msg = NULL;
		waiting = -1;
		sum = rdzv_summary_of(&st);
		if (rdzv_round_check_summary(&sum, 0, 2, 1, &waiting, &msg) !=
		    (ret < 0 ? -EAGAIN : ret)) {
			fail_msg("%s: summary: want %d", rows[i].name, ret < 0 ? -EAGAIN : ret);
		}
		assert_int_equal(waiting, rows[i].waiting);
		if (ret > 0) {
			assert_string_equal(msg, rows[i].sum_msg ? rows[i].sum_msg : rows[i].msg);
		} else {
			assert_null(msg);
		}
		free(msg);
		rdzv_state_release(&st);
	}
}

static void
test_next_wake(void **state)
{
	struct rdzv_state st;
	struct rdzv_ctx ctx = ctx_at(100 * S);

	/* Heartbeat due in 4 s. */
	load(H(0, 0, 0, -1) "p me_1_0 0\nh me_1_0 " FRESH "\n", &st);
	assert_int_equal(rdzv_next_wake_usec(RDZV_OP_JOIN, &st, &ctx), 4 * S);
	rdzv_state_release(&st);
	/* Last call ends in 2 s. */
	load(H(0, 0, 0, 1002000000) "p a_1_0 0\np me_1_0 0\nh a_1_0 " NOWS "\nh me_1_0 " NOWS "\n",
	     &st);
	assert_int_equal(rdzv_next_wake_usec(RDZV_OP_JOIN, &st, &ctx), 2 * S + 1000);
	rdzv_state_release(&st);
	/* The op deadline in 1 s. */
	ctx = ctx_at(1 * S);
	load(H(0, 0, 0, -1) "p me_1_0 0\nh me_1_0 " NOWS "\n", &st);
	assert_int_equal(rdzv_next_wake_usec(RDZV_OP_JOIN, &st, &ctx), 1 * S + 1000);
	rdzv_state_release(&st);
}

static int
setup(void **state)
{
	return rdzv_node_init(&me, "me", 1, 0);
}

static int
teardown(void **state)
{
	rdzv_node_release(&me);
	return 0;
}

/* The quarantine rides on the node's next change (the leave), and goes
 * when the node takes a place again. */
static void
test_apply_quarantine(void **state)
{
	struct rdzv_state st;
	struct rdzv_ctx ctx = ctx_at(10 * S);
	struct rdzv_quarantine q = {.until = 2000 * S, .count = 2};
	char *enc;
	size_t len;

	load(H(0, 1, 0, -1) "p a_1_0 0\np me_1_0 1\nh me_1_0 " FRESH "\n", &st);
	ctx.quarantine = &q;
	assert_true(rdzv_apply(&st, RDZV_ACTION_REMOVE_FROM_PARTICIPANTS, &ctx));
	enc = rdzv_state_encode(&st, &len);
	assert_string_equal(enc + len - strlen("q me_1_0 2000000000 2\n"),
			    "q me_1_0 2000000000 2\n");
	free(enc);
	assert_int_equal(st.n_quarantine, 1);
	/* A coordinator's admission of others never records its own. */
	struct rdzv_node other;
	assert_int_equal(rdzv_node_init(&other, "b", 9, 0), 0);
	assert_int_equal(rdzv_admit(&st, &other, 1, &ctx, NULL), 1);
	assert_int_equal(st.n_quarantine, 1);
	/* Back in: the entry ends now, its count stays (for a restarted agent). */
	ctx.quarantine = NULL;
	assert_true(rdzv_apply(&st, RDZV_ACTION_ADD_TO_PARTICIPANTS, &ctx));
	assert_int_equal(st.n_quarantine, 1);
	assert_int_equal(st.quarantine[0].until, NOW_WALL);
	assert_int_equal(st.quarantine[0].count, 2);
	assert_false(rdzv_state_quarantined(&st, &other, NOW_WALL));
	rdzv_node_release(&other);
	rdzv_state_release(&st);
	/* Dropped as dead before its leave: the leave writes the entry alone,
	 * once, and nothing else changes. */
	load(H(0, 1, 0, -1) "p a_1_0 0\nq me_1_0 1500000000 1\n", &st);
	ctx.quarantine = &q;
	assert_int_equal(rdzv_decide(RDZV_OP_LEAVE, &st, &ctx), RDZV_ACTION_QUARANTINE);
	assert_true(rdzv_action_is_mutation(RDZV_ACTION_QUARANTINE));
	assert_true(rdzv_apply(&st, RDZV_ACTION_QUARANTINE, &ctx));
	enc = rdzv_state_encode(&st, &len);
	assert_string_equal(enc, H(0, 1, 0, -1) "p a_1_0 0\nq me_1_0 2000000000 2\n");
	free(enc);
	assert_int_equal(rdzv_decide(RDZV_OP_LEAVE, &st, &ctx), RDZV_ACTION_FINISH);
	ctx.quarantine = NULL;
	assert_int_equal(rdzv_decide(RDZV_OP_LEAVE, &st, &ctx), RDZV_ACTION_FINISH);
	rdzv_state_release(&st);
	(void)state;
}

/* The readmit verb of any agent: RDZV_OP_READMIT expires the named host's
 * entry in force (its count stays); anything else is left alone. */
struct readmit_case {
	const char *name;
	const char *host;      /* ctx.readmit */
	const char *q;         /* the state's "q" lines */
	int64_t deadline;      /* op deadline offset */
	enum rdzv_action want; /* rdzv_decide */
	const char *after;     /* the "q" lines after rdzv_apply of want */
};

static const struct readmit_case readmit_cases[] = {
	{"by host", "10.0.0.3", "q 10.0.0.3_7_0 2000000000 2\n", 10 * S, RDZV_ACTION_READMIT,
	 "q 10.0.0.3_7_0 1000000000 2\n"},
	{"by descriptor", "10.0.0.3_7_0", "q 10.0.0.3_7_0 2000000000 1\n", 10 * S,
	 RDZV_ACTION_READMIT, "q 10.0.0.3_7_0 1000000000 1\n"},
	{"one of two", "b", "q a_1_0 2000000000 1\nq b_2_0 3000000000 4\n", 10 * S,
	 RDZV_ACTION_READMIT, "q a_1_0 2000000000 1\nq b_2_0 1000000000 4\n"},
	{"prefix is not a host", "10.0.0", "q 10.0.0.3_7_0 2000000000 2\n", 10 * S,
	 RDZV_ACTION_FINISH, "q 10.0.0.3_7_0 2000000000 2\n"},
	{"already over", "a", "q a_1_0 900000000 3\n", 10 * S, RDZV_ACTION_FINISH,
	 "q a_1_0 900000000 3\n"},
	{"not quarantined", "a", "", 10 * S, RDZV_ACTION_FINISH, ""},
	{"read only", NULL, "q a_1_0 2000000000 1\n", 10 * S, RDZV_ACTION_FINISH,
	 "q a_1_0 2000000000 1\n"},
	{"deadline passed", "a", "q a_1_0 2000000000 1\n", -1, RDZV_ACTION_ERROR_TIMEOUT,
	 "q a_1_0 2000000000 1\n"},
};

static void
test_readmit(void **state)
{
	for (size_t i = 0; i < ARRAY_SIZE(readmit_cases); i++) {
		const struct readmit_case *c = &readmit_cases[i];
		struct rdzv_ctx ctx = ctx_at(c->deadline);
		char *text = xasprintf(H(0, 1, 0, -1) "p me_1_0 0\n%s", c->q), *enc, *want;
		struct rdzv_state st;
		size_t len;

		print_message("case %s\n", c->name);
		load(text, &st);
		ctx.readmit = c->host;
		assert_int_equal(rdzv_decide(RDZV_OP_READMIT, &st, &ctx), c->want);
		assert_int_equal(rdzv_apply(&st, c->want, &ctx), c->want == RDZV_ACTION_READMIT);
		assert_false(rdzv_state_host_quarantined(&st, c->host ? c->host : "a", NOW_WALL) &&
			     c->want == RDZV_ACTION_READMIT);
		enc = rdzv_state_encode(&st, &len);
		want = xasprintf(H(0, 1, 0, -1) "p me_1_0 0\n%s", c->after);
		assert_int_equal(len, strlen(want));
		assert_memory_equal(enc, want, len);
		free(enc);
		free(want);
		free(text);
		rdzv_state_release(&st);
	}
	(void)state;
}

/* --rdzv-conf segment=2 (min 2, max 4): whole segments of nodes sharing a
 * key prefix; the rest parked as spares, promoted when a hole opens. */
static const struct rdzv_settings seg_settings = {
	.min_nodes = 2,
	.max_nodes = 4,
	.last_call_usec = 30 * S,
	.keep_alive_interval_usec = 5 * S,
	.keep_alive_max_attempt = 3,
	.segment = 2,
};

struct seg_case {
	const char *name;
	const char *me; /* the deciding node */
	const char *before;
	enum rdzv_action action; /* applied; or, with after NULL, the decision wanted */
	const char *after;
};

static const struct seg_case seg_cases[] = {
	{"complete: a partial domain and a keyless node parked", "a_1_0@r1-1",
	 H(2, 0, 0, 999000000) "p a_1_0@r1-1 0\np b_1_0@r1-2 0\np c_1_0@r1-3 0\np d_1_0 0\n",
	 RDZV_ACTION_MARK_RENDEZVOUS_COMPLETE,
	 H(2, 1, 0, -1) "p a_1_0@r1-1 0\np b_1_0@r1-2 1\nr c_1_0@r1-3\nr d_1_0\n"},
	{"complete: domains in natural order, capped at max", "a_1_0@r10:1",
	 H(2, 0, 0, 999000000) "p a_1_0@r10:1 0\np b_1_0@r10:2 0\np c_1_0@r9:1 0\n"
			       "p d_1_0@r9:2 0\np e_1_0@r2:1 0\np f_1_0@r2:2 0\n",
	 RDZV_ACTION_MARK_RENDEZVOUS_COMPLETE,
	 H(2, 1, 0, -1) "p c_1_0@r9:1 2\np d_1_0@r9:2 3\np e_1_0@r2:1 0\np f_1_0@r2:2 1\n"
			"r a_1_0@r10:1\nr b_1_0@r10:2\n"},
	{"no whole segment yet: the last call waits", "a_1_0@r1-1",
	 H(2, 0, 0, 999000000) "p a_1_0@r1-1 0\np b_1_0@r2-1 0\n", RDZV_ACTION_SYNC, NULL},
	{"max in whole segments completes at once", "d_1_0@r2-2",
	 H(2, 0, 0, 1010000000) "p a_1_0@r1-1 0\np b_1_0@r1-2 0\np c_1_0@r2-1 0\n",
	 RDZV_ACTION_ADD_TO_PARTICIPANTS,
	 H(2, 1, 0, -1) "p a_1_0@r1-1 0\np b_1_0@r1-2 1\np c_1_0@r2-1 2\np d_1_0@r2-2 3\n"
			"h d_1_0@r2-2 1000000000\n"},
	{"a spare of a whole domain stays parked", "c_1_0@r1-3",
	 H(2, 1, 0, -1) "p a_1_0@r1-1 0\np b_1_0@r1-2 1\nr c_1_0@r1-3\nh c_1_0@r1-3 " FRESH "\n",
	 RDZV_ACTION_SYNC, NULL},
	{"a hole in its domain promotes the spare", "c_1_0@r1-3",
	 H(2, 1, 0, -1) "p a_1_0@r1-1 0\nr c_1_0@r1-3\nh c_1_0@r1-3 " FRESH "\n",
	 RDZV_ACTION_REMOVE_FROM_REDUNDANCY_LIST, NULL},
};

static void
test_segments(void **state)
{
	for (size_t i = 0; i < ARRAY_SIZE(seg_cases); i++) {
		const struct seg_case *c = &seg_cases[i];
		struct rdzv_node node;
		struct rdzv_state st;
		struct rdzv_ctx ctx = ctx_at(10 * S);

		assert_int_equal(rdzv_node_parse(&node, c->me, strlen(c->me)), 0);
		ctx.settings = &seg_settings;
		ctx.node = &node;
		load(c->before, &st);
		if (c->after) {
			rdzv_apply(&st, c->action, &ctx);
			assert_state(&st, c->after, c->name);
		} else if (rdzv_decide(RDZV_OP_JOIN, &st, &ctx) != c->action) {
			fail_msg("%s: got %s, want %s", c->name,
				 rdzv_action_name(rdzv_decide(RDZV_OP_JOIN, &st, &ctx)),
				 rdzv_action_name(c->action));
		}
		rdzv_state_release(&st);
		rdzv_node_release(&node);
	}
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_decide),      cmocka_unit_test(test_apply),
		cmocka_unit_test(test_sanitize),    cmocka_unit_test(test_next_wake),
		cmocka_unit_test(test_admit),       cmocka_unit_test(test_join_failure),
		cmocka_unit_test(test_round_check), cmocka_unit_test(test_apply_quarantine),
		cmocka_unit_test(test_segments),    cmocka_unit_test(test_readmit),
	};

	return cmocka_run_group_tests(tests, setup, teardown);
}
