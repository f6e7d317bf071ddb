/* etcd_client_internal.h — what the client's calls (etcd_client.c) and its
 * watch streams (etcd_watch.c) share: the members and the wire. */
#pragma once

#include <stdbool.h>
#include <stddef.h>

#include "etcd_client.h"

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
	struct grpc_conn *gconn;         /* gRPC: unary calls */
};

struct call;

struct etcd_client {
	struct event_base *base;
	enum etcd_wire wire;
	struct etcd_endpoint *eps;
	size_t n_eps;
	size_t cur;
	struct call *calls; /* in flight */
};

/* A JSON gateway connection to ep whose requests time out after timeout
 * seconds; NULL when libevent cannot make one. */
struct evhttp_connection *etcd_endpoint_evcon(struct etcd_client *cl,
					      const struct etcd_endpoint *ep, int timeout);

/* A new gRPC connection to ep; NULL on allocation failure. */
struct grpc_conn *etcd_endpoint_gconn(struct etcd_client *cl, const struct etcd_endpoint *ep);
