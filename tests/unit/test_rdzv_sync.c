/* The rendezvous operation loop (rdzv_sync.h) over an in-process store and a
 * fake clock: no sockets, no sleeps. Each row of the table starts nodes on
 * one shared state (optionally seeded in the store encoding), runs every
 * store completion and every due timer until nothing moves, and checks how
 * each node's operation ended and what the store holds: joins, last call,
 * the wait list, the redundancy list, keep-alive expiry, close, a lost
 * compare-and-set, and a store error at each step of a join. */
#include <errno.h>
#include <event2/event.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "config.h"
#include "rdzv.h"
#include "rdzv_sync.h"
#include "util.h"

#define S 1000000LL
#define MAX_NODES 6
#define WALL0 (1000 * S)
#define MONO0 (500 * S)

/* The one store every node of a row shares, and the clocks. */
struct world {
	struct event_base *base;
	char *value; /* encoded state; NULL: absent */
	size_t len;
	uint64_t version; /* the token: bumped by every write */
	int64_t wall;
	uint64_t mono;
	int calls;   /* store calls so far (reads and writes of node 0) */
	int fail_at; /* node 0's call number that fails (1-based), 0: none */
	int lost;    /* compare-and-sets that lost */
	int writes;  /* compare-and-sets that won */
};

enum io { IO_NONE, IO_READ, IO_CAS };

struct node {
	struct world *w;
	int idx;
	struct rdzv r;
	struct rdzv_sync s;
	struct rdzv_node me;
	uint64_t token;
	enum io io;
	bool fail; /* the I/O out fails */
	int n_done;
	int err;
	enum rdzv_action a;
};

static struct config cfg = {.rdzv_id = "job"};
static const struct rdzv_backend_ops fake_backend = {.name = "fake"};

static struct node *
node_of(void *arg)
{
	return arg;
}

/* Node 0's n-th call fails when the row says so. */
static bool
call_fails(struct node *n)
{
	if (n->idx != 0) {
		return false;
	}
	n->w->calls++;
	return n->w->calls == n->w->fail_at;
}

static void
fake_read(void *arg)
{
	struct node *n = node_of(arg);

	if (n->s.io_pending) {
		return;
	}
	n->s.io_pending = true;
	n->io = IO_READ;
	n->fail = call_fails(n);
}

static void
fake_cas(void *arg, enum rdzv_action a)
{
	struct node *n = node_of(arg);

	n->s.io_pending = true;
	n->io = IO_CAS;
	n->fail = call_fails(n);
}

static int64_t
fake_wall(void *arg)
{
	return node_of(arg)->w->wall;
}

static uint64_t
fake_mono(void *arg)
{
	return node_of(arg)->w->mono;
}

static const struct rdzv_store_ops fake_ops = {
	.read = fake_read,
	.cas = fake_cas,
	.wall = fake_wall,
	.mono = fake_mono,
	.timer_reads = true,
	.dead_why = "since they had no heartbeat",
};

static void
store_state(struct world *w, struct rdzv_state *st)
{
	if (!w->value) {
		rdzv_state_init(st);
		return;
	}
	assert_int_equal(rdzv_state_decode(w->value, w->len, st), 0);
}

/* Complete node n's I/O in flight, as the store would answer it. */
static void
complete(struct node *n)
{
	struct world *w = n->w;
	enum io io = n->io;
	struct rdzv_state st;

	n->io = IO_NONE;
	n->s.io_pending = false;
	if (n->fail) {
		rdzv_sync_fail(&n->s, -EIO);
		return;
	}
	if (io == IO_CAS && n->token == w->version) {
		free(w->value);
		w->value = rdzv_state_encode(&n->s.st, &w->len);
		n->token = ++w->version;
		w->writes++;
		rdzv_sync_written(&n->s);
		rdzv_sync_step(&n->s);
		return;
	}
	store_state(w, &st);
	n->token = w->version;
	if (io == IO_CAS) {
		w->lost++;
		rdzv_sync_lost(&n->s, &st);
		return;
	}
	rdzv_sync_adopt(&n->s, &st);
	rdzv_sync_step(&n->s);
}

static void
done_cb(void *arg, int err, enum rdzv_action a)
{
	struct node *n = node_of(arg);

	n->n_done++;
	n->err = err;
	n->a = a;
}

/* Run store completions (in node order: the first reader writes first) and
 * due timers until nothing is left or every operation waits past limit. */
static void
run(struct node *nodes, size_t n, uint64_t limit)
{
	for (int guard = 0; guard < 100000; guard++) {
		bool moved = false;
		uint64_t next = UINT64_MAX;

		for (size_t i = 0; i < n; i++) {
			if (nodes[i].io != IO_NONE) {
				complete(&nodes[i]);
				moved = true;
			}
		}
		if (moved) {
			continue;
		}
		for (size_t i = 0; i < n; i++) {
			struct rdzv_sync *s = &nodes[i].s;

			if (s->op_active && s->in_sync && s->wake_mono < next) {
				next = s->wake_mono;
			}
		}
		if (next == UINT64_MAX || next > MONO0 + limit) {
			return;
		}
		if (next > nodes[0].w->mono) {
			nodes[0].w->wall += (int64_t)(next - nodes[0].w->mono);
			nodes[0].w->mono = next;
		}
		for (size_t i = 0; i < n; i++) {
			struct rdzv_sync *s = &nodes[i].s;

			if (s->op_active && s->in_sync && s->wake_mono <= nodes[0].w->mono) {
				rdzv_sync_timer_fire(s);
			}
		}
	}
	fail_msg("the loop did not settle");
}

static const struct rdzv_settings base_settings = {
	.min_nodes = 2,
	.max_nodes = 3,
	.last_call_usec = 1 * S,
	.keep_alive_interval_usec = 5 * S,
	.keep_alive_max_attempt = 3,
};

struct sync_case {
	const char *name;
	int min_nodes, max_nodes;
	const char *seed;    /* the store's state before (%lld: WALL0 - 1 s), or NULL */
	const char *ops;     /* one letter per node: J join, C close, K keep-alive, E exit */
	uint64_t limit;      /* fake time the row may take */
	const char *done;    /* one per node, in any order: F finished, W still waiting,
			      * X closed error, E -EIO */
	int participants;    /* in the store at the end */
	int wait_list;       /* ditto */
	int redundancy_list; /* ditto */
	bool complete;
	bool closed;
	int64_t min_elapsed; /* fake time that must pass (last call) */
	int fail_at;         /* node 0's failing store call */
	int min_lost;        /* compare-and-sets that must have lost */
};

#define HDR(round, complete) "elasticd-rdzv 1 " #round " 0 " #complete " 0 -1\n"
#define FRESH "999000000"
#define DEAD "900000000"

static const struct sync_case cases[] = {
	{"three join, max reached", 2, 3, NULL, "JJJ", 10 * S, "FFF", 3, 0, 0, true, false, 0},
	{"two join, last call completes", 2, 3, NULL, "JJ", 10 * S, "FF", 2, 0, 0, true, false,
	 1 * S},
	{"one of min two waits", 2, 3, NULL, "J", 10 * S, "W", 1, 0, 0, false, false, 0},
	{"a crowd loses races and still completes", 3, 3, NULL, "JJJ", 10 * S, "FFF", 3, 0, 0, true,
	 false, 0, 0, 1},
	{"late joiner goes to the wait list", 2, 3,
	 HDR(0, 1) "p a_1_0 0\np b_1_0 1\nh a_1_0 " FRESH "\nh b_1_0 " FRESH "\n", "J", 1 * S, "W",
	 2, 1, 0, true, false, 0},
	{"fourth node of max three is redundant", 2, 3, NULL, "JJJJ", 10 * S, "FFFW", 3, 0, 1, true,
	 false, 0},
	{"dead participant expires", 2, 3, HDR(0, 0) "p dead_1_0 0\nh dead_1_0 " DEAD "\n", "J",
	 1 * S, "W", 1, 0, 0, false, false, 0},
	{"close marks the state closed", 2, 3, NULL, "C", 1 * S, "F", 0, 0, 0, false, true, 0},
	{"join after close fails closed", 2, 3, HDR(0, 0) "", "CJ", 1 * S, "FX", 0, 0, 0, false,
	 true, 0},
	{"exit of a non-member finishes", 2, 3, HDR(0, 1) "p a_1_0 0\nh a_1_0 " FRESH "\n", "E",
	 1 * S, "F", 1, 0, 0, true, false, 0},
	{"keep-alive of a member refreshes", 2, 3, HDR(0, 1) "p n0_1_0 0\nh n0_1_0 994000000\n",
	 "K", 1 * S, "F", 1, 0, 0, true, false, 0},
};

static void
nodes_start(struct world *w, struct node *nodes, size_t n, const struct sync_case *c,
	    struct rdzv_settings *set)
{
	*set = base_settings;
	set->min_nodes = c->min_nodes;
	set->max_nodes = c->max_nodes;
	for (size_t i = 0; i < n; i++) {
		struct node *nd = &nodes[i];
		char name[32];

		snprintf(name, sizeof(name), "n%zu_1_0", i);
		nd->w = w;
		nd->idx = (int)i;
		nd->r = (struct rdzv){.ops = &fake_backend, .base = w->base, .cfg = &cfg};
		assert_int_equal(rdzv_node_parse(&nd->me, name, strlen(name)), 0);
		rdzv_sync_init(&nd->s, &nd->r, &fake_ops, nd, set, &nd->me, 600 * S);
	}
	for (size_t i = 0; i < n; i++) {
		enum rdzv_op op = c->ops[i] == 'J'   ? RDZV_OP_JOIN
				  : c->ops[i] == 'C' ? RDZV_OP_CLOSE
				  : c->ops[i] == 'K' ? RDZV_OP_KEEP_ALIVE
						     : RDZV_OP_EXIT;

		if (op == RDZV_OP_JOIN) {
			rdzv_sync_next_begin(&nodes[i].s);
		}
		rdzv_sync_start(&nodes[i].s, op, w->mono + 600 * S, done_cb);
		if (c->ops[i] == 'C' && c->ops[i + 1]) {
			run(nodes, i + 1, c->limit); /* closed before the others start */
		}
	}
}

static void
check_done(const struct node *nd, char want)
{
	switch (want) {
	case 'F':
		assert_int_equal(nd->n_done, 1);
		assert_int_equal(nd->err, 0);
		assert_int_equal(nd->a, RDZV_ACTION_FINISH);
		break;
	case 'W':
		assert_int_equal(nd->n_done, 0);
		assert_true(nd->s.op_active);
		break;
	case 'X':
		assert_int_equal(nd->n_done, 1);
		assert_int_equal(nd->a, RDZV_ACTION_ERROR_CLOSED);
		break;
	default: /* 'E' */
		assert_int_equal(nd->n_done, 1);
		assert_int_equal(nd->err, -EIO);
		assert_false(nd->s.op_active);
		break;
	}
}

/* How node nd's operation stands: check_done's letters. */
static char
outcome(const struct node *nd)
{
	if (nd->n_done == 0) {
		return 'W';
	}
	if (nd->err == -EIO) {
		return 'E';
	}
	return nd->a == RDZV_ACTION_FINISH ? 'F' : 'X';
}

static void
run_case(const struct sync_case *c, bool verbose)
{
	struct world w = {.base = event_base_new(), .wall = WALL0, .mono = MONO0};
	struct node nodes[MAX_NODES] = {0};
	size_t n = strlen(c->ops);
	struct rdzv_settings set;
	struct rdzv_state st;

	if (verbose) {
		print_message("case: %s\n", c->name);
	}
	w.fail_at = c->fail_at;
	if (c->seed) {
		w.value = xstrdup(c->seed);
		w.len = strlen(c->seed);
	}
	nodes_start(&w, nodes, n, c, &set);
	run(nodes, n, c->limit);
	for (size_t i = 0; i < n; i++) {
		/* Which node of a crowd ends where is the race's: the counts
		 * are the row's. */
		size_t want = 0, got = 0;
		char o = outcome(&nodes[i]);

		for (size_t k = 0; k < n; k++) {
			want += c->done[k] == o;
			got += outcome(&nodes[k]) == o;
		}
		assert_int_equal(got, want);
		check_done(&nodes[i], o);
	}
	store_state(&w, &st);
	if (!c->fail_at) {
		assert_int_equal(st.n_participants, c->participants);
		assert_int_equal(st.n_wait_list, c->wait_list);
		assert_int_equal(st.n_redundancy_list, c->redundancy_list);
		assert_int_equal(st.complete, c->complete);
		assert_int_equal(st.closed, c->closed);
		assert_true(w.mono - MONO0 >= (uint64_t)c->min_elapsed);
		assert_true(w.lost >= c->min_lost);
	}
	rdzv_state_release(&st);
	for (size_t i = 0; i < n; i++) {
		rdzv_sync_release(&nodes[i].s);
		rdzv_node_release(&nodes[i].me);
	}
	free(w.value);
	event_base_free(w.base);
}

static void
test_cases(void **state)
{
	for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
		run_case(&cases[i], true);
	}
}

/* A store error at each of node 0's calls of a two-node join ends node 0's
 * operation once with the error, and never leaves I/O behind. */
static void
test_store_error_each_step(void **state)
{
	struct sync_case c = {"store error", 2, 2, NULL, "JJ", 10 * S, "EW", 0};
	int steps;

	/* How many calls node 0 makes without a failure. */
	{
		struct world w = {.base = event_base_new(), .wall = WALL0, .mono = MONO0};
		struct node nodes[2] = {0};
		struct rdzv_settings set;

		nodes_start(&w, nodes, 2, &c, &set);
		run(nodes, 2, c.limit);
		steps = w.calls;
		assert_int_equal(nodes[0].n_done, 1);
		for (size_t i = 0; i < 2; i++) {
			rdzv_sync_release(&nodes[i].s);
			rdzv_node_release(&nodes[i].me);
		}
		free(w.value);
		event_base_free(w.base);
	}
	assert_true(steps >= 2);
	for (int k = 1; k <= steps; k++) {
		struct world w = {.base = event_base_new(), .wall = WALL0, .mono = MONO0};
		struct node nodes[2] = {0};
		struct rdzv_settings set;

		w.fail_at = k;
		nodes_start(&w, nodes, 2, &c, &set);
		run(nodes, 2, c.limit);
		check_done(&nodes[0], 'E');
		assert_int_equal(nodes[0].io, IO_NONE);
		for (size_t i = 0; i < 2; i++) {
			rdzv_sync_release(&nodes[i].s);
			rdzv_node_release(&nodes[i].me);
		}
		free(w.value);
		event_base_free(w.base);
	}
}

/* An assignment ends a join without a read of the state: the round, rank
 * and world are the coordinator's, the copy is stale until the next read. */
static void
test_assigned(void **state)
{
	struct world w = {.base = event_base_new(), .wall = WALL0, .mono = MONO0};
	struct sync_case c = {"assigned", 2, 3, NULL, "J", S, "W"};
	struct node nodes[1] = {0};
	struct rdzv_settings set;
	struct rdzv_state st;
	int reads;

	nodes_start(&w, nodes, 1, &c, &set);
	run(nodes, 1, c.limit);
	reads = w.calls;
	assert_true(nodes[0].s.op_active);
	rdzv_sync_assigned(&nodes[0].s, 7, 41, 1000, 12);
	assert_int_equal(nodes[0].n_done, 1);
	assert_int_equal(nodes[0].a, RDZV_ACTION_FINISH);
	assert_int_equal(nodes[0].s.round, 7);
	assert_int_equal(nodes[0].s.rank, 41);
	assert_int_equal(nodes[0].s.world, 1000);
	assert_int_equal(nodes[0].s.st.gen, 12);
	assert_true(nodes[0].s.assigned);
	assert_true(nodes[0].s.stale);
	assert_int_equal(w.calls, reads); /* no store call */
	/* Only a JOIN ends so; the next copy read is fresh again. */
	rdzv_sync_assigned(&nodes[0].s, 8, 0, 2, 13);
	assert_int_equal(nodes[0].n_done, 1);
	store_state(&w, &st);
	rdzv_sync_adopt(&nodes[0].s, &st);
	assert_false(nodes[0].s.stale);
	rdzv_sync_release(&nodes[0].s);
	rdzv_node_release(&nodes[0].me);
	free(w.value);
	event_base_free(w.base);
}

static void
waiting_cb(int n, const char *why, void *arg)
{
	int *told = arg;

	*told = n + 1;
}

/* A running node hears of a change from a summary (a gen key), not the
 * state: a newer one leaves the copy stale with its gen and tells the agent
 * once that the round must re-form; an older one changes nothing; a closed
 * rendezvous is the state's to say (who closed it). */
static void
test_observe_summary(void **state)
{
	struct world w = {.base = event_base_new(), .wall = WALL0, .mono = MONO0};
	struct sync_case c = {"summary", 2, 3, NULL, "J", S, "W"};
	struct node nodes[1] = {0};
	struct rdzv_sync *s = &nodes[0].s;
	struct rdzv_settings set;
	struct rdzv_summary sum = {.round = 7, .complete = true, .n_participants = 1000};
	int told = 0;

	nodes_start(&w, nodes, 1, &c, &set);
	run(nodes, 1, c.limit);
	rdzv_sync_assigned(s, 7, 41, 1000, 12);
	nodes[0].r.cb = (struct rdzv_callbacks){.nodes_waiting = waiting_cb, .arg = &told};
	s->running = true;
	assert_true(rdzv_sync_observe_summary(s, 13, &sum)); /* all there */
	assert_int_equal(s->st.gen, 13);
	assert_true(s->stale);
	assert_false(s->told);
	sum.n_wait_list = 2;
	assert_true(rdzv_sync_observe_summary(s, 13, &sum)); /* not newer */
	assert_false(s->told);
	sum.n_wait_list = 0;
	sum.n_participants = 999;
	assert_true(rdzv_sync_observe_summary(s, 14, &sum)); /* a member left */
	assert_true(s->told);
	assert_int_equal(s->st.gen, 14);
	event_base_loop(w.base, EVLOOP_NONBLOCK);
	assert_int_equal(told, 1); /* n 0: a member left */
	sum.closed = true;
	assert_false(rdzv_sync_observe_summary(s, 15, &sum));
	assert_int_equal(s->st.gen, 14);
	rdzv_sync_release(s);
	rdzv_node_release(&nodes[0].me);
	free(w.value);
	event_base_free(w.base);
}

/* The lost-race pause: below 2 ms, and two nodes draw different pauses. */
static void
test_jitter(void **state)
{
	struct event_base *base = event_base_new();
	struct rdzv r = {.ops = &fake_backend, .base = base, .cfg = &cfg};
	struct rdzv_node a, b;
	struct rdzv_sync sa, sb;
	int same = 0;

	assert_int_equal(rdzv_node_parse(&a, "a_1_0", 5), 0);
	assert_int_equal(rdzv_node_parse(&b, "b_1_0", 5), 0);
	rdzv_sync_init(&sa, &r, &fake_ops, NULL, &base_settings, &a, S);
	rdzv_sync_init(&sb, &r, &fake_ops, NULL, &base_settings, &b, S);
	for (int i = 0; i < 100; i++) {
		uint64_t ja = rdzv_sync_jitter(&sa, 2000), jb = rdzv_sync_jitter(&sb, 2000);

		assert_true(ja < 2000);
		assert_true(jb < 2000);
		same += ja == jb;
	}
	assert_true(same < 10);
	rdzv_sync_release(&sa);
	rdzv_sync_release(&sb);
	rdzv_node_release(&a);
	rdzv_node_release(&b);
	event_base_free(base);
}

/* The coordinator lease's verdicts (rdzv_lease_judge): absent, malformed or
 * stale is free, our own is ours whatever its age, another node's is held
 * within the window (keep_alive_interval x keep_alive_max_attempt). */
static void
test_lease_judge(void **state)
{
	static const struct {
		const char *value, *me;
		int64_t now;
		enum rdzv_lease_verdict want;
		int64_t cursor;
	} rows[] = {
		{"", "a_1_0", WALL0, RDZV_LEASE_FREE, 0},
		{"a_1_0 1000000000 7", "a_1_0", WALL0, RDZV_LEASE_MINE, 7},
		{"a_1_0 1 7", "a_1_0", WALL0, RDZV_LEASE_MINE, 7},
		{"b_1_0 1000000000 3", "a_1_0", WALL0, RDZV_LEASE_HELD, 3},
		{"b_1_0 1000000000 3", "a_1_0", WALL0 + 15 * S - 1, RDZV_LEASE_HELD, 3},
		{"b_1_0 1000000000 3", "a_1_0", WALL0 + 15 * S, RDZV_LEASE_FREE, 3},
		{"b_1_0 0 12", "a_1_0", WALL0, RDZV_LEASE_FREE, 12},      /* released */
		{"b_1_0 1000000000", "a_1_0", WALL0, RDZV_LEASE_FREE, 0}, /* malformed */
		{"b_1_0 1000000000 -1", "a_1_0", WALL0, RDZV_LEASE_FREE, 0},
		{"b_1_0 1000000000 3 x", "a_1_0", WALL0, RDZV_LEASE_FREE, 0},
		{"b_1_0", "a_1_0", WALL0, RDZV_LEASE_FREE, 0},
	};

	for (size_t i = 0; i < ARRAY_SIZE(rows); i++) {
		int64_t cursor = -5;

		assert_int_equal(rdzv_lease_judge(rows[i].value, strlen(rows[i].value), rows[i].me,
						  rows[i].now, 15 * S, &cursor),
				 rows[i].want);
		assert_int_equal(cursor, rows[i].cursor);
	}
}

/* TCPStore's compare_set on one key: set when it holds expected (an absent
 * key holds ""), answer what it holds then. */
static void
lease_cas(char **key, const char *expected, const char *desired)
{
	if (strcmp(*key ? *key : "", expected) == 0) {
		free(*key);
		*key = xstrdup(desired);
	}
}

/* One node's turn as rdzv_c10d_lease.c takes it: the holder renews with its
 * cursor, any other node asks (a compare-and-set from "") and takes a stale
 * lease over from the value it saw, keeping its cursor. Returns the verdict
 * it ends with. */
static enum rdzv_lease_verdict
lease_turn(char **key, const char *me, int64_t now, const char *last_seen, int64_t cursor)
{
	char *v = rdzv_lease_format(me, now, cursor);
	enum rdzv_lease_verdict verdict;
	int64_t c;

	lease_cas(key, last_seen ? last_seen : "", v);
	free(v);
	verdict = rdzv_lease_judge(*key, strlen(*key), me, now, 15 * S, &c);
	if (verdict == RDZV_LEASE_FREE) {
		char *seen = xstrdup(*key);

		v = rdzv_lease_format(me, now, c);
		lease_cas(key, seen, v);
		free(v);
		free(seen);
		verdict = rdzv_lease_judge(*key, strlen(*key), me, now, 15 * S, &c);
	}
	return verdict;
}

/* An election: the first node takes an absent lease, the others see it
 * held; the holder stops renewing (SIGKILL) and after the window exactly one
 * node takes it over, from the holder's cursor; the old holder, back,
 * finds it lost. */
static void
test_lease_election(void **state)
{
	char *key = NULL, *a_last;
	int64_t cursor;

	assert_int_equal(lease_turn(&key, "a_1_0", WALL0, NULL, 0), RDZV_LEASE_MINE);
	assert_int_equal(lease_turn(&key, "b_1_0", WALL0 + S, NULL, 0), RDZV_LEASE_HELD);
	/* a renews every interval, with the requests it read so far. */
	a_last = xstrdup(key);
	assert_int_equal(lease_turn(&key, "a_1_0", WALL0 + 5 * S, a_last, 42), RDZV_LEASE_MINE);
	free(a_last);
	a_last = xstrdup(key);
	assert_int_equal(lease_turn(&key, "b_1_0", WALL0 + 19 * S, NULL, 0), RDZV_LEASE_HELD);
	/* a is gone: a window after its last renewal, b takes over, c sees b. */
	assert_int_equal(lease_turn(&key, "b_1_0", WALL0 + 20 * S, NULL, 0), RDZV_LEASE_MINE);
	assert_int_equal(
		rdzv_lease_judge(key, strlen(key), "b_1_0", WALL0 + 20 * S, 15 * S, &cursor),
		RDZV_LEASE_MINE);
	assert_int_equal(cursor, 42);
	assert_int_equal(lease_turn(&key, "c_1_0", WALL0 + 20 * S, NULL, 0), RDZV_LEASE_HELD);
	/* a's renewal from its last value fails: it steps down. */
	assert_int_equal(lease_turn(&key, "a_1_0", WALL0 + 21 * S, a_last, 50), RDZV_LEASE_HELD);
	free(a_last);
	free(key);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_cases),
		cmocka_unit_test(test_store_error_each_step),
		cmocka_unit_test(test_jitter),
		cmocka_unit_test(test_assigned),
		cmocka_unit_test(test_lease_judge),
		cmocka_unit_test(test_lease_election),
		cmocka_unit_test(test_observe_summary),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
