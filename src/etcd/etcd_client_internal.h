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

/* A unary call in flight (etcd_client.c). */
struct call {
	struct etcd_client *cl;
	struct call *next, *prev;
	enum etcd_call call;
	char *path; /* JSON: the gateway's path; gRPC: the method */
	char *body; /* JSON: NUL-terminated; gRPC: the framed message */
	size_t body_len;
	etcd_cb cb;
	void *arg;
	size_t ep; /* the endpoint of the try in flight */
	unsigned tries;
	struct event *retry;
	char *last_err;
	/* gRPC: the try's stream, its answer so far, its deadline */
	struct grpc_conn *gconn;
	struct grpc_stream *gs;
	struct evbuffer *in;
	struct event *deadline;
	bool lost; /* its connection broke under it */
	/* gRPC keep-alive: queued on the client's LeaseKeepAlive stream */
	bool on_ka;
	struct call *ka_next;
};

/* One member of the cluster. */
struct etcd_endpoint {
	char *host;
	int port;
	char *name;                      /* "host:port", also the :authority of gRPC */
	struct evhttp_connection *evcon; /* JSON: unary calls */
	struct grpc_conn *gconn;         /* gRPC: calls and watches, all on one */
};

/* gRPC keep-alives ride one LeaseKeepAlive stream per client, as etcd's own
 * client does (a message each, not a stream each; etcd answers them in
 * order): etcd_keepalive.c. */
struct ka_stream {
	struct grpc_conn *gconn;
	struct grpc_stream *gs;
	size_t ep;
	struct evbuffer *in;      /* answers so far */
	struct call *head, *tail; /* sent, not answered: oldest first */
};

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
	struct ka_stream ka;
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

/* The try of c ended: an answer (err 0, resp) or an error etcd reported;
 * -EAGAIN fails over. Consumes resp (released) and maybe c (freed). */
void etcd_call_answer(struct call *c, int err, struct etcd_response *resp);
/* The try of c failed for a reason another member may not have (why,
 * malloc'd, taken): the next member after a pause, or the end. */
void etcd_call_failover(struct call *c, char *why);

/* Send c (a LEASE_KEEPALIVE) on cl's keep-alive stream to c->ep, opening
 * it when needed; its answer or failure comes from the loop. */
void etcd_ka_send(struct etcd_client *cl, struct call *c);
/* Forget c (being freed or failed over) if queued on the stream. */
void etcd_ka_forget(struct etcd_client *cl, struct call *c);
/* The stream is on conn, being dropped: fail its calls over from the loop. */
void etcd_ka_conn_lost(struct etcd_client *cl, struct grpc_conn *conn);
/* Close the stream without callbacks (the client's free). */
void etcd_ka_free(struct etcd_client *cl);

/* The watch after w in its client's list (cl->watches, which etcd_watch.c
 * keeps), or NULL. */
struct etcd_watch *etcd_watch_next(const struct etcd_watch *w);
/* conn, which w's stream may be on, is being dropped: when it is, forget
 * the stream (it goes with conn) and open it again from the loop, on the
 * next member. */
void etcd_watch_conn_lost(struct etcd_watch *w, struct grpc_conn *conn);
