/* etcd_client.c — the HTTP transport to etcd's v3 JSON gateway: unary calls
 * that fail over between endpoints, and watch streams. Bodies are built in
 * etcd_request.c, answers decoded in etcd_response.c; see etcd_client.h. */
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
#include "util.h"

#define ETCD_DEFAULT_PORT 2379
/* Seconds a unary call may take on one endpoint (a member without quorum
 * answers 503 after about 7 s). */
#define ETCD_CALL_TIMEOUT 10
/* A watch stream is idle for long stretches; libevent cannot disable the
 * timeout (tech-notes §3.2), so make it long and reconnect after it. */
#define ETCD_WATCH_TIMEOUT 600

/* ---- the client --------------------------------------------------------- */

struct endpoint {
	char *host;
	int port;
	char *name; /* "host:port" */
	struct evhttp_connection *evcon;
};

struct call {
	struct etcd_client *cl;
	struct call *next, *prev;
	char *path;
	char *body;
	etcd_cb cb;
	void *arg;
	size_t ep; /* the endpoint of the try in flight */
	unsigned tries;
	struct event *retry;
	char *last_err;
};

struct etcd_client {
	struct event_base *base;
	struct endpoint *eps;
	size_t n_eps;
	size_t cur;
	struct call *calls; /* in flight */
};

static struct evhttp_connection *
endpoint_conn(struct etcd_client *cl, struct endpoint *ep, int timeout)
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

struct etcd_client *
etcd_client_new(struct event_base *base, const char *endpoints, char **reterr)
{
	struct etcd_client *cl = xcalloc(1, sizeof(*cl));
	char *list = xstrdup(endpoints ? endpoints : ""), *save = NULL, *tok;

	cl->base = base;
	for (tok = strtok_r(list, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
		struct endpoint ep = {0};
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
static void
call_failover(struct call *c, char *why)
{
	struct etcd_client *cl = c->cl;

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
	char *msg;

	if (code == 0) {
		call_failover(c, xstrdup("cannot connect or no answer"));
		return;
	}
	in = evhttp_request_get_input_buffer(req);
	err = etcd_response_decode(code, (const char *)evbuffer_pullup(in, -1),
				   evbuffer_get_length(in), &resp);
	if (err == -EAGAIN) {
		call_failover(c, xasprintf("unavailable (%s)", resp.error));
		etcd_response_release(&resp);
		return;
	}
	msg = err < 0 ? xasprintf("etcd at %s: %s %s", c->cl->eps[c->ep].name, c->path,
				  resp.error ? resp.error : strerror(-err))
		      : NULL;
	c->cb(err, &resp, msg, c->arg);
	free(msg);
	etcd_response_release(&resp);
	call_free(c);
}

static void
call_send(struct call *c)
{
	struct etcd_client *cl = c->cl;
	struct endpoint *ep;
	struct evhttp_request *req;
	struct evkeyvalq *h;

	c->ep = cl->cur;
	c->tries++;
	ep = &cl->eps[c->ep];
	if (!ep->evcon) {
		ep->evcon = endpoint_conn(cl, ep, ETCD_CALL_TIMEOUT);
	}
	req = ep->evcon ? evhttp_request_new(call_done_cb, c) : NULL;
	if (!req) {
		call_failover(c, xstrdup("cannot create a connection"));
		return;
	}
	h = evhttp_request_get_output_headers(req);
	evhttp_add_header(h, "Host", ep->name);
	evhttp_add_header(h, "Content-Type", "application/json");
	evbuffer_add(evhttp_request_get_output_buffer(req), c->body, strlen(c->body));
	if (evhttp_make_request(ep->evcon, req, EVHTTP_REQ_POST, c->path) < 0) {
		/* libevent freed req. */
		call_failover(c, xstrdup("cannot send the request"));
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
	c->path = xstrdup(etcd_request_path(req->call));
	c->body = etcd_encode_request(req);
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
	/* Freeing a connection frees its queued requests without callbacks. */
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
	for (size_t i = 0; i < cl->n_eps; i++) {
		free(cl->eps[i].host);
		free(cl->eps[i].name);
	}
	free(cl->eps);
	free(cl);
}

/* ---- watch streams ------------------------------------------------------ */

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
	struct evhttp_connection *evcon;
	struct evhttp_request *req; /* in flight */
	struct evbuffer *buf;
	struct event *timer;
	bool failed;      /* the last stream ended with an error: next endpoint */
	bool restart;     /* a watch of the stream ended: open the stream again */
	unsigned n_fails; /* in a row */
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

static void
watch_line(struct etcd_watch *w, const char *line, size_t len)
{
	struct etcd_response resp;
	int err = etcd_response_decode(200, line, len, &resp);
	struct watch_slot *s;

	if (err == 0 && (resp.watch_id < 0 || (uint64_t)resp.watch_id >= w->n_slots)) {
		/* Not one of ours (etcd 3.5 answers a failed create with -1):
		 * the stream is opened again. */
		free(resp.error);
		resp.error = xasprintf("an answer for watch %" PRId64 " of %zu", resp.watch_id,
				       w->n_slots);
		err = -EBADMSG;
		watch_restart(w, true);
	}
	if (err < 0) {
		char *msg = xasprintf("etcd watch at %s: %s", w->cl->eps[w->ep].name,
				      resp.error ? resp.error : strerror(-err));

		w->cb(err, NULL, false, msg, w->arg);
		free(msg);
		etcd_response_release(&resp);
		return;
	}
	if (!w->restart) {
		w->n_fails = 0;
	}
	s = &w->slots[resp.watch_id];
	if (resp.canceled) {
		/* The start revision was compacted: this watch starts again from
		 * now (the others of the stream resume where they were), and the
		 * owner is told to re-read. */
		s->last_rev = 0;
		s->start = 0;
		s->reset = true;
		watch_restart(w, false);
		etcd_response_release(&resp);
		return;
	}
	if (resp.n_events > 0) {
		for (size_t i = 0; i < resp.n_events; i++) {
			if (resp.events[i].kv.mod_revision > s->last_rev) {
				s->last_rev = resp.events[i].kv.mod_revision;
			}
		}
	} else if (resp.revision > s->last_rev &&
		   (resp.created ? s->last_rev == 0 : s->last_rev > 0)) {
		/* Created from now, or a progress notification: all up to it was
		 * sent. (Created from a past revision: the replay follows.) */
		s->last_rev = resp.revision;
	}
	if (resp.n_events > 0 || s->reset) {
		bool reset = s->reset;

		s->reset = false;
		w->cb(0, &resp, reset, NULL, w->arg);
	}
	etcd_response_release(&resp);
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

static void
watch_timer_cb(evutil_socket_t fd, short what, void *arg)
{
	struct etcd_watch *w = arg;

	if ((w->failed || w->restart) && w->evcon) {
		/* Not from inside the connection's own callback. */
		evhttp_connection_free(w->evcon);
		w->evcon = NULL;
		w->req = NULL;
		evbuffer_drain(w->buf, evbuffer_get_length(w->buf));
		if (w->failed) {
			w->ep = (w->ep + 1) % w->cl->n_eps;
		}
	}
	w->restart = false;
	w->failed = false;
	watch_send(w);
}

static void
watch_done_cb(struct evhttp_request *req, void *arg)
{
	struct etcd_watch *w = arg;
	int code = req ? evhttp_request_get_response_code(req) : 0;
	struct timeval tv = {0, 100000};

	w->req = NULL;
	evbuffer_drain(w->buf, evbuffer_get_length(w->buf));
	w->failed = code != 200;
	if (w->failed) {
		w->n_fails++;
		if (w->n_fails >= w->cl->n_eps) {
			/* Every member failed in a row: back off, up to 2 s. */
			unsigned ms = 100 * (w->n_fails / (unsigned)w->cl->n_eps);

			ms = ms > 2000 ? 2000 : ms;
			tv.tv_sec = ms / 1000;
			tv.tv_usec = (suseconds_t)(ms % 1000) * 1000;
		}
		if (w->n_fails == 2 * w->cl->n_eps) {
			char *msg = xasprintf("etcd watch at %s: %s", w->cl->eps[w->ep].name,
					      code ? "unexpected HTTP status" : "connection lost");

			w->cb(-EHOSTUNREACH, NULL, false, msg, w->arg);
			free(msg);
		}
	}
	evtimer_add(w->timer, &tv);
}

static void
watch_send(struct etcd_watch *w)
{
	struct endpoint *ep = &w->cl->eps[w->ep];
	struct evhttp_request *req;
	struct evkeyvalq *h;
	char *body;
	struct timeval tv = {0, 500000};

	if (!w->evcon) {
		w->evcon = endpoint_conn(w->cl, ep, ETCD_WATCH_TIMEOUT);
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
	if (w->evcon) {
		evhttp_connection_free(w->evcon);
		w->evcon = NULL;
	}
	w->req = NULL;
	evtimer_del(w->timer);
	evbuffer_drain(w->buf, evbuffer_get_length(w->buf));
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
	if (w->evcon) {
		evhttp_connection_free(w->evcon);
	}
	event_free(w->timer);
	evbuffer_free(w->buf);
	for (size_t i = 0; i < w->n_slots; i++) {
		free(w->slots[i].key);
		free(w->slots[i].range_end);
	}
	free(w);
}
