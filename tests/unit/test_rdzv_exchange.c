/* The rank exchange and the exit barrier as store operations
 * (rdzv_exchange.h), several nodes over one in-process key-value store:
 * the keys and values a torch 2.x agent would find, what each node learns
 * and how many values it read, and every way a step can fail. Answers are
 * queued and delivered by pump(), as a real store's come from the loop. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "rdzv_exchange.h"
#include "util.h"

#define NODES 8
#define P "/torch.rendezvous.job.4/"

struct kv;

struct node {
	struct kv *kv;
	struct rdzv_exchange x;
	int exchanged, passed; /* times reported */
	int err;
	char *msg;
	size_t values_read;
	bool ask_pending; /* a get is parked until its keys exist */
	uint64_t ask_id;
	char **ask_keys;
	uint64_t ask_timeout;
};

struct kv {
	char **keys, **vals; /* parallel strvs */
	struct node nodes[NODES];
	bool counter;   /* ops with add */
	int master_err; /* what ops->master returns */
	int get_err;    /* gets fail with this at once */
	int sets;       /* set requests */
	bool lose_sets; /* sets never reach the store */
	/* One queued answer per node at most, delivered by pump(). */
	struct answer {
		bool due;
		uint64_t id;
		int err;
		bool added;
		int64_t value;
	} answers[NODES];
};

static const char *
kv_value(const struct kv *kv, const char *key)
{
	for (size_t i = 0; kv->keys && kv->keys[i]; i++) {
		if (strcmp(kv->keys[i], key) == 0) {
			return kv->vals[i];
		}
	}
	return NULL;
}

static void
kv_put(struct kv *kv, const char *key, const char *val)
{
	for (size_t i = 0; kv->keys && kv->keys[i]; i++) {
		if (strcmp(kv->keys[i], key) == 0) {
			free(kv->vals[i]);
			kv->vals[i] = xstrdup(val);
			return;
		}
	}
	strv_push(&kv->keys, key);
	strv_push(&kv->vals, val);
}

static size_t
kv_count(const struct kv *kv, const char *prefix)
{
	size_t n = 0;

	for (size_t i = 0; kv->keys && kv->keys[i]; i++) {
		n += strncmp(kv->keys[i], prefix, strlen(prefix)) == 0;
	}
	return n;
}

static void
op_set(void *arg, const char *const *keys, const char *const *vals, size_t n)
{
	struct node *nd = arg;

	nd->kv->sets++;
	for (size_t i = 0; i < n && !nd->kv->lose_sets; i++) {
		kv_put(nd->kv, keys[i], vals[i]);
	}
}

static void
op_get(void *arg, uint64_t id, const char *const *keys, size_t n, uint64_t timeout)
{
	struct node *nd = arg;

	strv_free(nd->ask_keys);
	nd->ask_keys = NULL;
	for (size_t i = 0; i < n; i++) {
		strv_push(&nd->ask_keys, keys[i]);
	}
	nd->ask_pending = true;
	nd->ask_id = id;
	nd->ask_timeout = timeout;
}

static void
op_add(void *arg, uint64_t id, const char *key, int64_t delta)
{
	struct node *nd = arg;
	const char *v = kv_value(nd->kv, key);
	char buf[32];
	int64_t now = (v ? strtoll(v, NULL, 10) : 0) + delta;

	snprintf(buf, sizeof(buf), "%lld", (long long)now);
	kv_put(nd->kv, key, buf);
	nd->kv->answers[nd - nd->kv->nodes] =
		(struct answer){.due = true, .id = id, .added = true, .value = now};
}

static int
op_master(void *arg, char **ret_addr, int *ret_port, bool *ret_agent_store)
{
	struct node *nd = arg;

	if (nd->kv->master_err < 0) {
		return nd->kv->master_err;
	}
	*ret_addr = xstrdup("node0.example");
	*ret_port = 29511;
	*ret_agent_store = true;
	return 0;
}

/* A store with names of its own, which holds every node's role from its
 * join (as etcd's i/<node>) and keeps nothing only torch's workers read. */
static char *
op_key(void *arg, enum rdzv_xkey k, int64_t round, int index)
{
	switch (k) {
	case RDZV_XKEY_ROLE_INFO:
		return xasprintf("i/node%d", index);
	case RDZV_XKEY_ASSIGNED_RANKS:
	case RDZV_XKEY_MASTER_ADDR:
	case RDZV_XKEY_MASTER_PORT:
	case RDZV_XKEY_COUNT:
		return NULL;
	case RDZV_XKEY_ROUND:
		return xasprintf("w/r/%lld", (long long)round);
	case RDZV_XKEY_LAST:
		return xasprintf("w/b/%lld", (long long)round);
	case RDZV_XKEY_ARRIVED:
		return xasprintf("b/%lld/%d", (long long)round, index);
	}
	return NULL;
}

static const struct rdzv_kv_ops ops_add = {op_set, op_get, op_add, op_master, NULL, false};
static const struct rdzv_kv_ops ops_keys = {op_set, op_get, NULL, op_master, NULL, false};
static const struct rdzv_kv_ops ops_named = {op_set, op_get, NULL, op_master, op_key, true};

static void
on_end(struct node *nd, int *count, int err, const char *msg)
{
	(*count)++;
	nd->err = err;
	free(nd->msg);
	nd->msg = msg ? xstrdup(msg) : NULL;
	if (err < 0) {
		assert_non_null(msg);
	}
}

static void
on_exchanged(void *arg, int err, const char *msg)
{
	struct node *nd = arg;

	on_end(nd, &nd->exchanged, err, msg);
}

static void
on_passed(void *arg, int err, const char *msg)
{
	struct node *nd = arg;

	on_end(nd, &nd->passed, err, msg);
}

static struct kv *
kv_new(bool counter)
{
	struct kv *kv = xcalloc(1, sizeof(*kv));

	kv->counter = counter;
	for (int i = 0; i < NODES; i++) {
		kv->nodes[i].kv = kv;
		rdzv_exchange_init(&kv->nodes[i].x, counter ? &ops_add : &ops_keys, &kv->nodes[i],
				   on_exchanged, on_passed, &kv->nodes[i]);
	}
	return kv;
}

static void
kv_free(struct kv *kv)
{
	for (int i = 0; i < NODES; i++) {
		rdzv_exchange_release(&kv->nodes[i].x);
		strv_free(kv->nodes[i].ask_keys);
		free(kv->nodes[i].msg);
	}
	strv_free(kv->keys);
	strv_free(kv->vals);
	free(kv);
}

/* Answer what can be answered (parked gets whose keys all exist, queued
 * adds) until nothing moves. Returns the answers delivered. */
static int
pump(struct kv *kv)
{
	int total = 0, moved;

	do {
		moved = 0;
		for (int i = 0; i < NODES; i++) {
			struct node *nd = &kv->nodes[i];
			struct answer a = kv->answers[i];
			struct rdzv_kv_value vals[NODES * 2];
			size_t n = nd->ask_pending ? strv_length(nd->ask_keys) : 0;
			bool all = nd->ask_pending;

			if (a.due) {
				kv->answers[i].due = false;
				rdzv_exchange_added(&nd->x, a.id, a.err, a.value);
				moved++;
				continue;
			}
			for (size_t k = 0; k < n && all; k++) {
				const char *v = kv_value(kv, nd->ask_keys[k]);

				all = v != NULL;
				vals[k] = (struct rdzv_kv_value){v, v ? strlen(v) : 0};
			}
			if (!all && !(nd->ask_pending && kv->get_err < 0)) {
				continue;
			}
			nd->ask_pending = false;
			nd->values_read += kv->get_err < 0 ? 0 : n;
			rdzv_exchange_got(&nd->x, nd->ask_id, kv->get_err, vals,
					  kv->get_err < 0 ? 0 : n);
			moved++;
		}
		total += moved;
	} while (moved > 0);
	return total;
}

/* Every parked get times out. */
static void
time_out(struct kv *kv)
{
	for (int i = 0; i < NODES; i++) {
		struct node *nd = &kv->nodes[i];

		if (nd->ask_pending) {
			nd->ask_pending = false;
			rdzv_exchange_got(&nd->x, nd->ask_id, -ETIMEDOUT, NULL, 0);
		}
	}
}

static void
start(struct kv *kv, int node, int world, const char *role, int lws, bool identical)
{
	rdzv_exchange_start(&kv->nodes[node].x, &(struct rdzv_exchange_round){
							.prefix = P,
							.round = 4,
							.rank = node,
							.world = world,
							.role = role,
							.local_world_size = lws,
							.identical = identical,
							.timeout_usec = 5 * USEC_PER_SEC,
						});
}

/* ---- rank exchange ------------------------------------------------------- */

static const struct {
	const char *name;
	int world;
	const char *roles[NODES];
	int lws[NODES];
	bool identical;
	/* what torch 2.x's agent reads back, per group rank */
	const char *assigned[NODES];
	size_t n_runs; /* of alike consecutive nodes, in every node's result */
} exchange_rows[] = {
	{"one node", 1, {"trainer"}, {4}, false, {"[0, 4, 0, 4]"}, 1},
	{"alike nodes",
	 3,
	 {"trainer", "trainer", "trainer"},
	 {2, 2, 2},
	 false,
	 {"[0, 6, 0, 6]", "[2, 6, 2, 6]", "[4, 6, 4, 6]"},
	 1},
	{"sizes and roles differ",
	 4,
	 {"trainer", "ps", "trainer", "ps"},
	 {4, 1, 2, 1},
	 false,
	 {"[0, 8, 0, 6]", "[4, 8, 0, 2]", "[5, 8, 4, 6]", "[7, 8, 1, 2]"},
	 4},
	{"roles in runs",
	 5,
	 {"trainer", "trainer", "ps", "ps", "trainer"},
	 {2, 2, 1, 1, 2},
	 false,
	 {"[0, 8, 0, 6]", "[2, 8, 2, 6]", "[4, 8, 0, 2]", "[5, 8, 1, 2]", "[6, 8, 4, 6]"},
	 3},
	/* A run ends where the role changes though the size does not, and where
	 * the size changes though the role does not. */
	{"same size, roles differ",
	 3,
	 {"trainer", "ps", "ps"},
	 {2, 2, 2},
	 false,
	 {"[0, 6, 0, 2]", "[2, 6, 0, 4]", "[4, 6, 2, 4]"},
	 2},
	{"same role, sizes differ",
	 3,
	 {"trainer", "trainer", "trainer"},
	 {2, 4, 4},
	 false,
	 {"[0, 10, 0, 10]", "[2, 10, 2, 10]", "[6, 10, 6, 10]"},
	 2},
	{"worker-identical", 3, {"trainer", "trainer", "trainer"}, {2, 2, 2}, true, {NULL}, 1},
};

/* The run of res holding group rank j; its runs cover the round. */
static const struct ranks_run *
run_of(const struct rdzv_result *res, int j)
{
	const struct ranks_run *found = NULL;
	size_t at = 0;

	assert_non_null(res->runs);
	for (size_t i = 0; i < res->n_runs; i++) {
		assert_true(res->runs[i].count >= 1);
		if (!found && (size_t)j < at + res->runs[i].count) {
			found = &res->runs[i];
		}
		at += res->runs[i].count;
	}
	assert_int_equal(at, res->group_world_size);
	assert_non_null(found);
	return found;
}

static void
check_exchange_row(size_t r)
{
	struct kv *kv = kv_new(true);
	int world = exchange_rows[r].world;

	/* Group rank 0 last: the others' gets park until it publishes. */
	for (int i = world - 1; i >= 0; i--) {
		start(kv, i, world, exchange_rows[r].roles[i], exchange_rows[r].lws[i],
		      exchange_rows[r].identical);
	}
	pump(kv);
	for (int i = 0; i < world; i++) {
		const struct node *nd = &kv->nodes[i];
		const struct rdzv_result *res = &nd->x.result;
		char key[96];

		assert_int_equal(nd->exchanged, 1);
		assert_int_equal(nd->err, 0);
		assert_int_equal(nd->x.step, RDZV_XSTEP_IDLE);
		assert_int_equal(res->round, 4);
		assert_int_equal(res->group_rank, i);
		assert_int_equal(res->group_world_size, world);
		assert_string_equal(res->master_addr, "node0.example");
		assert_int_equal(res->master_port, 29511);
		assert_true(res->use_agent_store);
		/* Group rank 0 compresses what it read; the others decode it. */
		assert_int_equal(res->n_runs, exchange_rows[r].n_runs);
		for (int j = 0; j < world; j++) {
			/* Worker-identical: each node takes itself as the model. */
			int from = exchange_rows[r].identical ? i : j;

			assert_string_equal(run_of(res, j)->role, exchange_rows[r].roles[from]);
			assert_int_equal(run_of(res, j)->local_world_size,
					 exchange_rows[r].lws[from]);
		}
		/* O(1) for a member, N for group rank 0. */
		assert_int_equal(nd->values_read,
				 i > 0 ? 1 : (exchange_rows[r].identical ? 0 : (size_t)world));
		snprintf(key, sizeof(key), P "torchelastic/assigned_ranks/%d", i);
		if (exchange_rows[r].identical) {
			assert_null(kv_value(kv, key));
		} else {
			assert_string_equal(kv_value(kv, key), exchange_rows[r].assigned[i]);
		}
	}
	assert_string_equal(kv_value(kv, P "MASTER_ADDR"), "node0.example");
	assert_string_equal(kv_value(kv, P "MASTER_PORT"), "29511");
	assert_int_equal(kv_count(kv, P "torchelastic/role_info/"),
			 exchange_rows[r].identical ? 0 : world);
	kv_free(kv);
}

static void
test_exchange_rows(void **state)
{
	for (size_t r = 0; r < ARRAY_SIZE(exchange_rows); r++) {
		print_message("exchange: %s\n", exchange_rows[r].name);
		check_exchange_row(r);
	}
}

static void
test_role_info_bytes(void **state)
{
	struct kv *kv = kv_new(true);

	start(kv, 1, 2, "trainer", 8, false);
	assert_string_equal(kv_value(kv, P "torchelastic/role_info/1"),
			    "{\"role\":\"trainer\",\"rank\":1,\"local_world_size\":8}");
	kv_free(kv);
}

/* ---- the exchange's failures --------------------------------------------- */

enum fault { F_TIMEOUT, F_BAD_INFO, F_BAD_ANSWER, F_EMPTY_ADDR, F_NO_PORT, F_STORE };

static const struct {
	const char *name;
	enum fault fault;
	int node; /* whose end is checked */
	int err;
	const char *msg;
} fail_rows[] = {
	{"rank 0 waits for a node that never comes", F_TIMEOUT, 0, -ETIMEDOUT,
	 "round 4 of the rendezvous: timed out waiting for the other nodes' role_info"},
	{"a member waits for a rank 0 that never answers", F_TIMEOUT, 1, -ETIMEDOUT,
	 "round 4 of the rendezvous: timed out waiting for group rank 0's rank assignment"},
	{"a role_info that is not JSON", F_BAD_INFO, 0, -EBADMSG,
	 "round 4 of the rendezvous: bad role_info from the store"},
	{"an answer that is not ours", F_BAD_ANSWER, 1, -EBADMSG,
	 "round 4 of the rendezvous: bad rank assignment from the store"},
	{"an empty MASTER_ADDR", F_EMPTY_ADDR, 1, -EBADMSG,
	 "round 4 of the rendezvous: bad rank assignment from the store"},
	{"no port for the workers", F_NO_PORT, 0, -EADDRNOTAVAIL,
	 "round 4 of the rendezvous: Cannot assign requested address while waiting for a "
	 "port for the workers' store"},
	{"the store fails a get", F_STORE, 1, -ECONNRESET,
	 "round 4 of the rendezvous: Connection reset by peer while waiting for group rank "
	 "0's rank assignment"},
};

static void
check_fail_row(size_t r)
{
	struct kv *kv = kv_new(true);
	enum fault f = fail_rows[r].fault;
	struct node *nd = &kv->nodes[fail_rows[r].node];

	kv->master_err = f == F_NO_PORT ? -EADDRNOTAVAIL : 0;
	kv->get_err = f == F_STORE ? -ECONNRESET : 0;
	if (f == F_BAD_INFO) {
		kv_put(kv, P "torchelastic/role_info/2", "{\"role\":");
	}
	if (f == F_BAD_ANSWER) {
		kv_put(kv, P "elasticd/round", "{\"master_addr\":\"a\",\"master_port\":0}");
	}
	if (f == F_EMPTY_ADDR) {
		kv_put(kv, P "elasticd/round",
		       "{\"master_addr\":\"\",\"master_port\":1,\"runs\":[[\"trainer\",1,3]]}");
	}
	/* F_TIMEOUT: node 2 never starts, rank 0 only when checked; the bad
	 * answer would be overwritten by rank 0's. */
	if ((fail_rows[r].node == 0 || f != F_TIMEOUT) && f != F_BAD_ANSWER && f != F_EMPTY_ADDR) {
		start(kv, 0, 3, "trainer", 1, false);
	}
	start(kv, 1, 3, "trainer", 1, false);
	if (f != F_TIMEOUT && f != F_BAD_INFO) {
		start(kv, 2, 3, "trainer", 1, false);
	}
	pump(kv);
	time_out(kv);
	assert_int_equal(nd->exchanged, 1);
	assert_int_equal(nd->err, fail_rows[r].err);
	assert_string_equal(nd->msg, fail_rows[r].msg);
	assert_null(nd->x.result.runs);
	assert_int_equal(nd->x.result.n_runs, 0);
	assert_int_equal(nd->x.step, RDZV_XSTEP_IDLE);
	kv_free(kv);
}

static void
test_exchange_failures(void **state)
{
	for (size_t r = 0; r < ARRAY_SIZE(fail_rows); r++) {
		print_message("exchange fails: %s\n", fail_rows[r].name);
		check_fail_row(r);
	}
}

/* An answer to a request given up (abandoned, or a new round started) is
 * not this round's. */
static void
test_late_answers_are_ignored(void **state)
{
	struct kv *kv = kv_new(true);
	struct node *nd = &kv->nodes[1];
	uint64_t old;

	start(kv, 1, 2, "trainer", 1, false);
	old = nd->ask_id;
	rdzv_exchange_abandon(&nd->x);
	rdzv_exchange_got(&nd->x, old, -ETIMEDOUT, NULL, 0);
	assert_int_equal(nd->exchanged, 0);

	start(kv, 1, 2, "trainer", 1, false);
	rdzv_exchange_got(&nd->x, old, -ETIMEDOUT, NULL, 0);
	assert_int_equal(nd->exchanged, 0);
	assert_int_equal(nd->x.step, RDZV_XSTEP_ANSWER);
	start(kv, 0, 2, "trainer", 1, false);
	pump(kv);
	assert_int_equal(nd->exchanged, 1);
	assert_int_equal(nd->err, 0);
	kv_free(kv);
}

/* ---- exit barrier -------------------------------------------------------- */

static void
exchange_all(struct kv *kv, int world)
{
	for (int i = 0; i < world; i++) {
		start(kv, i, world, "trainer", 1, false);
	}
	pump(kv);
}

static const struct {
	const char *name;
	bool counter;
	int world, arrive; /* nodes of the round, nodes that reach the barrier */
	int err;
} barrier_rows[] = {
	{"counter: everyone", true, 3, 3, 0},
	{"counter: alone", true, 1, 1, 0},
	{"counter: one missing", true, 3, 2, -ETIMEDOUT},
	{"arrival keys: everyone", false, 3, 3, 0},
	{"arrival keys: alone", false, 1, 1, 0},
	{"arrival keys: one missing", false, 3, 2, -ETIMEDOUT},
};

static void
check_barrier_row(size_t r)
{
	struct kv *kv = kv_new(barrier_rows[r].counter);
	int world = barrier_rows[r].world;
	char msg[128];

	exchange_all(kv, world);
	/* The last node first: group rank 0 (arrival keys) waits for it. */
	for (int i = world - 1, k = 0; k < barrier_rows[r].arrive; i--, k++) {
		assert_int_equal(rdzv_exchange_barrier(&kv->nodes[i].x, 30 * USEC_PER_SEC), 0);
	}
	pump(kv);
	time_out(kv);
	snprintf(msg, sizeof(msg),
		 "the exit barrier timed out after 30 s: not every node of round 4 finished");
	for (int i = world - 1, k = 0; k < barrier_rows[r].arrive; i--, k++) {
		struct node *nd = &kv->nodes[i];

		assert_int_equal(nd->passed, 1);
		assert_int_equal(nd->err, barrier_rows[r].err);
		if (barrier_rows[r].err < 0) {
			assert_string_equal(nd->msg, msg);
		}
	}
	assert_int_equal(kv_value(kv, P "torchelastic/agent/terminal_state/last_member") != NULL,
			 barrier_rows[r].err == 0);
	if (barrier_rows[r].counter) {
		assert_int_equal(
			strtol(kv_value(kv, P "torchelastic/agent/terminal_state/num_members"),
			       NULL, 10),
			barrier_rows[r].arrive);
	} else {
		assert_int_equal(kv_count(kv, P "torchelastic/agent/terminal_state/arrived/"),
				 barrier_rows[r].arrive);
	}
	kv_free(kv);
}

static void
test_barrier_rows(void **state)
{
	for (size_t r = 0; r < ARRAY_SIZE(barrier_rows); r++) {
		print_message("barrier: %s\n", barrier_rows[r].name);
		check_barrier_row(r);
	}
}

static void
test_barrier_needs_a_round(void **state)
{
	struct kv *kv = kv_new(true);

	assert_int_equal(rdzv_exchange_barrier(&kv->nodes[0].x, USEC_PER_SEC), -EINVAL);
	assert_int_equal(kv->sets, 0);
	assert_int_equal(kv->nodes[0].passed, 0);
	kv_free(kv);
}

/* A store that names its keys and holds the roles: the exchange sets
 * none, reads them by the store's names, and writes only what the store
 * keeps; the barrier counts arrival keys. */
static void
test_store_with_its_own_keys(void **state)
{
	struct kv *kv = xcalloc(1, sizeof(*kv));
	const char *roles[] = {"trainer", "ps", "trainer"};
	int lws[] = {4, 1, 2};

	for (int i = 0; i < 3; i++) {
		char key[32], val[96];

		kv->nodes[i].kv = kv;
		rdzv_exchange_init(&kv->nodes[i].x, &ops_named, &kv->nodes[i], on_exchanged,
				   on_passed, &kv->nodes[i]);
		snprintf(key, sizeof(key), "i/node%d", i);
		snprintf(val, sizeof(val), "{\"role\":\"%s\",\"local_world_size\":%d}", roles[i],
			 lws[i]);
		kv_put(kv, key, val);
	}
	for (int i = 2; i >= 0; i--) {
		start(kv, i, 3, roles[i], lws[i], false);
	}
	pump(kv);
	for (int i = 0; i < 3; i++) {
		const struct rdzv_result *res = &kv->nodes[i].x.result;

		assert_int_equal(kv->nodes[i].exchanged, 1);
		assert_int_equal(kv->nodes[i].err, 0);
		for (int j = 0; j < 3; j++) {
			assert_string_equal(run_of(res, j)->role, roles[j]);
			assert_int_equal(run_of(res, j)->local_world_size, lws[j]);
		}
	}
	/* One set (group rank 0's answer), the store's keys only. */
	assert_int_equal(kv->sets, 1);
	assert_non_null(kv_value(kv, "w/r/4"));
	assert_int_equal(strv_length(kv->keys), 4);
	for (int i = 0; i < 3; i++) {
		assert_int_equal(rdzv_exchange_barrier(&kv->nodes[i].x, USEC_PER_SEC), 0);
	}
	pump(kv);
	for (int i = 0; i < 3; i++) {
		assert_int_equal(kv->nodes[i].passed, 1);
		assert_int_equal(kv->nodes[i].err, 0);
	}
	assert_int_equal(kv_count(kv, "b/4/"), 3);
	assert_string_equal(kv_value(kv, "w/b/4"), "1");
	assert_int_equal(strv_length(kv->keys), 8);
	kv_free(kv);
}

/* The node that says the barrier is over passes only once the store holds
 * it: a set that never arrived leaves it waiting (a node that left at once
 * would strand the others). */
static void
test_last_member_waits_for_its_own_key(void **state)
{
	for (int counter = 0; counter < 2; counter++) {
		struct kv *kv = kv_new(counter);

		exchange_all(kv, 1);
		kv->lose_sets = true;
		assert_int_equal(rdzv_exchange_barrier(&kv->nodes[0].x, USEC_PER_SEC), 0);
		pump(kv);
		assert_int_equal(kv->nodes[0].passed, 0);
		time_out(kv);
		assert_int_equal(kv->nodes[0].passed, 1);
		assert_int_equal(kv->nodes[0].err, -ETIMEDOUT);
		kv_free(kv);
	}
}

static void
test_barrier_store_error(void **state)
{
	struct kv *kv = kv_new(false);

	exchange_all(kv, 2);
	kv->get_err = -ECONNRESET;
	assert_int_equal(rdzv_exchange_barrier(&kv->nodes[1].x, USEC_PER_SEC), 0);
	pump(kv);
	assert_int_equal(kv->nodes[1].passed, 1);
	assert_int_equal(kv->nodes[1].err, -ECONNRESET);
	assert_string_equal(kv->nodes[1].msg,
			    "the exit barrier of round 4: Connection reset by peer");
	kv_free(kv);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_exchange_rows),
		cmocka_unit_test(test_role_info_bytes),
		cmocka_unit_test(test_exchange_failures),
		cmocka_unit_test(test_late_answers_are_ignored),
		cmocka_unit_test(test_barrier_rows),
		cmocka_unit_test(test_barrier_needs_a_round),
		cmocka_unit_test(test_store_with_its_own_keys),
		cmocka_unit_test(test_last_member_waits_for_its_own_key),
		cmocka_unit_test(test_barrier_store_error),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
