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
