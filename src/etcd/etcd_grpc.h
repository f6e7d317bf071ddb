/* etcd_grpc.h — gRPC's transport on the libevent loop: one cleartext HTTP/2
 * connection (h2c with prior knowledge, as etcd serves gRPC next to its
 * gateway on the client port) to one etcd member, carrying any number of
 * gRPC streams, unary calls and bidirectional streams alike. HTTP/2 framing,
 * HPACK and flow control are nghttp2's; the messages are opaque bytes here
 * (etcd_pb frames and decodes them).
 *
 * A stream's callbacks run from the loop, never from inside the function
 * that caused them. Streams may be opened, written and cancelled from inside
 * any callback of this module; the connection is freed only outside them. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct event_base;
struct grpc_conn;
struct grpc_stream;

/* Bytes of the answer's DATA frames as they arrive (message boundaries are
 * not kept: the caller splits with etcd_pb_next_message). data is valid
 * only during the call. */
typedef void (*grpc_data_cb)(struct grpc_stream *s, const uint8_t *data, size_t len, void *arg);

/* The stream ended; s is freed after this returns. err 0: the server ended
 * it with trailers (or a trailers-only answer), status is their grpc-status
 * (-1 when absent) and message their grpc-message (percent-decoded; NULL
 * when absent). err < 0: it ended without trailers: -ECONNRESET the
 * connection failed or closed (connect refused, reset, GOAWAY before the
 * stream ran), -EPROTO an HTTP status other than 200, RST_STREAM from the
 * server, or a protocol error. Not called for a stream the caller cancelled,
 * nor from grpc_conn_free. */
typedef void (*grpc_close_cb)(struct grpc_stream *s, int err, int status, const char *message,
			      void *arg);

/* A connection to host:port (numeric addresses avoid blocking lookups;
 * "localhost" means 127.0.0.1), connecting at once in the background.
 * authority is the :authority header ("host:port"), copied. Returns NULL
 * only on allocation failure. */
struct grpc_conn *grpc_conn_new(struct event_base *base, const char *host, int port,
				const char *authority);

/* True once the connection failed or the server closed it (GOAWAY, EOF):
 * no new stream can open on it; free it (outside its callbacks) and make a
 * new one. */
bool grpc_conn_broken(const struct grpc_conn *c);

/* Open a stream calling method ("/etcdserverpb.KV/Range") with the headers
 * gRPC requires (POST, te: trailers, content-type application/grpc).
 * Returns the stream, or NULL when c is broken or nghttp2 refuses (no
 * callback then). */
struct grpc_stream *grpc_stream_open(struct grpc_conn *c, const char *method, grpc_data_cb data_cb,
				     grpc_close_cb close_cb, void *arg);

/* Queue len bytes (copied) to send on s; end_stream half-closes s after
 * them (a unary call sends its one message with end_stream). Returns 0,
 * -EPIPE when s was already half-closed, or -ECONNRESET when the
 * connection is broken (close_cb follows from the loop). */
int grpc_stream_send(struct grpc_stream *s, const void *data, size_t len, bool end_stream);

/* Reset s (RST_STREAM CANCEL) and forget it: no more callbacks. */
void grpc_stream_cancel(struct grpc_stream *s);

/* Close the connection and free it with every stream on it, without
 * callbacks; NULL is fine. Not from inside one of its callbacks. */
void grpc_conn_free(struct grpc_conn *c);
