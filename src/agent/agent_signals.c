/* agent_signals.c — the agent's supervision of signals and children: the
 * signalfd (handled, forwarded and child signals), reaping, the workers'
 * signal set-up, and the signal verbs of the control plane. */
#include "agent.h"
#include "agent_internal.h"
#include "agent_health.h"

#include <errno.h>
#include <event2/event.h>
#include <signal.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/wait.h>
#include <unistd.h>

#include "config.h"
#include "config_policy.h"
#include "events.h"
#include "group.h"
#include "log.h"
#include "cgroup.h"
#include "guard.h"
#include "sentinel.h"
#include "util.h"
#include "worker.h"

/* Signals whose disposition Python's Popen restores for its children
 * (restore_signals): workers get them at SIG_DFL whatever the agent had. The
 * handled signals (--signals-to-handle) are reset too: torchrun installs its
 * handlers before spawning, so its workers start with them at SIG_DFL even
 * when torchrun itself was started with them ignored (nohup, `cmd &`). */
static const int popen_reset_signals[] = {SIGPIPE, SIGXFSZ};

/* Send sig to every worker's process group that still has members; returns
 * how many got it. */
int
agent_signal_groups(struct agent *a, int sig)
{
	int sent = 0;

	for (size_t i = 0; a->group && i < group_size(a->group); i++) {
		struct worker *w = group_worker(a->group, i);

		if (w->pid > 0 && worker_group_alive(w) && worker_signal(w, sig) == 0) {
			sent++;
		}
	}
	return sent;
}

/* The sentinel died (someone killed it): fork a new one that holds what it
 * held, at most SENTINEL_RESPAWNS times within SENTINEL_RESPAWN_WINDOW_S;
 * past that, the agent runs without one (orphan_guard "none"). */
static void
agent_sentinel_died(struct agent *a, pid_t pid, int status)
{
	uint64_t now = now_usec();
	struct elastic_event ev;
	char *how = wait_status_describe(status);
	size_t groups, procs;
	int r = -EAGAIN;

	a->sentinel_respawn_times[a->sentinel_respawn_next] = now;
	a->sentinel_respawn_next = (a->sentinel_respawn_next + 1) % (SENTINEL_RESPAWNS + 1);
	/* This death included: the one past SENTINEL_RESPAWNS is not replaced. */
	if (agent_window_count(a->sentinel_respawn_times, SENTINEL_RESPAWNS + 1, now,
			       seconds_to_usec(SENTINEL_RESPAWN_WINDOW_S)) <= SENTINEL_RESPAWNS) {
		r = sentinel_respawn(a->sentinel);
	}
	sentinel_held(a->sentinel, &groups, &procs);
	if (r == 0) {
		a->stats.sentinel_respawns++;
		log_warn("the sentinel process %d exited (%s); started a new one (pid %d) holding "
			 "%zu process groups and %zu processes",
			 (int)pid, how, (int)sentinel_pid(a->sentinel), groups, procs);
	} else {
		a->orphan_guard = a->cgroup ? "cgroup" : "none";
		log_error("the sentinel process %d exited (%s) and no new one runs (%s): "
			  "orphaned processes will not be cleaned up if the agent dies",
			  (int)pid, how, r == -EAGAIN ? "it died too often" : strerror(-r));
	}
	if (agent_event_begin(a, &ev, "elasticd.sentinel.exited", EVENT_SOURCE_AGENT)) {
		elastic_event_set_int(&ev, "pid", pid);
		elastic_event_set_string(&ev, "status", how);
		elastic_event_set_int(&ev, "new_pid", r == 0 ? sentinel_pid(a->sentinel) : 0);
		elastic_event_set_int(&ev, "process_groups", (int64_t)groups);
		elastic_event_set_int(&ev, "processes", (int64_t)procs);
		agent_record(a, &ev);
	}
	free(how);
}

static void
agent_reap(struct agent *a)
{
	for (;;) {
		int status;
		pid_t pid = waitpid(-1, &status, WNOHANG);

		if (pid <= 0) {
			break;
		}
		if (a->group && group_handle_exit(a->group, pid, status)) {
			for (size_t i = 0; i < group_size(a->group); i++) {
				const struct worker *w = group_worker(a->group, i);

				if (w->pid == pid) {
					a->stats.worker_exits++;
					if (w->failed) {
						agent_count_failure(a, w);
					}
					agent_record_worker_exited(a, w);
				}
			}
			continue;
		}
		if (agent_health_reaped(a, pid, status)) {
			continue;
		}
		if (pid == sentinel_pid(a->sentinel)) {
			sentinel_reaped(a->sentinel);
			agent_sentinel_died(a, pid, status);
			continue;
		}
		log_debug("reaped pid %d (not a worker: an orphan re-parented to the agent)",
			  (int)pid);
	}
	if (a->group) {
		group_after_reap(a->group);
	}
}

static void
agent_on_signal(struct agent *a, int sig)
{
	switch (a->phase) {
	case AGENT_PHASE_STOPPING_SIGNAL:
		/* Asked twice: the user means it. */
		log_warn("Received %s again while stopping; killing the workers now",
			 signal_name(sig));
		agent_record_signal(a, sig, "kill");
		if (a->group) {
			agent_record_group_stopping(a, SIGKILL, "signal received again", 0);
			group_stop(a->group, SIGKILL);
		}
		return;
	case AGENT_PHASE_DONE:
		return; /* the loop is ending */
	case AGENT_PHASE_INIT:
	case AGENT_PHASE_HEALTH_CHECK:
	case AGENT_PHASE_RENDEZVOUS:
	case AGENT_PHASE_RUNNING:
	case AGENT_PHASE_STOPPING_GROUP:
	case AGENT_PHASE_RESTARTING:
	case AGENT_PHASE_EXIT_BARRIER:
	case AGENT_PHASE_CLOSING:
	case AGENT_PHASE_DRAINING:
	case AGENT_PHASE_QUARANTINED:
		break;
	}
	a->signo = sig;
	log_warn("Received %s death signal, shutting down workers", signal_name(sig));
	/* Out of the rendezvous, left open for the others, while the workers
	 * stop; a leave under way already (drain, exclude, quarantine: it may
	 * carry the quarantine entry) is waited for, not forgotten. */
	a->leaving = a->leaving ||
		     (a->phase != AGENT_PHASE_EXIT_BARRIER && a->phase != AGENT_PHASE_CLOSING &&
		      a->rdzv && rdzv_leave(a->rdzv, 5 * USEC_PER_SEC, agent_left_cb, a) == 0);
	agent_notify_stopping(a, "stopping: %s received, stopping the workers (SIGKILL after %d s)",
			      signal_name(sig), a->cfg->term_timeout);
	agent_set_phase(a, AGENT_PHASE_STOPPING_SIGNAL, AGENT_REASON_SIGNAL, signal_name(sig));
}

/* SIGHUP when it is not a handled signal: re-open the event log file, so that
 * logrotate can move it away (then signal us). Nothing else elasticd writes
 * is re-opened: its own log is stderr (the journal under systemd), and the
 * workers hold their per-attempt stdout.log/stderr.log themselves. */
static void
agent_reopen_logs(struct agent *a)
{
	char *err = NULL;
	int r;

	if (!a->event_log_path || events_get_sink(a->events) != EVENTS_SINK_FILE) {
		log_info("Received SIGHUP: no log file to re-open (elasticd logs to stderr)");
		agent_record_signal(a, SIGHUP, "reopen");
		return;
	}
	r = events_set_sink(a->events, EVENTS_SINK_FILE, a->event_log_path, &err);
	if (r < 0) {
		log_error("Received SIGHUP: %s; the events still go to the file open before",
			  err ? err : strerror(-r));
		free(err);
		return;
	}
	log_info("Received SIGHUP: re-opened the event log %s", a->event_log_path);
	agent_record_signal(a, SIGHUP, "reopen");
}

/* One of --forward-signals: send it on to every worker's process group that
 * still has members; supervision goes on as before (a preemption notice, not
 * a stop). */
static void
agent_forward_signal(struct agent *a, int sig)
{
	int sent = agent_signal_groups(a, sig);

	a->stats.signals_forwarded++;
	log_info("Received %s: forwarded to %d worker process group%s (--forward-signals); "
		 "supervision goes on",
		 signal_name(sig), sent, sent == 1 ? "" : "s");
	agent_record_signal(a, sig, "forward");
}

static void
signalfd_cb(evutil_socket_t fd, short what, void *arg)
{
	struct agent *a = arg;
	bool child = false;

	for (;;) {
		struct signalfd_siginfo si;
		ssize_t n = read(a->sigfd, &si, sizeof(si));

		if (n != (ssize_t)sizeof(si)) {
			break;
		}
		if (si.ssi_signo == SIGCHLD) {
			child = true;
		} else if (config_forwards_signal(a->cfg, (int)si.ssi_signo)) {
			agent_forward_signal(a, (int)si.ssi_signo);
		} else if (si.ssi_signo == SIGHUP && a->hup_reopens) {
			agent_reopen_logs(a);
		} else {
			if (child) {
				agent_reap(a);
				child = false;
			}
			agent_on_signal(a, (int)si.ssi_signo);
		}
	}
	if (child) {
		agent_reap(a);
	}
}

/* Add each of sigs[0..n) to the agent's mask, except one ignored when we
 * started (nohup): that stays ignored. */
static void
agent_mask_signals(struct agent *a, const int *sigs, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		struct sigaction old;

		if (sigaction(sigs[i], NULL, &old) == 0 && old.sa_handler == SIG_IGN) {
			log_debug("%s was ignored at start; not handling it", signal_name(sigs[i]));
			continue;
		}
		sigaddset(&a->mask, sigs[i]);
	}
}

/* Whether a handled signal goes back to SIG_DFL in the workers. One ignored
 * at start (nohup) stays ignored, except SIGINT and SIGQUIT: a shell ignores
 * those for every background job, and torchrun's workers get them at default. */
static bool
agent_resets_handled(int sig)
{
	struct sigaction old;

	if (sig == SIGINT || sig == SIGQUIT) {
		return true;
	}
	return sigaction(sig, NULL, &old) < 0 || old.sa_handler != SIG_IGN;
}

/* The dispositions the workers get back at SIG_DFL: Popen's, the handled
 * signals not ignored at start and the forwarded ones; and their mask, the
 * agent's at start without the forwarded signals (a worker must get them). */
static void
agent_child_signals(struct agent *a)
{
	const struct config *cfg = a->cfg;
	size_t n = ARRAY_SIZE(popen_reset_signals);

	a->reset_signals = xcalloc(n + cfg->n_signals + cfg->n_forward_signals, sizeof(int));
	memcpy(a->reset_signals, popen_reset_signals, sizeof(popen_reset_signals));
	for (size_t i = 0; i < cfg->n_signals; i++) {
		if (agent_resets_handled(cfg->signals[i])) {
			a->reset_signals[n++] = cfg->signals[i];
		}
	}
	memcpy(a->reset_signals + n, cfg->forward_signals, cfg->n_forward_signals * sizeof(int));
	a->n_reset_signals = n + cfg->n_forward_signals;
	a->child_mask = a->orig_mask;
	for (size_t i = 0; i < cfg->n_forward_signals; i++) {
		sigdelset(&a->child_mask, cfg->forward_signals[i]);
	}
}

static int
agent_setup_signals(struct agent *a, char **reterr)
{
	struct sigaction ign = {.sa_handler = SIG_IGN};

	sigemptyset(&a->mask);
	sigaddset(&a->mask, SIGCHLD);
	agent_mask_signals(a, a->cfg->signals, a->cfg->n_signals);
	agent_mask_signals(a, a->cfg->forward_signals, a->cfg->n_forward_signals);
	/* SIGHUP not handled (as under systemd, where the default leaves it out):
	 * it re-opens the logs, unless it was ignored at start (nohup). */
	if (!sigismember(&a->mask, SIGHUP)) {
		struct sigaction old;

		a->hup_reopens = true;
		for (size_t i = 0; i < a->cfg->n_signals; i++) {
			a->hup_reopens = a->hup_reopens && a->cfg->signals[i] != SIGHUP;
		}
		if (sigaction(SIGHUP, NULL, &old) == 0 && old.sa_handler == SIG_IGN) {
			a->hup_reopens = false;
		}
		if (a->hup_reopens) {
			sigaddset(&a->mask, SIGHUP);
		}
	}
	sigaction(SIGPIPE, &ign, NULL);
	if (sigprocmask(SIG_BLOCK, &a->mask, &a->orig_mask) < 0) {
		*reterr = xasprintf("cannot block signals: %s", strerror(errno));
		return -errno;
	}
	agent_child_signals(a);
	a->sigfd = signalfd(-1, &a->mask, SFD_NONBLOCK | SFD_CLOEXEC);
	if (a->sigfd < 0) {
		*reterr = xasprintf("cannot create a signalfd: %s", strerror(errno));
		return -errno;
	}
	a->sigev = event_new(a->base, a->sigfd, EV_READ | EV_PERSIST, signalfd_cb, a);
	event_priority_set(a->sigev, AGENT_PRIO_SUPERVISION);
	event_add(a->sigev, NULL);
	return 0;
}

/* Choose the orphan guard (--orphan-guard, guard.h) and start the sentinel.
 * Returns 0, or -errno with *reterr when cgroup mode was asked for and is not
 * possible. */
static int
agent_setup_guard(struct agent *a, char **reterr)
{
	const char *want = a->cfg->orphan_guard ? a->cfg->orphan_guard : "auto";
	char *why = NULL;

	if (strcmp(want, "sentinel") != 0) {
		int r = cgroup_subtree_new(&a->cgroup, &why);

		if (r < 0 && strcmp(want, "cgroup") == 0) {
			*reterr = xasprintf("--orphan-guard cgroup: %s", why);
			free(why);
			return r;
		}
	}
	a->sentinel = sentinel_new(a->cgroup);
	if (!a->sentinel) {
		log_warn("cannot start the sentinel process (%s): a SIGKILLed agent may leave "
			 "workers' children behind",
			 strerror(errno));
		a->orphan_guard = a->cgroup ? "cgroup" : "none";
	} else {
		a->orphan_guard = a->cgroup ? "cgroup" : "sentinel";
	}
	if (a->cgroup) {
		log_info("orphan guard: cgroup v2 subtree %s; every process the workers start "
			 "is killed with cgroup.kill when the agent dies",
			 a->cgroup);
	} else if (a->sentinel) {
		log_info("orphan guard: the sentinel, by ancestry (%s); a process created and "
			 "re-parented within the last scan (every %d ms, %d ms after a new one) "
			 "before the agent is SIGKILLed may survive",
			 why ? why : "--orphan-guard sentinel", GUARD_SCAN_MS, GUARD_SCAN_FAST_MS);
	}
	free(why);
	return 0;
}

/* Supervision: become the subreaper, route the handled signals and SIGCHLD
 * to the signalfd, choose the orphan guard and start the sentinel. Returns
 * 0, or -errno with *reterr. */
int
agent_setup_supervision(struct agent *a, char **reterr)
{
	int r;

	if (prctl(PR_SET_CHILD_SUBREAPER, 1) < 0) {
		log_warn("cannot become a child subreaper: %s", strerror(errno));
	}
	r = agent_setup_signals(a, reterr);
	if (r < 0) {
		return r;
	}
	return agent_setup_guard(a, reterr);
}

void
agent_request_stop(struct agent *a, int sig)
{
	log_warn("stop requested over the control socket (as %s)", signal_name(sig));
	agent_on_signal(a, sig);
}

int
agent_signal_worker(struct agent *a, int local_rank, int sig, char **reterr)
{
	size_t first = local_rank < 0 ? 0 : (size_t)local_rank;
	size_t last = local_rank < 0 && a->group ? group_size(a->group) : first + 1;
	int sent = 0, r = 0;

	if (!a->group) {
		*reterr = xstrdup("no worker group was started yet");
		return -ENOENT;
	}
	for (size_t i = first; i < last; i++) {
		struct worker *w = group_worker(a->group, i);
		int e;

		if (!w || w->pid <= 0 || (w->reaped && !worker_group_alive(w))) {
			continue;
		}
		e = worker_signal(w, sig);
		if (e < 0) {
			r = e;
			continue;
		}
		log_info("[%s] sent %s to local_rank %zu (pid %d) as asked over the control socket",
			 a->cfg->role, signal_name(sig), i, (int)w->pid);
		sent++;
	}
	if (sent > 0) {
		return 0;
	}
	if (r < 0 && r != -ESRCH) {
		*reterr = xasprintf("kill: %s", strerror(-r));
		return r;
	}
	*reterr = local_rank < 0 ? xstrdup("no worker is running")
				 : xasprintf("local_rank %d is not running", local_rank);
	return -ESRCH;
}
