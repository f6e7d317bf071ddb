#include "group.h"

#include <errno.h>
#include <fcntl.h>
#include <event2/event.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>

#include "config.h"
#include "fdreserve.h"
#include "guard.h"
#include "linefilter.h"
#include "log.h"
#include "numa.h"
#include "output.h"
#include "ranks.h"
#include "rdzv.h"
#include "sentinel.h"
#include "spawn.h"
#include "util.h"
#include "wenv.h"
#include "worker.h"

/* After SIGKILL, how long pipes held open by an escaped process (one that left
 * the worker's process group) may delay the end of the stop. */
#define DRAIN_GRACE_USEC (2 * USEC_PER_SEC)

enum group_phase {
	GROUP_RUNNING,
	GROUP_STOPPING,
	GROUP_KILLING,
	GROUP_DONE,
};

struct group {
	struct event_base *base;
	const struct config *cfg;
	struct group_callbacks cb;
	struct sentinel *sentinel;
	struct guard *guard;             /* holds every process the workers start */
	struct console *const *consoles; /* stdout, stderr (borrowed) */
	pid_t *escaped;                  /* escaped processes already told to stop (logged once) */
	size_t n_escaped;

	size_t n;
	struct worker **workers;
	char ***envs;       /* per local rank */
	char ***argvs;      /* per local rank */
	char hostname[256]; /* ${hostname}: gethostname(), as Python's socket.gethostname() */
	char *signals;      /* TORCHELASTIC_SIGNALS_TO_HANDLE */
	/* --duplicate-stdout/stderr-filters: needles and filtered_*.log. */
	char **filters[2];
	int filtered_fd[2];
	const char *path; /* PATH for exec lookups, borrowed from base env */
	const sigset_t *sigmask;
	const int *reset_signals;
	size_t n_reset_signals;
	const struct numa_plan *numa; /* may be NULL */

	enum group_phase phase;
	enum worker_state state;
	int stop_signal;
	bool stop_requested; /* group_stop from outside, not an outcome */
	struct event *kill_timer;
	struct event *drain_timer;
	/* Ancestry mode (guard.h): every GUARD_SCAN_MS, descendants and
	 * process groups of escaped processes are told to the sentinel, so
	 * that they die with the agent too. */
	struct event *escape_timer;
	uint64_t scan_fast_until; /* scan every GUARD_SCAN_FAST_MS until then */
	pid_t *watched;
	size_t n_watched;
	/* Out of descriptors while starting: the first rank not started yet,
	 * when the shortage began, the retry timer and its log lines. */
	size_t next_rank;
	uint64_t short_since;
	struct event *spawn_timer;
	struct ratelimit spawn_tell;
};

static const char *
group_phase_name(enum group_phase p)
{
	switch (p) {
	case GROUP_RUNNING:
		return "RUNNING";
	case GROUP_STOPPING:
		return "STOPPING";
	case GROUP_KILLING:
		return "KILLING";
	case GROUP_DONE:
		return "DONE";
	}
	return "?";
}

/* The one place the WorkerState of the group changes. */
static void
group_set_state(struct group *g, enum worker_state state)
{
	if (g->state != state) {
		log_debug("[%s] worker group: %s -> %s", g->cfg->role, worker_state_name(g->state),
			  worker_state_name(state));
	}
	g->state = state;
}

/* The one place the group's stop phase changes. */
static void
group_set_phase(struct group *g, enum group_phase phase)
{
	if (g->phase != phase) {
		log_debug("[%s] worker group phase: %s -> %s", g->cfg->role,
			  group_phase_name(g->phase), group_phase_name(phase));
	}
	g->phase = phase;
}

/* A worker that cannot be started for lack of file descriptors that others
 * hold for now (ENFILE: the system's table is full; EMFILE while peers press
 * on the descriptor reserve, fdreserve.h) is tried again after
 * SPAWN_RETRY_MS, for up to SPAWN_RETRY_MAX_S; then the group fails as for
 * any other start failure. Never a restart burnt per millisecond. EMFILE
 * with no peers pressing is the job's own shortage: it fails at once. */
#define SPAWN_RETRY_MS 500
#define SPAWN_RETRY_MAX_S 300
/* At most one "still cannot start" line per this many seconds. */
#define SPAWN_TELL_S 10

const char *
worker_state_name(enum worker_state s)
{
	switch (s) {
	case WORKER_STATE_UNKNOWN:
		return "UNKNOWN";
	case WORKER_STATE_INIT:
		return "INIT";
	case WORKER_STATE_HEALTHY:
		return "HEALTHY";
	case WORKER_STATE_UNHEALTHY:
		return "UNHEALTHY";
	case WORKER_STATE_STOPPED:
		return "STOPPED";
	case WORKER_STATE_SUCCEEDED:
		return "SUCCEEDED";
	case WORKER_STATE_FAILED:
		return "FAILED";
	}
	return "UNKNOWN";
}

static enum worker_stream_mode
stream_mode(const struct config *cfg, int local_rank, enum std_mask bit)
{
	bool redirect = std_map_get(&cfg->redirects, local_rank) & bit;
	bool tee = std_map_get(&cfg->tee, local_rank) & bit;
	bool shown = config_rank_in_filter(cfg, local_rank);

	if (tee && shown) {
		return WORKER_STREAM_TEE;
	}
	if (redirect || tee) {
		return WORKER_STREAM_FILE;
	}
	return shown ? WORKER_STREAM_INHERIT : WORKER_STREAM_DEVNULL;
}

/* The console prefix of a teed worker's lines (worker_echo.prefix): the
 * --log-line-prefix-template with torch's names replaced, once the pid is
 * known. An empty template means the default, as torch. */
static char *
worker_prefix_cb(const struct worker *w, void *arg)
{
	const struct group *g = arg;
	const char *tmpl = g->cfg->log_line_prefix_template;
	static const char *const keys[] = {"role_name", "local_rank", "rank", "hostname", "pid"};
	char lr[16], gr[16], pid[16];
	const char *values[] = {g->cfg->role, lr, gr, g->hostname, pid};

	snprintf(lr, sizeof(lr), "%d", w->local_rank);
	snprintf(gr, sizeof(gr), "%d", w->global_rank);
	snprintf(pid, sizeof(pid), "%d", (int)w->pid);
	if (!tmpl || !*tmpl) {
		tmpl = "[${role_name}${local_rank}]:";
	}
	return wenv_template_substitute(tmpl, keys, values, ARRAY_SIZE(keys));
}

/* The log files of local rank w->local_rank under attempt_dir (NULL for
 * --log-dir /dev/null: no files, no error file, nothing echoed). Returns 0, or
 * -errno with *reterr when the rank's directory cannot be made. */
static int
worker_files(struct worker *w, const struct config *cfg, const char *attempt_dir, char **reterr)
{
	_cleanup_free_ char *dir = NULL;
	int lr = w->local_rank, r;

	if (!attempt_dir) {
		w->error_file = xstrdup("");
		for (int s = 0; s < 2; s++) {
			enum worker_stream_mode m =
				stream_mode(cfg, lr, s == 0 ? STD_OUT : STD_ERR);

			w->stream_mode[s] = m == WORKER_STREAM_INHERIT ? m : WORKER_STREAM_DEVNULL;
		}
		return 0;
	}
	dir = xasprintf("%s/%d", attempt_dir, lr);
	r = mkdir_p(dir, 0755);
	if (r < 0) {
		*reterr = xasprintf("cannot create log directory %s: %s", dir, strerror(-r));
		return r;
	}
	w->error_file = xasprintf("%s/error.json", dir);
	for (int s = 0; s < 2; s++) {
		w->stream_mode[s] = stream_mode(cfg, lr, s == 0 ? STD_OUT : STD_ERR);
		if (w->stream_mode[s] == WORKER_STREAM_FILE ||
		    w->stream_mode[s] == WORKER_STREAM_TEE) {
			w->stream_path[s] =
				xasprintf("%s/%s", dir, s == 0 ? "stdout.log" : "stderr.log");
		}
	}
	return 0;
}

/* Local rank lr: its worker, files, environment, argv and line prefix. */
static int
group_prepare(struct group *g, const struct group_spec *spec, const struct ranks_info *ri, int lr,
	      char **reterr)
{
	const struct config *cfg = spec->cfg;
	const struct rdzv_result *rr = spec->rdzv;
	struct worker *w = worker_new(lr, ri->base_global_rank + lr, ri->base_role_rank + lr);
	struct wenv_worker we = {
		.local_rank = lr,
		.rank = w->global_rank,
		.group_rank = rr->group_rank,
		.role_rank = w->role_rank,
		.role_name = cfg->role,
		.local_world_size = spec->local_world_size,
		.world_size = ri->global_world_size,
		.group_world_size = rr->group_world_size,
		.role_world_size = ri->role_world_size,
		.master_addr = rr->master_addr,
		.master_port = rr->master_port,
		.restart_count = spec->restart_count,
		.round = rr->round,
		.max_restarts = cfg->max_restarts,
		.run_id = cfg->rdzv_id,
		.use_agent_store = rr->use_agent_store,
		.set_omp_num_threads = spec->set_omp_num_threads,
		.virtual_local_rank = cfg->virtual_local_rank,
		/* cuda:<local_rank> must be the GPU the plan names. */
		.cuda_device_order = g->numa && numa_plan_names_gpus(g->numa),
		.signals_to_handle = g->signals,
		.timer_file = spec->timer_file,
		.control_socket = spec->control_socket,
		/* Hang rules on: a hung rank's SIGABRT prints its stacks. */
		.python_faulthandler =
			cfg->hang_silence > 0 || (cfg->hang_cadence && *cfg->hang_cadence),
	};
	int r;

	g->workers[lr] = w;
	if (g->numa && (size_t)lr < g->numa->n) {
		w->binding = &g->numa->ranks[lr];
	}
	r = worker_files(w, cfg, spec->attempt_dir, reterr);
	if (r < 0) {
		return r;
	}
	we.error_file = w->error_file;
	if (spec->worker_server_dir) {
		/* torch's WorkerServer refuses a path that exists: the last
		 * attempt's socket goes. */
		w->server_socket = xasprintf("%s/rank%d.sock", spec->worker_server_dir, lr);
		if (unlink(w->server_socket) < 0 && errno != ENOENT) {
			log_warn("cannot remove %s: %s", w->server_socket, strerror(errno));
		}
		we.worker_server_socket = w->server_socket;
	}
	r = wenv_build_env(spec->base_env, &we, &g->envs[lr], reterr);
	if (r < 0) {
		return r;
	}
	g->argvs[lr] = wenv_build_argv(cfg, spec->base_env, lr);
	return 0;
}

/* --signals-to-handle as torch's agent exports it: "SIGTERM,SIGINT,...", in
 * the order given ("" for none). */
static char *
signals_string(const struct config *cfg)
{
	char *s = xstrdup("");

	for (size_t i = 0; i < cfg->n_signals; i++) {
		char *t = xasprintf("%s%s%s", s, i ? "," : "", signal_name(cfg->signals[i]));

		free(s);
		s = t;
	}
	return s;
}

/* filtered_stdout.log / filtered_stderr.log in the attempt directory, shared
 * by every teed rank, for --duplicate-*-filters (torch's DefaultLogsSpecs
 * puts them there; none for --log-dir /dev/null). A re-formed group appends,
 * as to the ranks' logs. Returns 0 or -errno with *reterr. */
static int
group_open_filtered(struct group *g, const char *attempt_dir, char **reterr)
{
	const char *values[2] = {g->cfg->duplicate_stdout_filters,
				 g->cfg->duplicate_stderr_filters};
	static const char *const names[2] = {"filtered_stdout.log", "filtered_stderr.log"};
	int r;

	for (int s = 0; s < 2; s++) {
		_cleanup_free_ char *path = NULL;

		if (!values[s] || !attempt_dir) {
			continue;
		}
		path = xasprintf("%s/%s", attempt_dir, names[s]);
		r = mkdir_p(attempt_dir, 0755);
		if (r < 0) {
			*reterr = xasprintf("cannot create log directory %s: %s", attempt_dir,
					    strerror(-r));
			return r;
		}
		g->filtered_fd[s] =
			open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC | O_NOCTTY, 0644);
		if (g->filtered_fd[s] < 0) {
			r = -errno;
			*reterr = xasprintf("cannot open %s: %s", path, strerror(-r));
			return r;
		}
		g->filters[s] = linefilter_parse(values[s]);
	}
	return 0;
}

struct group *
group_new(struct event_base *base, const struct group_spec *spec, const struct group_callbacks *cb,
	  char **reterr)
{
	const struct rdzv_result *rr = spec->rdzv;
	struct group *g = xcalloc(1, sizeof(*g));
	struct ranks_info ri;

	g->base = base;
	g->cfg = spec->cfg;
	g->cb = *cb;
	g->sentinel = spec->sentinel;
	g->guard = guard_new(spec->sentinel, spec->cgroup, spec->cgroup_name, reterr);
	if (!g->guard) {
		free(g);
		return NULL;
	}
	g->consoles = spec->consoles;
	g->sigmask = spec->sigmask;
	g->reset_signals = spec->reset_signals;
	g->n_reset_signals = spec->n_reset_signals;
	g->numa = spec->numa;
	g->path = wenv_get(spec->base_env, "PATH");
	g->n = (size_t)spec->local_world_size;
	g->workers = xcalloc(g->n, sizeof(*g->workers));
	g->envs = xcalloc(g->n, sizeof(*g->envs));
	g->argvs = xcalloc(g->n, sizeof(*g->argvs));
	if (gethostname(g->hostname, sizeof(g->hostname) - 1) < 0) {
		snprintf(g->hostname, sizeof(g->hostname), "localhost");
	}
	group_set_state(g, WORKER_STATE_INIT);

	g->signals = signals_string(spec->cfg);
	g->filtered_fd[0] = g->filtered_fd[1] = -1;
	if (group_open_filtered(g, spec->attempt_dir, reterr) < 0) {
		group_free(g);
		return NULL;
	}
	ranks_assign(rr->runs, rr->n_runs, (size_t)rr->group_rank, &ri);
	for (size_t i = 0; i < g->n; i++) {
		if (group_prepare(g, spec, &ri, (int)i, reterr) < 0) {
			group_free(g);
			return NULL;
		}
	}
	return g;
}

static bool
is_worker_pid(const struct group *g, pid_t pid)
{
	for (size_t i = 0; i < g->n; i++) {
		if (g->workers[i]->pid == pid) {
			return true;
		}
	}
	return false;
}

/* Processes that may have left their worker's process group: in cgroup
 * mode every member of the group's cgroup, else the agent's children (the
 * agent is a child subreaper: they were re-parented to it). Workers and the
 * sentinel excluded. Returns the count and a malloc'd array, or -errno. */
static int
group_strays(const struct group *g, pid_t **ret_pids)
{
	pid_t *pids = NULL;
	int n = guard_has_cgroup(g->guard) ? guard_members(g->guard, &pids) : proc_children(&pids);
	int kept = 0;

	for (int i = 0; i < n; i++) {
		/* Never 0 or 1 (kill(0) is the agent's own process group). */
		if (pids[i] > 1 && pids[i] != sentinel_pid(g->sentinel) &&
		    !is_worker_pid(g, pids[i])) {
			pids[kept++] = pids[i];
		}
	}
	*ret_pids = pids;
	return n < 0 ? n : kept;
}

/* Processes that left their worker's process group (setsid; group_strays).
 * With sig != 0, send it to each one's process group (or the process itself
 * when it shares the agent's group), logging each process once; one still in
 * its worker's group is counted only (that group's signal reaches it).
 * Returns how many there are. */
static int
group_escaped(struct group *g, int sig)
{
	pid_t *pids = NULL, self_pgrp = getpgrp();
	int n = group_strays(g, &pids), count = 0;

	for (int i = 0; i < n; i++) {
		pid_t pid = pids[i], pgid;
		bool seen = false;

		count++;
		pgid = getpgid(pid);
		if (!sig || is_worker_pid(g, pgid)) {
			/* Still in its worker's group: the group's signal
			 * reaches it. */
			continue;
		}
		for (size_t k = 0; k < g->n_escaped; k++) {
			seen |= g->escaped[k] == pid;
		}
		if (!seen) {
			log_warn("Sending process %d (escaped its worker's process group) closing "
				 "signal %s",
				 (int)pid, signal_name(sig));
			g->escaped = xrealloc(g->escaped, (g->n_escaped + 1) * sizeof(pid_t));
			g->escaped[g->n_escaped++] = pid;
		}
		if (pgid > 1 && pgid != self_pgrp) {
			kill(-pgid, sig);
		} else {
			kill(pid, sig);
		}
	}
	free(pids);
	return count;
}

/* Ancestry mode: hand the sentinel every process below the live workers
 * and the agent's re-parented children (guard_scan), and the process groups
 * of the latter. */
static void
escape_timer_cb(evutil_socket_t fd, short what, void *arg)
{
	struct group *g = arg;
	struct timeval tv = {0, GUARD_SCAN_MS * 1000};
	pid_t *pids = NULL, self_pgrp = getpgrp();
	int n = group_strays(g, &pids);
	uint64_t now;

	if (n < 0) {
		n = 0;
	}
	for (int i = 0; i < n; i++) {
		pid_t pgid = getpgid(pids[i]);
		bool known = false;

		for (size_t k = 0; k < g->n_watched; k++) {
			known |= g->watched[k] == pgid;
		}
		if (known || pgid <= 1 || pgid == self_pgrp || is_worker_pid(g, pgid)) {
			continue;
		}
		sentinel_watch(g->sentinel, pgid);
		g->watched = xrealloc(g->watched, (g->n_watched + 1) * sizeof(pid_t));
		g->watched[g->n_watched++] = pgid;
	}
	for (size_t i = 0; i < g->n; i++) {
		if (g->workers[i]->pid > 0 && !g->workers[i]->reaped) {
			pids = xrealloc(pids, (size_t)(n + 1) * sizeof(*pids));
			pids[n++] = g->workers[i]->pid;
		}
	}
	now = now_usec();
	if (guard_scan(g->guard, pids, (size_t)n) > 0) {
		g->scan_fast_until = now + GUARD_FAST_S * USEC_PER_SEC;
	}
	free(pids);
	if (now < g->scan_fast_until) {
		tv.tv_usec = GUARD_SCAN_FAST_MS * 1000;
	}
	if (g->phase == GROUP_RUNNING) {
		evtimer_add(g->escape_timer, &tv);
	}
}

static bool
group_all_gone(struct group *g)
{
	for (size_t i = 0; i < g->n; i++) {
		struct worker *w = g->workers[i];

		if (w->pid == 0) {
			continue;
		}
		if (!w->reaped || !worker_streams_done(w)) {
			return false;
		}
		/* Once stopping, members left behind in a process group count too. */
		if (g->phase != GROUP_RUNNING && worker_group_alive(w)) {
			return false;
		}
	}
	/* And processes that escaped their group, once re-parented to us. */
	if (g->phase == GROUP_STOPPING || g->phase == GROUP_KILLING) {
		return group_escaped(g, g->phase == GROUP_KILLING ? SIGKILL : g->stop_signal) == 0;
	}
	return true;
}

static void
group_finish(struct group *g)
{
	group_set_phase(g, GROUP_DONE);
	if (g->kill_timer) {
		evtimer_del(g->kill_timer);
	}
	if (g->drain_timer) {
		evtimer_del(g->drain_timer);
	}
	if (g->escape_timer) {
		evtimer_del(g->escape_timer);
	}
	for (size_t i = 0; i < g->n; i++) {
		sentinel_forget(g->sentinel, g->workers[i]->pid);
	}
	for (size_t i = 0; i < g->n_watched; i++) {
		sentinel_forget(g->sentinel, g->watched[i]);
	}
	g->n_watched = 0;
	guard_forget_all(g->guard);
	if (g->cb.stopped) {
		g->cb.stopped(g, g->cb.arg);
	}
}

static void
group_check(struct group *g)
{
	if (g->phase == GROUP_RUNNING || g->phase == GROUP_DONE) {
		return;
	}
	if (group_all_gone(g)) {
		group_finish(g);
	}
}

static void
drain_timer_cb(evutil_socket_t fd, short what, void *arg)
{
	struct group *g = arg;

	/* Pipes still open after SIGKILL: a process escaped its process group
	 * (setsid) and holds them. Take what is there and stop waiting. */
	for (size_t i = 0; i < g->n; i++) {
		if (!worker_streams_done(g->workers[i])) {
			log_warn("[%s] output of local_rank %zu still open after SIGKILL "
				 "(a process left its process group); closing it",
				 g->cfg->role, i);
			worker_streams_drain(g->workers[i]);
		}
	}
	group_check(g);
}

static void
kill_timer_cb(evutil_socket_t fd, short what, void *arg)
{
	struct group *g = arg;
	struct timeval tv = {DRAIN_GRACE_USEC / USEC_PER_SEC, 0};
	int r;

	group_set_phase(g, GROUP_KILLING);
	for (size_t i = 0; i < g->n; i++) {
		struct worker *w = g->workers[i];

		if (worker_group_alive(w)) {
			log_warn("Unable to shutdown process %d via %s, forcefully exiting via "
				 "SIGKILL",
				 (int)w->pid, signal_name(g->stop_signal));
			worker_signal(w, SIGKILL);
		}
	}
	group_escaped(g, SIGKILL);
	r = guard_kill(g->guard);
	if (r < 0) {
		log_warn("[%s] cannot kill the worker group's cgroup: %s", g->cfg->role,
			 strerror(-r));
	}
	if (!g->drain_timer) {
		g->drain_timer = evtimer_new(g->base, drain_timer_cb, g);
	}
	evtimer_add(g->drain_timer, &tv);
}

/* Send each populated process group of g whose worker has (own) or has not
 * (!own) a stop signal of its own that one, or sig. */
static void
signal_workers(struct group *g, int sig, bool own)
{
	for (size_t i = 0; i < g->n; i++) {
		struct worker *w = g->workers[i];
		int s = w->stop_signal && sig != SIGKILL ? w->stop_signal : sig;

		if (!worker_group_alive(w) || (w->stop_signal != 0) != own) {
			continue;
		}
		if (!w->reaped) {
			log_warn("Sending process %d closing signal %s", (int)w->pid,
				 signal_name(s));
		} else {
			log_warn("Sending process group %d (leader exited) closing signal %s",
				 (int)w->pid, signal_name(s));
		}
		worker_signal(w, s);
	}
}

/* Send sig to every populated process group and arm the SIGKILL timer
 * (timeout_s seconds; one armed already stays as it is). Workers with a stop
 * signal of their own (a hung rank's SIGABRT) get it first: the others' exits
 * must not keep the CPUs from it. */
static void
group_begin_stop(struct group *g, int sig, int timeout_s)
{
	struct timeval tv = {timeout_s, 0};

	g->stop_signal = sig;
	if (g->phase == GROUP_RUNNING) {
		group_set_phase(g, GROUP_STOPPING);
	}
	if (g->spawn_timer) {
		/* Ranks not started yet stay so (pid 0: nothing to stop). */
		evtimer_del(g->spawn_timer);
	}
	signal_workers(g, sig, true);
	signal_workers(g, sig, false);
	group_escaped(g, sig);
	if (g->phase == GROUP_STOPPING) {
		if (!g->kill_timer) {
			g->kill_timer = evtimer_new(g->base, kill_timer_cb, g);
		}
		if (!evtimer_pending(g->kill_timer, NULL)) {
			evtimer_add(g->kill_timer, &tv);
		}
	}
	group_check(g);
}

static void
tee_eof_cb(struct tee *t, void *arg)
{
	group_check(arg);
}

static void
group_decide(struct group *g, enum worker_state state)
{
	group_set_state(g, state);
	/* React first (torchrun also signals the survivors before it logs). */
	if (g->phase == GROUP_RUNNING) {
		group_begin_stop(g, SIGTERM, g->cfg->shutdown_timeout);
	}
	if (g->cb.outcome) {
		g->cb.outcome(g, state, g->cb.arg);
	}
}

/* Whether start error r (-errno) may pass: descriptors are short for now. */
static bool
spawn_may_retry(struct group *g, int r)
{
	uint64_t now = now_usec();

	/* EMFILE with no peers at the reserve is the job's own (RLIMIT_NOFILE
	 * too low for its workers): it would not pass. */
	if (r != -ENFILE && !(r == -EMFILE && fdreserve_peers_pressing(now))) {
		return false;
	}
	if (!g->short_since) {
		g->short_since = now;
	}
	return now - g->short_since < SPAWN_RETRY_MAX_S * USEC_PER_SEC;
}

/* Local rank i could not be started with -errno r: a failed worker, and the
 * group's outcome is FAILED. */
static void
spawn_failed(struct group *g, size_t i, int r)
{
	struct worker *w = g->workers[i];

	log_error("[%s] cannot start local_rank %zu (%s): %s", g->cfg->role, i, g->argvs[i][0],
		  strerror(-r));
	/* Count it as a worker that failed to exec. */
	w->reaped = true;
	w->failed = true;
	w->exitcode = SPAWN_EXIT_CANNOT_EXEC;
	w->exec_errno = -r;
	w->exit_wall = time(NULL);
	group_set_state(g, WORKER_STATE_HEALTHY);
	group_decide(g, WORKER_STATE_FAILED);
}

/* Descriptors are short: try local rank i again after a pause. */
static void
spawn_defer(struct group *g, size_t i, int r)
{
	struct timeval tv = {0, SPAWN_RETRY_MS * 1000};
	uint64_t untold;

	if (ratelimit_pass(&g->spawn_tell, now_usec(), &untold)) {
		log_warn("[%s] cannot start local_rank %zu (%s) yet: %s; trying again every %d ms "
			 "for up to %d s",
			 g->cfg->role, i, g->argvs[i][0], strerror(-r), SPAWN_RETRY_MS,
			 SPAWN_RETRY_MAX_S);
	}
	g->next_rank = i;
	evtimer_add(g->spawn_timer, &tv);
}

/* Start local ranks next_rank.. in order. Returns 0 (all started, or the rest
 * deferred) or -errno of a start failure that failed the group. */
static int
group_spawn_rest(struct group *g)
{
	for (size_t i = g->next_rank; i < g->n; i++) {
		struct worker *w = g->workers[i];
		struct spawn_args a = {
			.argv = g->argvs[i],
			.envp = g->envs[i],
			.path = g->path,
			.stdin_fd = -1,
			.sigmask = g->sigmask,
			.reset_signals = g->reset_signals,
			.n_reset_signals = g->n_reset_signals,
			.binding = g->numa && i < g->numa->n ? &g->numa->ranks[i] : NULL,
			.cgroup_fd = guard_procs_fd(g->guard),
		};
		struct worker_echo echo = {
			.consoles = g->consoles,
			.prefix = worker_prefix_cb,
			.filtered_fd = {g->filtered_fd[0], g->filtered_fd[1]},
			.filters = {g->filters[0], g->filters[1]},
			.eof_cb = tee_eof_cb,
			.arg = g,
		};
		int r = worker_start(w, g->base, &a, &echo);

		if (r < 0 && spawn_may_retry(g, r)) {
			spawn_defer(g, i, r);
			return 0;
		}
		if (r < 0) {
			spawn_failed(g, i, r);
			return r;
		}
		sentinel_watch(g->sentinel, w->pid);
	}
	if (g->short_since) {
		log_info("[%s] every worker started, %.1f s late for lack of file descriptors",
			 g->cfg->role, (double)(now_usec() - g->short_since) / USEC_PER_SEC);
	}
	g->next_rank = g->n;
	g->short_since = 0;
	return 0;
}

static void
spawn_timer_cb(evutil_socket_t fd, short what, void *arg)
{
	struct group *g = arg;

	if (g->phase == GROUP_RUNNING) {
		(void)group_spawn_rest(g);
	}
}

int
group_start(struct group *g)
{
	int r;

	g->spawn_timer = evtimer_new(g->base, spawn_timer_cb, g);
	g->spawn_tell.interval_usec = SPAWN_TELL_S * USEC_PER_SEC;
	r = group_spawn_rest(g);
	if (r < 0) {
		return r;
	}
	group_set_state(g, WORKER_STATE_HEALTHY);
	if (g->sentinel && !guard_has_cgroup(g->guard)) {
		/* Starting workers start processes: scan fast from the first. */
		struct timeval tv = {0, GUARD_SCAN_FAST_MS * 1000};

		g->scan_fast_until = now_usec() + GUARD_FAST_S * USEC_PER_SEC;
		g->escape_timer = evtimer_new(g->base, escape_timer_cb, g);
		evtimer_add(g->escape_timer, &tv);
	}
	return 0;
}

bool
group_handle_exit(struct group *g, pid_t pid, int wstatus)
{
	for (size_t i = 0; i < g->n; i++) {
		struct worker *w = g->workers[i];

		if (w->pid != pid || w->reaped) {
			continue;
		}
		worker_set_exit(w, wstatus);
		if (w->exec_errno) {
			log_error("[%s] local_rank %zu: cannot execute '%s': %s", g->cfg->role, i,
				  g->argvs[i][0], strerror(w->exec_errno));
		}
		if (g->phase == GROUP_RUNNING && w->exitcode != 0) {
			w->failed = true;
		}
		return true;
	}
	return false;
}

void
group_after_reap(struct group *g)
{
	if (g->phase == GROUP_RUNNING) {
		bool any_failed = false, all_ok = true;

		for (size_t i = 0; i < g->n; i++) {
			struct worker *w = g->workers[i];

			any_failed |= w->failed;
			all_ok &= w->reaped && w->exitcode == 0;
		}
		if (any_failed) {
			group_decide(g, WORKER_STATE_FAILED);
		} else if (all_ok) {
			group_decide(g, WORKER_STATE_SUCCEEDED);
		}
		return;
	}
	group_check(g);
}

void
group_stop_within(struct group *g, int sig, int timeout_s)
{
	if (g->phase == GROUP_DONE) {
		return;
	}
	if (g->phase == GROUP_RUNNING) {
		g->stop_requested = true;
		group_set_state(g, WORKER_STATE_STOPPED);
	}
	group_begin_stop(g, sig, timeout_s);
}

void
group_stop(struct group *g, int sig)
{
	group_stop_within(g, sig, g->cfg->shutdown_timeout);
}

enum worker_state
group_state(const struct group *g)
{
	return g->state;
}

bool
group_is_done(const struct group *g)
{
	return g->phase == GROUP_DONE;
}

size_t
group_size(const struct group *g)
{
	return g->n;
}

struct worker *
group_worker(const struct group *g, size_t local_rank)
{
	return local_rank < g->n ? g->workers[local_rank] : NULL;
}

const char *
group_entrypoint_name(const struct group *g)
{
	return g->cfg->entrypoint;
}

void
group_free(struct group *g)
{
	if (!g) {
		return;
	}
	for (size_t i = 0; i < g->n; i++) {
		worker_free(g->workers[i]);
		strv_free(g->envs[i]);
		strv_free(g->argvs[i]);
	}
	free(g->workers);
	free(g->envs);
	free(g->argvs);
	free(g->signals);
	for (int s = 0; s < 2; s++) {
		strv_free(g->filters[s]);
		if (g->filtered_fd[s] >= 0) {
			close(g->filtered_fd[s]);
		}
	}
	if (g->kill_timer) {
		event_free(g->kill_timer);
	}
	if (g->drain_timer) {
		event_free(g->drain_timer);
	}
	if (g->escape_timer) {
		event_free(g->escape_timer);
	}
	if (g->spawn_timer) {
		event_free(g->spawn_timer);
	}
	free(g->watched);
	free(g->escaped);
	guard_free(g->guard);
	free(g);
}
