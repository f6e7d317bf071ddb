/* rdzv_assign.h — what a rendezvous coordinator tells each node through its
 * assignment key, the same for every backend (c10d "<key>/a/<node>", etcd
 * "<prefix>/n/<node>"): a node waits on its own key and learns its round
 * from a few bytes instead of reading the state, whose size grows with the
 * number of nodes (issue #14; the keys are in elasticd(8)). */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "rdzv_state.h"

/* What the coordinator told so far, so that each word goes out once. */
struct rdzv_assign_memo {
	int64_t round;      /* the last round published, -1: none */
	bool closed_told;   /* "closed" sent to every node that may wait */
	char **spares_told; /* "spare" sent to these (the redundancy list), strv */
};

/* A memo that told nothing yet. */
void rdzv_assign_memo_init(struct rdzv_assign_memo *m);

/* Free what m holds and start over (rdzv_assign_memo_init). */
void rdzv_assign_memo_reset(struct rdzv_assign_memo *m);

/* The assignment-key values a coordinator writes now. st: the state it holds
 * (the store's own copy: the caller checks that), joiners[0..n_joiners): the
 * join requests it holds and has not admitted, me: its own node name (it
 * needs no key: left out), suffix: appended to each round's value (etcd: the
 * state revision, " <rev>"; c10d: ""). In order:
 * - the rendezvous closed: "closed" to every node that may wait on its key
 *   (participants of an incomplete round, wait list, redundancy list,
 *   joiners), once to each, sorted by name; nothing else then;
 * - "spare" to each node newly in the redundancy list (it reads the state
 *   itself from then on);
 * - once a round completes: "<round> <rank> <world> <gen><suffix>" to every
 *   participant, once per round.
 * Appends node names to *nodes and values to *vals (strv, both left NULL when
 * there is nothing to say; the caller frees) and updates m. Pure. */
void rdzv_assign_plan(struct rdzv_assign_memo *m, const struct rdzv_state *st,
		      const struct rdzv_node *joiners, size_t n_joiners, const char *me,
		      const char *suffix, char ***nodes, char ***vals);
