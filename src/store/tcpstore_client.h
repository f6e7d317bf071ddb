/* tcpstore_client.h — an asynchronous c10d TCPStore client in the event loop.
 *
 * One TCP connection, requests queued and sent one at a time (as torch's own
 * client: a WAIT's late reply must never be mistaken for the next request's);
 * multiplexed (tcpstore_client_set_mux), a pending WAIT steps aside for the
 * requests queued behind it.
 * Works against elasticd's server (either dialect) and against a real torch
 * TCPStore server of the matching dialect (1.13: legacy; >= 2.2: v2, with the
 * VALIDATE + PING handshake). Each frame goes out in one write: the 1.13
 * server blocks on half frames. Keys are sent as given (torch's own client
 * prepends "/" to user keys; callers that want to share keys with torch
 * clients add it themselves). */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tcpstore_proto.h"

struct event_base;
struct tcpstore_client;

/* Completion of one request: err 0 and rep valid for the duration of the call
 * (slices into the receive buffer), or err -errno and rep NULL:
 *   -ETIMEDOUT   a WAIT ran past its timeout (v2: cancelled with CANCEL_WAIT,
 *                the connection stays usable; legacy: the connection is
 *                closed, as the reference advises, since 1.13 cannot cancel);
 *   -ECONNRESET  the connection was lost or closed before the reply;
 *   -ECANCELED   the client was freed (never: free runs no callbacks).
 * The callback may queue new requests and may free the client. */
typedef void (*tcpstore_reply_fn)(int err, const struct tcpstore_reply *rep, void *arg);

struct tcpstore_client_callbacks {
	/* tcpstore_client_connect finished: err 0 (connected, handshake done);
	 * -EPROTO at once when the peer does not speak the protocol (v2: it
	 * answered the handshake with bytes that are not the PING's echo, or
	 * accepted and answered nothing within 5 s, 3 times in a row; see
	 * tcpstore_client_handshake_trouble); or the last connect error
	 * (-ECONNREFUSED, -ETIMEDOUT, ...) once the deadline passed. A peer
	 * whose kernel has not acknowledged the handshake's bytes (a store
	 * whose listen queue overflowed in a burst of connections) is not
	 * silent: the client waits on that connection until the deadline. May
	 * free the client. */
	void (*connected)(struct tcpstore_client *c, int err, void *arg);
	/* A connected client lost its connection (EOF, error, protocol error):
	 * every queued request has been completed with an error first. May free
	 * the client. */
	void (*closed)(struct tcpstore_client *c, int err, void *arg);
	void *arg;
};

/* A client for host:port (an IPv4/IPv6 literal or a name, resolved at
 * connect time; names may block on DNS once) speaking dialect d. Nothing
 * happens until tcpstore_client_connect. */
struct tcpstore_client *tcpstore_client_new(struct event_base *base, const char *host, int port,
					    enum tcpstore_dialect d,
					    const struct tcpstore_client_callbacks *cb);

/* Connect, retrying refused or failed attempts with a growing delay (20 ms to
 * 1 s, jittered) until deadline_usec (CLOCK_MONOTONIC, as now_usec()); the
 * outcome arrives through cb.connected. Requests may be queued before the
 * connection is up. Returns 0, or -EALREADY when connecting or connected. */
int tcpstore_client_connect(struct tcpstore_client *c, uint64_t deadline_usec);

/* Queue req (copied at once; slices may be freed after the call). A
 * timeout_usec > 0 bounds a WAIT (ignored for other commands). fn may be NULL
 * for requests without a reply worth hearing. Returns 0 or -ENOTCONN after the
 * connection was lost. */
int tcpstore_client_request(struct tcpstore_client *c, const struct tcpstore_req *req,
			    uint64_t timeout_usec, tcpstore_reply_fn fn, void *arg);

/* Shorthands for string keys. */
int tcpstore_client_set(struct tcpstore_client *c, const char *key, const void *value, size_t len,
			tcpstore_reply_fn fn, void *arg);
int tcpstore_client_get(struct tcpstore_client *c, const char *key, tcpstore_reply_fn fn,
			void *arg);
int tcpstore_client_add(struct tcpstore_client *c, const char *key, int64_t delta,
			tcpstore_reply_fn fn, void *arg);
int tcpstore_client_compare_set(struct tcpstore_client *c, const char *key, const void *expected,
				size_t explen, const void *desired, size_t deslen,
				tcpstore_reply_fn fn, void *arg);
int tcpstore_client_delete(struct tcpstore_client *c, const char *key, tcpstore_reply_fn fn,
			   void *arg);
/* WAIT, CHECK or MULTI_GET over n string keys. */
int tcpstore_client_keys(struct tcpstore_client *c, enum tcpstore_cmd cmd, const char *const *keys,
			 size_t n, uint64_t timeout_usec, tcpstore_reply_fn fn, void *arg);

/* torch >= 2.7's queues (v2 only: -EINVAL on a legacy client). QUEUE_PUSH
 * (no reply: fn hears only that it was sent); QUEUE_LEN (rep->i64). QUEUE_POP:
 * rep->i64 is the queue's length before the pop, rep->value the popped value
 * when that is > 0 (0: the queue was empty). With block, as torch's
 * queuePop(key, block=true), a WAIT on key goes first (bounded by timeout_usec
 * when > 0) and the pop follows it at once; a WAIT that times out, is
 * cancelled (tcpstore_client_cancel_wait) or loses the connection completes
 * the pop with that error and the pop is not sent. */
int tcpstore_client_queue_push(struct tcpstore_client *c, const char *key, const void *value,
			       size_t len, tcpstore_reply_fn fn, void *arg);
int tcpstore_client_queue_pop(struct tcpstore_client *c, const char *key, bool block,
			      uint64_t timeout_usec, tcpstore_reply_fn fn, void *arg);
int tcpstore_client_queue_len(struct tcpstore_client *c, const char *key, tcpstore_reply_fn fn,
			      void *arg);

/* Give up every WAIT queued or in flight: each completes with -ECANCELED
 * (v2: CANCEL_WAIT, the connection stays usable; legacy: the connection is
 * closed). Returns 0, or -ENOENT when there was none. */
int tcpstore_client_cancel_wait(struct tcpstore_client *c);

/* Multiplex (v2 only; off by default): one connection does the work of
 * several, so that a store serving N clients holds N sockets, not 3 N. A
 * WAIT in flight steps aside whenever a request of a higher priority is
 * queued (anything but a WAIT, over a WAIT, over a background WAIT): the
 * client sends CANCEL_WAIT, runs the queued requests, and sends the WAIT
 * again, transparently to its caller (a WAIT whose keys appeared while it
 * stepped aside completes as usual: the server answers 00 before 01, or at
 * once when it is sent again). Requests of one priority keep their order;
 * a request other than a WAIT never waits behind a WAIT. A WAIT's timeout
 * counts from its first send. Torch's own clients never multiplex: they
 * send one request at a time and never share a connection. Returns 0, or
 * -EINVAL for a legacy (1.13) client, which cannot cancel a WAIT. */
int tcpstore_client_set_mux(struct tcpstore_client *c, bool on);

/* A WAIT for n string keys that yields to every other request of a
 * multiplexed client (e.g. a watch that may last the whole job), and goes
 * out only once the callbacks of the current turn of the event loop have
 * run (what they queue goes first, without a CANCEL_WAIT); without mux, an
 * ordinary WAIT without timeout. fn as tcpstore_client_keys. Returns
 * 0 or -ENOTCONN. */
int tcpstore_client_wait_background(struct tcpstore_client *c, const char *const *keys, size_t n,
				    tcpstore_reply_fn fn, void *arg);

/* Give up the background WAITs only (as tcpstore_client_cancel_wait: each
 * completes with -ECANCELED). Returns 0, or -ENOENT when there was none. */
int tcpstore_client_cancel_background(struct tcpstore_client *c);

/* Requests queued or in flight. */
size_t tcpstore_client_pending(const struct tcpstore_client *c);

/* The local address of the connection, numeric ("127.0.0.1", "::1"), into buf
 * (at least 64 bytes). Returns 0 or -ENOTCONN. */
int tcpstore_client_local_addr(const struct tcpstore_client *c, char *buf, size_t size);

/* What went wrong in the last handshakes, for a message after -EPROTO or a
 * deadline: the bytes (printable, the first 32) the peer sent instead of the
 * PING's echo ("it answered the TCPStore handshake with \"HTTP/1.0 400\""),
 * or how long it stayed silent. Returns a malloc'd phrase, or NULL when every
 * handshake failed for another reason (refused, reset). */
char *tcpstore_client_handshake_trouble(const struct tcpstore_client *c);

/* Close and free. Queued requests are dropped without their callbacks.
 * Accepts NULL; may be called from any callback of this client. */
void tcpstore_client_free(struct tcpstore_client *c);
