/* rdzv_c10d_assign.c — how a node of a coordinated c10d store learns its
 * round without reading the state: the coordinator (the store host) SETs
 * "<key>/a/<node>" = "<round> <rank> <world> <gen>" for every participant
 * once a round completes, in one MULTI_SET (one SET each on a store it does
 * not host); a joiner that asked to join
 * WAITs on its own key (a background WAIT) and ends its join from those
 * few bytes (rdzv_sync_assigned). The state, whose size grows with the
 * number of nodes, is read by the coordinator alone; a joiner reads it only
 * when something else happens (the rendezvous closed: "closed" in its key or
 * "<key>/closed"; no word for a keep-alive window; its join deadline). Once
 * in a round, a node that hears of a change (the gen watch) reads the
 * summary of the state that its gen key holds, not the state. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <event2/event.h>

#include "rdzv_assign.h"
#include "rdzv_c10d.h"
#include "tcpstore_client.h"

char *
c10d_assign_key(const struct c10d *c, const char *node)
{
	return xasprintf("%s/a/%s", c->key, node);
}

/* One MULTI_SET of keys[i] = vals[i], i < n (both freed); one SET each on a
 * store we do not host (torch < 2.4 has no MULTI_SET). */
static void
multi_set(struct c10d *c, char **keys, char **vals, size_t n)
{
	struct tcpstore_req req = {.cmd = TCPSTORE_CMD_MULTI_SET, .n = n};

	if (!c->server) {
		for (size_t i = 0; i < n; i++) {
			tcpstore_client_set(c->cl, keys[i], vals[i], strlen(vals[i]), NULL, NULL);
		}
	} else if (n > 0) {
		req.keys = xcalloc(n, sizeof(*req.keys));
		req.values = xcalloc(n, sizeof(*req.values));
		for (size_t i = 0; i < n; i++) {
			req.keys[i] =
				(struct tcpstore_bytes){(const uint8_t *)keys[i], strlen(keys[i])};
			req.values[i] =
				(struct tcpstore_bytes){(const uint8_t *)vals[i], strlen(vals[i])};
		}
		(void)tcpstore_client_request(c->cl, &req, 0, NULL, NULL);
		free(req.keys);
		free(req.values);
	}
	strv_free(keys);
	strv_free(vals);
}

void
c10d_assign_publish(struct c10d *c)
{
	char **keys = NULL, **vals = NULL;

	if (!c->coordinator || c->dead || !c->up || c->sync.notable) {
		return; /* not ours, or the copy differs from the store's */
	}
	rdzv_assign_plan(&c->told, &c->sync.st, c->joiners, c->n_joiners, c->me.name, "", &keys,
			 &vals);
	for (size_t i = 0; keys && keys[i]; i++) {
		char *k = c10d_assign_key(c, keys[i]);

		free(keys[i]);
		keys[i] = k;
	}
	multi_set(c, keys, vals, keys ? strv_length(keys) : 0);
}

void
c10d_assign_mark_closed(struct c10d *c)
{
	char *k;

	if (!c->sync.st.closed || c->closed_marked) {
		return;
	}
	c->closed_marked = true;
	k = xasprintf("%s/closed", c->key);
	tcpstore_client_set(c->cl, k, "", 0, NULL, NULL);
	free(k);
}

static void
blind_check_cb(int err, const struct tcpstore_reply *rep, void *arg)
{
	struct c10d *c = arg;
	uint64_t now = now_usec(), wait, window;

	c->sync.io_pending = false;
	if (err < 0) {
		c10d_store_gone(c, err);
		return;
	}
	if (!c->sync.op_active) {
		return;
	}
	if (rep->status == TCPSTORE_READY || c->sync.op != RDZV_OP_JOIN) {
		/* Closed already (or taken over): the state tells. */
		c->assign_off = true;
		c->sync.ops->read(c);
		return;
	}
	window = (uint64_t)(c->settings.keep_alive_interval_usec *
			    c->settings.keep_alive_max_attempt);
	if (now - c->asked >= window) {
		c10d_ask_to_join(c); /* no word for a window: the request again */
	}
	wait = c->sync.op_deadline > now ? c->sync.op_deadline - now + 1000 : 1000;
	rdzv_sync_sleep(&c->sync, wait < window ? wait : window);
	c10d_watch_update(c);
}

void
c10d_assign_blind_read(struct c10d *c)
{
	char *k = xasprintf("%s/closed", c->key);
	const char *keys[1] = {k};

	c->blind = false;
	c->assign_off = false;
	c->sync.io_pending = true;
	if (tcpstore_client_keys(c->cl, TCPSTORE_CMD_CHECK, keys, 1, 0, blind_check_cb, c) < 0) {
		c->sync.io_pending = false;
		c10d_store_gone(c, -ECONNRESET);
	}
	free(k);
}

bool
c10d_assign_watching(const struct c10d *c)
{
	return c->coordinated && !c->assign_off && c->sync.op_active && c->sync.op == RDZV_OP_JOIN;
}

static void
assign_got_cb(int err, const struct tcpstore_reply *rep, void *arg)
{
	struct c10d *c = arg;
	char buf[128];
	long long round, gen;
	int rank, world, end = 0;

	if (err < 0) {
		c10d_store_gone(c, err);
		return;
	}
	snprintf(buf, sizeof(buf), "%.*s", (int)rep->value.len, (const char *)rep->value.data);
	if (c->sync.op_active && c->sync.op == RDZV_OP_JOIN &&
	    sscanf(buf, "%lld %d %d %lld%n", &round, &rank, &world, &gen, &end) == 4 &&
	    (size_t)end == strlen(buf) && round > c->rejoin_round && world > 0 && rank >= 0 &&
	    rank < world && gen >= 0) {
		if (c->rejoin_round >= 0) {
			/* The coordinator ran our exit op: its event is ours. */
			rdzv_record_action(c->r, c->me.name, c->rejoin_round,
					   RDZV_ACTION_REMOVE_FROM_PARTICIPANTS, false);
			c->rejoin_round = -1;
		}
		rdzv_sync_assigned(&c->sync, round, rank, world, (uint64_t)gen);
	} else {
		/* "closed", or not for this join: the state tells, and the
		 * gen watch takes over for the rest of this join. */
		c->assign_off = true;
		rdzv_sync_wake(&c->sync);
	}
	c10d_watch_update(c);
}

void
c10d_assign_fetch(struct c10d *c)
{
	char *k;

	if (!c10d_assign_watching(c)) {
		c10d_watch_update(c);
		return;
	}
	/* Its WAIT ended without error: the key exists (a GET of a missing
	 * key would end the connection), and only we delete it. */
	k = c10d_assign_key(c, c->me.name);
	if (tcpstore_client_get(c->cl, k, assign_got_cb, c) < 0) {
		c10d_store_gone(c, -ECONNRESET);
	}
	free(k);
}

/* ---- a running node hears of a change ------------------------------------- */

static void
summary_cb(int err, const struct tcpstore_reply *rep, void *arg)
{
	struct c10d *c = arg;
	struct rdzv_summary sum;

	c->observe_pending = false;
	if (err < 0) {
		c10d_store_gone(c, err);
		return;
	}
	if (c->sync.op_active) {
		return; /* an operation started meanwhile: it reads for itself */
	}
	if (rdzv_summary_decode((const char *)rep->value.data, rep->value.len, &sum) < 0 ||
	    !rdzv_sync_observe_summary(&c->sync, c->observe_gen, &sum)) {
		/* Gone (GEN_KEEP), set by an older elasticd, or closed: the
		 * state itself. */
		c10d_observe_read(c);
		return;
	}
	c10d_watch_update(c);
}

/* A COMPARE_SET that expects a value no gen key holds answers the key's
 * value and changes nothing, or answers that value when the key is gone
 * (deleted GEN_KEEP writes later), where a GET would end the connection on
 * torch's stores (reference tcpstore-protocol.md §1.6). */
void
c10d_observe_summary(struct c10d *c, uint64_t gen)
{
	char *k;

	if (c->sync.op_active || c->observe_pending || c->dead || !c->up) {
		return;
	}
	k = gen_key(c, gen);
	c->observe_pending = true;
	c->observe_gen = gen;
	if (tcpstore_client_compare_set(c->cl, k, "-", 1, "-", 1, summary_cb, c) < 0) {
		c->observe_pending = false;
	}
	free(k);
}

/* ---- asking to join, delegated exits -------------------------------------- */

/* Microseconds a coordinator lets requests gather per participant of the
 * state, and at most: one admission (a read and a compare-and-set of the
 * whole state) costs O(N), so a crowd of N joiners arriving over a while
 * must not cost one admission each (at 5000 nodes the store host then had
 * no time left to accept their connections). */
#define ADMIT_GATHER_PER_NODE_USEC 10
#define ADMIT_GATHER_MAX_USEC (50 * 1000)

void
c10d_admit_later(struct c10d *c)
{
	uint64_t usec = (uint64_t)c->sync.st.n_participants * ADMIT_GATHER_PER_NODE_USEC;
	struct timeval tv;

	if (usec < 1000) {
		event_active(c->admit_ev, EV_TIMEOUT, 0); /* small: at once */
		return;
	}
	if (usec > ADMIT_GATHER_MAX_USEC) {
		usec = ADMIT_GATHER_MAX_USEC;
	}
	if (!evtimer_pending(c->admit_ev, NULL)) {
		tv.tv_sec = 0;
		tv.tv_usec = (suseconds_t)usec;
		evtimer_add(c->admit_ev, &tv);
	}
}

void
c10d_ask_to_join(struct c10d *c)
{
	char *k = xasprintf("%s/j/%s", c->key, c->me.name), v[32] = "";

	if (c->rejoin_round >= 0) {
		rdzv_exits_request(c->rejoin_round, v, sizeof(v));
	}
	if (c->leased) {
		c10d_lease_ask(c); /* the coordinator reads the queue, not "j/" */
	} else {
		tcpstore_client_set(c->cl, k, v, strlen(v), NULL, NULL);
	}
	free(k);
	c->asked = now_usec();
}

void
c10d_withdraw(struct c10d *c)
{
	char *k;

	if (!c->coordinated || c->coordinator || c->asked == 0 || c->dead || !c->up) {
		return; /* nobody holds a request of ours */
	}
	c->withdrawn = true;
	if (c->leased) {
		c10d_lease_ask(c);
		return;
	}
	k = xasprintf("%s/j/%s", c->key, c->me.name);
	tcpstore_client_set(c->cl, k, RDZV_EXITS_WITHDRAW, strlen(RDZV_EXITS_WITHDRAW), NULL, NULL);
	free(k);
}

void
c10d_exits_note(struct c10d *c, const struct rdzv_node *n, const uint8_t *value, size_t len)
{
	(void)rdzv_exits_note(&c->exits, n, (const char *)value, len);
}

size_t
c10d_exits_apply(struct c10d *c, struct rdzv_state *st, const struct rdzv_ctx *ctx, bool *notable)
{
	return rdzv_exits_apply(&c->exits, st, ctx, notable);
}

void
c10d_exits_prune(struct c10d *c)
{
	struct rdzv_ctx ctx = rdzv_sync_ctx(&c->sync);

	rdzv_exits_prune(&c->exits, &c->sync.st, &ctx);
}

void
c10d_rejoin(struct c10d *c)
{
	char *k = c10d_assign_key(c, c->me.name);

	/* Drop the old assignment before the request (one connection: in
	 * this order), then wait for the new one. */
	tcpstore_client_delete(c->cl, k, NULL, NULL);
	free(k);
	c->rejoin_round = c->sync.round;
	c10d_ask_to_join(c);
	c->blind = true;
	rdzv_sync_start(&c->sync, RDZV_OP_JOIN, c->sync.next_deadline, c10d_join_done);
}

bool
c10d_rejoin_check(struct c10d *c)
{
	const struct rdzv_state *st = &c->sync.st;

	if (!c->sync.op_active || c->sync.op != RDZV_OP_JOIN ||
	    !rdzv_exits_still_in(st, &c->me, c->rejoin_round)) {
		return false;
	}
	/* The coordinator has not taken us out (yet): as torch, ourselves. */
	c->rejoin_round = -1;
	rdzv_sync_start(&c->sync, RDZV_OP_EXIT, c->sync.next_deadline, c10d_exit_done);
	return true;
}
