/* rdzv_exchange.c — the rank exchange and the exit barrier of a round as
 * operations on the rendezvous store (rdzv_exchange.h). Pure: every byte
 * goes through struct rdzv_kv_ops, every answer comes back through
 * rdzv_exchange_got / rdzv_exchange_added. */
#include <errno.h>
#include <inttypes.h>
#include <jansson.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ranks.h"
#include "rdzv_exchange.h"
#include "rdzv_runs.h"
#include "util.h"

#define TERMINAL "torchelastic/agent/terminal_state/"

/* Key k (index: a group rank where k names one) of the round under way:
 * the store's name, or torch's under the prefix. NULL: the store keeps
 * no such key. */
static char *
xkey(const struct rdzv_exchange *x, enum rdzv_xkey k, int index)
{
	const char *p = x->prefix;

	if (x->ops->key) {
		return x->ops->key(x->kv, k, x->round, index);
	}
	switch (k) {
	case RDZV_XKEY_ROLE_INFO:
		return xasprintf("%storchelastic/role_info/%d", p, index);
	case RDZV_XKEY_ASSIGNED_RANKS:
		return xasprintf("%storchelastic/assigned_ranks/%d", p, index);
	case RDZV_XKEY_MASTER_ADDR:
		return xasprintf("%sMASTER_ADDR", p);
	case RDZV_XKEY_MASTER_PORT:
		return xasprintf("%sMASTER_PORT", p);
	case RDZV_XKEY_ROUND:
		return xasprintf("%selasticd/round", p);
	case RDZV_XKEY_COUNT:
		return xasprintf("%s" TERMINAL "num_members", p);
	case RDZV_XKEY_LAST:
		return xasprintf("%s" TERMINAL "last_member", p);
	case RDZV_XKEY_ARRIVED:
		return xasprintf("%s" TERMINAL "arrived/%d", p, index);
	}
	return NULL;
}

/* Keys k for the group ranks 0..n-1 (index 0 alone when k names no rank):
 * a strv of n. */
static char **
keys_of(const struct rdzv_exchange *x, enum rdzv_xkey k, int n)
{
	char **keys = xcalloc((size_t)n + 1, sizeof(*keys));

	for (int i = 0; i < n; i++) {
		keys[i] = xkey(x, k, i);
	}
	return keys;
}

/* Set key k (index as xkey's) to val, where the store keeps it. */
static void
set_one(struct rdzv_exchange *x, enum rdzv_xkey k, int index, const char *val)
{
	char *key = xkey(x, k, index);

	if (key) {
		x->ops->set(x->kv, (const char *const *)&key, &val, 1);
	}
	free(key);
}

static void
result_clear(struct rdzv_exchange *x)
{
	rdzv_result_release(&x->result);
	strv_free(x->roles);
	x->roles = NULL;
}

void
rdzv_exchange_init(struct rdzv_exchange *x, const struct rdzv_kv_ops *ops, void *kv,
		   rdzv_exchange_done_fn exchanged, rdzv_exchange_done_fn passed, void *arg)
{
	*x = (struct rdzv_exchange){
		.ops = ops, .kv = kv, .exchanged = exchanged, .passed = passed, .arg = arg};
}

void
rdzv_exchange_release(struct rdzv_exchange *x)
{
	result_clear(x);
	free(x->prefix);
	free(x->role);
	x->prefix = x->role = NULL;
	x->step = RDZV_XSTEP_IDLE;
	x->id++;
}

void
rdzv_exchange_abandon(struct rdzv_exchange *x)
{
	x->step = RDZV_XSTEP_IDLE;
	x->id++;
}

/* Ask for keys (n, owned and freed here) in step s. */
static void
wait_for(struct rdzv_exchange *x, enum rdzv_exchange_step s, char **keys, size_t n,
	 uint64_t timeout)
{
	x->step = s;
	x->ops->get(x->kv, ++x->id, (const char *const *)keys, n, timeout);
	strv_free(keys);
}

/* The exchange ended: tell the backend (err < 0: why, about what). */
static void
exchange_end(struct rdzv_exchange *x, int err, const char *what)
{
	char *msg = NULL;

	x->step = RDZV_XSTEP_IDLE;
	if (err < 0) {
		result_clear(x); /* nothing half-learnt stays */
	}
	if (err == -ETIMEDOUT) {
		msg = xasprintf("round %" PRId64 " of the rendezvous: timed out waiting for %s",
				x->round, what);
	} else if (err == -EBADMSG) {
		msg = xasprintf("round %" PRId64 " of the rendezvous: bad %s from the store",
				x->round, what);
	} else if (err < 0) {
		msg = xasprintf("round %" PRId64 " of the rendezvous: %s while waiting for %s",
				x->round, strerror(-err), what);
	}
	x->exchanged(x->arg, err, msg);
	free(msg);
}

/* Whether the round's world size fits the int of WORLD_SIZE and the ranks
 * (ranks_assign's bound). */
static bool
world_fits(const struct rdzv_exchange *x)
{
	return ranks_world_size(x->result.runs, x->result.n_runs) <= INT_MAX;
}

/* Append the next node by group rank (role, lws) to the round's runs: the
 * last run grows when alike, else a new run points at a copy of role in
 * roles. runs and roles have room for a run per node (take_infos). */
static void
push_node(struct rdzv_exchange *x, const char *role, int lws)
{
	struct rdzv_result *res = &x->result;
	struct ranks_run *last = res->n_runs ? &res->runs[res->n_runs - 1] : NULL;

	if (last && last->local_world_size == lws && strcmp(last->role, role) == 0) {
		last->count++;
		return;
	}
	x->roles[res->n_runs] = xstrdup(role);
	res->runs[res->n_runs] = (struct ranks_run){x->roles[res->n_runs], lws, 1};
	res->n_runs++;
}

/* Every node's role and size from their role_info values, in group rank
 * order, as runs of alike nodes (what group rank 0 publishes). Returns 0 or
 * -EBADMSG. */
static int
take_infos(struct rdzv_exchange *x, const struct rdzv_kv_value *vals, size_t n)
{
	if (n != (size_t)x->world) {
		return -EBADMSG;
	}
	/* A run per node at most: group rank 0's O(N), once per round. */
	x->result.runs = xcalloc(n + 1, sizeof(*x->result.runs));
	x->roles = xcalloc(n + 1, sizeof(*x->roles));
	for (size_t i = 0; i < n; i++) {
		json_t *o = json_loadb(vals[i].data, vals[i].len, 0, NULL);
		json_t *role = json_object_get(o, "role"),
		       *lws = json_object_get(o, "local_world_size");

		if (!json_is_string(role) || !json_is_integer(lws) || json_integer_value(lws) < 1 ||
		    json_integer_value(lws) > RANKS_MAX_LOCAL_WORLD) {
			json_decref(o);
			return -EBADMSG;
		}
		push_node(x, json_string_value(role), (int)json_integer_value(lws));
		json_decref(o);
	}
	return world_fits(x) ? 0 : -EBADMSG;
}

/* Append key k (index as xkey's) = val (owned) to keys and vals at *n,
 * where the store keeps it. */
static void
push_kv(struct rdzv_exchange *x, char **keys, char **vals, size_t *n, enum rdzv_xkey k, int index,
	char *val)
{
	char *key = xkey(x, k, index);

	if (!key) {
		free(val);
		return;
	}
	keys[*n] = key;
	vals[(*n)++] = val;
}

/* The keys and values group rank 0 sets: assigned_ranks (unless identical),
 * MASTER_ADDR, MASTER_PORT, elasticd/round (those the store keeps). */
static void
publish(struct rdzv_exchange *x)
{
	struct rdzv_result *res = &x->result;
	size_t nr = x->identical ? 0 : (size_t)x->world, n = 0;
	char **keys = xcalloc(nr + 4, sizeof(*keys)), **vals = xcalloc(nr + 4, sizeof(*vals));
	struct ranks_info *ri = xcalloc(nr + 1, sizeof(*ri));
	json_t *round = json_pack("{sssisbso}", "master_addr", res->master_addr, "master_port",
				  res->master_port, "use_agent_store", res->use_agent_store, "runs",
				  rdzv_runs_encode(res->runs, res->n_runs));

	if (nr > 0) {
		ranks_assign_all(res->runs, res->n_runs, ri);
	}
	for (size_t i = 0; i < nr; i++) {
		push_kv(x, keys, vals, &n, RDZV_XKEY_ASSIGNED_RANKS, (int)i,
			xasprintf("[%d, %d, %d, %d]", ri[i].base_global_rank,
				  ri[i].global_world_size, ri[i].base_role_rank,
				  ri[i].role_world_size));
	}
	free(ri);
	push_kv(x, keys, vals, &n, RDZV_XKEY_MASTER_ADDR, 0, xstrdup(res->master_addr));
	push_kv(x, keys, vals, &n, RDZV_XKEY_MASTER_PORT, 0, xasprintf("%d", res->master_port));
	push_kv(x, keys, vals, &n, RDZV_XKEY_ROUND, 0, json_dumps(round, JSON_COMPACT));
	json_decref(round);
	x->ops->set(x->kv, (const char *const *)keys, (const char *const *)vals, n);
	strv_free(keys);
	strv_free(vals);
}

/* Group rank 0 knows every node: pick MASTER_ADDR:MASTER_PORT, publish. */
static void
leader_finish(struct rdzv_exchange *x)
{
	struct rdzv_result *res = &x->result;
	int err;

	if (!world_fits(x)) {
		/* Worker-identical: this node's size times the node count. */
		exchange_end(x, -EOVERFLOW, "a world size of at most 2^31-1 workers");
		return;
	}
	err = x->ops->master(x->kv, &res->master_addr, &res->master_port, &res->use_agent_store);
	if (err < 0) {
		exchange_end(x, err, "a port for the workers' store");
		return;
	}
	publish(x);
	exchange_end(x, 0, NULL);
}

/* elasticd/round: {"master_addr", "master_port", "use_agent_store",
 * "runs"}. Returns 0 or -EBADMSG. */
static int
take_answer(struct rdzv_exchange *x, const struct rdzv_kv_value *v)
{
	json_t *o = json_loadb(v->data, v->len, 0, NULL);
	json_t *addr = json_object_get(o, "master_addr"), *port = json_object_get(o, "master_port");
	int ret = -EBADMSG;

	if (json_is_string(addr) && json_string_length(addr) > 0 && json_is_integer(port) &&
	    json_integer_value(port) > 0 && json_integer_value(port) < 65536 &&
	    (x->identical ||
	     rdzv_runs_decode(json_object_get(o, "runs"), (size_t)x->world, &x->result.runs,
			      &x->result.n_runs, &x->roles) == 0)) {
		if (x->identical) {
			rdzv_runs_alike(x->role, x->local_world_size, (size_t)x->world,
					&x->result.runs, &x->result.n_runs, &x->roles);
		}
		if (!world_fits(x)) {
			json_decref(o);
			return -EBADMSG;
		}
		x->result.master_addr = xstrdup(json_string_value(addr));
		x->result.master_port = (int)json_integer_value(port);
		x->result.use_agent_store = json_is_true(json_object_get(o, "use_agent_store"));
		ret = 0;
	}
	json_decref(o);
	return ret;
}

void
rdzv_exchange_start(struct rdzv_exchange *x, const struct rdzv_exchange_round *rd)
{
	char *info;
	json_t *o;

	rdzv_exchange_abandon(x);
	result_clear(x);
	free(x->prefix);
	free(x->role);
	x->prefix = xstrdup(rd->prefix);
	x->role = xstrdup(rd->role);
	x->round = rd->round;
	x->rank = rd->rank;
	x->world = rd->world;
	x->local_world_size = rd->local_world_size;
	x->identical = rd->identical;
	x->result.round = (int)rd->round;
	x->result.group_rank = rd->rank;
	x->result.group_world_size = rd->world;
	if (x->identical && x->rank == 0) {
		rdzv_runs_alike(x->role, x->local_world_size, (size_t)x->world, &x->result.runs,
				&x->result.n_runs, &x->roles);
		leader_finish(x);
		return;
	}
	if (!x->identical && !x->ops->roles_held) {
		o = json_pack("{sssisi}", "role", x->role, "rank", x->rank, "local_world_size",
			      x->local_world_size);
		info = json_dumps(o, JSON_COMPACT);
		json_decref(o);
		set_one(x, RDZV_XKEY_ROLE_INFO, x->rank, info);
		free(info);
	}
	if (x->rank != 0) {
		wait_for(x, RDZV_XSTEP_ANSWER, keys_of(x, RDZV_XKEY_ROUND, 1), 1, rd->timeout_usec);
		return;
	}
	wait_for(x, RDZV_XSTEP_INFOS, keys_of(x, RDZV_XKEY_ROLE_INFO, x->world), (size_t)x->world,
		 rd->timeout_usec);
}

/* ---- exit barrier -------------------------------------------------------- */

/* The barrier ended: tell the backend. */
static void
barrier_end(struct rdzv_exchange *x, int err)
{
	char *msg = NULL;

	x->step = RDZV_XSTEP_IDLE;
	if (err == -ETIMEDOUT) {
		msg = xasprintf("the exit barrier timed out after %g s: not every node of round "
				"%" PRId64 " finished",
				(double)x->barrier_timeout / 1e6, x->round);
	} else if (err < 0) {
		msg = xasprintf("the exit barrier of round %" PRId64 ": %s", x->round,
				strerror(-err));
	}
	x->passed(x->arg, err, msg);
	free(msg);
}

static void
barrier_wait_last(struct rdzv_exchange *x)
{
	wait_for(x, RDZV_XSTEP_LAST, keys_of(x, RDZV_XKEY_LAST, 1), 1, x->barrier_timeout);
}

/* Every node arrived: say so to the nodes still waiting, and pass once the
 * store holds it (a set has no answer). */
static void
barrier_last(struct rdzv_exchange *x)
{
	set_one(x, RDZV_XKEY_LAST, 0, "1");
	barrier_wait_last(x);
}

int
rdzv_exchange_barrier(struct rdzv_exchange *x, uint64_t timeout_usec)
{
	char *k;

	if (!x->prefix) {
		return -EINVAL;
	}
	rdzv_exchange_abandon(x);
	x->barrier_timeout = timeout_usec;
	if (x->ops->add) {
		/* torch's store_util.barrier: a counter, the last one says so. */
		k = xkey(x, RDZV_XKEY_COUNT, 0);
		x->step = RDZV_XSTEP_COUNT;
		x->ops->add(x->kv, ++x->id, k, 1);
		free(k);
		return 0;
	}
	set_one(x, RDZV_XKEY_ARRIVED, x->rank, "1");
	if (x->rank != 0) {
		barrier_wait_last(x);
		return 0;
	}
	wait_for(x, RDZV_XSTEP_ARRIVALS, keys_of(x, RDZV_XKEY_ARRIVED, x->world), (size_t)x->world,
		 timeout_usec);
	return 0;
}

void
rdzv_exchange_added(struct rdzv_exchange *x, uint64_t id, int err, int64_t value)
{
	if (id != x->id || x->step != RDZV_XSTEP_COUNT) {
		return;
	}
	if (err < 0) {
		barrier_end(x, err);
	} else if (value >= x->world) {
		barrier_last(x);
	} else {
		barrier_wait_last(x);
	}
}

void
rdzv_exchange_got(struct rdzv_exchange *x, uint64_t id, int err, const struct rdzv_kv_value *vals,
		  size_t n)
{
	enum rdzv_exchange_step s = x->step;

	if (id != x->id) {
		return;
	}
	switch (s) {
	case RDZV_XSTEP_IDLE:
	case RDZV_XSTEP_COUNT:
		return;
	case RDZV_XSTEP_INFOS:
		if (err == 0 && (err = take_infos(x, vals, n)) == 0) {
			leader_finish(x);
			return;
		}
		exchange_end(x, err, err == -EBADMSG ? "role_info" : "the other nodes' role_info");
		return;
	case RDZV_XSTEP_ANSWER:
		if (err == 0 && (n != 1 || (err = take_answer(x, &vals[0])) < 0)) {
			err = -EBADMSG;
		}
		exchange_end(x, err,
			     err == -EBADMSG ? "rank assignment"
					     : "group rank 0's rank assignment");
		return;
	case RDZV_XSTEP_ARRIVALS:
		if (err < 0) {
			barrier_end(x, err);
		} else {
			barrier_last(x);
		}
		return;
	case RDZV_XSTEP_LAST:
		barrier_end(x, err);
		return;
	}
}
