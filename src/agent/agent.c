#include "agent.h"
#include "agent_internal.h"

#include <errno.h>
#include <event2/event.h>
#include <fcntl.h>
#include <jansson.h>
#include <signal.h>
#include <stdarg.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/random.h>
#include <sys/signalfd.h>
#include <sys/wait.h>
#include <time.h>

#include "config.h"
#include "config_policy.h"
#include "ctl.h"
#include "errfile.h"
#include "events.h"
#include "filetimer_server.h"
#include "agent_hang.h"
#include "agent_health.h"
#include "hang.h"
#include "group.h"
#include "log.h"
#include "numa.h"
#include "numa_crowd.h"
#include "rdzv.h"
#include "rdzv_runs.h"
#include "sd.h"
#include "sentinel.h"
#include "util.h"
#include "version.h"
#include "wenv.h"
#include "worker.h"

/* Tell systemd that the agent is shutting down (STOPPING=1 the first time),
 * and why. */
void
agent_notify_stopping(struct agent *a, const char *fmt, ...)
{
	va_list ap;
	char *status;

	if (!sd_notifier_enabled(a->sd)) {
		return;
	}
	va_start(ap, fmt);
	if (vasprintf(&status, fmt, ap) < 0) {
		abort();
	}
	va_end(ap);
	sd_notify_stopping(a->sd, status);
	free(status);
}

/* ---- the phase ------------------------------------------------------------- */

/* Leave with code: the exit status is chosen, the loop ends. */
void
agent_exit(struct agent *a, int code, enum agent_reason reason, const char *why)
{
	if (a->phase == AGENT_PHASE_DONE) {
		return;
	}
	a->exit_code = code;
	if (reason == AGENT_REASON_SIGNAL) {
		agent_report_signal(a);
	}
	agent_set_phase(a, AGENT_PHASE_DONE, reason, why);
}

/* rdzv_leave is over (or its time ran out): an exit waiting for it goes on. */
void
agent_left_cb(void *arg)
{
	struct agent *a = arg;

	a->leaving = false;
	if (a->phase == AGENT_PHASE_DONE) {
		event_base_loopbreak(a->base);
	}
}

/* Entering STOPPING_GROUP: a group that failed stops the rest itself; one that
 * still runs is stopped here (SIGTERM, escalation as always); one whose
 * workers all exited 0 only drains its output. */
static void
agent_enter_stopping_group(struct agent *a, const char *why)
{
	switch (group_state(a->group)) {
	case WORKER_STATE_FAILED:
		agent_record_group_stopping(a, SIGTERM, why, a->cfg->shutdown_timeout);
		return;
	case WORKER_STATE_HEALTHY:
		agent_record_group_stopping(a, SIGTERM, why, a->cfg->shutdown_timeout);
		agent_hang_stop(a);
		return;
	case WORKER_STATE_UNKNOWN:
	case WORKER_STATE_INIT:
	case WORKER_STATE_UNHEALTHY:
	case WORKER_STATE_STOPPED:
	case WORKER_STATE_SUCCEEDED:
		return;
	}
}

/* Entering STOPPING_SIGNAL: forward the signal to a group that runs; with
 * nothing started (still in rendezvous, or finishing) leave at once. */
static void
agent_enter_stopping_signal(struct agent *a)
{
	int sig = a->signo;

	if (a->group && !group_is_done(a->group) && group_state(a->group) != WORKER_STATE_INIT) {
		agent_record_signal(a, sig, "stop");
		agent_record_group_stopping(a, sig, "signal received", a->cfg->term_timeout);
		group_stop_within(a->group, sig, a->cfg->term_timeout);
		return;
	}
	agent_record_signal(a, sig, "exit");
	if (events_enabled(a->events)) {
		_cleanup_free_ char *raw =
			xasprintf("SignalException: Process %d got signal: %d", (int)getpid(), sig);

		agent_record_failed(a, raw);
	}
	agent_exit(a, 128 + sig, AGENT_REASON_SIGNAL, "nothing to stop");
}

/* The one place the agent's phase changes: log `old -> new (why)`, then the
 * entry action and the phase's event (the join attempt's RdzvEvent,
 * elasticd.group.stopping, elasticd.agent.restart, elasticd.agent.exit). A
 * new reason in the same phase is logged only. */
void
agent_set_phase(struct agent *a, enum agent_phase phase, enum agent_reason reason, const char *why)
{
	enum agent_phase old = a->phase;

	if (old == phase && a->reason == reason) {
		return;
	}
	log_info("[%s] agent %s -> %s (%s)", a->cfg->role, agent_phase_name(old),
		 agent_phase_name(phase), why);
	a->phase = phase;
	a->reason = reason;
	if (old == phase) {
		return;
	}
	if (old == AGENT_PHASE_HEALTH_CHECK) {
		agent_health_cancel(a);
	} else if (old == AGENT_PHASE_QUARANTINED) {
		agent_quarantine_cancel(a);
	}
	switch (phase) {
	case AGENT_PHASE_RENDEZVOUS:
		agent_record_rdzv_join(a);
		return;
	case AGENT_PHASE_STOPPING_GROUP:
		agent_enter_stopping_group(a, why);
		return;
	case AGENT_PHASE_RESTARTING:
		agent_record_restart(a, why);
		return;
	case AGENT_PHASE_STOPPING_SIGNAL:
		agent_enter_stopping_signal(a);
		return;
	case AGENT_PHASE_DRAINING:
		agent_enter_draining(a, old);
		return;
	case AGENT_PHASE_DONE:
		agent_notify_stopping(a, "exiting with status %d", a->exit_code);
		agent_record_exit(a);
		if (!a->leaving) { /* else agent_left_cb ends the loop */
			event_base_loopbreak(a->base);
		}
		return;
	case AGENT_PHASE_INIT:
	case AGENT_PHASE_HEALTH_CHECK:
	case AGENT_PHASE_RUNNING:
	case AGENT_PHASE_EXIT_BARRIER:
	case AGENT_PHASE_CLOSING:
	case AGENT_PHASE_QUARANTINED:
		return;
	}
}

/* Close the rendezvous (torchrun's rdzv_handler.shutdown()). A backend with
 * shared state records its own _close events; the static one has nothing to
 * close. */
static void
agent_shutdown_rdzv(struct agent *a)
{
	agent_report_close_record(a);
	if (rdzv_finish(a->rdzv, true) < 0) {
		agent_exit(a, a->exit_code, a->reason, "cannot close the rendezvous");
	}
}

/* Leave with code: after success the exit barrier first (torch 2.x runs it on
 * success only), then close the rendezvous and let it finish (cb.finished:
 * rdzv_finished_cb), then exit. Never used when a signal stops the agent: the
 * job must stay able to re-form. */
static void
agent_finish(struct agent *a, int code, enum agent_reason reason, bool barrier)
{
	a->exit_code = code;
	if (barrier) {
		agent_notify_stopping(a, "finishing: worker group succeeded, waiting for the "
					 "other nodes (exit barrier)");
		log_info(
			"[%s] Local worker group finished (SUCCEEDED). Waiting for other agents to "
			"finish",
			a->cfg->role);
		a->barrier_start_usec = now_usec();
		agent_set_phase(a, AGENT_PHASE_EXIT_BARRIER, reason, "worker group succeeded");
		if (rdzv_exit_barrier(a->rdzv) == 0) {
			return;
		}
	} else {
		agent_notify_stopping(a, "finishing: leaving the rendezvous, exit status %d", code);
	}
	agent_set_phase(a, AGENT_PHASE_CLOSING, reason, "leaving the rendezvous");
	agent_shutdown_rdzv(a);
}

/* The exit barrier is over (err < 0: it failed or timed out): close. */
static void
agent_barrier_done(struct agent *a, int err, const char *errmsg)
{
	double secs = (double)(now_usec() - a->barrier_start_usec) / 1e6;

	if (err < 0) {
		log_error("Error waiting on exit barrier. Elapsed: %.3f seconds: %s", secs,
			  errmsg ? errmsg : strerror(-err));
	} else {
		log_info("Done waiting for other agents. Elapsed: %.3f seconds", secs);
	}
	agent_set_phase(a, AGENT_PHASE_CLOSING, a->reason, "exit barrier done");
	agent_shutdown_rdzv(a);
}

static void
rdzv_finished_cb(int err, const char *errmsg, void *arg)
{
	struct agent *a = arg;

	switch (a->phase) {
	case AGENT_PHASE_EXIT_BARRIER:
		agent_barrier_done(a, err, errmsg);
		return;
	case AGENT_PHASE_CLOSING:
		if (err < 0) {
			log_warn("[%s] %s", a->cfg->role, errmsg ? errmsg : strerror(-err));
		}
		agent_exit(a, a->exit_code, a->reason, "left the rendezvous");
		return;
	case AGENT_PHASE_STOPPING_SIGNAL:
	case AGENT_PHASE_DRAINING:
	case AGENT_PHASE_QUARANTINED:
	case AGENT_PHASE_DONE:
		return;
	case AGENT_PHASE_INIT:
	case AGENT_PHASE_HEALTH_CHECK:
	case AGENT_PHASE_RENDEZVOUS:
	case AGENT_PHASE_RUNNING:
	case AGENT_PHASE_STOPPING_GROUP:
	case AGENT_PHASE_RESTARTING:
		log_debug("%s: the rendezvous finished in phase %s, ignoring", __func__,
			  agent_phase_name(a->phase));
		return;
	}
}

/* A running round must re-form (nodes wait to join, or a node left): restart
 * the workers without spending a restart (torchrun's num_nodes_waiting() > 0
 * in _invoke_run, told here at once instead of at the next monitor tick). */
static void
rdzv_nodes_waiting_cb(int n, const char *why, void *arg)
{
	struct agent *a = arg;

	if (a->phase != AGENT_PHASE_RUNNING || !a->group ||
	    group_state(a->group) != WORKER_STATE_HEALTHY) {
		return;
	}
	log_info("[%s] %s; will restart worker group", a->cfg->role, why);
	agent_set_phase(a, AGENT_PHASE_STOPPING_GROUP, AGENT_REASON_MEMBERSHIP,
			"membership change");
}

/* The rendezvous cannot go on (store gone, closed by a node whose workers
 * failed for good): stop the workers and exit 1 rather than hang. */
static void
rdzv_failed_cb(int err, const char *errmsg, void *arg)
{
	struct agent *a = arg;

	switch (a->phase) {
	case AGENT_PHASE_STOPPING_SIGNAL:
	case AGENT_PHASE_DRAINING:    /* leaving anyway: the workers keep their grace */
	case AGENT_PHASE_QUARANTINED: /* out of the job already */
	case AGENT_PHASE_EXIT_BARRIER:
	case AGENT_PHASE_CLOSING:
	case AGENT_PHASE_DONE:
		return;
	case AGENT_PHASE_INIT:
	case AGENT_PHASE_HEALTH_CHECK:
	case AGENT_PHASE_RENDEZVOUS:
	case AGENT_PHASE_RUNNING:
	case AGENT_PHASE_STOPPING_GROUP:
	case AGENT_PHASE_RESTARTING:
		break;
	}
	log_error("[%s] %s; stopping the workers", a->cfg->role, errmsg ? errmsg : strerror(-err));
	if (a->rdzv && rdzv_closed_by(a->rdzv)) {
		agent_report_remote_failure(a, rdzv_closed_by(a->rdzv));
	}
	if (events_enabled(a->events)) {
		/* As torchrun's monitor loop: num_nodes_waiting() raised, the
		 * agent's run fails with it. */
		_cleanup_free_ char *name = agent_rdzv_event_name(a, "num_nodes_waiting");
		_cleanup_free_ char *raw = xasprintf("RendezvousConnectionError: %s",
						     errmsg ? errmsg : strerror(-err));

		events_record_rdzv(a->events, name, NODE_STATE_FAILED, -1, "%s", raw);
		agent_record_failed(a, raw);
	}
	if (!a->group || group_is_done(a->group)) {
		agent_exit(a, AGENT_EXIT_FAILURE, AGENT_REASON_RDZV_FAILED, "rendezvous failed");
		return;
	}
	/* Stops a group that runs; one stopping already is left to finish, and
	 * the decision then exits 1 (agent_decide). */
	agent_set_phase(a, AGENT_PHASE_STOPPING_GROUP, AGENT_REASON_RDZV_FAILED,
			"rendezvous failed");
}

static void
rdzv_progress_cb(const char *msg, void *arg)
{
	struct agent *a = arg;

	log_info("[%s] %s", a->cfg->role, msg);
	sd_notify_status(a->sd, "%s", msg);
}

static void
rdzv_warn_cb(const char *msg, void *arg)
{
	struct agent *a = arg;

	log_warn("[%s] %s", a->cfg->role, msg);
}

/* ---- the run loop ------------------------------------------------------ */

static void
group_outcome_cb(struct group *g, enum worker_state state, void *arg)
{
	struct agent *a = arg;
	struct worker *first = NULL;

	if (state != WORKER_STATE_FAILED) {
		return; /* every worker exited 0: RUNNING until the output is drained */
	}
	/* The earliest failure, as torchrun's "failed (exitcode ...)" line. */
	for (size_t i = 0; i < group_size(g); i++) {
		struct worker *w = group_worker(g, i);

		if (w->failed && (!first || w->exit_usec < first->exit_usec)) {
			first = w;
		}
	}
	if (first) {
		log_error("failed (exitcode: %d) local_rank: %d (pid: %d) of binary: %s",
			  first->exitcode, first->local_rank, (int)first->pid, a->program);
	}
	if (a->phase == AGENT_PHASE_RUNNING) {
		agent_set_phase(a, AGENT_PHASE_STOPPING_GROUP, AGENT_REASON_WORKER_FAILED,
				"a worker failed");
	}
}

void
agent_on_hang(struct agent *a, const struct hang_fired *f)
{
	const struct worker *w = group_worker(a->group, (size_t)f->local_rank);
	struct hang_rules rules = agent_hang_rules(a);

	a->hung = true;
	a->hang_fired = *f;
	free(a->hang_cause);
	a->hang_cause = hang_describe(&rules, f);
	a->stats.hangs[f->rule]++;
	log_error("[%s] %s (pid %d, idle %.1f s): stopping the worker group", a->cfg->role,
		  a->hang_cause, (int)w->pid, f->idle_s);
	agent_set_phase(a, AGENT_PHASE_STOPPING_GROUP, AGENT_REASON_HANG, a->hang_cause);
}

/* Carry out an exit decision: the workers are gone, say why and leave. */
static void
agent_exit_stopped(struct agent *a)
{
	const struct agent_decision *d = &a->decision;

	switch (d->reason) {
	case AGENT_REASON_SIGNAL:
		log_warn("[%s] workers stopped after %s; exiting", a->cfg->role,
			 signal_name(a->signo));
		if (events_enabled(a->events)) {
			_cleanup_free_ char *raw =
				xasprintf("SignalException: Process %d got signal: %d",
					  (int)getpid(), a->signo);

			agent_record_failed(a, raw);
		}
		break;
	case AGENT_REASON_UNEXPECTED:
		log_error("[%s] Worker group in %s state after stopping", a->cfg->role,
			  worker_state_name(group_state(a->group)));
		agent_record_failed(a, "the worker group is in an unexpected state after stopping");
		break;
	case AGENT_REASON_DRAIN:
		log_info("[%s] drain: the workers exited; leaving the job (exit status %d)",
			 a->cfg->role, d->exit_code);
		agent_leave(a, "drain");
		break;
	case AGENT_REASON_DRAIN_FAILED:
		agent_report_failure(a);
		log_warn("[%s] drain: the workers did not all exit 0 within the grace; leaving the "
			 "job (exit status %d)",
			 a->cfg->role, d->exit_code);
		agent_leave(a, "drain");
		break;
	case AGENT_REASON_EXCLUDED:
		log_warn("[%s] excluded: the workers stopped; leaving the job (exit status %d)",
			 a->cfg->role, d->exit_code);
		agent_leave(a, "exclude");
		break;
	case AGENT_REASON_QUARANTINED:
		agent_report_failure(a);
		log_error(
			"[%s] quarantined (--quarantine-action exit): leaving the job (exit status "
			"%d)",
			a->cfg->role, d->exit_code);
		agent_leave(a, "quarantine");
		break;
	case AGENT_REASON_NONE:
	case AGENT_REASON_UNHEALTHY:
	case AGENT_REASON_SUCCEEDED:
	case AGENT_REASON_WORKER_FAILED:
	case AGENT_REASON_MEMBERSHIP:
	case AGENT_REASON_REQUESTED:
	case AGENT_REASON_RDZV_FAILED:
	case AGENT_REASON_EXHAUSTED:
	case AGENT_REASON_WINDOW:
	case AGENT_REASON_NO_RESTART_CODE:
	case AGENT_REASON_NO_PROGRESS:
	case AGENT_REASON_HANG:
		break;
	}
	agent_exit(a, d->exit_code, d->reason, "workers stopped");
}

/* The group has stopped: decide (agent_decide) and carry it out. */
void
agent_group_stopped_deferred(evutil_socket_t fd, short what, void *arg)
{
	struct agent *a = arg;
	struct agent_decide_in in;

	if (a->phase == AGENT_PHASE_DONE) {
		/* The exit was chosen meanwhile (a signal found the group gone
		 * before this deferred call ran): nothing left to decide. */
		log_debug("%s: the group stopped after the exit was chosen, ignoring", __func__);
		return;
	}
	/* The group's FileTimer goes with it (torchrun stops its watchdog), and
	 * so does its hang watch. */
	filetimer_server_free(a->ftimer);
	a->ftimer = NULL;
	agent_hang_free(a->hang);
	a->hang = NULL;
	if (agent_root_cause_wait(a)) {
		return; /* called again when the nodes' failures are compared */
	}
	agent_decide_inputs(a, &in);
	a->decision = agent_decide(&in);
	if (a->decision.quarantine_spared) {
		agent_quarantine_spared(a, in.quarantine_failures);
	}
	log_debug("%s: %s (%s)%s, delay %.3f s", __func__, agent_action_name(a->decision.action),
		  agent_reason_name(a->decision.reason),
		  a->decision.spends_restart ? ", spending a restart" : "",
		  (double)a->decision.delay_usec / USEC_PER_SEC);
	switch (a->decision.action) {
	case AGENT_ACTION_RESTART:
		agent_restart(a);
		return;
	case AGENT_ACTION_FINISH:
		log_info("[%s] worker group successfully finished in %.3f s", a->cfg->role,
			 (double)(now_usec() - a->group_start_usec) / 1e6);
		agent_record_run_result(a, WORKER_STATE_SUCCEEDED);
		agent_finish(a, a->decision.exit_code, a->decision.reason, true);
		return;
	case AGENT_ACTION_FAIL:
		agent_report_failure(a);
		agent_log_no_restart(a);
		agent_record_run_result(a, group_state(a->group));
		agent_finish(a, a->decision.exit_code, a->decision.reason, false);
		return;
	case AGENT_ACTION_EXIT:
		agent_exit_stopped(a);
		return;
	case AGENT_ACTION_QUARANTINE:
		agent_report_failure(a);
		agent_quarantine(a);
		return;
	}
}

static void
group_stopped_cb(struct group *g, void *arg)
{
	struct agent *a = arg;

	/* Never act (or free the group) inside the group's own call chain. */
	event_base_once(a->base, -1, EV_TIMEOUT, agent_group_stopped_deferred, a, NULL);
}

/* A worker that failed, in the failures-by-exit-code counters. */
void
agent_count_failure(struct agent *a, const struct worker *w)
{
	int code = w->exitcode;

	if (code < CTL_EXITCODE_MIN) {
		code = CTL_EXITCODE_MIN;
	} else if (code > CTL_EXITCODE_MAX) {
		code = CTL_EXITCODE_MAX;
	}
	a->stats.worker_failures[code - CTL_EXITCODE_MIN]++;
}

/* Count and record each worker of the group just started: started, or
 * failed to start. */
static void
agent_record_group_started(struct agent *a)
{
	for (size_t i = 0; a->group && i < group_size(a->group); i++) {
		const struct worker *w = group_worker(a->group, i);

		if (w->pid > 0) {
			a->stats.worker_starts++;
			agent_record_worker_started(a, w);
		} else if (w->failed) {
			agent_count_failure(a, w);
			agent_record_worker_exited(a, w); /* could not be started */
		}
	}
}

static void
agent_start_group(struct agent *a)
{
	const struct group_callbacks cb = {
		.outcome = group_outcome_cb,
		.stopped = group_stopped_cb,
		.arg = a,
	};
	struct group_spec spec = {
		.cfg = a->cfg,
		.base_env = a->env,
		.rdzv = &a->round,
		.local_world_size = a->local_world_size,
		.restart_count = a->restart_count,
		.set_omp_num_threads = a->set_omp_num_threads,
		.sigmask = &a->child_mask,
		.reset_signals = a->reset_signals,
		.n_reset_signals = a->n_reset_signals,
		.sentinel = a->sentinel,
		.cgroup = a->cgroup,
		.consoles = a->consoles,
		.numa = a->numa,
		.worker_server_dir = a->worker_server_dir,
		.control_socket = a->control_socket,
	};
	char *attempt_dir = NULL, *err = NULL, *cgroup_name = NULL;
	uint64_t assign_start;

	agent_hang_free(a->hang);
	a->hang = NULL;
	a->hung = false;
	free(a->hang_cause);
	a->hang_cause = NULL;
	free(a->hang_stacks);
	a->hang_stacks = NULL;
	group_free(a->group);
	a->group = NULL;
	filetimer_server_free(a->ftimer);
	a->ftimer = filetimer_server_new(
		a->base, a->env,
		&(struct filetimer_server_spec){a->cfg->rdzv_id, a->cfg->role, a->restart_count,
						a->events, &a->stats.file_timer_expired});
	spec.timer_file = filetimer_server_path(a->ftimer);
	cgroup_name = xasprintf("group%u", a->groups_started++);
	spec.cgroup_name = cgroup_name;
	if (a->run_dir) {
		attempt_dir = xasprintf("%s/attempt_%d", a->run_dir, a->restart_count);
		spec.attempt_dir = attempt_dir;
	}
	assign_start = now_usec();
	a->group = group_new(a->base, &spec, &cb, &err);
	free(attempt_dir);
	free(cgroup_name);
	if (!a->group) {
		log_error("%s", err);
		agent_record_failed(a, err);
		free(err);
		agent_exit(a, AGENT_EXIT_FAILURE, AGENT_REASON_NONE, "cannot start the workers");
		return;
	}
	agent_record_status(a, "ASSIGN_WORKER_RANKS", NULL, NULL, ms_since(assign_start));
	log_info("[%s] Starting worker group: %d workers, attempt %d, first RANK %d", a->cfg->role,
		 a->local_world_size, a->restart_count, group_worker(a->group, 0)->global_rank);
	a->group_start_usec = now_usec();
	agent_set_phase(a, AGENT_PHASE_RUNNING, AGENT_REASON_NONE, "workers started");
	group_start(a->group);
	a->hang = agent_hang_new(a);
	sd_notify_status(a->sd,
			 "running round %d with %d workers (group rank %d of %d nodes, attempt %d)",
			 a->round.round, a->local_world_size, a->round.group_rank,
			 a->round.group_world_size, a->restart_count);
	agent_log_bindings(a);
	agent_record_group_started(a);
}

/* Keep the round res (the backend's, valid during the callback) as our own. */
static void
agent_keep_round(struct agent *a, const struct rdzv_result *res)
{
	rdzv_result_release(&a->round);
	strv_free(a->round_roles);
	a->round_roles = NULL;
	a->round = *res;
	/* The runs and roles belong to the backend, which frees them at its
	 * next round. O(runs): a job of alike nodes is one run. */
	rdzv_runs_copy(res->runs, res->n_runs, &a->round.runs, &a->round_roles);
	a->round.master_addr = xstrdup(res->master_addr);
}

/* The rendezvous failed (err < 0): as torchrun's launcher, close it (a store
 * host also lets the other nodes hear why), then exit 1. */
static void
agent_rdzv_error(struct agent *a, int err, const char *errmsg)
{
	log_error("[%s] rendezvous failed: %s", a->cfg->role, errmsg ? errmsg : strerror(-err));
	if (rdzv_closed_by(a->rdzv)) {
		agent_report_remote_failure(a, rdzv_closed_by(a->rdzv));
	}
	if (events_enabled(a->events)) {
		_cleanup_free_ char *name = agent_rdzv_event_name(a, "next_rendezvous");
		_cleanup_free_ char *raw =
			xasprintf("RendezvousError: %s", errmsg ? errmsg : strerror(-err));

		events_record_rdzv(a->events, name, NODE_STATE_FAILED, -1, "%s", raw);
		agent_record_failed(a, raw);
	}
	agent_finish(a, AGENT_EXIT_FAILURE, AGENT_REASON_RDZV_FAILED, false);
}

static void
rdzv_done_cb(int err, const struct rdzv_result *res, const char *errmsg, void *arg)
{
	struct agent *a = arg;

	switch (a->phase) {
	case AGENT_PHASE_RENDEZVOUS:
		break;
	case AGENT_PHASE_STOPPING_SIGNAL:
		agent_exit(a, 128 + a->signo, AGENT_REASON_SIGNAL, "rendezvous over");
		return;
	case AGENT_PHASE_DONE:
		return;
	case AGENT_PHASE_INIT:
	case AGENT_PHASE_HEALTH_CHECK:
	case AGENT_PHASE_RUNNING:
	case AGENT_PHASE_STOPPING_GROUP:
	case AGENT_PHASE_RESTARTING:
	case AGENT_PHASE_EXIT_BARRIER:
	case AGENT_PHASE_CLOSING:
	case AGENT_PHASE_DRAINING:
	case AGENT_PHASE_QUARANTINED:
		log_debug("%s: a rendezvous result in phase %s, ignoring", __func__,
			  agent_phase_name(a->phase));
		return;
	}
	if (err == RDZV_GRACEFUL_EXIT) {
		/* A spare node and the job ended: not a failure. */
		log_info("[%s] Rendezvous gracefully exited: %s", a->cfg->role,
			 errmsg ? errmsg : "closed");
		agent_exit(a, AGENT_EXIT_SUCCESS, AGENT_REASON_NONE, "rendezvous closed");
		return;
	}
	if (err < 0) {
		agent_rdzv_error(a, err, errmsg);
		return;
	}
	agent_keep_round(a, res);
	agent_quarantine_inherit(a);
	a->stats.rdzv_rounds++;
	a->stats.rdzv_last_seconds = ms_since(a->rdzv_start_usec) / 1000.0;
	a->stats.rdzv_seconds_sum += a->stats.rdzv_last_seconds;
	log_info("[%s] Rendezvous complete: round %d, group_rank %d/%d, master %s:%d, "
		 "restart_count %d",
		 a->cfg->role, res->round, res->group_rank, res->group_world_size, res->master_addr,
		 res->master_port, a->restart_count);
	if (events_enabled(a->events)) {
		_cleanup_free_ char *name = agent_rdzv_event_name(a, "next_rendezvous");

		events_record_rdzv(
			a->events, name, NODE_STATE_RUNNING, res->group_rank,
			"The node '%s' has joined round %d of the rendezvous '%s' as rank %d "
			"in a world of size %d.",
			agent_node_desc(a), res->round, a->cfg->rdzv_id, res->group_rank,
			res->group_world_size);
		agent_record_status(a, "RENDEZVOUS", NULL, NULL, ms_since(a->rdzv_start_usec));
	}
	agent_start_group(a);
}

void
agent_start_round(struct agent *a, enum agent_reason reason, const char *why)
{
	if (!agent_health_gate(a, reason, why)) {
		agent_join_round(a, reason, why);
	}
}

void
agent_join_round(struct agent *a, enum agent_reason reason, const char *why)
{
	int r;

	log_info("[%s] Rendezvous'ing worker group", a->cfg->role);
	a->rdzv_start_usec = now_usec();
	if (a->cfg->min_nodes == a->cfg->max_nodes) {
		sd_notify_status(a->sd, "waiting for %d node%s: rendezvous '%s' (%s)",
				 a->cfg->min_nodes, a->cfg->min_nodes == 1 ? "" : "s",
				 a->cfg->rdzv_id, a->cfg->rdzv_backend);
	} else {
		sd_notify_status(a->sd, "waiting for %d to %d nodes: rendezvous '%s' (%s)",
				 a->cfg->min_nodes, a->cfg->max_nodes, a->cfg->rdzv_id,
				 a->cfg->rdzv_backend);
	}
	agent_set_phase(a, AGENT_PHASE_RENDEZVOUS, reason, why);
	r = rdzv_next(a->rdzv);
	if (r < 0) {
		log_error("[%s] cannot start the rendezvous: %s", a->cfg->role, strerror(-r));
		agent_exit(a, AGENT_EXIT_FAILURE, AGENT_REASON_RDZV_FAILED,
			   "cannot start the rendezvous");
	}
}

/* ---- start-up ---------------------------------------------------------- */

static void
agent_sd_error_cb(int err, const char *state, const char *what, void *arg)
{
	struct agent *a = arg;

	if (what) {
		log_warn("systemd notification: %s: %s", what, strerror(-err));
		return;
	}
	if (!a->sd_warned) {
		a->sd_warned = true;
		log_warn("cannot notify systemd (%.*s): %s (later failures are not logged)",
			 (int)strcspn(state, "\n"), state, strerror(-err));
	}
}

/* The agent is set up: tell systemd (READY=1). The control socket, when there
 * is one, must be listening by now; start it before this call (or move this
 * call to where it listens). Before the first rendezvous, which may wait for
 * other nodes far longer than TimeoutStartSec. */
static void
agent_ready(struct agent *a)
{
	if (!sd_notifier_enabled(a->sd)) {
		return;
	}
	sd_notify_ready(a->sd, "ready");
	log_debug("told systemd READY=1");
}

struct agent *
agent_new(struct event_base *base, const struct config *cfg, char *const *envp, int *ret_exit,
	  char **reterr)
{
	struct agent *a = xcalloc(1, sizeof(*a));
	struct rdzv_callbacks rcb = {
		.done = rdzv_done_cb,
		.arg = a,
		.nodes_waiting = rdzv_nodes_waiting_cb,
		.failed = rdzv_failed_cb,
		.finished = rdzv_finished_cb,
		.progress = rdzv_progress_cb,
		.warn = rdzv_warn_cb,
	};
	enum events_sink sink = EVENTS_SINK_NULL;
	bool log_file_given = cfg->event_log_file && *cfg->event_log_file;
	int n;

	a->base = base;
	a->cfg = cfg;
	a->env = strv_copy(envp);
	a->sigfd = -1;
	a->phase = AGENT_PHASE_INIT;
	a->remaining_restarts = cfg->max_restarts;
	a->start_usec = now_usec();
	*ret_exit = AGENT_EXIT_FAILURE;
	if (event_base_priority_init(base, AGENT_PRIORITIES) < 0) {
		log_debug("cannot set up event priorities; the signalfd gets no precedence");
	}
	agent_setup_consoles(a);

	n = agent_plan(a, ret_exit, reterr);
	if (n < 0) {
		goto out_free;
	}
	a->local_world_size = n;
	if (cfg->dry_run) {
		return a; /* agent_run prints the plan; nothing else is set up */
	}
	if (agent_setup_events(a, &sink, reterr) < 0) {
		goto out_free;
	}
	a->sd = sd_notifier_new(base, a->env, agent_sd_error_cb, a);
	if (sd_notifier_watchdog_interval(a->sd) > 0) {
		log_info("systemd watchdog: pinging every %.3f s",
			 (double)sd_notifier_watchdog_interval(a->sd) / 1e6);
	}
	rcb.events = a->events;
	a->rcb = rcb;
	a->rdzv = rdzv_new(base, cfg, n, &rcb, reterr);
	if (!a->rdzv) {
		if (events_enabled(a->events)) {
			_cleanup_free_ char *name = agent_rdzv_event_name(a, "create_handler");

			events_record_rdzv(a->events, name, NODE_STATE_FAILED, -1, "ValueError: %s",
					   *reterr);
		}
		*ret_exit = AGENT_EXIT_USAGE;
		goto out_free;
	}
	if (agent_make_run_dir(a, reterr) < 0) {
		goto out_free;
	}
	if (sink == EVENTS_SINK_FILE && !log_file_given && agent_open_event_file(a, reterr) < 0) {
		goto out_free;
	}
	agent_find_program(a);
	agent_setup_policy(a);
	agent_health_setup(a);
	agent_quarantine_setup(a);
	if (agent_setup_supervision(a, reterr) < 0) {
		goto out_free;
	}
	return a;

out_free:
	agent_free(a);
	return NULL;
}

void
agent_set_worker_server_dir(struct agent *a, const char *dir)
{
	a->worker_server_dir = dir;
}

void
agent_set_control_socket(struct agent *a, const char *path)
{
	a->control_socket = path;
}

int
agent_run(struct agent *a)
{
	struct elastic_event ev;

	if (a->cfg->dry_run) {
		return agent_print_plan(a);
	}
	log_info("[%s] starting workers for entrypoint: %s (%s)", a->cfg->role, a->cfg->entrypoint,
		 a->program);
	if (agent_event_begin(a, &ev, "elasticd.agent.started", EVENT_SOURCE_AGENT)) {
		elastic_event_set_int(&ev, "pid", getpid());
		elastic_event_set_string(&ev, "version", ELASTICD_VERSION);
		elastic_event_set_string(&ev, "entrypoint", a->cfg->entrypoint);
		elastic_event_set_int(&ev, "local_world_size", a->local_world_size);
		elastic_event_set_int(&ev, "max_restarts", a->cfg->max_restarts);
		elastic_event_set_string(&ev, "rdzv_backend", a->cfg->rdzv_backend);
		elastic_event_set_string(&ev, "run_dir", a->run_dir);
		elastic_event_set_string(&ev, "orphan_guard", a->orphan_guard);
		agent_record(a, &ev);
	}
	agent_ready(a);
	agent_start_round(a, AGENT_REASON_NONE, "first round");
	if (a->phase != AGENT_PHASE_DONE) {
		event_base_dispatch(a->base);
	}
	agent_drain_consoles(a);
	log_info("elasticd exits with status %d after %.3f s", a->exit_code,
		 (double)(now_usec() - a->start_usec) / 1e6);
	agent_notify_stopping(a, "exiting with status %d", a->exit_code);
	return a->exit_code;
}

struct events *
agent_events(struct agent *a)
{
	return a->events;
}

void
agent_free(struct agent *a)
{
	if (!a) {
		return;
	}
	agent_hang_free(a->hang);
	free(a->hang_cause);
	free(a->hang_stacks);
	agent_health_free(a->health);
	free(a->exclude_reason);
	agent_quarantine_free(a);
	agent_root_cause_free(a);
	group_free(a->group);
	filetimer_server_free(a->ftimer);
	rdzv_free(a->rdzv);
	rdzv_result_release(&a->round);
	strv_free(a->round_roles);
	sentinel_free(a->sentinel);
	free(a->cgroup);
	sd_notifier_free(a->sd);
	free(a->event_log_path);
	agent_free_consoles(a);
	if (a->sigev) {
		event_free(a->sigev);
	}
	if (a->drain_timer) {
		event_free(a->drain_timer);
	}
	if (a->backoff_timer) {
		event_free(a->backoff_timer);
	}
	free(a->window_times);
	/* The handled signals stay blocked: a signal pending now must not turn the
	 * exit status we chose into a death by signal. */
	if (a->sigfd >= 0) {
		close(a->sigfd);
	}
	strv_free(a->env);
	free(a->run_dir);
	free(a->reset_signals);
	free(a->program);
	events_free(a->events);
	free(a->node_desc);
	numa_plan_free(a->numa);
	free(a);
}

/* ---- for the control plane ------------------------------------------------ */

int
agent_local_world_size(const struct agent *a)
{
	return a->local_world_size;
}
