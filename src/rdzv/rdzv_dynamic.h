/* rdzv_dynamic.h — the decisions of torch's dynamic rendezvous as pure
 * functions of (shared state, this node, now): which action an operation
 * takes next (torch 2.x _RendezvousExitOp / _RendezvousJoinOp /
 * _RendezvousCloseOp / _RendezvousKeepAliveOp, reference rendezvous.md §3.3),
 * what each action does to the state (§3.2, §3.4, §3.5) and dead-node
 * sanitising (§3.6). The caller (rdzv_c10d.c) runs the sync / compare-and-set
 * loop and re-derives the action from fresh state after every lost race.
 *
 * Times: "now_wall" is wall clock usec (compared with the shared deadline and
 * heartbeats, as torch compares UTC datetimes); "now_mono" and op deadlines
 * are CLOCK_MONOTONIC usec. */
#pragma once

#include <stdbool.h>
#include <stdint.h>

#include "rdzv_state.h"

/* Seconds of grace after the join deadline during which a node still tries to
 * take itself out of the round (torch's rollback_period). */
#define RDZV_ROLLBACK_USEC (5 * 1000000LL)

struct rdzv_settings {
	int min_nodes;
	int max_nodes;
	int64_t last_call_usec;           /* last_call_timeout, default 30 s */
	int64_t keep_alive_interval_usec; /* default 5 s */
	int keep_alive_max_attempt;       /* default 3 */
	int segment; /* --rdzv-conf segment: whole segments of this many (>= 2), else 0 */
};

enum rdzv_op {
	RDZV_OP_EXIT,       /* leave the previous round (start of next_rendezvous) */
	RDZV_OP_JOIN,       /* join the next round and wait for its completion */
	RDZV_OP_CLOSE,      /* mark the rendezvous closed */
	RDZV_OP_KEEP_ALIVE, /* refresh this node's heartbeat when due */
	/* elasticd's graceful stop: out of the participants, the wait list and
	 * the redundancy list, without closing the rendezvous (torch's
	 * shutdown() closes it for everyone). */
	RDZV_OP_LEAVE,
	/* elasticd's readmit verb run by any agent: end the quarantine of the
	 * host ctx->readmit names (its entry's until becomes now; the entry and
	 * its count stay); with ctx->readmit NULL, only read the state (the
	 * quarantined agent watching its own entry). */
	RDZV_OP_READMIT,
	/* --quarantine's root cause: record this node's failure report
	 * (ctx->failure) in the state (rdzv_state_report_failure). */
	RDZV_OP_REPORT_FAILURE,
};

/* torch 2.x's _Action, in its order. */
enum rdzv_action {
	RDZV_ACTION_KEEP_ALIVE,
	RDZV_ACTION_ADD_TO_PARTICIPANTS,
	RDZV_ACTION_ADD_TO_WAIT_LIST,
	RDZV_ACTION_ADD_TO_REDUNDANCY_LIST,
	RDZV_ACTION_REMOVE_FROM_PARTICIPANTS,
	RDZV_ACTION_REMOVE_FROM_WAIT_LIST,
	RDZV_ACTION_REMOVE_FROM_REDUNDANCY_LIST,
	RDZV_ACTION_MARK_RENDEZVOUS_COMPLETE,
	RDZV_ACTION_MARK_RENDEZVOUS_CLOSED,
	RDZV_ACTION_SYNC,
	RDZV_ACTION_ERROR_CLOSED,
	RDZV_ACTION_ERROR_TIMEOUT,
	/* torch 2.x raises RendezvousGracefulExitError: a spare node (redundancy
	 * list) sees the rendezvous closed. Not a failure. */
	RDZV_ACTION_GRACEFUL_EXIT,
	RDZV_ACTION_FINISH,
	/* elasticd's: expire ctx->readmit's quarantine entry (RDZV_OP_READMIT). */
	RDZV_ACTION_READMIT,
	/* elasticd's: write ctx->failure (RDZV_OP_REPORT_FAILURE). */
	RDZV_ACTION_REPORT_FAILURE,
	/* elasticd's: record ctx->quarantine alone (RDZV_OP_LEAVE of a node
	 * that is on no list any more: dropped as dead meanwhile). */
	RDZV_ACTION_QUARANTINE,
};

/* Everything a decision looks at besides the state. */
struct rdzv_ctx {
	const struct rdzv_settings *settings;
	const struct rdzv_node *node; /* this node */
	int64_t now_wall;
	uint64_t now_mono;
	uint64_t op_deadline; /* monotonic deadline of the running operation */
	/* What MARK_RENDEZVOUS_CLOSED records as the state's closed_by (its node
	 * replaced by ctx's node), or NULL: closed without a failure. */
	const struct rdzv_close_record *close_record;
	/* This node's quarantine (--quarantine; its node is ignored: ctx's node
	 * is recorded), written with its next change to the state; NULL: none. */
	const struct rdzv_quarantine *quarantine;
	/* RDZV_OP_READMIT's host (a descriptor's addr, or a whole descriptor),
	 * or NULL; the other operations ignore it. */
	const char *readmit;
	/* RDZV_OP_REPORT_FAILURE's report (its node is ignored: ctx's node is
	 * recorded), or NULL. */
	const struct rdzv_failure *failure;
};

/* "KEEP_ALIVE" etc. Static storage. */
const char *rdzv_action_name(enum rdzv_action a);
const char *rdzv_op_name(enum rdzv_op op);

/* Whether a is a change to the local copy (to be written with
 * compare-and-set), as opposed to SYNC / FINISH / an error. */
bool rdzv_action_is_mutation(enum rdzv_action a);

/* The next action of op on st for ctx's node. Pure. A JOIN of a node whose
 * host another node quarantined (rdzv_state_quarantined) takes no place
 * until the entry's until: it waits (SYNC). */
enum rdzv_action rdzv_decide(enum rdzv_op op, const struct rdzv_state *st,
			     const struct rdzv_ctx *ctx);

/* Apply a mutating action to the local copy, as torch's
 * _DistributedRendezvousOpExecutor does (ADD_TO_PARTICIPANTS also sets the
 * last-call deadline when the count reaches min_nodes, and completes the round
 * when it reaches max_nodes; REMOVE_FROM_PARTICIPANTS runs the epilogue).
 * Returns whether the change is one that waiting nodes must hear about
 * (round, completion, closing, last-call deadline, wait list growth, a
 * completed round losing a member): the caller then bumps st->gen before
 * writing. Non-mutating actions are ignored (returns false). */
bool rdzv_apply(struct rdzv_state *st, enum rdzv_action a, const struct rdzv_ctx *ctx);
/* (rdzv_apply also records ctx->quarantine with any change, and ends the
 * quarantine entry of a node's host when that node takes a place again:
 * its until becomes now; the entry and its count stay.) */

/* Admission on behalf of others, elasticd's addition to torch's loop: a node
 * about to write the state first applies, for each of joiners[0..n) in that
 * order (their order of arrival), the ADD_TO_PARTICIPANTS / ADD_TO_WAIT_LIST /
 * ADD_TO_REDUNDANCY_LIST that the joiner's own JOIN operation would take now
 * (rdzv_decide with the joiner as the node and no deadline); any other action
 * is left to the joiner. One compare-and-set then admits a crowd instead of
 * one node, and nodes arriving together stop losing races to each other.
 * ctx gives the settings and clocks; its node and op_deadline are ignored.
 * Returns the number of joiners admitted; *ret_notable (may be NULL) as
 * rdzv_apply's return, or-ed over them. */
size_t rdzv_admit(struct rdzv_state *st, const struct rdzv_node *joiners, size_t n,
		  const struct rdzv_ctx *ctx, bool *ret_notable);

/* What next_rendezvous reports when its join operation ended with a, an
 * action other than FINISH: returns -ECONNABORTED (closed), -ETIMEDOUT (join
 * timeout), RDZV_GRACEFUL_EXIT's -ESHUTDOWN (a spare saw the rendezvous
 * close) or -EPROTO (an action a join never ends with), with *ret_msg
 * (malloc'd) naming run_id; joined and round describe the round it waited
 * for, join_timeout_usec the timeout. */
int rdzv_join_failure(enum rdzv_action a, const char *run_id, uint64_t join_timeout_usec,
		      size_t joined, int min_nodes, int64_t round, char **ret_msg);

/* For a node running round `round` as group rank `rank` of `world` nodes:
 * what the state says about that round (torch's agent polls
 * num_nodes_waiting; elasticd looks at every state it reads). Returns 0
 * (nothing to do), 1 (re-form: this node is out of the round, a member
 * left, or nodes wait to join; *ret_waiting is the wait list's length,
 * 0 for the other reasons) or -ECONNABORTED (another node closed the
 * rendezvous). *ret_msg (malloc'd) says why unless 0 is returned. */
int rdzv_round_check(const struct rdzv_state *st, const struct rdzv_node *me, int64_t round,
		     int world, int rank, int *ret_waiting, char **ret_msg);

/* rdzv_round_check from a summary of the state (rdzv_state.h), for a node
 * that hears of a change without reading the state: the same verdicts and
 * messages, save that a closed rendezvous returns -EAGAIN with no message
 * (the state names who closed it: read it), and that a node dropped from its
 * round hears that a member left (a complete round only loses participants,
 * so one that still has world of them still holds this node). */
int rdzv_round_check_summary(const struct rdzv_summary *sum, int64_t round, int world, int rank,
			     int *ret_waiting, char **ret_msg);

/* torch's _sanitize: drop every node whose heartbeat is older than
 * keep_alive_interval * keep_alive_max_attempt from the heartbeats and every
 * list, then the epilogue if a participant went. Returns the number of nodes
 * dropped; *ret_notable (may be NULL) is set when waiting nodes must hear
 * about it (see rdzv_apply). */
size_t rdzv_sanitize(struct rdzv_state *st, const struct rdzv_settings *s, int64_t now_wall,
		     bool *ret_notable);

/* torch's _should_keep_alive: the node has a heartbeat and it is at least
 * keep_alive_interval old. */
bool rdzv_should_keep_alive(const struct rdzv_state *st, const struct rdzv_ctx *ctx);

/* After SYNC: microseconds (wall clock span) until the decision could change
 * without anybody writing: my heartbeat falling due, the last-call deadline
 * passing while I am a participant of a round with >= min_nodes, the op
 * deadline (and its rollback window), the oldest heartbeat of another node
 * expiring. Never below 1 ms; at most keep_alive_interval. */
int64_t rdzv_next_wake_usec(enum rdzv_op op, const struct rdzv_state *st,
			    const struct rdzv_ctx *ctx);
