/* rdzv_static.c — rendezvous without shared state.
 *
 * static: every node is told its group rank (--node-rank) and the node count
 * (--nnodes N); workers meet at --master-addr:--master-port (or the host:port
 * of --rdzv-endpoint), where worker RANK 0 hosts the c10d TCPStore. All nodes
 * are assumed to run the same --nproc-per-node and --role.
 * standalone (and a one-node c10d job): this node is group rank 0 of 1; the
 * master is this host on a free port, as torchrun 1.13's standalone mode
 * (TORCHELASTIC_USE_AGENT_STORE=False: worker RANK 0 binds the port). */
#include <errno.h>
#include <event2/event.h>
#include <netdb.h>
#include <netinet/in.h>
#include <arpa/inet.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "config.h"
#include "rdzv.h"
#include "util.h"

struct rdzv_static {
	bool single; /* standalone / one-node c10d: free port on this host */
	int group_rank;
	int group_world_size;
	char *master_addr;
	int master_port;
	int round;
	struct event *ev;
};

static int
static_init(struct rdzv *r, char **reterr)
{
	const struct config *cfg = r->cfg;
	struct rdzv_static *s = xcalloc(1, sizeof(*s));

	r->backend = s;
	if (cfg->standalone || strcmp(cfg->rdzv_backend, "static") != 0) {
		s->single = true;
		s->group_world_size = 1;
		s->master_addr = xstrdup(cfg->local_addr ? cfg->local_addr : "localhost");
		return 0;
	}
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
		if (rdzv_parse_endpoint(cfg->rdzv_endpoint, -1, &s->master_addr, &s->master_port) <
		    0) {
			*reterr = xasprintf("--rdzv-endpoint: invalid value '%s': expected "
					    "HOST:PORT",
					    cfg->rdzv_endpoint);
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
	return 0;
}

/* A port nobody listens on now, as torchrun's _get_socket_with_port: bind port
 * 0 on localhost, read it, close. Racy by nature (another process may take it
 * before worker RANK 0 binds); the agent store removes the race. */
static int
free_port(void)
{
	struct addrinfo hints = {.ai_socktype = SOCK_STREAM, .ai_flags = AI_PASSIVE}, *res, *ai;
	int port = -EADDRNOTAVAIL;

	if (getaddrinfo("localhost", "0", &hints, &res) != 0) {
		return -EADDRNOTAVAIL;
	}
	for (ai = res; ai; ai = ai->ai_next) {
		struct sockaddr_storage ss;
		socklen_t len = sizeof(ss);
		int fd = socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC, ai->ai_protocol);

		if (fd < 0) {
			continue;
		}
		if (bind(fd, ai->ai_addr, ai->ai_addrlen) == 0 && listen(fd, 0) == 0 &&
		    getsockname(fd, (struct sockaddr *)&ss, &len) == 0) {
			port = ss.ss_family == AF_INET6
				       ? ntohs(((struct sockaddr_in6 *)&ss)->sin6_port)
				       : ntohs(((struct sockaddr_in *)&ss)->sin_port);
			close(fd);
			break;
		}
		close(fd);
	}
	freeaddrinfo(res);
	return port;
}

static void
static_done_cb(evutil_socket_t fd, short what, void *arg)
{
	struct rdzv *r = arg;
	struct rdzv_static *s = r->backend;
	struct rdzv_result res = {0};
	int port = s->master_port;

	if (s->single) {
		port = free_port();
		if (port < 0) {
			r->cb.done(port, NULL,
				   "cannot find a free port on localhost for MASTER_PORT",
				   r->cb.arg);
			return;
		}
	}
	res.round = s->round++;
	res.group_rank = s->group_rank;
	res.group_world_size = s->group_world_size;
	res.nodes = xcalloc((size_t)s->group_world_size, sizeof(*res.nodes));
	for (int i = 0; i < s->group_world_size; i++) {
		res.nodes[i].role = r->cfg->role;
		res.nodes[i].local_world_size = r->local_world_size;
	}
	res.master_addr = xstrdup(s->master_addr);
	res.master_port = port;
	res.use_agent_store = false;
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
