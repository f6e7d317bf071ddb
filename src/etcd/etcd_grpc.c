/* etcd_grpc.c — gRPC's transport: one h2c connection (nghttp2 on a libevent
 * bufferevent) carrying many streams; see etcd_grpc.h.
 *
 * nghttp2 is driven from two loop callbacks only: conn_read (mem_recv) and
 * conn_flush (mem_send, an event made active after every submit), so the
 * public functions only submit and may run inside any callback. A stream is
 * freed when nghttp2 closes it, when the connection fails, or in
 * grpc_conn_free. Wire: grpc/doc/PROTOCOL-HTTP2.md, RFC 9113. */
#include "etcd_grpc.h"

#include <ctype.h>
#include <errno.h>
#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <nghttp2/nghttp2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "log.h"
#include "util.h"

/* Receive windows: a large range answer streams without waiting for a
 * WINDOW_UPDATE per 64 KiB (nghttp2 sends them as the bytes are consumed). */
#define GRPC_STREAM_WINDOW (1 << 20)
#define GRPC_CONN_WINDOW (1 << 24)
/* A watch is idle for hours: TCP keepalive (seconds) finds a member whose
 * host vanished without a FIN (about 60 s), failing the streams. */
#define GRPC_KEEPALIVE_IDLE 30
#define GRPC_KEEPALIVE_INTVL 10
#define GRPC_KEEPALIVE_CNT 3
/* A member that hangs with its TCP connection up (stopped, frozen, its disk
 * stalled) answers nothing, and TCP keepalive never fires: with streams
 * open and nothing read for GRPC_PING_IDLE_USEC, an HTTP/2 PING goes out,
 * and a PING unanswered for GRPC_PING_TIMEOUT_USEC fails the connection
 * (its calls fail over, its watches and keep-alives open elsewhere), well
 * within a lease's TTL of 15 s. Not more often: etcd's gRPC server sends
 * GOAWAY ENHANCE_YOUR_CALM to a client that pings more often than
 * --grpc-keepalive-min-time (5 s by default). */
#define GRPC_PING_IDLE_USEC (5 * USEC_PER_SEC)
#define GRPC_PING_TIMEOUT_USEC (3 * USEC_PER_SEC)

struct grpc_stream {
	struct grpc_conn *c;
	struct grpc_stream *next, *prev;
	int32_t id;
	grpc_data_cb data_cb;
	grpc_close_cb close_cb;
	void *arg;
	struct evbuffer *out; /* body bytes nghttp2 has not taken yet */
	bool end_queued;      /* the caller half-closed: EOF after out */
	bool deferred;        /* the data provider returned DEFERRED */
	bool cancelled;       /* no more callbacks */
	bool closing;         /* close_cb is running */
	bool trailers;        /* a HEADERS frame with END_STREAM arrived */
	int http_status;
	int grpc_status;
	char *grpc_message;
};

struct grpc_conn {
	struct event_base *base;
	struct bufferevent *bev;
	nghttp2_session *h2; /* NULL once the connection failed */
	struct event *flush;
	struct grpc_stream *streams;
	char *authority;
	char *name; /* "host:port", for logs */
	bool broken;
	bool failed;        /* fail the streams at the next flush */
	struct event *ping; /* the liveness timer (GRPC_PING_*) */
	uint64_t last_read; /* now_usec() of the last bytes read */
	uint64_t ping_sent; /* now_usec() of the PING unanswered, 0: none */
};

static void conn_fail(struct grpc_conn *c, const char *why);
static void conn_ping_arm(struct grpc_conn *c, uint64_t usec);

static void
conn_kick(struct grpc_conn *c)
{
	event_active(c->flush, 0, 0);
}

static void
stream_free(struct grpc_stream *s)
{
	struct grpc_conn *c = s->c;

	if (s->prev) {
		s->prev->next = s->next;
	} else {
		c->streams = s->next;
	}
	if (s->next) {
		s->next->prev = s->prev;
	}
	evbuffer_free(s->out);
	free(s->grpc_message);
	free(s);
}

/* ---- nghttp2 callbacks ---------------------------------------------------- */

static struct grpc_stream *
stream_of(nghttp2_session *h2, int32_t id)
{
	return nghttp2_session_get_stream_user_data(h2, id);
}

/* grpc-message is percent-encoded (PROTOCOL-HTTP2.md). */
static char *
percent_decode(const uint8_t *v, size_t len)
{
	char *ret = xmalloc(len + 1);
	size_t n = 0;

	for (size_t i = 0; i < len; i++) {
		unsigned x;

		if (v[i] == '%' && i + 2 < len && isxdigit(v[i + 1]) && isxdigit(v[i + 2]) &&
		    sscanf((const char *)v + i + 1, "%2x", &x) == 1) {
			ret[n++] = (char)x;
			i += 2;
		} else {
			ret[n++] = (char)v[i];
		}
	}
	ret[n] = '\0';
	return ret;
}

/* A non-negative decimal header value; -1 when it is not one. */
static int
header_int(const uint8_t *v, size_t len)
{
	int n = 0;

	if (len == 0 || len > 9) {
		return -1;
	}
	for (size_t i = 0; i < len; i++) {
		if (v[i] < '0' || v[i] > '9') {
			return -1;
		}
		n = n * 10 + (v[i] - '0');
	}
	return n;
}

static int
on_header(nghttp2_session *h2, const nghttp2_frame *frame, const uint8_t *name, size_t namelen,
	  const uint8_t *value, size_t valuelen, uint8_t flags, void *user)
{
	struct grpc_stream *s;

	if (frame->hd.type != NGHTTP2_HEADERS) {
		return 0;
	}
	s = stream_of(h2, frame->hd.stream_id);
	if (!s) {
		return 0;
	}
	if (namelen == 7 && memcmp(name, ":status", 7) == 0) {
		s->http_status = header_int(value, valuelen);
	} else if (namelen == 11 && memcmp(name, "grpc-status", 11) == 0) {
		s->grpc_status = header_int(value, valuelen);
	} else if (namelen == 12 && memcmp(name, "grpc-message", 12) == 0) {
		free(s->grpc_message);
		s->grpc_message = percent_decode(value, valuelen);
	}
	return 0;
}

static int
on_data_chunk(nghttp2_session *h2, uint8_t flags, int32_t id, const uint8_t *data, size_t len,
	      void *user)
{
	struct grpc_stream *s = stream_of(h2, id);

	if (s && !s->cancelled && s->data_cb) {
		s->data_cb(s, data, len, s->arg);
	}
	return 0;
}

static int
on_frame_recv(nghttp2_session *h2, const nghttp2_frame *frame, void *user)
{
	struct grpc_conn *c = user;
	struct grpc_stream *s;

	switch (frame->hd.type) {
	case NGHTTP2_HEADERS:
		s = stream_of(h2, frame->hd.stream_id);
		if (s && (frame->hd.flags & NGHTTP2_FLAG_END_STREAM)) {
			s->trailers = true;
			/* The call is over: a stream we still send on (a watch)
			 * closes now, whatever the server does next. */
			if (!nghttp2_session_get_stream_local_close(h2, frame->hd.stream_id)) {
				nghttp2_submit_rst_stream(h2, NGHTTP2_FLAG_NONE,
							  frame->hd.stream_id, NGHTTP2_NO_ERROR);
			}
		}
		break;
	case NGHTTP2_GOAWAY:
		/* nghttp2 closes the streams above last_stream_id (REFUSED_STREAM);
		 * the others may finish. */
		if (!c->broken) {
			log_debug("etcd grpc: %s sent GOAWAY (error %u)", c->name,
				  frame->goaway.error_code);
		}
		c->broken = true;
		break;
	case NGHTTP2_PING:
		if (frame->hd.flags & NGHTTP2_FLAG_ACK) {
			c->ping_sent = 0;
		}
		break;
	}
	return 0;
}

/* The close_cb arguments for a stream nghttp2 closed with error_code. */
static int
stream_close_err(const struct grpc_stream *s, uint32_t error_code)
{
	if (s->http_status != 200 && s->http_status != -1) {
		return -EPROTO;
	}
	if (s->trailers && s->http_status == 200) {
		return 0;
	}
	if (error_code == NGHTTP2_REFUSED_STREAM || (s->http_status == -1 && s->c->broken)) {
		return -ECONNRESET;
	}
	return -EPROTO;
}

static int
on_stream_close(nghttp2_session *h2, int32_t id, uint32_t error_code, void *user)
{
	struct grpc_stream *s = stream_of(h2, id);
	int err;

	if (!s) {
		return 0;
	}
	nghttp2_session_set_stream_user_data(h2, id, NULL);
	if (!s->cancelled && s->close_cb) {
		err = stream_close_err(s, error_code);
		s->closing = true;
		s->close_cb(s, err, err == 0 ? s->grpc_status : -1,
			    err == 0 ? s->grpc_message : NULL, s->arg);
	}
	stream_free(s);
	return 0;
}

/* The request body: what grpc_stream_send queued, EOF after end_stream. */
static ssize_t
body_read(nghttp2_session *h2, int32_t id, uint8_t *buf, size_t length, uint32_t *flags,
	  nghttp2_data_source *source, void *user)
{
	struct grpc_stream *s = source->ptr;
	int n = evbuffer_remove(s->out, buf, length);

	if (n < 0) {
		return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE;
	}
	if (evbuffer_get_length(s->out) == 0) {
		if (s->end_queued) {
			*flags |= NGHTTP2_DATA_FLAG_EOF;
		} else if (n == 0) {
			s->deferred = true;
			return NGHTTP2_ERR_DEFERRED;
		}
	}
	return n;
}

/* ---- the connection ------------------------------------------------------- */

/* Every stream still open gets close_cb(-ECONNRESET), then is freed. Runs
 * from the loop, outside nghttp2. */
static void
conn_fail_streams(struct grpc_conn *c)
{
	struct grpc_stream *s;

	while ((s = c->streams)) {
		if (!s->cancelled && s->close_cb) {
			s->closing = true;
			s->close_cb(s, -ECONNRESET, -1, NULL, s->arg);
		}
		stream_free(s);
	}
}

/* Mark c broken and drop the socket and the session; the streams are
 * failed from the flush event. */
static void
conn_fail(struct grpc_conn *c, const char *why)
{
	if (!c->failed) {
		log_debug("etcd grpc: connection to %s closed: %s", c->name, why);
	}
	c->broken = true;
	c->failed = true;
	if (c->h2) {
		nghttp2_session_del(c->h2);
		c->h2 = NULL;
	}
	if (c->bev) {
		bufferevent_free(c->bev);
		c->bev = NULL;
	}
	conn_kick(c);
}

/* nghttp2 ended the session (a GOAWAY either way, or a connection error it
 * found): no new stream; once its last frames are out, the connection
 * fails, and the streams with it (grpc-go servers may keep the socket open
 * after our GOAWAY). */
static void
conn_done_check(struct grpc_conn *c)
{
	if (c->failed || nghttp2_session_want_read(c->h2) || nghttp2_session_want_write(c->h2)) {
		return;
	}
	c->broken = true;
	if (evbuffer_get_length(bufferevent_get_output(c->bev)) == 0) {
		conn_fail(c, "session done");
	}
}

static void
conn_flush(evutil_socket_t fd, short what, void *arg)
{
	struct grpc_conn *c = arg;

	if (c->failed) {
		conn_fail_streams(c);
		return;
	}
	for (;;) {
		const uint8_t *data;
		ssize_t n = nghttp2_session_mem_send(c->h2, &data);

		if (n < 0) {
			conn_fail(c, nghttp2_strerror((int)n));
			return;
		}
		if (n == 0) {
			break;
		}
		bufferevent_write(c->bev, data, (size_t)n);
	}
	conn_done_check(c);
}

/* The write callback: the output drained. */
static void
conn_write(struct bufferevent *bev, void *arg)
{
	conn_done_check(arg);
}

static void
conn_read(struct bufferevent *bev, void *arg)
{
	struct grpc_conn *c = arg;
	struct evbuffer *in = bufferevent_get_input(bev);
	size_t len;

	while ((len = evbuffer_get_contiguous_space(in)) > 0) {
		const uint8_t *data = evbuffer_pullup(in, (ssize_t)len);
		ssize_t n = nghttp2_session_mem_recv(c->h2, data, len);

		if (n < 0) {
			conn_fail(c, nghttp2_strerror((int)n));
			return;
		}
		evbuffer_drain(in, (size_t)n);
	}
	c->last_read = now_usec();
	conn_kick(c);
}

/* The liveness timer: with streams open, a PING after GRPC_PING_IDLE_USEC
 * of silence; the connection fails when it is not answered in time. */
static void
conn_ping_cb(evutil_socket_t fd, short what, void *arg)
{
	struct grpc_conn *c = arg;
	uint64_t now = now_usec(), idle = now - c->last_read;

	if (c->failed) {
		return;
	}
	if (c->ping_sent) {
		if (now - c->ping_sent >= GRPC_PING_TIMEOUT_USEC) {
			conn_fail(c, "no answer to a PING");
			return;
		}
		conn_ping_arm(c, GRPC_PING_TIMEOUT_USEC - (now - c->ping_sent));
		return;
	}
	if (!c->streams || idle < GRPC_PING_IDLE_USEC) {
		conn_ping_arm(c, c->streams ? GRPC_PING_IDLE_USEC - idle : GRPC_PING_IDLE_USEC);
		return;
	}
	if (nghttp2_submit_ping(c->h2, NGHTTP2_FLAG_NONE, NULL) != 0) {
		conn_fail(c, "cannot send a PING");
		return;
	}
	c->ping_sent = now;
	conn_kick(c);
	conn_ping_arm(c, GRPC_PING_TIMEOUT_USEC);
}

static void
conn_ping_arm(struct grpc_conn *c, uint64_t usec)
{
	struct timeval tv = {(time_t)(usec / USEC_PER_SEC), (suseconds_t)(usec % USEC_PER_SEC)};

	evtimer_add(c->ping, &tv);
}

static void
conn_event(struct bufferevent *bev, short what, void *arg)
{
	struct grpc_conn *c = arg;
	char why[128];

	if (what & BEV_EVENT_CONNECTED) {
		int fd = bufferevent_getfd(bev), one = 1, idle = GRPC_KEEPALIVE_IDLE,
		    intvl = GRPC_KEEPALIVE_INTVL, cnt = GRPC_KEEPALIVE_CNT;

		setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
		setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &one, sizeof(one));
		setsockopt(fd, IPPROTO_TCP, TCP_KEEPIDLE, &idle, sizeof(idle));
		setsockopt(fd, IPPROTO_TCP, TCP_KEEPINTVL, &intvl, sizeof(intvl));
		setsockopt(fd, IPPROTO_TCP, TCP_KEEPCNT, &cnt, sizeof(cnt));
		return;
	}
	if (what & BEV_EVENT_EOF) {
		conn_fail(c, "end of stream");
	} else {
		int e = EVUTIL_SOCKET_ERROR();

		snprintf(why, sizeof(why), "%s", evutil_socket_error_to_string(e));
		conn_fail(c, why);
	}
}

static nghttp2_session *
session_new(struct grpc_conn *c)
{
	nghttp2_session_callbacks *cbs;
	nghttp2_session *h2 = NULL;
	nghttp2_settings_entry iv[] = {
		{NGHTTP2_SETTINGS_ENABLE_PUSH, 0},
		{NGHTTP2_SETTINGS_INITIAL_WINDOW_SIZE, GRPC_STREAM_WINDOW},
	};

	if (nghttp2_session_callbacks_new(&cbs) != 0) {
		return NULL;
	}
	nghttp2_session_callbacks_set_on_header_callback(cbs, on_header);
	nghttp2_session_callbacks_set_on_data_chunk_recv_callback(cbs, on_data_chunk);
	nghttp2_session_callbacks_set_on_frame_recv_callback(cbs, on_frame_recv);
	nghttp2_session_callbacks_set_on_stream_close_callback(cbs, on_stream_close);
	if (nghttp2_session_client_new(&h2, cbs, c) != 0) {
		h2 = NULL;
	}
	nghttp2_session_callbacks_del(cbs);
	if (h2 && (nghttp2_submit_settings(h2, NGHTTP2_FLAG_NONE, iv, 2) != 0 ||
		   nghttp2_session_set_local_window_size(h2, NGHTTP2_FLAG_NONE, 0,
							 GRPC_CONN_WINDOW) != 0)) {
		nghttp2_session_del(h2);
		h2 = NULL;
	}
	return h2;
}

/* Resolve host (numeric: no lookup; "localhost": 127.0.0.1) and connect;
 * a failure marks c failed. */
static void
conn_connect(struct grpc_conn *c, const char *host, int port)
{
	struct addrinfo hints = {.ai_socktype = SOCK_STREAM}, *ai = NULL;
	char service[16];
	int fd, r;

	if (strcmp(host, "localhost") == 0) {
		host = "127.0.0.1";
	}
	snprintf(service, sizeof(service), "%d", port);
	r = getaddrinfo(host, service, &hints, &ai);
	if (r != 0) {
		conn_fail(c, gai_strerror(r));
		return;
	}
	/* Our own socket: libevent's would leak into the workers (no CLOEXEC). */
	fd = socket(ai->ai_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	c->bev = fd < 0 ? NULL : bufferevent_socket_new(c->base, fd, BEV_OPT_CLOSE_ON_FREE);
	if (!c->bev) {
		if (fd >= 0) {
			close(fd);
		}
		conn_fail(c, "no socket");
		freeaddrinfo(ai);
		return;
	}
	bufferevent_setcb(c->bev, conn_read, conn_write, conn_event, c);
	bufferevent_enable(c->bev, EV_READ | EV_WRITE);
	r = bufferevent_socket_connect(c->bev, ai->ai_addr, (int)ai->ai_addrlen);
	freeaddrinfo(ai);
	if (r < 0) {
		conn_fail(c, "connect failed");
	}
}

struct grpc_conn *
grpc_conn_new(struct event_base *base, const char *host, int port, const char *authority)
{
	struct grpc_conn *c = calloc(1, sizeof(*c));

	if (!c) {
		return NULL;
	}
	c->base = base;
	c->authority = strdup(authority);
	c->name = xasprintf("%s:%d", host, port);
	c->flush = event_new(base, -1, 0, conn_flush, c);
	c->ping = evtimer_new(base, conn_ping_cb, c);
	c->h2 = c->flush && c->ping && c->authority ? session_new(c) : NULL;
	if (!c->h2) {
		grpc_conn_free(c);
		return NULL;
	}
	c->last_read = now_usec();
	conn_ping_arm(c, GRPC_PING_IDLE_USEC);
	conn_connect(c, host, port);
	conn_kick(c);
	return c;
}

bool
grpc_conn_broken(const struct grpc_conn *c)
{
	return c->broken;
}

/* ---- streams -------------------------------------------------------------- */

#define NV(n, v)                                                                                   \
	{                                                                                          \
		(uint8_t *)(n), (uint8_t *)(v), strlen(n), strlen(v), NGHTTP2_NV_FLAG_NONE         \
	}

struct grpc_stream *
grpc_stream_open(struct grpc_conn *c, const char *method, grpc_data_cb data_cb,
		 grpc_close_cb close_cb, void *arg)
{
	struct grpc_stream *s;
	nghttp2_data_provider body;
	const nghttp2_nv hdrs[] = {
		NV(":method", "POST"),
		NV(":scheme", "http"),
		NV(":path", method),
		NV(":authority", c->authority),
		NV("content-type", "application/grpc"),
		NV("te", "trailers"),
	};

	if (c->broken || !c->h2) {
		return NULL;
	}
	s = xcalloc(1, sizeof(*s));
	s->c = c;
	s->data_cb = data_cb;
	s->close_cb = close_cb;
	s->arg = arg;
	s->out = evbuffer_new();
	s->http_status = -1;
	s->grpc_status = -1;
	body.source.ptr = s;
	body.read_callback = body_read;
	s->id = s->out ? nghttp2_submit_request(c->h2, NULL, hdrs, sizeof(hdrs) / sizeof(hdrs[0]),
						&body, s)
		       : NGHTTP2_ERR_NOMEM;
	if (s->id < 0) {
		log_debug("etcd grpc: %s: %s", method, nghttp2_strerror(s->id));
		if (s->out) {
			evbuffer_free(s->out);
		}
		free(s);
		return NULL;
	}
	s->next = c->streams;
	if (c->streams) {
		c->streams->prev = s;
	}
	c->streams = s;
	conn_kick(c);
	return s;
}

int
grpc_stream_send(struct grpc_stream *s, const void *data, size_t len, bool end_stream)
{
	struct grpc_conn *c = s->c;

	if (s->end_queued) {
		return -EPIPE;
	}
	if (c->broken || !c->h2) {
		return -ECONNRESET;
	}
	if (evbuffer_add(s->out, data, len) != 0) {
		/* Out of memory, as xmalloc: a lost message would corrupt the stream. */
		fprintf(stderr, "elasticd: out of memory queueing %zu bytes\n", len);
		abort();
	}
	s->end_queued = end_stream;
	if (s->deferred) {
		s->deferred = false;
		nghttp2_session_resume_data(c->h2, s->id);
	}
	conn_kick(c);
	return 0;
}

void
grpc_stream_cancel(struct grpc_stream *s)
{
	struct grpc_conn *c = s->c;

	if (s->cancelled || s->closing) {
		return;
	}
	s->cancelled = true;
	if (c->h2) {
		nghttp2_submit_rst_stream(c->h2, NGHTTP2_FLAG_NONE, s->id, NGHTTP2_CANCEL);
		conn_kick(c);
	}
}

void
grpc_conn_free(struct grpc_conn *c)
{
	if (!c) {
		return;
	}
	if (c->h2) {
		nghttp2_session_del(c->h2);
	}
	if (c->bev) {
		bufferevent_free(c->bev);
	}
	while (c->streams) {
		stream_free(c->streams);
	}
	if (c->flush) {
		event_free(c->flush);
	}
	if (c->ping) {
		event_free(c->ping);
	}
	free(c->authority);
	free(c->name);
	free(c);
}
