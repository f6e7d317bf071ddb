/* tcpstore_server_int.h — the TCPStore server's insides, shared by
 * tcpstore_server.c (the protocol) and tcpstore_guard.c (what peers may make
 * it hold: descriptors, unfinished frames, memory kept after they leave).
 * Not for other modules. */
#pragma once

#include <event2/util.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/queue.h>
#include <sys/socket.h>

#include "tcpstore_proto.h"
#include "tcpstore_server.h"
#include "tcpstore_table.h"
#include "util.h"

struct bufferevent;
struct evconnlistener;
struct event;
struct fdreserve;

/* Stop reading a connection's requests while this much output is queued. */
#define OUTPUT_PAUSE (1u << 20)

struct wait_rec;

/* One key of one pending WAIT, linked on the key's entry. */
struct tcpstore_wait_node {
	TAILQ_ENTRY(tcpstore_wait_node) link;
	struct wait_rec *rec;
	struct tcpstore_entry *e; /* NULL once fired */
};

/* The (at most one) pending WAIT of a connection. */
struct wait_rec {
	struct conn *c;
	size_t remaining; /* nodes not fired yet */
	size_t n;
	struct tcpstore_wait_node nodes[];
};

struct conn {
	LIST_ENTRY(conn) link;
	struct tcpstore_server *s;
	struct bufferevent *bev;
	struct event *stall;
	bool dialect_known;
	enum tcpstore_dialect dialect;
	size_t need; /* bytes the next parse needs */
	struct wait_rec *wait;
	bool paused;
	bool closing;
	size_t held;   /* input bytes of an unfinished frame, in s->partial_bytes */
	uint64_t seq;  /* accept order: the oldest has the lowest */
	char peer[64]; /* "address:port", for log lines */
};

struct tcpstore_server {
	struct event_base *base;
	struct evconnlistener *listener;
	int port;
	struct tcpstore_server_limits lim;
	struct tcpstore_limits plim;
	struct tcpstore_table t;
	LIST_HEAD(, conn) conns;
	size_t nconns;
	LIST_HEAD(, conn) closed; /* freed by the reaper on the next loop turn */
	struct event *reaper;
	struct tcpstore_server_stats stats;
	bool merge_attempts;
	void (*idle_cb)(void *arg);
	void *idle_arg;
	char *set_prefix; /* tcpstore_server_on_set */
	tcpstore_server_set_fn set_cb;
	void *set_arg;
	/* tcpstore_guard.c: what peers may make the server hold. */
	struct fdreserve *fdres; /* pauses the listener at the descriptor reserve */
	size_t partial_bytes;    /* sum of every connection's held */
	size_t released;         /* bytes of closed connections' buffers, not trimmed yet */
	struct event *trim_ev;   /* gives them back once libevent has freed them */
	uint64_t next_seq;
	struct ratelimit budget_tell; /* "closed the connection from ..." lines */
	tcpstore_server_notice_fn notice_cb;
	void *notice_arg;
};

/* Close c (protocol error, limit, EOF, over a budget). Freed on the next loop
 * turn: we may be inside its own callbacks. violation: counted as dropped. */
void tcpstore_conn_close(struct conn *c, bool violation);

/* ---- tcpstore_guard.c ----------------------------------------------------- */

/* Set up the guards of s once its listener exists. */
void tcpstore_guard_init(struct tcpstore_server *s);

/* A connection was accepted on fd from sa: whether it may stay (below the
 * descriptor reserve and max_connections). When not, fd is closed here. */
bool tcpstore_guard_admit(struct tcpstore_server *s, int fd);

/* Name c's peer (c->peer) from its address. */
void tcpstore_guard_name_peer(struct conn *c, const struct sockaddr *sa, int salen);

/* accept(2) failed with errno err: pause the listener. */
void tcpstore_guard_accept_failed(struct tcpstore_server *s, int err);

/* After c's input was parsed: held is what is left in its input buffer (an
 * unfinished frame). Past max_partial_bytes over all connections, close the
 * connection that holds the most (the oldest of equals) until under it. */
void tcpstore_guard_account(struct conn *c, size_t held);

/* c is closing: its unfinished frame leaves the total; its buffers (input and
 * output) are noted to be given back to the system once freed. */
void tcpstore_guard_closing(struct conn *c, size_t buffered);

/* After closed connections were freed: give memory back to the system when
 * large buffers went (glibc keeps freed heap memory otherwise). */
void tcpstore_guard_reaped(struct tcpstore_server *s);

/* Free what tcpstore_guard_init made. */
void tcpstore_guard_release(struct tcpstore_server *s);
