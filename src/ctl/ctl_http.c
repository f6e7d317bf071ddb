/* ctl_http.c — the control plane's transport: each connection's peer
 * credentials and limit, the routes (/, /handler/<name>, /metrics,
 * /ranks/<local_rank>/...), a handler call from its parameters to its reply
 * (shared within one loop turn for per_turn handlers), and forwarding to a
 * worker's own server. */
#include "ctl_internal.h"

#include <errno.h>
#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>
#include <event2/http.h>
#include <event2/keyvalq_struct.h>
#include <jansson.h>
#include <stdarg.h>
#include <string.h>
#include <strings.h>
#include <sys/queue.h>
#include <sys/socket.h>

#include "ctl_handlers.h"
#include "ctl_params.h"
#include "ctl_proxy.h"
#include "log.h"
#include "util.h"

/* ---- replies ---------------------------------------------------------------- */

static void reply_text(struct evhttp_request *req, int status, bool close, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));

static void
reply_text(struct evhttp_request *req, int status, bool close, const char *fmt, ...)
{
	struct evkeyvalq *h = evhttp_request_get_output_headers(req);
	struct evbuffer *b = evbuffer_new();
	va_list ap;

	va_start(ap, fmt);
	evbuffer_add_vprintf(b, fmt, ap);
	va_end(ap);
	evhttp_add_header(h, "Content-Type", TEXT_PLAIN);
	if (close) {
		evhttp_add_header(h, "Connection", "close");
	}
	evhttp_send_reply(req, status, NULL, b);
	evbuffer_free(b);
}

static void
reply_405(struct evhttp_request *req, const char *allow, const char *what)
{
	evhttp_add_header(evhttp_request_get_output_headers(req), "Allow", allow);
	reply_text(req, 405, false, "Method not allowed: %s answers %s", what, allow);
}

/* ---- calls ------------------------------------------------------------------ */

static struct ctl_call *
call_new(struct ctl *c, struct ctl_conn *conn, struct evhttp_request *req,
	 const struct ctl_handler *h)
{
	struct ctl_call *call = xcalloc(1, sizeof(*call));

	call->ctl = c;
	call->agent = &c->agent;
	call->base = c->base;
	call->handler = h;
	call->req = req;
	call->conn = conn;
	call->status = 200;
	call->content_type = TEXT_PLAIN;
	call->body = evbuffer_new();
	if (!call->body) {
		abort();
	}
	return call;
}

void
ctl_call_free(struct ctl_call *call)
{
	ctl_query_release(&call->query);
	if (call->body) {
		evbuffer_free(call->body);
	}
	free(call->error);
	free(call);
}

int
ctl_call_error(struct ctl_call *call, const char *fmt, ...)
{
	va_list ap;

	free(call->error);
	va_start(ap, fmt);
	if (vasprintf(&call->error, fmt, ap) < 0) {
		abort();
	}
	va_end(ap);
	return -EIO;
}

int
ctl_call_fail(struct ctl_call *call, int status, const char *fmt, ...)
{
	va_list ap;

	evbuffer_drain(call->body, evbuffer_get_length(call->body));
	va_start(ap, fmt);
	evbuffer_add_vprintf(call->body, fmt, ap);
	va_end(ap);
	call->status = status;
	call->content_type = TEXT_PLAIN;
	return 0;
}

int
ctl_call_json(struct ctl_call *call, void *j, bool compact)
{
	/* 15 significant digits: 3.992011, not 3.9920110000000002. */
	char *s =
		json_dumps(j, (compact ? JSON_COMPACT : JSON_INDENT(2)) | JSON_REAL_PRECISION(15));

	json_decref(j);
	if (!s) {
		abort();
	}
	evbuffer_add(call->body, s, strlen(s));
	if (!compact) {
		evbuffer_add(call->body, "\n", 1);
	}
	free(s);
	call->content_type = "application/json";
	return 0;
}

void
ctl_call_defer(struct ctl_call *call, void (*cancel)(struct ctl_call *call), void *op)
{
	struct ctl_conn *conn = call->conn;

	call->deferred = true;
	call->cancel = cancel;
	call->op = op;
	conn->call = call;
}

void
ctl_call_reply(struct ctl_call *call, int status, const char *content_type, struct evbuffer *body)
{
	struct ctl_conn *conn = call->conn;

	conn->call = NULL;
	if (content_type) {
		evhttp_add_header(evhttp_request_get_output_headers(call->req), "Content-Type",
				  content_type);
	}
	evhttp_send_reply(call->req, status, NULL, body);
	if (body) {
		evbuffer_free(body);
	}
	ctl_call_free(call);
}

const char *
ctl_call_socket_path(const struct ctl_call *call)
{
	return call->ctl->path;
}

/* ---- forwarding to a worker's server ------------------------------------------ */

static void
proxy_done(int err, const char *errmsg, const struct ctl_proxy_response *resp, void *arg)
{
	struct ctl_call *call = arg;
	struct evbuffer *b = evbuffer_new();

	call->op = NULL; /* freed by ctl_proxy after this returns */
	if (err < 0) {
		evbuffer_add_printf(b, "%s", errmsg ? errmsg : strerror(-err));
		ctl_call_reply(call, err == -ETIMEDOUT ? 504 : 502, TEXT_PLAIN, b);
		return;
	}
	evbuffer_add(b, resp->body, resp->body_len);
	ctl_call_reply(call, resp->status, resp->content_type ? resp->content_type : TEXT_PLAIN, b);
}

void
ctl_call_proxy_cancel(struct ctl_call *call)
{
	ctl_proxy_cancel(call->op);
	call->op = NULL;
}

int
ctl_call_proxy(struct ctl_call *call, const char *socket_path, const char *method,
	       const char *target)
{
	struct evbuffer *in = evhttp_request_get_input_buffer(call->req);
	const char *ctype =
		evhttp_find_header(evhttp_request_get_input_headers(call->req), "Content-Type");
	size_t len = evbuffer_get_length(in);
	struct ctl_proxy *p;

	call->ctl->stats.proxied++;
	p = ctl_proxy_start(call->base, socket_path, method, target, ctype,
			    len ? evbuffer_pullup(in, -1) : NULL, len, CTL_PROXY_TIMEOUT_S,
			    proxy_done, call);
	ctl_call_defer(call, ctl_call_proxy_cancel, p);
	return 0;
}

/* ---- connections ---------------------------------------------------------------- */

static void
conn_forget(struct ctl *c, struct ctl_conn *conn)
{
	if (conn->fd >= 0 && (size_t)conn->fd < c->n_slots && c->conns[conn->fd] == conn) {
		c->conns[conn->fd] = NULL;
		c->stats.connections--;
	}
}

/* The call still open on a connection that goes away: abandon it. req_alive:
 * its request may still be touched (false when evhttp freed it already). */
static void
conn_drop_call(struct ctl *c, struct ctl_conn *conn, bool req_alive)
{
	struct ctl_call *call = conn->call;

	if (!call) {
		return;
	}
	conn->call = NULL;
	if (call->streaming) {
		ctl_stream_unlink(c, call);
	}
	if (call->cancel) {
		call->cancel(call);
	}
	/* A request evhttp detached from its failed connection is ours to
	 * free; an attached one goes with the connection. */
	if (req_alive && !evhttp_request_get_connection(call->req)) {
		evhttp_request_free(call->req);
	}
	ctl_call_free(call);
}

static void
conn_close_cb(struct evhttp_connection *evcon, void *arg)
{
	struct ctl_conn *conn = arg;
	struct ctl *c = conn->ctl;

	conn_drop_call(c, conn, true);
	conn_forget(c, conn);
	free(conn);
	if (!c->http) {
		return;
	}
	ctl_streams_changed(c);
}

static bool
peer_allowed(const struct ctl *c, int fd, const struct ucred *cred)
{
	if (cred->uid == 0 || cred->uid == c->uid) {
		return true;
	}
	if (!c->has_group) {
		return false;
	}
	if (cred->gid == c->gid) {
		return true;
	}
#ifdef SO_PEERGROUPS
	{
		gid_t groups[256];
		socklen_t len = sizeof(groups);

		if (getsockopt(fd, SOL_SOCKET, SO_PEERGROUPS, groups, &len) == 0) {
			for (size_t i = 0; i < len / sizeof(gid_t); i++) {
				if (groups[i] == c->gid) {
					return true;
				}
			}
		}
	}
#endif
	return false;
}

/* The connection of req, registered on its first request: peer credentials
 * checked, the connection limit applied. NULL when the request was answered
 * (refused). */
static struct ctl_conn *
conn_get(struct ctl *c, struct evhttp_request *req)
{
	struct evhttp_connection *evcon = evhttp_request_get_connection(req);
	int fd = bufferevent_getfd(evhttp_connection_get_bufferevent(evcon));
	socklen_t len = sizeof(struct ucred);
	struct ctl_conn *conn;

	if (fd < 0) {
		reply_text(req, 500, true, "no socket");
		return NULL;
	}
	if ((size_t)fd < c->n_slots && c->conns[fd]) {
		conn = c->conns[fd];
		if (conn->evcon == evcon) {
			return conn;
		}
		/* A connection that ended without telling us; cannot happen
		 * with evhttp 2.1, which always calls the close callback. */
		conn_drop_call(c, conn, false);
		conn_forget(c, conn);
		free(conn);
	}
	if (c->stats.connections >= CTL_CONNECTIONS_MAX) {
		c->stats.overloaded++;
		reply_text(req, 503, true, "Too many connections (at most %d)",
			   CTL_CONNECTIONS_MAX);
		return NULL;
	}
	if ((size_t)fd >= c->n_slots) {
		size_t n = (size_t)fd + 64;

		c->conns = xrealloc(c->conns, n * sizeof(*c->conns));
		memset(c->conns + c->n_slots, 0, (n - c->n_slots) * sizeof(*c->conns));
		c->n_slots = n;
	}
	conn = xcalloc(1, sizeof(*conn));
	conn->ctl = c;
	conn->evcon = evcon;
	conn->fd = fd;
	if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &conn->cred, &len) == 0) {
		conn->allowed = peer_allowed(c, fd, &conn->cred);
	}
	c->conns[fd] = conn;
	c->stats.connections++;
	evhttp_connection_set_closecb(evcon, conn_close_cb, conn);
	if (!conn->allowed) {
		c->stats.refused++;
		if (!c->refusal_logged) {
			log_warn("control socket: refused uid %u (pid %d): only root, uid %u%s may "
				 "use it (later refusals are counted, not logged)",
				 (unsigned)conn->cred.uid, (int)conn->cred.pid, (unsigned)c->uid,
				 c->has_group ? " and the socket's group" : "");
			c->refusal_logged = true;
		}
	}
	return conn;
}

/* ---- routes ------------------------------------------------------------------------- */

enum route_match {
	ROUTE_EXACT,
	ROUTE_PREFIX,
};

#define M_GET 1u
#define M_POST 2u

struct ctl_route {
	const char *path;
	enum route_match match;
	unsigned methods;
	const char *allow; /* the Allow header for 405 */
	/* rest: the raw path after a prefix route's path ("" for exact). */
	void (*serve)(struct ctl *c, struct ctl_conn *conn, struct evhttp_request *req,
		      const char *rest, unsigned method);
};

static void
serve_index(struct ctl *c, struct ctl_conn *conn, struct evhttp_request *req, const char *rest,
	    unsigned method)
{
	struct evbuffer *b = evbuffer_new();

	evbuffer_add_printf(b, "<h1>elasticd</h1>\n<a href=\"/handler/\">Handler names</a>\n");
	evhttp_add_header(evhttp_request_get_output_headers(req), "Content-Type", "text/html");
	evhttp_send_reply(req, 200, NULL, b);
	evbuffer_free(b);
}

static void
serve_handler_list(struct ctl *c, struct ctl_conn *conn, struct evhttp_request *req,
		   const char *rest, unsigned method)
{
	json_t *names = json_array();
	struct evbuffer *b = evbuffer_new();
	char *s;

	for (size_t i = 0; i < ctl_n_handlers; i++) {
		json_array_append_new(names, json_string(ctl_handlers[i].name));
	}
	s = json_dumps(names, JSON_COMPACT);
	json_decref(names);
	evbuffer_add(b, s, strlen(s));
	free(s);
	evhttp_add_header(evhttp_request_get_output_headers(req), "Content-Type",
			  "application/json");
	evhttp_send_reply(req, 200, NULL, b);
	evbuffer_free(b);
}

static bool
is_form(struct evhttp_request *req)
{
	const char *ct = evhttp_find_header(evhttp_request_get_input_headers(req), "Content-Type");

	return ct && strncasecmp(ct, "application/x-www-form-urlencoded", 33) == 0;
}

void
ctl_turn_replies_drop(struct ctl *c)
{
	for (size_t i = 0; i < ctl_n_handlers; i++) {
		free(c->turn_replies[i].body);
		c->turn_replies[i].body = NULL;
	}
}

/* Answer call with the reply h gave earlier in this loop turn, if any. A
 * handler that changes state drops every shared reply. */
static bool
turn_reply(struct ctl *c, const struct ctl_handler *h, struct ctl_call *call)
{
	struct ctl_turn_reply *t = &c->turn_replies[h - ctl_handlers];

	if (!h->read_only) {
		ctl_turn_replies_drop(c);
		return false;
	}
	if (!h->per_turn || !t->body) {
		return false;
	}
	evbuffer_add(call->body, t->body, t->len);
	evhttp_add_header(evhttp_request_get_output_headers(call->req), "Content-Type",
			  t->content_type);
	evhttp_send_reply(call->req, 200, NULL, call->body);
	return true;
}

static void
turn_reply_keep(struct ctl *c, const struct ctl_handler *h, struct ctl_call *call, int r)
{
	struct ctl_turn_reply *t = &c->turn_replies[h - ctl_handlers];
	size_t len = evbuffer_get_length(call->body);

	if (!h->per_turn || r < 0 || call->status != 200) {
		return;
	}
	free(t->body);
	t->body = xmalloc(len + 1);
	evbuffer_copyout(call->body, t->body, len);
	t->len = len;
	t->content_type = call->content_type;
	event_active(c->turn_ev, EV_TIMEOUT, 0);
}

/* The loop turn is over: its shared replies go. */
void
ctl_turn_end_cb(evutil_socket_t fd, short what, void *arg)
{
	ctl_turn_replies_drop(arg);
}

/* Run handler h for req with the request's parameters. */
static void
run_handler(struct ctl *c, struct ctl_conn *conn, struct evhttp_request *req,
	    const struct ctl_handler *h)
{
	const char *query = evhttp_uri_get_query(evhttp_request_get_evhttp_uri(req));
	struct ctl_call *call = call_new(c, conn, req, h);
	char *err = NULL;
	int r = 0;

	if (query) {
		r = ctl_query_parse(query, strlen(query), &call->query, &err);
	}
	if (r == 0 && evhttp_request_get_command(req) == EVHTTP_REQ_POST && is_form(req)) {
		struct evbuffer *in = evhttp_request_get_input_buffer(req);
		size_t len = evbuffer_get_length(in);

		if (len > 0) {
			r = ctl_query_parse((const char *)evbuffer_pullup(in, -1), len,
					    &call->query, &err);
		}
	}
	if (r == 0) {
		r = ctl_params_validate(h->params, h->n_params, &call->query, call->args, &err);
	}
	if (r < 0) {
		reply_text(req, 400, false, "%s", err);
		free(err);
		ctl_call_free(call);
		return;
	}
	if (turn_reply(c, h, call)) {
		ctl_call_free(call);
		return;
	}
	r = h->run(call);
	if (call->deferred) {
		return;
	}
	turn_reply_keep(c, h, call, r);
	if (r < 0) {
		reply_text(req, 500, false, "Handler %s failed: %s", h->name,
			   call->error ? call->error : strerror(-r));
	} else {
		evhttp_add_header(evhttp_request_get_output_headers(req), "Content-Type",
				  call->content_type);
		evhttp_send_reply(req, call->status, NULL, call->body);
	}
	ctl_call_free(call);
}

static void
serve_handler(struct ctl *c, struct ctl_conn *conn, struct evhttp_request *req, const char *rest,
	      unsigned method)
{
	size_t len = 0;
	char *name = evhttp_uridecode(rest, 0, &len);
	const struct ctl_handler *h = name && strlen(name) == len ? ctl_handler_find(name) : NULL;

	if (!h) {
		/* torch's WorkerServer words. */
		reply_text(req, 404, false, "Handler %s not found: Failed to find handler %s",
			   name ? name : rest, name ? name : rest);
	} else if (method == M_GET && !h->read_only) {
		evhttp_add_header(evhttp_request_get_output_headers(req), "Allow", "POST");
		reply_text(req, 405, false,
			   "Method not allowed: handler %s changes the agent's state; use POST",
			   h->name);
	} else {
		run_handler(c, conn, req, h);
	}
	free(name);
}

static void
serve_metrics(struct ctl *c, struct ctl_conn *conn, struct evhttp_request *req, const char *rest,
	      unsigned method)
{
	run_handler(c, conn, req, ctl_handler_find("metrics"));
}

/* /ranks/<local_rank><path>: forwarded to that worker's own server. */
static void
serve_rank(struct ctl *c, struct ctl_conn *conn, struct evhttp_request *req, const char *rest,
	   unsigned method)
{
	const char *query = evhttp_uri_get_query(evhttp_request_get_evhttp_uri(req));
	size_t digits = strspn(rest, "0123456789");
	const char *path = rest + digits;
	int n = c->agent.local_world_size;
	long long rank = -1;
	struct ctl_worker_view w;
	struct ctl_call *call;
	_cleanup_free_ char *num = xstrndup(rest, digits), *target = NULL;

	if (digits == 0 || (*path && *path != '/') || parse_int(num, 0, n - 1, &rank) < 0) {
		reply_text(req, 404, false, "No such local rank: /ranks/%s (local ranks 0 to %d)",
			   rest, n - 1);
		return;
	}
	if (c->agent.ops->worker(c->agent.agent, (int)rank, &w) < 0 || !w.running) {
		reply_text(req, 503, false, "local_rank %lld is not running", rank);
		return;
	}
	if (!w.server_socket) {
		reply_text(req, 502, false,
			   "local_rank %lld has no worker server (elasticd runs with "
			   "--no-worker-server)",
			   rank);
		return;
	}
	target = xasprintf("%s%s%s", *path ? path : "/", query && *query ? "?" : "",
			   query && *query ? query : "");
	call = call_new(c, conn, req, NULL);
	ctl_call_proxy(call, w.server_socket, method == M_POST ? "POST" : "GET", target);
}

static const struct ctl_route routes[] = {
	{"/", ROUTE_EXACT, M_GET, "GET", serve_index},
	{"/handler/", ROUTE_EXACT, M_GET, "GET", serve_handler_list},
	{"/handler/", ROUTE_PREFIX, M_GET | M_POST, "GET, POST", serve_handler},
	{"/metrics", ROUTE_EXACT, M_GET, "GET", serve_metrics},
	{"/ranks/", ROUTE_PREFIX, M_GET | M_POST, "GET, POST", serve_rank},
};

/* Whether req carries Content-Length headers that disagree: its framing is
 * ambiguous (RFC 9112 6.3), while evhttp keeps every header and reads the
 * body by the first. */
static bool
content_length_conflict(struct evhttp_request *req)
{
	struct evkeyvalq *h = evhttp_request_get_input_headers(req);
	const char *first = NULL;
	struct evkeyval *kv;

	TAILQ_FOREACH(kv, h, next)
	{
		if (evutil_ascii_strcasecmp(kv->key, "Content-Length") != 0) {
			continue;
		}
		if (!first) {
			first = kv->value;
		} else if (strcmp(first, kv->value) != 0) {
			return true;
		}
	}
	return false;
}

void
ctl_request_cb(struct evhttp_request *req, void *arg)
{
	struct ctl *c = arg;
	struct ctl_conn *conn = conn_get(c, req);
	const char *path;
	unsigned method;

	if (!conn) {
		return;
	}
	if (content_length_conflict(req)) {
		reply_text(req, 400, true, "Bad request: Content-Length headers disagree");
		return;
	}
	if (!conn->allowed) {
		reply_text(req, 403, true, "Forbidden: uid %u may not use this socket",
			   (unsigned)conn->cred.uid);
		return;
	}
	c->stats.requests++;
	path = evhttp_uri_get_path(evhttp_request_get_evhttp_uri(req));
	if (!path) {
		path = "";
	}
	/* evhttp_set_allowed_methods lets only these three through. */
	method = evhttp_request_get_command(req) == EVHTTP_REQ_POST ? M_POST : M_GET;
	for (size_t i = 0; i < ARRAY_SIZE(routes); i++) {
		const struct ctl_route *r = &routes[i];
		size_t n = strlen(r->path);
		bool match = r->match == ROUTE_EXACT ? strcmp(path, r->path) == 0
						     : strncmp(path, r->path, n) == 0 && path[n];

		if (!match) {
			continue;
		}
		if (!(r->methods & method)) {
			reply_405(req, r->allow, r->path);
			return;
		}
		r->serve(c, conn, req, r->match == ROUTE_EXACT ? "" : path + n, method);
		return;
	}
	reply_text(req, 404, false, "Not found: %s", path);
}
