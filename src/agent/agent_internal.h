/* agent_internal.h — the agent's state, shared by the agent's own files
 * (agent.c: the run loop; agent_status.c: what the control plane sees).
 * Nothing outside the agent includes it. */
#pragma once

#include <event2/util.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>

#include "agent_decide.h"
#include "ctl.h"
#include "hang.h"
#include "rdzv.h"
#include "util.h"

struct config;
struct console;
struct event;
struct event_base;
struct events;
struct filetimer_server;
struct group;
struct numa_plan;
struct sd_notifier;
struct sentinel;
struct elastic_event;
struct worker;

struct agent_hang;
struct agent_health;

/* Event priorities: the signalfd (child exits and signals) and the hang
 * rules' timer run before any other ready event, so that no client of the
 * control socket and no output, however busy, delays supervision (with
 * agent_base_new's dispatch slice); everything else shares the default
 * priority. */
#define AGENT_PRIORITIES 2

/* A killed sentinel is respawned at most this many times within this many
 * seconds; past that the agent runs without one (agent_signals.c). */
#define SENTINEL_RESPAWNS 3
#define SENTINEL_RESPAWN_WINDOW_S 60
#define AGENT_PRIO_SUPERVISION 0

/* The root-cause step of a failed attempt (agent_rootcause.c). */
enum agent_rc_stage {
	AGENT_RC_IDLE,      /* none under way */
	AGENT_RC_REPORTING, /* writing this node's failure report */
	AGENT_RC_READING,   /* the others' settle time, then a read of the state */
};

enum agent_rc {
	AGENT_RC_PENDING, /* not known yet */
	AGENT_RC_SELF,    /* this node failed first (or within the tie tolerance) */
	AGENT_RC_OTHER,   /* another node failed earlier: not counted */
	AGENT_RC_UNKNOWN, /* could not compare (or no shared state): counted */
};

struct agent_root_cause {
	uint64_t group_start; /* the stopped group it is about (its group_start_usec) */
	enum agent_rc_stage stage;
	enum agent_rc verdict;
	int64_t round;           /* the round the group ran in */
	int64_t usec;            /* its first worker failure, wall usec */
	uint64_t deadline_usec;  /* CLOCK_MONOTONIC: the bound of the step */
	char *other;             /* the earliest other report's node, or NULL */
	double other_earlier_ms; /* ... and how much earlier than ours */
	struct event *timer;
};

struct agent {
	struct event_base *base;
	const struct config *cfg;
	char **env; /* what the workers inherit */

	sigset_t orig_mask;
	sigset_t child_mask; /* the workers': orig_mask without --forward-signals */
	sigset_t mask;
	int sigfd;
	struct event *sigev;
	struct sentinel *sentinel;
	/* When the sentinel died and was respawned (agent_signals.c). */
	uint64_t sentinel_respawn_times[SENTINEL_RESPAWNS + 1]; /* its deaths */
	size_t sentinel_respawn_next;
	/* The orphan guard in force (guard.h): "cgroup", "sentinel" (ancestry)
	 * or "none" (no sentinel), and in cgroup mode the agent's subtree. */
	const char *orphan_guard;
	char *cgroup;
	unsigned groups_started;     /* names the groups' cgroups */
	struct console *consoles[2]; /* our stdout and stderr, never blocking */
	int *reset_signals;          /* set to SIG_DFL in the workers */
	size_t n_reset_signals;

	struct rdzv *rdzv;
	struct rdzv_result round;
	char **round_roles; /* owned copies of round.runs[].role */
	struct group *group;
	struct filetimer_server *ftimer; /* torch's FileTimer for the group, NULL: off */
	struct agent_hang *hang;         /* the hang rules' watch of the group, NULL: off */
	bool hung;                       /* a hang rule fired in this attempt ... */
	struct hang_fired hang_fired;    /* ... this one ... */
	char *hang_cause;                /* ... with this root cause (hang_describe) */
	char *hang_stacks;               /* ... and its stacks here (agent_stacks.h) */

	/* What the agent is doing (agent_set_phase), and why it entered it. */
	enum agent_phase phase;
	enum agent_reason reason;
	struct agent_decision decision; /* the last one, while it is carried out */
	int local_world_size;
	bool set_omp_num_threads;
	char *run_dir; /* NULL for --log-dir /dev/null */
	char *program; /* the workers' executable as found in PATH, for messages */
	int restart_count;
	int remaining_restarts;
	int signo;     /* the handled signal obeyed (STOPPING_SIGNAL on), else 0 */
	bool leaving;  /* rdzv_leave under way after a signal: DONE waits for it */
	int exit_code; /* chosen when finishing (EXIT_BARRIER, CLOSING) or at DONE */
	uint64_t start_usec;
	uint64_t group_start_usec;
	struct numa_plan *numa; /* each local rank's GPU and binding, NULL: not planned */

	struct events *events;
	bool events_warned;       /* a failed event write was logged (once) */
	char *node_desc;          /* "<fqdn>_<pid>_0" for RdzvEvent messages, lazily */
	uint64_t rdzv_start_usec; /* CLOCK_MONOTONIC: when the rendezvous under way began */

	uint64_t barrier_start_usec; /* CLOCK_MONOTONIC: when the exit barrier began */

	/* The restart policy's state (agent_decide's counters). */
	struct event *backoff_timer;    /* the wait before a failure restart's rendezvous */
	uint64_t next_attempt_usec;     /* CLOCK_MONOTONIC: when it ends; 0: no wait */
	int failure_streak;             /* failure restarts in a row (the backoff's exponent) */
	uint64_t *window_times;         /* the last --restart-window N failure restarts, a ring */
	size_t window_next;             /* the ring's oldest slot */
	struct agent_progress progress; /* the no-progress rule (--progress-file) */
	uint64_t rng;                   /* the backoff's jitter: xorshift64*, seeded per process */

	/* A drain under way (agent_request_drain, phase DRAINING). */
	struct event *drain_timer;    /* the grace: stop the workers when it ends */
	int drain_signo;              /* the notice sent to the workers */
	int drain_timeout_s;          /* the grace, seconds */
	uint64_t drain_deadline_usec; /* CLOCK_MONOTONIC: when it ends; 0: no grace running */

	struct agent_health *health; /* the health gate (agent_health.h), NULL: no checks */
	const char *control_socket;  /* the control plane's socket (borrowed), NULL: none */
	char *exclude_reason;        /* the exclude verb's reason, NULL: not excluded */
	struct rdzv_callbacks rcb;   /* for a new rendezvous after a quarantine */

	/* --quarantine's root cause of the last failed attempt (agent_rootcause.c). */
	struct agent_root_cause rc;

	/* --quarantine (agent_quarantine.c). */
	uint64_t *quarantine_times;     /* this node's last F failed attempts, a ring */
	size_t quarantine_next;         /* the ring's oldest slot */
	int quarantines;                /* quarantines so far (the cooldown's exponent) */
	int quarantines_inherited;      /* ... of them from the shared state (a restart) */
	struct event *quarantine_timer; /* the cooldown */
	uint64_t quarantine_start_usec; /* CLOCK_MONOTONIC: when the last one began */
	uint64_t quarantine_until_usec; /* ... and when its cooldown ends; 0: none */
	int64_t quarantine_until_wall;  /* ... as written in the shared state (wall usec) */
	struct event *quarantine_watch; /* re-reads the shared state for a readmission */
	struct rdzv *quarantine_rdzv;   /* ... through a handle of its own, NULL: none */
	bool quarantine_watch_warned;   /* it could not be made (logged once) */
	uint64_t quarantine_checks;     /* reads of the shared state in this quarantine */
	/* The readmit verb for another node (agent_request_readmit): its host
	 * (NULL: none under way), a fresh read then the write (readmit_writing),
	 * each retried while the rendezvous is busy until readmit_deadline_usec,
	 * and the caller's answer (NULL: gone). */
	char *readmit_host;
	bool readmit_writing;
	struct event *readmit_timer;
	uint64_t readmit_deadline_usec;
	void (*readmit_reply)(void *call, int status, const char *msg);
	void *readmit_call;

	const char *worker_server_dir;   /* the control plane's (borrowed), NULL: none */
	struct ctl_agent_counters stats; /* for the metrics handler (ctl.h) */

	/* systemd (sd.h): READY/STATUS/STOPPING and the watchdog; no-ops
	 * without $NOTIFY_SOCKET. */
	struct sd_notifier *sd;
	bool sd_warned;       /* a failed notification was logged (once) */
	bool hup_reopens;     /* SIGHUP re-opens the logs (it is not a handled signal) */
	char *event_log_path; /* the event log file, for SIGHUP; NULL: none */
};

/* ---- agent.c: the run loop and the phase ---------------------------------- */

/* Tell systemd that the agent is shutting down (STOPPING=1 the first time),
 * and why. A no-op without $NOTIFY_SOCKET. */
void agent_notify_stopping(struct agent *a, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

/* The one place the agent's phase changes: logs `old -> new (why)`, runs the
 * entry action and records the phase's event. */
void agent_set_phase(struct agent *a, enum agent_phase phase, enum agent_reason reason,
		     const char *why);

/* Leave with code: the exit status is chosen (phase DONE), the loop ends. */
void agent_exit(struct agent *a, int code, enum agent_reason reason, const char *why);

/* Rejoin the rendezvous for a new round (for reason, why): through the
 * health gate (phase HEALTH_CHECK) when checks are configured, else at once
 * (agent_join_round). */
void agent_start_round(struct agent *a, enum agent_reason reason, const char *why);

/* Join the rendezvous now (phase RENDEZVOUS for reason, why): the health gate
 * passed, or there is none. */
void agent_join_round(struct agent *a, enum agent_reason reason, const char *why);

/* rdzv_leave's callback (arg: the agent): an exit waiting for it goes on. */
void agent_left_cb(void *arg);

/* Count worker w's failure in the failures-by-exit-code counters. */
void agent_count_failure(struct agent *a, const struct worker *w);

/* A hang rule fired (agent_hang.c): record it (log, event, metrics) and stop
 * the group; its attempt then counts as a failure with f as root cause. */
void agent_on_hang(struct agent *a, const struct hang_fired *f);

/* ---- agent_events.c: what the agent records ------------------------------- */

/* Milliseconds since start_usec (CLOCK_MONOTONIC), for durations. */
static inline double
ms_since(uint64_t start_usec)
{
	return (double)(now_usec() - start_usec) / (double)USEC_PER_MSEC;
}

/* Record ev (events_record) and release it; a failure is logged once. */
void agent_record(struct agent *a, struct elastic_event *ev);

/* Start one of elasticd's own events with its common metadata. Returns false
 * (and builds nothing) when events are disabled. */
bool agent_event_begin(struct agent *a, struct elastic_event *ev, const char *name,
		       enum event_source source);

/* torchrun's torchelastic.worker.status.<state>: worker w's, or the agent's
 * when w is NULL; duration_ms < 0 is null. */
void agent_record_status(struct agent *a, const char *state, const struct worker *w,
			 const char *raw_error, double duration_ms);

/* The agent's own failure (torchrun: agent.run() raised). */
void agent_record_failed(struct agent *a, const char *raw_error);

/* The end of torchrun's agent.run(): one event per worker of the last group
 * in state, then the launcher's AGENT SUCCEEDED. */
void agent_record_run_result(struct agent *a, enum worker_state state);

/* torch's _NodeDesc of this agent ("<fqdn>_<pid>_0"), for RdzvEvent messages
 * and the status. Made on first use; borrowed from the agent. */
const char *agent_node_desc(struct agent *a);

/* "rdzv_<backend>.c:<torch method>", an RdzvEvent's name; the caller frees it. */
char *agent_rdzv_event_name(const struct agent *a, const char *method);

/* elasticd.worker.started: worker w, its attempt and its binding. */
void agent_record_worker_started(struct agent *a, const struct worker *w);

/* elasticd.worker.exited: worker w, how it ended and after how long. */
void agent_record_worker_exited(struct agent *a, const struct worker *w);

/* elasticd.signal.received: sig, and what the agent does with it (action). */
void agent_record_signal(struct agent *a, int sig, const char *action);

/* elasticd.group.stopping: sig sent to the workers, SIGKILL after grace_s. */
void agent_record_group_stopping(struct agent *a, int sig, const char *why, int grace_s);

/* elasticd.agent.restart: the decision being carried out, and why. */
void agent_record_restart(struct agent *a, const char *why);

/* The RdzvEvent of a node that starts a round (torch's next_rendezvous). */
void agent_record_rdzv_join(struct agent *a);

/* elasticd.agent.exit: the agent leaves (the end of torchrun's agent.run()). */
void agent_record_exit(struct agent *a);

/* elasticd.agent.drain: the notice sent to n_sent worker process groups, the
 * grace, and the phase the drain began in (from). */
void agent_record_drain(struct agent *a, enum agent_phase from, int n_sent);

/* elasticd.worker.hang: the rule f that fired on worker w, with its stacks'
 * paths (a->hang_stacks); agent_stacks.c records it once they are known. */
void agent_record_hang(struct agent *a, const struct hang_fired *f, const struct worker *w);

/* ---- agent_signals.c: signals and children -------------------------------- */

/* Send sig to every worker's process group that still has members; returns
 * how many got it. */
int agent_signal_groups(struct agent *a, int sig);

/* Become the subreaper, route the handled signals and SIGCHLD to the
 * signalfd, start the sentinel. Returns 0, or -errno with *reterr. */
int agent_setup_supervision(struct agent *a, char **reterr);

/* ---- agent_policy.c: the restart policy ---------------------------------- */

/* What agent_decide looks at, from the agent's phase, group and counters;
 * after a failure, reads the progress file. */
void agent_decide_inputs(struct agent *a, struct agent_decide_in *in);

/* A failure that ends the job: log which rule ended it (a->decision). */
void agent_log_no_restart(struct agent *a);

/* Carry out a restart decision (a->decision): spend a restart or count a
 * free re-form, then rejoin the rendezvous, after the backoff if any. */
void agent_restart(struct agent *a);

/* Set up the policy's state: the jitter's seed, the window's ring, the
 * progress file's number at start. */
void agent_setup_policy(struct agent *a);

/* ---- agent_drain.c: the drain verb ---------------------------------------- */

/* Leave the rendezvous for good but open, so that the others re-form without
 * this node and without spending a restart; DONE waits for it. what names
 * the cause in the log line ("drain", "health", "exclude"). */
void agent_leave(struct agent *a, const char *what);

/* Entering DRAINING from old: the notice and the grace to a group that runs;
 * with no group, leave at once and exit 0. */
void agent_enter_draining(struct agent *a, enum agent_phase old);

/* ---- agent_quarantine.c: --quarantine and the readmit verb ---------------- */

/* The ring of failed attempts for --quarantine F/W (none when off). */
void agent_quarantine_setup(struct agent *a);

/* An attempt of this node failed: count it; returns its failed attempts in
 * the last W seconds, this one included (0 with --quarantine off). */
int agent_quarantine_count(struct agent *a);

/* Whether this node is never quarantined: it serves the c10d store of a job
 * of several nodes, and leaving would take the job's store and admissions
 * with it (the others would wait for a round nobody forms). */
bool agent_quarantine_exempt(const struct agent *a);

/* The decision spared this exempt node a quarantine after n failures: a
 * warning, the event elasticd.node.quarantine_exempt and its count (status,
 * metric); it goes on as without --quarantine. */
void agent_quarantine_spared(struct agent *a, int n);

/* Carry out a QUARANTINE decision: record it (log, event, STATUS=), leave
 * the rendezvous open for the others, enter phase QUARANTINED and wait out
 * the cooldown (--quarantine-cooldown, doubled for each earlier quarantine),
 * then rejoin with a new rendezvous handle. */
void agent_quarantine(struct agent *a);

/* After a round completed: a quarantine count of this host in the shared
 * state above this agent's (an earlier agent of the host, before a
 * restart) becomes this agent's, so that its next cooldown keeps doubling;
 * logged once, and the status's quarantine_count shows it. */
void agent_quarantine_inherit(struct agent *a);

/* Leaving phase QUARANTINED for another reason (a signal, a drain): stop the
 * cooldown. */
void agent_quarantine_cancel(struct agent *a);

/* ---- agent_rootcause.c: --quarantine's root cause across nodes ---------- */

/* The group stopped: decide (agent.c; also called again once the
 * root-cause step is over). */
void agent_group_stopped_deferred(evutil_socket_t fd, short what, void *arg);

/* Before deciding on a stopped group: with --quarantine and a failed
 * attempt, start the root-cause step (report, settle, read, compare) and
 * return true: it calls agent_group_stopped_deferred again when over (at
 * most ROOT_CAUSE_BOUND_S later). false: decide now (nothing to compare, or
 * compared already). */
bool agent_root_cause_wait(struct agent *a);

/* Whether the failure of the stopped group counts toward --quarantine:
 * false only when another node failed earlier. */
bool agent_root_cause_counts(const struct agent *a);

/* "this node", "another node", ... Static storage. */
const char *agent_rc_name(enum agent_rc v);

/* The status's "root_cause": null, or the last verdict {round, verdict,
 * earliest_other, earlier_ms}. A new reference. */
struct json_t *agent_root_cause_status(const struct agent *a);

void agent_root_cause_free(struct agent *a);

/* Free the quarantine's timers and the readmit verb's pending request. */
void agent_quarantine_free(struct agent *a);

/* The status's "quarantine": null, or while quarantined {cooldown_s,
 * remaining_s, failures, quarantines}. A new reference. */
struct json_t *agent_quarantine_status(const struct agent *a);

/* ---- agent_setup.c: agent_new's set-up ------------------------------------ */

/* Find the GPUs (hwloc, when needed), resolve --nproc-per-node and plan each
 * local rank's binding into a->numa. Returns the number of local workers, or
 * -1 with *ret_exit and *reterr set. */
int agent_plan(struct agent *a, int *ret_exit, char **reterr);

/* One line per started worker with its binding, when binding was asked. */
void agent_log_bindings(struct agent *a);

/* --dry-run: print the plan as JSON lines on stdout; returns the exit status. */
int agent_print_plan(struct agent *a);

/* Make the run directory a->run_dir under --log-dir (or $LOGS_DIRECTORY, or
 * a temporary one); none for /dev/null. Returns 0, or -errno with *reterr. */
int agent_make_run_dir(struct agent *a, char **reterr);

/* The event recorder, and its sink when known before the run directory;
 * *ret_sink: the sink asked for. Returns 0, or -errno with *reterr. */
int agent_setup_events(struct agent *a, enum events_sink *ret_sink, char **reterr);

/* The default event file, events.jsonl in the run directory (none for
 * --log-dir /dev/null). Returns 0, or -errno with *reterr. */
int agent_open_event_file(struct agent *a, char **reterr);

/* The workers' program as found in PATH, for messages; and torchrun's
 * OMP_NUM_THREADS=1 default for more than one local worker. */
void agent_find_program(struct agent *a);

/* a->consoles on stdout and stderr (one shared console when both are one
 * file), and the log's sink on stderr's. */
void agent_setup_consoles(struct agent *a);

/* Every worker pipe reached end of file: write what the consoles still
 * queue, for up to CONSOLE_EXIT_DRAIN_MS (drops announced), before the final
 * status line. */
void agent_drain_consoles(struct agent *a);

/* Unset the log's sink and free the consoles. */
void agent_free_consoles(struct agent *a);

/* ---- agent_report.c: what a failure leaves behind -------------------------- */

struct process_failure;

/* The failure table's traceback for f, worker w's failure, when w wrote no
 * error file but its stderr went to a log file (-r/-t): the last lines of
 * that file (logtail.h) in place of torch's "To enable traceback see: ...",
 * after torch's "Signal N (NAME) received by PID P" for a signal. Otherwise
 * f is left as it is. */
void agent_report_add_stderr(struct process_failure *f, const struct worker *w);

/* Fill the agent's own error file own (its TORCHELASTIC_ERROR_FILE) for the
 * root cause: a copy of the worker's error file with "errorCode", as
 * torchrun; for a worker without one, an entry made up in torch's format
 * whose message carries f's traceback (the stderr lines, when there are).
 * Logs what goes wrong. */
void agent_report_error_file(const char *own, const struct process_failure *root);

/* The failure report of the group's failed (or hung) workers: torch's
 * ChildFailedError table on the log, and the agent's own error file. */
void agent_report_failure(struct agent *a);

/* The agent is leaving because of signal a->signo: write torch's
 * SignalException to its TORCHELASTIC_ERROR_FILE, when it has one. */
void agent_report_signal(struct agent *a);

/* Before closing the rendezvous: when the job ends because this node's
 * workers failed (a->reason), hand its earliest failed worker to the
 * rendezvous, which records it with the closing (rdzv_set_close_record). */
void agent_report_close_record(struct agent *a);

/* Another node closed the rendezvous because its workers failed: print the
 * failure table with that node's worker (rec) as the root cause. */
void agent_report_remote_failure(struct agent *a, const struct rdzv_close_record *rec);
