/* agent_internal.h — the agent's state, shared by the agent's own files
 * (agent.c: the run loop; agent_status.c: what the control plane sees).
 * Nothing outside the agent includes it. */
#pragma once

#include <signal.h>
#include <stdbool.h>
#include <stdint.h>

#include "agent_decide.h"
#include "ctl.h"
#include "hang.h"
#include "rdzv.h"

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

struct agent_hang;

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
	struct console *consoles[2]; /* our stdout and stderr, never blocking */
	int *reset_signals;          /* set to SIG_DFL in the workers */
	size_t n_reset_signals;

	struct rdzv *rdzv;
	struct rdzv_result round;
	char **round_roles; /* owned copies of round.nodes[].role */
	struct group *group;
	struct filetimer_server *ftimer; /* torch's FileTimer for the group, NULL: off */
	struct agent_hang *hang;         /* the hang rules' watch of the group, NULL: off */
	bool hung;                       /* a hang rule fired in this attempt ... */
	struct hang_fired hang_fired;    /* ... this one ... */
	char *hang_cause;                /* ... with this root cause (hang_describe) */

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

	const char *worker_server_dir;   /* the control plane's (borrowed), NULL: none */
	struct ctl_agent_counters stats; /* for the metrics handler (ctl.h) */

	/* systemd (sd.h): READY/STATUS/STOPPING and the watchdog; no-ops
	 * without $NOTIFY_SOCKET. */
	struct sd_notifier *sd;
	bool sd_warned;       /* a failed notification was logged (once) */
	bool hup_reopens;     /* SIGHUP re-opens the logs (it is not a handled signal) */
	char *event_log_path; /* the event log file, for SIGHUP; NULL: none */
};

/* torch's _NodeDesc of this agent ("<fqdn>_<pid>_0"), for RdzvEvent messages
 * and the status. Made on first use; borrowed from the agent. */
const char *agent_node_desc(struct agent *a);

/* A hang rule fired (agent_hang.c): record it (log, event, metrics) and stop
 * the group; its attempt then counts as a failure with f as root cause. */
void agent_on_hang(struct agent *a, const struct hang_fired *f);

/* ---- agent_report.c: what a failure leaves behind -------------------------- */

struct process_failure;
struct worker;

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
