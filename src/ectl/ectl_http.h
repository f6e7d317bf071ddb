/* ectl_http.h — elasticctl's HTTP/1.1 client for elasticd's control socket
 * (elasticd-ctl(7)): one blocking request per connection ("Connection:
 * close") on a Unix socket, and the incremental response parser under it
 * (status line, Content-Length, chunked or read-until-close bodies), which is
 * pure and fed bytes by the caller. */
#pragma once

#include <stdbool.h>
#include <stddef.h>

#define ECTL_HTTP_HEAD_MAX (64 * 1024) /* status line and headers, bytes */

/* Receives body bytes as they are decoded (chunk framing removed), with the
 * response's status. Returns 0 to go on, or a negative value that
 * ectl_http_feed() then returns. */
typedef int (*ectl_http_body_fn)(int status, const char *data, size_t len, void *arg);

enum ectl_http_state {
	ECTL_HTTP_HEAD,       /* reading the status line and headers */
	ECTL_HTTP_LENGTH,     /* a Content-Length body */
	ECTL_HTTP_UNTIL_EOF,  /* a body that ends when the connection closes */
	ECTL_HTTP_CHUNK_SIZE, /* a chunk-size line */
	ECTL_HTTP_CHUNK_DATA, /* chunk data */
	ECTL_HTTP_CHUNK_END,  /* the CRLF after chunk data */
	ECTL_HTTP_TRAILER,    /* trailer lines after the last chunk */
	ECTL_HTTP_DONE,       /* the response is complete */
};

/* One response being parsed. Zero it, or use ectl_http_parser_init(). */
struct ectl_http_parser {
	enum ectl_http_state state;
	int status;                   /* the status code once the head is read, else 0 */
	char *content_type;           /* Content-Type (malloc'd), or NULL */
	char *head;                   /* status line and headers, "\r\n"-separated (malloc'd) */
	unsigned long long remaining; /* bytes left of a body or chunk */
	char *line;                   /* the head, or a chunk-size or trailer line */
	size_t line_len;
};

/* Start parsing a response. */
void ectl_http_parser_init(struct ectl_http_parser *p);

/* Free what the parser holds (not p itself). Accepts a zeroed parser. */
void ectl_http_parser_release(struct ectl_http_parser *p);

/* Feed len bytes received. Body bytes go to body(data, n, arg) as they are
 * decoded. Returns 1 when the response is complete (bytes after it are
 * ignored), 0 when more are needed, -EBADMSG for a malformed response or one
 * whose head exceeds ECTL_HTTP_HEAD_MAX, or body's negative value. */
int ectl_http_feed(struct ectl_http_parser *p, const char *data, size_t len, ectl_http_body_fn body,
		   void *arg);

/* The connection closed: returns 1 when the response is complete (a body
 * read until close ends here), else -EBADMSG (truncated). */
int ectl_http_eof(struct ectl_http_parser *p);

/* value percent-encoded for a query string (unreserved bytes kept).
 * Returns a malloc'd string. */
char *ectl_http_escape(const char *value);

/* Connect a blocking, close-on-exec stream socket to the Unix socket at
 * path. Returns the fd, -ENAMETOOLONG, or -errno of socket(2)/connect(2)
 * (-ENOENT: no such socket, -ECONNREFUSED: nobody listens, -EACCES). */
int ectl_http_connect(const char *path);

/* The value of header name (case-insensitive) in a response head such as
 * ectl_http_parser's head, trimmed; malloc'd, or NULL when absent. */
char *ectl_http_header(const char *head, const char *name);

/* Send "method target HTTP/1.1" on the Unix socket at path and read the
 * reply: *ret_status gets its status, body bytes go to body(data, n, arg),
 * and *ret_head (may be NULL) the reply's malloc'd head (ectl_http_header()
 * reads it), NULL on error.
 * timeout_s > 0 bounds each wait for the agent (0: wait for ever, for
 * streams). Returns 0 once the reply is complete, -ECONNREFUSED and the
 * other errors of ectl_http_connect(), -EBADMSG for a malformed reply,
 * -EPIPE when it closed before any reply, -ETIMEDOUT, or body's
 * negative value. */
int ectl_http_request(const char *path, const char *method, const char *target, int timeout_s,
		      ectl_http_body_fn body, void *arg, int *ret_status, char **ret_head);

/* A growing byte buffer, NUL-terminated, for ectl_http_collect(). Zero it
 * (or set only max); free data. */
struct ectl_buf {
	char *data;
	size_t len;
	size_t max; /* collect at most this many bytes, then fail with -EFBIG */
	size_t cap; /* bytes allocated at data */
};

/* An ectl_http_body_fn appending to the struct ectl_buf arg, whatever the
 * status; the buffer grows geometrically, so appends cost O(1) amortized
 * however small. Returns 0, or -EFBIG beyond its max (0: no limit), with
 * nothing appended. */
int ectl_http_collect(int status, const char *data, size_t len, void *arg);
