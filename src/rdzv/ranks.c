#include "ranks.h"

#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "util.h"

static bool
same_role(const char *a, const char *b)
{
	return a == b || strcmp(a, b) == 0;
}

/* The workers of run r: its size times its count. */
static int64_t
run_size(const struct ranks_run *r)
{
	return (int64_t)r->local_world_size * (int64_t)r->count;
}

int64_t
ranks_world_size(const struct ranks_run *runs, size_t n_runs)
{
	int64_t world = 0;

	for (size_t i = 0; i < n_runs; i++) {
		world += run_size(&runs[i]);
	}
	return world;
}

void
ranks_assign(const struct ranks_run *runs, size_t n_runs, size_t me, struct ranks_info *ret)
{
	int64_t global = 0, base = 0, role_total = 0, role_base = 0, before_me;
	size_t mine = 0, at = 0;
	const char *role;

	while (mine + 1 < n_runs && me >= at + runs[mine].count) {
		at += runs[mine++].count;
	}
	role = runs[mine].role;
	for (size_t i = 0; i < n_runs; i++) {
		int64_t size = run_size(&runs[i]);
		bool mine_too = same_role(runs[i].role, role);

		global += size;
		base += i < mine ? size : 0;
		/* Agents of one role are ordered by group rank. */
		role_total += mine_too ? size : 0;
		role_base += mine_too && i < mine ? size : 0;
	}
	/* The agents of my run before me. */
	before_me = (int64_t)runs[mine].local_world_size * (int64_t)(me - at);
	base += before_me;
	role_base += before_me;
	*ret = (struct ranks_info){(int)base, (int)global, (int)role_base, (int)role_total};
}

/* One role's running sum (ranks_assign_all). */
struct role_sum {
	const char *role;
	int64_t before; /* local world sizes of its agents so far */
	int64_t total;
};

void
ranks_assign_all(const struct ranks_run *runs, size_t n_runs, struct ranks_info *ret)
{
	struct role_sum *sums = NULL;
	size_t n_sums = 0, *of = xcalloc(n_runs + 1, sizeof(*of)), k = 0;
	int64_t global = 0, base = 0;

	/* Jobs have few roles: a linear search per run stays O(runs). */
	for (size_t i = 0; i < n_runs; i++) {
		size_t r = 0;

		while (r < n_sums && !same_role(sums[r].role, runs[i].role)) {
			r++;
		}
		if (r == n_sums) {
			sums = xrealloc(sums, (n_sums + 1) * sizeof(*sums));
			sums[n_sums++] = (struct role_sum){runs[i].role, 0, 0};
		}
		of[i] = r;
		sums[r].total += run_size(&runs[i]);
		global += run_size(&runs[i]);
	}
	for (size_t i = 0; i < n_runs; i++) {
		struct role_sum *rs = &sums[of[i]];

		for (size_t c = 0; c < runs[i].count; c++, k++) {
			ret[k] = (struct ranks_info){(int)base, (int)global, (int)rs->before,
						     (int)rs->total};
			base += runs[i].local_world_size;
			rs->before += runs[i].local_world_size;
		}
	}
	free(sums);
	free(of);
}
