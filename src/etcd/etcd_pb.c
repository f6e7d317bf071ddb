/* etcd_pb.c — etcd v3's gRPC messages (etcd_rpc.proto) packed and unpacked
 * with protobuf-c, gRPC's 5-byte message prefix, and answers decoded into
 * the struct etcd_response that etcd_response.c gives for the JSON gateway.
 * Pure. */
#include "etcd_pb.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "etcd_rpc.pb-c.h"
#include "util.h"

/* gRPC status codes (grpc/doc/statuscodes.md). */
enum {
	GRPC_OK = 0,
	GRPC_INVALID_ARGUMENT = 3,
	GRPC_DEADLINE_EXCEEDED = 4,
	GRPC_NOT_FOUND = 5,
	GRPC_PERMISSION_DENIED = 7,
	GRPC_FAILED_PRECONDITION = 9,
	GRPC_OUT_OF_RANGE = 11,
	GRPC_UNAVAILABLE = 14,
	GRPC_UNAUTHENTICATED = 16,
};

const char *
etcd_pb_method(enum etcd_call call)
{
	switch (call) {
	case ETCD_CALL_RANGE:
		return "/etcdserverpb.KV/Range";
	case ETCD_CALL_PUT:
		return "/etcdserverpb.KV/Put";
	case ETCD_CALL_DELETE:
		return "/etcdserverpb.KV/DeleteRange";
	case ETCD_CALL_TXN:
		return "/etcdserverpb.KV/Txn";
	case ETCD_CALL_LEASE_GRANT:
		return "/etcdserverpb.Lease/LeaseGrant";
	case ETCD_CALL_LEASE_KEEPALIVE:
		return "/etcdserverpb.Lease/LeaseKeepAlive";
	case ETCD_CALL_LEASE_REVOKE:
		return "/etcdserverpb.Lease/LeaseRevoke";
	case ETCD_CALL_WATCH:
		return "/etcdserverpb.Watch/Watch";
	}
	return "";
}

/* ---- encoding ----------------------------------------------------------- */

/* m packed behind gRPC's prefix: flag 0 (uncompressed), big-endian length. */
static uint8_t *
frame(const ProtobufCMessage *m, size_t *ret_len)
{
	size_t n = protobuf_c_message_get_packed_size(m);
	uint8_t *buf = xmalloc(ETCD_PB_FRAME + n);

	buf[0] = 0;
	buf[1] = (uint8_t)(n >> 24);
	buf[2] = (uint8_t)(n >> 16);
	buf[3] = (uint8_t)(n >> 8);
	buf[4] = (uint8_t)n;
	protobuf_c_message_pack(m, buf + ETCD_PB_FRAME);
	*ret_len = ETCD_PB_FRAME + n;
	return buf;
}

/* A NUL-terminated key as protobuf bytes (pointing into s). */
static ProtobufCBinaryData
key_bytes(const char *s)
{
	ProtobufCBinaryData b = {0, NULL};

	if (s) {
		b.len = strlen(s);
		b.data = (uint8_t *)s;
	}
	return b;
}

/* A range_end: NULL is absent (this key only); "" is the single byte "\0"
 * (every key from key on), as etcd_request.c sends it. */
static ProtobufCBinaryData
range_end_bytes(const char *s)
{
	ProtobufCBinaryData b = key_bytes(s);

	if (s && b.len == 0) {
		b.len = 1;
	}
	return b;
}

/* The three request messages an op can be; the one of op->kind is used. */
struct op_msgs {
	Etcdserverpb__RangeRequest range;
	Etcdserverpb__PutRequest put;
	Etcdserverpb__DeleteRangeRequest del;
};

/* Fill the request message of op in *m; returns it. */
static ProtobufCMessage *
op_message(const struct etcd_op *op, struct op_msgs *m)
{
	switch (op->kind) {
	case ETCD_OP_RANGE:
		etcdserverpb__range_request__init(&m->range);
		m->range.key = key_bytes(op->key);
		m->range.range_end = range_end_bytes(op->range_end);
		m->range.limit = op->limit;
		m->range.keys_only = op->keys_only;
		m->range.min_mod_revision = op->min_mod_revision;
		m->range.max_create_revision = op->max_create_revision;
		return &m->range.base;
	case ETCD_OP_PUT:
		etcdserverpb__put_request__init(&m->put);
		m->put.key = key_bytes(op->key);
		m->put.value.len = op->value ? op->value_len : 0;
		m->put.value.data = (uint8_t *)op->value;
		m->put.lease = op->lease;
		return &m->put.base;
	case ETCD_OP_DELETE:
		etcdserverpb__delete_range_request__init(&m->del);
		m->del.key = key_bytes(op->key);
		m->del.range_end = range_end_bytes(op->range_end);
		return &m->del.base;
	}
	return NULL;
}

/* op as a RequestOp of a txn, its message in *m. */
static void
request_op(const struct etcd_op *op, struct op_msgs *m, Etcdserverpb__RequestOp *ro)
{
	etcdserverpb__request_op__init(ro);
	op_message(op, m);
	switch (op->kind) {
	case ETCD_OP_RANGE:
		ro->request_case = ETCDSERVERPB__REQUEST_OP__REQUEST_REQUEST_RANGE;
		ro->request_range = &m->range;
		break;
	case ETCD_OP_PUT:
		ro->request_case = ETCDSERVERPB__REQUEST_OP__REQUEST_REQUEST_PUT;
		ro->request_put = &m->put;
		break;
	case ETCD_OP_DELETE:
		ro->request_case = ETCDSERVERPB__REQUEST_OP__REQUEST_REQUEST_DELETE_RANGE;
		ro->request_delete_range = &m->del;
		break;
	}
}

/* "target of key EQUAL revision". */
static void
compare(const struct etcd_cmp *cmp, Etcdserverpb__Compare *c)
{
	etcdserverpb__compare__init(c);
	c->result = ETCDSERVERPB__COMPARE__COMPARE_RESULT__EQUAL;
	c->key = key_bytes(cmp->key);
	switch (cmp->target) {
	case ETCD_CMP_CREATE:
		c->target = ETCDSERVERPB__COMPARE__COMPARE_TARGET__CREATE;
		c->target_union_case = ETCDSERVERPB__COMPARE__TARGET_UNION_CREATE_REVISION;
		c->create_revision = cmp->revision;
		break;
	case ETCD_CMP_MOD:
		c->target = ETCDSERVERPB__COMPARE__COMPARE_TARGET__MOD;
		c->target_union_case = ETCDSERVERPB__COMPARE__TARGET_UNION_MOD_REVISION;
		c->mod_revision = cmp->revision;
		break;
	}
}

/* A txn's ops: the RequestOps, pointers to them and their messages. */
struct txn_ops {
	Etcdserverpb__RequestOp **ptrs;
	Etcdserverpb__RequestOp *ops;
	struct op_msgs *msgs;
};

static void
txn_ops_fill(const struct etcd_op *ops, size_t n, struct txn_ops *t)
{
	t->ptrs = xcalloc(n + 1, sizeof(*t->ptrs));
	t->ops = xcalloc(n + 1, sizeof(*t->ops));
	t->msgs = xcalloc(n + 1, sizeof(*t->msgs));
	for (size_t i = 0; i < n; i++) {
		request_op(&ops[i], &t->msgs[i], &t->ops[i]);
		t->ptrs[i] = &t->ops[i];
	}
}

static void
txn_ops_free(struct txn_ops *t)
{
	free(t->ptrs);
	free(t->ops);
	free(t->msgs);
}

static uint8_t *
encode_txn(const struct etcd_request *req, size_t *ret_len)
{
	Etcdserverpb__TxnRequest txn;
	Etcdserverpb__Compare *cmps = xcalloc(req->n_cmp + 1, sizeof(*cmps));
	Etcdserverpb__Compare **cmp_ptrs = xcalloc(req->n_cmp + 1, sizeof(*cmp_ptrs));
	struct txn_ops success, failure;
	uint8_t *buf;

	etcdserverpb__txn_request__init(&txn);
	for (size_t i = 0; i < req->n_cmp; i++) {
		compare(&req->cmp[i], &cmps[i]);
		cmp_ptrs[i] = &cmps[i];
	}
	txn_ops_fill(req->success, req->n_success, &success);
	txn_ops_fill(req->failure, req->n_failure, &failure);
	txn.n_compare = req->n_cmp;
	txn.compare = cmp_ptrs;
	txn.n_success = req->n_success;
	txn.success = success.ptrs;
	txn.n_failure = req->n_failure;
	txn.failure = failure.ptrs;
	buf = frame(&txn.base, ret_len);
	txn_ops_free(&success);
	txn_ops_free(&failure);
	free(cmp_ptrs);
	free(cmps);
	return buf;
}

uint8_t *
etcd_pb_encode_request(const struct etcd_request *req, size_t *ret_len)
{
	struct op_msgs m;
	Etcdserverpb__LeaseGrantRequest grant;
	Etcdserverpb__LeaseKeepAliveRequest keepalive;
	Etcdserverpb__LeaseRevokeRequest revoke;

	*ret_len = 0;
	switch (req->call) {
	case ETCD_CALL_RANGE:
	case ETCD_CALL_PUT:
	case ETCD_CALL_DELETE:
		return frame(op_message(req->op, &m), ret_len);
	case ETCD_CALL_TXN:
		return encode_txn(req, ret_len);
	case ETCD_CALL_LEASE_GRANT:
		etcdserverpb__lease_grant_request__init(&grant);
		grant.ttl = req->ttl;
		return frame(&grant.base, ret_len);
	case ETCD_CALL_LEASE_KEEPALIVE:
		etcdserverpb__lease_keep_alive_request__init(&keepalive);
		keepalive.id = req->lease;
		return frame(&keepalive.base, ret_len);
	case ETCD_CALL_LEASE_REVOKE:
		etcdserverpb__lease_revoke_request__init(&revoke);
		revoke.id = req->lease;
		return frame(&revoke.base, ret_len);
	case ETCD_CALL_WATCH:
		return NULL;
	}
	return NULL;
}

uint8_t *
etcd_pb_encode_watch(const struct etcd_watch_spec *spec, size_t *ret_len)
{
	Etcdserverpb__WatchRequest w;
	Etcdserverpb__WatchCreateRequest create;
	Etcdserverpb__WatchCreateRequest__FilterType noput =
		ETCDSERVERPB__WATCH_CREATE_REQUEST__FILTER_TYPE__NOPUT;

	etcdserverpb__watch_request__init(&w);
	etcdserverpb__watch_create_request__init(&create);
	create.key = key_bytes(spec->key);
	create.range_end = range_end_bytes(spec->range_end);
	create.start_revision = spec->start_revision > 0 ? spec->start_revision : 0;
	create.progress_notify = true;
	if (spec->no_put) {
		create.n_filters = 1;
		create.filters = &noput;
	}
	w.request_union_case = ETCDSERVERPB__WATCH_REQUEST__REQUEST_UNION_CREATE_REQUEST;
	w.create_request = &create;
	return frame(&w.base, ret_len);
}

/* ---- framing ------------------------------------------------------------ */

int
etcd_pb_next_message(const uint8_t *buf, size_t len, const uint8_t **msg, size_t *msg_len,
		     size_t *used)
{
	uint32_t n;

	if (len < ETCD_PB_FRAME) {
		return 0;
	}
	n = (uint32_t)buf[1] << 24 | (uint32_t)buf[2] << 16 | (uint32_t)buf[3] << 8 | buf[4];
	if (buf[0] != 0 || n > ETCD_MAX_BODY) {
		return -EBADMSG;
	}
	if (len - ETCD_PB_FRAME < n) {
		return 0;
	}
	*msg = buf + ETCD_PB_FRAME;
	*msg_len = n;
	*used = ETCD_PB_FRAME + (size_t)n;
	return 1;
}

/* ---- decoding ----------------------------------------------------------- */

/* A NUL-terminated copy of b. */
static char *
copy_bytes(ProtobufCBinaryData b, size_t *ret_len)
{
	char *s = xmalloc(b.len + 1);

	if (b.len > 0) {
		memcpy(s, b.data, b.len);
	}
	s[b.len] = '\0';
	*ret_len = b.len;
	return s;
}

static void
copy_kv(const Etcdserverpb__KeyValue *from, struct etcd_kv *kv)
{
	kv->key = copy_bytes(from->key, &kv->key_len);
	kv->value = copy_bytes(from->value, &kv->value_len);
	kv->create_revision = from->create_revision;
	kv->mod_revision = from->mod_revision;
	kv->version = from->version;
	kv->lease = from->lease;
}

static struct etcd_range *
add_range(struct etcd_response *resp)
{
	resp->ranges = xrealloc(resp->ranges, (resp->n_ranges + 1) * sizeof(*resp->ranges));
	memset(&resp->ranges[resp->n_ranges], 0, sizeof(*resp->ranges));
	return &resp->ranges[resp->n_ranges++];
}

static void
copy_range(const Etcdserverpb__RangeResponse *from, struct etcd_range *r)
{
	r->count = from->count;
	r->kvs = xcalloc(from->n_kvs + 1, sizeof(*r->kvs));
	for (size_t i = 0; i < from->n_kvs; i++) {
		copy_kv(from->kvs[i], &r->kvs[i]);
		r->n_kvs++;
	}
}

static int64_t
header_revision(const Etcdserverpb__ResponseHeader *h)
{
	return h ? h->revision : 0;
}

static void
decode_txn(const Etcdserverpb__TxnResponse *t, struct etcd_response *resp)
{
	resp->revision = header_revision(t->header);
	resp->succeeded = t->succeeded;
	for (size_t i = 0; i < t->n_responses; i++) {
		const Etcdserverpb__ResponseOp *op = t->responses[i];
		struct etcd_range *r = add_range(resp);

		if (op->response_case == ETCDSERVERPB__RESPONSE_OP__RESPONSE_RESPONSE_RANGE) {
			copy_range(op->response_range, r);
		} else if (op->response_case ==
			   ETCDSERVERPB__RESPONSE_OP__RESPONSE_RESPONSE_DELETE_RANGE) {
			r->deleted = op->response_delete_range->deleted;
		}
	}
}

/* Returns -EBADMSG for an event without its kv (as the JSON decoding does). */
static int
decode_watch(const Etcdserverpb__WatchResponse *w, struct etcd_response *resp)
{
	resp->revision = header_revision(w->header);
	resp->watch_id = w->watch_id;
	resp->created = w->created;
	resp->canceled = w->canceled;
	resp->compact_revision = w->compact_revision;
	resp->events = xcalloc(w->n_events + 1, sizeof(*resp->events));
	for (size_t i = 0; i < w->n_events; i++) {
		const Etcdserverpb__Event *e = w->events[i];
		struct etcd_event *ev = &resp->events[i];

		if (!e->kv) {
			return -EBADMSG;
		}
		ev->is_delete = e->type == ETCDSERVERPB__EVENT__EVENT_TYPE__DELETE;
		copy_kv(e->kv, &ev->kv);
		resp->n_events++;
	}
	return 0;
}

/* The message etcd answers call with. */
static const ProtobufCMessageDescriptor *
answer_descriptor(enum etcd_call call)
{
	switch (call) {
	case ETCD_CALL_RANGE:
		return &etcdserverpb__range_response__descriptor;
	case ETCD_CALL_PUT:
		return &etcdserverpb__put_response__descriptor;
	case ETCD_CALL_DELETE:
		return &etcdserverpb__delete_range_response__descriptor;
	case ETCD_CALL_TXN:
		return &etcdserverpb__txn_response__descriptor;
	case ETCD_CALL_LEASE_GRANT:
		return &etcdserverpb__lease_grant_response__descriptor;
	case ETCD_CALL_LEASE_KEEPALIVE:
		return &etcdserverpb__lease_keep_alive_response__descriptor;
	case ETCD_CALL_LEASE_REVOKE:
		return &etcdserverpb__lease_revoke_response__descriptor;
	case ETCD_CALL_WATCH:
		return &etcdserverpb__watch_response__descriptor;
	}
	return NULL;
}

/* The fields of m, an unpacked answer of call, into *resp. */
static int
decode_answer(enum etcd_call call, const ProtobufCMessage *m, struct etcd_response *resp)
{
	const Etcdserverpb__RangeResponse *range = (const void *)m;
	const Etcdserverpb__PutResponse *put = (const void *)m;
	const Etcdserverpb__DeleteRangeResponse *del = (const void *)m;
	const Etcdserverpb__LeaseGrantResponse *grant = (const void *)m;
	const Etcdserverpb__LeaseKeepAliveResponse *keepalive = (const void *)m;
	const Etcdserverpb__LeaseRevokeResponse *revoke = (const void *)m;

	switch (call) {
	case ETCD_CALL_RANGE:
		resp->revision = header_revision(range->header);
		copy_range(range, add_range(resp));
		return 0;
	case ETCD_CALL_PUT:
		resp->revision = header_revision(put->header);
		return 0;
	case ETCD_CALL_DELETE:
		resp->revision = header_revision(del->header);
		add_range(resp)->deleted = del->deleted;
		return 0;
	case ETCD_CALL_TXN:
		decode_txn((const void *)m, resp);
		return 0;
	case ETCD_CALL_LEASE_GRANT:
		resp->revision = header_revision(grant->header);
		resp->id = grant->id;
		resp->ttl = grant->ttl;
		return 0;
	case ETCD_CALL_LEASE_KEEPALIVE:
		resp->revision = header_revision(keepalive->header);
		resp->id = keepalive->id;
		resp->ttl = keepalive->ttl;
		return 0;
	case ETCD_CALL_LEASE_REVOKE:
		resp->revision = header_revision(revoke->header);
		return 0;
	case ETCD_CALL_WATCH:
		return decode_watch((const void *)m, resp);
	}
	return -EBADMSG;
}

int
etcd_pb_decode(enum etcd_call call, const uint8_t *msg, size_t len, struct etcd_response *ret)
{
	const ProtobufCMessageDescriptor *d = answer_descriptor(call);
	ProtobufCMessage *m;
	int err;

	memset(ret, 0, sizeof(*ret));
	if (len > ETCD_MAX_BODY) {
		ret->error = xstrdup("answer too large");
		return -EBADMSG;
	}
	m = protobuf_c_message_unpack(d, NULL, len, msg);
	if (!m) {
		ret->error = xasprintf("malformed %s", d->name);
		return -EBADMSG;
	}
	err = decode_answer(call, m, ret);
	protobuf_c_message_free_unpacked(m, NULL);
	if (err < 0) {
		etcd_response_release(ret);
		ret->error = xasprintf("malformed %s", d->name);
	}
	return err;
}

int
etcd_pb_status_errno(int code)
{
	switch (code) {
	case GRPC_OK:
		return 0;
	case GRPC_UNAVAILABLE:
	case GRPC_DEADLINE_EXCEEDED:
		return -EAGAIN;
	case GRPC_NOT_FOUND:
		return -ENOENT;
	case GRPC_INVALID_ARGUMENT:
	case GRPC_OUT_OF_RANGE:
		return -EINVAL;
	case GRPC_FAILED_PRECONDITION:
		return -EEXIST;
	case GRPC_PERMISSION_DENIED:
	case GRPC_UNAUTHENTICATED:
		return -EACCES;
	default:
		return -EPROTO;
	}
}
