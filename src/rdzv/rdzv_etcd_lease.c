/* rdzv_etcd_lease.c — the etcd backend's lease and its life: boot (grant,
 * a/<node>, a stale closed run cleaned up), keep-alive, the exit barrier, and
 * leaving (close, revoke, the last one out deletes the run's keys). */
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

/* ---- lease and boot ----------------------------------------------------- */

static void
lease_lost(struct etcdr *c)
{
	const char *msg = "this node's etcd lease expired (etcd unreachable for longer than "
			  "its TTL): the other nodes consider it dead";

	c->boot = BOOT_FAILED;
	evtimer_del(c->ka_timer);
	etcdr_coordinator_set(c, false, c->rev); /* the key went with the lease */
	if (c->sync.next_active) {
		rdzv_sync_abandon(&c->sync);
		etcdr_next_fail(c, -ECONNABORTED, msg);
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
	snprintf(c->ka_fail_why, sizeof(c->ka_fail_why), "etcd unreachable: %s", errmsg);
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
	if (etcdr_lease_gone(c)) {
		return; /* no re-arm: the lease is going or gone */
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

void
etcdr_ka_timer_cb(evutil_socket_t fd, short what, void *arg)
{
	struct etcdr *c = arg;

	if (c->ka_pending) {
		return;
	}
	c->ka_pending = true;
	(void)etcd_client_call(
		c->cl, &(struct etcd_request){.call = ETCD_CALL_LEASE_KEEPALIVE, .lease = c->lease},
		ka_cb, c);
}

void
etcdr_boot_retry_cb(evutil_socket_t fd, short what, void *arg)
{
	etcdr_boot_step(arg);
}

static void
boot_failed_try(struct etcdr *c, int err, const char *msg)
{
	uint64_t now = now_usec();
	uint64_t deadline = c->sync.next_active ? c->sync.next_deadline : c->boot_deadline;

	if (c->fin != FIN_NONE) {
		return; /* leaving: the boot is over */
	}
	free(c->boot_err);
	c->boot_err = xstrdup(msg);
	c->io_fails++;

	if (c->err_logged == 0 || now - c->err_logged >= ERR_LOG_USEC) {
		c->err_logged = now;
		rdzv_progress(c->r, "cannot reach etcd (%s); retrying until the join timeout", msg);
	}
	if (now >= deadline && c->sync.next_active) {
		char *m = xasprintf("the rendezvous '%s' cannot reach etcd at --rdzv-endpoint %s "
				    "before the join timeout of %g s: %s",
				    c->r->cfg->rdzv_id, c->r->cfg->rdzv_endpoint,
				    (double)c->join_timeout / 1e6, msg);

		etcdr_next_fail(c, err, m);
		free(m);
		return;
	}
	timer_usec(c->boot_timer, etcdr_retry_usec(c, deadline));
}

/* a/<node> is in at revision rev (c->boot_coordinator: whether we
 * coordinate): watch from there and start. deaths_from: the first
 * revision of deaths that matter, the creation of the state we found (a node
 * that died before we came may still be in it); deletions before it belong
 * to an earlier job under the same run id, whose node names may come back
 * (same host, same pid). */
static void
boot_ready(struct etcdr *c, int64_t rev, int64_t deaths_from)
{
	c->rev = rev;
	c->boot = BOOT_READY;
	c->err_logged = 0;
	c->io_fails = 0;
	c->deaths_from = deaths_from > 0 && deaths_from <= rev ? deaths_from : rev + 1;
	timer_usec(c->ka_timer, (uint64_t)c->ttl * USEC_PER_SEC / 3);
	/* Not before: the coordinator's work reads the state, which the
	 * boot may still be removing. */
	etcdr_coordinator_set(c, c->boot_coordinator, rev);
	/* A joiner that does not coordinate waits for its n/<node> key
	 * (rdzv_etcd_assign.c); the watches follow (etcdr_watch_ev_cb). */
	etcdr_watches_update(c);
	if (c->next_pending) {
		etcdr_start_next(c);
	}
}

static void
clean_cb(int err, const struct etcd_response *resp, const char *errmsg, void *arg)
{
	struct etcdr *c = arg;

	if (c->fin != FIN_NONE) {
		return; /* leaving: the boot is over */
	}
	if (err < 0) {
		boot_failed_try(c, err, errmsg);
		return;
	}
	if (!resp->succeeded) {
		/* Somebody wrote the state meanwhile: look again. */
		etcdr_boot_step(c);
		return;
	}
	boot_ready(c, resp->revision, 0); /* alone, holding the coord key */
}

/* Remove a closed rendezvous nobody is in (a finished job with the same run
 * id), unless somebody wrote its state (mod_rev) meanwhile. */
static void
boot_clean(struct etcdr *c, int64_t mod_rev)
{
	struct etcd_cmp cmp = {.key = c->state_key, .target = ETCD_CMP_MOD, .revision = mod_rev};
	/* Everything but the keys on leases (a/, i/, j/, w/coord): ours and
	 * those of nodes booting with us are in, and the others' went with
	 * their leases. Key order: a/ closed i/ j/ n/ state w/. */
	struct etcd_op del[4] = {
		{.kind = ETCD_OP_DELETE, .key = c->prefix, .range_end = c->alive_prefix},
		{.kind = ETCD_OP_DELETE, .key = c->alive_end, .range_end = c->info_prefix},
		{.kind = ETCD_OP_DELETE, .key = c->assign_prefix, .range_end = c->coord_key},
		{.kind = ETCD_OP_DELETE, .key = c->coord_end, .range_end = c->prefix_end}};
	struct etcd_request req = {
		.call = ETCD_CALL_TXN, .cmp = &cmp, .n_cmp = 1, .success = del, .n_success = 4};

	rdzv_progress(c->r, "removing the closed rendezvous '%s' left in etcd by an earlier job",
		      c->r->cfg->rdzv_id);
	(void)etcd_client_call(c->cl, &req, clean_cb, c);
}

/* The answer to alone_look: [a/ keys older than the state's last write, the
 * state, the closed key]. */
static void
alone_cb(int err, const struct etcd_response *resp, const char *errmsg, void *arg)
{
	struct etcdr *c = arg;
	const struct etcd_kv *kv;
	struct rdzv_state st;
	bool closed;

	if (c->fin != FIN_NONE) {
		return; /* leaving: the boot is over */
	}
	if (err < 0) {
		boot_failed_try(c, err, errmsg);
		return;
	}
	if (resp->n_ranges < 3) {
		boot_failed_try(c, -EPROTO, "the boot's second look answered too few ranges");
		return;
	}
	if (resp->ranges[1].n_kvs != 1) {
		boot_ready(c, resp->revision, 0); /* gone meanwhile */
		return;
	}
	kv = &resp->ranges[1].kvs[0];
	if (resp->ranges[0].n_kvs == 0 && kv->mod_revision == c->boot_state_rev) {
		/* No node of the job that wrote the state (those booting
		 * with us came after): closed (the closed key, or the state
		 * of an earlier version says so)? */
		rdzv_state_init(&st); /* decode leaves it so when it fails */
		closed = resp->ranges[2].n_kvs == 1 ||
			 (rdzv_state_decode(kv->value, kv->value_len, &st) == 0 && st.closed);
		rdzv_state_release(&st);
		if (closed) {
			boot_clean(c, kv->mod_revision);
			return;
		}
	}
	boot_ready(c, resp->revision, kv->create_revision);
}

/* We took the coord key while a state is there, last written at state_rev:
 * its holder is gone, and maybe everybody else. Look for an a/ key of the
 * job that wrote it (created before that write; O(N) inside etcd, but only
 * when the coordinator went) and read the state. */
static void
alone_look(struct etcdr *c, int64_t state_rev)
{
	struct etcd_op ops[3] = {
		{.kind = ETCD_OP_RANGE,
		 .key = c->alive_prefix,
		 .range_end = c->alive_end,
		 .keys_only = true,
		 .limit = 1,
		 .max_create_revision = state_rev},
		{.kind = ETCD_OP_RANGE, .key = c->state_key},
		{.kind = ETCD_OP_RANGE, .key = c->closed_key, .keys_only = true},
	};
	struct etcd_request req = {.call = ETCD_CALL_TXN, .success = ops, .n_success = 3};

	c->boot_state_rev = state_rev;
	(void)etcd_client_call(c->cl, &req, alone_cb, c);
}

/* How often a booting node looks while another removes a closed rendezvous. */
#define CLEANING_LOOK_USEC (100 * USEC_PER_MSEC)

/* Whether the boot's answer shows a closed rendezvous whose coord key was
 * taken after its last write, by another node: one booting with us, that
 * removes it if no node of the job that wrote it is left (alone_look). We
 * look again until it is gone, or the holder leaves and we take the key. */
static bool
cleaning(const struct etcdr *c, const struct etcd_response *resp)
{
	const struct etcd_range *st = &resp->ranges[1], *closed = &resp->ranges[2],
				*coord = &resp->ranges[3];

	return st->n_kvs == 1 && closed->n_kvs == 1 && coord->n_kvs == 1 &&
	       coord->kvs[0].lease != c->lease &&
	       coord->kvs[0].create_revision > st->kvs[0].mod_revision;
}

static void
revoke_done_cb(int err, const struct etcd_response *resp, const char *errmsg, void *arg)
{
}

/* An answer of the boot after this node began to leave: the boot is over. A
 * lease granted meanwhile goes at once (no key is on it). */
static void
boot_left(struct etcdr *c, int err, const struct etcd_response *resp)
{
	c->boot_join = false;
	if (err == 0 && c->boot == BOOT_LEASE && resp->id != 0) {
		(void)etcd_client_call(
			c->cl,
			&(struct etcd_request){.call = ETCD_CALL_LEASE_REVOKE, .lease = resp->id},
			revoke_done_cb, c);
	}
}

static void
boot_cb(int err, const struct etcd_response *resp, const char *errmsg, void *arg)
{
	struct etcdr *c = arg;
	bool join = c->boot_join;

	if (c->fin != FIN_NONE) {
		boot_left(c, err, resp);
		return;
	}
	if (err == -ENOENT && c->boot == BOOT_CLEAN) {
		/* Our lease ran out before etcd took our a/ key (an etcd too busy
		 * for its TTL): a new one. */
		c->boot = BOOT_LEASE;
	}
	if (join) {
		/* The txn carried the first join's request (etcdr_boot_step). */
		c->boot_join = c->intent_pending = false;
		c->intent = c->intent_asked = err == 0;
		c->blind_asked = now_usec();
	}
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
		rdzv_progress(c->r, "etcd at %s (%s) granted lease %" PRIx64 " (TTL %" PRId64 " s)",
			      etcd_client_endpoint(c->cl), etcd_client_wire_name(c->cl), c->lease,
			      c->ttl);
		break;
	case BOOT_CLEAN:
		/* [put a/<node>, the state (keys only), the closed key, the
		 * coord key; for a first join: n/<node>, its request] */
		if (resp->n_ranges < 4) {
			boot_failed_try(c, -EPROTO, "the boot txn answered too few ranges");
			return;
		}
		c->boot_coordinator = etcdr_coord_holder(c, resp, true);
		/* The first join's blind read is done if it found no word
		 * (n/<node>, at rd_state) and nothing closed. */
		c->boot_looked = join && (size_t)c->rd_state < resp->n_ranges &&
				 resp->ranges[c->rd_state].n_kvs == 0 && resp->ranges[2].n_kvs == 0;
		if (resp->ranges[1].n_kvs == 1 && c->boot_coordinator) {
			/* Taken now, or by an earlier try of this boot. */
			alone_look(c, resp->ranges[1].kvs[0].mod_revision);
			return;
		}
		if (cleaning(c, resp)) {
			/* 100 ms, doubling up to 1.6 s: a few looks, not a storm
			 * of boot txns from every node waiting. */
			c->cleaning_wait =
				c->cleaning_wait ? c->cleaning_wait * 2 : CLEANING_LOOK_USEC;
			if (c->cleaning_wait > 16 * CLEANING_LOOK_USEC) {
				c->cleaning_wait = 16 * CLEANING_LOOK_USEC;
			}
			timer_usec(c->boot_timer, c->cleaning_wait);
			return;
		}
		boot_ready(c, resp->revision,
			   resp->ranges[1].n_kvs == 1 ? resp->ranges[1].kvs[0].create_revision : 0);
		return;
	case BOOT_READY:
	case BOOT_FAILED:
		return;
	}
	etcdr_boot_step(c);
}

void
etcdr_boot_step(struct etcdr *c)
{
	if (c->fin != FIN_NONE) {
		return; /* leaving: the boot is over */
	}
	switch (c->boot) {
	case BOOT_LEASE:
		(void)etcd_client_call(
			c->cl, &(struct etcd_request){.call = ETCD_CALL_LEASE_GRANT, .ttl = c->ttl},
			boot_cb, c);
		return;
	case BOOT_CLEAN: {
		/* In, a look for a closed rendezvous, and who coordinates
		 * (taken if nobody does); O(1) bytes: not the state's value.
		 * A first join waiting for the boot adds its request and its
		 * first blind look (n/<node>): one txn less per node. */
		struct etcd_op ops[ETCDR_LOOK_OPS] = {
			{.kind = ETCD_OP_PUT,
			 .key = c->alive_key,
			 .value = "1",
			 .value_len = 1,
			 .lease = c->lease},
			{.kind = ETCD_OP_RANGE, .key = c->state_key, .keys_only = true},
			{.kind = ETCD_OP_RANGE, .key = c->closed_key, .keys_only = true},
		};
		size_t n = 3;
		char *info = NULL;

		etcdr_coord_read(c, ops, &n);
		c->rd_state = -1;
		c->boot_join = c->next_pending && c->ran_round < 0;
		if (c->boot_join) {
			c->rd_state = (int)n;
			ops[n++] = (struct etcd_op){.kind = ETCD_OP_RANGE, .key = c->assign_key};
			info = etcdr_intent_ops(c, ops, &n);
		}
		etcdr_look(c, ops, n, true, boot_cb);
		free(info);
		return;
	}
	case BOOT_READY:
	case BOOT_FAILED:
		return;
	}
}

/* ---- exit barrier and leaving ------------------------------------------- */

/* Group rank 0's watch on the arrivals of its round. */
void
etcdr_arrivals_cb(int err, const struct etcd_response *resp, bool reset, const char *errmsg,
		  void *arg)
{
	struct etcdr *c = arg;

	if (err < 0) {
		rdzv_progress(c->r, "%s; reconnecting", errmsg);
		return;
	}
	if (!c->sync.barrier || c->fin != FIN_NONE) {
		return;
	}
	for (size_t i = 0; i < resp->n_events; i++) {
		if (!resp->events[i].is_delete) {
			etcdr_barrier_mark(c, resp->events[i].kv.key);
		}
	}
	if (reset) {
		etcdr_read_all(c); /* compacted: count from a read */
		return;
	}
	etcdr_kv_check(c);
}

void
etcdr_aux_timer_cb(evutil_socket_t fd, short what, void *arg)
{
	struct etcdr *c = arg;
	char *msg;

	if (c->x_deferred) {
		etcdr_next_fail(c, -ETIMEDOUT,
				"the rank exchange through etcd did not start before the join "
				"timeout: no read of the rendezvous state came back");
	} else if (c->sync.next_active && c->next_pending && c->boot != BOOT_READY) {
		msg = xasprintf("the rendezvous '%s' cannot reach etcd at --rdzv-endpoint %s "
				"before the join timeout of %g s: %s",
				c->r->cfg->rdzv_id, c->r->cfg->rdzv_endpoint,
				(double)c->join_timeout / 1e6,
				c->boot_err ? c->boot_err : "no answer (no quorum?)");
		c->next_pending = false;
		etcdr_next_fail(c, -EHOSTUNREACH, msg);
		free(msg);
	}
}

int
etcdr_exit_barrier(struct rdzv *r)
{
	struct etcdr *c = backend(r);

	if (!c->sync.running) {
		rdzv_tell(c->r, RDZV_TELL_FINISHED, 0, 0, NULL);
		return 0;
	}
	free(c->arrived);
	c->arrived = xcalloc((size_t)c->sync.world, sizeof(*c->arrived));
	c->n_arrived = 0;
	etcd_watch_free(c->bwatch); /* a new one replays every arrival */
	c->bwatch = NULL;
	c->sync.barrier = rdzv_exchange_barrier(&c->x, c->barrier_timeout) == 0;
	if (!c->sync.barrier) {
		rdzv_tell(c->r, RDZV_TELL_FINISHED, 0, 0, NULL); /* never exchanged */
	}
	return 0;
}

static void fin_step(struct etcdr *c, int err);

/* The close or leave op is over: stop everything of the rendezvous (the
 * keep-alives, the watches, the timers, the coordinator's work: its key goes
 * with the lease). */
static void
fin_stop(struct etcdr *c)
{
	evtimer_del(c->ka_timer);
	evtimer_del(c->boot_timer);
	evtimer_del(c->retry_timer);
	evtimer_del(c->admit_timer);
	c->kick_pending = false;
	etcdr_coordinator_set(c, false, c->rev);
	etcd_watch_free(c->watch);
	c->watch = NULL;
	etcd_watch_free(c->deaths);
	c->deaths = NULL;
	etcd_watch_free(c->jwatch);
	c->jwatch = NULL;
	etcd_watch_free(c->bwatch);
	c->bwatch = NULL;
}

/* Leaving is over (err: as rdzv_tell's), for good: FIN_DONE, which no
 * answer or timer of the rendezvous leaves (the agent may keep the handle
 * through a quarantine's cooldown). No keep-alive fails any more: not
 * degraded. */
static void
fin_end(struct etcdr *c, int err)
{
	c->fin = FIN_DONE;
	fin_stop(c);
	c->ka_fail_since = 0;
	rdzv_tell(c->r, RDZV_TELL_FINISHED, err, 0, NULL);
}

static void
fin_cb(int err, const struct etcd_response *resp, const char *errmsg, void *arg)
{
	struct etcdr *c = arg;

	if (err < 0) {
		rdzv_progress(c->r, "leaving the rendezvous: %s", errmsg);
		/* Nothing more to do without etcd: the lease expires by itself. */
		fin_end(c, 0);
		return;
	}
	if (c->fin == FIN_CHECK) {
		/* No match: no "kvs" at all (zero fields are omitted). */
		if ((resp->n_ranges == 0 || resp->ranges[0].n_kvs == 0) && c->fin_close) {
			struct etcd_op del = {.kind = ETCD_OP_DELETE,
					      .key = c->prefix,
					      .range_end = c->prefix_end};
			struct etcd_request req = {.call = ETCD_CALL_DELETE, .op = &del};

			/* The last one out: remove the run's keys. */
			c->fin = FIN_DELETE;
			(void)etcd_client_call(c->cl, &req, fin_cb, c);
			return;
		}
		fin_end(c, 0);
		return;
	}
	fin_step(c, 0);
}

/* Leaving, one step after another: close, revoke, check, delete. */
static void
fin_step(struct etcdr *c, int err)
{
	switch (c->fin) {
	case FIN_CLOSE:
		c->fin = FIN_REVOKE;
		fin_stop(c);
		if (c->lease == 0) {
			fin_end(c, 0);
			return;
		}
		(void)etcd_client_call(
			c->cl,
			&(struct etcd_request){.call = ETCD_CALL_LEASE_REVOKE, .lease = c->lease},
			fin_cb, c);
		return;
	case FIN_REVOKE: {
		struct etcd_op r = {.kind = ETCD_OP_RANGE,
				    .key = c->alive_prefix,
				    .range_end = c->alive_end,
				    .keys_only = true};

		c->lease = 0;
		c->fin = FIN_CHECK;
		(void)etcd_client_call(c->cl,
				       &(struct etcd_request){.call = ETCD_CALL_RANGE, .op = &r},
				       fin_cb, c);
		return;
	}
	case FIN_CHECK:
	case FIN_DELETE:
	case FIN_NONE:
		fin_end(c, err);
		return;
	case FIN_DONE:
		return; /* told already */
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

/* A quarantined node's leave (rdzv_set_quarantine) has written its entry:
 * now the lease. */
static void
quarantine_leave_done(void *arg, int err, enum rdzv_action a)
{
	fin_step(arg, 0);
}

int
etcdr_finish(struct rdzv *r, bool close)
{
	struct etcdr *c = backend(r);

	if (c->fin == FIN_DONE) {
		/* Left already: nothing more to do (never a close op from a
		 * node out of the rendezvous). */
		rdzv_tell(c->r, RDZV_TELL_FINISHED, 0, 0, NULL);
		return 0;
	}
	if (c->fin != FIN_NONE) {
		return 0; /* under way: its end is told */
	}
	c->sync.running = false;
	c->sync.barrier = false;
	etcdr_exchange_abandon(c);
	c->sync.next_active = false;
	c->next_pending = false; /* a boot that ends now starts no join */
	evtimer_del(c->aux_timer);
	c->fin_close = close;
	c->fin = FIN_CLOSE;
	if (!close && c->sync.op_active) {
		/* Leaving (rdzv_leave): a join or keep-alive under way ends here;
		 * the revoked lease takes this node out of the others' state. */
		rdzv_sync_abandon(&c->sync);
	}
	if (c->boot != BOOT_READY) {
		/* The boot stops here (fin_stop deletes its timer; boot_left
		 * takes its answers); the lease, if any, goes now rather than
		 * at its TTL. */
		fin_step(c, 0);
		return 0;
	}
	if (close) {
		etcdr_op_start(c, RDZV_OP_CLOSE, now_usec() + c->close_timeout, close_done);
		return 0;
	}
	if (r->quarantine) { /* out of the state with the entry, then the lease */
		etcdr_op_start(c, RDZV_OP_LEAVE, now_usec() + c->close_timeout,
			       quarantine_leave_done);
		return 0;
	}
	fin_step(c, 0);
	return 0;
}

static void
run_op_done(void *arg, int err, enum rdzv_action a)
{
	struct etcdr *c = arg;

	rdzv_op_done(c->r, err, a);
}

int
etcdr_run_op(struct rdzv *r, enum rdzv_op op)
{
	struct etcdr *c = backend(r);

	if (c->boot != BOOT_READY || c->fin != FIN_NONE) {
		return -ENOTCONN;
	}
	if (c->sync.op_active || c->sync.io_pending) {
		return -EBUSY;
	}
	etcdr_op_start(c, op, now_usec() + c->close_timeout, run_op_done);
	return 0;
}

/* rdzv_backend_ops.degraded */
bool
etcdr_degraded(struct rdzv *r, uint64_t *ret_since_usec, const char **ret_why)
{
	struct etcdr *c = r->backend;

	if (!c || !c->ka_fail_since) {
		return false;
	}
	*ret_since_usec = c->ka_fail_since;
	*ret_why = c->ka_fail_why;
	return true;
}

void
etcdr_shutdown(struct rdzv *r)
{
	struct etcdr *c = backend(r);

	if (c->fin == FIN_NONE && c->boot == BOOT_READY) {
		(void)etcdr_finish(r, true);
	}
}
