/* etcd_client.c — unary calls to etcd that fail over between endpoints, over
 * gRPC (etcd_grpc.c, messages in etcd_pb.c) or the JSON gateway (evhttp,
 * bodies in etcd_request.c, answers in etcd_response.c); see etcd_client.h.
 * Watch streams are etcd_watch.c's. */
#include "etcd_client.h"

#include <errno.h>
#include <event2/buffer.h>
#include <event2/event.h>
#include <event2/http.h>
#include <inttypes.h>
#include <jansson.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "endpoint.h"
#include "etcd_client_internal.h"
#include "etcd_grpc.h"
#include "etcd_pb.h"
#include "util.h"

#define ETCD_DEFAULT_PORT 2379

struct evhttp_connection *
etcd_endpoint_evcon(struct etcd_client *cl, const struct etcd_endpoint *ep, int timeout)
{
	struct evhttp_connection *evcon =
		evhttp_connection_base_new(cl->base, NULL, ep->host, (unsigned short)ep->port);

	if (!evcon) {
		return NULL;
	}
	evhttp_connection_set_timeout(evcon, timeout);
	evhttp_connection_set_retries(evcon, 0);
	if (strcmp(ep->host, "localhost") == 0) {
		evhttp_connection_set_family(evcon, AF_INET);
	}
	return evcon;
}

static void
reap_cb(evutil_socket_t fd, short what, void *arg)
{
	struct etcd_client *cl = arg;

	for (size_t i = 0; i < cl->n_dropped; i++) {
		grpc_conn_free(cl->dropped[i]);
	}
	cl->n_dropped = 0;
}

/* Replace the broken connection to ep: its calls fail over and its watches
 * open again, from the loop; it is freed from the loop (we may be inside
 * one of its callbacks). */
static void
endpoint_gconn_drop(struct etcd_client *cl, struct etcd_endpoint *ep)
{
	struct grpc_conn *old = ep->gconn;

	ep->gconn = NULL;
	for (struct call *c = cl->calls; c; c = c->next) {
		if (c->gconn == old && c->gs) {
			struct timeval now = {0, 0};

			/* No callback of its stream may follow (we may be in
			 * old's loop over its streams). */
			grpc_stream_cancel(c->gs);
			c->gs = NULL;
			c->lost = true;
			evtimer_add(c->deadline, &now);
		}
	}
	for (struct etcd_watch *w = cl->watches; w; w = etcd_watch_next(w)) {
		etcd_watch_conn_lost(w, old);
	}
	etcd_ka_conn_lost(cl, old);
	cl->dropped = xrealloc(cl->dropped, (cl->n_dropped + 1) * sizeof(*cl->dropped));
	cl->dropped[cl->n_dropped++] = old;
	event_active(cl->reap, 0, 0);
}

struct grpc_conn *
etcd_client_gconn(struct etcd_client *cl, size_t i)
{
	struct etcd_endpoint *ep = &cl->eps[i];

	if (ep->gconn && grpc_conn_broken(ep->gconn)) {
		endpoint_gconn_drop(cl, ep);
	}
	if (!ep->gconn) {
		ep->gconn = grpc_conn_new(cl->base, ep->host, ep->port, ep->name);
	}
	return ep->gconn;
}

struct etcd_client *
etcd_client_new(struct event_base *base, const char *endpoints, enum etcd_wire wire, char **reterr)
{
	struct etcd_client *cl = xcalloc(1, sizeof(*cl));
	char *list = xstrdup(endpoints ? endpoints : ""), *save = NULL, *tok;

	cl->base = base;
	cl->wire = wire;
	cl->reap = event_new(base, -1, 0, reap_cb, cl);
	for (tok = strtok_r(list, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
		struct etcd_endpoint ep = {0};
		char *t = tok, *why = NULL;

		while (*t == ' ') {
			t++;
		}
		if (strncmp(t, "http://", 7) == 0) {
			t += 7;
		}
		if (t[0] && t[strlen(t) - 1] == '/') {
			t[strlen(t) - 1] = '\0';
		}
		if (strncmp(t, "https://", 8) == 0) {
			why = xstrdup("plain http only; TLS is not supported");
		} else if (endpoint_parse(t, ETCD_DEFAULT_PORT, &ep.host, &ep.port, &why) == 0 &&
			   ep.port == 0) {
			why = xstrdup("port 0 is not an etcd port");
		}
		if (why) {
			*reterr = xasprintf("--rdzv-endpoint: invalid etcd endpoint '%s': %s", tok,
					    why);
			free(why);
			free(ep.host);
			free(list);
			etcd_client_free(cl);
			return NULL;
		}
		ep.name = strchr(ep.host, ':') ? xasprintf("[%s]:%d", ep.host, ep.port)
					       : xasprintf("%s:%d", ep.host, ep.port);
		cl->eps = xrealloc(cl->eps, (cl->n_eps + 1) * sizeof(*cl->eps));
		cl->eps[cl->n_eps++] = ep;
	}
	free(list);
	if (cl->n_eps == 0) {
		*reterr = xstrdup("--rdzv-endpoint: the etcd backend needs at least one endpoint "
				  "(HOST[:PORT],...)");
		etcd_client_free(cl);
		return NULL;
	}
	return cl;
}

const char *
etcd_client_wire_name(const struct etcd_client *cl)
{
	switch (cl->wire) {
	case ETCD_WIRE_GRPC:
		return "gRPC";
	case ETCD_WIRE_JSON:
		return "JSON gateway";
	}
	return "?";
}

const char *
etcd_client_endpoint(const struct etcd_client *cl)
{
	return cl->eps[cl->cur].name;
}

static void
call_free(struct call *c)
{
	struct etcd_client *cl = c->cl;

	if (c->prev) {
		c->prev->next = c->next;
	} else {
		cl->calls = c->next;
	}
	if (c->next) {
		c->next->prev = c->prev;
	}
	if (c->retry) {
		event_free(c->retry);
	}
	if (c->gs) {
		grpc_stream_cancel(c->gs);
	}
	etcd_ka_forget(cl, c);
	if (c->in) {
		evbuffer_free(c->in);
	}
	if (c->deadline) {
		event_free(c->deadline);
	}
	free(c->path);
	free(c->body);
	free(c->last_err);
	free(c);
}

static void call_send(struct call *c);

static void
call_retry_cb(evutil_socket_t fd, short what, void *arg)
{
	call_send(arg);
}

/* This try failed for a reason another member may not have. */
void
etcd_call_failover(struct call *c, char *why)
{
	struct etcd_client *cl = c->cl;

	if (c->gs) {
		grpc_stream_cancel(c->gs);
		c->gs = NULL;
	}
	etcd_ka_forget(cl, c);
	if (c->deadline) {
		evtimer_del(c->deadline);
	}
	free(c->last_err);
	c->last_err = why;
	if (c->tries >= 2 * cl->n_eps) {
		char *msg = xasprintf("etcd at %s: %s", cl->eps[c->ep].name, why);
		struct etcd_response none = {0};

		c->cb(-EHOSTUNREACH, &none, msg, c->arg);
		free(msg);
		call_free(c);
		return;
	}
	if (cl->cur == c->ep) {
		cl->cur = (cl->cur + 1) % cl->n_eps;
	}
	/* A short pause once every member was tried. */
	if (!c->retry) {
		c->retry = evtimer_new(cl->base, call_retry_cb, c);
	}
	struct timeval tv = {0, c->tries % cl->n_eps == 0 ? 200000 : 0};

	evtimer_add(c->retry, &tv);
}

static void
call_done_cb(struct evhttp_request *req, void *arg)
{
	struct call *c = arg;
	struct etcd_response resp;
	int code = req ? evhttp_request_get_response_code(req) : 0;
	struct evbuffer *in;
	int err;

	if (code == 0) {
		etcd_call_failover(c, xstrdup("cannot connect or no answer"));
		return;
	}
	in = evhttp_request_get_input_buffer(req);
	err = etcd_response_decode(code, (const char *)evbuffer_pullup(in, -1),
				   evbuffer_get_length(in), &resp);
	etcd_call_answer(c, err, &resp);
}

/* The try ended with an answer (err 0) or an error etcd reported. */
void
etcd_call_answer(struct call *c, int err, struct etcd_response *resp)
{
	char *msg;

	if (err == -EAGAIN) {
		etcd_call_failover(c, xasprintf("unavailable (%s)", resp->error));
		etcd_response_release(resp);
		return;
	}
	msg = err < 0 ? xasprintf("etcd at %s: %s %s", c->cl->eps[c->ep].name, c->path,
				  resp->error ? resp->error : strerror(-err))
		      : NULL;
	c->cb(err, resp, msg, c->arg);
	free(msg);
	etcd_response_release(resp);
	call_free(c);
}

static void
call_grpc_data_cb(struct grpc_stream *s, const uint8_t *data, size_t len, void *arg)
{
	struct call *c = arg;

	evbuffer_add(c->in, data, len);
	if (evbuffer_get_length(c->in) > ETCD_PB_FRAME + ETCD_MAX_BODY) {
		struct etcd_response resp = {.error = xstrdup("answer too large")};

		grpc_stream_cancel(c->gs);
		c->gs = NULL;
		evtimer_del(c->deadline);
		etcd_call_answer(c, -EBADMSG, &resp);
	}
}

/* The stream of a gRPC try ended: its status, and its one answer. */
static void
call_grpc_close_cb(struct grpc_stream *s, int err, int status, const char *message, void *arg)
{
	struct call *c = arg;
	struct etcd_response resp = {0};
	const uint8_t *msg;
	size_t msg_len, used, len = evbuffer_get_length(c->in);

	c->gs = NULL;
	evtimer_del(c->deadline);
	if (err < 0) {
		etcd_call_failover(c,
				   xstrdup(err == -ECONNRESET ? "cannot connect or connection lost"
							      : "HTTP/2 error"));
		return;
	}
	err = status < 0 ? -EPROTO : etcd_pb_status_errno(status);
	if (err < 0) {
		resp.error = message && *message ? xstrdup(message)
						 : xasprintf("gRPC status %d", status);
		resp.code = status;
	} else if (etcd_pb_next_message(evbuffer_pullup(c->in, -1), len, &msg, &msg_len, &used) ==
		   1) {
		err = etcd_pb_decode(c->call, msg, msg_len, &resp);
	} else {
		err = -EBADMSG;
		resp.error = xstrdup("no answer message");
	}
	etcd_call_answer(c, err, &resp);
}

static void
call_deadline_cb(evutil_socket_t fd, short what, void *arg)
{
	struct call *c = arg;

	etcd_call_failover(c, c->lost ? xstrdup("connection lost")
				      : xasprintf("no answer in %d s", ETCD_CALL_TIMEOUT));
}

/* A try over gRPC: a stream with the one request. */
static void
call_send_grpc(struct call *c, struct etcd_endpoint *ep)
{
	struct timeval tv = {ETCD_CALL_TIMEOUT, 0};

	c->gconn = etcd_client_gconn(c->cl, (size_t)(ep - c->cl->eps));
	c->gs = c->gconn ? grpc_stream_open(c->gconn, c->path, call_grpc_data_cb,
					    call_grpc_close_cb, c)
			 : NULL;
	if (!c->gs || grpc_stream_send(c->gs, c->body, c->body_len, true) < 0) {
		etcd_call_failover(c, xstrdup("cannot open a stream"));
		return;
	}
	evbuffer_drain(c->in, evbuffer_get_length(c->in));
	c->lost = false;
	evtimer_add(c->deadline, &tv);
}

static void
call_send(struct call *c)
{
	struct etcd_client *cl = c->cl;
	struct etcd_endpoint *ep;
	struct evhttp_request *req;
	struct evkeyvalq *h;

	c->ep = cl->cur;
	c->tries++;
	ep = &cl->eps[c->ep];
	if (cl->wire == ETCD_WIRE_GRPC && c->call == ETCD_CALL_LEASE_KEEPALIVE) {
		etcd_ka_send(cl, c);
		return;
	}
	if (cl->wire == ETCD_WIRE_GRPC) {
		call_send_grpc(c, ep);
		return;
	}
	if (!ep->evcon) {
		ep->evcon = etcd_endpoint_evcon(cl, ep, ETCD_CALL_TIMEOUT);
	}
	req = ep->evcon ? evhttp_request_new(call_done_cb, c) : NULL;
	if (!req) {
		etcd_call_failover(c, xstrdup("cannot create a connection"));
		return;
	}
	h = evhttp_request_get_output_headers(req);
	evhttp_add_header(h, "Host", ep->name);
	evhttp_add_header(h, "Content-Type", "application/json");
	evbuffer_add(evhttp_request_get_output_buffer(req), c->body, strlen(c->body));
	if (evhttp_make_request(ep->evcon, req, EVHTTP_REQ_POST, c->path) < 0) {
		/* libevent freed req. */
		etcd_call_failover(c, xstrdup("cannot send the request"));
	}
}

int
etcd_client_call(struct etcd_client *cl, const struct etcd_request *req, etcd_cb cb, void *arg)
{
	struct call *c;
	struct timeval now = {0, 0};

	if (req->call == ETCD_CALL_WATCH) {
		return -EINVAL;
	}
	c = xcalloc(1, sizeof(*c));
	c->cl = cl;
	c->call = req->call;
	if (cl->wire == ETCD_WIRE_GRPC) {
		c->path = xstrdup(etcd_pb_method(req->call));
		c->body = (char *)etcd_pb_encode_request(req, &c->body_len);
		c->in = evbuffer_new();
		c->deadline = evtimer_new(cl->base, call_deadline_cb, c);
	} else {
		c->path = xstrdup(etcd_request_path(req->call));
		c->body = etcd_encode_request(req);
	}
	c->cb = cb;
	c->arg = arg;
	c->next = cl->calls;
	if (cl->calls) {
		cl->calls->prev = c;
	}
	cl->calls = c;
	/* Send from the loop: never call back from inside this function. */
	c->retry = evtimer_new(cl->base, call_retry_cb, c);
	if (!c->retry) {
		call_free(c);
		return -ENOMEM;
	}
	evtimer_add(c->retry, &now);
	return 0;
}

void
etcd_client_cancel_all(struct etcd_client *cl)
{
	/* Freeing a JSON connection frees its requests without callbacks; a
	 * gRPC call's stream is cancelled (the watches share the connection). */
	for (size_t i = 0; i < cl->n_eps; i++) {
		if (cl->eps[i].evcon) {
			evhttp_connection_free(cl->eps[i].evcon);
			cl->eps[i].evcon = NULL;
		}
	}
	while (cl->calls) {
		call_free(cl->calls);
	}
}

void
etcd_client_free(struct etcd_client *cl)
{
	if (!cl) {
		return;
	}
	etcd_client_cancel_all(cl);
	etcd_ka_free(cl);
	reap_cb(-1, 0, cl);
	free(cl->dropped);
	if (cl->reap) {
		event_free(cl->reap);
	}
	for (size_t i = 0; i < cl->n_eps; i++) {
		grpc_conn_free(cl->eps[i].gconn);
		free(cl->eps[i].host);
		free(cl->eps[i].name);
	}
	free(cl->eps);
	free(cl);
}
