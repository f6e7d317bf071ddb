/* ctl_handlers.c — the control plane's handlers: a table of data (name,
 * read-only?, parameters, function), as torch 2.x's WorkerServer handler
 * registry, plus the functions. The transport (ctl.c) has checked the method
 * and the parameters before a function runs. */
#include "ctl_handlers.h"

#include <errno.h>
#include <event2/buffer.h>
#include <event2/event.h>
#include <event2/http.h>
#include <event2/keyvalq_struct.h>
#include <fcntl.h>
#include <jansson.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ctl.h"
#include "ctl_proxy.h"
#include "events.h"
#include "log.h"
#include "util.h"
#include "version.h"

/* The most a `logs` reply reads from the end of a log file. */
#define LOGS_BYTES_MAX (1024u * 1024)

static const char *const stream_names[] = {"stdout", "stderr", NULL};
static const char *const level_names[] = {"debug", "info", "warning", "error", NULL};

/* Local rank's worker, through the agent's ops (ctl.h). */
static int
agent_worker(const struct ctl_call *call, int local_rank, struct ctl_worker_view *ret)
{
	return call->agent->ops->worker(call->agent->agent, local_rank, ret);
}

/* ---- ping ------------------------------------------------------------------- */

static int
handle_ping(struct ctl_call *call)
{
	evbuffer_add(call->body, "pong", 4); /* torch's exact reply */
	return 0;
}

/* ---- status ----------------------------------------------------------------- */

static int
handle_status(struct ctl_call *call)
{
	json_t *j = call->agent->ops->status(call->agent->agent);

	json_object_set_new(j, "control_socket", json_string(ctl_call_socket_path(call)));
	return ctl_call_json(call, j, false);
}

/* The job's membership from this node's copy of the rendezvous state. */
static int
handle_nodes(struct ctl_call *call)
{
	_cleanup_free_ char *err = NULL;
	json_t *j = call->agent->ops->nodes(call->agent->agent, &err);

	if (!j) {
		return ctl_call_error(call, "%s", err);
	}
	return ctl_call_json(call, j, false);
}

/* ---- events ----------------------------------------------------------------- */

enum { EVENTS_SINCE, EVENTS_LIMIT, EVENTS_FOLLOW };

static const struct ctl_param_spec events_params[] = {
	[EVENTS_SINCE] = {.name = "since",
			  .type = CTL_PARAM_INT,
			  .min = 0,
			  .max = INT64_MAX,
			  .help = "only events with a larger sequence number (default 0: all)"},
	[EVENTS_LIMIT] = {.name = "limit",
			  .type = CTL_PARAM_INT,
			  .min = 1,
			  .max = 1000000000,
			  .help = "at most this many events (default: no limit)"},
	[EVENTS_FOLLOW] = {.name = "follow",
			   .type = CTL_PARAM_BOOL,
			   .help = "true: keep streaming new events as they happen"},
};

static int
handle_events(struct ctl_call *call)
{
	const struct ctl_param_value *v = call->args;

	return ctl_call_events(call, v[EVENTS_SINCE].set ? (uint64_t)v[EVENTS_SINCE].i : 0,
			       v[EVENTS_LIMIT].set ? (uint64_t)v[EVENTS_LIMIT].i : 0,
			       v[EVENTS_FOLLOW].set && v[EVENTS_FOLLOW].b);
}

/* ---- logs ------------------------------------------------------------------- */

enum { LOGS_RANK, LOGS_STREAM, LOGS_LINES, LOGS_OFFSET };

static const struct ctl_param_spec logs_params[] = {
	[LOGS_RANK] = {.name = "rank",
		       .type = CTL_PARAM_INT,
		       .min = 0,
		       .max = 65535,
		       .help = "the local rank (default 0)"},
	[LOGS_STREAM] = {.name = "stream",
			 .type = CTL_PARAM_CHOICE,
			 .choices = stream_names,
			 .help = "stdout (default) or stderr"},
	[LOGS_LINES] = {.name = "lines",
			.type = CTL_PARAM_INT,
			.min = 1,
			.max = 100000,
			.help = "how many lines from the end (default 100)"},
	[LOGS_OFFSET] = {.name = "offset",
			 .type = CTL_PARAM_INT,
			 .min = 0,
			 .max = INT64_MAX,
			 .help = "the bytes from this byte offset on instead (at most 1 MiB)"},
};

/* Where the last `lines` lines of buf[0..len) start; whole says buf starts at
 * the beginning of the file (else a partial first line is skipped). */
static size_t
tail_start(const char *buf, size_t len, long long lines, bool whole)
{
	size_t i = len;

	if (i > 0 && buf[i - 1] == '\n') {
		i--; /* the last line's own end */
	}
	while (i > 0) {
		if (buf[i - 1] == '\n' && --lines == 0) {
			return i;
		}
		i--;
	}
	if (whole) {
		return 0;
	}
	/* Not enough lines in what was read: start after the first line end. */
	{
		const char *nl = memchr(buf, '\n', len);

		return nl ? (size_t)(nl - buf) + 1 : len;
	}
}

/* Answer with path's bytes from offset on (at most LOGS_BYTES_MAX), or with
 * its last `lines` lines when offset < 0; the headers X-Elasticd-Log-File
 * (path) and X-Elasticd-Log-Offset (where the bytes answered end: the next
 * offset to ask for; the file's size when offset is past it) go with them. */
static int
logs_reply(struct ctl_call *call, const char *path, long long offset, long long lines)
{
	struct evkeyvalq *h = evhttp_request_get_output_headers(call->req);
	_cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
	_cleanup_free_ char *buf = NULL;
	char end[32];
	struct stat st;
	off_t from;
	size_t want, start = 0;
	ssize_t got;

	if (fd < 0) {
		return ctl_call_error(call, "%s: %s", path, strerror(errno));
	}
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
		return ctl_call_error(call, "%s is not a regular file", path);
	}
	from = offset >= 0 && offset < st.st_size ? (off_t)offset : st.st_size;
	want = (size_t)(offset >= 0 ? st.st_size - from : st.st_size);
	want = want < LOGS_BYTES_MAX ? want : LOGS_BYTES_MAX;
	if (offset < 0) { /* the end */
		from = st.st_size - (off_t)want;
	}
	buf = xmalloc(want + 1);
	got = pread(fd, buf, want, from);
	if (got < 0) {
		return ctl_call_error(call, "%s: %s", path, strerror(errno));
	}
	if (offset < 0) {
		start = tail_start(buf, (size_t)got, lines, from == 0);
	}
	snprintf(end, sizeof(end), "%lld", (long long)from + (long long)got);
	evhttp_add_header(h, "X-Elasticd-Log-File", path);
	evhttp_add_header(h, "X-Elasticd-Log-Offset", end);
	evbuffer_add(call->body, buf + start, (size_t)got - start);
	return 0;
}

static int
handle_logs(struct ctl_call *call)
{
	const struct ctl_param_value *v = call->args;
	int rank = v[LOGS_RANK].set ? (int)v[LOGS_RANK].i : 0;
	int s = v[LOGS_STREAM].set ? (int)v[LOGS_STREAM].i : 0;
	long long lines = v[LOGS_LINES].set ? v[LOGS_LINES].i : 100;
	int n = call->agent->local_world_size;
	struct ctl_worker_view w;

	if (rank >= n) {
		return ctl_call_fail(call, 400,
				     "Invalid value for rank: no local rank %d (local "
				     "ranks 0 to %d)",
				     rank, n - 1);
	}
	if (v[LOGS_OFFSET].set && v[LOGS_LINES].set) {
		return ctl_call_fail(call, 400,
				     "Invalid parameters - offset and lines exclude "
				     "each other");
	}
	if (agent_worker(call, rank, &w) < 0) {
		return ctl_call_error(call, "no worker group was started yet");
	}
	if (!w.stream_path[s]) {
		return ctl_call_error(call,
				      "local_rank %d's %s is not written to a file (start elasticd "
				      "with -r %d or -r 3, or -t, for it)",
				      rank, stream_names[s], s + 1);
	}
	return logs_reply(call, w.stream_path[s], v[LOGS_OFFSET].set ? v[LOGS_OFFSET].i : -1,
			  lines);
}

/* ---- restart, stop, signal ----------------------------------------------------- */

static int
handle_restart(struct ctl_call *call)
{
	_cleanup_free_ char *err = NULL;

	if (call->agent->ops->restart(call->agent->agent, &err) < 0) {
		return ctl_call_error(call, "%s", err);
	}
	evbuffer_add_printf(call->body,
			    "restarting the worker group: stopping it (SIGTERM), then rejoining "
			    "the rendezvous; no restart is spent\n");
	return 0;
}

static int
handle_stop(struct ctl_call *call)
{
	call->agent->ops->stop(call->agent->agent, SIGTERM);
	evbuffer_add_printf(call->body, "stopping as on SIGTERM: the workers get SIGTERM, then "
					"elasticd exits 143\n");
	return 0;
}

enum { DRAIN_SIGNAL, DRAIN_TIMEOUT };

/* Longest drain grace a client may ask for, seconds (a week). */
#define DRAIN_TIMEOUT_MAX (7 * 24 * 3600)

static const struct ctl_param_spec drain_params[] = {
	[DRAIN_SIGNAL] = {.name = "signal",
			  .type = CTL_PARAM_SIGNAL,
			  .help = "the notice (default: the first of --forward-signals)"},
	[DRAIN_TIMEOUT] = {.name = "timeout",
			   .type = CTL_PARAM_INT,
			   .min = 0,
			   .max = DRAIN_TIMEOUT_MAX,
			   .help = "seconds the workers get to exit (default: --term-timeout)"},
};

static int
handle_drain(struct ctl_call *call)
{
	const struct ctl_param_value *v = call->args;
	int sig = v[DRAIN_SIGNAL].set ? (int)v[DRAIN_SIGNAL].i : 0;
	int timeout_s = v[DRAIN_TIMEOUT].set ? (int)v[DRAIN_TIMEOUT].i : -1;
	_cleanup_free_ char *err = NULL;

	if (call->agent->ops->drain(call->agent->agent, sig, timeout_s, &err) < 0) {
		return ctl_call_error(call, "%s", err);
	}
	evbuffer_add_printf(call->body,
			    "draining: the workers get the notice, then this node leaves the "
			    "job; elasticd exits 0 once every worker has exited 0\n");
	return 0;
}

static const struct ctl_param_spec exclude_params[] = {
	{.name = "reason",
	 .type = CTL_PARAM_STRING,
	 .help = "why this node is bad, for the log, the event and the status"},
};

static int
handle_exclude(struct ctl_call *call)
{
	const char *reason = call->args[0].s;
	_cleanup_free_ char *err = NULL;

	if (call->agent->ops->exclude(call->agent->agent, reason ? reason : "", &err) < 0) {
		return ctl_call_error(call, "%s", err);
	}
	evbuffer_add_printf(call->body,
			    "excluding this node: its workers are stopped, it leaves the job "
			    "and elasticd exits 6; the other nodes re-form without it\n");
	return 0;
}

static const struct ctl_param_spec readmit_params[] = {
	{.name = "node",
	 .type = CTL_PARAM_STRING,
	 .help = "the quarantined node's name (default: this node)"},
};

/* The agent's answer to a readmit of another node. */
static void
readmit_reply(void *arg, int status, const char *msg)
{
	struct ctl_call *call = arg;
	struct evbuffer *body = evbuffer_new();

	evbuffer_add_printf(body, "%s\n", msg);
	ctl_call_reply(call, status, "text/plain; charset=utf-8", body);
}

static void
readmit_cancel(struct ctl_call *call)
{
	call->agent->ops->readmit_cancel(call->agent->agent);
}

static int
handle_readmit(struct ctl_call *call)
{
	_cleanup_free_ char *err = NULL;
	int r = call->agent->ops->readmit(call->agent->agent, call->args[0].s, readmit_reply, call,
					  &err);

	if (r == -ENOENT) {
		return ctl_call_fail(call, 404, "%s", err);
	}
	if (r == -EBUSY || r == -EOPNOTSUPP) {
		return ctl_call_fail(call, 409, "%s", err);
	}
	if (r < 0) {
		return ctl_call_error(call, "%s", err);
	}
	if (r > 0) {
		ctl_call_defer(call, readmit_cancel, NULL);
		return 0;
	}
	evbuffer_add_printf(call->body, "readmitted: the quarantine is over; rejoining the "
					"rendezvous\n");
	return 0;
}

enum { SIGNAL_RANK, SIGNAL_SIGNAL };

static const struct ctl_param_spec signal_params[] = {
	[SIGNAL_RANK] = {.name = "rank",
			 .type = CTL_PARAM_INT,
			 .min = 0,
			 .max = 65535,
			 .help = "the local rank (default: every worker)"},
	[SIGNAL_SIGNAL] = {.name = "signal",
			   .type = CTL_PARAM_SIGNAL,
			   .required = true,
			   .help = "the signal: SIGUSR1, USR1 or 10"},
};

static int
handle_signal(struct ctl_call *call)
{
	const struct ctl_param_value *v = call->args;
	int rank = v[SIGNAL_RANK].set ? (int)v[SIGNAL_RANK].i : -1;
	int sig = (int)v[SIGNAL_SIGNAL].i;
	int n = call->agent->local_world_size;
	struct ctl_worker_view w = {0};
	_cleanup_free_ char *err = NULL;

	if (rank >= n) {
		return ctl_call_fail(call, 400,
				     "Invalid value for rank: no local rank %d (local "
				     "ranks 0 to %d)",
				     rank, n - 1);
	}
	if (call->agent->ops->signal(call->agent->agent, rank, sig, &err) < 0) {
		return ctl_call_error(call, "%s", err);
	}
	if (rank < 0) {
		evbuffer_add_printf(call->body, "sent %s to every worker\n", signal_name(sig));
	} else {
		(void)agent_worker(call, rank, &w); /* it was sent: the worker exists */
		evbuffer_add_printf(call->body, "sent %s to local_rank %d (pid %d)\n",
				    signal_name(sig), rank, w.pid);
	}
	return 0;
}

/* ---- loglevel --------------------------------------------------------------------- */

static const struct ctl_param_spec loglevel_params[] = {
	{.name = "level",
	 .type = CTL_PARAM_CHOICE,
	 .choices = level_names,
	 .help = "debug, info, warning or error (default: only show the level)"},
};

static const char *
level_name(enum log_level l)
{
	switch (l) {
	case LOG_LEVEL_DEBUG:
		return "debug";
	case LOG_LEVEL_INFO:
		return "info";
	case LOG_LEVEL_WARNING:
		return "warning";
	case LOG_LEVEL_ERROR:
		return "error";
	}
	return "info";
}

static int
handle_loglevel(struct ctl_call *call)
{
	enum log_level old = log_get_level(), level;

	if (!call->args[0].set) {
		evbuffer_add_printf(call->body, "%s\n", level_name(old));
		return 0;
	}
	(void)log_level_parse(call->args[0].s, &level); /* one of level_names */
	log_set_level(level);
	if (level != old) {
		log_write(level > LOG_LEVEL_INFO ? level : LOG_LEVEL_INFO,
			  "log level %s -> %s (control socket)", level_name(old),
			  level_name(level));
	}
	evbuffer_add_printf(call->body, "%s (was %s)\n", level_name(level), level_name(old));
	return 0;
}

/* ---- metrics ------------------------------------------------------------------------ */

/* A Prometheus label value: \ " and newline escaped. Malloc'd. */
static char *
label(const char *s)
{
	size_t n = 0;
	char *out;

	s = s ? s : "";
	out = xmalloc(strlen(s) * 2 + 1);
	for (; *s; s++) {
		if (*s == '\\' || *s == '"') {
			out[n++] = '\\';
			out[n++] = *s;
		} else if (*s == '\n') {
			out[n++] = '\\';
			out[n++] = 'n';
		} else {
			out[n++] = *s;
		}
	}
	out[n] = '\0';
	return out;
}

static void
metric_head(struct evbuffer *b, const char *name, const char *type, const char *help)
{
	evbuffer_add_printf(b, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

static void
metric_u64(struct evbuffer *b, const char *name, const char *type, const char *help, uint64_t v)
{
	metric_head(b, name, type, help);
	evbuffer_add_printf(b, "%s %llu\n", name, (unsigned long long)v);
}

/* One gauge line per state: name{state="<state>"} <value>. */
static void
metric_states(struct evbuffer *b, const char *name, const char *help,
	      const struct ctl_state_gauge *g)
{
	metric_head(b, name, "gauge", help);
	for (size_t i = 0; i < g->n && i < CTL_STATES_MAX; i++) {
		evbuffer_add_printf(b, "%s{state=\"%s\"} %llu\n", name, g->names[i],
				    (unsigned long long)g->values[i]);
	}
}

/* The agent: who it is, its states, its restarts and rendezvous rounds. */
static void
metrics_agent(struct evbuffer *b, const struct ctl_agent_stats *st)
{
	const struct ctl_agent_counters *as = &st->counters;
	_cleanup_free_ char *version = label(ELASTICD_VERSION);
	_cleanup_free_ char *run_id = label(st->run_id);
	_cleanup_free_ char *role = label(st->role);
	_cleanup_free_ char *backend = label(st->rdzv_backend);
	_cleanup_free_ char *node = label(st->node);

	metric_head(b, "elasticd_info", "gauge",
		    "The agent: version, run id, role, backend, node.");
	evbuffer_add_printf(b,
			    "elasticd_info{version=\"%s\",run_id=\"%s\",role=\"%s\","
			    "rdzv_backend=\"%s\",node=\"%s\"} 1\n",
			    version, run_id, role, backend, node);
	metric_head(b, "elasticd_uptime_seconds", "gauge", "Seconds since the agent started.");
	evbuffer_add_printf(b, "elasticd_uptime_seconds %.3f\n", st->uptime_s);
	metric_states(b, "elasticd_node_state",
		      "The node's NodeState in the rendezvous (1 for the current one).",
		      &st->node_state);
	metric_states(b, "elasticd_worker_group_state",
		      "The worker group's WorkerState (1 for the current one).", &st->group_state);
	metric_states(b, "elasticd_workers", "Workers of the current group by state.",
		      &st->workers);
	metric_u64(b, "elasticd_local_world_size", "gauge", "Workers per attempt on this node.",
		   (uint64_t)st->local_world_size);
	metric_u64(b, "elasticd_rdzv_degraded", "gauge",
		   "1 while the rendezvous store (or etcd) is out of reach with workers running.",
		   st->rdzv_degraded);
	metric_u64(b, "elasticd_rdzv_coordinator", "gauge",
		   "1 while this agent coordinates the rendezvous (c10d: hosts the store or "
		   "holds the coordinator lease).",
		   st->rdzv_coordinator);
	metric_u64(b, "elasticd_console_dropped_bytes_total", "counter",
		   "Teed output bytes a slow console could not take (announced on it).",
		   st->console_dropped_bytes);
	metric_head(b, "elasticd_restarts_total", "counter",
		    "Worker group restarts: after a failure (spends --max-restarts), for a "
		    "membership change, or requested over the control socket.");
	evbuffer_add_printf(b, "elasticd_restarts_total{reason=\"failure\"} %llu\n",
			    (unsigned long long)as->restarts_failure);
	evbuffer_add_printf(b, "elasticd_restarts_total{reason=\"membership\"} %llu\n",
			    (unsigned long long)as->restarts_membership);
	evbuffer_add_printf(b, "elasticd_restarts_total{reason=\"requested\"} %llu\n",
			    (unsigned long long)as->restarts_requested);
	metric_u64(b, "elasticd_remaining_restarts", "gauge", "Failure restarts left.",
		   (uint64_t)st->remaining_restarts);
	metric_head(b, "elasticd_restart_backoff_seconds", "summary",
		    "Waits before a failure restart (--restart-backoff).");
	evbuffer_add_printf(b, "elasticd_restart_backoff_seconds_sum %.6f\n",
			    as->backoff_seconds_sum);
	evbuffer_add_printf(b, "elasticd_restart_backoff_seconds_count %llu\n",
			    (unsigned long long)as->backoffs);
	metric_u64(b, "elasticd_signals_forwarded_total", "counter",
		   "Signals sent on to the workers (--forward-signals).", as->signals_forwarded);
	metric_u64(b, "elasticd_rendezvous_rounds_total", "counter",
		   "Rendezvous rounds this node joined.", as->rdzv_rounds);
	metric_head(b, "elasticd_rendezvous_duration_seconds", "summary",
		    "Time from entering a rendezvous to joining its round.");
	evbuffer_add_printf(b, "elasticd_rendezvous_duration_seconds_sum %.6f\n",
			    as->rdzv_seconds_sum);
	evbuffer_add_printf(b, "elasticd_rendezvous_duration_seconds_count %llu\n",
			    (unsigned long long)as->rdzv_rounds);
	metric_head(b, "elasticd_rendezvous_last_duration_seconds", "gauge",
		    "The last rendezvous round's duration.");
	evbuffer_add_printf(b, "elasticd_rendezvous_last_duration_seconds %.6f\n",
			    as->rdzv_last_seconds);
}

/* The workers' processes: starts, exits, failures by exit code. */
static void
metrics_workers(struct evbuffer *b, const struct ctl_agent_counters *as)
{
	metric_u64(b, "elasticd_worker_starts_total", "counter", "Worker processes started.",
		   as->worker_starts);
	metric_u64(b, "elasticd_worker_exits_total", "counter", "Worker processes reaped.",
		   as->worker_exits);
	metric_u64(b, "elasticd_sentinel_respawns_total", "counter",
		   "Sentinels started again after one died (holding what it held).",
		   as->sentinel_respawns);
	metric_head(b, "elasticd_worker_failures_total", "counter",
		    "Workers that failed, by exit code (negative: killed by that signal).");
	for (int code = CTL_EXITCODE_MIN; code <= CTL_EXITCODE_MAX; code++) {
		uint64_t n = as->worker_failures[code - CTL_EXITCODE_MIN];

		if (n > 0) {
			evbuffer_add_printf(
				b, "elasticd_worker_failures_total{exitcode=\"%d\"} %llu\n", code,
				(unsigned long long)n);
		}
	}
	metric_u64(b, "elasticd_file_timer_expired_total", "counter",
		   "Worker pids whose torch FileTimer (TORCHELASTIC_TIMER_FILE) expired.",
		   as->file_timer_expired);
	metric_head(b, "elasticd_worker_hangs_total", "counter",
		    "Hang rules that fired (--hang-silence, --hang-cadence), by rule.");
	for (size_t r = 0; r < ARRAY_SIZE(as->hangs); r++) {
		static const char *const names[] = {"silence", "cadence", "cadence-start"};

		evbuffer_add_printf(b, "elasticd_worker_hangs_total{rule=\"%s\"} %llu\n", names[r],
				    (unsigned long long)as->hangs[r]);
	}
}

/* The health gate (--health-*). */
static void
metrics_health(struct evbuffer *b, const struct ctl_agent_counters *as)
{
	metric_head(b, "elasticd_health_gates_total", "counter",
		    "Health gates before a rendezvous join (--health-*), by result.");
	evbuffer_add_printf(b, "elasticd_health_gates_total{result=\"passed\"} %llu\n",
			    (unsigned long long)as->health_passed);
	evbuffer_add_printf(b, "elasticd_health_gates_total{result=\"failed\"} %llu\n",
			    (unsigned long long)as->health_failed);
	metric_head(b, "elasticd_health_check_failures_total", "counter",
		    "Health checks that failed, by how (exit: a non-zero status or a signal).");
	evbuffer_add_printf(b, "elasticd_health_check_failures_total{how=\"exit\"} %llu\n",
			    (unsigned long long)as->health_check_fails);
	evbuffer_add_printf(b, "elasticd_health_check_failures_total{how=\"timeout\"} %llu\n",
			    (unsigned long long)as->health_timeouts);
	metric_head(b, "elasticd_gpu_memory_waits_total", "counter",
		    "Waits for the GPUs' memory before a respawn (--gpu-memory-wait), by result.");
	evbuffer_add_printf(b, "elasticd_gpu_memory_waits_total{result=\"released\"} %llu\n",
			    (unsigned long long)as->gpu_waits_released);
	evbuffer_add_printf(b, "elasticd_gpu_memory_waits_total{result=\"timeout\"} %llu\n",
			    (unsigned long long)as->gpu_waits_timeout);
	evbuffer_add_printf(b, "elasticd_gpu_memory_waits_total{result=\"unavailable\"} %llu\n",
			    (unsigned long long)as->gpu_waits_unavailable);
	metric_u64(b, "elasticd_quarantines_total", "counter",
		   "Times this node was quarantined (--quarantine).", as->quarantines);
	metric_u64(b, "elasticd_quarantine_exemptions_total", "counter",
		   "Times --quarantine spared this node: it hosts the c10d store.",
		   as->quarantine_exemptions);
	metric_u64(b, "elasticd_readmissions_total", "counter",
		   "Times it was readmitted (cooldown over, or readmit).", as->readmissions);
	metric_u64(b, "elasticd_readmit_requests_total", "counter",
		   "Other nodes this agent readmitted (readmit node=NAME).", as->readmit_requests);
}

/* The event recorder and the control plane itself. */
static void
metrics_events_ctl(struct evbuffer *b, const struct events_stats *es, const struct ctl_stats *cs)
{
	metric_u64(b, "elasticd_events_recorded_total", "counter", "Events recorded.",
		   es->recorded);
	metric_u64(b, "elasticd_events_dropped_total", "counter",
		   "Events pushed out of the in-memory ring before anyone read them.",
		   es->ring_dropped);
	metric_u64(b, "elasticd_event_write_errors_total", "counter",
		   "Event log writes that failed or were dropped.", es->write_errors);
	metric_u64(b, "elasticd_events_too_big_total", "counter",
		   "Events not recorded for being too large.", es->too_big);
	metric_u64(b, "elasticd_control_requests_total", "counter",
		   "Requests served on the control socket.", cs->requests);
	metric_u64(b, "elasticd_control_connections", "gauge",
		   "Connections open on the control socket.", cs->connections);
	metric_head(b, "elasticd_control_refused_total", "counter",
		    "Control socket connections refused: peer not allowed, or too many.");
	evbuffer_add_printf(b, "elasticd_control_refused_total{reason=\"peer\"} %llu\n",
			    (unsigned long long)cs->refused);
	evbuffer_add_printf(b, "elasticd_control_refused_total{reason=\"limit\"} %llu\n",
			    (unsigned long long)cs->overloaded);
	metric_u64(b, "elasticd_control_accept_pauses_total", "counter",
		   "Times the control socket stopped accepting for lack of file descriptors.",
		   cs->accept_pauses);
	metric_u64(b, "elasticd_control_streams", "gauge", "Events streams (follow=true) open.",
		   cs->streams);
	metric_u64(b, "elasticd_control_streams_dropped_total", "counter",
		   "Events streams cut for falling behind.", cs->streams_dropped);
	metric_u64(b, "elasticd_control_proxied_total", "counter",
		   "Requests forwarded to worker servers.", cs->proxied);
}

static int
handle_metrics(struct ctl_call *call)
{
	struct ctl_agent_stats st;
	struct events_stats es;

	memset(&st, 0, sizeof(st));
	call->agent->ops->stats(call->agent->agent, &st);
	events_get_stats(call->agent->events, &es);
	metrics_agent(call->body, &st);
	metrics_workers(call->body, &st.counters);
	metrics_health(call->body, &st.counters);
	metrics_events_ctl(call->body, &es, ctl_get_stats(call->ctl));
	call->content_type = "text/plain; version=0.0.4; charset=utf-8";
	return 0;
}

/* ---- dump_traceback: fan-out to the workers' own servers ------------------------------ */

struct fanout;

struct fanout_rank {
	struct fanout *f;
	int local_rank;
	int pid;
	struct ctl_proxy *p; /* pending */
	int status;          /* 0: no answer */
	char *text;          /* the answer's body, or why there is none */
};

struct fanout {
	struct ctl_call *call;
	size_t n, pending;
	struct fanout_rank *r;
};

static void
fanout_free(struct fanout *f)
{
	for (size_t i = 0; i < f->n; i++) {
		ctl_proxy_cancel(f->r[i].p);
		free(f->r[i].text);
	}
	free(f->r);
	free(f);
}

/* {"<local_rank>": {"pid": P, "status": 200, "traceback": "..."} or
 * {"pid": P, "error": "..."}}, ranks in order. */
static json_t *
fanout_json(const struct fanout *f)
{
	json_t *o = json_object();

	for (size_t i = 0; i < f->n; i++) {
		const struct fanout_rank *r = &f->r[i];
		json_t *e = json_object();
		char key[16];
		json_t *text = json_stringn(r->text ? r->text : "", r->text ? strlen(r->text) : 0);

		if (!text) {
			text = json_string("(not UTF-8)");
		}
		snprintf(key, sizeof(key), "%d", r->local_rank);
		json_object_set_new(e, "pid", r->pid > 0 ? json_integer(r->pid) : json_null());
		if (r->status == 200) {
			json_object_set_new(e, "status", json_integer(r->status));
			json_object_set_new(e, "traceback", text);
		} else {
			json_object_set_new(e, "status",
					    r->status ? json_integer(r->status) : json_null());
			json_object_set_new(e, "error", text);
		}
		json_object_set_new(o, key, e);
	}
	return o;
}

static void
fanout_done(int err, const char *errmsg, const struct ctl_proxy_response *resp, void *arg)
{
	struct fanout_rank *r = arg;
	struct fanout *f = r->f;
	struct evbuffer *b;
	char *s;

	r->p = NULL;
	if (err < 0) {
		r->text = xstrdup(errmsg ? errmsg : strerror(-err));
	} else {
		r->status = resp->status;
		r->text = xstrndup(resp->body, resp->body_len);
	}
	if (--f->pending > 0) {
		return;
	}
	{
		json_t *j = fanout_json(f);

		s = json_dumps(j, JSON_INDENT(2));
		json_decref(j);
	}
	b = evbuffer_new();
	evbuffer_add(b, s, strlen(s));
	evbuffer_add(b, "\n", 1);
	free(s);
	ctl_call_reply(f->call, 200, "application/json", b);
	fanout_free(f);
}

static void
fanout_cancel(struct ctl_call *call)
{
	fanout_free(call->op);
	call->op = NULL;
}

static int
handle_dump_traceback(struct ctl_call *call)
{
	int n = call->agent->local_world_size;
	struct fanout *f = xcalloc(1, sizeof(*f));
	size_t running = 0;

	f->call = call;
	f->n = (size_t)n;
	f->r = xcalloc(f->n, sizeof(*f->r));
	for (int i = 0; i < n; i++) {
		struct ctl_worker_view w;
		struct fanout_rank *r = &f->r[i];

		r->f = f;
		r->local_rank = i;
		if (agent_worker(call, i, &w) < 0 || !w.running) {
			r->text = xstrdup("not running");
			continue;
		}
		r->pid = w.pid;
		running++;
		if (!w.server_socket) {
			r->text = xstrdup("no worker server (--no-worker-server)");
			continue;
		}
		f->pending++;
	}
	if (running == 0) {
		fanout_free(f);
		return ctl_call_error(call, "no worker is running");
	}
	if (f->pending == 0) {
		int r = ctl_call_json(call, fanout_json(f), false);

		fanout_free(f);
		return r;
	}
	for (int i = 0; i < n; i++) {
		struct ctl_worker_view w;

		if (!f->r[i].text && agent_worker(call, i, &w) == 0) {
			f->r[i].p = ctl_proxy_start(call->base, w.server_socket, "POST",
						    "/handler/dump_traceback", NULL, NULL, 0,
						    CTL_FANOUT_TIMEOUT_S, fanout_done, &f->r[i]);
		}
	}
	ctl_call_defer(call, fanout_cancel, f);
	return 0;
}

/* ---- the table ------------------------------------------------------------------------- */

const struct ctl_handler ctl_handlers[] = {
	{"ping", true, false, NULL, 0, handle_ping, "answer \"pong\""},
	{"status", true, true, NULL, 0, handle_status,
	 "the agent, its round and its workers, as JSON"},
	{"events", true, false, events_params, ARRAY_SIZE(events_params), handle_events,
	 "recorded events as JSON lines; follow=true streams new ones"},
	{"logs", true, false, logs_params, ARRAY_SIZE(logs_params), handle_logs,
	 "the end of a worker's stdout.log or stderr.log"},
	{"nodes", true, true, NULL, 0, handle_nodes,
	 "the job's membership as this node's rendezvous copy holds it, as JSON"},
	{"metrics", true, true, NULL, 0, handle_metrics,
	 "counters and states, Prometheus text format"},
	{"dump_traceback", true, false, NULL, 0, handle_dump_traceback,
	 "every worker's Python stacks, from the workers' own servers"},
	{"restart", false, false, NULL, 0, handle_restart,
	 "re-form the worker group now, without spending a restart"},
	{"drain", false, false, drain_params, ARRAY_SIZE(drain_params), handle_drain,
	 "send the workers the notice, wait for them, leave the job for good"},
	{"exclude", false, false, exclude_params, ARRAY_SIZE(exclude_params), handle_exclude,
	 "this node is bad: stop the workers, leave the job, exit 6"},
	{"readmit", false, false, readmit_params, ARRAY_SIZE(readmit_params), handle_readmit,
	 "end this node's quarantine now and rejoin"},
	{"stop", false, false, NULL, 0, handle_stop, "stop the workers and exit, as on SIGTERM"},
	{"signal", false, false, signal_params, ARRAY_SIZE(signal_params), handle_signal,
	 "send a signal to a worker's process group (or every worker's)"},
	{"loglevel", false, false, loglevel_params, ARRAY_SIZE(loglevel_params), handle_loglevel,
	 "show or set elasticd's log level"},
};

const size_t ctl_n_handlers = ARRAY_SIZE(ctl_handlers);

const struct ctl_handler *
ctl_handler_find(const char *name)
{
	for (size_t i = 0; i < ctl_n_handlers; i++) {
		if (strcmp(ctl_handlers[i].name, name) == 0) {
			return &ctl_handlers[i];
		}
	}
	return NULL;
}
