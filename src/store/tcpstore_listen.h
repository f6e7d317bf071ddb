/* tcpstore_listen.h — the listening socket of the TCPStore server: bind and
 * listen, dual-stack when listening on every address (torch 1.13 clients
 * come in through v4-mapped addresses), surviving the bind race of two agents
 * that start together on the endpoint host. It blocks for name resolution
 * and, after a lost race, a pause of a few ms: at start-up, and in the loop
 * when the c10d backend opens each round's workers' store on a --local-addr
 * that is a host name (a numeric address resolves without blocking). */
#pragma once

/* Listen on host:port (host NULL, "" or "::": every address, dual-stack when
 * the system allows, else IPv4; port 0: an ephemeral port). Returns a
 * non-blocking, CLOEXEC listening fd with the actual port in *ret_port, or
 * -errno (-EADDRINUSE when the port is taken, -EADDRNOTAVAIL when host does
 * not resolve) with *reterr (malloc'd) saying what failed. */
int tcpstore_listen(const char *host, int port, int *ret_port, char **reterr);
