/* ctl_handlers.h — what the control plane's transport (ctl.c) and its
 * handlers (ctl_handlers.c) share: the handler table's row type and the call
 * a handler answers. Internal to ctl; the agent never sees it. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ctl_params.h"

struct ctl;
struct ctl_agent;
struct event_base;
struct evbuffer;
struct evhttp_request;
struct ctl_call;

/* Most parameters one handler takes. */
#define CTL_HANDLER_PARAMS_MAX 8

/* One named handler, as torch's WorkerServer registry entry plus what the
 * transport checks before it runs: which methods, which parameters. */
struct ctl_handler {
	const char *name;
	bool read_only; /* changes nothing: GET is allowed besides POST */
	/* Read-only and without parameters, its reply may be shared by every
	 * request of one loop turn (they are concurrent: none can have seen
	 * another's reply); a state-changing handler drops the shared replies. */
	bool per_turn;
	const struct ctl_param_spec *params;
	size_t n_params; /* <= CTL_HANDLER_PARAMS_MAX */
	/* Answer the call: fill call->body (and status, content_type) and return
	 * 0; or return ctl_call_error(...) (500 "Handler <name> failed: ...");
	 * or call ctl_call_defer and answer later with ctl_call_reply. */
	int (*run)(struct ctl_call *call);
	const char *summary; /* one line */
};

/* The table, in listing order; ctl_n_handlers rows. */
extern const struct ctl_handler ctl_handlers[];
extern const size_t ctl_n_handlers;

/* The handler named name, or NULL. */
const struct ctl_handler *ctl_handler_find(const char *name);

/* One request to a handler. The transport fills everything above `body`,
 * validates the parameters into args (by spec index) and frees the call after
 * the reply. */
struct ctl_call {
	struct ctl *ctl;
	const struct ctl_agent *agent; /* the agent, through its ops */
	struct event_base *base;
	const struct ctl_handler *handler;
	struct evhttp_request *req;
	struct ctl_query query;
	struct ctl_param_value args[CTL_HANDLER_PARAMS_MAX];

	/* The reply of a handler that answers at once: status 200 and
	 * "text/plain; charset=utf-8" unless changed; body starts empty. */
	int status;
	const char *content_type; /* static storage */
	struct evbuffer *body;
	char *error; /* set by ctl_call_error */

	/* Owned by the transport. */
	bool deferred;
	void (*cancel)(struct ctl_call *call); /* the client went away */
	void *op;                              /* the handler's pending work */
	void *conn;
	/* events?follow=true */
	bool streaming, ending, doomed;
	uint64_t next_seq;
	uint64_t left; /* events still to send; 0: no limit */
	struct ctl_call *stream_next;
};

/* Fail the call with 500 "Handler <name> failed: <message>". Returns -EIO, for
 * `return ctl_call_error(call, ...)` from run. */
int ctl_call_error(struct ctl_call *call, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

/* Answer with status (400 for a parameter the handler finds wrong in context,
 * e.g. a local rank beyond the group) and a one-line text/plain message.
 * Returns 0, for `return ctl_call_fail(...)`. */
int ctl_call_fail(struct ctl_call *call, int status, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

/* Reply with j (a reference is stolen) as application/json, indented, or
 * compact when compact. Returns 0. */
int ctl_call_json(struct ctl_call *call, void *j, bool compact);

/* Keep the call open after run returns: the handler answers later with
 * ctl_call_reply. cancel(call) is called instead if the client goes away or
 * the control plane stops first (it must abandon op's work and must not reply;
 * the transport frees the call after it). */
void ctl_call_defer(struct ctl_call *call, void (*cancel)(struct ctl_call *call), void *op);

/* Answer a deferred call with status, content_type (copied; NULL: none) and
 * body (freed here; NULL: empty), and free the call. */
void ctl_call_reply(struct ctl_call *call, int status, const char *content_type,
		    struct evbuffer *body);

/* Answer the call with the events of the agent's ring after sequence number
 * since, as JSON lines {"seq": N, "event": {...}} (a first line {"dropped": K}
 * when the ring lost K of them), at most limit (0: no limit); with follow,
 * keep the reply open and stream every new event as it is recorded, until
 * limit is reached or the client goes away. Returns 0. */
int ctl_call_events(struct ctl_call *call, uint64_t since, uint64_t limit, bool follow);

/* Answer the call by forwarding it to the WorkerServer on socket_path
 * (method, target "/path?query", the request's body and Content-Type), relaying
 * the status, Content-Type and body; 502 when the worker server cannot be
 * reached, 504 when it does not answer in CTL_PROXY_TIMEOUT_S. Returns 0. */
int ctl_call_proxy(struct ctl_call *call, const char *socket_path, const char *method,
		   const char *target);

/* The control plane's socket path and counters, for the status and metrics
 * handlers. */
const char *ctl_call_socket_path(const struct ctl_call *call);
