/* What a rendezvous coordinator writes to the nodes' assignment keys
 * (rdzv_assign.h), the same for c10d and etcd: one row per situation, each
 * with what the coordinator told before and what it says now. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "rdzv_assign.h"
#include "util.h"

#define MAX_NODES 4

struct row {
	const char *what;
	/* the state */
	bool closed, complete;
	int64_t round;
	uint64_t gen;
	const char *participants[MAX_NODES]; /* rank = index */
	const char *wait_list[MAX_NODES];
	const char *redundancy_list[MAX_NODES];
	const char *joiners[MAX_NODES];
	/* the memo before */
	int64_t told_round;
	bool closed_told;
	const char *spares_told[MAX_NODES];
	const char *suffix;
	/* what it says: "node=value", in order */
	const char *said[2 * MAX_NODES + 1];
	int64_t round_after;
};

static const struct row rows[] = {
	{"a completed round to every participant but me", .complete = true, .round = 3, .gen = 9,
	 .participants = {"me", "b", "c"}, .told_round = -1, .suffix = "",
	 .said = {"b=3 1 3 9", "c=3 2 3 9"}, .round_after = 3},
	{"etcd's suffix: the state revision", .complete = true, .round = 3, .gen = 9,
	 .participants = {"b"}, .told_round = -1, .suffix = " 77", .said = {"b=3 0 1 9 77"},
	 .round_after = 3},
	{"a round is said once", .complete = true, .round = 3, .participants = {"b"},
	 .told_round = 3, .suffix = "", .round_after = 3},
	{"an incomplete round: nothing yet", .round = 4, .participants = {"b"}, .told_round = 3,
	 .suffix = "", .round_after = 3},
	{"new spares hear it once, then the round", .complete = true, .round = 5,
	 .participants = {"b"}, .redundancy_list = {"s1", "s2"}, .spares_told = {"s1"},
	 .told_round = 4, .suffix = "", .said = {"s2=spare", "b=5 0 1 0"}, .round_after = 5},
	{"closed: everyone who may wait, once", .closed = true, .round = 6,
	 .participants = {"b", "me"}, .wait_list = {"w"}, .redundancy_list = {"s"},
	 .joiners = {"j"}, .told_round = 5, .suffix = "",
	 .said = {"b=closed", "j=closed", "s=closed", "w=closed"}, .round_after = 5},
	{"closed: a joiner already in a list, or asking twice, hears it once", .closed = true,
	 .round = 6, .participants = {"b"}, .wait_list = {"w"}, .joiners = {"w", "j", "j"},
	 .told_round = 5, .suffix = "", .said = {"b=closed", "j=closed", "w=closed"},
	 .round_after = 5},
	{"closed after a complete round: its participants hold theirs", .closed = true,
	 .complete = true, .round = 6, .participants = {"b"}, .wait_list = {"w"}, .told_round = 6,
	 .suffix = "", .said = {"w=closed"}, .round_after = 6},
	{"closed, told already: nothing", .closed = true, .round = 6, .participants = {"b"},
	 .told_round = 5, .closed_told = true, .suffix = "", .round_after = 5},
};

static size_t
count(const char *const *v)
{
	size_t n = 0;

	while (n < MAX_NODES && v[n]) {
		n++;
	}
	return n;
}

static void
test_plan(void **state)
{
	for (size_t r = 0; r < ARRAY_SIZE(rows); r++) {
		const struct row *row = &rows[r];
		struct rdzv_participant parts[MAX_NODES] = {0};
		struct rdzv_node wait[MAX_NODES] = {0}, spare[MAX_NODES] = {0},
				 joiners[MAX_NODES] = {0};
		struct rdzv_state st = {.closed = row->closed,
					.complete = row->complete,
					.round = row->round,
					.gen = row->gen,
					.participants = parts,
					.n_participants = count(row->participants),
					.wait_list = wait,
					.n_wait_list = count(row->wait_list),
					.redundancy_list = spare,
					.n_redundancy_list = count(row->redundancy_list)};
		struct rdzv_assign_memo m;
		char **nodes = NULL, **vals = NULL;
		size_t n_said = 0;

		for (size_t i = 0; i < MAX_NODES; i++) {
			parts[i] = (struct rdzv_participant){
				.node.name = (char *)row->participants[i], .rank = (int)i};
			wait[i].name = (char *)row->wait_list[i];
			spare[i].name = (char *)row->redundancy_list[i];
			joiners[i].name = (char *)row->joiners[i];
		}
		rdzv_assign_memo_init(&m);
		m.round = row->told_round;
		m.closed_told = row->closed_told;
		for (size_t i = 0; i < count(row->spares_told); i++) {
			strv_push(&m.spares_told, row->spares_told[i]);
		}
		rdzv_assign_plan(&m, &st, joiners, count(row->joiners), "me", row->suffix, &nodes,
				 &vals);
		for (; nodes && nodes[n_said]; n_said++) {
			char *got = xasprintf("%s=%s", nodes[n_said], vals[n_said]);

			if (!row->said[n_said] || strcmp(got, row->said[n_said]) != 0) {
				fail_msg("%s: said #%zu %s, want %s", row->what, n_said, got,
					 row->said[n_said] ? row->said[n_said] : "nothing");
			}
			free(got);
		}
		if (row->said[n_said]) {
			fail_msg("%s: said %zu things, want also %s", row->what, n_said,
				 row->said[n_said]);
		}
		assert_int_equal(m.round, row->round_after);
		assert_true(m.closed_told == (row->closed || row->closed_told));
		/* The spares told are now exactly the redundancy list (unless closed). */
		if (!row->closed) {
			assert_int_equal(m.spares_told ? strv_length(m.spares_told) : 0,
					 st.n_redundancy_list);
		}
		strv_free(nodes);
		strv_free(vals);
		rdzv_assign_memo_reset(&m);
	}
}

/* Delegated exits: the coordinator runs the exit op of the nodes whose join
 * request says "x<round>", for those still in that round, before it admits
 * them. */
#define S 1000000LL
static const struct rdzv_settings exit_settings = {
	.min_nodes = 1,
	.max_nodes = 2,
	.last_call_usec = 30 * S,
	.keep_alive_interval_usec = 5 * S,
	.keep_alive_max_attempt = 3,
};

static void
load(const char *text, struct rdzv_state *st)
{
	assert_int_equal(rdzv_state_decode(text, strlen(text), st), 0);
}

static void
node(struct rdzv_node *n, const char *s)
{
	assert_int_equal(rdzv_node_parse(n, s, strlen(s)), 0);
}

/* The coordinator coord's context for the exits it applies for others: now
 * is wall 1000 s, monotonic 500 s; its own op deadline is ignored. */
static struct rdzv_ctx
coordinator_ctx(const struct rdzv_node *coord)
{
	return (struct rdzv_ctx){.settings = &exit_settings,
				 .node = coord,
				 .now_wall = 1000 * S,
				 .now_mono = 500 * S,
				 .op_deadline = 1};
}

static void
test_exits(void **state)
{
	struct rdzv_node coord, a, b, c;
	struct rdzv_ctx ctx = coordinator_ctx(&coord);
	struct rdzv_exits e = {0};
	struct rdzv_state st;
	char buf[32];
	bool notable = false;

	node(&coord, "k_1_0");
	node(&a, "a_1_0");
	node(&b, "b_1_0");
	node(&c, "c_1_0");
	rdzv_exits_request(3, buf, sizeof(buf));
	assert_string_equal(buf, "x3");
	rdzv_exits_request(-1, buf, sizeof(buf));
	assert_string_equal(buf, "");
	/* Plain requests, or anything else, are no exits. */
	assert_false(rdzv_exits_note(&e, &c, "1", 1));
	assert_false(rdzv_exits_note(&e, &c, "x", 1));
	assert_false(rdzv_exits_note(&e, &c, "x3z", 3));
	assert_false(rdzv_exits_note(&e, &c, "x-1", 3));
	assert_int_equal(e.n, 0);
	assert_true(rdzv_exits_note(&e, &a, "x1", 2));
	assert_true(rdzv_exits_note(&e, &a, "x3", 2)); /* a's newer request replaces it */
	assert_true(rdzv_exits_note(&e, &b, "x2", 2)); /* stale: round 3 runs */
	assert_int_equal(e.n, 2);

	/* One leaves a running round of two: the other runs on. */
	load("elasticd-rdzv 1 3 5 1 0 -1\np a_1_0 0\np b_1_0 1\n"
	     "h a_1_0 999000000\nh b_1_0 999000000\n",
	     &st);
	assert_true(rdzv_exits_due(&e, &st, &a, &ctx));
	assert_false(rdzv_exits_due(&e, &st, &b, &ctx));
	assert_false(rdzv_exits_due(&e, &st, &c, &ctx));
	/* The asker's side: still in round 3 (not in 2, nor as c, nor -1). */
	assert_true(rdzv_exits_still_in(&st, &a, 3));
	assert_false(rdzv_exits_still_in(&st, &a, 2));
	assert_false(rdzv_exits_still_in(&st, &c, 3));
	assert_false(rdzv_exits_still_in(&st, &a, -1));
	assert_int_equal(rdzv_exits_apply(&e, &st, &ctx, &notable), 1);
	assert_true(notable); /* a complete round lost a member */
	assert_int_equal(st.round, 3);
	assert_int_equal(st.n_participants, 1);
	assert_true(rdzv_state_find_participant(&st, &a) < 0);
	assert_false(rdzv_exits_due(&e, &st, &a, &ctx));
	assert_false(rdzv_exits_still_in(&st, &a, 3)); /* taken out */
	/* Applied, and stale: forgotten. */
	rdzv_exits_prune(&e, &st, &ctx);
	assert_int_equal(e.n, 0);
	rdzv_state_release(&st);

	/* Both leave: the round empties, the next one opens and admits them. */
	assert_true(rdzv_exits_note(&e, &a, "x3", 2));
	assert_true(rdzv_exits_note(&e, &b, "x3", 2));
	load("elasticd-rdzv 1 3 5 1 0 -1\np a_1_0 0\np b_1_0 1\n"
	     "h a_1_0 999000000\nh b_1_0 999000000\n",
	     &st);
	rdzv_exits_prune(&e, &st, &ctx); /* both still due: kept */
	assert_int_equal(e.n, 2);
	notable = false;
	assert_int_equal(rdzv_exits_apply(&e, &st, &ctx, &notable), 2);
	assert_true(notable);
	assert_int_equal(st.round, 4);
	assert_false(st.complete);
	assert_int_equal(st.n_participants, 0);
	{
		struct rdzv_node both[2] = {a, b};

		assert_int_equal(rdzv_admit(&st, both, 2, &ctx, NULL), 2);
	}
	assert_int_equal(st.n_participants, 2);
	assert_true(st.complete); /* max_nodes */
	/* Exits are idempotent: once out, nothing more. */
	assert_int_equal(rdzv_exits_apply(&e, &st, &ctx, &notable), 0);
	rdzv_exits_prune(&e, &st, &ctx);
	assert_int_equal(e.n, 0);
	rdzv_state_release(&st);
	rdzv_exits_release(&e);
	rdzv_node_release(&coord);
	rdzv_node_release(&a);
	rdzv_node_release(&b);
	rdzv_node_release(&c);
}

/* Withdrawn requests ("l"): a node left; the coordinator takes it off every
 * list it got onto meanwhile, in whatever round, and forgets it once it is on
 * none (or once it asks again). */
static void
test_withdrawals(void **state)
{
	struct rdzv_node coord, a, b, c;
	struct rdzv_ctx ctx = coordinator_ctx(&coord);
	struct rdzv_exits e = {0};
	struct rdzv_state st;
	bool notable = false;

	node(&coord, "k_1_0");
	node(&a, "a_1_0");
	node(&b, "b_1_0");
	node(&c, "c_1_0");
	assert_false(rdzv_exits_note(&e, &a, "l2", 2));
	assert_true(rdzv_exits_note(&e, &a, RDZV_EXITS_WITHDRAW, strlen(RDZV_EXITS_WITHDRAW)));
	assert_int_equal(e.n_leaves, 1);
	assert_true(rdzv_exits_note(&e, &a, "x3", 2)); /* replaces the withdrawal */
	assert_int_equal(e.n_leaves, 0);
	assert_true(rdzv_exits_note(&e, &a, "l", 1)); /* ... and back */
	assert_true(rdzv_exits_note(&e, &b, "l", 1));
	assert_true(rdzv_exits_note(&e, &c, "x3", 2));
	assert_int_equal(e.n, 3);
	assert_int_equal(e.n_leaves, 2);
	/* c asks again plainly: what it asked before goes. */
	assert_true(rdzv_exits_forget(&e, &c));
	assert_false(rdzv_exits_forget(&e, &c));
	assert_int_equal(e.n, 2);
	assert_int_equal(e.n_leaves, 2);

	/* a got admitted to the open round 7, b waits: both taken out. */
	load("elasticd-rdzv 1 7 9 0 0 -1\np a_1_0 0\nw b_1_0\nh a_1_0 999000000\n", &st);
	assert_true(rdzv_exits_due(&e, &st, &a, &ctx));
	assert_true(rdzv_exits_due(&e, &st, &b, &ctx));
	rdzv_exits_prune(&e, &st, &ctx); /* both due: kept */
	assert_int_equal(e.n_leaves, 2);
	assert_int_equal(rdzv_exits_apply(&e, &st, &ctx, &notable), 2);
	assert_int_equal(st.n_participants, 0);
	assert_int_equal(st.n_wait_list, 0);
	assert_int_equal(st.n_heartbeats, 0);
	/* On no list: nothing more, and forgotten. */
	assert_false(rdzv_exits_due(&e, &st, &a, &ctx));
	assert_int_equal(rdzv_exits_apply(&e, &st, &ctx, &notable), 0);
	rdzv_exits_prune(&e, &st, &ctx);
	assert_int_equal(e.n, 0);
	assert_int_equal(e.n_leaves, 0);
	rdzv_state_release(&st);

	/* A spare (redundancy list) that withdrew leaves that list. */
	assert_true(rdzv_exits_note(&e, &c, "l", 1));
	load("elasticd-rdzv 1 7 9 1 0 -1\np a_1_0 0\np b_1_0 1\nr c_1_0\n"
	     "h a_1_0 999000000\nh b_1_0 999000000\n",
	     &st);
	assert_int_equal(rdzv_exits_apply(&e, &st, &ctx, &notable), 1);
	assert_int_equal(st.n_redundancy_list, 0);
	assert_int_equal(st.n_participants, 2); /* the others run on */
	rdzv_exits_prune(&e, &st, &ctx);
	assert_int_equal(e.n, 0);
	rdzv_state_release(&st);
	rdzv_exits_release(&e);
	rdzv_node_release(&coord);
	rdzv_node_release(&a);
	rdzv_node_release(&b);
	rdzv_node_release(&c);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_plan),
		cmocka_unit_test(test_exits),
		cmocka_unit_test(test_withdrawals),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
