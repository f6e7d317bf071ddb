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
test_encode(void **state)
{
	const struct ranks_run runs[] = {{"trainer", 8, 1000}, {"ps", 1, 2}};
	json_t *json = rdzv_runs_encode(runs, ARRAY_SIZE(runs));
	char *s = json_dumps(json, JSON_COMPACT);

	assert_string_equal(s, "[[\"trainer\",8,1000],[\"ps\",1,2]]");
	free(s);
	json_decref(json);
}

static void
test_round_trip(void **state)
{
	const struct ranks_run runs[] = {{"a", 2, 2}, {"b", 2, 1}, {"a", 4, 2}, {"a", 2, 1}};
	json_t *json = rdzv_runs_encode(runs, ARRAY_SIZE(runs));
	struct ranks_run *got;
	size_t n_got;
	char **roles;

	assert_int_equal(rdzv_runs_decode(json, 6, &got, &n_got, &roles), 0);
	assert_int_equal(n_got, ARRAY_SIZE(runs));
	for (size_t i = 0; i < ARRAY_SIZE(runs); i++) {
		assert_string_equal(got[i].role, runs[i].role);
		assert_int_equal(got[i].local_world_size, runs[i].local_world_size);
		assert_int_equal(got[i].count, runs[i].count);
		/* One role string per run, in the strv. */
		assert_ptr_equal(got[i].role, roles[i]);
	}
	assert_null(roles[ARRAY_SIZE(runs)]);
	strv_free(roles);
	free(got);
	json_decref(json);
}

/* A job of 10 000 alike nodes: one run, whatever N. */
static void
test_decode_one_run(void **state)
{
	json_t *json = json_loads("[[\"trainer\",8,10000]]", 0, NULL);
	struct ranks_run *got;
	size_t n_got;
	char **roles;

	assert_int_equal(rdzv_runs_decode(json, 10000, &got, &n_got, &roles), 0);
	assert_int_equal(n_got, 1);
	assert_string_equal(got[0].role, "trainer");
	assert_int_equal(got[0].local_world_size, 8);
	assert_int_equal(got[0].count, 10000);
	strv_free(roles);
	free(got);
	json_decref(json);
}

static void
test_bad_runs(void **state)
{
	static const struct {
		size_t n;
		const char *json;
	} bad[] = {
		{4, "{}"},
		{4, "[]"},                         /* no run for 4 nodes */
		{4, "[[\"a\",2,3]]"},              /* counts sum to 3, not 4 */
		{4, "[[\"a\",2,5]]"},              /* more than 4 */
		{4, "[[\"a\",2,3],[\"b\",1,2]]"},  /* more than 4 over two runs */
		{4, "[[\"a\",0,4]]"},              /* local world size below 1 */
		{4, "[[\"a\",1048577,4]]"},        /* local world size above 2^20 */
		{4, "[[\"a\",2,0],[\"a\",2,4]]"},  /* an empty run */
		{4, "[[\"a\",2,-1],[\"a\",2,5]]"}, /* a negative count */
		{4, "[[1,2,4]]"},                  /* role not a string */
		{4, "[[\"a\",\"2\",4]]"},          /* size not an integer */
		{4, "[[\"a\",2,4.0]]"},            /* count not an integer */
		{4, "[[\"a\",2]]"},                /* the old two-element form */
		{4, "[[\"a\",2,4,1]]"},            /* a fourth element */
		{4, "[\"a\"]"},                    /* a run not an array */
		{0, "[]"},                         /* no node at all */
		/* 2048 nodes of 2^20 workers: 2^31, one more than an int holds. */
		{2048, "[[\"a\",1048576,2048]]"},
		{2048, "[[\"a\",1048576,2047],[\"b\",1048576,1]]"},
	};

	for (size_t i = 0; i < ARRAY_SIZE(bad); i++) {
		json_t *json = json_loads(bad[i].json, 0, NULL);
		struct ranks_run *got = NULL;
		size_t n_got = 7;
		char **roles = NULL;

		print_message("runs of %zu nodes: %s\n", bad[i].n, bad[i].json);
		assert_non_null(json);
		assert_int_equal(rdzv_runs_decode(json, bad[i].n, &got, &n_got, &roles), -EBADMSG);
		assert_null(got);
		assert_int_equal(n_got, 7);
		assert_null(roles);
		json_decref(json);
	}
}

/* A copy owns its roles: it outlives the runs and roles it was made from. */
static void
test_copy(void **state)
{
	char *trainer = strdup("trainer"), *ps = strdup("ps");
	struct ranks_run runs[] = {{trainer, 4, 2}, {ps, 1, 3}}, *copy;
	char **roles;

	rdzv_runs_copy(runs, 2, &copy, &roles);
	free(trainer);
	free(ps);
	assert_int_equal(strv_length(roles), 2);
	for (size_t i = 0; i < 2; i++) {
		assert_ptr_equal(copy[i].role, roles[i]);
		assert_int_equal(copy[i].local_world_size, runs[i].local_world_size);
		assert_int_equal(copy[i].count, runs[i].count);
	}
	assert_string_equal(copy[0].role, "trainer");
	assert_string_equal(copy[1].role, "ps");
	strv_free(roles);
	free(copy);
}

/* Worker-identical: every node is this one; one run, one role string. */
static void
test_alike_nodes(void **state)
{
	struct ranks_run *runs;
	size_t n_runs;
	char **roles;
	struct ranks_info ri;

	rdzv_runs_alike("trainer", 4, 3, &runs, &n_runs, &roles);
	assert_int_equal(n_runs, 1);
	assert_ptr_equal(runs[0].role, roles[0]);
	assert_int_equal(runs[0].local_world_size, 4);
	assert_int_equal(runs[0].count, 3);
	assert_string_equal(roles[0], "trainer");
	assert_null(roles[1]);
	ranks_assign(runs, n_runs, 2, &ri);
	assert_int_equal(ri.base_global_rank, 8);
	assert_int_equal(ri.global_world_size, 12);
	strv_free(roles);
	free(runs);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_encode),         cmocka_unit_test(test_round_trip),
		cmocka_unit_test(test_decode_one_run), cmocka_unit_test(test_alike_nodes),
		cmocka_unit_test(test_bad_runs),       cmocka_unit_test(test_copy),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
