/* etcd_response.c — decoding the answers of etcd's v3 JSON gateway, unary and
 * stream lines alike, into struct etcd_response. Pure. */
#include "etcd_client.h"

#include <errno.h>
#include <inttypes.h>
#include <jansson.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util.h"

/* ---- decoding ----------------------------------------------------------- */

/* An int64 field: absent = 0; a string of digits or an integer. */
static int
get_i64(const json_t *o, const char *name, int64_t *ret)
{
	const json_t *v = json_object_get(o, name);
	long long x;

	*ret = 0;
	if (!v || json_is_null(v)) {
		return 0;
	}
	if (json_is_integer(v)) {
		*ret = json_integer_value(v);
		return 0;
	}
	if (!json_is_string(v) || parse_int(json_string_value(v), LLONG_MIN, LLONG_MAX, &x) < 0) {
		return -EBADMSG;
	}
	*ret = x;
	return 0;
}

static int
get_bool(const json_t *o, const char *name, bool *ret)
{
	const json_t *v = json_object_get(o, name);

	*ret = false;
	if (!v || json_is_null(v)) {
		return 0;
	}
	if (!json_is_boolean(v)) {
		return -EBADMSG;
	}
	*ret = json_is_true(v);
	return 0;
}

static int
get_bytes(const json_t *o, const char *name, char **ret, size_t *ret_len)
{
	const json_t *v = json_object_get(o, name);

	if (!v || json_is_null(v)) {
		*ret = xstrdup("");
		*ret_len = 0;
		return 0;
	}
	if (!json_is_string(v) ||
	    etcd_b64_decode(json_string_value(v), json_string_length(v), ret, ret_len) < 0) {
		*ret = NULL;
		return -EBADMSG;
	}
	return 0;
}

static void
kv_release(struct etcd_kv *kv)
{
	free(kv->key);
	free(kv->value);
	memset(kv, 0, sizeof(*kv));
}

static int
decode_kv(const json_t *o, struct etcd_kv *kv)
{
	memset(kv, 0, sizeof(*kv));
	if (!json_is_object(o) || get_bytes(o, "key", &kv->key, &kv->key_len) < 0 ||
	    get_bytes(o, "value", &kv->value, &kv->value_len) < 0 ||
	    get_i64(o, "create_revision", &kv->create_revision) < 0 ||
	    get_i64(o, "mod_revision", &kv->mod_revision) < 0 ||
	    get_i64(o, "version", &kv->version) < 0 || get_i64(o, "lease", &kv->lease) < 0) {
		kv_release(kv);
		return -EBADMSG;
	}
	return 0;
}

static int
decode_range(const json_t *o, struct etcd_range *r)
{
	const json_t *kvs = json_object_get(o, "kvs");

	memset(r, 0, sizeof(*r));
	if (!json_is_object(o) || get_i64(o, "count", &r->count) < 0 ||
	    get_i64(o, "deleted", &r->deleted) < 0) {
		return -EBADMSG;
	}
	if (!kvs || json_is_null(kvs)) {
		return 0;
	}
	if (!json_is_array(kvs)) {
		return -EBADMSG;
	}
	r->kvs = xcalloc(json_array_size(kvs) + 1, sizeof(*r->kvs));
	for (size_t i = 0; i < json_array_size(kvs); i++) {
		if (decode_kv(json_array_get(kvs, i), &r->kvs[i]) < 0) {
			return -EBADMSG;
		}
		r->n_kvs++;
	}
	return 0;
}

static void
range_release(struct etcd_range *r)
{
	for (size_t i = 0; i < r->n_kvs; i++) {
		kv_release(&r->kvs[i]);
	}
	free(r->kvs);
	memset(r, 0, sizeof(*r));
}

void
etcd_response_release(struct etcd_response *resp)
{
	for (size_t i = 0; i < resp->n_ranges; i++) {
		range_release(&resp->ranges[i]);
	}
	free(resp->ranges);
	for (size_t i = 0; i < resp->n_events; i++) {
		kv_release(&resp->events[i].kv);
	}
	free(resp->events);
	free(resp->error);
	memset(resp, 0, sizeof(*resp));
}

static struct etcd_range *
add_range(struct etcd_response *resp)
{
	resp->ranges = xrealloc(resp->ranges, (resp->n_ranges + 1) * sizeof(*resp->ranges));
	memset(&resp->ranges[resp->n_ranges], 0, sizeof(*resp->ranges));
	return &resp->ranges[resp->n_ranges++];
}

/* The fields of a successful answer. */
static int
decode_body(const json_t *o, struct etcd_response *resp)
{
	const json_t *header = json_object_get(o, "header"), *responses, *events;
	const char *type_names[] = {"response_range", "response_put", "response_delete_range"};

	if (header &&
	    (!json_is_object(header) || get_i64(header, "revision", &resp->revision) < 0)) {
		return -EBADMSG;
	}
	if (get_bool(o, "succeeded", &resp->succeeded) < 0 || get_i64(o, "ID", &resp->id) < 0 ||
	    get_i64(o, "TTL", &resp->ttl) < 0 || get_bool(o, "created", &resp->created) < 0 ||
	    get_bool(o, "canceled", &resp->canceled) < 0 ||
	    get_i64(o, "compact_revision", &resp->compact_revision) < 0 ||
	    get_i64(o, "watch_id", &resp->watch_id) < 0) {
		return -EBADMSG;
	}
	if (json_object_get(o, "kvs") || json_object_get(o, "count") ||
	    json_object_get(o, "deleted")) {
		if (decode_range(o, add_range(resp)) < 0) {
			return -EBADMSG;
		}
	}
	responses = json_object_get(o, "responses");
	if (responses && !json_is_null(responses)) {
		if (!json_is_array(responses)) {
			return -EBADMSG;
		}
		for (size_t i = 0; i < json_array_size(responses); i++) {
			const json_t *r = json_array_get(responses, i), *inner = NULL;
			struct etcd_range *rg = add_range(resp);

			if (!json_is_object(r)) {
				return -EBADMSG;
			}
			for (size_t t = 0; t < ARRAY_SIZE(type_names) && !inner; t++) {
				inner = json_object_get(r, type_names[t]);
			}
			if (inner && decode_range(inner, rg) < 0) {
				return -EBADMSG;
			}
		}
	}
	events = json_object_get(o, "events");
	if (events && !json_is_null(events)) {
		if (!json_is_array(events)) {
			return -EBADMSG;
		}
		resp->events = xcalloc(json_array_size(events) + 1, sizeof(*resp->events));
		for (size_t i = 0; i < json_array_size(events); i++) {
			const json_t *e = json_array_get(events, i), *type;
			struct etcd_event *ev = &resp->events[resp->n_events];

			if (!json_is_object(e)) {
				return -EBADMSG;
			}
			type = json_object_get(e, "type");
			if (type && !json_is_null(type)) {
				if (json_is_string(type)) {
					ev->is_delete =
						strcmp(json_string_value(type), "DELETE") == 0;
				} else if (json_is_integer(type)) {
					ev->is_delete = json_integer_value(type) == 1;
				} else {
					return -EBADMSG;
				}
			}
			if (decode_kv(json_object_get(e, "kv"), &ev->kv) < 0) {
				return -EBADMSG;
			}
			resp->n_events++;
		}
	}
	return 0;
}

/* {"error":"...","message":"...","code":N} or, on streams,
 * {"error":{"grpc_code":N,"http_code":N,"message":"...","http_status":"..."}}. */
static void
decode_error(const json_t *o, struct etcd_response *resp)
{
	const json_t *e = json_object_get(o, "error"), *m = json_object_get(o, "message"),
		     *c = json_object_get(o, "code");

	if (json_is_object(e)) {
		m = json_object_get(e, "message");
		c = json_object_get(e, "grpc_code");
	}
	if (json_is_string(m) && json_string_length(m) > 0) {
		resp->error = xstrdup(json_string_value(m));
	} else if (json_is_string(e) && json_string_length(e) > 0) {
		resp->error = xstrdup(json_string_value(e));
	}
	if (json_is_integer(c)) {
		resp->code = (int)json_integer_value(c);
	}
}

int
etcd_response_decode(int http_status, const char *body, size_t len, struct etcd_response *ret)
{
	json_t *root = NULL, *o;
	int err = 0;

	memset(ret, 0, sizeof(*ret));
	if (len > ETCD_MAX_BODY) {
		ret->error = xstrdup("answer too large");
		return -EBADMSG;
	}
	root = body && len > 0 ? json_loadb(body, len, 0, NULL) : NULL;
	if (http_status != 200) {
		if (json_is_object(root)) {
			decode_error(root, ret);
		}
		if (!ret->error) {
			ret->error = xasprintf("HTTP status %d", http_status);
		}
		json_decref(root);
		switch (http_status) {
		case 502:
		case 503:
		case 504:
			/* Unavailable, or its deadline passed (no quorum). */
			return -EAGAIN;
		case 404:
			return -ENOENT;
		case 400:
			return -EINVAL;
		case 412:
			return -EEXIST;
		case 401:
		case 403:
			return -EACCES;
		}
		return -EPROTO;
	}
	if (!json_is_object(root)) {
		json_decref(root);
		ret->error = xstrdup("answer is not a JSON object");
		return -EBADMSG;
	}
	if (json_object_get(root, "error")) {
		decode_error(root, ret);
		if (!ret->error) {
			ret->error = xstrdup("error without a message");
		}
		json_decref(root);
		return -EPROTO;
	}
	o = json_object_get(root, "result");
	if (!o) {
		o = root;
	} else if (!json_is_object(o)) {
		err = -EBADMSG;
	}
	if (err == 0) {
		err = decode_body(o, ret);
	}
	json_decref(root);
	if (err < 0) {
		etcd_response_release(ret);
		ret->error = xstrdup("malformed answer");
	}
	return err;
}
