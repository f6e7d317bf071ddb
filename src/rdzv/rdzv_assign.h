/* rdzv_assign.h — what a rendezvous coordinator tells each node through its
 * assignment key, the same for every backend (c10d "<key>/a/<node>", etcd
 * "<prefix>/n/<node>"): a node waits on its own key and learns its round
 * from a few bytes instead of reading the state, whose size grows with the
 * number of nodes (issue #14; the keys are in elasticd(8)). */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "rdzv_dynamic.h"
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

/* ---- delegated exits -------------------------------------------------------
 * A node that ran round R and asks for the next round at once (all of them
 * do when one worker failed) would run torch's exit op itself first: a read
 * and a compare-and-set of the whole state, O(N) bytes each, O(N^2) for the
 * crowd. Instead its join request carries "x<R>", and the coordinator runs
 * the exit op for it (rdzv_decide(RDZV_OP_EXIT)) in the compare-and-set that
 * admits it, while the node waits on its assignment key. */

/* A node that leaves the rendezvous (rdzv_leave) while its join request may
 * still be unread withdraws it with this request value: the coordinator
 * forgets its request and, if it admitted the node meanwhile, runs the leave
 * op for it (rdzv_decide(RDZV_OP_LEAVE)), as for an exit. */
#define RDZV_EXITS_WITHDRAW "l"
/* rounds[i] of a withdrawn node: it leaves every list, not one round. */
#define RDZV_EXITS_LEAVE (-1)

/* The exits a coordinator was asked for: nodes[i] leaves round rounds[i]
 * (RDZV_EXITS_LEAVE: the rendezvous); n_leaves of them leave the rendezvous. */
struct rdzv_exits {
	struct rdzv_node *nodes;
	int64_t *rounds;
	size_t n;
	size_t n_leaves;
};

/* The join request value of a node leaving round (>= 0): "x<round>" into
 * buf of size len (at least 24 bytes); "" for round < 0 (a plain request). */
void rdzv_exits_request(int64_t round, char *buf, size_t len);

/* The asking node's side: whether st still holds me as a participant of
 * the completed round it asked to leave (the coordinator has not taken it
 * out: it must run the exit op itself). */
bool rdzv_exits_still_in(const struct rdzv_state *st, const struct rdzv_node *me, int64_t round);

/* A join request of node n with value[0..len): when it is "x<round>",
 * record that n leaves that round, when it is RDZV_EXITS_WITHDRAW that n
 * leaves the rendezvous (either replacing what n asked before), and return
 * true; false for any other value (nothing recorded). n is copied. */
bool rdzv_exits_note(struct rdzv_exits *e, const struct rdzv_node *n, const char *value,
		     size_t len);

/* Forget what n asked (it asks to join again). Returns whether it had asked
 * anything. O(e->n). */
bool rdzv_exits_forget(struct rdzv_exits *e, const struct rdzv_node *n);

/* Apply to st the exit op of every recorded node still a participant of
 * the round it leaves (st->round), and the leave op of every withdrawn node
 * still on a list of st (one list per call), in order of record, as the
 * node itself would (no deadline: it asked now); ctx: the coordinator's
 * decision context (its node is replaced). Sets *notable as rdzv_apply does.
 * Returns how many exits changed st. */
size_t rdzv_exits_apply(const struct rdzv_exits *e, struct rdzv_state *st,
			const struct rdzv_ctx *ctx, bool *notable);

/* Whether st still holds n where a recorded exit (or leave) must take it
 * out first (n would look admitted, but is in the round it leaves). */
bool rdzv_exits_due(const struct rdzv_exits *e, const struct rdzv_state *st,
		    const struct rdzv_node *n, const struct rdzv_ctx *ctx);

/* Forget the exits st shows done or stale (the node is out of the round it
 * leaves, or the state moved past it; a withdrawn node is on no list):
 * keep those still due. */
void rdzv_exits_prune(struct rdzv_exits *e, const struct rdzv_state *st,
		      const struct rdzv_ctx *ctx);

/* Forget every exit and free what e holds (e is empty after). */
void rdzv_exits_release(struct rdzv_exits *e);
