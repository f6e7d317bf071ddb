/* rdzv_c10d.h — private to the c10d backend: its state, shared by
 * rdzv_c10d.c (the store under the operation loop, admission, the gen watch,
 * connections, set-up), rdzv_c10d_round.c (next_rendezvous, keep-alive,
 * the exit barrier and finishing) and rdzv_c10d_kv.c (the store of the rank
 * exchange and the exit barrier, rdzv_exchange.h). */
#pragma once

#include <event2/util.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdint.h>

#include "rdzv.h"
#include "rdzv_assign.h"
#include "rdzv_dynamic.h"
#include "rdzv_exchange.h"
#include "rdzv_state.h"
#include "rdzv_sync.h"
#include "util.h"

struct tcpstore_client;
struct tcpstore_server;
struct event;
struct c10d_kv_req;

#define C10D_DEFAULT_PORT 29400
/* torch's c10d backend pre-creates the state key with this value. */
#define C10D_SENTINEL "Y2FuaW1hZGFt"
/* How long the store host waits for its clients to leave at the end. */
#define LINGER_USEC (10 * USEC_PER_SEC)
/* Gen keys kept behind the newest one (older ones are deleted). */
#define GEN_KEEP 64

typedef rdzv_sync_done_fn op_done_fn;

struct c10d {
	struct rdzv *r;
	/* Keep-alives failing since (now_usec() clock; 0: they pass), the last
	 * error: the rendezvous is degraded (rdzv_degraded). */
	uint64_t ka_fail_since;
	char ka_fail_why[256];
	struct rdzv_settings settings;
	uint64_t join_timeout;
	uint64_t close_timeout;
	uint64_t heartbeat_timeout;
	uint64_t barrier_timeout;

	char *host; /* the endpoint */
	int port;
	char *connect_host; /* what our clients connect to */
	int connect_port;
	struct tcpstore_server *server;        /* the rendezvous store, when hosting */
	struct tcpstore_server *worker_server; /* MASTER_ADDR:MASTER_PORT, group rank 0 */
	/* The node's one store connection, multiplexed (rdzv_c10d.c). */
	struct tcpstore_client *cl;
	bool up;
	bool dead; /* the store connection is gone */
	char *dead_msg;

	char *key;
	struct rdzv_node me;

	/* The operation loop and its local copy (rdzv_sync.h), with the
	 * copy's fencing token (the value last read). */
	struct rdzv_sync sync;
	char *token;
	size_t token_len;
	char *pending; /* the value a compare-and-set in flight tries to write */
	size_t pending_len;
	uint64_t pending_gen;
	char pending_sum[RDZV_SUMMARY_MAX]; /* its summary, for its gen key */

	bool observe_pending; /* a GET (of the state or a gen key) outside operations */
	uint64_t observe_gen; /* ... of that gen key */

	/* Admission by the store host (the coordinator): a joiner SETs
	 * "<key>/j/<node>"; the host hears it from its own server, no round
	 * trip, and admits every requester in one compare-and-set
	 * (rdzv_admit). Joiners that see "<key>/coordinator" skip the turns and
	 * wait to be admitted. */
	bool coordinator;          /* we host the store */
	bool coordinated;          /* the store has a coordinator (not us) */
	struct rdzv_node *joiners; /* coordinator: requests not admitted yet */
	size_t n_joiners;
	struct event *admit_ev;
	bool admitting;         /* the compare-and-set in flight admits joiners */
	size_t admitted_upto;   /* ... the first this many of them */
	size_t admit_read_upto; /* requests there when the admission read went out */
	/* Liveness with a coordinator: each node SETs "<key>/hb/<node>" (its
	 * own key: no race for the state) every keep-alive interval; the
	 * coordinator folds them into the state's heartbeats from its own
	 * server, once per interval for everyone (hb_fold). */
	struct event *fold_timer;
	bool fold_due;   /* the interval passed: fold and write */
	bool fold_dirty; /* the local copy holds folded heartbeats not written yet */
	bool ever_in;    /* this handler has been a participant (may be in the state) */
	uint64_t asked;  /* when we last sent our join request */
	bool withdrawn;  /* leaving: our requests are withdrawn (c10d_withdraw) */

	/* A store nobody hosts (rdzv_c10d_lease.c): the participant holding
	 * the lease "<key>/lease" coordinates; joiners queue their requests
	 * as "<key>/jq/<i>" (i from ADD "<key>/jn"), which it reads in order
	 * with a WAIT on its own connection; it reads "<key>/hb/<node>" by
	 * client once per keep-alive interval into hb_cache. */
	bool leased;     /* the store is external: the lease decides */
	bool lease_next; /* next_rendezvous waits for the lease's verdict */
	bool lease_busy; /* a lease compare-and-set is out */
	char *lease;     /* the lease value last seen (our CAS token) */
	size_t lease_len;
	struct tcpstore_client *qcl;     /* coordinator: the queue's WAITs and reads */
	bool q_running;                  /* reading the queue */
	int64_t q_next;                  /* the first slot not read yet */
	int64_t q_end;                   /* slots [q_next, q_end) being read */
	int64_t q_at;                    /* the slot the next reply is about */
	struct rdzv_heartbeat *hb_cache; /* coordinator: heartbeats read by client */
	size_t n_hb_cache;
	size_t hb_left; /* their reads still out */

	/* The gen WAIT on watch. */
	bool watching;
	uint64_t watch_gen;
	bool watch_assign; /* the WAIT is on our assignment key, not a gen key */

	/* Assignments (rdzv_c10d_assign.c): the coordinator SETs
	 * "<key>/a/<node>" = "<round> <rank> <world> <gen>" for every
	 * participant once a round completes (and "closed" for those waiting
	 * when the rendezvous closes); a coordinated joiner WAITs on its own
	 * key instead of reading the whole state. */
	struct rdzv_assign_memo told; /* coordinator: what it said (rdzv_assign.h) */
	bool closed_marked;           /* "<key>/closed" set by us */
	bool blind;                   /* the next JOIN read is the assignment wait */
	bool assign_off;              /* this join watches gen keys again ("closed" seen) */
	/* Delegated exits: a node of the last round R asks to join with
	 * "x<R>" ("<key>/j/<node>" = "x<R>"): the coordinator takes it out of the old
	 * round (torch's exit op, on its behalf) in the write that admits it,
	 * instead of every node racing to write the whole state. */
	int64_t rejoin_round;    /* the round we left by "x<R>", -1: none */
	struct rdzv_exits exits; /* coordinator: "x<round>" requests (rdzv_assign.h) */

	bool next_pending; /* asked before the store was reachable */
	bool finishing;
	/* The round's rank exchange and exit barrier (rdzv_exchange.h) over
	 * the store (rdzv_c10d_kv.c), and its gets and adds out. */
	struct rdzv_exchange x;
	struct c10d_kv_req *kv_reqs;
	struct event *ka_timer;
	struct event *linger_timer;
	struct event *connect_log_timer; /* says we still wait for the store */
	enum node_state node_state;
};

static inline struct c10d *
backend(struct rdzv *r)
{
	return r->backend;
}

/* "<key>/gen/<gen>": set by a write waiting nodes must hear about, to the
 * summary of the state it wrote (rdzv_summary_encode). */
static inline char *
gen_key(const struct c10d *c, uint64_t gen)
{
	return xasprintf("%s/gen/%" PRIu64, c->key, gen);
}

/* ---- rdzv_c10d.c: the store ---------------------------------------------- */

/* The coordinator: admit the requests held soon (at once while the state is
 * small, else after a gathering delay that grows with it, 50 ms at most). */
void c10d_admit_later(struct c10d *c);
/* Ask the coordinator to admit us: SET "<key>/j/<node>". */
void c10d_ask_to_join(struct c10d *c);
/* Outside operations: read the state to see what changed (no-op while an
 * operation or another such read is under way). */
void c10d_observe_read(struct c10d *c);
/* (Re-)arm the background WAIT (c10d_assign_watching, else the
 * next gen key). */
void c10d_watch_update(struct c10d *c);
/* The store connection is lost (err: -errno): whatever waits fails. */
void c10d_store_gone(struct c10d *c, int err);
/* The coordinator heard node n ask to join with value[0..len) ("" or
 * "x<round>"; n copied): hold it for the next admission. */
void c10d_join_request(struct c10d *c, const struct rdzv_node *n, const uint8_t *value, size_t len);
/* The coordinator's fold timer (arg: the c10d): every keep-alive interval,
 * fold the heartbeat keys into the state and write it. */
void c10d_fold_timer_cb(evutil_socket_t fd, short what, void *arg);
/* The coordinator: read the state, admit what it holds, fold heartbeats. */
void c10d_admit_now(struct c10d *c);

/* ---- rdzv_c10d_assign.c: assignment keys ------------------------------------ */

/* The coordinator: admit the requests held soon (at once while the state is
 * small, else after a gathering delay that grows with it, 50 ms at most). */
void c10d_admit_later(struct c10d *c);
/* Ask the coordinator to admit us: SET "<key>/j/<node>" ("x<round>" while
 * a delegated exit from rejoin_round is pending). */
void c10d_ask_to_join(struct c10d *c);
/* Leaving (rdzv_leave) after we asked to join, as a coordinated node:
 * withdraw our requests (RDZV_EXITS_WITHDRAW, after them on our connection
 * or in the queue) before the leave op reads the state, so that a
 * coordinator that reads them late does not admit us after we left. */
void c10d_withdraw(struct c10d *c);
/* The coordinator heard the request value[0..len) "x<round>" from n
 * (copied): n leaves that round (ignored when malformed). */
void c10d_exits_note(struct c10d *c, const struct rdzv_node *n, const uint8_t *value, size_t len);
/* Apply torch's exit op on st for every "x<round>" requester still in that
 * round (ctx's clocks); *notable as rdzv_apply. Returns how many left. */
size_t c10d_exits_apply(struct c10d *c, struct rdzv_state *st, const struct rdzv_ctx *ctx,
			bool *notable);
/* After a won write: forget the requesters no longer participants. */
void c10d_exits_prune(struct c10d *c);
/* Leave the last round by delegation, then join (coordinated nodes). */
void c10d_rejoin(struct c10d *c);
/* After a read during a delegated rejoin: if the state still holds us in
 * the round we left, leave it ourselves (torch's exit op). Returns true
 * when it started that op: its own read is in flight, and the caller must
 * not step the old copy (that would send a second store call). */
bool c10d_rejoin_check(struct c10d *c);
/* "<key>/a/<node>" (malloc'd). */
char *c10d_assign_key(const struct c10d *c, const char *node);
/* The coordinator, after any new copy: publish the assignments of a round
 * that completed since the last call, and "closed" to every waiting node
 * of a closed rendezvous (once). */
void c10d_assign_publish(struct c10d *c);
/* After a won write of a closed state: SET "<key>/closed" (once), which a
 * blind join checks before it waits. */
void c10d_assign_mark_closed(struct c10d *c);
/* rdzv_store_ops.read of a blind join: CHECK "<key>/closed" (then a real
 * read when it exists), else wait for the assignment key (the watch) at most
 * a keep-alive window. */
void c10d_assign_blind_read(struct c10d *c);
/* A node running a round (or in the exit barrier) heard gen: read the
 * summary its gen key holds (a few bytes) instead of the state, O(N) bytes
 * for each of N nodes when one of them fails (rdzv_sync_observe_summary);
 * the state itself only when the summary cannot tell (the rendezvous
 * closed; the key gone or set by an older elasticd). No-op while an
 * operation or another look outside operations is under way. */
void c10d_observe_summary(struct c10d *c, uint64_t gen);
/* Whether the background WAIT should WAIT on our assignment key. */
bool c10d_assign_watching(const struct c10d *c);
/* The assignment key was set: GET it, and end the join with it
 * (rdzv_sync_assigned), or read the state when it says anything else. */
void c10d_assign_fetch(struct c10d *c);

/* ---- rdzv_c10d_lease.c: heartbeat keys, the coordinator lease ------------ */

/* Keep alive through our own key "<key>/hb/<node>" (coordinated stores). */
void c10d_hb_send(struct c10d *c);
/* The heartbeat keys of the participants of st into st (ours when due), from
 * the server we host or the coordinator's hb_cache. Returns how many changed. */
size_t c10d_hb_fold(struct c10d *c, struct rdzv_state *st);
/* "<key>/hb/<node>" (malloc'd). */
char *c10d_hb_key(const struct c10d *c, const char *node);
/* next_rendezvous on a store without "<key>/coordinator": take the lease if
 * it is free, then go on as the coordinator or as a coordinated node. */
void c10d_lease_start(struct c10d *c);
/* Every keep-alive interval: the holder renews the lease (and steps down
 * when it lost it), any other node takes it over once it is stale. */
void c10d_lease_tick(struct c10d *c);
/* The coordinator fold timer's reads: heartbeat keys by client into
 * hb_cache, then c10d_admit_now. Returns false when there is nothing to read
 * that way (we host the store, or no other participant). */
bool c10d_lease_fold_read(struct c10d *c);
/* Queue our join request in "<key>/jq/<i>": "<node>\n", then "x<round>"
 * while a delegated exit from rejoin_round is pending when the slot comes
 * back, or RDZV_EXITS_WITHDRAW once withdrawn. */
void c10d_lease_ask(struct c10d *c);
/* Give the lease up at the end (its stamp 0: a successor need not wait). */
void c10d_lease_release(struct c10d *c);
/* Free what the lease code holds. */
void c10d_lease_free(struct c10d *c);

/* ---- rdzv_c10d_round.c: rounds --------------------------------------------- */

/* rdzv_backend_ops of the c10d backend (rdzv.h has their contracts). */
int c10d_next(struct rdzv *r);
int c10d_num_nodes_waiting(struct rdzv *r);
void c10d_shutdown(struct rdzv *r);
int c10d_exit_barrier(struct rdzv *r);
int c10d_finish(struct rdzv *r, bool close);
/* rdzv_backend_ops.run_op: op (RDZV_OP_READMIT) when the loop is idle and
 * connected, its end to rdzv_op_done. 0, -EBUSY or -ENOTCONN. */
int c10d_run_op(struct rdzv *r, enum rdzv_op op);
/* Completions of the exit and join operations of next_rendezvous
 * (rdzv_sync_done_fn; arg: the c10d). */
void c10d_exit_done(void *arg, int err, enum rdzv_action a);
void c10d_join_done(void *arg, int err, enum rdzv_action a);
/* next_rendezvous fails with err (-errno) and msg. */
void c10d_next_fail(struct c10d *c, int err, const char *msg);
/* Set up c->x over c10d_kv_ops (rdzv_c10d_round.c). */
void c10d_exchange_init(struct c10d *c);

/* The rank exchange's store (rdzv_c10d_kv.c): the node's connection c->cl
 * (rdzv_exchange.h's contract), with group rank 0's worker store. */
extern const struct rdzv_kv_ops c10d_kv_ops;
/* Free the gets and adds still out (their callbacks will not run: the
 * client is freed first). */
void c10d_kv_release(struct c10d *c);
/* Start next_rendezvous once the store is reachable. */
void c10d_start_next(struct c10d *c);
/* A store with a coordinator that is not us: keep alive through our own
 * key, then leave the last round by delegation (or, never a participant,
 * ask to join at once). */
void c10d_coordinated_start(struct c10d *c);
/* Arm the keep-alive timer just after our heartbeat falls due. */
void c10d_keep_alive_arm(struct c10d *c);
/* libevent callbacks of the keep-alive and linger timers (arg: the c10d). */
void c10d_ka_timer_cb(evutil_socket_t fd, short what, void *arg);
void c10d_linger_cb(evutil_socket_t fd, short what, void *arg);
/* rdzv_backend_ops.snapshot, .degraded, .coordinates and .hosts_store
 * (rdzv.h). */
int c10d_snapshot(struct rdzv *r, struct rdzv_snapshot *ret);
bool c10d_degraded(struct rdzv *r, uint64_t *ret_since_usec, const char **ret_why);
bool c10d_coordinates(struct rdzv *r);
bool c10d_hosts_store(struct rdzv *r);
