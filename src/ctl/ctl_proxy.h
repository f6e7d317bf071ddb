/* ctl_proxy.h — a small asynchronous HTTP/1.1 client over a Unix socket, for
 * forwarding control-plane requests to a worker's own server (torch 2.x
 * WorkerServer, started by worker_main() on TORCH_WORKER_SERVER_SOCKET).
 * libevent 2.1's evhttp has no AF_UNIX client, so this one connects the
 * socket itself, writes one request with "Connection: close", reads the
 * response into memory (bounded) and parses it with ctl_proxy_parse_response,
 * a pure function. One request per connection; single-threaded, loop only. */
#pragma once

#include <stdbool.h>
#include <stddef.h>

struct event_base;
struct ctl_proxy;

/* Largest response accepted (headers and body), in bytes; larger is -EFBIG. */
#define CTL_PROXY_RESPONSE_MAX (64u * 1024 * 1024)
/* Largest header section of a response, in bytes. */
#define CTL_PROXY_HEADERS_MAX (64u * 1024)

/* A parsed response. Owns its strings. */
struct ctl_proxy_response {
	int status;         /* 100..999 */
	char *content_type; /* the Content-Type header's value, NULL when none */
	char *body;         /* body_len bytes plus a NUL (not counted); never NULL */
	size_t body_len;
};

/* Parse the response in buf[0..len), as received so far; eof says the peer
 * closed. Framing as RFC 9112: Transfer-Encoding: chunked (extensions and
 * trailers skipped), else Content-Length, else up to end of file; 1xx
 * responses are skipped. Returns 1 with *ret filled (release it with
 * ctl_proxy_response_release) when a whole response is there, 0 when more
 * bytes are needed, or -EPROTO (malformed, or truncated at eof) / -EFBIG (over
 * CTL_PROXY_HEADERS_MAX or CTL_PROXY_RESPONSE_MAX) with *reterr a malloc'd
 * reason; *ret is untouched unless 1 is returned. */
int ctl_proxy_parse_response(const char *buf, size_t len, bool eof, struct ctl_proxy_response *ret,
			     char **reterr);

/* Free what r owns and zero it; accepts a zeroed response. */
void ctl_proxy_response_release(struct ctl_proxy_response *r);

/* Completion: err 0 and resp valid for the duration of the call, or err
 * -errno (-ENOENT no socket, -ECONNREFUSED nobody listens, -EAGAIN its backlog
 * is full, -ETIMEDOUT, -ECONNRESET closed early, -EPROTO, -EFBIG) with errmsg
 * a human reason. Always called from the loop, never inside ctl_proxy_start;
 * the request is freed right after it returns. */
typedef void (*ctl_proxy_done_fn)(int err, const char *errmsg,
				  const struct ctl_proxy_response *resp, void *arg);

/* Send `<method> <target> HTTP/1.1` (target: path and query, e.g.
 * "/handler/ping?x=1") with body[0..body_len) and its content_type (NULL: no
 * body headers when body_len is 0) to the server on socket_path, and call
 * done with its response, or with an error after timeout_s seconds without
 * progress (> 0). Never NULL (aborts on OOM); connection errors arrive through
 * done too. The socket is CLOEXEC. */
struct ctl_proxy *ctl_proxy_start(struct event_base *base, const char *socket_path,
				  const char *method, const char *target, const char *content_type,
				  const void *body, size_t body_len, int timeout_s,
				  ctl_proxy_done_fn done, void *arg);

/* Decide now, without waiting, what can be decided: read what the worker's
 * server has already sent (its end-of-file included) and, when that settles
 * the request, call done at once and free p. Returns true when done ran (p
 * is gone), false when the request is still open. For a loop that is about
 * to stop (ctl_free): a worker that exited has closed its socket already. */
bool ctl_proxy_settle(struct ctl_proxy *p);

/* Abandon a request whose done has not run: close it, free it, done is never
 * called. Accepts NULL. Not from inside its own done callback. */
void ctl_proxy_cancel(struct ctl_proxy *p);
