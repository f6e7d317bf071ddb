#include "rdzv.h"

#include <errno.h>
#include <event2/event.h>
#include <string.h>

#include "config.h"
#include "util.h"

int
rdzv_parse_endpoint(const char *endpoint, int default_port, char **ret_host, int *ret_port)
{
	const char *colon;
	long long port = default_port;
	char *host;

	if (!endpoint || !*endpoint) {
		return -EINVAL;
	}
	if (endpoint[0] == '[') {
		const char *close = strchr(endpoint, ']');

		if (!close || close == endpoint + 1) {
			return -EINVAL;
		}
		host = xstrndup(endpoint + 1, (size_t)(close - endpoint - 1));
		colon = close[1] == ':' ? close + 1 : NULL;
		if (!colon && close[1] != '\0') {
			free(host);
			return -EINVAL;
		}
	} else {
		colon = strrchr(endpoint, ':');
		if (colon && strchr(endpoint, ':') != colon) {
			/* A bare IPv6 address without brackets: no port. */
			colon = NULL;
		}
		host = colon ? xstrndup(endpoint, (size_t)(colon - endpoint)) : xstrdup(endpoint);
	}
	if (colon && parse_int(colon + 1, 0, 65535, &port) < 0) {
		free(host);
		return -EINVAL;
	}
	if (!*host || port < 0) {
		free(host);
		return -EINVAL;
	}
	*ret_host = host;
	*ret_port = (int)port;
	return 0;
}

struct rdzv *
rdzv_new(struct event_base *base, const struct config *cfg, int local_world_size,
	 const struct rdzv_callbacks *cb, char **reterr)
{
	struct rdzv *r;
	const struct rdzv_backend_ops *ops = NULL;

	if (cfg->standalone || strcmp(cfg->rdzv_backend, "c10d") == 0) {
		/* --standalone is c10d on localhost with an ephemeral port. */
		ops = &rdzv_c10d_ops;
	} else if (strcmp(cfg->rdzv_backend, "static") == 0) {
		ops = &rdzv_static_ops;
	} else if (strcmp(cfg->rdzv_backend, "etcd") == 0) {
		/* etcd's v3 API (rdzv_etcd.c). */
		ops = &rdzv_etcd_ops;
	} else if (strcmp(cfg->rdzv_backend, "etcd-v2") == 0) {
		*reterr = xasprintf("--rdzv-backend: '%s' (etcd's v2 API) is not supported; use "
				    "--rdzv-backend etcd (v3 API) or c10d",
				    cfg->rdzv_backend);
		return NULL;
	} else {
		*reterr = xasprintf("--rdzv-backend: unknown backend '%s' (expected static, c10d, "
				    "etcd or etcd-v2)",
				    cfg->rdzv_backend);
		return NULL;
	}
	r = xcalloc(1, sizeof(*r));
	r->ops = ops;
	r->base = base;
	r->cfg = cfg;
	r->local_world_size = local_world_size;
	r->cb = *cb;
	r->events = cb->events;
	if (ops->init && ops->init(r, reterr) < 0) {
		rdzv_free(r);
		return NULL;
	}
	return r;
}

int
rdzv_next(struct rdzv *r)
{
	return r->ops->next(r);
}

int
rdzv_num_nodes_waiting(struct rdzv *r)
{
	return r->ops->num_nodes_waiting(r);
}

void
rdzv_shutdown(struct rdzv *r)
{
	r->ops->shutdown(r);
}

static void
finished_deferred(evutil_socket_t fd, short what, void *arg)
{
	struct rdzv *r = arg;

	if (r->cb.finished) {
		r->cb.finished(0, NULL, r->cb.arg);
	}
}

int
rdzv_exit_barrier(struct rdzv *r)
{
	if (r->ops->exit_barrier) {
		return r->ops->exit_barrier(r);
	}
	return event_base_once(r->base, -1, EV_TIMEOUT, finished_deferred, r, NULL) < 0 ? -ENOMEM
											: 0;
}

int
rdzv_finish(struct rdzv *r, bool close)
{
	if (r->ops->finish) {
		return r->ops->finish(r, close);
	}
	if (close) {
		r->ops->shutdown(r);
	}
	return event_base_once(r->base, -1, EV_TIMEOUT, finished_deferred, r, NULL) < 0 ? -ENOMEM
											: 0;
}

void
rdzv_free(struct rdzv *r)
{
	if (!r) {
		return;
	}
	if (r->ops->free) {
		r->ops->free(r);
	}
	free(r);
}

void
rdzv_result_release(struct rdzv_result *res)
{
	free(res->nodes);
	free(res->master_addr);
	memset(res, 0, sizeof(*res));
}
