/* ranks.h — torchrun's worker rank assignment (agent/server/api.py
 * _assign_worker_ranks, 1.13 and 2.x give the same numbers) over a round's
 * nodes in run-length form: a job of alike nodes is one run, and a node's
 * ranks cost O(runs), not O(nodes). Pure. */
#pragma once

#include <stddef.h>
#include <stdint.h>

/* Bound of a node's local world size: a larger one is a value nobody sent. */
#define RANKS_MAX_LOCAL_WORLD (1 << 20)

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

/* The workers of every agent runs[0..n_runs) describe (WORLD_SIZE): the sum
 * of local_world_size x count, in 64 bits so that a caller can check it
 * fits in an int before it assigns ranks. O(n_runs). */
int64_t ranks_world_size(const struct ranks_run *runs, size_t n_runs);

/* Compute the bases of agent `me` (its group rank) among the agents that
 * runs[0..n_runs) describe (n_runs >= 1), me < the sum of their counts, in
 * O(n_runs). The world size (ranks_world_size) must be at most INT_MAX.
 * Writes *ret; cannot fail. */
void ranks_assign(const struct ranks_run *runs, size_t n_runs, size_t me, struct ranks_info *ret);

/* ranks_assign for every agent at once: ret[0..n) where n is the sum of the
 * runs' counts (caller's array), in O(n + n_runs x roles) rather than n
 * calls' O(n x n_runs): what group rank 0 publishes for a job of 10 000
 * nodes. The world size must be at most INT_MAX, as for ranks_assign.
 * Cannot fail (aborts on out-of-memory, as xmalloc). */
void ranks_assign_all(const struct ranks_run *runs, size_t n_runs, struct ranks_info *ret);
