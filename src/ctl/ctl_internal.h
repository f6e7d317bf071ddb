/* ctl_internal.h — what the control plane's files share: the control plane
 * itself (ctl.c: the socket, the listener, set-up and teardown), its
 * transport (ctl_http.c: connections, routes, calls, replies) and its event
 * streams (ctl_stream.c: events?follow=true). Not for use outside ctl*.c. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <sys/socket.h>
#include <sys/types.h>

#include <event2/event.h>
#include <event2/http.h>
#include <event2/listener.h>

#include "ctl.h"
#include "ctl_handlers.h"

/* Bytes a follower may send while it streams (read only to see it leave). */
#define CTL_STREAM_READ_MAX 4096

#define TEXT_PLAIN "text/plain; charset=utf-8"

/* One client connection, known from its first request on. */
struct ctl_conn {
	struct ctl *ctl;
	struct evhttp_connection *evcon;
	int fd;
	struct ucred cred;
	bool allowed;
	struct ctl_call *call; /* a deferred call (forwarded, fanned out, streaming) */
};

struct ctl {
	struct event_base *base;
	struct ctl_agent agent; /* what the handlers reach the agent through */
	struct evhttp *http;
	struct evconnlistener *listener; /* owned by http */
	struct fdreserve *fdres;         /* pauses the listener at the descriptor reserve */
	struct event *reap_ev;           /* ends and drops streams outside callbacks */
	char *path;
	char *worker_dir; /* NULL: --no-worker-server */
	dev_t dev;        /* of the socket we bound, to remove only ours */
	ino_t ino;
	uid_t uid; /* the agent's user */
	bool has_group;
	gid_t gid;
	struct ctl_conn **conns; /* by fd */
	size_t n_slots;
	struct ctl_call *streams; /* events?follow=true, linked by stream_next */
	/* Replies of per_turn handlers, by handler index, shared until turn_ev
	 * runs: it is made active when one is kept, so it runs after every
	 * callback already ready in this loop turn. */
	struct ctl_turn_reply {
		char *body;
		size_t len;
		const char *content_type;
	} * turn_replies;
	struct event *turn_ev;
	int events_sub; /* events_subscribe id while streams exist */
	bool refusal_logged;
	struct ctl_stats stats;
	struct ctl *next_live;
};

/* ---- ctl_http.c ---- */

/* Free a call that is answered or abandoned: its query, body and error. */
void ctl_call_free(struct ctl_call *call);

/* The cancel callback of a forwarded call (ctl_call_proxy): drops the
 * forwarding; ctl_free tells forwarded calls by it. */
void ctl_call_proxy_cancel(struct ctl_call *call);

/* evhttp's request callback (arg: the ctl): check the connection, route the
 * request, answer or defer it. */
void ctl_request_cb(struct evhttp_request *req, void *arg);

/* Drop every per_turn reply kept in this loop turn. */
void ctl_turn_replies_drop(struct ctl *c);

/* turn_ev's callback (arg: the ctl): the loop turn is over, its shared
 * replies go. */
void ctl_turn_end_cb(evutil_socket_t fd, short what, void *arg);

/* ---- ctl_stream.c ---- */

/* Subscribe c to the recorder while it has streams, unsubscribe when none. */
void ctl_streams_changed(struct ctl *c);

/* Take call off c's streams (its connection went away); no reply, no free. */
void ctl_stream_unlink(struct ctl *c, struct ctl_call *call);

/* reap_ev's callback (arg: the ctl): end the streams that reached their limit
 * and close those that fell behind, outside other callbacks. */
void ctl_stream_reap_cb(evutil_socket_t fd, short what, void *arg);
