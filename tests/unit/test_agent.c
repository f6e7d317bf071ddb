/* test_agent.c — the agent's decision "the worker group has stopped; what
 * now?" and the states it reports, as tables: (phase, stop reason, outcome,
 * counters, settings) -> (action, reason, restart spent?, exit status). A new
 * restart policy adds rows here. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <signal.h>
#include <stdio.h>
#include <string.h>

#include "agent_decide.h"
#include "util.h"

#define P(x) AGENT_PHASE_##x
#define R(x) AGENT_REASON_##x
#define O(x) AGENT_OUTCOME_##x
#define A(x) AGENT_ACTION_##x

#define SEC(s) ((uint64_t)(s)*1000000u)
#define BACKOFF(min, max) .backoff_min_usec = SEC(min), .backoff_max_usec = SEC(max)
/* A worker failed with left of 10 restarts left. */
#define FAILED_IN(left) P(STOPPING_GROUP), R(WORKER_FAILED), O(FAILED), 0, (left), 10

struct decide_case {
	const char *name;
	struct agent_decide_in in;
	struct agent_decision want;
};

static const struct decide_case decide_cases[] = {
	/* Success. */
	{"all exited 0: exit barrier, exit 0",
	 {P(RUNNING), R(NONE), O(SUCCEEDED), 0, 3, 3},
	 {A(FINISH), R(SUCCEEDED), false, 0}},
	{"all exited 0 with no restarts left",
	 {P(RUNNING), R(NONE), O(SUCCEEDED), 0, 0, 0},
	 {A(FINISH), R(SUCCEEDED), false, 0}},
	/* Failures and --max-restarts. */
	{"a worker failed, restarts left: restart, spend one",
	 {P(STOPPING_GROUP), R(WORKER_FAILED), O(FAILED), 0, 3, 3},
	 {A(RESTART), R(WORKER_FAILED), true, 0, .failure_streak = 1}},
	{"a worker failed, the last restart left",
	 {P(STOPPING_GROUP), R(WORKER_FAILED), O(FAILED), 0, 1, 3},
	 {A(RESTART), R(WORKER_FAILED), true, 0, .failure_streak = 1}},
	{"a worker failed, no restart left: report, exit 1",
	 {P(STOPPING_GROUP), R(WORKER_FAILED), O(FAILED), 0, 0, 3},
	 {A(FAIL), R(EXHAUSTED), false, 1}},
	{"a worker failed with --max-restarts 0",
	 {P(STOPPING_GROUP), R(WORKER_FAILED), O(FAILED), 0, 0, 0},
	 {A(FAIL), R(EXHAUSTED), false, 1}},
	{"UNHEALTHY counts as FAILED",
	 {P(STOPPING_GROUP), R(WORKER_FAILED), O(FAILED), 0, 2, 2},
	 {A(RESTART), R(WORKER_FAILED), true, 0, .failure_streak = 1}},
	/* Re-forms: free. */
	{"nodes waiting: re-form for free",
	 {P(STOPPING_GROUP), R(MEMBERSHIP), O(STOPPED), 0, 3, 3},
	 {A(RESTART), R(MEMBERSHIP), false, 0}},
	{"nodes waiting with no restart left: still free",
	 {P(STOPPING_GROUP), R(MEMBERSHIP), O(STOPPED), 0, 0, 0},
	 {A(RESTART), R(MEMBERSHIP), false, 0}},
	{"restart requested: re-form for free",
	 {P(STOPPING_GROUP), R(REQUESTED), O(STOPPED), 0, 0, 2},
	 {A(RESTART), R(REQUESTED), false, 0}},
	{"stopped without a reason: a membership change",
	 {P(STOPPING_GROUP), R(NONE), O(STOPPED), 0, 1, 1},
	 {A(RESTART), R(MEMBERSHIP), false, 0}},
	/* The rendezvous failed under the group. */
	{"rendezvous failed while the group ran: exit 1",
	 {P(STOPPING_GROUP), R(RDZV_FAILED), O(STOPPED), 0, 3, 3},
	 {A(EXIT), R(RDZV_FAILED), false, 1}},
	{"rendezvous failed after a worker failed: exit 1, no restart",
	 {P(STOPPING_GROUP), R(RDZV_FAILED), O(FAILED), 0, 3, 3},
	 {A(EXIT), R(RDZV_FAILED), false, 1}},
	{"rendezvous failed after success: exit 1",
	 {P(STOPPING_GROUP), R(RDZV_FAILED), O(SUCCEEDED), 0, 3, 3},
	 {A(EXIT), R(RDZV_FAILED), false, 1}},
	/* Signals win over everything. */
	{"SIGTERM: exit 143",
	 {P(STOPPING_SIGNAL), R(SIGNAL), O(STOPPED), SIGTERM, 3, 3},
	 {A(EXIT), R(SIGNAL), false, 128 + SIGTERM}},
	{"SIGINT after a failure: exit 130, no restart",
	 {P(STOPPING_SIGNAL), R(SIGNAL), O(FAILED), SIGINT, 3, 3},
	 {A(EXIT), R(SIGNAL), false, 128 + SIGINT}},
	{"SIGHUP after success: exit 129, no barrier",
	 {P(STOPPING_SIGNAL), R(SIGNAL), O(SUCCEEDED), SIGHUP, 0, 0},
	 {A(EXIT), R(SIGNAL), false, 128 + SIGHUP}},
	{"signal after the rendezvous failed: the signal's status",
	 {P(STOPPING_SIGNAL), R(RDZV_FAILED), O(STOPPED), SIGQUIT, 0, 0},
	 {A(EXIT), R(SIGNAL), false, 128 + SIGQUIT}},
	/* --restart-backoff MIN:MAX: MIN * 2^(streak-1) + jitter * half of it,
	 * at most MAX; re-forms never wait. */
	{"backoff 1:60, the first failure: 1 s",
	 {FAILED_IN(3), BACKOFF(1, 60)},
	 {A(RESTART), R(WORKER_FAILED), true, 0, SEC(1), 1}},
	{"backoff 1:60, the second in a row: 2 s",
	 {FAILED_IN(3), BACKOFF(1, 60), .failure_streak = 1},
	 {A(RESTART), R(WORKER_FAILED), true, 0, SEC(2), 2}},
	{"backoff 1:60, the fourth in a row: 8 s",
	 {FAILED_IN(3), BACKOFF(1, 60), .failure_streak = 3},
	 {A(RESTART), R(WORKER_FAILED), true, 0, SEC(8), 4}},
	{"backoff 1:60, the eleventh in a row: capped at 60 s",
	 {FAILED_IN(3), BACKOFF(1, 60), .failure_streak = 10},
	 {A(RESTART), R(WORKER_FAILED), true, 0, SEC(60), 11}},
	{"backoff jitter adds up to half: 1 s + 0.5 * 0.5 s",
	 {FAILED_IN(3), BACKOFF(1, 60), .jitter = 0.5},
	 {A(RESTART), R(WORKER_FAILED), true, 0, 1250000, 1}},
	{"backoff jitter never goes past MAX",
	 {FAILED_IN(3), BACKOFF(1, 60), .failure_streak = 6, .jitter = 0.9},
	 {A(RESTART), R(WORKER_FAILED), true, 0, SEC(60), 7}},
	{"backoff 0.2:0.8, the third in a row: 0.8 s",
	 {FAILED_IN(3), .backoff_min_usec = 200000, .backoff_max_usec = 800000,
	  .failure_streak = 2},
	 {A(RESTART), R(WORKER_FAILED), true, 0, 800000, 3}},
	{"an attempt that ran 10 * MAX starts the backoff over",
	 {FAILED_IN(3), BACKOFF(1, 60), .failure_streak = 5, .attempt_usec = SEC(600)},
	 {A(RESTART), R(WORKER_FAILED), true, 0, SEC(1), 1}},
	{"an attempt just short of 10 * MAX does not",
	 {FAILED_IN(3), BACKOFF(1, 60), .failure_streak = 5, .attempt_usec = SEC(599)},
	 {A(RESTART), R(WORKER_FAILED), true, 0, SEC(32), 6}},
	{"no backoff: at once, the streak still counted",
	 {FAILED_IN(3), .failure_streak = 4},
	 {A(RESTART), R(WORKER_FAILED), true, 0, 0, 5}},
	{"a membership re-form does not wait, and keeps the streak",
	 {P(STOPPING_GROUP), R(MEMBERSHIP), O(STOPPED), 0, 3, 3, BACKOFF(1, 60),
	  .failure_streak = 3},
	 {A(RESTART), R(MEMBERSHIP), false, 0, 0, 3}},
	{"a requested restart does not wait",
	 {P(STOPPING_GROUP), R(REQUESTED), O(STOPPED), 0, 3, 3, BACKOFF(1, 60),
	  .failure_streak = 3},
	 {A(RESTART), R(REQUESTED), false, 0, 0, 3}},
	/* --restart-window N/W. */
	{"window 3: two restarts in it, a third is allowed",
	 {FAILED_IN(9), .window_max = 3, .window_restarts = 2},
	 {A(RESTART), R(WORKER_FAILED), true, 0, .failure_streak = 1}},
	{"window 3: three restarts in it: restarts exhausted, exit 1",
	 {FAILED_IN(9), .window_max = 3, .window_restarts = 3},
	 {A(FAIL), R(WINDOW), false, 1}},
	{"window 3 full, detailed exit codes: exit 3",
	 {FAILED_IN(9), .window_max = 3, .window_restarts = 3, .detailed_exit = true},
	 {A(FAIL), R(WINDOW), false, AGENT_EXIT_RESTARTS_EXHAUSTED}},
	{"no window: the count does not matter",
	 {FAILED_IN(9), .window_restarts = 50},
	 {A(RESTART), R(WORKER_FAILED), true, 0, .failure_streak = 1}},
	{"window full: a membership re-form is still free",
	 {P(STOPPING_GROUP), R(MEMBERSHIP), O(STOPPED), 0, 3, 3, .window_max = 1,
	  .window_restarts = 1},
	 {A(RESTART), R(MEMBERSHIP), false, 0}},
	{"no restart left, detailed exit codes: exit 3",
	 {FAILED_IN(0), .detailed_exit = true},
	 {A(FAIL), R(EXHAUSTED), false, AGENT_EXIT_RESTARTS_EXHAUSTED}},
	/* --no-restart-exit-codes. */
	{"a no-restart exit code with restarts left: the job ends, exit 1",
	 {FAILED_IN(3), .no_restart_code = true},
	 {A(FAIL), R(NO_RESTART_CODE), false, 1}},
	{"a no-restart exit code, detailed: exit 4",
	 {FAILED_IN(3), .no_restart_code = true, .detailed_exit = true},
	 {A(FAIL), R(NO_RESTART_CODE), false, AGENT_EXIT_NO_RESTART_CODE}},
	{"a no-restart exit code wins over the window and the budget",
	 {FAILED_IN(0), .no_restart_code = true, .window_max = 1, .window_restarts = 1,
	  .progress_attempts = 1, .stalled_attempts = 1, .detailed_exit = true},
	 {A(FAIL), R(NO_RESTART_CODE), false, AGENT_EXIT_NO_RESTART_CODE}},
	{"a no-restart exit code under a signal: the signal's status",
	 {P(STOPPING_SIGNAL), R(SIGNAL), O(FAILED), SIGTERM, 3, 3, .no_restart_code = true,
	  .detailed_exit = true},
	 {A(EXIT), R(SIGNAL), false, 128 + SIGTERM}},
	/* The no-progress rule (--progress-file, --progress-attempts K). */
	{"K 3, two attempts stalled: restart",
	 {FAILED_IN(3), .progress_attempts = 3, .stalled_attempts = 2},
	 {A(RESTART), R(WORKER_FAILED), true, 0, .failure_streak = 1}},
	{"K 3, three attempts stalled: the job ends, exit 1",
	 {FAILED_IN(3), .progress_attempts = 3, .stalled_attempts = 3},
	 {A(FAIL), R(NO_PROGRESS), false, 1}},
	{"K 3, three stalled, detailed: exit 5",
	 {FAILED_IN(3), .progress_attempts = 3, .stalled_attempts = 3, .detailed_exit = true},
	 {A(FAIL), R(NO_PROGRESS), false, AGENT_EXIT_NO_PROGRESS}},
	{"no-progress rule off: stalled attempts do not matter",
	 {FAILED_IN(3), .stalled_attempts = 30},
	 {A(RESTART), R(WORKER_FAILED), true, 0, .failure_streak = 1}},
	{"no progress and no restart left: no progress wins",
	 {FAILED_IN(0), .progress_attempts = 1, .stalled_attempts = 1, .detailed_exit = true},
	 {A(FAIL), R(NO_PROGRESS), false, AGENT_EXIT_NO_PROGRESS}},
	/* Detailed exit codes leave the others alone. */
	{"detailed: success is 0",
	 {P(RUNNING), R(NONE), O(SUCCEEDED), 0, 3, 3, .detailed_exit = true},
	 {A(FINISH), R(SUCCEEDED), false, 0}},
	{"detailed: a signal is 128 + n",
	 {P(STOPPING_SIGNAL), R(SIGNAL), O(STOPPED), SIGINT, 3, 3, .detailed_exit = true},
	 {A(EXIT), R(SIGNAL), false, 128 + SIGINT}},
	{"detailed: the rendezvous failed is 1",
	 {P(STOPPING_GROUP), R(RDZV_FAILED), O(STOPPED), 0, 3, 3, .detailed_exit = true},
	 {A(EXIT), R(RDZV_FAILED), false, 1}},
	/* Drain (the drain verb): leave the job, never restart. */
	{"drained: the workers exited 0 after the notice, exit 0",
	 {P(DRAINING), R(DRAIN), O(SUCCEEDED), 0, 3, 3},
	 {A(EXIT), R(DRAIN), false, 0}},
	{"drained while a re-form stopped the group: exit 0",
	 {P(DRAINING), R(DRAIN), O(STOPPED), 0, 3, 3},
	 {A(EXIT), R(DRAIN), false, 0}},
	{"drained with no restart left: still exit 0, nothing spent",
	 {P(DRAINING), R(DRAIN), O(SUCCEEDED), 0, 0, 3, .detailed_exit = true},
	 {A(EXIT), R(DRAIN), false, 0}},
	{"drained, a worker failed after the notice: exit 1, no restart",
	 {P(DRAINING), R(DRAIN), O(FAILED), 0, 3, 3},
	 {A(EXIT), R(DRAIN_FAILED), false, 1}},
	{"drained, a worker outlived the grace and was stopped: exit 1",
	 {P(DRAINING), R(DRAIN_FAILED), O(STOPPED), 0, 3, 3},
	 {A(EXIT), R(DRAIN_FAILED), false, 1}},
	{"drained, a no-restart exit code does not matter",
	 {P(DRAINING), R(DRAIN), O(FAILED), 0, 3, 3, .no_restart_code = true},
	 {A(EXIT), R(DRAIN_FAILED), false, 1}},
	{"drained, group still HEALTHY after stopping: a bug, exit 1",
	 {P(DRAINING), R(DRAIN), O(UNEXPECTED), 0, 3, 3},
	 {A(EXIT), R(UNEXPECTED), false, 1}},
	/* Exclusion (the exclude verb): leave the job with the bad-node status,
	 * whatever the workers did and whatever restarts remain. */
	{"excluded: the group stopped, exit 6, nothing spent",
	 {P(STOPPING_GROUP), R(EXCLUDED), O(STOPPED), 0, 3, 3},
	 {A(EXIT), R(EXCLUDED), false, AGENT_EXIT_NODE_EXCLUDED}},
	{"excluded while a worker failed: still exit 6, no restart",
	 {P(STOPPING_GROUP), R(EXCLUDED), O(FAILED), 0, 3, 3},
	 {A(EXIT), R(EXCLUDED), false, AGENT_EXIT_NODE_EXCLUDED}},
	{"excluded as every worker exited 0: exit 6, no exit barrier",
	 {P(STOPPING_GROUP), R(EXCLUDED), O(SUCCEEDED), 0, 3, 3},
	 {A(EXIT), R(EXCLUDED), false, AGENT_EXIT_NODE_EXCLUDED}},
	{"excluded, a no-restart exit code does not matter",
	 {P(STOPPING_GROUP), R(EXCLUDED), O(FAILED), 0, 0, 3, .no_restart_code = true},
	 {A(EXIT), R(EXCLUDED), false, AGENT_EXIT_NODE_EXCLUDED}},
	{"excluded: 6 without --exit-codes detailed too",
	 {P(STOPPING_GROUP), R(EXCLUDED), O(STOPPED), 0, 3, 3, .detailed_exit = false},
	 {A(EXIT), R(EXCLUDED), false, 6}},
	{"a signal while excluded: the signal wins",
	 {P(STOPPING_SIGNAL), R(SIGNAL), O(STOPPED), SIGTERM, 3, 3},
	 {A(EXIT), R(SIGNAL), false, 128 + SIGTERM}},
	/* Quarantine (--quarantine F/W): this node's F-th failure within W. */
	{"quarantine: the F-th failure in the window leaves for a cooldown, nothing spent",
	 {P(RUNNING), R(NONE), O(FAILED), 0, 3, 3, .quarantine_failures = 2, .quarantine_max = 2},
	 {A(QUARANTINE), R(QUARANTINED), false, 0}},
	{"quarantine: fewer failures than F restart as usual",
	 {P(RUNNING), R(NONE), O(FAILED), 0, 3, 3, .quarantine_failures = 1, .quarantine_max = 2},
	 {A(RESTART), R(WORKER_FAILED), true, 0, 0, 1}},
	{"quarantine rather than end the job with the last restart",
	 {P(RUNNING), R(NONE), O(FAILED), 0, 0, 3, .quarantine_failures = 3, .quarantine_max = 3,
	  .detailed_exit = true},
	 {A(QUARANTINE), R(QUARANTINED), false, 0}},
	{"quarantine with --quarantine-action exit: exit 6",
	 {P(RUNNING), R(NONE), O(FAILED), 0, 3, 3, .quarantine_failures = 2, .quarantine_max = 2,
	  .quarantine_exit = true},
	 {A(EXIT), R(QUARANTINED), false, AGENT_EXIT_NODE_EXCLUDED}},
	{"quarantine: a hang counts as a failure",
	 {P(STOPPING_GROUP), R(HANG), O(FAILED), 0, 3, 3, .quarantine_failures = 2,
	  .quarantine_max = 2},
	 {A(QUARANTINE), R(QUARANTINED), false, 0}},
	{"quarantine off: F 0 never quarantines",
	 {P(RUNNING), R(NONE), O(FAILED), 0, 3, 3, .quarantine_failures = 9},
	 {A(RESTART), R(WORKER_FAILED), true, 0, 0, 1}},
	{"quarantine: a no-restart exit code still ends the job",
	 {P(RUNNING), R(NONE), O(FAILED), 0, 3, 3, .no_restart_code = true,
	  .quarantine_failures = 2, .quarantine_max = 2},
	 {A(FAIL), R(NO_RESTART_CODE), false, 1}},
	{"quarantine: the c10d store host is spared: restarts as without it",
	 {P(RUNNING), R(NONE), O(FAILED), 0, 3, 3, .quarantine_failures = 2, .quarantine_max = 2,
	  .quarantine_exempt = true},
	 {A(RESTART), R(WORKER_FAILED), true, 0, 0, 1}},
	{"quarantine: the spared store host still ends the job on a no-restart code",
	 {P(RUNNING), R(NONE), O(FAILED), 0, 3, 3, .no_restart_code = true,
	  .quarantine_failures = 2, .quarantine_max = 2, .quarantine_exempt = true},
	 {A(FAIL), R(NO_RESTART_CODE), false, 1}},
	{"quarantine: a drain wins",
	 {P(DRAINING), R(DRAIN), O(FAILED), 0, 3, 3, .quarantine_failures = 2, .quarantine_max = 2},
	 {A(EXIT), R(DRAIN_FAILED), false, 1}},
	/* Bugs. */
	{"group still HEALTHY after stopping: exit 1",
	 {P(RUNNING), R(NONE), O(UNEXPECTED), 0, 3, 3},
	 {A(EXIT), R(UNEXPECTED), false, 1}},
	{"group still INIT after a re-form stop: exit 1",
	 {P(STOPPING_GROUP), R(MEMBERSHIP), O(UNEXPECTED), 0, 3, 3},
	 {A(EXIT), R(UNEXPECTED), false, 1}},
};

static void
test_decide(void **state)
{
	for (size_t i = 0; i < ARRAY_SIZE(decide_cases); i++) {
		const struct decide_case *c = &decide_cases[i];
		struct agent_decision got = agent_decide(&c->in);
		char msg[512];

		snprintf(msg, sizeof(msg), "%s: got %s (%s)%s exit %d, delay %llu us, streak %d",
			 c->name, agent_action_name(got.action), agent_reason_name(got.reason),
			 got.spends_restart ? " spending a restart," : "", got.exit_code,
			 (unsigned long long)got.delay_usec, got.failure_streak);
		print_message("%s\n", msg);
		assert_int_equal(got.action, c->want.action);
		assert_int_equal(got.reason, c->want.reason);
		assert_int_equal(got.spends_restart, c->want.spends_restart);
		assert_int_equal(got.delay_usec, c->want.delay_usec);
		/* Spared: exempt, and the rules without the exemption quarantine. */
		assert_int_equal(got.quarantine_spared,
				 c->in.quarantine_exempt && !c->in.no_restart_code &&
					 c->in.quarantine_failures >= c->in.quarantine_max);
		if (got.action != AGENT_ACTION_RESTART) {
			assert_int_equal(got.exit_code, c->want.exit_code);
		} else {
			assert_int_equal(got.failure_streak, c->want.failure_streak);
		}
	}
}

/* Every combination gets an answer, a restart is spent only after a failure,
 * and a signal always decides the exit status. */
static void
test_decide_total(void **state)
{
	for (int p = AGENT_PHASE_INIT; p <= AGENT_PHASE_DONE; p++) {
		for (int r = AGENT_REASON_NONE; r <= AGENT_REASON_UNEXPECTED; r++) {
			for (int o = AGENT_OUTCOME_SUCCEEDED; o <= AGENT_OUTCOME_UNEXPECTED; o++) {
				for (int left = 0; left <= 3; left++) {
					struct agent_decide_in in = {p, r, o, SIGTERM, left & 1, 1};
					struct agent_decision d;

					/* left & 2: every restart policy on, at its limit. */
					in.no_restart_code = left & 2;
					in.window_max = in.window_restarts = left & 2;
					in.progress_attempts = in.stalled_attempts = left & 2;
					in.detailed_exit = left & 2;
					in.backoff_min_usec = in.backoff_max_usec = SEC(1);
					d = agent_decide(&in);
					assert_true(!d.spends_restart ||
						    (o == AGENT_OUTCOME_FAILED && (left & 1) &&
						     !(left & 2)));
					/* Only a failure restart waits. */
					assert_true((d.delay_usec > 0) == d.spends_restart);
					/* A drain never restarts, whatever ended it. */
					if (p == AGENT_PHASE_DRAINING) {
						assert_int_equal(d.action, AGENT_ACTION_EXIT);
					}
					if (p == AGENT_PHASE_STOPPING_SIGNAL) {
						assert_int_equal(d.action, AGENT_ACTION_EXIT);
						assert_int_equal(d.exit_code, 128 + SIGTERM);
					}
					assert_string_not_equal(agent_action_name(d.action), "?");
				}
			}
		}
	}
}

static void
test_outcome_of(void **state)
{
	static const struct {
		enum worker_state s;
		enum agent_outcome want;
	} cases[] = {
		{WORKER_STATE_SUCCEEDED, O(SUCCEEDED)}, {WORKER_STATE_FAILED, O(FAILED)},
		{WORKER_STATE_UNHEALTHY, O(FAILED)},    {WORKER_STATE_STOPPED, O(STOPPED)},
		{WORKER_STATE_UNKNOWN, O(UNEXPECTED)},  {WORKER_STATE_INIT, O(UNEXPECTED)},
		{WORKER_STATE_HEALTHY, O(UNEXPECTED)},
	};

	for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
		assert_int_equal(agent_outcome_of(cases[i].s), cases[i].want);
	}
	/* A group the agent stopped for a hang failed; other stops did not. */
	assert_int_equal(agent_outcome_after(WORKER_STATE_STOPPED, AGENT_REASON_HANG), O(FAILED));
	assert_int_equal(agent_outcome_after(WORKER_STATE_FAILED, AGENT_REASON_HANG), O(FAILED));
	assert_int_equal(agent_outcome_after(WORKER_STATE_STOPPED, AGENT_REASON_MEMBERSHIP),
			 O(STOPPED));
	assert_int_equal(agent_outcome_after(WORKER_STATE_SUCCEEDED, AGENT_REASON_HANG),
			 O(SUCCEEDED));
}

struct node_case {
	enum agent_phase p;
	enum agent_reason reason;
	int exit_code;
	bool have_round;
	enum node_state want;
};

static const struct node_case node_cases[] = {
	{P(INIT), R(NONE), 0, false, NODE_STATE_INIT},
	{P(RENDEZVOUS), R(NONE), 0, false, NODE_STATE_INIT},
	{P(RENDEZVOUS), R(WORKER_FAILED), 0, true, NODE_STATE_INIT},
	{P(RESTARTING), R(MEMBERSHIP), 0, true, NODE_STATE_INIT},
	{P(RUNNING), R(NONE), 0, true, NODE_STATE_RUNNING},
	{P(STOPPING_GROUP), R(WORKER_FAILED), 0, true, NODE_STATE_RUNNING},
	{P(STOPPING_GROUP), R(MEMBERSHIP), 0, true, NODE_STATE_RUNNING},
	{P(STOPPING_GROUP), R(RDZV_FAILED), 0, true, NODE_STATE_FAILED},
	{P(STOPPING_SIGNAL), R(SIGNAL), 0, true, NODE_STATE_RUNNING},
	{P(STOPPING_SIGNAL), R(SIGNAL), 0, false, NODE_STATE_INIT},
	{P(EXIT_BARRIER), R(SUCCEEDED), 0, true, NODE_STATE_SUCCEEDED},
	{P(CLOSING), R(SUCCEEDED), 0, true, NODE_STATE_SUCCEEDED},
	{P(CLOSING), R(WORKER_FAILED), 1, true, NODE_STATE_FAILED},
	{P(CLOSING), R(RDZV_FAILED), 1, false, NODE_STATE_FAILED},
	{P(DRAINING), R(DRAIN), 0, true, NODE_STATE_RUNNING},
	{P(DRAINING), R(DRAIN), 0, false, NODE_STATE_INIT},
	{P(DONE), R(DRAIN), 0, true, NODE_STATE_SUCCEEDED},
	{P(DONE), R(NONE), 0, false, NODE_STATE_SUCCEEDED},
	{P(HEALTH_CHECK), R(NONE), 0, false, NODE_STATE_INIT},
	{P(QUARANTINED), R(QUARANTINED), 0, true, NODE_STATE_INIT},
	{P(HEALTH_CHECK), R(WORKER_FAILED), 0, true, NODE_STATE_INIT},
	{P(STOPPING_GROUP), R(EXCLUDED), 0, true, NODE_STATE_RUNNING},
	{P(DONE), R(UNHEALTHY), 6, false, NODE_STATE_FAILED},
	{P(DONE), R(EXCLUDED), 6, true, NODE_STATE_FAILED},
	{P(DONE), R(SIGNAL), 143, true, NODE_STATE_FAILED},
};

static void
test_node_state(void **state)
{
	for (size_t i = 0; i < ARRAY_SIZE(node_cases); i++) {
		const struct node_case *c = &node_cases[i];

		print_message("%s (%s)\n", agent_phase_name(c->p), agent_reason_name(c->reason));
		assert_int_equal(agent_node_state(c->p, c->reason, c->exit_code, c->have_round),
				 c->want);
	}
}

struct view_case {
	enum agent_phase p;
	enum agent_reason reason;
	bool have_group;
	enum worker_state gs;
	enum worker_state want;
};

static const struct view_case view_cases[] = {
	{P(INIT), R(NONE), false, WORKER_STATE_INIT, WORKER_STATE_INIT},
	{P(RENDEZVOUS), R(NONE), false, WORKER_STATE_INIT, WORKER_STATE_INIT},
	{P(RUNNING), R(NONE), true, WORKER_STATE_HEALTHY, WORKER_STATE_HEALTHY},
	{P(RUNNING), R(NONE), true, WORKER_STATE_SUCCEEDED, WORKER_STATE_SUCCEEDED},
	{P(STOPPING_GROUP), R(WORKER_FAILED), true, WORKER_STATE_FAILED, WORKER_STATE_FAILED},
	{P(STOPPING_GROUP), R(MEMBERSHIP), true, WORKER_STATE_STOPPED, WORKER_STATE_STOPPED},
	{P(RESTARTING), R(WORKER_FAILED), true, WORKER_STATE_FAILED, WORKER_STATE_STOPPED},
	{P(RENDEZVOUS), R(WORKER_FAILED), true, WORKER_STATE_FAILED, WORKER_STATE_STOPPED},
	{P(RENDEZVOUS), R(MEMBERSHIP), true, WORKER_STATE_STOPPED, WORKER_STATE_STOPPED},
	{P(CLOSING), R(RDZV_FAILED), true, WORKER_STATE_FAILED, WORKER_STATE_STOPPED},
	{P(CLOSING), R(WORKER_FAILED), true, WORKER_STATE_FAILED, WORKER_STATE_FAILED},
	{P(EXIT_BARRIER), R(SUCCEEDED), true, WORKER_STATE_SUCCEEDED, WORKER_STATE_SUCCEEDED},
	{P(STOPPING_SIGNAL), R(SIGNAL), true, WORKER_STATE_STOPPED, WORKER_STATE_STOPPED},
	{P(DRAINING), R(DRAIN), true, WORKER_STATE_HEALTHY, WORKER_STATE_HEALTHY},
	{P(DRAINING), R(DRAIN), true, WORKER_STATE_SUCCEEDED, WORKER_STATE_SUCCEEDED},
	{P(HEALTH_CHECK), R(NONE), false, WORKER_STATE_INIT, WORKER_STATE_INIT},
	{P(HEALTH_CHECK), R(WORKER_FAILED), true, WORKER_STATE_FAILED, WORKER_STATE_STOPPED},
};

static void
test_group_view_state(void **state)
{
	for (size_t i = 0; i < ARRAY_SIZE(view_cases); i++) {
		const struct view_case *c = &view_cases[i];

		print_message("%s (%s) %s\n", agent_phase_name(c->p), agent_reason_name(c->reason),
			      worker_state_name(c->gs));
		assert_int_equal(agent_group_view_state(c->p, c->reason, c->have_group, c->gs),
				 c->want);
	}
}

/* Every phase and reason has a name: a new one must get its own. */
static void
test_names(void **state)
{
	for (int p = AGENT_PHASE_INIT; p <= AGENT_PHASE_DONE; p++) {
		assert_string_not_equal(agent_phase_name(p), "?");
	}
	for (int r = AGENT_REASON_NONE; r <= AGENT_REASON_UNEXPECTED; r++) {
		assert_string_not_equal(agent_reason_name(r), "?");
	}
	/* The restart event's reasons, as before. */
	assert_string_equal(agent_reason_name(R(WORKER_FAILED)), "worker group FAILED");
	assert_string_equal(agent_reason_name(R(MEMBERSHIP)), "membership change");
	assert_string_equal(agent_reason_name(R(REQUESTED)), "requested over the control socket");
	assert_string_equal(agent_reason_name(R(EXHAUSTED)), "restarts exhausted");
	assert_string_equal(agent_phase_name(P(DRAINING)), "draining");
	assert_string_equal(agent_reason_name(R(DRAIN)), "drained");
	assert_string_equal(agent_phase_name(P(HEALTH_CHECK)), "health-check");
	assert_string_equal(agent_reason_name(R(UNHEALTHY)), "node unhealthy");
	assert_string_equal(agent_reason_name(R(EXCLUDED)), "node excluded");
	assert_string_equal(agent_phase_name(P(QUARANTINED)), "quarantined");
	assert_string_equal(agent_action_name(A(QUARANTINE)), "quarantine");
}

/* --restart-window: restarts less than W old count; unused slots do not. */
static void
test_window_count(void **state)
{
	const uint64_t t[] = {0, SEC(10), SEC(50), SEC(99), SEC(100)};

	assert_int_equal(agent_window_count(t, 0, SEC(100), SEC(60)), 0);
	assert_int_equal(agent_window_count(t, ARRAY_SIZE(t), SEC(100), SEC(60)), 3);
	assert_int_equal(agent_window_count(t, ARRAY_SIZE(t), SEC(100), SEC(50)), 2);
	assert_int_equal(agent_window_count(t, ARRAY_SIZE(t), SEC(100), SEC(1000)), 4);
	/* The window refills: 61 s on, only the last two remain. */
	assert_int_equal(agent_window_count(t, ARRAY_SIZE(t), SEC(111), SEC(60)), 2);
	assert_int_equal(agent_window_count(t, ARRAY_SIZE(t), SEC(200), SEC(60)), 0);
}

static void
test_progress_parse(void **state)
{
	static const struct {
		const char *text;
		bool ok;
		double want;
	} cases[] = {
		{"1200\n", true, 1200}, {"  42  ", true, 42}, {"3.5", true, 3.5},
		{"-1", true, -1},       {"", false, 0},       {"\n", false, 0},
		{"12 it", false, 0},    {"nan", false, 0},    {"abc", false, 0},
		{"1e3", true, 1000},
	};

	for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
		double v = -7;
		bool ok = agent_progress_parse(cases[i].text, strlen(cases[i].text), &v);

		print_message("'%s'\n", cases[i].text);
		assert_int_equal(ok, cases[i].ok);
		if (ok) {
			assert_true(v == cases[i].want);
		} else {
			assert_true(v == -7);
		}
	}
}

/* Progress is a new high: a value below the best (a restart from an older
 * checkpoint), the same value, or none at all is no progress. */
static void
test_progress_failed(void **state)
{
	struct agent_progress p = {0};

	assert_int_equal(agent_progress_failed(&p, false, 0), 1); /* no file yet */
	assert_int_equal(agent_progress_failed(&p, true, 100), 0);
	assert_int_equal(agent_progress_failed(&p, true, 100), 1);
	assert_int_equal(agent_progress_failed(&p, true, 80), 2);
	assert_int_equal(agent_progress_failed(&p, false, 0), 3);
	assert_int_equal(agent_progress_failed(&p, true, 101), 0);
	/* A baseline from the start counts as an earlier value. */
	p = (struct agent_progress){.have_best = true, .best = 5};
	assert_int_equal(agent_progress_failed(&p, true, 5), 1);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_decide),           cmocka_unit_test(test_decide_total),
		cmocka_unit_test(test_outcome_of),       cmocka_unit_test(test_node_state),
		cmocka_unit_test(test_group_view_state), cmocka_unit_test(test_names),
		cmocka_unit_test(test_window_count),     cmocka_unit_test(test_progress_parse),
		cmocka_unit_test(test_progress_failed),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
