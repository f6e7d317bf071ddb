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
 *                    themselves. The coordinator keeps the set of nodes it
 *                    knows dead, from a watch on a/ that filters out puts,
 *                    started at the creation of the state it found
 *                    (deletions before belong to an earlier job of the same
 *                    run id). Before each decision every member of the
 *                    state gets a heartbeat of "now", or "never" when dead,
 *                    so rdzv_sanitize drops exactly the nodes whose lease
 *                    went; the coordinator writes such a copy at once, with
 *                    w/gen, and the others learn of the dead from the state
 *   j/<node>         a join request (lease), put in the same txn as the
 *                    first read of a join, deleted once a participant.
 *   i/<node>         the node's role and local world size (lease), put with
 *                    its join request
 *   w/gen            put in the same txn as a state change that waiting
 *                    nodes must hear about (rdzv_apply's "notable")
 *   w/adm            put by a write that admitted other nodes
 *   w/r/<round>      the rank exchange's answer (rdzv_exchange.h, over
 *                    rdzv_etcd_kv.c): group rank 0 reads the i/ keys of the
 *                    round's participants and publishes roles, local world
 *                    sizes, MASTER_ADDR and a free MASTER_PORT
 *   b/<round>/<rank> exit barrier arrivals (watched by group rank 0 alone)
 *   w/b/<round>      put by group rank 0 once every rank arrived: the
 *                    barrier is over (one event per node, not N)
 *   n/<node>         the coordinator's word to one node: "<round> <rank>
 *                    <world> <gen> <rev>" once a round completes (rev: the
 *                    state write that completed it), "spare" or "closed"
 *                    (rdzv_etcd_assign.c); a joiner that does not
 *                    coordinate watches only this key and never reads the
 *                    state unless the word is not an assignment, the
 *                    coordinator changed, or its join deadline passed
 *   closed           put with a closed state: what such a joiner and a
 *                    booting node look at instead of the state
 *   w/coord          the coordinator's node name, on its lease: every look
 *                    reads it and, in the same txn, takes it when nobody
 *                    holds it (the first to look after a start or after the
 *                    holder's lease went). One key, so that who coordinates
 *                    costs etcd O(1) per look: a range sorted by creation
 *                    ("the oldest a/ key") reads and sorts all N keys, which
 *                    made the boot and every look O(N) inside etcd. Under
 *                    w/, so that the nodes in a round hear of its holder's
 *                    death (a deletion: a re-read, which takes the key)
 *
 * Admission: the coordinator watches j/ and reads the requests since its last
 * look; every write it makes admits them all on the way, in order of request
 * (rdzv_admit), and so does a write of its own join. The others do not race
 * it: a node whose join would add itself waits (for w/adm to show progress)
 * and writes itself only when nothing moved for BEHIND_USEC and a fresh read
 * still lacks it. A crowd of N nodes thus costs a few compare-and-sets, not N
 * rounds of losers (torch's loop collapses near 128 nodes, reference §8).
 *
 * Waiting never polls: one stream per node, from its boot, carries two
 * watches (resumed from their last revisions after a drop, moved to the
 * member the unary calls use after a fail-over): its n/<node>, and w/, which
 * brings w/gen (then a re-read), w/adm, the rank assignment and the end of
 * the exit barrier (taken from the events themselves) and the coordinator's
 * death. Before its first round, a blind joiner's w/ is dormant: it keeps
 * the newest re-read revision and takes a re-read on waking only if that
 * falls in its round (rdzv_etcd_assign.c). The coordinator alone watches the
 * a/ deletions and the join requests, group rank 0 alone the barrier's
 * arrivals. The state
 * itself is outside all of them: a join is never broadcast to every node.
 * Timers only re-run the pure decision on the local copy (last-call and join
 * deadlines).
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
#include "rdzv_etcd.h"

/* ---- helpers ------------------------------------------------------------ */

bool
etcdr_is_dead(const struct etcdr *c, const char *name)
{
	for (size_t i = 0; c->dead && c->dead[i]; i++) {
		if (strcmp(c->dead[i], name) == 0) {
			return true;
		}
	}
	return false;
}

/* Heartbeats from leases: "never" for nodes known dead, "now" for the rest. */
void
etcdr_overlay(struct etcdr *c, struct rdzv_state *st, int64_t now_wall)
{
	for (size_t i = 0; i < st->n_heartbeats; i++) {
		st->heartbeats[i].usec =
			etcdr_is_dead(c, st->heartbeats[i].node.name) ? 0 : now_wall;
	}
}

/* The dead set after reading the a/ range: the state's nodes without a key.
 * A node that appears later is alive until its key is deleted. */
void
etcdr_dead_from_alive(struct etcdr *c, const struct rdzv_state *st, const struct etcd_range *alive)
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

void
etcdr_range_release(struct etcd_range *r)
{
	for (size_t i = 0; i < r->n_kvs; i++) {
		free(r->kvs[i].key);
		free(r->kvs[i].value);
	}
	free(r->kvs);
	memset(r, 0, sizeof(*r));
}

/* Deep copy of an answer's range (its strings die with the answer). */
void
etcdr_range_copy(struct etcd_range *dst, const struct etcd_range *src)
{
	etcdr_range_release(dst);
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

void
etcdr_joiners_clear(struct etcdr *c)
{
	for (size_t i = 0; i < c->n_joiners; i++) {
		rdzv_node_release(&c->joiners[i]);
	}
	c->n_joiners = 0;
}

/* Add the join requests of a j/ range to those held, oldest first, each node
 * once. */
void
etcdr_take_joiners(struct etcdr *c, const struct etcd_range *r)
{
	size_t plen = strlen(c->join_prefix);
	const struct etcd_kv **by_rev = xcalloc(r->n_kvs + 1, sizeof(*by_rev));

	c->joiners = xrealloc(c->joiners, (c->n_joiners + r->n_kvs + 1) * sizeof(*c->joiners));
	c->joiner_revs =
		xrealloc(c->joiner_revs, (c->n_joiners + r->n_kvs + 1) * sizeof(*c->joiner_revs));
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
		/* "x<round>": out of that round first (rdzv_assign.h). */
		(void)rdzv_exits_note(&c->exits, n, kv->value, kv->value_len);
		for (size_t k = 0; k < c->n_joiners && !dup; k++) {
			dup = rdzv_node_cmp(&c->joiners[k], n) == 0;
			if (dup && kv->mod_revision > c->joiner_revs[k]) {
				c->joiner_revs[k] = kv->mod_revision; /* asked again */
			}
		}
		if (dup) {
			rdzv_node_release(n);
		} else {
			c->joiner_revs[c->n_joiners++] = kv->mod_revision;
		}
	}
	free(by_rev);
}

char *
etcdr_assignment_key(const struct etcdr *c, int64_t round)
{
	return xasprintf("%sw/r/%" PRId64, c->prefix, round);
}

char *
etcdr_arrival_prefix(const struct etcdr *c, int64_t round)
{
	return xasprintf("%sb/%" PRId64 "/", c->prefix, round);
}

char *
etcdr_barrier_key(const struct etcdr *c, int64_t round)
{
	return xasprintf("%sw/b/%" PRId64, c->prefix, round);
}

/* etcd could not be reached (every member tried): log, retry until the
 * deadline of whatever waits. */
void
etcdr_io_failed(struct etcdr *c, int err, const char *msg)
{
	uint64_t now = now_usec();

	if (etcdr_lease_gone(c)) {
		c->kick_pending = false; /* left: no retry */
		return;
	}
	c->io_fails++;
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
		etcdr_next_fail(c, err, m);
		free(m);
		return;
	}
	c->kick_pending = true;
	timer_usec(c->retry_timer, etcdr_retry_usec(c, c->sync.next_active ? c->sync.next_deadline
									   : c->sync.op_deadline));
}

uint64_t
etcdr_retry_usec(struct etcdr *c, uint64_t deadline)
{
	unsigned doublings = c->io_fails > 5 ? 4 : c->io_fails > 0 ? c->io_fails - 1 : 0;
	uint64_t whole = (uint64_t)RETRY_USEC << doublings, now = now_usec(), pause;

	pause = whole / 2 + rdzv_sync_jitter(&c->sync, whole / 2);
	if (deadline > now && now + pause > deadline + RETRY_USEC / 10) {
		pause = deadline - now + RETRY_USEC / 10;
	}
	return pause;
}

/* ---- the watches -------------------------------------------------------- */

/* a/ deletions: a lease went. */
void
etcdr_deaths_cb(int err, const struct etcd_response *resp, bool reset, const char *errmsg,
		void *arg)
{
	struct etcdr *c = arg;
	size_t plen = strlen(c->alive_prefix);

	if (err < 0) {
		rdzv_progress(c->r, "%s; reconnecting", errmsg);
		return;
	}
	if (c->boot != BOOT_READY || etcdr_lease_gone(c)) {
		return;
	}
	if (reset) {
		c->alive_stale = true;
	}
	for (size_t i = 0; i < resp->n_events; i++) {
		const struct etcd_kv *kv = &resp->events[i].kv;

		/* Our lease's fate comes from its keep-alive, not from
		 * here. */
		if (resp->events[i].is_delete && kv->key_len > plen &&
		    strcmp(kv->key, c->alive_key) != 0 && !etcdr_is_dead(c, kv->key + plen)) {
			strv_push(&c->dead, kv->key + plen);
		}
	}
	if (reset || resp->n_events > 0) {
		etcdr_read_all(c);
	}
}

/* ---- next_rendezvous ---------------------------------------------------- */

void
etcdr_next_fail(struct etcdr *c, int err, const char *msg)
{
	c->sync.next_active = false;
	c->rejoin_round = -1;
	c->next_pending = false;
	etcdr_exchange_abandon(c);
	if (c->boot == BOOT_READY) {
		etcdr_intent_drop(c);
	}
	set_state(c, NODE_STATE_FAILED, "next_rendezvous", msg);
	rdzv_tell(c->r, RDZV_TELL_DONE, err, 0, msg);
}

static void join_done(void *arg, int err, enum rdzv_action a);

void
etcdr_put_done_cb(int err, const struct etcd_response *resp, const char *errmsg, void *arg)
{
	struct etcdr *c = arg;

	if (err < 0) {
		rdzv_progress(c->r, "%s", errmsg);
	}
	/* Our own put wakes our watch too; read anyway in case it is down. */
	etcdr_read_all(c);
}

/* The rank exchange ended (rdzv_exchange.h): run the round, or fail the
 * next_rendezvous. */
static void
exchanged(void *arg, int err, const char *msg)
{
	struct etcdr *c = arg;
	char *line;

	if (c->fin != FIN_NONE || !c->sync.next_active) {
		return; /* left, or gave up, meanwhile */
	}
	if (err < 0) {
		etcdr_next_fail(c, err, msg);
		return;
	}
	c->sync.next_active = false;
	c->sync.running = true;
	c->sync.told = false;
	line = xasprintf("%s has joined round %" PRId64 " of the rendezvous '%s' as rank %d in a "
			 "world of size %d.",
			 c->me.name, c->sync.round, c->r->cfg->rdzv_id, c->sync.rank,
			 c->sync.world);
	set_state(c, NODE_STATE_SUCCEEDED, "next_rendezvous", line);
	free(line);
	c->r->cb.done(0, &c->x.result, NULL, c->r->cb.arg);
	rdzv_sync_observe(&c->sync);
}

/* The exit barrier ended. */
static void
passed(void *arg, int err, const char *msg)
{
	struct etcdr *c = arg;

	if (!c->sync.barrier) {
		return; /* ended meanwhile (the rendezvous closed, or we left) */
	}
	c->sync.barrier = false;
	rdzv_tell(c->r, RDZV_TELL_FINISHED, err, 0, msg);
}

/* Group rank 0 or a member with a state it may trust: the engine runs. */
static void
exchange_go(struct etcdr *c)
{
	c->x_deferred = false;
	evtimer_del(c->aux_timer);
	if (c->sync.rank == 0) {
		etcdr_kv_round(c);
	}
	rdzv_sync_exchange_start(&c->sync, &c->x, "");
}

static void
exchange_start(struct etcdr *c)
{
	long me = rdzv_state_find_participant(&c->sync.st, &c->me);

	if (!c->sync.stale) {
		/* Else rdzv_sync_assigned set them from our n/<node> key. */
		c->sync.round = c->sync.st.round;
		c->sync.rank = c->sync.st.participants[me].rank;
		c->sync.world = (int)c->sync.st.n_participants;
	}
	c->ran_round = c->sync.round;
	etcdr_range_release(&c->infos);
	if (c->sync.rank == 0 && c->sync.stale) {
		/* Group rank 0 names the round's nodes from the state, by the
		 * join's deadline (etcdr_aux_timer_cb). */
		uint64_t now = now_usec();

		c->x_deferred = true;
		timer_usec(c->aux_timer,
			   c->sync.next_deadline > now ? c->sync.next_deadline - now : 1);
		etcdr_read_all(c);
		return;
	}
	exchange_go(c);
}

void
etcdr_exchange_abandon(struct etcdr *c)
{
	c->x_deferred = false;
	evtimer_del(c->aux_timer);
	rdzv_exchange_abandon(&c->x);
	etcdr_kv_check(c); /* drops its get */
}

void
etcdr_exchange_check(struct etcdr *c)
{
	if (!etcdr_exchanging(c)) {
		return;
	}
	if (!c->sync.stale && (c->sync.st.closed || c->sync.st.round != c->sync.round ||
			       rdzv_state_find_participant(&c->sync.st, &c->me) < 0)) {
		/* The round went on without us: join the next one. */
		etcdr_exchange_abandon(c);
		if (!c->sync.op_active) {
			etcdr_op_start(c, RDZV_OP_JOIN, c->sync.next_deadline, join_done);
		}
		return;
	}
	if (c->x_deferred && !c->sync.stale) {
		exchange_go(c);
	}
}

static void
join_done(void *arg, int err, enum rdzv_action a)
{
	struct etcdr *c = arg;
	const char *id = c->r->cfg->rdzv_id;
	char *msg = NULL;

	if (err < 0) {
		etcdr_next_fail(c, err, "the rendezvous state in etcd is corrupt");
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
	etcdr_next_fail(c, err, msg);
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
	etcdr_op_start(c, RDZV_OP_JOIN, c->sync.next_deadline, join_done);
}

void
etcdr_start_next(struct etcdr *c)
{
	c->next_pending = false;
	c->rejoin_round = -1;
	if (c->ran_round < 0) {
		/* Never in a round: the exit op has nothing to do (and would read
		 * the whole state). */
		etcdr_op_start(c, RDZV_OP_JOIN, c->sync.next_deadline, join_done);
		return;
	}
	if (etcdr_coordinator_known(c) && !c->coordinator) {
		/* The coordinator takes us out of the round we ran in the write
		 * that admits us (our request says "x<round>"), and we wait for
		 * our n/<node> key: no O(N) read and write of our own. */
		c->rejoin_round = c->ran_round;
		c->rejoin_asked = now_usec();
		c->rejoin_looked = false;
		etcdr_op_start(c, RDZV_OP_JOIN, c->sync.next_deadline, join_done);
		return;
	}
	etcdr_op_start(c, RDZV_OP_EXIT, c->sync.next_deadline, exit_done);
}

bool
etcdr_rejoin_check(struct etcdr *c)
{
	const struct rdzv_state *st = &c->sync.st;
	int64_t round = c->rejoin_round;

	if (round < 0 || !c->sync.op_active || c->sync.op != RDZV_OP_JOIN) {
		return false;
	}
	if (!rdzv_exits_still_in(st, &c->me, round)) {
		/* Out: the coordinator ran our exit op, its event is ours. */
		rdzv_record_action(c->r, c->me.name, round, RDZV_ACTION_REMOVE_FROM_PARTICIPANTS,
				   false);
		c->rejoin_round = -1;
		if (c->rejoin_looked) {
			/* That one look told: wait blind again, not one read of
			 * the state per change for the rest of the join. */
			c->blind_off = false;
		}
		return false;
	}
	/* The coordinator has not taken us out (yet): as torch, ourselves. */
	rdzv_progress(c->r,
		      "the coordinator has not taken %s out of round %" PRId64
		      " of the rendezvous '%s' yet; leaving it itself",
		      c->me.name, round, c->r->cfg->rdzv_id);
	c->rejoin_round = -1;
	etcdr_op_start(c, RDZV_OP_EXIT, c->sync.next_deadline, exit_done);
	return true;
}

int
etcdr_next(struct rdzv *r)
{
	struct etcdr *c = backend(r);
	char *msg;

	rdzv_sync_next_begin(&c->sync);
	etcdr_exchange_abandon(c);
	msg = xasprintf("%s attempts to join the next round of the rendezvous '%s'.", c->me.name,
			r->cfg->rdzv_id);
	set_state(c, NODE_STATE_RUNNING, "next_rendezvous", msg);
	free(msg);
	if (c->boot == BOOT_FAILED) {
		etcdr_next_fail(c, -ECONNABORTED, "this node's etcd lease expired");
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
		c->rejoin_round = -1;
		rdzv_sync_start(&c->sync, RDZV_OP_EXIT, c->sync.next_deadline, exit_done);
		return 0;
	}
	etcdr_start_next(c);
	return 0;
}

int
etcdr_num_nodes_waiting(struct rdzv *r)
{
	return (int)backend(r)->sync.st.n_wait_list;
}

/* ---- set-up ------------------------------------------------------------- */

/* The etcd client of cfg: its --rdzv-endpoint members, over the wire of
 * --rdzv-conf etcd_protocol (grpc, the default, or json). NULL with
 * *reterr (malloc'd) on a bad setting. */
static struct etcd_client *
etcd_client_from_conf(struct event_base *base, const struct config *cfg, char **reterr)
{
	const char *v = config_rdzv_conf_get(cfg, "etcd_protocol");

	if (v && strcmp(v, "grpc") != 0 && strcmp(v, "json") != 0) {
		*reterr = xasprintf("--rdzv-conf: invalid value '%s' for etcd_protocol: expected "
				    "'grpc' (etcd's native API) or 'json' (its JSON gateway)",
				    v);
		return NULL;
	}
	return etcd_client_new(base, cfg->rdzv_endpoint,
			       v && strcmp(v, "json") == 0 ? ETCD_WIRE_JSON : ETCD_WIRE_GRPC,
			       reterr);
}

/* The keys under c->prefix (the file comment). */
static void
keys_init(struct etcdr *c)
{
	size_t len;

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
	c->assign_prefix = xasprintf("%sn/", c->prefix);
	c->assign_key = xasprintf("%s%s", c->assign_prefix, c->me.name);
	c->closed_key = xasprintf("%sclosed", c->prefix);
	c->coord_key = xasprintf("%sw/coord", c->prefix);
	c->coord_end = etcd_prefix_end(c->coord_key, strlen(c->coord_key), &len);
	c->alive_end = etcd_prefix_end(c->alive_prefix, strlen(c->alive_prefix), &len);
	c->alive_key = xasprintf("%s%s", c->alive_prefix, c->me.name);
}

static int
etcdr_init(struct rdzv *r, char **reterr)
{
	const struct config *cfg = r->cfg;
	struct etcdr *c = xcalloc(1, sizeof(*c));
	const char *v;

	r->backend = c;
	c->r = r;
	c->node_state = NODE_STATE_INIT;
	rdzv_state_init(&c->sync.st);
	if (rdzv_dynamic_conf(cfg, &c->settings, &c->join_timeout, &c->close_timeout,
			      &c->barrier_timeout, reterr) < 0 ||
	    rdzv_node_self(cfg, &c->me, reterr) < 0) {
		return -EINVAL;
	}
	rdzv_sync_init(&c->sync, r, &etcdr_store_ops, c, &c->settings, &c->me, c->join_timeout);
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
	c->cl = etcd_client_from_conf(r->base, cfg, reterr);
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
	keys_init(c);
	c->ran_round = c->rejoin_round = -1;
	c->barrier_round = -1;
	rdzv_assign_memo_init(&c->told);
	rdzv_exchange_init(&c->x, &etcdr_kv_ops, c, exchanged, passed, c);
	c->kv_ev = event_new(r->base, -1, 0, etcdr_kv_ev_cb, c);
	c->kv_timer = evtimer_new(r->base, etcdr_kv_timer_cb, c);
	c->watch_ev = event_new(r->base, -1, 0, etcdr_watch_ev_cb, c);
	c->retry_timer = evtimer_new(r->base, etcdr_retry_cb, c);
	c->ka_timer = evtimer_new(r->base, etcdr_ka_timer_cb, c);
	c->aux_timer = evtimer_new(r->base, etcdr_aux_timer_cb, c);
	c->admit_timer = evtimer_new(r->base, etcdr_admit_timer_cb, c);
	c->boot_deadline = now_usec() + c->join_timeout;
	c->boot_timer = evtimer_new(r->base, etcdr_boot_retry_cb, c);
	if (r->observer) {
		/* No lease, no a/ key, no watch: it only reads and writes the
		 * state (rdzv_readmit), which needs none of them. */
		c->boot = BOOT_READY;
		return 0;
	}
	c->boot = BOOT_LEASE;
	etcdr_boot_step(c);
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
	etcd_watch_free(c->bwatch);
	etcd_client_free(c->cl);
	if (c->watch_ev) {
		event_free(c->watch_ev);
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
	if (c->admit_timer) {
		event_free(c->admit_timer);
	}
	if (c->kv_ev) {
		event_free(c->kv_ev);
	}
	if (c->kv_timer) {
		event_free(c->kv_timer);
	}
	rdzv_exchange_release(&c->x);
	etcdr_kv_release(c);
	etcdr_range_release(&c->infos);
	etcdr_joiners_clear(c);
	free(c->joiners);
	free(c->joiner_revs);
	rdzv_exits_release(&c->exits);
	free(c->assignment);
	free(c->arrived);
	strv_free(c->dead);
	free(c->join_prefix);
	free(c->join_end);
	free(c->join_key);
	free(c->info_prefix);
	free(c->info_end);
	free(c->info_key);
	rdzv_sync_release(&c->sync);
	rdzv_node_release(&c->me);
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
	free(c->assign_prefix);
	free(c->assign_key);
	free(c->closed_key);
	free(c->coord_key);
	free(c->coordinator_name);
	free(c->coord_end);
	rdzv_assign_memo_reset(&c->told);
	free(c);
	r->backend = NULL;
}

/* The local copy as it is, with the nodes known to have lost their lease. */
static int
etcdr_snapshot(struct rdzv *r, struct rdzv_snapshot *ret)
{
	struct etcdr *c = backend(r);
	size_t n = 0;

	if (c->sync.stale && c->boot == BOOT_READY && c->fin == FIN_NONE) {
		/* Learnt from our n/ key: refresh for the next look. */
		etcdr_read_all(c);
	}
	*ret = (struct rdzv_snapshot){
		.backend = "etcd",
		.self = xstrdup(c->me.name),
		.read_usec = c->sync.read_usec > 0 ? c->sync.read_usec : -1,
		.liveness = RDZV_LIVENESS_LEASE,
		.coordinator = c->coordinator_name ? xstrdup(c->coordinator_name) : NULL,
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

static bool
etcdr_coordinates(struct rdzv *r)
{
	return backend(r)->coordinator;
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
	.degraded = etcdr_degraded,
	.run_op = etcdr_run_op,
	.coordinates = etcdr_coordinates,
};
