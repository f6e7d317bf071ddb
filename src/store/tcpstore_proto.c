/* tcpstore_proto.c — encode and decode c10d TCPStore frames (see the header). */
#include "tcpstore_proto.h"

#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "util.h"

/* Wire bytes by command; -1: not in that dialect. v2 follows upstream's
 * QueryType enum (TCPStoreBackend.hpp): VALIDATE = 0, then in order up to
 * QUEUE_LEN = 0x10 (torch >= 2.7; LIST = 0x11 is not served). */
static const int legacy_bytes[] = {
	[TCPSTORE_CMD_VALIDATE] = -1,      [TCPSTORE_CMD_SET] = 0x00,
	[TCPSTORE_CMD_COMPARE_SET] = 0x01, [TCPSTORE_CMD_GET] = 0x02,
	[TCPSTORE_CMD_ADD] = 0x03,         [TCPSTORE_CMD_CHECK] = 0x04,
	[TCPSTORE_CMD_WAIT] = 0x05,        [TCPSTORE_CMD_GETNUMKEYS] = 0x06,
	[TCPSTORE_CMD_WATCH_KEY] = 0x07,   [TCPSTORE_CMD_DELETE_KEY] = 0x08,
	[TCPSTORE_CMD_APPEND] = 0x09,      [TCPSTORE_CMD_MULTI_GET] = 0x0a,
	[TCPSTORE_CMD_MULTI_SET] = 0x0b,   [TCPSTORE_CMD_CANCEL_WAIT] = 0x0c,
	[TCPSTORE_CMD_PING] = -1,          [TCPSTORE_CMD_QUEUE_PUSH] = -1,
	[TCPSTORE_CMD_QUEUE_POP] = -1,     [TCPSTORE_CMD_QUEUE_LEN] = -1,
};

static const int v2_bytes[] = {
	[TCPSTORE_CMD_VALIDATE] = 0x00,    [TCPSTORE_CMD_SET] = 0x01,
	[TCPSTORE_CMD_COMPARE_SET] = 0x02, [TCPSTORE_CMD_GET] = 0x03,
	[TCPSTORE_CMD_ADD] = 0x04,         [TCPSTORE_CMD_CHECK] = 0x05,
	[TCPSTORE_CMD_WAIT] = 0x06,        [TCPSTORE_CMD_GETNUMKEYS] = 0x07,
	[TCPSTORE_CMD_WATCH_KEY] = -1,     [TCPSTORE_CMD_DELETE_KEY] = 0x08,
	[TCPSTORE_CMD_APPEND] = 0x09,      [TCPSTORE_CMD_MULTI_GET] = 0x0a,
	[TCPSTORE_CMD_MULTI_SET] = 0x0b,   [TCPSTORE_CMD_CANCEL_WAIT] = 0x0c,
	[TCPSTORE_CMD_PING] = 0x0d,        [TCPSTORE_CMD_QUEUE_PUSH] = 0x0e,
	[TCPSTORE_CMD_QUEUE_POP] = 0x0f,   [TCPSTORE_CMD_QUEUE_LEN] = 0x10,
};

void
tcpstore_limits_default(struct tcpstore_limits *ret)
{
	ret->max_key = TCPSTORE_MAX_KEY_LEN;
	ret->max_value = TCPSTORE_MAX_VALUE_LEN;
	ret->max_keys = TCPSTORE_MAX_KEYS;
}

int
tcpstore_cmd_byte(enum tcpstore_dialect d, enum tcpstore_cmd cmd)
{
	const int *t = d == TCPSTORE_DIALECT_V2 ? v2_bytes : legacy_bytes;

	if ((size_t)cmd >= ARRAY_SIZE(v2_bytes) || t[cmd] < 0) {
		return -EINVAL;
	}
	return t[cmd];
}

static int
cmd_from_byte(enum tcpstore_dialect d, uint8_t byte, enum tcpstore_cmd *ret)
{
	const int *t = d == TCPSTORE_DIALECT_V2 ? v2_bytes : legacy_bytes;

	for (size_t i = 0; i < ARRAY_SIZE(v2_bytes); i++) {
		if (t[i] == byte) {
			*ret = (enum tcpstore_cmd)i;
			return 0;
		}
	}
	return -EPROTO;
}

int
tcpstore_detect_dialect(const uint8_t *buf, size_t len, enum tcpstore_dialect *ret)
{
	static const uint8_t magic[4] = {0xce, 0xf7, 0x85, 0x3c};

	if (len < 1) {
		return 0;
	}
	if (buf[0] != 0x00) {
		*ret = TCPSTORE_DIALECT_LEGACY;
		return 1;
	}
	/* A legacy SET sends its type byte alone: wait for the 4 bytes after it.
	 * Its key length would have to start with the magic (about 1 GiB), which
	 * no sane key has. */
	for (size_t i = 1; i < len && i < 5; i++) {
		if (buf[i] != magic[i - 1]) {
			*ret = TCPSTORE_DIALECT_LEGACY;
			return 1;
		}
	}
	if (len < 5) {
		return 0;
	}
	*ret = TCPSTORE_DIALECT_V2;
	return 1;
}

/* ---- decoding ---------------------------------------------------------- */

struct cursor {
	const uint8_t *p;
	size_t len;
	size_t off;
	size_t need; /* set when a read runs past len */
};

static uint64_t
get_u64(const uint8_t *p)
{
	uint64_t v = 0;

	for (int i = 7; i >= 0; i--) {
		v = (v << 8) | p[i];
	}
	return v;
}

static uint32_t
get_u32(const uint8_t *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

/* Each reader returns 1 (read), 0 (need cur->need bytes) or -errno. */
static int
cur_take(struct cursor *c, size_t n, const uint8_t **ret)
{
	if (c->len - c->off < n) {
		c->need = c->off + n;
		return 0;
	}
	*ret = c->p + c->off;
	c->off += n;
	return 1;
}

static int
cur_u64(struct cursor *c, uint64_t *ret)
{
	const uint8_t *p;
	int r = cur_take(c, 8, &p);

	if (r > 0) {
		*ret = get_u64(p);
	}
	return r;
}

static int
cur_u32(struct cursor *c, uint32_t *ret)
{
	const uint8_t *p;
	int r = cur_take(c, 4, &p);

	if (r > 0) {
		*ret = get_u32(p);
	}
	return r;
}

/* A u64 length then that many bytes; the length is checked against max
 * before the payload is awaited. */
static int
cur_bytes(struct cursor *c, size_t max, struct tcpstore_bytes *ret)
{
	uint64_t n;
	const uint8_t *p;
	int r = cur_u64(c, &n);

	if (r <= 0) {
		return r;
	}
	if (n > max) {
		return -E2BIG;
	}
	r = cur_take(c, (size_t)n, &p);
	if (r > 0) {
		ret->data = p;
		ret->len = (size_t)n;
	}
	return r;
}

/* Count, then count keys (and values for MULTI_SET). With fill false it only
 * walks the frame; with fill true it also stores the slices. */
static int
cur_key_list(struct cursor *c, const struct tcpstore_limits *lim, bool with_values,
	     struct tcpstore_req *req, bool fill)
{
	uint64_t n;
	int r = cur_u64(c, &n);

	if (r <= 0) {
		return r;
	}
	if (n > lim->max_keys) {
		return -E2BIG;
	}
	if (fill) {
		req->n = (size_t)n;
		req->keys = n ? xcalloc((size_t)n, sizeof(*req->keys)) : NULL;
		if (with_values) {
			req->values = n ? xcalloc((size_t)n, sizeof(*req->values)) : NULL;
		}
	}
	for (uint64_t i = 0; i < n; i++) {
		struct tcpstore_bytes k, v;

		r = cur_bytes(c, lim->max_key, &k);
		if (r <= 0) {
			return r;
		}
		if (with_values) {
			r = cur_bytes(c, lim->max_value, &v);
			if (r <= 0) {
				return r;
			}
		}
		if (fill) {
			req->keys[i] = k;
			if (with_values) {
				req->values[i] = v;
			}
		}
	}
	return 1;
}

static int
decode_body(struct cursor *c, const struct tcpstore_limits *lim, struct tcpstore_req *req,
	    bool fill)
{
	uint64_t u = 0;
	int r;

	switch (req->cmd) {
	case TCPSTORE_CMD_VALIDATE:
	case TCPSTORE_CMD_PING:
		return cur_u32(c, &req->u32);
	case TCPSTORE_CMD_SET:
	case TCPSTORE_CMD_APPEND:
	case TCPSTORE_CMD_QUEUE_PUSH:
		r = cur_bytes(c, lim->max_key, &req->key);
		return r <= 0 ? r : cur_bytes(c, lim->max_value, &req->value);
	case TCPSTORE_CMD_COMPARE_SET:
		r = cur_bytes(c, lim->max_key, &req->key);
		if (r > 0) {
			r = cur_bytes(c, lim->max_value, &req->value);
		}
		return r <= 0 ? r : cur_bytes(c, lim->max_value, &req->desired);
	case TCPSTORE_CMD_GET:
	case TCPSTORE_CMD_WATCH_KEY:
	case TCPSTORE_CMD_DELETE_KEY:
	case TCPSTORE_CMD_QUEUE_POP:
	case TCPSTORE_CMD_QUEUE_LEN:
		return cur_bytes(c, lim->max_key, &req->key);
	case TCPSTORE_CMD_ADD:
		r = cur_bytes(c, lim->max_key, &req->key);
		if (r > 0) {
			r = cur_u64(c, &u);
			req->delta = (int64_t)u;
		}
		return r;
	case TCPSTORE_CMD_CHECK:
	case TCPSTORE_CMD_WAIT:
	case TCPSTORE_CMD_MULTI_GET:
		return cur_key_list(c, lim, false, req, fill);
	case TCPSTORE_CMD_MULTI_SET:
		return cur_key_list(c, lim, true, req, fill);
	case TCPSTORE_CMD_GETNUMKEYS:
	case TCPSTORE_CMD_CANCEL_WAIT:
		return 1;
	}
	return -EPROTO;
}

int
tcpstore_req_decode(const uint8_t *buf, size_t len, enum tcpstore_dialect d,
		    const struct tcpstore_limits *lim, struct tcpstore_req *ret, size_t *ret_used)
{
	struct cursor c = {.p = buf, .len = len};
	struct tcpstore_req req = {0};
	int r;

	memset(ret, 0, sizeof(*ret));
	if (len < 1) {
		*ret_used = 1;
		return 0;
	}
	if (cmd_from_byte(d, buf[0], &req.cmd) < 0) {
		return -EPROTO;
	}
	c.off = 1;
	/* First walk the frame without allocating; fill only once it is whole. */
	r = decode_body(&c, lim, &req, false);
	if (r == 0) {
		*ret_used = c.need;
		return 0;
	}
	if (r < 0) {
		return r;
	}
	memset(&req, 0, sizeof(req));
	(void)cmd_from_byte(d, buf[0], &req.cmd);
	c.off = 1;
	r = decode_body(&c, lim, &req, true);
	if (r <= 0) {
		/* Cannot happen: the walk above succeeded on the same bytes. */
		tcpstore_req_release(&req);
		return -EPROTO;
	}
	*ret = req;
	*ret_used = c.off;
	return 1;
}

void
tcpstore_req_release(struct tcpstore_req *req)
{
	free(req->keys);
	free(req->values);
	req->keys = NULL;
	req->values = NULL;
	req->n = 0;
}

bool
tcpstore_cmd_has_reply(enum tcpstore_cmd cmd)
{
	switch (cmd) {
	case TCPSTORE_CMD_VALIDATE:
	case TCPSTORE_CMD_SET:
	case TCPSTORE_CMD_APPEND:
	case TCPSTORE_CMD_MULTI_SET:
	case TCPSTORE_CMD_QUEUE_PUSH:
		return false;
	case TCPSTORE_CMD_COMPARE_SET:
	case TCPSTORE_CMD_GET:
	case TCPSTORE_CMD_ADD:
	case TCPSTORE_CMD_CHECK:
	case TCPSTORE_CMD_WAIT:
	case TCPSTORE_CMD_GETNUMKEYS:
	case TCPSTORE_CMD_WATCH_KEY:
	case TCPSTORE_CMD_DELETE_KEY:
	case TCPSTORE_CMD_MULTI_GET:
	case TCPSTORE_CMD_CANCEL_WAIT:
	case TCPSTORE_CMD_PING:
	case TCPSTORE_CMD_QUEUE_POP:
	case TCPSTORE_CMD_QUEUE_LEN:
		return true;
	}
	return false;
}

int
tcpstore_reply_decode(enum tcpstore_cmd cmd, size_t n, const uint8_t *buf, size_t len,
		      const struct tcpstore_limits *lim, struct tcpstore_reply *ret,
		      size_t *ret_used)
{
	struct cursor c = {.p = buf, .len = len};
	const uint8_t *p;
	uint64_t u = 0;
	int r = 1;

	memset(ret, 0, sizeof(*ret));
	switch (cmd) {
	case TCPSTORE_CMD_VALIDATE:
	case TCPSTORE_CMD_SET:
	case TCPSTORE_CMD_APPEND:
	case TCPSTORE_CMD_MULTI_SET:
	case TCPSTORE_CMD_QUEUE_PUSH:
		break;
	case TCPSTORE_CMD_CHECK:
	case TCPSTORE_CMD_WAIT:
	case TCPSTORE_CMD_WATCH_KEY:
	case TCPSTORE_CMD_CANCEL_WAIT:
		r = cur_take(&c, 1, &p);
		if (r > 0) {
			ret->status = p[0];
		}
		break;
	case TCPSTORE_CMD_ADD:
	case TCPSTORE_CMD_GETNUMKEYS:
	case TCPSTORE_CMD_DELETE_KEY:
	case TCPSTORE_CMD_QUEUE_LEN:
		r = cur_u64(&c, &u);
		ret->i64 = (int64_t)u;
		break;
	case TCPSTORE_CMD_QUEUE_POP:
		/* The length before the pop; the value only when there was one. */
		r = cur_u64(&c, &u);
		ret->i64 = (int64_t)u;
		if (r > 0 && ret->i64 > 0) {
			r = cur_bytes(&c, lim->max_value, &ret->value);
		}
		break;
	case TCPSTORE_CMD_PING:
		r = cur_u32(&c, &ret->u32);
		break;
	case TCPSTORE_CMD_GET:
	case TCPSTORE_CMD_COMPARE_SET:
		r = cur_bytes(&c, lim->max_value, &ret->value);
		break;
	case TCPSTORE_CMD_MULTI_GET:
		for (size_t i = 0; i < n && r > 0; i++) {
			struct tcpstore_bytes v;

			r = cur_bytes(&c, lim->max_value, &v);
		}
		if (r > 0 && n > 0) {
			ret->n = n;
			ret->values = xcalloc(n, sizeof(*ret->values));
			c.off = 0;
			for (size_t i = 0; i < n; i++) {
				(void)cur_bytes(&c, lim->max_value, &ret->values[i]);
			}
		}
		break;
	}
	if (r == 0) {
		*ret_used = c.need;
		memset(ret, 0, sizeof(*ret));
		return 0;
	}
	if (r < 0) {
		memset(ret, 0, sizeof(*ret));
		return r;
	}
	*ret_used = c.off;
	return 1;
}

void
tcpstore_reply_release(struct tcpstore_reply *rep)
{
	free(rep->values);
	rep->values = NULL;
	rep->n = 0;
}

/* ---- encoding ---------------------------------------------------------- */

void
tcpstore_buf_put(struct tcpstore_buf *b, const void *data, size_t len)
{
	if (len == 0) {
		return;
	}
	if (b->cap - b->len < len) {
		size_t cap = b->cap ? b->cap : 64;

		while (cap - b->len < len) {
			cap *= 2;
		}
		b->data = xrealloc(b->data, cap);
		b->cap = cap;
	}
	memcpy(b->data + b->len, data, len);
	b->len += len;
}

void
tcpstore_buf_put_u8(struct tcpstore_buf *b, uint8_t v)
{
	tcpstore_buf_put(b, &v, 1);
}

void
tcpstore_buf_put_u32(struct tcpstore_buf *b, uint32_t v)
{
	uint8_t p[4];

	for (int i = 0; i < 4; i++) {
		p[i] = (uint8_t)(v >> (8 * i));
	}
	tcpstore_buf_put(b, p, 4);
}

void
tcpstore_buf_put_u64(struct tcpstore_buf *b, uint64_t v)
{
	uint8_t p[8];

	for (int i = 0; i < 8; i++) {
		p[i] = (uint8_t)(v >> (8 * i));
	}
	tcpstore_buf_put(b, p, 8);
}

void
tcpstore_buf_put_bytes(struct tcpstore_buf *b, const void *data, size_t len)
{
	tcpstore_buf_put_u64(b, len);
	tcpstore_buf_put(b, data, len);
}

void
tcpstore_buf_release(struct tcpstore_buf *b)
{
	free(b->data);
	memset(b, 0, sizeof(*b));
}

static void
put_slice(struct tcpstore_buf *b, const struct tcpstore_bytes *s)
{
	tcpstore_buf_put_bytes(b, s->data, s->len);
}

int
tcpstore_req_encode(struct tcpstore_buf *b, enum tcpstore_dialect d, const struct tcpstore_req *req)
{
	int byte = tcpstore_cmd_byte(d, req->cmd);

	if (byte < 0) {
		return -EINVAL;
	}
	tcpstore_buf_put_u8(b, (uint8_t)byte);
	switch (req->cmd) {
	case TCPSTORE_CMD_VALIDATE:
	case TCPSTORE_CMD_PING:
		tcpstore_buf_put_u32(b, req->u32);
		break;
	case TCPSTORE_CMD_SET:
	case TCPSTORE_CMD_APPEND:
	case TCPSTORE_CMD_QUEUE_PUSH:
		put_slice(b, &req->key);
		put_slice(b, &req->value);
		break;
	case TCPSTORE_CMD_COMPARE_SET:
		put_slice(b, &req->key);
		put_slice(b, &req->value);
		put_slice(b, &req->desired);
		break;
	case TCPSTORE_CMD_GET:
	case TCPSTORE_CMD_WATCH_KEY:
	case TCPSTORE_CMD_DELETE_KEY:
	case TCPSTORE_CMD_QUEUE_POP:
	case TCPSTORE_CMD_QUEUE_LEN:
		put_slice(b, &req->key);
		break;
	case TCPSTORE_CMD_ADD:
		put_slice(b, &req->key);
		tcpstore_buf_put_u64(b, (uint64_t)req->delta);
		break;
	case TCPSTORE_CMD_CHECK:
	case TCPSTORE_CMD_WAIT:
	case TCPSTORE_CMD_MULTI_GET:
	case TCPSTORE_CMD_MULTI_SET:
		tcpstore_buf_put_u64(b, req->n);
		for (size_t i = 0; i < req->n; i++) {
			put_slice(b, &req->keys[i]);
			if (req->cmd == TCPSTORE_CMD_MULTI_SET) {
				put_slice(b, &req->values[i]);
			}
		}
		break;
	case TCPSTORE_CMD_GETNUMKEYS:
	case TCPSTORE_CMD_CANCEL_WAIT:
		break;
	}
	return 0;
}

int
tcpstore_parse_i64(const uint8_t *s, size_t len, int64_t *ret)
{
	size_t i = 0;
	bool neg = false;
	uint64_t v = 0, lim;
	bool digits = false;

	/* std::stoll -> strtoll: isspace() in the C locale. */
	while (i < len && (s[i] == ' ' || (s[i] >= '\t' && s[i] <= '\r'))) {
		i++;
	}
	if (i < len && (s[i] == '+' || s[i] == '-')) {
		neg = s[i] == '-';
		i++;
	}
	lim = neg ? (uint64_t)INT64_MAX + 1 : (uint64_t)INT64_MAX;
	for (; i < len && s[i] >= '0' && s[i] <= '9'; i++) {
		unsigned d = (unsigned)(s[i] - '0');

		digits = true;
		if (v > (lim - d) / 10) {
			return -ERANGE;
		}
		v = v * 10 + d;
	}
	if (!digits) {
		return -EINVAL;
	}
	*ret = neg ? (int64_t)(0 - v) : (int64_t)v;
	return 0;
}
