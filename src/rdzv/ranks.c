#include "ranks.h"

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "util.h"

void
ranks_assign(const struct ranks_node *nodes, size_t n, size_t me, struct ranks_info *ret)
{
	const char *role = nodes[me].role;
	struct ranks_info r = {0};

	for (size_t i = 0; i < n; i++) {
		bool same_role = strcmp(nodes[i].role, role) == 0;

		r.global_world_size += nodes[i].local_world_size;
		if (i < me) {
			r.base_global_rank += nodes[i].local_world_size;
		}
		if (same_role) {
			r.role_world_size += nodes[i].local_world_size;
			/* Agents of one role are ordered by group rank. */
			if (i < me) {
				r.base_role_rank += nodes[i].local_world_size;
			}
		}
	}
	*ret = r;
}

/* One role's running sum (ranks_assign_all). */
struct role_sum {
	const char *role;
	int before; /* local world sizes of its nodes so far */
	int total;
};

void
ranks_assign_all(const struct ranks_node *nodes, size_t n, struct ranks_info *ret)
{
	struct role_sum *sums = NULL;
	size_t n_sums = 0, *of = xcalloc(n + 1, sizeof(*of));
	int global = 0;

	/* Jobs have few roles: a linear search per node stays O(n). */
	for (size_t i = 0; i < n; i++) {
		size_t r = 0;

		while (r < n_sums && strcmp(sums[r].role, nodes[i].role) != 0) {
			r++;
		}
		if (r == n_sums) {
			sums = xrealloc(sums, (n_sums + 1) * sizeof(*sums));
			sums[n_sums++] = (struct role_sum){nodes[i].role, 0, 0};
		}
		of[i] = r;
		sums[r].total += nodes[i].local_world_size;
		global += nodes[i].local_world_size;
	}
	for (size_t i = 0, base = 0; i < n; i++) {
		struct role_sum *rs = &sums[of[i]];

		ret[i] = (struct ranks_info){(int)base, global, rs->before, rs->total};
		base += (size_t)nodes[i].local_world_size;
		rs->before += nodes[i].local_world_size;
	}
	free(sums);
	free(of);
}
