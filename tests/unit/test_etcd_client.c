/* Unit tests of etcd_client's pure part: base64, prefix ends, request
 * encoding and response decoding (missing fields, errors, 503). */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>
#include <errno.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "etcd_client.h"

static void
test_b64_roundtrip(void **state)
{
	static const char *const plain[] = {"", "f", "fo", "foo", "foob", "fooba", "foobar"};
	static const char *const enc[] = {"",         "Zg==",     "Zm8=",    "Zm9v",
					  "Zm9vYg==", "Zm9vYmE=", "Zm9vYmFy"};

	for (size_t i = 0; i < sizeof(plain) / sizeof(plain[0]); i++) {
		char *e = etcd_b64_encode(plain[i], strlen(plain[i])), *d;
		size_t n;

		assert_string_equal(e, enc[i]);
		assert_int_equal(etcd_b64_decode(e, strlen(e), &d, &n), 0);
		assert_int_equal(n, strlen(plain[i]));
		assert_memory_equal(d, plain[i], n);
		free(d);
		free(e);
	}
}

static void
test_b64_binary_and_bad(void **state)
{
	const unsigned char bin[] = {0, 0xff, 0x10, 0x80};
	char *e = etcd_b64_encode(bin, sizeof(bin)), *d;
	size_t n;

	assert_int_equal(etcd_b64_decode(e, strlen(e), &d, &n), 0);
	assert_int_equal(n, sizeof(bin));
	assert_memory_equal(d, bin, n);
	free(d);
	free(e);
	/* Unpadded is accepted; garbage, a lone char and bad padding are not. */
	assert_int_equal(etcd_b64_decode("Zg", 2, &d, &n), 0);
	assert_int_equal(n, 1);
	free(d);
	assert_int_equal(etcd_b64_decode("Z!==", 4, &d, &n), -EINVAL);
	assert_int_equal(etcd_b64_decode("Z", 1, &d, &n), -EINVAL);
	assert_int_equal(etcd_b64_decode("Zm9=v", 5, &d, &n), -EINVAL);
}

static void
test_prefix_end(void **state)
{
	size_t n;
	char *e = etcd_prefix_end("/p/", 3, &n);

	assert_int_equal(n, 3);
	assert_string_equal(e, "/p0");
	free(e);
	e = etcd_prefix_end("a\xff", 2, &n);
	assert_int_equal(n, 1);
	assert_string_equal(e, "b");
	free(e);
	e = etcd_prefix_end("\xff", 1, &n);
	assert_int_equal(n, 1);
	assert_int_equal(e[0], '\0');
	free(e);
}

static json_t *
parse(char *s)
{
	json_t *o = json_loads(s, 0, NULL);

	assert_non_null(o);
	free(s);
	return o;
}

static void
test_encode_put_range(void **state)
{
	struct etcd_op put = {.kind = ETCD_OP_PUT,
			      .key = "/k",
			      .value = "v",
			      .value_len = 1,
			      .lease = 1234567890123};
	struct etcd_op range = {
		.kind = ETCD_OP_RANGE, .key = "/p/", .range_end = "/p0", .keys_only = true};
	json_t *o = parse(etcd_encode_op(&put));

	assert_string_equal(json_string_value(json_object_get(o, "key")), "L2s=");
	assert_string_equal(json_string_value(json_object_get(o, "value")), "dg==");
	/* int64 as a string. */
	assert_string_equal(json_string_value(json_object_get(o, "lease")), "1234567890123");
	json_decref(o);
	put.lease = 0;
	o = parse(etcd_encode_op(&put));
	assert_null(json_object_get(o, "lease"));
	json_decref(o);
	o = parse(etcd_encode_op(&range));
	assert_string_equal(json_string_value(json_object_get(o, "range_end")), "L3Aw");
	assert_true(json_is_true(json_object_get(o, "keys_only")));
	assert_null(json_object_get(o, "value"));
	assert_null(json_object_get(o, "limit"));
	assert_null(json_object_get(o, "sort_order"));
	assert_null(json_object_get(o, "min_mod_revision"));
	assert_null(json_object_get(o, "max_create_revision"));
	json_decref(o);
	/* Keys changed since a revision; keys created up to a revision. */
	range.limit = 1;
	range.min_mod_revision = 42;
	range.max_create_revision = 41;
	o = parse(etcd_encode_op(&range));
	assert_string_equal(json_string_value(json_object_get(o, "limit")), "1");
	assert_null(json_object_get(o, "sort_order"));
	assert_string_equal(json_string_value(json_object_get(o, "min_mod_revision")), "42");
	assert_string_equal(json_string_value(json_object_get(o, "max_create_revision")), "41");
	json_decref(o);
}

static void
test_encode_txn(void **state)
{
	struct etcd_cmp cmp[] = {
		{.key = "/s", .target = ETCD_CMP_MOD, .revision = 42},
		{.key = "/t", .target = ETCD_CMP_CREATE, .revision = 0},
	};
	struct etcd_op succ = {.kind = ETCD_OP_PUT, .key = "/s", .value = "x", .value_len = 1};
	struct etcd_op fail[] = {{.kind = ETCD_OP_RANGE, .key = "/s"},
				 {.kind = ETCD_OP_DELETE, .key = "/a", .range_end = ""}};
	json_t *o = parse(etcd_encode_txn(cmp, 2, &succ, 1, fail, 2)), *c0, *c1, *f1;

	c0 = json_array_get(json_object_get(o, "compare"), 0);
	c1 = json_array_get(json_object_get(o, "compare"), 1);
	assert_string_equal(json_string_value(json_object_get(c0, "target")), "MOD");
	assert_string_equal(json_string_value(json_object_get(c0, "result")), "EQUAL");
	assert_string_equal(json_string_value(json_object_get(c0, "mod_revision")), "42");
	assert_string_equal(json_string_value(json_object_get(c1, "target")), "CREATE");
	assert_string_equal(json_string_value(json_object_get(c1, "create_revision")), "0");
	assert_non_null(
		json_object_get(json_array_get(json_object_get(o, "success"), 0), "request_put"));
	assert_non_null(
		json_object_get(json_array_get(json_object_get(o, "failure"), 0), "request_range"));
	f1 = json_object_get(json_array_get(json_object_get(o, "failure"), 1),
			     "request_delete_range");
	/* "" = "\0": every key >= key. */
	assert_string_equal(json_string_value(json_object_get(f1, "range_end")), "AA==");
	json_decref(o);
}

static void
test_encode_lease_watch(void **state)
{
	json_t *o = parse(etcd_encode_lease_grant(10)), *cr;

	assert_string_equal(json_string_value(json_object_get(o, "TTL")), "10");
	json_decref(o);
	o = parse(etcd_encode_lease_id(7587869093536431367LL));
	assert_string_equal(json_string_value(json_object_get(o, "ID")), "7587869093536431367");
	json_decref(o);
	o = parse(etcd_encode_watch("/p/", "/p0", 17, false));
	cr = json_object_get(o, "create_request");
	assert_string_equal(json_string_value(json_object_get(cr, "key")), "L3Av");
	assert_string_equal(json_string_value(json_object_get(cr, "start_revision")), "17");
	assert_true(json_is_true(json_object_get(cr, "progress_notify")));
	assert_null(json_object_get(cr, "filters"));
	json_decref(o);
	o = parse(etcd_encode_watch("/p/", NULL, 0, true));
	cr = json_object_get(o, "create_request");
	assert_null(json_object_get(cr, "start_revision"));
	assert_null(json_object_get(cr, "range_end"));
	assert_string_equal(json_string_value(json_array_get(json_object_get(cr, "filters"), 0)),
			    "NOPUT");
	json_decref(o);
}

static int
decode(int status, const char *body, struct etcd_response *r)
{
	return etcd_response_decode(status, body, strlen(body), r);
}

static void
test_decode_range(void **state)
{
	struct etcd_response r;

	assert_int_equal(
		decode(200,
		       "{\"header\":{\"cluster_id\":\"1\",\"revision\":\"12\"},\"kvs\":[{\"key\":"
		       "\"L2s=\",\"create_revision\":\"4\",\"mod_revision\":\"10\",\"version\":"
		       "\"3\",\"value\":\"dg==\",\"lease\":\"99\"}],\"count\":\"1\"}",
		       &r),
		0);
	assert_int_equal(r.revision, 12);
	assert_int_equal(r.n_ranges, 1);
	assert_int_equal(r.ranges[0].count, 1);
	assert_int_equal(r.ranges[0].n_kvs, 1);
	assert_string_equal(r.ranges[0].kvs[0].key, "/k");
	assert_string_equal(r.ranges[0].kvs[0].value, "v");
	assert_int_equal(r.ranges[0].kvs[0].create_revision, 4);
	assert_int_equal(r.ranges[0].kvs[0].mod_revision, 10);
	assert_int_equal(r.ranges[0].kvs[0].lease, 99);
	etcd_response_release(&r);
}

static void
test_decode_missing_fields(void **state)
{
	struct etcd_response r;

	/* A range without match: no kvs, no count. */
	assert_int_equal(decode(200, "{\"header\":{\"revision\":\"5\"}}", &r), 0);
	assert_int_equal(r.revision, 5);
	assert_int_equal(r.n_ranges, 0);
	etcd_response_release(&r);
	/* A kv without value or revisions (keys_only, zero fields omitted). */
	assert_int_equal(decode(200, "{\"kvs\":[{\"key\":\"L2s=\"}]}", &r), 0);
	assert_int_equal(r.ranges[0].n_kvs, 1);
	assert_int_equal(r.ranges[0].kvs[0].value_len, 0);
	assert_int_equal(r.ranges[0].kvs[0].mod_revision, 0);
	etcd_response_release(&r);
	/* Numbers instead of strings are accepted. */
	assert_int_equal(decode(200, "{\"header\":{\"revision\":7},\"ID\":3,\"TTL\":\"9\"}", &r),
			 0);
	assert_int_equal(r.revision, 7);
	assert_int_equal(r.id, 3);
	assert_int_equal(r.ttl, 9);
	etcd_response_release(&r);
	/* Keepalive of an unknown lease: result without TTL. */
	assert_int_equal(decode(200, "{\"result\":{\"header\":{},\"ID\":\"3\"}}", &r), 0);
	assert_int_equal(r.ttl, 0);
	etcd_response_release(&r);
}

static void
test_decode_txn(void **state)
{
	struct etcd_response r;

	/* A failed txn: no "succeeded"; the failure ranges come back. */
	assert_int_equal(
		decode(200,
		       "{\"header\":{\"revision\":\"20\"},\"responses\":[{\"response_range\":"
		       "{\"header\":{},\"kvs\":[{\"key\":\"L3M=\",\"value\":\"eA==\","
		       "\"mod_revision\":\"19\"}],\"count\":\"1\"}},{\"response_range\":"
		       "{\"header\":{}}}]}",
		       &r),
		0);
	assert_false(r.succeeded);
	assert_int_equal(r.n_ranges, 2);
	assert_int_equal(r.ranges[0].kvs[0].mod_revision, 19);
	assert_int_equal(r.ranges[1].n_kvs, 0);
	etcd_response_release(&r);
	assert_int_equal(
		decode(200,
		       "{\"header\":{\"revision\":\"21\"},\"succeeded\":true,\"responses\":"
		       "[{\"response_put\":{\"header\":{\"revision\":\"21\"}}},"
		       "{\"response_delete_range\":{\"deleted\":\"3\"}}]}",
		       &r),
		0);
	assert_true(r.succeeded);
	assert_int_equal(r.n_ranges, 2);
	assert_int_equal(r.ranges[1].deleted, 3);
	etcd_response_release(&r);
}

static void
test_decode_watch(void **state)
{
	struct etcd_response r;

	assert_int_equal(
		decode(200, "{\"result\":{\"header\":{\"revision\":\"8\"},\"created\":true}}", &r),
		0);
	assert_true(r.created);
	assert_int_equal(r.watch_id, 0);
	assert_int_equal(r.revision, 8);
	etcd_response_release(&r);
	assert_int_equal(decode(200,
				"{\"result\":{\"header\":{\"revision\":\"10\"},\"events\":[{\"kv\":"
				"{\"key\":\"L2E=\",\"mod_revision\":\"9\",\"value\":\"MQ==\"}},"
				"{\"type\":\"DELETE\",\"kv\":{\"key\":\"L2I=\",\"mod_revision\":"
				"\"10\"}}]}}",
				&r),
			 0);
	assert_int_equal(r.n_events, 2);
	assert_false(r.events[0].is_delete);
	assert_true(r.events[1].is_delete);
	assert_string_equal(r.events[1].kv.key, "/b");
	etcd_response_release(&r);
	assert_int_equal(
		decode(200, "{\"result\":{\"canceled\":true,\"compact_revision\":\"5\"}}", &r), 0);
	assert_true(r.canceled);
	assert_int_equal(r.compact_revision, 5);
	etcd_response_release(&r);
}

static void
test_decode_errors(void **state)
{
	struct etcd_response r;

	assert_int_equal(decode(503,
				"{\"error\":\"etcdserver: request timed out\",\"message\":"
				"\"etcdserver: request timed out\",\"code\":14}",
				&r),
			 -EAGAIN);
	assert_string_equal(r.error, "etcdserver: request timed out");
	assert_int_equal(r.code, 14);
	etcd_response_release(&r);
	assert_int_equal(decode(504, "{\"error\":\"context deadline exceeded\",\"code\":4}", &r),
			 -EAGAIN);
	assert_string_equal(r.error, "context deadline exceeded");
	etcd_response_release(&r);
	assert_int_equal(decode(503, "", &r), -EAGAIN);
	assert_string_equal(r.error, "HTTP status 503");
	etcd_response_release(&r);
	assert_int_equal(
		decode(404, "{\"error\":\"etcdserver: requested lease not found\",\"code\":5}", &r),
		-ENOENT);
	etcd_response_release(&r);
	assert_int_equal(decode(400, "{\"error\":\"illegal base64 data\",\"code\":3}", &r),
			 -EINVAL);
	etcd_response_release(&r);
	assert_int_equal(decode(412, "{}", &r), -EEXIST);
	etcd_response_release(&r);
	assert_int_equal(decode(401, "x", &r), -EACCES);
	etcd_response_release(&r);
	assert_int_equal(decode(500, "<html>", &r), -EPROTO);
	etcd_response_release(&r);
	/* A stream error line on 200. */
	assert_int_equal(decode(200,
				"{\"error\":{\"grpc_code\":14,\"http_code\":503,\"message\":\"no "
				"leader\"}}",
				&r),
			 -EPROTO);
	assert_string_equal(r.error, "no leader");
	assert_int_equal(r.code, 14);
	etcd_response_release(&r);
}

static void
test_decode_malformed(void **state)
{
	static const char *const bad[] = {
		"",
		"not json",
		"[1]",
		"{\"header\":{\"revision\":\"x\"}}",
		"{\"header\":{\"revision\":\"99999999999999999999\"}}",
		"{\"header\":[]}",
		"{\"kvs\":{}}",
		"{\"kvs\":[{\"key\":\"!!\"}]}",
		"{\"kvs\":[1]}",
		"{\"succeeded\":\"yes\"}",
		"{\"responses\":[1]}",
		"{\"events\":[{\"kv\":{\"key\":3}}]}",
		"{\"events\":[{\"type\":[],\"kv\":{}}]}",
		"{\"result\":5}",
	};
	struct etcd_response r;

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		assert_int_equal(decode(200, bad[i], &r), -EBADMSG);
		assert_non_null(r.error);
		etcd_response_release(&r);
	}
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_b64_roundtrip), cmocka_unit_test(test_b64_binary_and_bad),
		cmocka_unit_test(test_prefix_end),    cmocka_unit_test(test_encode_put_range),
		cmocka_unit_test(test_encode_txn),    cmocka_unit_test(test_encode_lease_watch),
		cmocka_unit_test(test_decode_range),  cmocka_unit_test(test_decode_missing_fields),
		cmocka_unit_test(test_decode_txn),    cmocka_unit_test(test_decode_watch),
		cmocka_unit_test(test_decode_errors), cmocka_unit_test(test_decode_malformed),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
