/* agent_drain.c — the drain verb: tell the workers to wrap up (a notice
 * signal and a grace), then leave the job without spending a restart, so
 * that the other nodes re-form without this one. */
#include "agent.h"
#include "agent_internal.h"

#include <errno.h>
#include <event2/event.h>
#include <signal.h>
#include <string.h>

#include "config.h"
#include "events.h"
#include "group.h"
#include "log.h"
#include "util.h"

/* Leave the rendezvous for good but open (as after a signal), so that the
 * others re-form without this node and without spending a restart. DONE
 * waits for it (agent_left_cb). */
void
agent_leave(struct agent *a, const char *what)
{
	a->leaving = a->rdzv && rdzv_leave(a->rdzv, 5 * USEC_PER_SEC, agent_left_cb, a) == 0;
	log_info("[%s] %s: leaving the rendezvous%s", a->cfg->role, what,
		 a->leaving ? "; the other nodes re-form without this one" : " (nothing to leave)");
}

/* The drain's grace is over and workers still run: stop them (SIGTERM,
 * SIGKILL after --shutdown-timeout); the decision then exits 1. */
static void
agent_drain_timer_cb(evutil_socket_t fd, short what, void *arg)
{
	struct agent *a = arg;

	a->drain_deadline_usec = 0;
	if (a->phase != AGENT_PHASE_DRAINING || !a->group || group_is_done(a->group) ||
	    group_state(a->group) != WORKER_STATE_HEALTHY) {
		return;
	}
	log_warn("[%s] drain: the workers did not exit within %d s of %s; stopping them "
		 "(SIGTERM, SIGKILL after %d s)",
		 a->cfg->role, a->drain_timeout_s, signal_name(a->drain_signo),
		 a->cfg->shutdown_timeout);
	agent_set_phase(a, AGENT_PHASE_DRAINING, AGENT_REASON_DRAIN_FAILED, "drain grace over");
	agent_record_group_stopping(a, SIGTERM, "drain grace over", a->cfg->shutdown_timeout);
	group_stop(a->group, SIGTERM);
}

/* Entering DRAINING from old: a group that runs gets the notice and the grace
 * (agent_drain_timer_cb); one being stopped already is left to stop; the
 * group's end is decided as usual (agent_decide's DRAINING rows). With no
 * group (rendezvous, restart backoff) leave at once and exit 0. */
void
agent_enter_draining(struct agent *a, enum agent_phase old)
{
	bool running =
		a->group && !group_is_done(a->group) && group_state(a->group) != WORKER_STATE_INIT;
	struct timeval tv = {a->drain_timeout_s, 0};
	int sent;

	if (a->backoff_timer) {
		evtimer_del(a->backoff_timer);
	}
	a->next_attempt_usec = 0;
	if (running && old == AGENT_PHASE_RUNNING) {
		sent = agent_signal_groups(a, a->drain_signo);
		agent_record_drain(a, old, sent);
		log_info("[%s] drain: sent %s to %d worker process group%s; leaving the job once "
			 "they exit (stopped after %d s)",
			 a->cfg->role, signal_name(a->drain_signo), sent, sent == 1 ? "" : "s",
			 a->drain_timeout_s);
		agent_notify_stopping(a, "draining: %s sent, waiting up to %d s for the workers",
				      signal_name(a->drain_signo), a->drain_timeout_s);
		if (!a->drain_timer) {
			a->drain_timer = evtimer_new(a->base, agent_drain_timer_cb, a);
		}
		a->drain_deadline_usec = now_usec() + (uint64_t)a->drain_timeout_s * USEC_PER_SEC;
		evtimer_add(a->drain_timer, &tv);
		return;
	}
	agent_record_drain(a, old, 0);
	if (running) {
		log_info("[%s] drain: the worker group is stopping already; leaving the job once "
			 "it has stopped",
			 a->cfg->role);
		agent_notify_stopping(a, "draining: waiting for the worker group to stop");
		return;
	}
	log_info("[%s] drain: no worker group runs (%s)", a->cfg->role, agent_phase_name(old));
	agent_leave(a, "drain");
	agent_exit(a, AGENT_EXIT_SUCCESS, AGENT_REASON_DRAIN, "nothing to drain");
}

/* Why the agent cannot begin to leave the job now, for a drain or an
 * exclusion (a static string), or NULL. */
static const char *
agent_leave_refusal(const struct agent *a)
{
	switch (a->phase) {
	case AGENT_PHASE_DRAINING:
		return "the agent is draining";
	case AGENT_PHASE_STOPPING_SIGNAL:
	case AGENT_PHASE_DONE:
		return "the agent is stopping";
	case AGENT_PHASE_EXIT_BARRIER:
	case AGENT_PHASE_CLOSING:
		return "the job is finishing";
	case AGENT_PHASE_STOPPING_GROUP:
		return a->reason == AGENT_REASON_RDZV_FAILED ? "the rendezvous failed" : NULL;
	case AGENT_PHASE_RUNNING:
		return a->group && group_state(a->group) == WORKER_STATE_SUCCEEDED
			       ? "the worker group succeeded: the job is finishing"
			       : NULL;
	case AGENT_PHASE_INIT:
	case AGENT_PHASE_HEALTH_CHECK:
	case AGENT_PHASE_RENDEZVOUS:
	case AGENT_PHASE_RESTARTING:
	case AGENT_PHASE_QUARANTINED:
		return NULL;
	}
	return NULL;
}

int
agent_request_drain(struct agent *a, int sig, int timeout_s, char **reterr)
{
	const char *refusal = a->phase == AGENT_PHASE_DRAINING ? "the agent is draining already"
							       : agent_leave_refusal(a);

	if (refusal) {
		*reterr = xstrdup(refusal);
		return a->phase == AGENT_PHASE_DRAINING ? -EALREADY : -EBUSY;
	}
	if (sig <= 0) {
		sig = a->cfg->n_forward_signals > 0 ? a->cfg->forward_signals[0] : SIGUSR1;
	}
	a->drain_signo = sig;
	a->drain_timeout_s = timeout_s >= 0 ? timeout_s : a->cfg->term_timeout;
	log_warn("[%s] drain requested over the control socket (notice %s, grace %d s)",
		 a->cfg->role, signal_name(sig), a->drain_timeout_s);
	agent_set_phase(a, AGENT_PHASE_DRAINING, AGENT_REASON_DRAIN, "drain requested");
	return 0;
}

/* ---- the exclude verb -------------------------------------------------------- */

/* elasticd.node.excluded: the reason, and the phase the exclusion began in. */
static void
agent_record_excluded(struct agent *a, enum agent_phase from, bool group_running)
{
	struct elastic_event ev;

	if (!agent_event_begin(a, &ev, "elasticd.node.excluded", EVENT_SOURCE_AGENT)) {
		return;
	}
	elastic_event_set_string(&ev, "reason", a->exclude_reason);
	elastic_event_set_string(&ev, "phase", agent_phase_name(from));
	elastic_event_set_bool(&ev, "group_running", group_running);
	elastic_event_set_int(&ev, "exit_code", AGENT_EXIT_NODE_EXCLUDED);
	agent_record(a, &ev);
}

int
agent_request_exclude(struct agent *a, const char *reason, char **reterr)
{
	const char *refusal =
		a->exclude_reason ? "the node is excluded already" : agent_leave_refusal(a);
	enum agent_phase from = a->phase;
	bool running;

	if (refusal) {
		*reterr = xstrdup(refusal);
		return a->exclude_reason ? -EALREADY : -EBUSY;
	}
	a->exclude_reason = bytes_printable(reason, strlen(reason));
	running = a->group && !group_is_done(a->group) &&
		  (from == AGENT_PHASE_RUNNING || from == AGENT_PHASE_STOPPING_GROUP);
	log_warn("[%s] excluded over the control socket%s%s: %s", a->cfg->role, *reason ? ": " : "",
		 a->exclude_reason,
		 running ? "stopping the workers, then leaving the job"
			 : "no worker group runs; leaving the job");
	agent_record_excluded(a, from, running);
	agent_notify_stopping(a, "excluded%s%s: leaving the job, exit status %d",
			      *reason ? ": " : "", a->exclude_reason, AGENT_EXIT_NODE_EXCLUDED);
	if (running) {
		/* A group stopping already keeps stopping; the decision then
		 * exits 6 (agent_decide's EXCLUDED row). */
		agent_set_phase(a, AGENT_PHASE_STOPPING_GROUP, AGENT_REASON_EXCLUDED, "excluded");
		return 0;
	}
	if (a->backoff_timer) {
		evtimer_del(a->backoff_timer);
	}
	a->next_attempt_usec = 0;
	agent_leave(a, "exclude");
	agent_exit(a, AGENT_EXIT_NODE_EXCLUDED, AGENT_REASON_EXCLUDED, "excluded");
	return 0;
}
