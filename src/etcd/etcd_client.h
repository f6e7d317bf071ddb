/* etcd_client.h — a client of etcd 3.4's v3 API on the libevent loop, over
 * its native gRPC (etcd_grpc.h, etcd_pb.h) or its JSON gateway (tech-notes
 * §4): unary calls (range, put, deleterange, txn, lease grant, keepalive,
 * revoke) with fail-over across the endpoints on connection errors and
 * "unavailable", and watch streams that reconnect and resume from the last
 * revision seen.
 *
 * Layers: pure request encoding and response decoding (etcd_encode_*,
 * etcd_response_decode for JSON, etcd_pb_* for gRPC; no I/O, unit-tested
 * and fuzzed), and the I/O part (etcd_client_*, etcd_watch_*). In JSON, keys
 * and values are base64; int64s go out as strings and are read from strings
 * or numbers; fields that are zero are absent in answers and read as zero.
 * Both wires give the same struct etcd_response. Plain HTTP only: no auth,
 * no TLS. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct event_base;
struct etcd_client;
struct etcd_watch;

/* Upper bound on a decoded key or value, and on a response body. */
#define ETCD_MAX_BODY (64u << 20)

/* ---- pure part ---------------------------------------------------------- */

/* Standard base64 with padding. Returns a malloc'd NUL-terminated string. */
char *etcd_b64_encode(const void *data, size_t len);

/* Decode standard base64 (padding optional). Returns 0 with *ret (malloc'd,
 * NUL-terminated for convenience, *ret_len bytes before the NUL) or -EINVAL. */
int etcd_b64_decode(const char *s, size_t slen, char **ret, size_t *ret_len);

/* The range_end that selects every key starting with prefix (last byte + 1,
 * trailing 0xff bytes dropped; "\0" = every key when none is left).
 * Returns a malloc'd string of *ret_len bytes (NUL-terminated). */
char *etcd_prefix_end(const char *prefix, size_t len, size_t *ret_len);

enum etcd_op_kind {
	ETCD_OP_RANGE,
	ETCD_OP_PUT,
	ETCD_OP_DELETE,
};

/* One request of a txn, or the body of a unary call. Keys are NUL-terminated;
 * range_end NULL means "this key only". */
struct etcd_op {
	enum etcd_op_kind kind;
	const char *key;
	const char *range_end;
	const void *value; /* PUT */
	size_t value_len;
	int64_t lease;               /* PUT: 0 for none */
	bool keys_only;              /* RANGE */
	int64_t limit;               /* RANGE: at most this many keys; 0 for all */
	int64_t min_mod_revision;    /* RANGE: only keys modified at or after it; 0: all */
	int64_t max_create_revision; /* RANGE: only keys created at or before it; 0: all */
};

enum etcd_cmp_target {
	ETCD_CMP_CREATE, /* create_revision */
	ETCD_CMP_MOD,    /* mod_revision */
};

/* "target of key EQUAL revision". */
struct etcd_cmp {
	const char *key;
	enum etcd_cmp_target target;
	int64_t revision;
};

/* The calls of etcd's v3 API that elasticd makes (gRPC service/method;
 * the gateway's path in etcd_request_path). */
enum etcd_call {
	ETCD_CALL_RANGE,           /* KV/Range, /v3/kv/range */
	ETCD_CALL_PUT,             /* KV/Put, /v3/kv/put */
	ETCD_CALL_DELETE,          /* KV/DeleteRange, /v3/kv/deleterange */
	ETCD_CALL_TXN,             /* KV/Txn, /v3/kv/txn */
	ETCD_CALL_LEASE_GRANT,     /* Lease/LeaseGrant, /v3/lease/grant */
	ETCD_CALL_LEASE_KEEPALIVE, /* Lease/LeaseKeepAlive (one request), /v3/lease/keepalive */
	ETCD_CALL_LEASE_REVOKE,    /* Lease/LeaseRevoke, /v3/lease/revoke */
	ETCD_CALL_WATCH,           /* Watch/Watch (a stream), /v3/watch */
};

/* One unary call, as the caller sees it; the client encodes it for its wire
 * (JSON or gRPC) before etcd_client_call returns, so every pointer need
 * only live through that call. */
struct etcd_request {
	enum etcd_call call;      /* any but ETCD_CALL_WATCH */
	const struct etcd_op *op; /* RANGE, PUT, DELETE: op->kind matches call */
	/* TXN: compare, then success or failure ops. */
	const struct etcd_cmp *cmp;
	size_t n_cmp;
	const struct etcd_op *success;
	size_t n_success;
	const struct etcd_op *failure;
	size_t n_failure;
	int64_t ttl;   /* LEASE_GRANT: seconds */
	int64_t lease; /* LEASE_KEEPALIVE, LEASE_REVOKE: the lease ID */
};

/* The gateway's path of call ("/v3/kv/txn", ...). Static string. */
const char *etcd_request_path(enum etcd_call call);

/* The gateway's JSON body of req: a malloc'd NUL-terminated string. */
char *etcd_encode_request(const struct etcd_request *req);

/* JSON bodies, malloc'd NUL-terminated strings. */
char *etcd_encode_op(const struct etcd_op *op);
char *etcd_encode_txn(const struct etcd_cmp *cmp, size_t n_cmp, const struct etcd_op *success,
		      size_t n_success, const struct etcd_op *failure, size_t n_failure);
char *etcd_encode_lease_grant(int64_t ttl_sec);
/* {"ID":"<id>"}: lease keepalive, revoke. */
char *etcd_encode_lease_id(int64_t id);
/* {"create_request":{...,"progress_notify":true}}; start_revision 0: now;
 * no_put adds "filters":["NOPUT"] (deletions only). */
char *etcd_encode_watch(const char *key, const char *range_end, int64_t start_revision,
			bool no_put);

/* A key-value pair of an answer. */
struct etcd_kv {
	char *key; /* NUL-terminated after key_len bytes */
	size_t key_len;
	char *value; /* NUL-terminated after value_len bytes */
	size_t value_len;
	int64_t create_revision;
	int64_t mod_revision;
	int64_t version;
	int64_t lease;
};

/* The kvs of a range (or of one range inside a txn). */
struct etcd_range {
	struct etcd_kv *kvs;
	size_t n_kvs;
	int64_t count;
	int64_t deleted; /* response_delete_range */
};

struct etcd_event {
	bool is_delete; /* "type":"DELETE"; absent = PUT */
	struct etcd_kv kv;
};

/* Any answer of the gateway, unwrapped from {"result":...} when so wrapped
 * (watch and keepalive lines). Missing fields are zero. */
struct etcd_response {
	int64_t revision; /* header.revision */
	/* range: ranges[0]; txn: one entry per element of "responses"
	 * (empty for puts); deleterange: ranges[0].deleted. */
	struct etcd_range *ranges;
	size_t n_ranges;
	bool succeeded; /* txn */
	int64_t id;     /* lease ID */
	int64_t ttl;    /* lease TTL; <= 0 on keepalive: the lease is gone */
	/* watch */
	bool created;
	bool canceled;
	int64_t compact_revision;
	int64_t watch_id;
	struct etcd_event *events;
	size_t n_events;
	/* errors: message and gRPC code of an error body */
	char *error;
	int code;
};

/* Decode one answer: http_status of the reply (200 for a stream line) and its
 * body. Returns 0, or:
 *   -EAGAIN  503, 502, 504 (etcd unavailable or its deadline passed, e.g.
 *            no quorum: retry, maybe elsewhere)
 *   -ENOENT  404 (e.g. "requested lease not found")
 *   -EINVAL  400 (bad request: a bug on our side)
 *   -EEXIST  412
 *   -EACCES  401/403 (auth, which elasticd does not do)
 *   -EPROTO  any other non-200 status, or an {"error":...} line on 200
 *   -EBADMSG a 200 body that is not a valid answer (not JSON, wrong types,
 *            bad base64, malformed int64)
 * On errors ret->error holds the best message found (malloc'd). Always
 * release *ret with etcd_response_release. */
int etcd_response_decode(int http_status, const char *body, size_t len, struct etcd_response *ret);
/* Free the members of *resp and zero it (a zeroed one is fine too). */
void etcd_response_release(struct etcd_response *resp);

/* ---- the client --------------------------------------------------------- */

/* Completion of a unary call: err 0 with resp, or -errno with a message
 * naming the endpoint (resp may hold the decoded error). Never called from
 * inside etcd_client_call. */
typedef void (*etcd_cb)(int err, const struct etcd_response *resp, const char *errmsg, void *arg);

/* How the client talks to etcd, on the same client port either way. */
enum etcd_wire {
	ETCD_WIRE_GRPC, /* etcd's native API: gRPC over cleartext HTTP/2 */
	ETCD_WIRE_JSON, /* the grpc-gateway's JSON over HTTP/1.1 (/v3/...) */
};

/* A client of the cluster whose members are listed in endpoints
 * ("host[:port],..." port 2379 by default; numeric addresses avoid blocking
 * name lookups), speaking wire. Connects lazily. Returns NULL with *reterr
 * (malloc'd) when the list is malformed. */
struct etcd_client *etcd_client_new(struct event_base *base, const char *endpoints,
				    enum etcd_wire wire, char **reterr);

/* Make the call req (encoded now: see struct etcd_request). On a connection
 * error, no answer in 10 s, or "unavailable" (gRPC UNAVAILABLE or
 * DEADLINE_EXCEEDED; the gateway's 502, 503, 504) the call moves to the
 * next endpoint, trying each at most twice. Over gRPC, keep-alives go as
 * messages on one LeaseKeepAlive stream per client, the rest as a stream a
 * call, all on one connection per member. Returns 0 (cb will run), -EINVAL
 * for ETCD_CALL_WATCH, or -ENOMEM. */
int etcd_client_call(struct etcd_client *cl, const struct etcd_request *req, etcd_cb cb, void *arg);

/* Drop every call in flight without calling back (for the owner's free). */
void etcd_client_cancel_all(struct etcd_client *cl);

/* "gRPC" or "JSON gateway": cl's wire, for log lines. Static string. */
const char *etcd_client_wire_name(const struct etcd_client *cl);

/* "host:port" of the endpoint now in use. Static storage of cl. */
const char *etcd_client_endpoint(const struct etcd_client *cl);

/* Drop the calls in flight (no callbacks) and free cl; NULL is fine. Not
 * from inside one of cl's callbacks. */
void etcd_client_free(struct etcd_client *cl);

/* A watch event batch: resp holds the events (and header revision); err < 0
 * only for a stream error the watch reports (it keeps reconnecting), with
 * resp NULL. reset is true when events may have been missed (the start
 * revision was compacted): re-read everything. */
typedef void (*etcd_watch_cb)(int err, const struct etcd_response *resp, bool reset,
			      const char *errmsg, void *arg);

/* Watch key (with range_end for a prefix) from start_revision (0: now) on a
 * stream of its own (JSON: a connection of its own; gRPC: on the client's
 * connection to the member); no_put: deletions only (puts are filtered out by
 * etcd). After any drop it reconnects (next endpoint on errors) and resumes
 * from the last revision seen + 1. resp->watch_id is 0. */
struct etcd_watch *etcd_watch_new(struct etcd_client *cl, const char *key, const char *range_end,
				  int64_t start_revision, bool no_put, etcd_watch_cb cb, void *arg);

/* One watch of etcd_watch_new_multi (the arguments of etcd_watch_new);
 * the strings are copied. */
struct etcd_watch_spec {
	const char *key;
	const char *range_end;
	int64_t start_revision;
	bool no_put;
};
#define ETCD_WATCH_MAX 4

/* As etcd_watch_new, for n (1..ETCD_WATCH_MAX) watches on one stream (one
 * connection, one gRPC stream in etcd: its create requests go as lines of
 * one request body, which etcd's gateway takes before it answers; so the
 * set is fixed for the stream's life). Each keeps its own last revision
 * (a reconnection resumes each) and its own reset; cb's resp->watch_id is
 * the index of the watch in specs. A watch etcd cancels (its start was
 * compacted) opens the stream again at once, that watch from now (reset);
 * an answer for another id is reported as an error (err -EBADMSG) and opens
 * the stream again after a backoff. Returns NULL when n is out of range. */
struct etcd_watch *etcd_watch_new_multi(struct etcd_client *cl, const struct etcd_watch_spec *specs,
					size_t n, etcd_watch_cb cb, void *arg);
/* Move the watch to the endpoint the client's unary calls now use, when it
 * differs (a member that lost quorum may keep a stream open and silent);
 * resumes from the last revision seen + 1. Not from inside a watch_cb. */
void etcd_watch_follow(struct etcd_watch *w);

/* Close the stream and free w (no more callbacks); NULL is fine. Free the
 * watches before their client. Not from inside w's own callback. */
void etcd_watch_free(struct etcd_watch *w);
