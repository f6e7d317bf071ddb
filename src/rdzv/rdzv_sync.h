/* rdzv_sync.h — torch's dynamic-rendezvous operation executor, once for
 * every backend (torch 2.x _DistributedRendezvousOpExecutor, reference
 * rendezvous.md §3): an operation (exit, join, close, keep-alive, leave) runs
 * as an asynchronous read / decide (rdzv_dynamic.h) / compare-and-set loop
 * that re-derives its action from the state the store returns after every
 * lost race, and waits for a change or for the moment its own decision can
 * change (a timer), never by polling.
 *
 * The store is a small asynchronous interface (struct rdzv_store_ops): read
 * the state with its token, compare-and-set the local copy against that
 * token, plus the hooks of elasticd's admission (a coordinator writes the
 * joins of a crowd in one compare-and-set, the others wait for it) and
 * liveness (heartbeat keys or leases). rdzv_c10d.c (TCPStore) and
 * rdzv_etcd.c (etcd v3) implement it; tests/unit/test_rdzv_sync.c drives it
 * with an in-process store and a fake clock.
 *
 * Completions come back through rdzv_sync_adopt / rdzv_sync_written /
 * rdzv_sync_lost / rdzv_sync_fail, then rdzv_sync_step. All times are
 * microseconds: "wall" the wall clock (the state's deadline and heartbeats),
 * "mono" CLOCK_MONOTONIC (operation deadlines). */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "rdzv_dynamic.h"
#include "rdzv_exchange.h"
#include "rdzv_state.h"

struct event;
struct rdzv;
struct rdzv_sync;

/* The end of an operation: err 0 with the action it ended with (FINISH, an
 * error action, GRACEFUL_EXIT), or -errno (the store failed, the state in it
 * is unreadable) with RDZV_ACTION_ERROR_CLOSED. arg: rdzv_sync.store. */
typedef void (*rdzv_sync_done_fn)(void *arg, int err, enum rdzv_action a);

struct rdzv_store_ops {
	/* Read the state and its token. Later (from inside the call only when
	 * the store is gone: rdzv_sync_fail) the store calls rdzv_sync_adopt with what it read, or
	 * rdzv_sync_fail, then rdzv_sync_step. A store busy with other I/O reads when that is done.
	 * Required. */
	void (*read)(void *store);
	/* Write the local copy (rdzv_sync.st, its gen already bumped when
	 * notable) if the store still holds the token of the last read; a is
	 * this node's own change (RDZV_ACTION_SYNC: admissions only). The store
	 * answers with rdzv_sync_written (won: the copy is the store's now),
	 * rdzv_sync_lost (lost: the fresh state), or rdzv_sync_fail; a notable
	 * write wakes the nodes waiting for a change. Required. */
	void (*cas)(void *store, enum rdzv_action a);
	/* Optional. Liveness outside the state (leases): set st's heartbeats
	 * as of now_wall before each decision. */
	void (*stamp)(void *store, struct rdzv_state *st, int64_t now_wall);
	/* Optional. The operation wants a KEEP_ALIVE: return true when the
	 * store keeps this node alive outside the state (its own heartbeat
	 * key): the loop then decides again instead of writing the state. */
	bool (*keep_alive)(void *store);
	/* Optional. Whether another node coordinates admissions (the join's
	 * events then come from the state it wrote, rdzv_record_admission). */
	bool (*coordinated)(void *store);
	/* Optional. The operation would add this node to a list of the state:
	 * return true to wait for the coordinator instead (the store wakes the
	 * loop with rdzv_sync_wake or arms rdzv_sync_sleep), false to write. */
	bool (*await_admission)(void *store, const struct rdzv_ctx *ctx);
	/* Optional. Before writing this node's own change: admit the joiners
	 * the store holds into st on the way (rdzv_admit_requests), setting
	 * *notable when waiting nodes must hear of it. */
	void (*admit)(void *store, struct rdzv_state *st, const struct rdzv_ctx *ctx,
		      bool *notable);
	/* Optional. The operation is in SYNC: return false when the store
	 * re-reads soon anyway (no timer is armed then). */
	bool (*synced)(void *store);
	/* Optional. After the sync timer: the store's own work (admissions,
	 * reads it deferred). */
	void (*after_timer)(void *store);
	/* Optional. After the exit barrier saw the rendezvous closed. */
	void (*barrier_closed)(void *store);
	/* The loop's clocks; NULL: wall_usec() and now_usec(). */
	int64_t (*wall)(void *store);
	uint64_t (*mono)(void *store);
	/* Whether the sync timer re-reads the state (liveness in the state
	 * itself, heartbeats) or decides again on the local copy (liveness
	 * outside, leases). */
	bool timer_reads;
	/* Why _sanitize dropped nodes, for its event: "since they had no
	 * heartbeat". */
	const char *dead_why;
	/* The progress line's reason; NULL: "no heartbeat for <window> s". */
	const char *dead_note;
};

struct rdzv_sync {
	struct rdzv *r; /* borrowed: events, logs, config */
	const struct rdzv_store_ops *ops;
	void *store;
	const struct rdzv_settings *settings; /* borrowed */
	const struct rdzv_node *me;           /* borrowed */
	char *dead_progress; /* "no heartbeat for 15 s": the progress line's reason */
	uint64_t join_timeout;

	/* The local copy. */
	struct rdzv_state st;
	int64_t read_usec; /* wall clock of its last read or write, 0: never */
	bool notable;      /* it holds a change waiting nodes must hear of */
	bool dropped;      /* its last read lost dead nodes the store still holds */
	bool io_pending;   /* the store lane's read or compare-and-set is out */

	/* The operation under way. */
	bool op_active;
	enum rdzv_op op;
	uint64_t op_deadline;
	rdzv_sync_done_fn op_done;
	bool in_sync;
	bool lost; /* pausing after a lost compare-and-set */
	bool admission_seen;
	struct event *timer;
	uint64_t timer_usec; /* the last delay armed */
	uint64_t wake_mono;  /* when the timer armed last fires (monotonic usec) */
	uint64_t prng;

	/* next_rendezvous */
	bool next_active;
	uint64_t next_deadline;
	size_t last_count; /* participants last reported */
	size_t peak_count; /* most participants seen in the round waited for */
	bool last_waiting;

	/* The round handed to the agent. */
	bool assigned; /* the join ended by an assignment (rdzv_sync_assigned) */
	bool stale;    /* ... so the local copy is behind: no verdicts from it */
	bool running;
	bool told;
	bool barrier;
	int64_t round;
	int rank;
	int world;
};

/* Set up s for node me of r with the store's ops (store: their argument);
 * settings and me are borrowed and must outlive s. join_timeout: usec.
 * Seeds the lost-race jitter from me's name, the pid and the time. */
void rdzv_sync_init(struct rdzv_sync *s, struct rdzv *r, const struct rdzv_store_ops *ops,
		    void *store, const struct rdzv_settings *settings, const struct rdzv_node *me,
		    uint64_t join_timeout);
void rdzv_sync_release(struct rdzv_sync *s);

/* Start operation op with monotonic deadline (usec); done reports its end.
 * An operation under way is taken over (its I/O in flight decides for the
 * new one). */
void rdzv_sync_start(struct rdzv_sync *s, enum rdzv_op op, uint64_t deadline,
		     rdzv_sync_done_fn done);

/* End the operation under way, if any, without telling its done
 * callback (the caller reports the failure itself). */
void rdzv_sync_abandon(struct rdzv_sync *s);

/* End the operation under way, if any, with (err, a). */
void rdzv_sync_end(struct rdzv_sync *s, int err, enum rdzv_action a);

/* The store read st (ownership taken; liveness already stamped): the new
 * local copy, sanitised (torch's _sanitize); the round's watchers look. */
void rdzv_sync_adopt(struct rdzv_sync *s, struct rdzv_state *st);

/* Our compare-and-set won: the local copy is what the store holds. */
void rdzv_sync_written(struct rdzv_sync *s);

/* Our compare-and-set lost to st (ownership taken): adopted, and the
 * operation decides again after a jitter of up to 2 ms. */
void rdzv_sync_lost(struct rdzv_sync *s, struct rdzv_state *st);

/* The store's answer cannot be used (-EBADMSG, a lost connection): the
 * operation under way ends with err. */
void rdzv_sync_fail(struct rdzv_sync *s, int err);

/* Decide the operation's next step on the local copy and take it: write a
 * change, wait (SYNC), or end. No-op without an operation. */
void rdzv_sync_step(struct rdzv_sync *s);

/* Write the local copy (changed by this node's action a, or by admissions
 * only: RDZV_ACTION_SYNC) with a compare-and-set, its gen bumped first when
 * it holds a notable change. */
void rdzv_sync_write(struct rdzv_sync *s, enum rdzv_action a);

/* A change the operation waits for: read (or decide) now when it waits. */
void rdzv_sync_wake(struct rdzv_sync *s);

/* The coordinator assigned this node group rank `rank` of `world` in round
 * `round`, and gen is the state's gen that completed it (an O(1) record, not
 * the state): a JOIN under way ends with FINISH (its admission event
 * recorded) without reading the state; the local copy is stale until the
 * next read (rdzv_sync_observe gives no verdict from it meanwhile). */
void rdzv_sync_assigned(struct rdzv_sync *s, int64_t round, int rank, int world, uint64_t gen);

/* Wait in SYNC for usec at most (rdzv_sync_wake or the timer ends it). */
void rdzv_sync_sleep(struct rdzv_sync *s, uint64_t usec);

/* The sync timer's expiry (tests call it instead of waiting). */
void rdzv_sync_timer_fire(struct rdzv_sync *s);

/* While a round runs: tell the agent once when it must re-form or stop (a
 * closed state ends the exit barrier). */
void rdzv_sync_observe(struct rdzv_sync *s);

/* While a round runs, or in the exit barrier: the store summarises its state
 * of gen gen as sum (rdzv_state.h), without the state. A summary newer than
 * the local copy leaves the copy stale with that gen (no verdicts from it
 * until the next read) and tells the agent once when the round must re-form,
 * as rdzv_sync_observe does. Returns false when the summary cannot tell (the
 * rendezvous closed: the caller reads the state, which names who closed it
 * and ends the barrier). */
bool rdzv_sync_observe_summary(struct rdzv_sync *s, uint64_t gen, const struct rdzv_summary *sum);

/* The decision context now (the store's clocks) with the op deadline. */
struct rdzv_ctx rdzv_sync_ctx(const struct rdzv_sync *s);

/* Jitter in [0, max_usec) from s's own PRNG. */
uint64_t rdzv_sync_jitter(struct rdzv_sync *s, uint64_t max_usec);

/* Wall clock and monotonic time through the store's clocks. */
int64_t rdzv_sync_wall(const struct rdzv_sync *s);
uint64_t rdzv_sync_mono(const struct rdzv_sync *s);

/* Begin next_rendezvous: its deadline and progress bookkeeping reset. */
void rdzv_sync_next_begin(struct rdzv_sync *s);

/* ---- the coordinator lease of a store nobody hosts -------------------------
 * On a store no agent hosts, one participant coordinates (admits the crowd,
 * folds heartbeats, writes assignments) while it holds a lease key: a value
 * "<node> <wall usec> <cursor>" taken and renewed with compare-and-set every
 * keep-alive interval, and free for anyone once its stamp is older than
 * keep_alive_interval x keep_alive_max_attempt (torch's rule for a dead
 * node's heartbeat). cursor: the first join request (queue slot) the holder
 * has not read yet, where a successor starts. */
enum rdzv_lease_verdict {
	RDZV_LEASE_MINE, /* me holds it */
	RDZV_LEASE_HELD, /* another node holds it and renewed it within the window */
	RDZV_LEASE_FREE, /* absent (len 0), malformed, or stale: take it */
};

/* Start x's rank exchange (rdzv_exchange_start) for the round s holds
 * (round, group rank, world) and this node (--role, local world size,
 * TORCH_ELASTIC_WORKER_IDENTICAL), until s's join deadline; prefix: the
 * round's key prefix (borrowed). */
void rdzv_sync_exchange_start(const struct rdzv_sync *s, struct rdzv_exchange *x,
			      const char *prefix);

/* Judge the lease value[0..len) for node name me at now_wall (usec) with the
 * staleness window window_usec; *ret_cursor gets its cursor (0 when absent
 * or malformed). Pure. */
enum rdzv_lease_verdict rdzv_lease_judge(const char *value, size_t len, const char *me,
					 int64_t now_wall, int64_t window_usec,
					 int64_t *ret_cursor);

/* The lease value for me at now_wall (usec) with cursor (malloc'd). */
char *rdzv_lease_format(const char *me, int64_t now_wall, int64_t cursor);
