#include "ranks.h"

#include <stdbool.h>
#include <string.h>

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
