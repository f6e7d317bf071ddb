/* main.c — elasticd: parse the command line, build the agent and its control
 * plane, run, and take everything down in the reverse order. The only place
 * that decides the process exit status. */
#include <errno.h>
#include <event2/event.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agent.h"
#include "config.h"
#include "ctl.h"
#include "log.h"
#include "util.h"
#include "version.h"

extern char **environ;

/* Everything main starts, in the order it starts them (daemon_stop takes
 * them down in reverse). */
struct daemon {
	struct config cfg;
	struct event_base *base;
	struct agent *agent;
	struct ctl *ctl; /* NULL: none (--dry-run, or it could not start) */
	struct ctl_agent ctl_agent;
};

/* ---- the control plane's view of the agent (ctl.h) ------------------------- */

static json_t *
ctl_status(void *agent)
{
	return agent_status_json(agent);
}

static void
ctl_stats(void *agent, struct ctl_agent_stats *ret)
{
	agent_get_stats(agent, ret);
}

static int
ctl_worker(void *agent, int local_rank, struct ctl_worker_view *ret)
{
	return agent_worker_view(agent, local_rank, ret);
}

static int
ctl_restart(void *agent, char **reterr)
{
	return agent_request_restart(agent, reterr);
}

static int
ctl_drain(void *agent, int sig, int timeout_s, char **reterr)
{
	return agent_request_drain(agent, sig, timeout_s, reterr);
}

static int
ctl_exclude(void *agent, const char *reason, char **reterr)
{
	return agent_request_exclude(agent, reason, reterr);
}

static int
ctl_readmit(void *agent, const char *node, void (*reply)(void *call, int status, const char *msg),
	    void *call, char **reterr)
{
	return agent_request_readmit(agent, node, reply, call, reterr);
}

static void
ctl_readmit_cancel(void *agent)
{
	agent_readmit_cancel(agent);
}

static void
ctl_stop(void *agent, int sig)
{
	agent_request_stop(agent, sig);
}

static int
ctl_signal(void *agent, int local_rank, int sig, char **reterr)
{
	return agent_signal_worker(agent, local_rank, sig, reterr);
}

static json_t *
ctl_nodes(void *agent, char **reterr)
{
	return agent_nodes_json(agent, reterr);
}

static const struct ctl_agent_ops agent_ctl_ops = {
	.status = ctl_status,
	.stats = ctl_stats,
	.worker = ctl_worker,
	.restart = ctl_restart,
	.drain = ctl_drain,
	.exclude = ctl_exclude,
	.readmit = ctl_readmit,
	.readmit_cancel = ctl_readmit_cancel,
	.stop = ctl_stop,
	.signal = ctl_signal,
	.nodes = ctl_nodes,
};

/* ---- start and stop --------------------------------------------------------- */

/* Start the control plane for the agent. Returns 0, or the exit status when
 * it cannot start where the user asked (--control-socket) or with a bad
 * --control-socket-group. On the default path a failure is a warning:
 * elasticd runs without a control socket, as torchrun has none. */
static int
daemon_start_ctl(struct daemon *d)
{
	char *err = NULL;
	int r;

	d->ctl_agent = (struct ctl_agent){
		.ops = &agent_ctl_ops,
		.agent = d->agent,
		.events = agent_events(d->agent),
		.local_world_size = agent_local_world_size(d->agent),
	};
	r = ctl_new(d->base, &d->ctl_agent, &d->cfg, environ, &d->ctl, &err);
	if (r == 0) {
		log_info("[%s] control socket: %s", d->cfg.role, ctl_socket_path(d->ctl));
		agent_set_worker_server_dir(d->agent, ctl_worker_dir(d->ctl));
		agent_set_control_socket(d->agent, ctl_socket_path(d->ctl));
		return 0;
	}
	if (d->cfg.control_socket || r == -EINVAL) {
		log_error("control socket: %s", err ? err : strerror(-r));
		free(err);
		return r == -EINVAL ? AGENT_EXIT_USAGE : AGENT_EXIT_FAILURE;
	}
	log_warn("control socket: %s; running without one", err ? err : strerror(-r));
	free(err);
	return 0;
}

/* Start in order: the event loop, the agent, its control plane (which must
 * listen before the agent tells systemd READY=1, in agent_run). Returns 0, or
 * the exit status; what started is left for daemon_stop. */
static int
daemon_start(struct daemon *d)
{
	char *err = NULL;
	int code;

	json_object_seed(0);
	d->base = agent_base_new();
	if (!d->base) {
		fprintf(stderr, "elasticd: error: cannot create the event loop\n");
		return AGENT_EXIT_FAILURE;
	}
	d->agent = agent_new(d->base, &d->cfg, environ, &code, &err);
	if (!d->agent) {
		fprintf(stderr, "elasticd: error: %s\n", err ? err : "cannot start the agent");
		free(err);
		return code;
	}
	if (d->cfg.dry_run) {
		return 0; /* agent_run only prints the plan */
	}
	return daemon_start_ctl(d);
}

/* Stop in the reverse order of daemon_start; each step accepts what never
 * started. */
static void
daemon_stop(struct daemon *d)
{
	/* First: it answers its last clients with what the agent still holds. */
	ctl_free(d->ctl);
	d->ctl = NULL;
	agent_free(d->agent);
	d->agent = NULL;
	if (d->base) {
		event_base_free(d->base);
		d->base = NULL;
	}
	config_release(&d->cfg);
}

/* Parse the command line into d->cfg. Returns -1 to go on, or the exit
 * status (usage error, --help, --version). */
static int
daemon_parse(struct daemon *d, int argc, char **argv)
{
	char *err = NULL;
	const char *level = getenv("LOGLEVEL");
	enum log_level lvl;
	int r = config_parse(&d->cfg, argc, argv, environ, &err);

	if (r < 0) {
		fprintf(stderr,
			"elasticd: error: %s\nTry 'elasticd --help' for more information.\n",
			err ? err : strerror(-r));
		free(err);
		return AGENT_EXIT_USAGE;
	}
	if (r == CONFIG_HELP) {
		config_usage(stdout);
		return 0;
	}
	if (r == CONFIG_VERSION) {
		printf("elasticd %s\n", ELASTICD_VERSION);
		return 0;
	}
	if (level && log_level_parse(level, &lvl) == 0) {
		log_set_level(lvl);
	}
	return -1;
}

int
main(int argc, char **argv)
{
	struct daemon d = {0};
	int code = daemon_parse(&d, argc, argv);

	if (code < 0) {
		code = daemon_start(&d);
		if (code == 0) {
			code = agent_run(d.agent);
		}
	}
	daemon_stop(&d);
	return code;
}
