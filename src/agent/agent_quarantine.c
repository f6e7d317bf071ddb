/* agent_quarantine.c — --quarantine F/W: a node whose own workers failed F
 * times within W seconds is the problem, not the job. agent_decide's
 * QUARANTINE rows take it out: it leaves the rendezvous open (the others
 * re-form without it, spares take its place), waits out a cooldown that
 * doubles with each quarantine, then rejoins with a new rendezvous handle.
 * The readmit verb ends the cooldown at once: on this node's agent directly;
 * on any other agent of the job by expiring the node's entry in the shared
 * state (rdzv_readmit), which this agent notices by re-reading the state
 * every QUARANTINE_WATCH_S of its cooldown. */
#include "agent.h"
#include "agent_internal.h"

#include <errno.h>
#include <event2/event.h>
#include <jansson.h>
#include <string.h>

#include "config.h"
#include "events.h"
#include "log.h"
#include "rdzv.h"
#include "rdzv_snapshot.h"
#include "sd.h"
#include "util.h"

/* The cooldown doubles at most this many times. */
#define QUARANTINE_MAX_DOUBLINGS 10

/* How often a quarantined agent re-reads the shared state for a readmission
 * by another agent: one read of the state, a modest load at any scale. */
#define QUARANTINE_WATCH_S 2

/* How long the readmit verb for another node retries while this agent's
 * rendezvous is busy (a join or keep-alive under way), and how often. */
#define READMIT_RETRY_S 10
#define READMIT_RETRY_MS 200

/* This node's name as the shared state's entries carry it: --local-addr,
 * else the FQDN (rdzv_node_self). */
static const char *
agent_node_name(const struct agent *a)
{
	return a->cfg->local_addr && *a->cfg->local_addr ? a->cfg->local_addr : host_fqdn();
}

void
agent_quarantine_setup(struct agent *a)
{
	if (a->cfg->quarantine_n > 0) {
		a->quarantine_times = xcalloc((size_t)a->cfg->quarantine_n, sizeof(uint64_t));
	}
}

void
agent_quarantine_spared(struct agent *a, int n)
{
	struct elastic_event ev;

	a->stats.quarantine_exemptions++;
	log_warn("[%s] %d failed attempts of this node within %g s (--quarantine %d/%g), but it "
		 "hosts the c10d rendezvous store: not quarantined (the job's store would leave "
		 "with it); give --rdzv-endpoint to a node you trust",
		 a->cfg->role, n, a->cfg->quarantine_s, a->cfg->quarantine_n, a->cfg->quarantine_s);
	if (!agent_event_begin(a, &ev, "elasticd.node.quarantine_exempt", EVENT_SOURCE_AGENT)) {
		return;
	}
	elastic_event_set_string(&ev, "node", agent_node_name(a));
	elastic_event_set_int(&ev, "failures", n);
	elastic_event_set_double(&ev, "window_s", a->cfg->quarantine_s);
	elastic_event_set_string(&ev, "why", "hosts the c10d store");
	agent_record(a, &ev);
}

int
agent_quarantine_count(struct agent *a)
{
	const struct config *cfg = a->cfg;
	uint64_t now = now_usec();

	if (!a->quarantine_times || !agent_root_cause_counts(a)) {
		return 0; /* off, or another node's failure (agent_rootcause.c) */
	}
	a->quarantine_times[a->quarantine_next] = now;
	a->quarantine_next = (a->quarantine_next + 1) % (size_t)cfg->quarantine_n;
	return agent_window_count(a->quarantine_times, (size_t)cfg->quarantine_n, now,
				  seconds_to_usec(cfg->quarantine_s));
}

bool
agent_quarantine_exempt(const struct agent *a)
{
	return a->cfg->max_nodes > 1 && !a->cfg->standalone && rdzv_hosts_store(a->rdzv);
}

void
agent_quarantine_inherit(struct agent *a)
{
	struct rdzv_snapshot snap;
	long pos;
	int count;

	if (!a->quarantine_times || !a->rdzv || rdzv_snapshot(a->rdzv, &snap) < 0) {
		return;
	}
	pos = rdzv_state_find_quarantine_host(&snap.st, agent_node_name(a));
	count = pos >= 0 ? snap.st.quarantine[pos].count : 0;
	rdzv_snapshot_release(&snap);
	if (count <= a->quarantines) {
		return;
	}
	log_warn("[%s] the rendezvous state records %d earlier quarantine%s of this host (an "
		 "agent before a restart): the next cooldown keeps doubling from there",
		 a->cfg->role, count, count == 1 ? "" : "s");
	a->quarantines_inherited = count;
	a->quarantines = count;
}

/* elasticd.node.quarantined or elasticd.node.readmitted. */
static void
agent_record_quarantine(struct agent *a, const char *name, const char *by)
{
	struct elastic_event ev;

	if (!agent_event_begin(a, &ev, name, EVENT_SOURCE_AGENT)) {
		return;
	}
	elastic_event_set_string(&ev, "node", agent_node_name(a));
	elastic_event_set_int(&ev, "failures", a->cfg->quarantine_n); /* F of F/W */
	elastic_event_set_double(&ev, "window_s", a->cfg->quarantine_s);
	elastic_event_set_double(&ev, "cooldown_s",
				 (double)(a->quarantine_until_usec - a->quarantine_start_usec) /
					 1e6);
	elastic_event_set_int(&ev, "quarantines", a->quarantines);
	elastic_event_set_int(&ev, "inherited", a->quarantines_inherited);
	if (by) {
		elastic_event_set_string(&ev, "by", by);
		elastic_event_set_double(&ev, "after_s",
					 ms_since(a->quarantine_start_usec) / 1000.0);
	}
	agent_record(a, &ev);
}

/* A rendezvous handle a readmit of another node may be using is being freed
 * (rdzv_free drops its operation without a callback): send it again, on the
 * handle that reaches the state then (writing twice is harmless). */
static void
agent_readmit_rearm(struct agent *a)
{
	struct timeval retry = {0, READMIT_RETRY_MS * 1000};

	if (a->readmit_host) {
		evtimer_add(a->readmit_timer, &retry);
	}
}

/* The cooldown is over (by: "cooldown" or "readmit"): a new rendezvous
 * handle, then the next round (through the health gate). */
static void
agent_readmit(struct agent *a, const char *by)
{
	char *err = NULL;

	log_info("[%s] readmitted (%s) after %.1f s of quarantine; rejoining the rendezvous",
		 a->cfg->role, by, ms_since(a->quarantine_start_usec) / 1000.0);
	a->stats.readmissions++;
	agent_record_quarantine(a, "elasticd.node.readmitted", by);
	a->quarantine_until_usec = 0;
	evtimer_del(a->quarantine_timer);
	if (a->quarantine_watch) {
		evtimer_del(a->quarantine_watch);
	}
	rdzv_free(a->quarantine_rdzv); /* the watch's (its callback may be running) */
	a->quarantine_rdzv = NULL;
	rdzv_free(a->rdzv);
	agent_readmit_rearm(a);
	a->rdzv = rdzv_new(a->base, a->cfg, a->local_world_size, &a->rcb, &err);
	if (!a->rdzv) {
		log_error("[%s] cannot rejoin: %s", a->cfg->role, err);
		free(err);
		agent_exit(a, AGENT_EXIT_FAILURE, AGENT_REASON_RDZV_FAILED, "cannot rejoin");
		return;
	}
	agent_start_round(a, AGENT_REASON_QUARANTINED, "quarantine over");
}

static void
agent_quarantine_timer_cb(evutil_socket_t fd, short what, void *arg)
{
	struct agent *a = arg;
	struct timeval again = {0, 100 * 1000};

	if (a->phase != AGENT_PHASE_QUARANTINED) {
		return;
	}
	if (a->leaving) { /* rdzv_leave is still under way (at most 5 s) */
		evtimer_add(a->quarantine_timer, &again);
		return;
	}
	agent_readmit(a, "cooldown");
}

/* A read of the shared state by the watch is back: readmitted elsewhere
 * when our entry's until is no longer the one we wrote and is over. */
static void
agent_quarantine_watched(void *arg, int err, const char *host)
{
	struct agent *a = arg;
	struct rdzv_snapshot snap;
	long pos;
	bool readmitted;

	if (a->phase != AGENT_PHASE_QUARANTINED || err < 0 || !a->quarantine_rdzv ||
	    rdzv_snapshot(a->quarantine_rdzv, &snap) < 0) {
		return;
	}
	a->quarantine_checks++;
	pos = rdzv_state_find_quarantine_host(&snap.st, agent_node_name(a));
	/* This quarantine's entry (its count: not the last one's, which an
	 * unwritten leave would leave in place), ended by someone else. */
	readmitted = pos >= 0 && snap.st.quarantine[pos].count >= a->quarantines &&
		     snap.st.quarantine[pos].until != a->quarantine_until_wall &&
		     snap.st.quarantine[pos].until <= (int64_t)wall_usec();
	rdzv_snapshot_release(&snap);
	if (readmitted) {
		log_warn("[%s] readmitted by another agent (readmit verb): the shared rendezvous "
			 "state ended this node's quarantine",
			 a->cfg->role);
		agent_readmit(a, "readmit");
	}
}

/* Every QUARANTINE_WATCH_S of the cooldown: once the leave is over, a
 * rendezvous observer of its own (quiet: no events, no progress lines; no
 * member: it never hosts, leases or coordinates; the handle the node left
 * stays until it rejoins, so that a c10d store it hosts lives as before),
 * then a read of the state through it. */
static void
agent_quarantine_watch_cb(evutil_socket_t fd, short what, void *arg)
{
	struct agent *a = arg;
	struct timeval tv = {QUARANTINE_WATCH_S, 0};
	struct rdzv_callbacks quiet = {.done = a->rcb.done, .arg = a->rcb.arg};
	char *err = NULL;

	if (a->phase != AGENT_PHASE_QUARANTINED) {
		return;
	}
	evtimer_add(a->quarantine_watch, &tv);
	if (a->leaving) {
		return;
	}
	if (!a->quarantine_rdzv) {
		a->quarantine_rdzv = rdzv_new_observer(a->base, a->cfg, a->local_world_size, &quiet,
						       a->rdzv, &err);
		if (!a->quarantine_rdzv && !a->quarantine_watch_warned) {
			log_warn("[%s] quarantine: cannot watch the rendezvous state for a readmit "
				 "(the cooldown still ends it): %s",
				 a->cfg->role, err);
			a->quarantine_watch_warned = true;
		}
		free(err);
		return; /* connecting: the next tick reads */
	}
	(void)rdzv_readmit(a->quarantine_rdzv, NULL, agent_quarantine_watched, a); /* busy: next */
}

void
agent_quarantine(struct agent *a)
{
	const struct config *cfg = a->cfg;
	int doublings;
	uint64_t cooldown;
	struct timeval tv, watch = {QUARANTINE_WATCH_S, 0};

	/* Again here: a c10d joiner's copy of the state is refreshed only
	 * after its round began (agent_quarantine_inherit's look asked for it). */
	agent_quarantine_inherit(a);
	doublings = a->quarantines < QUARANTINE_MAX_DOUBLINGS ? a->quarantines
							      : QUARANTINE_MAX_DOUBLINGS;
	cooldown = seconds_to_usec(cfg->quarantine_cooldown) << doublings;
	tv = usec_to_timeval(cooldown);

	a->quarantines++;
	a->stats.quarantines++;
	a->quarantine_start_usec = now_usec();
	a->quarantine_until_usec = a->quarantine_start_usec + cooldown;
	memset(a->quarantine_times, 0, (size_t)cfg->quarantine_n * sizeof(uint64_t));
	log_error("[%s] quarantined: %d failed attempts of this node within %g s (--quarantine "
		  "%d/%g); leaving the job for %.1f s (quarantine %d)",
		  cfg->role, cfg->quarantine_n, cfg->quarantine_s, cfg->quarantine_n,
		  cfg->quarantine_s, (double)cooldown / 1e6, a->quarantines);
	agent_record_quarantine(a, "elasticd.node.quarantined", NULL);
	sd_notify_status(a->sd, "quarantined: %d failed attempts within %g s; rejoining in %.0f s",
			 cfg->quarantine_n, cfg->quarantine_s, (double)cooldown / 1e6);
	agent_set_phase(a, AGENT_PHASE_QUARANTINED, AGENT_REASON_QUARANTINED, "node quarantined");
	a->quarantine_until_wall = (int64_t)(wall_usec() + cooldown);
	a->quarantine_watch_warned = false;
	a->quarantine_checks = 0;
	if (a->rdzv) { /* recorded in the shared state with the leave */
		rdzv_set_quarantine(a->rdzv, a->quarantine_until_wall, a->quarantines);
	}
	agent_leave(a, "quarantine");
	if (!a->quarantine_timer) {
		a->quarantine_timer = evtimer_new(a->base, agent_quarantine_timer_cb, a);
		a->quarantine_watch = evtimer_new(a->base, agent_quarantine_watch_cb, a);
	}
	evtimer_add(a->quarantine_timer, &tv);
	evtimer_add(a->quarantine_watch, &watch);
}

void
agent_quarantine_cancel(struct agent *a)
{
	if (a->quarantine_timer) {
		evtimer_del(a->quarantine_timer);
		evtimer_del(a->quarantine_watch);
	}
	rdzv_free(a->quarantine_rdzv);
	a->quarantine_rdzv = NULL;
	a->quarantine_until_usec = 0;
	agent_readmit_rearm(a);
}

void
agent_quarantine_free(struct agent *a)
{
	free(a->quarantine_times);
	if (a->quarantine_timer) {
		event_free(a->quarantine_timer);
		event_free(a->quarantine_watch);
	}
	if (a->readmit_timer) {
		event_free(a->readmit_timer);
	}
	free(a->readmit_host);
	rdzv_free(a->quarantine_rdzv);
}

/* The readmit verb for another node is over: the caller's answer, and with
 * a write (written or failed) a log line and an event. */
static void
agent_readmit_end(struct agent *a, int status, const char *msg, bool wrote)
{
	void (*reply)(void *call, int status, const char *msg) = a->readmit_reply;
	struct elastic_event ev;
	char *node = a->readmit_host;

	a->readmit_host = NULL;
	a->readmit_reply = NULL;
	evtimer_del(a->readmit_timer);
	if (wrote) {
		if (status == 200) {
			log_warn("[%s] readmit '%s': %s", a->cfg->role, node, msg);
		} else {
			log_error("[%s] readmit '%s': %s", a->cfg->role, node, msg);
		}
		if (agent_event_begin(a, &ev, "elasticd.node.readmitted", EVENT_SOURCE_AGENT)) {
			elastic_event_set_string(&ev, "node", node);
			elastic_event_set_string(&ev, "by", "readmit");
			elastic_event_set_string(&ev, "requested_on", agent_node_name(a));
			elastic_event_set_string(&ev, "result", status == 200 ? "ok" : msg);
			agent_record(a, &ev);
		}
		if (status == 200) {
			a->stats.readmit_requests++;
		}
	}
	if (reply) {
		reply(a->readmit_call, status, msg);
	}
	free(node);
}

static void agent_readmit_send_cb(evutil_socket_t fd, short what, void *arg);
static struct rdzv *agent_live_rdzv(const struct agent *a);

/* The write is back. */
static void
agent_readmit_written(void *arg, int err, const char *host)
{
	struct agent *a = arg;
	char *msg;

	if (err < 0) {
		msg = xasprintf("cannot write the rendezvous state: %s", strerror(-err));
		agent_readmit_end(a, 500, msg, true);
	} else {
		msg = xasprintf("readmitted %s: its quarantine is over in the rendezvous state; "
				"its agent rejoins within %d s",
				host, QUARANTINE_WATCH_S + 1);
		agent_readmit_end(a, 200, msg, true);
	}
	free(msg);
}

/* Whether st lists a node of host name (participant, waiting or spare). */
static bool
state_knows(const struct rdzv_state *st, const char *name)
{
	const struct rdzv_node *lists[3] = {st->wait_list, st->redundancy_list, NULL};
	size_t n[3] = {st->n_wait_list, st->n_redundancy_list, st->n_participants};
	size_t len = strlen(name);

	for (int l = 0; l < 3; l++) {
		for (size_t i = 0; i < n[l]; i++) {
			const struct rdzv_node *x =
				l < 2 ? &lists[l][i] : &st->participants[i].node;

			if ((x->addr_len == len && memcmp(x->name, name, len) == 0) ||
			    strcmp(x->name, name) == 0) {
				return true;
			}
		}
	}
	return false;
}

/* The fresh read is back: 404 / 409, or on to the write. */
static void
agent_readmit_checked(void *arg, int err, const char *host)
{
	struct agent *a = arg;
	struct rdzv_snapshot snap;
	char *msg = NULL;
	int status = 0;
	long pos;

	if (err < 0 || !agent_live_rdzv(a) || rdzv_snapshot(agent_live_rdzv(a), &snap) < 0) {
		msg = xasprintf("cannot read the rendezvous state: %s",
				strerror(err < 0 ? -err : ENOTCONN));
		agent_readmit_end(a, 503, msg, false);
		free(msg);
		return;
	}
	pos = rdzv_state_find_quarantine_host(&snap.st, a->readmit_host);
	if (pos < 0 && !state_knows(&snap.st, a->readmit_host)) {
		msg = xasprintf("unknown node '%s': the rendezvous state neither lists nor "
				"quarantines it (see the nodes verb)",
				a->readmit_host);
		status = 404;
	} else if (pos < 0 || snap.st.quarantine[pos].until <= (int64_t)wall_usec()) {
		msg = xasprintf("node '%s' is not quarantined", a->readmit_host);
		status = 409;
	}
	rdzv_snapshot_release(&snap);
	if (msg) {
		agent_readmit_end(a, status, msg, false);
		free(msg);
		return;
	}
	a->readmit_writing = true;
	agent_readmit_send_cb(-1, 0, a);
}

/* The handle that reaches the shared state now: while quarantined, the
 * watch's (the one the node left is done), else the agent's. */
static struct rdzv *
agent_live_rdzv(const struct agent *a)
{
	return a->phase == AGENT_PHASE_QUARANTINED && a->quarantine_rdzv ? a->quarantine_rdzv
									 : a->rdzv;
}

/* Start (or retry, while the rendezvous is busy) the read, then the write. */
static void
agent_readmit_send_cb(evutil_socket_t fd, short what, void *arg)
{
	struct agent *a = arg;
	struct timeval retry = {0, READMIT_RETRY_MS * 1000};
	struct rdzv *r = agent_live_rdzv(a);
	int err;

	if (!a->readmit_host) {
		return;
	}
	err = !r                   ? -ENOTCONN
	      : a->readmit_writing ? rdzv_readmit(r, a->readmit_host, agent_readmit_written, a)
				   : rdzv_readmit(r, NULL, agent_readmit_checked, a);
	if ((err == -EBUSY || err == -ENOTCONN) && now_usec() < a->readmit_deadline_usec) {
		evtimer_add(a->readmit_timer, &retry);
	} else if (err < 0) {
		char *msg = xasprintf("the rendezvous stayed busy or out of reach for %d s: %s",
				      READMIT_RETRY_S, strerror(-err));

		agent_readmit_end(a, 503, msg, false);
		free(msg);
	}
}

void
agent_readmit_cancel(struct agent *a)
{
	a->readmit_reply = NULL; /* the readmission goes on */
}

/* The readmit verb for another node: a fresh read of the state, then the
 * write (agent_readmit_send_cb), answered through reply. */
static int
agent_request_readmit_other(struct agent *a, const char *node,
			    void (*reply)(void *call, int status, const char *msg), void *call,
			    char **reterr)
{
	struct timeval now = {0, 0};

	if (a->readmit_host) {
		*reterr = xasprintf("a readmit of '%s' is under way; try again", a->readmit_host);
		return -EBUSY;
	}
	if (!a->rdzv || !rdzv_shared_state(a->rdzv)) {
		*reterr = xasprintf("this agent (node '%s') holds no shared rendezvous state: "
				    "readmit '%s' on its own agent",
				    agent_node_name(a), node);
		return -EOPNOTSUPP;
	}
	log_warn("[%s] readmit '%s' requested over the control socket; ending its quarantine in "
		 "the rendezvous state",
		 a->cfg->role, node);
	a->readmit_host = xstrdup(node);
	a->readmit_reply = reply;
	a->readmit_call = call;
	a->readmit_writing = false;
	a->readmit_deadline_usec = now_usec() + READMIT_RETRY_S * USEC_PER_SEC;
	if (!a->readmit_timer) {
		a->readmit_timer = evtimer_new(a->base, agent_readmit_send_cb, a);
	}
	evtimer_add(a->readmit_timer, &now); /* from the loop: the caller defers first */
	return 1;
}

int
agent_request_readmit(struct agent *a, const char *node,
		      void (*reply)(void *call, int status, const char *msg), void *call,
		      char **reterr)
{
	if (node && *node && strcmp(node, agent_node_name(a)) != 0 &&
	    strcmp(node, host_fqdn()) != 0) {
		return agent_request_readmit_other(a, node, reply, call, reterr);
	}
	if (a->phase != AGENT_PHASE_QUARANTINED) {
		*reterr = xasprintf("the node is not quarantined (phase %s)",
				    agent_phase_name(a->phase));
		return -EBUSY;
	}
	if (a->leaving) {
		*reterr = xstrdup("the node is still leaving the rendezvous; try again");
		return -EBUSY;
	}
	log_warn("[%s] readmit requested over the control socket; ending the quarantine",
		 a->cfg->role);
	agent_readmit(a, "readmit");
	return 0;
}

json_t *
agent_quarantine_status(const struct agent *a)
{
	uint64_t now = now_usec();

	if (a->phase != AGENT_PHASE_QUARANTINED || !a->quarantine_until_usec) {
		return json_null();
	}
	return json_pack(
		"{s:f, s:f, s:i, s:i, s:i, s:I}", "cooldown_s",
		(double)(a->quarantine_until_usec - a->quarantine_start_usec) / 1e6, "remaining_s",
		a->quarantine_until_usec > now ? (double)(a->quarantine_until_usec - now) / 1e6
					       : 0.0,
		"failures", a->cfg->quarantine_n, "quarantines", a->quarantines, "watch_s",
		QUARANTINE_WATCH_S, "state_reads", (json_int_t)a->quarantine_checks);
}
