/* agent_events.c — what the agent records: torchrun's worker status events
 * where torchrun records them, RdzvEvents at the rendezvous steps every
 * backend shares, and elasticd's own lifecycle events. Nothing is built
 * unless events_enabled(). */
#include "agent_internal.h"

#include <signal.h>
#include <string.h>
#include <unistd.h>

#include "config.h"
#include "errfile.h"
#include "events.h"
#include "group.h"
#include "log.h"
#include "numa.h"
#include "ranks.h"
#include "util.h"
#include "wenv.h"
#include "worker.h"

static int64_t
now_ms(void)
{
	return (int64_t)(wall_usec() / USEC_PER_MSEC);
}

/* torch's WorkerSpec.get_entrypoint_name(): the basename of the program. */
static const char *
agent_entry_point(const struct agent *a)
{
	const char *p = a->cfg->no_python ? a->cfg->entrypoint : wenv_get(a->env, "PYTHON_EXEC");
	const char *slash;

	if (!p || !*p) {
		p = "python3";
	}
	slash = strrchr(p, '/');
	return slash ? slash + 1 : p;
}

void
agent_record(struct agent *a, struct elastic_event *ev)
{
	int r = events_record(a->events, ev);

	if (r < 0 && !a->events_warned) {
		a->events_warned = true;
		log_warn("cannot record the event %s: %s (later event errors are not logged)",
			 ev->name, strerror(-r));
	}
	elastic_event_release(ev);
}

/* Start one of elasticd's own events with its common metadata. Returns false
 * (and builds nothing) when events are disabled. */
bool
agent_event_begin(struct agent *a, struct elastic_event *ev, const char *name,
		  enum event_source source)
{
	if (!events_enabled(a->events)) {
		return false;
	}
	elastic_event_init(ev, name, source, now_ms());
	elastic_event_set_string(ev, "run_id", a->cfg->rdzv_id);
	elastic_event_set_string(ev, "hostname", host_fqdn());
	elastic_event_set_string(ev, "role", a->cfg->role);
	return true;
}

/* torchrun's torchelastic.worker.status.<state> (_construct_event): a worker's
 * when w is given, else the agent's; duration_ms < 0 is null. */
void
agent_record_status(struct agent *a, const char *state, const struct worker *w,
		    const char *raw_error, double duration_ms)
{
	bool have_round = a->round.runs != NULL;
	struct events_status st;
	struct elastic_event ev;

	if (!events_enabled(a->events)) {
		return;
	}
	st = (struct events_status){
		.state = state,
		.source = w ? EVENT_SOURCE_WORKER : EVENT_SOURCE_AGENT,
		.timestamp = now_ms(),
		.run_id = a->cfg->rdzv_id,
		.role = a->cfg->role,
		.hostname = host_fqdn(),
		.rdzv_backend = a->cfg->rdzv_backend,
		.entry_point = agent_entry_point(a),
		.group_rank = have_round ? a->round.group_rank : -1,
		.group_world_size = have_round ? a->round.group_world_size : -1,
		.total_run_time = (long long)((now_usec() - a->start_usec) / USEC_PER_SEC),
		.agent_restarts = a->cfg->max_restarts - a->remaining_restarts,
		.raw_error = raw_error,
		.has_duration = duration_ms >= 0,
		.duration_ms = duration_ms,
	};
	if (w) {
		struct ranks_info ri = {0};

		if (have_round) {
			ranks_assign(a->round.runs, a->round.n_runs, (size_t)a->round.group_rank,
				     &ri);
		}
		st.worker = true;
		st.global_rank = w->global_rank;
		st.local_rank = w->local_rank;
		st.role_rank = w->role_rank;
		st.role_world_size = ri.role_world_size;
		st.worker_pid = w->pid;
	}
	elastic_event_init_status(&ev, &st);
	agent_record(a, &ev);
}

/* The agent's own failure (torchrun: agent.run() raised). */
void
agent_record_failed(struct agent *a, const char *raw_error)
{
	agent_record_status(a, "FAILED", NULL, raw_error, -1);
}

/* json.dumps(failure.error_file_data): the worker's error file as torch
 * re-encodes it, or {"message": "<NONE>"} without one. */
static char *
worker_raw_error(const struct worker *w)
{
	struct process_failure f;
	char *s;

	process_failure_init(&f, w->local_rank, w->global_rank, w->pid, w->exitcode,
			     w->error_file && *w->error_file ? w->error_file : NULL, w->exit_wall);
	s = f.data ? errfile_json_dumps(f.data) : xstrdup("{\"message\": \"<NONE>\"}");
	process_failure_release(&f);
	return s;
}

/* The end of torchrun's agent.run(): one event per worker of the last group
 * (_record_worker_events: the group's state for workers that exited 0 or
 * failed, TERMINATED for those stopped because another failed), then the
 * launcher's AGENT SUCCEEDED ("agent.run() succeeded", whatever the workers
 * did). */
void
agent_record_run_result(struct agent *a, enum worker_state state)
{
	if (!events_enabled(a->events)) {
		return;
	}
	for (size_t i = 0; a->group && i < group_size(a->group); i++) {
		const struct worker *w = group_worker(a->group, i);
		char *raw_error = NULL;
		const char *ws;

		if (state == WORKER_STATE_SUCCEEDED) {
			ws = "SUCCEEDED";
		} else if (w->failed) {
			ws = worker_state_name(state);
			raw_error = worker_raw_error(w);
		} else {
			ws = "TERMINATED";
		}
		agent_record_status(a, ws, w, raw_error, -1);
		free(raw_error);
	}
	agent_record_status(a, "SUCCEEDED", NULL, NULL, -1);
}

const char *
agent_node_desc(struct agent *a)
{
	if (!a->node_desc) {
		a->node_desc = xasprintf("%s_%d_0", host_fqdn(), (int)getpid());
	}
	return a->node_desc;
}

/* "rdzv_<backend>.c:<torch method>": the handler the step belongs to. */
char *
agent_rdzv_event_name(const struct agent *a, const char *method)
{
	return xasprintf("rdzv_%s.c:%s", a->rdzv ? a->rdzv->ops->name : a->cfg->rdzv_backend,
			 method);
}

void
agent_record_worker_started(struct agent *a, const struct worker *w)
{
	const struct numa_binding *b = w->binding;
	struct elastic_event ev;

	if (!agent_event_begin(a, &ev, "elasticd.worker.started", EVENT_SOURCE_WORKER)) {
		return;
	}
	elastic_event_set_int(&ev, "attempt", a->restart_count);
	elastic_event_set_int(&ev, "local_rank", w->local_rank);
	elastic_event_set_int(&ev, "global_rank", w->global_rank);
	elastic_event_set_int(&ev, "role_rank", w->role_rank);
	elastic_event_set_int(&ev, "group_rank", a->round.group_rank);
	elastic_event_set_int(&ev, "pid", w->pid);
	/* The binding, as --dry-run prints it (list forms, "0-3,8-11"); null:
	 * no GPU, unbound, memory untouched, no topology. */
	elastic_event_set_string(&ev, "gpu", b ? b->gpu : NULL);
	elastic_event_set_string(&ev, "numa_nodes",
				 b && *b->numa_nodes_list ? b->numa_nodes_list : NULL);
	elastic_event_set_string(&ev, "cpus", b ? b->cpus : NULL);
	elastic_event_set_string(&ev, "mems", b ? b->mems : NULL);
	elastic_event_set_string(&ev, "mode", a->numa ? numa_mode_to_string(a->numa->mode) : NULL);
	elastic_event_set_string(&ev, "error_file",
				 w->error_file && *w->error_file ? w->error_file : NULL);
	agent_record(a, &ev);
}

void
agent_record_worker_exited(struct agent *a, const struct worker *w)
{
	struct elastic_event ev;

	if (!agent_event_begin(a, &ev, "elasticd.worker.exited", EVENT_SOURCE_WORKER)) {
		return;
	}
	elastic_event_set_int(&ev, "attempt", a->restart_count);
	elastic_event_set_int(&ev, "local_rank", w->local_rank);
	elastic_event_set_int(&ev, "global_rank", w->global_rank);
	if (w->pid > 0) {
		elastic_event_set_int(&ev, "pid", w->pid);
	} else {
		elastic_event_set_null(&ev, "pid");
	}
	elastic_event_set_int(&ev, "exitcode", w->exitcode);
	if (w->exitcode >= 0) {
		elastic_event_set_int(&ev, "exit_status", w->exitcode);
		elastic_event_set_null(&ev, "signal");
	} else {
		const char *name = signal_name(-w->exitcode);
		char num[16];

		snprintf(num, sizeof(num), "%d", -w->exitcode);
		elastic_event_set_null(&ev, "exit_status");
		elastic_event_set_string(&ev, "signal", name ? name : num);
	}
	elastic_event_set_bool(&ev, "failed", w->failed);
	elastic_event_set_string(&ev, "exec_error", w->exec_errno ? strerror(w->exec_errno) : NULL);
	if (w->pid > 0 && w->exit_usec >= w->start_usec) {
		elastic_event_set_double(&ev, "duration_ms",
					 (double)(w->exit_usec - w->start_usec) / USEC_PER_MSEC);
	} else {
		elastic_event_set_null(&ev, "duration_ms");
	}
	agent_record(a, &ev);
}

void
agent_record_signal(struct agent *a, int sig, const char *action)
{
	struct elastic_event ev;

	if (!agent_event_begin(a, &ev, "elasticd.signal.received", EVENT_SOURCE_AGENT)) {
		return;
	}
	elastic_event_set_string(&ev, "signal", signal_name(sig));
	elastic_event_set_string(&ev, "action", action);
	agent_record(a, &ev);
}

/* elasticd.group.stopping: sig sent to the workers, SIGKILL after grace_s
 * (--shutdown-timeout, or --term-timeout for a signal). */
void
agent_record_group_stopping(struct agent *a, int sig, const char *why, int grace_s)
{
	struct elastic_event ev;

	if (!agent_event_begin(a, &ev, "elasticd.group.stopping", EVENT_SOURCE_AGENT)) {
		return;
	}
	elastic_event_set_int(&ev, "attempt", a->restart_count);
	elastic_event_set_string(&ev, "signal", signal_name(sig));
	elastic_event_set_string(&ev, "reason", why);
	elastic_event_set_int(&ev, "shutdown_timeout", grace_s);
	agent_record(a, &ev);
}

void
agent_record_restart(struct agent *a, const char *why)
{
	struct elastic_event ev;

	if (!agent_event_begin(a, &ev, "elasticd.agent.restart", EVENT_SOURCE_AGENT)) {
		return;
	}
	/* The attempts so far plus this restart, spent or free (a free re-form
	 * keeps the attempt number of its group). */
	elastic_event_set_int(&ev, "attempt",
			      a->restart_count + (a->decision.spends_restart ? 0 : 1));
	elastic_event_set_int(&ev, "remaining_restarts", a->remaining_restarts);
	elastic_event_set_int(&ev, "max_restarts", a->cfg->max_restarts);
	elastic_event_set_string(&ev, "reason", why);
	elastic_event_set_double(&ev, "backoff_s",
				 (double)a->decision.delay_usec / (double)USEC_PER_SEC);
	agent_record(a, &ev);
}

/* The RdzvEvent of a node that starts a round (torch's next_rendezvous). */
void
agent_record_rdzv_join(struct agent *a)
{
	_cleanup_free_ char *name = NULL;

	if (!events_enabled(a->events)) {
		return;
	}
	name = agent_rdzv_event_name(a, "next_rendezvous");
	events_record_rdzv(a->events, name, NODE_STATE_RUNNING, -1,
			   "The node '%s' attempts to join the next round of the rendezvous "
			   "'%s'.",
			   agent_node_desc(a), a->cfg->rdzv_id);
}

/* The agent leaves: the end of agent.run() in torchrun's terms. */
void
agent_record_exit(struct agent *a)
{
	struct elastic_event ev;

	if (!agent_event_begin(a, &ev, "elasticd.agent.exit", EVENT_SOURCE_AGENT)) {
		return;
	}
	elastic_event_set_int(&ev, "exit_code", a->exit_code);
	elastic_event_set_string(&ev, "signal", a->signo ? signal_name(a->signo) : NULL);
	elastic_event_set_string(&ev, "reason", agent_reason_name(a->reason));
	elastic_event_set_int(&ev, "attempt", a->restart_count);
	elastic_event_set_int(&ev, "agent_restarts", a->cfg->max_restarts - a->remaining_restarts);
	elastic_event_set_int(&ev, "total_run_time",
			      (long long)((now_usec() - a->start_usec) / USEC_PER_SEC));
	elastic_event_set_double(&ev, "duration_ms", ms_since(a->start_usec));
	agent_record(a, &ev);
}

/* elasticd.agent.drain: the notice sent to n_sent worker process groups (0:
 * none ran), the grace, and the phase the drain began in. */
void
agent_record_drain(struct agent *a, enum agent_phase from, int n_sent)
{
	struct elastic_event ev;

	if (!agent_event_begin(a, &ev, "elasticd.agent.drain", EVENT_SOURCE_AGENT)) {
		return;
	}
	elastic_event_set_int(&ev, "attempt", a->restart_count);
	elastic_event_set_string(&ev, "signal", signal_name(a->drain_signo));
	elastic_event_set_int(&ev, "timeout_s", a->drain_timeout_s);
	elastic_event_set_int(&ev, "workers_signalled", n_sent);
	elastic_event_set_string(&ev, "phase", agent_phase_name(from));
	agent_record(a, &ev);
}

/* elasticd.worker.hang: the rule that fired on worker w, and where its
 * stacks are (a->hang_stacks; recorded once they are known, before the
 * stop). */
void
agent_record_hang(struct agent *a, const struct hang_fired *f, const struct worker *w)
{
	struct elastic_event ev;

	if (!agent_event_begin(a, &ev, "elasticd.worker.hang", EVENT_SOURCE_AGENT)) {
		return;
	}
	elastic_event_set_int(&ev, "attempt", a->restart_count);
	elastic_event_set_string(&ev, "rule", hang_rule_name(f->rule));
	elastic_event_set_int(&ev, "local_rank", f->local_rank);
	elastic_event_set_int(&ev, "global_rank", w->global_rank);
	elastic_event_set_int(&ev, "pid", (long long)w->pid);
	elastic_event_set_double(&ev, "idle_s", f->idle_s);
	elastic_event_set_double(&ev, "limit_s", f->limit_s);
	elastic_event_set_string(&ev, "reason", a->hang_cause);
	if (a->hang_stacks) {
		elastic_event_set_string(&ev, "stacks", a->hang_stacks);
	} else {
		elastic_event_set_null(&ev, "stacks");
	}
	agent_record(a, &ev);
}
