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
 * (rdzv_admit). Liveness stays torch's heartbeats in the state, but nodes
 * keep alive through their own key "<key>/hb/<node>" (a SET, no race for the
 * state) and the host folds those into the state once per keep-alive
 * interval (hb_fold): one write per interval instead of one per node. A store
 * without a coordinator (hosted elsewhere, e.g. by torch) gets torch's own
 * loop, with nodes that arrive together taking turns (tickets) to write
 * their joins.
 *
 * Waiting never polls: a write that waiting nodes must hear about bumps the
 * state's gen and its writer sets "<key>/gen/<gen>"; every node keeps one WAIT
 * on "<key>/gen/<gen+1>" (its watch connection), plus a timer for the next
 * moment its own decision can change (heartbeat due, last-call deadline, join
 * deadline, another node's heartbeat expiring).
 *
 * After a round completes, the nodes exchange role and local world size as
 * torch 2.x's agent does (round store keys torchelastic/role_info/<rank>;
 * group rank 0 publishes torchelastic/assigned_ranks/<rank>, MASTER_ADDR,
 * MASTER_PORT, and elasticd/round with every node's role and size), and group
 * rank 0 exposes a TCPStore server of its own as MASTER_ADDR:MASTER_PORT for
 * the workers (TORCHELASTIC_USE_AGENT_STORE=True) unless
 * TORCH_DISABLE_SHARE_RDZV_TCP_STORE=1.
 *
 * Three connections per node: cmd (short requests), watch (the gen WAIT) and
 * aux (long WAITs: rank exchange, exit barrier), so heartbeats never queue
 * behind a wait. */
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
#include "util.h"

#define C10D_DEFAULT_PORT 29400
/* torch's c10d backend pre-creates the state key with this value. */
#define C10D_SENTINEL "Y2FuaW1hZGFt"
/* How long the store host waits for its clients to leave at the end. */
#define LINGER_USEC (10 * USEC_PER_SEC)
/* Gen keys kept behind the newest one (older ones are deleted). */
#define GEN_KEEP 64

typedef rdzv_sync_done_fn op_done_fn;

struct c10d {
	struct rdzv *r;
	struct rdzv_settings settings;
	uint64_t join_timeout;
	uint64_t close_timeout;
	uint64_t heartbeat_timeout;
	uint64_t barrier_timeout;

	char *host; /* the endpoint */
	int port;
	char *connect_host; /* what our clients connect to */
	int connect_port;
	struct tcpstore_server *server;        /* the rendezvous store, when hosting */
	struct tcpstore_server *worker_server; /* MASTER_ADDR:MASTER_PORT, group rank 0 */
	struct tcpstore_client *cmd, *watch, *aux;
	int n_up;
	bool up;
	bool dead; /* the store connection is gone */
	char *dead_msg;

	char *key;
	struct rdzv_node me;

	/* The operation loop and its local copy (rdzv_sync.h), with the
	 * copy's fencing token (the value last read). */
	struct rdzv_sync sync;
	char *token;
	size_t token_len;
	char *pending; /* the value a compare-and-set in flight tries to write */
	size_t pending_len;
	uint64_t pending_gen;

	bool observe_pending; /* a GET outside operations */

	/* Join turns: nodes that arrive together take a ticket and write their
	 * join one after another instead of all losing compare-and-sets to each
	 * other (torch's loop collapses near 128 nodes, reference §8). A hint
	 * only: a node stops waiting for its turn after a bounded time. */
	int64_t ticket;
	bool turn_held;

	/* Admission by the store host (the coordinator): a joiner SETs
	 * "<key>/j/<node>"; the host hears it from its own server, no round
	 * trip, and admits every requester in one compare-and-set
	 * (rdzv_admit). Joiners that see "<key>/coordinator" skip the turns and
	 * wait to be admitted. */
	bool coordinator;          /* we host the store */
	bool coordinated;          /* the store has a coordinator (not us) */
	struct rdzv_node *joiners; /* coordinator: requests not admitted yet */
	size_t n_joiners;
	struct event *admit_ev;
	bool admitting;         /* the compare-and-set in flight admits joiners */
	size_t admitted_upto;   /* ... the first this many of them */
	size_t admit_read_upto; /* requests there when the admission read went out */
	/* Liveness with a coordinator: each node SETs "<key>/hb/<node>" (its
	 * own key: no race for the state) every keep-alive interval; the
	 * coordinator folds them into the state's heartbeats from its own
	 * server, once per interval for everyone (hb_fold). */
	struct event *fold_timer;
	bool fold_due;       /* the interval passed: fold and write */
	bool fold_dirty;     /* the local copy holds folded heartbeats not written yet */
	bool ever_in;        /* this handler has been a participant (may be in the state) */
	uint64_t asked;      /* when we last sent our join request */
	int64_t served_seen; /* the "served" count when we last looked; -1: not yet */

	/* The gen WAIT on watch. */
	bool watching;
	uint64_t watch_gen;

	bool next_pending; /* asked before the store was reachable */
	bool finishing;
	char *prefix; /* "/torch.rendezvous.<run_id>.<round>/" */
	char **exchange_keys;
	struct rdzv_result result;
	char **roles;
	struct event *ka_timer;
	struct event *linger_timer;
	struct event *connect_log_timer; /* says we still wait for the store */
	enum node_state node_state;
};

/* ---- small helpers ------------------------------------------------------ */

static struct c10d *
backend(struct rdzv *r)
{
	return r->backend;
}

/* The one place this node's NodeState changes: an RdzvEvent for every step
 * (torch's construct_and_record_rdzv_event) and a log line for a transition. */
static void
c10d_set_state(struct c10d *c, enum node_state s, const char *fn, const char *msg)
{
	rdzv_set_node_state(c->r, &c->node_state, s, fn, msg);
}

static char *
gen_key(const struct c10d *c, uint64_t gen)
{
	return xasprintf("%s/gen/%" PRIu64, c->key, gen);
}

static char *
round_key(const struct c10d *c, const char *what)
{
	return xasprintf("%s%s", c->prefix, what);
}

/* ---- the operation loop ------------------------------------------------- */

static void admit_soon(struct c10d *c);
static void joiners_clear(struct c10d *c);
static void joiners_drop(struct c10d *c, size_t n);
static size_t hb_fold(struct c10d *c, struct rdzv_state *st);
static void turn_release(struct c10d *c);
static void watch_update(struct c10d *c);
static void next_fail(struct c10d *c, int err, const char *msg);
static void store_gone(struct c10d *c, int err);

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
		watch_update(c);
		return;
	}
	if (len == 0 || (len == strlen(C10D_SENTINEL) && memcmp(value, C10D_SENTINEL, len) == 0)) {
		rdzv_state_init(&st);
	} else if (rdzv_state_decode((const char *)value, len, &st) < 0) {
		rdzv_sync_fail(&c->sync, -EBADMSG);
		return;
	}
	if (c->coordinator && c->server && hb_fold(c, &st) > 0) {
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
	watch_update(c);
}

static void
got_state_cb(int err, const struct tcpstore_reply *rep, void *arg)
{
	struct c10d *c = arg;

	c->sync.io_pending = false;
	if (err < 0) {
		store_gone(c, err);
		return;
	}
	adopt(c, rep->value.data, rep->value.len, ADOPT_READ);
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
		store_gone(c, err);
		return;
	}
	/* compare_set answers with what the key holds now: ours if we won. */
	has_set = rep->value.len == c->pending_len &&
		  memcmp(rep->value.data, c->pending, c->pending_len) == 0;
	if (has_set && gen > 0) {
		char *k = gen_key(c, gen);

		/* Wake the nodes waiting for this change. */
		tcpstore_client_set(c->cmd, k, "", 0, set_done_cb, c);
		free(k);
		if (gen > GEN_KEEP) {
			k = gen_key(c, gen - GEN_KEEP);
			tcpstore_client_delete(c->cmd, k, set_done_cb, c);
			free(k);
		}
	}
	rdzv_record_sync(c->r, c->me.name, has_set);
	if (admitting && has_set) {
		joiners_drop(c, c->admitted_upto); /* those are in the state written */
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
	c->sync.io_pending = true;
	if (tcpstore_client_get(c->cmd, c->key, got_state_cb, c) < 0) {
		c->sync.io_pending = false;
		store_gone(c, -ECONNRESET);
	}
}

static void ask_to_join(struct c10d *c);

/* rdzv_store_ops.cas: compare_set against the value last read; a notable
 * change then sets "<key>/gen/<gen>" (cas_cb). */
static void
store_cas(void *arg, enum rdzv_action a)
{
	struct c10d *c = arg;

	c->pending_gen = c->sync.notable ? c->sync.st.gen : 0;
	free(c->pending);
	c->pending = rdzv_state_encode(&c->sync.st, &c->pending_len);
	c->sync.io_pending = true;
	if (tcpstore_client_compare_set(c->cmd, c->key, c->token, c->token_len, c->pending,
					c->pending_len, cas_cb, c) < 0) {
		c->sync.io_pending = false;
		store_gone(c, -ECONNRESET);
		return;
	}
	if (a == RDZV_ACTION_REMOVE_FROM_REDUNDANCY_LIST && c->coordinated) {
		/* Ask again: the coordinator admits spares that may join. */
		ask_to_join(c);
	}
}

/* ---- admission by the store host ------------------------------------------ */

static char *
join_key(const struct c10d *c, const char *node)
{
	return xasprintf("%s/j/%s", c->key, node);
}

static char *
hb_key(const struct c10d *c, const char *node)
{
	return xasprintf("%s/hb/%s", c->key, node);
}

/* A node of a coordinated store keeps alive through its own key. */
static void
hb_send(struct c10d *c)
{
	char *k = hb_key(c, c->me.name), v[32];
	int64_t now = (int64_t)wall_usec();
	long i = rdzv_state_find_heartbeat(&c->sync.st, &c->me);

	snprintf(v, sizeof(v), "%" PRId64, now);
	tcpstore_client_set(c->cmd, k, v, strlen(v), set_done_cb, c);
	free(k);
	if (i >= 0) {
		c->sync.st.heartbeats[i].usec = now; /* the coordinator writes it */
	}
}

/* The coordinator: the heartbeats its server holds, into st (its own when
 * due). Returns how many changed. */
static size_t
hb_fold(struct c10d *c, struct rdzv_state *st)
{
	int64_t now = (int64_t)wall_usec();
	size_t changed = 0;

	for (size_t i = 0; i < st->n_heartbeats; i++) {
		struct rdzv_heartbeat *h = &st->heartbeats[i];
		const uint8_t *v;
		size_t len;
		char buf[32], *k;
		long long usec;

		if (rdzv_node_cmp(&h->node, &c->me) == 0) {
			if (now - h->usec >= c->settings.keep_alive_interval_usec / 2) {
				h->usec = now;
				changed++;
			}
			continue;
		}
		k = hb_key(c, h->node.name);
		if (tcpstore_server_get(c->server, k, &v, &len) == 0 && len < sizeof(buf)) {
			memcpy(buf, v, len);
			buf[len] = '\0';
			if (parse_int(buf, 0, now + 60 * (int64_t)USEC_PER_SEC, &usec) == 0 &&
			    usec > h->usec) {
				h->usec = usec;
				changed++;
			}
		}
		free(k);
	}
	return changed;
}

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
	for (size_t i = 0; i < c->n_joiners; i++) {
		if (rdzv_node_cmp(&c->joiners[i], &n) == 0) {
			rdzv_node_release(&n);
			return;
		}
	}
	c->joiners = xrealloc(c->joiners, (c->n_joiners + 1) * sizeof(*c->joiners));
	c->joiners[c->n_joiners++] = n;
	event_active(c->admit_ev, EV_TIMEOUT, 0);
}

/* Apply the admissions of the joiners we hold and of the wait list (a round
 * that opens takes them) to the local copy. Returns how many. */
static size_t
admit_apply(struct c10d *c, const struct rdzv_ctx *ctx)
{
	return rdzv_admit_requests(c->r, &c->sync.st, true, c->joiners, c->n_joiners, ctx,
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
static void
admit_now(struct c10d *c)
{
	if (!c->coordinator || c->sync.io_pending || c->dead || !c->up || c->finishing ||
	    (c->n_joiners == 0 && !c->fold_due &&
	     (c->sync.st.complete || c->sync.st.closed || c->sync.st.n_wait_list == 0))) {
		return;
	}
	c->fold_due = false;
	c->admit_read_upto = c->n_joiners;
	c->sync.io_pending = true;
	if (tcpstore_client_get(c->cmd, c->key, admit_read_cb, c) < 0) {
		c->sync.io_pending = false;
		store_gone(c, -ECONNRESET);
	}
}

static void
admit_cb(evutil_socket_t fd, short what, void *arg)
{
	admit_now(arg);
}

static void
fold_timer_cb(evutil_socket_t fd, short what, void *arg)
{
	struct c10d *c = arg;
	int64_t iv = c->settings.keep_alive_interval_usec;
	struct timeval tv = {(time_t)(iv / 1000000), (suseconds_t)(iv % 1000000)};

	if (c->dead || c->finishing) {
		return;
	}
	c->fold_due = true;
	admit_now(c);
	evtimer_add(c->fold_timer, &tv);
}

/* After any read: the coordinator looks at what it holds, and at a round
 * that opened with nodes in the wait list. */
static void
admit_soon(struct c10d *c)
{
	if (c->coordinator && (c->n_joiners > 0 || (!c->sync.st.complete && !c->sync.st.closed &&
						    c->sync.st.n_wait_list > 0))) {
		event_active(c->admit_ev, EV_TIMEOUT, 0);
	}
}

/* A joiner of a store with a coordinator waits to be admitted instead of
 * racing it: the coordinator hosts the store, so it is there as long as the
 * store is, and it admits every request. The joiner keeps alive through its
 * own key meanwhile and reads again on the next notable change (the gen
 * WAIT) or at its join deadline. */
static void
ask_to_join(struct c10d *c)
{
	char *k = join_key(c, c->me.name);

	tcpstore_client_set(c->cmd, k, "", 0, set_done_cb, c);
	free(k);
	c->asked = now_usec();
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
		ask_to_join(c);
	}
	if (wait > window) {
		wait = window;
	}
	rdzv_sync_sleep(&c->sync, wait);
	watch_update(c);
	return true;
}

/* rdzv_store_ops.keep_alive: a node of a coordinated store keeps alive
 * through its own key, not the state. */
static bool
store_keep_alive(void *arg)
{
	struct c10d *c = arg;

	if (c->coordinated) {
		hb_send(c);
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

	c->admitted_upto = c->n_joiners;
	c->admitting =
		c->coordinator && c->n_joiners > 0 &&
		rdzv_admit_requests(c->r, st, true, c->joiners, c->n_joiners, ctx, notable) > 0;
}

/* rdzv_store_ops.synced: our join is written, the next node may go. */
static bool
store_synced(void *arg)
{
	struct c10d *c = arg;

	if (c->sync.op == RDZV_OP_JOIN) {
		turn_release(c);
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
		store_gone(c, err);
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
static void
observe_read(struct c10d *c)
{
	if (c->sync.op_active || c->observe_pending || c->dead || !c->up) {
		return;
	}
	c->observe_pending = true;
	if (tcpstore_client_get(c->cmd, c->key, observe_read_cb, c) < 0) {
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
	} else if (c->sync.running || c->sync.barrier || c->sync.next_active) {
		observe_read(c);
	}
}

static void
watch_update(struct c10d *c)
{
	uint64_t want = c->sync.st.gen + 1;
	const char *keys[1];
	char *k;

	if (!c->up || c->dead || c->finishing) {
		return;
	}
	if (c->watching && c->watch_gen == want) {
		return;
	}
	if (c->watching) {
		(void)tcpstore_client_cancel_wait(c->watch);
	}
	k = gen_key(c, want);
	keys[0] = k;
	if (tcpstore_client_keys(c->watch, TCPSTORE_CMD_WAIT, keys, 1, 0, watch_cb, c) == 0) {
		c->watching = true;
		c->watch_gen = want;
	}
	free(k);
}

/* ---- connections -------------------------------------------------------- */

static void start_next(struct c10d *c);

static void
store_gone(struct c10d *c, int err)
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
		/* Ends the operation; its completion reports the error below. */
		rdzv_sync_end(&c->sync, -ECONNRESET, RDZV_ACTION_ERROR_CLOSED);
	} else if (c->sync.next_active) {
		next_fail(c, -ECONNRESET, msg);
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
	store_gone(arg, err);
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
			next_fail(c, err, msg);
		}
		free(msg);
		return;
	}
	if (++c->n_up == 3) {
		c->up = true;
		evtimer_del(c->connect_log_timer);
		if (c->next_pending) {
			c->next_pending = false;
			start_next(c);
		}
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

/* ---- next_rendezvous ---------------------------------------------------- */

static void
next_fail(struct c10d *c, int err, const char *msg)
{
	turn_release(c);
	c->sync.next_active = false;
	c10d_set_state(c, NODE_STATE_FAILED, "next_rendezvous", msg);
	rdzv_tell(c->r, RDZV_TELL_DONE, err, 0, msg);
}

static void keep_alive_arm(struct c10d *c);

static void
round_ready(struct c10d *c)
{
	struct rdzv_result *res = &c->result;
	char *msg;

	c->sync.next_active = false;
	c->sync.running = true;
	c->sync.told = false;
	msg = xasprintf("%s has joined round %" PRId64 " of the rendezvous '%s' as rank %d in a "
			"world of size %d.",
			c->me.name, c->sync.round, c->r->cfg->rdzv_id, c->sync.rank, c->sync.world);
	c10d_set_state(c, NODE_STATE_SUCCEEDED, "next_rendezvous", msg);
	free(msg);
	keep_alive_arm(c);
	c->r->cb.done(0, res, NULL, c->r->cb.arg);
	/* Anything that changed during the exchange is looked at now. */
	rdzv_sync_observe(&c->sync);
	observe_read(c);
}

static void
exchange_fail(struct c10d *c, int err, const char *what)
{
	char *msg;

	if (c->dead) {
		msg = xstrdup(c->dead_msg);
	} else if (err == -ETIMEDOUT) {
		msg = xasprintf("round %" PRId64 " of the rendezvous: timed out waiting for %s",
				c->sync.round, what);
	} else {
		msg = xasprintf("round %" PRId64 " of the rendezvous: bad %s from the store",
				c->sync.round, what);
	}
	next_fail(c, err < 0 ? err : -EBADMSG, msg);
	free(msg);
}

/* Parse elasticd/round: {"nodes": [[role, lws], ...], "use_agent_store": b}. */
static int
parse_round(struct c10d *c, const struct tcpstore_bytes *v)
{
	json_t *root = json_loadb((const char *)v->data, v->len, 0, NULL), *nodes, *n;
	size_t i;

	if (!root || !(nodes = json_object_get(root, "nodes")) || !json_is_array(nodes) ||
	    json_array_size(nodes) != (size_t)c->sync.world) {
		json_decref(root);
		return -EBADMSG;
	}
	c->result.nodes = xcalloc((size_t)c->sync.world, sizeof(*c->result.nodes));
	c->roles = xcalloc((size_t)c->sync.world + 1, sizeof(*c->roles));
	json_array_foreach(nodes, i, n)
	{
		json_t *role = json_array_get(n, 0), *lws = json_array_get(n, 1);

		if (!json_is_string(role) || !json_is_integer(lws) || json_integer_value(lws) < 1 ||
		    json_integer_value(lws) > 1 << 20) {
			json_decref(root);
			return -EBADMSG;
		}
		c->roles[i] = xstrdup(json_string_value(role));
		c->result.nodes[i].role = c->roles[i];
		c->result.nodes[i].local_world_size = (int)json_integer_value(lws);
	}
	c->result.use_agent_store = json_is_true(json_object_get(root, "use_agent_store"));
	json_decref(root);
	return 0;
}

static void
member_cb(int err, const struct tcpstore_reply *rep, void *arg)
{
	struct c10d *c = arg;
	long long port;
	char *s;

	if (err < 0) {
		exchange_fail(c, err, "group rank 0's rank assignment");
		return;
	}
	if (rep->n != 3 || parse_round(c, &rep->values[0]) < 0 || rep->values[1].len == 0 ||
	    rep->values[1].len > 1024) {
		exchange_fail(c, -EBADMSG, "rank assignment");
		return;
	}
	s = xstrndup((const char *)rep->values[2].data, rep->values[2].len);
	if (parse_int(s, 1, 65535, &port) < 0) {
		free(s);
		exchange_fail(c, -EBADMSG, "MASTER_PORT");
		return;
	}
	free(s);
	c->result.master_addr = xstrndup((const char *)rep->values[1].data, rep->values[1].len);
	c->result.master_port = (int)port;
	round_ready(c);
}

static void
member_wait_cb(int err, const struct tcpstore_reply *rep, void *arg)
{
	struct c10d *c = arg;

	if (err < 0) {
		exchange_fail(c, err, "group rank 0's rank assignment");
		return;
	}
	(void)tcpstore_client_keys(c->aux, TCPSTORE_CMD_MULTI_GET,
				   (const char *const *)c->exchange_keys, 3, 0, member_cb, c);
}

/* A port nobody listens on now (TORCH_DISABLE_SHARE_RDZV_TCP_STORE=1: worker
 * RANK 0 binds it, as torch 1.13). */
static bool
host_is_loopback(const char *host)
{
	struct in6_addr a6;
	struct in_addr a4;

	if (strcmp(host, "localhost") == 0) {
		return true;
	}
	if (inet_pton(AF_INET, host, &a4) == 1) {
		return (ntohl(a4.s_addr) >> 24) == 127;
	}
	return inet_pton(AF_INET6, host, &a6) == 1 && IN6_IS_ADDR_LOOPBACK(&a6);
}

static void
leader_cb(int err, const struct tcpstore_reply *rep, void *arg)
{
	struct c10d *c = arg;
	const struct config *cfg = c->r->cfg;
	const char *share = getenv("TORCH_DISABLE_SHARE_RDZV_TCP_STORE");
	bool agent_store = !(share && strcmp(share, "1") == 0);
	json_t *round, *nodes;
	struct tcpstore_req req = {.cmd = TCPSTORE_CMD_MULTI_SET};
	char **keys, **vals, addr[64], port[16], *round_json;
	size_t n = (size_t)c->sync.world + 4;

	if (err < 0) {
		exchange_fail(c, err, "the other nodes' role_info");
		return;
	}
	/* Every node's role and size, in group rank order. */
	c->result.nodes = xcalloc((size_t)c->sync.world, sizeof(*c->result.nodes));
	c->roles = xcalloc((size_t)c->sync.world + 1, sizeof(*c->roles));
	for (int i = 0; i < c->sync.world; i++) {
		json_t *o =
			json_loadb((const char *)rep->values[i].data, rep->values[i].len, 0, NULL);
		json_t *role = json_object_get(o, "role"),
		       *lws = json_object_get(o, "local_world_size");

		if (!json_is_string(role) || !json_is_integer(lws) || json_integer_value(lws) < 1 ||
		    json_integer_value(lws) > 1 << 20) {
			json_decref(o);
			exchange_fail(c, -EBADMSG, "role_info");
			return;
		}
		c->roles[i] = xstrdup(json_string_value(role));
		c->result.nodes[i].role = c->roles[i];
		c->result.nodes[i].local_world_size = (int)json_integer_value(lws);
		json_decref(o);
	}
	/* MASTER_ADDR:MASTER_PORT: our own store for the workers (torch 2.x's
	 * shared store), or a free port for worker RANK 0 to bind. */
	if (agent_store) {
		char *e = NULL;
		int ret = 0;

		/* A fresh store per round: the previous round's workers are gone,
		 * and one round's workers may disagree on their restart count. */
		tcpstore_server_free(c->worker_server);
		c->worker_server =
			tcpstore_server_new(c->r->base, cfg->local_addr, 0, NULL, &ret, &e);
		if (!c->worker_server) {
			free(e);
			exchange_fail(c, ret, "a port for the workers' store");
			return;
		}
		tcpstore_server_set_merge_attempts(c->worker_server, true);
		tcpstore_server_set_notice_cb(c->worker_server, rdzv_store_notice, c->r);
	}
	snprintf(port, sizeof(port), "%d",
		 agent_store ? tcpstore_server_port(c->worker_server) : rdzv_free_port());
	if (cfg->local_addr && *cfg->local_addr) {
		snprintf(addr, sizeof(addr), "%s", cfg->local_addr);
	} else if (cfg->standalone) {
		snprintf(addr, sizeof(addr), "localhost");
	} else if (c->server && !host_is_loopback(c->host)) {
		/* We host the rendezvous store: the other nodes reach us by the
		 * endpoint's name already (our own clients use loopback). */
		snprintf(addr, sizeof(addr), "%s", c->host);
	} else if (tcpstore_client_local_addr(c->cmd, addr, sizeof(addr)) < 0) {
		/* The address the other nodes reach our store through. */
		snprintf(addr, sizeof(addr), "%s", host_fqdn());
	}
	round = json_object();
	nodes = json_array();
	for (int i = 0; i < c->sync.world; i++) {
		json_array_append_new(
			nodes, json_pack("[si]", c->roles[i], c->result.nodes[i].local_world_size));
	}
	json_object_set_new(round, "nodes", nodes);
	json_object_set_new(round, "use_agent_store", json_boolean(agent_store));
	round_json = json_dumps(round, JSON_COMPACT);
	json_decref(round);

	keys = xcalloc(n, sizeof(*keys));
	vals = xcalloc(n, sizeof(*vals));
	for (int i = 0; i < c->sync.world; i++) {
		struct ranks_info ri;
		char what[64];

		ranks_assign(c->result.nodes, (size_t)c->sync.world, (size_t)i, &ri);
		snprintf(what, sizeof(what), "torchelastic/assigned_ranks/%d", i);
		keys[i] = round_key(c, what);
		vals[i] = xasprintf("[%d, %d, %d, %d]", ri.base_global_rank, ri.global_world_size,
				    ri.base_role_rank, ri.role_world_size);
	}
	keys[c->sync.world] = round_key(c, "MASTER_ADDR");
	vals[c->sync.world] = xstrdup(addr);
	keys[c->sync.world + 1] = round_key(c, "MASTER_PORT");
	vals[c->sync.world + 1] = xstrdup(port);
	keys[c->sync.world + 2] = round_key(c, "elasticd/round");
	vals[c->sync.world + 2] = round_json;
	n = (size_t)c->sync.world + 3;
	req.n = n;
	req.keys = xcalloc(n, sizeof(*req.keys));
	req.values = xcalloc(n, sizeof(*req.values));
	for (size_t i = 0; i < n; i++) {
		req.keys[i] = (struct tcpstore_bytes){(const uint8_t *)keys[i], strlen(keys[i])};
		req.values[i] = (struct tcpstore_bytes){(const uint8_t *)vals[i], strlen(vals[i])};
	}
	(void)tcpstore_client_request(c->aux, &req, 0, NULL, NULL);
	free(req.keys);
	free(req.values);
	strv_free(keys);
	strv_free(vals);
	c->result.master_addr = xstrdup(addr);
	c->result.master_port = atoi(port);
	c->result.use_agent_store = agent_store;
	round_ready(c);
}

static void
leader_wait_cb(int err, const struct tcpstore_reply *rep, void *arg)
{
	struct c10d *c = arg;

	if (err < 0) {
		exchange_fail(c, err, "the other nodes' role_info");
		return;
	}
	(void)tcpstore_client_keys(c->aux, TCPSTORE_CMD_MULTI_GET,
				   (const char *const *)c->exchange_keys, (size_t)c->sync.world, 0,
				   leader_cb, c);
}

/* The round is complete: exchange roles and sizes (torch 2.x
 * _assign_worker_ranks) and learn MASTER_ADDR / MASTER_PORT. */
static void
exchange_start(struct c10d *c)
{
	long me = rdzv_state_find_participant(&c->sync.st, &c->me);
	uint64_t now = now_usec();
	uint64_t left = c->sync.next_deadline > now ? c->sync.next_deadline - now : 1;
	char what[64], *k, *info;
	json_t *o;

	rdzv_result_release(&c->result);
	strv_free(c->roles);
	c->roles = NULL;
	strv_free(c->exchange_keys);
	c->exchange_keys = NULL;
	c->ever_in = true;
	c->sync.round = c->sync.st.round;
	c->sync.rank = c->sync.st.participants[me].rank;
	c->sync.world = (int)c->sync.st.n_participants;
	free(c->prefix);
	c->prefix =
		xasprintf("/torch.rendezvous.%s.%" PRId64 "/", c->r->cfg->rdzv_id, c->sync.round);
	c->result.round = (int)c->sync.round;
	c->result.group_rank = c->sync.rank;
	c->result.group_world_size = c->sync.world;

	o = json_pack("{sssisi}", "role", c->r->cfg->role, "rank", c->sync.rank, "local_world_size",
		      c->r->local_world_size);
	info = json_dumps(o, JSON_COMPACT);
	json_decref(o);
	snprintf(what, sizeof(what), "torchelastic/role_info/%d", c->sync.rank);
	k = round_key(c, what);
	tcpstore_client_set(c->aux, k, info, strlen(info), NULL, NULL);
	free(k);
	free(info);
	if (c->sync.rank == 0) {
		for (int i = 0; i < c->sync.world; i++) {
			snprintf(what, sizeof(what), "torchelastic/role_info/%d", i);
			strv_consume(&c->exchange_keys, round_key(c, what));
		}
		(void)tcpstore_client_keys(c->aux, TCPSTORE_CMD_WAIT,
					   (const char *const *)c->exchange_keys,
					   (size_t)c->sync.world, left, leader_wait_cb, c);
	} else {
		strv_consume(&c->exchange_keys, round_key(c, "elasticd/round"));
		strv_consume(&c->exchange_keys, round_key(c, "MASTER_ADDR"));
		strv_consume(&c->exchange_keys, round_key(c, "MASTER_PORT"));
		(void)tcpstore_client_keys(c->aux, TCPSTORE_CMD_WAIT,
					   (const char *const *)c->exchange_keys, 3, left,
					   member_wait_cb, c);
	}
}

static void
join_done(void *arg, int err, enum rdzv_action a)
{
	struct c10d *c = arg;
	const char *id = c->r->cfg->rdzv_id;
	char *msg = NULL;

	if (err < 0) {
		msg = c->dead ? xstrdup(c->dead_msg)
			      : xasprintf("the rendezvous state in the store is corrupt (%s)",
					  strerror(-err));
		next_fail(c, err, msg);
		free(msg);
		return;
	}
	turn_release(c);
	if (a == RDZV_ACTION_FINISH) {
		exchange_start(c);
		return;
	}
	err = rdzv_join_failure(a, id, c->join_timeout, c->sync.peak_count, c->settings.min_nodes,
				c->sync.st.round, &msg);
	if (a == RDZV_ACTION_ERROR_CLOSED) {
		rdzv_join_closed(c->r, &c->sync.st, &msg);
	}
	next_fail(c, err, msg);
	free(msg);
}

static void
exit_done(void *arg, int err, enum rdzv_action a)
{
	struct c10d *c = arg;
	if (err < 0 || a != RDZV_ACTION_FINISH) {
		join_done(c, err, a == RDZV_ACTION_FINISH ? RDZV_ACTION_ERROR_TIMEOUT : a);
		return;
	}
	if (c->coordinated) {
		/* Out of the last round: ask the coordinator to admit us. */
		ask_to_join(c);
	}
	rdzv_sync_start(&c->sync, RDZV_OP_JOIN, c->sync.next_deadline, join_done);
}

static void
turn_release(struct c10d *c)
{
	char *k;

	if (!c->turn_held || c->dead) {
		c->turn_held = false;
		return;
	}
	c->turn_held = false;
	k = xasprintf("%s/served", c->key);
	tcpstore_client_add(c->cmd, k, 1, NULL, NULL);
	free(k);
	k = xasprintf("%s/turn/%" PRId64, c->key, c->ticket + 1);
	tcpstore_client_set(c->cmd, k, "", 0, NULL, NULL);
	free(k);
	k = xasprintf("%s/turn/%" PRId64, c->key, c->ticket);
	tcpstore_client_delete(c->cmd, k, NULL, NULL);
	free(k);
}

static void
turn_go(struct c10d *c)
{
	if (!c->sync.next_active) {
		return;
	}
	c->turn_held = true;
	rdzv_sync_start(&c->sync, RDZV_OP_EXIT, c->sync.next_deadline, exit_done);
}

static void served_cb(int err, const struct tcpstore_reply *rep, void *arg);

static void
turn_wait_cb(int err, const struct tcpstore_reply *rep, void *arg)
{
	struct c10d *c = arg;
	char *k;

	if (err < 0 && err != -ETIMEDOUT) {
		store_gone(c, err);
		return;
	}
	if (err == 0) {
		turn_go(c);
		return;
	}
	/* Timed out: go unless the queue moved meanwhile (a crowd's turns
	 * take a while; only a stuck one is skipped). */
	k = xasprintf("%s/served", c->key);
	tcpstore_client_add(c->cmd, k, 0, served_cb, c);
	free(k);
}

static void
served_cb(int err, const struct tcpstore_reply *rep, void *arg)
{
	struct c10d *c = arg;
	int64_t ahead;
	char *k;
	const char *keys[1];

	if (err < 0) {
		store_gone(c, err);
		return;
	}
	ahead = c->ticket - 1 - rep->i64;
	if (ahead <= 0 || (c->served_seen >= 0 && rep->i64 == c->served_seen)) {
		/* Our turn, or nobody went ahead for a whole wait. */
		turn_go(c);
		return;
	}
	c->served_seen = rep->i64;
	/* Wait for the node before us, a little longer the further back we are. */
	k = xasprintf("%s/turn/%" PRId64, c->key, c->ticket);
	keys[0] = k;
	(void)tcpstore_client_keys(c->aux, TCPSTORE_CMD_WAIT, keys, 1,
				   USEC_PER_SEC + (uint64_t)ahead * 10 * USEC_PER_MSEC,
				   turn_wait_cb, c);
	free(k);
}

static void
ticket_cb(int err, const struct tcpstore_reply *rep, void *arg)
{
	struct c10d *c = arg;
	char *k;

	if (err < 0) {
		store_gone(c, err);
		return;
	}
	c->ticket = rep->i64;
	c->served_seen = -1;
	k = xasprintf("%s/served", c->key);
	tcpstore_client_add(c->cmd, k, 0, served_cb, c);
	free(k);
}

static void
coordinator_check_cb(int err, const struct tcpstore_reply *rep, void *arg)
{
	struct c10d *c = arg;
	char *k;

	if (err < 0) {
		store_gone(c, err);
		return;
	}
	if (rep->status == TCPSTORE_READY) {
		c->coordinated = true;
		keep_alive_arm(c); /* through our own key from now on */
		if (c->ever_in) {
			rdzv_sync_start(&c->sync, RDZV_OP_EXIT, c->sync.next_deadline, exit_done);
		} else {
			/* Never a participant: nothing to leave. */
			exit_done(c, 0, RDZV_ACTION_FINISH);
		}
		return;
	}
	/* A store without a coordinator (not hosted by an agent): turns. */
	k = xasprintf("%s/ticket", c->key);
	tcpstore_client_add(c->cmd, k, 1, ticket_cb, c);
	free(k);
}

static void
start_next(struct c10d *c)
{
	char *k;
	const char *keys[1];

	if (c->coordinator) {
		rdzv_sync_start(&c->sync, RDZV_OP_EXIT, c->sync.next_deadline, exit_done);
		return;
	}
	k = xasprintf("%s/coordinator", c->key);
	keys[0] = k;
	(void)tcpstore_client_keys(c->cmd, TCPSTORE_CMD_CHECK, keys, 1, 0, coordinator_check_cb, c);
	free(k);
}

static int
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
		next_fail(c, -ECONNRESET, c->dead_msg);
		return 0;
	}
	if (c->sync.op_active) {
		/* A keep-alive under way: take over its loop with the exit op. */
		rdzv_sync_start(&c->sync, RDZV_OP_EXIT, c->sync.next_deadline, exit_done);
		return 0;
	}
	if (!c->up) {
		struct timeval tv = {5, 0};

		c->next_pending = true;
		evtimer_add(c->connect_log_timer, &tv);
		return 0;
	}
	start_next(c);
	return 0;
}

/* ---- keep-alive while a round runs -------------------------------------- */

static void
ka_done(void *arg, int err, enum rdzv_action a)
{
	struct c10d *c = arg;
	if (!c->dead && !c->finishing) {
		keep_alive_arm(c);
	}
	if (err < 0 || a == RDZV_ACTION_ERROR_TIMEOUT) {
		/* Torch swallows it (the timer goes on); the event says FAILED. */
		rdzv_record_step(
			c->r, NODE_STATE_FAILED, "_keep_alive",
			"The node '%s' has failed to send a keep-alive heartbeat to the rendezvous "
			"'%s' due to an error: %s",
			c->me.name, c->r->cfg->rdzv_id,
			err < 0 ? strerror(-err) : "the operation timed out");
		return;
	}
	if (a == RDZV_ACTION_KEEP_ALIVE || a == RDZV_ACTION_FINISH) {
		rdzv_record_step(c->r, NODE_STATE_RUNNING, "_keep_alive",
				 "The node '%s' has sent a keep-alive heartbeat to the rendezvous "
				 "'%s'.",
				 c->me.name, c->r->cfg->rdzv_id);
	}
}

static void
ka_timer_cb(evutil_socket_t fd, short what, void *arg)
{
	struct c10d *c = arg;

	if (c->dead || c->finishing) {
		return;
	}
	if (c->coordinated) {
		/* Our own key, no read of the state: the coordinator folds it. */
		hb_send(c);
		rdzv_record_step(
			c->r, NODE_STATE_RUNNING, "_keep_alive",
			"The node '%s' has sent a keep-alive heartbeat to the rendezvous '%s'.",
			c->me.name, c->r->cfg->rdzv_id);
		keep_alive_arm(c);
		return;
	}
	if (!c->sync.op_active && !c->sync.io_pending) {
		rdzv_sync_start(&c->sync, RDZV_OP_KEEP_ALIVE, now_usec() + c->heartbeat_timeout,
				ka_done);
	} else {
		/* Busy: an operation writes our heartbeat when due anyway. */
		keep_alive_arm(c);
	}
}

/* Fire just after our heartbeat falls due (a timer of exactly the interval
 * would find it not quite due half the time and skip a beat). */
static void
keep_alive_arm(struct c10d *c)
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

static void
barrier_wait_cb(int err, const struct tcpstore_reply *rep, void *arg)
{
	struct c10d *c = arg;
	char *msg;

	if (!c->sync.barrier) {
		return;
	}
	c->sync.barrier = false;
	if (err == 0) {
		rdzv_tell(c->r, RDZV_TELL_FINISHED, 0, 0, NULL);
		return;
	}
	msg = err == -ETIMEDOUT
		      ? xasprintf(
				"the exit barrier timed out after %.0f s: not every node of round "
				"%" PRId64 " finished",
				(double)c->barrier_timeout / 1e6, c->sync.round)
		      : xstrdup(c->dead_msg ? c->dead_msg : strerror(-err));
	rdzv_tell(c->r, RDZV_TELL_FINISHED, err, 0, msg);
	free(msg);
}

static void
barrier_add_cb(int err, const struct tcpstore_reply *rep, void *arg)
{
	struct c10d *c = arg;
	char *k = round_key(c, "torchelastic/agent/terminal_state/last_member");
	const char *keys[1] = {k};

	if (err < 0) {
		barrier_wait_cb(err, NULL, c);
		free(k);
		return;
	}
	if (rep->i64 == c->sync.world) {
		tcpstore_client_set(c->aux, k, "1", 1, NULL, NULL);
	}
	(void)tcpstore_client_keys(c->aux, TCPSTORE_CMD_WAIT, keys, 1, c->barrier_timeout,
				   barrier_wait_cb, c);
	free(k);
}

static int
c10d_exit_barrier(struct rdzv *r)
{
	struct c10d *c = backend(r);
	char *k;

	c->sync.running = false;
	if (!c->prefix || c->dead) {
		rdzv_tell(c->r, RDZV_TELL_FINISHED, c->dead ? -ECONNRESET : 0, 0,
			  c->dead ? c->dead_msg : NULL);
		return 0;
	}
	c->sync.barrier = true;
	k = round_key(c, "torchelastic/agent/terminal_state/num_members");
	tcpstore_client_add(c->aux, k, 1, barrier_add_cb, c);
	free(k);
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

static void
linger_cb(evutil_socket_t fd, short what, void *arg)
{
	linger_end(arg);
}

/* Let the other nodes finish with our store before we go. */
static void
linger_start(struct c10d *c)
{
	tcpstore_client_free(c->cmd);
	tcpstore_client_free(c->watch);
	tcpstore_client_free(c->aux);
	c->cmd = c->watch = c->aux = NULL;
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

/* Leave once what we queued on cmd (the closed state's gen key, which wakes
 * the nodes that wait on it) has reached the store: a request with a reply
 * comes back only after the ones before it were served. */
static void
fence_then_linger(struct c10d *c)
{
	char *k = gen_key(c, c->sync.st.gen);
	const char *keys[1] = {k};
	int r = c->cmd && !c->dead && c->up
			? tcpstore_client_keys(c->cmd, TCPSTORE_CMD_CHECK, keys, 1, 0, fence_cb, c)
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

static int
c10d_finish(struct rdzv *r, bool close)
{
	struct c10d *c = backend(r);
	enum rdzv_op op = close ? RDZV_OP_CLOSE : RDZV_OP_LEAVE;
	op_done_fn done = close ? close_done : leave_done;

	c->sync.running = false;
	c->sync.barrier = false;
	c->sync.next_active = false;
	c->finishing = true;
	evtimer_del(c->ka_timer);
	turn_release(c);
	if (c->watch && c->watching) {
		(void)tcpstore_client_cancel_wait(c->watch);
		c->watching = false;
	}
	if (c->dead || !c->up) {
		linger_start(c);
		return 0;
	}
	/* Takes over the operation under way (a keep-alive, a join). */
	rdzv_sync_start(&c->sync, op, now_usec() + c->close_timeout, done);
	return 0;
}

static void
c10d_shutdown(struct rdzv *r)
{
	struct c10d *c = backend(r);

	if (!c->finishing) {
		(void)c10d_finish(r, true);
	}
}

static int
c10d_num_nodes_waiting(struct rdzv *r)
{
	return (int)backend(r)->sync.st.n_wait_list;
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

	if (rdzv_parse_endpoint(endpoint, C10D_DEFAULT_PORT, &c->host, &c->port, &why) < 0) {
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
	rdzv_state_init(&c->sync.st);
	if ((is_host = c10d_settings(c, cfg, reterr)) == -EINVAL) {
		return -EINVAL;
	}
	rdzv_sync_init(&c->sync, r, &c10d_store_ops, c, &c->settings, &c->me, c->join_timeout);

	/* Host the store when the endpoint is ours; with several agents on the
	 * endpoint host the first one to bind hosts, the others connect. */
	if (is_host != 0 &&
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
	c->fold_timer = evtimer_new(r->base, fold_timer_cb, c);
	if (c->server) {
		char *k = xasprintf("%s/coordinator", c->key), *jp = xasprintf("%s/j/", c->key);

		tcpstore_server_set_notice_cb(c->server, rdzv_store_notice, r);

		/* We admit the others: say so before anybody connects. */
		c->coordinator = true;
		fold_timer_cb(-1, 0, c); /* arms it */
		(void)tcpstore_server_put(c->server, k, c->me.name, strlen(c->me.name));
		tcpstore_server_on_set(c->server, jp, join_request_cb, c);
		free(k);
		free(jp);
		c->connect_host = xstrdup(strchr(c->host, ':') ? "::1" : "127.0.0.1");
		c->connect_port = tcpstore_server_port(c->server);
		rdzv_record_step(c->r, NODE_STATE_INIT, "_create_tcp_store",
				 "Process %d hosts the TCP store for the C10d rendezvous backend.",
				 (int)getpid());
	} else {
		c->connect_host = xstrdup(c->host);
		c->connect_port = c->port;
	}
	if (c->port == 0) {
		/* --standalone: the port the system gave us. */
		c->port = c->connect_port;
	}
	c->ka_timer = evtimer_new(r->base, ka_timer_cb, c);
	c->linger_timer = evtimer_new(r->base, linger_cb, c);
	c->connect_log_timer = evtimer_new(r->base, connect_log_cb, c);
	c->cmd = new_client(c);
	c->watch = new_client(c);
	c->aux = new_client(c);
	deadline = now_usec() + c->join_timeout;
	tcpstore_client_connect(c->cmd, deadline);
	tcpstore_client_connect(c->watch, deadline);
	tcpstore_client_connect(c->aux, deadline);
	return 0;
}

static void
c10d_free(struct rdzv *r)
{
	struct c10d *c = r->backend;

	if (!c) {
		return;
	}
	tcpstore_client_free(c->cmd);
	tcpstore_client_free(c->watch);
	tcpstore_client_free(c->aux);
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
	rdzv_result_release(&c->result);
	strv_free(c->roles);
	strv_free(c->exchange_keys);
	joiners_clear(c);
	free(c->joiners);
	if (c->admit_ev) {
		event_free(c->admit_ev);
	}
	if (c->fold_timer) {
		event_free(c->fold_timer);
	}
	free(c->token);
	free(c->pending);
	free(c->key);
	free(c->prefix);
	free(c->host);
	free(c->connect_host);
	free(c->dead_msg);
	free(c);
	r->backend = NULL;
}

/* The local copy as it is: heartbeats folded by the store host. */
static int
c10d_snapshot(struct rdzv *r, struct rdzv_snapshot *ret)
{
	struct c10d *c = backend(r);

	*ret = (struct rdzv_snapshot){
		.backend = "c10d",
		.self = xstrdup(c->me.name),
		.read_usec = c->sync.read_usec > 0 ? c->sync.read_usec : -1,
		.liveness = RDZV_LIVENESS_HEARTBEAT,
		.heartbeat_timeout_usec = (uint64_t)c->settings.keep_alive_interval_usec *
					  (uint64_t)c->settings.keep_alive_max_attempt,
	};
	rdzv_state_copy(&ret->st, &c->sync.st);
	return 0;
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
};
