/* rdzv_etcd.h — private to the etcd backend: its state, shared by
 * rdzv_etcd.c (helpers, the watches, next_rendezvous, set-up),
 * rdzv_etcd_store.c (reading and writing the state: the store under the
 * operation loop), rdzv_etcd_assign.c (the coordinator's word to each node,
 * the watches), rdzv_etcd_kv.c (the store of the rank exchange and the exit
 * barrier, rdzv_exchange.h) and rdzv_etcd_lease.c (the lease and boot, the
 * exit barrier's start, leaving). */
#pragma once

#include <event2/util.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdint.h>

#include "etcd_client.h"
#include "rdzv.h"
#include "rdzv_assign.h"
#include "rdzv_dynamic.h"
#include "rdzv_exchange.h"
#include "rdzv_state.h"
#include "rdzv_sync.h"
#include "util.h"

/* Pause before retrying after etcd could not be reached at all. */
#define RETRY_USEC (1 * USEC_PER_SEC)
/* How long a joiner lets the coordinator admit it, with no w/adm seen, before
 * it looks again and then writes itself (the coordinator's lease expiring
 * wakes it sooner). */
#define BEHIND_USEC (2 * USEC_PER_SEC)
/* The most puts of one txn: etcd's --max-txn-ops defaults to 128. */
#define ASSIGN_TXN_OPS 100
/* At most one "cannot reach etcd" line per this span. */
#define ERR_LOG_USEC (10 * USEC_PER_SEC)

typedef rdzv_sync_done_fn op_done_fn;

enum boot {
	BOOT_LEASE, /* granting the lease */
	BOOT_CLEAN, /* writing a/<node>, removing a stale closed rendezvous */
	BOOT_READY,
	BOOT_FAILED,
};

/* What the rank exchange's get out waits for (rdzv_etcd_kv.c). */
enum etcdr_kv_wait {
	ETCDR_KV_NONE,
	ETCDR_KV_INFOS,    /* i/<node>: group rank 0, the roles */
	ETCDR_KV_ANSWER,   /* w/r/<round> */
	ETCDR_KV_ARRIVALS, /* b/<round>/<rank>: group rank 0, the barrier */
	ETCDR_KV_LAST,     /* w/b/<round> */
};

struct etcdr_kv_put;

enum fin {
	FIN_NONE,
	FIN_CLOSE,  /* the close op */
	FIN_REVOKE, /* revoking the lease */
	FIN_CHECK,  /* anybody left? */
	FIN_DELETE, /* deleting the prefix */
	FIN_DONE,   /* left, for good: the handle may live on (a quarantine's
		     * cooldown), idle */
};

struct etcdr {
	struct rdzv *r;
	struct rdzv_settings settings;
	uint64_t join_timeout;
	uint64_t close_timeout;
	uint64_t barrier_timeout;
	int64_t ttl;

	struct etcd_client *cl;
	/* This node's one stream (etcd_watch_new_multi): watch 0 its n/<node>
	 * (ETCDR_WATCH_ASSIGN), watch 1 w/ (ETCDR_WATCH_W), from the boot on.
	 * w/ is dormant while the node waits blind for its first word: what
	 * calls for a re-read is kept as its revision (dormant_reread; a
	 * compacted history: dormant_reset), and when w/ wakes (w_live) a
	 * re-read follows only if one came from w_from on, as a watch started
	 * there would have brought it. */
	struct etcd_watch *watch;
	bool w_live;
	int64_t w_from;
	int64_t dormant_reread;
	bool dormant_reset;
	struct etcd_watch *deaths; /* a/ deletions */
	char *prefix;
	char *prefix_end;
	char *state_key;
	char *alive_prefix;
	char *alive_end;
	char *alive_key;
	char *join_prefix, *join_end, *join_key;
	char *info_prefix, *info_end, *info_key;
	char *gen_key;      /* put with every change waiting nodes must hear of */
	char *adm_key;      /* put by a write that admits others: joiners re-read */
	char *watch_prefix; /* "w/": everything but the state itself */
	char *watch_end;
	char *assign_prefix; /* "n/": the coordinator's word to each node */
	char *assign_key;    /* n/<node> */
	char *closed_key;    /* put with a closed state */
	char *coord_key;     /* w/coord, who coordinates: its name, on its lease */
	char *coord_end;     /* the first key after coord_key's own */
	struct rdzv_node me;

	enum boot boot;
	uint64_t boot_deadline;
	int64_t deaths_from;    /* the deaths watch's start revision */
	int64_t boot_state_rev; /* the state's mod_revision the boot found alone */
	bool boot_coordinator;  /* the boot's look: we coordinate (from boot_ready on) */
	uint64_t cleaning_wait; /* usec between looks while another node cleans */
	int64_t lease;
	struct event *retry_timer;
	struct event *boot_timer;
	struct event *ka_timer;
	/* Keep-alives failing (etcd unreachable): since when, and the warnings. */
	uint64_t ka_fail_since;
	char ka_fail_why[256]; /* the last keep-alive error while ka_fail_since */
	struct ratelimit ka_tell;
	bool ka_pending;
	uint64_t err_logged;
	unsigned io_fails; /* tries of the boot or of the loop's I/O failed in a row */
	char *boot_err;    /* why the boot's last try failed */

	/* The operation loop and its local copy (rdzv_sync.h). */
	struct rdzv_sync sync;
	int64_t mod_rev;           /* of the state key; 0: absent */
	int64_t rev;               /* header revision of the last read */
	char **dead;               /* nodes known to have lost their lease */
	bool alive_stale;          /* the next read takes the a/ range (after a reset) */
	struct rdzv_node *joiners; /* j/ requests, in order of request */
	int64_t *joiner_revs;      /* the newest mod_revision read of each */
	size_t n_joiners;
	/* The coordinator: the node holding the coord key. It alone
	 * watches and reads the join requests and admits them. */
	bool coordinator;          /* we are it */
	char *coordinator_name;    /* w/coord's value at the last look; NULL: none */
	struct etcd_watch *jwatch; /* the coordinator's watch on j/ */
	int64_t j_seen;            /* j/ read through this revision */
	bool intent;               /* our j/ key is there */
	bool intent_pending;       /* the read in flight puts it */
	bool intent_asked;         /* this join operation put it already */
	bool cas_drops_intent;     /* the compare-and-set in flight deletes it */
	bool cas_admits;           /* it admits other joiners: put adm_key */
	uint64_t behind_since;     /* waiting for the coordinator to admit us */
	bool behind_looked;        /* read again after waiting long */
	/* A coordinated joiner waits for its n/<node> key (rdzv_etcd_assign.c)
	 * instead of reading the state, whose size grows with N. */
	bool blind_off;       /* this join reads the state */
	uint64_t blind_asked; /* when the blind join last asked (mono usec) */
	/* A first join's request and first look ride on the boot's txn
	 * (boot_join); boot_looked: it found no word and nothing closed, so
	 * the join's first blind read is done already. */
	bool boot_join;
	bool boot_looked;
	int64_t ran_round; /* the last round this node ran, -1: none */
	/* Delegated exits (rdzv_assign.h): a node of the last round that asks
	 * for the next one puts "x<round>" as its join request and waits blind;
	 * the coordinator takes it out of that round in the write that admits
	 * it. */
	int64_t rejoin_round;    /* the round our request leaves, -1: none */
	uint64_t rejoin_asked;   /* since when (monotonic usec) */
	bool rejoin_looked;      /* read the state once for it (no word) */
	struct rdzv_exits exits; /* the coordinator: the exits asked of it */
	char join_value[32];     /* our j/<node> value: "1" or "x<round>" */
	struct event *watch_ev;  /* moves the watches (not from their callbacks) */
	int64_t watch_from;      /* w/ is heeded from here (0: from c->rev + 1) */
	/* The coordinator's word to the others (n/<node> keys). */
	struct rdzv_assign_memo told; /* rdzv_assign.h */
	/* Which ranges the read or compare-and-set in flight asks for
	 * (indices into the answer's ranges, -1: not asked). */
	int rd_state, rd_alive, rd_coord, rd_join, rd_exch, rd_barrier, rd_arrivals;
	bool rd_exch_infos; /* rd_exch is the i/ range, else w/r/<round> */
	bool rd_take;       /* and it may take the coord key (etcdr_look) */

	/* The I/O lane (sync.io_pending): one read or compare-and-set at a
	 * time; a read asked for meanwhile goes next. */
	bool kick_pending;

	bool next_pending;

	/* The round's rank exchange and exit barrier (rdzv_exchange.h) over
	 * etcd (rdzv_etcd_kv.c). x_deferred: group rank 0 that learnt its
	 * round blind starts it once it read the state (its nodes' names). */
	struct rdzv_exchange x;
	bool x_deferred;
	/* The engine's get out (one at a time): its id, its keys, what they
	 * are; kv_ev looks at what is known, kv_timer ends it. */
	uint64_t kv_id;
	char **kv_keys;
	size_t kv_n;     /* of kv_keys */
	size_t kv_found; /* kv_keys[0..kv_found) are known */
	enum etcdr_kv_wait kv_wait;
	struct event *kv_ev;
	struct event *kv_timer;
	struct etcdr_kv_put *kv_puts; /* puts in flight */
	char **kv_names;              /* group rank 0: the round's nodes by rank */
	size_t kv_n_names;
	/* What the gets wait for, as it comes: the i/ keys (group rank 0's
	 * read), the newest w/r/<round> seen, the arrivals of the node's
	 * round (b/<round>/, group rank 0's watch bwatch), the newest round
	 * whose w/b/<round> was seen. */
	struct etcd_range infos;
	char *assignment;
	size_t assignment_len;
	int64_t assignment_round;
	bool *arrived;
	int n_arrived;
	struct etcd_watch *bwatch;
	int64_t barrier_round;
	/* A join's deadline while the boot lasts, or while group rank 0
	 * defers its exchange. */
	struct event *aux_timer;
	struct event *admit_timer; /* the coordinator lets requests gather */

	enum fin fin;
	bool fin_close;
	enum node_state node_state;
};

static inline struct etcdr *
backend(struct rdzv *r)
{
	return r->backend;
}

/* This node's NodeState: an RdzvEvent per step, a log line per transition. */
static inline void
set_state(struct etcdr *c, enum node_state s, const char *fn, const char *msg)
{
	rdzv_set_node_state(c->r, &c->node_state, s, fn, msg);
}

/* Whether the lease is going or gone (leaving, past the close or leave op):
 * nothing of the rendezvous goes on, whatever answer or timer comes late. */
static inline bool
etcdr_lease_gone(const struct etcdr *c)
{
	return c->fin != FIN_NONE && c->fin != FIN_CLOSE;
}

static inline void
timer_usec(struct event *ev, uint64_t usec)
{
	struct timeval tv = {(time_t)(usec / USEC_PER_SEC), (suseconds_t)(usec % USEC_PER_SEC)};

	evtimer_add(ev, &tv);
}

/* ---- rdzv_etcd.c: helpers, watches, next_rendezvous, set-up */

/* Heartbeats from leases into st: "never" (0) for nodes known dead, now_wall
 * for the rest. */
void etcdr_overlay(struct etcdr *c, struct rdzv_state *st, int64_t now_wall);
/* The dead set from an a/ range: st's nodes without a key. */
void etcdr_dead_from_alive(struct etcdr *c, const struct rdzv_state *st,
			   const struct etcd_range *alive);
/* Deep copy of an answer's range into dst (released first). */
void etcdr_range_copy(struct etcd_range *dst, const struct etcd_range *src);
/* The coordinator: the j/ requests of r, in order of request, added to
 * those it holds; the exits they ask for ("x<round>") to c->exits. */
void etcdr_take_joiners(struct etcdr *c, const struct etcd_range *r);
/* Forget every join request held. */
void etcdr_joiners_clear(struct etcdr *c);
/* "w/r/<round>" (malloc'd). */
char *etcdr_assignment_key(const struct etcdr *c, int64_t round);
/* The exit barrier's keys (malloc'd): "b/<round>/", under which each group
 * rank puts its arrival (outside w/: only group rank 0 watches them), and
 * "w/b/<round>", which group rank 0 puts once all arrived (one w/ event
 * each, instead of N). */
char *etcdr_arrival_prefix(const struct etcdr *c, int64_t round);
char *etcdr_barrier_key(const struct etcdr *c, int64_t round);
/* etcd could not be reached (err -errno, msg why): log at a bounded rate and
 * retry until the deadline of whatever waits. */
void etcdr_io_failed(struct etcdr *c, int err, const char *msg);
/* The pause before the next try after c->io_fails failures in a row (at
 * least one), in microseconds: RETRY_USEC doubling up to 16 times it, each
 * drawn in [half, whole) from the node's own PRNG, and never past deadline
 * (monotonic usec; 0: none) by more than RETRY_USEC / 10. A crowd that
 * failed together (etcd's "too many requests" under thousands of nodes)
 * thus spreads out and thins instead of retrying in step. */
uint64_t etcdr_retry_usec(struct etcdr *c, uint64_t deadline);
/* Whether the rank exchange of the node's round is under way. */
static inline bool
etcdr_exchanging(const struct etcdr *c)
{
	return c->x_deferred || c->x.step == RDZV_XSTEP_INFOS || c->x.step == RDZV_XSTEP_ANSWER;
}
/* Stop the rank exchange or exit barrier under way (its get goes). */
void etcdr_exchange_abandon(struct etcdr *c);
/* After a read of the state during the rank exchange: a round that went on
 * without this node sends it to the next join; group rank 0 with a fresh
 * state starts a deferred exchange; the exchange's get looks at what came. */
void etcdr_exchange_check(struct etcdr *c);
/* next_rendezvous fails with err (-errno) and msg. */
void etcdr_next_fail(struct etcdr *c, int err, const char *msg);
/* Start next_rendezvous's exit operation (etcd is reachable): a node of
 * the last round that does not coordinate leaves it through the coordinator
 * (a delegated exit, c->rejoin_round), any other runs torch's exit op. */
void etcdr_start_next(struct etcdr *c);
/* After a read of the state during a delegated rejoin: when the state still
 * holds this node in the completed round it asked to leave, the coordinator
 * did not take it out: start the exit op itself (torch's), then the join,
 * and return true (a read for it is on its way: the caller looks no
 * further at this answer). Otherwise false; when the node is out of that
 * round (taken out by the coordinator, or dropped as dead, or the state was
 * reset) the rejoin is over: rejoin_round goes back to -1 and the
 * coordinator's REMOVE_FROM_PARTICIPANTS is recorded as this node's event. */
bool etcdr_rejoin_check(struct etcdr *c);
/* Watch callbacks (arg: the etcdr): a/ deletions; w/ changes. */
void etcdr_deaths_cb(int err, const struct etcd_response *resp, bool reset, const char *errmsg,
		     void *arg);
/* A put whose answer only matters when it failed (logged). */
void etcdr_put_done_cb(int err, const struct etcd_response *resp, const char *errmsg, void *arg);
/* The watches of the node's stream (c->watch), by watch_id. */
#define ETCDR_WATCH_ASSIGN 0
#define ETCDR_WATCH_W 1
/* rdzv_backend_ops of the etcd backend (rdzv.h has their contracts). */
int etcdr_next(struct rdzv *r);
int etcdr_num_nodes_waiting(struct rdzv *r);
/* Whether name lost its lease, as far as this node knows. */
bool etcdr_is_dead(const struct etcdr *c, const char *name);
/* Free a range's keys and values; r is empty after. */
void etcdr_range_release(struct etcd_range *r);

/* ---- rdzv_etcd_store.c: the state under the operation loop */

/* The most ops of a look (etcdr_look). */
#define ETCDR_LOOK_OPS 8

/* Whether somebody coordinates, as the last look found (w/coord held). */
static inline bool
etcdr_coordinator_known(const struct etcdr *c)
{
	return c->coordinator_name != NULL;
}

/* The rdzv_sync store of the etcd backend. */
extern const struct rdzv_store_ops etcdr_store_ops;
/* After a read or a write: the operation, the coordinator's admissions, the
 * exchange and the barrier look at the new copy; a deferred read goes. */
void etcdr_after_io(struct etcdr *c);
/* One txn reading the state and what the node waits for (later, when the
 * I/O lane is busy). */
void etcdr_read_all(struct etcdr *c);
/* Take up or leave the coordinator's work (watch j/); rev: the revision
 * just read. */
void etcdr_coordinator_set(struct etcdr *c, bool on, int64_t rev);
/* Who coordinates, in O(1) whatever N: a read of the coord key, added to
 * ops at *n (c->rd_coord records where). */
void etcdr_coord_read(struct etcdr *c, struct etcd_op *ops, size_t *n);
/* A look: the txn of ops (at most ETCDR_LOOK_OPS; reads, and puts of our
 * own keys) that, with take_key, also takes the coord key when nobody holds
 * it (its put last, so that the answers of ops are at the same indices
 * either way). Never takes it without a lease or while leaving; without the
 * take a look of reads only stays out of raft. Records c->rd_take and
 * makes the call, whose answer goes to cb(c). */
void etcdr_look(struct etcdr *c, const struct etcd_op *ops, size_t n, bool take_key, etcd_cb cb);
/* Whether we coordinate, from the answer to etcdr_coord_read's range (none:
 * as before); look: the txn was etcdr_look's (succeeded: we took the
 * key). Sets c->coordinator_name; etcdr_coordinator_set acts on it. */
bool etcdr_coord_holder(struct etcdr *c, const struct etcd_response *resp, bool look);
/* Note the arrival that a b/<round>/<rank> key names. */
void etcdr_barrier_mark(struct etcdr *c, const char *key);
/* Whether the arrival that a b/<round>/<rank> key of the node's round names
 * is in. */
bool etcdr_barrier_arrived(const struct etcdr *c, const char *key);
/* Note a w/b/<round> key seen (the newest round's, in c->barrier_round). */
void etcdr_barrier_seen(struct etcdr *c, const char *key);
/* Delete our join request j/<node> (not while its put is in flight). */
void etcdr_intent_drop(struct etcdr *c);
/* A fresh operation (not a take-over) of the loop; done reports its end. */
void etcdr_op_start(struct etcdr *c, enum rdzv_op op, uint64_t deadline, op_done_fn done);
/* Keep the newest rank assignment seen (w/r/<round>, value copied). */
void etcdr_set_assignment(struct etcdr *c, int64_t round, const char *value, size_t len);
/* The same from a w/r/<round> key-value (its round from the key). */
void etcdr_assignment_seen(struct etcdr *c, const struct etcd_kv *kv);
/* libevent timer callbacks (arg: the etcdr). */
void etcdr_retry_cb(evutil_socket_t fd, short what, void *arg);
void etcdr_admit_timer_cb(evutil_socket_t fd, short what, void *arg);

/* ---- rdzv_etcd_assign.c: n/<node>, the coordinator's word to each node */

/* Whether the next read of the join under way is blind: n/<node>, the
 * closed key and who coordinates, not the state. */
bool etcdr_blind(const struct etcdr *c);
/* The blind read (one txn, with the join request on the first); none when
 * the boot's txn was it (c->boot_looked): then only the wait for the word. */
void etcdr_blind_read(struct etcdr *c);
/* The coordinator: n/<node> for every participant of a round that completed
 * (its copy is the store's), "spare" for new spares, "closed" for all who
 * wait, in txns of ASSIGN_TXN_OPS puts. */
void etcdr_assign_publish(struct etcdr *c);
/* The coordinator, after a write: forget the joiners now in the state and
 * delete their j/ requests (in txns of ASSIGN_TXN_OPS), so that a request is
 * read once and none is left once a node is in; the others stay held. */
void etcdr_assign_drop_requests(struct etcdr *c);
/* Put the watches this node needs now: n/<node> while blind, w/ and a/
 * (deaths) otherwise (later, from the loop: not inside a watch callback). */
void etcdr_watches_update(struct etcdr *c);
void etcdr_watch_ev_cb(evutil_socket_t fd, short what, void *arg);
/* Add the join request puts (j/<node>, i/<node>) to ops at *n; returns the
 * i/ value to free after encoding. */
char *etcdr_intent_ops(struct etcdr *c, struct etcd_op *ops, size_t *n);

/* ---- rdzv_etcd_kv.c: the store of the rank exchange and the exit barrier */

/* etcd as the engine's store (rdzv_exchange.h's contract; arg: the etcdr). */
extern const struct rdzv_kv_ops etcdr_kv_ops;
/* Group rank 0, before starting the exchange: the names of the round's
 * nodes (c->sync.st, fresh) by group rank, for the role_info keys. */
void etcdr_kv_round(struct etcdr *c);
/* The engine's get out looks at what the node knows now, and answers once
 * every key is in (not from inside an engine call: kv_ev runs it then). An
 * abandoned get is dropped. */
void etcdr_kv_check(struct etcdr *c);
/* libevent callbacks (arg: the etcdr): kv_ev and the get's deadline. */
void etcdr_kv_ev_cb(evutil_socket_t fd, short what, void *arg);
void etcdr_kv_timer_cb(evutil_socket_t fd, short what, void *arg);
/* Free the puts in flight (the client drops their answers) and the get. */
void etcdr_kv_release(struct etcdr *c);

/* ---- rdzv_etcd_lease.c: lease, boot, exit barrier, leaving */
/* The next step of the boot: lease, a/<node>, watches. */
void etcdr_boot_step(struct etcdr *c);
void etcdr_aux_timer_cb(evutil_socket_t fd, short what, void *arg);
/* Group rank 0's watch on the exit barrier's arrivals (c->bwatch). */
void etcdr_arrivals_cb(int err, const struct etcd_response *resp, bool reset, const char *errmsg,
		       void *arg);
void etcdr_boot_retry_cb(evutil_socket_t fd, short what, void *arg);
void etcdr_ka_timer_cb(evutil_socket_t fd, short what, void *arg);
/* rdzv_backend_ops (rdzv.h). */
int etcdr_exit_barrier(struct rdzv *r);
/* Leaving is for good (FIN_DONE): once it started, another call returns 0
 * and its end alone is told; once it is over, FINISHED is told at once and
 * nothing runs (never a close op from a node that left). */
int etcdr_finish(struct rdzv *r, bool close);
/* rdzv_backend_ops.run_op: op (RDZV_OP_READMIT) when the loop is idle and
 * the lease is up, its end to rdzv_op_done. 0, -EBUSY or -ENOTCONN. */
int etcdr_run_op(struct rdzv *r, enum rdzv_op op);
bool etcdr_degraded(struct rdzv *r, uint64_t *ret_since_usec, const char **ret_why);
void etcdr_shutdown(struct rdzv *r);
