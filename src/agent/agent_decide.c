/* agent_decide.c — the agent's decision as a table of rules, and the states
 * the agent reports, derived from its phase. Pure. */
#include "agent_decide.h"

#include <ctype.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "util.h"

const char *
agent_phase_name(enum agent_phase p)
{
	switch (p) {
	case AGENT_PHASE_INIT:
		return "init";
	case AGENT_PHASE_HEALTH_CHECK:
		return "health-check";
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
	case AGENT_PHASE_DRAINING:
		return "draining";
	case AGENT_PHASE_QUARANTINED:
		return "quarantined";
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
	case AGENT_REASON_EXHAUSTED:
		return "restarts exhausted";
	case AGENT_REASON_WINDOW:
		return "restarts exhausted in the restart window";
	case AGENT_REASON_NO_RESTART_CODE:
		return "no-restart exit code";
	case AGENT_REASON_NO_PROGRESS:
		return "no progress";
	case AGENT_REASON_DRAIN:
		return "drained";
	case AGENT_REASON_DRAIN_FAILED:
		return "drained, workers did not exit 0 in time";
	case AGENT_REASON_HANG:
		return "worker hang";
	case AGENT_REASON_UNHEALTHY:
		return "node unhealthy";
	case AGENT_REASON_EXCLUDED:
		return "node excluded";
	case AGENT_REASON_QUARANTINED:
		return "node quarantined";
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
	case AGENT_ACTION_QUARANTINE:
		return "quarantine";
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

enum agent_outcome
agent_outcome_after(enum worker_state s, enum agent_reason stop_reason)
{
	enum agent_outcome o = agent_outcome_of(s);

	if (stop_reason == AGENT_REASON_HANG && o == AGENT_OUTCOME_STOPPED) {
		return AGENT_OUTCOME_FAILED;
	}
	return o;
}

/* ---- the decision table ---------------------------------------------------- */

#define BIT(x) (1u << (x))
#define ANY 0u

/* A condition on the counters and settings a rule may need. */
enum cond {
	COND_RESTARTS_LEFT,   /* remaining_restarts > 0 */
	COND_RESTARTS_NONE,   /* remaining_restarts <= 0 */
	COND_NO_RESTART_CODE, /* a failed worker's exit code is one never to restart */
	COND_NO_PROGRESS,     /* the no-progress rule is on and K attempts stalled */
	COND_WINDOW_FULL,     /* --restart-window's N restarts spent in the last W s */
	COND_QUARANTINE,      /* --quarantine's F failures of this node in the last W s */
	COND_QUARANTINE_EXIT, /* ... and the node exits rather than wait (--quarantine-action) */
};

/* The exit status a rule chooses. */
enum exit_kind {
	EXIT_NONE, /* RESTART: no exit */
	EXIT_SUCCESS_CODE,
	EXIT_FAILURE_CODE,
	EXIT_SIGNAL_CODE,    /* 128 + the signal */
	EXIT_EXHAUSTED_CODE, /* detailed: AGENT_EXIT_RESTARTS_EXHAUSTED, else 1 */
	EXIT_NO_RESTART_CODE,
	EXIT_NO_PROGRESS_CODE,
	EXIT_EXCLUDED_CODE, /* AGENT_EXIT_NODE_EXCLUDED in either mode */
};

/* One row: when every condition holds (a mask of 0 matches anything), the
 * action. reason AGENT_REASON_NONE takes the input's stop_reason. backoff: a
 * restart that waits (--restart-backoff). */
struct rule {
	unsigned phases;   /* BIT(enum agent_phase) */
	unsigned stops;    /* BIT(enum agent_reason): the stop reason */
	unsigned outcomes; /* BIT(enum agent_outcome) */
	unsigned conds;    /* BIT(enum cond): all of them */
	enum agent_action action;
	enum agent_reason reason;
	bool spends_restart;
	bool backoff;
	enum exit_kind exit;
};

#define FAILED BIT(AGENT_OUTCOME_FAILED)

static const struct rule rules[] = {
	/* A handled signal: the workers are stopped, exit 128 + signal (the
	 * rendezvous stays open, so the job can re-form without us). */
	{BIT(AGENT_PHASE_STOPPING_SIGNAL), ANY, ANY, ANY, AGENT_ACTION_EXIT, AGENT_REASON_SIGNAL,
	 false, false, EXIT_SIGNAL_CODE},
	/* Drained (the drain verb): the workers had the grace to exit 0. The
	 * agent leaves the rendezvous open, so the others re-form for free. One
	 * that failed or had to be stopped after the grace: exit 1. */
	{BIT(AGENT_PHASE_DRAINING), BIT(AGENT_REASON_DRAIN_FAILED), ANY, ANY, AGENT_ACTION_EXIT,
	 AGENT_REASON_DRAIN_FAILED, false, false, EXIT_FAILURE_CODE},
	{BIT(AGENT_PHASE_DRAINING), ANY, FAILED, ANY, AGENT_ACTION_EXIT, AGENT_REASON_DRAIN_FAILED,
	 false, false, EXIT_FAILURE_CODE},
	{BIT(AGENT_PHASE_DRAINING), ANY, BIT(AGENT_OUTCOME_SUCCEEDED) | BIT(AGENT_OUTCOME_STOPPED),
	 ANY, AGENT_ACTION_EXIT, AGENT_REASON_DRAIN, false, false, EXIT_SUCCESS_CODE},
	/* Excluded on request (the exclude verb): whatever the workers did, the
	 * node leaves the rendezvous open, so the others re-form for free, and
	 * exits with the bad-node status. */
	{ANY, BIT(AGENT_REASON_EXCLUDED), ANY, ANY, AGENT_ACTION_EXIT, AGENT_REASON_EXCLUDED, false,
	 false, EXIT_EXCLUDED_CODE},
	/* The rendezvous could not go on: the workers are stopped, exit 1. */
	{ANY, BIT(AGENT_REASON_RDZV_FAILED), ANY, ANY, AGENT_ACTION_EXIT, AGENT_REASON_RDZV_FAILED,
	 false, false, EXIT_FAILURE_CODE},
	/* Every worker exited 0: exit barrier, close, exit 0. */
	{ANY, ANY, BIT(AGENT_OUTCOME_SUCCEEDED), ANY, AGENT_ACTION_FINISH, AGENT_REASON_SUCCEEDED,
	 false, false, EXIT_SUCCESS_CODE},
	/* A worker exited with a code never to restart (--no-restart-exit-codes):
	 * report, close, exit, whatever restarts remain. */
	{ANY, ANY, FAILED, BIT(COND_NO_RESTART_CODE), AGENT_ACTION_FAIL,
	 AGENT_REASON_NO_RESTART_CODE, false, false, EXIT_NO_RESTART_CODE},
	/* The progress file did not advance over K failed attempts. */
	{ANY, ANY, FAILED, BIT(COND_NO_PROGRESS), AGENT_ACTION_FAIL, AGENT_REASON_NO_PROGRESS,
	 false, false, EXIT_NO_PROGRESS_CODE},
	/* This node's workers failed F times within W s (--quarantine): the node
	 * is the problem, not the job. It leaves the rendezvous open, so the
	 * others go on without it, and waits out a cooldown before it rejoins,
	 * or exits 6 (--quarantine-action exit); nothing is spent or closed.
	 * Before the restart budget: a node the job can do without must not end
	 * the job by spending the last restart. */
	{ANY, ANY, FAILED, BIT(COND_QUARANTINE) | BIT(COND_QUARANTINE_EXIT), AGENT_ACTION_EXIT,
	 AGENT_REASON_QUARANTINED, false, false, EXIT_EXCLUDED_CODE},
	{ANY, ANY, FAILED, BIT(COND_QUARANTINE), AGENT_ACTION_QUARANTINE, AGENT_REASON_QUARANTINED,
	 false, false, EXIT_NONE},
	/* No restart left (--max-restarts): report the root cause, close, exit. */
	{ANY, ANY, FAILED, BIT(COND_RESTARTS_NONE), AGENT_ACTION_FAIL, AGENT_REASON_EXHAUSTED,
	 false, false, EXIT_EXHAUSTED_CODE},
	/* N failure restarts within the last W seconds already (--restart-window). */
	{ANY, ANY, FAILED, BIT(COND_WINDOW_FULL), AGENT_ACTION_FAIL, AGENT_REASON_WINDOW, false,
	 false, EXIT_EXHAUSTED_CODE},
	/* A worker failed and restarts remain: restart after the backoff,
	 * spending one. */
	{ANY, ANY, FAILED, BIT(COND_RESTARTS_LEFT), AGENT_ACTION_RESTART,
	 AGENT_REASON_WORKER_FAILED, true, true, EXIT_NONE},
	/* Stopped on request over the control socket: re-form for free, at once. */
	{ANY, BIT(AGENT_REASON_REQUESTED), BIT(AGENT_OUTCOME_STOPPED), ANY, AGENT_ACTION_RESTART,
	 AGENT_REASON_REQUESTED, false, false, EXIT_NONE},
	/* Stopped for any other reason: nodes wait to join, or one left; re-form
	 * for free, at once (torchrun's num_nodes_waiting() > 0). */
	{ANY, ANY, BIT(AGENT_OUTCOME_STOPPED), ANY, AGENT_ACTION_RESTART, AGENT_REASON_MEMBERSHIP,
	 false, false, EXIT_NONE},
	/* Anything else is a bug: exit 1. */
	{ANY, ANY, ANY, ANY, AGENT_ACTION_EXIT, AGENT_REASON_UNEXPECTED, false, false,
	 EXIT_FAILURE_CODE},
};

static bool
cond_holds(enum cond c, const struct agent_decide_in *in)
{
	switch (c) {
	case COND_RESTARTS_LEFT:
		return in->remaining_restarts > 0;
	case COND_RESTARTS_NONE:
		return in->remaining_restarts <= 0;
	case COND_NO_RESTART_CODE:
		return in->no_restart_code;
	case COND_NO_PROGRESS:
		return in->progress_attempts > 0 && in->stalled_attempts >= in->progress_attempts;
	case COND_WINDOW_FULL:
		return in->window_max > 0 && in->window_restarts >= in->window_max;
	case COND_QUARANTINE:
		return in->quarantine_max > 0 && in->quarantine_failures >= in->quarantine_max &&
		       !in->quarantine_exempt;
	case COND_QUARANTINE_EXIT:
		return in->quarantine_exit;
	}
	return false;
}

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
	for (enum cond c = COND_RESTARTS_LEFT; c <= COND_QUARANTINE_EXIT; c++) {
		if ((r->conds & BIT(c)) && !cond_holds(c, in)) {
			return false;
		}
	}
	return true;
}

static int
exit_code_of(enum exit_kind k, const struct agent_decide_in *in)
{
	switch (k) {
	case EXIT_NONE:
	case EXIT_SUCCESS_CODE:
		return AGENT_EXIT_SUCCESS;
	case EXIT_FAILURE_CODE:
		return AGENT_EXIT_FAILURE;
	case EXIT_SIGNAL_CODE:
		return 128 + in->signo;
	case EXIT_EXHAUSTED_CODE:
		return in->detailed_exit ? AGENT_EXIT_RESTARTS_EXHAUSTED : AGENT_EXIT_FAILURE;
	case EXIT_NO_RESTART_CODE:
		return in->detailed_exit ? AGENT_EXIT_NO_RESTART_CODE : AGENT_EXIT_FAILURE;
	case EXIT_NO_PROGRESS_CODE:
		return in->detailed_exit ? AGENT_EXIT_NO_PROGRESS : AGENT_EXIT_FAILURE;
	case EXIT_EXCLUDED_CODE:
		return AGENT_EXIT_NODE_EXCLUDED;
	}
	return AGENT_EXIT_FAILURE;
}

/* The backoff of a failure restart that is the streak-th in a row: MIN
 * doubled streak - 1 times, plus jitter * half of it, at most MAX. */
static uint64_t
backoff_delay(const struct agent_decide_in *in, int streak)
{
	double max = (double)in->backoff_max_usec;
	double d = (double)in->backoff_min_usec;

	if (in->backoff_max_usec == 0) {
		return 0;
	}
	for (int i = 1; i < streak && d < max; i++) {
		d *= 2;
	}
	d += d * 0.5 * (in->jitter < 0 ? 0 : in->jitter >= 1 ? 1 : in->jitter);
	return d > max ? in->backoff_max_usec : (uint64_t)d;
}

static struct agent_decision
decide(const struct agent_decide_in *in)
{
	for (size_t i = 0; i < ARRAY_SIZE(rules); i++) {
		const struct rule *r = &rules[i];
		struct agent_decision d;

		if (!rule_matches(r, in)) {
			continue;
		}
		d = (struct agent_decision){
			.action = r->action,
			.reason = r->reason,
			.spends_restart = r->spends_restart,
			.exit_code = exit_code_of(r->exit, in),
			.failure_streak = in->failure_streak,
		};
		if (r->backoff) {
			bool reset = in->backoff_max_usec > 0 &&
				     in->attempt_usec / AGENT_BACKOFF_RESET_FACTOR >=
					     in->backoff_max_usec;

			d.failure_streak = reset ? 1 : in->failure_streak + 1;
			d.delay_usec = backoff_delay(in, d.failure_streak);
		}
		return d;
	}
	return (struct agent_decision){
		.action = AGENT_ACTION_EXIT,
		.reason = AGENT_REASON_UNEXPECTED,
		.exit_code = AGENT_EXIT_FAILURE,
		.failure_streak = in->failure_streak,
	};
}

struct agent_decision
agent_decide(const struct agent_decide_in *in)
{
	struct agent_decision d = decide(in);

	if (in->quarantine_exempt) {
		struct agent_decide_in plain = *in;

		plain.quarantine_exempt = false;
		d.quarantine_spared = decide(&plain).reason == AGENT_REASON_QUARANTINED;
	}
	return d;
}

/* ---- the restart policy's counters ----------------------------------------- */

int
agent_window_count(const uint64_t *times, size_t n, uint64_t now, uint64_t window_usec)
{
	int count = 0;

	for (size_t i = 0; i < n; i++) {
		if (times[i] != 0 && times[i] <= now && now - times[i] < window_usec) {
			count++;
		}
	}
	return count;
}

bool
agent_progress_parse(const char *text, size_t len, double *ret)
{
	char buf[64], *end;
	double v;

	while (len > 0 && isspace((unsigned char)*text)) {
		text++;
		len--;
	}
	while (len > 0 && isspace((unsigned char)text[len - 1])) {
		len--;
	}
	if (len == 0 || len >= sizeof(buf)) {
		return false;
	}
	memcpy(buf, text, len);
	buf[len] = '\0';
	v = strtod(buf, &end);
	if (*end != '\0' || isnan(v)) {
		return false;
	}
	*ret = v;
	return true;
}

int
agent_progress_failed(struct agent_progress *p, bool have, double value)
{
	if (have && (!p->have_best || value > p->best)) {
		p->have_best = true;
		p->best = value;
		p->stalled = 0;
	} else {
		p->stalled++;
	}
	return p->stalled;
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
	case AGENT_PHASE_HEALTH_CHECK:
	case AGENT_PHASE_RENDEZVOUS:
	case AGENT_PHASE_RESTARTING:
	case AGENT_PHASE_QUARANTINED:
		return NODE_STATE_INIT;
	case AGENT_PHASE_STOPPING_GROUP:
		if (reason == AGENT_REASON_RDZV_FAILED) {
			return NODE_STATE_FAILED;
		}
		return have_round ? NODE_STATE_RUNNING : NODE_STATE_INIT;
	case AGENT_PHASE_RUNNING:
	case AGENT_PHASE_STOPPING_SIGNAL:
	case AGENT_PHASE_DRAINING:
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
	case AGENT_PHASE_HEALTH_CHECK:
	case AGENT_PHASE_RENDEZVOUS:
	case AGENT_PHASE_QUARANTINED:
		return WORKER_STATE_STOPPED;
	case AGENT_PHASE_CLOSING:
		return reason == AGENT_REASON_RDZV_FAILED ? WORKER_STATE_STOPPED : gs;
	case AGENT_PHASE_INIT:
	case AGENT_PHASE_RUNNING:
	case AGENT_PHASE_STOPPING_GROUP:
	case AGENT_PHASE_EXIT_BARRIER:
	case AGENT_PHASE_STOPPING_SIGNAL:
	case AGENT_PHASE_DRAINING:
	case AGENT_PHASE_DONE:
		return gs;
	}
	return gs;
}
