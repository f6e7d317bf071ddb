/* rdzv_c10d.c — torch's dynamic rendezvous on the c10d backend: the state
 * lives in one key of a TCPStore ("/torch.rendezvous.<run_id>") hosted by the
 * agent whose endpoint matches --rdzv-endpoint (or is_host=true); every node
 * runs the exit / join / close / keep-alive operations of rdzv_dynamic.h as an
 * asynchronous read / decide / compare-and-set loop that re-derives its action
 * from the state the store returns after every lost race (torch 2.x
 * _DistributedRendezvousOpExecutor).
 *
 * The store host coordinates (it puts "<key>/coordinator" into its server
 * before anybody connects; it lives exactly as long as the store): a joiner
 * that sees that key SETs "<key>/j/<node>" and waits; the host hears the SET
 * from its own server (tcpstore_server_on_set, no round trip) and admits every
 * requester, and the wait list of a round that opens, in one compare-and-set
 * (rdzv_admit), then tells each participant its round, rank and world in
 * "<key>/a/<node>" (rdzv_c10d_assign.c): only the host reads the state,
 * whose size grows with the job. A node of the last round asks with "x" and
 * the host runs its exit op for it. Liveness stays torch's heartbeats, but nodes
 * keep alive through their own key "<key>/hb/<node>" (a SET, no race for the
 * state) and the host folds those into the state once per keep-alive
 * interval (c10d_hb_fold): one write per interval instead of one per node. On
 * a store nobody hosts (tcpstore_tool serve, torch's store, an agent on
 * another host) the participant holding the lease "<key>/lease" coordinates
 * the same way through its client (rdzv_c10d_lease.c), and another takes
 * over when it stops renewing it.
 *
 * Waiting never polls: a write that waiting nodes must hear about bumps the
 * state's gen and its writer sets "<key>/gen/<gen>"; every node keeps one WAIT
 * on "<key>/gen/<gen+1>" (its background WAIT), plus a timer for the next
 * moment its own decision can change (heartbeat due, last-call deadline, join
 * deadline, another node's heartbeat expiring).
 *
 * After a round completes, the nodes exchange role and local world size as
 * torch 2.x's agent does (round store keys torchelastic/role_info/<rank>;
 * group rank 0 publishes torchelastic/assigned_ranks/<rank>, MASTER_ADDR,
 * MASTER_PORT, and elasticd/round with the nodes as runs), and group
 * rank 0 exposes a TCPStore server of its own as MASTER_ADDR:MASTER_PORT for
 * the workers (TORCHELASTIC_USE_AGENT_STORE=True) unless
 * TORCH_DISABLE_SHARE_RDZV_TCP_STORE=1.
 *
 * One connection per node, multiplexed (tcpstore_client_set_mux), so that
 * the store host holds one socket per node (10 000 nodes fit its fd limit):
 * short requests, the gen WAIT (in the background) and the long WAITs (rank
 * exchange, exit barrier) share c->cl; a WAIT steps aside for every other
 * request, so heartbeats never queue behind a wait. */
#include <arpa/inet.h>
#include <errno.h>
#include <event2/event.h>
#include <ifaddrs.h>
#include <inttypes.h>
#include <jansson.h>
#include <netdb.h>
#include <netinet/in.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <unistd.h>

#include "config.h"
#include "events.h"
#include "rdzv.h"
#include "rdzv_dynamic.h"
#include "rdzv_snapshot.h"
#include "rdzv_state.h"
#include "rdzv_sync.h"
#include "tcpstore_client.h"
#include "tcpstore_server.h"
#include "endpoint.h"
#include "util.h"
#include "rdzv_c10d.h"

/* ---- small helpers ------------------------------------------------------ */

/* ---- the operation loop ------------------------------------------------- */

static void admit_soon(struct c10d *c);
static void joiners_clear(struct c10d *c);
static void joiners_drop(struct c10d *c, size_t n);

enum adopt_how {
	ADOPT_READ, /* a read */
	ADOPT_WON,  /* our compare-and-set: the store holds what we wrote */
	ADOPT_LOST, /* a compare-and-set that lost to value */
};

/* Take the value the store returned as the new local copy. */
static void
adopt(struct c10d *c, const uint8_t *value, size_t len, enum adopt_how how)
{
	struct rdzv_state st;

	if (how == ADOPT_WON) {
		free(c->token);
		c->token = c->pending;
		c->token_len = c->pending_len;
		c->pending = NULL;
		rdzv_sync_written(&c->sync);
		c10d_assign_mark_closed(c);
		c10d_assign_publish(c);
		c10d_watch_update(c);
		return;
	}
	if (len == 0 || (len == strlen(C10D_SENTINEL) && memcmp(value, C10D_SENTINEL, len) == 0)) {
		rdzv_state_init(&st);
	} else if (rdzv_state_decode((const char *)value, len, &st) < 0) {
		rdzv_sync_fail(&c->sync, -EBADMSG);
		return;
	}
	if (c->coordinator && c10d_hb_fold(c, &st) > 0) {
		c->fold_dirty = true; /* written with our next compare-and-set */
	}
	free(c->token);
	c->token = xmalloc(len + 1);
	memcpy(c->token, value, len);
	c->token_len = len;
	if (how == ADOPT_LOST) {
		rdzv_sync_lost(&c->sync, &st);
	} else {
		rdzv_sync_adopt(&c->sync, &st);
	}
	c10d_assign_publish(c);
	c10d_watch_update(c);
}

static void
got_state_cb(int err, const struct tcpstore_reply *rep, void *arg)
{
	struct c10d *c = arg;

	c->sync.io_pending = false;
	if (err < 0) {
		c10d_store_gone(c, err);
		return;
	}
	adopt(c, rep->value.data, rep->value.len, ADOPT_READ);
	if (c10d_rejoin_check(c)) {
		return; /* the exit op's own read decides: one store call at a time */
	}
	rdzv_sync_step(&c->sync);
	admit_soon(c);
}

static void
set_done_cb(int err, const struct tcpstore_reply *rep, void *arg)
{
}

static void
cas_cb(int err, const struct tcpstore_reply *rep, void *arg)
{
	struct c10d *c = arg;
	bool has_set, admitting = c->admitting;
	uint64_t gen = c->pending_gen;

	c->sync.io_pending = false;
	c->admitting = false;
	if (err < 0) {
		c10d_store_gone(c, err);
		return;
	}
	/* compare_set answers with what the key holds now: ours if we won. */
	has_set = c->pending && rep->value.len == c->pending_len &&
		  memcmp(rep->value.data, c->pending, c->pending_len) == 0;
	if (has_set && gen > 0) {
		char *k = gen_key(c, gen);

		/* Wake the nodes waiting for this change, and tell the
		 * running ones what it was (c10d_observe_summary). */
		tcpstore_client_set(c->cl, k, c->pending_sum, strlen(c->pending_sum), set_done_cb,
				    c);
		free(k);
		if (gen > GEN_KEEP) {
			k = gen_key(c, gen - GEN_KEEP);
			tcpstore_client_delete(c->cl, k, set_done_cb, c);
			free(k);
		}
	}
	rdzv_record_sync(c->r, c->me.name, has_set);
	if (admitting && has_set) {
		joiners_drop(c, c->admitted_upto); /* those are in the state written */
		c10d_exits_prune(c);
	}
	if (has_set) {
		c->fold_dirty = false;
	}
	adopt(c, rep->value.data, rep->value.len, has_set ? ADOPT_WON : ADOPT_LOST);
	if (has_set) {
		rdzv_sync_step(&c->sync);
	}
	admit_soon(c);
}

/* rdzv_store_ops.read: GET the state key. */
static void
store_read(void *arg)
{
	struct c10d *c = arg;

	if (c->sync.io_pending) {
		return; /* its answer steps the operation */
	}
	if (c->dead) {
		rdzv_sync_fail(&c->sync, -ECONNRESET);
		return;
	}
	if (c->coordinated && c->sync.op == RDZV_OP_JOIN &&
	    (c->blind || (c10d_assign_watching(c) && now_usec() < c->sync.op_deadline))) {
		/* Until the join deadline, the coordinator's word (our key)
		 * stands for the state. */
		c10d_assign_blind_read(c);
		return;
	}
	c->blind = false;
	c->sync.io_pending = true;
	if (tcpstore_client_get(c->cl, c->key, got_state_cb, c) < 0) {
		c->sync.io_pending = false;
		c10d_store_gone(c, -ECONNRESET);
	}
}

/* rdzv_store_ops.cas: compare_set against the value last read; a notable
 * change then sets "<key>/gen/<gen>" to the summary of what it wrote
 * (cas_cb). */
static void
store_cas(void *arg, enum rdzv_action a)
{
	struct c10d *c = arg;
	struct rdzv_summary sum = rdzv_summary_of(&c->sync.st);

	c->pending_gen = c->sync.notable ? c->sync.st.gen : 0;
	(void)rdzv_summary_encode(&sum, c->pending_sum);
	free(c->pending);
	c->pending = rdzv_state_encode(&c->sync.st, &c->pending_len);
	c->sync.io_pending = true;
	if (tcpstore_client_compare_set(c->cl, c->key, c->token, c->token_len, c->pending,
					c->pending_len, cas_cb, c) < 0) {
		c->sync.io_pending = false;
		c10d_store_gone(c, -ECONNRESET);
		return;
	}
	if (a == RDZV_ACTION_REMOVE_FROM_REDUNDANCY_LIST && c->coordinated && !c->finishing) {
		/* Ask again: the coordinator admits spares that may join. */
		c10d_ask_to_join(c);
	}
}

/* ---- admission by the store host ------------------------------------------ */

/* Forget the first n requests (requests keep arriving while a write that
 * admits the earlier ones is in flight). */
static void
joiners_drop(struct c10d *c, size_t n)
{
	if (n > c->n_joiners) {
		n = c->n_joiners;
	}
	if (n == 0) {
		return; /* joiners may still be NULL */
	}
	for (size_t i = 0; i < n; i++) {
		rdzv_node_release(&c->joiners[i]);
	}
	memmove(c->joiners, c->joiners + n, (c->n_joiners - n) * sizeof(*c->joiners));
	c->n_joiners -= n;
}

static void
joiners_clear(struct c10d *c)
{
	joiners_drop(c, c->n_joiners);
}

/* Forget every request of n (it withdrew them), keeping the counts of those
 * an admission in flight covers in step. */
static void
joiners_forget(struct c10d *c, const struct rdzv_node *n)
{
	size_t k = 0;

	for (size_t i = 0; i < c->n_joiners; i++) {
		if (rdzv_node_cmp(&c->joiners[i], n) != 0) {
			c->joiners[k++] = c->joiners[i];
			continue;
		}
		rdzv_node_release(&c->joiners[i]);
		c->admitted_upto -= i < c->admitted_upto;
		c->admit_read_upto -= i < c->admit_read_upto;
	}
	c->n_joiners = k;
}

void
c10d_join_request(struct c10d *c, const struct rdzv_node *n, const uint8_t *value, size_t len)
{
	if (len == strlen(RDZV_EXITS_WITHDRAW) && memcmp(value, RDZV_EXITS_WITHDRAW, len) == 0) {
		/* It left (or leaves): admit it no more; take it out if an
		 * admission got it in meanwhile (c10d_exits_apply). */
		joiners_forget(c, n);
		c10d_exits_note(c, n, value, len);
		c10d_admit_later(c);
		return;
	}
	if (len > 1 && value[0] == 'x') {
		c10d_exits_note(c, n, value, len); /* leave its last round for it first */
	} else if (c->exits.n_leaves > 0) {
		(void)rdzv_exits_forget(&c->exits, n); /* it asks again after a withdrawal */
	}
	/* No search for an earlier request of the same node (O(N) each, O(N^2)
	 * for a crowd): a node asks again only after a keep-alive window without
	 * word, and admission is idempotent (a node in already takes no action). */
	c->joiners = xrealloc(c->joiners, (c->n_joiners + 1) * sizeof(*c->joiners));
	rdzv_node_copy(&c->joiners[c->n_joiners++], n);
	c10d_admit_later(c);
}

/* Our server stored "<key>/j/<node>": a node asks to join. */
static void
join_request_cb(const uint8_t *key, size_t klen, const uint8_t *value, size_t vlen, void *arg)
{
	struct c10d *c = arg;
	size_t plen = strlen(c->key) + 3; /* "<key>/j/" */
	struct rdzv_node n;

	if (klen <= plen || rdzv_node_parse(&n, (const char *)key + plen, klen - plen) < 0) {
		return;
	}
	c10d_join_request(c, &n, value, vlen);
	rdzv_node_release(&n);
}

/* Apply the admissions of the joiners we hold and of the wait list (a round
 * that opens takes them) to the local copy. Returns how many. */
static size_t
admit_apply(struct c10d *c, const struct rdzv_ctx *ctx)
{
	size_t exits = c10d_exits_apply(c, &c->sync.st, ctx, &c->sync.notable);

	return exits + rdzv_admit_requests(c->r, &c->sync.st, true, c->joiners, c->n_joiners, ctx,
					   &c->sync.notable);
}

static void
admit_read_cb(int err, const struct tcpstore_reply *rep, void *arg)
{
	struct c10d *c = arg;

	got_state_cb(err, rep, arg); /* a read as any other, first */
	if (err < 0) {
		return;
	}
	if (!c->sync.io_pending) {
		struct rdzv_ctx ctx = rdzv_sync_ctx(&c->sync);

		c->admitted_upto = c->n_joiners;
		c->admitting = admit_apply(c, &ctx) > 0;
		if (!c->admitting) {
			/* Nothing to do for those asked before the read: in
			 * already, or closed. Later ones wait for the next. */
			joiners_drop(c, c->admit_read_upto);
			c10d_exits_prune(c); /* withdrawn nodes on no list */
		}
		if (c->admitting || c->fold_dirty) {
			rdzv_sync_write(&c->sync, RDZV_ACTION_SYNC);
		} else if (c->n_joiners > 0) {
			admit_soon(c); /* asked while we read */
		}
	}
}

/* The coordinator admits what it holds and folds the heartbeats: a fresh
 * read, then one compare-and-set for all (again after a lost race, from its
 * answer). */
void
c10d_admit_now(struct c10d *c)
{
	if (!c->coordinator || c->sync.io_pending || c->dead || !c->up || c->finishing ||
	    (c->n_joiners == 0 && c->exits.n_leaves == 0 && !c->fold_due &&
	     (c->sync.st.complete || c->sync.st.closed || c->sync.st.n_wait_list == 0))) {
		return;
	}
	c->fold_due = false;
	c->admit_read_upto = c->n_joiners;
	c->sync.io_pending = true;
	if (tcpstore_client_get(c->cl, c->key, admit_read_cb, c) < 0) {
		c->sync.io_pending = false;
		c10d_store_gone(c, -ECONNRESET);
	}
}

static void
admit_cb(evutil_socket_t fd, short what, void *arg)
{
	c10d_admit_now(arg);
}

void
c10d_fold_timer_cb(evutil_socket_t fd, short what, void *arg)
{
	struct c10d *c = arg;
	int64_t iv = c->settings.keep_alive_interval_usec;
	struct timeval tv = {(time_t)(iv / 1000000), (suseconds_t)(iv % 1000000)};

	if (c->dead || c->finishing || !c->coordinator) {
		return;
	}
	evtimer_add(c->fold_timer, &tv);
	if (c->leased) {
		c10d_lease_tick(c); /* renew the lease (or hear we lost it) */
	}
	if (!c10d_lease_fold_read(c)) {
		c->fold_due = true;
		c10d_admit_now(c);
	}
}

/* After any read: the coordinator looks at what it holds, at a round that
 * opened with nodes in the wait list, and at a fold that found the store
 * busy. */
static void
admit_soon(struct c10d *c)
{
	if (c->coordinator &&
	    (c->n_joiners > 0 || c->exits.n_leaves > 0 || c->fold_due ||
	     (!c->sync.st.complete && !c->sync.st.closed && c->sync.st.n_wait_list > 0))) {
		c10d_admit_later(c);
	}
}

/* rdzv_store_ops.await_admission: a joiner of a coordinated store waits to
 * be admitted, at most a keep-alive window before it asks again. */
static bool
store_await_admission(void *arg, const struct rdzv_ctx *ctx)
{
	struct c10d *c = arg;
	uint64_t now = now_usec(),
		 wait = c->sync.op_deadline > now ? c->sync.op_deadline - now + 1000 : 1000;
	uint64_t window = (uint64_t)(c->settings.keep_alive_interval_usec *
				     c->settings.keep_alive_max_attempt);

	if (!c->coordinated) {
		return false;
	}
	/* Still out after a whole keep-alive window: the request may have met
	 * a round that dropped us again. Ask anew, and
	 * look again a window later. */
	if (now - c->asked >= window) {
		c10d_ask_to_join(c);
	}
	if (wait > window) {
		wait = window;
	}
	rdzv_sync_sleep(&c->sync, wait);
	c10d_watch_update(c);
	return true;
}

/* rdzv_store_ops.keep_alive: a node of a coordinated store keeps alive
 * through its own key, not the state. */
static bool
store_keep_alive(void *arg)
{
	struct c10d *c = arg;

	if (c->coordinated) {
		c10d_hb_send(c);
	}
	return c->coordinated;
}

static bool
store_coordinated(void *arg)
{
	return ((struct c10d *)arg)->coordinated;
}

/* rdzv_store_ops.admit: the coordinator admits whoever asked, on the way. */
static void
store_admit(void *arg, struct rdzv_state *st, const struct rdzv_ctx *ctx, bool *notable)
{
	struct c10d *c = arg;

	size_t n;

	c->admitted_upto = c->n_joiners;
	c->admitting = false;
	if (!c->coordinator || (c->n_joiners == 0 && c->exits.n_leaves == 0)) {
		return;
	}
	n = c10d_exits_apply(c, st, ctx, notable); /* out of the last round first */
	n += rdzv_admit_requests(c->r, st, true, c->joiners, c->n_joiners, ctx, notable);
	c->admitting = n > 0;
}

/* rdzv_store_ops.synced: our join is written, the next node may go. */
static bool
store_synced(void *arg)
{
	struct c10d *c = arg;

	if (c10d_assign_watching(c)) {
		/* In, waiting for the round to complete: the coordinator says
		 * when (our assignment key); the timer only guards. Our own key
		 * keeps us alive meanwhile (ka_timer). */
		uint64_t now = now_usec(),
			 window = (uint64_t)(c->settings.keep_alive_interval_usec *
					     c->settings.keep_alive_max_attempt);
		uint64_t wait = c->sync.op_deadline > now ? c->sync.op_deadline - now + 1000 : 1000;

		rdzv_sync_sleep(&c->sync, wait < window ? wait : window);
		c10d_watch_update(c);
		return false;
	}
	return true;
}

static const struct rdzv_store_ops c10d_store_ops = {
	.read = store_read,
	.cas = store_cas,
	.keep_alive = store_keep_alive,
	.coordinated = store_coordinated,
	.await_admission = store_await_admission,
	.admit = store_admit,
	.synced = store_synced,
	.timer_reads = true,
	.dead_why = "since they had no heartbeat",
};

/* ---- the gen watch ------------------------------------------------------ */

static void
observe_read_cb(int err, const struct tcpstore_reply *rep, void *arg)
{
	struct c10d *c = arg;

	c->observe_pending = false;
	if (err < 0) {
		c10d_store_gone(c, err);
		return;
	}
	if (c->sync.op_active) {
		/* An operation started meanwhile: it reads for itself. */
		return;
	}
	adopt(c, rep->value.data, rep->value.len, false);
	admit_soon(c);
}

/* Outside operations (a round runs, the barrier, the exchange): read the
 * state to see what changed. */
void
c10d_observe_read(struct c10d *c)
{
	if (c->sync.op_active || c->observe_pending || c->dead || !c->up) {
		return;
	}
	c->observe_pending = true;
	if (tcpstore_client_get(c->cl, c->key, observe_read_cb, c) < 0) {
		c->observe_pending = false;
	}
}

static void
watch_cb(int err, const struct tcpstore_reply *rep, void *arg)
{
	struct c10d *c = arg;

	if (err == -ECANCELED) {
		return;
	}
	c->watching = false;
	if (err < 0) {
		return; /* the closed callback reports a lost connection */
	}
	if (c->sync.op_active) {
		rdzv_sync_wake(&c->sync);
	} else if ((c->sync.running || c->sync.barrier) && !c->coordinator) {
		c10d_observe_summary(c, c->watch_gen);
	} else if (c->sync.running || c->sync.barrier || (c->sync.next_active && !c->coordinated)) {
		/* The coordinator reads what it may admit; a coordinated
		 * joiner hears from its assignment key. */
		c10d_observe_read(c);
	}
}

/* The WAIT on our assignment key ended (one callback per kind of WAIT: a
 * WAIT that ends as it is cancelled must not pass for the other kind). */
static void
watch_assign_cb(int err, const struct tcpstore_reply *rep, void *arg)
{
	struct c10d *c = arg;

	if (err == -ECANCELED) {
		return;
	}
	c->watching = false;
	if (err == 0) {
		c10d_assign_fetch(c); /* the key exists: it was set */
	}
}

/* One background WAIT (watch): our assignment key during a blind join,
 * else the next gen key. */
void
c10d_watch_update(struct c10d *c)
{
	bool assign = c10d_assign_watching(c);
	uint64_t want = assign ? 0 : c->sync.st.gen + 1;
	const char *keys[1];
	char *k;

	if (!c->up || c->dead || c->finishing) {
		return;
	}
	if (c->watching && c->watch_gen == want && c->watch_assign == assign) {
		return;
	}
	if (c->watching) {
		(void)tcpstore_client_cancel_background(c->cl);
	}
	k = assign ? c10d_assign_key(c, c->me.name) : gen_key(c, want);
	keys[0] = k;
	if (tcpstore_client_wait_background(c->cl, keys, 1, assign ? watch_assign_cb : watch_cb,
					    c) == 0) {
		c->watching = true;
		c->watch_gen = want;
		c->watch_assign = assign;
	}
	free(k);
}

/* ---- connections -------------------------------------------------------- */

void
c10d_store_gone(struct c10d *c, int err)
{
	char *msg;

	if (c->dead) {
		return;
	}
	c->dead = true;
	c->up = false;
	msg = xasprintf("the rendezvous store at %s:%d is gone (%s)", c->host, c->connect_port,
			strerror(-err));
	c->dead_msg = xstrdup(msg);
	evtimer_del(c->ka_timer);
	if (c->sync.op_active) {
		/* Ends the operation; a join's completion reports the error. A
		 * keep-alive's does not: the running round is told below. */
		rdzv_sync_end(&c->sync, -ECONNRESET, RDZV_ACTION_ERROR_CLOSED);
	}
	if (c->sync.next_active) {
		c10d_next_fail(c, -ECONNRESET, msg);
	} else if (c->sync.barrier) {
		c->sync.barrier = false;
		rdzv_tell(c->r, RDZV_TELL_FINISHED, -ECONNRESET, 0, msg);
	} else if (c->sync.running && !c->sync.told) {
		c->sync.told = true;
		rdzv_tell(c->r, RDZV_TELL_FAILED, -ECONNRESET, 0, msg);
	}
	free(msg);
}

static void
client_closed_cb(struct tcpstore_client *cl, int err, void *arg)
{
	c10d_store_gone(arg, err);
}

static void
client_connected_cb(struct tcpstore_client *cl, int err, void *arg)
{
	struct c10d *c = arg;

	if (c->dead) {
		return;
	}
	if (err < 0) {
		char *why = tcpstore_client_handshake_trouble(cl), *msg;

		if (why) {
			/* Something else holds the port (an HTTP server, ...). */
			msg = xasprintf("the rendezvous endpoint %s:%d is not a TCPStore: %s; is "
					"another program listening there?",
					c->host, c->connect_port, why);
		} else {
			msg = xasprintf("cannot reach the rendezvous store at %s:%d within the "
					"join timeout: %s",
					c->host, c->connect_port, strerror(-err));
		}
		free(why);
		c->dead = true;
		c->dead_msg = xstrdup(msg);
		if (c->sync.next_active) {
			c10d_next_fail(c, err, msg);
		}
		free(msg);
		return;
	}
	c->up = true;
	evtimer_del(c->connect_log_timer);
	if (c->next_pending) {
		c->next_pending = false;
		c10d_start_next(c);
	}
}

static struct tcpstore_client *
new_client(struct c10d *c)
{
	struct tcpstore_client_callbacks cb = {
		.connected = client_connected_cb,
		.closed = client_closed_cb,
		.arg = c,
	};

	return tcpstore_client_new(c->r->base, c->connect_host, c->connect_port,
				   TCPSTORE_DIALECT_V2, &cb);
}

/* ---- set-up ------------------------------------------------------------- */

/* torch's RendezvousParameters.get_as_bool. 1/0, -1 when malformed. */
static int
parse_bool(const char *s)
{
	static const char *const yes[] = {"1", "true", "t", "yes", "y"};
	static const char *const no[] = {"0", "false", "f", "no", "n"};

	for (size_t i = 0; i < ARRAY_SIZE(yes); i++) {
		if (strcasecmp(s, yes[i]) == 0) {
			return 1;
		}
		if (strcasecmp(s, no[i]) == 0) {
			return 0;
		}
	}
	return -1;
}

/* A --rdzv-conf duration in seconds (> 0; fractions allowed). */
/* Whether host names this machine (torch's _matches_machine_hostname). */
static bool
host_is_local(const char *host)
{
	struct addrinfo hints = {.ai_socktype = SOCK_STREAM}, *res = NULL, *ai;
	struct ifaddrs *ifs = NULL, *ifa;
	char name[256];
	bool local = false;

	if (strcmp(host, "localhost") == 0 || strcmp(host, host_fqdn()) == 0 ||
	    (gethostname(name, sizeof(name)) == 0 && strcmp(host, name) == 0)) {
		return true;
	}
	if (getaddrinfo(host, NULL, &hints, &res) != 0) {
		return false;
	}
	(void)getifaddrs(&ifs);
	for (ai = res; ai && !local; ai = ai->ai_next) {
		if (ai->ai_family == AF_INET) {
			struct in_addr a = ((struct sockaddr_in *)ai->ai_addr)->sin_addr;

			local = (ntohl(a.s_addr) >> 24) == 127;
			for (ifa = ifs; ifa && !local; ifa = ifa->ifa_next) {
				local = ifa->ifa_addr && ifa->ifa_addr->sa_family == AF_INET &&
					((struct sockaddr_in *)ifa->ifa_addr)->sin_addr.s_addr ==
						a.s_addr;
			}
		} else if (ai->ai_family == AF_INET6) {
			struct in6_addr a = ((struct sockaddr_in6 *)ai->ai_addr)->sin6_addr;

			local = IN6_IS_ADDR_LOOPBACK(&a);
			for (ifa = ifs; ifa && !local; ifa = ifa->ifa_next) {
				local = ifa->ifa_addr && ifa->ifa_addr->sa_family == AF_INET6 &&
					memcmp(&((struct sockaddr_in6 *)ifa->ifa_addr)->sin6_addr,
					       &a, sizeof(a)) == 0;
			}
		}
	}
	if (ifs) {
		freeifaddrs(ifs);
	}
	freeaddrinfo(res);
	return local;
}

static void
connect_log_cb(evutil_socket_t fd, short what, void *arg)
{
	struct c10d *c = arg;
	struct timeval tv = {10, 0};

	if (c->up || c->dead || !c->next_pending) {
		return;
	}
	rdzv_progress(c->r, "still waiting for the rendezvous store at %s:%d to answer", c->host,
		      c->connect_port);
	evtimer_add(c->connect_log_timer, &tv);
}

/* c10d_init's settings: the endpoint, the --rdzv-conf keys, our descriptor.
 * Returns is_host (-1: not given, 0, 1), or -EINVAL with *reterr. */
static int
c10d_settings(struct c10d *c, const struct config *cfg, char **reterr)
{
	const char *endpoint =
		cfg->rdzv_endpoint && *cfg->rdzv_endpoint ? cfg->rdzv_endpoint : "localhost";
	const char *v;
	char *why = NULL;
	int is_host = -1;

	if (endpoint_parse(endpoint, C10D_DEFAULT_PORT, &c->host, &c->port, &why) < 0) {
		*reterr = xasprintf("--rdzv-endpoint: invalid value '%s': %s", endpoint, why);
		free(why);
		return -EINVAL;
	}
	if (rdzv_dynamic_conf(cfg, &c->settings, &c->join_timeout, &c->close_timeout,
			      &c->barrier_timeout, reterr) < 0 ||
	    rdzv_conf_seconds(cfg, "heartbeat_timeout", 5, &c->heartbeat_timeout, reterr) < 0) {
		return -EINVAL;
	}
	v = config_rdzv_conf_get(cfg, "is_host");
	if (v && (is_host = parse_bool(v)) < 0) {
		*reterr = xasprintf("--rdzv-conf: invalid value '%s' for is_host: expected true or "
				    "false",
				    v);
		return -EINVAL;
	}
	if (rdzv_node_self(cfg, &c->me, reterr) < 0) {
		return -EINVAL;
	}
	c->key = xasprintf("/torch.rendezvous.%s", cfg->rdzv_id);
	return is_host;
}

static int
c10d_init(struct rdzv *r, char **reterr)
{
	const struct config *cfg = r->cfg;
	struct c10d *c = xcalloc(1, sizeof(*c));
	int is_host, err = 0;
	uint64_t deadline;

	r->backend = c;
	c->r = r;
	c->node_state = NODE_STATE_INIT;
	rdzv_assign_memo_init(&c->told);
	c->rejoin_round = -1;
	rdzv_state_init(&c->sync.st);
	if ((is_host = c10d_settings(c, cfg, reterr)) == -EINVAL) {
		return -EINVAL;
	}
	rdzv_sync_init(&c->sync, r, &c10d_store_ops, c, &c->settings, &c->me, c->join_timeout);
	c10d_exchange_init(c);

	/* Host the store when the endpoint is ours; with several agents on the
	 * endpoint host the first one to bind hosts, the others connect. An
	 * observer always connects. */
	if (is_host != 0 && !r->observer &&
	    (is_host == 1 || cfg->standalone || c->port == 0 || host_is_local(c->host))) {
		char *e = NULL;

		c->server = tcpstore_server_new(r->base, NULL, c->port, NULL, &err, &e);
		if (!c->server && (is_host == 1 || err != -EADDRINUSE || c->port == 0)) {
			*reterr = xasprintf("--rdzv-endpoint: cannot host the rendezvous store on "
					    "port %d: %s",
					    c->port, e ? e : strerror(-err));
			free(e);
			return -EINVAL;
		}
		free(e);
	}
	c->admit_ev = event_new(r->base, -1, 0, admit_cb, c);
	c->fold_timer = evtimer_new(r->base, c10d_fold_timer_cb, c);
	if (c->server) {
		char *k = xasprintf("%s/coordinator", c->key), *jp = xasprintf("%s/j/", c->key);

		tcpstore_server_set_notice_cb(c->server, rdzv_store_notice, r);

		/* We admit the others: say so before anybody connects. */
		c->coordinator = true;
		c10d_fold_timer_cb(-1, 0, c); /* arms it */
		(void)tcpstore_server_put(c->server, k, c->me.name, strlen(c->me.name));
		tcpstore_server_on_set(c->server, jp, join_request_cb, c);
		free(k);
		free(jp);
		c->connect_host = xstrdup(strchr(c->host, ':') ? "::1" : "127.0.0.1");
		c->connect_port = tcpstore_server_port(c->server);
		rdzv_record_step(c->r, NODE_STATE_INIT, "_create_tcp_store",
				 "Process %d hosts the TCP store for the C10d rendezvous backend.",
				 (int)getpid());
	} else if (r->observer && rdzv_hosts_store(r->observed)) {
		/* The store this node hosted lives on in the handle it left
		 * with (--standalone's port is known only there). */
		const struct c10d *left = r->observed->backend;

		c->connect_host = xstrdup(left->connect_host);
		c->connect_port = left->connect_port;
	} else {
		c->connect_host = xstrdup(c->host);
		c->connect_port = c->port;
	}
	if (c->port == 0) {
		/* --standalone: the port the system gave us. */
		c->port = c->connect_port;
	}
	c->ka_timer = evtimer_new(r->base, c10d_ka_timer_cb, c);
	c->linger_timer = evtimer_new(r->base, c10d_linger_cb, c);
	c->connect_log_timer = evtimer_new(r->base, connect_log_cb, c);
	c->cl = new_client(c);
	(void)tcpstore_client_set_mux(c->cl, true);
	deadline = now_usec() + c->join_timeout;
	tcpstore_client_connect(c->cl, deadline);
	return 0;
}

static void
c10d_free(struct rdzv *r)
{
	struct c10d *c = r->backend;

	if (!c) {
		return;
	}
	tcpstore_client_free(c->cl);
	c10d_lease_free(c);
	tcpstore_server_free(c->server);
	tcpstore_server_free(c->worker_server);
	if (c->ka_timer) {
		event_free(c->ka_timer);
	}
	if (c->linger_timer) {
		event_free(c->linger_timer);
	}
	if (c->connect_log_timer) {
		event_free(c->connect_log_timer);
	}
	rdzv_sync_release(&c->sync);
	rdzv_node_release(&c->me);
	rdzv_exchange_release(&c->x);
	c10d_kv_release(c);
	joiners_clear(c);
	free(c->joiners);
	rdzv_exits_release(&c->exits);
	rdzv_assign_memo_reset(&c->told);
	if (c->admit_ev) {
		event_free(c->admit_ev);
	}
	if (c->fold_timer) {
		event_free(c->fold_timer);
	}
	free(c->token);
	free(c->pending);
	free(c->key);
	free(c->host);
	free(c->connect_host);
	free(c->dead_msg);
	free(c);
	r->backend = NULL;
}

const struct rdzv_backend_ops rdzv_c10d_ops = {
	.name = "c10d",
	.init = c10d_init,
	.next = c10d_next,
	.num_nodes_waiting = c10d_num_nodes_waiting,
	.shutdown = c10d_shutdown,
	.free = c10d_free,
	.exit_barrier = c10d_exit_barrier,
	.finish = c10d_finish,
	.snapshot = c10d_snapshot,
	.degraded = c10d_degraded,
	.run_op = c10d_run_op,
	.coordinates = c10d_coordinates,
	.hosts_store = c10d_hosts_store,
};
