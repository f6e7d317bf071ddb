/* rdzv_etcd.c — torch's dynamic rendezvous with its state in an etcd v3
 * cluster (through the JSON gateway, etcd_client.h), so that the job outlives
 * any one node. The decisions are rdzv_dynamic.h's, the encoding
 * rdzv_state.h's; this file is the transport, as rdzv_c10d.c is for a
 * TCPStore.
 *
 * Keys, all under one prefix per run id (--rdzv-conf etcd_prefix, default
 * "/elasticd/<run_id>/"):
 *   state            the encoded rdzv_state, without heartbeats (liveness is
 *                    the leases); compare-and-set on its mod_revision
 *                    through /v3/kv/txn (create_revision 0 when absent); a
 *                    lost race returns the current value in the same round
 *                    trip
 *   a/<node>         one key per agent, attached to the agent's lease (TTL
 *                    keep_alive_interval * keep_alive_max_attempt, refreshed
 *                    every TTL/3), put at start: a dead node's keys vanish by
 *                    themselves. Each node keeps the set of nodes it knows
 *                    dead, from a watch on a/ that filters out puts, started
 *                    at the creation of the state it found (deletions before
 *                    belong to an earlier job of the same run id). Before each
 *                    decision every member of the state gets a heartbeat of
 *                    "now", or "never" when dead, so rdzv_sanitize drops
 *                    exactly the nodes whose lease went.
 *   j/<node>         a join request (lease), put in the same txn as the
 *                    first read of a join, deleted once a participant.
 *   i/<node>         the node's role and local world size (lease), put with
 *                    its join request
 *   w/gen            put in the same txn as a state change that waiting
 *                    nodes must hear about (rdzv_apply's "notable")
 *   w/adm            put by a write that admitted other nodes
 *   w/r/<round>      the rank assignment, published by group rank 0 from the
 *                    i/ keys of the round's participants (as torch 2.x's
 *                    agent: rank 0 gathers, everyone reads one answer): roles,
 *                    local world sizes, MASTER_ADDR and a free MASTER_PORT
 *   w/b/<round>/<rank> exit barrier
 *
 * Admission: the coordinator, the node whose a/ key is the oldest (every read
 * asks for it, limit 1), watches j/ and reads the requests since its last
 * look; every write it makes admits them all on the way, in order of request
 * (rdzv_admit), and so does a write of its own join. The others do not race
 * it: a node whose join would add itself waits (for w/adm to show progress)
 * and writes itself only when nothing moved for BEHIND_USEC and a fresh read
 * still lacks it. A crowd of N nodes thus costs a few compare-and-sets, not N
 * rounds of losers (torch's loop collapses near 128 nodes, reference §8).
 *
 * Waiting never polls: one watch on w/ (resumed from its last revision after
 * a drop, moved to the member the unary calls use after a fail-over) brings
 * w/gen (then a re-read), w/adm, the rank assignment and the barrier arrivals
 * (taken from the events themselves); the a/ deletions come on the second
 * watch, the coordinator's requests on a third. The state itself is outside
 * all of them: a join is never broadcast to every node. Timers only re-run
 * the pure decision on the local copy (last-call and join deadlines).
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
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "config.h"
#include "etcd_client.h"
#include "events.h"
#include "rdzv.h"
#include "rdzv_dynamic.h"
#include "rdzv_snapshot.h"
#include "rdzv_state.h"
#include "rdzv_sync.h"
#include "util.h"

/* Pause before retrying after etcd could not be reached at all. */
#define RETRY_USEC (1 * USEC_PER_SEC)
/* How long a joiner lets the coordinator admit it, with no w/adm seen, before
 * it looks again and then writes itself (the coordinator's lease expiring
 * wakes it sooner). */
#define BEHIND_USEC (2 * USEC_PER_SEC)
/* At most one "cannot reach etcd" line per this span. */
#define ERR_LOG_USEC (10 * USEC_PER_SEC)

typedef rdzv_sync_done_fn op_done_fn;

enum boot {
	BOOT_LEASE, /* granting the lease */
	BOOT_CLEAN, /* writing a/<node>, removing a stale closed rendezvous */
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
	struct etcd_watch *deaths; /* a/ deletions */
	char *prefix;
	char *prefix_end;
	char *state_key;
	char *alive_prefix;
	char *alive_end;
	char *alive_key;
	char *join_prefix, *join_end, *join_key;
	char *info_prefix, *info_end, *info_key;
	char *gen_key;      /* put with every change waiting nodes must hear of */
	char *adm_key;      /* put by a write that admits others: joiners re-read */
	char *watch_prefix; /* "w/": everything but the state itself */
	char *watch_end;
	struct rdzv_node me;

	enum boot boot;
	uint64_t boot_deadline;
	int64_t lease;
	struct event *retry_timer;
	struct event *boot_timer;
	struct event *ka_timer;
	/* Keep-alives failing (etcd unreachable): since when, and the warnings. */
	uint64_t ka_fail_since;
	struct ratelimit ka_tell;
	bool ka_pending;
	uint64_t err_logged;
	char *boot_err; /* why the boot's last try failed */

	/* The operation loop and its local copy (rdzv_sync.h). */
	struct rdzv_sync sync;
	int64_t mod_rev;           /* of the state key; 0: absent */
	int64_t rev;               /* header revision of the last read */
	char **dead;               /* nodes known to have lost their lease */
	bool alive_stale;          /* the next read takes the a/ range (after a reset) */
	struct rdzv_node *joiners; /* j/ requests, in order of request */
	size_t n_joiners;
	/* The coordinator: the node whose a/ key is the oldest. It alone
	 * watches and reads the join requests and admits them. */
	bool coordinator;          /* we are it */
	bool coordinator_known;    /* somebody is */
	struct etcd_watch *jwatch; /* the coordinator's watch on j/ */
	int64_t j_seen;            /* j/ read through this revision */
	bool intent;               /* our j/ key is there */
	bool intent_pending;       /* the read in flight puts it */
	bool intent_asked;         /* this join operation put it already */
	bool cas_drops_intent;     /* the compare-and-set in flight deletes it */
	bool cas_admits;           /* it admits other joiners: put adm_key */
	uint64_t behind_since;     /* waiting for the coordinator to admit us */
	bool behind_looked;        /* read again after waiting long */
	/* Which ranges the read or compare-and-set in flight asks for
	 * (indices into the answer's ranges, -1: not asked). */
	int rd_state, rd_alive, rd_oldest, rd_join, rd_exch, rd_barrier;

	/* The I/O lane (sync.io_pending): one read or compare-and-set at a
	 * time; a read asked for meanwhile goes next. */
	bool kick_pending;

	bool next_pending;

	/* The round. */
	bool exchanging;
	struct rdzv_result result;
	char **roles;
	char *master_addr; /* group rank 0: what it publishes */
	int master_port;
	bool published;          /* group rank 0: w/r/<round> written */
	struct etcd_range infos; /* group rank 0: the i/ keys */
	char *assignment;        /* the newest w/r/<round> seen */
	size_t assignment_len;
	int64_t assignment_round;
	bool *arrived; /* exit barrier: group ranks seen in w/b/<round>/ */
	int n_arrived;
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

/* This node's NodeState: an RdzvEvent per step, a log line per transition. */
static void
set_state(struct etcdr *c, enum node_state s, const char *fn, const char *msg)
{
	rdzv_set_node_state(c->r, &c->node_state, s, fn, msg);
}

static void
timer_usec(struct event *ev, uint64_t usec)
{
	struct timeval tv = {(time_t)(usec / USEC_PER_SEC), (suseconds_t)(usec % USEC_PER_SEC)};

	evtimer_add(ev, &tv);
}

static bool
is_dead(const struct etcdr *c, const char *name)
{
	for (size_t i = 0; c->dead && c->dead[i]; i++) {
		if (strcmp(c->dead[i], name) == 0) {
			return true;
		}
	}
	return false;
}

/* Heartbeats from leases: "never" for nodes known dead, "now" for the rest. */
static void
overlay(struct etcdr *c, struct rdzv_state *st, int64_t now_wall)
{
	for (size_t i = 0; i < st->n_heartbeats; i++) {
		st->heartbeats[i].usec = is_dead(c, st->heartbeats[i].node.name) ? 0 : now_wall;
	}
}

/* The dead set after reading the a/ range: the state's nodes without a key.
 * A node that appears later is alive until its key is deleted. */
static void
dead_from_alive(struct etcdr *c, const struct rdzv_state *st, const struct etcd_range *alive)
{
	size_t plen = strlen(c->alive_prefix);

	strv_free(c->dead);
	c->dead = NULL;
	for (size_t i = 0; i < st->n_heartbeats; i++) {
		const char *name = st->heartbeats[i].node.name;
		bool found = false;

		for (size_t k = 0; k < alive->n_kvs && !found; k++) {
			found = alive->kvs[k].key_len > plen &&
				strcmp(alive->kvs[k].key + plen, name) == 0;
		}
		if (!found) {
			strv_push(&c->dead, name);
		}
	}
}

static void
range_release(struct etcd_range *r)
{
	for (size_t i = 0; i < r->n_kvs; i++) {
		free(r->kvs[i].key);
		free(r->kvs[i].value);
	}
	free(r->kvs);
	memset(r, 0, sizeof(*r));
}

/* Deep copy of an answer's range (its strings die with the answer). */
static void
range_copy(struct etcd_range *dst, const struct etcd_range *src)
{
	range_release(dst);
	dst->kvs = xcalloc(src->n_kvs + 1, sizeof(*dst->kvs));
	for (size_t i = 0; i < src->n_kvs; i++) {
		dst->kvs[i] = src->kvs[i];
		dst->kvs[i].key = xstrndup(src->kvs[i].key, src->kvs[i].key_len);
		dst->kvs[i].value = xstrndup(src->kvs[i].value, src->kvs[i].value_len);
	}
	dst->n_kvs = src->n_kvs;
}

static int
cmp_mod_revision(const void *a, const void *b)
{
	const struct etcd_kv *x = *(const struct etcd_kv *const *)a,
			     *y = *(const struct etcd_kv *const *)b;

	return x->mod_revision < y->mod_revision ? -1 : x->mod_revision > y->mod_revision;
}

static void
joiners_clear(struct etcdr *c)
{
	for (size_t i = 0; i < c->n_joiners; i++) {
		rdzv_node_release(&c->joiners[i]);
	}
	c->n_joiners = 0;
}

/* Add the join requests of a j/ range to those held, oldest first, each node
 * once. */
static void
take_joiners(struct etcdr *c, const struct etcd_range *r)
{
	size_t plen = strlen(c->join_prefix);
	const struct etcd_kv **by_rev = xcalloc(r->n_kvs + 1, sizeof(*by_rev));

	c->joiners = xrealloc(c->joiners, (c->n_joiners + r->n_kvs + 1) * sizeof(*c->joiners));
	for (size_t i = 0; i < r->n_kvs; i++) {
		by_rev[i] = &r->kvs[i];
	}
	qsort(by_rev, r->n_kvs, sizeof(*by_rev), cmp_mod_revision);
	for (size_t i = 0; i < r->n_kvs; i++) {
		const struct etcd_kv *kv = by_rev[i];

		struct rdzv_node *n = &c->joiners[c->n_joiners];
		bool dup = false;

		if (kv->key_len <= plen ||
		    rdzv_node_parse(n, kv->key + plen, kv->key_len - plen) < 0) {
			continue;
		}
		for (size_t k = 0; k < c->n_joiners && !dup; k++) {
			dup = rdzv_node_cmp(&c->joiners[k], n) == 0;
		}
		if (dup) {
			rdzv_node_release(n);
		} else {
			c->n_joiners++;
		}
	}
	free(by_rev);
}

static char *
assignment_key(const struct etcdr *c, int64_t round)
{
	return xasprintf("%sw/r/%" PRId64, c->prefix, round);
}

static char *
round_prefix(const struct etcdr *c, char kind, int64_t round)
{
	return xasprintf("%sw/%c/%" PRId64 "/", c->prefix, kind, round);
}

static void next_fail(struct etcdr *c, int err, const char *msg);
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
		rdzv_progress(c->r, "cannot reach etcd (%s); retrying%s", msg,
			      c->sync.next_active ? " until the join timeout" : "");
	}
	if (c->sync.op_active && !c->sync.next_active && now >= c->sync.op_deadline) {
		/* The close op: give up, the lease still goes. */
		rdzv_sync_end(&c->sync, -ETIMEDOUT, RDZV_ACTION_ERROR_TIMEOUT);
		return;
	}
	if (c->sync.next_active && now >= c->sync.next_deadline) {
		char *m = xasprintf("the rendezvous '%s' cannot reach etcd before the join "
				    "timeout of %g s: %s",
				    c->r->cfg->rdzv_id, (double)c->join_timeout / 1e6, msg);

		rdzv_sync_abandon(&c->sync);
		next_fail(c, err, m);
		free(m);
		return;
	}
	c->kick_pending = true;
	timer_usec(c->retry_timer, RETRY_USEC);
}

/* ---- reading and writing the state -------------------------------------- */

/* The group rank a key w/b/<round>/<rank> of our round names, or -1. */
static int
barrier_rank(const struct etcdr *c, const char *key)
{
	char *prefix = round_prefix(c, 'b', c->sync.round);
	size_t plen = strlen(prefix);
	long long rank = -1;

	if (strncmp(key, prefix, plen) != 0 ||
	    parse_int(key + plen, 0, c->sync.world - 1, &rank) < 0) {
		rank = -1;
	}
	free(prefix);
	return (int)rank;
}

static void
barrier_mark(struct etcdr *c, const char *key)
{
	int rank = barrier_rank(c, key);

	if (c->arrived && rank >= 0 && !c->arrived[rank]) {
		c->arrived[rank] = true;
		c->n_arrived++;
	}
}

/* Keep the newest rank assignment seen (w/r/<round>), whenever it comes:
 * group rank 0 may publish before we look. */
static void
set_assignment(struct etcdr *c, int64_t round, const char *value, size_t len)
{
	if (c->assignment && round < c->assignment_round) {
		return;
	}
	free(c->assignment);
	c->assignment = xstrndup(value, len);
	c->assignment_len = len;
	c->assignment_round = round;
}

static void
intent_del_cb(int err, const struct etcd_response *resp, const char *errmsg, void *arg)
{
	if (err < 0) {
		/* Harmless: a participant's request is ignored, and the key
		 * goes with the lease. */
		rdzv_progress(((struct etcdr *)arg)->r, "deleting the join request: %s", errmsg);
	}
}

/* Delete our join request (not while its put is in flight). */
static void
intent_drop(struct etcdr *c)
{
	struct etcd_op del = {.kind = ETCD_OP_DELETE, .key = c->join_key};
	char *body;

	if (!c->intent || c->intent_pending) {
		return;
	}
	c->intent = false;
	body = etcd_encode_op(&del);
	(void)etcd_client_call(c->cl, "/v3/kv/deleterange", body, intent_del_cb, c);
	free(body);
}

/* A participant needs its join request no more. */
static void
intent_check(struct etcdr *c)
{
	if (rdzv_state_find_participant(&c->sync.st, &c->me) >= 0) {
		intent_drop(c);
	}
}

/* The coordinator's watch on j/: a new request, a look. */
static void
jwatch_cb(int err, const struct etcd_response *resp, bool reset, const char *errmsg, void *arg)
{
	struct etcdr *c = arg;
	bool put = reset;

	if (err < 0) {
		rdzv_progress(c->r, "%s; reconnecting", errmsg);
		return;
	}
	if (reset) {
		c->j_seen = 0;
	}
	for (size_t i = 0; i < resp->n_events && !put; i++) {
		put = !resp->events[i].is_delete;
	}
	if (put && c->coordinator && c->fin == FIN_NONE) {
		read_all(c);
	}
}

/* Take up or leave the coordinator's work; rev: the revision just read. */
static void
coordinator_set(struct etcdr *c, bool on, int64_t rev)
{
	if (on == c->coordinator) {
		return;
	}
	c->coordinator = on;
	joiners_clear(c);
	etcd_watch_free(c->jwatch);
	c->jwatch = NULL;
	if (on) {
		/* Every request so far on the next read, later ones as they come. */
		c->j_seen = 0;
		c->jwatch = etcd_watch_new(c->cl, c->join_prefix, c->join_end, rev + 1, false,
					   jwatch_cb, c);
		c->kick_pending = true;
	}
}

/* The answer to the range read_plan put at index i, or NULL. */
static const struct etcd_range *
planned(const struct etcd_response *resp, int i)
{
	return i >= 0 && (size_t)i < resp->n_ranges ? &resp->ranges[i] : NULL;
}

/* Take the ranges read_plan asked for from an answer: the state becomes the
 * local copy (rdzv_sync_adopt, or rdzv_sync_lost after a lost
 * compare-and-set). */
static int
absorb(struct etcdr *c, const struct etcd_response *resp, bool lost)
{
	const struct etcd_range *sr = planned(resp, c->rd_state), *r;
	int64_t now = rdzv_sync_wall(&c->sync);
	struct rdzv_state st;

	if (!sr) {
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
	rdzv_state_stamp_members(&st, now); /* liveness: the leases */
	c->rev = resp->revision;
	if ((r = planned(resp, c->rd_alive))) {
		dead_from_alive(c, &st, r);
		c->alive_stale = false;
	}
	if ((r = planned(resp, c->rd_oldest))) {
		c->coordinator_known = r->n_kvs == 1;
		coordinator_set(c, r->n_kvs == 1 && strcmp(r->kvs[0].key, c->alive_key) == 0,
				resp->revision);
	}
	if ((r = planned(resp, c->rd_join)) && c->coordinator) {
		take_joiners(c, r);
		c->j_seen = resp->revision;
	}
	if ((r = planned(resp, c->rd_exch)) && c->exchanging) {
		if (c->sync.rank == 0) {
			range_copy(&c->infos, r);
		} else if (r->n_kvs == 1) {
			set_assignment(c, c->sync.round, r->kvs[0].value, r->kvs[0].value_len);
		}
	}
	if ((r = planned(resp, c->rd_barrier)) && c->sync.barrier) {
		for (size_t i = 0; i < r->n_kvs; i++) {
			barrier_mark(c, r->kvs[i].key);
		}
	}
	overlay(c, &st, now);
	if (lost) {
		rdzv_sync_lost(&c->sync, &st);
	} else {
		rdzv_sync_adopt(&c->sync, &st);
	}
	intent_check(c);
	return 0;
}

/* What a read asks for, after whatever the txn writes first: the state; the a/ range when the dead
 * set must be rebuilt; the oldest a/ key (who coordinates); for the coordinator, the join requests
 * since its last look; while exchanging, the i/ range (group rank 0, until it publishes) or
 * w/r/<round> (the others); in the exit barrier, w/b/<round>/. Records where each answer will be
 * (c->rd_*). */
struct read_plan {
	struct etcd_op ops[8]; /* the txn's writes (if any), then the reads */
	size_t n;
	char *bufs[3];
};

static void
read_plan(struct etcdr *c, struct read_plan *p)
{
	size_t len;

	c->rd_alive = c->rd_join = c->rd_exch = c->rd_barrier = -1;
	c->rd_state = (int)p->n;
	p->ops[p->n++] = (struct etcd_op){.kind = ETCD_OP_RANGE, .key = c->state_key};
	if (c->alive_stale) {
		c->rd_alive = (int)p->n;
		p->ops[p->n++] = (struct etcd_op){.kind = ETCD_OP_RANGE,
						  .key = c->alive_prefix,
						  .range_end = c->alive_end,
						  .keys_only = true};
	}
	c->rd_oldest = (int)p->n;
	p->ops[p->n++] = (struct etcd_op){.kind = ETCD_OP_RANGE,
					  .key = c->alive_prefix,
					  .range_end = c->alive_end,
					  .keys_only = true,
					  .limit = 1,
					  .oldest_first = true};
	if (c->coordinator) {
		/* The requests since the last look. */
		c->rd_join = (int)p->n;
		p->ops[p->n++] = (struct etcd_op){.kind = ETCD_OP_RANGE,
						  .key = c->join_prefix,
						  .range_end = c->join_end,
						  .keys_only = true,
						  .min_mod_revision = c->j_seen + 1};
	}
	if (c->exchanging && c->sync.rank == 0 && !c->published) {
		c->rd_exch = (int)p->n;
		p->ops[p->n++] = (struct etcd_op){
			.kind = ETCD_OP_RANGE, .key = c->info_prefix, .range_end = c->info_end};
	} else if (c->exchanging && c->sync.rank != 0) {
		c->rd_exch = (int)p->n;
		p->bufs[0] = assignment_key(c, c->sync.round);
		p->ops[p->n++] = (struct etcd_op){.kind = ETCD_OP_RANGE, .key = p->bufs[0]};
	}
	if (c->sync.barrier) {
		c->rd_barrier = (int)p->n;
		p->bufs[1] = round_prefix(c, 'b', c->sync.round);
		p->bufs[2] = etcd_prefix_end(p->bufs[1], strlen(p->bufs[1]), &len);
		p->ops[p->n++] = (struct etcd_op){
			.kind = ETCD_OP_RANGE, .key = p->bufs[1], .range_end = p->bufs[2]};
	}
}

static void
read_plan_release(struct read_plan *p)
{
	for (size_t i = 0; i < ARRAY_SIZE(p->bufs); i++) {
		free(p->bufs[i]);
	}
}

static void
read_cb(int err, const struct etcd_response *resp, const char *errmsg, void *arg)
{
	struct etcdr *c = arg;

	c->sync.io_pending = false;
	if (c->intent_pending) {
		/* The read carried our join request. */
		c->intent_pending = false;
		c->intent = err == 0;
		c->intent_asked = c->intent; /* a failed put goes again with the retry */
	}
	if (err < 0) {
		io_failed(c, err, errmsg);
		return;
	}
	etcd_watch_follow(c->watch);
	etcd_watch_follow(c->deaths);
	if (absorb(c, resp, false) < 0) {
		/* An answer we cannot read ends the operation under way. */
		rdzv_sync_fail(&c->sync, -EBADMSG);
		return;
	}
	after_io(c);
}

/* Ask to join, at the head of a read: j/<node> and i/<node> (role, local
 * world size), on our lease. Returns the i/ value, to free after encoding. */
static char *
intent_ops(struct etcdr *c, struct read_plan *p)
{
	json_t *o = json_pack("{sssi}", "role", c->r->cfg->role, "local_world_size",
			      c->r->local_world_size);
	char *info = json_dumps(o, JSON_COMPACT);

	json_decref(o);
	p->ops[p->n++] = (struct etcd_op){.kind = ETCD_OP_PUT,
					  .key = c->join_key,
					  .value = "1",
					  .value_len = 1,
					  .lease = c->lease};
	p->ops[p->n++] = (struct etcd_op){.kind = ETCD_OP_PUT,
					  .key = c->info_key,
					  .value = info,
					  .value_len = strlen(info),
					  .lease = c->lease};
	c->intent = true;
	c->intent_pending = true;
	return info;
}

static void
read_all(struct etcdr *c)
{
	struct read_plan p = {0};
	char *body, *info = NULL;

	if (c->sync.io_pending) {
		c->kick_pending = true;
		return;
	}
	c->kick_pending = false;
	c->sync.in_sync = false;
	c->sync.lost = false;
	evtimer_del(c->sync.timer);
	evtimer_del(c->retry_timer);
	if (c->sync.op_active && c->sync.op == RDZV_OP_JOIN && !c->intent && !c->intent_asked &&
	    rdzv_state_find_participant(&c->sync.st, &c->me) < 0) {
		/* Once per join: deleted again once we are in, a request must
		 * not come back (the coordinator would read it again). */
		c->intent_asked = true;
		info = intent_ops(c, &p);
	}
	read_plan(c, &p);
	body = etcd_encode_txn(NULL, 0, p.ops, p.n, NULL, 0);
	c->sync.io_pending = true;
	(void)etcd_client_call(c->cl, "/v3/kv/txn", body, read_cb, c);
	free(body);
	free(info);
	read_plan_release(&p);
}

static void
cas_cb(int err, const struct etcd_response *resp, const char *errmsg, void *arg)
{
	struct etcdr *c = arg;
	bool drops_intent = c->cas_drops_intent;

	c->sync.io_pending = false;
	c->cas_drops_intent = false;
	if (err < 0) {
		/* The write may or may not have landed: re-read and re-decide. */
		io_failed(c, err, errmsg);
		return;
	}
	rdzv_record_sync(c->r, c->me.name, resp->succeeded);
	if (resp->succeeded) {
		c->mod_rev = resp->revision;
		c->rev = resp->revision;
		if (drops_intent) {
			c->intent = false;
		}
		joiners_clear(c); /* all of them are in the state written */
		intent_check(c);
		rdzv_sync_written(&c->sync);
	} else if (absorb(c, resp, true) < 0) {
		rdzv_sync_fail(&c->sync, -EBADMSG);
		return;
	} else if (c->sync.op_active) {
		/* Lost a race: rdzv_sync_lost decides again after a pause. */
		return;
	}
	after_io(c);
}

/* Write the local copy, changed by our own action a (SYNC: none, only
 * admissions). Taking ourselves out deletes our join request in the same
 * txn; a spare leaving the redundancy list to join asks again (a request the
 * coordinator has not seen yet). */
static void
cas_write(struct etcdr *c, enum rdzv_action a)
{
	bool drop_intent =
		a == RDZV_ACTION_REMOVE_FROM_PARTICIPANTS || a == RDZV_ACTION_REMOVE_FROM_WAIT_LIST;
	struct etcd_cmp cmp = {
		.key = c->state_key,
		.target = c->mod_rev ? ETCD_CMP_MOD : ETCD_CMP_CREATE,
		.revision = c->mod_rev,
	};
	struct etcd_op put[5] = {{.kind = ETCD_OP_PUT, .key = c->state_key}};
	struct read_plan p = {0};
	char *value, *body, gen[32];
	size_t len, n = 1, n_hb;
	struct rdzv_heartbeat *hb;

	/* Without heartbeats: liveness is the leases, and every node gets the
	 * state at least once after the crowd is in. */
	hb = c->sync.st.heartbeats;
	n_hb = c->sync.st.n_heartbeats;
	c->sync.st.heartbeats = NULL;
	c->sync.st.n_heartbeats = 0;
	value = rdzv_state_encode(&c->sync.st, &len);
	c->sync.st.heartbeats = hb;
	c->sync.st.n_heartbeats = n_hb;
	put[0].value = value;
	put[0].value_len = len;
	/* Only a change waiting nodes must hear about wakes them (their watch
	 * covers w/, not the state): no broadcast of the whole state per join. */
	snprintf(gen, sizeof(gen), "%" PRIu64, c->sync.st.gen);
	if (c->sync.notable) {
		put[n++] = (struct etcd_op){.kind = ETCD_OP_PUT,
					    .key = c->gen_key,
					    .value = gen,
					    .value_len = strlen(gen)};
	}
	c->cas_drops_intent = drop_intent && c->intent && !c->intent_pending;
	if (c->cas_drops_intent) {
		put[n++] = (struct etcd_op){.kind = ETCD_OP_DELETE, .key = c->join_key};
	} else if (a == RDZV_ACTION_REMOVE_FROM_REDUNDANCY_LIST && c->intent &&
		   !c->intent_pending) {
		put[n++] = (struct etcd_op){.kind = ETCD_OP_PUT,
					    .key = c->join_key,
					    .value = "1",
					    .value_len = 1,
					    .lease = c->lease};
	}
	if (c->cas_admits) {
		put[n++] = (struct etcd_op){
			.kind = ETCD_OP_PUT, .key = c->adm_key, .value = "1", .value_len = 1};
	}
	read_plan(c, &p);
	body = etcd_encode_txn(&cmp, 1, put, n, p.ops, p.n);
	c->sync.io_pending = true;
	(void)etcd_client_call(c->cl, "/v3/kv/txn", body, cas_cb, c);
	free(body);
	free(value);
	read_plan_release(&p);
}

/* The coordinator admits the requests it holds and the wait list (a round
 * that opens takes them), in one compare-and-set. Returns whether it wrote. */
static bool
admit_now(struct etcdr *c)
{
	struct rdzv_ctx ctx = rdzv_sync_ctx(&c->sync);

	if (!c->coordinator || c->sync.io_pending || c->boot != BOOT_READY || c->fin != FIN_NONE ||
	    (c->n_joiners == 0 && c->sync.st.n_wait_list == 0)) {
		return false;
	}
	if (rdzv_admit_requests(c->r, &c->sync.st, true, c->joiners, c->n_joiners, &ctx,
				&c->sync.notable) == 0) {
		return false;
	}
	c->cas_admits = true;
	rdzv_sync_write(&c->sync, RDZV_ACTION_SYNC);
	return true;
}

/* After a read or a write: whoever waits on the state looks at it. */
static void
after_io(struct etcdr *c)
{
	rdzv_sync_step(&c->sync);
	if (!c->sync.io_pending) {
		admit_now(c);
	}
	if (c->exchanging) {
		exchange_check(c);
	}
	if (c->sync.barrier) {
		barrier_check(c);
	}
	if (!c->sync.io_pending && c->kick_pending) {
		read_all(c);
	}
}

static void
retry_cb(evutil_socket_t fd, short what, void *arg)
{
	read_all(arg);
}

/* ---- the store under the operation loop (rdzv_sync.h) -------------------- */

static void
store_read(void *arg)
{
	read_all(arg);
}

static void
store_cas(void *arg, enum rdzv_action a)
{
	cas_write(arg, a);
}

/* Liveness is the leases: members alive "now", the dead "never". */
static void
store_stamp(void *arg, struct rdzv_state *st, int64_t now_wall)
{
	overlay(arg, st, now_wall);
}

static bool
store_coordinated(void *arg)
{
	struct etcdr *c = arg;

	return c->coordinator_known && !c->coordinator;
}

/* The coordinator admits us: wait for its w/adm (or its lease going)
 * instead of racing it. Write ourselves only if it makes no progress. */
static bool
store_await_admission(void *arg, const struct rdzv_ctx *ctx)
{
	struct etcdr *c = arg;
	uint64_t now = rdzv_sync_mono(&c->sync);

	if (c->coordinator_known && !c->coordinator) {
		if (c->behind_since == 0) {
			c->behind_since = now;
		}
		if (now - c->behind_since < BEHIND_USEC) {
			if (!c->kick_pending) {
				rdzv_sync_sleep(&c->sync, c->behind_since + BEHIND_USEC - now);
			}
			return true;
		}
		if (!c->behind_looked) {
			/* No word for a while: maybe admitted already. */
			c->behind_looked = true;
			c->behind_since = now;
			c->kick_pending = true;
			return true;
		}
	}
	c->behind_since = 0;
	c->behind_looked = false;
	return false;
}

/* Admit whoever asked to join on the way (order of request). */
static void
store_admit(void *arg, struct rdzv_state *st, const struct rdzv_ctx *ctx, bool *notable)
{
	struct etcdr *c = arg;

	c->cas_admits = c->n_joiners > 0 && rdzv_admit_requests(c->r, st, false, c->joiners,
								c->n_joiners, ctx, notable) > 0;
}

/* Something changed while we read or wrote: that read decides. */
static bool
store_synced(void *arg)
{
	return !((struct etcdr *)arg)->kick_pending;
}

static void
store_after_timer(void *arg)
{
	struct etcdr *c = arg;

	if (!c->sync.io_pending) {
		admit_now(c);
	}
	if (!c->sync.io_pending && c->kick_pending) {
		read_all(c);
	}
}

static void
store_barrier_closed(void *arg)
{
	evtimer_del(((struct etcdr *)arg)->aux_timer);
}

static const struct rdzv_store_ops etcd_store_ops = {
	.read = store_read,
	.cas = store_cas,
	.stamp = store_stamp,
	.coordinated = store_coordinated,
	.await_admission = store_await_admission,
	.admit = store_admit,
	.synced = store_synced,
	.after_timer = store_after_timer,
	.barrier_closed = store_barrier_closed,
	.timer_reads = false,
	.dead_why = "since their lease expired",
	.dead_note = "their lease expired",
};

/* A fresh operation (not a take-over): a join asks to be admitted anew. */
static void
op_start(struct etcdr *c, enum rdzv_op op, uint64_t deadline, op_done_fn done)
{
	c->behind_since = 0;
	c->behind_looked = false;
	c->intent_asked = false;
	rdzv_sync_start(&c->sync, op, deadline, done);
}

/* ---- the watches -------------------------------------------------------- */

/* w/: w/gen (and deletions: the run's keys going) call for a re-read; the
 * rank assignment and barrier arrivals are taken from the events. */
static void
watch_cb(int err, const struct etcd_response *resp, bool reset, const char *errmsg, void *arg)
{
	struct etcdr *c = arg;
	bool reread = reset;
	_cleanup_free_ char *rprefix = xasprintf("%sw/r/", c->prefix);
	size_t rlen = strlen(rprefix);

	if (err < 0) {
		rdzv_progress(c->r, "%s; reconnecting", errmsg);
		return;
	}
	if (c->boot != BOOT_READY || c->fin == FIN_REVOKE || c->fin == FIN_DELETE) {
		return;
	}
	for (size_t i = 0; i < resp->n_events; i++) {
		const struct etcd_event *ev = &resp->events[i];

		if (ev->is_delete || strcmp(ev->kv.key, c->gen_key) == 0) {
			reread = true;
		} else if (strcmp(ev->kv.key, c->adm_key) == 0) {
			/* Joiners admitted: the coordinator is at work. Those
			 * admitted hear of it with the round's next notable
			 * change (w/gen); no crowd of reads per batch. */
			c->behind_since = 0;
			c->behind_looked = false;
		} else if (strncmp(ev->kv.key, rprefix, rlen) == 0) {
			long long round;

			if (parse_int(ev->kv.key + rlen, 0, INT64_MAX, &round) == 0) {
				set_assignment(c, round, ev->kv.value, ev->kv.value_len);
			}
		} else if (c->sync.barrier) {
			barrier_mark(c, ev->kv.key);
		}
	}
	if (reread) {
		read_all(c);
		return;
	}
	if (c->exchanging) {
		exchange_check(c);
	}
	if (c->sync.barrier) {
		barrier_check(c);
	}
}

/* a/ deletions: a lease went. */
static void
deaths_cb(int err, const struct etcd_response *resp, bool reset, const char *errmsg, void *arg)
{
	struct etcdr *c = arg;
	size_t plen = strlen(c->alive_prefix);

	if (err < 0) {
		rdzv_progress(c->r, "%s; reconnecting", errmsg);
		return;
	}
	if (c->boot != BOOT_READY || c->fin == FIN_REVOKE || c->fin == FIN_DELETE) {
		return;
	}
	if (reset) {
		c->alive_stale = true;
	}
	for (size_t i = 0; i < resp->n_events; i++) {
		const struct etcd_kv *kv = &resp->events[i].kv;

		/* Our own key goes only when a closed run is cleaned up at
		 * our start; our lease's fate comes from its keep-alive. */
		if (resp->events[i].is_delete && kv->key_len > plen &&
		    strcmp(kv->key, c->alive_key) != 0 && !is_dead(c, kv->key + plen)) {
			strv_push(&c->dead, kv->key + plen);
		}
	}
	if (reset || resp->n_events > 0) {
		read_all(c);
	}
}

/* ---- next_rendezvous ---------------------------------------------------- */

static void
next_fail(struct etcdr *c, int err, const char *msg)
{
	c->sync.next_active = false;
	c->next_pending = false;
	c->exchanging = false;
	evtimer_del(c->aux_timer);
	if (c->boot == BOOT_READY) {
		intent_drop(c);
	}
	set_state(c, NODE_STATE_FAILED, "next_rendezvous", msg);
	rdzv_tell(c->r, RDZV_TELL_DONE, err, 0, msg);
}

static void join_done(void *arg, int err, enum rdzv_action a);

static void
put_done_cb(int err, const struct etcd_response *resp, const char *errmsg, void *arg)
{
	struct etcdr *c = arg;

	if (err < 0) {
		rdzv_progress(c->r, "%s", errmsg);
	}
	/* Our own put wakes our watch too; read anyway in case it is down. */
	read_all(c);
}

static void
published_cb(int err, const struct etcd_response *resp, const char *errmsg, void *arg)
{
	if (err < 0) {
		/* The others fail at their join deadline, and say why. */
		rdzv_progress(((struct etcdr *)arg)->r, "publishing the rank assignment: %s",
			      errmsg);
	}
}

static int
cmp_kv_key(const void *key, const void *kv)
{
	return strcmp(key, ((const struct etcd_kv *)kv)->key);
}

/* Group rank 0: once every participant's i/ key is in, publish w/r/<round>:
 * {"master_addr", "master_port", "roles": [...], "nodes": [[role, lws], ...]}
 * in group rank order. Returns 1 when published, 0 while keys are missing. */
static int
exchange_publish(struct etcdr *c)
{
	json_t *roles = json_array(), *nodes = json_array(), *o;
	struct etcd_op put = {.kind = ETCD_OP_PUT};
	char *key = NULL, *body;

	for (size_t i = 0; i < c->sync.st.n_participants; i++) {
		const struct etcd_kv *kv;
		json_t *info = NULL, *role, *lws;
		size_t ri;

		free(key);
		key = xasprintf("%s%s", c->info_prefix, c->sync.st.participants[i].node.name);
		kv = c->infos.n_kvs > 0
			     ? bsearch(key, c->infos.kvs, c->infos.n_kvs, sizeof(*kv), cmp_kv_key)
			     : NULL;
		if (kv) {
			info = json_loadb(kv->value, kv->value_len, 0, NULL);
		}
		role = json_object_get(info, "role");
		lws = json_object_get(info, "local_world_size");
		if (!json_is_string(role) || !json_is_integer(lws)) {
			/* Not there (yet), or not ours: the node's lease tells. */
			json_decref(info);
			json_decref(roles);
			json_decref(nodes);
			free(key);
			return 0;
		}
		for (ri = 0; ri < json_array_size(roles); ri++) {
			if (json_equal(json_array_get(roles, ri), role)) {
				break;
			}
		}
		if (ri == json_array_size(roles)) {
			json_array_append(roles, role);
		}
		json_array_append_new(nodes, json_pack("[IO]", (json_int_t)ri, lws));
		json_decref(info);
	}
	free(key);
	o = json_pack("{sssisoso}", "master_addr", c->master_addr, "master_port", c->master_port,
		      "roles", roles, "nodes", nodes);
	free(c->assignment);
	c->assignment = json_dumps(o, JSON_COMPACT);
	c->assignment_len = strlen(c->assignment);
	c->assignment_round = c->sync.round;
	json_decref(o);
	key = assignment_key(c, c->sync.round);
	put.key = key;
	put.value = c->assignment;
	put.value_len = c->assignment_len;
	body = etcd_encode_op(&put);
	(void)etcd_client_call(c->cl, "/v3/kv/put", body, published_cb, c);
	free(body);
	free(key);
	c->published = true;
	return 1;
}

/* Read w/r/<round> into c->result. Returns 0 or -EBADMSG. */
static int
exchange_take(struct etcdr *c)
{
	struct rdzv_result *res = &c->result;
	json_t *o = json_loadb(c->assignment, c->assignment_len, 0, NULL);
	json_t *roles = json_object_get(o, "roles"), *nodes = json_object_get(o, "nodes"),
	       *addr = json_object_get(o, "master_addr"), *port = json_object_get(o, "master_port");

	if (!json_is_array(roles) || !json_is_array(nodes) || !json_is_string(addr) ||
	    !json_is_integer(port) || json_array_size(nodes) != (size_t)c->sync.world) {
		json_decref(o);
		return -EBADMSG;
	}
	rdzv_result_release(res);
	strv_free(c->roles);
	res->nodes = xcalloc((size_t)c->sync.world, sizeof(*res->nodes));
	c->roles = xcalloc((size_t)c->sync.world + 1, sizeof(*c->roles));
	for (int rank = 0; rank < c->sync.world; rank++) {
		json_t *n = json_array_get(nodes, (size_t)rank);
		json_t *role =
			json_array_get(roles, (size_t)json_integer_value(json_array_get(n, 0)));
		json_int_t lws = json_integer_value(json_array_get(n, 1));

		if (!json_is_integer(json_array_get(n, 0)) ||
		    json_integer_value(json_array_get(n, 0)) < 0 || !json_is_string(role) ||
		    lws < 1 || lws > 1 << 20) {
			json_decref(o);
			return -EBADMSG;
		}
		c->roles[rank] = xstrdup(json_string_value(role));
		res->nodes[rank].role = c->roles[rank];
		res->nodes[rank].local_world_size = (int)lws;
	}
	res->round = (int)c->sync.round;
	res->group_rank = c->sync.rank;
	res->group_world_size = c->sync.world;
	res->master_addr = xstrdup(json_string_value(addr));
	res->master_port = (int)json_integer_value(port);
	res->use_agent_store = false;
	json_decref(o);
	return 0;
}

static void
exchange_start(struct etcdr *c)
{
	long me = rdzv_state_find_participant(&c->sync.st, &c->me);
	const struct config *cfg = c->r->cfg;
	uint64_t now = now_usec();

	rdzv_result_release(&c->result);
	strv_free(c->roles);
	c->roles = NULL;
	c->sync.round = c->sync.st.round;
	c->sync.rank = c->sync.st.participants[me].rank;
	c->sync.world = (int)c->sync.st.n_participants;
	c->exchanging = true;
	c->published = false;
	range_release(&c->infos);
	if (c->sync.rank == 0) {
		int port = rdzv_free_port();

		free(c->master_addr);
		c->master_addr = xstrdup(cfg->local_addr && *cfg->local_addr ? cfg->local_addr
									     : host_fqdn());
		c->master_port = port > 0 ? port : 29500;
	}
	timer_usec(c->aux_timer, c->sync.next_deadline > now ? c->sync.next_deadline - now : 1);
	if (c->sync.rank == 0) {
		read_all(c); /* the i/ keys */
	} else {
		exchange_check(c); /* the assignment may be in already; else the watch brings it */
	}
}

static void
exchange_check(struct etcdr *c)
{
	const struct config *cfg = c->r->cfg;
	char *msg;

	if (c->sync.st.closed || c->sync.st.round != c->sync.round ||
	    rdzv_state_find_participant(&c->sync.st, &c->me) < 0) {
		/* The round went on without us: join the next one. */
		c->exchanging = false;
		evtimer_del(c->aux_timer);
		if (!c->sync.op_active) {
			op_start(c, RDZV_OP_JOIN, c->sync.next_deadline, join_done);
		}
		return;
	}
	if (c->sync.rank == 0 && !c->published && exchange_publish(c) == 0) {
		return;
	}
	if (!c->assignment || c->assignment_round != c->sync.round) {
		return;
	}
	if (exchange_take(c) < 0) {
		c->exchanging = false;
		next_fail(c, -EBADMSG, "the rank assignment in etcd is malformed");
		return;
	}
	c->exchanging = false;
	evtimer_del(c->aux_timer);
	c->sync.next_active = false;
	c->sync.running = true;
	c->sync.told = false;
	msg = xasprintf("%s has joined round %" PRId64 " of the rendezvous '%s' as rank %d in a "
			"world of size %d.",
			c->me.name, c->sync.round, cfg->rdzv_id, c->sync.rank, c->sync.world);
	set_state(c, NODE_STATE_SUCCEEDED, "next_rendezvous", msg);
	free(msg);
	c->r->cb.done(0, &c->result, NULL, c->r->cb.arg);
	rdzv_sync_observe(&c->sync);
}

static void
join_done(void *arg, int err, enum rdzv_action a)
{
	struct etcdr *c = arg;
	const char *id = c->r->cfg->rdzv_id;
	char *msg = NULL;

	if (err < 0) {
		next_fail(c, err, "the rendezvous state in etcd is corrupt");
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
	next_fail(c, err, msg);
	free(msg);
}

static void
exit_done(void *arg, int err, enum rdzv_action a)
{
	struct etcdr *c = arg;
	if (err < 0 || a != RDZV_ACTION_FINISH) {
		join_done(c, err, a == RDZV_ACTION_FINISH ? RDZV_ACTION_ERROR_TIMEOUT : a);
		return;
	}
	op_start(c, RDZV_OP_JOIN, c->sync.next_deadline, join_done);
}

static void
start_next(struct etcdr *c)
{
	c->next_pending = false;
	op_start(c, RDZV_OP_EXIT, c->sync.next_deadline, exit_done);
}

static int
etcdr_next(struct rdzv *r)
{
	struct etcdr *c = backend(r);
	char *msg;

	rdzv_sync_next_begin(&c->sync);
	c->exchanging = false;
	evtimer_del(c->aux_timer);
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
	if (c->sync.op_active) {
		/* A take-over: the loop under way goes on as the exit op. */
		rdzv_sync_start(&c->sync, RDZV_OP_EXIT, c->sync.next_deadline, exit_done);
		return 0;
	}
	start_next(c);
	return 0;
}

static int
etcdr_num_nodes_waiting(struct rdzv *r)
{
	return (int)backend(r)->sync.st.n_wait_list;
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
	if (c->sync.next_active) {
		rdzv_sync_abandon(&c->sync);
		next_fail(c, -ECONNABORTED, msg);
	} else if (c->sync.running && !c->sync.told) {
		c->sync.told = true;
		rdzv_tell(c->r, RDZV_TELL_FAILED, -ECONNABORTED, 0, msg);
	}
}

/* Every etcd member is out of reach while this node is in: the workers keep
 * running (nothing they do needs etcd), but the rendezvous is degraded: no
 * node can join, leave or be found dead until etcd answers, and this node's
 * lease runs out after its TTL. Say so: a warning at once and then at most
 * every KA_TELL_S, and a _keep_alive FAILED event per failed heartbeat. */
#define KA_TELL_S 60

static void
ka_failed(struct etcdr *c, const char *errmsg)
{
	uint64_t now = now_usec();

	rdzv_record_step(
		c->r, NODE_STATE_FAILED, "_keep_alive",
		"The node '%s' has failed to send a keep-alive heartbeat to the rendezvous "
		"'%s' due to an error: %s",
		c->me.name, c->r->cfg->rdzv_id, errmsg);
	if (!c->ka_fail_since) {
		c->ka_fail_since = now;
		c->ka_tell = (struct ratelimit){.interval_usec = KA_TELL_S * USEC_PER_SEC};
	}
	if (!ratelimit_pass(&c->ka_tell, now, NULL)) {
		return;
	}
	rdzv_warn(c->r,
		  "rendezvous degraded: etcd unreachable for %.0f s (%s); the workers keep "
		  "running, no node can join or leave, and this node's lease expires %d s "
		  "after its last keep-alive",
		  (double)(now - c->ka_fail_since) / USEC_PER_SEC, errmsg, (int)c->ttl);
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
		ka_failed(c, errmsg);
	} else if (err == -ENOENT) {
		lease_lost(c);
		return;
	}
	if (err == 0 && c->ka_fail_since) {
		rdzv_warn(c->r, "rendezvous back: etcd answered after %.0f s unreachable",
			  (double)(now_usec() - c->ka_fail_since) / USEC_PER_SEC);
		c->ka_fail_since = 0;
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
	uint64_t deadline = c->sync.next_active ? c->sync.next_deadline : c->boot_deadline;

	free(c->boot_err);
	c->boot_err = xstrdup(msg);

	if (c->err_logged == 0 || now - c->err_logged >= ERR_LOG_USEC) {
		c->err_logged = now;
		rdzv_progress(c->r, "cannot reach etcd (%s); retrying until the join timeout", msg);
	}
	if (now >= deadline && c->sync.next_active) {
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

/* a/<node> is in at revision rev: watch from there and start. deaths_from:
 * the first revision of deaths that matter, the creation of the state we
 * found (a node that died before we came may still be in it); deletions
 * before it belong to an earlier job under the same run id, whose node names
 * may come back (same host, same pid). */
static void
boot_ready(struct etcdr *c, int64_t rev, int64_t deaths_from)
{
	c->rev = rev;
	c->boot = BOOT_READY;
	c->err_logged = 0;
	timer_usec(c->ka_timer, (uint64_t)c->ttl * USEC_PER_SEC / 3);
	c->watch = etcd_watch_new(c->cl, c->watch_prefix, c->watch_end, c->rev + 1, false, watch_cb,
				  c);
	/* Only deletions come; a compacted history resets it (then the a/
	 * range is read once). */
	c->deaths = etcd_watch_new(c->cl, c->alive_prefix, c->alive_end,
				   deaths_from > 0 && deaths_from <= rev ? deaths_from : rev + 1,
				   true, deaths_cb, c);
	if (c->next_pending) {
		start_next(c);
	}
}

static void
clean_cb(int err, const struct etcd_response *resp, const char *errmsg, void *arg)
{
	struct etcdr *c = arg;

	if (err < 0) {
		boot_failed_try(c, err, errmsg);
		return;
	}
	boot_ready(c, resp->revision, 0);
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
		/* [put a/<node>, the state, a/ (count)] */
		if (resp->n_ranges >= 3 && resp->ranges[1].n_kvs == 1 &&
		    resp->ranges[2].count <= 1) {
			struct rdzv_state st;
			bool closed =
				rdzv_state_decode(resp->ranges[1].kvs[0].value,
						  resp->ranges[1].kvs[0].value_len, &st) == 0 &&
				st.closed;

			rdzv_state_release(&st);
			if (closed) {
				/* A closed rendezvous nobody is in: a finished job
				 * with the same run id. Start clean (unless somebody
				 * wrote it meanwhile). */
				struct etcd_cmp cmp = {
					.key = c->state_key,
					.target = ETCD_CMP_MOD,
					.revision = resp->ranges[1].kvs[0].mod_revision,
				};
				/* Everything but a/: ours is in, and the others'
				 * went with their leases. */
				struct etcd_op del[2] = {{.kind = ETCD_OP_DELETE,
							  .key = c->prefix,
							  .range_end = c->alive_prefix},
							 {.kind = ETCD_OP_DELETE,
							  .key = c->alive_end,
							  .range_end = c->prefix_end}};
				char *body = etcd_encode_txn(&cmp, 1, del, 2, NULL, 0);

				rdzv_progress(
					c->r,
					"removing the closed rendezvous '%s' left in etcd by an "
					"earlier job",
					c->r->cfg->rdzv_id);
				(void)etcd_client_call(c->cl, "/v3/kv/txn", body, clean_cb, c);
				free(body);
				return;
			}
		}
		boot_ready(c, resp->revision,
			   resp->n_ranges >= 2 && resp->ranges[1].n_kvs == 1
				   ? resp->ranges[1].kvs[0].create_revision
				   : 0);
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
		/* In, and a look for a closed rendezvous nobody else is in. */
		struct etcd_op ops[3] = {
			{.kind = ETCD_OP_PUT,
			 .key = c->alive_key,
			 .value = "1",
			 .value_len = 1,
			 .lease = c->lease},
			{.kind = ETCD_OP_RANGE, .key = c->state_key},
			{.kind = ETCD_OP_RANGE,
			 .key = c->alive_prefix,
			 .range_end = c->alive_end,
			 .keys_only = true,
			 .limit = 1},
		};

		body = etcd_encode_txn(NULL, 0, ops, 3, NULL, 0);
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
	if (c->sync.barrier && c->n_arrived >= c->sync.world) {
		c->sync.barrier = false;
		evtimer_del(c->aux_timer);
		rdzv_tell(c->r, RDZV_TELL_FINISHED, 0, 0, NULL);
	}
}

static void
aux_timer_cb(evutil_socket_t fd, short what, void *arg)
{
	struct etcdr *c = arg;
	char *msg;

	if (c->sync.barrier) {
		c->sync.barrier = false;
		msg = xasprintf("the exit barrier of round %" PRId64 " timed out after %g s",
				c->sync.round, (double)c->barrier_timeout / 1e6);
		rdzv_tell(c->r, RDZV_TELL_FINISHED, -ETIMEDOUT, 0, msg);
		free(msg);
	} else if (c->exchanging) {
		c->exchanging = false;
		next_fail(c, -ETIMEDOUT,
			  "the rank exchange through etcd did not complete before "
			  "the join timeout");
	} else if (c->sync.next_active && c->next_pending && c->boot != BOOT_READY) {
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

	if (!c->sync.running) {
		rdzv_tell(c->r, RDZV_TELL_FINISHED, 0, 0, NULL);
		return 0;
	}
	c->sync.barrier = true;
	free(c->arrived);
	c->arrived = xcalloc((size_t)c->sync.world, sizeof(*c->arrived));
	c->n_arrived = 0;
	prefix = round_prefix(c, 'b', c->sync.round);
	key = xasprintf("%s%d", prefix, c->sync.rank);
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
		rdzv_progress(c->r, "leaving the rendezvous: %s", errmsg);
		/* Nothing more to do without etcd: the lease expires by itself. */
		c->fin = FIN_NONE;
		rdzv_tell(c->r, RDZV_TELL_FINISHED, 0, 0, NULL);
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
		rdzv_tell(c->r, RDZV_TELL_FINISHED, 0, 0, NULL);
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
		etcd_watch_free(c->deaths);
		c->deaths = NULL;
		etcd_watch_free(c->jwatch);
		c->jwatch = NULL;
		if (c->lease == 0) {
			c->fin = FIN_NONE;
			rdzv_tell(c->r, RDZV_TELL_FINISHED, 0, 0, NULL);
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
		rdzv_tell(c->r, RDZV_TELL_FINISHED, err, 0, NULL);
		return;
	}
}

static void
close_done(void *arg, int err, enum rdzv_action a)
{
	struct etcdr *c = arg;
	if (err == 0 && a == RDZV_ACTION_FINISH) {
		char *msg = xasprintf("The node '%s' has closed the rendezvous '%s'.", c->me.name,
				      c->r->cfg->rdzv_id);

		set_state(c, NODE_STATE_SUCCEEDED, "_close", msg);
		free(msg);
	}
	fin_step(c, 0);
}

static int
etcdr_finish(struct rdzv *r, bool close)
{
	struct etcdr *c = backend(r);

	c->sync.running = false;
	c->sync.barrier = false;
	c->exchanging = false;
	c->sync.next_active = false;
	evtimer_del(c->aux_timer);
	c->fin_close = close;
	c->fin = FIN_CLOSE;
	if (!close && c->sync.op_active) {
		/* Leaving (rdzv_leave): a join or keep-alive under way ends here;
		 * the revoked lease takes this node out of the others' state. */
		rdzv_sync_abandon(&c->sync);
	}
	if (c->boot != BOOT_READY) {
		c->fin = FIN_NONE;
		if (c->lease != 0) {
			/* Let the lease go now rather than at its TTL. */
			c->fin = FIN_CLOSE;
			fin_step(c, 0);
			return 0;
		}
		rdzv_tell(c->r, RDZV_TELL_FINISHED, 0, 0, NULL);
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
etcdr_init(struct rdzv *r, char **reterr)
{
	const struct config *cfg = r->cfg;
	struct etcdr *c = xcalloc(1, sizeof(*c));
	const char *v;
	size_t len;

	r->backend = c;
	c->r = r;
	c->node_state = NODE_STATE_INIT;
	rdzv_state_init(&c->sync.st);
	if (rdzv_dynamic_conf(cfg, &c->settings, &c->join_timeout, &c->close_timeout,
			      &c->barrier_timeout, reterr) < 0 ||
	    rdzv_node_self(cfg, &c->me, reterr) < 0) {
		return -EINVAL;
	}
	rdzv_sync_init(&c->sync, r, &etcd_store_ops, c, &c->settings, &c->me, c->join_timeout);
	/* The lease TTL is torch's heartbeat expiry, at least etcd's minimum. */
	c->ttl = (c->settings.keep_alive_interval_usec * c->settings.keep_alive_max_attempt +
		  USEC_PER_SEC - 1) /
		 USEC_PER_SEC;
	if (c->ttl < 2) {
		c->ttl = 2;
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
	c->alive_prefix = xasprintf("%sa/", c->prefix);
	c->join_prefix = xasprintf("%sj/", c->prefix);
	c->join_end = etcd_prefix_end(c->join_prefix, strlen(c->join_prefix), &len);
	c->join_key = xasprintf("%s%s", c->join_prefix, c->me.name);
	c->info_prefix = xasprintf("%si/", c->prefix);
	c->info_end = etcd_prefix_end(c->info_prefix, strlen(c->info_prefix), &len);
	c->info_key = xasprintf("%s%s", c->info_prefix, c->me.name);
	c->gen_key = xasprintf("%sw/gen", c->prefix);
	c->adm_key = xasprintf("%sw/adm", c->prefix);
	c->watch_prefix = xasprintf("%sw/", c->prefix);
	c->watch_end = etcd_prefix_end(c->watch_prefix, strlen(c->watch_prefix), &len);
	c->alive_end = etcd_prefix_end(c->alive_prefix, strlen(c->alive_prefix), &len);
	c->alive_key = xasprintf("%s%s", c->alive_prefix, c->me.name);
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
	etcd_watch_free(c->deaths);
	etcd_watch_free(c->jwatch);
	etcd_client_free(c->cl);
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
	range_release(&c->infos);
	joiners_clear(c);
	free(c->joiners);
	free(c->assignment);
	free(c->arrived);
	free(c->master_addr);
	strv_free(c->dead);
	free(c->join_prefix);
	free(c->join_end);
	free(c->join_key);
	free(c->info_prefix);
	free(c->info_end);
	free(c->info_key);
	rdzv_sync_release(&c->sync);
	rdzv_node_release(&c->me);
	rdzv_result_release(&c->result);
	strv_free(c->roles);
	free(c->prefix);
	free(c->prefix_end);
	free(c->state_key);
	free(c->alive_prefix);
	free(c->alive_end);
	free(c->alive_key);
	free(c->boot_err);
	free(c->gen_key);
	free(c->adm_key);
	free(c->watch_prefix);
	free(c->watch_end);
	free(c);
	r->backend = NULL;
}

/* The local copy as it is, with the nodes known to have lost their lease. */
static int
etcdr_snapshot(struct rdzv *r, struct rdzv_snapshot *ret)
{
	struct etcdr *c = backend(r);
	size_t n = 0;

	*ret = (struct rdzv_snapshot){
		.backend = "etcd",
		.self = xstrdup(c->me.name),
		.read_usec = c->sync.read_usec > 0 ? c->sync.read_usec : -1,
		.liveness = RDZV_LIVENESS_LEASE,
	};
	rdzv_state_copy(&ret->st, &c->sync.st);
	while (c->dead && c->dead[n]) {
		n++;
	}
	ret->dead = xcalloc(n + 1, sizeof(*ret->dead));
	for (size_t i = 0; i < n; i++) {
		ret->dead[i] = xstrdup(c->dead[i]);
	}
	return 0;
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
	.snapshot = etcdr_snapshot,
};
