/* etcd_keepalive.c — the client's one LeaseKeepAlive stream on gRPC: each
 * keep-alive a message on it rather than a stream of its own (etcd answers a
 * stream's requests in order, one answer each), so that thousands of nodes
 * renewing their leases cost etcd a message each. A stream that fails, ends
 * or keeps an answer past the call timeout is dropped, and the keep-alives
 * on it fail over as any call does. See etcd_client_internal.h. */
#include <errno.h>
#include <event2/buffer.h>
#include <event2/event.h>
#include <stdlib.h>

#include "etcd_client.h"
#include "etcd_client_internal.h"
#include "etcd_grpc.h"
#include "etcd_pb.h"
#include "util.h"

/* Take c off the queue. */
static void
ka_unlink(struct ka_stream *ka, struct call *c)
{
	struct call **p = &ka->head, *prev = NULL;

	while (*p && *p != c) {
		prev = *p;
		p = &(*p)->ka_next;
	}
	if (!*p) {
		return;
	}
	*p = c->ka_next;
	if (ka->tail == c) {
		ka->tail = prev;
	}
	c->ka_next = NULL;
	c->on_ka = false;
}

/* Drop the stream (no more callbacks of it) and fail over, from the loop,
 * every keep-alive on it: it may be cut, stuck or out of step. */
static void
ka_reset(struct etcd_client *cl)
{
	struct ka_stream *ka = &cl->ka;

	if (ka->gs) {
		grpc_stream_cancel(ka->gs);
		ka->gs = NULL;
	}
	ka->gconn = NULL;
	if (ka->in) {
		evbuffer_drain(ka->in, evbuffer_get_length(ka->in));
	}
	while (ka->head) {
		struct call *c = ka->head;
		struct timeval now = {0, 0};

		ka_unlink(ka, c);
		/* call_deadline_cb fails it over ("connection lost"). */
		c->lost = true;
		evtimer_add(c->deadline, &now);
	}
}

static void
ka_data_cb(struct grpc_stream *gs, const uint8_t *data, size_t len, void *arg)
{
	struct etcd_client *cl = arg;
	struct ka_stream *ka = &cl->ka;
	const uint8_t *msg;
	size_t msg_len, used;
	int got;

	evbuffer_add(ka->in, data, len);
	while (ka->gs == gs &&
	       (got = etcd_pb_next_message(evbuffer_pullup(ka->in, -1), evbuffer_get_length(ka->in),
					   &msg, &msg_len, &used)) != 0) {
		struct etcd_response resp = {0};
		struct call *c = ka->head;
		int err;

		if (got < 0 || !c) {
			/* Framing lost, or an answer nobody asked for. */
			ka_reset(cl);
			return;
		}
		err = etcd_pb_decode(ETCD_CALL_LEASE_KEEPALIVE, msg, msg_len, &resp);
		evbuffer_drain(ka->in, used);
		ka_unlink(ka, c);
		evtimer_del(c->deadline);
		etcd_call_answer(c, err, &resp);
	}
}

static void
ka_close_cb(struct grpc_stream *gs, int err, int status, const char *message, void *arg)
{
	struct etcd_client *cl = arg;

	cl->ka.gs = NULL;
	ka_reset(cl);
}

void
etcd_ka_send(struct etcd_client *cl, struct call *c)
{
	struct ka_stream *ka = &cl->ka;
	struct grpc_conn *conn = etcd_client_gconn(cl, c->ep);
	struct timeval tv = {ETCD_CALL_TIMEOUT, 0};

	if (ka->gs && (ka->gconn != conn || ka->ep != c->ep)) {
		ka_reset(cl);
	}
	if (!ka->gs && conn) {
		if (!ka->in) {
			ka->in = evbuffer_new();
		}
		ka->gs = grpc_stream_open(conn, etcd_pb_method(ETCD_CALL_LEASE_KEEPALIVE),
					  ka_data_cb, ka_close_cb, cl);
		ka->gconn = ka->gs ? conn : NULL;
		ka->ep = c->ep;
	}
	if (!ka->gs || grpc_stream_send(ka->gs, c->body, c->body_len, false) < 0) {
		etcd_call_failover(c, xstrdup("cannot open the keep-alive stream"));
		return;
	}
	c->on_ka = true;
	c->ka_next = NULL;
	if (ka->tail) {
		ka->tail->ka_next = c;
	} else {
		ka->head = c;
	}
	ka->tail = c;
	c->lost = false;
	evtimer_add(c->deadline, &tv);
}

void
etcd_ka_forget(struct etcd_client *cl, struct call *c)
{
	if (!c->on_ka) {
		return;
	}
	ka_unlink(&cl->ka, c);
	/* The answers behind it would be out of step: start a new stream. */
	ka_reset(cl);
}

void
etcd_ka_conn_lost(struct etcd_client *cl, struct grpc_conn *conn)
{
	if (cl->ka.gconn == conn) {
		ka_reset(cl);
	}
}

void
etcd_ka_free(struct etcd_client *cl)
{
	struct ka_stream *ka = &cl->ka;

	if (ka->gs) {
		grpc_stream_cancel(ka->gs);
		ka->gs = NULL;
	}
	ka->head = ka->tail = NULL;
	if (ka->in) {
		evbuffer_free(ka->in);
		ka->in = NULL;
	}
}
