/* agent_quarantine.c — --quarantine F/W: a node whose own workers failed F
 * times within W seconds is the problem, not the job. agent_decide's
 * QUARANTINE rows take it out: it leaves the rendezvous open (the others
 * re-form without it, spares take its place), waits out a cooldown that
 * doubles with each quarantine, then rejoins with a new rendezvous handle.
 * The readmit verb ends the cooldown at once. */
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
#include "sd.h"
#include "util.h"

/* The cooldown doubles at most this many times. */
#define QUARANTINE_MAX_DOUBLINGS 10

void
agent_quarantine_setup(struct agent *a)
{
	if (a->cfg->quarantine_n > 0) {
		a->quarantine_times = xcalloc((size_t)a->cfg->quarantine_n, sizeof(uint64_t));
	}
}

int
agent_quarantine_count(struct agent *a)
{
	const struct config *cfg = a->cfg;
	uint64_t now = now_usec();

	if (!a->quarantine_times) {
		return 0;
	}
	a->quarantine_times[a->quarantine_next] = now;
	a->quarantine_next = (a->quarantine_next + 1) % (size_t)cfg->quarantine_n;
	return agent_window_count(a->quarantine_times, (size_t)cfg->quarantine_n, now,
				  seconds_to_usec(cfg->quarantine_s));
}

/* elasticd.node.quarantined or elasticd.node.readmitted. */
static void
agent_record_quarantine(struct agent *a, const char *name, const char *by)
{
	struct elastic_event ev;

	if (!agent_event_begin(a, &ev, name, EVENT_SOURCE_AGENT)) {
		return;
	}
	elastic_event_set_string(&ev, "node", host_fqdn());
	elastic_event_set_int(&ev, "failures", a->cfg->quarantine_n); /* F of F/W */
	elastic_event_set_double(&ev, "window_s", a->cfg->quarantine_s);
	elastic_event_set_double(&ev, "cooldown_s",
				 (double)(a->quarantine_until_usec - a->quarantine_start_usec) /
					 1e6);
	elastic_event_set_int(&ev, "quarantines", a->quarantines);
	if (by) {
		elastic_event_set_string(&ev, "by", by);
		elastic_event_set_double(&ev, "after_s",
					 ms_since(a->quarantine_start_usec) / 1000.0);
	}
	agent_record(a, &ev);
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
	rdzv_free(a->rdzv);
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

void
agent_quarantine(struct agent *a)
{
	const struct config *cfg = a->cfg;
	int doublings = a->quarantines < QUARANTINE_MAX_DOUBLINGS ? a->quarantines
								  : QUARANTINE_MAX_DOUBLINGS;
	uint64_t cooldown = seconds_to_usec(cfg->quarantine_cooldown) << doublings;
	struct timeval tv = usec_to_timeval(cooldown);

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
	if (a->rdzv) { /* recorded in the shared state with the leave */
		rdzv_set_quarantine(a->rdzv, (int64_t)(wall_usec() + cooldown), a->quarantines);
	}
	agent_leave(a, "quarantine");
	if (!a->quarantine_timer) {
		a->quarantine_timer = evtimer_new(a->base, agent_quarantine_timer_cb, a);
	}
	evtimer_add(a->quarantine_timer, &tv);
}

void
agent_quarantine_cancel(struct agent *a)
{
	if (a->quarantine_timer) {
		evtimer_del(a->quarantine_timer);
	}
	a->quarantine_until_usec = 0;
}

int
agent_request_readmit(struct agent *a, const char *node, char **reterr)
{
	if (node && *node && strcmp(node, host_fqdn()) != 0) {
		*reterr = xasprintf("this agent is node '%s': readmit '%s' on its own agent",
				    host_fqdn(), node);
		return -ENOENT;
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
	evtimer_del(a->quarantine_timer);
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
		"{s:f, s:f, s:i, s:i}", "cooldown_s",
		(double)(a->quarantine_until_usec - a->quarantine_start_usec) / 1e6, "remaining_s",
		a->quarantine_until_usec > now ? (double)(a->quarantine_until_usec - now) / 1e6
					       : 0.0,
		"failures", a->cfg->quarantine_n, "quarantines", a->quarantines);
}
