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

struct agent;
struct config;
struct event_base;
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

/* Start the control plane of agent a: create the socket (cfg->control_socket,
 * else ctl_default_path), replacing a stale one left by a dead agent, and the
 * workers' socket directory (unless cfg->no_worker_server); start listening.
 * A socket another agent answers on is an error naming it (-EADDRINUSE), but
 * for the default path a second agent of the same run id on this host takes
 * "<run_id>.<pid>.sock" instead, with a warning. Returns 0 with *ret, or
 * -errno with *reterr (malloc'd): -EINVAL for a bad --control-socket-group,
 * -EADDRINUSE, -EEXIST (not a socket), -ENAMETOOLONG, or the system error. */
int ctl_new(struct event_base *base, struct agent *a, const struct config *cfg, char *const *env,
	    struct ctl **ret, char **reterr);

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
