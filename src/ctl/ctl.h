/* ctl.h — the control plane: torch 2.x's WorkerServer protocol served by
 * evhttp on a Unix socket, for the whole node, from the agent's own loop.
 *
 *   GET  /                        HTML index naming the server
 *   GET  /handler/                JSON array of handler names
 *   POST /handler/<name>?k=v      run a handler (read-only ones answer GET too)
 *   GET  /metrics                 the metrics handler (Prometheus text)
 *   *    /ranks/<n>/<path>        forwarded to local rank n's own WorkerServer
 *
 * The socket is created under a umask (mode 0600 unless widened), every
 * connection's peer is checked with SO_PEERCRED (root, the agent's user, and
 * the --control-socket-group), and everything a client controls is bounded:
 * header and body sizes, parameters, connections, idle and stalled
 * connections (timeouts), streamed output. Accept failures for lack of file
 * descriptors pause the listener and retry on a timer. Handlers run in the
 * loop but never block it; slow work (forwarding to workers) is asynchronous.
 * The handlers themselves are a table (ctl_handlers.c); elasticd-ctl(7)
 * documents every route, handler, parameter, field and status code. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "ctl_path.h"

struct config;
struct event_base;
struct events;
struct json_t;
struct ctl;

/* Limits (see elasticd-ctl(7)). */
#define CTL_CONNECTIONS_MAX 256          /* client connections at once */
#define CTL_HEADERS_MAX 8192             /* request line and headers, bytes */
#define CTL_BODY_MAX (1024 * 1024)       /* request body, bytes (413 beyond) */
#define CTL_TIMEOUT_S 10                 /* idle or stalled connection, seconds */
#define CTL_STREAM_WRITE_TIMEOUT_S 30    /* a follower that reads nothing, seconds */
#define CTL_STREAM_BUFFER_MAX (4u << 20) /* bytes queued for one follower */
#define CTL_PROXY_TIMEOUT_S 60           /* a worker server's answer, seconds */
#define CTL_FANOUT_TIMEOUT_S 10          /* each worker's dump_traceback, seconds */

/* Counters of the control plane since it started (for the metrics handler). */
struct ctl_stats {
	uint64_t requests;        /* requests dispatched to a route */
	uint64_t refused;         /* connections refused: peer not allowed */
	uint64_t overloaded;      /* connections refused: CTL_CONNECTIONS_MAX reached */
	uint64_t accept_pauses;   /* listener paused for lack of file descriptors */
	uint64_t streams_dropped; /* followers cut for falling behind */
	uint64_t proxied;         /* requests forwarded to worker servers */
	size_t connections;       /* connections open now */
	size_t streams;           /* events?follow=true streams open now */
};

/* ---- the agent, as the control plane sees it -------------------------------
 * The control plane reaches the agent only through these (main.c wires them):
 * a few reads and the actions an operator may ask for. Every call is made
 * from the loop and returns before the next loop turn. */

/* Lowest and highest worker exit code counted (torch's returncode: the exit
 * status, or -signal). */
#define CTL_EXITCODE_MIN (-64)
#define CTL_EXITCODE_MAX 255

/* Counters of the agent since it started. */
struct ctl_agent_counters {
	uint64_t rdzv_rounds;         /* rendezvous rounds joined */
	double rdzv_seconds_sum;      /* time spent in them, seconds */
	double rdzv_last_seconds;     /* the last one's, seconds */
	uint64_t restarts_failure;    /* restarts after a failure (spending --max-restarts) */
	uint64_t restarts_membership; /* re-forms for a membership change (free) */
	uint64_t restarts_requested;  /* re-forms asked for over the control socket (free) */
	uint64_t backoffs;            /* failure restarts that waited (--restart-backoff) */
	double backoff_seconds_sum;   /* the time they waited, seconds */
	uint64_t signals_forwarded;   /* --forward-signals signals sent on to the workers */
	uint64_t worker_starts;       /* worker processes started */
	uint64_t worker_exits;        /* worker processes reaped */
	uint64_t sentinel_respawns;   /* sentinels started again after one was killed */
	uint64_t file_timer_expired;  /* pids whose torch FileTimer expired (filetimer_server.h) */
	uint64_t hangs[3];            /* hang rules fired, by enum hang_rule (hang.h) */
	uint64_t health_passed;       /* health gates passed (--health-*) */
	uint64_t health_failed;       /* health gates failed */
	uint64_t health_check_fails;  /* checks that ended unhealthy (not by their deadline) */
	uint64_t health_timeouts;     /* checks killed at --health-timeout */
	uint64_t gpu_waits_released;  /* --gpu-memory-wait: the memory was released ... */
	uint64_t gpu_waits_timeout;   /* ... was still held at the deadline ... */
	uint64_t gpu_waits_unavailable; /* ... NVML absent: nothing to wait for */
	uint64_t quarantines;           /* --quarantine: times this node was quarantined */
	uint64_t readmissions;          /* ... and readmitted (cooldown over, or readmit) */
	uint64_t quarantine_exemptions; /* ... not, as it hosts the c10d store */
	uint64_t readmit_requests;      /* other nodes this agent readmitted (readmit node=) */
	/* Workers that failed (exited non-zero, or could not start, before any
	 * stop), by exit code: index exitcode - CTL_EXITCODE_MIN. */
	uint64_t worker_failures[CTL_EXITCODE_MAX - CTL_EXITCODE_MIN + 1];
};

/* Most states one gauge names. */
#define CTL_STATES_MAX 8

/* A gauge over named states (torch's NodeState, WorkerState): one line per
 * name, in order, with its value (1 for the current state, or a count). */
struct ctl_state_gauge {
	const char *names[CTL_STATES_MAX]; /* static storage */
	uint64_t values[CTL_STATES_MAX];
	size_t n;
};

/* What the metrics handler shows of the agent, by value. */
struct ctl_agent_stats {
	/* elasticd_info's labels; borrowed for the duration of the call. */
	const char *run_id, *role, *rdzv_backend, *node;
	double uptime_s;
	int local_world_size;
	int remaining_restarts;
	bool rdzv_degraded;                 /* the status's degraded is not null */
	bool rdzv_coordinator;              /* this node coordinates the rendezvous */
	uint64_t console_dropped_bytes;     /* the status's console_dropped_bytes */
	struct ctl_state_gauge node_state;  /* 1 for the node's NodeState */
	struct ctl_state_gauge group_state; /* 1 for the group's WorkerState */
	struct ctl_state_gauge workers;     /* the group's workers per WorkerState */
	struct ctl_agent_counters counters;
};

/* One local rank's worker. The strings are borrowed until the group is
 * replaced (a later loop turn). */
struct ctl_worker_view {
	int local_rank;
	int pid;                    /* 0: never started */
	bool running;               /* started and not reaped yet */
	const char *stream_path[2]; /* stdout.log, stderr.log; NULL: not to a file */
	const char *server_socket;  /* its TORCH_WORKER_SERVER_SOCKET, NULL: none */
};

/* The verbs. agent is ctl_agent.agent. Add a verb here, implement it in the
 * agent, wire it in main.c, and give the fake in tests/unit/test_ctl.c one. */
struct ctl_agent_ops {
	/* The status handler's JSON object, a new reference (see
	 * elasticd-ctl(7) for its fields). */
	struct json_t *(*status)(void *agent);
	/* Fill *ret (every field). */
	void (*stats)(void *agent, struct ctl_agent_stats *ret);
	/* Local rank's worker into *ret: 0, -ENOENT before the first group, or
	 * -ERANGE for a rank out of range (*ret untouched on error). */
	int (*worker)(void *agent, int local_rank, struct ctl_worker_view *ret);
	/* Re-form the group without spending a restart: 0, or -EBUSY with
	 * *reterr (malloc'd) when no group runs. */
	int (*restart)(void *agent, char **reterr);
	/* Drain this node out of the job: send the notice sig (0: the agent's
	 * default) to the workers, wait up to timeout_s (< 0: the agent's
	 * --term-timeout) for them to exit, leave the rendezvous, exit. 0, or
	 * -EALREADY / -EBUSY with *reterr (malloc'd) when it cannot begin. */
	int (*drain)(void *agent, int sig, int timeout_s, char **reterr);
	/* Exclude this node (it is bad): stop the workers, leave the
	 * rendezvous open for the others, exit AGENT_EXIT_NODE_EXCLUDED (6).
	 * reason: free text ("" for none), copied. 0, or -EALREADY / -EBUSY with
	 * *reterr (malloc'd) when it cannot begin. */
	int (*exclude)(void *agent, const char *reason, char **reterr);
	/* End a quarantine now (node: a node's name, NULL or "" for this one;
	 * agent_request_readmit). 0 (this node's: done), 1 (another node's:
	 * the agent calls reply(call, status, message) once, from the loop,
	 * unless readmit_cancel(agent) comes first), or with *reterr
	 * (malloc'd) -ENOENT (404) / -EBUSY, -EOPNOTSUPP (409). */
	int (*readmit)(void *agent, const char *node,
		       void (*reply)(void *call, int status, const char *msg), void *call,
		       char **reterr);
	/* The client of a pending readmit went away: reply is not called. */
	void (*readmit_cancel)(void *agent);
	/* Stop as if the handled signal sig had arrived. */
	void (*stop)(void *agent, int sig);
	/* Send sig to local rank's process group (every worker for -1): 0, or
	 * -ESRCH / -ENOENT / -errno with *reterr (malloc'd). */
	int (*signal)(void *agent, int local_rank, int sig, char **reterr);
	/* The whole job's membership as this node's rendezvous copy holds it
	 * (elasticd-ctl(7) "nodes"), a new reference; read-only. NULL with
	 * *reterr (malloc'd) when the backend has no shared state. */
	struct json_t *(*nodes)(void *agent, char **reterr);
};

/* The agent a control plane serves. Borrowed: must outlive the ctl. */
struct ctl_agent {
	const struct ctl_agent_ops *ops;
	void *agent;           /* the ops' first argument */
	struct events *events; /* its recorder, for the events handler */
	int local_world_size;  /* local ranks are 0 to local_world_size - 1 */
};

/* Start the control plane of agent (borrowed, copied by value): create the socket
 * (cfg->control_socket, else ctl_default_path), replacing a stale one left by a dead agent, and the
 * workers' socket directory (unless cfg->no_worker_server); start listening.
 * A socket another agent answers on is an error naming it (-EADDRINUSE), but
 * for the default path a second agent of the same run id on this host takes
 * "<run_id>.<pid>.sock" instead, with a warning. Returns 0 with *ret, or
 * -errno with *reterr (malloc'd): -EINVAL for a bad --control-socket-group,
 * -EADDRINUSE, -EEXIST (not a socket), -ENAMETOOLONG, or the system error. */
int ctl_new(struct event_base *base, const struct ctl_agent *agent, const struct config *cfg,
	    char *const *env, struct ctl **ret, char **reterr);

/* The socket path (borrowed). */
const char *ctl_socket_path(const struct ctl *c);

/* The workers' socket directory, or NULL without worker servers (borrowed):
 * local rank n's TORCH_WORKER_SERVER_SOCKET is "<dir>/rank<n>.sock". */
const char *ctl_worker_dir(const struct ctl *c);

/* The counters, borrowed. */
const struct ctl_stats *ctl_get_stats(const struct ctl *c);

/* Stop: end event streams, answer pending forwarded requests with 503, flush
 * what is queued for every client (so a `stop` reply reaches its client),
 * close every connection, remove the socket (if it is still ours) and the
 * workers' socket directory. Accepts NULL. Not from inside a ctl callback. */
void ctl_free(struct ctl *c);
