/* agent_decide.h — the agent's phases and its decisions, pure: what the agent
 * is doing (one enum), and "the worker group has stopped; what now?" as a
 * function of (phase, outcome, counters, settings). The agent (agent.c)
 * carries the decision out; nothing here reads a clock, logs or does I/O.
 *
 * The decision is a table of rules (agent_decide.c), first match wins. A new
 * policy (restart backoff, a budget per window, exit codes that must not be
 * restarted, hang outcomes, node exclusion) is a new input field, a new
 * outcome or reason, and a new row, with its case in tests/unit/test_agent.c. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "events.h"
#include "group.h"

/* Exit statuses of elasticd (torchrun-compatible 0/1/2; 128+signo when a
 * handled signal stopped the agent, after its workers were stopped). With
 * --exit-codes detailed the job's end says more (elasticd(8), EXIT STATUS, is
 * the contract); without it each of 3, 4 and 5 is AGENT_EXIT_FAILURE, while 6
 * (elasticd's own health features only) is always itself. */
#define AGENT_EXIT_SUCCESS 0
#define AGENT_EXIT_FAILURE 1
#define AGENT_EXIT_USAGE 2
#define AGENT_EXIT_RESTARTS_EXHAUSTED 3 /* --max-restarts or --restart-window spent */
#define AGENT_EXIT_NO_RESTART_CODE 4    /* a worker exited with a --no-restart-exit-codes code */
#define AGENT_EXIT_NO_PROGRESS 5        /* --progress-file did not advance (the no-progress rule) */
#define AGENT_EXIT_NODE_EXCLUDED 6      /* this node failed its health gate, or was excluded */

/* What the agent is doing. The only moves (agent_set_phase in agent.c):
 *
 *   INIT -> [HEALTH_CHECK ->] RENDEZVOUS -> RUNNING -> STOPPING_GROUP -> RESTARTING -> RENDEZVOUS
 *                                |                 \-> CLOSING -> DONE (fail)
 *                                \-> EXIT_BARRIER -> CLOSING -> DONE (success)
 *   any but DONE -> STOPPING_SIGNAL -> DONE
 *   INIT, HEALTH_CHECK, RENDEZVOUS, RUNNING, STOPPING_GROUP, RESTARTING -> DRAINING -> DONE
 *   HEALTH_CHECK -> DONE (unhealthy, no retry left: exit 6)
 *   STOPPING_GROUP -> QUARANTINED -> HEALTH_CHECK | RENDEZVOUS (cooldown over, or readmit)
 *
 * (every RENDEZVOUS is entered through HEALTH_CHECK when health checks are
 * configured, and RESTARTING -> HEALTH_CHECK then stands for -> RENDEZVOUS);
 * plus RENDEZVOUS -> CLOSING (the rendezvous failed) or -> DONE (a spare node
 * whose job ended), and DONE from any phase on an error the agent cannot get
 * past (it logs why). */
enum agent_phase {
	AGENT_PHASE_INIT,            /* set up; no rendezvous joined yet */
	AGENT_PHASE_HEALTH_CHECK,    /* the health gate runs before a join (or waits to retry) */
	AGENT_PHASE_RENDEZVOUS,      /* a rendezvous round is under way */
	AGENT_PHASE_RUNNING,         /* the worker group runs (or drains after all exited 0) */
	AGENT_PHASE_STOPPING_GROUP,  /* stopping the group: a worker failed, or a re-form */
	AGENT_PHASE_RESTARTING,      /* the group is gone; a new attempt is being started */
	AGENT_PHASE_EXIT_BARRIER,    /* the group succeeded; waiting for the other nodes */
	AGENT_PHASE_CLOSING,         /* leaving the rendezvous, then exiting */
	AGENT_PHASE_STOPPING_SIGNAL, /* a handled signal (or a stop request) stops the workers */
	AGENT_PHASE_DRAINING,        /* drain: notice sent, waiting for the workers, then leave */
	AGENT_PHASE_QUARANTINED,     /* out of the job for a cooldown (--quarantine), then rejoin */
	AGENT_PHASE_DONE,            /* the exit status is chosen; the loop ends */
};

/* "rendezvous", "stopping-group" etc., for logs. Static storage. */
const char *agent_phase_name(enum agent_phase p);

/* Why the agent entered its phase, or why it decided what it did. */
enum agent_reason {
	AGENT_REASON_NONE,            /* the normal course (round joined, workers started) */
	AGENT_REASON_SUCCEEDED,       /* every worker exited 0 */
	AGENT_REASON_WORKER_FAILED,   /* a worker failed */
	AGENT_REASON_MEMBERSHIP,      /* nodes wait to join, or a node left: re-form for free */
	AGENT_REASON_REQUESTED,       /* a restart asked for over the control socket (free) */
	AGENT_REASON_RDZV_FAILED,     /* the rendezvous cannot go on */
	AGENT_REASON_SIGNAL,          /* a handled signal, or a stop request */
	AGENT_REASON_EXHAUSTED,       /* a worker failed and no restart is left (--max-restarts) */
	AGENT_REASON_WINDOW,          /* a worker failed; --restart-window's N restarts are spent */
	AGENT_REASON_NO_RESTART_CODE, /* a worker exited with a --no-restart-exit-codes code */
	AGENT_REASON_NO_PROGRESS,     /* --progress-file did not advance over K failed attempts */
	AGENT_REASON_DRAIN,           /* drained on request: the workers exited 0 (or none ran) */
	AGENT_REASON_DRAIN_FAILED,    /* drained, but a worker failed or outlived the grace */
	AGENT_REASON_HANG,            /* a hang rule fired (hang.h): the agent stops the group */
	AGENT_REASON_UNHEALTHY,       /* the health gate failed with no retry left (exit 6) */
	AGENT_REASON_EXCLUDED,        /* excluded on request (exclude verb): leave, exit 6 */
	AGENT_REASON_QUARANTINED, /* F failures of this node's workers within W (--quarantine) */
	AGENT_REASON_UNEXPECTED,  /* the group in a state it cannot stop in: a bug (last) */
};

/* The reason as elasticd.agent.restart's "reason" ("worker group FAILED",
 * "membership change", "requested over the control socket"), or a short
 * phrase for the others. Static storage. */
const char *agent_reason_name(enum agent_reason r);

/* How the worker group ended, from its WorkerState. */
enum agent_outcome {
	AGENT_OUTCOME_SUCCEEDED,  /* SUCCEEDED: every worker exited 0 */
	AGENT_OUTCOME_FAILED,     /* FAILED or UNHEALTHY: a worker failed */
	AGENT_OUTCOME_STOPPED,    /* STOPPED: the agent stopped it */
	AGENT_OUTCOME_UNEXPECTED, /* UNKNOWN, INIT or HEALTHY after stopping: a bug */
};

/* The outcome a group in WorkerState s stopped with. */
enum agent_outcome agent_outcome_of(enum worker_state s);

/* The outcome of a group in WorkerState s that the agent was stopping for
 * stop_reason: as agent_outcome_of, except that a group stopped because a
 * hang rule fired failed (its attempt is a failure, with the restart
 * policy's rules). Pure. */
enum agent_outcome agent_outcome_after(enum worker_state s, enum agent_reason stop_reason);

/* What the agent does once the group has stopped. */
enum agent_action {
	AGENT_ACTION_RESTART, /* rejoin the rendezvous and start a new attempt */
	AGENT_ACTION_FINISH,  /* exit barrier, close the rendezvous, exit exit_code */
	AGENT_ACTION_FAIL,    /* report the failure, close the rendezvous, exit exit_code */
	AGENT_ACTION_EXIT,    /* exit exit_code now; the rendezvous stays as it is */
	/* leave the rendezvous (open), wait out the cooldown, then rejoin */
	AGENT_ACTION_QUARANTINE,
};

/* "restart", "finish" etc. Static storage. */
const char *agent_action_name(enum agent_action a);

/* What the decision looks at. Zero is a valid value of every field (and
 * turns every restart policy off). */
struct agent_decide_in {
	enum agent_phase phase;        /* when the group stopped */
	enum agent_reason stop_reason; /* why the agent was stopping it (NONE: it ended) */
	enum agent_outcome outcome;
	int signo;              /* the handled signal in STOPPING_SIGNAL */
	int remaining_restarts; /* restarts left (--max-restarts minus those spent) */
	int max_restarts;       /* --max-restarts */
	/* The restart policy: the counters the agent keeps, and its settings. */
	bool no_restart_code;  /* a failed worker exited with a --no-restart-exit-codes code */
	int window_restarts;   /* failure restarts in the last W seconds (agent_window_count) */
	int window_max;        /* --restart-window N; 0: no window */
	int stalled_attempts;  /* failed attempts in a row without progress, this one included */
	int progress_attempts; /* --progress-attempts K with --progress-file; 0: off */
	bool detailed_exit;    /* --exit-codes detailed: AGENT_EXIT_RESTARTS_EXHAUSTED etc. */
	int failure_streak;    /* failure restarts in a row so far (the backoff's exponent) */
	uint64_t attempt_usec; /* how long the stopped group ran */
	uint64_t backoff_min_usec; /* --restart-backoff MIN:MAX; max 0: no backoff */
	uint64_t backoff_max_usec;
	double jitter; /* a random number in [0, 1), seeded per process by the agent */
	/* --quarantine F/W: this node's failed attempts in the last W seconds,
	 * this one included, and F (0: off); with quarantine_exit the node
	 * exits 6 instead of waiting out a cooldown. */
	int quarantine_failures;
	int quarantine_max;
	bool quarantine_exit;
	/* This node serves the c10d store of a job of several nodes: never
	 * quarantined (the store and the admissions would leave with it). */
	bool quarantine_exempt;
};

/* What to do. */
struct agent_decision {
	enum agent_action action;
	enum agent_reason reason; /* why: the restart event's reason, the exit's cause */
	bool spends_restart;      /* a restart: it spends one of --max-restarts */
	int exit_code;            /* FINISH, FAIL, EXIT: elasticd's exit status */
	uint64_t delay_usec;      /* RESTART: wait this long first (the backoff), 0: at once */
	int failure_streak;       /* the new failure_streak (a spent restart; else the input's) */
	bool quarantine_spared;   /* without quarantine_exempt it would be quarantined */
};

/* An attempt that ran at least this many times MAX of --restart-backoff
 * before it failed starts the backoff over at MIN. */
#define AGENT_BACKOFF_RESET_FACTOR 10

/* Decide what to do once the worker group has stopped (quarantine_spared:
 * the same input without quarantine_exempt quarantines). Pure; never fails: an
 * input no rule expects is AGENT_ACTION_EXIT with AGENT_REASON_UNEXPECTED and
 * exit status 1. A failure restart waits MIN * 2^(streak-1) plus up to half
 * of that again by jitter, at most MAX (streak: failure restarts in a row,
 * this one included; it starts over at 1 after an attempt that ran
 * AGENT_BACKOFF_RESET_FACTOR * MAX); re-forms never wait. */
struct agent_decision agent_decide(const struct agent_decide_in *in);

/* The failure restarts among times[0..n) (CLOCK_MONOTONIC usec, 0: unused
 * slot) that are less than window_usec old at now. Pure. */
int agent_window_count(const uint64_t *times, size_t n, uint64_t now, uint64_t window_usec);

/* The no-progress rule's memory: the highest value the progress file held
 * when an attempt failed (or when the agent started). */
struct agent_progress {
	bool have_best;
	double best;
	int stalled; /* failed attempts in a row that did not raise best */
};

/* The number in a progress file's text[0..len) (blanks around it allowed:
 * "1200\n", "3.5"), into *ret. Returns false (and leaves *ret) for anything
 * else: empty, not a number, NaN. Pure. */
bool agent_progress_parse(const char *text, size_t len, double *ret);

/* An attempt failed and the progress file held value (have: it could be read
 * as a number): progress when value is above every earlier one, which resets
 * p->stalled to 0; else p->stalled grows by one. Returns p->stalled. Pure. */
int agent_progress_failed(struct agent_progress *p, bool have, double value);

/* torch's NodeState of this node in phase p entered for reason; exit_code is
 * the status chosen so far (EXIT_BARRIER, CLOSING, DONE) and have_round says
 * whether a round was ever joined. INIT while it waits in a rendezvous or
 * before its first, RUNNING while a round's workers run, then SUCCEEDED or
 * FAILED. Pure. */
enum node_state agent_node_state(enum agent_phase p, enum agent_reason reason, int exit_code,
				 bool have_round);

/* The WorkerState the agent reports for its group: INIT before the first
 * group (have_group false), STOPPED once the group is being replaced (a
 * restart, its rendezvous, or the close after that rendezvous failed), else
 * the group's own state gs. Pure. */
enum worker_state agent_group_view_state(enum agent_phase p, enum agent_reason reason,
					 bool have_group, enum worker_state gs);
