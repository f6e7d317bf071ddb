/* ranks.h — torchrun's worker rank assignment (agent/server/api.py
 * _assign_worker_ranks, 1.13 and 2.x give the same numbers). Pure. */
#pragma once

#include <stddef.h>

/* One agent (node) of the round, indexed by its group rank. */
struct ranks_node {
	const char *role;     /* --role of that agent */
	int local_world_size; /* its --nproc-per-node, resolved */
};

/* The base ranks of one agent; a worker adds its local rank to the bases. */
struct ranks_info {
	int base_global_rank;  /* sum of local_world_size of agents with a lower group rank */
	int global_world_size; /* sum over all agents (WORLD_SIZE) */
	int base_role_rank;    /* same sum among agents of my role, ordered by (role, group rank) */
	int role_world_size;   /* sum over agents of my role (ROLE_WORLD_SIZE) */
};

/* Compute the bases of agent `me` (its group rank) among nodes[0..n), me < n.
 * Writes *ret; cannot fail. */
void ranks_assign(const struct ranks_node *nodes, size_t n, size_t me, struct ranks_info *ret);

/* ranks_assign for every agent at once, ret[0..n) (n entries, caller's), in
 * O(n x roles) rather than n calls' O(n^2): what group rank 0 publishes for
 * a job of 10 000 nodes. Cannot fail (aborts on out-of-memory, as xmalloc). */
void ranks_assign_all(const struct ranks_node *nodes, size_t n, struct ranks_info *ret);
