#include "rdzv.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <event2/event.h>
#include <inttypes.h>
#include <netinet/in.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "config.h"
#include "log.h"
#include "rdzv_rankkey.h"
#include "util.h"

struct rdzv_notice {
	struct rdzv *r;
	struct event *ev;
	enum rdzv_tell what;
	int err;
	int n;
	char *msg;
	struct rdzv_notice *next;
};

static void readmit_cancel(struct rdzv *r);

static struct rdzv *
create(struct event_base *base, const struct config *cfg, int local_world_size,
       const struct rdzv_callbacks *cb, bool observer, struct rdzv *left, char **reterr)
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
	} else {
		*reterr = xasprintf("--rdzv-backend: unknown backend '%s' (expected static, c10d "
				    "or etcd)",
				    cfg->rdzv_backend);
		return NULL;
	}
	r = xcalloc(1, sizeof(*r));
	r->ops = ops;
	r->base = base;
	r->cfg = cfg;
	r->local_world_size = local_world_size;
	r->observer = observer;
	r->observed = left;
	r->cb = *cb;
	r->events = cb->events;
	if (ops->init && ops->init(r, reterr) < 0) {
		rdzv_free(r);
		return NULL;
	}
	r->observed = NULL;
	if (!observer && rdzv_worker_identical()) {
		log_info("TORCH_ELASTIC_WORKER_IDENTICAL=1: worker ranks come from the group rank "
			 "and this node's %d local workers, without the store's rank exchange",
			 local_world_size);
	}
	return r;
}

struct rdzv *
rdzv_new(struct event_base *base, const struct config *cfg, int local_world_size,
	 const struct rdzv_callbacks *cb, char **reterr)
{
	return create(base, cfg, local_world_size, cb, false, NULL, reterr);
}

struct rdzv *
rdzv_new_observer(struct event_base *base, const struct config *cfg, int local_world_size,
		  const struct rdzv_callbacks *cb, struct rdzv *left, char **reterr)
{
	return create(base, cfg, local_world_size, cb, true, left, reterr);
}

int
rdzv_next(struct rdzv *r)
{
	if (r->observer) {
		return -EINVAL;
	}
	readmit_cancel(r);
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
	if (!r->observer) { /* no member: closes nothing */
		r->ops->shutdown(r);
	}
}

int
rdzv_exit_barrier(struct rdzv *r)
{
	if (r->observer) {
		return -EINVAL;
	}
	if (r->ops->exit_barrier) {
		return r->ops->exit_barrier(r);
	}
	rdzv_tell(r, RDZV_TELL_FINISHED, 0, 0, NULL);
	return 0;
}

int
rdzv_finish(struct rdzv *r, bool close)
{
	if (r->observer) {
		return -EINVAL;
	}
	readmit_cancel(r);
	if (r->ops->finish) {
		return r->ops->finish(r, close);
	}
	if (close) {
		r->ops->shutdown(r);
	}
	rdzv_tell(r, RDZV_TELL_FINISHED, 0, 0, NULL);
	return 0;
}

/* rdzv_leave is over (done, failed or timed out): tell the caller once. */
static void
leave_complete(struct rdzv *r)
{
	void (*left)(void *arg) = r->left;

	if (!left) {
		return;
	}
	r->left = NULL;
	evtimer_del(r->leave_timer);
	left(r->left_arg);
}

static void
leave_timeout_cb(evutil_socket_t fd, short what, void *arg)
{
	leave_complete(arg);
}

int
rdzv_leave(struct rdzv *r, uint64_t timeout_usec, void (*done)(void *arg), void *arg)
{
	struct timeval tv = {(time_t)(timeout_usec / USEC_PER_SEC),
			     (suseconds_t)(timeout_usec % USEC_PER_SEC)};
	int err;

	if (!r->ops->finish) {
		return -EOPNOTSUPP;
	}
	if (r->observer) {
		return -EINVAL;
	}
	if (r->left || r->leave_timer) {
		return -EALREADY;
	}
	readmit_cancel(r);
	r->left = done;
	r->left_arg = arg;
	r->leave_timer = evtimer_new(r->base, leave_timeout_cb, r);
	evtimer_add(r->leave_timer, &tv);
	err = r->ops->finish(r, false);
	if (err < 0) {
		r->left = NULL;
		evtimer_del(r->leave_timer);
	}
	return err;
}

int
rdzv_snapshot(struct rdzv *r, struct rdzv_snapshot *ret)
{
	if (!r->ops->snapshot) {
		return -EOPNOTSUPP;
	}
	return r->ops->snapshot(r, ret);
}

bool
rdzv_degraded(struct rdzv *r, uint64_t *ret_since_usec, const char **ret_why)
{
	if (!r || !r->ops->degraded) {
		return false;
	}
	return r->ops->degraded(r, ret_since_usec, ret_why);
}

bool
rdzv_coordinates(struct rdzv *r)
{
	return r && r->ops->coordinates && r->ops->coordinates(r);
}

bool
rdzv_hosts_store(struct rdzv *r)
{
	return r && r->ops->hosts_store && r->ops->hosts_store(r);
}

void
rdzv_free(struct rdzv *r)
{
	if (!r) {
		return;
	}
	if (r->leave_timer) {
		event_free(r->leave_timer);
	}
	if (r->readmit_ev) {
		event_free(r->readmit_ev);
	}
	free(r->readmit_host);
	free(r->failure_report);
	if (r->ops->free) {
		r->ops->free(r);
	}
	while (r->notices) {
		struct rdzv_notice *n = r->notices;

		r->notices = n->next;
		event_free(n->ev);
		free(n->msg);
		free(n);
	}
	free(r->close_record);
	free(r->quarantine);
	if (r->closed_by) {
		rdzv_node_release(&r->closed_by->node);
		free(r->closed_by);
	}
	free(r);
}

void
rdzv_set_quarantine(struct rdzv *r, int64_t until_wall, int count)
{
	if (!r->quarantine) {
		r->quarantine = xcalloc(1, sizeof(*r->quarantine));
	}
	r->quarantine->until = until_wall;
	r->quarantine->count = count;
}

static void
readmit_report_cb(evutil_socket_t fd, short what, void *arg)
{
	struct rdzv *r = arg;
	char *host = r->readmit_host;

	r->readmit_host = NULL;
	free(r->failure_report);
	r->failure_report = NULL;
	r->readmit_active = false;
	if (r->readmit_done) {
		r->readmit_done(r->readmit_arg, r->readmit_err, host);
	}
	free(host);
}

/* Run op (its argument set by the caller) with done. */
static int
run_op(struct rdzv *r, enum rdzv_op op, void (*done)(void *arg, int err, const char *host),
       void *arg)
{
	int err;

	r->readmit_active = true; /* before: a store already gone ends it inside */
	r->readmit_done = done;
	r->readmit_arg = arg;
	err = r->ops->run_op(r, op);
	if (err < 0) {
		free(r->readmit_host);
		r->readmit_host = NULL;
		free(r->failure_report);
		r->failure_report = NULL;
		r->readmit_active = false;
		if (r->readmit_ev) {
			event_del(r->readmit_ev);
		}
		return err;
	}
	return 0;
}

int
rdzv_readmit(struct rdzv *r, const char *host, void (*done)(void *arg, int err, const char *host),
	     void *arg)
{
	if (!r->ops->run_op) {
		return -EOPNOTSUPP;
	}
	if (r->readmit_active) {
		return -EBUSY;
	}
	free(r->readmit_host);
	r->readmit_host = host ? xstrdup(host) : NULL;
	return run_op(r, RDZV_OP_READMIT, done, arg);
}

int
rdzv_report_failure(struct rdzv *r, int64_t round, int64_t usec,
		    void (*done)(void *arg, int err, const char *host), void *arg)
{
	if (!r->ops->run_op) {
		return -EOPNOTSUPP;
	}
	if (r->observer) {
		return -EINVAL;
	}
	if (r->readmit_active) {
		return -EBUSY;
	}
	free(r->failure_report);
	r->failure_report = xcalloc(1, sizeof(*r->failure_report));
	r->failure_report->round = round;
	r->failure_report->usec = usec;
	return run_op(r, RDZV_OP_REPORT_FAILURE, done, arg);
}

/* The backend's next or finish takes the operation under way over: a
 * readmit under way ends -ECANCELED. */
static void
readmit_cancel(struct rdzv *r)
{
	if (r->readmit_active) {
		rdzv_op_done(r, -ECANCELED, RDZV_ACTION_ERROR_CLOSED);
	}
}

bool
rdzv_shared_state(const struct rdzv *r)
{
	return r->ops->run_op != NULL;
}

void
rdzv_op_done(struct rdzv *r, int err, enum rdzv_action a)
{
	if (!r->readmit_active) {
		return;
	}
	r->readmit_err = err < 0                          ? err
			 : a == RDZV_ACTION_FINISH        ? 0
			 : a == RDZV_ACTION_ERROR_TIMEOUT ? -ETIMEDOUT
							  : -ECONNABORTED;
	if (!r->readmit_ev) {
		r->readmit_ev = evtimer_new(r->base, readmit_report_cb, r);
	}
	event_active(r->readmit_ev, EV_TIMEOUT, 1);
}

void
rdzv_set_close_record(struct rdzv *r, int group_rank, int rank, int local_rank, int pid,
		      int exitcode)
{
	if (!r->close_record) {
		r->close_record = xcalloc(1, sizeof(*r->close_record));
	}
	*r->close_record = (struct rdzv_close_record){
		.group_rank = group_rank,
		.rank = rank,
		.local_rank = local_rank,
		.pid = pid,
		.exitcode = exitcode,
		.signal = exitcode < 0 && exitcode >= -RDZV_CLOSE_MAX_SIGNAL ? -exitcode : 0,
	};
}

const struct rdzv_close_record *
rdzv_closed_by(const struct rdzv *r)
{
	return r->closed_by;
}

void
rdzv_keep_closed_by(struct rdzv *r, const struct rdzv_state *st)
{
	if (!st->closed || !st->closed_by || r->closed_by) {
		return;
	}
	r->closed_by = xmalloc(sizeof(*r->closed_by));
	*r->closed_by = *st->closed_by;
	rdzv_node_copy(&r->closed_by->node, &st->closed_by->node);
}

void
rdzv_join_closed(struct rdzv *r, const struct rdzv_state *st, char **msg)
{
	_cleanup_free_ char *who = NULL;
	char *m;

	if (!st->closed_by) {
		return;
	}
	rdzv_keep_closed_by(r, st);
	who = rdzv_close_record_describe(st->closed_by);
	m = xasprintf("%s by another node: its workers failed (%s)", *msg, who);
	free(*msg);
	*msg = m;
}

void
rdzv_result_release(struct rdzv_result *res)
{
	free(res->runs);
	free(res->master_addr);
	memset(res, 0, sizeof(*res));
}

/* ---- for backends ---------------------------------------------------------- */

bool
rdzv_worker_identical(void)
{
	const char *v = getenv("TORCH_ELASTIC_WORKER_IDENTICAL");

	return v && strcmp(v, "1") == 0;
}

static void
notice_cb(evutil_socket_t fd, short what, void *arg)
{
	struct rdzv_notice *n = arg, **pp;
	struct rdzv *r = n->r;

	for (pp = &r->notices; *pp != n; pp = &(*pp)->next) {
	}
	*pp = n->next;
	switch (n->what) {
	case RDZV_TELL_DONE:
		r->cb.done(n->err, NULL, n->msg, r->cb.arg);
		break;
	case RDZV_TELL_FINISHED:
		if (r->left) {
			leave_complete(r); /* rdzv_leave's finish */
		} else if (r->cb.finished) {
			r->cb.finished(n->err, n->msg, r->cb.arg);
		}
		break;
	case RDZV_TELL_FAILED:
		if (r->cb.failed) {
			r->cb.failed(n->err, n->msg, r->cb.arg);
		}
		break;
	case RDZV_TELL_NODES_WAITING:
		if (r->cb.nodes_waiting) {
			r->cb.nodes_waiting(n->n, n->msg, r->cb.arg);
		}
		break;
	}
	event_free(n->ev);
	free(n->msg);
	free(n);
}

void
rdzv_tell(struct rdzv *r, enum rdzv_tell what, int err, int n, const char *msg)
{
	struct rdzv_notice *nt = xcalloc(1, sizeof(*nt)), **pp;

	nt->r = r;
	nt->what = what;
	nt->err = err;
	nt->n = n;
	nt->msg = msg ? xstrdup(msg) : NULL;
	nt->ev = event_new(r->base, -1, 0, notice_cb, nt);
	if (!nt->ev) {
		abort();
	}
	/* In order of telling. */
	for (pp = &r->notices; *pp; pp = &(*pp)->next) {
	}
	*pp = nt;
	event_active(nt->ev, EV_TIMEOUT, 0);
}

void
rdzv_progress(struct rdzv *r, const char *fmt, ...)
{
	va_list ap;
	char *msg;

	if (!r->cb.progress) {
		return;
	}
	va_start(ap, fmt);
	msg = xvasprintf(fmt, ap);
	va_end(ap);
	r->cb.progress(msg, r->cb.arg);
	free(msg);
}

void
rdzv_warn(struct rdzv *r, const char *fmt, ...)
{
	void (*cb)(const char *, void *) = r->cb.warn ? r->cb.warn : r->cb.progress;
	va_list ap;
	char *msg;

	if (!cb) {
		return;
	}
	va_start(ap, fmt);
	msg = xvasprintf(fmt, ap);
	va_end(ap);
	cb(msg, r->cb.arg);
	free(msg);
}

void
rdzv_store_notice(const char *msg, void *arg)
{
	rdzv_warn(arg, "%s", msg);
}

void
rdzv_record_step(struct rdzv *r, enum node_state s, const char *fn, const char *fmt, ...)
{
	va_list ap;
	char *name, *msg;

	if (!r->events || !events_enabled(r->events)) {
		return;
	}
	va_start(ap, fmt);
	msg = xvasprintf(fmt, ap);
	va_end(ap);
	name = xasprintf("rdzv_%s.c:%s", r->ops->name, fn);
	(void)events_record_rdzv(r->events, name, s, -1, "%s", msg);
	free(name);
	free(msg);
}

/* torch's _RendezvousOpExecutor actions that change the lists: their method
 * and what its event says, and the round it names (the wait and redundancy
 * lists wait for the next one). */
static const struct {
	enum rdzv_action action;
	const char *fn;
	const char *what;
	bool next_round;
} list_steps[] = {
	{RDZV_ACTION_ADD_TO_PARTICIPANTS, "_add_to_participants",
	 "added itself to the participants", false},
	{RDZV_ACTION_ADD_TO_WAIT_LIST, "_add_to_wait_list", "added itself to the wait list", true},
	{RDZV_ACTION_ADD_TO_REDUNDANCY_LIST, "_add_to_redundancy_list",
	 "added itself to the redundancy list", true},
	{RDZV_ACTION_REMOVE_FROM_PARTICIPANTS, "_remove_from_participants",
	 "removed itself from the participants", false},
	{RDZV_ACTION_REMOVE_FROM_WAIT_LIST, "_remove_from_wait_list",
	 "removed itself from the wait list", true},
	{RDZV_ACTION_REMOVE_FROM_REDUNDANCY_LIST, "_remove_from_redundancy_list",
	 "removed itself from the redundant list", true},
};

void
rdzv_record_action(struct rdzv *r, const char *node, int64_t round, enum rdzv_action a,
		   bool completed)
{
	const char *id = r->cfg->rdzv_id;

	if (a == RDZV_ACTION_MARK_RENDEZVOUS_CLOSED) {
		rdzv_record_step(
			r, NODE_STATE_SUCCEEDED, "_mark_rendezvous_closed",
			"The node '%s' marked the rendezvous '%s' as closed. Pending sync.", node,
			id);
		return;
	}
	for (size_t i = 0; i < ARRAY_SIZE(list_steps); i++) {
		if (list_steps[i].action == a) {
			rdzv_record_step(r, NODE_STATE_RUNNING, list_steps[i].fn,
					 "The node '%s' %s of round %" PRId64
					 " of the rendezvous '%s'. Pending sync.",
					 node, list_steps[i].what,
					 round + (list_steps[i].next_round ? 1 : 0), id);
		}
	}
	/* Joining also stamps the heartbeat, as torch's _add_to_* call _keep_alive. */
	if (a == RDZV_ACTION_KEEP_ALIVE || a == RDZV_ACTION_ADD_TO_PARTICIPANTS ||
	    a == RDZV_ACTION_ADD_TO_WAIT_LIST || a == RDZV_ACTION_ADD_TO_REDUNDANCY_LIST) {
		rdzv_record_step(r, NODE_STATE_RUNNING, "_keep_alive",
				 "The node '%s' updated its keep-alive heartbeat time for the "
				 "rendezvous '%s'. Pending sync.",
				 node, id);
	}
	if (completed || a == RDZV_ACTION_MARK_RENDEZVOUS_COMPLETE) {
		rdzv_record_step(r, NODE_STATE_SUCCEEDED, "_mark_rendezvous_complete",
				 "The node '%s' marked round %" PRId64
				 " of the rendezvous '%s' as complete. Pending sync.",
				 node, round, id);
	}
}

size_t
rdzv_admit_requests(struct rdzv *r, struct rdzv_state *st, bool with_wait_list,
		    const struct rdzv_node *joiners, size_t n_joiners, const struct rdzv_ctx *ctx,
		    bool *notable)
{
	size_t n_wait = with_wait_list ? st->n_wait_list : 0, n = 0, admitted;
	struct rdzv_node *list = xcalloc(n_wait + n_joiners + 1, sizeof(*list));
	bool was_complete = st->complete, changed = false;

	for (size_t i = 0; i < n_wait; i++) {
		rdzv_node_copy(&list[n++], &st->wait_list[i]); /* admitting moves it */
	}
	for (size_t i = 0; i < n_joiners; i++) {
		rdzv_node_copy(&list[n++], &joiners[i]);
	}
	admitted = rdzv_admit(st, list, n, ctx, &changed);
	for (size_t i = 0; i < n; i++) {
		rdzv_node_release(&list[i]);
	}
	free(list);
	if (changed) {
		*notable = true;
	}
	if (!was_complete && st->complete) {
		rdzv_record_action(r, ctx->node->name, st->round,
				   RDZV_ACTION_MARK_RENDEZVOUS_COMPLETE, true);
	}
	return admitted;
}

bool
rdzv_record_admission(struct rdzv *r, const struct rdzv_state *st, const struct rdzv_node *node)
{
	enum rdzv_action a;

	if (rdzv_state_find_participant(st, node) >= 0) {
		a = RDZV_ACTION_ADD_TO_PARTICIPANTS;
	} else if (rdzv_state_find_wait(st, node) >= 0) {
		a = RDZV_ACTION_ADD_TO_WAIT_LIST;
	} else {
		return false;
	}
	rdzv_record_action(r, node->name, st->round, a, false);
	return true;
}

void
rdzv_record_sync(struct rdzv *r, const char *node, bool synced)
{
	rdzv_record_step(
		r, NODE_STATE_RUNNING, "sync",
		synced ? "The node '%s' has successfully synced its local changes with other nodes "
			 "in the rendezvous '%s'."
		       : "The node '%s' has a stale state and failed to sync its local changes "
			 "with "
			 "other nodes in the rendezvous '%s'.",
		node, r->cfg->rdzv_id);
}

void
rdzv_set_node_state(struct rdzv *r, enum node_state *cur, enum node_state s, const char *fn,
		    const char *msg)
{
	/* The agent records next_rendezvous's own events for every backend. */
	if (strcmp(fn, "next_rendezvous") != 0) {
		rdzv_record_step(r, s, fn, "%s", msg);
	}
	if (s != *cur) {
		rdzv_progress(r, "rendezvous node %s -> %s (%s)", node_state_name(*cur),
			      node_state_name(s), msg);
		*cur = s;
	}
}

int
rdzv_conf_seconds(const struct config *cfg, const char *key, double def, uint64_t *ret_usec,
		  char **reterr)
{
	const char *v = config_rdzv_conf_get(cfg, key);
	double d = def;

	if (v && (parse_double(v, &d) < 0 || d <= 0 || d > 1e9)) {
		*reterr = xasprintf("--rdzv-conf: invalid value '%s' for %s: expected a number of "
				    "seconds > 0",
				    v, key);
		return -EINVAL;
	}
	*ret_usec = (uint64_t)(d * 1e6);
	return 0;
}

int
rdzv_free_port(void)
{
	struct sockaddr_in6 sa = {.sin6_family = AF_INET6, .sin6_addr = IN6ADDR_ANY_INIT};
	socklen_t len = sizeof(sa);
	int fd = socket(AF_INET6, SOCK_STREAM | SOCK_CLOEXEC, 0), port = -EADDRNOTAVAIL;

	if (fd < 0) {
		struct sockaddr_in s4 = {.sin_family = AF_INET};

		fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
		len = sizeof(s4);
		if (fd >= 0 && bind(fd, (struct sockaddr *)&s4, len) == 0 &&
		    getsockname(fd, (struct sockaddr *)&s4, &len) == 0) {
			port = ntohs(s4.sin_port);
		}
	} else if (bind(fd, (struct sockaddr *)&sa, len) == 0 &&
		   getsockname(fd, (struct sockaddr *)&sa, &len) == 0) {
		port = ntohs(sa.sin6_port);
	}
	if (fd >= 0) {
		close(fd);
	}
	return port;
}

int
rdzv_dynamic_conf(const struct config *cfg, struct rdzv_settings *settings,
		  uint64_t *ret_join_timeout, uint64_t *ret_close_timeout,
		  uint64_t *ret_barrier_timeout, char **reterr)
{
	const char *v = config_rdzv_conf_get(cfg, "keep_alive_max_attempt");
	uint64_t ka, lc;
	long long n = 3, seg = 0;

	if (rdzv_conf_seconds(cfg, "join_timeout", 600, ret_join_timeout, reterr) < 0 ||
	    rdzv_conf_seconds(cfg, "last_call_timeout", 30, &lc, reterr) < 0 ||
	    rdzv_conf_seconds(cfg, "close_timeout", 30, ret_close_timeout, reterr) < 0 ||
	    rdzv_conf_seconds(cfg, "keep_alive_interval", 5, &ka, reterr) < 0 ||
	    rdzv_conf_seconds(cfg, "exit_barrier_timeout", 300, ret_barrier_timeout, reterr) < 0) {
		return -EINVAL;
	}
	if (v && parse_int(v, 1, 1000000, &n) < 0) {
		*reterr = xasprintf("--rdzv-conf: invalid value '%s' for keep_alive_max_attempt: "
				    "expected an integer >= 1",
				    v);
		return -EINVAL;
	}
	v = config_rdzv_conf_get(cfg, "segment");
	if (v && (parse_int(v, 1, cfg->max_nodes, &seg) < 0)) {
		*reterr = xasprintf("--rdzv-conf: invalid value '%s' for segment: expected an "
				    "integer from 1 to the maximum number of nodes (%d)",
				    v, cfg->max_nodes);
		return -EINVAL;
	}
	*settings = (struct rdzv_settings){
		.min_nodes = cfg->min_nodes,
		.max_nodes = cfg->max_nodes,
		.last_call_usec = (int64_t)lc,
		.keep_alive_interval_usec = (int64_t)ka,
		.keep_alive_max_attempt = (int)n,
		.segment = seg >= 2 ? (int)seg : 0,
	};
	return 0;
}

/* The value of "file:PATH": its bytes less surrounding white space; NULL
 * when it cannot be read or holds nothing else. */
static char *
rank_key_file(const char *path)
{
	char *buf = NULL, *b, *e;
	size_t len = 0;

	if (read_file(path, 4096, &buf, &len) < 0) {
		return NULL;
	}
	for (b = buf; *b && isspace((unsigned char)*b); b++) {
	}
	for (e = b + strlen(b); e > b && isspace((unsigned char)e[-1]); e--) {
	}
	*e = '\0';
	memmove(buf, b, (size_t)(e - b) + 1);
	if (!*buf) {
		free(buf);
		return NULL;
	}
	return buf;
}

int
rdzv_rank_key(const struct config *cfg, char **ret_key, char **reterr)
{
	const char *v = config_rdzv_conf_get(cfg, "rank_key");
	char host[256], *key = NULL;

	*ret_key = NULL;
	if (!v) {
		return 0;
	}
	if (strncmp(v, "env:", 4) == 0 && v[4]) {
		const char *e = getenv(v + 4);

		key = e && *e ? xstrdup(e) : NULL;
	} else if (strncmp(v, "file:", 5) == 0 && v[5]) {
		key = rank_key_file(v + 5);
	} else if (strcmp(v, "hostname") == 0) {
		key = gethostname(host, sizeof(host)) == 0 && host[0] ? xstrndup(host, sizeof(host))
								      : NULL;
	} else {
		*reterr = xasprintf("--rdzv-conf: invalid value '%s' for rank_key: expected "
				    "env:VAR, file:PATH or hostname",
				    v);
		return -EINVAL;
	}
	if (!key) {
		*reterr = xasprintf("--rdzv-conf: rank_key=%s: %s", v,
				    v[0] == 'e'   ? "the variable is not set or is empty"
				    : v[0] == 'f' ? "the file cannot be read or is empty"
						  : "the host name is empty");
		return -EINVAL;
	}
	if (!rdzv_key_ok(key, strlen(key))) {
		*reterr =
			xasprintf("--rdzv-conf: rank_key=%s: invalid key '%.*s': expected 1 to %d "
				  "of A-Z a-z 0-9 . _ : -",
				  v, RDZV_MAX_KEY_LEN, key, RDZV_MAX_KEY_LEN);
		free(key);
		return -EINVAL;
	}
	*ret_key = key;
	return 0;
}

int
rdzv_node_self(const struct config *cfg, struct rdzv_node *ret, char **reterr)
{
	static long long next_local_id;
	const char *addr = cfg->local_addr && *cfg->local_addr ? cfg->local_addr : host_fqdn();
	char *key;
	int err;

	if (rdzv_rank_key(cfg, &key, reterr) < 0) {
		return -EINVAL;
	}
	err = rdzv_node_init_key(ret, addr, (long long)getpid(), next_local_id++, key);
	if (err == 0 && key) {
		log_info("rendezvous: rank key '%s' (--rdzv-conf rank_key=%s): group ranks follow "
			 "the nodes' keys",
			 key, config_rdzv_conf_get(cfg, "rank_key"));
	}
	free(key);
	if (err < 0) {
		*reterr = xasprintf("--local-addr: invalid value '%s': no spaces, control "
				    "characters or '@' (it separates the rank key)",
				    addr);
		return -EINVAL;
	}
	return 0;
}

struct rdzv_ctx
rdzv_ctx_now(const struct rdzv_settings *settings, const struct rdzv_node *node,
	     uint64_t op_deadline)
{
	struct rdzv_ctx ctx = {
		.settings = settings,
		.node = node,
		.now_wall = (int64_t)wall_usec(),
		.now_mono = now_usec(),
		.op_deadline = op_deadline,
	};

	return ctx;
}
