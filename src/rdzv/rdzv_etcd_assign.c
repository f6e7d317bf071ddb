/* rdzv_etcd_assign.c — how a coordinated etcd joiner learns its round
 * without reading the state (issue #14): the coordinator (w/coord's holder)
 * puts "n/<node>" = "<round> <rank> <world> <gen> <rev>" (rev: the state's
 * mod_revision, the write that completed the round) for every participant once
 * a round completes, "spare" for a node it put in the redundancy list and
 * "closed" for everyone who waits when the rendezvous closes, in txns of
 * ASSIGN_TXN_OPS puts (etcd's --max-txn-ops is 128 by default). A joiner
 * that does not hold w/coord waits for its own n/<node> key and reads, in
 * one txn with its join request, that key, the closed key and who
 * coordinates: O(1) bytes, whatever N. It reads the state (whose size grows
 * with N) only when the rendezvous closed, it is a spare, it coordinates now,
 * or its join deadline passed; it heeds w/ only from its assignment on (the
 * rank exchange, the round's changes, the coordinator's death): one stream
 * carries both watches from the boot, w/ dormant until then. */
#include <errno.h>
#include <event2/event.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"
#include "etcd_client.h"
#include "rdzv.h"
#include "rdzv_sync.h"
#include "util.h"
#include "rdzv_etcd.h"

/* ---- the joiner ---------------------------------------------------------- */

/* The keep-alive window: a blind joiner with no word for this long looks
 * again at who coordinates (a new coordinator reads every join request). */
static uint64_t
blind_window(const struct etcdr *c)
{
	return (uint64_t)c->ttl * USEC_PER_SEC;
}

/* How long a delegated rejoin waits for a word before it reads the state
 * once: a keep-alive window past the last call. */
static uint64_t
rejoin_window(const struct etcdr *c)
{
	return blind_window(c) + (uint64_t)c->settings.last_call_usec;
}

bool
etcdr_blind(const struct etcdr *c)
{
	return c->boot == BOOT_READY && c->fin == FIN_NONE && c->sync.op_active &&
	       c->sync.op == RDZV_OP_JOIN && etcdr_coordinator_known(c) && !c->coordinator &&
	       !c->blind_off && now_usec() < c->sync.op_deadline;
}

/* The coordinator's word v (len bytes) for
 * the join under way: an assignment of a round later than the last we ran
 * ends it. Returns 1 when it did, 0 for no word yet, -1 for "closed",
 * "spare" or anything else (the state tells). */
static int
assign_take(struct etcdr *c, const char *v, size_t len)
{
	char buf[128];
	long long round, gen, rev;
	int rank, world, end = 0;

	if (len == 0 || len >= sizeof(buf)) {
		return len == 0 ? 0 : -1;
	}
	memcpy(buf, v, len);
	buf[len] = '\0';
	if (sscanf(buf, "%lld %d %d %lld %lld%n", &round, &rank, &world, &gen, &rev, &end) != 5 ||
	    (size_t)end != len || world <= 0 || rank < 0 || rank >= world || gen < 0 || rev <= 0) {
		return -1;
	}
	if (round <= c->ran_round) {
		return 0; /* the round we ran last: the new word comes */
	}
	if (!c->sync.op_active || c->sync.op != RDZV_OP_JOIN) {
		return 0;
	}
	evtimer_del(c->retry_timer);
	/* w/ from the write that completed the round: group rank 0 may
	 * publish the exchange's answer before our key is put. */
	c->watch_from = rev + 1;
	if (!c->intent_pending) {
		c->intent = false; /* the coordinator deleted j/<node> */
	}
	if (c->rejoin_round >= 0) {
		/* The coordinator ran our exit op: its event is ours. */
		rdzv_record_action(c->r, c->me.name, c->rejoin_round,
				   RDZV_ACTION_REMOVE_FROM_PARTICIPANTS, false);
		c->rejoin_round = -1;
	}
	rdzv_sync_assigned(&c->sync, round, rank, world, (uint64_t)gen);
	if (c->w_live) {
		/* A rejoin: what w/ held back while we waited counts from the
		 * write that completed the round on (as w_wake). */
		bool reread = c->dormant_reread >= c->watch_from || c->dormant_reset;

		c->w_from = c->watch_from;
		c->dormant_reread = 0;
		c->dormant_reset = false;
		if (reread) {
			etcdr_read_all(c);
		}
	}
	etcdr_watches_update(c);
	return 1;
}

/* The word is not an assignment: read the state for the rest of the join. */
static void
blind_end(struct etcdr *c)
{
	c->blind_off = true;
	etcdr_watches_update(c);
	etcdr_read_all(c);
}

/* No word yet: the watch on n/<node> brings it; look again after a
 * keep-alive window (who coordinates) or at the join deadline. */
static void
blind_wait(struct etcdr *c)
{
	uint64_t now = now_usec(), wait;

	wait = c->sync.op_deadline > now ? c->sync.op_deadline - now + 1000 : 1000;
	c->sync.in_sync = true;
	timer_usec(c->retry_timer, wait < blind_window(c) ? wait : blind_window(c));
	etcdr_watches_update(c);
}

static void
blind_cb(int err, const struct etcd_response *resp, const char *errmsg, void *arg)
{
	struct etcdr *c = arg;
	const struct etcd_range *own, *closed;
	int took;

	c->sync.io_pending = false;
	if (c->intent_pending) {
		c->intent_pending = false;
		c->intent = err == 0;
		c->intent_asked = c->intent;
	}
	if (err < 0) {
		etcdr_io_failed(c, err, errmsg);
		return;
	}
	c->io_fails = 0;
	if ((size_t)c->rd_coord >= resp->n_ranges) {
		rdzv_sync_fail(&c->sync, -EBADMSG);
		return;
	}
	own = &resp->ranges[c->rd_state];
	closed = &resp->ranges[c->rd_barrier];
	c->rev = resp->revision;
	etcdr_coordinator_set(c, etcdr_coord_holder(c, resp, true), resp->revision);
	if (!c->sync.op_active || c->sync.op != RDZV_OP_JOIN) {
		etcdr_after_io(c); /* assigned meanwhile, through the watch */
		return;
	}
	took = own->n_kvs == 1 ? assign_take(c, own->kvs[0].value, own->kvs[0].value_len) : 0;
	if (took > 0) {
		etcdr_after_io(c);
		return;
	}
	if (took < 0 || closed->n_kvs > 0) {
		blind_end(c);
		return;
	}
	if (c->rejoin_round >= 0 && !c->rejoin_looked &&
	    now_usec() - c->rejoin_asked >= rejoin_window(c)) {
		/* No word for a keep-alive window past the last call (an
		 * admitted node hears nothing until its round completes): the
		 * state tells, once, whether we must leave our round ourselves
		 * (etcdr_rejoin_check). */
		rdzv_progress(c->r,
			      "no word from the coordinator of the rendezvous '%s' for %.0f s; "
			      "reading the state",
			      c->r->cfg->rdzv_id, (double)rejoin_window(c) / USEC_PER_SEC);
		c->rejoin_looked = true;
		blind_end(c);
		return;
	}
	if (!etcdr_blind(c) || c->kick_pending) {
		etcdr_watches_update(c);
		etcdr_read_all(c);
		return;
	}
	blind_wait(c);
}

void
etcdr_blind_read(struct etcdr *c)
{
	struct etcd_op ops[ETCDR_LOOK_OPS];
	size_t n = 0;
	char *info = NULL;

	if (c->boot_looked) {
		c->boot_looked = false;
		blind_wait(c);
		return;
	}
	if (c->rejoin_round >= 0 && !c->intent && !c->intent_asked) {
		/* Our word for the round we ran goes before we ask again. */
		ops[n++] = (struct etcd_op){.kind = ETCD_OP_DELETE, .key = c->assign_key};
	}
	if ((!c->intent && !c->intent_asked) ||
	    (c->blind_asked && now_usec() - c->blind_asked >= blind_window(c))) {
		/* Once per join, and again after a window with no word (a
		 * coordinator that started clean, or lost our request). */
		c->intent_asked = true;
		c->blind_asked = now_usec();
		info = etcdr_intent_ops(c, ops, &n);
	}
	/* rd_state: n/<node>; rd_barrier: the closed key; rd_coord: who
	 * coordinates (taken if nobody does). */
	c->rd_alive = c->rd_join = c->rd_exch = -1;
	c->rd_state = (int)n;
	ops[n++] = (struct etcd_op){.kind = ETCD_OP_RANGE, .key = c->assign_key};
	c->rd_barrier = (int)n;
	ops[n++] = (struct etcd_op){.kind = ETCD_OP_RANGE, .key = c->closed_key, .keys_only = true};
	etcdr_coord_read(c, ops, &n);
	c->sync.io_pending = true;
	etcdr_look(c, ops, n, true, blind_cb);
	free(info);
	etcdr_watches_update(c);
}

/* The watch on n/<node> (watch 0 of the node's stream). */
static void
assign_events(struct etcdr *c, const struct etcd_response *resp, bool reset)
{
	int took = 0;

	if (c->fin != FIN_NONE) {
		return;
	}
	for (size_t i = 0; i < resp->n_events && took == 0; i++) {
		const struct etcd_event *ev = &resp->events[i];

		if (!ev->is_delete && etcdr_blind(c)) {
			took = assign_take(c, ev->kv.value, ev->kv.value_len);
		}
	}
	if (took < 0) {
		blind_end(c);
	} else if (reset && etcdr_blind(c)) {
		etcdr_read_all(c);
	}
}

/* ---- the watches --------------------------------------------------------- */

/* What a w/ event is to this node. */
enum w_kind {
	W_REREAD, /* w/gen, or a deletion (the coordinator's key, the run's keys) */
	W_ADMITTED,
	W_ASSIGNMENT, /* w/r/<round>: the rank exchange's answer */
	W_OTHER,      /* the barrier's end (w/b/<round>), w/coord taken */
};

static enum w_kind
w_kind(const struct etcdr *c, const struct etcd_event *ev)
{
	size_t plen = strlen(c->watch_prefix);

	if (ev->is_delete || strcmp(ev->kv.key, c->gen_key) == 0) {
		return W_REREAD;
	}
	if (strcmp(ev->kv.key, c->adm_key) == 0) {
		return W_ADMITTED;
	}
	if (strncmp(ev->kv.key, c->watch_prefix, plen) == 0 &&
	    strncmp(ev->kv.key + plen, "r/", 2) == 0) {
		return W_ASSIGNMENT;
	}
	return W_OTHER;
}

/* One w/ event that needs no re-read: an admission, the rank exchange's
 * answer, the end of the exit barrier. */
static void
w_event(struct etcdr *c, const struct etcd_event *ev)
{
	switch (w_kind(c, ev)) {
	case W_REREAD:
		return;
	case W_ADMITTED:
		/* Joiners admitted: the coordinator is at work. Those admitted
		 * hear of it with the round's next notable change (w/gen); no
		 * crowd of reads per batch. */
		c->behind_since = 0;
		c->behind_looked = false;
		return;
	case W_ASSIGNMENT:
		etcdr_assignment_seen(c, &ev->kv);
		return;
	case W_OTHER:
		etcdr_barrier_seen(c, ev->kv.key);
		return;
	}
}

/* w/ from c->w_from on: w/gen (and deletions: the run's keys going, the
 * coordinator's death) call for a re-read; the rank assignment and the
 * barrier's end are taken from the events. */
static void
w_events(struct etcdr *c, const struct etcd_event *evs, size_t n, bool reset)
{
	bool reread = reset, blind = etcdr_blind(c);

	for (size_t i = 0; i < n; i++) {
		if (evs[i].kv.mod_revision < c->w_from) {
			continue; /* before this node's round: not its business */
		}
		if (blind && !evs[i].is_delete && w_kind(c, &evs[i]) == W_REREAD) {
			/* A blind rejoin waits for its n/<node> key, not for
			 * every admission's w/gen (a read each: N x batches);
			 * the revision counts once the word comes. */
			if (evs[i].kv.mod_revision > c->dormant_reread) {
				c->dormant_reread = evs[i].kv.mod_revision;
			}
			continue;
		}
		reread = reread || w_kind(c, &evs[i]) == W_REREAD;
		w_event(c, &evs[i]);
	}
	if (reread) {
		etcdr_read_all(c);
		return;
	}
	etcdr_kv_check(c);
}

/* w/ while the node waits blind: admissions count at once, and so does the
 * rank exchange's answer (the newest round is kept, whenever it comes);
 * what calls for a re-read waits as its revision, re-read on wake only
 * when it falls in the node's round. No barrier before the node runs. */
static void
w_dormant(struct etcdr *c, const struct etcd_response *resp, bool reset)
{
	c->dormant_reset = c->dormant_reset || reset;
	for (size_t i = 0; i < resp->n_events; i++) {
		const struct etcd_event *ev = &resp->events[i];

		switch (w_kind(c, ev)) {
		case W_REREAD:
			if (ev->kv.mod_revision > c->dormant_reread) {
				c->dormant_reread = ev->kv.mod_revision;
			}
			break;
		case W_ADMITTED:
		case W_ASSIGNMENT:
			w_event(c, ev);
			break;
		case W_OTHER:
			break;
		}
	}
}

static void
w_wake(struct etcdr *c)
{
	bool reread = c->dormant_reset;

	c->w_live = true;
	c->w_from = c->watch_from > 0 ? c->watch_from : c->rev + 1;
	reread = reread || c->dormant_reread >= c->w_from;
	c->dormant_reset = false;
	c->dormant_reread = 0;
	if (reread) {
		etcdr_read_all(c);
	} else {
		etcdr_kv_check(c); /* the answer may have come meanwhile */
	}
}

/* The node's stream: its n/<node> watch, and w/ (dormant until woken). */
static void
stream_cb(int err, const struct etcd_response *resp, bool reset, const char *errmsg, void *arg)
{
	struct etcdr *c = arg;

	if (err < 0) {
		rdzv_progress(c->r, "%s; reconnecting", errmsg);
		return;
	}
	if (c->boot != BOOT_READY || etcdr_lease_gone(c)) {
		return;
	}
	if (resp->watch_id == ETCDR_WATCH_ASSIGN) {
		assign_events(c, resp, reset);
	} else if (c->w_live) {
		w_events(c, resp->events, resp->n_events, reset);
	} else {
		w_dormant(c, resp, reset);
	}
}

void
etcdr_watches_update(struct etcdr *c)
{
	event_active(c->watch_ev, EV_TIMEOUT, 0);
}

void
etcdr_watch_ev_cb(evutil_socket_t fd, short what, void *arg)
{
	struct etcdr *c = arg;

	if (c->boot != BOOT_READY || c->fin != FIN_NONE || c->r->observer) {
		return; /* an observer only reads (rdzv_new_observer) */
	}
	if (!c->watch) {
		/* One stream for both: a second would cost etcd a connection, a
		 * gRPC stream and their goroutines per node. */
		struct etcd_watch_spec specs[] = {
			[ETCDR_WATCH_ASSIGN] = {.key = c->assign_key, .start_revision = c->rev + 1},
			[ETCDR_WATCH_W] = {.key = c->watch_prefix,
					   .range_end = c->watch_end,
					   .start_revision = c->rev + 1},
		};

		c->watch = etcd_watch_new_multi(c->cl, specs, ARRAY_SIZE(specs), stream_cb, c);
	}
	if (!c->w_live && (c->ran_round >= 0 || (c->sync.op_active && !etcdr_blind(c)))) {
		/* In a join that is not blind, or from our first assignment on:
		 * the rank exchange's answer may be in already, the round's
		 * earlier changes are not ours. */
		w_wake(c);
		if (c->boot != BOOT_READY || c->fin != FIN_NONE) {
			return;
		}
	}
	if (c->coordinator && !c->deaths) {
		/* The coordinator alone hears of deaths (from the creation of
		 * the state it found on) and writes them into the state: the
		 * others hear of them through w/gen (etcdr_after_io), and of
		 * the coordinator's own through w/coord. Only deletions come;
		 * a compacted history resets it (then the a/ range is read
		 * once). A watch per node would cost etcd a stream each, and a
		 * replay of the history for each. */
		c->deaths = etcd_watch_new(c->cl, c->alive_prefix, c->alive_end, c->deaths_from,
					   true, etcdr_deaths_cb, c);
	} else if (!c->coordinator && c->deaths) {
		etcd_watch_free(c->deaths);
		c->deaths = NULL;
	}
	if (c->kv_wait == ETCDR_KV_ARRIVALS && !c->bwatch) {
		/* Group rank 0 in the exit barrier: every arrival of the
		 * round, ours and those before it. */
		char *prefix = etcdr_arrival_prefix(c, c->x.round), *end;
		size_t len;

		end = etcd_prefix_end(prefix, strlen(prefix), &len);
		c->bwatch = etcd_watch_new(c->cl, prefix, end, c->w_from > 0 ? c->w_from : c->rev,
					   false, etcdr_arrivals_cb, c);
		free(end);
		free(prefix);
	} else if (c->kv_wait != ETCDR_KV_ARRIVALS && c->bwatch) {
		etcd_watch_free(c->bwatch); /* the barrier is over */
		c->bwatch = NULL;
	}
}

/* ---- the coordinator ----------------------------------------------------- */

static void
assign_put_cb(int err, const struct etcd_response *resp, const char *errmsg, void *arg)
{
	if (err < 0) {
		/* Those nodes look again after a keep-alive window, and read
		 * the state at their join deadline. */
		rdzv_progress(((struct etcdr *)arg)->r, "telling the nodes their round: %s",
			      errmsg);
	}
}

/* Put keys[i] = vals[i] in txns of ASSIGN_TXN_OPS (both freed). */
static void
put_all(struct etcdr *c, char **keys, char **vals)
{
	size_t n = keys ? strv_length(keys) : 0;
	struct etcd_op *ops = xcalloc(ASSIGN_TXN_OPS + 1, sizeof(*ops));

	for (size_t first = 0; first < n; first += ASSIGN_TXN_OPS) {
		size_t k = n - first < ASSIGN_TXN_OPS ? n - first : ASSIGN_TXN_OPS;

		for (size_t i = 0; i < k; i++) {
			ops[i] = (struct etcd_op){.kind = ETCD_OP_PUT,
						  .key = keys[first + i],
						  .value = vals[first + i],
						  .value_len = strlen(vals[first + i])};
		}
		(void)etcd_client_call(c->cl,
				       &(struct etcd_request){.call = ETCD_CALL_TXN,
							      .success = ops,
							      .n_success = k},
				       assign_put_cb, c);
	}
	free(ops);
	strv_free(keys);
	strv_free(vals);
}

void
etcdr_assign_drop_requests(struct etcdr *c)
{
	struct etcd_op *ops = xcalloc(ASSIGN_TXN_OPS + 1, sizeof(*ops));
	struct etcd_cmp *cmps = xcalloc(ASSIGN_TXN_OPS + 1, sizeof(*cmps));
	int64_t *revs = xcalloc(c->n_joiners + 1, sizeof(*revs));
	const struct rdzv_state *st = &c->sync.st;
	struct rdzv_ctx ctx = rdzv_sync_ctx(&c->sync);
	char **keys = NULL;
	size_t n = 0, kept = 0;

	for (size_t i = 0; i < c->n_joiners; i++) {
		struct rdzv_node *j = &c->joiners[i];

		if ((rdzv_state_find_participant(st, j) < 0 && rdzv_state_find_wait(st, j) < 0 &&
		     rdzv_state_find_redundant(st, j) < 0) ||
		    rdzv_exits_due(&c->exits, st, j, &ctx)) {
			/* Not in (yet), or in the round it leaves: held for
			 * the next look. */
			c->joiner_revs[kept] = c->joiner_revs[i];
			c->joiners[kept++] = *j;
			continue;
		}
		if (strcmp(j->name, c->me.name) != 0) {
			strv_consume(&keys, xasprintf("%s%s", c->join_prefix, j->name));
			revs[n++] = c->joiner_revs[i];
		}
		rdzv_node_release(j);
	}
	c->n_joiners = kept;
	/* Only requests unchanged since we read them: a node that asked again
	 * meanwhile ("x<round>" for the round it was admitted to, say) keeps
	 * its new request. A batch with one changed key deletes none; those
	 * left are read again, and dropped, after the next write. */
	for (size_t first = 0; first < n; first += ASSIGN_TXN_OPS) {
		size_t k = n - first < ASSIGN_TXN_OPS ? n - first : ASSIGN_TXN_OPS;

		for (size_t i = 0; i < k; i++) {
			ops[i] = (struct etcd_op){.kind = ETCD_OP_DELETE, .key = keys[first + i]};
			cmps[i] = (struct etcd_cmp){.key = keys[first + i],
						    .target = ETCD_CMP_MOD,
						    .revision = revs[first + i]};
		}
		(void)etcd_client_call(c->cl,
				       &(struct etcd_request){.call = ETCD_CALL_TXN,
							      .cmp = cmps,
							      .n_cmp = k,
							      .success = ops,
							      .n_success = k},
				       assign_put_cb, c);
	}
	free(ops);
	free(cmps);
	free(revs);
	strv_free(keys);
}

void
etcdr_assign_publish(struct etcdr *c)
{
	char **keys = NULL, **vals = NULL;
	char *rev;

	if (!c->coordinator || c->sync.notable || c->sync.stale || c->boot != BOOT_READY ||
	    c->fin != FIN_NONE) {
		return; /* not ours, or the copy differs from the store's */
	}
	rev = xasprintf(" %" PRId64, c->mod_rev);
	rdzv_assign_plan(&c->told, &c->sync.st, c->joiners, c->n_joiners, c->me.name, rev, &keys,
			 &vals);
	free(rev);
	for (size_t i = 0; keys && keys[i]; i++) {
		char *k = xasprintf("%s%s", c->assign_prefix, keys[i]);

		free(keys[i]);
		keys[i] = k;
	}
	put_all(c, keys, vals);
}
