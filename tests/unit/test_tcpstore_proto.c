/* TCPStore wire protocol: the frames torch 1.13 was observed to send (reference
 * tcpstore-protocol.md §3) decode to the right requests and encode back to the
 * same bytes; v2 numbering; incremental decoding; limits; replies; ADD's
 * std::stoll rules. */
#include <errno.h>
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>

#include "tcpstore_proto.h"
#include "util.h"
#include "unhex.h"

/* Hex with spaces ignored into a malloc'd buffer. */
struct frame_case {
	const char *name;
	enum tcpstore_dialect dialect;
	const char *hex;
	enum tcpstore_cmd cmd;
	const char *key;
	const char *value;
	const char *desired;
	int64_t delta;
	size_t n;
	const char *keys[2];
	uint32_t u32;
};

static const struct frame_case frames[] = {
	{.name = "set k1=v1",
	 .dialect = TCPSTORE_DIALECT_LEGACY,
	 .hex = "00 0300000000000000 2f6b31 0200000000000000 7631",
	 .cmd = TCPSTORE_CMD_SET,
	 .key = "/k1",
	 .value = "v1"},
	{.name = "wait k1 (get, part 1)",
	 .dialect = TCPSTORE_DIALECT_LEGACY,
	 .hex = "05 0100000000000000 0300000000000000 2f6b31",
	 .cmd = TCPSTORE_CMD_WAIT,
	 .n = 1,
	 .keys = {"/k1"}},
	{.name = "get k1",
	 .dialect = TCPSTORE_DIALECT_LEGACY,
	 .hex = "02 0300000000000000 2f6b31",
	 .cmd = TCPSTORE_CMD_GET,
	 .key = "/k1"},
	{.name = "add cnt 5",
	 .dialect = TCPSTORE_DIALECT_LEGACY,
	 .hex = "03 0400000000000000 2f636e74 0500000000000000",
	 .cmd = TCPSTORE_CMD_ADD,
	 .key = "/cnt",
	 .delta = 5},
	{.name = "add cnt -2",
	 .dialect = TCPSTORE_DIALECT_LEGACY,
	 .hex = "03 0400000000000000 2f636e74 feffffffffffffff",
	 .cmd = TCPSTORE_CMD_ADD,
	 .key = "/cnt",
	 .delta = -2},
	{.name = "compare_set create",
	 .dialect = TCPSTORE_DIALECT_LEGACY,
	 .hex = "01 0400000000000000 2f636173 0000000000000000 0300000000000000 6e6577",
	 .cmd = TCPSTORE_CMD_COMPARE_SET,
	 .key = "/cas",
	 .value = "",
	 .desired = "new"},
	{.name = "num_keys",
	 .dialect = TCPSTORE_DIALECT_LEGACY,
	 .hex = "06",
	 .cmd = TCPSTORE_CMD_GETNUMKEYS},
	{.name = "wait two keys",
	 .dialect = TCPSTORE_DIALECT_LEGACY,
	 .hex = "05 0200000000000000 0300000000000000 2f6b31 0400000000000000 2f636e74",
	 .cmd = TCPSTORE_CMD_WAIT,
	 .n = 2,
	 .keys = {"/k1", "/cnt"}},
	{.name = "delete_key",
	 .dialect = TCPSTORE_DIALECT_LEGACY,
	 .hex = "08 0400000000000000 2f636173",
	 .cmd = TCPSTORE_CMD_DELETE_KEY,
	 .key = "/cas"},
	{.name = "set empty value",
	 .dialect = TCPSTORE_DIALECT_LEGACY,
	 .hex = "00 0600000000000000 2f656d707479 0000000000000000",
	 .cmd = TCPSTORE_CMD_SET,
	 .key = "/empty",
	 .value = ""},
	{.name = "worker init/",
	 .dialect = TCPSTORE_DIALECT_LEGACY,
	 .hex = "03 0500000000000000 696e69742f 0100000000000000",
	 .cmd = TCPSTORE_CMD_ADD,
	 .key = "init/",
	 .delta = 1},
	{.name = "check two keys",
	 .dialect = TCPSTORE_DIALECT_LEGACY,
	 .hex = "04 0200000000000000 0200000000000000 2f61 0300000000000000 2f7a7a",
	 .cmd = TCPSTORE_CMD_CHECK,
	 .n = 2,
	 .keys = {"/a", "/zz"}},
	{.name = "watch_key",
	 .dialect = TCPSTORE_DIALECT_LEGACY,
	 .hex = "07 0200000000000000 2f77",
	 .cmd = TCPSTORE_CMD_WATCH_KEY,
	 .key = "/w"},
	{.name = "v2 validate",
	 .dialect = TCPSTORE_DIALECT_V2,
	 .hex = "00 cef7853c",
	 .cmd = TCPSTORE_CMD_VALIDATE,
	 .u32 = TCPSTORE_VALIDATE_MAGIC},
	{.name = "v2 ping",
	 .dialect = TCPSTORE_DIALECT_V2,
	 .hex = "0d d2040000",
	 .cmd = TCPSTORE_CMD_PING,
	 .u32 = 1234},
	{.name = "v2 set",
	 .dialect = TCPSTORE_DIALECT_V2,
	 .hex = "01 0100000000000000 61 0100000000000000 31",
	 .cmd = TCPSTORE_CMD_SET,
	 .key = "a",
	 .value = "1"},
	{.name = "v2 get",
	 .dialect = TCPSTORE_DIALECT_V2,
	 .hex = "03 0100000000000000 61",
	 .cmd = TCPSTORE_CMD_GET,
	 .key = "a"},
	{.name = "v2 multi_get",
	 .dialect = TCPSTORE_DIALECT_V2,
	 .hex = "0a 0200000000000000 0100000000000000 61 0100000000000000 62",
	 .cmd = TCPSTORE_CMD_MULTI_GET,
	 .n = 2,
	 .keys = {"a", "b"}},
	{.name = "v2 cancel_wait",
	 .dialect = TCPSTORE_DIALECT_V2,
	 .hex = "0c",
	 .cmd = TCPSTORE_CMD_CANCEL_WAIT},
	{.name = "v2 append",
	 .dialect = TCPSTORE_DIALECT_V2,
	 .hex = "09 0100000000000000 61 0100000000000000 78",
	 .cmd = TCPSTORE_CMD_APPEND,
	 .key = "a",
	 .value = "x"},
	/* torch >= 2.7 queues: queue_push("q", b"v1"), queue_pop("q"), queue_len("q")
	 * through TCPStore's "/" key prefix. */
	{.name = "v2 queue_push",
	 .dialect = TCPSTORE_DIALECT_V2,
	 .hex = "0e 0200000000000000 2f71 0200000000000000 7631",
	 .cmd = TCPSTORE_CMD_QUEUE_PUSH,
	 .key = "/q",
	 .value = "v1"},
	{.name = "v2 queue_push empty value",
	 .dialect = TCPSTORE_DIALECT_V2,
	 .hex = "0e 0200000000000000 2f71 0000000000000000",
	 .cmd = TCPSTORE_CMD_QUEUE_PUSH,
	 .key = "/q",
	 .value = ""},
	{.name = "v2 queue_pop",
	 .dialect = TCPSTORE_DIALECT_V2,
	 .hex = "0f 0200000000000000 2f71",
	 .cmd = TCPSTORE_CMD_QUEUE_POP,
	 .key = "/q"},
	{.name = "v2 queue_len",
	 .dialect = TCPSTORE_DIALECT_V2,
	 .hex = "10 0200000000000000 2f71",
	 .cmd = TCPSTORE_CMD_QUEUE_LEN,
	 .key = "/q"},
};

static void
assert_bytes(const struct tcpstore_bytes *b, const char *want)
{
	if (!want) {
		assert_int_equal(b->len, 0);
		return;
	}
	assert_int_equal(b->len, strlen(want));
	assert_memory_equal(b->data, want, b->len);
}

static void
test_frames(void **state)
{
	struct tcpstore_limits lim;

	tcpstore_limits_default(&lim);
	for (size_t i = 0; i < ARRAY_SIZE(frames); i++) {
		const struct frame_case *fc = &frames[i];
		struct tcpstore_req req;
		struct tcpstore_buf b = {0};
		size_t len, used = 0;
		uint8_t *buf = unhex(fc->hex, &len);

		print_message("%s\n", fc->name);
		assert_int_equal(tcpstore_req_decode(buf, len, fc->dialect, &lim, &req, &used), 1);
		assert_int_equal(used, len);
		assert_int_equal(req.cmd, fc->cmd);
		assert_bytes(&req.key, fc->key);
		if (fc->cmd != TCPSTORE_CMD_PING && fc->cmd != TCPSTORE_CMD_VALIDATE) {
			assert_bytes(&req.value, fc->value);
		}
		assert_bytes(&req.desired, fc->desired);
		assert_int_equal(req.delta, fc->delta);
		assert_int_equal(req.u32, fc->u32);
		assert_int_equal(req.n, fc->n);
		for (size_t k = 0; k < fc->n; k++) {
			assert_bytes(&req.keys[k], fc->keys[k]);
		}
		/* Every proper prefix is incomplete and asks for more than it has. */
		for (size_t cut = 0; cut < len; cut++) {
			struct tcpstore_req part;
			size_t need = 0;

			assert_int_equal(
				tcpstore_req_decode(buf, cut, fc->dialect, &lim, &part, &need), 0);
			assert_true(need > cut && need <= len);
		}
		/* Encoding gives the captured bytes back. */
		assert_int_equal(tcpstore_req_encode(&b, fc->dialect, &req), 0);
		assert_int_equal(b.len, len);
		assert_memory_equal(b.data, buf, len);
		tcpstore_buf_release(&b);
		tcpstore_req_release(&req);
		free(buf);
	}
}

static void
test_pipelined(void **state)
{
	struct tcpstore_limits lim;
	size_t len, used, off = 0;
	uint8_t *buf = unhex("06 02 0100000000000000 61 06", &len);
	enum tcpstore_cmd want[] = {TCPSTORE_CMD_GETNUMKEYS, TCPSTORE_CMD_GET,
				    TCPSTORE_CMD_GETNUMKEYS};

	tcpstore_limits_default(&lim);
	for (size_t i = 0; i < ARRAY_SIZE(want); i++) {
		struct tcpstore_req req;

		assert_int_equal(tcpstore_req_decode(buf + off, len - off, TCPSTORE_DIALECT_LEGACY,
						     &lim, &req, &used),
				 1);
		assert_int_equal(req.cmd, want[i]);
		off += used;
	}
	assert_int_equal(off, len);
	free(buf);
}

struct bad_case {
	const char *name;
	enum tcpstore_dialect dialect;
	const char *hex;
	int want;
};

static const struct bad_case bads[] = {
	{"unknown legacy byte", TCPSTORE_DIALECT_LEGACY, "20", -EPROTO},
	{"ping is not legacy", TCPSTORE_DIALECT_LEGACY, "0d 00000000", -EPROTO},
	{"queue_push is not legacy", TCPSTORE_DIALECT_LEGACY, "0e 0100000000000000 61", -EPROTO},
	{"queue_pop is not legacy", TCPSTORE_DIALECT_LEGACY, "0f", -EPROTO},
	{"queue_len is not legacy", TCPSTORE_DIALECT_LEGACY, "10", -EPROTO},
	{"list is not served", TCPSTORE_DIALECT_V2, "11", -EPROTO},
	{"queue_push key over 8 KiB", TCPSTORE_DIALECT_V2, "0e 0120000000000000", -E2BIG},
	{"queue_push value over 8 MiB", TCPSTORE_DIALECT_V2,
	 "0e 0100000000000000 71 0100800000000000", -E2BIG},
	{"queue_pop key over 8 KiB", TCPSTORE_DIALECT_V2, "0f 0120000000000000", -E2BIG},
	{"queue_len absurd key", TCPSTORE_DIALECT_V2, "10 ffffffffffffffff", -E2BIG},
	{"watch_key is not v2", TCPSTORE_DIALECT_V2, "07 0100000000000000 61", 1},
	{"key over 8 KiB", TCPSTORE_DIALECT_LEGACY, "00 0120000000000000", -E2BIG},
	{"absurd key length", TCPSTORE_DIALECT_LEGACY, "02 0000000000000040", -E2BIG},
	{"value over 8 MiB", TCPSTORE_DIALECT_LEGACY, "00 0100000000000000 61 0100800000000000",
	 -E2BIG},
	{"too many keys", TCPSTORE_DIALECT_LEGACY, "05 0100020000000000", -E2BIG},
	{"multi_set too many", TCPSTORE_DIALECT_V2, "0b ffffffffffffffff", -E2BIG},
};

static void
test_bad_frames(void **state)
{
	struct tcpstore_limits lim;

	tcpstore_limits_default(&lim);
	for (size_t i = 0; i < ARRAY_SIZE(bads); i++) {
		struct tcpstore_req req;
		size_t len, used = 0;
		uint8_t *buf = unhex(bads[i].hex, &len);
		int r = tcpstore_req_decode(buf, len, bads[i].dialect, &lim, &req, &used);

		print_message("%s\n", bads[i].name);
		/* watch_key in v2 is byte 0x07 = GETNUMKEYS: a whole 1-byte frame. */
		assert_int_equal(r, bads[i].want);
		tcpstore_req_release(&req);
		free(buf);
	}
}

static void
test_dialect_detection(void **state)
{
	static const struct {
		const char *hex;
		int r;
		enum tcpstore_dialect d;
	} cases[] = {
		{"", 0, 0},
		{"00", 0, 0},
		{"00 ce f7", 0, 0},
		{"00 ce f7 85 3c", 1, TCPSTORE_DIALECT_V2},
		{"00 ce f7 85 3c 0d", 1, TCPSTORE_DIALECT_V2},
		{"00 03", 1, TCPSTORE_DIALECT_LEGACY},
		{"00 0300000000000000", 1, TCPSTORE_DIALECT_LEGACY},
		{"03", 1, TCPSTORE_DIALECT_LEGACY},
		{"05 01", 1, TCPSTORE_DIALECT_LEGACY},
	};

	for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
		size_t len;
		uint8_t *buf = unhex(cases[i].hex, &len);
		enum tcpstore_dialect d = 99;

		assert_int_equal(tcpstore_detect_dialect(buf, len, &d), cases[i].r);
		if (cases[i].r == 1) {
			assert_int_equal(d, cases[i].d);
		}
		free(buf);
	}
}

static void
test_replies(void **state)
{
	struct tcpstore_limits lim;
	struct tcpstore_reply rep;
	size_t len, used;
	uint8_t *buf;

	tcpstore_limits_default(&lim);
	buf = unhex("0200000000000000 7631", &len);
	assert_int_equal(tcpstore_reply_decode(TCPSTORE_CMD_GET, 0, buf, len, &lim, &rep, &used),
			 1);
	assert_int_equal(used, 10);
	assert_bytes(&rep.value, "v1");
	assert_int_equal(tcpstore_reply_decode(TCPSTORE_CMD_GET, 0, buf, 9, &lim, &rep, &used), 0);
	assert_int_equal(used, 10);
	free(buf);

	buf = unhex("feffffffffffffff", &len);
	assert_int_equal(tcpstore_reply_decode(TCPSTORE_CMD_ADD, 0, buf, len, &lim, &rep, &used),
			 1);
	assert_int_equal(rep.i64, -2);
	free(buf);

	buf = unhex("0100000000000000 31 0000000000000000 0200000000000000 3232", &len);
	assert_int_equal(
		tcpstore_reply_decode(TCPSTORE_CMD_MULTI_GET, 3, buf, len, &lim, &rep, &used), 1);
	assert_int_equal(rep.n, 3);
	assert_bytes(&rep.values[0], "1");
	assert_bytes(&rep.values[1], "");
	assert_bytes(&rep.values[2], "22");
	tcpstore_reply_release(&rep);
	assert_int_equal(
		tcpstore_reply_decode(TCPSTORE_CMD_MULTI_GET, 3, buf, len - 1, &lim, &rep, &used),
		0);
	free(buf);

	buf = unhex("01", &len);
	assert_int_equal(tcpstore_reply_decode(TCPSTORE_CMD_CHECK, 0, buf, len, &lim, &rep, &used),
			 1);
	assert_int_equal(rep.status, TCPSTORE_NOT_READY);
	assert_int_equal(tcpstore_reply_decode(TCPSTORE_CMD_SET, 0, buf, 0, &lim, &rep, &used), 1);
	assert_int_equal(used, 0);
	assert_false(tcpstore_cmd_has_reply(TCPSTORE_CMD_SET));
	assert_true(tcpstore_cmd_has_reply(TCPSTORE_CMD_WAIT));
	free(buf);
}

struct queue_reply_case {
	const char *name;
	enum tcpstore_cmd cmd;
	const char *hex;
	int r;
	size_t used; /* r 1: the reply's size; r 0: the bytes needed */
	int64_t i64;
	const char *value;
};

/* QUEUE_POP answers the length before the pop, and the value only when the
 * queue had one (TCPStore.cpp queuePop: receiveValue<int64_t>, then
 * receiveBits when > 0); QUEUE_LEN an i64. */
static const struct queue_reply_case queue_replies[] = {
	{"pop of 3", TCPSTORE_CMD_QUEUE_POP, "0300000000000000 0200000000000000 7631", 1, 18, 3,
	 "v1"},
	{"pop of the last", TCPSTORE_CMD_QUEUE_POP, "0100000000000000 0000000000000000", 1, 16, 1,
	 ""},
	{"pop of empty: no value", TCPSTORE_CMD_QUEUE_POP, "0000000000000000 0200000000000000", 1,
	 8, 0, NULL},
	{"pop, value cut", TCPSTORE_CMD_QUEUE_POP, "0300000000000000 0200000000000000 76", 0, 18},
	{"pop, length cut", TCPSTORE_CMD_QUEUE_POP, "0300000000000000 02", 0, 16},
	{"pop, count cut", TCPSTORE_CMD_QUEUE_POP, "03", 0, 8},
	{"pop, value too big", TCPSTORE_CMD_QUEUE_POP, "0100000000000000 0100800000000000", -E2BIG},
	{"len", TCPSTORE_CMD_QUEUE_LEN, "2a00000000000000", 1, 8, 42},
	{"len cut", TCPSTORE_CMD_QUEUE_LEN, "2a000000", 0, 8},
	{"push has none", TCPSTORE_CMD_QUEUE_PUSH, "", 1, 0},
};

static void
test_queue_replies(void **state)
{
	struct tcpstore_limits lim;

	tcpstore_limits_default(&lim);
	assert_false(tcpstore_cmd_has_reply(TCPSTORE_CMD_QUEUE_PUSH));
	assert_true(tcpstore_cmd_has_reply(TCPSTORE_CMD_QUEUE_POP));
	assert_true(tcpstore_cmd_has_reply(TCPSTORE_CMD_QUEUE_LEN));
	for (size_t i = 0; i < ARRAY_SIZE(queue_replies); i++) {
		const struct queue_reply_case *qc = &queue_replies[i];
		struct tcpstore_reply rep;
		size_t len, used = 0;
		uint8_t *buf = unhex(qc->hex, &len);

		print_message("%s\n", qc->name);
		assert_int_equal(tcpstore_reply_decode(qc->cmd, 0, buf, len, &lim, &rep, &used),
				 qc->r);
		if (qc->r >= 0) {
			assert_int_equal(used, qc->used);
		}
		if (qc->r == 1) {
			assert_int_equal(rep.i64, qc->i64);
			assert_bytes(&rep.value, qc->value);
		}
		tcpstore_reply_release(&rep);
		free(buf);
	}
}

static void
test_parse_i64(void **state)
{
	static const struct {
		const char *s;
		int r;
		int64_t v;
	} cases[] = {
		{"42", 0, 42},
		{" 42", 0, 42},
		{"\t\n+5", 0, 5},
		{"42abc", 0, 42},
		{"-6", 0, -6},
		{"9223372036854775807", 0, INT64_MAX},
		{"-9223372036854775808", 0, INT64_MIN},
		{"9223372036854775808", -ERANGE, 0},
		{"99999999999999999999", -ERANGE, 0},
		{"", -EINVAL, 0},
		{"abc", -EINVAL, 0},
		{"v1", -EINVAL, 0},
		{"-", -EINVAL, 0},
		{"+ 1", -EINVAL, 0},
	};

	for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
		int64_t v = 0;

		assert_int_equal(
			tcpstore_parse_i64((const uint8_t *)cases[i].s, strlen(cases[i].s), &v),
			cases[i].r);
		if (cases[i].r == 0) {
			assert_int_equal(v, cases[i].v);
		}
	}
}

static void
test_cmd_bytes(void **state)
{
	assert_int_equal(tcpstore_cmd_byte(TCPSTORE_DIALECT_LEGACY, TCPSTORE_CMD_SET), 0x00);
	assert_int_equal(tcpstore_cmd_byte(TCPSTORE_DIALECT_V2, TCPSTORE_CMD_SET), 0x01);
	assert_int_equal(tcpstore_cmd_byte(TCPSTORE_DIALECT_LEGACY, TCPSTORE_CMD_DELETE_KEY), 0x08);
	assert_int_equal(tcpstore_cmd_byte(TCPSTORE_DIALECT_V2, TCPSTORE_CMD_DELETE_KEY), 0x08);
	assert_int_equal(tcpstore_cmd_byte(TCPSTORE_DIALECT_V2, TCPSTORE_CMD_WATCH_KEY), -EINVAL);
	assert_int_equal(tcpstore_cmd_byte(TCPSTORE_DIALECT_LEGACY, TCPSTORE_CMD_PING), -EINVAL);
	assert_int_equal(tcpstore_cmd_byte(TCPSTORE_DIALECT_V2, TCPSTORE_CMD_PING), 0x0d);
	/* Upstream's QueryType after PING: QUEUE_PUSH, QUEUE_POP, QUEUE_LEN. */
	assert_int_equal(tcpstore_cmd_byte(TCPSTORE_DIALECT_V2, TCPSTORE_CMD_QUEUE_PUSH), 0x0e);
	assert_int_equal(tcpstore_cmd_byte(TCPSTORE_DIALECT_V2, TCPSTORE_CMD_QUEUE_POP), 0x0f);
	assert_int_equal(tcpstore_cmd_byte(TCPSTORE_DIALECT_V2, TCPSTORE_CMD_QUEUE_LEN), 0x10);
	assert_int_equal(tcpstore_cmd_byte(TCPSTORE_DIALECT_LEGACY, TCPSTORE_CMD_QUEUE_PUSH),
			 -EINVAL);
	assert_int_equal(tcpstore_cmd_byte(TCPSTORE_DIALECT_LEGACY, TCPSTORE_CMD_QUEUE_POP),
			 -EINVAL);
	assert_int_equal(tcpstore_cmd_byte(TCPSTORE_DIALECT_LEGACY, TCPSTORE_CMD_QUEUE_LEN),
			 -EINVAL);
}

static void
test_queue_not_legacy_encode(void **state)
{
	struct tcpstore_req req = {.cmd = TCPSTORE_CMD_QUEUE_PUSH,
				   .key = {(const uint8_t *)"q", 1}};
	struct tcpstore_buf b = {0};

	assert_int_equal(tcpstore_req_encode(&b, TCPSTORE_DIALECT_LEGACY, &req), -EINVAL);
	assert_int_equal(b.len, 0);
	tcpstore_buf_release(&b);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_frames),
		cmocka_unit_test(test_pipelined),
		cmocka_unit_test(test_bad_frames),
		cmocka_unit_test(test_dialect_detection),
		cmocka_unit_test(test_replies),
		cmocka_unit_test(test_parse_i64),
		cmocka_unit_test(test_cmd_bytes),
		cmocka_unit_test(test_queue_replies),
		cmocka_unit_test(test_queue_not_legacy_encode),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
