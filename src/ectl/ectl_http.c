#include "ectl_http.h"

#include <ctype.h>
#include <errno.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/un.h>
#include <unistd.h>

#include "util.h"

void
ectl_http_parser_init(struct ectl_http_parser *p)
{
	memset(p, 0, sizeof(*p));
	p->state = ECTL_HTTP_HEAD;
}

void
ectl_http_parser_release(struct ectl_http_parser *p)
{
	free(p->content_type);
	free(p->head);
	free(p->line);
	p->content_type = NULL;
	p->head = NULL;
	p->line = NULL;
	p->line_len = 0;
}

/* Append to the line buffer, bounded by ECTL_HTTP_HEAD_MAX. */
static int
line_add(struct ectl_http_parser *p, const char *data, size_t len)
{
	if (p->line_len + len > ECTL_HTTP_HEAD_MAX) {
		return -EBADMSG;
	}
	p->line = xrealloc(p->line, p->line_len + len + 1);
	memcpy(p->line + p->line_len, data, len);
	p->line_len += len;
	p->line[p->line_len] = '\0';
	return 0;
}

static void
line_reset(struct ectl_http_parser *p)
{
	p->line_len = 0;
	if (p->line) {
		p->line[0] = '\0';
	}
}

char *
ectl_http_header(const char *head, const char *name)
{
	size_t n = strlen(name);

	for (const char *l = strstr(head, "\r\n"); l; l = strstr(l, "\r\n")) {
		l += 2;
		if (strncasecmp(l, name, n) == 0 && l[n] == ':') {
			const char *v = l + n + 1;
			size_t len;

			v += strspn(v, " \t");
			len = strcspn(v, "\r");
			while (len > 0 && (v[len - 1] == ' ' || v[len - 1] == '\t')) {
				len--;
			}
			return xstrndup(v, len);
		}
	}
	return NULL;
}

/* Parse the head in p->line; choose how the body is framed. */
static int
parse_head(struct ectl_http_parser *p)
{
	const char *h = p->line;
	_cleanup_free_ char *te = NULL;
	_cleanup_free_ char *cl = NULL;
	long long len;

	if (strncmp(h, "HTTP/1.", 7) != 0 || !isdigit((unsigned char)h[7]) || h[8] != ' ' ||
	    !isdigit((unsigned char)h[9]) || !isdigit((unsigned char)h[10]) ||
	    !isdigit((unsigned char)h[11]) || (h[12] != ' ' && h[12] != '\r')) {
		return -EBADMSG;
	}
	p->status = (h[9] - '0') * 100 + (h[10] - '0') * 10 + (h[11] - '0');
	free(p->head);
	p->head = xstrdup(h);
	p->content_type = ectl_http_header(h, "Content-Type");
	te = ectl_http_header(h, "Transfer-Encoding");
	cl = ectl_http_header(h, "Content-Length");
	if (te && strcasestr(te, "chunked")) {
		p->state = ECTL_HTTP_CHUNK_SIZE;
	} else if (cl) {
		if (parse_int(cl, 0, 1LL << 40, &len) < 0) {
			return -EBADMSG;
		}
		p->remaining = (unsigned long long)len;
		p->state = len == 0 ? ECTL_HTTP_DONE : ECTL_HTTP_LENGTH;
	} else if (p->status == 204 || p->status == 304) {
		p->state = ECTL_HTTP_DONE;
	} else {
		p->state = ECTL_HTTP_UNTIL_EOF;
	}
	line_reset(p);
	return 0;
}

/* A chunk-size line ("1a;ext"), without its CRLF. */
static int
parse_chunk_size(struct ectl_http_parser *p)
{
	unsigned long long n = 0;
	const char *s = p->line;
	size_t digits = 0;

	for (; isxdigit((unsigned char)*s); s++, digits++) {
		if (digits >= 12) {
			return -EBADMSG;
		}
		n = n * 16 + (unsigned long long)(isdigit((unsigned char)*s)
							  ? *s - '0'
							  : tolower((unsigned char)*s) - 'a' + 10);
	}
	if (digits == 0 || (*s != '\0' && *s != ';' && *s != ' ' && *s != '\t')) {
		return -EBADMSG;
	}
	p->remaining = n;
	p->state = n == 0 ? ECTL_HTTP_TRAILER : ECTL_HTTP_CHUNK_DATA;
	line_reset(p);
	return 0;
}

/* Consume bytes up to a line end ("\n"; a "\r" before it is dropped) into
 * p->line. Returns bytes used, with *done set when the line is complete. */
static long
take_line(struct ectl_http_parser *p, const char *data, size_t len, bool *done)
{
	const char *nl = memchr(data, '\n', len);
	size_t n = nl ? (size_t)(nl - data) + 1 : len;
	int r = line_add(p, data, n);

	if (r < 0) {
		return r;
	}
	*done = nl != NULL;
	if (*done) {
		p->line_len--; /* the '\n' */
		if (p->line_len > 0 && p->line[p->line_len - 1] == '\r') {
			p->line_len--;
		}
		p->line[p->line_len] = '\0';
	}
	return (long)n;
}

/* How many of data's len bytes belong to the head: up to and including the
 * "\r\n\r\n" that ends it, which may begin in p->line; len when it does not
 * end here. */
static size_t
head_part(const struct ectl_http_parser *p, const char *data, size_t len)
{
	size_t keep = p->line_len < 3 ? p->line_len : 3;
	size_t take = len < 3 ? len : 3;
	char seam[6];
	const char *end;

	if (keep > 0) {
		memcpy(seam, p->line + p->line_len - keep, keep);
	}
	memcpy(seam + keep, data, take);
	end = memmem(seam, keep + take, "\r\n\r\n", 4);
	if (end) {
		return (size_t)(end - seam) + 4 - keep;
	}
	end = memmem(data, len, "\r\n\r\n", 4);
	return end ? (size_t)(end - data) + 4 : len;
}

/* Consume head bytes up to and including the blank line; only those count
 * against ECTL_HTTP_HEAD_MAX, whatever follows them in data. */
static long
take_head(struct ectl_http_parser *p, const char *data, size_t len)
{
	size_t used = head_part(p, data, len);
	int r = line_add(p, data, used);

	if (r < 0) {
		return r;
	}
	if (p->line_len < 4 || memcmp(p->line + p->line_len - 4, "\r\n\r\n", 4) != 0) {
		return (long)used;
	}
	p->line_len -= 2; /* keep the last header's "\r\n" */
	p->line[p->line_len] = '\0';
	r = parse_head(p);
	return r < 0 ? r : (long)used;
}

/* Body bytes of a Content-Length body, chunk data or an until-close body. */
static long
take_body(struct ectl_http_parser *p, const char *data, size_t len, ectl_http_body_fn body,
	  void *arg)
{
	size_t n = len;
	int r;

	if (p->state != ECTL_HTTP_UNTIL_EOF && n > p->remaining) {
		n = (size_t)p->remaining;
	}
	r = n > 0 && body ? body(p->status, data, n, arg) : 0;
	if (r < 0) {
		return r;
	}
	if (p->state != ECTL_HTTP_UNTIL_EOF) {
		p->remaining -= n;
		if (p->remaining == 0) {
			p->state =
				p->state == ECTL_HTTP_LENGTH ? ECTL_HTTP_DONE : ECTL_HTTP_CHUNK_END;
		}
	}
	return (long)n;
}

/* One step of the parser on data; returns bytes used or a negative error. */
static long
step(struct ectl_http_parser *p, const char *data, size_t len, ectl_http_body_fn body, void *arg)
{
	bool done = false;
	long n;

	switch (p->state) {
	case ECTL_HTTP_HEAD:
		return take_head(p, data, len);
	case ECTL_HTTP_LENGTH:
	case ECTL_HTTP_UNTIL_EOF:
	case ECTL_HTTP_CHUNK_DATA:
		return take_body(p, data, len, body, arg);
	case ECTL_HTTP_CHUNK_SIZE:
		n = take_line(p, data, len, &done);
		return n < 0 || !done ? n : (parse_chunk_size(p) < 0 ? -EBADMSG : n);
	case ECTL_HTTP_CHUNK_END:
		n = take_line(p, data, len, &done);
		if (n >= 0 && done) {
			if (p->line_len != 0) {
				return -EBADMSG;
			}
			p->state = ECTL_HTTP_CHUNK_SIZE;
		}
		return n;
	case ECTL_HTTP_TRAILER:
		n = take_line(p, data, len, &done);
		if (n >= 0 && done) {
			p->state = p->line_len == 0 ? ECTL_HTTP_DONE : ECTL_HTTP_TRAILER;
			line_reset(p);
		}
		return n;
	case ECTL_HTTP_DONE:
		return (long)len;
	}
	return -EBADMSG;
}

int
ectl_http_feed(struct ectl_http_parser *p, const char *data, size_t len, ectl_http_body_fn body,
	       void *arg)
{
	while (len > 0 && p->state != ECTL_HTTP_DONE) {
		long n = step(p, data, len, body, arg);

		if (n < 0) {
			return (int)n;
		}
		data += n;
		len -= (size_t)n;
	}
	return p->state == ECTL_HTTP_DONE ? 1 : 0;
}

int
ectl_http_eof(struct ectl_http_parser *p)
{
	if (p->state == ECTL_HTTP_UNTIL_EOF) {
		p->state = ECTL_HTTP_DONE;
	}
	return p->state == ECTL_HTTP_DONE ? 1 : -EBADMSG;
}

char *
ectl_http_escape(const char *value)
{
	static const char hex[] = "0123456789ABCDEF";
	char *out = xmalloc(strlen(value) * 3 + 1);
	char *o = out;

	for (const unsigned char *s = (const unsigned char *)value; *s; s++) {
		if (isalnum(*s) || *s == '-' || *s == '.' || *s == '_' || *s == '~') {
			*o++ = (char)*s;
		} else {
			*o++ = '%';
			*o++ = hex[*s >> 4];
			*o++ = hex[*s & 15];
		}
	}
	*o = '\0';
	return out;
}

int
ectl_http_connect(const char *path)
{
	struct sockaddr_un sun = {.sun_family = AF_UNIX};
	int fd;

	if (strlen(path) >= sizeof(sun.sun_path)) {
		return -ENAMETOOLONG;
	}
	strcpy(sun.sun_path, path);
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0) {
		return -errno;
	}
	if (connect(fd, (struct sockaddr *)&sun, sizeof(sun)) < 0) {
		int e = errno;

		close(fd);
		return -e;
	}
	return fd;
}

static int
send_request(int fd, const char *method, const char *target, int timeout_s)
{
	_cleanup_free_ char *req = xasprintf("%s %s HTTP/1.1\r\nHost: localhost\r\n"
					     "User-Agent: elasticctl\r\nConnection: close\r\n"
					     "Content-Length: 0\r\n\r\n",
					     method, target);
	struct timeval tv = {.tv_sec = timeout_s};

	if (timeout_s > 0 && (setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv)) < 0 ||
			      setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv)) < 0)) {
		return -errno;
	}
	return write_all(fd, req, strlen(req));
}

int
ectl_http_request(const char *path, const char *method, const char *target, int timeout_s,
		  ectl_http_body_fn body, void *arg, int *ret_status, char **ret_head)
{
	_cleanup_close_ int fd = ectl_http_connect(path);
	struct ectl_http_parser p;
	char buf[65536];
	int r;

	if (fd < 0) {
		return fd;
	}
	r = send_request(fd, method, target, timeout_s);
	if (r < 0) {
		return r == -EAGAIN ? -ETIMEDOUT : r;
	}
	ectl_http_parser_init(&p);
	for (r = 0; r == 0;) {
		ssize_t n = read(fd, buf, sizeof(buf));

		if (n < 0 && errno == EINTR) {
			continue;
		}
		if (n < 0) {
			r = errno == EAGAIN || errno == EWOULDBLOCK ? -ETIMEDOUT : -errno;
		} else if (n == 0) {
			r = p.state == ECTL_HTTP_HEAD && p.line_len == 0 ? -EPIPE
									 : ectl_http_eof(&p);
		} else {
			r = ectl_http_feed(&p, buf, (size_t)n, body, arg);
		}
	}
	if (r > 0) {
		*ret_status = p.status;
		if (ret_head) {
			*ret_head = p.head;
			p.head = NULL;
		}
	}
	ectl_http_parser_release(&p);
	return r > 0 ? 0 : r;
}

int
ectl_http_collect(int status, const char *data, size_t len, void *arg)
{
	struct ectl_buf *b = arg;

	if (b->max > 0 && b->len + len > b->max) {
		return -EFBIG;
	}
	if (!b->data || b->len + len + 1 > b->cap) {
		size_t cap = b->cap > 64 ? b->cap : 64;

		while (cap < b->len + len + 1) {
			cap *= 2;
		}
		b->data = xrealloc(b->data, cap);
		b->cap = cap;
	}
	memcpy(b->data + b->len, data, len);
	b->len += len;
	b->data[b->len] = '\0';
	return 0;
}
