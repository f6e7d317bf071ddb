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

#include "events.h"
#include "group.h"

/* Exit statuses of elasticd (torchrun-compatible 0/1/2; 128+signo when a
 * handled signal stopped the agent, after its workers were stopped). */
#define AGENT_EXIT_SUCCESS 0
#define AGENT_EXIT_FAILURE 1
#define AGENT_EXIT_USAGE 2

/* What the agent is doing. The only moves (agent_set_phase in agent.c):
 *
 *   INIT -> RENDEZVOUS -> RUNNING -> STOPPING_GROUP -> RESTARTING -> RENDEZVOUS
 *                                |                 \-> CLOSING -> DONE (fail)
 *                                \-> EXIT_BARRIER -> CLOSING -> DONE (success)
 *   any but DONE -> STOPPING_SIGNAL -> DONE
 *
 * plus RENDEZVOUS -> CLOSING (the rendezvous failed) or -> DONE (a spare node
 * whose job ended), and DONE from any phase on an error the agent cannot get
 * past (it logs why). */
enum agent_phase {
	AGENT_PHASE_INIT,            /* set up; no rendezvous joined yet */
	AGENT_PHASE_RENDEZVOUS,      /* a rendezvous round is under way */
	AGENT_PHASE_RUNNING,         /* the worker group runs (or drains after all exited 0) */
	AGENT_PHASE_STOPPING_GROUP,  /* stopping the group: a worker failed, or a re-form */
	AGENT_PHASE_RESTARTING,      /* the group is gone; a new attempt is being started */
	AGENT_PHASE_EXIT_BARRIER,    /* the group succeeded; waiting for the other nodes */
	AGENT_PHASE_CLOSING,         /* leaving the rendezvous, then exiting */
	AGENT_PHASE_STOPPING_SIGNAL, /* a handled signal (or a stop request) stops the workers */
	AGENT_PHASE_DONE,            /* the exit status is chosen; the loop ends */
};

/* "rendezvous", "stopping-group" etc., for logs. Static storage. */
const char *agent_phase_name(enum agent_phase p);

/* Why the agent entered its phase, or why it decided what it did. */
enum agent_reason {
	AGENT_REASON_NONE,          /* the normal course (round joined, workers started) */
	AGENT_REASON_SUCCEEDED,     /* every worker exited 0 */
	AGENT_REASON_WORKER_FAILED, /* a worker failed */
	AGENT_REASON_MEMBERSHIP,    /* nodes wait to join, or a node left: re-form for free */
	AGENT_REASON_REQUESTED,     /* a restart asked for over the control socket (free) */
	AGENT_REASON_RDZV_FAILED,   /* the rendezvous cannot go on */
	AGENT_REASON_SIGNAL,        /* a handled signal, or a stop request */
	AGENT_REASON_UNEXPECTED,    /* the group in a state it cannot stop in: a bug */
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

/* What the agent does once the group has stopped. */
enum agent_action {
	AGENT_ACTION_RESTART, /* rejoin the rendezvous and start a new attempt */
	AGENT_ACTION_FINISH,  /* exit barrier, close the rendezvous, exit exit_code */
	AGENT_ACTION_FAIL,    /* report the failure, close the rendezvous, exit exit_code */
	AGENT_ACTION_EXIT,    /* exit exit_code now; the rendezvous stays as it is */
};

/* "restart", "finish" etc. Static storage. */
const char *agent_action_name(enum agent_action a);

/* What the decision looks at. Zero is a valid value of every field. */
struct agent_decide_in {
	enum agent_phase phase;        /* when the group stopped */
	enum agent_reason stop_reason; /* why the agent was stopping it (NONE: it ended) */
	enum agent_outcome outcome;
	int signo;              /* the handled signal in STOPPING_SIGNAL */
	int remaining_restarts; /* restarts left (--max-restarts minus those spent) */
	int max_restarts;       /* --max-restarts */
};

/* What to do. */
struct agent_decision {
	enum agent_action action;
	enum agent_reason reason; /* why: the restart event's reason, the exit's cause */
	bool spends_restart;      /* a restart: it spends one of --max-restarts */
	int exit_code;            /* FINISH, FAIL, EXIT: elasticd's exit status */
};

/* Decide what to do once the worker group has stopped. Pure; never fails: an
 * input no rule expects is AGENT_ACTION_EXIT with AGENT_REASON_UNEXPECTED and
 * exit status 1. */
struct agent_decision agent_decide(const struct agent_decide_in *in);

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
