/* rdzv_c10d_kv.c — the rendezvous TCPStore as the key-value store of the
 * rank exchange and the exit barrier (rdzv_exchange.h): SET / MULTI_SET,
 * WAIT then MULTI_GET, ADD on the node's one connection, and group rank 0's
 * MASTER_ADDR:MASTER_PORT (torch 2.x's shared worker store, or a free
 * port). */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "config.h"
#include "rdzv.h"
#include "rdzv_exchange.h"
#include "tcpstore_client.h"
#include "tcpstore_server.h"
#include "util.h"
#include "rdzv_c10d.h"

/* A get or add out on the connection; answers carry its id to the engine.
 * Kept on c->kv_reqs so that a client freed with it queued (its callback
 * never runs) leaks nothing. */
struct c10d_kv_req {
	struct c10d *c;
	uint64_t id;
	char **keys;
	struct c10d_kv_req *next;
};

static struct c10d_kv_req *
req_new(struct c10d *c, uint64_t id, const char *const *keys, size_t n)
{
	struct c10d_kv_req *q = xcalloc(1, sizeof(*q));

	q->c = c;
	q->id = id;
	for (size_t i = 0; i < n; i++) {
		strv_push(&q->keys, keys[i]);
	}
	q->next = c->kv_reqs;
	c->kv_reqs = q;
	return q;
}

static void
req_free(struct c10d_kv_req *q)
{
	struct c10d_kv_req **p = &q->c->kv_reqs;

	while (*p != q) {
		p = &(*p)->next;
	}
	*p = q->next;
	strv_free(q->keys);
	free(q);
}

void
c10d_kv_release(struct c10d *c)
{
	while (c->kv_reqs) {
		req_free(c->kv_reqs);
	}
}

static void
kv_set(void *kv, const char *const *keys, const char *const *vals, size_t n)
{
	struct c10d *c = kv;
	struct tcpstore_req req = {.cmd = TCPSTORE_CMD_MULTI_SET, .n = n};

	if (n == 1) {
		tcpstore_client_set(c->cl, keys[0], vals[0], strlen(vals[0]), NULL, NULL);
		return;
	}
	req.keys = xcalloc(n, sizeof(*req.keys));
	req.values = xcalloc(n, sizeof(*req.values));
	for (size_t i = 0; i < n; i++) {
		req.keys[i] = (struct tcpstore_bytes){(const uint8_t *)keys[i], strlen(keys[i])};
		req.values[i] = (struct tcpstore_bytes){(const uint8_t *)vals[i], strlen(vals[i])};
	}
	(void)tcpstore_client_request(c->cl, &req, 0, NULL, NULL);
	free(req.keys);
	free(req.values);
}

static void
got_cb(int err, const struct tcpstore_reply *rep, void *arg)
{
	struct c10d_kv_req *q = arg;
	struct c10d *c = q->c;
	uint64_t id = q->id;
	size_t n = strv_length(q->keys);
	struct rdzv_kv_value *vals = NULL;

	req_free(q);
	if (err == 0 && rep->n != n) {
		err = -EBADMSG;
	}
	if (err == 0) {
		vals = xcalloc(n + 1, sizeof(*vals));
		for (size_t i = 0; i < n; i++) {
			vals[i] = (struct rdzv_kv_value){rep->values[i].data, rep->values[i].len};
		}
	}
	rdzv_exchange_got(&c->x, id, err, vals, err == 0 ? n : 0);
	free(vals);
}

static void
waited_cb(int err, const struct tcpstore_reply *rep, void *arg)
{
	struct c10d_kv_req *q = arg;

	if (q->id != q->c->x.id) {
		req_free(q); /* given up meanwhile: no MULTI_GET */
		return;
	}
	if (err < 0) {
		got_cb(err, rep, q);
		return;
	}
	(void)tcpstore_client_keys(q->c->cl, TCPSTORE_CMD_MULTI_GET, (const char *const *)q->keys,
				   strv_length(q->keys), 0, got_cb, q);
}

static void
kv_get(void *kv, uint64_t id, const char *const *keys, size_t n, uint64_t timeout)
{
	struct c10d *c = kv;
	struct c10d_kv_req *q = req_new(c, id, keys, n);

	(void)tcpstore_client_keys(c->cl, TCPSTORE_CMD_WAIT, keys, n, timeout, waited_cb, q);
}

static void
added_cb(int err, const struct tcpstore_reply *rep, void *arg)
{
	struct c10d_kv_req *q = arg;
	struct c10d *c = q->c;
	uint64_t id = q->id;

	req_free(q);
	rdzv_exchange_added(&c->x, id, err, err == 0 ? rep->i64 : 0);
}

static void
kv_add(void *kv, uint64_t id, const char *key, int64_t delta)
{
	struct c10d *c = kv;

	tcpstore_client_add(c->cl, key, delta, added_cb, req_new(c, id, NULL, 0));
}

static bool
host_is_loopback(const char *host)
{
	struct in6_addr a6;
	struct in_addr a4;

	if (strcasecmp(host, "localhost") == 0) {
		return true;
	}
	if (inet_pton(AF_INET, host, &a4) == 1) {
		return (ntohl(a4.s_addr) >> 24) == 127;
	}
	return inet_pton(AF_INET6, host, &a6) == 1 && IN6_IS_ADDR_LOOPBACK(&a6);
}

/* A fresh store for the workers per round (the previous round's workers are
 * gone, and one round's workers may disagree on their restart count): its
 * port, or -errno. */
static int
worker_store(struct c10d *c)
{
	char *e = NULL;
	int ret = 0;

	tcpstore_server_free(c->worker_server);
	c->worker_server =
		tcpstore_server_new(c->r->base, c->r->cfg->local_addr, 0, NULL, &ret, &e);
	if (!c->worker_server) {
		free(e);
		return ret < 0 ? ret : -EADDRNOTAVAIL;
	}
	tcpstore_server_set_merge_attempts(c->worker_server, true);
	tcpstore_server_set_notice_cb(c->worker_server, rdzv_store_notice, c->r);
	return tcpstore_server_port(c->worker_server);
}

/* MASTER_ADDR:MASTER_PORT: our own store for the workers (torch 2.x's
 * shared store, unless TORCH_DISABLE_SHARE_RDZV_TCP_STORE=1), or a free
 * port for worker RANK 0 to bind. */
static int
kv_master(void *kv, char **ret_addr, int *ret_port, bool *ret_agent_store)
{
	struct c10d *c = kv;
	const struct config *cfg = c->r->cfg;
	const char *share = getenv("TORCH_DISABLE_SHARE_RDZV_TCP_STORE");
	bool agent_store = !(share && strcmp(share, "1") == 0);
	int port = agent_store ? worker_store(c) : rdzv_free_port();
	char addr[64];

	if (port < 0) {
		return port;
	}
	if (cfg->local_addr && *cfg->local_addr) {
		*ret_addr = xstrdup(cfg->local_addr);
	} else if (cfg->standalone) {
		*ret_addr = xstrdup("localhost");
	} else if (c->server && !host_is_loopback(c->host)) {
		/* We host the rendezvous store: the other nodes reach us by the
		 * endpoint's name already (our own clients use loopback). */
		*ret_addr = xstrdup(c->host);
	} else if (tcpstore_client_local_addr(c->cl, addr, sizeof(addr)) == 0) {
		/* The address the other nodes reach our store through. */
		*ret_addr = xstrdup(addr);
	} else {
		*ret_addr = xstrdup(host_fqdn());
	}
	*ret_port = port;
	*ret_agent_store = agent_store;
	return 0;
}

const struct rdzv_kv_ops c10d_kv_ops = {
	.set = kv_set,
	.get = kv_get,
	.add = kv_add,
	.master = kv_master,
};
