/* rdzv_swarm.c — benchmark driver: N rendezvous participants (elasticd's real
 * c10d backend, one handler each, as torch's local_id counter allows) in one
 * event loop against one store server, all joining at once.
 *
 *   rdzv_swarm N HOST:PORT [RDZV_CONF]
 *
 * The store must be running already (tcpstore_tool serve), unless
 * RDZV_SWARM_HOST=1: then participant 0 hosts it on HOST:PORT in this process
 * (is_host=true, as the agent on the endpoint host does, which makes it the
 * coordinator that admits the others) and RDZV_CONF must not set is_host.
 * RDZV_SWARM_SLICE=FIRST:COUNT runs only participants FIRST..FIRST+COUNT-1 of
 * the N (--nnodes N), so that a swarm larger than one process's fd limit runs
 * as several processes; participant 0 hosts only in the slice that has it.
 * Prints, once every participant of this process got its round (rank
 * exchange included):
 *   "swarm N=<n> first=<s> last=<s> world=<w> failed=<f> local=<count>
 *    start_abs=<s> last_abs=<s> rchar=<bytes> wchar=<bytes>"
 * with first/last in seconds since start, *_abs as CLOCK_REALTIME seconds,
 * and rchar/wchar this process's bytes read and written (/proc/self/io:
 * the participants' store traffic, the store itself when hosted here).
 * RDZV_SWARM_ROUNDS=2: once every participant of this process holds its
 * round, they all call rdzv_next again at once (as every agent does after a
 * worker failure), and a second line "reform last_abs=<s> rchar=<bytes>
 * wchar=<bytes>" follows (the bytes of that round alone).
 * RDZV_SWARM_BARRIER=1: once every participant of this process holds its
 * round, they all enter the exit barrier (as every agent does when its
 * workers succeeded), and a line "barrier N=<n> failed=<f> start_abs=<s>
 * last_abs=<s> rchar=<bytes> wchar=<bytes>" follows once all passed it.
 * RDZV_SWARM_AGAIN_AFTER=<ms>: with RDZV_SWARM_ROUNDS=2, run the event loop
 * that long between the two rounds (a test acts meanwhile, or another
 * process's participants start the next round first); the reform line then
 * ends with "told=<count> wait_rchar=<bytes>": how many participants were
 * told meanwhile that their round must re-form, and the bytes read meanwhile.
 * RDZV_SWARM_NNODES=<MIN:MAX>: --nnodes (default N).
 * RDZV_SWARM_PROGRESS=1: the participants' progress lines on stderr.
 * RDZV_SWARM_HOLD=1: then keep the event loop (and a store hosted here)
 * running until stdin reaches EOF.
 * Exit 0, or 1 on any rendezvous error. */
#include <event2/event.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "config.h"
#include "rdzv.h"
#include "util.h"

static struct event_base *base;

/* "rchar" or "wchar" of /proc/self/io, or -1. */
static long long
proc_io(const char *field)
{
	FILE *f = fopen("/proc/self/io", "r");
	char line[128];
	long long v = -1;
	size_t len = strlen(field);

	if (!f) {
		return -1;
	}
	while (fgets(line, sizeof(line), f)) {
		if (strncmp(line, field, len) == 0 && line[len] == ':') {
			v = atoll(line + len + 1);
		}
	}
	fclose(f);
	return v;
}
static int n_total, n_done, n_failed, n_told, world;
static uint64_t start, first, last;

static void
done_cb(int err, const struct rdzv_result *res, const char *errmsg, void *arg)
{
	uint64_t now = now_usec();

	if (err < 0) {
		fprintf(stderr, "rdzv_swarm: participant %ld: %s\n", (long)(intptr_t)arg,
			errmsg ? errmsg : "error");
		n_failed++;
	} else {
		world = res->group_world_size;
	}
	if (n_done++ == 0) {
		first = now;
	}
	last = now;
	if (n_done == n_total) {
		event_base_loopbreak(base);
	}
}

static void
finished_cb(int err, const char *errmsg, void *arg)
{
	if (err < 0) {
		fprintf(stderr, "rdzv_swarm: participant %ld: barrier: %s\n", (long)(intptr_t)arg,
			errmsg ? errmsg : "error");
		n_failed++;
	}
	if (++n_done == n_total) {
		event_base_loopbreak(base);
	}
}

static void
nodes_waiting_cb(int n, const char *why, void *arg)
{
	n_told++;
}

static void
progress_cb(const char *msg, void *arg)
{
	fprintf(stderr, "rdzv_swarm: participant %ld: %s\n", (long)(intptr_t)arg, msg);
}

static void
stdin_cb(evutil_socket_t fd, short what, void *arg)
{
	char buf[256];

	if (read(fd, buf, sizeof(buf)) <= 0) {
		event_base_loopbreak(base);
	}
}

/* The config of every participant (k = 1) and of the host (k = 0). */
static int
parse_configs(struct config *cfg, struct config *host_cfg, const char *nn, const char *backend,
	      const char *endpoint, const char *run_id, const char *conf, const char *host_conf)
{
	char *err = NULL;

	for (int k = host_conf ? 0 : 1; k < 2; k++) {
		char *args[] = {"elasticd",
				"--nnodes",
				(char *)nn,
				"--rdzv-backend",
				(char *)backend,
				"--rdzv-endpoint",
				(char *)endpoint,
				"--rdzv-id",
				(char *)run_id,
				"--rdzv-conf",
				k == 0 ? (char *)host_conf : (char *)conf,
				"--no-python",
				"true",
				NULL};

		if (config_parse(k == 0 ? host_cfg : cfg, ARRAY_SIZE(args) - 1, args, NULL, &err) !=
		    CONFIG_RUN) {
			fprintf(stderr, "rdzv_swarm: %s\n", err ? err : "bad config");
			return -1;
		}
	}
	return 0;
}

static double
abs_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static bool
env_is(const char *name, const char *value)
{
	return getenv(name) && strcmp(getenv(name), value) == 0;
}

/* Every participant asks for its next round again; wait for all. */
static void
reform(struct rdzv **rs, const char *nn)
{
	long long rchar = proc_io("rchar"), wchar = proc_io("wchar"), wait_rchar = -1;
	int told = 0;

	if (getenv("RDZV_SWARM_AGAIN_AFTER")) {
		long ms = atol(getenv("RDZV_SWARM_AGAIN_AFTER"));
		struct timeval tv = {ms / 1000, (ms % 1000) * 1000};

		event_base_loopexit(base, &tv);
		event_base_dispatch(base);
		wait_rchar = proc_io("rchar") - rchar;
		told = n_told;
		rchar = proc_io("rchar");
		wchar = proc_io("wchar");
	}
	n_done = 0;
	for (int i = 0; i < n_total; i++) {
		if (rdzv_next(rs[i]) < 0) {
			n_failed++;
		}
	}
	event_base_dispatch(base);
	printf("reform N=%s world=%d failed=%d last_abs=%.6f rchar=%lld wchar=%lld", nn, world,
	       n_failed, abs_now(), proc_io("rchar") - rchar, proc_io("wchar") - wchar);
	if (wait_rchar >= 0) {
		printf(" told=%d wait_rchar=%lld", told, wait_rchar);
	}
	printf("\n");
	fflush(stdout);
}

/* Every participant enters the exit barrier; wait until all passed it. */
static void
barrier(struct rdzv **rs, const char *nn)
{
	long long rchar = proc_io("rchar"), wchar = proc_io("wchar");
	double start_abs = abs_now();

	n_done = 0;
	for (int i = 0; i < n_total; i++) {
		if (rdzv_exit_barrier(rs[i]) < 0) {
			n_failed++;
			n_done++;
		}
	}
	if (n_done < n_total) {
		event_base_dispatch(base);
	}
	printf("barrier N=%s failed=%d start_abs=%.6f last_abs=%.6f rchar=%lld wchar=%lld\n", nn,
	       n_failed, start_abs, abs_now(), proc_io("rchar") - rchar, proc_io("wchar") - wchar);
	fflush(stdout);
}

/* Keep serving (a store hosted here) until stdin closes. */
static void
hold(void)
{
	struct event *in = event_new(base, 0, EV_READ | EV_PERSIST, stdin_cb, NULL);

	event_add(in, NULL);
	event_base_dispatch(base);
	event_free(in);
}

int
main(int argc, char **argv)
{
	struct config cfg = {0}, host_cfg = {0};
	bool hosted = env_is("RDZV_SWARM_HOST", "1");
	char *host_conf = NULL, *conf_others = NULL, *err = NULL, nn[32];
	const char *conf = argc > 3 ? argv[3] : "is_host=false,join_timeout=120";
	/* RDZV_SWARM_BACKEND=etcd: the etcd backend, HOST:PORT,... its members. */
	const char *backend = getenv("RDZV_SWARM_BACKEND") ? getenv("RDZV_SWARM_BACKEND") : "c10d";
	int first_i = 0;
	double start_abs;
	struct rdzv **rs;

	signal(SIGPIPE, SIG_IGN); /* a peer gone: an error, as in elasticd */
	if (argc < 3) {
		fprintf(stderr, "usage: rdzv_swarm N HOST:PORT [RDZV_CONF [RUN_ID]]\n");
		return 2;
	}
	n_total = atoi(argv[1]);
	snprintf(nn, sizeof(nn), "%d", n_total);
	if (getenv("RDZV_SWARM_SLICE") &&
	    sscanf(getenv("RDZV_SWARM_SLICE"), "%d:%d", &first_i, &n_total) != 2) {
		fprintf(stderr, "rdzv_swarm: RDZV_SWARM_SLICE: expected FIRST:COUNT\n");
		return 2;
	}
	hosted = hosted && first_i == 0;
	if (hosted) {
		host_conf = xasprintf("%s,is_host=true", conf);
		conf_others = xasprintf("%s,is_host=false", conf);
		conf = conf_others;
	}
	if (parse_configs(&cfg, &host_cfg,
			  getenv("RDZV_SWARM_NNODES") ? getenv("RDZV_SWARM_NNODES") : nn, backend,
			  argv[2], argc > 4 ? argv[4] : "swarm", conf, host_conf) < 0) {
		return 2;
	}
	base = event_base_new();
	rs = xcalloc((size_t)n_total, sizeof(*rs));
	start = now_usec();
	start_abs = abs_now();
	for (int i = 0; i < n_total; i++) {
		struct rdzv_callbacks cb = {
			.done = done_cb,
			.finished = finished_cb,
			.nodes_waiting = nodes_waiting_cb,
			.progress = env_is("RDZV_SWARM_PROGRESS", "1") ? progress_cb : NULL,
			.arg = (void *)(intptr_t)(first_i + i)};

		rs[i] = rdzv_new(base, hosted && i == 0 ? &host_cfg : &cfg, 1, &cb, &err);
		if (!rs[i] || rdzv_next(rs[i]) < 0) {
			fprintf(stderr, "rdzv_swarm: %s\n", err ? err : "cannot start");
			return 1;
		}
	}
	event_base_dispatch(base);
	printf("swarm N=%s first=%.3f last=%.3f world=%d failed=%d local=%d start_abs=%.6f "
	       "last_abs=%.6f rchar=%lld wchar=%lld\n",
	       nn, (double)(first - start) / 1e6, (double)(last - start) / 1e6, world, n_failed,
	       n_total, start_abs, abs_now(), proc_io("rchar"), proc_io("wchar"));
	fflush(stdout);
	if (env_is("RDZV_SWARM_ROUNDS", "2") && !n_failed) {
		reform(rs, nn);
	}
	if (env_is("RDZV_SWARM_BARRIER", "1") && !n_failed) {
		barrier(rs, nn);
	}
	if (env_is("RDZV_SWARM_HOLD", "1")) {
		hold();
	}
	for (int i = 0; i < n_total; i++) {
		rdzv_free(rs[i]);
	}
	free(rs);
	event_base_free(base);
	config_release(&cfg);
	if (hosted) {
		config_release(&host_cfg);
	}
	free(host_conf);
	free(conf_others);
	return n_failed ? 1 : 0;
}
