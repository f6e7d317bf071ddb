/* tcpstore_server.c — the c10d TCPStore server (see the header). */
#include "tcpstore_server.h"

#include <errno.h>
#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>
#include <event2/listener.h>
#include <inttypes.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <string.h>
#include <sys/queue.h>
#include <sys/socket.h>
#include <unistd.h>

#include "tcpstore_listen.h"
#include "tcpstore_proto.h"
#include "tcpstore_queue.h"
#include "tcpstore_table.h"
#include "tcpstore_server_int.h"
#include "util.h"

void
tcpstore_server_limits_default(struct tcpstore_server_limits *ret)
{
	ret->max_key = TCPSTORE_MAX_KEY_LEN;
	ret->max_value = TCPSTORE_MAX_VALUE_LEN;
	ret->max_keys = TCPSTORE_MAX_KEYS;
	ret->max_store_bytes = (size_t)1 << 30;
	ret->max_connections = 16384;
	ret->max_output = (size_t)64 << 20;
	ret->frame_stall_ms = 60000;
	ret->max_queue_len = 1u << 20;
	ret->max_partial_bytes = (size_t)64 << 20;
}

/* ---- connections ------------------------------------------------------- */

static void conn_process(struct conn *c);

static void
conn_free(struct conn *c)
{
	bufferevent_free(c->bev);
	if (c->stall) {
		event_free(c->stall);
	}
	free(c);
}

static void
reaper_cb(evutil_socket_t fd, short what, void *arg)
{
	struct tcpstore_server *s = arg;
	struct conn *c;

	while ((c = LIST_FIRST(&s->closed))) {
		LIST_REMOVE(c, link);
		conn_free(c);
	}
	tcpstore_guard_reaped(s);
	if (s->nconns == 0 && s->idle_cb) {
		s->idle_cb(s->idle_arg);
	}
}

void
tcpstore_server_set_idle_cb(struct tcpstore_server *s, void (*cb)(void *arg), void *arg)
{
	s->idle_cb = cb;
	s->idle_arg = arg;
}

static void
wait_drop(struct conn *c)
{
	struct wait_rec *w = c->wait;

	if (!w) {
		return;
	}
	for (size_t i = 0; i < w->n; i++) {
		struct tcpstore_entry *e = w->nodes[i].e;

		if (e) {
			TAILQ_REMOVE(&e->waiters, &w->nodes[i], link);
			w->nodes[i].e = NULL;
			tcpstore_table_maybe_free(&c->s->t, e);
		}
	}
	free(w);
	c->wait = NULL;
}

void
tcpstore_conn_close(struct conn *c, bool violation)
{
	struct tcpstore_server *s = c->s;

	if (c->closing) {
		return;
	}
	c->closing = true;
	if (violation) {
		s->stats.dropped++;
	}
	wait_drop(c);
	tcpstore_guard_closing(c, evbuffer_get_length(bufferevent_get_input(c->bev)) +
					  evbuffer_get_length(bufferevent_get_output(c->bev)));
	bufferevent_disable(c->bev, EV_READ | EV_WRITE);
	if (c->stall) {
		event_del(c->stall);
	}
	LIST_REMOVE(c, link);
	s->nconns--;
	LIST_INSERT_HEAD(&s->closed, c, link);
	event_active(s->reaper, EV_TIMEOUT, 0);
}

static void
conn_write(struct conn *c, const void *data, size_t len)
{
	struct evbuffer *out;

	if (c->closing) {
		return;
	}
	tcpstore_bev_write(c->bev, data, len);
	out = bufferevent_get_output(c->bev);
	if (evbuffer_get_length(out) > c->s->lim.max_output) {
		/* A peer that does not read its replies. */
		tcpstore_conn_close(c, true);
	}
}

static void
reply_u8(struct conn *c, uint8_t v)
{
	conn_write(c, &v, 1);
}

static void
reply_i64(struct conn *c, int64_t v)
{
	struct tcpstore_buf b = {0};

	tcpstore_buf_put_u64(&b, (uint64_t)v);
	conn_write(c, b.data, b.len);
	tcpstore_buf_release(&b);
}

static void
reply_vec(struct conn *c, const uint8_t *data, size_t len)
{
	struct tcpstore_buf b = {0};

	/* Length and data in one write: no corked empty vec. */
	tcpstore_buf_put_bytes(&b, data, len);
	conn_write(c, b.data, b.len);
	tcpstore_buf_release(&b);
}

/* The oldest waiter on e: one key fewer to wait for. Returns true when that
 * completed its WAIT (answered now), false when it waits for more keys or
 * there was none. */
static bool
entry_wake_first(struct tcpstore_entry *e)
{
	struct tcpstore_wait_node *n = TAILQ_FIRST(&e->waiters);
	struct wait_rec *w;

	if (!n) {
		return false;
	}
	w = n->rec;
	TAILQ_REMOVE(&e->waiters, n, link);
	n->e = NULL;
	if (--w->remaining == 0) {
		struct conn *wc = w->c;

		wc->wait = NULL;
		free(w);
		reply_u8(wc, TCPSTORE_STOP_WAITING);
		return true;
	}
	return false;
}

/* Every waiter on e: one key fewer to wait for; answer those now complete. */
static void
entry_wake(struct tcpstore_entry *e)
{
	while (!TAILQ_EMPTY(&e->waiters)) {
		(void)entry_wake_first(e);
	}
}

/* A value was queued on e: wake waiters oldest first up to the first whose
 * WAIT completes, as upstream's wakeupOneWaitingClient (the ones passed over
 * wait for other keys too, and have this one now). One value, one popper. */
static void
entry_wake_one(struct tcpstore_entry *e)
{
	while (!TAILQ_EMPTY(&e->waiters)) {
		if (entry_wake_first(e)) {
			return;
		}
	}
}

/* Store a value; false when the store would exceed its byte limit. */
static bool
store_set(struct tcpstore_server *s, const struct tcpstore_bytes *k, const uint8_t *v, size_t vlen)
{
	struct tcpstore_entry *e = tcpstore_table_get_or_add(&s->t, k);
	size_t old = e->has_value ? e->klen + e->vlen : 0;

	if (s->t.bytes - old + k->len + vlen > s->lim.max_store_bytes) {
		tcpstore_table_maybe_free(&s->t, e);
		return false;
	}
	tcpstore_table_set_value(&s->t, e, v, vlen);
	entry_wake(e);
	if (s->set_cb && k->len >= strlen(s->set_prefix) &&
	    memcmp(k->data, s->set_prefix, strlen(s->set_prefix)) == 0) {
		s->set_cb(k->data, k->len, v, vlen, s->set_arg);
	}
	return true;
}

/* What CHECK and WAIT look for: the key has a value, or values queued under
 * it (upstream checkKeys: a non-empty queue counts, so a blocking queue pop is
 * a WAIT on the queue's key). */
static bool
key_ready(struct tcpstore_server *s, const struct tcpstore_bytes *k)
{
	struct tcpstore_entry *e = tcpstore_table_find(&s->t, k);

	return e && (e->has_value || e->queue);
}

static void
handle_wait(struct conn *c, const struct tcpstore_req *req)
{
	struct tcpstore_server *s = c->s;
	struct wait_rec *w;
	size_t missing = 0;

	for (size_t i = 0; i < req->n; i++) {
		if (!key_ready(s, &req->keys[i])) {
			missing++;
		}
	}
	if (missing == 0) {
		reply_u8(c, TCPSTORE_STOP_WAITING);
		return;
	}
	w = xcalloc(1, sizeof(*w) + missing * sizeof(w->nodes[0]));
	w->c = c;
	w->n = missing;
	w->remaining = missing;
	for (size_t i = 0, j = 0; i < req->n; i++) {
		struct tcpstore_entry *e;

		if (key_ready(s, &req->keys[i])) {
			continue;
		}
		/* A key listed twice is waited for twice, as 1.13. */
		e = tcpstore_table_get_or_add(&s->t, &req->keys[i]);
		w->nodes[j].rec = w;
		w->nodes[j].e = e;
		TAILQ_INSERT_TAIL(&e->waiters, &w->nodes[j], link);
		j++;
	}
	c->wait = w;
}

static void
reply_missing(struct conn *c)
{
	/* 1.13 closes the connection on GET of a missing key; 2.x (libuv)
	 * answers an empty value. */
	if (c->dialect == TCPSTORE_DIALECT_LEGACY) {
		tcpstore_conn_close(c, true);
	} else {
		reply_vec(c, NULL, 0);
	}
}

#define ATTEMPT_PREFIX "//worker/attempt_"

/* The length of key once "//worker/attempt_<digits>/" lost its digits, with
 * the result in out (at least key->len bytes), or 0 when key has no such
 * prefix. */
static size_t
merge_attempt(const struct tcpstore_bytes *key, uint8_t *out)
{
	size_t p = sizeof(ATTEMPT_PREFIX) - 1, d = p;

	if (key->len <= p || memcmp(key->data, ATTEMPT_PREFIX, p) != 0) {
		return 0;
	}
	while (d < key->len && key->data[d] >= '0' && key->data[d] <= '9') {
		d++;
	}
	if (d == p || d >= key->len || key->data[d] != '/') {
		return 0;
	}
	memcpy(out, key->data, p);
	memcpy(out + p, key->data + d, key->len - d);
	return p + key->len - d;
}

/* Rewrite req's keys (see tcpstore_server_set_merge_attempts) into *ret_buf
 * (malloc'd, freed by the caller) and ret_keys (an array of req->n). */
static void
merge_keys(struct tcpstore_req *req, uint8_t **ret_buf, struct tcpstore_bytes **ret_keys)
{
	size_t total = req->key.len;
	uint8_t *buf, *p;

	for (size_t i = 0; i < req->n; i++) {
		total += req->keys[i].len;
	}
	buf = p = xmalloc(total + 1);
	if (req->key.len) {
		size_t n = merge_attempt(&req->key, p);

		if (n) {
			req->key = (struct tcpstore_bytes){p, n};
			p += n;
		}
	}
	if (req->n) {
		*ret_keys = xcalloc(req->n, sizeof(**ret_keys));
		for (size_t i = 0; i < req->n; i++) {
			size_t n = merge_attempt(&req->keys[i], p);

			(*ret_keys)[i] = n ? (struct tcpstore_bytes){p, n} : req->keys[i];
			p += n;
		}
		req->keys = *ret_keys;
	}
	*ret_buf = buf;
}

static void
handle_ping(struct conn *c, const struct tcpstore_req *req)
{
	struct tcpstore_buf b = {0};

	tcpstore_buf_put_u32(&b, req->u32);
	conn_write(c, b.data, b.len);
	tcpstore_buf_release(&b);
}

static void
handle_set(struct conn *c, const struct tcpstore_req *req)
{
	if (!store_set(c->s, &req->key, req->value.data, req->value.len)) {
		tcpstore_conn_close(c, true);
	}
}

static void
handle_compare_set(struct conn *c, const struct tcpstore_req *req)
{
	struct tcpstore_entry *e = tcpstore_table_find(&c->s->t, &req->key);

	if (!e || !e->has_value) {
		if (req->value.len != 0) {
			/* Missing key, non-empty expectation: echo the expectation,
			 * as torch does. */
			reply_vec(c, req->value.data, req->value.len);
			return;
		}
	} else if (e->vlen != req->value.len ||
		   (e->vlen && memcmp(e->val, req->value.data, e->vlen) != 0)) {
		reply_vec(c, e->val, e->vlen);
		return;
	}
	if (!store_set(c->s, &req->key, req->desired.data, req->desired.len)) {
		tcpstore_conn_close(c, true);
		return;
	}
	reply_vec(c, req->desired.data, req->desired.len);
}

static void
handle_get(struct conn *c, const struct tcpstore_req *req)
{
	struct tcpstore_entry *e = tcpstore_table_find(&c->s->t, &req->key);

	if (!e || !e->has_value) {
		reply_missing(c);
		return;
	}
	reply_vec(c, e->val, e->vlen);
}

static void
handle_add(struct conn *c, const struct tcpstore_req *req)
{
	struct tcpstore_entry *e = tcpstore_table_find(&c->s->t, &req->key);
	int64_t v = req->delta;
	char num[32];
	int n;

	if (e && e->has_value) {
		int64_t old;

		if (tcpstore_parse_i64(e->val, e->vlen, &old) < 0) {
			/* 1.13: std::stoll throws, the connection closes. */
			tcpstore_conn_close(c, true);
			return;
		}
		v = (int64_t)((uint64_t)old + (uint64_t)req->delta);
	}
	n = snprintf(num, sizeof(num), "%" PRId64, v);
	/* The adder hears first, then the waiters (1.13's order). */
	reply_i64(c, v);
	if (!store_set(c->s, &req->key, (const uint8_t *)num, (size_t)n)) {
		tcpstore_conn_close(c, true);
	}
}

static void
handle_check(struct conn *c, const struct tcpstore_req *req)
{
	for (size_t i = 0; i < req->n; i++) {
		if (!key_ready(c->s, &req->keys[i])) {
			reply_u8(c, TCPSTORE_NOT_READY);
			return;
		}
	}
	reply_u8(c, TCPSTORE_READY);
}

static void
handle_delete_key(struct conn *c, const struct tcpstore_req *req)
{
	struct tcpstore_entry *e = tcpstore_table_find(&c->s->t, &req->key);

	if (e && e->has_value) {
		tcpstore_table_clear_value(&c->s->t, e);
		tcpstore_table_maybe_free(&c->s->t, e);
		reply_i64(c, 1);
	} else {
		reply_i64(c, 0);
	}
}

static void
handle_append(struct conn *c, const struct tcpstore_req *req)
{
	struct tcpstore_server *s = c->s;
	struct tcpstore_entry *e = tcpstore_table_find(&s->t, &req->key);
	uint8_t *buf;
	bool ok;

	if (!e || !e->has_value) {
		handle_set(c, req);
		return;
	}
	if (e->vlen + req->value.len > s->lim.max_value) {
		tcpstore_conn_close(c, true);
		return;
	}
	buf = xmalloc(e->vlen + req->value.len + 1);
	memcpy(buf, e->val, e->vlen);
	memcpy(buf + e->vlen, req->value.data, req->value.len);
	ok = store_set(s, &req->key, buf, e->vlen + req->value.len);
	free(buf);
	if (!ok) {
		tcpstore_conn_close(c, true);
	}
}

static void
handle_multi_get(struct conn *c, const struct tcpstore_req *req)
{
	for (size_t i = 0; i < req->n && !c->closing; i++) {
		struct tcpstore_entry *e = tcpstore_table_find(&c->s->t, &req->keys[i]);

		if (!e || !e->has_value) {
			reply_missing(c);
		} else {
			reply_vec(c, e->val, e->vlen);
		}
	}
}

static void
handle_multi_set(struct conn *c, const struct tcpstore_req *req)
{
	for (size_t i = 0; i < req->n; i++) {
		if (!store_set(c->s, &req->keys[i], req->values[i].data, req->values[i].len)) {
			tcpstore_conn_close(c, true);
			return;
		}
	}
}

/* torch >= 2.7's queues, as upstream's libuv server (TCPStoreLibUvBackend.cpp:
 * queuePush, queuePop, queueLen; the client side in TCPStore.cpp). A queue is
 * apart from the key's value: GET, DELETE_KEY, GETNUMKEYS never see it; CHECK
 * and WAIT do (a non-empty queue makes its key ready). A push wakes one
 * waiter; a pop never blocks (torch's blocking pop is WAIT, then POP). Bounded
 * by max_queue_len per key and by max_store_bytes: a push past either closes
 * the pusher's connection, as a SET past the byte limit does. */
static void
handle_queue_push(struct conn *c, const struct tcpstore_req *req)
{
	struct tcpstore_server *s = c->s;
	struct tcpstore_entry *e = tcpstore_table_get_or_add(&s->t, &req->key);

	if ((e->queue && tcpstore_queue_len(e->queue) >= s->lim.max_queue_len) ||
	    s->t.bytes + tcpstore_table_queue_cost(e, req->value.len) > s->lim.max_store_bytes) {
		tcpstore_table_maybe_free(&s->t, e);
		tcpstore_conn_close(c, true);
		return;
	}
	tcpstore_table_queue_push(&s->t, e, req->value.data, req->value.len);
	entry_wake_one(e);
}

/* The length before the pop, then the value when there was one, in one write. */
static void
handle_queue_pop(struct conn *c, const struct tcpstore_req *req)
{
	struct tcpstore_server *s = c->s;
	struct tcpstore_entry *e = tcpstore_table_find(&s->t, &req->key);
	struct tcpstore_buf b = {0};
	struct tcpstore_bytes v;

	if (!e || !e->queue || !tcpstore_queue_front(e->queue, &v)) {
		reply_i64(c, 0);
		return;
	}
	tcpstore_buf_put_u64(&b, tcpstore_queue_len(e->queue));
	tcpstore_buf_put_bytes(&b, v.data, v.len);
	tcpstore_table_queue_pop(&s->t, e);
	tcpstore_table_maybe_free(&s->t, e);
	conn_write(c, b.data, b.len);
	tcpstore_buf_release(&b);
}

static void
handle_queue_len(struct conn *c, const struct tcpstore_req *req)
{
	struct tcpstore_entry *e = tcpstore_table_find(&c->s->t, &req->key);

	reply_i64(c, e && e->queue ? (int64_t)tcpstore_queue_len(e->queue) : 0);
}

/* One request, answered (or not) in order. */
static void
handle(struct conn *c, const struct tcpstore_req *req)
{
	c->s->stats.requests++;
	if (c->wait && req->cmd != TCPSTORE_CMD_CANCEL_WAIT) {
		/* The client gave up on its WAIT (a 1.13 timeout). */
		wait_drop(c);
	}
	switch (req->cmd) {
	case TCPSTORE_CMD_VALIDATE:
		if (req->u32 != TCPSTORE_VALIDATE_MAGIC) {
			tcpstore_conn_close(c, true);
		}
		return;
	case TCPSTORE_CMD_PING:
		handle_ping(c, req);
		return;
	case TCPSTORE_CMD_SET:
		handle_set(c, req);
		return;
	case TCPSTORE_CMD_COMPARE_SET:
		handle_compare_set(c, req);
		return;
	case TCPSTORE_CMD_GET:
		handle_get(c, req);
		return;
	case TCPSTORE_CMD_ADD:
		handle_add(c, req);
		return;
	case TCPSTORE_CMD_CHECK:
		handle_check(c, req);
		return;
	case TCPSTORE_CMD_WAIT:
		handle_wait(c, req);
		return;
	case TCPSTORE_CMD_GETNUMKEYS:
		reply_i64(c, (int64_t)c->s->t.nkeys);
		return;
	case TCPSTORE_CMD_WATCH_KEY:
		/* Nothing in torch's Python, elastic or gloo calls watchKey. */
		tcpstore_conn_close(c, true);
		return;
	case TCPSTORE_CMD_DELETE_KEY:
		handle_delete_key(c, req);
		return;
	case TCPSTORE_CMD_APPEND:
		handle_append(c, req);
		return;
	case TCPSTORE_CMD_MULTI_GET:
		handle_multi_get(c, req);
		return;
	case TCPSTORE_CMD_MULTI_SET:
		handle_multi_set(c, req);
		return;
	case TCPSTORE_CMD_CANCEL_WAIT:
		/* 00 was sent already if the wait completed; 01 either way. */
		wait_drop(c);
		reply_u8(c, TCPSTORE_WAIT_CANCELED);
		return;
	case TCPSTORE_CMD_QUEUE_PUSH:
		handle_queue_push(c, req);
		return;
	case TCPSTORE_CMD_QUEUE_POP:
		handle_queue_pop(c, req);
		return;
	case TCPSTORE_CMD_QUEUE_LEN:
		handle_queue_len(c, req);
		return;
	}
}

static void
conn_arm_stall(struct conn *c)
{
	struct timeval tv = {c->s->lim.frame_stall_ms / 1000,
			     (c->s->lim.frame_stall_ms % 1000) * 1000};

	if (!evtimer_pending(c->stall, NULL)) {
		evtimer_add(c->stall, &tv);
	}
}

static void
conn_parse(struct conn *c)
{
	struct evbuffer *in = bufferevent_get_input(c->bev);
	struct evbuffer *out = bufferevent_get_output(c->bev);

	while (!c->closing) {
		size_t len = evbuffer_get_length(in), used = 0;
		struct tcpstore_req req;
		uint8_t *p;
		int r;

		if (len == 0) {
			evtimer_del(c->stall);
			return;
		}
		if (len < c->need) {
			conn_arm_stall(c);
			return;
		}
		if (evbuffer_get_length(out) > OUTPUT_PAUSE) {
			/* Backpressure: resume from the write callback. */
			c->paused = true;
			bufferevent_disable(c->bev, EV_READ);
			return;
		}
		p = evbuffer_pullup(in, -1);
		if (!c->dialect_known) {
			r = tcpstore_detect_dialect(p, len, &c->dialect);
			if (r == 0) {
				c->need = len + 1;
				continue;
			}
			c->dialect_known = true;
		}
		r = tcpstore_req_decode(p, len, c->dialect, &c->s->plim, &req, &used);
		if (r < 0) {
			tcpstore_conn_close(c, true);
			return;
		}
		if (r == 0) {
			c->need = used;
			conn_arm_stall(c);
			return;
		}
		if (c->s->merge_attempts) {
			struct tcpstore_bytes *orig = req.keys, *merged = NULL;
			uint8_t *buf = NULL;

			merge_keys(&req, &buf, &merged);
			handle(c, &req);
			free(buf);
			free(merged);
			req.keys = orig;
		} else {
			handle(c, &req);
		}
		tcpstore_req_release(&req);
		if (c->closing) {
			return;
		}
		evbuffer_drain(in, used);
		c->need = 1;
		evtimer_del(c->stall);
	}
}

/* Answer every complete request c sent; what is left, an unfinished frame,
 * counts against the budget of all connections. */
static void
conn_process(struct conn *c)
{
	conn_parse(c);
	if (!c->closing) {
		tcpstore_guard_account(c, evbuffer_get_length(bufferevent_get_input(c->bev)));
	}
}

static void
conn_read_cb(struct bufferevent *bev, void *arg)
{
	conn_process(arg);
}

static void
conn_write_cb(struct bufferevent *bev, void *arg)
{
	struct conn *c = arg;

	if (c->paused && !c->closing) {
		c->paused = false;
		bufferevent_enable(c->bev, EV_READ);
		conn_process(c);
	}
}

static void
conn_event_cb(struct bufferevent *bev, short what, void *arg)
{
	struct conn *c = arg;

	if (what & (BEV_EVENT_EOF | BEV_EVENT_ERROR)) {
		tcpstore_conn_close(c, false);
	}
}

static void
conn_stall_cb(evutil_socket_t fd, short what, void *arg)
{
	/* Half a frame for too long: slowloris, or a dead peer. */
	tcpstore_conn_close(arg, true);
}

static void
accept_cb(struct evconnlistener *l, evutil_socket_t fd, struct sockaddr *sa, int salen, void *arg)
{
	struct tcpstore_server *s = arg;
	struct conn *c;
	int one = 1;

	if (!tcpstore_guard_admit(s, fd)) {
		return;
	}
	s->stats.accepted++;
	(void)setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	c = xcalloc(1, sizeof(*c));
	c->s = s;
	c->need = 1;
	c->seq = s->next_seq++;
	tcpstore_guard_name_peer(c, sa, salen);
	c->bev = bufferevent_socket_new(s->base, fd, BEV_OPT_CLOSE_ON_FREE);
	if (!c->bev) {
		close(fd);
		free(c);
		return;
	}
	c->stall = evtimer_new(s->base, conn_stall_cb, c);
	bufferevent_setcb(c->bev, conn_read_cb, conn_write_cb, conn_event_cb, c);
	bufferevent_setwatermark(c->bev, EV_WRITE, OUTPUT_PAUSE / 2, 0);
	bufferevent_enable(c->bev, EV_READ | EV_WRITE);
	LIST_INSERT_HEAD(&s->conns, c, link);
	s->nconns++;
}

static void
accept_error_cb(struct evconnlistener *l, void *arg)
{
	/* Out of descriptors or memory: pause instead of spinning on a
	 * listening socket that stays readable. */
	tcpstore_guard_accept_failed(arg, EVUTIL_SOCKET_ERROR());
}

struct tcpstore_server *
tcpstore_server_new(struct event_base *base, const char *host, int port,
		    const struct tcpstore_server_limits *lim, int *ret_err, char **reterr)
{
	struct tcpstore_server *s;
	int fd, actual = 0;

	fd = tcpstore_listen(host, port, &actual, reterr);
	if (fd < 0) {
		*ret_err = fd;
		return NULL;
	}
	s = xcalloc(1, sizeof(*s));
	s->base = base;
	s->port = actual;
	if (lim) {
		s->lim = *lim;
	} else {
		tcpstore_server_limits_default(&s->lim);
	}
	s->plim.max_key = s->lim.max_key;
	s->plim.max_value = s->lim.max_value;
	s->plim.max_keys = s->lim.max_keys;
	tcpstore_table_init(&s->t);
	LIST_INIT(&s->conns);
	LIST_INIT(&s->closed);
	s->reaper = event_new(base, -1, 0, reaper_cb, s);
	s->listener = evconnlistener_new(base, accept_cb, s,
					 LEV_OPT_CLOSE_ON_FREE | LEV_OPT_CLOSE_ON_EXEC, 0, fd);
	if (!s->listener) {
		close(fd);
		*ret_err = -ENOMEM;
		*reterr = xstrdup("cannot create the store listener");
		tcpstore_server_free(s);
		return NULL;
	}
	evconnlistener_set_error_cb(s->listener, accept_error_cb);
	tcpstore_guard_init(s);
	return s;
}

void
tcpstore_server_set_merge_attempts(struct tcpstore_server *s, bool on)
{
	s->merge_attempts = on;
}

int
tcpstore_server_port(const struct tcpstore_server *s)
{
	return s->port;
}

size_t
tcpstore_server_connections(const struct tcpstore_server *s)
{
	return s->nconns;
}

size_t
tcpstore_server_num_keys(const struct tcpstore_server *s)
{
	return s->t.nkeys;
}

size_t
tcpstore_server_pending_output(const struct tcpstore_server *s)
{
	struct conn *c;
	size_t n = 0;

	LIST_FOREACH(c, &s->conns, link)
	{
		n += evbuffer_get_length(bufferevent_get_output(c->bev));
	}
	return n;
}

void
tcpstore_server_stats(const struct tcpstore_server *s, struct tcpstore_server_stats *ret)
{
	*ret = s->stats;
}

void
tcpstore_server_on_set(struct tcpstore_server *s, const char *prefix, tcpstore_server_set_fn cb,
		       void *arg)
{
	free(s->set_prefix);
	s->set_prefix = cb ? xstrdup(prefix) : NULL;
	s->set_cb = cb;
	s->set_arg = arg;
}

int
tcpstore_server_get(struct tcpstore_server *s, const char *key, const uint8_t **ret_value,
		    size_t *ret_len)
{
	struct tcpstore_bytes k = {.data = (const uint8_t *)key, .len = strlen(key)};
	struct tcpstore_entry *e = tcpstore_table_find(&s->t, &k);

	if (!e || !e->has_value) {
		return -ENOENT;
	}
	*ret_value = e->val;
	*ret_len = e->vlen;
	return 0;
}

int
tcpstore_server_put(struct tcpstore_server *s, const char *key, const void *value, size_t len)
{
	struct tcpstore_bytes k = {.data = (const uint8_t *)key, .len = strlen(key)};

	return store_set(s, &k, value, len) ? 0 : -ENOSPC;
}

void
tcpstore_server_free(struct tcpstore_server *s)
{
	struct conn *c;

	if (!s) {
		return;
	}
	if (s->listener) {
		evconnlistener_free(s->listener);
	}
	while ((c = LIST_FIRST(&s->conns))) {
		wait_drop(c);
		LIST_REMOVE(c, link);
		conn_free(c);
	}
	if (s->reaper) {
		reaper_cb(-1, 0, s);
		event_free(s->reaper);
	}
	tcpstore_guard_release(s);
	tcpstore_table_release(&s->t);
	free(s->set_prefix);
	free(s);
}
