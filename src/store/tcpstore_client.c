/* tcpstore_client.c — the asynchronous TCPStore client (see the header). */
#include "tcpstore_client.h"

#include <arpa/inet.h>
#include <errno.h>
#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/queue.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <unistd.h>

#include "tcpstore_listen.h"
#include "util.h"

struct creq {
	TAILQ_ENTRY(creq) link;
	enum tcpstore_cmd cmd;
	size_t n; /* keys of a MULTI_GET */
	uint8_t *frame;
	size_t len;
	uint64_t timeout_usec;
	tcpstore_reply_fn fn;
	void *arg;
	bool internal;     /* handshake PING */
	bool background;   /* a WAIT any other request may interrupt (mux) */
	uint64_t deadline; /* a WAIT's timeout, absolute, set at its first send */
	int err;           /* completion status of an entry on the done list */
	struct creq *then; /* sent next when this one succeeds (a blocking pop) */
};

TAILQ_HEAD(creq_list, creq);

/* A v2 server answers the handshake's PING at once: a peer that accepts the
 * connection and stays silent this long is asked again, and after this many
 * silent handshakes in a row it is not a TCPStore. */
#define HANDSHAKE_TIMEOUT_SEC 5
#define HANDSHAKE_SILENT_MAX 3

enum client_state {
	CLIENT_IDLE,
	CLIENT_CONNECTING,
	CLIENT_HANDSHAKE,
	CLIENT_UP,
	CLIENT_DEAD,
};

struct tcpstore_client {
	struct event_base *base;
	char *host;
	int port;
	enum tcpstore_dialect dialect;
	struct tcpstore_client_callbacks cb;
	struct tcpstore_limits lim;

	enum client_state state;
	struct bufferevent *bev;
	uint64_t deadline;
	uint64_t backoff;
	int attempt;
	int last_err;
	uint32_t nonce;
	uint8_t answer[32]; /* the first bytes of a failed handshake's reply */
	size_t answer_len;
	int silent;  /* handshakes in a row the peer accepted and left unanswered */
	int unacked; /* handshake timeouts the peer's kernel took none of our bytes */

	struct event *retry;   /* next connect attempt */
	struct event *timeout; /* the in-flight WAIT's timeout */
	struct event *kick;    /* completes requests that have no reply */

	struct creq_list queue; /* not sent yet */
	struct creq_list done;  /* sent, no reply expected: complete from kick */
	struct creq *inflight;
	bool mux; /* one connection for all: WAITs step aside (see the header) */
	bool cancelling;
	int cancel_err; /* what the cancelled WAIT completes with; 0: it steps
			 * aside and is sent again later (mux) */
	bool fired;     /* the WAIT being cancelled completed meanwhile */
	bool bg_go;     /* kick_cb: a background WAIT may go out now */

	int busy;
	bool free_pending;
};

static void
creq_free(struct creq *q)
{
	if (q->then) {
		creq_free(q->then);
	}
	free(q->frame);
	free(q);
}

static void
client_really_free(struct tcpstore_client *c)
{
	struct creq *q;

	if (c->bev) {
		bufferevent_free(c->bev);
	}
	while ((q = TAILQ_FIRST(&c->queue))) {
		TAILQ_REMOVE(&c->queue, q, link);
		creq_free(q);
	}
	while ((q = TAILQ_FIRST(&c->done))) {
		TAILQ_REMOVE(&c->done, q, link);
		creq_free(q);
	}
	if (c->inflight) {
		creq_free(c->inflight);
	}
	event_free(c->retry);
	event_free(c->timeout);
	event_free(c->kick);
	free(c->host);
	free(c);
}

/* Guard around every entry from libevent: the user may free the client from a
 * callback; the free then happens on the way out. */
static void
client_enter(struct tcpstore_client *c)
{
	c->busy++;
}

static bool
client_leave(struct tcpstore_client *c)
{
	if (--c->busy == 0 && c->free_pending) {
		client_really_free(c);
		return false;
	}
	return true;
}

static void
complete(struct tcpstore_client *c, struct creq *q, int err, const struct tcpstore_reply *rep)
{
	struct creq *then = q->then;

	if (then) {
		/* The WAIT of a blocking pop: on success the pop goes out next,
		 * ahead of anything queued after it; else it fails the same way. */
		q->then = NULL;
		creq_free(q);
		if (err < 0) {
			complete(c, then, err, NULL);
		} else {
			TAILQ_INSERT_HEAD(&c->queue, then, link);
		}
		return;
	}
	if (q->fn && !c->free_pending) {
		q->fn(err, err < 0 ? NULL : rep, q->arg);
	}
	creq_free(q);
}

/* Fail everything outstanding with err, then tell the owner. */
static void
client_die(struct tcpstore_client *c, int err)
{
	enum client_state was = c->state;
	struct creq_list all;
	struct creq *q;

	c->state = CLIENT_DEAD;
	if (c->bev) {
		bufferevent_free(c->bev);
		c->bev = NULL;
	}
	evtimer_del(c->timeout);
	TAILQ_INIT(&all);
	if (c->inflight) {
		TAILQ_INSERT_TAIL(&all, c->inflight, link);
		c->inflight = NULL;
	}
	TAILQ_CONCAT(&all, &c->done, link);
	TAILQ_CONCAT(&all, &c->queue, link);
	c->cancelling = false;
	while ((q = TAILQ_FIRST(&all))) {
		TAILQ_REMOVE(&all, q, link);
		complete(c, q, q->internal ? err : (err == -ETIMEDOUT ? -ECONNRESET : err), NULL);
	}
	if (c->free_pending) {
		return;
	}
	if (was == CLIENT_UP) {
		if (c->cb.closed) {
			c->cb.closed(c, err, c->cb.arg);
		}
	} else if (c->cb.connected) {
		c->cb.connected(c, err, c->cb.arg);
	}
}

/* Who goes first on a multiplexed connection: anything but a WAIT, then a
 * WAIT, then a background WAIT. */
static int
creq_priority(const struct creq *q)
{
	return q->cmd != TCPSTORE_CMD_WAIT ? 2 : q->background ? 0 : 1;
}

/* The request to send next: the first queued one, or on a multiplexed
 * connection the first of the highest priority. */
static struct creq *
client_pick(struct tcpstore_client *c)
{
	struct creq *q, *best = TAILQ_FIRST(&c->queue);

	if (!c->mux) {
		return best;
	}
	TAILQ_FOREACH(q, &c->queue, link)
	{
		if (creq_priority(q) > creq_priority(best)) {
			best = q;
		}
	}
	return best;
}

/* A WAIT goes out: arm its timeout (counted from its first send). Returns
 * false when that already passed (it completed with -ETIMEDOUT). */
static bool
wait_arm(struct tcpstore_client *c, struct creq *q)
{
	uint64_t now = now_usec(), left;
	struct timeval tv;

	if (q->timeout_usec == 0) {
		return true;
	}
	if (q->deadline == 0) {
		q->deadline = now + q->timeout_usec;
	}
	if (now >= q->deadline) {
		q->err = -ETIMEDOUT; /* completed from kick, never inside a request call */
		TAILQ_INSERT_TAIL(&c->done, q, link);
		event_active(c->kick, EV_TIMEOUT, 0);
		return false;
	}
	left = q->deadline - now;
	tv.tv_sec = (time_t)(left / USEC_PER_SEC);
	tv.tv_usec = (suseconds_t)(left % USEC_PER_SEC);
	evtimer_add(c->timeout, &tv);
	return true;
}

static void cancel_inflight(struct tcpstore_client *c, int err);

/* Multiplexed: the WAIT in flight steps aside (CANCEL_WAIT, sent again once
 * the connection is free) when something of a higher priority is queued. */
static void
client_preempt(struct tcpstore_client *c)
{
	struct creq *q = c->inflight;

	if (!c->mux || c->state != CLIENT_UP || !q || q->cmd != TCPSTORE_CMD_WAIT ||
	    c->cancelling || TAILQ_EMPTY(&c->queue)) {
		return;
	}
	if (creq_priority(client_pick(c)) > creq_priority(q)) {
		cancel_inflight(c, 0);
	}
}

static void
client_send_next(struct tcpstore_client *c)
{
	while (c->state == CLIENT_UP && !c->inflight && !c->free_pending &&
	       !TAILQ_EMPTY(&c->queue)) {
		struct creq *q = client_pick(c);

		if (c->mux && q->background && !c->bg_go) {
			/* Once the callbacks of this turn of the loop are done: what
			 * they queue goes first, and the WAIT need not step aside. */
			event_active(c->kick, EV_TIMEOUT, 0);
			break;
		}
		TAILQ_REMOVE(&c->queue, q, link);
		if (q->cmd == TCPSTORE_CMD_WAIT && !wait_arm(c, q)) {
			continue;
		}
		tcpstore_bev_write(c->bev, q->frame, q->len);
		if (!tcpstore_cmd_has_reply(q->cmd)) {
			TAILQ_INSERT_TAIL(&c->done, q, link);
			event_active(c->kick, EV_TIMEOUT, 0);
			continue;
		}
		c->inflight = q;
	}
	client_preempt(c);
}

static void
kick_cb(evutil_socket_t fd, short what, void *arg)
{
	struct tcpstore_client *c = arg;
	struct tcpstore_reply none = {0};
	struct creq *q;

	client_enter(c);
	while (!c->free_pending && (q = TAILQ_FIRST(&c->done))) {
		TAILQ_REMOVE(&c->done, q, link);
		complete(c, q, q->err, &none);
	}
	if (!c->free_pending) {
		c->bg_go = true;
		client_send_next(c);
		c->bg_go = false;
	}
	client_leave(c);
}

/* Abandon the in-flight WAIT; it completes with err (< 0), or with err 0
 * steps aside to be sent again (mux, v2 only). Inside client_enter. */
static void
cancel_inflight(struct tcpstore_client *c, int err)
{
	struct tcpstore_buf b = {0};
	struct tcpstore_req req = {.cmd = TCPSTORE_CMD_CANCEL_WAIT};

	evtimer_del(c->timeout);
	if (c->cancelling) {
		if (err < 0) {
			c->cancel_err = err; /* given up on while stepping aside */
		}
		return;
	}
	if (c->dialect == TCPSTORE_DIALECT_V2) {
		/* The server answers 01 (after 00 if the wait completed meanwhile). */
		c->cancelling = true;
		c->cancel_err = err;
		c->fired = false;
		(void)tcpstore_req_encode(&b, c->dialect, &req);
		tcpstore_bev_write(c->bev, b.data, b.len);
		tcpstore_buf_release(&b);
	} else {
		/* 1.13 cannot cancel: a late 00 would desync the stream. */
		struct creq *q = c->inflight;

		c->inflight = NULL;
		complete(c, q, err, NULL);
		if (!c->free_pending) {
			client_die(c, err);
		}
	}
}

static void client_attempt_failed(struct tcpstore_client *c, int err);

/* Drop the handshake's PING (the attempt is over). */
static void
handshake_abandon(struct tcpstore_client *c)
{
	evtimer_del(c->timeout);
	if (c->inflight) {
		creq_free(c->inflight);
		c->inflight = NULL;
	}
}

/* The peer does not speak the protocol: give up for good (no retry, the
 * deadline does not matter), keeping what it said in c->answer. */
static void
handshake_refused(struct tcpstore_client *c)
{
	handshake_abandon(c);
	client_die(c, -EPROTO);
}

/* Whether the peer's kernel has yet to acknowledge our handshake: a store
 * whose listen queue overflowed in a burst of connections drops them until it
 * accepts, and the retransmissions get them in later (an idle program that
 * accepted and does not answer acknowledges them at once). */
static bool
handshake_unacked(const struct tcpstore_client *c)
{
	struct tcp_info ti;
	socklen_t len = sizeof(ti);
	int fd = c->bev ? bufferevent_getfd(c->bev) : -1;

	return fd >= 0 && getsockopt(fd, IPPROTO_TCP, TCP_INFO, &ti, &len) == 0 &&
	       ti.tcpi_unacked > 0;
}

static void
timeout_cb(evutil_socket_t fd, short what, void *arg)
{
	struct tcpstore_client *c = arg;
	uint64_t now = now_usec();

	if (c->state == CLIENT_HANDSHAKE && c->answer_len == 0 && now < c->deadline &&
	    handshake_unacked(c)) {
		/* Keep the connection (another would queue behind it): wait on,
		 * until the deadline. */
		uint64_t left = c->deadline - now;
		struct timeval tv = {HANDSHAKE_TIMEOUT_SEC, 0};

		if (left < (uint64_t)HANDSHAKE_TIMEOUT_SEC * USEC_PER_SEC) {
			tv.tv_sec = (time_t)(left / USEC_PER_SEC);
			tv.tv_usec = (suseconds_t)(left % USEC_PER_SEC);
		}
		c->unacked++;
		evtimer_add(c->timeout, &tv);
		return;
	}
	if (c->state == CLIENT_HANDSHAKE) {
		client_enter(c);
		if (c->answer_len > 0 || ++c->silent >= HANDSHAKE_SILENT_MAX) {
			/* Half an answer, or silence again and again. */
			handshake_refused(c);
		} else {
			/* Maybe a store too busy to answer: try again. */
			handshake_abandon(c);
			client_attempt_failed(c, -ETIMEDOUT);
		}
		client_leave(c);
		return;
	}
	if (!c->inflight || c->state != CLIENT_UP) {
		return;
	}
	client_enter(c);
	cancel_inflight(c, -ETIMEDOUT);
	client_leave(c);
}

/* Cancel the WAITs (only the background ones when bg_only). */
static int
cancel_waits(struct tcpstore_client *c, bool bg_only)
{
	struct creq *q, *next;
	int r = -ENOENT;

	for (q = TAILQ_FIRST(&c->queue); q; q = next) {
		next = TAILQ_NEXT(q, link);
		if (q->cmd == TCPSTORE_CMD_WAIT && (q->background || !bg_only)) {
			TAILQ_REMOVE(&c->queue, q, link);
			q->err = -ECANCELED;
			TAILQ_INSERT_TAIL(&c->done, q, link);
			event_active(c->kick, EV_TIMEOUT, 0);
			r = 0;
		}
	}
	if (c->inflight && c->inflight->cmd == TCPSTORE_CMD_WAIT && c->state == CLIENT_UP &&
	    (c->inflight->background || !bg_only)) {
		client_enter(c);
		cancel_inflight(c, -ECANCELED);
		client_leave(c);
		r = 0;
	}
	return r;
}

int
tcpstore_client_cancel_wait(struct tcpstore_client *c)
{
	return cancel_waits(c, false);
}

int
tcpstore_client_cancel_background(struct tcpstore_client *c)
{
	return cancel_waits(c, true);
}

int
tcpstore_client_set_mux(struct tcpstore_client *c, bool on)
{
	if (on && c->dialect != TCPSTORE_DIALECT_V2) {
		return -EINVAL;
	}
	c->mux = on;
	return 0;
}

static void
client_handshake_done(struct tcpstore_client *c)
{
	c->state = CLIENT_UP;
	if (c->cb.connected) {
		c->cb.connected(c, 0, c->cb.arg);
	}
	if (!c->free_pending) {
		client_send_next(c);
	}
}

/* Handshake bytes in `in`: the PING's echo completes the handshake (true: go
 * on reading); anything else is not a TCPStore; fewer than 4 bytes wait for
 * more or for the timeout. */
static bool
handshake_read(struct tcpstore_client *c, struct evbuffer *in)
{
	const uint8_t *a = c->answer;

	/* Not drained until decided: the first bytes are always at the front. */
	c->answer_len = (size_t)evbuffer_copyout(in, c->answer, sizeof(c->answer));
	if (c->answer_len < 4) {
		return false;
	}
	if (((uint32_t)a[0] | (uint32_t)a[1] << 8 | (uint32_t)a[2] << 16 | (uint32_t)a[3] << 24) !=
	    c->nonce) {
		handshake_refused(c);
		return false;
	}
	evbuffer_drain(in, 4);
	handshake_abandon(c);
	c->answer_len = 0;
	c->silent = 0;
	client_handshake_done(c);
	return true;
}

static void
read_cb(struct bufferevent *bev, void *arg)
{
	struct tcpstore_client *c = arg;
	struct evbuffer *in = bufferevent_get_input(bev);

	client_enter(c);
	while (!c->free_pending && c->state != CLIENT_DEAD) {
		size_t len = evbuffer_get_length(in), used = 0;
		struct tcpstore_reply rep;
		struct creq *q = c->inflight;
		uint8_t *p;
		int r;

		if (len == 0) {
			break;
		}
		if (c->state == CLIENT_HANDSHAKE) {
			if (!handshake_read(c, in)) {
				break;
			}
			continue;
		}
		if (!q) {
			/* Bytes nobody asked for. */
			client_die(c, -EPROTO);
			break;
		}
		p = evbuffer_pullup(in, -1);
		if (c->cancelling) {
			struct tcpstore_reply fired = {.status = TCPSTORE_STOP_WAITING};
			uint8_t status = p[0]; /* the drain may free what p points into */

			evbuffer_drain(in, 1);
			if (status == TCPSTORE_STOP_WAITING) {
				c->fired = true;
				continue;
			}
			c->cancelling = false;
			c->inflight = NULL;
			if (c->cancel_err < 0) {
				complete(c, q, c->cancel_err, NULL);
			} else if (c->fired) {
				complete(c, q, 0, &fired); /* it stepped aside too late */
			} else {
				TAILQ_INSERT_HEAD(&c->queue, q, link);
			}
			client_send_next(c);
			continue;
		}
		r = tcpstore_reply_decode(q->cmd, q->n, p, len, &c->lim, &rep, &used);
		if (r == 0) {
			break;
		}
		if (r < 0) {
			client_die(c, r);
			break;
		}
		c->inflight = NULL;
		evtimer_del(c->timeout);
		complete(c, q, 0, &rep);
		tcpstore_reply_release(&rep);
		if (c->free_pending || c->state == CLIENT_DEAD) {
			break;
		}
		evbuffer_drain(in, used);
		client_send_next(c);
	}
	client_leave(c);
}

static void client_attempt(struct tcpstore_client *c);

static void
retry_cb(evutil_socket_t fd, short what, void *arg)
{
	struct tcpstore_client *c = arg;

	client_enter(c);
	client_attempt(c);
	client_leave(c);
}

/* A connect attempt failed with err: retry before the deadline, else give up. */
static void
client_attempt_failed(struct tcpstore_client *c, int err)
{
	uint64_t now = now_usec();
	uint32_t rnd = 0;
	struct timeval tv;
	uint64_t delay;

	c->last_err = err;
	if (c->bev) {
		bufferevent_free(c->bev);
		c->bev = NULL;
	}
	if (now >= c->deadline) {
		c->state = CLIENT_CONNECTING;
		client_die(c, err);
		return;
	}
	if (getrandom(&rnd, sizeof(rnd), GRND_NONBLOCK) != (ssize_t)sizeof(rnd)) {
		rnd = (uint32_t)now; /* jitter only: the clock will do */
	}
	delay = c->backoff / 2 + (c->backoff ? rnd % c->backoff : 0);
	if (now + delay > c->deadline) {
		delay = c->deadline - now;
	}
	c->backoff = c->backoff * 2 > USEC_PER_SEC ? USEC_PER_SEC : c->backoff * 2;
	tv.tv_sec = (time_t)(delay / USEC_PER_SEC);
	tv.tv_usec = (suseconds_t)(delay % USEC_PER_SEC);
	evtimer_add(c->retry, &tv);
}

static void
event_cb(struct bufferevent *bev, short what, void *arg)
{
	struct tcpstore_client *c = arg;

	client_enter(c);
	if (what & BEV_EVENT_CONNECTED) {
		int one = 1;

		(void)setsockopt(bufferevent_getfd(bev), IPPROTO_TCP, TCP_NODELAY, &one,
				 sizeof(one));
		if (c->dialect == TCPSTORE_DIALECT_V2) {
			struct tcpstore_buf b = {0};
			struct tcpstore_req v = {.cmd = TCPSTORE_CMD_VALIDATE,
						 .u32 = TCPSTORE_VALIDATE_MAGIC};
			struct tcpstore_req ping = {.cmd = TCPSTORE_CMD_PING, .u32 = c->nonce};
			struct creq *q = xcalloc(1, sizeof(*q));

			(void)tcpstore_req_encode(&b, c->dialect, &v);
			(void)tcpstore_req_encode(&b, c->dialect, &ping);
			bufferevent_write(bev, b.data, b.len);
			tcpstore_buf_release(&b);
			q->cmd = TCPSTORE_CMD_PING;
			q->internal = true;
			c->inflight = q;
			c->state = CLIENT_HANDSHAKE;
			{
				/* The PING must come back soon. */
				struct timeval tv = {HANDSHAKE_TIMEOUT_SEC, 0};

				evtimer_add(c->timeout, &tv);
			}
		} else {
			client_handshake_done(c);
		}
	} else if (what & (BEV_EVENT_EOF | BEV_EVENT_ERROR)) {
		int err = EVUTIL_SOCKET_ERROR();

		err = (what & BEV_EVENT_EOF) || err == 0 ? -ECONNRESET : -err;
		if (c->state == CLIENT_CONNECTING) {
			client_attempt_failed(c, err);
		} else if (c->state == CLIENT_HANDSHAKE && c->answer_len > 0) {
			/* Said something that is not the echo, and hung up. */
			handshake_refused(c);
		} else if (c->state == CLIENT_HANDSHAKE) {
			/* Closed without a word (a full server, a 1.13 store): retry. */
			c->silent = 0;
			handshake_abandon(c);
			client_attempt_failed(c, err);
		} else {
			client_die(c, err);
		}
	}
	client_leave(c);
}

static void
client_attempt(struct tcpstore_client *c)
{
	struct addrinfo hints = {.ai_socktype = SOCK_STREAM, .ai_flags = AI_NUMERICSERV};
	struct addrinfo *res = NULL, *ai;
	char port[16];
	int n = 0, i, rc;

	c->state = CLIENT_CONNECTING;
	c->answer_len = 0;
	c->unacked = 0;
	snprintf(port, sizeof(port), "%d", c->port);
	rc = getaddrinfo(c->host, port, &hints, &res);
	if (rc != 0) {
		client_attempt_failed(c, -EHOSTUNREACH);
		return;
	}
	for (ai = res; ai; ai = ai->ai_next) {
		n++;
	}
	/* Cycle through the addresses of a name, one per attempt. */
	for (ai = res, i = c->attempt++ % n; i > 0; i--) {
		ai = ai->ai_next;
	}
	c->bev = bufferevent_socket_new(c->base, -1, BEV_OPT_CLOSE_ON_FREE);
	bufferevent_setcb(c->bev, read_cb, NULL, event_cb, c);
	bufferevent_enable(c->bev, EV_READ | EV_WRITE);
	if (bufferevent_socket_connect(c->bev, ai->ai_addr, (int)ai->ai_addrlen) < 0) {
		int err = errno ? -errno : -ECONNREFUSED;

		freeaddrinfo(res);
		client_attempt_failed(c, err);
		return;
	}
	freeaddrinfo(res);
	if (c->bev) {
		/* libevent's socket is not CLOEXEC: workers must not inherit it. */
		int fd = bufferevent_getfd(c->bev);

		if (fd >= 0) {
			evutil_make_socket_closeonexec(fd);
		}
	}
}

struct tcpstore_client *
tcpstore_client_new(struct event_base *base, const char *host, int port, enum tcpstore_dialect d,
		    const struct tcpstore_client_callbacks *cb)
{
	struct tcpstore_client *c = xcalloc(1, sizeof(*c));

	c->base = base;
	c->host = xstrdup(host);
	c->port = port;
	c->dialect = d;
	if (cb) {
		c->cb = *cb;
	}
	tcpstore_limits_default(&c->lim);
	c->lim.max_value = 256u * 1024u * 1024u;
	c->nonce = (uint32_t)getpid();
	c->retry = evtimer_new(base, retry_cb, c);
	c->timeout = evtimer_new(base, timeout_cb, c);
	c->kick = event_new(base, -1, 0, kick_cb, c);
	TAILQ_INIT(&c->queue);
	TAILQ_INIT(&c->done);
	return c;
}

int
tcpstore_client_connect(struct tcpstore_client *c, uint64_t deadline_usec)
{
	if (c->state != CLIENT_IDLE && c->state != CLIENT_DEAD) {
		return -EALREADY;
	}
	c->deadline = deadline_usec;
	c->backoff = 20 * USEC_PER_MSEC;
	client_enter(c);
	client_attempt(c);
	client_leave(c);
	return 0;
}

/* req encoded for c, in *ret; or -errno when c's dialect lacks it. */
static int
creq_new(struct tcpstore_client *c, const struct tcpstore_req *req, uint64_t timeout_usec,
	 tcpstore_reply_fn fn, void *arg, struct creq **ret)
{
	struct tcpstore_buf b = {0};
	struct creq *q;
	int r = tcpstore_req_encode(&b, c->dialect, req);

	if (r < 0) {
		tcpstore_buf_release(&b);
		return r;
	}
	q = xcalloc(1, sizeof(*q));
	q->cmd = req->cmd;
	q->n = req->n;
	q->frame = b.data;
	q->len = b.len;
	q->timeout_usec = timeout_usec;
	q->fn = fn;
	q->arg = arg;
	*ret = q;
	return 0;
}

/* Queue q and send what can go. */
static void
client_push(struct tcpstore_client *c, struct creq *q)
{
	TAILQ_INSERT_TAIL(&c->queue, q, link);
	client_enter(c);
	client_send_next(c);
	client_leave(c);
}

/* Queue req (a background WAIT when background) and send what can go. */
static int
client_enqueue(struct tcpstore_client *c, const struct tcpstore_req *req, uint64_t timeout_usec,
	       bool background, tcpstore_reply_fn fn, void *arg)
{
	struct creq *q;
	int r;

	if (c->state == CLIENT_DEAD || c->free_pending) {
		return -ENOTCONN;
	}
	r = creq_new(c, req, timeout_usec, fn, arg, &q);
	if (r < 0) {
		return r;
	}
	q->background = background;
	client_push(c, q);
	return 0;
}

int
tcpstore_client_request(struct tcpstore_client *c, const struct tcpstore_req *req,
			uint64_t timeout_usec, tcpstore_reply_fn fn, void *arg)
{
	return client_enqueue(c, req, timeout_usec, false, fn, arg);
}

static struct tcpstore_bytes
str_bytes(const char *s)
{
	struct tcpstore_bytes b = {(const uint8_t *)s, strlen(s)};

	return b;
}

static int
client_keys(struct tcpstore_client *c, enum tcpstore_cmd cmd, const char *const *keys, size_t n,
	    uint64_t timeout_usec, bool background, tcpstore_reply_fn fn, void *arg)
{
	struct tcpstore_bytes *k = n ? xcalloc(n, sizeof(*k)) : NULL;
	struct tcpstore_req req = {.cmd = cmd, .n = n, .keys = k};
	int r;

	for (size_t i = 0; i < n; i++) {
		k[i] = str_bytes(keys[i]);
	}
	r = client_enqueue(c, &req, timeout_usec, background, fn, arg);
	free(k);
	return r;
}

int
tcpstore_client_keys(struct tcpstore_client *c, enum tcpstore_cmd cmd, const char *const *keys,
		     size_t n, uint64_t timeout_usec, tcpstore_reply_fn fn, void *arg)
{
	return client_keys(c, cmd, keys, n, timeout_usec, false, fn, arg);
}

int
tcpstore_client_wait_background(struct tcpstore_client *c, const char *const *keys, size_t n,
				tcpstore_reply_fn fn, void *arg)
{
	return client_keys(c, TCPSTORE_CMD_WAIT, keys, n, 0, true, fn, arg);
}

int
tcpstore_client_queue_pop(struct tcpstore_client *c, const char *key, bool block,
			  uint64_t timeout_usec, tcpstore_reply_fn fn, void *arg)
{
	struct tcpstore_bytes k = str_bytes(key);
	struct tcpstore_req pop = {.cmd = TCPSTORE_CMD_QUEUE_POP, .key = k};
	struct tcpstore_req wait = {.cmd = TCPSTORE_CMD_WAIT, .n = 1, .keys = &k};
	struct creq *q, *w;
	int r;

	if (!block) {
		return tcpstore_client_request(c, &pop, 0, fn, arg);
	}
	if (c->state == CLIENT_DEAD || c->free_pending) {
		return -ENOTCONN;
	}
	/* torch's queuePop(key, block=true): doWait(key), then QUEUE_POP. */
	r = creq_new(c, &pop, 0, fn, arg, &q);
	if (r < 0) {
		return r;
	}
	(void)creq_new(c, &wait, timeout_usec, NULL, NULL, &w);
	w->then = q;
	client_push(c, w);
	return 0;
}

size_t
tcpstore_client_pending(const struct tcpstore_client *c)
{
	size_t n = c->inflight ? 1 : 0;
	struct creq *q;

	TAILQ_FOREACH(q, &c->queue, link)
	{
		n++;
	}
	return n;
}

int
tcpstore_client_local_addr(const struct tcpstore_client *c, char *buf, size_t size)
{
	struct sockaddr_storage ss;
	socklen_t len = sizeof(ss);
	int fd;

	if (!c->bev || (fd = bufferevent_getfd(c->bev)) < 0 ||
	    getsockname(fd, (struct sockaddr *)&ss, &len) < 0) {
		return -ENOTCONN;
	}
	if (ss.ss_family == AF_INET6) {
		struct sockaddr_in6 *s6 = (struct sockaddr_in6 *)&ss;

		if (IN6_IS_ADDR_V4MAPPED(&s6->sin6_addr)) {
			inet_ntop(AF_INET, &s6->sin6_addr.s6_addr[12], buf, (socklen_t)size);
		} else {
			inet_ntop(AF_INET6, &s6->sin6_addr, buf, (socklen_t)size);
		}
	} else {
		inet_ntop(AF_INET, &((struct sockaddr_in *)&ss)->sin_addr, buf, (socklen_t)size);
	}
	return 0;
}

void
tcpstore_client_free(struct tcpstore_client *c)
{
	if (!c) {
		return;
	}
	if (c->busy > 0) {
		c->free_pending = true;
		if (c->bev) {
			bufferevent_disable(c->bev, EV_READ | EV_WRITE);
		}
		evtimer_del(c->retry);
		evtimer_del(c->timeout);
		return;
	}
	client_really_free(c);
}

char *
tcpstore_client_handshake_trouble(const struct tcpstore_client *c)
{
	char *said, *msg;

	if (c->answer_len > 0) {
		said = bytes_printable(c->answer, c->answer_len);
		msg = xasprintf("it answered the TCPStore handshake with \"%s\"%s", said,
				c->answer_len == sizeof(c->answer) ? "..." : "");
		free(said);
		return msg;
	}
	if (c->silent > 0 && c->unacked == 0) {
		/* (Bytes never acknowledged: a store too busy, not another program.) */
		return xasprintf("it accepted the connection but answered nothing to the TCPStore "
				 "handshake in %d s",
				 c->silent * HANDSHAKE_TIMEOUT_SEC);
	}
	return NULL;
}
