/* rdzv_exchange.h — what the nodes of a completed round do through the
 * rendezvous store, written once for any store, as torch 2.x's agent does
 * it (agent/server/api.py _assign_worker_ranks and _exit_barrier,
 * rendezvous/api.py RendezvousStoreInfo.build, distributed/elastic/utils/
 * store.py barrier; reference torchelastic-agent.md, rank assignment): the
 * rank exchange and the exit barrier, over a small asynchronous key-value
 * interface (struct rdzv_kv_ops). rdzv_c10d_kv.c implements it on the
 * TCPStore, rdzv_etcd_kv.c on etcd; tests/unit/test_rdzv_exchange.c drives
 * it with an in-process store.
 *
 * Keys are torch's, under the round's prefix P (c10d:
 * "/torch.rendezvous.<id>.<round>/"), unless the store names its own
 * (rdzv_kv_ops.key: etcd keeps its w/r/<round>, w/b/<round> and
 * b/<round>/<rank>, and has no use for the keys only torch's workers read):
 *
 * rank exchange: every node sets P"torchelastic/role_info/<group rank>" =
 *   {"role", "rank", "local_world_size"}; group rank 0 waits for all of them,
 *   picks MASTER_ADDR:MASTER_PORT (ops->master) and sets, in one request,
 *   P"torchelastic/assigned_ranks/<i>" = [base_global_rank, global_world_size,
 *   base_role_rank, role_world_size] for every group rank i (torch 2.x),
 *   P"MASTER_ADDR", P"MASTER_PORT" and P"elasticd/round" = {"master_addr",
 *   "master_port", "use_agent_store", "runs"} (rdzv_runs.h). The other nodes
 *   wait for P"elasticd/round" alone: O(1) bytes per node for a job whose
 *   nodes are alike; only group rank 0 reads O(N). Worker-identical
 *   (TORCH_ELASTIC_WORKER_IDENTICAL=1, torch main): no role_info and no
 *   assigned_ranks; every node takes itself as the model of all.
 *
 * exit barrier: with a counter (ops->add, TCPStore's ADD: torch's
 *   store_util.barrier) every node adds 1 to
 *   P"torchelastic/agent/terminal_state/num_members", the one that brings it
 *   to the world size sets P"torchelastic/agent/terminal_state/last_member",
 *   and the others wait for that key. Without one (a store with no counter)
 *   every node sets P"torchelastic/agent/terminal_state/arrived/<group
 *   rank>", group rank 0 waits for all of them and sets last_member, the
 *   others wait for it. The node that sets last_member waits for it too: a
 *   node passes once the store holds it, so that none leaves with the key
 *   unsent (a set has no answer). */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "rdzv.h"

/* One value a get brought back (borrowed for the call). */
struct rdzv_kv_value {
	const void *data;
	size_t len;
};

/* The keys of the exchange and the barrier (torch's names in the file
 * comment). */
enum rdzv_xkey {
	RDZV_XKEY_ROLE_INFO,      /* index: a group rank */
	RDZV_XKEY_ASSIGNED_RANKS, /* index: a group rank */
	RDZV_XKEY_MASTER_ADDR,
	RDZV_XKEY_MASTER_PORT,
	RDZV_XKEY_ROUND,   /* elasticd/round: group rank 0's answer */
	RDZV_XKEY_COUNT,   /* the barrier's counter (num_members) */
	RDZV_XKEY_LAST,    /* last_member */
	RDZV_XKEY_ARRIVED, /* index: a group rank */
};

struct rdzv_kv_ops {
	/* Set keys[i] = vals[i] (NUL-terminated) for i < n, in one request
	 * where the store can, without an answer: a failure shows as a get
	 * that times out or fails. The arrays are borrowed for the call.
	 * Required. */
	void (*set)(void *kv, const char *const *keys, const char *const *vals, size_t n);
	/* Wait until every one of keys[0..n) exists (timeout_usec at most),
	 * then get their values; answer, never before returning, with
	 * rdzv_exchange_got(id, ...):
	 * -ETIMEDOUT, -errno, or the n values in keys' order. The keys are
	 * borrowed for the call. Required. */
	void (*get)(void *kv, uint64_t id, const char *const *keys, size_t n,
		    uint64_t timeout_usec);
	/* Optional: add delta to the counter at key (created at 0); answer,
	 * never before returning, with rdzv_exchange_added(id, ...). NULL: the
	 * barrier counts arrival keys. */
	void (*add)(void *kv, uint64_t id, const char *key, int64_t delta);
	/* Group rank 0: where the workers meet, *ret_addr (malloc'd) and
	 * *ret_port (MASTER_ADDR, MASTER_PORT), and whether that is the agent's
	 * own store for them (TORCHELASTIC_USE_AGENT_STORE). Returns 0 or
	 * -errno (no port). Required. */
	int (*master)(void *kv, char **ret_addr, int *ret_port, bool *ret_agent_store);
	/* Optional: the store's name (malloc'd) for key k of round (index: a
	 * group rank where k names one), or NULL for a key the store keeps
	 * not (the exchange leaves it unset; never for the keys waited on:
	 * role_info, elasticd/round, the barrier's). NULL: torch's names
	 * under the round's prefix. */
	char *(*key)(void *kv, enum rdzv_xkey k, int64_t round, int index);
	/* Every node's role_info is in the store, under key(ROLE_INFO), from
	 * before its round completed (etcd: the join request's i/<node>): the
	 * exchange sets none, group rank 0 only reads them. */
	bool roles_held;
};

/* The end of the rank exchange (err 0: x->result holds the round) or of the
 * exit barrier (err 0: every node of the round arrived): -ETIMEDOUT,
 * -EBADMSG (a value that does not parse) or the store's -errno, with msg a
 * line for the operator ("round 3 of the rendezvous: timed out waiting for
 * the other nodes' role_info"). arg: the one given to rdzv_exchange_init. */
typedef void (*rdzv_exchange_done_fn)(void *arg, int err, const char *msg);

/* A round, as the rendezvous completed it for this node. */
struct rdzv_exchange_round {
	const char *prefix;   /* P, copied */
	int64_t round;        /* for the messages and x->result */
	int rank;             /* this node's group rank */
	int world;            /* the number of nodes */
	const char *role;     /* this node's --role (copied) */
	int local_world_size; /* this node's workers */
	bool identical;       /* rdzv_worker_identical() */
	uint64_t timeout_usec;
};

enum rdzv_exchange_step {
	RDZV_XSTEP_IDLE,
	RDZV_XSTEP_INFOS,    /* group rank 0 waits for every role_info */
	RDZV_XSTEP_ANSWER,   /* the others wait for elasticd/round */
	RDZV_XSTEP_COUNT,    /* the barrier's add is out */
	RDZV_XSTEP_ARRIVALS, /* group rank 0 waits for every arrival */
	RDZV_XSTEP_LAST,     /* waiting for last_member */
};

struct rdzv_exchange {
	const struct rdzv_kv_ops *ops;
	void *kv;
	void *arg;
	rdzv_exchange_done_fn exchanged;
	rdzv_exchange_done_fn passed;

	enum rdzv_exchange_step step;
	uint64_t id; /* of the request out; answers with another are late */
	char *prefix;
	char *role;
	int64_t round;
	int rank;
	int world;
	int local_world_size;
	bool identical;
	uint64_t barrier_timeout; /* usec, of the barrier under way */

	/* The round the exchange ended with (the backend hands it to the
	 * agent); result.runs' roles point into roles (one string per run). */
	struct rdzv_result result;
	char **roles;
};

/* Set up x over the store (ops, kv: their argument); exchanged and passed
 * report the ends of rdzv_exchange_start and rdzv_exchange_barrier, with
 * arg. Nothing is sent. */
void rdzv_exchange_init(struct rdzv_exchange *x, const struct rdzv_kv_ops *ops, void *kv,
			rdzv_exchange_done_fn exchanged, rdzv_exchange_done_fn passed, void *arg);

/* Stop what is under way (its late answers are ignored) and free x's
 * members. */
void rdzv_exchange_release(struct rdzv_exchange *x);

/* Start the rank exchange of round rd (what is under way is abandoned).
 * exchanged reports its end; for group rank 0 of a worker-identical round
 * (no store request: ops->master, then the answer is set) before this
 * returns. */
void rdzv_exchange_start(struct rdzv_exchange *x, const struct rdzv_exchange_round *rd);

/* Start the exit barrier of the round of the last rdzv_exchange_start,
 * whatever its outcome (timeout_usec for each wait; an exchange under way is
 * abandoned); passed reports its end, never before this returns. Returns
 * -EINVAL when no exchange was ever started (nothing is sent, passed is not
 * called). */
int rdzv_exchange_barrier(struct rdzv_exchange *x, uint64_t timeout_usec);

/* Stop waiting: the answer out is ignored, nothing is reported. */
void rdzv_exchange_abandon(struct rdzv_exchange *x);

/* The store's answer to get request id: err 0 with vals[0..n), or -errno
 * (n 0). An id other than the request out's is ignored. */
void rdzv_exchange_got(struct rdzv_exchange *x, uint64_t id, int err,
		       const struct rdzv_kv_value *vals, size_t n);

/* The store's answer to add request id: err 0 with the counter's new value,
 * or -errno. An id other than the request out's is ignored. */
void rdzv_exchange_added(struct rdzv_exchange *x, uint64_t id, int err, int64_t value);
