/* rdzv_etcd.c — torch's dynamic rendezvous with its state in an etcd v3
 * cluster (through the JSON gateway, etcd_client.h), so that the job outlives
 * any one node. The decisions are rdzv_dynamic.h's, the encoding
 * rdzv_state.h's; this file is the transport, as rdzv_c10d.c is for a
 * TCPStore.
 *
 * Keys, all under one prefix per run id (--rdzv-conf etcd_prefix, default
 * "/elasticd/<run_id>/"):
 *   state            the encoded rdzv_state; compare-and-set on its
 *                    mod_revision through /v3/kv/txn (create_revision 0
 *                    when absent); a lost race returns the current value in
 *                    the same round trip
 *   w/alive/<node>   one key per agent, attached to the agent's lease (TTL
 *                    keep_alive_interval * keep_alive_max_attempt, refreshed
 *                    every TTL/3): liveness is the lease, so a dead node's key
 *                    vanishes by itself. Before each decision the state's
 *                    heartbeats are replaced by "now" for live nodes and
 *                    "never" for the others, so rdzv_sanitize drops exactly
 *                    the nodes whose lease expired, and nodes never write
 *                    heartbeats alone.
 *   w/gen            put in the same txn as a state change that waiting
 *                    nodes must hear about (rdzv_apply's "notable")
 *   w/x/<round>/<rank> rank exchange: role, local world size; rank 0 adds
 *                    MASTER_ADDR and a free MASTER_PORT
 *   w/b/<round>/<rank> exit barrier
 * Waiting never polls: one watch on w/ (resumed from its last revision after
 * a drop, moved to the member the unary calls use after a fail-over)
 * triggers a re-read; the state key itself is outside it, so a join that
 * nobody waits for is not broadcast to every node. Timers only re-run the
 * pure decision on the local copy (last-call and join deadlines). A node that
 * loses a compare-and-set retries after a pause set by its order of arrival
 * (retry_pause).
 *
 * MASTER_ADDR/MASTER_PORT: group rank 0's address (--local-addr, else the
 * FQDN) and a free port there; TORCHELASTIC_USE_AGENT_STORE=False (as torch's
 * etcd backends): worker rank 0 hosts the workers' TCPStore.
 *
 * Closing: the node that closes writes closed; every leaving node revokes its
 * lease, and the last one (no alive keys left) deletes the prefix. An agent
 * that starts and finds a closed state with no live node deletes it too, so a
 * reused run id starts clean. */
#include <errno.h>
#include <event2/event.h>
#include <inttypes.h>
#include <jansson.h>
#include <netinet/in.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "config.h"
#include "etcd_client.h"
#include "events.h"
#include "rdzv.h"
#include "rdzv_dynamic.h"
#include "rdzv_state.h"
#include "util.h"

/* Pause before retrying after etcd could not be reached at all. */
#define RETRY_USEC (1 * USEC_PER_SEC)
/* At most one "cannot reach etcd" line per this span. */
#define ERR_LOG_USEC (10 * USEC_PER_SEC)

static long long next_local_id;

struct etcdr;
typedef void (*op_done_fn)(struct etcdr *c, int err, enum rdzv_action a);

enum boot {
	BOOT_LEASE, /* granting the lease */
	BOOT_CLEAN, /* looking for a stale closed rendezvous */
	BOOT_ALIVE, /* writing alive/<node> */
	BOOT_READY,
	BOOT_FAILED,
};

enum fin {
	FIN_NONE,
	FIN_CLOSE,  /* the close op */
	FIN_REVOKE, /* revoking the lease */
	FIN_CHECK,  /* anybody left? */
	FIN_DELETE, /* deleting the prefix */
};

struct etcdr {
	struct rdzv *r;
	struct rdzv_settings settings;
	uint64_t join_timeout;
	uint64_t close_timeout;
	uint64_t barrier_timeout;
	int64_t ttl;

	struct etcd_client *cl;
	struct etcd_watch *watch;
	char *prefix;
	char *prefix_end;
	char *state_key;
	char *alive_prefix;
	char *alive_end;
	char *alive_key;
	char *gen_key;      /* put with every change waiting nodes must hear of */
	char *watch_prefix; /* "w/": everything but the state itself */
	char *watch_end;
	struct rdzv_node me;

	enum boot boot;
	uint64_t boot_deadline;
	int64_t lease;
	struct event *retry_timer;
	struct event *boot_timer;
	struct event *ka_timer;
	bool ka_pending;
	uint64_t err_logged;
	char *boot_err; /* why the boot's last try failed */

	/* The local copy. */
	struct rdzv_state st;
	int64_t mod_rev;     /* of the state key; 0: absent */
	int64_t rev;         /* header revision of the last read */
	char **alive;        /* nodes with a live lease */
	int64_t *alive_crev; /* the create_revision of each one's key */
	struct etcd_range xkeys, bkeys;

	/* The I/O lane: one read or compare-and-set at a time. */
	bool io_pending;
	bool kick_pending;
	bool notable;

	/* The operation under way. */
	bool op_active;
	enum rdzv_op op;
	uint64_t op_deadline;
	op_done_fn op_done;
	bool in_sync;
	bool lost; /* pausing after a lost compare-and-set */
	struct event *sync_timer;

	/* next_rendezvous */
	bool next_active;
	bool next_pending;
	uint64_t next_deadline;
	size_t last_count;
	size_t peak_count;

	/* The round. */
	bool exchanging;
	bool running;
	bool told;
	bool barrier;
	int64_t round;
	int rank;
	int world;
	struct rdzv_result result;
	char **roles;
	struct event *aux_timer; /* exchange / barrier deadline */

	enum fin fin;
	bool fin_close;
	enum node_state node_state;
};

/* ---- helpers ------------------------------------------------------------ */

static struct etcdr *
backend(struct rdzv *r)
{
	return r->backend;
}

static void emit(struct etcdr *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void
emit(struct etcdr *c, const char *fmt, ...)
{
	va_list ap;
	char *msg;

	if (!c->r->cb.progress) {
		return;
	}
	va_start(ap, fmt);
	if (vasprintf(&msg, fmt, ap) < 0) {
		va_end(ap);
		return;
	}
	va_end(ap);
	c->r->cb.progress(msg, c->r->cb.arg);
	free(msg);
}

/* This node's NodeState: an RdzvEvent per step, a log line per transition. */
static void
set_state(struct etcdr *c, enum node_state s, const char *fn, const char *msg)
{
	if (c->r->events && events_enabled(c->r->events) && strcmp(fn, "next_rendezvous") != 0) {
		char *name = xasprintf("rdzv_etcd.c:%s", fn);

		(void)events_record_rdzv(c->r->events, name, s, c->running ? c->rank : -1, "%s",
					 msg);
		free(name);
	}
	if (s != c->node_state) {
		emit(c, "rendezvous node %s -> %s (%s)", node_state_name(c->node_state),
		     node_state_name(s), msg);
		c->node_state = s;
	}
}

struct deferred {
	struct etcdr *c;
	int kind; /* 0 done, 1 finished, 2 failed, 3 nodes_waiting */
	int err;
	int n;
	char *msg;
};

static void
deferred_cb(evutil_socket_t fd, short what, void *arg)
{
	struct deferred *d = arg;
	struct rdzv *r = d->c->r;

	switch (d->kind) {
	case 0:
		r->cb.done(d->err, NULL, d->msg, r->cb.arg);
		break;
	case 1:
		if (r->cb.finished) {
			r->cb.finished(d->err, d->msg, r->cb.arg);
		}
		break;
	case 2:
		if (r->cb.failed) {
			r->cb.failed(d->err, d->msg, r->cb.arg);
		}
		break;
	case 3:
		if (r->cb.nodes_waiting) {
			r->cb.nodes_waiting(d->n, d->msg, r->cb.arg);
		}
		break;
	}
	free(d->msg);
	free(d);
}

/* Tell the agent from a fresh loop turn. */
static void
defer(struct etcdr *c, int kind, int err, int n, const char *msg)
{
	struct deferred *d = xcalloc(1, sizeof(*d));

	d->c = c;
	d->kind = kind;
	d->err = err;
	d->n = n;
	d->msg = msg ? xstrdup(msg) : NULL;
	if (event_base_once(c->r->base, -1, EV_TIMEOUT, deferred_cb, d, NULL) < 0) {
		free(d->msg);
		free(d);
	}
}

static void
timer_usec(struct event *ev, uint64_t usec)
{
	struct timeval tv = {(time_t)(usec / USEC_PER_SEC), (suseconds_t)(usec % USEC_PER_SEC)};

	evtimer_add(ev, &tv);
}

static bool
is_alive(const struct etcdr *c, const char *name)
{
	size_t lo = 0, hi = strv_length(c->alive);

	/* etcd returns a range sorted by key: the names are in byte order. */
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		int d = strcmp(c->alive[mid], name);

		if (d == 0) {
			return true;
		}
		if (d < 0) {
			lo = mid + 1;
		} else {
			hi = mid;
		}
	}
	return false;
}

/* Heartbeats from leases: live nodes "now", the others "never". */
static void
overlay(struct etcdr *c, int64_t now_wall)
{
	for (size_t i = 0; i < c->st.n_heartbeats; i++) {
		c->st.heartbeats[i].usec =
			is_alive(c, c->st.heartbeats[i].node.name) ? now_wall : 0;
	}
}

static char *
round_prefix(const struct etcdr *c, char kind, int64_t round)
{
	return xasprintf("%sw/%c/%" PRId64 "/", c->prefix, kind, round);
}

static void next_fail(struct etcdr *c, int err, const char *msg);
static void op_end(struct etcdr *c, int err, enum rdzv_action a);
static void op_step(struct etcdr *c);
static void read_all(struct etcdr *c);
static void after_io(struct etcdr *c);
static void exchange_check(struct etcdr *c);
static void barrier_check(struct etcdr *c);

/* etcd could not be reached (every member tried): log, retry until the
 * deadline of whatever waits. */
static void
io_failed(struct etcdr *c, int err, const char *msg)
{
	uint64_t now = now_usec();

	if (c->err_logged == 0 || now - c->err_logged >= ERR_LOG_USEC) {
		c->err_logged = now;
		emit(c, "cannot reach etcd (%s); retrying%s", msg,
		     c->next_active ? " until the join timeout" : "");
	}
	if (c->op_active && !c->next_active && now >= c->op_deadline) {
		/* The close op: give up, the lease still goes. */
		op_end(c, -ETIMEDOUT, RDZV_ACTION_ERROR_TIMEOUT);
		return;
	}
	if (c->next_active && now >= c->next_deadline) {
		char *m = xasprintf("the rendezvous '%s' cannot reach etcd before the join "
				    "timeout of %g s: %s",
				    c->r->cfg->rdzv_id, (double)c->join_timeout / 1e6, msg);

		c->op_active = false;
		next_fail(c, err, m);
		free(m);
		return;
	}
	c->kick_pending = true;
	timer_usec(c->retry_timer, RETRY_USEC);
}

/* ---- reading and writing the state -------------------------------------- */

static void
observe(struct etcdr *c)
{
	const struct rdzv_state *st = &c->st;
	long me;
	char *msg = NULL;

	if (c->barrier && st->closed) {
		c->barrier = false;
		evtimer_del(c->aux_timer);
		defer(c, 1, 0, 0, NULL);
		return;
	}
	if (!c->running || c->told) {
		return;
	}
	me = rdzv_state_find_participant(st, &c->me);
	if (st->closed) {
		c->told = true;
		defer(c, 2, -ECONNABORTED, 0,
		      "the rendezvous was closed by another node (its workers failed or the job "
		      "ended)");
		return;
	}
	if (st->round != c->round || !st->complete || me < 0) {
		msg = xasprintf("this node is no longer in round %" PRId64 " of the rendezvous",
				c->round);
		c->told = true;
		defer(c, 3, 0, 0, msg);
	} else if (st->n_participants < (size_t)c->world) {
		msg = xasprintf("%zu of the %d nodes of round %" PRId64 " left",
				(size_t)c->world - st->n_participants, c->world, c->round);
		c->told = true;
		defer(c, 3, 0, 0, msg);
	} else if (st->n_wait_list > 0) {
		msg = xasprintf("Detected %zu new nodes from group_rank=%d", st->n_wait_list,
				c->rank);
		c->told = true;
		defer(c, 3, 0, (int)st->n_wait_list, msg);
	}
	free(msg);
}

static void
report_progress(struct etcdr *c)
{
	const struct rdzv_state *st = &c->st;

	if (!c->next_active || st->n_participants == c->last_count || st->complete) {
		return;
	}
	c->last_count = st->n_participants;
	if (st->n_participants < (size_t)c->settings.min_nodes) {
		emit(c,
		     "rendezvous '%s' round %" PRId64 ": %zu of %d nodes joined; awaiting %zu more",
		     c->r->cfg->rdzv_id, st->round, st->n_participants, c->settings.min_nodes,
		     (size_t)c->settings.min_nodes - st->n_participants);
	} else {
		emit(c, "rendezvous '%s' round %" PRId64 ": %zu nodes joined, min %d max %d",
		     c->r->cfg->rdzv_id, st->round, st->n_participants, c->settings.min_nodes,
		     c->settings.max_nodes);
	}
}

/* Take a txn answer's ranges: [state, alive, x/<round>/, b/<round>/]. */
static int
absorb(struct etcdr *c, const struct etcd_response *resp)
{
	const struct etcd_range *sr = &resp->ranges[0];
	struct rdzv_state st;
	bool notable = false;
	size_t plen = strlen(c->alive_prefix), dropped;

	if (resp->n_ranges < 2) {
		return -EBADMSG;
	}
	if (sr->n_kvs == 0) {
		rdzv_state_init(&st);
		c->mod_rev = 0;
	} else if (rdzv_state_decode(sr->kvs[0].value, sr->kvs[0].value_len, &st) < 0) {
		return -EBADMSG;
	} else {
		c->mod_rev = sr->kvs[0].mod_revision;
	}
	rdzv_state_release(&c->st);
	c->st = st;
	c->rev = resp->revision;
	strv_free(c->alive);
	c->alive = NULL;
	free(c->alive_crev);
	c->alive_crev = xcalloc(resp->ranges[1].n_kvs + 1, sizeof(*c->alive_crev));
	for (size_t i = 0, n = 0; i < resp->ranges[1].n_kvs; i++) {
		const struct etcd_kv *kv = &resp->ranges[1].kvs[i];

		if (kv->key_len > plen) {
			strv_push(&c->alive, kv->key + plen);
			c->alive_crev[n++] = kv->create_revision;
		}
	}
	if (c->next_active && !st.complete && st.n_participants > c->peak_count) {
		c->peak_count = st.n_participants;
	}
	overlay(c, (int64_t)wall_usec());
	dropped = rdzv_sanitize(&c->st, &c->settings, (int64_t)wall_usec(), &notable);
	c->notable = notable;
	if (dropped > 0 && c->r->events && events_enabled(c->r->events)) {
		char *m = xasprintf("%zu node(s) have been removed from the rendezvous '%s' since "
				    "their lease expired",
				    dropped, c->r->cfg->rdzv_id);

		set_state(c, c->node_state, "_sanitize", m);
		free(m);
	}
	for (size_t k = 0; k < 2; k++) {
		struct etcd_range *dst = k ? &c->bkeys : &c->xkeys;

		for (size_t i = 0; i < dst->n_kvs; i++) {
			free(dst->kvs[i].key);
			free(dst->kvs[i].value);
		}
		free(dst->kvs);
		memset(dst, 0, sizeof(*dst));
		if (resp->n_ranges > 2 + k) {
			const struct etcd_range *src = &resp->ranges[2 + k];

			dst->kvs = xcalloc(src->n_kvs + 1, sizeof(*dst->kvs));
			for (size_t i = 0; i < src->n_kvs; i++) {
				dst->kvs[i] = src->kvs[i];
				dst->kvs[i].key = xstrndup(src->kvs[i].key, src->kvs[i].key_len);
				dst->kvs[i].value =
					xstrndup(src->kvs[i].value, src->kvs[i].value_len);
			}
			dst->n_kvs = src->n_kvs;
		}
	}
	observe(c);
	report_progress(c);
	return 0;
}

/* The four ranges every read asks for. */
static void
read_ops(struct etcdr *c, struct etcd_op ops[4], char *xb[4])
{
	int64_t round = c->exchanging || c->running || c->barrier ? c->round : -1;
	size_t n;

	xb[0] = round_prefix(c, 'x', round);
	xb[1] = etcd_prefix_end(xb[0], strlen(xb[0]), &n);
	xb[2] = round_prefix(c, 'b', round);
	xb[3] = etcd_prefix_end(xb[2], strlen(xb[2]), &n);
	ops[0] = (struct etcd_op){.kind = ETCD_OP_RANGE, .key = c->state_key};
	ops[1] = (struct etcd_op){.kind = ETCD_OP_RANGE,
				  .key = c->alive_prefix,
				  .range_end = c->alive_end,
				  .keys_only = true};
	ops[2] = (struct etcd_op){.kind = ETCD_OP_RANGE, .key = xb[0], .range_end = xb[1]};
	ops[3] = (struct etcd_op){.kind = ETCD_OP_RANGE, .key = xb[2], .range_end = xb[3]};
}

static void
read_cb(int err, const struct etcd_response *resp, const char *errmsg, void *arg)
{
	struct etcdr *c = arg;

	c->io_pending = false;
	if (err < 0) {
		io_failed(c, err, errmsg);
		return;
	}
	etcd_watch_follow(c->watch);
	if (absorb(c, resp) < 0) {
		if (c->op_active) {
			c->op_active = false;
			if (c->op_done) {
				c->op_done(c, -EBADMSG, RDZV_ACTION_ERROR_CLOSED);
			}
		}
		return;
	}
	after_io(c);
}

static void
read_all(struct etcdr *c)
{
	struct etcd_op ops[4];
	char *xb[4], *body;

	if (c->io_pending) {
		c->kick_pending = true;
		return;
	}
	c->kick_pending = false;
	c->in_sync = false;
	evtimer_del(c->sync_timer);
	evtimer_del(c->retry_timer);
	read_ops(c, ops, xb);
	body = etcd_encode_txn(NULL, 0, ops, 4, NULL, 0);
	c->io_pending = true;
	(void)etcd_client_call(c->cl, "/v3/kv/txn", body, read_cb, c);
	free(body);
	for (int i = 0; i < 4; i++) {
		free(xb[i]);
	}
}

/* The pause after a lost compare-and-set: nodes that arrived together (their
 * alive keys created close together) and are not in the state yet go in the
 * order of arrival, about 2 ms apart, instead of all losing to each other
 * again (torch's loop collapses near 128 nodes, reference §8). A hint only:
 * the compare-and-set keeps it correct. */
static uint64_t
retry_pause(const struct etcdr *c)
{
	int64_t mine = -1;
	uint64_t ahead = 0;

	for (size_t i = 0; c->alive && c->alive[i]; i++) {
		if (strcmp(c->alive[i], c->me.name) == 0) {
			mine = c->alive_crev[i];
		}
	}
	for (size_t i = 0; mine >= 0 && c->alive && c->alive[i]; i++) {
		struct rdzv_node n;

		if (c->alive_crev[i] >= mine ||
		    rdzv_node_parse(&n, c->alive[i], strlen(c->alive[i])) < 0) {
			continue;
		}
		if (rdzv_state_find_participant(&c->st, &n) < 0 &&
		    rdzv_state_find_wait(&c->st, &n) < 0 &&
		    rdzv_state_find_redundant(&c->st, &n) < 0) {
			ahead++;
		}
		rdzv_node_release(&n);
	}
	ahead = ahead > 1000 ? 1000 : ahead;
	return ahead * 2000 + (uint64_t)random() % 1000;
}

static void
cas_cb(int err, const struct etcd_response *resp, const char *errmsg, void *arg)
{
	struct etcdr *c = arg;

	c->io_pending = false;
	if (err < 0) {
		/* The write may or may not have landed: re-read and re-decide. */
		io_failed(c, err, errmsg);
		return;
	}
	if (resp->succeeded) {
		c->mod_rev = resp->revision;
		c->rev = resp->revision;
		c->notable = false;
		if (c->next_active && !c->st.complete && c->st.n_participants > c->peak_count) {
			c->peak_count = c->st.n_participants;
		}
		observe(c);
		report_progress(c);
	} else if (absorb(c, resp) < 0) {
		if (c->op_active) {
			c->op_active = false;
			if (c->op_done) {
				c->op_done(c, -EBADMSG, RDZV_ACTION_ERROR_CLOSED);
			}
		}
		return;
	} else if (c->op_active) {
		/* Lost a race: the answer holds the fresh state. Retry after a
		 * random pause that grows with the crowd, so that nodes arriving
		 * together do not all lose to each other again. */
		c->in_sync = true;
		timer_usec(c->sync_timer, retry_pause(c));
		c->lost = true;
		return;
	}
	after_io(c);
}

static void
cas_write(struct etcdr *c)
{
	struct etcd_cmp cmp = {
		.key = c->state_key,
		.target = c->mod_rev ? ETCD_CMP_MOD : ETCD_CMP_CREATE,
		.revision = c->mod_rev,
	};
	struct etcd_op put[2] = {{.kind = ETCD_OP_PUT, .key = c->state_key},
				 {.kind = ETCD_OP_PUT, .key = c->gen_key}},
		       ops[4];
	char *xb[4], *value, *body, gen[32];
	size_t len;

	if (c->notable) {
		c->st.gen++;
	}
	value = rdzv_state_encode(&c->st, &len);
	put[0].value = value;
	put[0].value_len = len;
	/* Only a change waiting nodes must hear about wakes them (their watch
	 * covers w/, not the state): no broadcast of the whole state per join. */
	snprintf(gen, sizeof(gen), "%" PRIu64, c->st.gen);
	put[1].value = gen;
	put[1].value_len = strlen(gen);
	read_ops(c, ops, xb);
	body = etcd_encode_txn(&cmp, 1, put, c->notable ? 2 : 1, ops, 4);
	c->io_pending = true;
	(void)etcd_client_call(c->cl, "/v3/kv/txn", body, cas_cb, c);
	free(body);
	free(value);
	for (int i = 0; i < 4; i++) {
		free(xb[i]);
	}
}

/* After a read or a write: whoever waits on the state looks at it. */
static void
after_io(struct etcdr *c)
{
	if (c->op_active) {
		op_step(c);
	}
	if (c->exchanging) {
		exchange_check(c);
	}
	if (c->barrier) {
		barrier_check(c);
	}
	if (!c->io_pending && c->kick_pending) {
		read_all(c);
	}
}

static void
retry_cb(evutil_socket_t fd, short what, void *arg)
{
	read_all(arg);
}

/* ---- the operation loop ------------------------------------------------- */

static struct rdzv_ctx
make_ctx(const struct etcdr *c)
{
	struct rdzv_ctx ctx = {
		.settings = &c->settings,
		.node = &c->me,
		.now_wall = (int64_t)wall_usec(),
		.now_mono = now_usec(),
		.op_deadline = c->op_deadline,
	};

	return ctx;
}

static void
op_end(struct etcdr *c, int err, enum rdzv_action a)
{
	op_done_fn done = c->op_done;

	c->op_active = false;
	c->in_sync = false;
	evtimer_del(c->sync_timer);
	if (done) {
		done(c, err, a);
	}
}

static void
op_start(struct etcdr *c, enum rdzv_op op, uint64_t deadline, op_done_fn done)
{
	c->op_active = true;
	c->op = op;
	c->op_deadline = deadline;
	c->op_done = done;
	c->in_sync = false;
	read_all(c);
}

static void
record_action(struct etcdr *c, enum rdzv_action a)
{
	char *m;

	if (!c->r->events || !events_enabled(c->r->events)) {
		return;
	}
	m = xasprintf("%s: %s in round %" PRId64 " of the rendezvous '%s'. Pending sync.",
		      c->me.name, rdzv_action_name(a), c->st.round, c->r->cfg->rdzv_id);
	set_state(c,
		  a == RDZV_ACTION_MARK_RENDEZVOUS_COMPLETE ||
				  a == RDZV_ACTION_MARK_RENDEZVOUS_CLOSED
			  ? NODE_STATE_SUCCEEDED
			  : (c->node_state == NODE_STATE_INIT ? NODE_STATE_RUNNING : c->node_state),
		  rdzv_action_name(a), m);
	free(m);
}

static void
op_step(struct etcdr *c)
{
	struct rdzv_ctx ctx = make_ctx(c);
	enum rdzv_action a;

	overlay(c, ctx.now_wall);
	a = rdzv_decide(c->op, &c->st, &ctx);
	if (rdzv_action_is_mutation(a)) {
		if (rdzv_apply(&c->st, a, &ctx)) {
			c->notable = true;
		}
		if (a == RDZV_ACTION_REMOVE_FROM_REDUNDANCY_LIST) {
			c->op_deadline = now_usec() + c->join_timeout;
			c->next_deadline = c->op_deadline;
		}
		record_action(c, a);
		cas_write(c);
		return;
	}
	if (a == RDZV_ACTION_SYNC) {
		c->in_sync = true;
		if (c->kick_pending) {
			/* Something changed while we read or wrote. */
			return;
		}
		timer_usec(c->sync_timer, (uint64_t)rdzv_next_wake_usec(c->op, &c->st, &ctx));
		return;
	}
	op_end(c, 0, a);
}

static void
sync_timer_cb(evutil_socket_t fd, short what, void *arg)
{
	struct etcdr *c = arg;

	/* Only time passed: decide again on the local copy, no I/O. */
	if (c->op_active && c->in_sync && !c->io_pending) {
		c->in_sync = false;
		c->lost = false;
		op_step(c);
		if (!c->io_pending && c->kick_pending) {
			read_all(c);
		}
	}
}

/* ---- the watch ---------------------------------------------------------- */

/* Whether a batch of events can change anything for us: a node arriving
 * (alive put) cannot, until it writes the state (and then w/gen when it
 * matters); the rank exchange and the barrier only while we are in them. */
static bool
watch_relevant(const struct etcdr *c, const struct etcd_response *resp)
{
	size_t alen = strlen(c->alive_prefix), wlen = strlen(c->watch_prefix);

	for (size_t i = 0; i < resp->n_events; i++) {
		const struct etcd_event *ev = &resp->events[i];
		const char *k = ev->kv.key;

		if (ev->is_delete || strcmp(k, c->gen_key) == 0) {
			return true;
		}
		if (strncmp(k, c->alive_prefix, alen) == 0) {
			continue;
		}
		if (strncmp(k, c->watch_prefix, wlen) == 0 &&
		    ((k[wlen] == 'x' && c->exchanging) || (k[wlen] == 'b' && c->barrier))) {
			return true;
		}
	}
	return false;
}

static void
watch_cb(int err, const struct etcd_response *resp, bool reset, const char *errmsg, void *arg)
{
	struct etcdr *c = arg;

	if (err < 0) {
		emit(c, "%s; reconnecting", errmsg);
		return;
	}
	if (c->boot != BOOT_READY || c->fin == FIN_REVOKE || c->fin == FIN_DELETE) {
		return;
	}
	if (!reset && !watch_relevant(c, resp)) {
		return;
	}
	read_all(c);
}

/* ---- next_rendezvous ---------------------------------------------------- */

static void
next_fail(struct etcdr *c, int err, const char *msg)
{
	c->next_active = false;
	c->next_pending = false;
	c->exchanging = false;
	evtimer_del(c->aux_timer);
	set_state(c, NODE_STATE_FAILED, "next_rendezvous", msg);
	defer(c, 0, err, 0, msg);
}

static int
free_port(void)
{
	struct sockaddr_in6 sa = {.sin6_family = AF_INET6, .sin6_addr = IN6ADDR_ANY_INIT};
	socklen_t len = sizeof(sa);
	int fd = socket(AF_INET6, SOCK_STREAM | SOCK_CLOEXEC, 0), port = -EADDRNOTAVAIL;

	if (fd < 0) {
		struct sockaddr_in s4 = {.sin_family = AF_INET};

		fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
		len = sizeof(s4);
		if (fd >= 0 && bind(fd, (struct sockaddr *)&s4, len) == 0 &&
		    getsockname(fd, (struct sockaddr *)&s4, &len) == 0) {
			port = ntohs(s4.sin_port);
		}
	} else if (bind(fd, (struct sockaddr *)&sa, len) == 0 &&
		   getsockname(fd, (struct sockaddr *)&sa, &len) == 0) {
		port = ntohs(sa.sin6_port);
	}
	if (fd >= 0) {
		close(fd);
	}
	return port;
}

static void join_done(struct etcdr *c, int err, enum rdzv_action a);

static void
put_done_cb(int err, const struct etcd_response *resp, const char *errmsg, void *arg)
{
	struct etcdr *c = arg;

	if (err < 0) {
		emit(c, "%s", errmsg);
	}
	/* Our own put wakes our watch too; read anyway in case it is down. */
	read_all(c);
}

static void
exchange_start(struct etcdr *c)
{
	long me = rdzv_state_find_participant(&c->st, &c->me);
	const struct config *cfg = c->r->cfg;
	char *prefix, *key, *info;
	uint64_t now = now_usec();
	struct etcd_op put = {.kind = ETCD_OP_PUT};
	json_t *o;

	rdzv_result_release(&c->result);
	strv_free(c->roles);
	c->roles = NULL;
	c->round = c->st.round;
	c->rank = c->st.participants[me].rank;
	c->world = (int)c->st.n_participants;
	c->exchanging = true;
	o = json_pack("{sssi}", "role", cfg->role, "local_world_size", c->r->local_world_size);
	if (c->rank == 0) {
		int port = free_port();

		json_object_set_new(o, "master_addr",
				    json_string(cfg->local_addr && *cfg->local_addr
							? cfg->local_addr
							: host_fqdn()));
		json_object_set_new(o, "master_port", json_integer(port > 0 ? port : 29500));
	}
	info = json_dumps(o, JSON_COMPACT);
	json_decref(o);
	prefix = round_prefix(c, 'x', c->round);
	key = xasprintf("%s%d", prefix, c->rank);
	put.key = key;
	put.value = info;
	put.value_len = strlen(info);
	free(prefix);
	prefix = etcd_encode_op(&put);
	(void)etcd_client_call(c->cl, "/v3/kv/put", prefix, put_done_cb, c);
	free(prefix);
	free(key);
	free(info);
	timer_usec(c->aux_timer, c->next_deadline > now ? c->next_deadline - now : 1);
}

static void
exchange_check(struct etcdr *c)
{
	const struct config *cfg = c->r->cfg;
	struct rdzv_result *res = &c->result;
	char *msg;

	if (c->st.closed || c->st.round != c->round ||
	    rdzv_state_find_participant(&c->st, &c->me) < 0) {
		/* The round went on without us: join the next one. */
		c->exchanging = false;
		evtimer_del(c->aux_timer);
		if (!c->op_active) {
			op_start(c, RDZV_OP_JOIN, c->next_deadline, join_done);
		}
		return;
	}
	if (c->xkeys.n_kvs < (size_t)c->world) {
		return;
	}
	res->round = (int)c->round;
	res->group_rank = c->rank;
	res->group_world_size = c->world;
	res->nodes = xcalloc((size_t)c->world, sizeof(*res->nodes));
	c->roles = xcalloc((size_t)c->world + 1, sizeof(*c->roles));
	for (size_t i = 0; i < c->xkeys.n_kvs; i++) {
		const struct etcd_kv *kv = &c->xkeys.kvs[i];
		const char *slash = strrchr(kv->key, '/');
		long long rank;
		json_t *o = json_loadb(kv->value, kv->value_len, 0, NULL);
		json_t *role = json_object_get(o, "role"),
		       *lws = json_object_get(o, "local_world_size");

		if (!slash || parse_int(slash + 1, 0, c->world - 1, &rank) < 0 ||
		    !json_is_string(role) || !json_is_integer(lws) || json_integer_value(lws) < 1 ||
		    json_integer_value(lws) > 1 << 20 || c->roles[rank]) {
			json_decref(o);
			c->exchanging = false;
			next_fail(c, -EBADMSG, "the rank exchange in etcd holds a malformed entry");
			return;
		}
		c->roles[rank] = xstrdup(json_string_value(role));
		res->nodes[rank].role = c->roles[rank];
		res->nodes[rank].local_world_size = (int)json_integer_value(lws);
		if (rank == 0) {
			json_t *a = json_object_get(o, "master_addr"),
			       *p = json_object_get(o, "master_port");

			if (!json_is_string(a) || !json_is_integer(p)) {
				json_decref(o);
				c->exchanging = false;
				next_fail(c, -EBADMSG, "group rank 0 published no MASTER_ADDR");
				return;
			}
			free(res->master_addr);
			res->master_addr = xstrdup(json_string_value(a));
			res->master_port = (int)json_integer_value(p);
		}
		json_decref(o);
	}
	res->use_agent_store = false;
	c->exchanging = false;
	evtimer_del(c->aux_timer);
	c->next_active = false;
	c->running = true;
	c->told = false;
	msg = xasprintf("%s has joined round %" PRId64 " of the rendezvous '%s' as rank %d in a "
			"world of size %d.",
			c->me.name, c->round, cfg->rdzv_id, c->rank, c->world);
	set_state(c, NODE_STATE_SUCCEEDED, "next_rendezvous", msg);
	free(msg);
	c->r->cb.done(0, res, NULL, c->r->cb.arg);
	observe(c);
}

static void
join_done(struct etcdr *c, int err, enum rdzv_action a)
{
	const char *id = c->r->cfg->rdzv_id;
	char *msg = NULL;

	if (err < 0) {
		next_fail(c, err, "the rendezvous state in etcd is corrupt");
		return;
	}
	switch (a) {
	case RDZV_ACTION_FINISH:
		exchange_start(c);
		return;
	case RDZV_ACTION_ERROR_CLOSED:
		msg = xasprintf("the rendezvous '%s' is closed", id);
		next_fail(c, -ECONNABORTED, msg);
		break;
	case RDZV_ACTION_ERROR_TIMEOUT:
		msg = xasprintf("the rendezvous '%s' did not complete within the join timeout of "
				"%g s: %zu of at least %d nodes joined round %" PRId64,
				id, (double)c->join_timeout / 1e6, c->peak_count,
				c->settings.min_nodes, c->st.round);
		next_fail(c, -ETIMEDOUT, msg);
		break;
	case RDZV_ACTION_GRACEFUL_EXIT:
		msg = xasprintf("the rendezvous '%s' closed while this node waited as a spare; "
				"terminating pending rendezvous",
				id);
		next_fail(c, RDZV_GRACEFUL_EXIT, msg);
		break;
	case RDZV_ACTION_KEEP_ALIVE:
	case RDZV_ACTION_ADD_TO_PARTICIPANTS:
	case RDZV_ACTION_ADD_TO_WAIT_LIST:
	case RDZV_ACTION_ADD_TO_REDUNDANCY_LIST:
	case RDZV_ACTION_REMOVE_FROM_PARTICIPANTS:
	case RDZV_ACTION_REMOVE_FROM_WAIT_LIST:
	case RDZV_ACTION_REMOVE_FROM_REDUNDANCY_LIST:
	case RDZV_ACTION_MARK_RENDEZVOUS_COMPLETE:
	case RDZV_ACTION_MARK_RENDEZVOUS_CLOSED:
	case RDZV_ACTION_SYNC:
		msg = xasprintf("unexpected rendezvous action %s", rdzv_action_name(a));
		next_fail(c, -EPROTO, msg);
		break;
	}
	free(msg);
}

static void
exit_done(struct etcdr *c, int err, enum rdzv_action a)
{
	if (err < 0 || a != RDZV_ACTION_FINISH) {
		join_done(c, err, a == RDZV_ACTION_FINISH ? RDZV_ACTION_ERROR_TIMEOUT : a);
		return;
	}
	op_start(c, RDZV_OP_JOIN, c->next_deadline, join_done);
}

static void
start_next(struct etcdr *c)
{
	c->next_pending = false;
	op_start(c, RDZV_OP_EXIT, c->next_deadline, exit_done);
}

static int
etcdr_next(struct rdzv *r)
{
	struct etcdr *c = backend(r);
	char *msg;

	c->running = false;
	c->told = false;
	c->barrier = false;
	c->exchanging = false;
	evtimer_del(c->aux_timer);
	c->next_active = true;
	c->next_deadline = now_usec() + c->join_timeout;
	c->last_count = (size_t)-1;
	c->peak_count = 0;
	msg = xasprintf("%s attempts to join the next round of the rendezvous '%s'.", c->me.name,
			r->cfg->rdzv_id);
	set_state(c, NODE_STATE_RUNNING, "next_rendezvous", msg);
	free(msg);
	if (c->boot == BOOT_FAILED) {
		next_fail(c, -ECONNABORTED, "this node's etcd lease expired");
		return 0;
	}
	if (c->boot != BOOT_READY) {
		/* Fail at the join timeout even while a call to etcd hangs. */
		c->next_pending = true;
		timer_usec(c->aux_timer, c->join_timeout);
		return 0;
	}
	if (c->op_active) {
		c->op = RDZV_OP_EXIT;
		c->op_deadline = c->next_deadline;
		c->op_done = exit_done;
		if (!c->io_pending) {
			read_all(c);
		}
		return 0;
	}
	start_next(c);
	return 0;
}

static int
etcdr_num_nodes_waiting(struct rdzv *r)
{
	return (int)backend(r)->st.n_wait_list;
}

/* ---- lease and boot ----------------------------------------------------- */

static void boot_step(struct etcdr *c);

static void
lease_lost(struct etcdr *c)
{
	const char *msg = "this node's etcd lease expired (etcd unreachable for longer than "
			  "its TTL): the other nodes consider it dead";

	c->boot = BOOT_FAILED;
	evtimer_del(c->ka_timer);
	if (c->next_active) {
		c->op_active = false;
		next_fail(c, -ECONNABORTED, msg);
	} else if (c->running && !c->told) {
		c->told = true;
		defer(c, 2, -ECONNABORTED, 0, msg);
	}
}

static void
ka_cb(int err, const struct etcd_response *resp, const char *errmsg, void *arg)
{
	struct etcdr *c = arg;

	c->ka_pending = false;
	if (c->fin >= FIN_REVOKE) {
		return;
	}
	if (err == 0 && resp->ttl <= 0) {
		lease_lost(c);
		return;
	}
	if (err < 0 && err != -ENOENT) {
		emit(c, "lease keep-alive: %s", errmsg);
	} else if (err == -ENOENT) {
		lease_lost(c);
		return;
	}
	timer_usec(c->ka_timer, (uint64_t)c->ttl * USEC_PER_SEC / 3);
}

static void
ka_timer_cb(evutil_socket_t fd, short what, void *arg)
{
	struct etcdr *c = arg;
	char *body;

	if (c->ka_pending) {
		return;
	}
	body = etcd_encode_lease_id(c->lease);
	c->ka_pending = true;
	(void)etcd_client_call(c->cl, "/v3/lease/keepalive", body, ka_cb, c);
	free(body);
}

static void
boot_retry_cb(evutil_socket_t fd, short what, void *arg)
{
	boot_step(arg);
}

static void
boot_failed_try(struct etcdr *c, int err, const char *msg)
{
	uint64_t now = now_usec();
	uint64_t deadline = c->next_active ? c->next_deadline : c->boot_deadline;

	free(c->boot_err);
	c->boot_err = xstrdup(msg);

	if (c->err_logged == 0 || now - c->err_logged >= ERR_LOG_USEC) {
		c->err_logged = now;
		emit(c, "cannot reach etcd (%s); retrying until the join timeout", msg);
	}
	if (now >= deadline && c->next_active) {
		char *m = xasprintf("the rendezvous '%s' cannot reach etcd at --rdzv-endpoint %s "
				    "before the join timeout of %g s: %s",
				    c->r->cfg->rdzv_id, c->r->cfg->rdzv_endpoint,
				    (double)c->join_timeout / 1e6, msg);

		next_fail(c, err, m);
		free(m);
		return;
	}
	timer_usec(c->boot_timer, RETRY_USEC);
}

static void
clean_cb(int err, const struct etcd_response *resp, const char *errmsg, void *arg)
{
	struct etcdr *c = arg;

	if (err < 0) {
		boot_failed_try(c, err, errmsg);
		return;
	}
	boot_step(c);
}

static void
boot_cb(int err, const struct etcd_response *resp, const char *errmsg, void *arg)
{
	struct etcdr *c = arg;

	if (err < 0) {
		boot_failed_try(c, err, errmsg);
		return;
	}
	switch (c->boot) {
	case BOOT_LEASE:
		if (resp->id == 0) {
			boot_failed_try(c, -EPROTO, "lease grant answered without an ID");
			return;
		}
		c->lease = resp->id;
		c->boot = BOOT_CLEAN;
		break;
	case BOOT_CLEAN:
		c->boot = BOOT_ALIVE;
		if (resp->n_ranges >= 2 && resp->ranges[0].n_kvs == 1 &&
		    resp->ranges[1].n_kvs == 0) {
			struct rdzv_state st;
			bool closed =
				rdzv_state_decode(resp->ranges[0].kvs[0].value,
						  resp->ranges[0].kvs[0].value_len, &st) == 0 &&
				st.closed;

			rdzv_state_release(&st);
			if (closed) {
				/* A closed rendezvous nobody is in: a finished job
				 * with the same run id. Start clean (unless somebody
				 * wrote it meanwhile). */
				struct etcd_cmp cmp = {
					.key = c->state_key,
					.target = ETCD_CMP_MOD,
					.revision = resp->ranges[0].kvs[0].mod_revision,
				};
				struct etcd_op del = {.kind = ETCD_OP_DELETE,
						      .key = c->prefix,
						      .range_end = c->prefix_end};
				char *body = etcd_encode_txn(&cmp, 1, &del, 1, NULL, 0);

				emit(c,
				     "removing the closed rendezvous '%s' left in etcd by an "
				     "earlier job",
				     c->r->cfg->rdzv_id);
				(void)etcd_client_call(c->cl, "/v3/kv/txn", body, clean_cb, c);
				free(body);
				return;
			}
		}
		break;
	case BOOT_ALIVE:
		c->rev = resp->revision;
		c->boot = BOOT_READY;
		c->err_logged = 0;
		timer_usec(c->ka_timer, (uint64_t)c->ttl * USEC_PER_SEC / 3);
		c->watch = etcd_watch_new(c->cl, c->watch_prefix, c->watch_end, c->rev + 1,
					  watch_cb, c);
		if (c->next_pending) {
			start_next(c);
		}
		return;
	case BOOT_READY:
	case BOOT_FAILED:
		return;
	}
	boot_step(c);
}

static void
boot_step(struct etcdr *c)
{
	char *body = NULL;
	const char *path = "/v3/kv/txn";

	switch (c->boot) {
	case BOOT_LEASE:
		body = etcd_encode_lease_grant(c->ttl);
		path = "/v3/lease/grant";
		break;
	case BOOT_CLEAN: {
		struct etcd_op ops[2] = {
			{.kind = ETCD_OP_RANGE, .key = c->state_key},
			{.kind = ETCD_OP_RANGE,
			 .key = c->alive_prefix,
			 .range_end = c->alive_end,
			 .keys_only = true},
		};

		body = etcd_encode_txn(NULL, 0, ops, 2, NULL, 0);
		break;
	}
	case BOOT_ALIVE: {
		struct etcd_op put = {.kind = ETCD_OP_PUT,
				      .key = c->alive_key,
				      .value = "1",
				      .value_len = 1,
				      .lease = c->lease};

		body = etcd_encode_op(&put);
		path = "/v3/kv/put";
		break;
	}
	case BOOT_READY:
	case BOOT_FAILED:
		return;
	}
	(void)etcd_client_call(c->cl, path, body, boot_cb, c);
	free(body);
}

/* ---- exit barrier and leaving ------------------------------------------- */

static void
barrier_check(struct etcdr *c)
{
	if (c->barrier && c->bkeys.n_kvs >= (size_t)c->world) {
		c->barrier = false;
		evtimer_del(c->aux_timer);
		defer(c, 1, 0, 0, NULL);
	}
}

static void
aux_timer_cb(evutil_socket_t fd, short what, void *arg)
{
	struct etcdr *c = arg;
	char *msg;

	if (c->barrier) {
		c->barrier = false;
		msg = xasprintf("the exit barrier of round %" PRId64 " timed out after %g s",
				c->round, (double)c->barrier_timeout / 1e6);
		defer(c, 1, -ETIMEDOUT, 0, msg);
		free(msg);
	} else if (c->exchanging) {
		c->exchanging = false;
		next_fail(c, -ETIMEDOUT,
			  "the rank exchange through etcd did not complete before "
			  "the join timeout");
	} else if (c->next_active && c->next_pending && c->boot != BOOT_READY) {
		msg = xasprintf("the rendezvous '%s' cannot reach etcd at --rdzv-endpoint %s "
				"before the join timeout of %g s: %s",
				c->r->cfg->rdzv_id, c->r->cfg->rdzv_endpoint,
				(double)c->join_timeout / 1e6,
				c->boot_err ? c->boot_err : "no answer (no quorum?)");
		c->next_pending = false;
		next_fail(c, -EHOSTUNREACH, msg);
		free(msg);
	}
}

static int
etcdr_exit_barrier(struct rdzv *r)
{
	struct etcdr *c = backend(r);
	struct etcd_op put = {.kind = ETCD_OP_PUT, .value = "1", .value_len = 1};
	char *prefix, *key, *body;

	if (!c->running) {
		defer(c, 1, 0, 0, NULL);
		return 0;
	}
	c->barrier = true;
	prefix = round_prefix(c, 'b', c->round);
	key = xasprintf("%s%d", prefix, c->rank);
	put.key = key;
	body = etcd_encode_op(&put);
	(void)etcd_client_call(c->cl, "/v3/kv/put", body, put_done_cb, c);
	free(body);
	free(key);
	free(prefix);
	timer_usec(c->aux_timer, c->barrier_timeout);
	return 0;
}

static void fin_step(struct etcdr *c, int err);

static void
fin_cb(int err, const struct etcd_response *resp, const char *errmsg, void *arg)
{
	struct etcdr *c = arg;

	if (err < 0) {
		emit(c, "leaving the rendezvous: %s", errmsg);
		/* Nothing more to do without etcd: the lease expires by itself. */
		c->fin = FIN_NONE;
		defer(c, 1, 0, 0, NULL);
		return;
	}
	if (c->fin == FIN_CHECK) {
		/* No match: no "kvs" at all (zero fields are omitted). */
		if ((resp->n_ranges == 0 || resp->ranges[0].n_kvs == 0) && c->fin_close) {
			struct etcd_op del = {.kind = ETCD_OP_DELETE,
					      .key = c->prefix,
					      .range_end = c->prefix_end};
			char *body = etcd_encode_op(&del);

			/* The last one out: remove the run's keys. */
			c->fin = FIN_DELETE;
			(void)etcd_client_call(c->cl, "/v3/kv/deleterange", body, fin_cb, c);
			free(body);
			return;
		}
		c->fin = FIN_NONE;
		defer(c, 1, 0, 0, NULL);
		return;
	}
	fin_step(c, 0);
}

/* Leaving, one step after another: close, revoke, check, delete. */
static void
fin_step(struct etcdr *c, int err)
{
	char *body;

	switch (c->fin) {
	case FIN_CLOSE:
		c->fin = FIN_REVOKE;
		evtimer_del(c->ka_timer);
		etcd_watch_free(c->watch);
		c->watch = NULL;
		if (c->lease == 0) {
			c->fin = FIN_NONE;
			defer(c, 1, 0, 0, NULL);
			return;
		}
		body = etcd_encode_lease_id(c->lease);
		(void)etcd_client_call(c->cl, "/v3/lease/revoke", body, fin_cb, c);
		free(body);
		return;
	case FIN_REVOKE: {
		struct etcd_op r = {.kind = ETCD_OP_RANGE,
				    .key = c->alive_prefix,
				    .range_end = c->alive_end,
				    .keys_only = true};

		c->lease = 0;
		c->fin = FIN_CHECK;
		body = etcd_encode_op(&r);
		(void)etcd_client_call(c->cl, "/v3/kv/range", body, fin_cb, c);
		free(body);
		return;
	}
	case FIN_CHECK:
	case FIN_DELETE:
	case FIN_NONE:
		c->fin = FIN_NONE;
		defer(c, 1, err, 0, NULL);
		return;
	}
}

static void
close_done(struct etcdr *c, int err, enum rdzv_action a)
{
	if (err == 0 && a == RDZV_ACTION_FINISH) {
		set_state(c, NODE_STATE_SUCCEEDED, "_mark_rendezvous_closed",
			  "this node closed the rendezvous");
	}
	fin_step(c, 0);
}

static int
etcdr_finish(struct rdzv *r, bool close)
{
	struct etcdr *c = backend(r);

	c->running = false;
	c->barrier = false;
	c->exchanging = false;
	c->next_active = false;
	evtimer_del(c->aux_timer);
	c->fin_close = close;
	c->fin = FIN_CLOSE;
	if (c->boot != BOOT_READY) {
		c->fin = FIN_NONE;
		if (c->lease != 0) {
			/* Let the lease go now rather than at its TTL. */
			c->fin = FIN_CLOSE;
			fin_step(c, 0);
			return 0;
		}
		defer(c, 1, 0, 0, NULL);
		return 0;
	}
	if (close) {
		op_start(c, RDZV_OP_CLOSE, now_usec() + c->close_timeout, close_done);
		return 0;
	}
	fin_step(c, 0);
	return 0;
}

static void
etcdr_shutdown(struct rdzv *r)
{
	struct etcdr *c = backend(r);

	if (c->fin == FIN_NONE && c->boot == BOOT_READY) {
		(void)etcdr_finish(r, true);
	}
}

/* ---- set-up ------------------------------------------------------------- */

static int
conf_seconds(const struct config *cfg, const char *key, double def, uint64_t *ret, char **reterr)
{
	const char *v = config_rdzv_conf_get(cfg, key);
	double d = def;

	if (v && (parse_double(v, &d) < 0 || d <= 0 || d > 1e9)) {
		*reterr = xasprintf("--rdzv-conf: invalid value '%s' for %s: expected a number of "
				    "seconds > 0",
				    v, key);
		return -EINVAL;
	}
	*ret = (uint64_t)(d * 1e6);
	return 0;
}

static int
etcdr_init(struct rdzv *r, char **reterr)
{
	const struct config *cfg = r->cfg;
	struct etcdr *c = xcalloc(1, sizeof(*c));
	const char *v;
	uint64_t ka, lc;
	long long n = 3;
	size_t len;

	r->backend = c;
	c->r = r;
	c->node_state = NODE_STATE_INIT;
	rdzv_state_init(&c->st);
	if (conf_seconds(cfg, "join_timeout", 600, &c->join_timeout, reterr) < 0 ||
	    conf_seconds(cfg, "last_call_timeout", 30, &lc, reterr) < 0 ||
	    conf_seconds(cfg, "close_timeout", 30, &c->close_timeout, reterr) < 0 ||
	    conf_seconds(cfg, "keep_alive_interval", 5, &ka, reterr) < 0 ||
	    conf_seconds(cfg, "exit_barrier_timeout", 300, &c->barrier_timeout, reterr) < 0) {
		return -EINVAL;
	}
	v = config_rdzv_conf_get(cfg, "keep_alive_max_attempt");
	if (v && parse_int(v, 1, 1000000, &n) < 0) {
		*reterr = xasprintf("--rdzv-conf: invalid value '%s' for keep_alive_max_attempt: "
				    "expected an integer >= 1",
				    v);
		return -EINVAL;
	}
	c->settings.min_nodes = cfg->min_nodes;
	c->settings.max_nodes = cfg->max_nodes;
	c->settings.last_call_usec = (int64_t)lc;
	c->settings.keep_alive_interval_usec = (int64_t)ka;
	c->settings.keep_alive_max_attempt = (int)n;
	/* The lease TTL is torch's heartbeat expiry, at least etcd's minimum. */
	c->ttl = (int64_t)((ka * (uint64_t)n + USEC_PER_SEC - 1) / USEC_PER_SEC);
	if (c->ttl < 2) {
		c->ttl = 2;
	}
	if (rdzv_node_init(&c->me,
			   cfg->local_addr && *cfg->local_addr ? cfg->local_addr : host_fqdn(),
			   (long long)getpid(), next_local_id++) < 0) {
		*reterr = xasprintf("--local-addr: invalid value '%s': no spaces or control "
				    "characters",
				    cfg->local_addr ? cfg->local_addr : host_fqdn());
		return -EINVAL;
	}
	if (!cfg->rdzv_endpoint || !*cfg->rdzv_endpoint) {
		*reterr = xstrdup("--rdzv-endpoint: the etcd backend needs the etcd members "
				  "(HOST[:PORT],...)");
		return -EINVAL;
	}
	c->cl = etcd_client_new(r->base, cfg->rdzv_endpoint, reterr);
	if (!c->cl) {
		return -EINVAL;
	}
	v = config_rdzv_conf_get(cfg, "etcd_prefix");
	if (v && (!*v || v[0] != '/')) {
		*reterr = xasprintf("--rdzv-conf: invalid value '%s' for etcd_prefix: expected a "
				    "key prefix starting with '/'",
				    v);
		return -EINVAL;
	}
	c->prefix = v ? xasprintf("%s%s%s/", v, v[strlen(v) - 1] == '/' ? "" : "/", cfg->rdzv_id)
		      : xasprintf("/elasticd/%s/", cfg->rdzv_id);
	c->prefix_end = etcd_prefix_end(c->prefix, strlen(c->prefix), &len);
	c->state_key = xasprintf("%sstate", c->prefix);
	c->alive_prefix = xasprintf("%sw/alive/", c->prefix);
	c->gen_key = xasprintf("%sw/gen", c->prefix);
	c->watch_prefix = xasprintf("%sw/", c->prefix);
	c->watch_end = etcd_prefix_end(c->watch_prefix, strlen(c->watch_prefix), &len);
	c->alive_end = etcd_prefix_end(c->alive_prefix, strlen(c->alive_prefix), &len);
	c->alive_key = xasprintf("%s%s", c->alive_prefix, c->me.name);
	c->sync_timer = evtimer_new(r->base, sync_timer_cb, c);
	c->retry_timer = evtimer_new(r->base, retry_cb, c);
	c->ka_timer = evtimer_new(r->base, ka_timer_cb, c);
	c->aux_timer = evtimer_new(r->base, aux_timer_cb, c);
	c->boot_deadline = now_usec() + c->join_timeout;
	c->boot_timer = evtimer_new(r->base, boot_retry_cb, c);
	c->boot = BOOT_LEASE;
	boot_step(c);
	return 0;
}

static void
etcdr_free(struct rdzv *r)
{
	struct etcdr *c = r->backend;

	if (!c) {
		return;
	}
	etcd_watch_free(c->watch);
	etcd_client_free(c->cl);
	if (c->sync_timer) {
		event_free(c->sync_timer);
	}
	if (c->retry_timer) {
		event_free(c->retry_timer);
	}
	if (c->boot_timer) {
		event_free(c->boot_timer);
	}
	if (c->ka_timer) {
		event_free(c->ka_timer);
	}
	if (c->aux_timer) {
		event_free(c->aux_timer);
	}
	for (size_t k = 0; k < 2; k++) {
		struct etcd_range *dst = k ? &c->bkeys : &c->xkeys;

		for (size_t i = 0; i < dst->n_kvs; i++) {
			free(dst->kvs[i].key);
			free(dst->kvs[i].value);
		}
		free(dst->kvs);
	}
	rdzv_state_release(&c->st);
	rdzv_node_release(&c->me);
	rdzv_result_release(&c->result);
	strv_free(c->roles);
	strv_free(c->alive);
	free(c->alive_crev);
	free(c->prefix);
	free(c->prefix_end);
	free(c->state_key);
	free(c->alive_prefix);
	free(c->alive_end);
	free(c->alive_key);
	free(c->boot_err);
	free(c->gen_key);
	free(c->watch_prefix);
	free(c->watch_end);
	free(c);
	r->backend = NULL;
}

const struct rdzv_backend_ops rdzv_etcd_ops = {
	.name = "etcd",
	.init = etcdr_init,
	.next = etcdr_next,
	.num_nodes_waiting = etcdr_num_nodes_waiting,
	.shutdown = etcdr_shutdown,
	.free = etcdr_free,
	.exit_barrier = etcdr_exit_barrier,
	.finish = etcdr_finish,
};
