/* etcd_client_internal.h — what the client's calls (etcd_client.c) and its
 * watch streams (etcd_watch.c) share: the members and the wire. */
#pragma once

#include <stdbool.h>
#include <stddef.h>

#include "etcd_client.h"

struct event;
struct event_base;
struct evhttp_connection;
struct grpc_conn;

/* Seconds a unary call may take on one endpoint (a member without quorum
 * answers 503 after about 7 s). */
#define ETCD_CALL_TIMEOUT 10

/* One member of the cluster. */
struct etcd_endpoint {
	char *host;
	int port;
	char *name;                      /* "host:port", also the :authority of gRPC */
	struct evhttp_connection *evcon; /* JSON: unary calls */
	struct grpc_conn *gconn;         /* gRPC: calls and watches, all on one */
};

struct call;

struct etcd_client {
	struct event_base *base;
	enum etcd_wire wire;
	struct etcd_endpoint *eps;
	size_t n_eps;
	size_t cur;
	struct call *calls;         /* in flight */
	struct etcd_watch *watches; /* every watch of the client */
	struct grpc_conn **dropped; /* broken connections, freed by reap */
	size_t n_dropped;
	struct event *reap;
};

/* A JSON gateway connection to ep whose requests time out after timeout
 * seconds; NULL when libevent cannot make one. */
struct evhttp_connection *etcd_endpoint_evcon(struct etcd_client *cl,
					      const struct etcd_endpoint *ep, int timeout);

/* The gRPC connection to cl->eps[i], which every call and watch stream of
 * cl to that member shares (one TCP connection per member, as etcd's own
 * client). A broken one is replaced: the calls and watches whose streams
 * were on it are told from the loop (etcd_watch_conn_lost), and it is freed
 * from the loop, so this is safe inside any callback. NULL only when a
 * connection cannot be made. */
struct grpc_conn *etcd_client_gconn(struct etcd_client *cl, size_t i);

/* The watch after w in its client's list (cl->watches, which etcd_watch.c
 * keeps), or NULL. */
struct etcd_watch *etcd_watch_next(const struct etcd_watch *w);
/* conn, which w's stream may be on, is being dropped: when it is, forget
 * the stream (it goes with conn) and open it again from the loop, on the
 * next member. */
void etcd_watch_conn_lost(struct etcd_watch *w, struct grpc_conn *conn);
