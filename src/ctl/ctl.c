#include "ctl.h"

#include <dirent.h>
#include <errno.h>
#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>
#include <event2/http.h>
#include <event2/listener.h>
#include <grp.h>
#include <inttypes.h>
#include <libgen.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "config.h"
#include "ctl_handlers.h"
#include "ctl_internal.h"
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

/* What is at path before we bind it: nothing, or a stale socket, which is
 * removed; anything else (a file, a live socket) is refused with *reterr. */
static int
replace_stale(const char *path, char **reterr)
{
	struct stat st;
	int r;

	if (lstat(path, &st) < 0) {
		return 0;
	}
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
		*reterr = xasprintf("cannot remove the stale socket %s: %s", path, strerror(-r));
		return r;
	}
	log_info("control socket: replaced the stale socket %s (its agent is gone)", path);
	return 0;
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
	r = replace_stale(path, reterr);
	if (r < 0) {
		return r;
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
	evhttp_set_gencb(c->http, ctl_request_cb, c);
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
	c->turn_ev = event_new(base, -1, 0, ctl_turn_end_cb, c);
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

		if (call && call->cancel == ctl_call_proxy_cancel && ctl_proxy_settle(call->op)) {
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
	ctl_turn_replies_drop(c);
	free(c->turn_replies);
	free(c->path);
	free(c->worker_dir);
	free(c);
}
