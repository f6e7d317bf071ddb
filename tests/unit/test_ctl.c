/* test_ctl.c — the control plane's transport and handlers against a fake
 * agent (a struct ctl_agent_ops of stubs): real HTTP requests over a real
 * Unix socket, the loop stepped in-process until the reply is complete. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <event2/event.h>
#include <fcntl.h>
#include <jansson.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "config.h"
#include "ctl.h"
#include "events.h"
#include "util.h"

/* ---- the fake agent ----------------------------------------------------- */

struct fake_agent {
	int restarts, stops, stop_sig, signals, signal_rank, signal_sig;
	int nodes;
	bool nodes_err;
	int drains, drain_sig, drain_timeout, drain_err;
	int restart_err; /* what restart returns */
	bool have_group;
	char log_path[128];
};

static json_t *
fake_status(void *agent)
{
	return json_pack("{s:s, s:i}", "node_state", "RUNNING", "restart_count", 2);
}

static void
fake_stats(void *agent, struct ctl_agent_stats *ret)
{
	ret->run_id = "job\"1";
	ret->role = "trainer";
	ret->rdzv_backend = "c10d";
	ret->node = "host_1_0";
	ret->uptime_s = 1.5;
	ret->local_world_size = 2;
	ret->remaining_restarts = 3;
	ret->node_state = (struct ctl_state_gauge){{"INIT", "RUNNING"}, {0, 1}, 2};
	ret->group_state = (struct ctl_state_gauge){{"HEALTHY", "FAILED"}, {1, 0}, 2};
	ret->workers = (struct ctl_state_gauge){{"HEALTHY", "FAILED"}, {2, 0}, 2};
	ret->counters.restarts_requested = 4;
	ret->counters.worker_failures[-9 - CTL_EXITCODE_MIN] = 5;
}

static int
fake_worker(void *agent, int local_rank, struct ctl_worker_view *ret)
{
	struct fake_agent *f = agent;

	if (!f->have_group) {
		return -ENOENT;
	}
	if (local_rank < 0 || local_rank > 1) {
		return -ERANGE;
	}
	*ret = (struct ctl_worker_view){
		.local_rank = local_rank,
		.pid = 100 + local_rank,
		.running = local_rank == 0,
		.stream_path = {f->log_path, NULL},
	};
	return 0;
}

static int
fake_restart(void *agent, char **reterr)
{
	struct fake_agent *f = agent;

	f->restarts++;
	if (f->restart_err) {
		*reterr = xstrdup("no worker group is running");
	}
	return f->restart_err;
}

static int
fake_readmit(void *agent, const char *node, void (*reply)(void *call, int status, const char *msg),
	     void *call, char **reterr)
{
	*reterr = xstrdup("not in this fake");
	return -EBUSY;
}

static void
fake_readmit_cancel(void *agent)
{
}

static int
fake_exclude(void *agent, const char *reason, char **reterr)
{
	*reterr = xstrdup("not in this fake");
	return -EBUSY;
}

static int
fake_drain(void *agent, int sig, int timeout_s, char **reterr)
{
	struct fake_agent *f = agent;

	f->drains++;
	f->drain_sig = sig;
	f->drain_timeout = timeout_s;
	if (f->drain_err) {
		*reterr = xstrdup("the agent is draining already");
	}
	return f->drain_err;
}

static void
fake_stop(void *agent, int sig)
{
	struct fake_agent *f = agent;

	f->stops++;
	f->stop_sig = sig;
}

static int
fake_signal(void *agent, int local_rank, int sig, char **reterr)
{
	struct fake_agent *f = agent;

	f->signals++;
	f->signal_rank = local_rank;
	f->signal_sig = sig;
	return 0;
}

static json_t *
fake_nodes(void *agent, char **reterr)
{
	struct fake_agent *f = agent;

	f->nodes++;
	if (f->nodes_err) {
		*reterr = xstrdup("no shared state");
		return NULL;
	}
	return json_pack("{s:s, s:[{s:s, s:i}]}", "backend", "c10d", "participants", "node",
			 "a_1_0", "group_rank", 0);
}

static const struct ctl_agent_ops fake_ops = {
	.status = fake_status,
	.stats = fake_stats,
	.worker = fake_worker,
	.restart = fake_restart,
	.drain = fake_drain,
	.exclude = fake_exclude,
	.readmit = fake_readmit,
	.readmit_cancel = fake_readmit_cancel,
	.stop = fake_stop,
	.signal = fake_signal,
	.nodes = fake_nodes,
};

/* ---- a control plane on a temporary socket -------------------------------- */

struct fixture {
	char dir[64];
	char path[128];
	struct event_base *base;
	struct events *events;
	struct config cfg;
	struct ctl_agent agent;
	struct fake_agent fake;
	struct ctl *ctl;
};

static int
setup(void **state)
{
	struct fixture *fx = xcalloc(1, sizeof(*fx));
	char *err = NULL;
	FILE *f;

	snprintf(fx->dir, sizeof(fx->dir), "/tmp/test_ctl.XXXXXX");
	assert_non_null(mkdtemp(fx->dir));
	snprintf(fx->path, sizeof(fx->path), "%s/c.sock", fx->dir);
	snprintf(fx->fake.log_path, sizeof(fx->fake.log_path), "%s/stdout.log", fx->dir);
	f = fopen(fx->fake.log_path, "w");
	assert_non_null(f);
	fputs("one\ntwo\nthree\n", f);
	fclose(f);
	fx->fake.have_group = true;
	fx->base = event_base_new();
	fx->events = events_new(16);
	fx->cfg.control_socket = fx->path;
	fx->cfg.no_worker_server = true;
	fx->agent = (struct ctl_agent){&fake_ops, &fx->fake, fx->events, 2};
	assert_int_equal(ctl_new(fx->base, &fx->agent, &fx->cfg, NULL, &fx->ctl, &err), 0);
	assert_null(err);
	*state = fx;
	return 0;
}

static int
teardown(void **state)
{
	struct fixture *fx = *state;

	ctl_free(fx->ctl);
	assert_int_equal(access(fx->path, F_OK), -1); /* ctl_free removed it */
	events_free(fx->events);
	event_base_free(fx->base);
	unlink(fx->fake.log_path);
	rmdir(fx->dir);
	free(fx);
	return 0;
}

/* One HTTP/1.0 exchange: send the request, step the loop until the server
 * closes. Returns the response (malloc'd). */
static char *
request(struct fixture *fx, const char *method, const char *target)
{
	struct sockaddr_un sun = {.sun_family = AF_UNIX};
	char *req = xasprintf("%s %s HTTP/1.0\r\nHost: localhost\r\n\r\n", method, target);
	size_t len = 0, cap = 65536;
	char *resp = xmalloc(cap);
	struct timespec t0, t;
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);

	assert_true(fd >= 0);
	strcpy(sun.sun_path, fx->path);
	assert_int_equal(connect(fd, (struct sockaddr *)&sun, sizeof(sun)), 0);
	assert_int_equal(write(fd, req, strlen(req)), (ssize_t)strlen(req));
	free(req);
	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (;;) {
		ssize_t n;

		event_base_loop(fx->base, EVLOOP_ONCE | EVLOOP_NONBLOCK);
		n = read(fd, resp + len, cap - 1 - len);
		if (n == 0) {
			break;
		}
		if (n > 0) {
			len += (size_t)n;
			assert_true(len < cap - 1);
			continue;
		}
		assert_int_equal(errno, EAGAIN);
		clock_gettime(CLOCK_MONOTONIC, &t);
		assert_true(t.tv_sec - t0.tv_sec < 10);
		usleep(1000);
	}
	close(fd);
	resp[len] = '\0';
	return resp;
}

/* The status line's code and the body of a response. */
static int
status_of(const char *resp)
{
	int code = 0;

	assert_int_equal(sscanf(resp, "HTTP/1.%*d %d", &code), 1);
	return code;
}

static const char *
body_of(const char *resp)
{
	const char *b = strstr(resp, "\r\n\r\n");

	assert_non_null(b);
	return b + 4;
}

/* ---- the tests --------------------------------------------------------------- */

static void
test_ping(void **state)
{
	_cleanup_free_ char *r = request(*state, "POST", "/handler/ping");

	assert_int_equal(status_of(r), 200);
	assert_string_equal(body_of(r), "pong");
}

static void
test_nodes_through_ops(void **state)
{
	struct fixture *fx = *state;
	_cleanup_free_ char *r = request(fx, "GET", "/handler/nodes");
	json_t *j = json_loads(body_of(r), 0, NULL);
	_cleanup_free_ char *r2 = NULL;

	assert_int_equal(status_of(r), 200);
	assert_non_null(j);
	assert_string_equal(json_string_value(json_object_get(j, "backend")), "c10d");
	json_decref(j);
	assert_int_equal(fx->fake.nodes, 1);
	fx->fake.nodes_err = true;
	r2 = request(fx, "POST", "/handler/nodes");
	assert_int_equal(status_of(r2), 500);
	assert_non_null(strstr(body_of(r2), "no shared state"));
}

static void
test_status_through_ops(void **state)
{
	struct fixture *fx = *state;
	_cleanup_free_ char *r = request(fx, "GET", "/handler/status");
	json_t *j = json_loads(body_of(r), 0, NULL);

	assert_int_equal(status_of(r), 200);
	assert_non_null(j);
	assert_string_equal(json_string_value(json_object_get(j, "node_state")), "RUNNING");
	assert_int_equal(json_integer_value(json_object_get(j, "restart_count")), 2);
	/* The transport adds its own socket path. */
	assert_string_equal(json_string_value(json_object_get(j, "control_socket")), fx->path);
	json_decref(j);
}

static void
test_metrics_typed(void **state)
{
	_cleanup_free_ char *r = request(*state, "GET", "/metrics");
	const char *b = body_of(r);

	assert_int_equal(status_of(r), 200);
	assert_non_null(strstr(b, "elasticd_info{version=\""));
	assert_non_null(strstr(b, "run_id=\"job\\\"1\",role=\"trainer\",rdzv_backend=\"c10d\","
				  "node=\"host_1_0\"} 1\n"));
	assert_non_null(strstr(b, "\nelasticd_uptime_seconds 1.500\n"));
	assert_non_null(strstr(b, "\nelasticd_node_state{state=\"INIT\"} 0\n"
				  "elasticd_node_state{state=\"RUNNING\"} 1\n"));
	assert_non_null(strstr(b, "\nelasticd_worker_group_state{state=\"HEALTHY\"} 1\n"));
	assert_non_null(strstr(b, "\nelasticd_workers{state=\"HEALTHY\"} 2\n"));
	assert_non_null(strstr(b, "\nelasticd_local_world_size 2\n"));
	assert_non_null(strstr(b, "\nelasticd_restarts_total{reason=\"requested\"} 4\n"));
	assert_non_null(strstr(b, "\nelasticd_remaining_restarts 3\n"));
	assert_non_null(strstr(b, "\nelasticd_worker_failures_total{exitcode=\"-9\"} 5\n"));
	assert_null(strstr(b, "exitcode=\"0\""));
	assert_non_null(strstr(b, "\nelasticd_control_requests_total 1\n"));
}

static void
test_restart_stop_signal(void **state)
{
	struct fixture *fx = *state;
	char *r;

	r = request(fx, "POST", "/handler/restart");
	assert_int_equal(status_of(r), 200);
	assert_int_equal(fx->fake.restarts, 1);
	free(r);
	/* A state-changing handler refuses GET and never reaches the agent. */
	r = request(fx, "GET", "/handler/restart");
	assert_int_equal(status_of(r), 405);
	assert_int_equal(fx->fake.restarts, 1);
	free(r);
	fx->fake.restart_err = -EBUSY;
	r = request(fx, "POST", "/handler/restart");
	assert_int_equal(status_of(r), 500);
	assert_string_equal(body_of(r), "Handler restart failed: no worker group is running");
	free(r);
	r = request(fx, "POST", "/handler/signal?rank=0&signal=USR1");
	assert_int_equal(status_of(r), 200);
	assert_string_equal(body_of(r), "sent SIGUSR1 to local_rank 0 (pid 100)\n");
	assert_int_equal(fx->fake.signal_rank, 0);
	assert_int_equal(fx->fake.signal_sig, SIGUSR1);
	free(r);
	/* Ranks beyond local_world_size are the transport's to refuse. */
	r = request(fx, "POST", "/handler/signal?rank=2&signal=USR1");
	assert_int_equal(status_of(r), 400);
	assert_int_equal(fx->fake.signals, 1);
	free(r);
	r = request(fx, "POST", "/handler/stop");
	assert_int_equal(status_of(r), 200);
	assert_int_equal(fx->fake.stops, 1);
	assert_int_equal(fx->fake.stop_sig, SIGTERM);
	free(r);
}

static void
test_drain(void **state)
{
	struct fixture *fx = *state;
	char *r;

	/* Defaults: the agent's notice (0) and grace (-1). */
	r = request(fx, "POST", "/handler/drain");
	assert_int_equal(status_of(r), 200);
	assert_int_equal(fx->fake.drains, 1);
	assert_int_equal(fx->fake.drain_sig, 0);
	assert_int_equal(fx->fake.drain_timeout, -1);
	free(r);
	r = request(fx, "POST", "/handler/drain?signal=USR2&timeout=30");
	assert_int_equal(status_of(r), 200);
	assert_int_equal(fx->fake.drain_sig, SIGUSR2);
	assert_int_equal(fx->fake.drain_timeout, 30);
	free(r);
	/* Refused before the agent: GET, a bad signal, a grace out of range. */
	r = request(fx, "GET", "/handler/drain");
	assert_int_equal(status_of(r), 405);
	free(r);
	r = request(fx, "POST", "/handler/drain?signal=NOPE");
	assert_int_equal(status_of(r), 400);
	free(r);
	r = request(fx, "POST", "/handler/drain?timeout=-1");
	assert_int_equal(status_of(r), 400);
	free(r);
	r = request(fx, "POST", "/handler/drain?timeout=604801");
	assert_int_equal(status_of(r), 400);
	free(r);
	assert_int_equal(fx->fake.drains, 2);
	fx->fake.drain_err = -EALREADY;
	r = request(fx, "POST", "/handler/drain");
	assert_int_equal(status_of(r), 500);
	assert_string_equal(body_of(r), "Handler drain failed: the agent is draining already");
	free(r);
}

static void
test_worker_views(void **state)
{
	struct fixture *fx = *state;
	char *r;

	r = request(fx, "GET", "/handler/logs?rank=0&lines=2");
	assert_int_equal(status_of(r), 200);
	assert_string_equal(body_of(r), "two\nthree\n");
	free(r);
	r = request(fx, "GET", "/handler/logs?rank=0&stream=stderr");
	assert_int_equal(status_of(r), 500);
	free(r);
	/* Rank 1 is not running; rank 0 has no worker server. */
	r = request(fx, "GET", "/ranks/1/handler/ping");
	assert_int_equal(status_of(r), 503);
	free(r);
	r = request(fx, "GET", "/ranks/0/handler/ping");
	assert_int_equal(status_of(r), 502);
	free(r);
	r = request(fx, "GET", "/ranks/2/handler/ping");
	assert_int_equal(status_of(r), 404);
	free(r);
	fx->fake.have_group = false;
	r = request(fx, "GET", "/handler/logs");
	assert_int_equal(status_of(r), 500);
	assert_string_equal(body_of(r), "Handler logs failed: no worker group was started yet");
	free(r);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_ping, setup, teardown),
		cmocka_unit_test_setup_teardown(test_status_through_ops, setup, teardown),
		cmocka_unit_test_setup_teardown(test_nodes_through_ops, setup, teardown),
		cmocka_unit_test_setup_teardown(test_metrics_typed, setup, teardown),
		cmocka_unit_test_setup_teardown(test_restart_stop_signal, setup, teardown),
		cmocka_unit_test_setup_teardown(test_drain, setup, teardown),
		cmocka_unit_test_setup_teardown(test_worker_views, setup, teardown),
	};

	signal(SIGPIPE, SIG_IGN);
	return cmocka_run_group_tests(tests, NULL, NULL);
}
