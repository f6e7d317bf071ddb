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
 * Prints, once every
 * participant got its round (rank exchange included):
 *   "swarm N=<n> first=<s> last=<s> world=<w>"
 * with times in seconds since start. Exit 0, or 1 on any rendezvous error. */
#include <event2/event.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"
#include "rdzv.h"
#include "util.h"

static struct event_base *base;
static int n_total, n_done, n_failed, world;
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

int
main(int argc, char **argv)
{
	struct config cfg = {0}, host_cfg = {0};
	bool hosted = getenv("RDZV_SWARM_HOST") && strcmp(getenv("RDZV_SWARM_HOST"), "1") == 0;
	char *host_conf = NULL, *conf_others = NULL;
	struct rdzv **rs;
	char *err = NULL;
	char nn[32];
	const char *conf = argc > 3 ? argv[3] : "is_host=false,join_timeout=120";
	/* RDZV_SWARM_BACKEND=etcd: the etcd backend, HOST:PORT,... its members. */
	const char *backend = getenv("RDZV_SWARM_BACKEND") ? getenv("RDZV_SWARM_BACKEND") : "c10d";

	if (argc < 3) {
		fprintf(stderr, "usage: rdzv_swarm N HOST:PORT [RDZV_CONF [RUN_ID]]\n");
		return 2;
	}
	n_total = atoi(argv[1]);
	snprintf(nn, sizeof(nn), "%d", n_total);
	if (hosted) {
		host_conf = xasprintf("%s,is_host=true", conf);
		conf_others = xasprintf("%s,is_host=false", conf);
		conf = conf_others;
	}
	for (int k = hosted ? 0 : 1; k < 2; k++) {
		char *args[] = {"elasticd",
				"--nnodes",
				nn,
				"--rdzv-backend",
				(char *)backend,
				"--rdzv-endpoint",
				argv[2],
				"--rdzv-id",
				argc > 4 ? argv[4] : "swarm",
				"--rdzv-conf",
				k == 0 ? host_conf : (char *)conf,
				"--no-python",
				"true",
				NULL};

		if (config_parse(k == 0 ? &host_cfg : &cfg, ARRAY_SIZE(args) - 1, args, NULL,
				 &err) != CONFIG_RUN) {
			fprintf(stderr, "rdzv_swarm: %s\n", err ? err : "bad config");
			return 2;
		}
	}
	base = event_base_new();
	rs = xcalloc((size_t)n_total, sizeof(*rs));
	start = now_usec();
	for (int i = 0; i < n_total; i++) {
		struct rdzv_callbacks cb = {.done = done_cb, .arg = (void *)(intptr_t)i};

		rs[i] = rdzv_new(base, hosted && i == 0 ? &host_cfg : &cfg, 1, &cb, &err);
		if (!rs[i] || rdzv_next(rs[i]) < 0) {
			fprintf(stderr, "rdzv_swarm: %s\n", err ? err : "cannot start");
			return 1;
		}
	}
	event_base_dispatch(base);
	printf("swarm N=%d first=%.3f last=%.3f world=%d failed=%d\n", n_total,
	       (double)(first - start) / 1e6, (double)(last - start) / 1e6, world, n_failed);
	fflush(stdout);
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
