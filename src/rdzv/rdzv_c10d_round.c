/* rdzv_c10d_round.c — the c10d backend's rounds (rdzv_c10d.c has the
 * store under the operation loop): next_rendezvous (exit, then join, as the
 * coordinator or through it; rdzv_c10d_lease.c elects one on a store nobody
 * hosts), the rank exchange of torch
 * 2.x's agent and group rank 0's worker store, keep-alive while a round runs,
 * the exit barrier, and closing or leaving at the end. */
#include <arpa/inet.h>
#include <errno.h>
#include <event2/event.h>
#include <ifaddrs.h>
#include <inttypes.h>
#include <jansson.h>
#include <netdb.h>
#include <netinet/in.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <unistd.h>

#include "config.h"
#include "events.h"
#include "rdzv.h"
#include "rdzv_dynamic.h"
#include "rdzv_snapshot.h"
#include "rdzv_state.h"
#include "rdzv_sync.h"
#include "tcpstore_client.h"
#include "tcpstore_server.h"
#include "util.h"
#include "rdzv_c10d.h"
#include "rdzv_runs.h"
#include "ranks.h"

/* The one place this node's NodeState changes: an RdzvEvent for every step
 * (torch's construct_and_record_rdzv_event) and a log line for a transition. */
static void
c10d_set_state(struct c10d *c, enum node_state s, const char *fn, const char *msg)
{
	rdzv_set_node_state(c->r, &c->node_state, s, fn, msg);
}

static char *
round_key(const struct c10d *c, const char *what)
{
	return xasprintf("%s%s", c->prefix, what);
}

/* ---- next_rendezvous ---------------------------------------------------- */

void
c10d_next_fail(struct c10d *c, int err, const char *msg)
{
	c->sync.next_active = false;
	c10d_set_state(c, NODE_STATE_FAILED, "next_rendezvous", msg);
	rdzv_tell(c->r, RDZV_TELL_DONE, err, 0, msg);
}

static void
round_ready(struct c10d *c)
{
	struct rdzv_result *res = &c->result;
	char *msg;

	if (c->finishing) {
		return; /* left during the exchange: no round to run */
	}
	c->sync.next_active = false;
	c->sync.running = true;
	c->sync.told = false;
	msg = xasprintf("%s has joined round %" PRId64 " of the rendezvous '%s' as rank %d in a "
			"world of size %d.",
			c->me.name, c->sync.round, c->r->cfg->rdzv_id, c->sync.rank, c->sync.world);
	c10d_set_state(c, NODE_STATE_SUCCEEDED, "next_rendezvous", msg);
	free(msg);
	c10d_keep_alive_arm(c);
	c->r->cb.done(0, res, NULL, c->r->cb.arg);
	/* Anything that changed during the exchange is looked at now (a copy
	 * known stale after an assignment waits for the next change: reading
	 * the whole state here would cost every node O(N)). */
	rdzv_sync_observe(&c->sync);
	if (!c->sync.stale) {
		c10d_observe_read(c);
	}
	c10d_watch_update(c);
}

static void
exchange_fail(struct c10d *c, int err, const char *what)
{
	char *msg;

	if (c->finishing) {
		return; /* left during the exchange: nothing to fail */
	}
	if (c->dead) {
		msg = xstrdup(c->dead_msg);
	} else if (err == -ETIMEDOUT) {
		msg = xasprintf("round %" PRId64 " of the rendezvous: timed out waiting for %s",
				c->sync.round, what);
	} else {
		msg = xasprintf("round %" PRId64 " of the rendezvous: bad %s from the store",
				c->sync.round, what);
	}
	c10d_next_fail(c, err < 0 ? err : -EBADMSG, msg);
	free(msg);
}

/* Parse elasticd/round: {"runs": [[role, lws, count], ...] (rdzv_runs.h),
 * "use_agent_store": b}. */
static int
parse_round(struct c10d *c, const struct tcpstore_bytes *v)
{
	json_t *root = json_loadb((const char *)v->data, v->len, 0, NULL);

	/* Worker-identical: the nodes are this one's (exchange_start). */
	if (!root || (!c->result.nodes &&
		      rdzv_runs_decode(json_object_get(root, "runs"), (size_t)c->sync.world,
				       &c->result.nodes, &c->roles) < 0)) {
		json_decref(root);
		return -EBADMSG;
	}
	c->result.use_agent_store = json_is_true(json_object_get(root, "use_agent_store"));
	json_decref(root);
	return 0;
}

static void
member_cb(int err, const struct tcpstore_reply *rep, void *arg)
{
	struct c10d *c = arg;
	long long port;
	char *s;

	if (err < 0) {
		exchange_fail(c, err, "group rank 0's rank assignment");
		return;
	}
	if (rep->n != 3 || parse_round(c, &rep->values[0]) < 0 || rep->values[1].len == 0 ||
	    rep->values[1].len > 1024) {
		exchange_fail(c, -EBADMSG, "rank assignment");
		return;
	}
	s = xstrndup((const char *)rep->values[2].data, rep->values[2].len);
	if (parse_int(s, 1, 65535, &port) < 0) {
		free(s);
		exchange_fail(c, -EBADMSG, "MASTER_PORT");
		return;
	}
	free(s);
	c->result.master_addr = xstrndup((const char *)rep->values[1].data, rep->values[1].len);
	c->result.master_port = (int)port;
	round_ready(c);
}

static void
member_wait_cb(int err, const struct tcpstore_reply *rep, void *arg)
{
	struct c10d *c = arg;

	if (err < 0) {
		exchange_fail(c, err, "group rank 0's rank assignment");
		return;
	}
	(void)tcpstore_client_keys(c->cl, TCPSTORE_CMD_MULTI_GET,
				   (const char *const *)c->exchange_keys, 3, 0, member_cb, c);
}

/* A port nobody listens on now (TORCH_DISABLE_SHARE_RDZV_TCP_STORE=1: worker
 * RANK 0 binds it, as torch 1.13). */
static bool
host_is_loopback(const char *host)
{
	struct in6_addr a6;
	struct in_addr a4;

	if (strcmp(host, "localhost") == 0) {
		return true;
	}
	if (inet_pton(AF_INET, host, &a4) == 1) {
		return (ntohl(a4.s_addr) >> 24) == 127;
	}
	return inet_pton(AF_INET6, host, &a6) == 1 && IN6_IS_ADDR_LOOPBACK(&a6);
}

/* Every node's role and size from their role_info values, in group rank
 * order, into c->result.nodes. Returns 0 or -EBADMSG. */
static int
leader_take_infos(struct c10d *c, const struct tcpstore_reply *rep)
{
	c->result.nodes = xcalloc((size_t)c->sync.world, sizeof(*c->result.nodes));
	c->roles = xcalloc((size_t)c->sync.world + 1, sizeof(*c->roles));
	for (int i = 0; i < c->sync.world; i++) {
		json_t *o =
			json_loadb((const char *)rep->values[i].data, rep->values[i].len, 0, NULL);
		json_t *role = json_object_get(o, "role"),
		       *lws = json_object_get(o, "local_world_size");

		if (!json_is_string(role) || !json_is_integer(lws) || json_integer_value(lws) < 1 ||
		    json_integer_value(lws) > 1 << 20) {
			json_decref(o);
			return -EBADMSG;
		}
		c->roles[i] = xstrdup(json_string_value(role));
		c->result.nodes[i].role = c->roles[i];
		c->result.nodes[i].local_world_size = (int)json_integer_value(lws);
		json_decref(o);
	}
	return 0;
}

/* MASTER_ADDR:MASTER_PORT into addr and port: our own store for the workers
 * (torch 2.x's shared store), or a free port for worker RANK 0 to bind.
 * Returns 0 or -errno. */
static int
leader_master(struct c10d *c, bool agent_store, char *addr, size_t addr_len, char *port,
	      size_t port_len)
{
	const struct config *cfg = c->r->cfg;

	if (agent_store) {
		char *e = NULL;
		int ret = 0;

		/* A fresh store per round: the previous round's workers are gone,
		 * and one round's workers may disagree on their restart count. */
		tcpstore_server_free(c->worker_server);
		c->worker_server =
			tcpstore_server_new(c->r->base, cfg->local_addr, 0, NULL, &ret, &e);
		if (!c->worker_server) {
			free(e);
			return ret < 0 ? ret : -EADDRNOTAVAIL;
		}
		tcpstore_server_set_merge_attempts(c->worker_server, true);
		tcpstore_server_set_notice_cb(c->worker_server, rdzv_store_notice, c->r);
	}
	snprintf(port, port_len, "%d",
		 agent_store ? tcpstore_server_port(c->worker_server) : rdzv_free_port());
	if (cfg->local_addr && *cfg->local_addr) {
		snprintf(addr, addr_len, "%s", cfg->local_addr);
	} else if (cfg->standalone) {
		snprintf(addr, addr_len, "localhost");
	} else if (c->server && !host_is_loopback(c->host)) {
		/* We host the rendezvous store: the other nodes reach us by the
		 * endpoint's name already (our own clients use loopback). */
		snprintf(addr, addr_len, "%s", c->host);
	} else if (tcpstore_client_local_addr(c->cl, addr, addr_len) < 0) {
		/* The address the other nodes reach our store through. */
		snprintf(addr, addr_len, "%s", host_fqdn());
	}
	return 0;
}

/* One MULTI_SET: torchelastic/assigned_ranks/<rank> for every rank (torch
 * 2.x), MASTER_ADDR, MASTER_PORT and elasticd/round (the nodes as runs). */
static void
leader_publish(struct c10d *c, const char *addr, const char *port, bool agent_store)
{
	struct tcpstore_req req = {.cmd = TCPSTORE_CMD_MULTI_SET};
	/* Worker-identical: no assigned_ranks (torch's fast path reads none). */
	int nr = rdzv_worker_identical() ? 0 : c->sync.world;
	size_t n = (size_t)nr + 3;
	char **keys = xcalloc(n + 1, sizeof(*keys)), **vals = xcalloc(n + 1, sizeof(*vals));
	json_t *round = json_pack("{sosb}", "runs",
				  rdzv_runs_encode(c->result.nodes, (size_t)c->sync.world),
				  "use_agent_store", agent_store);

	struct ranks_info *ri = xcalloc((size_t)nr + 1, sizeof(*ri));

	ranks_assign_all(c->result.nodes, (size_t)nr, ri);
	for (int i = 0; i < nr; i++) {
		char what[64];

		snprintf(what, sizeof(what), "torchelastic/assigned_ranks/%d", i);
		keys[i] = round_key(c, what);
		vals[i] = xasprintf("[%d, %d, %d, %d]", ri[i].base_global_rank,
				    ri[i].global_world_size, ri[i].base_role_rank,
				    ri[i].role_world_size);
	}
	free(ri);
	keys[nr] = round_key(c, "MASTER_ADDR");
	vals[nr] = xstrdup(addr);
	keys[nr + 1] = round_key(c, "MASTER_PORT");
	vals[nr + 1] = xstrdup(port);
	keys[nr + 2] = round_key(c, "elasticd/round");
	vals[nr + 2] = json_dumps(round, JSON_COMPACT);
	json_decref(round);
	req.n = n;
	req.keys = xcalloc(n, sizeof(*req.keys));
	req.values = xcalloc(n, sizeof(*req.values));
	for (size_t i = 0; i < n; i++) {
		req.keys[i] = (struct tcpstore_bytes){(const uint8_t *)keys[i], strlen(keys[i])};
		req.values[i] = (struct tcpstore_bytes){(const uint8_t *)vals[i], strlen(vals[i])};
	}
	(void)tcpstore_client_request(c->cl, &req, 0, NULL, NULL);
	free(req.keys);
	free(req.values);
	strv_free(keys);
	strv_free(vals);
}

static void leader_finish(struct c10d *c);

static void
leader_cb(int err, const struct tcpstore_reply *rep, void *arg)
{
	struct c10d *c = arg;

	if (err < 0) {
		exchange_fail(c, err, "the other nodes' role_info");
		return;
	}
	if (leader_take_infos(c, rep) < 0) {
		exchange_fail(c, -EBADMSG, "role_info");
		return;
	}
	leader_finish(c);
}

/* Group rank 0 knows every node: pick MASTER_ADDR:MASTER_PORT, publish, done. */
static void
leader_finish(struct c10d *c)
{
	const char *share = getenv("TORCH_DISABLE_SHARE_RDZV_TCP_STORE");
	bool agent_store = !(share && strcmp(share, "1") == 0);
	char addr[64], port[16];
	int err;

	if ((err = leader_master(c, agent_store, addr, sizeof(addr), port, sizeof(port))) < 0) {
		exchange_fail(c, err, "a port for the workers' store");
		return;
	}
	leader_publish(c, addr, port, agent_store);
	c->result.master_addr = xstrdup(addr);
	c->result.master_port = atoi(port);
	c->result.use_agent_store = agent_store;
	round_ready(c);
}

static void
leader_wait_cb(int err, const struct tcpstore_reply *rep, void *arg)
{
	struct c10d *c = arg;

	if (err < 0) {
		exchange_fail(c, err, "the other nodes' role_info");
		return;
	}
	(void)tcpstore_client_keys(c->cl, TCPSTORE_CMD_MULTI_GET,
				   (const char *const *)c->exchange_keys, (size_t)c->sync.world, 0,
				   leader_cb, c);
}

/* Not group rank 0: wait (left usec at most) for rank 0's answer. */
static void
member_wait(struct c10d *c, uint64_t left)
{
	strv_consume(&c->exchange_keys, round_key(c, "elasticd/round"));
	strv_consume(&c->exchange_keys, round_key(c, "MASTER_ADDR"));
	strv_consume(&c->exchange_keys, round_key(c, "MASTER_PORT"));
	(void)tcpstore_client_keys(c->cl, TCPSTORE_CMD_WAIT, (const char *const *)c->exchange_keys,
				   3, left, member_wait_cb, c);
}

/* The round is complete: exchange roles and sizes (torch 2.x
 * _assign_worker_ranks) and learn MASTER_ADDR / MASTER_PORT. */
static void
exchange_start(struct c10d *c)
{
	long me = c->sync.assigned ? -1 : rdzv_state_find_participant(&c->sync.st, &c->me);
	uint64_t now = now_usec();
	uint64_t left = c->sync.next_deadline > now ? c->sync.next_deadline - now : 1;
	char what[64], *k, *info;
	json_t *o;

	rdzv_result_release(&c->result);
	strv_free(c->roles);
	c->roles = NULL;
	strv_free(c->exchange_keys);
	c->exchange_keys = NULL;
	c->ever_in = true;
	if (!c->sync.assigned) {
		c->sync.round = c->sync.st.round;
		c->sync.rank = c->sync.st.participants[me].rank;
		c->sync.world = (int)c->sync.st.n_participants;
	}
	free(c->prefix);
	c->prefix =
		xasprintf("/torch.rendezvous.%s.%" PRId64 "/", c->r->cfg->rdzv_id, c->sync.round);
	c->result.round = (int)c->sync.round;
	c->result.group_rank = c->sync.rank;
	c->result.group_world_size = c->sync.world;

	if (rdzv_worker_identical()) {
		/* torch main's fast path: no role_info; the others still learn
		 * MASTER_ADDR / MASTER_PORT from group rank 0. */
		rdzv_identical_nodes(c->r, c->sync.world, &c->result.nodes, &c->roles);
		if (c->sync.rank == 0) {
			leader_finish(c);
			return;
		}
		member_wait(c, left);
		return;
	}
	o = json_pack("{sssisi}", "role", c->r->cfg->role, "rank", c->sync.rank, "local_world_size",
		      c->r->local_world_size);
	info = json_dumps(o, JSON_COMPACT);
	json_decref(o);
	snprintf(what, sizeof(what), "torchelastic/role_info/%d", c->sync.rank);
	k = round_key(c, what);
	tcpstore_client_set(c->cl, k, info, strlen(info), NULL, NULL);
	free(k);
	free(info);
	if (c->sync.rank == 0) {
		for (int i = 0; i < c->sync.world; i++) {
			snprintf(what, sizeof(what), "torchelastic/role_info/%d", i);
			strv_consume(&c->exchange_keys, round_key(c, what));
		}
		(void)tcpstore_client_keys(c->cl, TCPSTORE_CMD_WAIT,
					   (const char *const *)c->exchange_keys,
					   (size_t)c->sync.world, left, leader_wait_cb, c);
	} else {
		member_wait(c, left);
	}
}

void
c10d_join_done(void *arg, int err, enum rdzv_action a)
{
	struct c10d *c = arg;
	const char *id = c->r->cfg->rdzv_id;
	char *msg = NULL;

	if (err < 0) {
		msg = c->dead ? xstrdup(c->dead_msg)
			      : xasprintf("the rendezvous state in the store is corrupt (%s)",
					  strerror(-err));
		c10d_next_fail(c, err, msg);
		free(msg);
		return;
	}
	if (a == RDZV_ACTION_FINISH) {
		exchange_start(c);
		return;
	}
	err = rdzv_join_failure(a, id, c->join_timeout, c->sync.peak_count, c->settings.min_nodes,
				c->sync.st.round, &msg);
	if (a == RDZV_ACTION_ERROR_CLOSED) {
		rdzv_join_closed(c->r, &c->sync.st, &msg);
	}
	c10d_next_fail(c, err, msg);
	free(msg);
}

void
c10d_exit_done(void *arg, int err, enum rdzv_action a)
{
	struct c10d *c = arg;

	if (err < 0 || a != RDZV_ACTION_FINISH) {
		c10d_join_done(c, err, a == RDZV_ACTION_FINISH ? RDZV_ACTION_ERROR_TIMEOUT : a);
		return;
	}
	if (c->coordinated) {
		/* Out of the last round: drop any old assignment, ask the
		 * coordinator to admit us (in this order, on one connection),
		 * and wait for our assignment instead of reading the state. */
		char *k = c10d_assign_key(c, c->me.name);

		tcpstore_client_delete(c->cl, k, NULL, NULL);
		free(k);
		c->rejoin_round = -1; /* out by our own exit op */
		c10d_ask_to_join(c);
		c->blind = true;
	}
	rdzv_sync_start(&c->sync, RDZV_OP_JOIN, c->sync.next_deadline, c10d_join_done);
}

void
c10d_coordinated_start(struct c10d *c)
{
	c->coordinated = true;
	c10d_keep_alive_arm(c); /* through our own key from now on */
	if (c->ever_in) {
		c10d_rejoin(c); /* the coordinator takes us out of the last round */
	} else {
		/* Never a participant: nothing to leave. */
		c10d_exit_done(c, 0, RDZV_ACTION_FINISH);
	}
}

/* A store nobody hosts: whoever holds the lease coordinates. */
static void
state_check_cb(int err, const struct tcpstore_reply *rep, void *arg)
{
	struct c10d *c = arg;

	if (err < 0) {
		c10d_store_gone(c, err);
		return;
	}
	if (!c->sync.next_active) {
		return; /* left (or shut down) while we asked: no round to start */
	}
	if (rep->status != TCPSTORE_READY) {
		/* Create the state key as torch's C10dRendezvousBackend does (a
		 * GET of a missing key ends the connection on torch's stores);
		 * only when missing: the answer would be the whole state. */
		tcpstore_client_compare_set(c->cl, c->key, "", 0, C10D_SENTINEL,
					    strlen(C10D_SENTINEL), NULL, NULL);
	}
	c->leased = true;
	c10d_lease_start(c);
}

static void
coordinator_check_cb(int err, const struct tcpstore_reply *rep, void *arg)
{
	struct c10d *c = arg;
	const char *keys[1];

	if (err < 0) {
		c10d_store_gone(c, err);
		return;
	}
	if (!c->sync.next_active) {
		/* Left (or shut down) while we asked: starting the join now would
		 * take over the leave's operation. */
		return;
	}
	if (rep->status == TCPSTORE_READY) {
		c10d_coordinated_start(c); /* the store host coordinates */
		return;
	}
	keys[0] = c->key;
	(void)tcpstore_client_keys(c->cl, TCPSTORE_CMD_CHECK, keys, 1, 0, state_check_cb, c);
}

void
c10d_start_next(struct c10d *c)
{
	char *k;
	const char *keys[1];

	if (c->coordinator && !c->leased) {
		rdzv_sync_start(&c->sync, RDZV_OP_EXIT, c->sync.next_deadline, c10d_exit_done);
		return;
	}
	if (c->leased) {
		c10d_lease_start(c); /* known external: ask the lease again */
		return;
	}
	k = xasprintf("%s/coordinator", c->key);
	keys[0] = k;
	(void)tcpstore_client_keys(c->cl, TCPSTORE_CMD_CHECK, keys, 1, 0, coordinator_check_cb, c);
	free(k);
}

int
c10d_next(struct rdzv *r)
{
	struct c10d *c = backend(r);
	char *msg;

	rdzv_sync_next_begin(&c->sync);
	evtimer_del(c->ka_timer);
	msg = xasprintf("%s attempts to join the next round of the rendezvous '%s'.", c->me.name,
			r->cfg->rdzv_id);
	c10d_set_state(c, NODE_STATE_RUNNING, "next_rendezvous", msg);
	free(msg);
	if (c->dead) {
		c10d_next_fail(c, -ECONNRESET, c->dead_msg);
		return 0;
	}
	if (c->sync.op_active) {
		/* A keep-alive under way: take over its loop with the exit op. */
		rdzv_sync_start(&c->sync, RDZV_OP_EXIT, c->sync.next_deadline, c10d_exit_done);
		return 0;
	}
	if (!c->up) {
		struct timeval tv = {5, 0};

		c->next_pending = true;
		evtimer_add(c->connect_log_timer, &tv);
		return 0;
	}
	c10d_start_next(c);
	return 0;
}

/* ---- keep-alive while a round runs -------------------------------------- */

static void
ka_done(void *arg, int err, enum rdzv_action a)
{
	struct c10d *c = arg;
	if (!c->dead && !c->finishing) {
		c10d_keep_alive_arm(c);
	}
	if (err < 0 || a == RDZV_ACTION_ERROR_TIMEOUT) {
		snprintf(c->ka_fail_why, sizeof(c->ka_fail_why), "store unreachable: %s",
			 err < 0 ? strerror(-err) : "the operation timed out");
		if (!c->ka_fail_since) {
			c->ka_fail_since = now_usec();
		}
		/* Torch swallows it (the timer goes on); the event says FAILED. */
		rdzv_record_step(
			c->r, NODE_STATE_FAILED, "_keep_alive",
			"The node '%s' has failed to send a keep-alive heartbeat to the rendezvous "
			"'%s' due to an error: %s",
			c->me.name, c->r->cfg->rdzv_id,
			err < 0 ? strerror(-err) : "the operation timed out");
		return;
	}
	c->ka_fail_since = 0;
	if (a == RDZV_ACTION_KEEP_ALIVE || a == RDZV_ACTION_FINISH) {
		rdzv_record_step(c->r, NODE_STATE_RUNNING, "_keep_alive",
				 "The node '%s' has sent a keep-alive heartbeat to the rendezvous "
				 "'%s'.",
				 c->me.name, c->r->cfg->rdzv_id);
	}
}

/* The local copy as it is: heartbeats folded by the store host. */
int
c10d_snapshot(struct rdzv *r, struct rdzv_snapshot *ret)
{
	struct c10d *c = r->backend;

	if (c->sync.stale) {
		/* Learnt from an assignment: refresh for the next look. */
		c10d_observe_read(c);
	}
	*ret = (struct rdzv_snapshot){
		.backend = "c10d",
		.self = xstrdup(c->me.name),
		.read_usec = c->sync.read_usec > 0 ? c->sync.read_usec : -1,
		.liveness = RDZV_LIVENESS_HEARTBEAT,
		.heartbeat_timeout_usec = (uint64_t)c->settings.keep_alive_interval_usec *
					  (uint64_t)c->settings.keep_alive_max_attempt,
	};
	rdzv_state_copy(&ret->st, &c->sync.st);
	if (c->coordinator) {
		ret->coordinator = xstrdup(c->me.name);
	} else if (c->leased && c->lease_len > 0) {
		ret->coordinator = xstrndup(c->lease, strcspn(c->lease, " "));
	}
	return 0;
}

/* rdzv_backend_ops.coordinates */
bool
c10d_coordinates(struct rdzv *r)
{
	struct c10d *c = r->backend;

	return c && c->coordinator;
}

/* rdzv_backend_ops.hosts_store */
bool
c10d_hosts_store(struct rdzv *r)
{
	struct c10d *c = r->backend;

	return c && c->server;
}

/* rdzv_backend_ops.degraded */
bool
c10d_degraded(struct rdzv *r, uint64_t *ret_since_usec, const char **ret_why)
{
	struct c10d *c = r->backend;

	if (!c || !c->ka_fail_since) {
		return false;
	}
	*ret_since_usec = c->ka_fail_since;
	*ret_why = c->ka_fail_why;
	return true;
}

void
c10d_ka_timer_cb(evutil_socket_t fd, short what, void *arg)
{
	struct c10d *c = arg;

	if (c->dead || c->finishing) {
		return;
	}
	if (c->leased && !c->coordinator) {
		c10d_lease_tick(c); /* take the lease over when it is stale */
	}
	if (c->coordinated) {
		/* Our own key, no read of the state: the coordinator folds it. */
		c10d_hb_send(c);
		rdzv_record_step(
			c->r, NODE_STATE_RUNNING, "_keep_alive",
			"The node '%s' has sent a keep-alive heartbeat to the rendezvous '%s'.",
			c->me.name, c->r->cfg->rdzv_id);
		c10d_keep_alive_arm(c);
		return;
	}
	if (!c->sync.op_active && !c->sync.io_pending) {
		rdzv_sync_start(&c->sync, RDZV_OP_KEEP_ALIVE, now_usec() + c->heartbeat_timeout,
				ka_done);
	} else {
		/* Busy: an operation writes our heartbeat when due anyway. */
		c10d_keep_alive_arm(c);
	}
}

/* Fire just after our heartbeat falls due (a timer of exactly the interval
 * would find it not quite due half the time and skip a beat). */
void
c10d_keep_alive_arm(struct c10d *c)
{
	long i = rdzv_state_find_heartbeat(&c->sync.st, &c->me);
	int64_t delay = c->settings.keep_alive_interval_usec;
	struct timeval tv;

	if (i >= 0) {
		delay = c->sync.st.heartbeats[i].usec + c->settings.keep_alive_interval_usec -
			(int64_t)wall_usec() + 2000;
	}
	if (delay < 1000) {
		delay = 1000;
	}
	if (delay > c->settings.keep_alive_interval_usec) {
		delay = c->settings.keep_alive_interval_usec;
	}
	tv.tv_sec = (time_t)(delay / 1000000);
	tv.tv_usec = (suseconds_t)(delay % 1000000);
	evtimer_del(c->ka_timer);
	evtimer_add(c->ka_timer, &tv);
}

/* ---- exit barrier and finish -------------------------------------------- */

static void
barrier_wait_cb(int err, const struct tcpstore_reply *rep, void *arg)
{
	struct c10d *c = arg;
	char *msg;

	if (!c->sync.barrier) {
		return;
	}
	c->sync.barrier = false;
	if (err == 0) {
		rdzv_tell(c->r, RDZV_TELL_FINISHED, 0, 0, NULL);
		return;
	}
	msg = err == -ETIMEDOUT
		      ? xasprintf(
				"the exit barrier timed out after %.0f s: not every node of round "
				"%" PRId64 " finished",
				(double)c->barrier_timeout / 1e6, c->sync.round)
		      : xstrdup(c->dead_msg ? c->dead_msg : strerror(-err));
	rdzv_tell(c->r, RDZV_TELL_FINISHED, err, 0, msg);
	free(msg);
}

static void
barrier_add_cb(int err, const struct tcpstore_reply *rep, void *arg)
{
	struct c10d *c = arg;
	char *k = round_key(c, "torchelastic/agent/terminal_state/last_member");
	const char *keys[1] = {k};

	if (err < 0) {
		barrier_wait_cb(err, NULL, c);
		free(k);
		return;
	}
	if (rep->i64 == c->sync.world) {
		tcpstore_client_set(c->cl, k, "1", 1, NULL, NULL);
	}
	(void)tcpstore_client_keys(c->cl, TCPSTORE_CMD_WAIT, keys, 1, c->barrier_timeout,
				   barrier_wait_cb, c);
	free(k);
}

int
c10d_exit_barrier(struct rdzv *r)
{
	struct c10d *c = backend(r);
	char *k;

	c->sync.running = false;
	if (!c->prefix || c->dead) {
		rdzv_tell(c->r, RDZV_TELL_FINISHED, c->dead ? -ECONNRESET : 0, 0,
			  c->dead ? c->dead_msg : NULL);
		return 0;
	}
	c->sync.barrier = true;
	k = round_key(c, "torchelastic/agent/terminal_state/num_members");
	tcpstore_client_add(c->cl, k, 1, barrier_add_cb, c);
	free(k);
	return 0;
}

static void
linger_end(struct c10d *c)
{
	evtimer_del(c->linger_timer);
	if (c->server) {
		tcpstore_server_set_idle_cb(c->server, NULL, NULL);
	}
	rdzv_tell(c->r, RDZV_TELL_FINISHED, 0, 0, NULL);
}

/* The last client left our store, or the linger deadline passed. */
static void
linger_idle_cb(void *arg)
{
	linger_end(arg);
}

void
c10d_linger_cb(evutil_socket_t fd, short what, void *arg)
{
	linger_end(arg);
}

/* Let the other nodes finish with our store before we go. */
static void
linger_start(struct c10d *c)
{
	tcpstore_client_free(c->cl);
	c->cl = NULL;
	c->up = false;
	c->dead = true;
	if (!c->dead_msg) {
		c->dead_msg = xstrdup("the rendezvous was left");
	}
	if (!c->server || tcpstore_server_connections(c->server) == 0) {
		linger_end(c);
		return;
	}
	/* Wait (no polling) for the last connection to go, at most LINGER_USEC. */
	{
		struct timeval tv = {(time_t)(LINGER_USEC / USEC_PER_SEC),
				     (suseconds_t)(LINGER_USEC % USEC_PER_SEC)};

		tcpstore_server_set_idle_cb(c->server, linger_idle_cb, c);
		evtimer_add(c->linger_timer, &tv);
	}
}

static void
fence_cb(int err, const struct tcpstore_reply *rep, void *arg)
{
	linger_start(arg);
}

/* Leave once what we queued on the client (the closed state's gen key, which wakes
 * the nodes that wait on it) has reached the store: a request with a reply
 * comes back only after the ones before it were served. */
static void
fence_then_linger(struct c10d *c)
{
	char *k = gen_key(c, c->sync.st.gen);
	const char *keys[1] = {k};
	int r = c->cl && !c->dead && c->up
			? tcpstore_client_keys(c->cl, TCPSTORE_CMD_CHECK, keys, 1, 0, fence_cb, c)
			: -ENOTCONN;

	free(k);
	if (r < 0) {
		linger_start(c);
	}
}

static void
close_done(void *arg, int err, enum rdzv_action a)
{
	struct c10d *c = arg;
	char *msg;

	if (err == 0 && a == RDZV_ACTION_FINISH) {
		msg = xasprintf("The node '%s' has closed the rendezvous '%s'.", c->me.name,
				c->r->cfg->rdzv_id);
		c10d_set_state(c, NODE_STATE_SUCCEEDED, "_close", msg);
	} else {
		msg = xasprintf("The node '%s' has failed to shutdown the rendezvous '%s' due to "
				"an error of "
				"type %s.",
				c->me.name, c->r->cfg->rdzv_id,
				err < 0 ? "RendezvousConnectionError" : "RendezvousTimeoutError");
		c10d_set_state(c, NODE_STATE_FAILED, "shutdown", msg);
	}
	free(msg);
	fence_then_linger(c);
}

/* Out of every list of the state (rdzv_leave), or could not be: go. */
static void
leave_done(void *arg, int err, enum rdzv_action a)
{
	struct c10d *c = arg;
	if (err == 0 && a == RDZV_ACTION_FINISH) {
		rdzv_progress(c->r, "left the rendezvous '%s' (it stays open for the others)",
			      c->r->cfg->rdzv_id);
	} else {
		rdzv_progress(c->r, "could not leave the rendezvous '%s': %s", c->r->cfg->rdzv_id,
			      err < 0 ? strerror(-err) : rdzv_action_name(a));
	}
	fence_then_linger(c);
}

int
c10d_finish(struct rdzv *r, bool close)
{
	struct c10d *c = backend(r);
	enum rdzv_op op = close ? RDZV_OP_CLOSE : RDZV_OP_LEAVE;
	op_done_fn done = close ? close_done : leave_done;

	c->sync.running = false;
	c->sync.barrier = false;
	c->sync.next_active = false;
	c->finishing = true;
	evtimer_del(c->ka_timer);
	c10d_lease_release(c);
	if (c->cl && c->watching) {
		(void)tcpstore_client_cancel_background(c->cl);
		c->watching = false;
	}
	if (c->dead || !c->up) {
		linger_start(c);
		return 0;
	}
	if (!close) {
		c10d_withdraw(c); /* before the leave op reads the state */
	}
	/* Takes over the operation under way (a keep-alive, a join). */
	rdzv_sync_start(&c->sync, op, now_usec() + c->close_timeout, done);
	return 0;
}

static void
run_op_done(void *arg, int err, enum rdzv_action a)
{
	rdzv_op_done(((struct c10d *)arg)->r, err, a);
}

int
c10d_run_op(struct rdzv *r, enum rdzv_op op)
{
	struct c10d *c = backend(r);
	if (c->dead || !c->up || c->finishing || c->sync.op_active || c->sync.io_pending) {
		return c->dead || !c->up || c->finishing ? -ENOTCONN : -EBUSY;
	}
	rdzv_sync_start(&c->sync, op, now_usec() + c->close_timeout, run_op_done);
	return 0;
}

void
c10d_shutdown(struct rdzv *r)
{
	struct c10d *c = backend(r);

	if (!c->finishing) {
		(void)c10d_finish(r, true);
	}
}

int
c10d_num_nodes_waiting(struct rdzv *r)
{
	return (int)backend(r)->sync.st.n_wait_list;
}
