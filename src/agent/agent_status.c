/* agent_status.c — the agent as the control plane sees it: the status JSON,
 * the metrics' counters and state gauges, one worker's view. Reads only. */
#include "agent.h"
#include "agent_internal.h"
#include "agent_health.h"

#include <errno.h>
#include <jansson.h>
#include <string.h>
#include <unistd.h>

#include "agent_hang.h"
#include "console.h"
#include "config.h"
#include "group.h"
#include "numa.h"
#include "ranks.h"
#include "rdzv_snapshot.h"
#include "sentinel.h"
#include "util.h"
#include "version.h"
#include "worker.h"

/* The group's WorkerState as the agent reports it (agent_group_view_state). */
static enum worker_state
agent_group_state(const struct agent *a)
{
	return agent_group_view_state(a->phase, a->reason, a->group != NULL,
				      a->group ? group_state(a->group) : WORKER_STATE_INIT);
}

/* One worker's WorkerState: INIT before it started, HEALTHY while it runs,
 * then SUCCEEDED (exit 0), FAILED (counted as the group's failure) or STOPPED
 * (ended by a stop). */
static enum worker_state
agent_worker_state(const struct worker *w)
{
	if (!w->reaped) {
		return w->pid > 0 ? WORKER_STATE_HEALTHY : WORKER_STATE_INIT;
	}
	if (w->failed) {
		return WORKER_STATE_FAILED;
	}
	return w->exitcode == 0 ? WORKER_STATE_SUCCEEDED : WORKER_STATE_STOPPED;
}

/* A JSON string, or null for NULL (or text that is not UTF-8). */
static json_t *
json_str_or_null(const char *s)
{
	json_t *j = s ? json_string(s) : NULL;

	return j ? j : json_null();
}

static json_t *
agent_worker_json(const struct agent *a, const struct worker *w)
{
	json_t *o = json_object();
	const struct numa_binding *b = w->binding;
	bool ended = w->reaped;

	json_object_set_new(o, "local_rank", json_integer(w->local_rank));
	json_object_set_new(o, "global_rank", json_integer(w->global_rank));
	json_object_set_new(o, "role_rank", json_integer(w->role_rank));
	json_object_set_new(o, "pid", w->pid > 0 ? json_integer(w->pid) : json_null());
	json_object_set_new(o, "state", json_string(worker_state_name(agent_worker_state(w))));
	json_object_set_new(o, "exitcode", ended ? json_integer(w->exitcode) : json_null());
	json_object_set_new(o, "exit_status",
			    ended && w->exitcode >= 0 ? json_integer(w->exitcode) : json_null());
	json_object_set_new(o, "signal",
			    ended && w->exitcode < 0 ? json_str_or_null(signal_name(-w->exitcode))
						     : json_null());
	json_object_set_new(o, "start_time",
			    w->pid > 0 ? json_integer((json_int_t)w->start_wall) : json_null());
	json_object_set_new(o, "exit_time",
			    ended ? json_integer((json_int_t)w->exit_wall) : json_null());
	if (b) {
		/* The binding as --dry-run prints it. */
		json_object_update_missing_new(o, numa_binding_to_json(a->numa, w->local_rank));
	} else {
		json_object_set_new(o, "gpu", json_null());
		json_object_set_new(o, "numa_nodes", json_array());
		json_object_set_new(o, "cpus", json_null());
		json_object_set_new(o, "mems", json_null());
		json_object_set_new(o, "mode", json_null());
	}
	json_object_set_new(o, "stdout_log", json_str_or_null(w->stream_path[0]));
	json_object_set_new(o, "stderr_log", json_str_or_null(w->stream_path[1]));
	json_object_set_new(
		o, "error_file",
		json_str_or_null(w->error_file && *w->error_file ? w->error_file : NULL));
	json_object_set_new(o, "worker_server_socket", json_str_or_null(w->server_socket));
	return o;
}

/* The restart policy's state: next_attempt_in_s (the backoff's wait left,
 * null when none), restarts_in_window (null without --restart-window) and
 * attempts_without_progress (null without --progress-file). */
static void
agent_policy_json(const struct agent *a, json_t *o)
{
	uint64_t now = now_usec();
	const struct config *cfg = a->cfg;

	json_object_set_new(o, "next_attempt_in_s",
			    a->next_attempt_usec > now
				    ? json_real((double)(a->next_attempt_usec - now) / USEC_PER_SEC)
				    : json_null());
	json_object_set_new(o, "restarts_in_window",
			    a->window_times
				    ? json_integer(agent_window_count(
					      a->window_times, (size_t)cfg->restart_window_n, now,
					      (uint64_t)(cfg->restart_window_s * USEC_PER_SEC)))
				    : json_null());
	json_object_set_new(o, "attempts_without_progress",
			    cfg->progress_file ? json_integer(a->progress.stalled) : json_null());
}

/* drain: null, or while draining {signal, timeout_s, remaining_s} (the
 * grace left; null once it is over or when no group ran). */
static json_t *
agent_drain_json(const struct agent *a)
{
	uint64_t now = now_usec();

	if (a->phase != AGENT_PHASE_DRAINING) {
		return json_null();
	}
	return json_pack("{s:s, s:i, s:o}", "signal", signal_name(a->drain_signo), "timeout_s",
			 a->drain_timeout_s, "remaining_s",
			 a->drain_deadline_usec > now
				 ? json_real((double)(a->drain_deadline_usec - now) / USEC_PER_SEC)
				 : json_null());
}

/* "hang_rules": "off", or the rules; "hang_watch": whether a timer watches
 * the group; "hang": the root cause of this attempt's hang, or null;
 * "hang_stacks": where its stacks are (files, or "<stderr.log> (SIGABRT)"),
 * or null. */
static void
agent_hang_json(const struct agent *a, json_t *o)
{
	struct hang_rules r = agent_hang_rules(a);
	json_t *rules;

	if (!hang_rules_on(&r)) {
		rules = json_string("off");
	} else {
		rules = json_object();
		json_object_set_new(rules, "silence_s",
				    r.silence_s > 0 ? json_real(r.silence_s) : json_null());
		json_object_set_new(rules, "cadence", json_str_or_null(r.cadence));
		json_object_set_new(rules, "cadence_interval_s",
				    r.cadence ? json_real(r.cadence_s) : json_null());
		json_object_set_new(rules, "cadence_start_s",
				    r.cadence_start_s > 0 ? json_real(r.cadence_start_s)
							  : json_null());
	}
	json_object_set_new(o, "hang_rules", rules);
	json_object_set_new(o, "hang_watch", json_boolean(a->hang != NULL));
	json_object_set_new(o, "hang", json_str_or_null(a->hung ? a->hang_cause : NULL));
	json_object_set_new(o, "hang_stacks", json_str_or_null(a->hung ? a->hang_stacks : NULL));
}

/* Bytes both consoles dropped (one when stdout and stderr share it). */
static uint64_t
agent_console_dropped(const struct agent *a)
{
	size_t n = console_dropped(a->consoles[0]);

	if (a->consoles[1] != a->consoles[0]) {
		n += console_dropped(a->consoles[1]);
	}
	return n;
}

/* The rendezvous' store (or etcd) out of reach while workers run:
 * {"for_s", "reason"}, else null. */
static json_t *
agent_degraded_json(struct agent *a)
{
	uint64_t since = 0;
	const char *why = NULL;
	json_t *o;

	if (!rdzv_degraded(a->rdzv, &since, &why)) {
		return json_null();
	}
	o = json_object();
	json_object_set_new(o, "for_s", json_real((double)(now_usec() - since) / USEC_PER_SEC));
	json_object_set_new(o, "reason", json_string(why));
	return o;
}

json_t *
agent_status_json(struct agent *a)
{
	json_t *o = json_object(), *workers = json_array();
	bool have_round = a->round.runs != NULL;
	/* The workers of every node: O(runs), no role to compare. */
	long long world_size = have_round ? ranks_world_size(a->round.runs, a->round.n_runs) : 0;

	json_object_set_new(o, "run_id", json_str_or_null(a->cfg->rdzv_id));
	json_object_set_new(o, "node", json_str_or_null(agent_node_desc(a)));
	json_object_set_new(o, "hostname", json_str_or_null(host_fqdn()));
	json_object_set_new(o, "pid", json_integer(getpid()));
	json_object_set_new(o, "version", json_string(ELASTICD_VERSION));
	json_object_set_new(o, "role", json_str_or_null(a->cfg->role));
	json_object_set_new(o, "rdzv_backend", json_str_or_null(a->cfg->rdzv_backend));
	json_object_set_new(o, "node_state",
			    json_string(node_state_name(agent_node_state(
				    a->phase, a->reason, a->exit_code, have_round))));
	json_object_set_new(o, "round", have_round ? json_integer(a->round.round) : json_null());
	json_object_set_new(o, "group_rank",
			    have_round ? json_integer(a->round.group_rank) : json_null());
	json_object_set_new(o, "group_world_size",
			    have_round ? json_integer(a->round.group_world_size) : json_null());
	json_object_set_new(o, "world_size",
			    have_round ? json_integer((json_int_t)world_size) : json_null());
	json_object_set_new(o, "local_world_size", json_integer(a->local_world_size));
	json_object_set_new(o, "master_addr",
			    json_str_or_null(have_round ? a->round.master_addr : NULL));
	json_object_set_new(o, "master_port",
			    have_round ? json_integer(a->round.master_port) : json_null());
	json_object_set_new(o, "worker_state",
			    json_string(worker_state_name(agent_group_state(a))));
	json_object_set_new(o, "restart_count", json_integer(a->restart_count));
	json_object_set_new(o, "max_restarts", json_integer(a->cfg->max_restarts));
	json_object_set_new(o, "remaining_restarts", json_integer(a->remaining_restarts));
	agent_policy_json(a, o);
	json_object_set_new(o, "phase", json_string(agent_phase_name(a->phase)));
	json_object_set_new(o, "drain", agent_drain_json(a));
	json_object_set_new(o, "health", agent_health_status(a));
	json_object_set_new(o, "quarantine", agent_quarantine_status(a));
	json_object_set_new(o, "root_cause", agent_root_cause_status(a));
	json_object_set_new(o, "quarantine_count",
			    json_pack("{s:i, s:i, s:i}", "quarantines", a->quarantines, "inherited",
				      a->quarantines_inherited, "exemptions",
				      (int)a->stats.quarantine_exemptions));
	json_object_set_new(o, "excluded",
			    a->exclude_reason ? json_string(a->exclude_reason) : json_null());
	json_object_set_new(o, "uptime_s",
			    json_real((double)(now_usec() - a->start_usec) / USEC_PER_SEC));
	json_object_set_new(o, "run_dir", json_str_or_null(a->run_dir));
	json_object_set_new(o, "degraded", agent_degraded_json(a));
	json_object_set_new(o, "orphan_guard", json_str_or_null(a->orphan_guard));
	json_object_set_new(o, "console_dropped_bytes",
			    json_integer((json_int_t)agent_console_dropped(a)));
	json_object_set_new(o, "orphan_cgroup", json_str_or_null(a->cgroup));
	json_object_set_new(o, "sentinel_pid", json_integer(sentinel_pid(a->sentinel)));
	json_object_set_new(o, "sentinel_respawns",
			    json_integer((json_int_t)a->stats.sentinel_respawns));
	agent_hang_json(a, o);
	for (size_t i = 0; a->group && i < group_size(a->group); i++) {
		json_t *w = agent_worker_json(a, group_worker(a->group, i));
		json_t *h = agent_hang_rank_json(a->hang, (int)i, now_usec());

		json_object_set_new(w, "hang", h ? h : json_null());
		json_array_append_new(workers, w);
	}
	json_object_set_new(o, "workers", workers);
	return o;
}

json_t *
agent_nodes_json(struct agent *a, char **reterr)
{
	struct rdzv_snapshot snap = {0};
	json_t *o;

	if (!a->rdzv || rdzv_snapshot(a->rdzv, &snap) < 0) {
		*reterr = xasprintf("the %s rendezvous keeps no shared state: each node knows "
				    "only itself (--node-rank)",
				    a->cfg->rdzv_backend);
		return NULL;
	}
	o = rdzv_snapshot_json(&snap, (int64_t)wall_usec());
	json_object_set_new(o, "run_id", json_str_or_null(a->cfg->rdzv_id));
	rdzv_snapshot_release(&snap);
	return o;
}

void
agent_get_stats(struct agent *a, struct ctl_agent_stats *ret)
{
	enum node_state ns =
		agent_node_state(a->phase, a->reason, a->exit_code, a->round.runs != NULL);
	enum worker_state gs = agent_group_state(a);

	memset(ret, 0, sizeof(*ret));
	ret->run_id = a->cfg->rdzv_id;
	ret->role = a->cfg->role;
	ret->rdzv_backend = a->cfg->rdzv_backend;
	ret->node = agent_node_desc(a);
	ret->uptime_s = (double)(now_usec() - a->start_usec) / USEC_PER_SEC;
	ret->local_world_size = a->local_world_size;
	ret->remaining_restarts = a->remaining_restarts;
	ret->rdzv_degraded = rdzv_degraded(a->rdzv, &(uint64_t){0}, &(const char *){NULL});
	ret->rdzv_coordinator = rdzv_coordinates(a->rdzv);
	ret->console_dropped_bytes = agent_console_dropped(a);
	/* Every state of torch's enums, in their order. */
	for (enum node_state s = NODE_STATE_INIT; s <= NODE_STATE_FAILED; s++) {
		ret->node_state.names[ret->node_state.n] = node_state_name(s);
		ret->node_state.values[ret->node_state.n++] = s == ns;
	}
	for (enum worker_state s = WORKER_STATE_UNKNOWN; s <= WORKER_STATE_FAILED; s++) {
		ret->group_state.names[ret->group_state.n] = worker_state_name(s);
		ret->group_state.values[ret->group_state.n++] = s == gs;
		ret->workers.names[ret->workers.n++] = worker_state_name(s);
	}
	for (size_t i = 0; a->group && i < group_size(a->group); i++) {
		ret->workers.values[agent_worker_state(group_worker(a->group, i))]++;
	}
	ret->counters = a->stats;
}

int
agent_worker_view(struct agent *a, int local_rank, struct ctl_worker_view *ret)
{
	const struct worker *w;

	if (!a->group) {
		return -ENOENT;
	}
	w = local_rank >= 0 ? group_worker(a->group, (size_t)local_rank) : NULL;
	if (!w) {
		return -ERANGE;
	}
	*ret = (struct ctl_worker_view){
		.local_rank = w->local_rank,
		.pid = (int)w->pid,
		.running = w->pid > 0 && !w->reaped,
		.stream_path = {w->stream_path[0], w->stream_path[1]},
		.server_socket = w->server_socket,
	};
	return 0;
}
