/* agent_rootcause.c — --quarantine counts a failed attempt only when this
 * node was the root cause job-wide: torch's notion, the earliest failure.
 * Each node whose attempt failed reports when its first worker failed into
 * the shared rendezvous state ("f <node> <round> <usec>", rdzv_state.h),
 * waits ROOT_CAUSE_SETTLE_MS for the others' reports, reads the state and
 * compares (rdzv_state_root_cause); a peer whose workers died because of
 * the culprit (NCCL errors after it went) reported later and does not
 * count. A node that cannot write or read the state within
 * ROOT_CAUSE_BOUND_S counts its own failure, and says so. */
#include "agent.h"
#include "agent_internal.h"

#include <errno.h>
#include <event2/event.h>
#include <inttypes.h>
#include <jansson.h>
#include <string.h>

#include "config.h"
#include "events.h"
#include "group.h"
#include "worker.h"
#include "log.h"
#include "rdzv.h"
#include "rdzv_snapshot.h"
#include "util.h"

/* How long the others get to report theirs, how long the whole step may
 * take, its retry pace while the rendezvous is busy, and the tie
 * tolerance: reports this close to the earliest count as root causes too. */
#define ROOT_CAUSE_SETTLE_MS 1000
#define ROOT_CAUSE_BOUND_S 4
#define ROOT_CAUSE_RETRY_MS 100
#define ROOT_CAUSE_TIE_MS 20

/* The wall clock (usec) of the first worker failure of the stopped group,
 * or now when none is recorded. */
static int64_t
first_failure_wall(const struct agent *a)
{
	uint64_t mono = now_usec(), first = 0;
	int64_t wall = (int64_t)wall_usec();

	for (size_t i = 0; a->group && i < group_size(a->group); i++) {
		const struct worker *w = group_worker(a->group, i);

		if (w->failed && w->exit_usec && (!first || w->exit_usec < first)) {
			first = w->exit_usec;
		}
	}
	return first && first <= mono ? wall - (int64_t)(mono - first) : wall;
}

/* The verdict: log line, event, status; then the decision goes on. */
static void
root_cause_end(struct agent *a, enum agent_rc verdict, const char *other, int64_t other_usec,
	       const char *why)
{
	struct agent_root_cause *rc = &a->rc;
	double ms = (double)(rc->usec - other_usec) / 1e3;
	struct elastic_event ev;

	evtimer_del(rc->timer);
	rc->verdict = verdict;
	free(rc->other);
	rc->other = other ? xstrdup(other) : NULL;
	rc->other_earlier_ms = other ? ms : 0;
	if (verdict == AGENT_RC_OTHER) {
		log_warn("[%s] failure of round %" PRId64 ": node %s failed %.0f ms earlier, the "
			 "root cause; not counted toward --quarantine",
			 a->cfg->role, rc->round, other, ms);
	} else if (verdict == AGENT_RC_SELF) {
		log_warn("[%s] failure of round %" PRId64 ": this node failed first, the root "
			 "cause%s; counted toward --quarantine",
			 a->cfg->role, rc->round,
			 other ? " (or within " STRINGIFY(ROOT_CAUSE_TIE_MS) " ms of it)" : "");
	} else {
		log_warn("[%s] failure of round %" PRId64 ": cannot compare with the other nodes' "
			 "failures (%s); counting it toward --quarantine",
			 a->cfg->role, rc->round, why);
	}
	if (agent_event_begin(a, &ev, "elasticd.node.root_cause", EVENT_SOURCE_AGENT)) {
		elastic_event_set_int(&ev, "round", (int)rc->round);
		elastic_event_set_double(&ev, "first_failure", (double)rc->usec / 1e6);
		elastic_event_set_string(&ev, "verdict", agent_rc_name(verdict));
		if (other) {
			elastic_event_set_string(&ev, "earliest_other", other);
			elastic_event_set_double(&ev, "earlier_ms", ms);
		}
		if (why) {
			elastic_event_set_string(&ev, "why", why);
		}
		agent_record(a, &ev);
	}
	event_base_once(a->base, -1, EV_TIMEOUT, agent_group_stopped_deferred, a, NULL);
}

static void root_cause_step(evutil_socket_t fd, short what, void *arg);

/* The state after our report and the others' settle time: compare. */
static void
root_cause_read(void *arg, int err, const char *host)
{
	struct agent *a = arg;
	struct rdzv_snapshot snap;
	struct rdzv_node me;
	long first = -1;
	bool root;

	if (a->phase == AGENT_PHASE_DONE || a->rc.stage != AGENT_RC_READING ||
	    a->rc.verdict != AGENT_RC_PENDING) {
		return;
	}
	if (err < 0 || !a->rdzv || rdzv_snapshot(a->rdzv, &snap) < 0) {
		root_cause_end(a, AGENT_RC_UNKNOWN, NULL, 0,
			       err < 0 ? strerror(-err) : "no rendezvous state");
		return;
	}
	if (!snap.self || rdzv_node_parse(&me, snap.self, strlen(snap.self)) < 0) {
		rdzv_snapshot_release(&snap);
		root_cause_end(a, AGENT_RC_UNKNOWN, NULL, 0, "no node descriptor");
		return;
	}
	root = rdzv_state_root_cause(&snap.st, &me, a->rc.round, a->rc.usec,
				     ROOT_CAUSE_TIE_MS * 1000, &first);
	root_cause_end(a, root ? AGENT_RC_SELF : AGENT_RC_OTHER,
		       first >= 0 ? snap.st.failures[first].node.name : NULL,
		       first >= 0 ? snap.st.failures[first].usec : 0, NULL);
	rdzv_node_release(&me);
	rdzv_snapshot_release(&snap);
}

/* Our report is written: give the others ROOT_CAUSE_SETTLE_MS. */
static void
root_cause_reported(void *arg, int err, const char *host)
{
	struct agent *a = arg;
	struct timeval settle = {0, ROOT_CAUSE_SETTLE_MS * 1000};

	if (a->phase == AGENT_PHASE_DONE || a->rc.stage != AGENT_RC_REPORTING ||
	    a->rc.verdict != AGENT_RC_PENDING) {
		return;
	}
	if (err < 0) {
		root_cause_end(a, AGENT_RC_UNKNOWN, NULL, 0, strerror(-err));
		return;
	}
	a->rc.stage = AGENT_RC_READING;
	evtimer_add(a->rc.timer, &settle);
}

/* Write our report, or read the state; again shortly while busy. */
static void
root_cause_step(evutil_socket_t fd, short what, void *arg)
{
	struct agent *a = arg;
	struct timeval retry = {0, ROOT_CAUSE_RETRY_MS * 1000};
	int err;

	if (a->phase == AGENT_PHASE_DONE || a->rc.stage == AGENT_RC_IDLE ||
	    a->rc.verdict != AGENT_RC_PENDING) {
		return;
	}
	if (now_usec() >= a->rc.deadline_usec) {
		root_cause_end(a, AGENT_RC_UNKNOWN, NULL, 0,
			       "no answer within " STRINGIFY(ROOT_CAUSE_BOUND_S) " s");
		return;
	}
	err = !a->rdzv ? -ENOTCONN
	      : a->rc.stage == AGENT_RC_REPORTING
		      ? rdzv_report_failure(a->rdzv, a->rc.round, a->rc.usec, root_cause_reported,
					    a)
		      : rdzv_readmit(a->rdzv, NULL, root_cause_read, a);
	if (err == -EBUSY || err == -ENOTCONN) {
		evtimer_add(a->rc.timer, &retry);
	} else if (err < 0) {
		root_cause_end(a, AGENT_RC_UNKNOWN, NULL, 0, strerror(-err));
	} else {
		/* Out: its answer, or this at the bound (a store that stalls
		 * would hold it up to the backend's close timeout). */
		uint64_t left = a->rc.deadline_usec - now_usec();
		struct timeval bound = {(time_t)(left / USEC_PER_SEC),
					(suseconds_t)(left % USEC_PER_SEC)};

		evtimer_add(a->rc.timer, &bound);
	}
}

bool
agent_root_cause_wait(struct agent *a)
{
	struct agent_root_cause *rc = &a->rc;
	struct timeval now = {0, 0};

	if (rc->group_start == a->group_start_usec && rc->stage != AGENT_RC_IDLE) {
		return rc->verdict == AGENT_RC_PENDING; /* decided: go on */
	}
	if (a->cfg->quarantine_n <= 0 || !a->group ||
	    agent_outcome_after(group_state(a->group), a->reason) != AGENT_OUTCOME_FAILED ||
	    !a->rdzv || !rdzv_shared_state(a->rdzv)) {
		rc->group_start = a->group_start_usec;
		rc->stage = AGENT_RC_IDLE;
		rc->verdict = AGENT_RC_UNKNOWN; /* counted, as before */
		return false;
	}
	rc->group_start = a->group_start_usec;
	rc->stage = AGENT_RC_REPORTING;
	rc->verdict = AGENT_RC_PENDING;
	rc->round = a->round.round;
	rc->usec = first_failure_wall(a);
	rc->deadline_usec = now_usec() + ROOT_CAUSE_BOUND_S * USEC_PER_SEC;
	if (!rc->timer) {
		rc->timer = evtimer_new(a->base, root_cause_step, a);
	}
	log_info("[%s] failure of round %" PRId64 ": comparing with the other nodes' failures "
		 "(root cause for --quarantine)",
		 a->cfg->role, rc->round);
	evtimer_add(rc->timer, &now);
	return true;
}

bool
agent_root_cause_counts(const struct agent *a)
{
	return a->rc.group_start != a->group_start_usec || a->rc.verdict != AGENT_RC_OTHER;
}

const char *
agent_rc_name(enum agent_rc v)
{
	switch (v) {
	case AGENT_RC_PENDING:
		return "pending";
	case AGENT_RC_SELF:
		return "this node";
	case AGENT_RC_OTHER:
		return "another node";
	case AGENT_RC_UNKNOWN:
		return "unknown";
	}
	return "?";
}

json_t *
agent_root_cause_status(const struct agent *a)
{
	const struct agent_root_cause *rc = &a->rc;

	if (rc->stage == AGENT_RC_IDLE && !rc->usec) {
		return json_null();
	}
	return json_pack("{s:I, s:s, s:s?, s:f}", "round", (json_int_t)rc->round, "verdict",
			 agent_rc_name(rc->verdict), "earliest_other", rc->other, "earlier_ms",
			 rc->other_earlier_ms);
}

void
agent_root_cause_free(struct agent *a)
{
	if (a->rc.timer) {
		event_free(a->rc.timer);
	}
	free(a->rc.other);
}
