/* fuzz_tcpstore.c — libFuzzer target: the input is what a peer sends to the
 * TCPStore server. The first byte picks how it is read (dialect detection,
 * then frames), every decoded request is re-encoded and decoded again (it
 * must come back identical), and the bytes are also read as replies to each
 * command, as the client does. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "tcpstore_proto.h"
#include "util.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static bool
bytes_eq(const struct tcpstore_bytes *a, const struct tcpstore_bytes *b)
{
	return a->len == b->len && (a->len == 0 || memcmp(a->data, b->data, a->len) == 0);
}

static void
check_roundtrip(enum tcpstore_dialect d, const struct tcpstore_limits *lim,
		const struct tcpstore_req *req, size_t used)
{
	struct tcpstore_buf b = {0};
	struct tcpstore_req again;
	size_t used2 = 0;

	if (tcpstore_req_encode(&b, d, req) < 0) {
		abort();
	}
	if (b.len != used || tcpstore_req_decode(b.data, b.len, d, lim, &again, &used2) != 1 ||
	    used2 != used || again.cmd != req->cmd || !bytes_eq(&again.key, &req->key) ||
	    !bytes_eq(&again.value, &req->value) || !bytes_eq(&again.desired, &req->desired) ||
	    again.delta != req->delta || again.u32 != req->u32 || again.n != req->n) {
		abort();
	}
	for (size_t i = 0; i < req->n; i++) {
		if (!bytes_eq(&again.keys[i], &req->keys[i])) {
			abort();
		}
	}
	tcpstore_req_release(&again);
	tcpstore_buf_release(&b);
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct tcpstore_limits lim = {.max_key = 64, .max_value = 4096, .max_keys = 64};
	enum tcpstore_dialect d = TCPSTORE_DIALECT_LEGACY;
	size_t off = 0;

	if (size < 1) {
		return 0;
	}
	if (data[0] & 1) {
		/* As the server: detect the dialect from the stream itself. */
		if (tcpstore_detect_dialect(data + 1, size - 1, &d) == 0) {
			return 0;
		}
	}
	off = 1;
	while (off < size) {
		struct tcpstore_req req;
		size_t used = 0;
		int r = tcpstore_req_decode(data + off, size - off, d, &lim, &req, &used);

		if (r < 0) {
			break;
		}
		if (r == 0) {
			/* The decoder must ask for more than it has. */
			if (used <= size - off) {
				abort();
			}
			break;
		}
		if (used == 0 || used > size - off) {
			abort();
		}
		check_roundtrip(d, &lim, &req, used);
		tcpstore_req_release(&req);
		off += used;
	}
	for (int cmd = TCPSTORE_CMD_VALIDATE; cmd <= TCPSTORE_CMD_QUEUE_LEN; cmd++) {
		struct tcpstore_reply rep;
		size_t used = 0;
		int r = tcpstore_reply_decode((enum tcpstore_cmd)cmd, data[0] % 5, data + 1,
					      size - 1, &lim, &rep, &used);

		if (r == 1) {
			if (used > size - 1) {
				abort();
			}
			tcpstore_reply_release(&rep);
		} else if (r == 0 && used <= size - 1) {
			abort();
		}
	}
	{
		int64_t v;

		(void)tcpstore_parse_i64(data, size, &v);
	}
	return 0;
}
