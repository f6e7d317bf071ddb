/* agent_decide.c — the agent's decision as a table of rules, and the states
 * the agent reports, derived from its phase. Pure. */
#include "agent_decide.h"

#include "util.h"

const char *
agent_phase_name(enum agent_phase p)
{
	switch (p) {
	case AGENT_PHASE_INIT:
		return "init";
	case AGENT_PHASE_RENDEZVOUS:
		return "rendezvous";
	case AGENT_PHASE_RUNNING:
		return "running";
	case AGENT_PHASE_STOPPING_GROUP:
		return "stopping-group";
	case AGENT_PHASE_RESTARTING:
		return "restarting";
	case AGENT_PHASE_EXIT_BARRIER:
		return "exit-barrier";
	case AGENT_PHASE_CLOSING:
		return "closing";
	case AGENT_PHASE_STOPPING_SIGNAL:
		return "stopping-on-signal";
	case AGENT_PHASE_DONE:
		return "done";
	}
	return "?";
}

const char *
agent_reason_name(enum agent_reason r)
{
	switch (r) {
	case AGENT_REASON_NONE:
		return "none";
	case AGENT_REASON_SUCCEEDED:
		return "worker group SUCCEEDED";
	case AGENT_REASON_WORKER_FAILED:
		return "worker group FAILED";
	case AGENT_REASON_MEMBERSHIP:
		return "membership change";
	case AGENT_REASON_REQUESTED:
		return "requested over the control socket";
	case AGENT_REASON_RDZV_FAILED:
		return "rendezvous failed";
	case AGENT_REASON_SIGNAL:
		return "signal received";
	case AGENT_REASON_UNEXPECTED:
		return "unexpected worker group state";
	}
	return "?";
}

const char *
agent_action_name(enum agent_action a)
{
	switch (a) {
	case AGENT_ACTION_RESTART:
		return "restart";
	case AGENT_ACTION_FINISH:
		return "finish";
	case AGENT_ACTION_FAIL:
		return "fail";
	case AGENT_ACTION_EXIT:
		return "exit";
	}
	return "?";
}

enum agent_outcome
agent_outcome_of(enum worker_state s)
{
	switch (s) {
	case WORKER_STATE_SUCCEEDED:
		return AGENT_OUTCOME_SUCCEEDED;
	case WORKER_STATE_FAILED:
	case WORKER_STATE_UNHEALTHY:
		return AGENT_OUTCOME_FAILED;
	case WORKER_STATE_STOPPED:
		return AGENT_OUTCOME_STOPPED;
	case WORKER_STATE_UNKNOWN:
	case WORKER_STATE_INIT:
	case WORKER_STATE_HEALTHY:
		return AGENT_OUTCOME_UNEXPECTED;
	}
	return AGENT_OUTCOME_UNEXPECTED;
}

/* ---- the decision table ---------------------------------------------------- */

#define BIT(x) (1u << (x))
#define ANY 0u

/* Restarts a rule needs. */
enum restarts_cond {
	RESTARTS_ANY,
	RESTARTS_LEFT, /* remaining_restarts > 0 */
	RESTARTS_NONE, /* remaining_restarts <= 0 */
};

/* The exit status a rule chooses. */
enum exit_kind {
	EXIT_NONE, /* RESTART: no exit */
	EXIT_SUCCESS_CODE,
	EXIT_FAILURE_CODE,
	EXIT_SIGNAL_CODE, /* 128 + the signal */
};

/* One row: when every condition holds (a mask of 0 matches anything), the
 * action. reason AGENT_REASON_NONE takes the input's stop_reason. */
struct rule {
	unsigned phases;   /* BIT(enum agent_phase) */
	unsigned stops;    /* BIT(enum agent_reason): the stop reason */
	unsigned outcomes; /* BIT(enum agent_outcome) */
	enum restarts_cond restarts;
	enum agent_action action;
	enum agent_reason reason;
	bool spends_restart;
	enum exit_kind exit;
};

static const struct rule rules[] = {
	/* A handled signal: the workers are stopped, exit 128 + signal (the
	 * rendezvous stays open, so the job can re-form without us). */
	{BIT(AGENT_PHASE_STOPPING_SIGNAL), ANY, ANY, RESTARTS_ANY, AGENT_ACTION_EXIT,
	 AGENT_REASON_SIGNAL, false, EXIT_SIGNAL_CODE},
	/* The rendezvous could not go on: the workers are stopped, exit 1. */
	{ANY, BIT(AGENT_REASON_RDZV_FAILED), ANY, RESTARTS_ANY, AGENT_ACTION_EXIT,
	 AGENT_REASON_RDZV_FAILED, false, EXIT_FAILURE_CODE},
	/* Every worker exited 0: exit barrier, close, exit 0. */
	{ANY, ANY, BIT(AGENT_OUTCOME_SUCCEEDED), RESTARTS_ANY, AGENT_ACTION_FINISH,
	 AGENT_REASON_SUCCEEDED, false, EXIT_SUCCESS_CODE},
	/* A worker failed: restart while restarts remain (spending one)... */
	{ANY, ANY, BIT(AGENT_OUTCOME_FAILED), RESTARTS_LEFT, AGENT_ACTION_RESTART,
	 AGENT_REASON_WORKER_FAILED, true, EXIT_NONE},
	/* ...else report the root cause, close, exit 1. */
	{ANY, ANY, BIT(AGENT_OUTCOME_FAILED), RESTARTS_NONE, AGENT_ACTION_FAIL,
	 AGENT_REASON_WORKER_FAILED, false, EXIT_FAILURE_CODE},
	/* Stopped on request over the control socket: re-form for free. */
	{ANY, BIT(AGENT_REASON_REQUESTED), BIT(AGENT_OUTCOME_STOPPED), RESTARTS_ANY,
	 AGENT_ACTION_RESTART, AGENT_REASON_REQUESTED, false, EXIT_NONE},
	/* Stopped for any other reason: nodes wait to join, or one left; re-form
	 * for free (torchrun's num_nodes_waiting() > 0). */
	{ANY, ANY, BIT(AGENT_OUTCOME_STOPPED), RESTARTS_ANY, AGENT_ACTION_RESTART,
	 AGENT_REASON_MEMBERSHIP, false, EXIT_NONE},
	/* Anything else is a bug: exit 1. */
	{ANY, ANY, ANY, RESTARTS_ANY, AGENT_ACTION_EXIT, AGENT_REASON_UNEXPECTED, false,
	 EXIT_FAILURE_CODE},
};

static bool
rule_matches(const struct rule *r, const struct agent_decide_in *in)
{
	if (r->phases && !(r->phases & BIT(in->phase))) {
		return false;
	}
	if (r->stops && !(r->stops & BIT(in->stop_reason))) {
		return false;
	}
	if (r->outcomes && !(r->outcomes & BIT(in->outcome))) {
		return false;
	}
	switch (r->restarts) {
	case RESTARTS_ANY:
		return true;
	case RESTARTS_LEFT:
		return in->remaining_restarts > 0;
	case RESTARTS_NONE:
		return in->remaining_restarts <= 0;
	}
	return false;
}

static int
exit_code_of(enum exit_kind k, int signo)
{
	switch (k) {
	case EXIT_NONE:
	case EXIT_SUCCESS_CODE:
		return AGENT_EXIT_SUCCESS;
	case EXIT_FAILURE_CODE:
		return AGENT_EXIT_FAILURE;
	case EXIT_SIGNAL_CODE:
		return 128 + signo;
	}
	return AGENT_EXIT_FAILURE;
}

struct agent_decision
agent_decide(const struct agent_decide_in *in)
{
	for (size_t i = 0; i < ARRAY_SIZE(rules); i++) {
		const struct rule *r = &rules[i];

		if (rule_matches(r, in)) {
			return (struct agent_decision){
				.action = r->action,
				.reason = r->reason,
				.spends_restart = r->spends_restart,
				.exit_code = exit_code_of(r->exit, in->signo),
			};
		}
	}
	return (struct agent_decision){
		.action = AGENT_ACTION_EXIT,
		.reason = AGENT_REASON_UNEXPECTED,
		.exit_code = AGENT_EXIT_FAILURE,
	};
}

/* ---- the states the agent reports ------------------------------------------ */

static enum node_state
node_state_by_code(int exit_code)
{
	return exit_code == AGENT_EXIT_SUCCESS ? NODE_STATE_SUCCEEDED : NODE_STATE_FAILED;
}

enum node_state
agent_node_state(enum agent_phase p, enum agent_reason reason, int exit_code, bool have_round)
{
	switch (p) {
	case AGENT_PHASE_INIT:
	case AGENT_PHASE_RENDEZVOUS:
	case AGENT_PHASE_RESTARTING:
		return NODE_STATE_INIT;
	case AGENT_PHASE_STOPPING_GROUP:
		if (reason == AGENT_REASON_RDZV_FAILED) {
			return NODE_STATE_FAILED;
		}
		return have_round ? NODE_STATE_RUNNING : NODE_STATE_INIT;
	case AGENT_PHASE_RUNNING:
	case AGENT_PHASE_STOPPING_SIGNAL:
		return have_round ? NODE_STATE_RUNNING : NODE_STATE_INIT;
	case AGENT_PHASE_EXIT_BARRIER:
	case AGENT_PHASE_CLOSING:
	case AGENT_PHASE_DONE:
		return node_state_by_code(exit_code);
	}
	return NODE_STATE_INIT;
}

enum worker_state
agent_group_view_state(enum agent_phase p, enum agent_reason reason, bool have_group,
		       enum worker_state gs)
{
	if (!have_group) {
		return WORKER_STATE_INIT;
	}
	switch (p) {
	case AGENT_PHASE_RESTARTING:
	case AGENT_PHASE_RENDEZVOUS:
		return WORKER_STATE_STOPPED;
	case AGENT_PHASE_CLOSING:
		return reason == AGENT_REASON_RDZV_FAILED ? WORKER_STATE_STOPPED : gs;
	case AGENT_PHASE_INIT:
	case AGENT_PHASE_RUNNING:
	case AGENT_PHASE_STOPPING_GROUP:
	case AGENT_PHASE_EXIT_BARRIER:
	case AGENT_PHASE_STOPPING_SIGNAL:
	case AGENT_PHASE_DONE:
		return gs;
	}
	return gs;
}
