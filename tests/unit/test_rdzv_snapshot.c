/* test_rdzv_snapshot.c — the nodes handler's JSON from a rendezvous
 * snapshot: members, ranks, heartbeat ages, lease liveness. */
#include <errno.h>
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>

#include <jansson.h>

#include "rdzv_snapshot.h"
#include "util.h"

#define SEC 1000000LL
#define NOW (1700000000LL * SEC)

static struct rdzv_node
node(const char *addr, long long pid)
{
	struct rdzv_node n;

	assert_int_equal(rdzv_node_init(&n, addr, pid, 0), 0);
	return n;
}

/* Three participants (ranks given out of node order on purpose), one
 * waiting node, one spare; heartbeats 1 s, 2 s and 60 s old; no heartbeat
 * for the spare. */
static void
fill(struct rdzv_snapshot *s, enum rdzv_liveness l)
{
	const char *addrs[] = {"a", "b", "c"};
	const int ranks[] = {2, 0, 1};
	const int64_t ages[] = {1, 2, 60};

	*s = (struct rdzv_snapshot){.backend = "c10d",
				    .read_usec = NOW - SEC,
				    .liveness = l,
				    .heartbeat_timeout_usec = 15 * SEC};
	s->self = xstrdup("b_20_0");
	rdzv_state_init(&s->st);
	s->st.round = 4;
	s->st.complete = true;
	for (int i = 0; i < 3; i++) {
		struct rdzv_node n = node(addrs[i], 10 * (i + 1));

		rdzv_state_add_participant(&s->st, &n, ranks[i]);
		rdzv_state_set_heartbeat(&s->st, &n, NOW - ages[i] * SEC);
		rdzv_node_release(&n);
	}
	struct rdzv_node w = node("d", 40), r = node("e", 50);

	rdzv_state_add_wait(&s->st, &w);
	rdzv_state_set_heartbeat(&s->st, &w, NOW);
	rdzv_state_add_redundant(&s->st, &r);
	rdzv_node_release(&w);
	rdzv_node_release(&r);
}

static void
test_heartbeats(void **state)
{
	(void)state;
	struct rdzv_snapshot s;
	json_t *j, *p;

	fill(&s, RDZV_LIVENESS_HEARTBEAT);
	j = rdzv_snapshot_json(&s, NOW);
	assert_string_equal(json_string_value(json_object_get(j, "backend")), "c10d");
	assert_string_equal(json_string_value(json_object_get(j, "node")), "b_20_0");
	assert_int_equal(json_integer_value(json_object_get(j, "round")), 4);
	assert_true(json_is_true(json_object_get(j, "complete")));
	assert_true(json_is_false(json_object_get(j, "closed")));
	assert_true(json_real_value(json_object_get(j, "state_age_s")) == 1.0);
	assert_string_equal(json_string_value(json_object_get(j, "liveness")), "heartbeat");
	p = json_object_get(j, "participants");
	assert_int_equal(json_array_size(p), 3);
	/* In group-rank order: b (0), c (1), a (2). */
	static const char *const want[] = {"b_20_0", "c_30_0", "a_10_0"};
	static const double age[] = {2, 60, 1};
	static const bool alive[] = {true, false, true};
	for (size_t i = 0; i < 3; i++) {
		json_t *m = json_array_get(p, i);

		assert_string_equal(json_string_value(json_object_get(m, "node")), want[i]);
		assert_int_equal(json_integer_value(json_object_get(m, "group_rank")), (int)i);
		assert_true(json_real_value(json_object_get(m, "heartbeat_age_s")) == age[i]);
		assert_int_equal(json_is_true(json_object_get(m, "alive")), alive[i]);
		assert_int_equal(json_string_length(json_object_get(m, "addr")), 1);
	}
	json_t *w = json_array_get(json_object_get(j, "wait_list"), 0);
	json_t *sp = json_array_get(json_object_get(j, "spares"), 0);
	assert_string_equal(json_string_value(json_object_get(w, "node")), "d_40_0");
	assert_null(json_object_get(w, "group_rank"));
	assert_true(json_real_value(json_object_get(w, "heartbeat_age_s")) == 0.0);
	assert_string_equal(json_string_value(json_object_get(sp, "node")), "e_50_0");
	assert_int_equal(json_integer_value(json_object_get(sp, "pid")), 50);
	assert_true(json_is_null(json_object_get(sp, "heartbeat_age_s")));
	assert_true(json_is_false(json_object_get(sp, "alive")));
	assert_int_equal(json_array_size(json_object_get(j, "quarantined")), 0);
	json_decref(j);
	rdzv_snapshot_release(&s);
}

static void
test_leases(void **state)
{
	(void)state;
	struct rdzv_snapshot s;
	json_t *j, *p;

	fill(&s, RDZV_LIVENESS_LEASE);
	s.backend = "etcd";
	s.dead = xcalloc(2, sizeof(*s.dead));
	s.dead[0] = xstrdup("c_30_0");
	j = rdzv_snapshot_json(&s, NOW);
	assert_string_equal(json_string_value(json_object_get(j, "liveness")), "lease");
	p = json_object_get(j, "participants");
	for (size_t i = 0; i < 3; i++) {
		json_t *m = json_array_get(p, i);
		const char *n = json_string_value(json_object_get(m, "node"));

		/* A lease has no time this node knows of. */
		assert_true(json_is_null(json_object_get(m, "heartbeat_age_s")));
		assert_int_equal(json_is_true(json_object_get(m, "alive")),
				 strcmp(n, "c_30_0") != 0);
	}
	json_decref(j);
	rdzv_snapshot_release(&s);
}

static void
test_never_read(void **state)
{
	(void)state;
	struct rdzv_snapshot s = {.backend = "c10d", .read_usec = -1};
	json_t *j;

	rdzv_state_init(&s.st);
	j = rdzv_snapshot_json(&s, NOW);
	assert_true(json_is_null(json_object_get(j, "state_age_s")));
	assert_true(json_is_null(json_object_get(j, "node")));
	assert_int_equal(json_array_size(json_object_get(j, "participants")), 0);
	assert_int_equal(json_array_size(json_object_get(j, "wait_list")), 0);
	assert_int_equal(json_array_size(json_object_get(j, "spares")), 0);
	json_decref(j);
	rdzv_snapshot_release(&s);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_heartbeats),
		cmocka_unit_test(test_leases),
		cmocka_unit_test(test_never_read),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
