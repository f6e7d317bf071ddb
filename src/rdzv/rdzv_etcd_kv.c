/* rdzv_etcd_kv.c — etcd as the key-value store of the rank exchange and
 * the exit barrier (rdzv_exchange.h), with the keys that keep each node's
 * reads O(1) whatever N:
 *
 *   i/<node>          role_info: put with the node's join request (roles
 *                     held), read by group rank 0 alone (one range)
 *   w/r/<round>       elasticd/round, group rank 0's answer: one event on
 *                     every node's w/ stream (which it has anyway)
 *   b/<round>/<rank>  an arrival at the exit barrier: outside w/, watched
 *                     by group rank 0 alone
 *   w/b/<round>       last_member: one w/ event per node
 *
 * torch's assigned_ranks, MASTER_ADDR and MASTER_PORT are for workers that
 * read a TCPStore; etcd keeps none of them. A get waits on what the node
 * learns anyway (its w/ stream, group rank 0's arrivals watch, the reads of
 * the state, which also range over what a get waits for); a put that fails
 * goes again while the node waits on the exchange. */
#include <errno.h>
#include <event2/event.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"
#include "etcd_client.h"
#include "rdzv.h"
#include "rdzv_exchange.h"
#include "util.h"
#include "rdzv_etcd.h"

/* A put in flight, kept on c->kv_puts so that a client freed with it
 * (its callback never runs) leaks nothing. */
struct etcdr_kv_put {
	struct etcdr *c;
	char *key;
	char *val;
	int64_t round;       /* the exchange's when it was set */
	struct event *retry; /* after a failure: the next try */
	struct etcdr_kv_put *next;
};

static void put_cb(int err, const struct etcd_response *resp, const char *errmsg, void *arg);

static void
put_send(struct etcdr_kv_put *p)
{
	struct etcd_op op = {
		.kind = ETCD_OP_PUT, .key = p->key, .value = p->val, .value_len = strlen(p->val)};

	(void)etcd_client_call(p->c->cl, &(struct etcd_request){.call = ETCD_CALL_PUT, .op = &op},
			       put_cb, p);
}

static void put_free(struct etcdr_kv_put *p);
static bool put_wanted(const struct etcdr_kv_put *p);

static void
put_retry_cb(evutil_socket_t fd, short what, void *arg)
{
	if (!put_wanted(arg)) {
		put_free(arg); /* the round is over meanwhile */
		return;
	}
	put_send(arg);
}

static void
put_free(struct etcdr_kv_put *p)
{
	struct etcdr_kv_put **q = &p->c->kv_puts;

	while (*q != p) {
		q = &(*q)->next;
	}
	*q = p->next;
	if (p->retry) {
		event_free(p->retry);
	}
	free(p->key);
	free(p->val);
	free(p);
}

/* Whether the get out is still the engine's (not abandoned, not
 * answered). */
static bool
get_live(const struct etcdr *c)
{
	return c->kv_keys && c->kv_id == c->x.id && c->x.step != RDZV_XSTEP_IDLE;
}

/* Whether p, failed, is worth another try: the node is still in p's round,
 * waiting on its exchange or barrier, or running it (group rank 0's answer,
 * which every other node waits for). Every put of the exchange is safe to
 * repeat. */
static bool
put_wanted(const struct etcdr_kv_put *p)
{
	const struct etcdr *c = p->c;

	return c->fin == FIN_NONE && p->round == c->x.round &&
	       (get_live(c) || (c->sync.running && c->sync.round == p->round));
}

/* A put that failed (every member tried) goes again after a pause while it
 * is wanted; after the last, the others wait for it until their deadline. */
static void
put_cb(int err, const struct etcd_response *resp, const char *errmsg, void *arg)
{
	struct etcdr_kv_put *p = arg;
	struct etcdr *c = p->c;
	bool again = err < 0 && put_wanted(p);

	if (err < 0) {
		rdzv_progress(c->r, "the rank exchange or exit barrier: putting %s: %s%s", p->key,
			      errmsg, again ? "; trying again" : "");
	}
	if (!again) {
		put_free(p);
		return;
	}
	if (!p->retry) {
		p->retry = evtimer_new(c->r->base, put_retry_cb, p);
	}
	timer_usec(p->retry, etcdr_retry_usec(c, 0));
}

static void
kv_set(void *kv, const char *const *keys, const char *const *vals, size_t n)
{
	struct etcdr *c = kv;

	for (size_t i = 0; i < n; i++) {
		struct etcdr_kv_put *p = xcalloc(1, sizeof(*p));

		*p = (struct etcdr_kv_put){.c = c,
					   .key = xstrdup(keys[i]),
					   .val = xstrdup(vals[i]),
					   .round = c->x.round,
					   .next = c->kv_puts};
		c->kv_puts = p;
		put_send(p);
	}
}

/* What key (the first of a get's; the engine's gets are of one kind)
 * names, among what a get waits for. */
static enum etcdr_kv_wait
key_kind(const struct etcdr *c, const char *key)
{
	char *a = etcdr_assignment_key(c, c->x.round), *b = etcdr_barrier_key(c, c->x.round);
	char *arr = etcdr_arrival_prefix(c, c->x.round);
	enum etcdr_kv_wait w = strncmp(key, c->info_prefix, strlen(c->info_prefix)) == 0
				       ? ETCDR_KV_INFOS
			       : strcmp(key, a) == 0                 ? ETCDR_KV_ANSWER
			       : strcmp(key, b) == 0                 ? ETCDR_KV_LAST
			       : strncmp(key, arr, strlen(arr)) == 0 ? ETCDR_KV_ARRIVALS
								     : ETCDR_KV_NONE;

	free(a);
	free(b);
	free(arr);
	return w;
}

static int
cmp_kv_key(const void *key, const void *kv)
{
	return strcmp(key, ((const struct etcd_kv *)kv)->key);
}

/* The value of key, one of the get's (c->kv_wait tells what they are), as
 * far as this node knows it: 1 with *ret, 0 for none yet. */
static int
lookup(const struct etcdr *c, const char *key, struct rdzv_kv_value *ret)
{
	const struct etcd_kv *kv;

	switch (c->kv_wait) {
	case ETCDR_KV_NONE:
		return 0;
	case ETCDR_KV_INFOS:
		kv = c->infos.n_kvs > 0
			     ? bsearch(key, c->infos.kvs, c->infos.n_kvs, sizeof(*kv), cmp_kv_key)
			     : NULL;
		*ret = kv ? (struct rdzv_kv_value){kv->value, kv->value_len}
			  : (struct rdzv_kv_value){0};
		return kv != NULL;
	case ETCDR_KV_ANSWER:
		*ret = (struct rdzv_kv_value){c->assignment, c->assignment_len};
		return c->assignment && c->assignment_round == c->x.round;
	case ETCDR_KV_LAST:
		*ret = (struct rdzv_kv_value){"1", 1};
		return c->barrier_round == c->x.round;
	case ETCDR_KV_ARRIVALS:
		*ret = (struct rdzv_kv_value){"1", 1};
		return etcdr_barrier_arrived(c, key);
	}
	return 0;
}

/* Forget the get out. */
static void
get_drop(struct etcdr *c)
{
	strv_free(c->kv_keys);
	c->kv_keys = NULL;
	c->kv_wait = ETCDR_KV_NONE;
	evtimer_del(c->kv_timer);
	etcdr_watches_update(c); /* group rank 0's arrivals watch goes */
}

/* The get out is over: answer the engine (err, vals[0..n)). */
static void
get_end(struct etcdr *c, int err, const struct rdzv_kv_value *vals, size_t n)
{
	uint64_t id = c->kv_id;

	get_drop(c);
	rdzv_exchange_got(&c->x, id, err, vals, n);
}

void
etcdr_kv_check(struct etcdr *c)
{
	size_t n = c->kv_n;
	struct rdzv_kv_value one, *vals;

	if (!c->kv_keys) {
		return;
	}
	if (!get_live(c)) {
		get_drop(c); /* abandoned: nobody waits */
		return;
	}
	/* A key in mostly stays in: the look goes on from the first key
	 * missing, so that N arrivals cost group rank 0 O(N) lookups, not
	 * O(N^2); the last pass takes the values (a role_info gone meanwhile,
	 * its node's lease expired, is waited for again). */
	while (c->kv_found < n && lookup(c, c->kv_keys[c->kv_found], &one)) {
		c->kv_found++;
	}
	if (c->kv_found < n) {
		return;
	}
	vals = xcalloc(n + 1, sizeof(*vals));
	for (size_t i = 0; i < n; i++) {
		if (!lookup(c, c->kv_keys[i], &vals[i])) {
			c->kv_found = i;
			free(vals);
			return;
		}
	}
	get_end(c, 0, vals, n);
	free(vals);
}

void
etcdr_kv_timer_cb(evutil_socket_t fd, short what, void *arg)
{
	struct etcdr *c = arg;

	if (get_live(c)) {
		get_end(c, -ETIMEDOUT, NULL, 0);
	} else {
		etcdr_kv_check(c); /* drops it */
	}
}

void
etcdr_kv_ev_cb(evutil_socket_t fd, short what, void *arg)
{
	etcdr_kv_check(arg);
}

static void
kv_get(void *kv, uint64_t id, const char *const *keys, size_t n, uint64_t timeout)
{
	struct etcdr *c = kv;

	strv_free(c->kv_keys);
	c->kv_keys = xcalloc(n + 1, sizeof(*c->kv_keys));
	for (size_t i = 0; i < n; i++) {
		c->kv_keys[i] = xstrdup(keys[i]);
	}
	c->kv_n = n;
	c->kv_id = id;
	c->kv_found = 0;
	c->kv_wait = n > 0 ? key_kind(c, keys[0]) : ETCDR_KV_NONE;
	timer_usec(c->kv_timer, timeout > 0 ? timeout : 1);
	if (c->kv_wait == ETCDR_KV_INFOS) {
		/* Group rank 0: the i/ range, with the state (whose round must
		 * still be ours). */
		etcdr_read_all(c);
	}
	etcdr_watches_update(c);               /* group rank 0's arrivals watch */
	event_active(c->kv_ev, EV_TIMEOUT, 0); /* what we know already */
}

/* MASTER_ADDR:MASTER_PORT: a free port for worker RANK 0 to bind (etcd is
 * no store of the workers). */
static int
kv_master(void *kv, char **ret_addr, int *ret_port, bool *ret_agent_store)
{
	struct etcdr *c = kv;
	const struct config *cfg = c->r->cfg;
	int port = rdzv_free_port();

	*ret_addr = xstrdup(cfg->local_addr && *cfg->local_addr ? cfg->local_addr : host_fqdn());
	*ret_port = port > 0 ? port : 29500;
	*ret_agent_store = false;
	return 0;
}

static char *
kv_key(void *kv, enum rdzv_xkey k, int64_t round, int index)
{
	struct etcdr *c = kv;
	char *prefix, *key;

	switch (k) {
	case RDZV_XKEY_ROLE_INFO:
		/* The group rank's node (group rank 0 asks, after
		 * etcdr_kv_round). */
		if (index < 0 || (size_t)index >= c->kv_n_names) {
			return xasprintf("%s?%d", c->info_prefix, index); /* never comes */
		}
		return xasprintf("%s%s", c->info_prefix, c->kv_names[index]);
	case RDZV_XKEY_ASSIGNED_RANKS:
	case RDZV_XKEY_MASTER_ADDR:
	case RDZV_XKEY_MASTER_PORT:
	case RDZV_XKEY_COUNT:
		return NULL;
	case RDZV_XKEY_ROUND:
		return etcdr_assignment_key(c, round);
	case RDZV_XKEY_LAST:
		return etcdr_barrier_key(c, round);
	case RDZV_XKEY_ARRIVED:
		prefix = etcdr_arrival_prefix(c, round);
		key = xasprintf("%s%d", prefix, index);
		free(prefix);
		return key;
	}
	return NULL;
}

void
etcdr_kv_round(struct etcdr *c)
{
	const struct rdzv_state *st = &c->sync.st;

	strv_free(c->kv_names);
	c->kv_n_names = st->n_participants;
	c->kv_names = xcalloc(st->n_participants + 1, sizeof(*c->kv_names));
	for (size_t i = 0; i < st->n_participants; i++) {
		int rank = st->participants[i].rank;

		if (rank >= 0 && (size_t)rank < st->n_participants && !c->kv_names[rank]) {
			c->kv_names[rank] = xstrdup(st->participants[i].node.name);
		}
	}
	for (size_t i = 0; i < st->n_participants; i++) {
		if (!c->kv_names[i]) {
			c->kv_names[i] = xstrdup("?"); /* a corrupt state: never comes */
		}
	}
}

void
etcdr_kv_release(struct etcdr *c)
{
	strv_free(c->kv_names);
	c->kv_names = NULL;
	c->kv_n_names = 0;
	while (c->kv_puts) {
		put_free(c->kv_puts);
	}
	strv_free(c->kv_keys);
	c->kv_keys = NULL;
}

const struct rdzv_kv_ops etcdr_kv_ops = {
	.set = kv_set,
	.get = kv_get,
	.master = kv_master,
	.key = kv_key,
	.roles_held = true,
};
