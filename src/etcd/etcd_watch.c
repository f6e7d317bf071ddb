/* etcd_watch.c — etcd watch streams that reconnect and resume, over gRPC's
 * bidirectional Watch stream (etcd_grpc.c) or the JSON gateway's chunked
 * /v3/watch answer (evhttp); see etcd_client.h. */
#include <errno.h>
#include <event2/buffer.h>
#include <event2/event.h>
#include <event2/http.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "etcd_client.h"
#include "etcd_client_internal.h"
#include "etcd_grpc.h"
#include "etcd_pb.h"
#include "util.h"

/* A JSON watch stream is idle for long stretches; libevent cannot disable
 * the timeout (tech-notes §3.2), so make it long and reconnect after it. */
#define ETCD_WATCH_TIMEOUT 600

/* One watch of a stream (a create request; etcd numbers them 0, 1, ... in
 * the order sent, and the answers carry that watch_id). */
struct watch_slot {
	char *key;
	char *range_end;
	int64_t start;    /* the first start revision */
	bool no_put;      /* deletions only */
	int64_t last_rev; /* everything up to it was delivered */
	bool reset;       /* report the next batch with reset */
};

struct etcd_watch {
	struct etcd_client *cl;
	struct watch_slot slots[ETCD_WATCH_MAX];
	size_t n_slots;
	etcd_watch_cb cb;
	void *arg;
	size_t ep;
	struct evhttp_connection *evcon; /* JSON */
	struct evhttp_request *req;      /* JSON: in flight */
	struct grpc_conn *gconn;         /* gRPC: the client's, the stream is on */
	struct grpc_stream *gs;          /* gRPC: the stream */
	struct evbuffer *buf;            /* received, not yet a whole line/message */
	struct event *timer;
	bool failed;                    /* the last stream ended with an error: next endpoint */
	bool restart;                   /* a watch of the stream ended: open the stream again */
	unsigned n_fails;               /* in a row */
	bool told;                      /* the owner heard of this run of failures */
	struct etcd_watch *next, *prev; /* the client's watches */
};

static void watch_send(struct etcd_watch *w);

/* Open the stream again (from the timer: never inside its own callback);
 * after an answer we cannot place (strange), backing off as after a failed
 * stream: 100 ms more each time in a row, at most 2 s. */
static void
watch_restart(struct etcd_watch *w, bool strange)
{
	unsigned ms = 0;
	struct timeval tv;

	if (strange) {
		w->n_fails++;
		ms = 100 * w->n_fails;
		ms = ms > 2000 ? 2000 : ms;
	}
	tv.tv_sec = ms / 1000;
	tv.tv_usec = (suseconds_t)(ms % 1000) * 1000;
	w->restart = true;
	evtimer_add(w->timer, &tv);
}

/* One answer of the stream (err < 0: it could not be decoded). */
static void
watch_answer(struct etcd_watch *w, int err, struct etcd_response *resp)
{
	struct watch_slot *s;

	if (err == 0 && (resp->watch_id < 0 || (uint64_t)resp->watch_id >= w->n_slots)) {
		/* Not one of ours (etcd 3.5 answers a failed create with -1):
		 * the stream is opened again. */
		free(resp->error);
		resp->error = xasprintf("an answer for watch %" PRId64 " of %zu", resp->watch_id,
					w->n_slots);
		err = -EBADMSG;
		watch_restart(w, true);
	}
	if (err < 0) {
		char *msg = xasprintf("etcd watch at %s: %s", w->cl->eps[w->ep].name,
				      resp->error ? resp->error : strerror(-err));

		w->cb(err, NULL, false, msg, w->arg);
		free(msg);
		etcd_response_release(resp);
		return;
	}
	if (!w->restart) {
		w->n_fails = 0;
		w->told = false;
	}
	s = &w->slots[resp->watch_id];
	if (resp->canceled) {
		/* The start revision was compacted: this watch starts again from
		 * now (the others of the stream resume where they were), and the
		 * owner is told to re-read. */
		s->last_rev = 0;
		s->start = 0;
		s->reset = true;
		watch_restart(w, false);
		etcd_response_release(resp);
		return;
	}
	if (resp->n_events > 0) {
		for (size_t i = 0; i < resp->n_events; i++) {
			if (resp->events[i].kv.mod_revision > s->last_rev) {
				s->last_rev = resp->events[i].kv.mod_revision;
			}
		}
	} else if (resp->revision > s->last_rev &&
		   (resp->created ? s->last_rev == 0 : s->last_rev > 0)) {
		/* Created from now, or a progress notification: all up to it was
		 * sent. (Created from a past revision: the replay follows.) */
		s->last_rev = resp->revision;
	}
	if (resp->n_events > 0 || s->reset) {
		bool reset = s->reset;

		s->reset = false;
		w->cb(0, resp, reset, NULL, w->arg);
	}
	etcd_response_release(resp);
}

static void
watch_line(struct etcd_watch *w, const char *line, size_t len)
{
	struct etcd_response resp;
	int err = etcd_response_decode(200, line, len, &resp);

	watch_answer(w, err, &resp);
}

static void
watch_grpc_data_cb(struct grpc_stream *gs, const uint8_t *data, size_t len, void *arg)
{
	struct etcd_watch *w = arg;
	const uint8_t *msg;
	size_t msg_len, used;
	int got;

	evbuffer_add(w->buf, data, len);
	while (w->gs == gs &&
	       (got = etcd_pb_next_message(evbuffer_pullup(w->buf, -1), evbuffer_get_length(w->buf),
					   &msg, &msg_len, &used)) != 0) {
		struct etcd_response resp = {0};
		int err = got < 0 ? got : etcd_pb_decode(ETCD_CALL_WATCH, msg, msg_len, &resp);

		if (got < 0) {
			/* Framing lost: nothing after it can be read. */
			resp.error = xstrdup("a malformed gRPC message");
			evbuffer_drain(w->buf, evbuffer_get_length(w->buf));
			watch_restart(w, true);
		} else {
			evbuffer_drain(w->buf, used);
		}
		watch_answer(w, err, &resp);
	}
}

static void watch_ended(struct etcd_watch *w, bool failed, const char *why);

static void
watch_grpc_close_cb(struct grpc_stream *gs, int err, int status, const char *message, void *arg)
{
	struct etcd_watch *w = arg;

	w->gs = NULL;
	watch_ended(w, err < 0 || status != 0,
		    err == -ECONNRESET    ? "connection lost"
		    : err < 0             ? "HTTP/2 error"
		    : message && *message ? message
					  : "the stream ended");
}

static void
watch_chunk_cb(struct evhttp_request *req, void *arg)
{
	struct etcd_watch *w = arg;
	struct evbuffer *in = evhttp_request_get_input_buffer(req);
	char *line;
	size_t n;

	/* libevent drains its buffer after this callback: keep our own. */
	evbuffer_add_buffer(w->buf, in);
	while ((line = evbuffer_readln(w->buf, &n, EVBUFFER_EOL_LF)) != NULL) {
		if (n > 0) {
			watch_line(w, line, n);
		}
		free(line);
	}
}

/* Drop the stream, and on JSON its connection (which carries the one
 * stream; not from inside its callbacks). */
static void
watch_close(struct etcd_watch *w)
{
	if (w->evcon) {
		evhttp_connection_free(w->evcon);
		w->evcon = NULL;
	}
	w->req = NULL;
	if (w->gs) {
		grpc_stream_cancel(w->gs);
		w->gs = NULL;
	}
	w->gconn = NULL;
	evbuffer_drain(w->buf, evbuffer_get_length(w->buf));
}

static void
watch_timer_cb(evutil_socket_t fd, short what, void *arg)
{
	struct etcd_watch *w = arg;

	if (w->failed || w->restart) {
		/* Not from inside the connection's own callback. */
		watch_close(w);
		if (w->failed) {
			w->ep = (w->ep + 1) % w->cl->n_eps;
		}
	}
	w->restart = false;
	w->failed = false;
	watch_send(w);
}

/* The stream ended (failed: with an error, why); it opens again from the
 * timer, on the next endpoint after a failure. */
static void
watch_ended(struct etcd_watch *w, bool failed, const char *why)
{
	struct timeval tv = {0, 100000};

	evbuffer_drain(w->buf, evbuffer_get_length(w->buf));
	w->failed = failed;
	if (w->failed) {
		w->n_fails++;
		if (w->n_fails >= w->cl->n_eps) {
			/* Every member failed in a row: back off, up to 2 s. */
			unsigned ms = 100 * (w->n_fails / (unsigned)w->cl->n_eps);

			ms = ms > 2000 ? 2000 : ms;
			tv.tv_sec = ms / 1000;
			tv.tv_usec = (suseconds_t)(ms % 1000) * 1000;
		}
		if (w->n_fails >= 2 * w->cl->n_eps && !w->told) {
			char *msg = xasprintf("etcd watch at %s: %s", w->cl->eps[w->ep].name, why);

			w->told = true;
			w->cb(-EHOSTUNREACH, NULL, false, msg, w->arg);
			free(msg);
		}
	}
	evtimer_add(w->timer, &tv);
}

static void
watch_done_cb(struct evhttp_request *req, void *arg)
{
	struct etcd_watch *w = arg;
	int code = req ? evhttp_request_get_response_code(req) : 0;

	w->req = NULL;
	watch_ended(w, code != 200, code ? "unexpected HTTP status" : "connection lost");
}

/* Open the gRPC stream: one create request a watch, each from its own last
 * revision; false when it cannot. */
static bool
watch_send_grpc(struct etcd_watch *w)
{
	w->gconn = etcd_client_gconn(w->cl, w->ep);
	w->gs = w->gconn ? grpc_stream_open(w->gconn, etcd_pb_method(ETCD_CALL_WATCH),
					    watch_grpc_data_cb, watch_grpc_close_cb, w)
			 : NULL;
	for (size_t i = 0; w->gs && i < w->n_slots; i++) {
		const struct watch_slot *sl = &w->slots[i];
		struct etcd_watch_spec spec = {.key = sl->key,
					       .range_end = sl->range_end,
					       .start_revision = sl->last_rev > 0 ? sl->last_rev + 1
										  : sl->start,
					       .no_put = sl->no_put};
		size_t len;
		uint8_t *msg = etcd_pb_encode_watch(&spec, &len);

		if (grpc_stream_send(w->gs, msg, len, false) < 0) {
			grpc_stream_cancel(w->gs);
			w->gs = NULL;
		}
		free(msg);
	}
	return w->gs != NULL;
}

static void
watch_send(struct etcd_watch *w)
{
	const struct etcd_endpoint *ep = &w->cl->eps[w->ep];
	struct evhttp_request *req;
	struct evkeyvalq *h;
	char *body;
	struct timeval tv = {0, 500000};

	if (w->cl->wire == ETCD_WIRE_GRPC) {
		if (!watch_send_grpc(w)) {
			w->failed = true;
			evtimer_add(w->timer, &tv);
		}
		return;
	}
	if (!w->evcon) {
		w->evcon = etcd_endpoint_evcon(w->cl, ep, ETCD_WATCH_TIMEOUT);
	}
	req = w->evcon ? evhttp_request_new(watch_done_cb, w) : NULL;
	if (!req) {
		w->failed = true;
		evtimer_add(w->timer, &tv);
		return;
	}
	evhttp_request_set_chunked_cb(req, watch_chunk_cb);
	h = evhttp_request_get_output_headers(req);
	evhttp_add_header(h, "Host", ep->name);
	evhttp_add_header(h, "Content-Type", "application/json");
	/* One create request a line, each from its own last revision. */
	for (size_t i = 0; i < w->n_slots; i++) {
		const struct watch_slot *sl = &w->slots[i];

		body = etcd_encode_watch(sl->key, sl->range_end,
					 sl->last_rev > 0 ? sl->last_rev + 1 : sl->start,
					 sl->no_put);
		evbuffer_add_printf(evhttp_request_get_output_buffer(req), "%s%s", i ? "\n" : "",
				    body);
		free(body);
	}
	if (evhttp_make_request(w->evcon, req, EVHTTP_REQ_POST, "/v3/watch") < 0) {
		w->failed = true;
		evtimer_add(w->timer, &tv);
		return;
	}
	w->req = req;
}

struct etcd_watch *
etcd_watch_new_multi(struct etcd_client *cl, const struct etcd_watch_spec *specs, size_t n,
		     etcd_watch_cb cb, void *arg)
{
	struct etcd_watch *w;

	if (n == 0 || n > ETCD_WATCH_MAX) {
		return NULL;
	}
	w = xcalloc(1, sizeof(*w));
	w->cl = cl;
	w->n_slots = n;
	for (size_t i = 0; i < n; i++) {
		struct watch_slot *s = &w->slots[i];

		s->key = xstrdup(specs[i].key);
		s->range_end = specs[i].range_end ? xstrdup(specs[i].range_end) : NULL;
		s->no_put = specs[i].no_put;
		s->start = specs[i].start_revision;
		s->last_rev = s->start > 0 ? s->start - 1 : 0;
	}
	w->cb = cb;
	w->arg = arg;
	w->ep = cl->cur;
	w->buf = evbuffer_new();
	w->timer = evtimer_new(cl->base, watch_timer_cb, w);
	w->next = cl->watches;
	if (cl->watches) {
		cl->watches->prev = w;
	}
	cl->watches = w;
	watch_send(w);
	return w;
}

struct etcd_watch *
etcd_watch_new(struct etcd_client *cl, const char *key, const char *range_end,
	       int64_t start_revision, bool no_put, etcd_watch_cb cb, void *arg)
{
	struct etcd_watch_spec spec = {.key = key,
				       .range_end = range_end,
				       .start_revision = start_revision,
				       .no_put = no_put};

	return etcd_watch_new_multi(cl, &spec, 1, cb, arg);
}

void
etcd_watch_follow(struct etcd_watch *w)
{
	if (!w || w->ep == w->cl->cur) {
		return;
	}
	/* Never called from inside this watch's own connection callbacks. */
	watch_close(w);
	evtimer_del(w->timer);
	w->ep = w->cl->cur;
	w->failed = false;
	w->restart = false;
	watch_send(w);
}

void
etcd_watch_free(struct etcd_watch *w)
{
	if (!w) {
		return;
	}
	watch_close(w);
	if (w->prev) {
		w->prev->next = w->next;
	} else {
		w->cl->watches = w->next;
	}
	if (w->next) {
		w->next->prev = w->prev;
	}
	event_free(w->timer);
	evbuffer_free(w->buf);
	for (size_t i = 0; i < w->n_slots; i++) {
		free(w->slots[i].key);
		free(w->slots[i].range_end);
	}
	free(w);
}

struct etcd_watch *
etcd_watch_next(const struct etcd_watch *w)
{
	return w->next;
}

void
etcd_watch_conn_lost(struct etcd_watch *w, struct grpc_conn *conn)
{
	if (w->gconn != conn) {
		return;
	}
	w->gconn = NULL;
	if (w->gs) {
		struct timeval tv = {0, 100000};

		/* No callback of it may follow; open again on the next
		 * member. */
		grpc_stream_cancel(w->gs);
		w->gs = NULL;
		w->failed = true;
		w->n_fails++;
		evtimer_add(w->timer, &tv);
	}
}
