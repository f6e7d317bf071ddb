/* Rendezvous state: node descriptors and their order (torch's _NodeDesc),
 * the sorted sets, encoding round trips, and corrupt states refused. */
#include <errno.h>
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>

#include "rdzv_rankkey.h"
#include "rdzv_state.h"
#include "util.h"

static void
test_node_parse(void **state)
{
	static const struct {
		const char *s;
		int r;
		size_t addr_len;
		long long pid, local_id;
	} rows[] = {
		{"node7.cluster_4242_0", 0, 13, 4242, 0},
		{"a_b_c_12_3", 0, 5, 12, 3},
		{"::1_5_1", 0, 3, 5, 1},
		{"host_1", -EINVAL, 0, 0, 0},
		{"host__1_0", 0, 5, 1, 0},
		{"_1_0", -EINVAL, 0, 0, 0},
		{"h_x_0", -EINVAL, 0, 0, 0},
		{"h_1_", -EINVAL, 0, 0, 0},
		{"h_-1_0", -EINVAL, 0, 0, 0},
		{"a b_1_0", -EINVAL, 0, 0, 0},
		{"a\n_1_0", -EINVAL, 0, 0, 0},
	};

	for (size_t i = 0; i < ARRAY_SIZE(rows); i++) {
		struct rdzv_node n;
		int r = rdzv_node_parse(&n, rows[i].s, strlen(rows[i].s));

		assert_int_equal(r, rows[i].r);
		if (r == 0) {
			assert_int_equal(n.addr_len, rows[i].addr_len);
			assert_int_equal(n.pid, rows[i].pid);
			assert_int_equal(n.local_id, rows[i].local_id);
			assert_string_equal(n.name, rows[i].s);
			rdzv_node_release(&n);
		}
	}
}

static void
test_node_order(void **state)
{
	/* Tuple order (addr, pid, local_id): pid 9 < pid 10 numerically, and the
	 * address compares before the pid ("a" < "a.b" < "b"). */
	static const char *const sorted[] = {"a_9_0", "a_10_0",     "a_10_1",   "a.b_1_0",
					     "b_1_0", "node10_1_0", "node2_1_0"};

	for (size_t i = 0; i + 1 < ARRAY_SIZE(sorted); i++) {
		struct rdzv_node x, y;

		assert_int_equal(rdzv_node_parse(&x, sorted[i], strlen(sorted[i])), 0);
		assert_int_equal(rdzv_node_parse(&y, sorted[i + 1], strlen(sorted[i + 1])), 0);
		assert_true(rdzv_node_cmp(&x, &y) < 0);
		assert_true(rdzv_node_cmp(&y, &x) > 0);
		assert_int_equal(rdzv_node_cmp(&x, &x), 0);
		rdzv_node_release(&x);
		rdzv_node_release(&y);
	}
}

static void
test_rank_key(void **state)
{
	static const struct {
		const char *s;
		int r;
		size_t addr_len, key_len;
	} parses[] = {
		{"h_1_0@rack-3:nvl.2", 0, 1, 12},
		{"h_1_0@a_b", 0, 1, 3},
		{"h_1_0@", -EINVAL, 0, 0},
		{"h_1_0@a@b", -EINVAL, 0, 0},
		{"h_1_0@a/b", -EINVAL, 0, 0},
		{"h@x_1_0", -EINVAL, 0, 0},
		{"h_1_0", 0, 1, 0},
	};
	/* Each pair: a < b in natural order (0: equal). */
	static const struct {
		const char *a, *b;
		int want;
	} cmps[] = {
		{"9", "10", -1},          {"node9", "node10", -1},
		{"r2-n10", "r10-n2", -1}, {"a", "b", -1},
		{"a", "a1", -1},          {"1", "01", -1},
		{"abc", "abc", 0},        {"007", "007", 0},
		{"x-2:3", "x-2:12", -1},  {"99999999999999999999", "100000000000000000000", -1},
		{"B", "a", -1},
	};

	for (size_t i = 0; i < ARRAY_SIZE(parses); i++) {
		struct rdzv_node n;
		size_t klen;
		int r = rdzv_node_parse(&n, parses[i].s, strlen(parses[i].s));

		assert_int_equal(r, parses[i].r);
		if (r == 0) {
			const char *k = rdzv_node_key(&n, &klen);

			assert_int_equal(n.addr_len, parses[i].addr_len);
			assert_int_equal(klen, parses[i].key_len);
			assert_true(parses[i].key_len ? k != NULL : k == NULL);
			rdzv_node_release(&n);
		}
	}
	for (size_t i = 0; i < ARRAY_SIZE(cmps); i++) {
		const char *a = cmps[i].a, *b = cmps[i].b;
		int ab = rdzv_key_cmp(a, strlen(a), b, strlen(b)),
		    ba = rdzv_key_cmp(b, strlen(b), a, strlen(a));

		if ((ab > 0) - (ab < 0) != cmps[i].want || (ba > 0) - (ba < 0) != -cmps[i].want) {
			fail_msg("%s vs %s: got %d / %d, want %d", a, b, ab, ba, cmps[i].want);
		}
	}
	/* A key is not part of the identity; keyed nodes rank before the rest. */
	{
		struct rdzv_node x, y, z;

		assert_int_equal(rdzv_node_init_key(&x, "h", 1, 0, "k9"), 0);
		assert_string_equal(x.name, "h_1_0@k9");
		assert_int_equal(rdzv_node_parse(&y, "h_1_0", 5), 0);
		assert_int_equal(rdzv_node_parse(&z, "a_1_0@k10", 9), 0);
		assert_int_equal(rdzv_node_cmp(&x, &y), 0);
		assert_true(rdzv_node_rank_cmp(&x, &y) < 0);
		assert_true(rdzv_node_rank_cmp(&x, &z) < 0);
		assert_true(rdzv_node_rank_cmp(&y, &z) > 0);
		rdzv_node_release(&y);
		assert_int_equal(rdzv_node_init_key(&y, "h", 1, 0, "a b"), -EINVAL);
		assert_int_equal(rdzv_node_init_key(&y, "h", 1, 0, ""), -EINVAL);
		rdzv_node_release(&x);
		rdzv_node_release(&z);
	}
}

static void
test_sets_and_roundtrip(void **state)
{
	struct rdzv_state st, back;
	struct rdzv_node n[4];
	const char *names[] = {"c_1_0", "a_1_0", "b_7_2", "a_1_1"};
	char *enc, *enc2;
	size_t len, len2;

	rdzv_state_init(&st);
	for (size_t i = 0; i < 4; i++) {
		assert_int_equal(rdzv_node_parse(&n[i], names[i], strlen(names[i])), 0);
		assert_true(rdzv_state_add_participant(&st, &n[i], 0));
		assert_true(rdzv_state_set_heartbeat(&st, &n[i], 1700000000000000LL + (int64_t)i));
	}
	assert_false(rdzv_state_add_participant(&st, &n[0], 0));
	assert_true(rdzv_state_add_participant(&st, &n[0], 3));
	assert_true(rdzv_state_add_wait(&st, &n[1]));
	assert_false(rdzv_state_add_wait(&st, &n[1]));
	assert_true(rdzv_state_add_redundant(&st, &n[2]));
	assert_true(rdzv_state_remove_participant(&st, &n[3]));
	assert_false(rdzv_state_remove_participant(&st, &n[3]));
	assert_int_equal(st.n_participants, 3);
	assert_string_equal(st.participants[0].node.name, "a_1_0");
	assert_string_equal(st.participants[1].node.name, "b_7_2");
	assert_string_equal(st.participants[2].node.name, "c_1_0");
	assert_int_equal(rdzv_state_find_participant(&st, &n[0]), 2);
	assert_int_equal(rdzv_state_find_participant(&st, &n[3]), -1);
	st.round = 7;
	st.gen = 42;
	st.complete = true;
	st.deadline = 1700000000123456LL;

	enc = rdzv_state_encode(&st, &len);
	assert_int_equal(rdzv_state_decode(enc, len, &back), 0);
	enc2 = rdzv_state_encode(&back, &len2);
	assert_int_equal(len, len2);
	assert_memory_equal(enc, enc2, len);
	assert_int_equal(back.round, 7);
	assert_int_equal(back.gen, 42);
	assert_true(back.complete);
	assert_false(back.closed);
	assert_int_equal(back.deadline, 1700000000123456LL);
	assert_int_equal(back.participants[2].rank, 3);
	assert_int_equal(back.n_heartbeats, 4);
	assert_int_equal(back.n_wait_list, 1);
	assert_int_equal(back.n_redundancy_list, 1);

	/* A deep copy is independent. */
	{
		struct rdzv_state cp;

		rdzv_state_copy(&cp, &back);
		rdzv_state_release(&back);
		free(enc2);
		enc2 = rdzv_state_encode(&cp, &len2);
		assert_memory_equal(enc, enc2, len);
		rdzv_state_release(&cp);
	}
	free(enc);
	free(enc2);
	for (size_t i = 0; i < 4; i++) {
		rdzv_node_release(&n[i]);
	}
	rdzv_state_release(&st);
}

/* Heartbeats rebuilt from the members, in node order, for stores whose
 * liveness is kept elsewhere. */
static void
test_stamp_members(void **state)
{
	static const char text[] = "elasticd-rdzv 1 0 0 1 0 -1\n"
				   "p b_1_0 0\np d_1_0 1\nw a_1_0\nw c_1_0\nr e_1_0\n"
				   "h zz_1_0 5\n";
	struct rdzv_state st;
	const char *want[] = {"a_1_0", "b_1_0", "c_1_0", "d_1_0", "e_1_0"};

	assert_int_equal(rdzv_state_decode(text, strlen(text), &st), 0);
	rdzv_state_stamp_members(&st, 42);
	assert_int_equal(st.n_heartbeats, 5);
	for (size_t i = 0; i < 5; i++) {
		assert_string_equal(st.heartbeats[i].node.name, want[i]);
		assert_int_equal(st.heartbeats[i].usec, 42);
	}
	rdzv_state_release(&st);
	rdzv_state_init(&st);
	rdzv_state_stamp_members(&st, 42);
	assert_int_equal(st.n_heartbeats, 0);
	rdzv_state_release(&st);
}

static void
test_corrupt(void **state)
{
	static const char *const bad[] = {
		"", "Y2FuaW1hZGFt", /* torch's c10d sentinel: not a state */
		"elasticd-rdzv 2 0 0 0 0 -1\n", "elasticd-rdzv 1 0 0 0 0 -1", /* no newline */
		"elasticd-rdzv 1 0 0 2 0 -1\n",                               /* complete not 0/1 */
		"elasticd-rdzv 1 -1 0 0 0 -1\n",                              /* negative round */
		"elasticd-rdzv 1 0 0 0 0 -2\n",                               /* deadline */
		"elasticd-rdzv 1 0 0 0 0 -1 x\n",                             /* extra field */
		"elasticd-rdzv 1 0 0 0 0 -1\nx a_1_0\n",
		"elasticd-rdzv 1 0 0 0 0 -1\np a_1_0\n",              /* no rank */
		"elasticd-rdzv 1 0 0 0 0 -1\np a_1_0 -1\n",           /* bad rank */
		"elasticd-rdzv 1 0 0 0 0 -1\np b_1_0 0\np a_1_0 0\n", /* unsorted */
		"elasticd-rdzv 1 0 0 0 0 -1\nw a_1_0\nw a_1_0\n",     /* duplicate */
		"elasticd-rdzv 1 0 0 0 0 -1\nw nope\n", "elasticd-rdzv 1 0 0 0 0 -1\nh a_1_0 12x\n",
		"elasticd-rdzv 1 0 0 0 0 -1\nw a_1_0 5\n", "elasticd-rdzv 1 0 0 0 0 -1\nw  a_1_0\n",
		"elasticd-rdzv 1 0 0 0 0 -1\np a_1_0 0", /* last line unterminated */
		"elasticd-rdzv 1 0 0 0 0 -0\n",          /* not canonical */
		"elasticd-rdzv 1 +1 0 0 0 -1\n", "elasticd-rdzv 1 01 0 0 0 -1\n",
		"elasticd-rdzv 1 0 0 0 0 -1\nw a_01_0\n",
		"elasticd-rdzv 1 0 0 0 0 -1\nh a_1_0 5\np a_1_0 0\n", /* sections out of order */
		/* a closing record in a state that is not closed */
		"elasticd-rdzv 1 0 0 0 0 -1\nc a_1_0 1 3 0 77 5 0\n",
		"elasticd-rdzv 1 0 0 0 1 -1\nc a_1_0 1 3 0 77 5\n",     /* a field short */
		"elasticd-rdzv 1 0 0 0 1 -1\nc a_1_0 1 3 0 77 5 0 0\n", /* a field too many */
		"elasticd-rdzv 1 0 0 0 1 -1\nc a_1_0 1 3 0 77 256 0\n", /* exitcode */
		"elasticd-rdzv 1 0 0 0 1 -1\nc a_1_0 1 3 0 77 -9 129\n",
		"elasticd-rdzv 1 0 0 0 1 -1\nc a_1_0 -2 3 0 77 5 0\n",
		"elasticd-rdzv 1 0 0 0 1 -1\nc a_1_0 1 3 0 -2 5 0\n",
		"elasticd-rdzv 1 0 0 0 1 -1\nc nope 1 3 0 77 5 0\n",
		"elasticd-rdzv 1 0 0 0 1 -1\nc a_1_0 1 3 0 77 5 0\nc a_1_0 1 3 0 77 5 0\n",
		"elasticd-rdzv 1 0 0 0 1 -1\nc a_1_0 1 3 0 77 5 0\nh a_1_0 5\n", /* out of order */
	};

	for (size_t i = 0; i < ARRAY_SIZE(bad); i++) {
		struct rdzv_state st;

		if (rdzv_state_decode(bad[i], strlen(bad[i]), &st) != -EBADMSG) {
			fail_msg("decoded: %s", bad[i]);
		}
	}
	{
		struct rdzv_state st;
		const char *ok = "elasticd-rdzv 1 3 9 1 0 -1\n";

		assert_int_equal(rdzv_state_decode(ok, strlen(ok), &st), 0);
		assert_int_equal(st.round, 3);
		assert_int_equal(st.gen, 9);
		rdzv_state_release(&st);
	}
}

static void
test_close_record(void **state)
{
	const char *enc = "elasticd-rdzv 1 2 7 1 1 -1\np a_1_0 0\nc b_2_0 1 3 0 77 -9 9\n";
	struct rdzv_state st, cp;
	char *out, *who;
	size_t len;

	assert_int_equal(rdzv_state_decode(enc, strlen(enc), &st), 0);
	assert_non_null(st.closed_by);
	assert_string_equal(st.closed_by->node.name, "b_2_0");
	assert_int_equal(st.closed_by->group_rank, 1);
	assert_int_equal(st.closed_by->rank, 3);
	assert_int_equal(st.closed_by->local_rank, 0);
	assert_int_equal(st.closed_by->pid, 77);
	assert_int_equal(st.closed_by->exitcode, -9);
	assert_int_equal(st.closed_by->signal, 9);
	rdzv_state_copy(&cp, &st);
	out = rdzv_state_encode(&cp, &len);
	assert_int_equal(len, strlen(enc));
	assert_memory_equal(out, enc, len);
	free(out);
	who = rdzv_close_record_describe(cp.closed_by);
	assert_string_equal(who, "node b_2_0 (group rank 1): local rank 0 (rank 3) was killed by "
				 "signal 9 (SIGKILL), exitcode -9");
	free(who);
	cp.closed_by->signal = 0;
	cp.closed_by->exitcode = 5;
	cp.closed_by->group_rank = -1;
	cp.closed_by->rank = -1;
	who = rdzv_close_record_describe(cp.closed_by);
	assert_string_equal(who, "node b_2_0: local rank 0 exited with code 5");
	free(who);
	rdzv_state_release(&cp);
	rdzv_state_release(&st);
	(void)state;
}

/* Quarantined hosts: "q" lines after everything else, sorted, one per host. */
static void
test_quarantine(void **state)
{
	const char *enc = "elasticd-rdzv 1 2 7 0 0 -1\np a_1_0 0\nq b_2_0 5000 1\nq c_3_0 6000 3\n";
	static const char *const bad[] = {
		"elasticd-rdzv 1 0 0 0 0 -1\nq b_2_0 5000 1\nq b_3_0 6000 1\n", /* one host twice */
		"elasticd-rdzv 1 0 0 0 0 -1\nq c_2_0 5000 1\nq b_3_0 6000 1\n", /* unsorted */
		"elasticd-rdzv 1 0 0 0 0 -1\nq b_2_0 5000 0\n",                 /* count 0 */
		"elasticd-rdzv 1 0 0 0 0 -1\nq b_2_0 5000\n",                   /* no count */
		"elasticd-rdzv 1 0 0 0 0 -1\nq b_2_0 5000 1\np a_1_0 0\n",      /* order */
	};
	struct rdzv_state st, cp;
	struct rdzv_quarantine q = {.until = 7000, .count = 4};
	char *out;
	size_t len;

	assert_int_equal(rdzv_state_decode(enc, strlen(enc), &st), 0);
	assert_int_equal(st.n_quarantine, 2);
	rdzv_state_copy(&cp, &st);
	rdzv_state_release(&st);
	out = rdzv_state_encode(&cp, &len);
	assert_int_equal(len, strlen(enc));
	assert_memory_equal(out, enc, len);
	free(out);
	/* One entry per host: another agent of b replaces it. */
	assert_int_equal(rdzv_node_init(&q.node, "b", 9, 0), 0);
	assert_true(rdzv_state_set_quarantine(&cp, &q));
	assert_false(rdzv_state_set_quarantine(&cp, &q));
	assert_int_equal(cp.n_quarantine, 2);
	assert_string_equal(cp.quarantine[0].node.name, "b_9_0");
	assert_true(rdzv_state_quarantined(&cp, &(struct rdzv_node){"b_1_0", 1, 1, 0}, 6999));
	assert_false(rdzv_state_quarantined(&cp, &q.node, 6999)); /* itself */
	assert_false(rdzv_state_quarantined(&cp, &(struct rdzv_node){"b_1_0", 1, 1, 0},
					    7000)); /* over */
	assert_true(rdzv_state_remove_quarantine(&cp, &q.node));
	assert_false(rdzv_state_remove_quarantine(&cp, &q.node));
	rdzv_node_release(&q.node);
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		if (rdzv_state_decode(bad[i], strlen(bad[i]), &st) != -EBADMSG) {
			fail_msg("accepted: %s", bad[i]);
		}
	}
	rdzv_state_release(&cp);
	(void)state;
}

/* Failure reports ("f" lines) and the root cause across nodes. */
struct root_case {
	const char *name;
	const char *f;     /* the state's "f" lines */
	const char *me;    /* the deciding node */
	int64_t usec;      /* its first failure */
	bool root;         /* rdzv_state_root_cause, round 4, tolerance 100 */
	const char *first; /* the earliest other report, or NULL */
};

static const struct root_case root_cases[] = {
	{"alone", "", "a_1_0", 5000, true, NULL},
	{"first", "f a_1_0 4 5000\nf b_2_0 4 9000\n", "a_1_0", 5000, true, "b_2_0"},
	{"after the culprit", "f a_1_0 4 5000\nf b_2_0 4 9000\n", "b_2_0", 9000, false, "a_1_0"},
	{"a tie within the tolerance", "f a_1_0 4 5000\nf b_2_0 4 5080\n", "b_2_0", 5080, true,
	 "a_1_0"},
	{"just past the tolerance", "f a_1_0 4 5000\nf b_2_0 4 5101\n", "b_2_0", 5101, false,
	 "a_1_0"},
	{"an earlier round does not count", "f a_1_0 3 1000\nf b_2_0 4 9000\n", "b_2_0", 9000, true,
	 NULL},
	{"own report not there yet", "f a_1_0 4 5000\n", "c_3_0", 7000, false, "a_1_0"},
	{"earliest of several", "f a_1_0 4 8000\nf b_2_0 4 6000\nf c_3_0 4 9000\n", "c_3_0", 9000,
	 false, "b_2_0"},
};

static void
test_failures(void **state)
{
	static const char *const bad[] = {
		"elasticd-rdzv 1 0 0 0 0 -1\nf b_2_0 1 5\nf a_3_0 1 6\n",       /* unsorted */
		"elasticd-rdzv 1 0 0 0 0 -1\nf b_2_0 1 5\nf b_2_0 1 6\n",       /* twice */
		"elasticd-rdzv 1 0 0 0 0 -1\nf b_2_0 -1 5\n",                   /* round < 0 */
		"elasticd-rdzv 1 0 0 0 0 -1\nf b_2_0 1\n",                      /* no usec */
		"elasticd-rdzv 1 0 0 0 0 -1\nf b_2_0 1 5\nq b_2_0 5 1\n",       /* order */
		"elasticd-rdzv 1 0 0 0 0 -1\nf b_2_0 1 -9223372036854775807\n", /* usec < 0 */
		"elasticd-rdzv 1 0 0 0 0 -1\nf b_2_0 1 9223372036854775807\n",  /* overflows */
	};
	struct rdzv_state st;
	struct rdzv_node n;
	char *text, *out;
	size_t len;

	for (size_t i = 0; i < sizeof(root_cases) / sizeof(root_cases[0]); i++) {
		const struct root_case *c = &root_cases[i];
		long first;

		print_message("case %s\n", c->name);
		text = xasprintf("elasticd-rdzv 1 4 0 1 0 -1\np a_1_0 0\n%s", c->f);
		assert_int_equal(rdzv_state_decode(text, strlen(text), &st), 0);
		out = rdzv_state_encode(&st, &len); /* the encoding round-trips */
		assert_int_equal(len, strlen(text));
		assert_memory_equal(out, text, len);
		assert_int_equal(rdzv_node_parse(&n, c->me, strlen(c->me)), 0);
		assert_int_equal(rdzv_state_root_cause(&st, &n, 4, c->usec, 100, &first), c->root);
		if (c->first) {
			assert_true(first >= 0);
			assert_string_equal(st.failures[first].node.name, c->first);
		} else {
			assert_int_equal(first, -1);
		}
		rdzv_node_release(&n);
		rdzv_state_release(&st);
		free(out);
		free(text);
	}
	/* A report replaces the node's own and drops the earlier rounds'. */
	text = "elasticd-rdzv 1 4 0 1 0 -1\nf a_1_0 3 1000\nf c_3_0 4 3000\n";
	assert_int_equal(rdzv_state_decode(text, strlen(text), &st), 0);
	assert_int_equal(rdzv_node_init(&n, "b", 2, 0), 0);
	assert_true(rdzv_state_report_failure(&st, &n, 4, 2000));
	assert_false(rdzv_state_report_failure(&st, &n, 4, 2000));
	assert_true(rdzv_state_failure_reported(&st, &n, 4, 2000));
	assert_false(rdzv_state_failure_reported(&st, &n, 4, 2001));
	out = rdzv_state_encode(&st, &len);
	text = "elasticd-rdzv 1 4 0 1 0 -1\nf b_2_0 4 2000\nf c_3_0 4 3000\n";
	assert_int_equal(len, strlen(text));
	assert_memory_equal(out, text, len);
	free(out);
	assert_true(rdzv_state_report_failure(&st, &n, 5, 100));
	assert_int_equal(st.n_failures, 1);
	rdzv_node_release(&n);
	rdzv_state_release(&st);
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		if (rdzv_state_decode(bad[i], strlen(bad[i]), &st) != -EBADMSG) {
			fail_msg("accepted: %s", bad[i]);
		}
	}
	(void)state;
}

static void
assert_summary_equal(const struct rdzv_summary *x, const struct rdzv_summary *y)
{
	assert_int_equal(x->round, y->round);
	assert_int_equal(x->complete, y->complete);
	assert_int_equal(x->closed, y->closed);
	assert_int_equal(x->n_participants, y->n_participants);
	assert_int_equal(x->n_wait_list, y->n_wait_list);
}

/* A state's summary (c10d's gen keys): what a running node needs, in a few
 * canonical bytes; anything else is refused (an empty value: a gen key set by
 * an older elasticd). */
static void
test_summary(void **state)
{
	static const char *const bad[] = {
		"",           "7 1 0 1000", "7 1 0 1000 0 1", "7 2 0 1000 0", "-1 1 0 1 0",
		"07 1 0 1 0", "7 1 0 1 0 ", " 7 1 0 1 0",     "7  1 0 1 0",   "7 1 0 1048577 0",
		"7 1 0 x 0",  "-",          "7\n1 0 1 0",
	};
	static const char want[] = "7 1 0 2 1";
	struct rdzv_state st;
	struct rdzv_summary sum, back;
	struct rdzv_node a, b, w;
	char buf[RDZV_SUMMARY_MAX];

	rdzv_state_init(&st);
	assert_int_equal(rdzv_node_init(&a, "a", 1, 0), 0);
	assert_int_equal(rdzv_node_init(&b, "b", 1, 0), 0);
	assert_int_equal(rdzv_node_init(&w, "w", 1, 0), 0);
	st.round = 7;
	st.complete = true;
	rdzv_state_add_participant(&st, &a, 0);
	rdzv_state_add_participant(&st, &b, 1);
	rdzv_state_add_wait(&st, &w);
	sum = rdzv_summary_of(&st);
	assert_int_equal(rdzv_summary_encode(&sum, buf), strlen(want));
	assert_string_equal(buf, want);
	assert_int_equal(rdzv_summary_decode(buf, strlen(buf), &back), 0);
	assert_summary_equal(&back, &sum);
	sum = (struct rdzv_summary){INT64_MAX, true, true, RDZV_MAX_NODES, RDZV_MAX_NODES};
	assert_true(rdzv_summary_encode(&sum, buf) < RDZV_SUMMARY_MAX);
	assert_int_equal(rdzv_summary_decode(buf, strlen(buf), &back), 0);
	assert_summary_equal(&back, &sum);
	for (size_t i = 0; i < ARRAY_SIZE(bad); i++) {
		if (rdzv_summary_decode(bad[i], strlen(bad[i]), &back) != -EBADMSG) {
			fail_msg("decoded '%s'", bad[i]);
		}
	}
	rdzv_node_release(&a);
	rdzv_node_release(&b);
	rdzv_node_release(&w);
	rdzv_state_release(&st);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_node_parse),         cmocka_unit_test(test_node_order),
		cmocka_unit_test(test_sets_and_roundtrip), cmocka_unit_test(test_corrupt),
		cmocka_unit_test(test_stamp_members),      cmocka_unit_test(test_close_record),
		cmocka_unit_test(test_quarantine),         cmocka_unit_test(test_rank_key),
		cmocka_unit_test(test_failures),           cmocka_unit_test(test_summary),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
