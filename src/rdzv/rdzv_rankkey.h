/* rdzv_rankkey.h — rank keys (--rdzv-conf rank_key): which strings may be
 * one, their natural order, and the group rank order of a round's nodes
 * that follows them. Pure: no I/O. */
#pragma once

#include <stdbool.h>
#include <stddef.h>

#include "rdzv_state.h"

/* Whether s[0..len) may be a rank key: 1 to RDZV_MAX_KEY_LEN bytes of
 * [A-Za-z0-9._:-] (what the state's encoding and a node name can carry). */
bool rdzv_key_ok(const char *s, size_t len);

/* The node's rank key (borrowed from n->name) and its length in *ret_len;
 * NULL and 0 when it has none. */
const char *rdzv_node_key(const struct rdzv_node *n, size_t *ret_len);

/* Natural order of rank keys: runs of digits compare as numbers ("9" <
 * "10", leading zeros ignored, then the shorter run first), other bytes
 * bytewise. <0, 0, >0. */
int rdzv_key_cmp(const char *a, size_t alen, const char *b, size_t blen);

/* Group rank order of a round (rdzv_dynamic.c): nodes with a rank key first,
 * by rdzv_key_cmp then rdzv_node_cmp; then the nodes without one, by
 * rdzv_node_cmp (torch's order). <0, 0, >0. */
int rdzv_node_rank_cmp(const struct rdzv_node *a, const struct rdzv_node *b);

/* The node's key prefix for --rdzv-conf segment: its rank key up to (not
 * including) the key's last '-' or ':'; empty (0) for a key without either
 * and for a node without a key. *ret_prefix borrowed from n->name. */
size_t rdzv_node_prefix(const struct rdzv_node *n, const char **ret_prefix);

/* Whether a and b share a key prefix (rdzv_node_prefix). */
bool rdzv_same_prefix(const struct rdzv_node *a, const struct rdzv_node *b);

/* Whole segments (--rdzv-conf segment=N, N >= 2) among nodes[0..n): nodes
 * sharing a prefix form a domain; each domain gives its first
 * floor(count / N) * N nodes in group rank order (rdzv_node_rank_cmp),
 * domains in natural order of their prefixes, while the total stays <= max.
 * Sets keep[i] for the nodes taken (keep has n entries; NULL: only count).
 * Returns how many are taken. */
size_t rdzv_segments(const struct rdzv_node *const *nodes, size_t n, int segment, size_t max,
		     bool *keep);
