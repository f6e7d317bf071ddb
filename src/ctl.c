#include "ctl.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>
#include <event2/http.h>
#include <event2/keyvalq_struct.h>
#include <event2/listener.h>
#include <grp.h>
#include <inttypes.h>
#include <jansson.h>
#include <libgen.h>
#include <limits.h>
#include <stdarg.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/queue.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "config.h"
#include "ctl_handlers.h"
#include "ctl_internal.h"
#include "ctl_params.h"
#include "ctl_proxy.h"
#include "events.h"
#include "fdreserve.h"
#include "log.h"
#include "util.h"
#include "wenv.h"

/* listen(2) backlog of the control socket. */
#define CTL_BACKLOG 128
/* Age after which a socket nobody answers on in the default directory is
 * taken for one a killed agent left, seconds. */
#define CTL_STALE_AGE_S 60
/* Every live control plane. libevent's evhttp_bind_listener makes the
 * listener's callback argument the evhttp, so the listener's error callback
 * (out of file descriptors) finds its ctl here. */
static struct ctl *live_ctls;

/* ---- paths (pure) ---------------------------------------------------------- */

/* Whether the default path is systemd's RuntimeDirectory (systemd removes
 * it; no other agent shares it). */
static bool
shared_dir_is_systemds(char *const *env)
{
	const char *rd = wenv_get(env, "RUNTIME_DIRECTORY");

	return rd && rd[0] == '/';
}

/* "<stem>.<pid>.sock" for a second agent of the same run id on this host. */
static char *
alternate_path(const char *path)
{
	size_t n = strlen(path);

	if (n > 5 && strcmp(path + n - 5, ".sock") == 0) {
		n -= 5;
	}
	return xasprintf("%.*s.%d.sock", (int)n, path, (int)getpid());
}

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

static void
proxy_cancel(struct ctl_call *call)
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
	ctl_call_defer(call, proxy_cancel, p);
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

static void
turn_replies_drop(struct ctl *c)
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
		turn_replies_drop(c);
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
static void
turn_end_cb(evutil_socket_t fd, short what, void *arg)
{
	turn_replies_drop(arg);
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

static void
request_cb(struct evhttp_request *req, void *arg)
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

/* ---- the listener ------------------------------------------------------------------- */

static struct ctl *
ctl_of_http(const struct evhttp *http)
{
	for (struct ctl *c = live_ctls; c; c = c->next_live) {
		if (c->http == http) {
			return c;
		}
	}
	return NULL;
}

/* The listener paused for lack of descriptors (fdreserve, at a bounded rate). */
static void
listener_paused_cb(const char *why, uint64_t untold, void *arg)
{
	if (untold) {
		log_warn("control socket: %s; not accepting connections for %d s (%" PRIu64
			 " more pauses since the last line)",
			 why, FDRESERVE_PAUSE_S, untold);
	} else {
		log_warn("control socket: %s; not accepting connections for %d s", why,
			 FDRESERVE_PAUSE_S);
	}
}

/* accept(2) failed for a reason other than a client that went away: out of
 * file descriptors (EMFILE, ENFILE) or memory. The listening socket stays
 * readable, so pause it, as OpenBSD's control.c does, instead of spinning. */
static void
listener_error_cb(struct evconnlistener *lev, void *arg)
{
	struct ctl *c = ctl_of_http(arg);

	if (!c) {
		evconnlistener_disable(lev);
		return;
	}
	fdreserve_accept_failed(c->fdres, EVUTIL_SOCKET_ERROR());
	c->stats.accept_pauses = fdreserve_pauses(c->fdres);
}

/* evhttp makes each accepted connection's bufferevent here: the one place
 * that sees every connection, also those that never send a request. When
 * the lowest free descriptor is in the reserve (fdreserve.h), stop accepting
 * for a while: idle clients must not take the descriptors that starting
 * workers and the rendezvous need. */
static struct bufferevent *
conn_bev_cb(struct event_base *base, void *arg)
{
	struct ctl *c = arg;

	(void)fdreserve_admit(c->fdres, -1);
	c->stats.accept_pauses = fdreserve_pauses(c->fdres);
	/* Options 0, as evhttp's own: the connection closes its socket. */
	return bufferevent_socket_new(base, -1, 0);
}

/* Whether a process answers on the socket path: 1 yes, 0 no (stale), -errno. */
static int
socket_live(const char *path)
{
	struct sockaddr_un sun = {.sun_family = AF_UNIX};
	int fd, r;

	memcpy(sun.sun_path, path, strlen(path) + 1);
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0) {
		return -errno;
	}
	r = connect(fd, (struct sockaddr *)&sun, sizeof(sun));
	if (r < 0) {
		r = errno == EAGAIN ? 1 : errno == ECONNREFUSED || errno == ENOENT ? 0 : -errno;
	} else {
		r = 1;
	}
	close(fd);
	return r;
}

/* Bind and listen on path: a stale socket is replaced, a live one refused. */
static int
ctl_listen(struct ctl *c, const char *path, int mode, char **reterr)
{
	struct sockaddr_un sun = {.sun_family = AF_UNIX};
	const char *what = NULL;
	struct stat st;
	mode_t old;
	int fd, r;

	if (strlen(path) >= sizeof(sun.sun_path)) {
		*reterr = xasprintf("%s: the path is too long for a Unix socket (%zu bytes, at "
				    "most %zu)",
				    path, strlen(path), sizeof(sun.sun_path) - 1);
		return -ENAMETOOLONG;
	}
	memcpy(sun.sun_path, path, strlen(path) + 1);
	if (lstat(path, &st) == 0) {
		if (!S_ISSOCK(st.st_mode)) {
			*reterr = xasprintf("%s exists and is not a socket", path);
			return -EEXIST;
		}
		r = socket_live(path);
		if (r > 0) {
			*reterr = xasprintf("%s is in use: another agent answers on it", path);
			return -EADDRINUSE;
		}
		if (r < 0) {
			*reterr = xasprintf("cannot check %s: %s", path, strerror(-r));
			return r;
		}
		if (unlink(path) < 0 && errno != ENOENT) {
			r = -errno;
			*reterr = xasprintf("cannot remove the stale socket %s: %s", path,
					    strerror(-r));
			return r;
		}
		log_info("control socket: replaced the stale socket %s (its agent is gone)", path);
	}
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0) {
		r = -errno;
		*reterr = xasprintf("socket: %s", strerror(-r));
		return r;
	}
	/* Created with no access for others whatever the umask, then widened. */
	old = umask(0177);
	r = bind(fd, (struct sockaddr *)&sun, sizeof(sun));
	if (r < 0) {
		r = -errno;
	}
	umask(old);
	if (r < 0) {
		close(fd);
		*reterr = r == -EADDRINUSE
				  ? xasprintf("%s is in use: another agent answers on it", path)
				  : xasprintf("cannot bind %s: %s", path, strerror(-r));
		return r;
	}
	if (chmod(path, (mode_t)mode) < 0) {
		what = "chmod";
	} else if (c->has_group && chown(path, (uid_t)-1, c->gid) < 0) {
		what = "chown";
	} else if (listen(fd, CTL_BACKLOG) < 0) {
		what = "listen";
	} else if (stat(path, &st) < 0) {
		what = "stat";
	}
	if (what) {
		int e = errno;

		*reterr = xasprintf("cannot set up the socket: %s %s: %s", what, sun.sun_path,
				    strerror(e));
		unlink(sun.sun_path);
		close(fd);
		return -e;
	}
	c->dev = st.st_dev;
	c->ino = st.st_ino;
	c->listener = evconnlistener_new(c->base, NULL, NULL,
					 LEV_OPT_CLOSE_ON_FREE | LEV_OPT_CLOSE_ON_EXEC, 0, fd);
	if (!c->listener) {
		*reterr = xasprintf("cannot listen on %s", path);
		unlink(path);
		close(fd);
		return -ENOMEM;
	}
	evhttp_bind_listener(c->http, c->listener);
	evconnlistener_set_error_cb(c->listener, listener_error_cb);
	c->fdres = fdreserve_new(c->base, c->listener, listener_paused_cb, c);
	c->path = xstrdup(path);
	return 0;
}

/* mkdir -p the socket's directory; the private /tmp fallback must be a real
 * directory owned by us and closed to others. */
static int
prepare_dir(const char *path, bool is_default, char **reterr)
{
	_cleanup_free_ char *copy = xstrdup(path);
	_cleanup_free_ char *private_tmp = xasprintf("/tmp/elasticd-%u", (unsigned)geteuid());
	const char *dir = dirname(copy);
	bool public_run = strcmp(dir, "/run/elasticd") == 0;
	struct stat st;
	int r;

	r = mkdir_p(dir, public_run ? 0755 : 0700);
	if (r < 0) {
		*reterr = xasprintf("cannot create %s: %s", dir, strerror(-r));
		return r;
	}
	if (stat(dir, &st) < 0) {
		r = -errno;
		*reterr = xasprintf("cannot check %s: %s", dir, strerror(-r));
		return r;
	}
	r = ctl_dir_check(dir, st.st_mode, st.st_uid, reterr);
	if (r < 0) {
		return r;
	}
	if (is_default && strcmp(dir, private_tmp) == 0) {
		if (lstat(dir, &st) < 0 || !S_ISDIR(st.st_mode) || st.st_uid != geteuid() ||
		    (st.st_mode & 077) != 0) {
			*reterr = xasprintf("%s is not a private directory of uid %u", dir,
					    (unsigned)geteuid());
			return -EPERM;
		}
	}
	return 0;
}

/* The workers' socket directory: created 0700, a stale one reused. */
static int
prepare_worker_dir(struct ctl *c)
{
	struct sockaddr_un sun;
	char *dir = ctl_worker_dir_for(c->path);
	/* "<dir>/rank<n>.sock" with n up to 5 digits must fit sun_path. */
	size_t need = strlen(dir) + strlen("/rank99999.sock");
	struct stat st;

	if (need >= sizeof(sun.sun_path)) {
		log_warn("control socket: %s is too long for the workers' sockets; workers get no "
			 "TORCH_WORKER_SERVER_SOCKET",
			 dir);
		free(dir);
		return -ENAMETOOLONG;
	}
	if (mkdir(dir, 0700) < 0 && errno != EEXIST) {
		log_warn("control socket: cannot create %s: %s; workers get no "
			 "TORCH_WORKER_SERVER_SOCKET",
			 dir, strerror(errno));
		free(dir);
		return -errno;
	}
	if (lstat(dir, &st) < 0 || !S_ISDIR(st.st_mode) || st.st_uid != geteuid()) {
		log_warn("control socket: %s is not our directory; workers get no "
			 "TORCH_WORKER_SERVER_SOCKET",
			 dir);
		free(dir);
		return -EPERM;
	}
	c->worker_dir = dir;
	return 0;
}

/* Remove the workers' sockets and their directory (they are gone by now). */
static void
remove_worker_dir(const char *dir)
{
	DIR *d = opendir(dir);
	struct dirent *de;

	if (!d) {
		return;
	}
	while ((de = readdir(d))) {
		size_t n = strlen(de->d_name);

		if (strncmp(de->d_name, "rank", 4) == 0 && n > 5 &&
		    strcmp(de->d_name + n - 5, ".sock") == 0) {
			_cleanup_free_ char *p = xasprintf("%s/%s", dir, de->d_name);

			unlink(p);
		}
	}
	closedir(d);
	rmdir(dir);
}

/* Remove the sockets that agents killed with SIGKILL left in the shared
 * default directory dir (and their workers' directories): "*.sock" sockets
 * nobody answers on, unchanged for CTL_STALE_AGE_S (so that one another agent
 * has bound but not yet listens on is left alone). keep is our own. */
static void
remove_stale_sockets(const char *dir, const char *keep)
{
	DIR *d = opendir(dir);
	struct dirent *de;
	time_t now = time(NULL);
	int n = 0;

	if (!d) {
		return;
	}
	while ((de = readdir(d))) {
		size_t len = strlen(de->d_name);
		_cleanup_free_ char *p = NULL;
		struct stat st;

		if (len <= 5 || strcmp(de->d_name + len - 5, ".sock") != 0) {
			continue;
		}
		p = xasprintf("%s/%s", dir, de->d_name);
		if (strcmp(p, keep) == 0 || lstat(p, &st) < 0 || !S_ISSOCK(st.st_mode) ||
		    st.st_uid != geteuid() || now - st.st_mtime < CTL_STALE_AGE_S ||
		    strlen(p) >= sizeof(((struct sockaddr_un *)0)->sun_path) ||
		    socket_live(p) != 0) {
			continue;
		}
		if (unlink(p) == 0) {
			_cleanup_free_ char *w = ctl_worker_dir_for(p);

			remove_worker_dir(w);
			n++;
		}
	}
	closedir(d);
	if (n > 0) {
		log_info(
			"control socket: removed %d socket%s left in %s by agents that were killed",
			n, n == 1 ? "" : "s", dir);
	}
}

static int
resolve_group(const char *name, gid_t *ret, char **reterr)
{
	long long n;
	struct group *g;

	if (parse_int(name, 0, 0x7fffffff, &n) == 0) {
		*ret = (gid_t)n;
		return 0;
	}
	g = getgrnam(name);
	if (!g) {
		*reterr = xasprintf("--control-socket-group: no group named '%s'", name);
		return -EINVAL;
	}
	*ret = g->gr_gid;
	return 0;
}

/* The evhttp server and the loop events of c, with every limit set. */
static void
ctl_setup_http(struct ctl *c)
{
	c->http = evhttp_new(c->base);
	c->reap_ev = event_new(c->base, -1, 0, ctl_stream_reap_cb, c);
	if (!c->http || !c->reap_ev || !c->turn_ev) {
		abort();
	}
	evhttp_set_max_headers_size(c->http, CTL_HEADERS_MAX);
	evhttp_set_max_body_size(c->http, CTL_BODY_MAX);
	evhttp_set_timeout(c->http, CTL_TIMEOUT_S);
	evhttp_set_flags(c->http, EVHTTP_SERVER_LINGERING_CLOSE);
	/* No HEAD: evhttp 2.1 would send the body with it. */
	evhttp_set_allowed_methods(c->http, EVHTTP_REQ_GET | EVHTTP_REQ_POST);
	evhttp_set_default_content_type(c->http, TEXT_PLAIN);
	evhttp_set_gencb(c->http, request_cb, c);
	evhttp_set_bevcb(c->http, conn_bev_cb, c);
}

int
ctl_new(struct event_base *base, const struct ctl_agent *agent, const struct config *cfg,
	char *const *env, struct ctl **ret, char **reterr)
{
	struct ctl *c = xcalloc(1, sizeof(*c));
	bool is_default = !cfg->control_socket || !*cfg->control_socket;
	_cleanup_free_ char *path = is_default ? ctl_default_path(env, cfg->rdzv_id, geteuid())
					       : xstrdup(cfg->control_socket);
	int mode, r;

	if (path[0] != '/') {
		/* Absolute, for the workers' TORCH_WORKER_SERVER_SOCKET and the
		 * status, when it still fits a socket address. */
		_cleanup_free_ char *cwd = get_current_dir_name();
		char *abs = cwd ? xasprintf("%s/%s", cwd, path) : NULL;

		if (abs && strlen(abs) < sizeof(((struct sockaddr_un *)NULL)->sun_path)) {
			free(path);
			path = abs;
		} else {
			free(abs);
		}
	}
	c->base = base;
	c->agent = *agent;
	c->uid = geteuid();
	c->turn_replies = xcalloc(ctl_n_handlers, sizeof(*c->turn_replies));
	c->turn_ev = event_new(base, -1, 0, turn_end_cb, c);
	if (cfg->control_socket_group && *cfg->control_socket_group) {
		r = resolve_group(cfg->control_socket_group, &c->gid, reterr);
		if (r < 0) {
			ctl_free(c);
			return r;
		}
		c->has_group = true;
	}
	mode = cfg->control_socket_mode ? cfg->control_socket_mode : c->has_group ? 0660 : 0600;
	ctl_setup_http(c);
	c->next_live = live_ctls;
	live_ctls = c;

	r = prepare_dir(path, is_default, reterr);
	if (r == 0) {
		r = ctl_listen(c, path, mode, reterr);
	}
	if (r == -EADDRINUSE && is_default) {
		_cleanup_free_ char *alt = alternate_path(path);

		log_warn("control socket: %s; this agent uses %s", *reterr, alt);
		free(*reterr);
		*reterr = NULL;
		r = ctl_listen(c, alt, mode, reterr);
	}
	if (r < 0) {
		ctl_free(c);
		return r;
	}
	if (is_default && !shared_dir_is_systemds(env)) {
		_cleanup_free_ char *copy = xstrdup(c->path);

		remove_stale_sockets(dirname(copy), c->path);
	}
	if (!cfg->no_worker_server) {
		(void)prepare_worker_dir(c);
	}
	*ret = c;
	return 0;
}

const char *
ctl_socket_path(const struct ctl *c)
{
	return c->path;
}

const char *
ctl_worker_dir(const struct ctl *c)
{
	return c->worker_dir;
}

const struct ctl_stats *
ctl_get_stats(const struct ctl *c)
{
	return &c->stats;
}

/* Write what is queued for every client (a `stop` reply) now: the loop does
 * not run again before the sockets close. libevent 2.1 has no call for it
 * (bufferevent_flush is a no-op on socket bufferevents, and
 * evhttp_connection_free_on_completion needs the loop), so write the
 * bufferevent's output ourselves, a few non-blocking tries per connection. */
static void
conns_flush_now(struct ctl *c)
{
	for (size_t fd = 0; fd < c->n_slots; fd++) {
		struct ctl_conn *conn = c->conns[fd];
		struct evbuffer *out;

		if (!conn) {
			continue;
		}
		out = bufferevent_get_output(evhttp_connection_get_bufferevent(conn->evcon));
		/* A socket bufferevent freezes the front of its output for itself. */
		evbuffer_unfreeze(out, 1);
		for (int i = 0; i < 4 && evbuffer_get_length(out) > 0; i++) {
			if (evbuffer_write(out, conn->fd) <= 0) {
				break;
			}
		}
	}
}

void
ctl_free(struct ctl *c)
{
	struct stat st;

	if (!c) {
		return;
	}
	/* End the event streams cleanly (the terminating chunk). */
	while (c->streams) {
		struct ctl_call *call = c->streams;
		struct ctl_conn *conn = call->conn;

		c->streams = call->stream_next;
		c->stats.streams--;
		conn->call = NULL;
		evhttp_send_reply_end(call->req);
		ctl_call_free(call);
	}
	/* Forwarded requests still waiting for a worker: 503, unless what the
	 * worker already sent settles them. */
	for (size_t fd = 0; fd < c->n_slots; fd++) {
		struct ctl_conn *conn = c->conns[fd];
		struct ctl_call *call = conn ? conn->call : NULL;

		if (call && call->cancel == proxy_cancel && ctl_proxy_settle(call->op)) {
			continue; /* its worker already answered or hung up: that reply */
		}
		if (call) {
			struct evbuffer *b = evbuffer_new();

			if (call->cancel) {
				call->cancel(call);
			}
			call->cancel = NULL;
			evbuffer_add_printf(b, "elasticd is exiting");
			ctl_call_reply(call, 503, TEXT_PLAIN, b);
		}
	}
	conns_flush_now(c);
	if (c->http) {
		struct evhttp *http = c->http;

		c->http = NULL; /* close callbacks: no more streams bookkeeping */
		evhttp_free(http);
	}
	for (size_t fd = 0; fd < c->n_slots; fd++) {
		free(c->conns[fd]);
	}
	free(c->conns);
	if (c->events_sub) {
		events_unsubscribe(c->agent.events, c->events_sub);
	}
	fdreserve_free(c->fdres);
	if (c->reap_ev) {
		event_free(c->reap_ev);
	}
	if (c->turn_ev) {
		event_free(c->turn_ev);
	}
	if (c->path && lstat(c->path, &st) == 0 && st.st_dev == c->dev && st.st_ino == c->ino) {
		unlink(c->path);
	}
	if (c->worker_dir) {
		remove_worker_dir(c->worker_dir);
	}
	for (struct ctl **pp = &live_ctls; *pp; pp = &(*pp)->next_live) {
		if (*pp == c) {
			*pp = c->next_live;
			break;
		}
	}
	turn_replies_drop(c);
	free(c->turn_replies);
	free(c->path);
	free(c->worker_dir);
	free(c);
}
