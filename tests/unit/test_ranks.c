/* Rank assignment as torchrun's _assign_worker_ranks: global ranks by group
 * rank, role ranks among agents of one role ordered by group rank. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include "ranks.h"
#include "util.h"

struct ranks_case {
	const char *name;
	struct ranks_node nodes[6];
	size_t n;
	size_t me;
	struct ranks_info want;
};

static const struct ranks_case cases[] = {
	{"single node", {{"default", 4}}, 1, 0, {0, 4, 0, 4}},
	{"homogeneous, first",
	 {{"default", 2}, {"default", 2}, {"default", 2}},
	 3,
	 0,
	 {0, 6, 0, 6}},
	{"homogeneous, last", {{"default", 2}, {"default", 2}, {"default", 2}}, 3, 2, {4, 6, 4, 6}},
	{"heterogeneous nproc",
	 {{"default", 8}, {"default", 2}, {"default", 4}},
	 3,
	 2,
	 {10, 14, 10, 14}},
	{"two roles, trainer",
	 {{"trainer", 2}, {"ps", 1}, {"trainer", 2}, {"ps", 1}},
	 4,
	 2,
	 {3, 6, 2, 4}},
	{"two roles, ps",
	 {{"trainer", 2}, {"ps", 1}, {"trainer", 2}, {"ps", 1}},
	 4,
	 3,
	 {5, 6, 1, 2}},
	{"two roles, first ps",
	 {{"trainer", 2}, {"ps", 1}, {"trainer", 2}, {"ps", 1}},
	 4,
	 1,
	 {2, 6, 0, 2}},
};

static void
test_ranks_table(void **state)
{
	for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
		const struct ranks_case *c = &cases[i];
		struct ranks_info got;

		ranks_assign(c->nodes, c->n, c->me, &got);
		print_message("case: %s\n", c->name);
		assert_int_equal(got.base_global_rank, c->want.base_global_rank);
		assert_int_equal(got.global_world_size, c->want.global_world_size);
		assert_int_equal(got.base_role_rank, c->want.base_role_rank);
		assert_int_equal(got.role_world_size, c->want.role_world_size);
	}
}

/* Every node at once gives what each node's own call gives. */
static void
test_ranks_all(void **state)
{
	for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
		const struct ranks_case *c = &cases[i];
		struct ranks_info all[8], one;

		assert_true(c->n <= ARRAY_SIZE(all));
		ranks_assign_all(c->nodes, c->n, all);
		for (size_t k = 0; k < c->n; k++) {
			ranks_assign(c->nodes, c->n, k, &one);
			assert_memory_equal(&all[k], &one, sizeof(one));
		}
	}
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_ranks_table),
		cmocka_unit_test(test_ranks_all),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
