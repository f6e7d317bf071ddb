/* rdzv_snapshot.h — a read-only copy of what one agent knows of the whole
 * job's rendezvous (the `nodes` control handler): the state its sync loop
 * last read from (or wrote to) the store, when that was, and how its backend
 * tells liveness. Pure: no I/O, no clock (the caller passes "now"). */
#pragma once

#include <stdint.h>

#include "rdzv_state.h"

struct json_t;

/* How a backend knows that a node is alive. */
enum rdzv_liveness {
	/* torch's heartbeats in the state (c10d: the store host folds each
	 * node's keep-alive key into it once per keep-alive interval). */
	RDZV_LIVENESS_HEARTBEAT,
	/* A lease per node (etcd): alive while the lease lasts; no time. */
	RDZV_LIVENESS_LEASE,
};

struct rdzv_snapshot {
	const char *backend;  /* "c10d", "etcd" (static storage) */
	char *self;           /* this node's descriptor, owned */
	struct rdzv_state st; /* the local copy, owned (deep copy) */
	/* Wall clock usec of the copy's last read or write, -1: never. */
	int64_t read_usec;
	enum rdzv_liveness liveness;
	/* HEARTBEAT: a heartbeat older than this is dead (keep_alive_interval *
	 * keep_alive_max_attempt), usec. */
	uint64_t heartbeat_timeout_usec;
	/* LEASE: the nodes known to have lost their lease, owned, NULL-terminated
	 * (NULL: none). */
	char **dead;
	/* The node that admits the others as this node knows it (c10d: the
	 * store host, or the holder of the coordinator lease), owned; NULL: none
	 * or not known here. */
	char *coordinator;
};

/* Free every member and zero *s. Accepts a zeroed snapshot. */
void rdzv_snapshot_release(struct rdzv_snapshot *s);

/* The JSON object of the `nodes` handler (elasticd-ctl(7)), a new reference:
 * backend, node (self), round, complete, closed, state_age_s (now - read_usec,
 * null when never read), liveness ("heartbeat" or "lease"), coordinator
 * (null when not known), participants
 * (with group_rank, in rank order), wait_list, spares (the redundancy list),
 * quarantined (the hosts --quarantine took out, as the state records them:
 * {node, host, until, remaining_s, count, active}); each member {node,
 * addr, pid, heartbeat_age_s (null without one, always null for leases),
 * alive}. now_usec is the wall clock in usec. */
struct json_t *rdzv_snapshot_json(const struct rdzv_snapshot *s, int64_t now_usec);
