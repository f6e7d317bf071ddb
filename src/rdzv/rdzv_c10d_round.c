/* rdzv_c10d_round.c — the c10d backend's rounds (rdzv_c10d.c has the
 * store under the operation loop): next_rendezvous (exit, then join, as the
 * coordinator or through it; rdzv_c10d_lease.c elects one on a store nobody
 * hosts), starting the round's rank exchange and exit barrier
 * (rdzv_exchange.h, over rdzv_c10d_kv.c), keep-alive while a round runs,
 * and closing or leaving at the end. */
#include <errno.h>
#include <event2/event.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "config.h"
#include "events.h"
#include "rdzv.h"
#include "rdzv_dynamic.h"
#include "rdzv_exchange.h"
#include "rdzv_snapshot.h"
#include "rdzv_state.h"
#include "rdzv_sync.h"
#include "tcpstore_client.h"
#include "tcpstore_server.h"
#include "util.h"
#include "rdzv_c10d.h"

/* The one place this node's NodeState changes: an RdzvEvent for every step
 * (torch's construct_and_record_rdzv_event) and a log line for a transition. */
static void
c10d_set_state(struct c10d *c, enum node_state s, const char *fn, const char *msg)
{
	rdzv_set_node_state(c->r, &c->node_state, s, fn, msg);
}

/* ---- next_rendezvous ---------------------------------------------------- */

void
c10d_next_fail(struct c10d *c, int err, const char *msg)
{
	c->sync.next_active = false;
	rdzv_exchange_abandon(&c->x);
	c10d_set_state(c, NODE_STATE_FAILED, "next_rendezvous", msg);
	rdzv_tell(c->r, RDZV_TELL_DONE, err, 0, msg);
}

static void
round_ready(struct c10d *c)
{
	char *msg;

	c->sync.next_active = false;
	c->sync.running = true;
	c->sync.told = false;
	msg = xasprintf("%s has joined round %" PRId64 " of the rendezvous '%s' as rank %d in a "
			"world of size %d.",
			c->me.name, c->sync.round, c->r->cfg->rdzv_id, c->sync.rank, c->sync.world);
	c10d_set_state(c, NODE_STATE_SUCCEEDED, "next_rendezvous", msg);
	free(msg);
	c10d_keep_alive_arm(c);
	c->r->cb.done(0, &c->x.result, NULL, c->r->cb.arg);
	/* Anything that changed during the exchange is looked at now (a copy
	 * known stale after an assignment waits for the next change: reading
	 * the whole state here would cost every node O(N)). */
	rdzv_sync_observe(&c->sync);
	if (!c->sync.stale) {
		c10d_observe_read(c);
	}
	c10d_watch_update(c);
}

/* The rank exchange ended (rdzv_exchange.h): run the round, or fail the
 * next_rendezvous. */
static void
exchanged(void *arg, int err, const char *msg)
{
	struct c10d *c = arg;

	if (c->finishing) {
		return; /* left during the exchange: no round to run */
	}
	if (err == 0) {
		round_ready(c);
		return;
	}
	c10d_next_fail(c, err, c->dead ? c->dead_msg : msg);
}

/* The exit barrier ended. */
static void
passed(void *arg, int err, const char *msg)
{
	struct c10d *c = arg;

	if (!c->sync.barrier) {
		return;
	}
	c->sync.barrier = false;
	rdzv_tell(c->r, RDZV_TELL_FINISHED, err, 0,
		  err < 0 && err != -ETIMEDOUT && c->dead ? c->dead_msg : msg);
}

void
c10d_exchange_init(struct c10d *c)
{
	rdzv_exchange_init(&c->x, &c10d_kv_ops, c, exchanged, passed, c);
}

/* The round is complete: exchange roles and sizes (torch 2.x
 * _assign_worker_ranks) and learn MASTER_ADDR / MASTER_PORT. */
static void
exchange_start(struct c10d *c)
{
	long me = c->sync.assigned ? -1 : rdzv_state_find_participant(&c->sync.st, &c->me);
	char *prefix;

	c->ever_in = true;
	if (!c->sync.assigned) {
		c->sync.round = c->sync.st.round;
		c->sync.rank = c->sync.st.participants[me].rank;
		c->sync.world = (int)c->sync.st.n_participants;
	}
	prefix = xasprintf("/torch.rendezvous.%s.%" PRId64 "/", c->r->cfg->rdzv_id, c->sync.round);
	rdzv_sync_exchange_start(&c->sync, &c->x, prefix);
	free(prefix);
}

void
c10d_join_done(void *arg, int err, enum rdzv_action a)
{
	struct c10d *c = arg;
	const char *id = c->r->cfg->rdzv_id;
	char *msg = NULL;

	if (err < 0) {
		msg = c->dead ? xstrdup(c->dead_msg)
			      : xasprintf("the rendezvous state in the store is corrupt (%s)",
					  strerror(-err));
		c10d_next_fail(c, err, msg);
		free(msg);
		return;
	}
	if (a == RDZV_ACTION_FINISH) {
		exchange_start(c);
		return;
	}
	err = rdzv_join_failure(a, id, c->join_timeout, c->sync.peak_count, c->settings.min_nodes,
				c->sync.st.round, &msg);
	if (a == RDZV_ACTION_ERROR_CLOSED) {
		rdzv_join_closed(c->r, &c->sync.st, &msg);
	}
	c10d_next_fail(c, err, msg);
	free(msg);
}

void
c10d_exit_done(void *arg, int err, enum rdzv_action a)
{
	struct c10d *c = arg;

	if (err < 0 || a != RDZV_ACTION_FINISH) {
		c10d_join_done(c, err, a == RDZV_ACTION_FINISH ? RDZV_ACTION_ERROR_TIMEOUT : a);
		return;
	}
	if (c->coordinated) {
		/* Out of the last round: drop any old assignment, ask the
		 * coordinator to admit us (in this order, on one connection),
		 * and wait for our assignment instead of reading the state. */
		char *k = c10d_assign_key(c, c->me.name);

		tcpstore_client_delete(c->cl, k, NULL, NULL);
		free(k);
		c->rejoin_round = -1; /* out by our own exit op */
		c10d_ask_to_join(c);
		c->blind = true;
	}
	rdzv_sync_start(&c->sync, RDZV_OP_JOIN, c->sync.next_deadline, c10d_join_done);
}

void
c10d_coordinated_start(struct c10d *c)
{
	c->coordinated = true;
	c10d_keep_alive_arm(c); /* through our own key from now on */
	if (c->ever_in) {
		c10d_rejoin(c); /* the coordinator takes us out of the last round */
	} else {
		/* Never a participant: nothing to leave. */
		c10d_exit_done(c, 0, RDZV_ACTION_FINISH);
	}
}

/* A store nobody hosts: whoever holds the lease coordinates. */
static void
state_check_cb(int err, const struct tcpstore_reply *rep, void *arg)
{
	struct c10d *c = arg;

	if (err < 0) {
		c10d_store_gone(c, err);
		return;
	}
	if (!c->sync.next_active) {
		return; /* left (or shut down) while we asked: no round to start */
	}
	if (rep->status != TCPSTORE_READY) {
		/* Create the state key as torch's C10dRendezvousBackend does (a
		 * GET of a missing key ends the connection on torch's stores);
		 * only when missing: the answer would be the whole state. */
		tcpstore_client_compare_set(c->cl, c->key, "", 0, C10D_SENTINEL,
					    strlen(C10D_SENTINEL), NULL, NULL);
	}
	c->leased = true;
	c10d_lease_start(c);
}

static void
coordinator_check_cb(int err, const struct tcpstore_reply *rep, void *arg)
{
	struct c10d *c = arg;
	const char *keys[1];

	if (err < 0) {
		c10d_store_gone(c, err);
		return;
	}
	if (!c->sync.next_active) {
		/* Left (or shut down) while we asked: starting the join now would
		 * take over the leave's operation. */
		return;
	}
	if (rep->status == TCPSTORE_READY) {
		c10d_coordinated_start(c); /* the store host coordinates */
		return;
	}
	keys[0] = c->key;
	(void)tcpstore_client_keys(c->cl, TCPSTORE_CMD_CHECK, keys, 1, 0, state_check_cb, c);
}

void
c10d_start_next(struct c10d *c)
{
	char *k;
	const char *keys[1];

	if (c->coordinator && !c->leased) {
		rdzv_sync_start(&c->sync, RDZV_OP_EXIT, c->sync.next_deadline, c10d_exit_done);
		return;
	}
	if (c->leased) {
		c10d_lease_start(c); /* known external: ask the lease again */
		return;
	}
	k = xasprintf("%s/coordinator", c->key);
	keys[0] = k;
	(void)tcpstore_client_keys(c->cl, TCPSTORE_CMD_CHECK, keys, 1, 0, coordinator_check_cb, c);
	free(k);
}

int
c10d_next(struct rdzv *r)
{
	struct c10d *c = backend(r);
	char *msg;

	rdzv_sync_next_begin(&c->sync);
	evtimer_del(c->ka_timer);
	msg = xasprintf("%s attempts to join the next round of the rendezvous '%s'.", c->me.name,
			r->cfg->rdzv_id);
	c10d_set_state(c, NODE_STATE_RUNNING, "next_rendezvous", msg);
	free(msg);
	if (c->dead) {
		c10d_next_fail(c, -ECONNRESET, c->dead_msg);
		return 0;
	}
	if (c->sync.op_active) {
		/* A keep-alive under way: take over its loop with the exit op. */
		rdzv_sync_start(&c->sync, RDZV_OP_EXIT, c->sync.next_deadline, c10d_exit_done);
		return 0;
	}
	if (!c->up) {
		struct timeval tv = {5, 0};

		c->next_pending = true;
		evtimer_add(c->connect_log_timer, &tv);
		return 0;
	}
	c10d_start_next(c);
	return 0;
}

/* ---- keep-alive while a round runs -------------------------------------- */

static void
ka_done(void *arg, int err, enum rdzv_action a)
{
	struct c10d *c = arg;
	if (!c->dead && !c->finishing) {
		c10d_keep_alive_arm(c);
	}
	if (err < 0 || a == RDZV_ACTION_ERROR_TIMEOUT) {
		snprintf(c->ka_fail_why, sizeof(c->ka_fail_why), "store unreachable: %s",
			 err < 0 ? strerror(-err) : "the operation timed out");
		if (!c->ka_fail_since) {
			c->ka_fail_since = now_usec();
		}
		/* Torch swallows it (the timer goes on); the event says FAILED. */
		rdzv_record_step(
			c->r, NODE_STATE_FAILED, "_keep_alive",
			"The node '%s' has failed to send a keep-alive heartbeat to the rendezvous "
			"'%s' due to an error: %s",
			c->me.name, c->r->cfg->rdzv_id,
			err < 0 ? strerror(-err) : "the operation timed out");
		return;
	}
	c->ka_fail_since = 0;
	if (a == RDZV_ACTION_KEEP_ALIVE || a == RDZV_ACTION_FINISH) {
		rdzv_record_step(c->r, NODE_STATE_RUNNING, "_keep_alive",
				 "The node '%s' has sent a keep-alive heartbeat to the rendezvous "
				 "'%s'.",
				 c->me.name, c->r->cfg->rdzv_id);
	}
}

/* The local copy as it is: heartbeats folded by the store host. */
int
c10d_snapshot(struct rdzv *r, struct rdzv_snapshot *ret)
{
	struct c10d *c = r->backend;

	if (c->sync.stale) {
		/* Learnt from an assignment: refresh for the next look. */
		c10d_observe_read(c);
	}
	*ret = (struct rdzv_snapshot){
		.backend = "c10d",
		.self = xstrdup(c->me.name),
		.read_usec = c->sync.read_usec > 0 ? c->sync.read_usec : -1,
		.liveness = RDZV_LIVENESS_HEARTBEAT,
		.heartbeat_timeout_usec = (uint64_t)c->settings.keep_alive_interval_usec *
					  (uint64_t)c->settings.keep_alive_max_attempt,
	};
	rdzv_state_copy(&ret->st, &c->sync.st);
	if (c->coordinator) {
		ret->coordinator = xstrdup(c->me.name);
	} else if (c->leased && c->lease_len > 0) {
		ret->coordinator = xstrndup(c->lease, strcspn(c->lease, " "));
	}
	return 0;
}

/* rdzv_backend_ops.coordinates */
bool
c10d_coordinates(struct rdzv *r)
{
	struct c10d *c = r->backend;

	return c && c->coordinator;
}

/* rdzv_backend_ops.hosts_store */
bool
c10d_hosts_store(struct rdzv *r)
{
	struct c10d *c = r->backend;

	return c && c->server;
}

/* rdzv_backend_ops.degraded */
bool
c10d_degraded(struct rdzv *r, uint64_t *ret_since_usec, const char **ret_why)
{
	struct c10d *c = r->backend;

	if (!c || !c->ka_fail_since) {
		return false;
	}
	*ret_since_usec = c->ka_fail_since;
	*ret_why = c->ka_fail_why;
	return true;
}

void
c10d_ka_timer_cb(evutil_socket_t fd, short what, void *arg)
{
	struct c10d *c = arg;

	if (c->dead || c->finishing) {
		return;
	}
	if (c->leased && !c->coordinator) {
		c10d_lease_tick(c); /* take the lease over when it is stale */
	}
	if (c->coordinated) {
		/* Our own key, no read of the state: the coordinator folds it. */
		c10d_hb_send(c);
		rdzv_record_step(
			c->r, NODE_STATE_RUNNING, "_keep_alive",
			"The node '%s' has sent a keep-alive heartbeat to the rendezvous '%s'.",
			c->me.name, c->r->cfg->rdzv_id);
		c10d_keep_alive_arm(c);
		return;
	}
	if (!c->sync.op_active && !c->sync.io_pending) {
		rdzv_sync_start(&c->sync, RDZV_OP_KEEP_ALIVE, now_usec() + c->heartbeat_timeout,
				ka_done);
	} else {
		/* Busy: an operation writes our heartbeat when due anyway. */
		c10d_keep_alive_arm(c);
	}
}

/* Fire just after our heartbeat falls due (a timer of exactly the interval
 * would find it not quite due half the time and skip a beat). */
void
c10d_keep_alive_arm(struct c10d *c)
{
	long i = rdzv_state_find_heartbeat(&c->sync.st, &c->me);
	int64_t delay = c->settings.keep_alive_interval_usec;
	struct timeval tv;

	if (i >= 0) {
		delay = c->sync.st.heartbeats[i].usec + c->settings.keep_alive_interval_usec -
			(int64_t)wall_usec() + 2000;
	}
	if (delay < 1000) {
		delay = 1000;
	}
	if (delay > c->settings.keep_alive_interval_usec) {
		delay = c->settings.keep_alive_interval_usec;
	}
	tv.tv_sec = (time_t)(delay / 1000000);
	tv.tv_usec = (suseconds_t)(delay % 1000000);
	evtimer_del(c->ka_timer);
	evtimer_add(c->ka_timer, &tv);
}

/* ---- exit barrier and finish -------------------------------------------- */

int
c10d_exit_barrier(struct rdzv *r)
{
	struct c10d *c = backend(r);

	c->sync.running = false;
	c->sync.barrier = !c->dead;
	if (c->dead || rdzv_exchange_barrier(&c->x, c->barrier_timeout) < 0) {
		/* The store is gone, or this node never ran a round. */
		c->sync.barrier = false;
		rdzv_tell(c->r, RDZV_TELL_FINISHED, c->dead ? -ECONNRESET : 0, 0,
			  c->dead ? c->dead_msg : NULL);
	}
	return 0;
}

static void
linger_end(struct c10d *c)
{
	evtimer_del(c->linger_timer);
	if (c->server) {
		tcpstore_server_set_idle_cb(c->server, NULL, NULL);
	}
	rdzv_tell(c->r, RDZV_TELL_FINISHED, 0, 0, NULL);
}

/* The last client left our store, or the linger deadline passed. */
static void
linger_idle_cb(void *arg)
{
	linger_end(arg);
}

void
c10d_linger_cb(evutil_socket_t fd, short what, void *arg)
{
	linger_end(arg);
}

/* Let the other nodes finish with our store before we go. */
static void
linger_start(struct c10d *c)
{
	tcpstore_client_free(c->cl);
	c->cl = NULL;
	c->up = false;
	c->dead = true;
	if (!c->dead_msg) {
		c->dead_msg = xstrdup("the rendezvous was left");
	}
	if (!c->server || tcpstore_server_connections(c->server) == 0) {
		linger_end(c);
		return;
	}
	/* Wait (no polling) for the last connection to go, at most LINGER_USEC. */
	{
		struct timeval tv = {(time_t)(LINGER_USEC / USEC_PER_SEC),
				     (suseconds_t)(LINGER_USEC % USEC_PER_SEC)};

		tcpstore_server_set_idle_cb(c->server, linger_idle_cb, c);
		evtimer_add(c->linger_timer, &tv);
	}
}

static void
fence_cb(int err, const struct tcpstore_reply *rep, void *arg)
{
	linger_start(arg);
}

/* Leave once what we queued on the client (the closed state's gen key, which wakes
 * the nodes that wait on it) has reached the store: a request with a reply
 * comes back only after the ones before it were served. */
static void
fence_then_linger(struct c10d *c)
{
	char *k = gen_key(c, c->sync.st.gen);
	const char *keys[1] = {k};
	int r = c->cl && !c->dead && c->up
			? tcpstore_client_keys(c->cl, TCPSTORE_CMD_CHECK, keys, 1, 0, fence_cb, c)
			: -ENOTCONN;

	free(k);
	if (r < 0) {
		linger_start(c);
	}
}

static void
close_done(void *arg, int err, enum rdzv_action a)
{
	struct c10d *c = arg;
	char *msg;

	if (err == 0 && a == RDZV_ACTION_FINISH) {
		msg = xasprintf("The node '%s' has closed the rendezvous '%s'.", c->me.name,
				c->r->cfg->rdzv_id);
		c10d_set_state(c, NODE_STATE_SUCCEEDED, "_close", msg);
	} else {
		msg = xasprintf("The node '%s' has failed to shutdown the rendezvous '%s' due to "
				"an error of "
				"type %s.",
				c->me.name, c->r->cfg->rdzv_id,
				err < 0 ? "RendezvousConnectionError" : "RendezvousTimeoutError");
		c10d_set_state(c, NODE_STATE_FAILED, "shutdown", msg);
	}
	free(msg);
	fence_then_linger(c);
}

/* Out of every list of the state (rdzv_leave), or could not be: go. */
static void
leave_done(void *arg, int err, enum rdzv_action a)
{
	struct c10d *c = arg;
	if (err == 0 && a == RDZV_ACTION_FINISH) {
		rdzv_progress(c->r, "left the rendezvous '%s' (it stays open for the others)",
			      c->r->cfg->rdzv_id);
	} else {
		rdzv_progress(c->r, "could not leave the rendezvous '%s': %s", c->r->cfg->rdzv_id,
			      err < 0 ? strerror(-err) : rdzv_action_name(a));
	}
	fence_then_linger(c);
}

int
c10d_finish(struct rdzv *r, bool close)
{
	struct c10d *c = backend(r);
	enum rdzv_op op = close ? RDZV_OP_CLOSE : RDZV_OP_LEAVE;
	op_done_fn done = close ? close_done : leave_done;

	c->sync.running = false;
	c->sync.barrier = false;
	c->sync.next_active = false;
	c->finishing = true;
	rdzv_exchange_abandon(&c->x);
	evtimer_del(c->ka_timer);
	c10d_lease_release(c);
	if (c->cl && c->watching) {
		(void)tcpstore_client_cancel_background(c->cl);
		c->watching = false;
	}
	if (c->dead || !c->up) {
		linger_start(c);
		return 0;
	}
	if (!close) {
		c10d_withdraw(c); /* before the leave op reads the state */
	}
	/* Takes over the operation under way (a keep-alive, a join). */
	rdzv_sync_start(&c->sync, op, now_usec() + c->close_timeout, done);
	return 0;
}

static void
run_op_done(void *arg, int err, enum rdzv_action a)
{
	rdzv_op_done(((struct c10d *)arg)->r, err, a);
}

int
c10d_run_op(struct rdzv *r, enum rdzv_op op)
{
	struct c10d *c = backend(r);
	if (c->dead || !c->up || c->finishing || c->sync.op_active || c->sync.io_pending) {
		return c->dead || !c->up || c->finishing ? -ENOTCONN : -EBUSY;
	}
	rdzv_sync_start(&c->sync, op, now_usec() + c->close_timeout, run_op_done);
	return 0;
}

void
c10d_shutdown(struct rdzv *r)
{
	struct c10d *c = backend(r);

	if (!c->finishing) {
		(void)c10d_finish(r, true);
	}
}

int
c10d_num_nodes_waiting(struct rdzv *r)
{
	return (int)backend(r)->sync.st.n_wait_list;
}
