/* tcpstore_guard.c — what peers may make the TCPStore server hold: the
 * descriptor reserve at accept, one budget for unfinished frames across
 * connections, and memory given back once a connection's buffers are gone
 * (see tcpstore_server_int.h). */
#include "tcpstore_server_int.h"

#include <errno.h>
#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>
#include <inttypes.h>
#include <malloc.h>
#include <netdb.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "fdreserve.h"

/* At most one "closed the connection" line per this many seconds. */
#define BUDGET_TELL_S 10
/* Give memory back once closed connections had buffered this much. */
#define TRIM_MIN ((size_t)1 << 20)
/* After the reaper: libevent frees a bufferevent's buffers from its own
 * finalizers, a loop turn or so later. */
#define TRIM_DELAY_MS 50

static void notice(struct tcpstore_server *s, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

static void
notice(struct tcpstore_server *s, const char *fmt, ...)
{
	_cleanup_free_ char *msg = NULL;
	va_list ap;

	if (!s->notice_cb) {
		return;
	}
	va_start(ap, fmt);
	msg = xvasprintf(fmt, ap);
	va_end(ap);
	s->notice_cb(msg, s->notice_arg);
}

void
tcpstore_server_set_notice_cb(struct tcpstore_server *s, tcpstore_server_notice_fn cb, void *arg)
{
	s->notice_cb = cb;
	s->notice_arg = arg;
}

static void
paused_cb(const char *why, uint64_t untold, void *arg)
{
	struct tcpstore_server *s = arg;

	if (untold) {
		notice(s,
		       "store port %d: %s; not accepting connections for %d s (%" PRIu64
		       " more pauses since the last line)",
		       s->port, why, FDRESERVE_PAUSE_S, untold);
	} else {
		notice(s, "store port %d: %s; not accepting connections for %d s", s->port, why,
		       FDRESERVE_PAUSE_S);
	}
}

static void
trim_cb(evutil_socket_t fd, short what, void *arg)
{
	struct tcpstore_server *s = arg;

	s->released = 0;
#ifdef __GLIBC__
	/* glibc keeps freed heap pages (and raises its mmap threshold after an
	 * 8 MiB buffer went): without this, an attack's RSS stays for good. */
	malloc_trim(0);
#endif
}

void
tcpstore_guard_init(struct tcpstore_server *s)
{
	s->fdres = fdreserve_new(s->base, s->listener, paused_cb, s);
	s->trim_ev = evtimer_new(s->base, trim_cb, s);
	if (!s->trim_ev) {
		abort();
	}
	s->budget_tell.interval_usec = BUDGET_TELL_S * USEC_PER_SEC;
}

bool
tcpstore_guard_admit(struct tcpstore_server *s, int fd)
{
	bool keep = fdreserve_admit(s->fdres, fd);

	s->stats.accept_pauses = fdreserve_pauses(s->fdres);
	if (!keep || s->nconns >= s->lim.max_connections) {
		s->stats.refused++;
		close(fd);
		return false;
	}
	return true;
}

void
tcpstore_guard_accept_failed(struct tcpstore_server *s, int err)
{
	fdreserve_accept_failed(s->fdres, err);
	s->stats.accept_pauses = fdreserve_pauses(s->fdres);
}

void
tcpstore_guard_name_peer(struct conn *c, const struct sockaddr *sa, int salen)
{
	struct sockaddr_in v4 = {.sin_family = AF_INET};
	const struct sockaddr_in6 *v6 = (const struct sockaddr_in6 *)sa;
	char host[INET6_ADDRSTRLEN], port[8];

	if (sa->sa_family == AF_INET6 && IN6_IS_ADDR_V4MAPPED(&v6->sin6_addr)) {
		/* A v4 client of the dual-stack listener: as it knows itself. */
		v4.sin_port = v6->sin6_port;
		memcpy(&v4.sin_addr, &v6->sin6_addr.s6_addr[12], 4);
		sa = (const struct sockaddr *)&v4;
		salen = sizeof(v4);
	}
	if (getnameinfo(sa, (socklen_t)salen, host, sizeof(host), port, sizeof(port),
			NI_NUMERICHOST | NI_NUMERICSERV) != 0) {
		snprintf(c->peer, sizeof(c->peer), "an unknown peer");
		return;
	}
	snprintf(c->peer, sizeof(c->peer), sa->sa_family == AF_INET6 ? "[%s]:%s" : "%s:%s", host,
		 port);
}

/* The connection holding the most unfinished bytes, the oldest of equals. */
static struct conn *
largest_holder(struct tcpstore_server *s)
{
	struct conn *c, *best = NULL;

	LIST_FOREACH(c, &s->conns, link)
	{
		if (c->held && (!best || c->held > best->held ||
				(c->held == best->held && c->seq < best->seq))) {
			best = c;
		}
	}
	return best;
}

/* "closed the connection from <peer>", at a bounded rate. */
static void
tell_closed(struct tcpstore_server *s, const struct conn *v)
{
	_cleanup_free_ char *more = NULL;
	uint64_t untold;

	if (!ratelimit_pass(&s->budget_tell, now_usec(), &untold)) {
		return;
	}
	if (untold) {
		more = xasprintf(" (%" PRIu64 " more closed since the last line)", untold);
	}
	notice(s,
	       "store port %d: closed the connection from %s: %.1f MiB of unfinished frames, "
	       "and all connections together may hold %.1f MiB%s",
	       s->port, v->peer, (double)v->held / (1 << 20),
	       (double)s->lim.max_partial_bytes / (1 << 20), more ? more : "");
}

void
tcpstore_guard_account(struct conn *c, size_t held)
{
	struct tcpstore_server *s = c->s;
	struct conn *v;

	s->partial_bytes = s->partial_bytes - c->held + held;
	c->held = held;
	while (s->lim.max_partial_bytes && s->partial_bytes > s->lim.max_partial_bytes &&
	       (v = largest_holder(s))) {
		tell_closed(s, v);
		s->stats.over_budget++;
		tcpstore_conn_close(v, true);
	}
}

void
tcpstore_guard_closing(struct conn *c, size_t buffered)
{
	c->s->partial_bytes -= c->held;
	c->held = 0;
	c->s->released += buffered;
}

void
tcpstore_guard_reaped(struct tcpstore_server *s)
{
	struct timeval tv = {0, TRIM_DELAY_MS * 1000};

	if (s->released >= TRIM_MIN && !evtimer_pending(s->trim_ev, NULL)) {
		evtimer_add(s->trim_ev, &tv);
	}
}

void
tcpstore_guard_release(struct tcpstore_server *s)
{
	fdreserve_free(s->fdres);
	if (s->trim_ev) {
		event_free(s->trim_ev);
	}
}
