/* rdzv_dynamic.c — the dynamic rendezvous decisions (see the header). */
#include "rdzv_dynamic.h"

#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>

#include "rdzv_rankkey.h"
#include "util.h"

const char *
rdzv_action_name(enum rdzv_action a)
{
	switch (a) {
	case RDZV_ACTION_KEEP_ALIVE:
		return "KEEP_ALIVE";
	case RDZV_ACTION_ADD_TO_PARTICIPANTS:
		return "ADD_TO_PARTICIPANTS";
	case RDZV_ACTION_ADD_TO_WAIT_LIST:
		return "ADD_TO_WAIT_LIST";
	case RDZV_ACTION_ADD_TO_REDUNDANCY_LIST:
		return "ADD_TO_REDUNDANCY_LIST";
	case RDZV_ACTION_REMOVE_FROM_PARTICIPANTS:
		return "REMOVE_FROM_PARTICIPANTS";
	case RDZV_ACTION_REMOVE_FROM_WAIT_LIST:
		return "REMOVE_FROM_WAIT_LIST";
	case RDZV_ACTION_REMOVE_FROM_REDUNDANCY_LIST:
		return "REMOVE_FROM_REDUNDANCY_LIST";
	case RDZV_ACTION_MARK_RENDEZVOUS_COMPLETE:
		return "MARK_RENDEZVOUS_COMPLETE";
	case RDZV_ACTION_MARK_RENDEZVOUS_CLOSED:
		return "MARK_RENDEZVOUS_CLOSED";
	case RDZV_ACTION_SYNC:
		return "SYNC";
	case RDZV_ACTION_ERROR_CLOSED:
		return "ERROR_CLOSED";
	case RDZV_ACTION_ERROR_TIMEOUT:
		return "ERROR_TIMEOUT";
	case RDZV_ACTION_GRACEFUL_EXIT:
		return "GRACEFUL_EXIT";
	case RDZV_ACTION_FINISH:
		return "FINISH";
	case RDZV_ACTION_READMIT:
		return "READMIT";
	case RDZV_ACTION_REPORT_FAILURE:
		return "REPORT_FAILURE";
	case RDZV_ACTION_QUARANTINE:
		return "QUARANTINE";
	}
	return "?";
}

const char *
rdzv_op_name(enum rdzv_op op)
{
	switch (op) {
	case RDZV_OP_EXIT:
		return "exit";
	case RDZV_OP_JOIN:
		return "join";
	case RDZV_OP_CLOSE:
		return "close";
	case RDZV_OP_KEEP_ALIVE:
		return "keep-alive";
	case RDZV_OP_LEAVE:
		return "leave";
	case RDZV_OP_READMIT:
		return "readmit";
	case RDZV_OP_REPORT_FAILURE:
		return "report-failure";
	}
	return "?";
}

bool
rdzv_action_is_mutation(enum rdzv_action a)
{
	switch (a) {
	case RDZV_ACTION_KEEP_ALIVE:
	case RDZV_ACTION_ADD_TO_PARTICIPANTS:
	case RDZV_ACTION_ADD_TO_WAIT_LIST:
	case RDZV_ACTION_ADD_TO_REDUNDANCY_LIST:
	case RDZV_ACTION_REMOVE_FROM_PARTICIPANTS:
	case RDZV_ACTION_REMOVE_FROM_WAIT_LIST:
	case RDZV_ACTION_REMOVE_FROM_REDUNDANCY_LIST:
	case RDZV_ACTION_MARK_RENDEZVOUS_COMPLETE:
	case RDZV_ACTION_MARK_RENDEZVOUS_CLOSED:
	case RDZV_ACTION_READMIT:
	case RDZV_ACTION_REPORT_FAILURE:
	case RDZV_ACTION_QUARANTINE:
		return true;
	case RDZV_ACTION_SYNC:
	case RDZV_ACTION_ERROR_CLOSED:
	case RDZV_ACTION_ERROR_TIMEOUT:
	case RDZV_ACTION_GRACEFUL_EXIT:
	case RDZV_ACTION_FINISH:
		return false;
	}
	return false;
}

bool
rdzv_should_keep_alive(const struct rdzv_state *st, const struct rdzv_ctx *ctx)
{
	long i = rdzv_state_find_heartbeat(st, ctx->node);

	return i >= 0 &&
	       st->heartbeats[i].usec <= ctx->now_wall - ctx->settings->keep_alive_interval_usec;
}

/* How many participants a round completed now would take: all, or with
 * --rdzv-conf segment only whole segments (rdzv_segments). */
static size_t
takes(const struct rdzv_state *st, const struct rdzv_settings *s)
{
	const struct rdzv_node **nodes;
	size_t n;

	if (s->segment < 2) {
		return st->n_participants;
	}
	nodes = xcalloc(st->n_participants + 1, sizeof(*nodes));
	for (size_t i = 0; i < st->n_participants; i++) {
		nodes[i] = &st->participants[i].node;
	}
	n = rdzv_segments(nodes, st->n_participants, s->segment, (size_t)s->max_nodes, NULL);
	free(nodes);
	return n;
}

/* With segments, a spare of a complete round stays parked while its domain
 * (key prefix) has no hole: its participants are whole segments. A
 * participant of its domain gone, it is promoted (torch's path: the wait
 * list, then the next round). */
static bool
spare_holds(const struct rdzv_state *st, const struct rdzv_ctx *ctx)
{
	size_t same = 0;

	if (ctx->settings->segment < 2 || !st->complete) {
		return false;
	}
	for (size_t i = 0; i < st->n_participants; i++) {
		same += rdzv_same_prefix(&st->participants[i].node, ctx->node);
	}
	return same % (size_t)ctx->settings->segment == 0;
}

static enum rdzv_action
decide_join(const struct rdzv_state *st, const struct rdzv_ctx *ctx)
{
	const struct rdzv_settings *s = ctx->settings;
	bool participant = rdzv_state_find_participant(st, ctx->node) >= 0;
	bool waiting = rdzv_state_find_wait(st, ctx->node) >= 0;
	bool redundant = rdzv_state_find_redundant(st, ctx->node) >= 0;
	size_t n = st->n_participants;

	/* A closed rendezvous takes nobody; a parked spare leaves quietly. */
	if (st->closed) {
		return redundant ? RDZV_ACTION_GRACEFUL_EXIT : RDZV_ACTION_ERROR_CLOSED;
	}
	/* A spare waits (no join timeout) until a slot frees up. */
	if (redundant) {
		if (n >= (size_t)s->max_nodes || spare_holds(st, ctx)) {
			return rdzv_should_keep_alive(st, ctx) ? RDZV_ACTION_KEEP_ALIVE
							       : RDZV_ACTION_SYNC;
		}
		return RDZV_ACTION_REMOVE_FROM_REDUNDANCY_LIST;
	}
	if (st->complete && participant) {
		return RDZV_ACTION_FINISH;
	}
	if (ctx->now_mono > ctx->op_deadline) {
		/* Roll back what we can for a short while, then give up. */
		if (ctx->now_mono <= ctx->op_deadline + (uint64_t)RDZV_ROLLBACK_USEC) {
			if (participant) {
				return RDZV_ACTION_REMOVE_FROM_PARTICIPANTS;
			}
			if (waiting) {
				return RDZV_ACTION_REMOVE_FROM_WAIT_LIST;
			}
		}
		return RDZV_ACTION_ERROR_TIMEOUT;
	}
	if (st->complete) {
		/* Not in this round: wait for the next, or park as a spare. */
		if (n < (size_t)s->max_nodes) {
			if (!waiting) {
				return RDZV_ACTION_ADD_TO_WAIT_LIST;
			}
		} else if (!waiting) {
			return RDZV_ACTION_ADD_TO_REDUNDANCY_LIST;
		}
	} else if (participant) {
		/* Enough of us and the last call is over: complete the round. */
		/* (With segments the extra nodes become spares at completion.) */
		if (takes(st, s) >= (size_t)s->min_nodes &&
		    (s->segment >= 2 || n <= (size_t)s->max_nodes) && st->deadline >= 0 &&
		    st->deadline < ctx->now_wall) {
			return RDZV_ACTION_MARK_RENDEZVOUS_COMPLETE;
		}
	} else {
		return RDZV_ACTION_ADD_TO_PARTICIPANTS;
	}
	if (rdzv_should_keep_alive(st, ctx)) {
		return RDZV_ACTION_KEEP_ALIVE;
	}
	return RDZV_ACTION_SYNC;
}

/* Whether the state holds ctx->quarantine as this node's entry. */
static bool
quarantine_held(const struct rdzv_state *st, const struct rdzv_ctx *ctx)
{
	long pos = rdzv_state_find_quarantine(st, ctx->node);

	return pos >= 0 && rdzv_node_cmp(&st->quarantine[pos].node, ctx->node) == 0 &&
	       st->quarantine[pos].until == ctx->quarantine->until &&
	       st->quarantine[pos].count == ctx->quarantine->count;
}

/* RDZV_OP_LEAVE: out of every list this node is on, one at a time; a
 * quarantine (ctx->quarantine) rides on the last removal, or is written
 * alone when the node is on no list (dropped as dead meanwhile). */
static enum rdzv_action
decide_leave(const struct rdzv_state *st, const struct rdzv_ctx *ctx)
{
	enum rdzv_action a;

	if (rdzv_state_find_participant(st, ctx->node) >= 0) {
		a = RDZV_ACTION_REMOVE_FROM_PARTICIPANTS;
	} else if (rdzv_state_find_wait(st, ctx->node) >= 0) {
		a = RDZV_ACTION_REMOVE_FROM_WAIT_LIST;
	} else if (rdzv_state_find_redundant(st, ctx->node) >= 0) {
		a = RDZV_ACTION_REMOVE_FROM_REDUNDANCY_LIST;
	} else if (ctx->quarantine && !quarantine_held(st, ctx)) {
		a = RDZV_ACTION_QUARANTINE;
	} else {
		return RDZV_ACTION_FINISH;
	}
	return ctx->now_mono > ctx->op_deadline ? RDZV_ACTION_ERROR_TIMEOUT : a;
}

enum rdzv_action
rdzv_decide(enum rdzv_op op, const struct rdzv_state *st, const struct rdzv_ctx *ctx)
{
	enum rdzv_action a;

	switch (op) {
	case RDZV_OP_EXIT:
		if (rdzv_state_find_participant(st, ctx->node) >= 0) {
			return ctx->now_mono > ctx->op_deadline
				       ? RDZV_ACTION_ERROR_TIMEOUT
				       : RDZV_ACTION_REMOVE_FROM_PARTICIPANTS;
		}
		return RDZV_ACTION_FINISH;
	case RDZV_OP_JOIN:
		a = decide_join(st, ctx);
		if ((a == RDZV_ACTION_ADD_TO_PARTICIPANTS || a == RDZV_ACTION_ADD_TO_WAIT_LIST ||
		     a == RDZV_ACTION_ADD_TO_REDUNDANCY_LIST) &&
		    rdzv_state_quarantined(st, ctx->node, ctx->now_wall)) {
			return RDZV_ACTION_SYNC; /* its host is quarantined */
		}
		return a;
	case RDZV_OP_CLOSE:
		if (st->closed) {
			return RDZV_ACTION_FINISH;
		}
		return ctx->now_mono > ctx->op_deadline ? RDZV_ACTION_ERROR_TIMEOUT
							: RDZV_ACTION_MARK_RENDEZVOUS_CLOSED;
	case RDZV_OP_KEEP_ALIVE:
		if (rdzv_should_keep_alive(st, ctx)) {
			return ctx->now_mono > ctx->op_deadline ? RDZV_ACTION_ERROR_TIMEOUT
								: RDZV_ACTION_KEEP_ALIVE;
		}
		return RDZV_ACTION_FINISH;
	case RDZV_OP_LEAVE:
		return decide_leave(st, ctx);
	case RDZV_OP_READMIT:
		if (!ctx->readmit ||
		    !rdzv_state_host_quarantined(st, ctx->readmit, ctx->now_wall)) {
			return RDZV_ACTION_FINISH; /* nothing (left) to readmit */
		}
		return ctx->now_mono > ctx->op_deadline ? RDZV_ACTION_ERROR_TIMEOUT
							: RDZV_ACTION_READMIT;
	case RDZV_OP_REPORT_FAILURE:
		if (!ctx->failure || rdzv_state_failure_reported(st, ctx->node, ctx->failure->round,
								 ctx->failure->usec)) {
			return RDZV_ACTION_FINISH;
		}
		return ctx->now_mono > ctx->op_deadline ? RDZV_ACTION_ERROR_TIMEOUT
							: RDZV_ACTION_REPORT_FAILURE;
	}
	return RDZV_ACTION_ERROR_TIMEOUT;
}

/* torch's _remove_participant_epilogue. Returns whether it was notable. */
static bool
epilogue(struct rdzv_state *st, const struct rdzv_settings *s)
{
	if (st->complete) {
		if (st->n_participants == 0) {
			st->complete = false;
			st->round++;
		}
		/* A running round lost a member: its nodes must re-form. */
		return true;
	}
	if (st->n_participants < (size_t)s->min_nodes && st->deadline >= 0) {
		st->deadline = -1;
		return true;
	}
	return false;
}

static int
cmp_rank_order(const void *x, const void *y)
{
	const struct rdzv_participant *a = *(const struct rdzv_participant *const *)x,
				      *b = *(const struct rdzv_participant *const *)y;

	return rdzv_node_rank_cmp(&a->node, &b->node);
}

/* With segments: the participants outside whole segments become spares
 * (the redundancy list), their heartbeats kept. */
static void
park_partial_segments(struct rdzv_state *st, const struct rdzv_settings *s)
{
	size_t n = st->n_participants, n_out = 0;
	const struct rdzv_node **nodes = xcalloc(n + 1, sizeof(*nodes));
	struct rdzv_node *out = xcalloc(n + 1, sizeof(*out));
	bool *keep = xcalloc(n + 1, sizeof(*keep));

	for (size_t i = 0; i < n; i++) {
		nodes[i] = &st->participants[i].node;
	}
	rdzv_segments(nodes, n, s->segment, (size_t)s->max_nodes, keep);
	for (size_t i = 0; i < n; i++) {
		if (!keep[i]) {
			rdzv_node_copy(&out[n_out++], &st->participants[i].node);
		}
	}
	for (size_t i = 0; i < n_out; i++) {
		rdzv_state_remove_participant(st, &out[i]);
		rdzv_state_add_redundant(st, &out[i]);
		rdzv_node_release(&out[i]);
	}
	free(out);
	free(keep);
	free(nodes);
}

static void
mark_complete(struct rdzv_state *st, const struct rdzv_settings *s)
{
	struct rdzv_participant **order;

	st->complete = true;
	st->deadline = -1;
	if (s->segment >= 2) {
		park_partial_segments(st, s);
	}
	/* Ranks are positions in node order (the array is kept sorted), or, where
	 * nodes carry rank keys (--rdzv-conf rank_key), in key order. */
	order = xcalloc(st->n_participants + 1, sizeof(*order));
	for (size_t i = 0; i < st->n_participants; i++) {
		order[i] = &st->participants[i];
	}
	qsort(order, st->n_participants, sizeof(*order), cmp_rank_order);
	for (size_t i = 0; i < st->n_participants; i++) {
		order[i]->rank = (int)i;
	}
	free(order);
}

/* After a change by ctx's node: record its quarantine (ctx->quarantine), or,
 * when it takes a place again, end its host's entry (until = now; the entry
 * and its count stay). Returns whether the state changed. */
static bool
apply_quarantine(struct rdzv_state *st, enum rdzv_action a, const struct rdzv_ctx *ctx)
{
	if (ctx->quarantine) {
		struct rdzv_quarantine q = *ctx->quarantine;

		q.node = *ctx->node;
		return rdzv_state_set_quarantine(st, &q);
	}
	if (a == RDZV_ACTION_ADD_TO_PARTICIPANTS || a == RDZV_ACTION_ADD_TO_WAIT_LIST ||
	    a == RDZV_ACTION_ADD_TO_REDUNDANCY_LIST) {
		/* Over, not dropped: its count outlives a restart of the agent. */
		long pos = rdzv_state_find_quarantine(st, ctx->node);

		if (pos >= 0 && st->quarantine[pos].until > ctx->now_wall) {
			st->quarantine[pos].until = ctx->now_wall;
			return true;
		}
	}
	return false;
}

bool
rdzv_apply(struct rdzv_state *st, enum rdzv_action a, const struct rdzv_ctx *ctx)
{
	const struct rdzv_settings *s = ctx->settings;
	const struct rdzv_node *me = ctx->node;
	bool notable = false;

	switch (a) {
	case RDZV_ACTION_KEEP_ALIVE:
		rdzv_state_set_heartbeat(st, me, ctx->now_wall);
		break;
	case RDZV_ACTION_ADD_TO_PARTICIPANTS:
		rdzv_state_remove_wait(st, me);
		rdzv_state_add_participant(st, me, 0);
		rdzv_state_set_heartbeat(st, me, ctx->now_wall);
		if (st->n_participants == (size_t)s->min_nodes) {
			st->deadline = ctx->now_wall + s->last_call_usec;
			notable = true;
		}
		if (s->segment >= 2 ? takes(st, s) >= (size_t)s->max_nodes
				    : st->n_participants == (size_t)s->max_nodes) {
			mark_complete(st, s);
			notable = true;
		}
		break;
	case RDZV_ACTION_ADD_TO_WAIT_LIST:
		rdzv_state_remove_redundant(st, me);
		rdzv_state_add_wait(st, me);
		rdzv_state_set_heartbeat(st, me, ctx->now_wall);
		notable = true;
		break;
	case RDZV_ACTION_ADD_TO_REDUNDANCY_LIST:
		rdzv_state_add_redundant(st, me);
		rdzv_state_set_heartbeat(st, me, ctx->now_wall);
		break;
	case RDZV_ACTION_REMOVE_FROM_PARTICIPANTS:
		rdzv_state_remove_participant(st, me);
		rdzv_state_remove_heartbeat(st, me);
		notable = epilogue(st, s);
		break;
	case RDZV_ACTION_REMOVE_FROM_WAIT_LIST:
		rdzv_state_remove_wait(st, me);
		rdzv_state_remove_heartbeat(st, me);
		break;
	case RDZV_ACTION_REMOVE_FROM_REDUNDANCY_LIST:
		rdzv_state_remove_redundant(st, me);
		rdzv_state_remove_heartbeat(st, me);
		break;
	case RDZV_ACTION_MARK_RENDEZVOUS_COMPLETE:
		mark_complete(st, s);
		notable = true;
		break;
	case RDZV_ACTION_MARK_RENDEZVOUS_CLOSED:
		st->closed = true;
		if (ctx->close_record && !st->closed_by) {
			struct rdzv_close_record rec = *ctx->close_record;

			rec.node = *me;
			rdzv_state_set_closed_by(st, &rec);
		}
		notable = true;
		break;
	case RDZV_ACTION_READMIT:
		/* Expired, not dropped: its count stays for the next cooldown. */
		return ctx->readmit &&
		       rdzv_state_expire_quarantine(st, ctx->readmit, ctx->now_wall);
	case RDZV_ACTION_QUARANTINE:
		break; /* apply_quarantine below */
	case RDZV_ACTION_REPORT_FAILURE:
		/* Not notable: nobody waits for it; the reporters read it. */
		(void)(ctx->failure &&
		       rdzv_state_report_failure(st, me, ctx->failure->round, ctx->failure->usec));
		return false;
	case RDZV_ACTION_SYNC:
	case RDZV_ACTION_ERROR_CLOSED:
	case RDZV_ACTION_ERROR_TIMEOUT:
	case RDZV_ACTION_GRACEFUL_EXIT:
	case RDZV_ACTION_FINISH:
		return false;
	}
	return apply_quarantine(st, a, ctx) || notable;
}

/* The action joiner's own JOIN would take now, if it is one rdzv_admit takes
 * for it; else SYNC. */
static enum rdzv_action
admission(const struct rdzv_state *st, const struct rdzv_node *joiner, const struct rdzv_ctx *ctx)
{
	struct rdzv_ctx jc = *ctx;
	enum rdzv_action a;

	jc.node = joiner;
	jc.op_deadline = UINT64_MAX; /* the joiner's own deadline is its business */
	a = rdzv_decide(RDZV_OP_JOIN, st, &jc);
	return a == RDZV_ACTION_ADD_TO_PARTICIPANTS || a == RDZV_ACTION_ADD_TO_WAIT_LIST ||
			       a == RDZV_ACTION_ADD_TO_REDUNDANCY_LIST
		       ? a
		       : RDZV_ACTION_SYNC;
}

size_t
rdzv_admit(struct rdzv_state *st, const struct rdzv_node *joiners, size_t n,
	   const struct rdzv_ctx *ctx, bool *ret_notable)
{
	size_t admitted = 0;
	bool notable = false;

	for (size_t i = 0; i < n; i++) {
		enum rdzv_action a = admission(st, &joiners[i], ctx);

		if (a != RDZV_ACTION_SYNC) {
			struct rdzv_ctx jc = *ctx;

			jc.node = &joiners[i];
			jc.quarantine = NULL; /* the coordinator's own, not the joiner's */
			if (rdzv_apply(st, a, &jc)) {
				notable = true;
			}
			admitted++;
		}
	}
	if (ret_notable) {
		*ret_notable = notable;
	}
	return admitted;
}

size_t
rdzv_sanitize(struct rdzv_state *st, const struct rdzv_settings *s, int64_t now_wall,
	      bool *ret_notable)
{
	int64_t expire = now_wall - s->keep_alive_interval_usec * s->keep_alive_max_attempt;
	bool participant_removed = false, notable = false;
	size_t dropped = 0;

	for (size_t i = 0; i < st->n_heartbeats;) {
		struct rdzv_node dead;

		if (st->heartbeats[i].usec >= expire) {
			i++;
			continue;
		}
		rdzv_node_copy(&dead, &st->heartbeats[i].node);
		rdzv_state_remove_heartbeat(st, &dead);
		if (rdzv_state_remove_participant(st, &dead)) {
			participant_removed = true;
		}
		if (rdzv_state_remove_wait(st, &dead)) {
			notable = true;
		}
		rdzv_state_remove_redundant(st, &dead);
		rdzv_node_release(&dead);
		dropped++;
	}
	if (participant_removed && epilogue(st, s)) {
		notable = true;
	}
	if (ret_notable) {
		*ret_notable = notable;
	}
	return dropped;
}

int64_t
rdzv_next_wake_usec(enum rdzv_op op, const struct rdzv_state *st, const struct rdzv_ctx *ctx)
{
	const struct rdzv_settings *s = ctx->settings;
	int64_t wake = s->keep_alive_interval_usec;
	int64_t expire_span = s->keep_alive_interval_usec * s->keep_alive_max_attempt;
	long me = rdzv_state_find_heartbeat(st, ctx->node);

	if (me >= 0) {
		int64_t due = st->heartbeats[me].usec + s->keep_alive_interval_usec - ctx->now_wall;

		if (due < wake) {
			wake = due;
		}
	}
	if (op == RDZV_OP_JOIN && !st->complete && st->deadline >= 0 &&
	    rdzv_state_find_participant(st, ctx->node) >= 0) {
		/* Just past the deadline: completion requires deadline < now. */
		int64_t d = st->deadline - ctx->now_wall + 1000;

		if (d < wake) {
			wake = d;
		}
	}
	if (ctx->op_deadline > ctx->now_mono) {
		int64_t d = (int64_t)(ctx->op_deadline - ctx->now_mono) + 1000;

		if (d < wake) {
			wake = d;
		}
	}
	for (size_t i = 0; i < st->n_heartbeats; i++) {
		int64_t d = st->heartbeats[i].usec + expire_span - ctx->now_wall + 1000;

		if ((long)i != me && d < wake) {
			wake = d;
		}
	}
	return wake < 1000 ? 1000 : wake;
}

int
rdzv_join_failure(enum rdzv_action a, const char *run_id, uint64_t join_timeout_usec, size_t joined,
		  int min_nodes, int64_t round, char **ret_msg)
{
	switch (a) {
	case RDZV_ACTION_ERROR_CLOSED:
		*ret_msg = xasprintf("the rendezvous '%s' is closed", run_id);
		return -ECONNABORTED;
	case RDZV_ACTION_ERROR_TIMEOUT:
		*ret_msg = xasprintf("the rendezvous '%s' did not complete within the join timeout "
				     "of %g s: %zu of at least %d nodes joined round %" PRId64,
				     run_id, (double)join_timeout_usec / 1e6, joined, min_nodes,
				     round);
		return -ETIMEDOUT;
	case RDZV_ACTION_GRACEFUL_EXIT:
		*ret_msg = xasprintf("the rendezvous '%s' closed while this node waited as a "
				     "spare; terminating pending rendezvous",
				     run_id);
		return -ESHUTDOWN;
	case RDZV_ACTION_KEEP_ALIVE:
	case RDZV_ACTION_ADD_TO_PARTICIPANTS:
	case RDZV_ACTION_ADD_TO_WAIT_LIST:
	case RDZV_ACTION_ADD_TO_REDUNDANCY_LIST:
	case RDZV_ACTION_REMOVE_FROM_PARTICIPANTS:
	case RDZV_ACTION_REMOVE_FROM_WAIT_LIST:
	case RDZV_ACTION_REMOVE_FROM_REDUNDANCY_LIST:
	case RDZV_ACTION_MARK_RENDEZVOUS_COMPLETE:
	case RDZV_ACTION_MARK_RENDEZVOUS_CLOSED:
	case RDZV_ACTION_READMIT:
	case RDZV_ACTION_REPORT_FAILURE:
	case RDZV_ACTION_QUARANTINE:
	case RDZV_ACTION_SYNC:
	case RDZV_ACTION_FINISH:
		break;
	}
	*ret_msg = xasprintf("unexpected rendezvous action %s", rdzv_action_name(a));
	return -EPROTO;
}

int
rdzv_round_check(const struct rdzv_state *st, const struct rdzv_node *me, int64_t round, int world,
		 int rank, int *ret_waiting, char **ret_msg)
{
	struct rdzv_summary summary;

	*ret_waiting = 0;
	if (st->closed && st->closed_by) {
		_cleanup_free_ char *who = rdzv_close_record_describe(st->closed_by);

		*ret_msg = xasprintf("the rendezvous was closed by another node: its workers "
				     "failed (%s)",
				     who);
		return -ECONNABORTED;
	}
	if (st->closed) {
		*ret_msg = xstrdup("the rendezvous was closed by another node (its workers failed "
				   "or the job ended)");
		return -ECONNABORTED;
	}
	if (rdzv_state_find_participant(st, me) < 0) {
		*ret_msg = xasprintf(
			"this node is no longer in round %" PRId64 " of the rendezvous", round);
		return 1;
	}
	summary = rdzv_summary_of(st);
	return rdzv_round_check_summary(&summary, round, world, rank, ret_waiting, ret_msg);
}

int
rdzv_round_check_summary(const struct rdzv_summary *sum, int64_t round, int world, int rank,
			 int *ret_waiting, char **ret_msg)
{
	*ret_waiting = 0;
	if (sum->closed) {
		return -EAGAIN;
	}
	if (sum->round != round || !sum->complete) {
		*ret_msg = xasprintf(
			"this node is no longer in round %" PRId64 " of the rendezvous", round);
		return 1;
	}
	if (sum->n_participants < (size_t)world) {
		*ret_msg = xasprintf("%zu of the %d nodes of round %" PRId64 " left",
				     (size_t)world - sum->n_participants, world, round);
		return 1;
	}
	if (sum->n_wait_list > 0) {
		*ret_msg = xasprintf("Detected %zu new nodes from group_rank=%d", sum->n_wait_list,
				     rank);
		*ret_waiting = (int)sum->n_wait_list;
		return 1;
	}
	return 0;
}
