/* test_sd.c — sd_notify without libsystemd: socket addresses (path and
 * abstract), one datagram per notification captured on a socket of the test's
 * own, the watchdog environment as sd_watchdog_enabled(3), and the notifier:
 * READY/STOPPING once, STATUS deduplicated and sanitised, WATCHDOG=1 on its
 * timer, errors reported. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <event2/event.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "sd.h"
#include "util.h"

/* ---- sd_notify_address --------------------------------------------------- */

static void
test_address(void **state)
{
	struct sockaddr_un sa;
	socklen_t len = 0;
	char long_path[200];

	assert_int_equal(sd_notify_address("/run/systemd/notify", &sa, &len), 0);
	assert_int_equal(sa.sun_family, AF_UNIX);
	assert_string_equal(sa.sun_path, "/run/systemd/notify");
	assert_int_equal(len, offsetof(struct sockaddr_un, sun_path) +
				      strlen("/run/systemd/notify") + 1);

	assert_int_equal(sd_notify_address("@elasticd/x", &sa, &len), 0);
	assert_int_equal(sa.sun_path[0], '\0');
	assert_memory_equal(sa.sun_path + 1, "elasticd/x", 10);
	/* No trailing NUL in an abstract address: the length ends the name. */
	assert_int_equal(len, offsetof(struct sockaddr_un, sun_path) + 11);

	assert_int_equal(sd_notify_address("", &sa, &len), -EINVAL);
	assert_int_equal(sd_notify_address("relative/path", &sa, &len), -EINVAL);
	assert_int_equal(sd_notify_address("@", &sa, &len), -EINVAL);
	assert_int_equal(sd_notify_address("/", &sa, &len), -EINVAL);
	assert_int_equal(sd_notify_address("vsock:2:1234", &sa, &len), -EINVAL);
	assert_int_equal(sd_notify_address(NULL, &sa, &len), -EINVAL);

	/* A path fits with its NUL (107 characters), an abstract name without (108). */
	memset(long_path, 'a', sizeof(long_path));
	long_path[0] = '/';
	long_path[107] = '\0';
	assert_int_equal(sd_notify_address(long_path, &sa, &len), 0);
	long_path[107] = 'a';
	long_path[108] = '\0';
	assert_int_equal(sd_notify_address(long_path, &sa, &len), -ENAMETOOLONG);
	long_path[0] = '@';
	assert_int_equal(sd_notify_address(long_path, &sa, &len), 0);
	assert_int_equal(len, offsetof(struct sockaddr_un, sun_path) + 108);
	long_path[108] = 'a';
	long_path[109] = '\0';
	assert_int_equal(sd_notify_address(long_path, &sa, &len), -ENAMETOOLONG);
}

/* ---- a receiving socket -------------------------------------------------- */

struct receiver {
	int fd;
	char addr[128]; /* what NOTIFY_SOCKET would hold */
	char path[128]; /* a filesystem socket's path, else "" */
};

static void
receiver_open(struct receiver *rx, bool abstract)
{
	struct sockaddr_un sa;
	socklen_t len;

	memset(rx, 0, sizeof(*rx));
	if (abstract) {
		snprintf(rx->addr, sizeof(rx->addr), "@elasticd-test-sd-%d-%lu", (int)getpid(),
			 (unsigned long)now_usec());
	} else {
		snprintf(rx->path, sizeof(rx->path), "/tmp/elasticd-test-sd-%d-%lu.sock",
			 (int)getpid(), (unsigned long)now_usec());
		snprintf(rx->addr, sizeof(rx->addr), "%s", rx->path);
	}
	assert_int_equal(sd_notify_address(rx->addr, &sa, &len), 0);
	rx->fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	assert_true(rx->fd >= 0);
	assert_int_equal(bind(rx->fd, (struct sockaddr *)&sa, len), 0);
}

static void
receiver_close(struct receiver *rx)
{
	if (rx->fd >= 0) {
		close(rx->fd);
	}
	if (rx->path[0]) {
		unlink(rx->path);
	}
	rx->fd = -1;
}

/* The next datagram (malloc'd), or NULL when none is queued. */
static char *
receiver_next(struct receiver *rx)
{
	char buf[4096];
	ssize_t n = recv(rx->fd, buf, sizeof(buf) - 1, 0);

	if (n < 0) {
		assert_int_equal(errno, EAGAIN);
		return NULL;
	}
	buf[n] = '\0';
	return xstrdup(buf);
}

static void
expect_datagram(struct receiver *rx, const char *want)
{
	_cleanup_free_ char *got = receiver_next(rx);

	if (!got) {
		fail_msg("no datagram; want '%s'", want);
	}
	if (strcmp(got, want) != 0) {
		fail_msg("datagram '%s'; want '%s'", got, want);
	}
}

static void
expect_none(struct receiver *rx)
{
	_cleanup_free_ char *got = receiver_next(rx);

	if (got) {
		fail_msg("unexpected datagram '%s'", got);
	}
}

/* ---- sd_notify_send ------------------------------------------------------ */

static void
test_send(void **state)
{
	struct receiver rx;

	assert_int_equal(sd_notify_send(NULL, "READY=1"), 0);
	assert_int_equal(sd_notify_send("", "READY=1"), 0);
	assert_int_equal(sd_notify_send("relative", "READY=1"), -EINVAL);

	for (int abstract = 0; abstract < 2; abstract++) {
		receiver_open(&rx, abstract);
		assert_int_equal(sd_notify_send(rx.addr, "READY=1\nSTATUS=hello"), 1);
		expect_datagram(&rx, "READY=1\nSTATUS=hello");
		expect_none(&rx);
		receiver_close(&rx);
		/* Nobody listens any more. */
		assert_true(sd_notify_send(rx.addr, "STOPPING=1") < 0);
	}
	assert_int_equal(sd_notify_send("/nonexistent/notify", "READY=1"), -ENOENT);
}

/* ---- sd_watchdog_usec ---------------------------------------------------- */

static void
test_watchdog_env(void **state)
{
	static const struct {
		const char *env[3];
		pid_t pid;
		int r;
		uint64_t usec;
	} cases[] = {
		{{NULL}, 42, 0, 0},
		{{"WATCHDOG_USEC=30000000", NULL}, 42, 1, 30000000},
		{{"WATCHDOG_USEC=30000000", "WATCHDOG_PID=42", NULL}, 42, 1, 30000000},
		{{"WATCHDOG_PID=42", "WATCHDOG_USEC=5", NULL}, 42, 1, 5},
		{{"WATCHDOG_USEC=30000000", "WATCHDOG_PID=43", NULL}, 42, 0, 0},
		{{"WATCHDOG_PID=42", NULL}, 42, 0, 0},
		{{"WATCHDOG_USEC=0", NULL}, 42, -EINVAL, 0},
		{{"WATCHDOG_USEC=", NULL}, 42, -EINVAL, 0},
		{{"WATCHDOG_USEC=-5", NULL}, 42, -EINVAL, 0},
		{{"WATCHDOG_USEC=1s", NULL}, 42, -EINVAL, 0},
		{{"WATCHDOG_USEC=99999999999999999999999", NULL}, 42, -EINVAL, 0},
		{{"WATCHDOG_USEC=100", "WATCHDOG_PID=x", NULL}, 42, -EINVAL, 0},
		{{"WATCHDOG_USEC=100", "WATCHDOG_PID=0", NULL}, 42, -EINVAL, 0},
		{{"WATCHDOG_USECX=100", NULL}, 42, 0, 0},
	};

	for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
		uint64_t usec = 7;
		int r = sd_watchdog_usec((char *const *)cases[i].env, cases[i].pid, &usec);

		if (r != cases[i].r) {
			fail_msg("case %zu: r=%d, want %d", i, r, cases[i].r);
		}
		assert_int_equal(usec, r == 1 ? cases[i].usec : 7);
	}
	assert_int_equal(sd_watchdog_usec(NULL, 1, NULL), 0);
}

/* ---- the notifier -------------------------------------------------------- */

struct errors {
	int n;
	int last_err;
	char last_state[256];
	char last_what[256];
};

static void
error_cb(int err, const char *state, const char *what, void *arg)
{
	struct errors *e = arg;

	e->n++;
	e->last_err = err;
	snprintf(e->last_state, sizeof(e->last_state), "%s", state ? state : "(null)");
	snprintf(e->last_what, sizeof(e->last_what), "%s", what ? what : "(null)");
}

static void
test_notifier_messages(void **state)
{
	struct event_base *base = event_base_new();
	struct receiver rx;
	struct errors errs = {0};
	struct sd_notifier *n;
	char *envp[2] = {NULL, NULL};
	char long_status[1000];

	receiver_open(&rx, true);
	envp[0] = xasprintf("NOTIFY_SOCKET=%s", rx.addr);
	n = sd_notifier_new(base, envp, error_cb, &errs);
	assert_true(sd_notifier_enabled(n));
	assert_int_equal(sd_notifier_watchdog_interval(n), 0);
	expect_none(&rx);

	assert_int_equal(sd_notify_ready(n, "ready"), 1);
	expect_datagram(&rx, "READY=1\nSTATUS=ready");
	/* READY=1 once; later calls carry the status only, once. */
	assert_int_equal(sd_notify_ready(n, "ready"), 0);
	assert_int_equal(sd_notify_ready(n, "still ready"), 1);
	expect_datagram(&rx, "STATUS=still ready");
	expect_none(&rx);

	assert_int_equal(sd_notify_status(n, "waiting for %d nodes", 4), 1);
	expect_datagram(&rx, "STATUS=waiting for 4 nodes");
	assert_int_equal(sd_notify_status(n, "waiting for %d nodes", 4), 0);
	expect_none(&rx);
	/* A newline in a status must not start a new KEY=VALUE line. */
	assert_int_equal(sd_notify_status(n, "a\nREADY=1\tb\x7f"), 1);
	expect_datagram(&rx, "STATUS=a READY=1 b ");
	memset(long_status, 'x', sizeof(long_status) - 1);
	long_status[sizeof(long_status) - 1] = '\0';
	assert_int_equal(sd_notify_status(n, "%s", long_status), 1);
	{
		_cleanup_free_ char *got = receiver_next(&rx);

		assert_non_null(got);
		assert_int_equal(strlen(got), strlen("STATUS=") + 512);
	}

	assert_int_equal(sd_notify_stopping(n, "stopping: SIGTERM"), 1);
	expect_datagram(&rx, "STOPPING=1\nSTATUS=stopping: SIGTERM");
	assert_int_equal(sd_notify_stopping(n, "exiting with status 143"), 1);
	expect_datagram(&rx, "STATUS=exiting with status 143");
	assert_int_equal(sd_notify_stopping(n, NULL), 0);
	expect_none(&rx);
	assert_int_equal(errs.n, 0);

	/* A failed send is reported. */
	receiver_close(&rx);
	assert_true(sd_notify_status(n, "gone") < 0);
	assert_int_equal(errs.n, 1);
	assert_true(errs.last_err < 0);
	assert_string_equal(errs.last_state, "STATUS=gone");
	assert_string_equal(errs.last_what, "(null)");

	sd_notifier_free(n);
	free(envp[0]);
	event_base_free(base);
}

static void
test_notifier_disabled(void **state)
{
	struct event_base *base = event_base_new();
	struct errors errs = {0};
	char *bad[] = {"NOTIFY_SOCKET=not/absolute", "WATCHDOG_USEC=1000", NULL};
	char *none[] = {"WATCHDOG_USEC=1000", NULL};
	struct sd_notifier *n;

	/* No NOTIFY_SOCKET: every call is a no-op, and no watchdog runs. */
	n = sd_notifier_new(base, none, error_cb, &errs);
	assert_false(sd_notifier_enabled(n));
	assert_int_equal(sd_notifier_watchdog_interval(n), 0);
	assert_int_equal(sd_notify_ready(n, "x"), 0);
	assert_int_equal(sd_notify_status(n, "x"), 0);
	assert_int_equal(sd_notify_stopping(n, "x"), 0);
	assert_int_equal(errs.n, 0);
	sd_notifier_free(n);

	/* A malformed one is reported once and disables notifications. */
	n = sd_notifier_new(base, bad, error_cb, &errs);
	assert_false(sd_notifier_enabled(n));
	assert_int_equal(errs.n, 1);
	assert_int_equal(errs.last_err, -EINVAL);
	assert_string_equal(errs.last_state, "(null)");
	assert_non_null(strstr(errs.last_what, "NOTIFY_SOCKET='not/absolute'"));
	assert_int_equal(sd_notify_ready(n, "x"), 0);
	sd_notifier_free(n);

	/* NULL is accepted everywhere. */
	assert_false(sd_notifier_enabled(NULL));
	assert_int_equal(sd_notifier_watchdog_interval(NULL), 0);
	assert_int_equal(sd_notify_ready(NULL, "x"), 0);
	assert_int_equal(sd_notify_status(NULL, "x"), 0);
	assert_int_equal(sd_notify_stopping(NULL, "x"), 0);
	sd_notifier_free(NULL);
	event_base_free(base);
}

static void
test_notifier_watchdog(void **state)
{
	struct event_base *base = event_base_new();
	struct receiver rx;
	struct errors errs = {0};
	struct sd_notifier *n;
	char *envp[4] = {NULL};
	struct timeval run = {0, 105000};
	int pings = 0;
	char *d;

	receiver_open(&rx, true);
	envp[0] = xasprintf("NOTIFY_SOCKET=%s", rx.addr);
	envp[1] = xstrdup("WATCHDOG_USEC=20000");
	envp[2] = xasprintf("WATCHDOG_PID=%d", (int)getpid());
	n = sd_notifier_new(base, envp, error_cb, &errs);
	assert_int_equal(sd_notifier_watchdog_interval(n), 10000);
	/* 105 ms of loop at one ping per 10 ms. */
	event_base_loopexit(base, &run);
	event_base_dispatch(base);
	while ((d = receiver_next(&rx))) {
		assert_string_equal(d, "WATCHDOG=1");
		free(d);
		pings++;
	}
	if (pings < 3 || pings > 11) {
		fail_msg("%d pings in 105 ms at a 10 ms interval", pings);
	}
	assert_int_equal(errs.n, 0);
	sd_notifier_free(n);
	free(envp[1]);
	free(envp[2]);

	/* Another process's watchdog: no timer. */
	envp[1] = xstrdup("WATCHDOG_USEC=20000");
	envp[2] = xasprintf("WATCHDOG_PID=%d", (int)getpid() + 1);
	n = sd_notifier_new(base, envp, error_cb, &errs);
	assert_true(sd_notifier_enabled(n));
	assert_int_equal(sd_notifier_watchdog_interval(n), 0);
	sd_notifier_free(n);
	free(envp[1]);
	free(envp[2]);

	/* A tiny interval is raised to 1 ms; a malformed one is reported. */
	envp[1] = xstrdup("WATCHDOG_USEC=10");
	envp[2] = NULL;
	n = sd_notifier_new(base, envp, error_cb, &errs);
	assert_int_equal(sd_notifier_watchdog_interval(n), 1000);
	sd_notifier_free(n);
	free(envp[1]);
	envp[1] = xstrdup("WATCHDOG_USEC=soon");
	n = sd_notifier_new(base, envp, error_cb, &errs);
	assert_true(sd_notifier_enabled(n));
	assert_int_equal(sd_notifier_watchdog_interval(n), 0);
	assert_int_equal(errs.n, 1);
	assert_non_null(strstr(errs.last_what, "WATCHDOG_USEC='soon'"));
	sd_notifier_free(n);
	free(envp[1]);

	receiver_close(&rx);
	free(envp[0]);
	event_base_free(base);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_address),           cmocka_unit_test(test_send),
		cmocka_unit_test(test_watchdog_env),      cmocka_unit_test(test_notifier_messages),
		cmocka_unit_test(test_notifier_disabled), cmocka_unit_test(test_notifier_watchdog),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
