/* tcpstore_listen.h — the listening socket of the TCPStore server: bind and
 * listen, dual-stack when listening on every address (torch 1.13 clients
 * come in through v4-mapped addresses), surviving the bind race of two agents
 * that start together on the endpoint host. It blocks for name resolution
 * and, after a lost race, a pause of a few ms: at start-up, and in the loop
 * when the c10d backend opens each round's workers' store on a --local-addr
 * that is a host name (a numeric address resolves without blocking). */
#pragma once

#include <stddef.h>

/* Listen on host:port (host NULL, "" or "::": every address, dual-stack when
 * the system allows, else IPv4; port 0: an ephemeral port). Returns a
 * non-blocking, CLOEXEC listening fd with the actual port in *ret_port, or
 * -errno (-EADDRINUSE when the port is taken, -EADDRNOTAVAIL when host does
 * not resolve) with *reterr (malloc'd) saying what failed. */
int tcpstore_listen(const char *host, int port, int *ret_port, char **reterr);

struct bufferevent;

/* Write len bytes of data to a connected socket bufferevent: straight to the
 * socket (one send, no write event to arm and disarm: a short request or
 * reply, the common case) when nothing is queued before it, else, and for
 * whatever the socket does not take, through its output buffer. Errors are
 * the bufferevent's to report, as for bufferevent_write. */
void tcpstore_bev_write(struct bufferevent *bev, const void *data, size_t len);
