/* tcpstore_proto.h — PyTorch's c10d TCPStore wire protocol, both dialects:
 * "legacy" (torch 1.13 up to the 2.0-era numbering: no handshake, SET = 0x00)
 * and "v2" (VALIDATE numbering of torch >= 2.2: a VALIDATE frame first, SET =
 * 0x01). Integers are little-endian; a string or byte vector is a u64 length
 * and the bytes (reference tcpstore-protocol.md §1-2). Pure: no I/O, no
 * logging; decoders work on a contiguous prefix of the received bytes and say
 * how many bytes they need before trying again. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Magic of the v2 VALIDATE frame (u32, LE on the wire: ce f7 85 3c). */
#define TCPSTORE_VALIDATE_MAGIC 0x3C85F7CEu

/* Defaults of the limits a peer cannot exceed (the 2.x libuv server's). */
#define TCPSTORE_MAX_KEY_LEN (8u * 1024u)
#define TCPSTORE_MAX_VALUE_LEN (8u * 1024u * 1024u)
#define TCPSTORE_MAX_KEYS (128u * 1024u)

enum tcpstore_dialect {
	TCPSTORE_DIALECT_LEGACY, /* torch 1.13 (and 2.0/2.1 clients) */
	TCPSTORE_DIALECT_V2,     /* torch >= 2.2: VALIDATE, then renumbered commands */
};

/* Commands by meaning; the byte on the wire depends on the dialect. */
enum tcpstore_cmd {
	TCPSTORE_CMD_VALIDATE,    /* v2 only; u32 magic; no reply */
	TCPSTORE_CMD_SET,         /* key, value; no reply */
	TCPSTORE_CMD_COMPARE_SET, /* key, expected, desired; reply vec */
	TCPSTORE_CMD_GET,         /* key; reply vec */
	TCPSTORE_CMD_ADD,         /* key, i64 delta; reply i64 */
	TCPSTORE_CMD_CHECK,       /* keys; reply u8 (0 ready, 1 not ready) */
	TCPSTORE_CMD_WAIT,        /* keys; reply u8 0 once every key exists */
	TCPSTORE_CMD_GETNUMKEYS,  /* reply i64 */
	TCPSTORE_CMD_WATCH_KEY,   /* legacy only; key; reply u8 3 */
	TCPSTORE_CMD_DELETE_KEY,  /* key; reply i64 1/0 */
	TCPSTORE_CMD_APPEND,      /* key, value; no reply */
	TCPSTORE_CMD_MULTI_GET,   /* keys; reply n vecs */
	TCPSTORE_CMD_MULTI_SET,   /* n (key, value); no reply */
	TCPSTORE_CMD_CANCEL_WAIT, /* reply u8 1 (after a 0 if the wait had completed) */
	TCPSTORE_CMD_PING,        /* v2 only; u32 nonce; reply the same u32 */
	/* torch >= 2.7 (v2 only): a FIFO of values per key, apart from the
	 * key's own value (upstream TCPStoreLibUvBackend.cpp, queuePush/Pop/Len). */
	TCPSTORE_CMD_QUEUE_PUSH, /* key, value; no reply */
	TCPSTORE_CMD_QUEUE_POP,  /* key; reply i64 length before the pop, then the
				  * popped vec when that length > 0 */
	TCPSTORE_CMD_QUEUE_LEN,  /* key; reply i64 */
};

/* Reply bytes of CHECK / WAIT / CANCEL_WAIT / WATCH_KEY. */
enum {
	TCPSTORE_READY = 0,         /* CHECK: every key exists */
	TCPSTORE_NOT_READY = 1,     /* CHECK: some key is missing */
	TCPSTORE_STOP_WAITING = 0,  /* WAIT: every key exists */
	TCPSTORE_WAIT_CANCELED = 1, /* CANCEL_WAIT */
	TCPSTORE_WATCH_REGISTERED = 3,
};

/* A borrowed byte range (into the decoder's input, or the caller's data). */
struct tcpstore_bytes {
	const uint8_t *data;
	size_t len;
};

struct tcpstore_limits {
	size_t max_key;   /* bytes per key */
	size_t max_value; /* bytes per value */
	size_t max_keys;  /* keys per CHECK / WAIT / MULTI_* */
};

/* One request. Scalars and slices are filled according to cmd. */
struct tcpstore_req {
	enum tcpstore_cmd cmd;
	struct tcpstore_bytes key;     /* SET COMPARE_SET GET ADD WATCH_KEY DELETE_KEY APPEND
					* QUEUE_PUSH QUEUE_POP QUEUE_LEN */
	struct tcpstore_bytes value;   /* SET APPEND QUEUE_PUSH; COMPARE_SET: the expected value */
	struct tcpstore_bytes desired; /* COMPARE_SET */
	int64_t delta;                 /* ADD */
	uint32_t u32;                  /* VALIDATE magic, PING nonce */
	size_t n;                      /* CHECK WAIT MULTI_GET MULTI_SET */
	struct tcpstore_bytes *keys;   /* n entries (decoder: malloc'd) */
	struct tcpstore_bytes *values; /* MULTI_SET: n entries (decoder: malloc'd) */
};

/* A growable output buffer. */
struct tcpstore_buf {
	uint8_t *data;
	size_t len;
	size_t cap;
};

/* The limits above. */
void tcpstore_limits_default(struct tcpstore_limits *ret);

/* Decide a connection's dialect from its first bytes, as reference §4.2: a
 * first byte 0x00 followed by the VALIDATE magic is v2, anything else legacy.
 * Returns 1 with *ret set, or 0 when more bytes are needed (len < 5 and the
 * first byte is 0x00). */
int tcpstore_detect_dialect(const uint8_t *buf, size_t len, enum tcpstore_dialect *ret);

/* Decode one request from buf[0..len). Returns:
 *   1        a whole request: *ret filled (slices point into buf; keys/values
 *            arrays malloc'd, release with tcpstore_req_release), *ret_used =
 *            its size in bytes;
 *   0        incomplete: *ret_used = total bytes needed before calling again
 *            (a lower bound);
 *   -EPROTO  unknown command byte for this dialect;
 *   -E2BIG   a key, value or key count over lim (checked as soon as the length
 *            arrives, before its payload).
 * On 0 or an error *ret is left zeroed. */
int tcpstore_req_decode(const uint8_t *buf, size_t len, enum tcpstore_dialect d,
			const struct tcpstore_limits *lim, struct tcpstore_req *ret,
			size_t *ret_used);

/* Free what the decoder allocated in req (not the slices' bytes). */
void tcpstore_req_release(struct tcpstore_req *req);

/* Append req's frame, for dialect d, to b. Returns 0, or -EINVAL when the
 * command does not exist in that dialect (WATCH_KEY in v2; VALIDATE, PING and
 * QUEUE_* in legacy). */
int tcpstore_req_encode(struct tcpstore_buf *b, enum tcpstore_dialect d,
			const struct tcpstore_req *req);

/* The wire byte of cmd in dialect d, or -EINVAL when it has none. */
int tcpstore_cmd_byte(enum tcpstore_dialect d, enum tcpstore_cmd cmd);

/* A reply, decoded for the command that asked for it. */
struct tcpstore_reply {
	uint8_t status;                /* CHECK WAIT CANCEL_WAIT WATCH_KEY */
	int64_t i64;                   /* ADD GETNUMKEYS DELETE_KEY QUEUE_LEN; QUEUE_POP: the
					* queue's length before the pop (0: it was empty) */
	uint32_t u32;                  /* PING */
	struct tcpstore_bytes value;   /* GET COMPARE_SET; QUEUE_POP when i64 > 0 */
	size_t n;                      /* MULTI_GET */
	struct tcpstore_bytes *values; /* MULTI_GET: n entries, malloc'd */
};

/* Whether cmd gets a reply at all (SET, APPEND, MULTI_SET, VALIDATE and
 * QUEUE_PUSH do not). */
bool tcpstore_cmd_has_reply(enum tcpstore_cmd cmd);

/* Decode the reply to cmd (n = number of keys of a MULTI_GET) from
 * buf[0..len). Returns 1 (*ret filled, slices into buf, *ret_used = size), 0
 * (need *ret_used bytes), or -E2BIG (a value over lim->max_value). */
int tcpstore_reply_decode(enum tcpstore_cmd cmd, size_t n, const uint8_t *buf, size_t len,
			  const struct tcpstore_limits *lim, struct tcpstore_reply *ret,
			  size_t *ret_used);

/* Free what the reply decoder allocated. */
void tcpstore_reply_release(struct tcpstore_reply *rep);

/* Output buffer helpers: append little-endian integers and length-prefixed
 * byte strings. Abort on out-of-memory like every x*alloc. */
void tcpstore_buf_put(struct tcpstore_buf *b, const void *data, size_t len);
void tcpstore_buf_put_u8(struct tcpstore_buf *b, uint8_t v);
void tcpstore_buf_put_u32(struct tcpstore_buf *b, uint32_t v);
void tcpstore_buf_put_u64(struct tcpstore_buf *b, uint64_t v);
void tcpstore_buf_put_bytes(struct tcpstore_buf *b, const void *data, size_t len);
void tcpstore_buf_release(struct tcpstore_buf *b);

/* Parse an ADD operand as the 1.13 server's std::stoll (reference §1.5):
 * leading whitespace, optional sign, decimal digits, trailing bytes ignored.
 * Returns 0 and *ret, or -EINVAL (no digits) / -ERANGE (out of i64 range). */
int tcpstore_parse_i64(const uint8_t *s, size_t len, int64_t *ret);
