/* tcpstore_server.h — a c10d TCPStore server inside the agent's event loop.
 *
 * Speaks both dialects of tcpstore_proto.h, chosen per connection from its
 * first bytes, so unmodified torch 1.13 clients (and 2.x clients: VALIDATE,
 * PING, CANCEL_WAIT, APPEND, MULTI_GET, MULTI_SET; torch >= 2.7's QUEUE_PUSH,
 * QUEUE_POP, QUEUE_LEN) use it as their store. One flat key space; WAIT
 * registers the connection on every missing key and answers once all exist
 * (no server-side timers); SET, ADD, APPEND, MULTI_SET and a creating or
 * replacing COMPARE_SET wake waiters (the 2.x libuv server's rule, a superset
 * of 1.13's). A key may also hold a FIFO queue, apart from its value: a
 * non-empty queue makes the key ready for CHECK and WAIT, and a QUEUE_PUSH
 * wakes only the oldest waiter on its key (a blocking pop is WAIT, then POP).
 * A connection that sends a request while its WAIT is pending loses that WAIT
 * (1.13 has no CANCEL_WAIT).
 *
 * Everything a peer controls is bounded: key and value sizes, keys per
 * request, values per queue, total bytes stored, connections, bytes queued for a peer that does
 * not read, the time a frame may stay half-received, and the bytes of
 * unfinished frames held for all connections together. A violation closes
 * that connection only. Descriptors: the listener pauses when the next
 * connection would take one of those kept for supervision (fdreserve.h), and
 * memory of a closed connection's buffers goes back to the system. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct event_base;
struct tcpstore_server;

struct tcpstore_server_limits {
	size_t max_key;          /* bytes per key (default 8 KiB) */
	size_t max_value;        /* bytes per value (default 8 MiB) */
	size_t max_keys;         /* keys per WAIT/CHECK/MULTI_* (default 128 Ki) */
	size_t max_store_bytes;  /* keys + values stored, queued values included (1 GiB) */
	size_t max_connections;  /* open connections (default 16384) */
	size_t max_output;       /* bytes queued for one peer before it is dropped (64 MiB) */
	unsigned frame_stall_ms; /* a started frame must complete within (default 60000) */
	size_t max_queue_len;    /* values queued under one key (default 1 Mi) */
	/* Bytes of unfinished frames held, all connections together (default
	 * 64 MiB; 0: no bound but max_value per connection). Past it, the
	 * connection holding the most is closed. */
	size_t max_partial_bytes;
};

/* The defaults above. */
void tcpstore_server_limits_default(struct tcpstore_server_limits *ret);

/* Listen on host:port (host NULL or "" or "::": every address, dual-stack
 * when the system allows; port 0: an ephemeral port). lim NULL: defaults.
 * Returns the server, or NULL with -errno in *ret_err (-EADDRINUSE when the
 * port is taken) and *reterr (malloc'd) saying what failed. */
struct tcpstore_server *tcpstore_server_new(struct event_base *base, const char *host, int port,
					    const struct tcpstore_server_limits *lim, int *ret_err,
					    char **reterr);

/* Serve torch workers of one round only: treat every key
 * "//worker/attempt_<N>/..." as "//worker/attempt_/..." whatever N is. torch
 * 2.x workers prefix their keys with their own TORCHELASTIC_RESTART_COUNT,
 * which differs between nodes once one node spent a restart and another
 * re-formed for free (a membership change keeps the count); on a store that
 * serves a single round the number carries nothing, and ignoring it lets such
 * nodes meet. Off by default. */
void tcpstore_server_set_merge_attempts(struct tcpstore_server *s, bool on);

/* The port it listens on (the ephemeral one when created with port 0). */
int tcpstore_server_port(const struct tcpstore_server *s);

/* Open client connections right now. */
size_t tcpstore_server_connections(const struct tcpstore_server *s);

/* Keys stored (what GETNUMKEYS answers). */
size_t tcpstore_server_num_keys(const struct tcpstore_server *s);

/* Bytes still queued for clients (replies not yet written to the kernel). */
size_t tcpstore_server_pending_output(const struct tcpstore_server *s);

/* Counters since creation, for tests and the benchmark. */
struct tcpstore_server_stats {
	uint64_t accepted;      /* connections accepted */
	uint64_t refused;       /* connections closed at once: over max_connections */
	uint64_t dropped;       /* connections closed for a protocol or limit violation */
	uint64_t requests;      /* requests handled */
	uint64_t over_budget;   /* of dropped: closed over max_partial_bytes */
	uint64_t accept_pauses; /* listener paused at the descriptor reserve or on accept errors */
};
void tcpstore_server_stats(const struct tcpstore_server *s, struct tcpstore_server_stats *ret);

/* Call cb(arg) from the loop each time the last open connection has gone
 * (never from inside a connection's own callbacks); cb NULL: stop. For an
 * owner that waits for its clients to leave before it closes the server. */
void tcpstore_server_set_idle_cb(struct tcpstore_server *s, void (*cb)(void *arg), void *arg);

/* What the server has to say about peers it refused or dropped (a
 * connection closed over max_partial_bytes, the listener paused for lack of
 * descriptors): one line, at a bounded rate, for the owner to log; msg is
 * valid during the call only. Called from the loop; it must not call back
 * into the server. cb NULL: not told. */
typedef void (*tcpstore_server_notice_fn)(const char *msg, void *arg);
void tcpstore_server_set_notice_cb(struct tcpstore_server *s, tcpstore_server_notice_fn cb,
				   void *arg);

/* Called after a key starting with the prefix is stored (SET, COMPARE_SET,
 * ADD, APPEND, MULTI_SET, tcpstore_server_put), with the key and its new
 * value (valid during the call only). It must not call back into the server
 * (defer work to the loop). One hook per server; cb NULL removes it. For the
 * agent that hosts the store and reads what its clients write without a
 * round trip. */
typedef void (*tcpstore_server_set_fn)(const uint8_t *key, size_t klen, const uint8_t *value,
				       size_t vlen, void *arg);
void tcpstore_server_on_set(struct tcpstore_server *s, const char *prefix,
			    tcpstore_server_set_fn cb, void *arg);

/* The value of key, read from inside the process: 0 with *ret_value (owned
 * by the server, valid until it next runs) and *ret_len, or -ENOENT. */
int tcpstore_server_get(struct tcpstore_server *s, const char *key, const uint8_t **ret_value,
			size_t *ret_len);

/* Store key = value[0..len) from inside the process, as a client's SET would
 * (waiters on the key wake up). Returns 0, or -ENOSPC past the byte limit. */
int tcpstore_server_put(struct tcpstore_server *s, const char *key, const void *value, size_t len);

/* Close the listener and every connection, free everything. Accepts NULL. */
void tcpstore_server_free(struct tcpstore_server *s);
