#include "ctl_proxy.h"

#include <errno.h>
#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "util.h"
#include "version.h"

/* ---- the response parser (pure) ------------------------------------------ */

/* The line starting at buf[off] (without "\r\n" or "\n"): its length in
 * *ret_len and the offset after its end; 0 when no line end is there yet. */
static size_t
next_line(const char *buf, size_t len, size_t off, size_t *ret_len)
{
	const char *nl = off < len ? memchr(buf + off, '\n', len - off) : NULL;
	size_t n;

	if (!nl) {
		return 0;
	}
	n = (size_t)(nl - (buf + off));
	*ret_len = n > 0 && buf[off + n - 1] == '\r' ? n - 1 : n;
	return off + n + 1;
}

static bool
header_is(const char *line, size_t len, const char *name, const char **ret_value,
	  size_t *ret_value_len)
{
	size_t n = strlen(name);
	const char *v, *end = line + len;

	if (len <= n || line[n] != ':' || strncasecmp(line, name, n) != 0) {
		return false;
	}
	v = line + n + 1;
	while (v < end && (*v == ' ' || *v == '\t')) {
		v++;
	}
	while (end > v && (end[-1] == ' ' || end[-1] == '\t')) {
		end--;
	}
	*ret_value = v;
	*ret_value_len = (size_t)(end - v);
	return true;
}

static int
fail(char **reterr, int err, const char *msg)
{
	*reterr = xstrdup(msg);
	return err;
}

/* Decode a chunked body starting at buf[off]. Returns 1 (complete, *ret_body
 * malloc'd), 0 (more needed) or -EPROTO/-EFBIG. */
static int
dechunk(const char *buf, size_t len, size_t off, char **ret_body, size_t *ret_len, char **reterr)
{
	char *body = xmalloc(1);
	size_t n = 0;

	for (;;) {
		size_t line_len, next = next_line(buf, len, off, &line_len);
		unsigned long long size = 0;
		size_t digits = 0;

		if (!next) {
			free(body);
			return 0;
		}
		while (digits < line_len && digits < 16) {
			char c = buf[off + digits];
			int v = c >= '0' && c <= '9'   ? c - '0'
				: c >= 'a' && c <= 'f' ? c - 'a' + 10
				: c >= 'A' && c <= 'F' ? c - 'A' + 10
						       : -1;

			if (v < 0) {
				break;
			}
			size = size * 16 + (unsigned)v;
			digits++;
		}
		if (digits == 0 || (digits < line_len && buf[off + digits] != ';' &&
				    buf[off + digits] != ' ' && buf[off + digits] != '\t')) {
			free(body);
			return fail(reterr, -EPROTO, "malformed chunk size");
		}
		off = next;
		if (size == 0) {
			/* Trailers, up to an empty line. */
			for (;;) {
				next = next_line(buf, len, off, &line_len);
				if (!next) {
					free(body);
					return 0;
				}
				off = next;
				if (line_len == 0) {
					break;
				}
			}
			body[n] = '\0';
			*ret_body = body;
			*ret_len = n;
			return 1;
		}
		if (size > CTL_PROXY_RESPONSE_MAX || n + size > CTL_PROXY_RESPONSE_MAX) {
			free(body);
			return fail(reterr, -EFBIG, "response too large");
		}
		if (len - off < size + 1) {
			free(body);
			return 0;
		}
		body = xrealloc(body, n + size + 1);
		memcpy(body + n, buf + off, size);
		n += size;
		off += size;
		next = next_line(buf, len, off, &line_len);
		if (!next) {
			free(body);
			return 0;
		}
		if (line_len != 0) {
			free(body);
			return fail(reterr, -EPROTO, "chunk not followed by CRLF");
		}
		off = next;
	}
}

/* The head of one response: status line and the headers framing needs. */
struct head {
	int status;
	bool chunked, have_length;
	unsigned long long length;
	const char *ctype;
	size_t ctype_len;
};

/* "HTTP/1.x NNN[ reason]": the status, or -1. */
static int
status_line(const char *l, size_t n)
{
	if (n < 12 || memcmp(l, "HTTP/1.", 7) != 0 || (l[7] != '0' && l[7] != '1') || l[8] != ' ' ||
	    l[9] < '1' || l[9] > '9' || l[10] < '0' || l[10] > '9' || l[11] < '0' || l[11] > '9' ||
	    (n > 12 && l[12] != ' ')) {
		return -1;
	}
	return (l[9] - '0') * 100 + (l[10] - '0') * 10 + (l[11] - '0');
}

/* One header line into *h. Returns 0 or -EPROTO with *reterr. */
static int
header_line(const char *l, size_t n, struct head *h, char **reterr)
{
	const char *v;
	size_t vlen;

	if (header_is(l, n, "Content-Length", &v, &vlen)) {
		unsigned long long x = 0;

		if (vlen == 0 || vlen > 19) {
			return fail(reterr, -EPROTO, "malformed Content-Length");
		}
		for (size_t i = 0; i < vlen; i++) {
			if (v[i] < '0' || v[i] > '9') {
				return fail(reterr, -EPROTO, "malformed Content-Length");
			}
			x = x * 10 + (unsigned)(v[i] - '0');
		}
		if (h->have_length && x != h->length) {
			return fail(reterr, -EPROTO, "conflicting Content-Length");
		}
		h->have_length = true;
		h->length = x;
	} else if (header_is(l, n, "Transfer-Encoding", &v, &vlen)) {
		h->chunked = vlen >= 7 && strncasecmp(v + vlen - 7, "chunked", 7) == 0;
		if (!h->chunked) {
			return fail(reterr, -EPROTO, "unsupported Transfer-Encoding");
		}
	} else if (header_is(l, n, "Content-Type", &v, &vlen)) {
		h->ctype = v;
		h->ctype_len = vlen;
	}
	return 0;
}

/* The status line and headers from buf[*off..len). Returns 1 with *h filled
 * and *off past the blank line, 0 when more bytes are needed, or an error as
 * ctl_proxy_parse_response. */
static int
parse_head(const char *buf, size_t len, bool eof, size_t *off, struct head *h, char **reterr)
{
	size_t line_len, start = *off, next = next_line(buf, len, *off, &line_len);

	*h = (struct head){0};
	if (!next) {
		if (len - start > CTL_PROXY_HEADERS_MAX) {
			return fail(reterr, -EFBIG, "response header too large");
		}
		return eof ? fail(reterr, -EPROTO,
				  len == start ? "empty response" : "truncated response")
			   : 0;
	}
	h->status = status_line(buf + start, line_len);
	if (h->status < 0) {
		return fail(reterr, -EPROTO, "malformed status line");
	}
	for (*off = next;; *off = next) {
		int r;

		next = next_line(buf, len, *off, &line_len);
		if (!next) {
			if (len - start > CTL_PROXY_HEADERS_MAX) {
				return fail(reterr, -EFBIG, "response header too large");
			}
			return eof ? fail(reterr, -EPROTO, "truncated response header") : 0;
		}
		if (next - start > CTL_PROXY_HEADERS_MAX) {
			return fail(reterr, -EFBIG, "response header too large");
		}
		if (line_len == 0) {
			*off = next;
			return 1;
		}
		r = header_line(buf + *off, line_len, h, reterr);
		if (r < 0) {
			return r;
		}
	}
}

/* The body framed by *h from buf[off..len). Returns 1 with *ret_body (malloc'd,
 * NUL added) and *ret_len, 0 when more bytes are needed, or an error. */
static int
parse_body(const char *buf, size_t len, bool eof, size_t off, const struct head *h, char **ret_body,
	   size_t *ret_len, char **reterr)
{
	size_t n;

	if (h->status == 204 || h->status == 304) {
		*ret_body = xstrdup("");
		*ret_len = 0;
		return 1;
	}
	if (h->chunked) {
		int r = dechunk(buf, len, off, ret_body, ret_len, reterr);

		return r == 0 && eof ? fail(reterr, -EPROTO, "truncated chunked body") : r;
	}
	if (h->have_length) {
		if (h->length > CTL_PROXY_RESPONSE_MAX) {
			return fail(reterr, -EFBIG, "response too large");
		}
		if (len - off < h->length) {
			return eof ? fail(reterr, -EPROTO, "truncated body") : 0;
		}
		n = (size_t)h->length;
	} else if (!eof) {
		return 0;
	} else {
		n = len - off;
	}
	/* Not strndup: a body may hold NUL bytes (a pickle). */
	*ret_body = xmalloc(n + 1);
	memcpy(*ret_body, buf + off, n);
	(*ret_body)[n] = '\0';
	*ret_len = n;
	return 1;
}

int
ctl_proxy_parse_response(const char *buf, size_t len, bool eof, struct ctl_proxy_response *ret,
			 char **reterr)
{
	size_t off = 0;

	if (len > CTL_PROXY_RESPONSE_MAX) {
		return fail(reterr, -EFBIG, "response too large");
	}
	for (;;) {
		struct head h;
		char *body = NULL;
		size_t body_len = 0;
		int r = parse_head(buf, len, eof, &off, &h, reterr);

		if (r <= 0) {
			return r;
		}
		if (h.status >= 100 && h.status < 200) {
			continue; /* interim response (100 Continue) */
		}
		r = parse_body(buf, len, eof, off, &h, &body, &body_len, reterr);
		if (r <= 0) {
			return r;
		}
		*ret = (struct ctl_proxy_response){
			.status = h.status,
			.content_type = h.ctype ? xstrndup(h.ctype, h.ctype_len) : NULL,
			.body = body,
			.body_len = body_len,
		};
		return 1;
	}
}

void
ctl_proxy_response_release(struct ctl_proxy_response *r)
{
	free(r->content_type);
	free(r->body);
	memset(r, 0, sizeof(*r));
}

/* ---- the client ----------------------------------------------------------- */

struct ctl_proxy {
	struct bufferevent *bev;
	struct event *finish_ev; /* completion runs here, outside bufferevent callbacks */
	char *buf;               /* the response as received */
	size_t len, cap;
	int err;
	char *errmsg;
	bool complete;
	struct ctl_proxy_response resp;
	ctl_proxy_done_fn done;
	void *arg;
};

static void
proxy_free(struct ctl_proxy *p)
{
	if (p->bev) {
		bufferevent_free(p->bev);
	}
	if (p->finish_ev) {
		event_free(p->finish_ev);
	}
	free(p->buf);
	free(p->errmsg);
	ctl_proxy_response_release(&p->resp);
	free(p);
}

/* The request's last step, on its own event: the bufferevent's callbacks are
 * over, and libevent touches a non-persistent event no more once its
 * callback runs, so the request (that event included) is freed here. */
static void
finish_cb(evutil_socket_t fd, short what, void *arg)
{
	struct ctl_proxy *p = arg;

	p->done(p->complete ? 0 : p->err, p->errmsg, p->complete ? &p->resp : NULL, p->arg);
	proxy_free(p);
}

/* Stop reading and writing and report on the next loop turn. */
static void
proxy_finish(struct ctl_proxy *p, int err, char *errmsg)
{
	if (p->bev) {
		bufferevent_disable(p->bev, EV_READ | EV_WRITE);
	}
	if (!p->complete) {
		p->err = err;
		p->errmsg = errmsg;
	} else {
		free(errmsg);
	}
	event_active(p->finish_ev, EV_TIMEOUT, 0);
}

/* Parse what arrived; finish when the response is whole or broken. */
static void
proxy_parse(struct ctl_proxy *p, bool eof)
{
	char *err = NULL;
	int r;

	if (eof && p->len == 0) {
		proxy_finish(p, -ECONNRESET,
			     xstrdup("the worker server closed the connection without answering"));
		return;
	}
	r = ctl_proxy_parse_response(p->buf ? p->buf : "", p->len, eof, &p->resp, &err);
	if (r > 0) {
		p->complete = true;
		proxy_finish(p, 0, NULL);
	} else if (r < 0) {
		proxy_finish(p, r, xasprintf("bad response from the worker server: %s", err));
		free(err);
	} else if (eof) {
		proxy_finish(p, -ECONNRESET, xstrdup("the worker server closed the connection"));
	}
}

static void
proxy_read_cb(struct bufferevent *bev, void *arg)
{
	struct ctl_proxy *p = arg;
	struct evbuffer *in = bufferevent_get_input(bev);
	size_t n = evbuffer_get_length(in);

	if (p->complete || p->err) {
		evbuffer_drain(in, n);
		return;
	}
	if (p->len + n > CTL_PROXY_RESPONSE_MAX) {
		proxy_finish(p, -EFBIG,
			     xasprintf("the worker server's response exceeds %u bytes",
				       CTL_PROXY_RESPONSE_MAX));
		return;
	}
	if (p->len + n + 1 > p->cap) {
		p->cap = (p->len + n + 1) * 2;
		p->buf = xrealloc(p->buf, p->cap);
	}
	evbuffer_remove(in, p->buf + p->len, n);
	p->len += n;
	p->buf[p->len] = '\0';
	proxy_parse(p, false);
}

static void
proxy_event_cb(struct bufferevent *bev, short what, void *arg)
{
	struct ctl_proxy *p = arg;
	int e = EVUTIL_SOCKET_ERROR();

	if (p->complete || p->err) {
		return;
	}
	if (what & BEV_EVENT_TIMEOUT) {
		proxy_finish(p, -ETIMEDOUT, xstrdup("the worker server did not answer in time"));
	} else if (what & BEV_EVENT_EOF) {
		proxy_read_cb(bev, arg);
		if (!p->complete && !p->err) {
			proxy_parse(p, true);
		}
	} else if (what & BEV_EVENT_ERROR) {
		if (e == 0) {
			e = ECONNRESET;
		}
		proxy_finish(p, -e, xasprintf("worker server: %s", strerror(e)));
	}
}

struct ctl_proxy *
ctl_proxy_start(struct event_base *base, const char *socket_path, const char *method,
		const char *target, const char *content_type, const void *body, size_t body_len,
		int timeout_s, ctl_proxy_done_fn done, void *arg)
{
	struct ctl_proxy *p = xcalloc(1, sizeof(*p));
	struct sockaddr_un sun = {.sun_family = AF_UNIX};
	struct timeval tv = {.tv_sec = timeout_s > 0 ? timeout_s : 1};
	struct evbuffer *out;
	int fd;

	p->done = done;
	p->arg = arg;
	p->finish_ev = event_new(base, -1, 0, finish_cb, p);
	if (!p->finish_ev) {
		abort();
	}
	if (strlen(socket_path) >= sizeof(sun.sun_path)) {
		proxy_finish(p, -ENAMETOOLONG,
			     xasprintf("%s: %s", socket_path, strerror(ENAMETOOLONG)));
		return p;
	}
	memcpy(sun.sun_path, socket_path, strlen(socket_path) + 1);
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0) {
		int e = errno;

		proxy_finish(p, -e, xasprintf("socket: %s", strerror(e)));
		return p;
	}
	if (connect(fd, (struct sockaddr *)&sun, sizeof(sun)) < 0 && errno != EINPROGRESS) {
		int e = errno;

		close(fd);
		proxy_finish(p, -e,
			     xasprintf("cannot connect to %s: %s", socket_path, strerror(e)));
		return p;
	}
	p->bev = bufferevent_socket_new(base, fd, BEV_OPT_CLOSE_ON_FREE);
	if (!p->bev) {
		abort();
	}
	bufferevent_setcb(p->bev, proxy_read_cb, NULL, proxy_event_cb, p);
	bufferevent_set_timeouts(p->bev, &tv, &tv);
	out = bufferevent_get_output(p->bev);
	evbuffer_add_printf(out,
			    "%s %s HTTP/1.1\r\nHost: localhost\r\nUser-Agent: elasticd/%s\r\n"
			    "Connection: close\r\n",
			    method, target, ELASTICD_VERSION);
	if (content_type && body_len > 0) {
		evbuffer_add_printf(out, "Content-Type: %s\r\n", content_type);
	}
	if (body_len > 0 || strcmp(method, "POST") == 0) {
		evbuffer_add_printf(out, "Content-Length: %zu\r\n", body_len);
	}
	evbuffer_add(out, "\r\n", 2);
	if (body_len > 0) {
		evbuffer_add(out, body, body_len);
	}
	bufferevent_enable(p->bev, EV_READ | EV_WRITE);
	return p;
}

bool
ctl_proxy_settle(struct ctl_proxy *p)
{
	if (!p->complete && !p->err && p->bev) {
		struct evbuffer *in = bufferevent_get_input(p->bev);
		evutil_socket_t fd = bufferevent_getfd(p->bev);
		int n;

		while ((n = evbuffer_read(in, fd, -1)) > 0) {
		}
		if (evbuffer_get_length(in) > 0) {
			proxy_read_cb(p->bev, p);
		}
		if (n == 0 && !p->complete && !p->err) {
			proxy_parse(p, true);
		}
	}
	if (!p->complete && !p->err) {
		return false;
	}
	event_del(p->finish_ev);
	finish_cb(-1, 0, p);
	return true;
}

void
ctl_proxy_cancel(struct ctl_proxy *p)
{
	if (p) {
		proxy_free(p);
	}
}
