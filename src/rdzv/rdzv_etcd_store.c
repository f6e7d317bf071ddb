/* rdzv_etcd_store.c — the etcd backend's store under the operation loop
 * (rdzv_sync.h): one txn reads the state with whatever else the node waits
 * for, one txn compare-and-sets it on its mod_revision (rdzv_etcd.c has the
 * key layout). */
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
#include "rdzv_etcd.h"

/* ---- reading and writing the state -------------------------------------- */

/* The group rank a key b/<round>/<rank> of our round names, or -1. */
static int
barrier_rank(const struct etcdr *c, const char *key)
{
	char *prefix = etcdr_arrival_prefix(c, c->x.round);
	size_t plen = strlen(prefix);
	long long rank = -1;

	if (strncmp(key, prefix, plen) != 0 ||
	    parse_int(key + plen, 0, c->sync.world - 1, &rank) < 0) {
		rank = -1;
	}
	free(prefix);
	return (int)rank;
}

void
etcdr_barrier_mark(struct etcdr *c, const char *key)
{
	int rank = barrier_rank(c, key);

	if (c->arrived && rank >= 0 && !c->arrived[rank]) {
		c->arrived[rank] = true;
		c->n_arrived++;
	}
}

bool
etcdr_barrier_arrived(const struct etcdr *c, const char *key)
{
	int rank = barrier_rank(c, key);

	return c->arrived && rank >= 0 && c->arrived[rank];
}

void
etcdr_barrier_seen(struct etcdr *c, const char *key)
{
	size_t plen = strlen(c->watch_prefix);
	long long round;

	if (strncmp(key, c->watch_prefix, plen) == 0 && strncmp(key + plen, "b/", 2) == 0 &&
	    parse_int(key + plen + 2, 0, INT64_MAX, &round) == 0 && round > c->barrier_round) {
		c->barrier_round = round;
	}
}

void
etcdr_assignment_seen(struct etcdr *c, const struct etcd_kv *kv)
{
	size_t rlen = strlen(c->watch_prefix) + 2;
	long long round;

	if (strlen(kv->key) > rlen && parse_int(kv->key + rlen, 0, INT64_MAX, &round) == 0) {
		etcdr_set_assignment(c, round, kv->value, kv->value_len);
	}
}

/* Keep the newest rank assignment seen (w/r/<round>), whenever it comes:
 * group rank 0 may publish before we look. */
void
etcdr_set_assignment(struct etcdr *c, int64_t round, const char *value, size_t len)
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
void
etcdr_intent_drop(struct etcdr *c)
{
	struct etcd_op del = {.kind = ETCD_OP_DELETE, .key = c->join_key};

	if (!c->intent || c->intent_pending) {
		return;
	}
	c->intent = false;
	(void)etcd_client_call(c->cl, &(struct etcd_request){.call = ETCD_CALL_DELETE, .op = &del},
			       intent_del_cb, c);
}

/* A participant needs its join request no more. */
static void
intent_check(struct etcdr *c)
{
	if (rdzv_state_find_participant(&c->sync.st, &c->me) >= 0) {
		etcdr_intent_drop(c);
	}
}

/* Microseconds the coordinator lets join requests gather per participant of
 * the state, and at most: one admission (a read and a compare-and-set of the
 * whole state) costs O(N), so a crowd arriving over a while must not cost
 * one admission each (as rdzv_c10d_assign.c). */
#define ADMIT_GATHER_PER_NODE_USEC 10
#define ADMIT_GATHER_MAX_USEC (50 * 1000)

void
etcdr_admit_timer_cb(evutil_socket_t fd, short what, void *arg)
{
	struct etcdr *c = arg;

	if (c->coordinator && c->fin == FIN_NONE) {
		etcdr_read_all(c);
	}
}

/* Look at the requests soon: at once while the state is small. */
static void
admit_later(struct etcdr *c)
{
	uint64_t usec = (uint64_t)c->sync.st.n_participants * ADMIT_GATHER_PER_NODE_USEC;

	if (usec < 1000) {
		etcdr_read_all(c);
		return;
	}
	if (!evtimer_pending(c->admit_timer, NULL)) {
		timer_usec(c->admit_timer,
			   usec < ADMIT_GATHER_MAX_USEC ? usec : ADMIT_GATHER_MAX_USEC);
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
		admit_later(c);
	}
}

void
etcdr_coordinator_set(struct etcdr *c, bool on, int64_t rev)
{
	if (etcdr_lease_gone(c)) {
		on = false; /* a late answer: the key goes with the lease */
	}
	if (on == c->coordinator) {
		return;
	}
	c->coordinator = on;
	if (on) {
		rdzv_progress(c->r, "coordinates the rendezvous '%s' (%s)", c->r->cfg->rdzv_id,
			      c->coord_key);
	} else {
		rdzv_progress(c->r, "no longer coordinates the rendezvous '%s'",
			      c->r->cfg->rdzv_id);
	}
	rdzv_record_step(c->r, c->node_state, "_coordinate",
			 on ? "The node '%s' coordinates the rendezvous '%s'."
			    : "The node '%s' no longer coordinates the rendezvous '%s'.",
			 c->me.name, c->r->cfg->rdzv_id);
	etcdr_watches_update(c); /* the deaths watch goes with the work */
	etcdr_joiners_clear(c);
	rdzv_exits_release(&c->exits);
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

void
etcdr_coord_read(struct etcdr *c, struct etcd_op *ops, size_t *n)
{
	c->rd_coord = (int)*n;
	ops[(*n)++] = (struct etcd_op){.kind = ETCD_OP_RANGE, .key = c->coord_key};
}

void
etcdr_look(struct etcdr *c, const struct etcd_op *ops, size_t n, bool take_key, etcd_cb cb)
{
	struct etcd_cmp absent = {.key = c->coord_key, .target = ETCD_CMP_CREATE, .revision = 0};
	struct etcd_op take[ETCDR_LOOK_OPS + 1];
	struct etcd_request req = {.call = ETCD_CALL_TXN, .success = ops, .n_success = n};

	/* Never without a lease (the key would outlive us), nor while
	 * leaving. */
	c->rd_take = take_key && c->lease != 0 && c->fin == FIN_NONE;
	if (c->rd_take) {
		memcpy(take, ops, n * sizeof(*ops));
		take[n] = (struct etcd_op){.kind = ETCD_OP_PUT,
					   .key = c->coord_key,
					   .value = c->me.name,
					   .value_len = strlen(c->me.name),
					   .lease = c->lease};
		req = (struct etcd_request){.call = ETCD_CALL_TXN,
					    .cmp = &absent,
					    .n_cmp = 1,
					    .success = take,
					    .n_success = n + 1,
					    .failure = ops,
					    .n_failure = n};
	}
	/* Without the take, reads only: etcd serves it without a raft write. */
	(void)etcd_client_call(c->cl, &req, cb, c);
}

bool
etcdr_coord_holder(struct etcdr *c, const struct etcd_response *resp, bool look)
{
	const struct etcd_range *r = planned(resp, c->rd_coord);
	bool me;

	if (!r) {
		return c->coordinator;
	}
	/* Taken by this look (the range, read before the put, is empty), or
	 * held on our lease. */
	me = (look && c->rd_take && resp->succeeded) ||
	     (r->n_kvs == 1 && r->kvs[0].lease == c->lease);
	if (!me && r->n_kvs == 0 && c->fin == FIN_NONE && c->lease != 0) {
		c->kick_pending = true; /* the next look takes it (never without a lease) */
	}
	free(c->coordinator_name);
	c->coordinator_name = me              ? xstrdup(c->me.name)
			      : r->n_kvs == 1 ? xstrndup(r->kvs[0].value, r->kvs[0].value_len)
					      : NULL;
	return me;
}

/* Take the ranges read_plan asked for from an answer: the state becomes the
 * local copy (rdzv_sync_adopt, or rdzv_sync_lost after a lost
 * compare-and-set). */
static int
absorb(struct etcdr *c, const struct etcd_response *resp, bool lost)
{
	bool was = c->coordinator;
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
		etcdr_dead_from_alive(c, &st, r);
		c->alive_stale = false;
	}
	etcdr_coordinator_set(c, etcdr_coord_holder(c, resp, !lost), resp->revision);
	if ((r = planned(resp, c->rd_join)) && c->coordinator) {
		etcdr_take_joiners(c, r);
		c->j_seen = resp->revision;
	}
	/* What the exchange's get waits for (rdzv_etcd_kv.c), as read. */
	if ((r = planned(resp, c->rd_exch)) && c->rd_exch_infos) {
		etcdr_range_copy(&c->infos, r);
	} else if (r && r->n_kvs == 1) {
		etcdr_assignment_seen(c, &r->kvs[0]);
	}
	if ((r = planned(resp, c->rd_arrivals))) {
		for (size_t i = 0; i < r->n_kvs; i++) {
			etcdr_barrier_mark(c, r->kvs[i].key);
		}
	}
	if ((r = planned(resp, c->rd_barrier)) && r->n_kvs == 1) {
		etcdr_barrier_seen(c, r->kvs[0].key);
	}
	etcdr_overlay(c, &st, now);
	if (lost) {
		rdzv_sync_lost(&c->sync, &st);
	} else {
		rdzv_sync_adopt(&c->sync, &st);
	}
	if (c->coordinator && c->sync.dropped) {
		/* The others have no deaths watch: w/gen tells them. */
		c->sync.notable = true;
	}
	intent_check(c);
	if (c->coordinator && !was && c->rd_alive < 0) {
		/* New to the work, not knowing who is dead (the others keep
		 * no dead set): read the a/ range before deciding anything. */
		c->alive_stale = true;
		return 1;
	}
	return 0;
}

/* What a read asks for, after whatever the txn writes first: the state; the a/ range when the dead
 * set must be rebuilt; the coord key (who coordinates); for the coordinator, the join requests
 * since its last look; what the exchange's get waits for (rdzv_etcd_kv.c): the i/ range (group
 * rank 0's roles), w/r/<round>, the arrivals b/<round>/ (group rank 0) or w/b/<round>. Records
 * where each answer will be (c->rd_*). */
struct read_plan {
	struct etcd_op ops[ETCDR_LOOK_OPS]; /* the txn's writes (if any), then the reads */
	size_t n;
	char *bufs[4];
};

static void
read_plan(struct etcdr *c, struct read_plan *p)
{
	size_t len;

	c->rd_alive = c->rd_join = c->rd_exch = c->rd_barrier = c->rd_arrivals = -1;
	c->rd_state = (int)p->n;
	p->ops[p->n++] = (struct etcd_op){.kind = ETCD_OP_RANGE, .key = c->state_key};
	if (c->alive_stale) {
		c->rd_alive = (int)p->n;
		p->ops[p->n++] = (struct etcd_op){.kind = ETCD_OP_RANGE,
						  .key = c->alive_prefix,
						  .range_end = c->alive_end,
						  .keys_only = true};
	}
	etcdr_coord_read(c, p->ops, &p->n);
	if (c->coordinator) {
		/* The requests since the last look, with their values (a
		 * delegated exit's "x<round>"). */
		c->rd_join = (int)p->n;
		p->ops[p->n++] = (struct etcd_op){.kind = ETCD_OP_RANGE,
						  .key = c->join_prefix,
						  .range_end = c->join_end,
						  .min_mod_revision = c->j_seen + 1};
	}
	switch (c->kv_wait) {
	case ETCDR_KV_NONE:
		break;
	case ETCDR_KV_INFOS:
		c->rd_exch = (int)p->n;
		c->rd_exch_infos = true;
		p->ops[p->n++] = (struct etcd_op){
			.kind = ETCD_OP_RANGE, .key = c->info_prefix, .range_end = c->info_end};
		break;
	case ETCDR_KV_ANSWER:
		c->rd_exch = (int)p->n;
		c->rd_exch_infos = false;
		p->bufs[0] = etcdr_assignment_key(c, c->x.round);
		p->ops[p->n++] = (struct etcd_op){.kind = ETCD_OP_RANGE, .key = p->bufs[0]};
		break;
	case ETCDR_KV_ARRIVALS:
		/* O(N) keys, only group rank 0's. */
		c->rd_arrivals = (int)p->n;
		p->bufs[1] = etcdr_arrival_prefix(c, c->x.round);
		p->bufs[2] = etcd_prefix_end(p->bufs[1], strlen(p->bufs[1]), &len);
		p->ops[p->n++] = (struct etcd_op){.kind = ETCD_OP_RANGE,
						  .key = p->bufs[1],
						  .range_end = p->bufs[2],
						  .keys_only = true};
		break;
	case ETCDR_KV_LAST:
		c->rd_barrier = (int)p->n;
		p->bufs[3] = etcdr_barrier_key(c, c->x.round);
		p->ops[p->n++] = (struct etcd_op){.kind = ETCD_OP_RANGE, .key = p->bufs[3]};
		break;
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
		etcdr_io_failed(c, err, errmsg);
		return;
	}
	c->io_fails = 0;
	etcd_watch_follow(c->watch);
	etcd_watch_follow(c->deaths);
	etcd_watch_follow(c->jwatch);
	etcd_watch_follow(c->bwatch);
	switch (absorb(c, resp, false)) {
	case 0:
		if (!etcdr_rejoin_check(c)) {
			etcdr_after_io(c);
		}
		return;
	case 1:
		etcdr_read_all(c); /* before any decision */
		return;
	}
	/* An answer we cannot read ends the operation under way. */
	rdzv_sync_fail(&c->sync, -EBADMSG);
}

/* Ask to join, at the head of a read: j/<node> and i/<node> (role, local
 * world size), on our lease. Returns the i/ value, to free after encoding. */
char *
etcdr_intent_ops(struct etcdr *c, struct etcd_op *ops, size_t *n)
{
	json_t *o = json_pack("{sssi}", "role", c->r->cfg->role, "local_world_size",
			      c->r->local_world_size);
	char *info = json_dumps(o, JSON_COMPACT);

	json_decref(o);
	/* A node of the last round asks the coordinator to take it out of it
	 * first: "x<round>" (rdzv_assign.h); "1" otherwise. */
	rdzv_exits_request(c->rejoin_round, c->join_value, sizeof(c->join_value));
	if (!c->join_value[0]) {
		snprintf(c->join_value, sizeof(c->join_value), "1");
	}
	ops[(*n)++] = (struct etcd_op){.kind = ETCD_OP_PUT,
				       .key = c->join_key,
				       .value = c->join_value,
				       .value_len = strlen(c->join_value),
				       .lease = c->lease};
	ops[(*n)++] = (struct etcd_op){.kind = ETCD_OP_PUT,
				       .key = c->info_key,
				       .value = info,
				       .value_len = strlen(info),
				       .lease = c->lease};
	c->intent = true;
	c->intent_pending = true;
	return info;
}

void
etcdr_read_all(struct etcdr *c)
{
	struct read_plan p = {0};
	char *info = NULL;

	if (etcdr_lease_gone(c)) {
		c->kick_pending = false; /* left: nothing reads any more */
		return;
	}
	if (c->sync.io_pending) {
		c->kick_pending = true;
		return;
	}
	c->kick_pending = false;
	c->sync.in_sync = false;
	c->sync.lost = false;
	evtimer_del(c->sync.timer);
	evtimer_del(c->retry_timer);
	if (etcdr_blind(c)) {
		etcdr_blind_read(c); /* O(1): our n/ key, not the state */
		return;
	}
	c->boot_looked = false; /* a look for a blind join only */
	etcdr_watches_update(c);
	if (c->coordinator && !c->deaths) {
		/* New to the work: nobody told us of deaths so far. */
		c->alive_stale = true;
	}
	if (c->sync.op_active && c->sync.op == RDZV_OP_JOIN && !c->intent && !c->intent_asked &&
	    rdzv_state_find_participant(&c->sync.st, &c->me) < 0) {
		/* Once per join: deleted again once we are in, a request must
		 * not come back (the coordinator would read it again). */
		c->intent_asked = true;
		info = etcdr_intent_ops(c, p.ops, &p.n);
	}
	read_plan(c, &p);
	c->sync.io_pending = true;
	etcdr_look(c, p.ops, p.n, !etcdr_coordinator_known(c), read_cb);
	free(info);
	read_plan_release(&p);
}

static void
cas_cb(int err, const struct etcd_response *resp, const char *errmsg, void *arg)
{
	struct etcdr *c = arg;
	bool drops_intent = c->cas_drops_intent;
	int took;

	c->sync.io_pending = false;
	c->cas_drops_intent = false;
	if (err < 0) {
		/* The write may or may not have landed: re-read and re-decide. */
		etcdr_io_failed(c, err, errmsg);
		return;
	}
	c->io_fails = 0;
	rdzv_record_sync(c->r, c->me.name, resp->succeeded);
	if (resp->succeeded) {
		c->mod_rev = resp->revision;
		c->rev = resp->revision;
		if (drops_intent) {
			c->intent = false;
		}
		etcdr_assign_drop_requests(c); /* and forget those now in */
		if (c->coordinator) {
			struct rdzv_ctx ctx = rdzv_sync_ctx(&c->sync);

			rdzv_exits_prune(&c->exits, &c->sync.st, &ctx);
		}
		intent_check(c);
		rdzv_sync_written(&c->sync);
	} else if ((took = absorb(c, resp, true)) < 0) {
		rdzv_sync_fail(&c->sync, -EBADMSG);
		return;
	} else if (took > 0) {
		etcdr_read_all(c); /* new to the work: who is dead, first */
		return;
	} else if (c->sync.op_active) {
		/* Lost a race: rdzv_sync_lost decides again after a pause. */
		(void)etcdr_rejoin_check(c);
		return;
	}
	etcdr_after_io(c);
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
	struct etcd_op put[6] = {{.kind = ETCD_OP_PUT, .key = c->state_key}};
	struct read_plan p = {0};
	char *value, gen[32];
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
	if (c->sync.st.closed) {
		/* Blind joiners and booting nodes look for it, not the state. */
		put[n++] = (struct etcd_op){
			.kind = ETCD_OP_PUT, .key = c->closed_key, .value = "1", .value_len = 1};
	}
	if (c->cas_admits) {
		put[n++] = (struct etcd_op){
			.kind = ETCD_OP_PUT, .key = c->adm_key, .value = "1", .value_len = 1};
	}
	read_plan(c, &p);
	c->sync.io_pending = true;
	(void)etcd_client_call(c->cl,
			       &(struct etcd_request){.call = ETCD_CALL_TXN,
						      .cmp = &cmp,
						      .n_cmp = 1,
						      .success = put,
						      .n_success = n,
						      .failure = p.ops,
						      .n_failure = p.n},
			       cas_cb, c);
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
	    c->alive_stale || (c->n_joiners == 0 && c->sync.st.n_wait_list == 0)) {
		return false;
	}
	/* The exits asked for first: out of the last round, then in (two
	 * statements: the order of a sum's operands is unspecified). */
	size_t n = rdzv_exits_apply(&c->exits, &c->sync.st, &ctx, &c->sync.notable);

	n += rdzv_admit_requests(c->r, &c->sync.st, true, c->joiners, c->n_joiners, &ctx,
				 &c->sync.notable);
	if (n == 0) {
		return false;
	}
	c->cas_admits = true;
	rdzv_sync_write(&c->sync, RDZV_ACTION_SYNC);
	return true;
}

/* The coordinator writes a copy its sanitize took dead nodes from, when
 * nothing else writes it: the others learn of deaths only from the state.
 * Returns whether it wrote. */
static bool
drop_dead_now(struct etcdr *c)
{
	if (!c->coordinator || c->sync.io_pending || c->boot != BOOT_READY || c->fin != FIN_NONE ||
	    !c->sync.dropped || c->alive_stale) {
		return false;
	}
	rdzv_sync_write(&c->sync, RDZV_ACTION_SYNC);
	return true;
}

/* After a read or a write: whoever waits on the state looks at it. */
void
etcdr_after_io(struct etcdr *c)
{
	etcdr_assign_publish(c); /* the copy is the store's, before any change */
	rdzv_sync_step(&c->sync);
	if (!c->sync.io_pending && !admit_now(c)) {
		drop_dead_now(c);
	}
	etcdr_exchange_check(c);
	etcdr_kv_check(c);
	if (!c->sync.io_pending && c->kick_pending) {
		etcdr_read_all(c);
	}
}

void
etcdr_retry_cb(evutil_socket_t fd, short what, void *arg)
{
	etcdr_read_all(arg);
}

/* ---- the store under the operation loop (rdzv_sync.h) -------------------- */

static void
store_read(void *arg)
{
	etcdr_read_all(arg);
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
	etcdr_overlay(arg, st, now_wall);
}

static bool
store_coordinated(void *arg)
{
	struct etcdr *c = arg;

	return etcdr_coordinator_known(c) && !c->coordinator;
}

/* The coordinator admits us: wait for its w/adm (or its lease going)
 * instead of racing it. Write ourselves only if it makes no progress. */
static bool
store_await_admission(void *arg, const struct rdzv_ctx *ctx)
{
	struct etcdr *c = arg;
	uint64_t now = rdzv_sync_mono(&c->sync);

	if (etcdr_coordinator_known(c) && !c->coordinator) {
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
	size_t n;

	c->cas_admits = false;
	if (c->n_joiners == 0) {
		return;
	}
	n = rdzv_exits_apply(&c->exits, st, ctx, notable); /* out of the last round first */
	n += rdzv_admit_requests(c->r, st, false, c->joiners, c->n_joiners, ctx, notable);
	c->cas_admits = n > 0;
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

	if (!c->sync.io_pending && !admit_now(c)) {
		drop_dead_now(c);
	}
	if (!c->sync.io_pending && c->kick_pending) {
		etcdr_read_all(c);
	}
}

static void
store_barrier_closed(void *arg)
{
	etcdr_exchange_abandon(arg);
}

const struct rdzv_store_ops etcdr_store_ops = {
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
void
etcdr_op_start(struct etcdr *c, enum rdzv_op op, uint64_t deadline, op_done_fn done)
{
	c->behind_since = 0;
	c->behind_looked = false;
	c->blind_off = false;
	if (!c->boot_looked) {
		/* Else the boot's txn asked, for this operation. */
		c->intent_asked = false;
		c->blind_asked = 0;
	}
	rdzv_sync_start(&c->sync, op, deadline, done);
}
