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
	 {A(RESTART), R(WORKER_FAILED), true, 0}},
	{"a worker failed, the last restart left",
	 {P(STOPPING_GROUP), R(WORKER_FAILED), O(FAILED), 0, 1, 3},
	 {A(RESTART), R(WORKER_FAILED), true, 0}},
	{"a worker failed, no restart left: report, exit 1",
	 {P(STOPPING_GROUP), R(WORKER_FAILED), O(FAILED), 0, 0, 3},
	 {A(FAIL), R(WORKER_FAILED), false, 1}},
	{"a worker failed with --max-restarts 0",
	 {P(STOPPING_GROUP), R(WORKER_FAILED), O(FAILED), 0, 0, 0},
	 {A(FAIL), R(WORKER_FAILED), false, 1}},
	{"UNHEALTHY counts as FAILED",
	 {P(STOPPING_GROUP), R(WORKER_FAILED), O(FAILED), 0, 2, 2},
	 {A(RESTART), R(WORKER_FAILED), true, 0}},
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

		snprintf(msg, sizeof(msg), "%s: got %s (%s)%s exit %d", c->name,
			 agent_action_name(got.action), agent_reason_name(got.reason),
			 got.spends_restart ? " spending a restart," : "", got.exit_code);
		print_message("%s\n", msg);
		assert_int_equal(got.action, c->want.action);
		assert_int_equal(got.reason, c->want.reason);
		assert_int_equal(got.spends_restart, c->want.spends_restart);
		if (got.action != AGENT_ACTION_RESTART) {
			assert_int_equal(got.exit_code, c->want.exit_code);
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
				for (int left = 0; left <= 1; left++) {
					struct agent_decide_in in = {p, r, o, SIGTERM, left, 1};
					struct agent_decision d = agent_decide(&in);

					assert_true(!d.spends_restart ||
						    (o == AGENT_OUTCOME_FAILED && left > 0));
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
	{P(DONE), R(NONE), 0, false, NODE_STATE_SUCCEEDED},
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
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_decide),           cmocka_unit_test(test_decide_total),
		cmocka_unit_test(test_outcome_of),       cmocka_unit_test(test_node_state),
		cmocka_unit_test(test_group_view_state), cmocka_unit_test(test_names),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
