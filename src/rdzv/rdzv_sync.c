/* rdzv_sync.c — the dynamic rendezvous' operation loop over a store
 * (rdzv_sync.h); the decisions are rdzv_dynamic.c's. */
#include <event2/event.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "config.h"
#include "rdzv.h"
#include "rdzv_sync.h"
#include "util.h"

/* The most a node pauses after losing a compare-and-set: racing nodes draw
 * different pauses and stop colliding (torch retries at once). */
#define LOST_JITTER_USEC 2000

static void
timer_cb(evutil_socket_t fd, short what, void *arg)
{
	rdzv_sync_timer_fire(arg);
}

/* FNV-1a over the name, mixed with the pid and the time: every node of a
 * crowd (and every participant of one swarm process) draws its own pauses. */
static uint64_t
prng_seed(const char *name)
{
	uint64_t h = 1469598103934665603ULL;

	for (const char *p = name; p && *p; p++) {
		h = (h ^ (uint8_t)*p) * 1099511628211ULL;
	}
	h ^= (uint64_t)getpid() << 32;
	h ^= now_usec() * 0x9e3779b97f4a7c15ULL;
	return h ? h : 1;
}

void
rdzv_sync_init(struct rdzv_sync *s, struct rdzv *r, const struct rdzv_store_ops *ops, void *store,
	       const struct rdzv_settings *settings, const struct rdzv_node *me,
	       uint64_t join_timeout)
{
	memset(s, 0, sizeof(*s));
	s->r = r;
	s->ops = ops;
	s->store = store;
	s->settings = settings;
	s->me = me;
	s->join_timeout = join_timeout;
	s->dead_progress = ops->dead_note
				   ? xstrdup(ops->dead_note)
				   : xasprintf("no heartbeat for %.0f s",
					       (double)settings->keep_alive_interval_usec *
						       settings->keep_alive_max_attempt / 1e6);
	rdzv_state_init(&s->st);
	s->timer = evtimer_new(r->base, timer_cb, s);
	s->prng = prng_seed(me->name);
}

void
rdzv_sync_release(struct rdzv_sync *s)
{
	if (s->timer) {
		event_free(s->timer);
	}
	s->timer = NULL;
	free(s->dead_progress);
	s->dead_progress = NULL;
	rdzv_state_release(&s->st);
}

int64_t
rdzv_sync_wall(const struct rdzv_sync *s)
{
	return s->ops->wall ? s->ops->wall(s->store) : (int64_t)wall_usec();
}

uint64_t
rdzv_sync_mono(const struct rdzv_sync *s)
{
	return s->ops->mono ? s->ops->mono(s->store) : now_usec();
}

struct rdzv_ctx
rdzv_sync_ctx(const struct rdzv_sync *s)
{
	struct rdzv_ctx ctx = {
		.settings = s->settings,
		.node = s->me,
		.now_wall = rdzv_sync_wall(s),
		.now_mono = rdzv_sync_mono(s),
		.op_deadline = s->op_deadline,
		.close_record = s->r->close_record,
		.quarantine = s->r->quarantine,
		.readmit = s->r->readmit_host,
		.failure = s->r->failure_report,
	};

	return ctx;
}

/* xorshift64* */
uint64_t
rdzv_sync_jitter(struct rdzv_sync *s, uint64_t max_usec)
{
	s->prng ^= s->prng >> 12;
	s->prng ^= s->prng << 25;
	s->prng ^= s->prng >> 27;
	return max_usec ? (s->prng * 2685821657736338717ULL) % max_usec : 0;
}

void
rdzv_sync_sleep(struct rdzv_sync *s, uint64_t usec)
{
	struct timeval tv = {(time_t)(usec / USEC_PER_SEC), (suseconds_t)(usec % USEC_PER_SEC)};

	s->in_sync = true;
	s->timer_usec = usec;
	s->wake_mono = rdzv_sync_mono(s) + usec;
	evtimer_del(s->timer);
	evtimer_add(s->timer, &tv);
}

void
rdzv_sync_abandon(struct rdzv_sync *s)
{
	s->op_done = NULL;
	rdzv_sync_end(s, 0, RDZV_ACTION_ERROR_CLOSED);
}

void
rdzv_sync_end(struct rdzv_sync *s, int err, enum rdzv_action a)
{
	rdzv_sync_done_fn done = s->op_done;

	if (!s->op_active) {
		return;
	}
	s->op_active = false;
	s->in_sync = false;
	s->lost = false;
	evtimer_del(s->timer);
	if (done) {
		done(s->store, err, a);
	}
}

void
rdzv_sync_start(struct rdzv_sync *s, enum rdzv_op op, uint64_t deadline, rdzv_sync_done_fn done)
{
	bool was_active = s->op_active;

	s->op_active = true;
	s->op = op;
	s->op_deadline = deadline;
	s->op_done = done;
	if (!was_active) {
		s->admission_seen = false;
		s->assigned = false;
	}
	if (was_active && s->io_pending) {
		return; /* the read or write in flight decides for the new one */
	}
	s->in_sync = false;
	s->lost = false;
	evtimer_del(s->timer);
	s->ops->read(s->store);
}

void
rdzv_sync_fail(struct rdzv_sync *s, int err)
{
	rdzv_sync_end(s, err, RDZV_ACTION_ERROR_CLOSED);
}

void
rdzv_sync_next_begin(struct rdzv_sync *s)
{
	s->running = false;
	s->told = false;
	s->barrier = false;
	s->next_active = true;
	s->next_deadline = rdzv_sync_mono(s) + s->join_timeout;
	s->last_count = (size_t)-1;
	s->peak_count = 0;
}

/* The participants' names, "(a, b, ...)", into buf. */
static void
joined_names(const struct rdzv_state *st, char *buf, size_t size)
{
	size_t off = 0;

	buf[0] = '\0';
	for (size_t i = 0; i < st->n_participants && off < size - 64; i++) {
		off += (size_t)snprintf(buf + off, size - off, "%s%s", i ? ", " : " (",
					st->participants[i].node.name);
	}
	if (off >= size - 64 && st->n_participants > 0) {
		off += (size_t)snprintf(buf + off, size - off, ", ...");
	}
	if (off > 0) {
		snprintf(buf + off, size - off, ")");
	}
}

/* What a waiting node says about the round it waits for. */
static void
report_progress(struct rdzv_sync *s)
{
	const struct rdzv_state *st = &s->st;
	const struct rdzv_settings *set = s->settings;
	const char *id = s->r->cfg->rdzv_id, *s_part = st->n_participants == 1 ? "" : "s";
	bool waiting = rdzv_state_find_wait(st, s->me) >= 0;
	char names[512];

	if (!s->next_active ||
	    (st->n_participants == s->last_count && waiting == s->last_waiting)) {
		return;
	}
	s->last_count = st->n_participants;
	s->last_waiting = waiting;
	if (st->complete && rdzv_state_find_participant(st, s->me) >= 0) {
		return;
	}
	if (st->complete) {
		rdzv_progress(s->r,
			      "rendezvous '%s' round %" PRId64
			      " is running with %zu node%s; %s for the next round",
			      id, st->round, st->n_participants, s_part,
			      waiting ? "waiting in the wait list" : "waiting");
		return;
	}
	joined_names(st, names, sizeof(names));
	if (st->n_participants < (size_t)set->min_nodes) {
		rdzv_progress(s->r,
			      "rendezvous '%s' round %" PRId64
			      ": %zu of %d node%s joined%s; awaiting %zu more",
			      id, st->round, st->n_participants, set->min_nodes,
			      set->min_nodes == 1 ? "" : "s", names,
			      (size_t)set->min_nodes - st->n_participants);
	} else {
		double left =
			st->deadline >= 0 ? (double)(st->deadline - rdzv_sync_wall(s)) / 1e6 : 0.0;

		rdzv_progress(s->r,
			      "rendezvous '%s' round %" PRId64
			      ": %zu node%s joined%s, min %d max %d; last call ends in %.1f s",
			      id, st->round, st->n_participants, s_part, names, set->min_nodes,
			      set->max_nodes, left > 0 ? left : 0.0);
	}
}

void
rdzv_sync_observe(struct rdzv_sync *s)
{
	const struct rdzv_state *st = &s->st;
	char *msg = NULL;
	int r, waiting;

	if (s->barrier && st->closed) {
		/* The job ended elsewhere: nobody else will join the barrier. */
		s->barrier = false;
		if (s->ops->barrier_closed) {
			s->ops->barrier_closed(s->store);
		}
		rdzv_tell(s->r, RDZV_TELL_FINISHED, 0, 0, NULL);
		return;
	}
	if (!s->running || s->told || s->stale) {
		return;
	}
	r = rdzv_round_check(st, s->me, s->round, s->world, s->rank, &waiting, &msg);
	if (r != 0) {
		s->told = true;
		rdzv_keep_closed_by(s->r, st);
		rdzv_tell(s->r, r < 0 ? RDZV_TELL_FAILED : RDZV_TELL_NODES_WAITING, r < 0 ? r : 0,
			  waiting, msg);
	}
	free(msg);
}

bool
rdzv_sync_observe_summary(struct rdzv_sync *s, uint64_t gen, const struct rdzv_summary *sum)
{
	char *msg = NULL;
	int waiting;

	if (sum->closed) {
		return false;
	}
	if (gen <= s->st.gen) {
		return true; /* the copy knows better */
	}
	s->st.gen = gen;
	s->stale = true;
	if (s->running && !s->told &&
	    rdzv_round_check_summary(sum, s->round, s->world, s->rank, &waiting, &msg) > 0) {
		s->told = true;
		rdzv_tell(s->r, RDZV_TELL_NODES_WAITING, 0, waiting, msg);
	}
	free(msg);
	return true;
}

/* After any new copy: the round's watchers and the waiting node's log. */
static void
looked(struct rdzv_sync *s)
{
	if (s->next_active && !s->st.complete && s->st.n_participants > s->peak_count) {
		s->peak_count = s->st.n_participants;
	}
	rdzv_sync_observe(s);
	report_progress(s);
}

void
rdzv_sync_adopt(struct rdzv_sync *s, struct rdzv_state *st)
{
	const struct rdzv_settings *set = s->settings;
	int64_t now = rdzv_sync_wall(s);
	bool notable = false;
	size_t dropped;

	rdzv_state_release(&s->st);
	s->st = *st;
	rdzv_state_init(st);
	s->read_usec = now;
	s->stale = false;
	if (s->next_active && !s->st.complete && s->st.n_participants > s->peak_count) {
		s->peak_count = s->st.n_participants; /* before _sanitize drops any */
	}
	dropped = rdzv_sanitize(&s->st, set, now, &notable);
	s->notable = notable;
	s->dropped = dropped > 0;
	if (dropped > 0) {
		rdzv_record_step(s->r, NODE_STATE_RUNNING, "_sanitize",
				 "%zu node(s) have been removed from the rendezvous '%s' %s",
				 dropped, s->r->cfg->rdzv_id, s->ops->dead_why);
		rdzv_progress(s->r, "rendezvous '%s': %zu node%s removed, %s", s->r->cfg->rdzv_id,
			      dropped, dropped == 1 ? "" : "s", s->dead_progress);
	}
	looked(s);
}

void
rdzv_sync_written(struct rdzv_sync *s)
{
	s->read_usec = rdzv_sync_wall(s);
	s->notable = false;
	s->dropped = false;
	s->stale = false;
	looked(s);
}

void
rdzv_sync_assigned(struct rdzv_sync *s, int64_t round, int rank, int world, uint64_t gen)
{
	if (!s->op_active || s->op != RDZV_OP_JOIN) {
		return;
	}
	s->assigned = true;
	s->stale = true;
	s->round = round;
	s->rank = rank;
	s->world = world;
	s->st.gen = gen;
	if (!s->admission_seen) {
		rdzv_record_action(s->r, s->me->name, round, RDZV_ACTION_ADD_TO_PARTICIPANTS,
				   false);
		s->admission_seen = true;
	}
	rdzv_sync_end(s, 0, RDZV_ACTION_FINISH);
}

void
rdzv_sync_lost(struct rdzv_sync *s, struct rdzv_state *st)
{
	rdzv_sync_adopt(s, st);
	if (s->op_active) {
		/* The answer holds the fresh state, most likely with us admitted
		 * by the winner: decide again after a pause of our own. */
		s->lost = true;
		rdzv_sync_sleep(s, rdzv_sync_jitter(s, LOST_JITTER_USEC));
	}
}

void
rdzv_sync_wake(struct rdzv_sync *s)
{
	if (s->op_active && s->in_sync && !s->io_pending) {
		s->in_sync = false;
		s->lost = false;
		evtimer_del(s->timer);
		s->ops->read(s->store);
	}
}

void
rdzv_sync_timer_fire(struct rdzv_sync *s)
{
	if (s->op_active && s->in_sync && !s->io_pending) {
		s->in_sync = false;
		if (s->lost || !s->ops->timer_reads) {
			/* Only time passed: decide again on the local copy. */
			s->lost = false;
			rdzv_sync_step(s);
		} else {
			s->ops->read(s->store);
		}
	}
	if (s->ops->after_timer) {
		s->ops->after_timer(s->store);
	}
}

/* Write this node's own change a (applied to the copy), with the joiners the
 * store admits on the way. */
static void
take_action(struct rdzv_sync *s, enum rdzv_action a, const struct rdzv_ctx *ctx)
{
	bool joining = a == RDZV_ACTION_ADD_TO_PARTICIPANTS || a == RDZV_ACTION_ADD_TO_WAIT_LIST ||
		       a == RDZV_ACTION_ADD_TO_REDUNDANCY_LIST;
	bool was_complete = s->st.complete;

	if (joining && s->ops->await_admission && s->ops->await_admission(s->store, ctx)) {
		s->in_sync = true;
		return;
	}
	if (rdzv_apply(&s->st, a, ctx)) {
		s->notable = true;
	}
	if (a == RDZV_ACTION_REMOVE_FROM_REDUNDANCY_LIST) {
		/* A spare that may now join gets a fresh join timeout. */
		s->op_deadline = rdzv_sync_mono(s) + s->join_timeout;
		s->next_deadline = s->op_deadline;
	}
	rdzv_record_action(s->r, s->me->name, s->st.round, a, !was_complete && s->st.complete);
	s->admission_seen = s->admission_seen || joining;
	if (s->ops->admit) {
		s->ops->admit(s->store, &s->st, ctx, &s->notable);
	}
	rdzv_sync_write(s, a);
}

void
rdzv_sync_write(struct rdzv_sync *s, enum rdzv_action a)
{
	if (s->notable) {
		s->st.gen++;
	}
	s->ops->cas(s->store, a);
}

void
rdzv_sync_step(struct rdzv_sync *s)
{
	struct rdzv_ctx ctx;
	enum rdzv_action a;

	if (!s->op_active) {
		return;
	}
	ctx = rdzv_sync_ctx(s);
	if (s->ops->stamp) {
		s->ops->stamp(s->store, &s->st, ctx.now_wall);
	}
	a = rdzv_decide(s->op, &s->st, &ctx);
	if (a == RDZV_ACTION_KEEP_ALIVE && s->ops->keep_alive && s->ops->keep_alive(s->store)) {
		a = rdzv_decide(s->op, &s->st, &ctx);
	}
	if (s->op == RDZV_OP_JOIN && !s->admission_seen && s->ops->coordinated &&
	    s->ops->coordinated(s->store)) {
		/* The coordinator did our join's step: its events are ours. */
		s->admission_seen = rdzv_record_admission(s->r, &s->st, s->me);
	}
	if (rdzv_action_is_mutation(a)) {
		take_action(s, a, &ctx);
		return;
	}
	if (a == RDZV_ACTION_SYNC) {
		s->in_sync = true;
		if (s->ops->synced && !s->ops->synced(s->store)) {
			return; /* a read comes anyway */
		}
		rdzv_sync_sleep(s, (uint64_t)rdzv_next_wake_usec(s->op, &s->st, &ctx));
		return;
	}
	rdzv_sync_end(s, 0, a);
}

/* ---- the coordinator lease ------------------------------------------------ */

enum rdzv_lease_verdict
rdzv_lease_judge(const char *value, size_t len, const char *me, int64_t now_wall,
		 int64_t window_usec, int64_t *ret_cursor)
{
	char buf[512], node[256];
	long long stamp, cursor;
	int end = 0;

	*ret_cursor = 0;
	if (len == 0 || len >= sizeof(buf)) {
		return RDZV_LEASE_FREE;
	}
	memcpy(buf, value, len);
	buf[len] = '\0';
	if (sscanf(buf, "%255s %lld %lld%n", node, &stamp, &cursor, &end) != 3 ||
	    (size_t)end != len || cursor < 0) {
		return RDZV_LEASE_FREE;
	}
	*ret_cursor = cursor;
	if (strcmp(node, me) == 0) {
		return RDZV_LEASE_MINE;
	}
	return now_wall - stamp < window_usec ? RDZV_LEASE_HELD : RDZV_LEASE_FREE;
}

char *
rdzv_lease_format(const char *me, int64_t now_wall, int64_t cursor)
{
	return xasprintf("%s %" PRId64 " %" PRId64, me, now_wall, cursor);
}

void
rdzv_sync_exchange_start(const struct rdzv_sync *s, struct rdzv_exchange *x, const char *prefix)
{
	uint64_t now = now_usec();

	rdzv_exchange_start(
		x, &(struct rdzv_exchange_round){
			   .prefix = prefix,
			   .round = s->round,
			   .rank = s->rank,
			   .world = s->world,
			   .role = s->r->cfg->role,
			   .local_world_size = s->r->local_world_size,
			   .identical = rdzv_worker_identical(),
			   .timeout_usec = s->next_deadline > now ? s->next_deadline - now : 1,
		   });
}
