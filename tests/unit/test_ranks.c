/* Rank assignment as torchrun's _assign_worker_ranks: global ranks by group
 * rank, role ranks among agents of one role ordered by group rank; over runs
 * of alike nodes, with the numbers of the per-node computation. */
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "ranks.h"
#include "util.h"

struct ranks_case {
	const char *name;
	struct ranks_run runs[6];
	size_t n_runs;
	size_t me;
	struct ranks_info want;
};

static const struct ranks_case cases[] = {
	{"single node", {{"default", 4, 1}}, 1, 0, {0, 4, 0, 4}},
	{"homogeneous, first", {{"default", 2, 3}}, 1, 0, {0, 6, 0, 6}},
	{"homogeneous, middle", {{"default", 2, 3}}, 1, 1, {2, 6, 2, 6}},
	{"homogeneous, last", {{"default", 2, 3}}, 1, 2, {4, 6, 4, 6}},
	{"homogeneous, split runs", {{"default", 2, 2}, {"default", 2, 1}}, 2, 2, {4, 6, 4, 6}},
	{"heterogeneous nproc",
	 {{"default", 8, 1}, {"default", 2, 1}, {"default", 4, 1}},
	 3,
	 2,
	 {10, 14, 10, 14}},
	{"two roles, trainer",
	 {{"trainer", 2, 1}, {"ps", 1, 1}, {"trainer", 2, 1}, {"ps", 1, 1}},
	 4,
	 2,
	 {3, 6, 2, 4}},
	{"two roles, ps",
	 {{"trainer", 2, 1}, {"ps", 1, 1}, {"trainer", 2, 1}, {"ps", 1, 1}},
	 4,
	 3,
	 {5, 6, 1, 2}},
	{"two roles, first ps",
	 {{"trainer", 2, 1}, {"ps", 1, 1}, {"trainer", 2, 1}, {"ps", 1, 1}},
	 4,
	 1,
	 {2, 6, 0, 2}},
	/* t4 t4 t4 p1 p1 t2 t2: interleaved roles, sizes differ per run. */
	{"interleaved, inside the first run",
	 {{"trainer", 4, 3}, {"ps", 1, 2}, {"trainer", 2, 2}},
	 3,
	 1,
	 {4, 18, 4, 16}},
	{"interleaved, second ps",
	 {{"trainer", 4, 3}, {"ps", 1, 2}, {"trainer", 2, 2}},
	 3,
	 4,
	 {13, 18, 1, 2}},
	{"interleaved, last trainer",
	 {{"trainer", 4, 3}, {"ps", 1, 2}, {"trainer", 2, 2}},
	 3,
	 6,
	 {16, 18, 14, 16}},
	{"three roles",
	 {{"eval", 1, 1}, {"trainer", 8, 2}, {"ps", 2, 1}, {"eval", 3, 2}},
	 4,
	 5,
	 {22, 25, 4, 7}},
};

/* The nodes that runs describe, one role/size pair per group rank. */
struct node {
	const char *role;
	int local_world_size;
};

static size_t
expand(const struct ranks_run *runs, size_t n_runs, struct node *nodes, size_t room)
{
	size_t n = 0;

	for (size_t i = 0; i < n_runs; i++) {
		for (size_t c = 0; c < runs[i].count; c++) {
			assert_true(n < room);
			nodes[n++] = (struct node){runs[i].role, runs[i].local_world_size};
		}
	}
	return n;
}

/* The per-node computation ranks_assign did before runs: the reference. */
static void
node_assign(const struct node *nodes, size_t n, size_t me, struct ranks_info *ret)
{
	struct ranks_info r = {0};

	for (size_t i = 0; i < n; i++) {
		bool same_role = strcmp(nodes[i].role, nodes[me].role) == 0;

		r.global_world_size += nodes[i].local_world_size;
		r.base_global_rank += i < me ? nodes[i].local_world_size : 0;
		r.role_world_size += same_role ? nodes[i].local_world_size : 0;
		r.base_role_rank += same_role && i < me ? nodes[i].local_world_size : 0;
	}
	*ret = r;
}

static void
assert_info_equal(const struct ranks_info *got, const struct ranks_info *want)
{
	assert_int_equal(got->base_global_rank, want->base_global_rank);
	assert_int_equal(got->global_world_size, want->global_world_size);
	assert_int_equal(got->base_role_rank, want->base_role_rank);
	assert_int_equal(got->role_world_size, want->role_world_size);
}

static void
test_ranks_table(void **state)
{
	for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
		const struct ranks_case *c = &cases[i];
		struct node nodes[64];
		size_t n = expand(c->runs, c->n_runs, nodes, ARRAY_SIZE(nodes));
		struct ranks_info got, ref;

		print_message("case: %s\n", c->name);
		ranks_assign(c->runs, c->n_runs, c->me, &got);
		assert_info_equal(&got, &c->want);
		node_assign(nodes, n, c->me, &ref);
		assert_info_equal(&ref, &c->want);
	}
}

/* Every agent of runs: its own call, every agent at once and the per-node
 * reference agree. */
static void
check_all(const struct ranks_run *runs, size_t n_runs)
{
	struct node nodes[256];
	struct ranks_info all[256], one, ref;
	size_t n = expand(runs, n_runs, nodes, ARRAY_SIZE(nodes));

	ranks_assign_all(runs, n_runs, all);
	for (size_t k = 0; k < n; k++) {
		ranks_assign(runs, n_runs, k, &one);
		node_assign(nodes, n, k, &ref);
		assert_info_equal(&one, &ref);
		assert_info_equal(&all[k], &ref);
	}
}

static void
test_ranks_all(void **state)
{
	for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
		print_message("case: %s\n", cases[i].name);
		check_all(cases[i].runs, cases[i].n_runs);
	}
}

/* Runs of random roles, sizes and counts (a fixed seed), roles given by
 * equal strings at distinct addresses. */
static void
test_ranks_random(void **state)
{
	static char roles[3][3][8] = {
		{"trainer", "ps", "eval"}, {"trainer", "ps", "eval"}, {"trainer", "ps", "eval"}};
	struct ranks_run runs[40];
	uint32_t seed = 12345;

	for (int round = 0; round < 50; round++) {
		size_t n_runs = 1 + round % ARRAY_SIZE(runs), n = 0;

		for (size_t i = 0; i < n_runs; i++) {
			seed = seed * 1103515245u + 12345u;
			runs[i] = (struct ranks_run){roles[(seed >> 8) % 3][(seed >> 12) % 3],
						     1 + (int)((seed >> 16) % 8),
						     1 + (seed >> 20) % 6};
			if (n + runs[i].count > 256) {
				n_runs = i;
				break;
			}
			n += runs[i].count;
		}
		check_all(runs, n_runs);
	}
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_ranks_table),
		cmocka_unit_test(test_ranks_all),
		cmocka_unit_test(test_ranks_random),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
