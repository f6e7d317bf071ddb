/* tcpstore_listen.h — the listening socket of the TCPStore server: bind and
 * listen, dual-stack when listening on every address (torch 1.13 clients
 * come in through v4-mapped addresses), surviving the bind race of two agents
 * that start together on the endpoint host. Blocking only at start-up (name
 * resolution, and a pause of a few ms after a lost race). */
#pragma once

/* Listen on host:port (host NULL, "" or "::": every address, dual-stack when
 * the system allows, else IPv4; port 0: an ephemeral port). Returns a
 * non-blocking, CLOEXEC listening fd with the actual port in *ret_port, or
 * -errno (-EADDRINUSE when the port is taken, -EADDRNOTAVAIL when host does
 * not resolve) with *reterr (malloc'd) saying what failed. */
int tcpstore_listen(const char *host, int port, int *ret_port, char **reterr);
