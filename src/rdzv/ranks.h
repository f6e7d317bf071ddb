/* ranks.h — torchrun's worker rank assignment (agent/server/api.py
 * _assign_worker_ranks, 1.13 and 2.x give the same numbers) over a round's
 * nodes in run-length form: a job of alike nodes is one run, and a node's
 * ranks cost O(runs), not O(nodes). Pure. */
#pragma once

#include <stddef.h>

/* Consecutive agents (nodes) of the round, by group rank, alike in role and
 * size. A round is runs[0..n_runs) whose counts sum to its node count; two
 * neighbouring runs may be alike (the numbers are the same either way). */
struct ranks_run {
	const char *role;     /* --role of those agents */
	int local_world_size; /* their --nproc-per-node, resolved, >= 1 */
	size_t count;         /* how many agents, >= 1 */
};

/* The base ranks of one agent; a worker adds its local rank to the bases. */
struct ranks_info {
	int base_global_rank;  /* sum of local_world_size of agents with a lower group rank */
	int global_world_size; /* sum over all agents (WORLD_SIZE) */
	int base_role_rank;    /* same sum among agents of my role, ordered by (role, group rank) */
	int role_world_size;   /* sum over agents of my role (ROLE_WORLD_SIZE) */
};

/* Compute the bases of agent `me` (its group rank) among the agents that
 * runs[0..n_runs) describe, me < the sum of their counts, in O(n_runs).
 * Writes *ret; cannot fail. */
void ranks_assign(const struct ranks_run *runs, size_t n_runs, size_t me, struct ranks_info *ret);

/* ranks_assign for every agent at once: ret[0..n) where n is the sum of the
 * runs' counts (caller's array), in O(n + n_runs x roles) rather than n
 * calls' O(n x n_runs): what group rank 0 publishes for a job of 10 000
 * nodes. Cannot fail (aborts on out-of-memory, as xmalloc). */
void ranks_assign_all(const struct ranks_run *runs, size_t n_runs, struct ranks_info *ret);
