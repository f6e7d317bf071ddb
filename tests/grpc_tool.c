/* grpc_tool.c — test-only driver of src/etcd/etcd_grpc.c against a real
 * etcd, with hand-encoded protobuf (no etcd_pb): one connection, one line
 * of output per result.
 *
 *   grpc_tool HOST:PORT put KEY VALUE    /etcdserverpb.KV/Put
 *   grpc_tool HOST:PORT get KEY          /etcdserverpb.KV/Range: "value V" or
 *                                        "missing", or "answer HEX"
 *   grpc_tool HOST:PORT watch KEY N      /etcdserverpb.Watch/Watch: "ready" at
 *                                        the created answer, "message LEN" for
 *                                        the N next answers, then cancels (N 0:
 *                                        cancels at once, then runs get KEY)
 *   grpc_tool HOST:PORT bad METHOD       an unparsable message, the stream left
 *                                        open
 *   grpc_tool HOST:PORT many N           N Puts and N Ranges at once
 *
 * Every stream's end prints "close err=E status=S message=M". The exit
 * status is 0 when every call ended with err 0 and grpc-status 0. */
#include <errno.h>
#include <event2/buffer.h>
#include <event2/event.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "etcd_grpc.h"

struct call {
	struct grpc_stream *s;
	struct evbuffer *in;
	int watch_left; /* watch: answers still to print; -1 for a unary call */
	bool watch_ready;
	bool print_value;
};

static struct event_base *base;
static struct grpc_conn *conn;
static int pending, failed;

/* ---- hand-made protobuf ---------------------------------------------------- */

static void
pb_bytes(struct evbuffer *b, unsigned field, const void *data, size_t len)
{
	uint8_t tag = (uint8_t)(field << 3 | 2), v;
	size_t n = len;

	evbuffer_add(b, &tag, 1);
	for (; n >= 0x80; n >>= 7) {
		v = (uint8_t)(n | 0x80);
		evbuffer_add(b, &v, 1);
	}
	v = (uint8_t)n;
	evbuffer_add(b, &v, 1);
	evbuffer_add(b, data, len);
}

static void
pb_str(struct evbuffer *b, unsigned field, const char *s)
{
	pb_bytes(b, field, s, strlen(s));
}

/* The gRPC frame of message b (freed) on s; nothing when s is NULL (the
 * stream did not open). */
static void
frame_send(struct grpc_stream *s, struct evbuffer *b, bool end)
{
	size_t len = evbuffer_get_length(b);

	if (!s) {
		evbuffer_free(b);
		return;
	}
	uint8_t hdr[5] = {0, (uint8_t)(len >> 24), (uint8_t)(len >> 16), (uint8_t)(len >> 8),
			  (uint8_t)len};
	struct evbuffer *f = evbuffer_new();

	evbuffer_add(f, hdr, 5);
	evbuffer_add_buffer(f, b);
	int r = grpc_stream_send(s, evbuffer_pullup(f, -1), evbuffer_get_length(f), end);
	if (r < 0) {
		printf("send %s\n", strerror(-r));
	}
	evbuffer_free(f);
	evbuffer_free(b);
}

static int
pb_varint(const uint8_t **p, const uint8_t *end, uint64_t *v)
{
	*v = 0;
	for (int shift = 0; *p < end && shift < 64; shift += 7) {
		uint8_t b = *(*p)++;

		*v |= (uint64_t)(b & 0x7f) << shift;
		if (!(b & 0x80)) {
			return 0;
		}
	}
	return -1;
}

/* The length-delimited field of msg[0, len) numbered field, or NULL. */
static const uint8_t *
pb_find(const uint8_t *msg, size_t len, unsigned field, size_t *ret_len)
{
	const uint8_t *p = msg, *end = msg + len;
	uint64_t tag, v;

	while (p < end && pb_varint(&p, end, &tag) == 0) {
		switch (tag & 7) {
		case 0:
			if (pb_varint(&p, end, &v) < 0) {
				return NULL;
			}
			break;
		case 2:
			if (pb_varint(&p, end, &v) < 0 || v > (uint64_t)(end - p)) {
				return NULL;
			}
			if ((tag >> 3) == field) {
				*ret_len = (size_t)v;
				return p;
			}
			p += v;
			break;
		default:
			return NULL;
		}
	}
	return NULL;
}

/* ---- calls ---------------------------------------------------------------- */

/* RangeResponse.kvs(2) → KeyValue.value(5). */
static void
print_range(const uint8_t *msg, size_t len)
{
	size_t kv_len, v_len;
	const uint8_t *kv = pb_find(msg, len, 2, &kv_len);
	const uint8_t *v = kv ? pb_find(kv, kv_len, 5, &v_len) : NULL;

	if (v) {
		printf("value %.*s\n", (int)v_len, (const char *)v);
	} else if (!kv) {
		printf("missing\n");
	} else {
		printf("answer ");
		for (size_t i = 0; i < len; i++) {
			printf("%02x", msg[i]);
		}
		printf("\n");
	}
}

static void
on_message(struct call *call, const uint8_t *msg, size_t len)
{
	if (call->print_value) {
		print_range(msg, len);
	} else if (call->watch_left >= 0 && !call->watch_ready) {
		call->watch_ready = true;
		printf("ready\n");
	} else if (call->watch_left > 0) {
		printf("message %zu\n", len);
		if (--call->watch_left == 0) {
			grpc_stream_cancel(call->s);
			printf("cancelled\n");
			pending--;
		}
	}
	fflush(stdout);
}

static void
on_data(struct grpc_stream *s, const uint8_t *data, size_t len, void *arg)
{
	struct call *call = arg;

	evbuffer_add(call->in, data, len);
	for (;;) {
		size_t have = evbuffer_get_length(call->in);
		const uint8_t *p = evbuffer_pullup(call->in, have < 5 ? -1 : 5);
		size_t mlen;

		if (have < 5) {
			return;
		}
		mlen = (size_t)p[1] << 24 | (size_t)p[2] << 16 | (size_t)p[3] << 8 | p[4];
		if (have < 5 + mlen) {
			return;
		}
		p = evbuffer_pullup(call->in, (ssize_t)(5 + mlen));
		on_message(call, p + 5, mlen);
		evbuffer_drain(call->in, 5 + mlen);
		if (call->watch_left == 0) {
			return;
		}
	}
}

static void
on_close(struct grpc_stream *s, int err, int status, const char *message, void *arg)
{
	printf("close err=%d status=%d message=%s\n", err, status, message ? message : "(none)");
	fflush(stdout);
	if (err != 0 || status != 0) {
		failed++;
	}
	pending--;
}

static struct call *
call_open(const char *method, int watch_left)
{
	struct call *call = calloc(1, sizeof(*call));

	call->in = evbuffer_new();
	call->watch_left = watch_left;
	call->s = grpc_stream_open(conn, method, on_data, on_close, call);
	if (!call->s) {
		printf("open failed\n");
		failed++;
		return call;
	}
	pending++;
	return call;
}

static struct call *
call_put(const char *key, const char *value)
{
	struct call *call = call_open("/etcdserverpb.KV/Put", -1);
	struct evbuffer *b = evbuffer_new();

	pb_str(b, 1, key);
	pb_str(b, 2, value);
	frame_send(call->s, b, true);
	return call;
}

static struct call *
call_get(const char *key)
{
	struct call *call = call_open("/etcdserverpb.KV/Range", -1);
	struct evbuffer *b = evbuffer_new();

	call->print_value = true;
	pb_str(b, 1, key);
	frame_send(call->s, b, true);
	return call;
}

static struct call *
call_watch(const char *key, int n)
{
	struct call *call = call_open("/etcdserverpb.Watch/Watch", n);
	struct evbuffer *create = evbuffer_new(), *b = evbuffer_new();

	pb_str(create, 1, key);
	pb_bytes(b, 1, evbuffer_pullup(create, -1), evbuffer_get_length(create));
	evbuffer_free(create);
	frame_send(call->s, b, false);
	return call;
}

/* An unparsable message on method, the stream left open for sending. */
static struct call *
call_bad(const char *method)
{
	struct call *call = call_open(method, -1);
	struct evbuffer *b = evbuffer_new();

	evbuffer_add(b, "\xff", 1);
	frame_send(call->s, b, false);
	return call;
}

static void
check_done(evutil_socket_t fd, short what, void *arg)
{
	if (pending <= 0) {
		event_base_loopbreak(base);
	}
}

static int
usage(void)
{
	fprintf(stderr, "usage: grpc_tool HOST:PORT put KEY VALUE | get KEY | watch KEY N | "
			"bad METHOD | many N\n");
	return 2;
}

int
main(int argc, char **argv)
{
	struct call *calls[2048];
	int ncalls = 0;
	char host[256];
	const char *colon;
	struct timeval tick = {0, 20000};
	struct event *ev;

	if (argc < 3 || !(colon = strrchr(argv[1], ':')) ||
	    (size_t)(colon - argv[1]) >= sizeof(host)) {
		return usage();
	}
	snprintf(host, sizeof(host), "%.*s", (int)(colon - argv[1]), argv[1]);
	base = event_base_new();
	conn = grpc_conn_new(base, host, atoi(colon + 1), argv[1]);
	if (strcmp(argv[2], "put") == 0 && argc == 5) {
		calls[ncalls++] = call_put(argv[3], argv[4]);
	} else if (strcmp(argv[2], "get") == 0 && argc == 4) {
		calls[ncalls++] = call_get(argv[3]);
	} else if (strcmp(argv[2], "watch") == 0 && argc == 5) {
		calls[ncalls++] = call_watch(argv[3], atoi(argv[4]));
		if (atoi(argv[4]) == 0 && calls[0]->s) {
			/* Cancelled before its HEADERS left; the connection goes on. */
			grpc_stream_cancel(calls[0]->s);
			pending--;
			calls[ncalls++] = call_get(argv[3]);
		}
	} else if (strcmp(argv[2], "bad") == 0 && argc == 4) {
		calls[ncalls++] = call_bad(argv[3]);
	} else if (strcmp(argv[2], "many") == 0 && argc == 4 && atoi(argv[3]) > 0 &&
		   atoi(argv[3]) <= 1024) {
		char key[32];

		for (int i = 0; i < atoi(argv[3]); i++) {
			snprintf(key, sizeof(key), "/many/%d", i);
			calls[ncalls++] = call_put(key, key);
			calls[ncalls++] = call_get(key);
		}
	} else {
		grpc_conn_free(conn);
		event_base_free(base);
		return usage();
	}
	ev = event_new(base, -1, EV_PERSIST, check_done, NULL);
	event_add(ev, &tick);
	event_base_dispatch(base);
	event_free(ev);
	grpc_conn_free(conn);
	for (int i = 0; i < ncalls; i++) {
		evbuffer_free(calls[i]->in);
		free(calls[i]);
	}
	event_base_free(base);
	printf("done failed=%d\n", failed);
	return failed ? 1 : 0;
}
