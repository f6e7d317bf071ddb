/* etcd_request.c — what elasticd sends to etcd's v3 JSON gateway: keys and
 * values in base64 (both ways: answers carry them so too), range ends of
 * prefixes, and the JSON bodies of txn, lease and watch requests. Pure. */
#include "etcd_client.h"

#include <errno.h>
#include <inttypes.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util.h"

/* ---- base64 ------------------------------------------------------------- */

static const char b64_alphabet[] =
	"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

char *
etcd_b64_encode(const void *data, size_t len)
{
	const unsigned char *p = data;
	char *out = xmalloc((len + 2) / 3 * 4 + 1), *o = out;
	size_t i;

	for (i = 0; i + 2 < len; i += 3) {
		uint32_t v = (uint32_t)p[i] << 16 | (uint32_t)p[i + 1] << 8 | p[i + 2];

		*o++ = b64_alphabet[v >> 18];
		*o++ = b64_alphabet[(v >> 12) & 63];
		*o++ = b64_alphabet[(v >> 6) & 63];
		*o++ = b64_alphabet[v & 63];
	}
	if (i < len) {
		uint32_t v = (uint32_t)p[i] << 16 | (i + 1 < len ? (uint32_t)p[i + 1] << 8 : 0);

		*o++ = b64_alphabet[v >> 18];
		*o++ = b64_alphabet[(v >> 12) & 63];
		*o++ = i + 1 < len ? b64_alphabet[(v >> 6) & 63] : '=';
		*o++ = '=';
	}
	*o = '\0';
	return out;
}

static int
b64_value(char c)
{
	if (c >= 'A' && c <= 'Z') {
		return c - 'A';
	}
	if (c >= 'a' && c <= 'z') {
		return c - 'a' + 26;
	}
	if (c >= '0' && c <= '9') {
		return c - '0' + 52;
	}
	if (c == '+') {
		return 62;
	}
	if (c == '/') {
		return 63;
	}
	return -1;
}

int
etcd_b64_decode(const char *s, size_t slen, char **ret, size_t *ret_len)
{
	char *out;
	size_t n = 0, pad = 0;
	uint32_t acc = 0;
	int bits = 0;

	while (pad < 2 && slen > 0 && s[slen - 1] == '=') {
		slen--;
		pad++;
	}
	if (slen % 4 == 1 || (pad > 0 && (slen + pad) % 4 != 0)) {
		return -EINVAL;
	}
	out = xmalloc(slen / 4 * 3 + 3);
	for (size_t i = 0; i < slen; i++) {
		int v = b64_value(s[i]);

		if (v < 0) {
			free(out);
			return -EINVAL;
		}
		acc = acc << 6 | (uint32_t)v;
		bits += 6;
		if (bits >= 8) {
			bits -= 8;
			out[n++] = (char)((acc >> bits) & 0xff);
		}
	}
	out[n] = '\0';
	*ret = out;
	*ret_len = n;
	return 0;
}

char *
etcd_prefix_end(const char *prefix, size_t len, size_t *ret_len)
{
	char *end = xmalloc(len + 2);

	memcpy(end, prefix, len);
	while (len > 0 && (unsigned char)end[len - 1] == 0xff) {
		len--;
	}
	if (len == 0) {
		end[0] = '\0';
		*ret_len = 1;
		return end;
	}
	end[len - 1] = (char)((unsigned char)end[len - 1] + 1);
	end[len] = '\0';
	*ret_len = len;
	return end;
}

/* ---- encoding ----------------------------------------------------------- */

static json_t *
json_b64(const void *data, size_t len)
{
	char *s = etcd_b64_encode(data, len);
	json_t *j = json_string(s);

	free(s);
	return j;
}

static json_t *
json_i64(int64_t v)
{
	char buf[32];

	snprintf(buf, sizeof(buf), "%" PRId64, v);
	return json_string(buf);
}

static char *
dump(json_t *o)
{
	char *s = json_dumps(o, JSON_COMPACT);

	json_decref(o);
	if (!s) {
		abort();
	}
	return s;
}

static json_t *
op_object(const struct etcd_op *op)
{
	json_t *o = json_object();

	json_object_set_new(o, "key", json_b64(op->key, strlen(op->key)));
	if (op->range_end) {
		size_t n = strlen(op->range_end);

		/* "" stands for "\0": every key >= key. */
		json_object_set_new(o, "range_end", json_b64(op->range_end, n ? n : 1));
	}
	switch (op->kind) {
	case ETCD_OP_RANGE:
		if (op->keys_only) {
			json_object_set_new(o, "keys_only", json_true());
		}
		if (op->limit > 0) {
			json_object_set_new(o, "limit", json_i64(op->limit));
		}
		if (op->min_mod_revision > 0) {
			json_object_set_new(o, "min_mod_revision", json_i64(op->min_mod_revision));
		}
		if (op->max_create_revision > 0) {
			json_object_set_new(o, "max_create_revision",
					    json_i64(op->max_create_revision));
		}
		break;
	case ETCD_OP_PUT:
		json_object_set_new(
			o, "value",
			json_b64(op->value ? op->value : "", op->value ? op->value_len : 0));
		if (op->lease != 0) {
			json_object_set_new(o, "lease", json_i64(op->lease));
		}
		break;
	case ETCD_OP_DELETE:
		break;
	}
	return o;
}

char *
etcd_encode_op(const struct etcd_op *op)
{
	return dump(op_object(op));
}

static json_t *
request_ops(const struct etcd_op *ops, size_t n)
{
	json_t *a = json_array();

	for (size_t i = 0; i < n; i++) {
		const char *name = "request_range";

		switch (ops[i].kind) {
		case ETCD_OP_RANGE:
			name = "request_range";
			break;
		case ETCD_OP_PUT:
			name = "request_put";
			break;
		case ETCD_OP_DELETE:
			name = "request_delete_range";
			break;
		}
		json_array_append_new(a, json_pack("{so}", name, op_object(&ops[i])));
	}
	return a;
}

char *
etcd_encode_txn(const struct etcd_cmp *cmp, size_t n_cmp, const struct etcd_op *success,
		size_t n_success, const struct etcd_op *failure, size_t n_failure)
{
	json_t *o = json_object(), *c = json_array();

	for (size_t i = 0; i < n_cmp; i++) {
		bool create = cmp[i].target == ETCD_CMP_CREATE;

		json_array_append_new(
			c, json_pack("{sossssso}", "key", json_b64(cmp[i].key, strlen(cmp[i].key)),
				     "target", create ? "CREATE" : "MOD", "result", "EQUAL",
				     create ? "create_revision" : "mod_revision",
				     json_i64(cmp[i].revision)));
	}
	json_object_set_new(o, "compare", c);
	json_object_set_new(o, "success", request_ops(success, n_success));
	json_object_set_new(o, "failure", request_ops(failure, n_failure));
	return dump(o);
}

char *
etcd_encode_lease_grant(int64_t ttl_sec)
{
	return dump(json_pack("{so}", "TTL", json_i64(ttl_sec)));
}

char *
etcd_encode_lease_id(int64_t id)
{
	return dump(json_pack("{so}", "ID", json_i64(id)));
}

char *
etcd_encode_watch(const char *key, const char *range_end, int64_t start_revision, bool no_put)
{
	json_t *o = json_object();

	json_object_set_new(o, "key", json_b64(key, strlen(key)));
	if (range_end) {
		size_t n = strlen(range_end);

		json_object_set_new(o, "range_end", json_b64(range_end, n ? n : 1));
	}
	if (start_revision > 0) {
		json_object_set_new(o, "start_revision", json_i64(start_revision));
	}
	json_object_set_new(o, "progress_notify", json_true());
	if (no_put) {
		json_object_set_new(o, "filters", json_pack("[s]", "NOPUT"));
	}
	return dump(json_pack("{so}", "create_request", o));
}

const char *
etcd_request_path(enum etcd_call call)
{
	switch (call) {
	case ETCD_CALL_RANGE:
		return "/v3/kv/range";
	case ETCD_CALL_PUT:
		return "/v3/kv/put";
	case ETCD_CALL_DELETE:
		return "/v3/kv/deleterange";
	case ETCD_CALL_TXN:
		return "/v3/kv/txn";
	case ETCD_CALL_LEASE_GRANT:
		return "/v3/lease/grant";
	case ETCD_CALL_LEASE_KEEPALIVE:
		return "/v3/lease/keepalive";
	case ETCD_CALL_LEASE_REVOKE:
		return "/v3/lease/revoke";
	case ETCD_CALL_WATCH:
		return "/v3/watch";
	}
	return "/";
}

char *
etcd_encode_request(const struct etcd_request *req)
{
	switch (req->call) {
	case ETCD_CALL_RANGE:
	case ETCD_CALL_PUT:
	case ETCD_CALL_DELETE:
		return etcd_encode_op(req->op);
	case ETCD_CALL_TXN:
		return etcd_encode_txn(req->cmp, req->n_cmp, req->success, req->n_success,
				       req->failure, req->n_failure);
	case ETCD_CALL_LEASE_GRANT:
		return etcd_encode_lease_grant(req->ttl);
	case ETCD_CALL_LEASE_KEEPALIVE:
	case ETCD_CALL_LEASE_REVOKE:
		return etcd_encode_lease_id(req->lease);
	case ETCD_CALL_WATCH:
		break;
	}
	return xstrdup("{}");
}
