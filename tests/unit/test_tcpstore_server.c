/* The store host's in-process view of its TCPStore server: what it puts is
 * there for clients and for itself, and the set hook reports every store
 * under its prefix (and nothing else) with the key and the new value.
 *
 * torch >= 2.7's queues over loopback sockets, step by step: the bytes each
 * connection sends and the bytes it must get back (or nothing, or a close),
 * as upstream's libuv server answers (TCPStoreLibUvBackend.cpp). */
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>
#include <cmocka.h>
#include <event2/event.h>

#include "tcpstore_server.h"
#include "util.h"
#include "unhex.h"

struct seen {
	int calls;
	char key[64];
	char value[64];
};

static void
on_set(const uint8_t *key, size_t klen, const uint8_t *value, size_t vlen, void *arg)
{
	struct seen *s = arg;

	s->calls++;
	snprintf(s->key, sizeof(s->key), "%.*s", (int)klen, (const char *)key);
	snprintf(s->value, sizeof(s->value), "%.*s", (int)vlen, (const char *)value);
}

static void
test_put_get_and_hook(void **state)
{
	struct event_base *base = event_base_new();
	struct tcpstore_server *srv;
	struct seen seen = {0};
	const uint8_t *v;
	size_t len;
	char *err = NULL;
	int rc = 0;

	srv = tcpstore_server_new(base, "127.0.0.1", 0, NULL, &rc, &err);
	assert_non_null(srv);
	assert_int_equal(tcpstore_server_get(srv, "/r/coordinator", &v, &len), -ENOENT);
	assert_int_equal(tcpstore_server_put(srv, "/r/coordinator", "me", 2), 0);
	assert_int_equal(tcpstore_server_get(srv, "/r/coordinator", &v, &len), 0);
	assert_int_equal(len, 2);
	assert_memory_equal(v, "me", 2);
	assert_int_equal(tcpstore_server_num_keys(srv), 1);

	tcpstore_server_on_set(srv, "/r/j/", on_set, &seen);
	assert_int_equal(tcpstore_server_put(srv, "/r/gen/1", "", 0), 0);
	assert_int_equal(seen.calls, 0);
	assert_int_equal(tcpstore_server_put(srv, "/r/j/host_12_0", "x", 1), 0);
	assert_int_equal(seen.calls, 1);
	assert_string_equal(seen.key, "/r/j/host_12_0");
	assert_string_equal(seen.value, "x");
	/* A key shorter than the prefix, and the hook removed. */
	assert_int_equal(tcpstore_server_put(srv, "/r/j", "y", 1), 0);
	assert_int_equal(seen.calls, 1);
	tcpstore_server_on_set(srv, NULL, NULL, NULL);
	assert_int_equal(tcpstore_server_put(srv, "/r/j/other_1_0", "", 0), 0);
	assert_int_equal(seen.calls, 1);

	tcpstore_server_free(srv);
	event_base_free(base);
}

/* ---- queues over the wire ---------------------------------------------- */

#define V2_HELLO "00 cef7853c " /* VALIDATE */
#define EXPECT_CLOSED "closed"

/* One step: connection conn sends hex, then must receive exactly expect
 * (hex; "" nothing at all within a short while; EXPECT_CLOSED the server
 * closes it). */
struct step {
	int conn;
	const char *send;
	const char *expect;
};

struct queue_case {
	const char *name;
	size_t max_queue_len; /* 0: default */
	size_t max_store_bytes;
	const struct step steps[16];
};

/* Keys "/q" (2f71) and "/k" (2f6b); values "a" "b" "c" (61 62 63). */
#define PUSH_Q(v) "0e 0200000000000000 2f71 0100000000000000 " v
#define POP_Q "0f 0200000000000000 2f71"
#define LEN_Q "10 0200000000000000 2f71"
#define WAIT_Q "06 0100000000000000 0200000000000000 2f71"
#define I64(n) n "00000000000000"
#define X10 "78787878787878787878"
#define X100 X10 X10 X10 X10 X10 X10 X10 X10 X10 X10
#define PUSH_Q100 "0e 0200000000000000 2f71 6400000000000000" X100

static const struct queue_case queue_cases[] = {
	{"fifo order, length before each pop, empty pop has no value",
	 .steps = {{0, V2_HELLO PUSH_Q("61") PUSH_Q("62") PUSH_Q("63") LEN_Q, I64("03")},
		   {0, POP_Q, I64("03") "0100000000000000 61"},
		   {0, POP_Q, I64("02") "0100000000000000 62"},
		   {0, POP_Q POP_Q, I64("01") "0100000000000000 63" I64("00")},
		   {0, LEN_Q, I64("00")},
		   {0, "10 0200000000000000 2f7a", I64("00")}}},
	{"an empty value is queued too",
	 .steps = {{0, V2_HELLO "0e 0200000000000000 2f71 0000000000000000" LEN_Q, I64("01")},
		   {0, POP_Q, I64("01") "0000000000000000"}}},
	{"a queue is apart from the key's value",
	 .steps = {{0, V2_HELLO PUSH_Q("61") "07", I64("00")},          /* GETNUMKEYS */
		   {0, "03 0200000000000000 2f71", "0000000000000000"}, /* GET: empty */
		   {0, "08 0200000000000000 2f71", I64("00")},          /* DELETE_KEY */
		   {0, "01 0200000000000000 2f71 0100000000000000 78" LEN_Q, I64("01")},
		   {0, POP_Q "03 0200000000000000 2f71",
		    I64("01") "0100000000000000 61 0100000000000000 78"}}},
	{"check sees a non-empty queue",
	 .steps = {{0, V2_HELLO "05 0100000000000000 0200000000000000 2f71", "01"},
		   {0, PUSH_Q("61") "05 0100000000000000 0200000000000000 2f71", "00"},
		   {0, POP_Q "05 0100000000000000 0200000000000000 2f71",
		    I64("01") "0100000000000000 61 01"}}},
	{"wait on a non-empty queue returns at once",
	 .steps = {{0, V2_HELLO PUSH_Q("61") WAIT_Q, "00"}}},
	{"a push wakes the oldest waiter only, one per push",
	 .steps = {{0, V2_HELLO WAIT_Q, ""},
		   {1, V2_HELLO WAIT_Q, ""},
		   {2, V2_HELLO PUSH_Q("61"), ""},
		   {0, "", "00"},
		   {1, "", ""},
		   {0, POP_Q, I64("01") "0100000000000000 61"},
		   {2, PUSH_Q("62"), ""},
		   {1, "", "00"},
		   {1, POP_Q, I64("01") "0100000000000000 62"}}},
	{"a push passes over a waiter that waits for more keys",
	 .steps = {{0, V2_HELLO "06 0200000000000000 0200000000000000 2f71 0200000000000000 2f6b",
		    ""},
		   {1, V2_HELLO WAIT_Q, ""},
		   {2, V2_HELLO PUSH_Q("61"), ""},
		   {1, "", "00"},
		   {0, "", ""},
		   {2, "01 0200000000000000 2f6b 0100000000000000 31", ""},
		   {0, "", "00"}}},
	{"a set of the queue's key wakes every waiter; their pops may find nothing",
	 .steps = {{0, V2_HELLO WAIT_Q, ""},
		   {1, V2_HELLO WAIT_Q, ""},
		   {2, V2_HELLO "01 0200000000000000 2f71 0100000000000000 78", ""},
		   {0, POP_Q, "00" I64("00")},
		   {1, POP_Q, "00" I64("00")}}},
	{"a cancelled pop-wait is not woken; the next waiter is",
	 .steps = {{0, V2_HELLO WAIT_Q, ""},
		   {1, V2_HELLO WAIT_Q, ""},
		   {0, "0c", "01"},
		   {2, V2_HELLO PUSH_Q("61"), ""},
		   {1, "", "00"},
		   {0, "", ""}}},
	{"queues are v2 only: legacy closes",
	 .steps = {{0, "0e 0200000000000000 2f71 0100000000000000 61", EXPECT_CLOSED}}},
	{"list is not served", .steps = {{0, V2_HELLO "11", EXPECT_CLOSED}}},
	{"queue length limit closes the pusher", .max_queue_len = 2,
	 .steps = {{0, V2_HELLO PUSH_Q("61") PUSH_Q("62") LEN_Q, I64("02")},
		   {0, PUSH_Q("63"), EXPECT_CLOSED},
		   {1, V2_HELLO LEN_Q, I64("02")},
		   {1, POP_Q PUSH_Q("63") LEN_Q, I64("02") "0100000000000000 61" I64("02")}}},
	{"store byte limit counts queued values", .max_store_bytes = 200,
	 .steps = {{0, V2_HELLO PUSH_Q100 LEN_Q, I64("01")},
		   {0, PUSH_Q100, EXPECT_CLOSED},
		   {1, V2_HELLO POP_Q, I64("01") "6400000000000000" X100}}},
};

static int
connect_to(int port)
{
	struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	assert_true(fd >= 0);
	assert_int_equal(connect(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	return fd;
}

/* Run the loop while reading fd for up to ms: returns the bytes got (at most
 * max), or -1 when the peer closed. Stops early once max bytes arrived. */
static ssize_t
pump(struct event_base *base, int fd, uint8_t *buf, size_t max, int ms)
{
	size_t got = 0;

	for (int i = 0; i < ms; i++) {
		struct pollfd p = {.fd = fd, .events = POLLIN};

		event_base_loop(base, EVLOOP_NONBLOCK);
		if (poll(&p, 1, 1) > 0) {
			ssize_t n = recv(fd, buf + got, max - got + 1, MSG_DONTWAIT);

			if (n == 0) {
				return -1;
			}
			if (n > 0) {
				got += (size_t)n;
			}
		}
		if (got > max || (max > 0 && got == max && i > 20)) {
			break;
		}
	}
	return (ssize_t)got;
}

static void
run_queue_case(const struct queue_case *qc)
{
	struct event_base *base = event_base_new();
	struct tcpstore_server_limits lim;
	struct tcpstore_server *srv;
	int fds[3] = {-1, -1, -1};
	char *err = NULL;
	int rc = 0;

	tcpstore_server_limits_default(&lim);
	if (qc->max_queue_len) {
		lim.max_queue_len = qc->max_queue_len;
	}
	if (qc->max_store_bytes) {
		lim.max_store_bytes = qc->max_store_bytes;
	}
	srv = tcpstore_server_new(base, "127.0.0.1", 0, &lim, &rc, &err);
	assert_non_null(srv);
	for (size_t i = 0; i < ARRAY_SIZE(qc->steps) && qc->steps[i].send; i++) {
		const struct step *st = &qc->steps[i];
		size_t slen, elen;
		uint8_t *out = unhex(st->send, &slen), got[512];
		bool closed = strcmp(st->expect, EXPECT_CLOSED) == 0;
		uint8_t *want = unhex(closed ? "" : st->expect, &elen);
		ssize_t n;

		print_message("  step %zu\n", i);
		if (fds[st->conn] < 0) {
			fds[st->conn] = connect_to(tcpstore_server_port(srv));
		}
		if (slen) {
			assert_int_equal(send(fds[st->conn], out, slen, 0), (ssize_t)slen);
		}
		n = pump(base, fds[st->conn], got, closed ? 0 : elen, elen || closed ? 1000 : 100);
		if (closed) {
			assert_int_equal(n, -1);
			close(fds[st->conn]);
			fds[st->conn] = -1;
		} else {
			assert_int_equal(n, (ssize_t)elen);
			assert_memory_equal(got, want, elen);
		}
		free(out);
		free(want);
	}
	for (size_t i = 0; i < ARRAY_SIZE(fds); i++) {
		if (fds[i] >= 0) {
			close(fds[i]);
		}
	}
	tcpstore_server_free(srv);
	event_base_free(base);
}

static void
test_queues(void **state)
{
	for (size_t i = 0; i < ARRAY_SIZE(queue_cases); i++) {
		print_message("%s\n", queue_cases[i].name);
		run_queue_case(&queue_cases[i]);
	}
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_put_get_and_hook),
		cmocka_unit_test(test_queues),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
