/* agent_policy.c — the restart policy around agent_decide: its inputs (the
 * backoff's jitter, the window of failure restarts, the progress file), and
 * carrying out a restart (spend or not, the backoff timer). */
#include "agent.h"
#include "agent_internal.h"

#include <errno.h>
#include <event2/event.h>
#include <string.h>
#include <sys/random.h>
#include <unistd.h>

#include "config.h"
#include "config_policy.h"
#include "group.h"
#include "log.h"
#include "sd.h"
#include "util.h"
#include "worker.h"

/* A number in [0, 1) for the backoff's jitter: xorshift64* over a->rng,
 * which agent_new seeds per process. */
static double
agent_jitter(struct agent *a)
{
	uint64_t x = a->rng ? a->rng : 0x9e3779b97f4a7c15ULL;

	x ^= x >> 12;
	x ^= x << 25;
	x ^= x >> 27;
	a->rng = x;
	return (double)((x * 0x2545f4914f6cdd1dULL) >> 11) / 9007199254740992.0;
}

/* The number in --progress-file into *ret; false when the file cannot be read
 * or holds none (which counts as no progress). */
static bool
agent_read_progress(struct agent *a, double *ret)
{
	_cleanup_free_ char *buf = NULL;
	size_t len = 0;
	int r = read_file(a->cfg->progress_file, 4096, &buf, &len);

	if (r < 0) {
		log_debug("%s: cannot read '%s': %s", __func__, a->cfg->progress_file,
			  strerror(-r));
		return false;
	}
	return agent_progress_parse(buf, len, ret);
}

/* An attempt failed: the no-progress rule reads the progress file. */
static void
agent_progress_attempt_failed(struct agent *a)
{
	double v = 0;
	bool have;

	if (!a->cfg->progress_file) {
		return;
	}
	have = agent_read_progress(a, &v);
	if (agent_progress_failed(&a->progress, have, v) == 0) {
		log_info("[%s] progress: '%s' holds %g", a->cfg->role, a->cfg->progress_file, v);
		return;
	}
	log_warn("[%s] no progress: '%s' %s over %d failed attempt%s in a row "
		 "(--progress-attempts %d)",
		 a->cfg->role, a->cfg->progress_file, have ? "did not rise" : "holds no number",
		 a->progress.stalled, a->progress.stalled == 1 ? "" : "s",
		 a->cfg->progress_attempts);
}

/* The first failed worker that exited with one of --no-restart-exit-codes,
 * or NULL. */
static const struct worker *
agent_no_restart_worker(const struct agent *a)
{
	for (size_t i = 0; a->group && i < group_size(a->group); i++) {
		const struct worker *w = group_worker(a->group, i);

		if (w->failed && config_no_restart_code(a->cfg, w->exitcode)) {
			return w;
		}
	}
	return NULL;
}

/* What agent_decide looks at, from the agent's phase, group and counters. */
void
agent_decide_inputs(struct agent *a, struct agent_decide_in *in)
{
	const struct config *cfg = a->cfg;
	uint64_t now = now_usec();

	*in = (struct agent_decide_in){
		.phase = a->phase,
		.stop_reason = a->reason,
		.outcome = agent_outcome_after(group_state(a->group), a->reason),
		.signo = a->signo,
		.remaining_restarts = a->remaining_restarts,
		.max_restarts = cfg->max_restarts,
		.window_max = cfg->restart_window_n,
		.progress_attempts = cfg->progress_file ? cfg->progress_attempts : 0,
		.detailed_exit = cfg->exit_codes_detailed,
		.failure_streak = a->failure_streak,
		.attempt_usec = now - a->group_start_usec,
		.backoff_min_usec = seconds_to_usec(cfg->restart_backoff_min),
		.backoff_max_usec = seconds_to_usec(cfg->restart_backoff_max),
		.jitter = agent_jitter(a),
	};
	if (in->outcome != AGENT_OUTCOME_FAILED) {
		return;
	}
	agent_progress_attempt_failed(a);
	in->stalled_attempts = a->progress.stalled;
	in->quarantine_failures = agent_quarantine_count(a);
	in->quarantine_max = cfg->quarantine_n;
	in->quarantine_exit = cfg->quarantine_exit;
	in->quarantine_exempt = agent_quarantine_exempt(a);
	in->no_restart_code = agent_no_restart_worker(a) != NULL;
	if (a->window_times) {
		in->window_restarts =
			agent_window_count(a->window_times, (size_t)cfg->restart_window_n, now,
					   seconds_to_usec(cfg->restart_window_s));
	}
}

/* A failure that ends the job: say which rule ended it (after the failure
 * table). */
void
agent_log_no_restart(struct agent *a)
{
	const struct config *cfg = a->cfg;
	const struct worker *w;
	int code = a->decision.exit_code;

	switch (a->decision.reason) {
	case AGENT_REASON_NO_RESTART_CODE:
		w = agent_no_restart_worker(a);
		log_error("[%s] local_rank %d exited with %d, one of --no-restart-exit-codes: "
			  "no restart (exit status %d)",
			  cfg->role, w ? w->local_rank : -1, w ? w->exitcode : 0, code);
		return;
	case AGENT_REASON_NO_PROGRESS:
		log_error("[%s] no progress in '%s' over %d failed attempts in a row: no restart "
			  "(exit status %d)",
			  cfg->role, cfg->progress_file, a->progress.stalled, code);
		return;
	case AGENT_REASON_WINDOW:
		log_error("[%s] restarts exhausted: %d failure restarts within the last %g s "
			  "(--restart-window %d/%g) (exit status %d)",
			  cfg->role, cfg->restart_window_n, cfg->restart_window_s,
			  cfg->restart_window_n, cfg->restart_window_s, code);
		return;
	case AGENT_REASON_EXHAUSTED:
		log_error("[%s] restarts exhausted: %d of --max-restarts %d spent (exit status %d)",
			  cfg->role, cfg->max_restarts - a->remaining_restarts, cfg->max_restarts,
			  code);
		return;
	case AGENT_REASON_NONE:
	case AGENT_REASON_SUCCEEDED:
	case AGENT_REASON_WORKER_FAILED:
	case AGENT_REASON_MEMBERSHIP:
	case AGENT_REASON_REQUESTED:
	case AGENT_REASON_RDZV_FAILED:
	case AGENT_REASON_SIGNAL:
	case AGENT_REASON_DRAIN:
	case AGENT_REASON_DRAIN_FAILED:
	case AGENT_REASON_HANG:
	case AGENT_REASON_UNHEALTHY:
	case AGENT_REASON_EXCLUDED:
	case AGENT_REASON_QUARANTINED:
	case AGENT_REASON_UNEXPECTED:
		return;
	}
}

/* The backoff is over: rejoin the rendezvous. */
static void
agent_backoff_cb(evutil_socket_t fd, short what, void *arg)
{
	struct agent *a = arg;

	a->next_attempt_usec = 0;
	if (a->phase == AGENT_PHASE_RESTARTING) {
		agent_start_round(a, a->decision.reason, "restart backoff over");
	}
}

/* Wait the decision's backoff before the rendezvous (the timer calls
 * agent_backoff_cb). */
static void
agent_arm_backoff(struct agent *a)
{
	uint64_t d = a->decision.delay_usec;
	struct timeval tv = usec_to_timeval(d);

	log_warn("[%s] restart backoff: next attempt in %.3f s (failure %d in a row, "
		 "--restart-backoff %g:%g)",
		 a->cfg->role, (double)d / USEC_PER_SEC, a->failure_streak,
		 a->cfg->restart_backoff_min, a->cfg->restart_backoff_max);
	sd_notify_status(a->sd, "restarting in %.1f s: worker group failed, %d of %d restarts left",
			 (double)d / USEC_PER_SEC, a->remaining_restarts, a->cfg->max_restarts);
	a->next_attempt_usec = now_usec() + d;
	a->stats.backoffs++;
	a->stats.backoff_seconds_sum += (double)d / USEC_PER_SEC;
	if (!a->backoff_timer) {
		a->backoff_timer = evtimer_new(a->base, agent_backoff_cb, a);
	}
	evtimer_add(a->backoff_timer, &tv);
}

/* Carry out a restart decision: spend a restart (and count it in the
 * window) or count a free re-form, then rejoin the rendezvous, after the
 * backoff when the decision has one. */
void
agent_restart(struct agent *a)
{
	const struct agent_decision *d = &a->decision;

	if (d->spends_restart) {
		log_warn("[%s] Worker group FAILED. %d/%d attempts left; will restart worker group",
			 a->cfg->role, a->remaining_restarts, a->cfg->max_restarts);
		a->remaining_restarts--;
		a->restart_count++;
		a->stats.restarts_failure++;
		a->failure_streak = d->failure_streak;
		if (a->window_times) {
			a->window_times[a->window_next] = now_usec();
			a->window_next = (a->window_next + 1) % (size_t)a->cfg->restart_window_n;
		}
	} else if (d->reason == AGENT_REASON_REQUESTED) {
		a->stats.restarts_requested++;
	} else {
		a->stats.restarts_membership++;
	}
	agent_set_phase(a, AGENT_PHASE_RESTARTING, d->reason, agent_reason_name(d->reason));
	if (d->delay_usec > 0) {
		agent_arm_backoff(a);
		return;
	}
	if (d->spends_restart) {
		sd_notify_status(a->sd, "restarting: worker group failed, %d of %d restarts left",
				 a->remaining_restarts, a->cfg->max_restarts);
	} else {
		sd_notify_status(a->sd, "restarting: %s", agent_reason_name(d->reason));
	}
	agent_start_round(a, d->reason, "new attempt");
}

/* The restart policy's state: the jitter's seed (per process, so that
 * nodes that failed together do not retry together), the window's ring, and
 * the progress file's number at start (the no-progress rule's baseline). */
void
agent_setup_policy(struct agent *a)
{
	const struct config *cfg = a->cfg;
	double v = 0;

	if (getrandom(&a->rng, sizeof(a->rng), GRND_NONBLOCK) != (ssize_t)sizeof(a->rng)) {
		a->rng = now_usec() ^ wall_usec() ^ ((uint64_t)getpid() << 32);
	}
	if (cfg->restart_window_n > 0) {
		a->window_times = xcalloc((size_t)cfg->restart_window_n, sizeof(uint64_t));
		if (cfg->max_restarts == 0) {
			log_warn("--restart-window %d/%g: --max-restarts is 0, so no failure is "
				 "restarted; raise --max-restarts for the window to count",
				 cfg->restart_window_n, cfg->restart_window_s);
		}
	}
	if (cfg->progress_file && agent_read_progress(a, &v)) {
		a->progress.have_best = true;
		a->progress.best = v;
		log_info("progress: '%s' holds %g at start", cfg->progress_file, v);
	}
}

/* ---- for the control plane ------------------------------------------------ */

int
agent_request_restart(struct agent *a, char **reterr)
{
	switch (a->phase) {
	case AGENT_PHASE_DRAINING:
		*reterr = xstrdup("the agent is draining");
		return -EBUSY;
	case AGENT_PHASE_QUARANTINED:
		*reterr = xstrdup("the node is quarantined (readmit ends it)");
		return -EBUSY;
	case AGENT_PHASE_STOPPING_SIGNAL:
	case AGENT_PHASE_EXIT_BARRIER:
	case AGENT_PHASE_CLOSING:
	case AGENT_PHASE_DONE:
		*reterr = xstrdup("the agent is stopping");
		return -EBUSY;
	case AGENT_PHASE_INIT:
	case AGENT_PHASE_HEALTH_CHECK:
	case AGENT_PHASE_RENDEZVOUS:
	case AGENT_PHASE_RUNNING:
	case AGENT_PHASE_STOPPING_GROUP:
	case AGENT_PHASE_RESTARTING:
		break;
	}
	if (a->phase == AGENT_PHASE_RESTARTING && a->next_attempt_usec) {
		/* An operator's restart never waits: end the backoff now. */
		log_info("[%s] restart requested over the control socket; ending the restart "
			 "backoff",
			 a->cfg->role);
		evtimer_del(a->backoff_timer);
		a->next_attempt_usec = 0;
		agent_start_round(a, a->decision.reason, "restart backoff ended on request");
		return 0;
	}
	if (!a->group || group_is_done(a->group) || group_state(a->group) != WORKER_STATE_HEALTHY) {
		*reterr = xasprintf(
			"no worker group is running (worker group %s%s)",
			worker_state_name(a->group ? group_state(a->group) : WORKER_STATE_INIT),
			a->phase == AGENT_PHASE_RENDEZVOUS ? ", rendezvous under way" : "");
		return -EBUSY;
	}
	log_info("[%s] restart requested over the control socket; will restart worker group",
		 a->cfg->role);
	agent_set_phase(a, AGENT_PHASE_STOPPING_GROUP, AGENT_REASON_REQUESTED, "restart requested");
	return 0;
}
