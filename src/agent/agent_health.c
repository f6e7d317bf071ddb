/* agent_health.c — the health gate's shell: before every rendezvous join
 * (phase HEALTH_CHECK) run every configured check (health.h) at once, each
 * in its own child process and session with a deadline, its output read in
 * the loop; when all have ended, join, or record the failure and retry after
 * a backoff, or leave with the bad-node status. Nothing here blocks the
 * loop: commands go through spawn.c, built-ins run in a forked child. */
#include "agent_health.h"
#include "agent_internal.h"

#include <errno.h>
#include <event2/event.h>
#include <fcntl.h>
#include <jansson.h>
#include <signal.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include "config.h"
#include "events.h"
#include "group.h"
#include "health.h"
#include "log.h"
#include "numa.h"
#include "nvml.h"
#include "sd.h"
#include "sentinel.h"
#include "spawn.h"
#include "util.h"
#include "wenv.h"
#include "worker.h"

/* One check's run. */
struct health_run {
	struct agent_health *h;
	const struct health_check *check;
	pid_t pid;     /* 0: not started (or reaped) */
	int out_fd;    /* the read end of its stdout and stderr, -1: closed */
	int status_fd; /* spawn.c's exec status pipe, -1: none */
	struct event *out_ev;
	struct event *deadline;
	struct health_tail tail;
	int status;     /* its wait status */
	int spawn_err;  /* > 0: it could not be started */
	bool timed_out; /* the deadline passed and it was killed */
	double deadline_s;
	bool ended;
};

enum health_state {
	HEALTH_NOT_CHECKED, /* no gate run yet */
	HEALTH_CHECKING,    /* the checks run */
	HEALTH_HEALTHY,     /* the last gate passed */
	HEALTH_UNHEALTHY,   /* the last gate failed */
	HEALTH_WAITING_GPU, /* before a respawn: waiting for the GPUs' memory (nvml.h) */
};

static const char *const state_names[] = {"not-checked", "checking", "healthy", "unhealthy",
					  "waiting-gpu-memory"};

/* The GPU memory wait's own deadline beyond --gpu-memory-wait: NVML's
 * start-up may take seconds. */
#define GPU_WAIT_GRACE_S 15.0
/* How often the wait looks. */
#define GPU_WAIT_INTERVAL_S 0.2

struct agent_health {
	struct agent *a;
	struct health_run *runs; /* one per check */
	size_t n;
	size_t pending; /* runs not ended yet */
	enum health_state state;
	int failures;              /* failed gates in a row */
	uint64_t gate_start_usec;  /* CLOCK_MONOTONIC */
	struct event *retry_timer; /* the wait before the next try */
	uint64_t retry_usec;       /* CLOCK_MONOTONIC: when it ends; 0: none */
	enum agent_reason reason;  /* the join the gate stands before ... */
	char *why;                 /* ... and why it was asked for */
	char *last_check;          /* the last failed gate's first failed check ... */
	char *last_result;         /* ... how it ended ... */
	char *last_output;         /* ... and its output's last lines */
	/* --gpu-memory-wait: one run before the checks of a respawn. */
	struct health_check gpu_check;
	struct health_run gpu_run;
	pid_t *watch; /* the last attempt's worker pids */
	size_t n_watch;
};

/* The one place the gate's state changes (its status's "state"). */
static void
health_set_state(struct agent_health *h, enum health_state st, const char *why)
{
	if (h->state != st) {
		log_debug("[%s] health %s -> %s (%s)", h->a->cfg->role, state_names[h->state],
			  state_names[st], why);
	}
	h->state = st;
}

/* The checks' environment: the agent's (without systemd's variables) with
 * the node's facts. */
static char **
health_env(struct agent *a)
{
	static const char *const drop[] = {"NOTIFY_SOCKET", "WATCHDOG_USEC", "WATCHDOG_PID"};
	_cleanup_free_ char *gpus = xstrdup("");
	char **env = NULL;

	for (size_t i = 0; a->env && a->env[i]; i++) {
		bool keep = strncmp(a->env[i], "ELASTICD_", 9) != 0;

		for (size_t k = 0; k < ARRAY_SIZE(drop); k++) {
			size_t len = strlen(drop[k]);

			keep &= !(strncmp(a->env[i], drop[k], len) == 0 && a->env[i][len] == '=');
		}
		if (keep) {
			strv_push(&env, a->env[i]);
		}
	}
	for (size_t i = 0; a->numa && i < a->numa->n; i++) {
		char *old = gpus;

		if (a->numa->ranks[i].gpu) {
			gpus = xasprintf("%s%s%s", old, *old ? "," : "", a->numa->ranks[i].gpu);
			free(old);
		}
	}
	strv_consume(&env, xasprintf("ELASTICD_RUN_ID=%s", a->cfg->rdzv_id));
	strv_consume(&env, xasprintf("ELASTICD_NODE=%s", host_fqdn()));
	strv_consume(&env, xasprintf("ELASTICD_ROLE=%s", a->cfg->role));
	strv_consume(&env, xasprintf("ELASTICD_LOCAL_WORLD_SIZE=%d", a->local_world_size));
	strv_consume(&env, xasprintf("ELASTICD_GPU_BUS_IDS=%s", gpus));
	strv_consume(&env, xasprintf("ELASTICD_RESTART_COUNT=%d", a->restart_count));
	strv_consume(&env, xasprintf("ELASTICD_HEALTH_ROOT=%s", a->cfg->health_root));
	strv_consume(&env, xasprintf("ELASTICD_HEALTH_ATTEMPT=%d", a->health->failures));
	if (a->control_socket) {
		strv_consume(&env, xasprintf("ELASTICD_CONTROL_SOCKET=%s", a->control_socket));
	}
	return env;
}

/* A built-in check, in the forked child: its message on stdout, exit 0 when
 * healthy. Never returns. */
static void __attribute__((noreturn))
health_child(const struct agent *a, const struct health_check *c, int out_fd)
{
	char *msg = NULL;
	bool ok = false;

	setsid();
	prctl(PR_SET_PDEATHSIG, SIGKILL);
	sigprocmask(SIG_SETMASK, &a->orig_mask, NULL);
	dup2(out_fd, STDOUT_FILENO);
	dup2(out_fd, STDERR_FILENO);
	switch (c->kind) {
	case HEALTH_GPUS:
		ok = health_check_gpus(a->cfg->topology_xml, a->cfg->gpu_bus_ids,
				       wenv_get(a->env, "CUDA_VISIBLE_DEVICES"), c->gpus, &msg);
		break;
	case HEALTH_NICS:
		ok = health_check_nics(a->cfg->health_root, c->nics, &msg);
		break;
	case HEALTH_WRITABLE:
		ok = health_check_writable(c->arg, &msg);
		break;
	case HEALTH_FREE_SPACE:
		ok = health_check_free_space(c->arg, c->min_bytes, &msg);
		break;
	case HEALTH_GPU_MEMORY:
		_exit(nvml_wait_released(a->cfg->nvml_library, a->cfg->gpu_memory_threshold,
					 a->health->watch, a->health->n_watch,
					 a->cfg->gpu_memory_wait, GPU_WAIT_INTERVAL_S,
					 STDOUT_FILENO));
	case HEALTH_COMMAND:
		break;
	}
	if (msg) {
		(void)!write(STDOUT_FILENO, msg, strlen(msg));
		(void)!write(STDOUT_FILENO, "\n", 1);
	}
	_exit(ok ? 0 : 1);
}

/* Start run r's process; its output goes to a pipe. Returns 0 or -errno. */
static int
health_spawn(struct health_run *r, char **env, int out_w)
{
	struct agent *a = r->h->a;
	char *argv[] = {"/bin/sh", "-c", r->check->arg, NULL};
	struct spawn_args sa = {
		.argv = argv,
		.envp = env,
		.stdin_fd = -1,
		.stdout_fd = out_w,
		.stderr_fd = out_w,
		.sigmask = &a->orig_mask,
		.reset_signals = a->reset_signals,
		.n_reset_signals = a->n_reset_signals,
	};
	pid_t pid;

	if (r->check->kind == HEALTH_COMMAND) {
		int err = spawn_process(&sa, &r->pid, &r->status_fd);

		if (err == 0) { /* its session dies with a SIGKILLed agent */
			sentinel_watch(a->sentinel, r->pid);
		}
		return err;
	}
	pid = fork();
	if (pid < 0) {
		return -errno;
	}
	if (pid == 0) {
		health_child(a, r->check, out_w);
	}
	r->pid = pid;
	sentinel_watch(a->sentinel, pid);
	return 0;
}

/* Read what run r wrote; at end of file (or an error) stop watching. */
static void
health_read(struct health_run *r)
{
	char buf[4096];

	while (r->out_fd >= 0) {
		ssize_t n = read(r->out_fd, buf, sizeof(buf));

		if (n > 0) {
			health_tail_append(&r->tail, buf, (size_t)n);
			continue;
		}
		if (n < 0 && errno == EINTR) {
			continue;
		}
		if (n < 0 && errno == EAGAIN) {
			return;
		}
		event_free(r->out_ev);
		r->out_ev = NULL;
		closep(&r->out_fd);
	}
}

static void
health_out_cb(evutil_socket_t fd, short what, void *arg)
{
	health_read(arg);
}

static void
health_deadline_cb(evutil_socket_t fd, short what, void *arg)
{
	struct health_run *r = arg;

	if (r->pid <= 0) {
		return;
	}
	r->timed_out = true;
	log_warn("[%s] health check %s still runs after %g s: killing it", r->h->a->cfg->role,
		 r->check->name, r->deadline_s);
	kill(-r->pid, SIGKILL);
	kill(r->pid, SIGKILL);
}

static void health_gate_done(evutil_socket_t fd, short what, void *arg);
static void health_gpu_done(evutil_socket_t fd, short what, void *arg);

/* Run r has ended (reaped, or never started): count it; the last one ends
 * the gate (in a later loop turn: never inside the reaping loop). */
static void
health_run_ended(struct health_run *r)
{
	struct agent_health *h = r->h;

	r->ended = true;
	if (r->deadline) {
		event_free(r->deadline);
		r->deadline = NULL;
	}
	if (--h->pending == 0) {
		event_base_once(h->a->base, -1, EV_TIMEOUT,
				h->state == HEALTH_WAITING_GPU ? health_gpu_done : health_gate_done,
				h, NULL);
	}
}

/* Start run r; a failure to start ends it at once. */
static void
health_run_start(struct health_run *r, char **env, double deadline_s)
{
	struct agent *a = r->h->a;
	struct timeval tv = usec_to_timeval(seconds_to_usec(deadline_s));
	int p[2], err;

	r->deadline_s = deadline_s;
	if (pipe2(p, O_CLOEXEC) < 0) {
		r->spawn_err = errno;
		health_run_ended(r);
		return;
	}
	err = health_spawn(r, env, p[1]);
	close(p[1]);
	if (err < 0) {
		close(p[0]);
		r->spawn_err = -err;
		health_run_ended(r);
		return;
	}
	r->out_fd = p[0];
	fd_nonblock(r->out_fd, true);
	r->out_ev = event_new(a->base, r->out_fd, EV_READ | EV_PERSIST, health_out_cb, r);
	event_add(r->out_ev, NULL);
	r->deadline = evtimer_new(a->base, health_deadline_cb, r);
	evtimer_add(r->deadline, &tv);
}

/* Run every check. */
static void
health_gate_start(struct agent_health *h)
{
	char **env = health_env(h->a);

	health_set_state(h, HEALTH_CHECKING, "checks started");
	h->retry_usec = 0;
	h->gate_start_usec = now_usec();
	h->pending = h->n;
	sd_notify_status(h->a->sd, "checking node health: %zu check%s", h->n, h->n == 1 ? "" : "s");
	for (size_t i = 0; i < h->n; i++) {
		struct health_run *r = &h->runs[i];

		*r = (struct health_run){.h = h,
					 .check = &h->a->cfg->health_checks[i],
					 .out_fd = -1,
					 .status_fd = -1};
	}
	for (size_t i = 0; i < h->n; i++) {
		health_run_start(&h->runs[i], env, h->a->cfg->health_timeout);
	}
	strv_free(env);
}

static void
health_retry_cb(evutil_socket_t fd, short what, void *arg)
{
	struct agent_health *h = arg;

	h->retry_usec = 0;
	if (h->a->phase == AGENT_PHASE_HEALTH_CHECK) {
		log_info("[%s] health: trying again (attempt %d)", h->a->cfg->role,
			 h->failures + 1);
		health_gate_start(h);
	}
}

/* elasticd.node.unhealthy for the failed run r. */
static void
health_record(struct agent_health *h, const struct health_run *r, const char *result,
	      const char *output, const char *action, double retry_in_s)
{
	struct agent *a = h->a;
	struct elastic_event ev;

	if (!agent_event_begin(a, &ev, "elasticd.node.unhealthy", EVENT_SOURCE_AGENT)) {
		return;
	}
	elastic_event_set_string(&ev, "check", r->check->name);
	elastic_event_set_string(&ev, "result", result);
	elastic_event_set_string(&ev, "output", output);
	elastic_event_set_bool(&ev, "timed_out", r->timed_out);
	elastic_event_set_int(&ev, "failures", h->failures);
	elastic_event_set_int(&ev, "retries_left", a->cfg->health_retries - h->failures + 1);
	elastic_event_set_string(&ev, "action", action);
	elastic_event_set_double(&ev, "retry_in_s", retry_in_s);
	agent_record(a, &ev);
}

/* Log and record every failed run; keep the first one's report. Returns the
 * number of failed runs. */
static int
health_report(struct agent_health *h, const char *action, double retry_in_s)
{
	struct agent *a = h->a;
	int failed = 0;

	for (size_t i = 0; i < h->n; i++) {
		struct health_run *r = &h->runs[i];
		_cleanup_free_ char *result = NULL, *output = NULL;

		if (health_end_ok(r->status, r->timed_out, r->spawn_err)) {
			continue;
		}
		r->timed_out ? a->stats.health_timeouts++ : a->stats.health_check_fails++;
		result = health_describe_end(r->status, r->timed_out, a->cfg->health_timeout,
					     r->spawn_err);
		output = health_tail_lines(&r->tail, HEALTH_TAIL_LINES);
		log_error("[%s] health check %s failed (%s)%s%s", a->cfg->role, r->check->name,
			  result, *output ? ": " : "", output);
		health_record(h, r, result, output, action, retry_in_s);
		if (failed++ == 0) {
			free(h->last_check);
			free(h->last_result);
			free(h->last_output);
			h->last_check = xstrdup(r->check->name);
			h->last_result = xstrdup(result);
			h->last_output = xstrdup(output);
		}
	}
	return failed;
}

/* Every check has ended: join, retry later, or leave with status 6. */
static void
health_gate_done(evutil_socket_t fd, short what, void *arg)
{
	struct agent_health *h = arg;
	struct agent *a = h->a;
	bool ok = true, retry;
	uint64_t delay;
	int failed;

	if (a->phase != AGENT_PHASE_HEALTH_CHECK || h->state != HEALTH_CHECKING) {
		return;
	}
	for (size_t i = 0; i < h->n; i++) {
		ok &= health_end_ok(h->runs[i].status, h->runs[i].timed_out, h->runs[i].spawn_err);
	}
	if (ok) {
		health_set_state(h, HEALTH_HEALTHY, "every check passed");
		h->failures = 0;
		a->stats.health_passed++;
		log_info("[%s] health: %zu check%s passed in %.3f s", a->cfg->role, h->n,
			 h->n == 1 ? "" : "s", ms_since(h->gate_start_usec) / 1000.0);
		agent_join_round(a, h->reason, h->why);
		return;
	}
	health_set_state(h, HEALTH_UNHEALTHY, "a check failed");
	h->failures++;
	a->stats.health_failed++;
	retry = h->failures <= a->cfg->health_retries;
	delay = retry ? health_retry_delay(seconds_to_usec(a->cfg->health_retry_interval),
					   h->failures)
		      : 0;
	failed = health_report(h, retry ? "retry" : "exit", (double)delay / 1e6);
	if (retry) {
		struct timeval tv = usec_to_timeval(delay);

		log_warn("[%s] node unhealthy (%d check%s failed); trying again in %.1f s "
			 "(%d of --health-retries %d)",
			 a->cfg->role, failed, failed == 1 ? "" : "s", (double)delay / 1e6,
			 h->failures, a->cfg->health_retries);
		sd_notify_status(a->sd, "unhealthy: health check %s: %s; trying again in %.0f s",
				 h->last_check, h->last_result, (double)delay / 1e6);
		h->retry_usec = now_usec() + delay;
		evtimer_add(h->retry_timer, &tv);
		return;
	}
	log_error("[%s] node unhealthy (%d check%s failed) and no --health-retries left; "
		  "leaving the job (exit status %d)",
		  a->cfg->role, failed, failed == 1 ? "" : "s", AGENT_EXIT_NODE_EXCLUDED);
	agent_notify_stopping(a, "unhealthy: health check %s: %s; exiting with status %d",
			      h->last_check, h->last_result, AGENT_EXIT_NODE_EXCLUDED);
	agent_leave(a, "health");
	agent_exit(a, AGENT_EXIT_NODE_EXCLUDED, AGENT_REASON_UNHEALTHY, "node unhealthy");
}

/* ---- the GPU memory wait before a respawn (--gpu-memory-wait) ------------- */

/* Start the wait: a child polls NVML (nvml_wait_released) for the last
 * attempt's workers' memory to go. */
static void
health_gpu_start(struct agent_health *h)
{
	struct agent *a = h->a;

	free(h->watch);
	h->watch = NULL;
	h->n_watch = 0;
	for (size_t i = 0; a->group && i < group_size(a->group); i++) {
		const struct worker *w = group_worker(a->group, i);

		if (w->pid > 0) {
			h->watch = xrealloc(h->watch, (h->n_watch + 1) * sizeof(*h->watch));
			h->watch[h->n_watch++] = w->pid;
		}
	}
	health_set_state(h, HEALTH_WAITING_GPU, "respawn");
	h->gate_start_usec = now_usec();
	h->pending = 1;
	h->gpu_run =
		(struct health_run){.h = h, .check = &h->gpu_check, .out_fd = -1, .status_fd = -1};
	sd_notify_status(a->sd, "waiting up to %g s for the GPUs' memory to be released",
			 a->cfg->gpu_memory_wait);
	health_run_start(&h->gpu_run, NULL, a->cfg->gpu_memory_wait + GPU_WAIT_GRACE_S);
}

/* The result of the wait, as elasticd.gpu.memory_wait's "result". */
static const char *
health_gpu_result(const struct health_run *r)
{
	if (r->spawn_err > 0 || r->timed_out || !WIFEXITED(r->status)) {
		return "failed";
	}
	switch (WEXITSTATUS(r->status)) {
	case 0:
		return "released";
	case 1:
		return "timeout";
	case 2:
		return "unavailable";
	}
	return "failed";
}

/* The wait is over: log it, record it, then the health checks (or join). */
static void
health_gpu_done(evutil_socket_t fd, short what, void *arg)
{
	struct agent_health *h = arg;
	struct agent *a = h->a;
	const char *result = health_gpu_result(&h->gpu_run);
	_cleanup_free_ char *out = health_tail_lines(&h->gpu_run.tail, 1);
	double waited = ms_since(h->gate_start_usec) / 1000.0;
	struct elastic_event ev;

	if (a->phase != AGENT_PHASE_HEALTH_CHECK || h->state != HEALTH_WAITING_GPU) {
		return;
	}
	if (!strcmp(result, "released")) {
		a->stats.gpu_waits_released++;
		log_info("[%s] GPU memory: %s", a->cfg->role, out);
	} else if (!strcmp(result, "unavailable")) {
		a->stats.gpu_waits_unavailable++;
		log_info("[%s] GPU memory: not waiting: %s", a->cfg->role, out);
	} else {
		a->stats.gpu_waits_timeout++;
		log_warn("[%s] GPU memory still held after --gpu-memory-wait %g s: %s; starting "
			 "the new attempt anyway",
			 a->cfg->role, a->cfg->gpu_memory_wait, *out ? out : result);
	}
	if (agent_event_begin(a, &ev, "elasticd.gpu.memory_wait", EVENT_SOURCE_AGENT)) {
		elastic_event_set_string(&ev, "result", result);
		elastic_event_set_string(&ev, "detail", out);
		elastic_event_set_double(&ev, "waited_s", waited);
		elastic_event_set_double(&ev, "limit_s", a->cfg->gpu_memory_wait);
		elastic_event_set_int(&ev, "processes_watched", (long long)h->n_watch);
		agent_record(a, &ev);
	}
	health_set_state(h, HEALTH_NOT_CHECKED, "GPU memory wait over");
	if (h->n > 0) {
		health_gate_start(h);
		return;
	}
	agent_join_round(a, h->reason, h->why);
}

/* ---- the agent's side ------------------------------------------------------ */

void
agent_health_setup(struct agent *a)
{
	struct agent_health *h;

	if (a->cfg->n_health_checks == 0 && !(a->cfg->gpu_memory_wait > 0)) {
		return;
	}
	h = xcalloc(1, sizeof(*h));
	h->a = a;
	h->n = a->cfg->n_health_checks;
	h->runs = xcalloc(h->n ? h->n : 1, sizeof(*h->runs));
	h->gpu_check = (struct health_check){.kind = HEALTH_GPU_MEMORY, .name = "gpu-memory"};
	h->gpu_run = (struct health_run){.h = h, .out_fd = -1, .status_fd = -1, .ended = true};
	h->retry_timer = evtimer_new(a->base, health_retry_cb, h);
	a->health = h;
}

bool
agent_health_gate(struct agent *a, enum agent_reason reason, const char *why)
{
	struct agent_health *h = a->health;

	if (!h) {
		return false;
	}
	if (h->n == 0 && !(a->cfg->gpu_memory_wait > 0 && a->group)) {
		return false; /* only the GPU memory wait, and this is no respawn */
	}
	h->reason = reason;
	free(h->why);
	h->why = xstrdup(why);
	agent_set_phase(a, AGENT_PHASE_HEALTH_CHECK, reason, why);
	if (a->cfg->gpu_memory_wait > 0 && a->group) {
		health_gpu_start(h);
		return true;
	}
	health_gate_start(h);
	return true;
}

/* Kill run r's process group (what a command left behind too). */
static void
health_run_kill(struct health_run *r)
{
	if (r->pid > 0) {
		kill(-r->pid, SIGKILL);
		kill(r->pid, SIGKILL);
		sentinel_forget(r->h->a->sentinel, r->pid); /* dead: a reused pgid is not ours */
	}
}

void
agent_health_cancel(struct agent *a)
{
	struct agent_health *h = a->health;

	if (!h) {
		return;
	}
	evtimer_del(h->retry_timer);
	h->retry_usec = 0;
	for (size_t i = 0; i < h->n; i++) {
		health_run_kill(&h->runs[i]);
	}
	health_run_kill(&h->gpu_run);
	if (h->state == HEALTH_CHECKING || h->state == HEALTH_WAITING_GPU) {
		health_set_state(h, HEALTH_NOT_CHECKED, "cancelled");
	}
}

/* Run r's process exited with status: take its end. */
static void
health_run_reaped(struct health_run *r, int status)
{
	int err;

	r->status = status;
	health_read(r); /* what it wrote before it exited */
	if (r->out_ev) {
		event_free(r->out_ev);
		r->out_ev = NULL;
	}
	closep(&r->out_fd);
	if (r->status_fd >= 0) {
		err = spawn_read_status(r->status_fd);
		r->spawn_err = err > 0 ? err : 0;
		closep(&r->status_fd);
	}
	kill(-r->pid, SIGKILL); /* whatever the check left running */
	sentinel_forget(r->h->a->sentinel, r->pid);
	r->pid = 0;
	health_run_ended(r);
}

bool
agent_health_reaped(struct agent *a, pid_t pid, int status)
{
	struct agent_health *h = a->health;

	if (!h || pid <= 0) {
		return false;
	}
	if (h->gpu_run.pid == pid && !h->gpu_run.ended) {
		health_run_reaped(&h->gpu_run, status);
		return true;
	}
	for (size_t i = 0; i < h->n; i++) {
		if (h->runs[i].pid == pid && !h->runs[i].ended) {
			health_run_reaped(&h->runs[i], status);
			return true;
		}
	}
	return false;
}

/* Release run r's process, events and descriptors. */
static void
health_run_release(struct health_run *r)
{
	health_run_kill(r);
	if (r->out_ev) {
		event_free(r->out_ev);
	}
	if (r->deadline) {
		event_free(r->deadline);
	}
	closep(&r->out_fd);
	closep(&r->status_fd);
}

void
agent_health_free(struct agent_health *h)
{
	if (!h) {
		return;
	}
	for (size_t i = 0; i < h->n; i++) {
		health_run_release(&h->runs[i]);
	}
	health_run_release(&h->gpu_run);
	event_free(h->retry_timer);
	free(h->runs);
	free(h->watch);
	free(h->why);
	free(h->last_check);
	free(h->last_result);
	free(h->last_output);
	free(h);
}

json_t *
agent_health_status(const struct agent *a)
{
	const struct agent_health *h = a->health;
	json_t *checks, *o;

	if (!h) {
		return json_null();
	}
	checks = json_array();
	for (size_t i = 0; i < h->n; i++) {
		json_array_append_new(checks, json_string(a->cfg->health_checks[i].name));
	}
	o = json_pack("{s:s, s:o, s:i}", "state", state_names[h->state], "checks", checks,
		      "failures", h->failures);
	if (h->last_check) {
		json_object_set_new(o, "last_failure",
				    json_pack("{s:s, s:s, s:s}", "check", h->last_check, "result",
					      h->last_result, "output", h->last_output));
	} else {
		json_object_set_new(o, "last_failure", json_null());
	}
	json_object_set_new(o, "retry_in_s",
			    h->retry_usec ? json_real((double)(h->retry_usec > now_usec()
								       ? h->retry_usec - now_usec()
								       : 0) /
						      1e6)
					  : json_null());
	return o;
}
