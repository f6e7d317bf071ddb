/* The client's multiplexed connection against elasticd's own server over
 * loopback: a request queued behind a pending WAIT completes at once and the
 * WAIT still fires afterwards; a WAIT steps aside for a request, a
 * background WAIT for a WAIT; a WAIT whose key appears as it steps aside
 * completes (00 before the 01 of its CANCEL_WAIT); cancelling the background
 * WAIT leaves the others; a WAIT's timeout still holds. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <cmocka.h>
#include <event2/event.h>

#include "tcpstore_client.h"
#include "tcpstore_server.h"
#include "util.h"

struct rig {
	struct event_base *base;
	struct tcpstore_server *srv;
	struct tcpstore_client *cl;
	int connected;
	char log[256]; /* "<tag>:<err> " for every completion, in order */
};

struct done {
	struct rig *rig;
	const char *tag;
	int calls;
	int err;
	char value[32];
};

static void
connected_cb(struct tcpstore_client *c, int err, void *arg)
{
	struct rig *r = arg;

	r->connected = err == 0 ? 1 : err;
}

static void
done_cb(int err, const struct tcpstore_reply *rep, void *arg)
{
	struct done *d = arg;
	size_t used = strlen(d->rig->log);

	d->calls++;
	d->err = err;
	if (err == 0 && rep && rep->value.len > 0) {
		snprintf(d->value, sizeof(d->value), "%.*s", (int)rep->value.len,
			 (const char *)rep->value.data);
	}
	snprintf(d->rig->log + used, sizeof(d->rig->log) - used, "%s:%d ", d->tag, err);
}

/* Run the loop until *flag is non-zero or ms passed. */
static void
pump_until(struct rig *r, const int *flag, int ms)
{
	uint64_t end = now_usec() + (uint64_t)ms * USEC_PER_MSEC;

	while ((!flag || !*flag) && now_usec() < end) {
		struct timeval tv = {0, 5000};

		event_base_loopexit(r->base, &tv);
		event_base_loop(r->base, EVLOOP_ONCE);
	}
}

static void
rig_up(struct rig *r)
{
	struct tcpstore_client_callbacks cb = {.connected = connected_cb, .arg = r};
	char *err = NULL;
	int rc = 0;

	memset(r, 0, sizeof(*r));
	r->base = event_base_new();
	r->srv = tcpstore_server_new(r->base, "127.0.0.1", 0, NULL, &rc, &err);
	assert_non_null(r->srv);
	r->cl = tcpstore_client_new(r->base, "127.0.0.1", tcpstore_server_port(r->srv),
				    TCPSTORE_DIALECT_V2, &cb);
	assert_int_equal(tcpstore_client_set_mux(r->cl, true), 0);
	assert_int_equal(tcpstore_client_connect(r->cl, now_usec() + 5 * USEC_PER_SEC), 0);
	pump_until(r, &r->connected, 5000);
	assert_int_equal(r->connected, 1);
}

static void
rig_down(struct rig *r)
{
	tcpstore_client_free(r->cl);
	tcpstore_server_free(r->srv);
	event_base_free(r->base);
}

static void
wait1(struct rig *r, const char *key, uint64_t timeout_usec, struct done *d)
{
	const char *keys[1] = {key};

	assert_int_equal(
		tcpstore_client_keys(r->cl, TCPSTORE_CMD_WAIT, keys, 1, timeout_usec, done_cb, d),
		0);
}

static void
test_request_behind_wait(void **state)
{
	struct rig r;
	struct done w = {&r, "wait"}, g = {&r, "get"}, s = {&r, "set"};

	rig_up(&r);
	assert_int_equal(tcpstore_server_put(r.srv, "/k", "v1", 2), 0);
	wait1(&r, "/w", 0, &w);
	pump_until(&r, NULL, 50); /* the WAIT is in flight, the key missing */
	assert_int_equal(tcpstore_client_get(r.cl, "/k", done_cb, &g), 0);
	pump_until(&r, &g.calls, 2000);
	assert_int_equal(g.calls, 1);
	assert_int_equal(g.err, 0);
	assert_string_equal(g.value, "v1");
	assert_int_equal(w.calls, 0);
	assert_int_equal(tcpstore_client_pending(r.cl), 1);

	/* The WAIT was sent again and still hears its key. */
	assert_int_equal(tcpstore_server_put(r.srv, "/w", "", 0), 0);
	pump_until(&r, &w.calls, 2000);
	assert_int_equal(w.calls, 1);
	assert_int_equal(w.err, 0);

	/* Our own SET, queued behind a WAIT for that key, wakes it. */
	memset(&w, 0, sizeof(w));
	w.rig = &r;
	w.tag = "wait";
	wait1(&r, "/w2", 0, &w);
	assert_int_equal(tcpstore_client_set(r.cl, "/w2", "x", 1, done_cb, &s), 0);
	pump_until(&r, &w.calls, 2000);
	assert_int_equal(w.calls, 1);
	assert_int_equal(w.err, 0);
	assert_int_equal(tcpstore_client_pending(r.cl), 0);
	rig_down(&r);
}

static void
test_background_yields_to_wait(void **state)
{
	struct rig r;
	struct done bg = {&r, "bg"}, fg = {&r, "fg"}, t = {&r, "timeout"};
	const char *keys[1] = {"/b"};

	rig_up(&r);
	assert_int_equal(tcpstore_client_wait_background(r.cl, keys, 1, done_cb, &bg), 0);
	pump_until(&r, NULL, 50);
	wait1(&r, "/f", 0, &fg);
	pump_until(&r, NULL, 50);
	assert_int_equal(tcpstore_server_put(r.srv, "/f", "", 0), 0);
	pump_until(&r, &fg.calls, 2000);
	assert_int_equal(fg.err, 0);
	assert_int_equal(bg.calls, 0);

	/* A WAIT's timeout holds while the background one waits behind it. */
	wait1(&r, "/never", 200 * USEC_PER_MSEC, &t);
	pump_until(&r, &t.calls, 3000);
	assert_int_equal(t.err, -ETIMEDOUT);
	assert_int_equal(bg.calls, 0);

	assert_int_equal(tcpstore_server_put(r.srv, "/b", "", 0), 0);
	pump_until(&r, &bg.calls, 2000);
	assert_int_equal(bg.err, 0);
	assert_string_equal(r.log, "fg:0 timeout:-110 bg:0 ");
	rig_down(&r);
}

static void
test_fires_while_stepping_aside(void **state)
{
	struct rig r;
	struct done bg = {&r, "bg"}, s = {&r, "set"};
	const char *keys[1] = {"/r"};

	rig_up(&r);
	assert_int_equal(tcpstore_client_wait_background(r.cl, keys, 1, done_cb, &bg), 0);
	pump_until(&r, NULL, 50);
	/* The server answers 00 before it reads the CANCEL_WAIT: 00 01. */
	assert_int_equal(tcpstore_server_put(r.srv, "/r", "", 0), 0);
	assert_int_equal(tcpstore_client_set(r.cl, "/s", "1", 1, done_cb, &s), 0);
	pump_until(&r, &bg.calls, 2000);
	pump_until(&r, NULL, 50);
	assert_int_equal(bg.calls, 1);
	assert_int_equal(bg.err, 0);
	assert_int_equal(s.calls, 1);
	assert_int_equal(tcpstore_client_pending(r.cl), 0);
	rig_down(&r);
}

static void
test_cancel_background_only(void **state)
{
	struct rig r;
	struct done bg = {&r, "bg"}, fg = {&r, "fg"};
	const char *keys[1] = {"/x"};

	rig_up(&r);
	assert_int_equal(tcpstore_client_wait_background(r.cl, keys, 1, done_cb, &bg), 0);
	wait1(&r, "/y", 0, &fg);
	pump_until(&r, NULL, 50);
	assert_int_equal(tcpstore_client_cancel_background(r.cl), 0);
	pump_until(&r, &bg.calls, 2000);
	assert_int_equal(bg.err, -ECANCELED);
	assert_int_equal(fg.calls, 0);
	assert_int_equal(tcpstore_client_cancel_background(r.cl), -ENOENT);
	assert_int_equal(tcpstore_server_put(r.srv, "/y", "", 0), 0);
	pump_until(&r, &fg.calls, 2000);
	assert_int_equal(fg.err, 0);
	rig_down(&r);
}

static void
test_legacy_cannot_multiplex(void **state)
{
	struct event_base *base = event_base_new();
	struct tcpstore_client *c =
		tcpstore_client_new(base, "127.0.0.1", 1, TCPSTORE_DIALECT_LEGACY, NULL);

	assert_int_equal(tcpstore_client_set_mux(c, true), -EINVAL);
	assert_int_equal(tcpstore_client_set_mux(c, false), 0);
	tcpstore_client_free(c);
	event_base_free(base);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_request_behind_wait),
		cmocka_unit_test(test_background_yields_to_wait),
		cmocka_unit_test(test_fires_while_stepping_aside),
		cmocka_unit_test(test_cancel_background_only),
		cmocka_unit_test(test_legacy_cannot_multiplex),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
