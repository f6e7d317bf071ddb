/* rdzv_runs.h — a round's nodes (role, local world size) in run-length
 * form, as the rank exchange publishes them: [[role, local_world_size,
 * count], ...] over consecutive group ranks. A job whose nodes are alike
 * (the usual case at scale) is one run: every member reads O(1) bytes
 * instead of one entry per node. */
#pragma once

#include <jansson.h>
#include <stddef.h>

#include "ranks.h"

/* nodes[0..n) as runs of equal consecutive nodes. Returns a new reference. */
json_t *rdzv_runs_encode(const struct ranks_node *nodes, size_t n);

/* The n nodes that runs describes: *ret_nodes (n entries, malloc'd) and
 * *ret_roles (a NULL-terminated strv of one string per run, malloc'd: the
 * nodes' role pointers point into it; free it after the nodes). Returns 0,
 * or -EBADMSG when runs is not an array of [string, 1..2^20, count >= 1]
 * whose counts sum to n (nothing allocated). */
int rdzv_runs_decode(const json_t *runs, size_t n, struct ranks_node **ret_nodes,
		     char ***ret_roles);

/* The n nodes of a round whose nodes all run role with local_world_size
 * workers (torch main's worker-identical path: each node takes itself as
 * the model of all): *ret_nodes (n entries, malloc'd) pointing into
 * *ret_roles (a strv owning the one role string); both the caller's.
 * ranks_assign over them gives base rank group_rank * local_world_size and
 * world size n * local_world_size. Cannot fail (aborts on out-of-memory). */
void rdzv_runs_alike(const char *role, int local_world_size, size_t n,
		     struct ranks_node **ret_nodes, char ***ret_roles);
