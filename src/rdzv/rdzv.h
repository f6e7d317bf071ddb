/* rdzv.h — the agent's rendezvous step behind one interface, as torchrun's
 * RendezvousHandler: next_rendezvous, num_nodes_waiting, shutdown. Backends
 * fill in struct rdzv_backend_ops; this file picks one from the config.
 * Present backends: "static" (--node-rank and --master-addr/--master-port, no
 * shared state) and "c10d" (rdzv_c10d.c: torch's dynamic rendezvous on a
 * TCPStore one agent hosts; --standalone is c10d on localhost). */
#pragma once

#include <errno.h>
#include <stdbool.h>
#include <stddef.h>

#include "ranks.h"

#include "events.h"
#include "rdzv_dynamic.h"

struct config;
struct event_base;
struct rdzv;
struct rdzv_notice;
struct rdzv_snapshot;

/* What one completed round gives the agent. */
struct rdzv_result {
	int round;            /* rendezvous round, from 0 */
	int group_rank;       /* this agent's rank among the nodes of the round */
	int group_world_size; /* number of nodes in the round */
	/* The nodes by group rank, run-length (ranks.h): the counts sum to
	 * group_world_size. Non-NULL in a result, O(1) for a job of alike nodes. */
	struct ranks_run *runs;
	size_t n_runs;        /* entries of runs, >= 1 */
	char *master_addr;    /* MASTER_ADDR for the workers */
	int master_port;      /* MASTER_PORT for the workers */
	bool use_agent_store; /* TORCHELASTIC_USE_AGENT_STORE */
};

/* Completion of rdzv_next: err 0 and res valid for the duration of the call,
 * or err -errno with a human message. Runs from the event loop, never inside
 * rdzv_next itself. */
struct rdzv_callbacks {
	void (*done)(int err, const struct rdzv_result *res, const char *errmsg, void *arg);
	void *arg;
	/* Where the backend records its RdzvEvents (events.h, borrowed; NULL
	 * records nothing). The agent records next_rendezvous (entry, joined,
	 * failed) and create_handler (failed) for every backend, named
	 * "rdzv_<ops->name>.c:<method>"; a backend records its own
	 * steps, e.g. events_record_rdzv(r->events, "rdzv_c10d.c:_add_to_participants",
	 * NODE_STATE_RUNNING, -1, "The node '%s' added itself ...", ...). */
	struct events *events;

	/* The callbacks below are optional (NULL: not told) and run from the loop,
	 * never inside the rdzv_* call that caused them. */

	/* While a round runs (after done): nodes wait to join (n > 0, torchrun's
	 * num_nodes_waiting() > 0) or the round lost a member (n == 0); the
	 * agent restarts its workers and calls rdzv_next without spending a
	 * restart. Told once per round. */
	void (*nodes_waiting)(int n, const char *why, void *arg);
	/* While a round runs: the rendezvous cannot go on (its store is gone, or
	 * another node closed it because its workers failed for good). The agent
	 * stops its workers and exits. Told once. */
	void (*failed)(int err, const char *errmsg, void *arg);
	/* Completion of rdzv_exit_barrier and of rdzv_finish: err 0, or -errno
	 * with a message (the agent logs it and goes on). */
	void (*finished)(int err, const char *errmsg, void *arg);
	/* A line worth logging while the rendezvous waits or changes state (who
	 * joined, how many are awaited, NodeState transitions). */
	void (*progress)(const char *msg, void *arg);
	/* A line worth a warning: something the job goes on without, e.g. a
	 * store the backend hosts refused or dropped a peer (at a bounded
	 * rate). NULL: told to progress instead. */
	void (*warn)(const char *msg, void *arg);
};

/* rdzv_next's err when this node was a spare (redundancy list) and the
 * rendezvous closed: not a failure (torch 2.x RendezvousGracefulExitError). */
#define RDZV_GRACEFUL_EXIT (-ESHUTDOWN)

struct rdzv_backend_ops {
	const char *name;
	/* Validate the settings and set up r->backend. Returns 0 or -EINVAL with
	 * *reterr (malloc'd) naming the flag. */
	int (*init)(struct rdzv *r, char **reterr);
	/* Start the next round; the result arrives through cb. Returns 0 or -errno. */
	int (*next)(struct rdzv *r);
	/* Nodes waiting to join a running round (torchrun's num_nodes_waiting). */
	int (*num_nodes_waiting)(struct rdzv *r);
	/* Close the rendezvous for good (job finished). */
	void (*shutdown)(struct rdzv *r);
	void (*free)(struct rdzv *r);
	/* Optional. The exit barrier after this node's workers succeeded; cb.finished
	 * reports it. NULL: passes at once. Returns 0 or -errno. */
	int (*exit_barrier)(struct rdzv *r);
	/* Optional. Leave for good: close the rendezvous when close (job done or
	 * failed for good), else take this node out of every list of the state
	 * and leave the rendezvous open (stopped by a signal, rdzv_leave); then
	 * let a store host's clients finish; cb.finished reports it. NULL:
	 * shutdown() when close, then finished at once. Returns 0 or -errno. */
	int (*finish)(struct rdzv *r, bool close);
	/* Optional. A deep copy of the backend's local copy of the state into
	 * *ret (rdzv_snapshot.h), read-only: no I/O waited for, nothing changes
	 * (c10d: a copy known stale, the round learnt from an assignment key, is
	 * refreshed in the background for the next call). NULL: the
	 * backend has no shared state (static). Returns 0 or -errno. */
	int (*snapshot)(struct rdzv *r, struct rdzv_snapshot *ret);
	/* Optional. Whether the shared state is out of reach while this node is
	 * in a round (keep-alives failing): true with when it began
	 * (now_usec() clock) and the last error (borrowed until the next loop
	 * turn). NULL: never (static). */
	bool (*degraded)(struct rdzv *r, uint64_t *ret_since_usec, const char **ret_why);
	/* Optional. Run op (RDZV_OP_READMIT) now on the shared state, its
	 * deadline the close timeout; its end goes to rdzv_op_done. Returns 0,
	 * -EBUSY (another operation is under way: try again later) or
	 * -ENOTCONN (not connected yet, or finishing). NULL: -EOPNOTSUPP. */
	int (*run_op)(struct rdzv *r, enum rdzv_op op);
	/* Optional. Whether this node coordinates the rendezvous (c10d: it
	 * hosts the store, or holds the coordinator lease of a store nobody
	 * hosts). NULL: never. */
	bool (*coordinates)(struct rdzv *r);
	/* Optional. Whether this node hosts the store the others connect to
	 * (c10d). NULL: never. */
	bool (*hosts_store)(struct rdzv *r);
};

struct rdzv {
	const struct rdzv_backend_ops *ops;
	struct event_base *base;
	const struct config *cfg; /* borrowed */
	int local_world_size;
	/* rdzv_new_observer's: reads and writes the shared state, never joins,
	 * hosts, leases or coordinates; and, during init only, the handle the
	 * node left with (borrowed, may be NULL). */
	bool observer;
	struct rdzv *observed;
	struct rdzv_callbacks cb;
	struct events *events;       /* cb.events: where RdzvEvents go, may be NULL */
	void *backend;               /* the backend's own state */
	struct rdzv_notice *notices; /* rdzv_tell's, not delivered yet */
	/* rdzv_leave under way: its completion and its deadline. */
	void (*left)(void *arg);
	void *left_arg;
	struct event *leave_timer;
	/* rdzv_set_close_record's, written with the closing (ctx.close_record). */
	struct rdzv_close_record *close_record;
	/* rdzv_keep_closed_by's: who closed it, as the state said. */
	struct rdzv_close_record *closed_by;
	/* rdzv_set_quarantine's, written with this node's next change to the
	 * state (ctx.quarantine); NULL: none. */
	struct rdzv_quarantine *quarantine;
	/* rdzv_readmit's or rdzv_report_failure's (one at a time): the host
	 * (NULL: a read only) or the report, the completion, and the event
	 * that reports it from a fresh loop turn. */
	char *readmit_host;
	struct rdzv_failure *failure_report;
	void (*readmit_done)(void *arg, int err, const char *host);
	void *readmit_arg;
	bool readmit_active;
	int readmit_err;
	struct event *readmit_ev;
};

/* Create the rendezvous the config asks for. local_world_size is this node's
 * resolved --nproc-per-node. Returns NULL with *reterr (malloc'd) when the
 * backend is unknown, not available yet, or its settings are invalid (the
 * agent reports it and exits 2). */
struct rdzv *rdzv_new(struct event_base *base, const struct config *cfg, int local_world_size,
		      const struct rdzv_callbacks *cb, char **reterr);
/* As rdzv_new, for a node that is out of the job (quarantined) but watches
 * its shared state: only rdzv_readmit, rdzv_snapshot and rdzv_free are for
 * it (rdzv_next, _exit_barrier, _finish, _leave and _report_failure return
 * -EINVAL, rdzv_shutdown does nothing). It is no member: c10d never hosts a store (it connects to
 * the one left hosts, the handle the node left the job with, borrowed for the call, may be NULL;
 * else to the endpoint, even with is_host=true), etcd takes no lease and writes no a/ key, so it
 * never coordinates and the others never count it. */
struct rdzv *rdzv_new_observer(struct event_base *base, const struct config *cfg,
			       int local_world_size, const struct rdzv_callbacks *cb,
			       struct rdzv *left, char **reterr);

/* Whether the agent's environment holds TORCH_ELASTIC_WORKER_IDENTICAL=1
 * (exactly "1", as torch main's agent/server/api.py _assign_worker_ranks):
 * every node is taken to run this node's role and local world size, and the
 * backends skip the store's rank exchange (role_info, assigned_ranks). */
bool rdzv_worker_identical(void);

/* Ask for the next round; cb.done reports it. Returns 0 or -errno (-EINVAL
 * on an observer, rdzv_new_observer). */
int rdzv_next(struct rdzv *r);
int rdzv_num_nodes_waiting(struct rdzv *r);
void rdzv_shutdown(struct rdzv *r);
/* torch 2.x's exit barrier (agent/server/api.py _exit_barrier: every node adds
 * itself to "torchelastic/agent/terminal_state/num_members" of the round store
 * and waits for "last_member"); cb.finished reports it, at once for backends
 * without one. Returns 0 or -errno. */
int rdzv_exit_barrier(struct rdzv *r);
/* Leave the rendezvous (see rdzv_backend_ops.finish); cb.finished reports it.
 * Returns 0 or -errno. */
int rdzv_finish(struct rdzv *r, bool close);
/* Leave for a graceful stop (a signal), without closing the rendezvous
 * (torch's shutdown() would close it for everyone): this node goes out of the
 * participants, the wait list and the redundancy list, so that the others
 * re-form at once and a node started in its place joins at once; its liveness
 * goes too (etcd: the lease is revoked). The backend's finish with close
 * false, whose cb.finished becomes done(arg): it runs once, from the loop,
 * when the node is out, could not get out, or timeout_usec passed, whichever
 * comes first. Then only rdzv_free is left to call. Returns 0, -EOPNOTSUPP
 * (nothing to leave: static) or -EALREADY; done does not run then. */
int rdzv_leave(struct rdzv *r, uint64_t timeout_usec, void (*done)(void *arg), void *arg);
void rdzv_free(struct rdzv *r);

/* What this node knows of the whole job's membership: its sync loop's last
 * copy of the rendezvous state, with its age (no store read: the copy
 * follows every change waiting nodes must hear of). Returns 0 with *ret
 * (rdzv_snapshot_release), or -EOPNOTSUPP for a backend without shared
 * state (static). */
int rdzv_snapshot(struct rdzv *r, struct rdzv_snapshot *ret);

/* Whether the rendezvous is degraded: its store (c10d) or every etcd member
 * (etcd) out of reach while this node's workers run, keep-alives failing.
 * True with *ret_since_usec (now_usec() clock) and *ret_why (the last error,
 * borrowed until the next loop turn); false for a backend without shared
 * state. Accepts NULL r. */
bool rdzv_degraded(struct rdzv *r, uint64_t *ret_since_usec, const char **ret_why);

/* Whether this node coordinates the rendezvous: admits the others and
 * writes their assignments (c10d: the store host, or the holder of the
 * coordinator lease on a store nobody hosts). False for the other backends.
 * Accepts NULL r. */
bool rdzv_coordinates(struct rdzv *r);

/* Whether this agent serves the rendezvous store the other nodes connect to
 * (c10d: it bound the endpoint's port, as its host or with is_host=true):
 * the job's store and its admissions leave with it. False for the other
 * backends. Accepts NULL r. */
bool rdzv_hosts_store(struct rdzv *r);

/* Before rdzv_finish(r, true) after this node's workers failed for good:
 * the failure the closing records in the shared state (dynamic backends),
 * so that the other nodes can name it. exitcode < 0 is a signal (-signo).
 * group_rank, rank, local_rank, pid: -1 when unknown. */
void rdzv_set_close_record(struct rdzv *r, int group_rank, int rank, int local_rank, int pid,
			   int exitcode);

/* Before rdzv_leave when this node is quarantined (--quarantine): its
 * host's entry in the shared state (rdzv_state.h), written with the leave
 * (dynamic backends: every agent's nodes then lists it, and no other node
 * of this host joins before until_wall, wall clock usec); count: its
 * quarantines so far. */
void rdzv_set_quarantine(struct rdzv *r, int64_t until_wall, int count);
/* The readmit verb on any agent (elasticd-ctl(7)): end the quarantine of
 * host (the quarantined node's --local-addr or FQDN, or its descriptor) in
 * the shared state, a compare-and-set of RDZV_OP_READMIT (its entry's until
 * becomes now; the entry and its count stay). host NULL only reads the
 * state (rdzv_snapshot then shows it fresh): the quarantined agent watching
 * its own entry. done(arg, err, host) runs once from a fresh loop turn (never
 * once r is freed: rdzv_free drops the operation silently): err
 * 0 (written, or nothing left to readmit), or -errno (-ETIMEDOUT: the close
 * timeout passed; -ECONNABORTED: the store failed); host is borrowed for
 * the call. Returns 0, -EOPNOTSUPP (no shared state: static), -EBUSY
 * (another operation under way, a join or a keep-alive: try again shortly)
 * or -ENOTCONN (not connected yet, or leaving); done does not run then. */
int rdzv_readmit(struct rdzv *r, const char *host,
		 void (*done)(void *arg, int err, const char *host), void *arg);
/* --quarantine's root cause across nodes: record this node's failure
 * report "f <node> <round> <usec>" in the shared state (a compare-and-set
 * of RDZV_OP_REPORT_FAILURE; rdzv_state_report_failure: the reports of
 * earlier rounds go). round: the round the failed attempt ran in; usec: the
 * wall clock of its first worker failure. done and the returns as
 * rdzv_readmit's (host NULL); rdzv_snapshot then shows the state as
 * written. */
int rdzv_report_failure(struct rdzv *r, int64_t round, int64_t usec,
			void (*done)(void *arg, int err, const char *host), void *arg);
/* Whether r's backend keeps a shared state that rdzv_readmit can change
 * (c10d, etcd; not static). */
bool rdzv_shared_state(const struct rdzv *r);
/* For backends: the end of an operation run_op started (err and action as
 * rdzv_sync_done_fn's). */
void rdzv_op_done(struct rdzv *r, int err, enum rdzv_action a);

/* After cb.failed: the failure of the node that closed the rendezvous, as
 * it recorded it, or NULL (closed without one, or not closed). Valid until
 * rdzv_free. */
const struct rdzv_close_record *rdzv_closed_by(const struct rdzv *r);

/* Release the members of a result filled by a backend: runs and master_addr
 * (the runs' role strings belong to whoever filled it). Zeroes *res. */
void rdzv_result_release(struct rdzv_result *res);

/* Backends (rdzv_<name>.c). */
extern const struct rdzv_backend_ops rdzv_static_ops;
extern const struct rdzv_backend_ops rdzv_c10d_ops;
/* "etcd" (rdzv_etcd.c): the same dynamic rendezvous with its state in an etcd
 * v3 cluster (--rdzv-endpoint host1:2379,host2:2379,...). */
extern const struct rdzv_backend_ops rdzv_etcd_ops;

/* ---- for backends ---------------------------------------------------------- */

/* Which callback rdzv_tell calls. */
enum rdzv_tell {
	RDZV_TELL_DONE,          /* cb.done(err, NULL, msg): rdzv_next failed */
	RDZV_TELL_FINISHED,      /* cb.finished(err, msg) */
	RDZV_TELL_FAILED,        /* cb.failed(err, msg) */
	RDZV_TELL_NODES_WAITING, /* cb.nodes_waiting(n, msg) */
};

/* Tell the agent from a fresh loop turn, never inside a store callback chain
 * that its reaction (rdzv_next, rdzv_free) could cut short. err: 0 or
 * -errno; n: RDZV_TELL_NODES_WAITING's count; msg (copied, may be NULL).
 * Optional callbacks that are NULL are skipped. rdzv_free drops what is not
 * delivered yet. */
void rdzv_tell(struct rdzv *r, enum rdzv_tell what, int err, int n, const char *msg);

/* Keep a copy of st's closing record (if any) for rdzv_closed_by: call it
 * before telling RDZV_TELL_FAILED for a closed state. */
void rdzv_keep_closed_by(struct rdzv *r, const struct rdzv_state *st);

/* A join ended with RDZV_ACTION_ERROR_CLOSED on st: when st has a closing
 * record, keep it (rdzv_keep_closed_by) and name it in *msg (malloc'd,
 * replaced). */
void rdzv_join_closed(struct rdzv *r, const struct rdzv_state *st, char **msg);

/* A line for cb.progress (printf format); nothing when it is NULL. */
void rdzv_progress(struct rdzv *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* A line for cb.warn (printf format); cb.progress when that is NULL. */
void rdzv_warn(struct rdzv *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* A tcpstore_server_notice_fn for a store a backend hosts: arg is the
 * struct rdzv; the line goes to rdzv_warn. */
void rdzv_store_notice(const char *msg, void *arg);

/* The one place a dynamic backend's NodeState changes: the RdzvEvent of
 * rdzv_record_step (except for fn "next_rendezvous", whose events the agent
 * records for every backend) and a progress line when *cur changes to s. */
void rdzv_set_node_state(struct rdzv *r, enum node_state *cur, enum node_state s, const char *fn,
			 const char *msg);

/* An RdzvEvent named "rdzv_<backend>.c:<fn>" with node_state s, no rank
 * (torch sets it on next_rendezvous's "has joined" only) and the message in
 * printf format, as torch's DynamicRendezvousHandler._record; nothing when
 * events are off. Leaves the backend's NodeState alone: torch's steps say
 * RUNNING whatever the node did before. */
void rdzv_record_step(struct rdzv *r, enum node_state s, const char *fn, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));

/* The RdzvEvents of a mutating action a that node (its descriptor string)
 * applied to its copy of the state of round `round`, with torch's names and
 * messages: ADD_TO_* also record the keep-alive they carry and, when
 * `completed` (the step made the round complete), _mark_rendezvous_complete,
 * as torch's _add_to_participants does; MARK_* say SUCCEEDED, the rest
 * RUNNING. Non-mutating actions record nothing. */
void rdzv_record_action(struct rdzv *r, const char *node, int64_t round, enum rdzv_action a,
			bool completed);

/* The coordinator's admission into st (its local copy): with_wait_list, the
 * state's wait list first (a round that opens takes it), then the joiners'
 * requests in the order they came, through rdzv_admit. Records
 * _mark_rendezvous_complete (by ctx's node) when it completes the round.
 * Returns how many nodes it admitted; *notable as rdzv_admit's (only ever
 * set to true). */
size_t rdzv_admit_requests(struct rdzv *r, struct rdzv_state *st, bool with_wait_list,
			   const struct rdzv_node *joiners, size_t n_joiners,
			   const struct rdzv_ctx *ctx, bool *notable);

/* For a JOIN that waits for the coordinator to admit it: when st shows node
 * admitted (a participant, or on the wait list), record the steps the
 * coordinator took for it as rdzv_record_action does, and return true (call
 * it no more for this JOIN); else false. */
bool rdzv_record_admission(struct rdzv *r, const struct rdzv_state *st,
			   const struct rdzv_node *node);

/* The RdzvEvent "sync" of a write of the state by node: synced, or lost to
 * another writer (stale state), with torch's _DistributedRendezvousOpExecutor
 * messages. */
void rdzv_record_sync(struct rdzv *r, const char *node, bool synced);

/* --rdzv-conf key as seconds > 0 (def when absent) in microseconds into
 * *ret_usec. Returns 0, or -EINVAL with *reterr (malloc'd) naming the key. */
int rdzv_conf_seconds(const struct config *cfg, const char *key, double def, uint64_t *ret_usec,
		      char **reterr);

/* A TCP port free on this host now (bound on the wildcard address and
 * closed, as torch's _get_free_port), or -errno. */
int rdzv_free_port(void);

/* The --rdzv-conf keys every dynamic backend reads: join_timeout (600 s),
 * last_call_timeout (30 s), close_timeout (30 s), keep_alive_interval (5 s),
 * keep_alive_max_attempt (3), exit_barrier_timeout (300 s), as torch 2.x's
 * RendezvousParameters; min and max nodes from --nnodes. Times in
 * microseconds. Returns 0, or -EINVAL with *reterr (malloc'd) naming the key. */
int rdzv_dynamic_conf(const struct config *cfg, struct rdzv_settings *settings,
		      uint64_t *ret_join_timeout, uint64_t *ret_close_timeout,
		      uint64_t *ret_barrier_timeout, char **reterr);

/* This node's rank key from --rdzv-conf rank_key (elasticd's; torch has
 * none): "env:VAR" (the variable's value), "file:PATH" (the file's content
 * less surrounding white space, at most 4 KiB read) or "hostname"
 * (gethostname). *ret_key malloc'd, or NULL when rank_key is not set.
 * Returns 0, or -EINVAL with *reterr (malloc'd) naming rank_key when the
 * source is malformed, missing or empty, or the key is not rdzv_key_ok. */
int rdzv_rank_key(const struct config *cfg, char **ret_key, char **reterr);

/* This handler's node descriptor: --local-addr (else the FQDN), the pid and a
 * process-wide counter (torch's _NodeDescGenerator), and the rank key
 * (rdzv_rank_key) after '@'. Returns 0 with *ret (rdzv_node_release), or
 * -EINVAL with *reterr (malloc'd). */
int rdzv_node_self(const struct config *cfg, struct rdzv_node *ret, char **reterr);

/* The decision context of node with an operation deadline (monotonic usec),
 * with both clocks read now. */
struct rdzv_ctx rdzv_ctx_now(const struct rdzv_settings *settings, const struct rdzv_node *node,
			     uint64_t op_deadline);
