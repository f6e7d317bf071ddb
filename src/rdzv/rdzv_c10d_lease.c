/* rdzv_c10d_lease.c — heartbeat keys (every coordinated node keeps alive
 * through "<key>/hb/<node>", the coordinator folds them into the state) and
 * the coordinator of a c10d store that no agent hosts
 * (tcpstore_tool serve, a store torch hosts, an agent whose endpoint is on
 * another host): without it every node runs torch's own loop, reading the
 * whole state, O(N) bytes per node and O(N^2) in all.
 *
 * One participant holds the lease "<key>/lease" = "<node> <wall usec>
 * <cursor>" (rdzv_lease_judge): taken with compare-and-set when absent or
 * stale, renewed every keep-alive interval by its holder, stale after
 * keep_alive_interval x keep_alive_max_attempt (torch's rule for a dead
 * node's heartbeat); every other participant looks at it once per interval
 * (one compare-and-set that changes nothing) and takes it over when stale.
 * The holder does what the store host does (rdzv_c10d.c), through a client:
 *
 *   - join requests: a joiner ADDs "<key>/jn" (slot i = the answer - 1) and
 *     SETs "<key>/jq/<i>" = "<node>\n<value>" (value "" or "x<round>"); the
 *     coordinator WAITs (its own connection, qcl) on the next slot, reads
 *     the count, WAITs for every slot up to it, GETs and deletes them, and
 *     admits them as the host admits "<key>/j/<node>";
 *   - heartbeats: once per interval it ADDs 0 to "<key>/hb/<node>" of every
 *     participant (a read that never fails on a missing key) into hb_cache,
 *     which c10d_hb_fold folds into the state;
 *   - assignments: as the host, one SET per participant (rdzv_c10d_assign.c).
 *
 * A successor starts reading the queue at the cursor of the last renewal
 * (requests read twice are admitted once; slots deleted meanwhile are
 * skipped after a WAIT timeout) and reconstructs the rest from the state
 * key: participants, wait list, heartbeats. A node whose request met no
 * coordinator asks again after a keep-alive window (store_await_admission),
 * and the dead coordinator leaves the state as any dead node: its heartbeat
 * stops. torch agents on the same key keep running their own loop. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <event2/event.h>

#include "config.h"
#include "rdzv_c10d.h"
#include "tcpstore_client.h"
#include "tcpstore_server.h"

/* How long the coordinator waits for the slots whose count it read (a
 * joiner ADDs, then SETs), and more per slot: longer means a joiner that
 * died in between (its slot is skipped), while a live joiner skipped only
 * asks again after a keep-alive window. A crowd of 2500 joiners on a loaded
 * machine took 1.9 s to fill theirs. */
#define QUEUE_SLOT_WAIT_USEC (5 * USEC_PER_SEC)
#define QUEUE_SLOT_WAIT_PER_SLOT_USEC 1000
/* Most join requests read in one WAIT + MULTI_GET. */
#define QUEUE_BATCH 4096

static void q_count(struct c10d *c);
static void q_scan(struct c10d *c);

static int64_t
window_usec(const struct c10d *c)
{
	return (int64_t)(c->settings.keep_alive_interval_usec * c->settings.keep_alive_max_attempt);
}

static char *
lease_key(const struct c10d *c)
{
	return xasprintf("%s/lease", c->key);
}

static char *
slot_key(const struct c10d *c, int64_t i)
{
	return xasprintf("%s/jq/%" PRId64, c->key, i);
}

/* The lease's connection is gone, or the store is. */
static void
qcl_closed_cb(struct tcpstore_client *cl, int err, void *arg)
{
	c10d_store_gone(arg, err);
}

static void
qcl_connected_cb(struct tcpstore_client *cl, int err, void *arg)
{
	struct c10d *c = arg;

	if (err < 0) {
		c10d_store_gone(c, err);
		return;
	}
	if (c->coordinator && !c->q_running) {
		q_count(c);
	}
}

/* ---- the queue of join requests ------------------------------------------- */

/* "<node>\n<value>" of slot q_at: a request. */
static void
q_take(struct c10d *c, const struct tcpstore_bytes *v)
{
	const uint8_t *nl = memchr(v->data, '\n', v->len);
	struct rdzv_node n;
	char *k = slot_key(c, c->q_at++);

	tcpstore_client_delete(c->cl, k, NULL, NULL);
	free(k);
	if (!nl || rdzv_node_parse(&n, (const char *)v->data, (size_t)(nl - v->data)) < 0) {
		return; /* not ours to judge: skipped */
	}
	c10d_join_request(c, &n, nl + 1, v->len - (size_t)(nl + 1 - v->data));
	rdzv_node_release(&n);
}

/* Whether a queue callback should go on (err: its error). */
static bool
q_alive(struct c10d *c, int err)
{
	if (err == -ECANCELED || !c->coordinator || c->finishing) {
		c->q_running = false;
		return false;
	}
	if (err < 0 && err != -ETIMEDOUT) {
		c->q_running = false;
		c10d_store_gone(c, err);
		return false;
	}
	return true;
}

static void
q_got_cb(int err, const struct tcpstore_reply *rep, void *arg)
{
	struct c10d *c = arg;

	if (!q_alive(c, err)) {
		return;
	}
	q_take(c, &rep->value);
	if (c->q_at >= c->q_end) {
		c->q_next = c->q_end;
		q_count(c);
	}
}

static void
q_scan_got_cb(int err, const struct tcpstore_reply *rep, void *arg)
{
	struct c10d *c = arg;

	if (!q_alive(c, err)) {
		return;
	}
	q_take(c, &rep->value);
	q_scan(c);
}

static void
q_check_cb(int err, const struct tcpstore_reply *rep, void *arg)
{
	struct c10d *c = arg;
	char *k;

	if (!q_alive(c, err)) {
		return;
	}
	if (rep->status != TCPSTORE_READY) {
		c->q_at++; /* read and deleted by our predecessor, or its joiner died */
		q_scan(c);
		return;
	}
	k = slot_key(c, c->q_at);
	(void)tcpstore_client_get(c->qcl, k, q_scan_got_cb, c);
	free(k);
}

/* Slot by slot (after a WAIT for all timed out): the ones there. */
static void
q_scan(struct c10d *c)
{
	char *k;
	const char *keys[1];

	if (c->q_at >= c->q_end) {
		c->q_next = c->q_end;
		q_count(c);
		return;
	}
	k = slot_key(c, c->q_at);
	keys[0] = k;
	(void)tcpstore_client_keys(c->qcl, TCPSTORE_CMD_CHECK, keys, 1, 0, q_check_cb, c);
	free(k);
}

static void
q_all_cb(int err, const struct tcpstore_reply *rep, void *arg)
{
	struct c10d *c = arg;

	if (!q_alive(c, err)) {
		return;
	}
	c->q_at = c->q_next;
	if (err == -ETIMEDOUT) {
		q_scan(c);
		return;
	}
	for (int64_t i = c->q_next; i < c->q_end; i++) {
		char *k = slot_key(c, i);

		(void)tcpstore_client_get(c->qcl, k, q_got_cb, c);
		free(k);
	}
}

static void
q_woke_cb(int err, const struct tcpstore_reply *rep, void *arg)
{
	struct c10d *c = arg;

	if (q_alive(c, err)) {
		q_count(c);
	}
}

static void
q_count_cb(int err, const struct tcpstore_reply *rep, void *arg)
{
	struct c10d *c = arg;
	size_t n;
	char **keys;

	if (!q_alive(c, err)) {
		return;
	}
	if (rep->i64 < c->q_next) {
		/* A cursor past the count (the store was reset, or the lease
		 * value is not ours to trust): start from the count. */
		c->q_next = rep->i64 < 0 ? 0 : rep->i64;
	}
	if (rep->i64 <= c->q_next) {
		/* Nothing new: wait for the next slot. */
		char *k = slot_key(c, c->q_next);
		const char *one[1] = {k};

		(void)tcpstore_client_keys(c->qcl, TCPSTORE_CMD_WAIT, one, 1, 0, q_woke_cb, c);
		free(k);
		return;
	}
	/* At most QUEUE_BATCH slots a read (the count is the store's word). */
	c->q_end = rep->i64 - c->q_next > QUEUE_BATCH ? c->q_next + QUEUE_BATCH : rep->i64;
	n = (size_t)(c->q_end - c->q_next);
	keys = xcalloc(n + 1, sizeof(*keys));
	for (size_t i = 0; i < n; i++) {
		keys[i] = slot_key(c, c->q_next + (int64_t)i);
	}
	(void)tcpstore_client_keys(c->qcl, TCPSTORE_CMD_WAIT, (const char *const *)keys, n,
				   QUEUE_SLOT_WAIT_USEC + n * QUEUE_SLOT_WAIT_PER_SLOT_USEC,
				   q_all_cb, c);
	strv_free(keys);
}

/* How many slots were taken: read those from q_next, or wait for one. */
static void
q_count(struct c10d *c)
{
	char *k = xasprintf("%s/jn", c->key);

	c->q_running = true;
	(void)tcpstore_client_add(c->qcl, k, 0, q_count_cb, c);
	free(k);
}

static void
ask_cb(int err, const struct tcpstore_reply *rep, void *arg)
{
	struct c10d *c = arg;
	char *k, *v;

	if (err < 0) {
		c10d_store_gone(c, err);
		return;
	}
	k = slot_key(c, rep->i64 - 1);
	if (c->withdrawn) {
		v = xasprintf("%s\n%s", c->me.name, RDZV_EXITS_WITHDRAW);
	} else {
		char x[32];

		rdzv_exits_request(c->rejoin_round, x, sizeof(x));
		v = xasprintf("%s\n%s", c->me.name, x);
	}
	tcpstore_client_set(c->cl, k, v, strlen(v), NULL, NULL);
	free(k);
	free(v);
}

void
c10d_lease_ask(struct c10d *c)
{
	char *k = xasprintf("%s/jn", c->key);

	tcpstore_client_add(c->cl, k, 1, ask_cb, c);
	free(k);
}

/* ---- heartbeats ------------------------------------------------------------- */

char *
c10d_hb_key(const struct c10d *c, const char *node)
{
	return xasprintf("%s/hb/%s", c->key, node);
}

/* A node of a coordinated store keeps alive through its own key. */
void
c10d_hb_send(struct c10d *c)
{
	char *k = c10d_hb_key(c, c->me.name), v[32];
	int64_t now = (int64_t)wall_usec();
	long i = rdzv_state_find_heartbeat(&c->sync.st, &c->me);

	snprintf(v, sizeof(v), "%" PRId64, now);
	tcpstore_client_set(c->cl, k, v, strlen(v), NULL, NULL);
	free(k);
	if (i >= 0) {
		c->sync.st.heartbeats[i].usec = now; /* the coordinator writes it */
	}
}

/* The heartbeat key of node as the coordinator sees it: from the server
 * we host, else from what the fold timer read by client (hint: where to look
 * first). 0 when unknown. */
static int64_t
hb_lookup(struct c10d *c, const struct rdzv_node *node, size_t hint, int64_t now)
{
	const uint8_t *v;
	size_t len;
	char buf[32], *k;
	long long usec = 0;

	if (!c->server) {
		for (size_t j = 0; j < c->n_hb_cache; j++) {
			size_t i = (hint + j) % c->n_hb_cache;

			if (rdzv_node_cmp(&c->hb_cache[i].node, node) == 0) {
				return c->hb_cache[i].usec;
			}
		}
		return 0;
	}
	k = c10d_hb_key(c, node->name);
	if (tcpstore_server_get(c->server, k, &v, &len) == 0 && len < sizeof(buf)) {
		memcpy(buf, v, len);
		buf[len] = '\0';
		if (parse_int(buf, 0, now + 60 * (int64_t)USEC_PER_SEC, &usec) < 0) {
			usec = 0;
		}
	}
	free(k);
	return usec;
}

size_t
c10d_hb_fold(struct c10d *c, struct rdzv_state *st)
{
	int64_t now = (int64_t)wall_usec();
	size_t changed = 0;

	for (size_t i = 0; i < st->n_heartbeats; i++) {
		struct rdzv_heartbeat *h = &st->heartbeats[i];
		int64_t usec;

		if (rdzv_node_cmp(&h->node, &c->me) == 0) {
			if (now - h->usec >= c->settings.keep_alive_interval_usec / 2) {
				h->usec = now;
				changed++;
			}
			continue;
		}
		usec = hb_lookup(c, &h->node, i, now);
		if (usec > h->usec && usec <= now + 60 * (int64_t)USEC_PER_SEC) {
			h->usec = usec;
			changed++;
		}
	}
	return changed;
}

static void
hb_read_cb(int err, const struct tcpstore_reply *rep, void *arg)
{
	struct c10d *c = arg;
	size_t i;

	if (err < 0) {
		c10d_store_gone(c, err);
		return;
	}
	if (c->hb_left == 0) {
		return;
	}
	i = c->n_hb_cache - c->hb_left--;
	c->hb_cache[i].usec = rep->i64;
	if (c->hb_left == 0 && c->coordinator && !c->finishing) {
		c->fold_due = true;
		c10d_admit_now(c);
	}
}

bool
c10d_lease_fold_read(struct c10d *c)
{
	const struct rdzv_state *st = &c->sync.st;
	size_t n = 0;

	if (c->server) {
		return false;
	}
	if (c->hb_left > 0) {
		return true; /* the last interval's reads are still out */
	}
	for (size_t i = 0; i < c->n_hb_cache; i++) {
		rdzv_node_release(&c->hb_cache[i].node);
	}
	c->hb_cache = xrealloc(c->hb_cache, (st->n_heartbeats + 1) * sizeof(*c->hb_cache));
	for (size_t i = 0; i < st->n_heartbeats; i++) {
		char *k;

		if (rdzv_node_cmp(&st->heartbeats[i].node, &c->me) == 0) {
			continue;
		}
		rdzv_node_copy(&c->hb_cache[n].node, &st->heartbeats[i].node);
		c->hb_cache[n++].usec = 0;
		k = c10d_hb_key(c, st->heartbeats[i].node.name);
		tcpstore_client_add(c->cl, k, 0, hb_read_cb, c);
		free(k);
	}
	c->n_hb_cache = n;
	c->hb_left = n;
	return n > 0;
}

/* ---- the lease ---------------------------------------------------------------- */

static void lease_cb(int err, const struct tcpstore_reply *rep, void *arg);

/* compare_set "<key>/lease" from expected[0..elen) to ours with cursor. */
static void
lease_cas(struct c10d *c, const void *expected, size_t elen, int64_t stamp, int64_t cursor)
{
	char *k = lease_key(c), *v = rdzv_lease_format(c->me.name, stamp, cursor);

	c->lease_busy = true;
	if (tcpstore_client_compare_set(c->cl, k, expected, elen, v, strlen(v), lease_cb, c) < 0) {
		c->lease_busy = false;
	}
	free(k);
	free(v);
}

/* We hold the lease: coordinate from request cursor on. */
static void
lease_won(struct c10d *c, int64_t cursor)
{
	struct tcpstore_client_callbacks cb = {
		.connected = qcl_connected_cb,
		.closed = qcl_closed_cb,
		.arg = c,
	};
	int64_t iv = c->settings.keep_alive_interval_usec;
	struct timeval tv = {(time_t)(iv / 1000000), (suseconds_t)(iv % 1000000)};

	c->coordinator = true;
	c->coordinated = false;
	c->q_next = cursor;
	rdzv_progress(c->r,
		      "coordinates the rendezvous '%s' (lease %s/lease, join requests from %" PRId64
		      " on)",
		      c->r->cfg->rdzv_id, c->key, cursor);
	rdzv_record_step(c->r, c->node_state, "_coordinate",
			 "The node '%s' coordinates the rendezvous '%s' on a store nobody hosts.",
			 c->me.name, c->r->cfg->rdzv_id);
	evtimer_del(c->fold_timer);
	evtimer_add(c->fold_timer, &tv);
	if (!c->qcl) {
		c->qcl = tcpstore_client_new(c->r->base, c->connect_host, c->connect_port,
					     TCPSTORE_DIALECT_V2, &cb);
		tcpstore_client_connect(c->qcl, now_usec() + c->join_timeout);
	} else if (!c->q_running) {
		q_count(c);
	}
	if (c->sync.op_active && c->sync.op == RDZV_OP_JOIN) {
		/* Waiting for a coordinator's word: we decide ourselves now. */
		c->blind = false;
		c->assign_off = true;
		rdzv_sync_wake(&c->sync);
	}
	c10d_watch_update(c);
}

/* Another node took the lease: it coordinates, we are coordinated. */
static void
lease_lost(struct c10d *c)
{
	c->coordinator = false;
	c->coordinated = true;
	evtimer_del(c->fold_timer);
	if (c->qcl && c->q_running) {
		(void)tcpstore_client_cancel_wait(c->qcl);
	}
	rdzv_warn(c->r, "no longer coordinates the rendezvous '%s': another node took the lease",
		  c->r->cfg->rdzv_id);
	rdzv_record_step(c->r, c->node_state, "_coordinate",
			 "The node '%s' no longer coordinates the rendezvous '%s'.", c->me.name,
			 c->r->cfg->rdzv_id);
	c10d_keep_alive_arm(c);
}

/* next_rendezvous waited for the verdict: go on in our role. */
static void
lease_go(struct c10d *c)
{
	c->lease_next = false;
	if (!c->sync.next_active) {
		return;
	}
	if (c->coordinator) {
		rdzv_sync_start(&c->sync, RDZV_OP_EXIT, c->sync.next_deadline, c10d_exit_done);
	} else {
		c10d_coordinated_start(c);
	}
}

/* The lease we hold (c->lease) back to the store, stale (stamp 0), its
 * queue cursor kept for the next holder. No answer awaited. */
static void
lease_hand_back(struct c10d *c, int64_t cursor)
{
	char *k = lease_key(c), *v = rdzv_lease_format(c->me.name, 0, cursor);

	tcpstore_client_compare_set(c->cl, k, c->lease, c->lease_len, v, strlen(v), NULL, NULL);
	free(k);
	free(v);
}

static void
lease_cb(int err, const struct tcpstore_reply *rep, void *arg)
{
	struct c10d *c = arg;
	int64_t cursor, now = (int64_t)wall_usec();
	enum rdzv_lease_verdict v;

	c->lease_busy = false;
	if (err < 0) {
		c10d_store_gone(c, err);
		return;
	}
	v = rdzv_lease_judge((const char *)rep->value.data, rep->value.len, c->me.name, now,
			     window_usec(c), &cursor);
	free(c->lease);
	c->lease = xmalloc(rep->value.len + 1);
	memcpy(c->lease, rep->value.data, rep->value.len);
	c->lease_len = rep->value.len;
	if (c->finishing) {
		/* Left while we asked (or renewed: the release queued behind
		 * the renewal expected the old value and failed): a lease that
		 * is ours goes back at once, or nobody would coordinate until it
		 * went stale. */
		if (v == RDZV_LEASE_MINE && !c->dead && c->up) {
			lease_hand_back(c, cursor);
		}
		return;
	}
	if (v == RDZV_LEASE_FREE) {
		/* Stale: ours if nobody else takes it first. */
		lease_cas(c, c->lease, c->lease_len, now, cursor);
		return;
	}
	if (v == RDZV_LEASE_MINE && !c->coordinator) {
		lease_won(c, cursor);
	} else if (v != RDZV_LEASE_MINE && c->coordinator) {
		lease_lost(c);
	}
	if (c->lease_next) {
		lease_go(c);
	}
}

/* The holder renews with its cursor; anyone else asks (a compare-and-set
 * that only writes an absent lease) and judges the answer. */
static void
lease_try(struct c10d *c)
{
	if (c->lease_busy || c->dead || !c->up) {
		return; /* the answer out judges (and goes on) */
	}
	if (c->coordinator) {
		lease_cas(c, c->lease, c->lease_len, (int64_t)wall_usec(), c->q_next);
	} else {
		lease_cas(c, "", 0, (int64_t)wall_usec(), 0);
	}
}

void
c10d_lease_start(struct c10d *c)
{
	c->lease_next = true;
	lease_try(c);
}

void
c10d_lease_tick(struct c10d *c)
{
	lease_try(c);
}

void
c10d_lease_release(struct c10d *c)
{
	if (!c->leased || !c->coordinator || c->dead || !c->up || !c->lease) {
		return;
	}
	if (c->qcl && c->q_running) {
		(void)tcpstore_client_cancel_wait(c->qcl);
	}
	lease_hand_back(c, c->q_next);
}

void
c10d_lease_free(struct c10d *c)
{
	tcpstore_client_free(c->qcl);
	c->qcl = NULL;
	for (size_t i = 0; i < c->n_hb_cache; i++) {
		rdzv_node_release(&c->hb_cache[i].node);
	}
	free(c->hb_cache);
	free(c->lease);
}
