/* fuzz_rdzv_runs.c — libFuzzer target: the input is the "runs" of group
 * rank 0's answer (rdzv_runs.h) as a member reads it. What decodes must
 * describe exactly n nodes, encode back to the same JSON, fit its world
 * size in an int and give each node the ranks that ranks_assign_all and a
 * node-by-node count give it; what does not must leave the outputs alone. */
#include <jansson.h>
#include <limits.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "ranks.h"
#include "rdzv_runs.h"
#include "util.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Nodes up to which every node's ranks are computed and compared. */
#define MAX_CHECKED 4096

/* The node count the runs claim (saturating), as the member's world. */
static size_t
claimed(const json_t *json)
{
	size_t i, total = 0;
	json_t *run;

	json_array_foreach(json, i, run)
	{
		json_int_t c = json_integer_value(json_array_get(run, 2));

		if (c > 0 && (size_t)c <= SIZE_MAX - total) {
			total += (size_t)c;
		}
	}
	return total;
}

/* Node me's ranks the way torch counts them, one node at a time (runs
 * expanded, O(n)): independent of ranks.c's arithmetic over runs. */
static struct ranks_info
per_node(const struct ranks_run *runs, size_t n_runs, size_t me)
{
	int64_t v[4] = {0, 0, 0, 0}; /* base, world, role base, role world */
	const char *role = NULL;
	size_t k = 0;

	for (size_t i = 0; i < n_runs && !role; i++) {
		role = me < k + runs[i].count ? runs[i].role : NULL;
		k += runs[i].count;
	}
	k = 0;
	for (size_t i = 0; i < n_runs; i++) {
		for (size_t c = 0; c < runs[i].count; c++, k++) {
			bool mine = strcmp(runs[i].role, role) == 0;

			v[0] += k < me ? runs[i].local_world_size : 0;
			v[1] += runs[i].local_world_size;
			v[2] += mine && k < me ? runs[i].local_world_size : 0;
			v[3] += mine ? runs[i].local_world_size : 0;
		}
	}
	return (struct ranks_info){(int)v[0], (int)v[1], (int)v[2], (int)v[3]};
}

/* ranks_assign at a few group ranks agrees with ranks_assign_all and with
 * the per-node count; the world size fits an int and is every node's. */
static void
check_ranks(const struct ranks_run *runs, size_t n_runs, size_t n)
{
	const size_t mes[] = {0, n / 2, n - 1};
	int64_t world = ranks_world_size(runs, n_runs);
	struct ranks_info *all, one, ref;

	if (world > INT_MAX) {
		abort();
	}
	if (n > MAX_CHECKED) {
		ranks_assign(runs, n_runs, n - 1, &one);
		if (one.global_world_size != world) {
			abort();
		}
		return;
	}
	all = xcalloc(n, sizeof(*all));
	ranks_assign_all(runs, n_runs, all);
	for (size_t i = 0; i < ARRAY_SIZE(mes); i++) {
		ranks_assign(runs, n_runs, mes[i], &one);
		ref = per_node(runs, n_runs, mes[i]);
		if (memcmp(&one, &all[mes[i]], sizeof(one)) != 0 ||
		    memcmp(&one, &ref, sizeof(one)) != 0 || one.global_world_size != world) {
			abort();
		}
	}
	free(all);
}

static void
check_decoded(const json_t *json, size_t n, const struct ranks_run *runs, size_t n_runs,
	      char **roles)
{
	json_t *back = rdzv_runs_encode(runs, n_runs);
	size_t total = 0;

	if (!json_equal(back, (json_t *)json) || n_runs != json_array_size(json) ||
	    strv_length(roles) != n_runs) {
		abort();
	}
	json_decref(back);
	for (size_t i = 0; i < n_runs; i++) {
		if (runs[i].role != roles[i] || runs[i].count < 1 || runs[i].local_world_size < 1 ||
		    runs[i].local_world_size > RANKS_MAX_LOCAL_WORLD) {
			abort();
		}
		total += runs[i].count;
	}
	if (total != n) {
		abort();
	}
	if (n > 0) {
		check_ranks(runs, n_runs, n);
	}
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static struct ranks_run no_runs[1];
	static char *no_roles[1];
	json_t *json = json_loadb((const char *)data, size, JSON_DECODE_ANY, NULL);
	size_t ns[] = {claimed(json), 1, 4};

	for (size_t i = 0; json && i < ARRAY_SIZE(ns); i++) {
		struct ranks_run *runs = no_runs;
		size_t n_runs = 7;
		char **roles = no_roles;

		/* A member's world is an int. */
		if (ns[i] > INT_MAX) {
			continue;
		}
		if (rdzv_runs_decode(json, ns[i], &runs, &n_runs, &roles) < 0) {
			/* Nothing allocated, nothing written. */
			if (runs != no_runs || n_runs != 7 || roles != no_roles) {
				abort();
			}
			continue;
		}
		check_decoded(json, ns[i], runs, n_runs, roles);
		strv_free(roles);
		free(runs);
	}
	json_decref(json);
	return 0;
}
