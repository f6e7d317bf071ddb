/* The rank exchange's run-length node lists (rdzv_runs.h): what the leader
 * publishes, what every member reads back, and what a member refuses. */
#include <errno.h>
#include <jansson.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "rdzv_runs.h"
#include "util.h"

static void
test_alike_nodes_are_one_run(void **state)
{
	struct ranks_node nodes[1000];
	char *s;
	json_t *runs;

	for (size_t i = 0; i < ARRAY_SIZE(nodes); i++) {
		nodes[i] = (struct ranks_node){"trainer", 8};
	}
	runs = rdzv_runs_encode(nodes, ARRAY_SIZE(nodes));
	s = json_dumps(runs, JSON_COMPACT);
	assert_string_equal(s, "[[\"trainer\",8,1000]]");
	free(s);
	json_decref(runs);
}

static void
test_round_trip(void **state)
{
	const struct ranks_node nodes[] = {{"a", 2}, {"a", 2}, {"b", 2},
					   {"a", 4}, {"a", 4}, {"a", 2}};
	json_t *runs = rdzv_runs_encode(nodes, ARRAY_SIZE(nodes));
	struct ranks_node *got;
	char **roles;

	assert_int_equal(json_array_size(runs), 4);
	assert_int_equal(rdzv_runs_decode(runs, ARRAY_SIZE(nodes), &got, &roles), 0);
	for (size_t i = 0; i < ARRAY_SIZE(nodes); i++) {
		assert_string_equal(got[i].role, nodes[i].role);
		assert_int_equal(got[i].local_world_size, nodes[i].local_world_size);
	}
	/* One role string per run, shared by its nodes. */
	assert_ptr_equal(got[0].role, roles[0]);
	assert_ptr_equal(got[1].role, roles[0]);
	assert_ptr_equal(got[2].role, roles[1]);
	assert_ptr_equal(got[5].role, roles[3]);
	assert_null(roles[4]);
	strv_free(roles);
	free(got);
	json_decref(runs);
}

static void
test_bad_runs(void **state)
{
	static const char *const bad[] = {
		"{}",
		"[[\"a\",2,3]]",             /* counts sum to 3, not 4 */
		"[[\"a\",2,5]]",             /* more than 4 */
		"[[\"a\",0,4]]",             /* local world size below 1 */
		"[[\"a\",2,0],[\"a\",2,4]]", /* an empty run */
		"[[1,2,4]]",                 /* role not a string */
		"[[\"a\",2]]",               /* the old two-element form */
	};

	for (size_t i = 0; i < ARRAY_SIZE(bad); i++) {
		json_t *runs = json_loads(bad[i], 0, NULL);
		struct ranks_node *got = NULL;
		char **roles = NULL;

		assert_int_equal(rdzv_runs_decode(runs, 4, &got, &roles), -EBADMSG);
		assert_null(got);
		assert_null(roles);
		json_decref(runs);
	}
}

/* Worker-identical: every node is this one; one role string for all. */
static void
test_alike_nodes(void **state)
{
	struct ranks_node *nodes;
	char **roles;

	rdzv_runs_alike("trainer", 4, 3, &nodes, &roles);
	for (size_t i = 0; i < 3; i++) {
		assert_ptr_equal(nodes[i].role, roles[0]);
		assert_int_equal(nodes[i].local_world_size, 4);
	}
	assert_string_equal(roles[0], "trainer");
	assert_null(roles[1]);
	strv_free(roles);
	free(nodes);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_alike_nodes_are_one_run),
		cmocka_unit_test(test_round_trip),
		cmocka_unit_test(test_alike_nodes),
		cmocka_unit_test(test_bad_runs),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
