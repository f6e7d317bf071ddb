/* rdzv_static.c — the static rendezvous (torchrun's StaticTCPRendezvous).
 *
 * Every node is told its group rank (--node-rank) and the node count
 * (--nnodes N); there is no shared rendezvous state. As with torchrun, the node
 * of rank 0 hosts a c10d TCPStore at --master-addr:--master-port (or the
 * host:port of --rdzv-endpoint) for the lifetime of the agent, and every
 * node's workers use it as their store: TORCHELASTIC_USE_AGENT_STORE=True,
 * MASTER_ADDR/MASTER_PORT pointing at it. All nodes are assumed to run the
 * same --nproc-per-node and --role (torchrun exchanges them through the
 * store; elasticd's static nodes do not talk to each other). */
#include <errno.h>
#include <event2/event.h>
#include <string.h>

#include "config.h"
#include "rdzv.h"
#include "tcpstore_server.h"
#include "endpoint.h"
#include "util.h"

struct rdzv_static {
	int group_rank;
	int group_world_size;
	char *master_addr;
	int master_port;
	int round;
	struct event *ev;
	struct tcpstore_server *store; /* on group rank 0 only */
};

static int
static_init(struct rdzv *r, char **reterr)
{
	const struct config *cfg = r->cfg;
	struct rdzv_static *s = xcalloc(1, sizeof(*s));

	r->backend = s;
	if (cfg->min_nodes != cfg->max_nodes) {
		*reterr = xasprintf("--nnodes: the static backend needs a fixed node count, not "
				    "%d:%d",
				    cfg->min_nodes, cfg->max_nodes);
		return -EINVAL;
	}
	s->group_world_size = cfg->max_nodes;
	if (cfg->node_rank < 0 || cfg->node_rank >= s->group_world_size) {
		*reterr = xasprintf("--node-rank: invalid value '%d': must be in [0, %d) for "
				    "--nnodes %d",
				    cfg->node_rank, s->group_world_size, s->group_world_size);
		return -EINVAL;
	}
	s->group_rank = cfg->node_rank;
	if (cfg->rdzv_endpoint && *cfg->rdzv_endpoint) {
		char *e = NULL;

		if (endpoint_parse(cfg->rdzv_endpoint, -1, &s->master_addr, &s->master_port, &e) <
		    0) {
			*reterr = xasprintf("--rdzv-endpoint: invalid value '%s': %s",
					    cfg->rdzv_endpoint, e);
			free(e);
			return -EINVAL;
		}
		if (s->master_port < 0) {
			*reterr = xasprintf("--rdzv-endpoint: port is missing in endpoint: %s. "
					    "Try to specify --master-port",
					    cfg->rdzv_endpoint);
			return -EINVAL;
		}
	} else {
		s->master_addr = xstrdup(cfg->master_addr);
		s->master_port = cfg->master_port;
	}
	if (s->group_rank == 0) {
		char *err = NULL;
		int r_err = 0;

		/* Every address, as torch's TCPStore server: the other nodes' workers
		 * reach it by whatever name --master-addr gives them. */
		s->store = tcpstore_server_new(r->base, NULL, s->master_port, NULL, &r_err, &err);
		if (!s->store) {
			*reterr =
				xasprintf("--master-port: cannot host the agent store on port %d: "
					  "%s",
					  s->master_port, err ? err : strerror(-r_err));
			free(err);
			return -EINVAL;
		}
		free(err);
		/* Port 0 asks for an ephemeral port; the workers need the real one. */
		s->master_port = tcpstore_server_port(s->store);
		tcpstore_server_set_notice_cb(s->store, rdzv_store_notice, r);
	}
	return 0;
}

static void
static_done_cb(evutil_socket_t fd, short what, void *arg)
{
	struct rdzv *r = arg;
	struct rdzv_static *s = r->backend;
	struct rdzv_result res = {0};

	res.round = s->round++;
	res.group_rank = s->group_rank;
	res.group_world_size = s->group_world_size;
	/* Every node alike, as torchrun's static rendezvous assumes: one run. */
	res.runs = xcalloc(1, sizeof(*res.runs));
	res.runs[0] =
		(struct ranks_run){r->cfg->role, r->local_world_size, (size_t)s->group_world_size};
	res.n_runs = 1;
	res.master_addr = xstrdup(s->master_addr);
	res.master_port = s->master_port;
	res.use_agent_store = true;
	r->cb.done(0, &res, NULL, r->cb.arg);
	rdzv_result_release(&res);
}

static int
static_next(struct rdzv *r)
{
	struct rdzv_static *s = r->backend;
	struct timeval now = {0, 0};

	if (!s->ev) {
		s->ev = evtimer_new(r->base, static_done_cb, r);
	}
	return evtimer_add(s->ev, &now) < 0 ? -EIO : 0;
}

static int
static_num_nodes_waiting(struct rdzv *r)
{
	return 0;
}

static void
static_shutdown(struct rdzv *r)
{
}

static void
static_free(struct rdzv *r)
{
	struct rdzv_static *s = r->backend;

	if (!s) {
		return;
	}
	if (s->ev) {
		event_free(s->ev);
	}
	tcpstore_server_free(s->store);
	free(s->master_addr);
	free(s);
}

const struct rdzv_backend_ops rdzv_static_ops = {
	.name = "static",
	.init = static_init,
	.next = static_next,
	.num_nodes_waiting = static_num_nodes_waiting,
	.shutdown = static_shutdown,
	.free = static_free,
};
