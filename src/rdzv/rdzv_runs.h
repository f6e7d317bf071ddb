/* rdzv_runs.h — a round's nodes (role, local world size) in run-length
 * form (struct ranks_run), as the rank exchange publishes them: [[role,
 * local_world_size, count], ...] over consecutive group ranks. A job whose
 * nodes are alike (the usual case at scale) is one run: every member reads
 * O(1) bytes and keeps O(1) of them, never one entry per node. */
#pragma once

#include <jansson.h>
#include <stddef.h>

#include "ranks.h"

/* runs[0..n_runs) (borrowed) as their JSON array, one [role, size, count]
 * each, in order. Returns a new reference. */
json_t *rdzv_runs_encode(const struct ranks_run *runs, size_t n_runs);

/* The runs of n nodes (n >= 1) that json describes: *ret_runs (*ret_n_runs
 * >= 1 entries, malloc'd) and *ret_roles (a NULL-terminated strv of one
 * string per run, malloc'd: the runs' roles point into it, so the runs are
 * not used once it is freed), all the caller's. O(runs): no entry per node.
 * Returns 0, or -EBADMSG when json is not a non-empty array of [string,
 * 1..RANKS_MAX_LOCAL_WORLD, count >= 1] whose counts sum to n and whose
 * world size (ranks_world_size) is at most INT_MAX (nothing allocated, the
 * outputs untouched). */
int rdzv_runs_decode(const json_t *json, size_t n, struct ranks_run **ret_runs, size_t *ret_n_runs,
		     char ***ret_roles);

/* A copy of runs[0..n_runs) that owns its roles: *ret_runs (n_runs entries,
 * malloc'd) whose roles point into *ret_roles (a NULL-terminated strv of
 * one string per run, malloc'd), both the caller's; O(runs). What a holder
 * of a round keeps when the runs' owner frees them. Cannot fail (aborts on
 * out-of-memory). */
void rdzv_runs_copy(const struct ranks_run *runs, size_t n_runs, struct ranks_run **ret_runs,
		    char ***ret_roles);

/* The n nodes (n >= 1) of a round whose nodes all run role with
 * local_world_size workers (torch main's worker-identical path: each node
 * takes itself as the model of all), as one run: *ret_runs (1 entry,
 * malloc'd), *ret_n_runs = 1, the run's role pointing into *ret_roles (a
 * strv owning the one role string); all the caller's. ranks_assign over it
 * gives base rank group_rank * local_world_size and world size
 * n * local_world_size. Cannot fail (aborts on out-of-memory). */
void rdzv_runs_alike(const char *role, int local_world_size, size_t n, struct ranks_run **ret_runs,
		     size_t *ret_n_runs, char ***ret_roles);
