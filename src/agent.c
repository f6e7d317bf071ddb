#include "agent.h"

#include <dirent.h>
#include <errno.h>
#include <event2/event.h>
#include <fcntl.h>
#include <signal.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/random.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>

#include "config.h"
#include "errfile.h"
#include "group.h"
#include "log.h"
#include "rdzv.h"
#include "sentinel.h"
#include "util.h"
#include "wenv.h"
#include "worker.h"

/* Signals whose disposition Python's Popen restores for its children
 * (restore_signals): workers get them at SIG_DFL whatever the agent had. */
static const int reset_signals[] = {SIGPIPE, SIGXFSZ};

struct agent {
	struct event_base *base;
	const struct config *cfg;
	char **env; /* what the workers inherit */

	sigset_t orig_mask;
	sigset_t mask;
	int sigfd;
	struct event *sigev;
	struct sentinel *sentinel;

	struct rdzv *rdzv;
	struct rdzv_result round;
	struct group *group;

	enum worker_state state;
	int local_world_size;
	bool set_omp_num_threads;
	char *run_dir; /* NULL for --log-dir /dev/null */
	char *program; /* the workers' executable as found in PATH, for messages */
	int restart_count;
	int remaining_restarts;
	int stop_signal; /* handled signal that is stopping the agent, else 0 */
	int exit_code;
	bool exiting;
	uint64_t start_usec;
	uint64_t group_start_usec;
};

/* The one place the agent's WorkerState changes. */
static void
agent_set_state(struct agent *a, enum worker_state state, const char *why)
{
	if (a->state == state) {
		return;
	}
	log_info("[%s] worker group %s -> %s (%s)", a->cfg->role, worker_state_name(a->state),
		 worker_state_name(state), why);
	a->state = state;
}

static void
agent_exit(struct agent *a, int code)
{
	if (a->exiting) {
		return;
	}
	a->exiting = true;
	a->exit_code = code;
	event_base_loopbreak(a->base);
}

/* ---- failure report ---------------------------------------------------- */

static void
agent_report_failure(struct agent *a)
{
	struct group *g = a->group;
	size_t n = 0, root;
	struct process_failure *f = xcalloc(group_size(g), sizeof(*f));
	const char *own = wenv_get(a->env, "TORCHELASTIC_ERROR_FILE");
	char *title, *table;

	for (size_t i = 0; i < group_size(g); i++) {
		struct worker *w = group_worker(g, i);

		if (!w->failed) {
			continue;
		}
		process_failure_init(&f[n], w->local_rank, w->global_rank, w->pid, w->exitcode,
				     w->error_file && *w->error_file ? w->error_file : NULL,
				     w->exit_wall);
		if (f[n].problem) {
			log_warn("%s", f[n].problem);
		}
		if (w->exec_errno) {
			free(f[n].message);
			f[n].message = xasprintf("elasticd could not execute the worker: %s",
						 strerror(w->exec_errno));
		}
		n++;
	}
	if (n == 0) {
		free(f);
		return;
	}
	root = errfile_root_cause(f, n);
	title = xasprintf("%s FAILED", group_entrypoint_name(g));
	table = errfile_format_table(title, f, n, root, host_fqdn());
	fprintf(stderr, "torch.distributed.elastic.multiprocessing.errors.ChildFailedError: %s\n",
		table);
	fflush(stderr);
	if (own && *own) {
		int r = f[root].data ? errfile_write_root_cause(own, &f[root]) : -ENOENT;

		if (r == -ENOENT && !f[root].data) {
			log_info(
				"local_rank %d FAILED with no error file. Decorate your entrypoint "
				"fn with @record for traceback info. See: "
				"https://pytorch.org/docs/stable/elastic/errors.html",
				f[root].local_rank);
		} else if (r < 0) {
			log_error("cannot write the error file %s: %s", own, strerror(-r));
		}
	}
	free(title);
	free(table);
	for (size_t i = 0; i < n; i++) {
		process_failure_release(&f[i]);
	}
	free(f);
}

/* ---- the run loop ------------------------------------------------------ */

static void agent_start_round(struct agent *a);

static void
group_outcome_cb(struct group *g, enum worker_state state, void *arg)
{
	struct agent *a = arg;

	if (state == WORKER_STATE_FAILED) {
		/* The earliest failure, as torchrun's "failed (exitcode ...)" line. */
		struct worker *first = NULL;

		for (size_t i = 0; i < group_size(g); i++) {
			struct worker *w = group_worker(g, i);

			if (w->failed && (!first || w->exit_usec < first->exit_usec)) {
				first = w;
			}
		}
		if (first) {
			log_error("failed (exitcode: %d) local_rank: %d (pid: %d) of binary: %s",
				  first->exitcode, first->local_rank, (int)first->pid, a->program);
		}
		agent_set_state(a, state, "a worker failed");
	} else {
		agent_set_state(a, state, "every worker exited 0");
	}
}

static void
agent_group_stopped_deferred(evutil_socket_t fd, short what, void *arg)
{
	struct agent *a = arg;
	double secs = (double)(now_usec() - a->group_start_usec) / 1e6;

	if (a->stop_signal) {
		log_warn("[%s] workers stopped after %s; exiting", a->cfg->role,
			 signal_name(a->stop_signal));
		agent_exit(a, 128 + a->stop_signal);
		return;
	}
	switch (group_state(a->group)) {
	case WORKER_STATE_SUCCEEDED:
		log_info("[%s] worker group successfully finished in %.3f s", a->cfg->role, secs);
		rdzv_shutdown(a->rdzv);
		agent_exit(a, AGENT_EXIT_SUCCESS);
		return;
	case WORKER_STATE_FAILED:
	case WORKER_STATE_UNHEALTHY:
		if (a->remaining_restarts > 0) {
			log_warn("[%s] Worker group FAILED. %d/%d attempts left; will restart "
				 "worker group",
				 a->cfg->role, a->remaining_restarts, a->cfg->max_restarts);
			a->remaining_restarts--;
			a->restart_count++;
			agent_set_state(a, WORKER_STATE_STOPPED, "restarting");
			agent_start_round(a);
			return;
		}
		agent_report_failure(a);
		rdzv_shutdown(a->rdzv);
		agent_exit(a, AGENT_EXIT_FAILURE);
		return;
	case WORKER_STATE_STOPPED:
		/* Stopped on request (membership change): re-form without
		 * spending a restart. */
		agent_start_round(a);
		return;
	case WORKER_STATE_UNKNOWN:
	case WORKER_STATE_INIT:
	case WORKER_STATE_HEALTHY:
		log_error("[%s] Worker group in %s state after stopping", a->cfg->role,
			  worker_state_name(group_state(a->group)));
		agent_exit(a, AGENT_EXIT_FAILURE);
		return;
	}
}

static void
group_stopped_cb(struct group *g, void *arg)
{
	struct agent *a = arg;

	/* Never act (or free the group) inside the group's own call chain. */
	event_base_once(a->base, -1, EV_TIMEOUT, agent_group_stopped_deferred, a, NULL);
}

static void
agent_start_group(struct agent *a)
{
	const struct group_callbacks cb = {
		.outcome = group_outcome_cb,
		.stopped = group_stopped_cb,
		.arg = a,
	};
	struct group_spec spec = {
		.cfg = a->cfg,
		.base_env = a->env,
		.rdzv = &a->round,
		.local_world_size = a->local_world_size,
		.restart_count = a->restart_count,
		.set_omp_num_threads = a->set_omp_num_threads,
		.sigmask = &a->orig_mask,
		.reset_signals = reset_signals,
		.n_reset_signals = ARRAY_SIZE(reset_signals),
		.sentinel = a->sentinel,
	};
	char *attempt_dir = NULL, *err = NULL;

	group_free(a->group);
	a->group = NULL;
	if (a->run_dir) {
		attempt_dir = xasprintf("%s/attempt_%d", a->run_dir, a->restart_count);
		spec.attempt_dir = attempt_dir;
	}
	a->group = group_new(a->base, &spec, &cb, &err);
	free(attempt_dir);
	if (!a->group) {
		log_error("%s", err);
		free(err);
		agent_exit(a, AGENT_EXIT_FAILURE);
		return;
	}
	log_info("[%s] Starting worker group: %d workers, attempt %d, first RANK %d", a->cfg->role,
		 a->local_world_size, a->restart_count, group_worker(a->group, 0)->global_rank);
	a->group_start_usec = now_usec();
	agent_set_state(a, WORKER_STATE_HEALTHY, "workers started");
	group_start(a->group);
}

static void
rdzv_done_cb(int err, const struct rdzv_result *res, const char *errmsg, void *arg)
{
	struct agent *a = arg;

	if (a->stop_signal) {
		agent_exit(a, 128 + a->stop_signal);
		return;
	}
	if (err < 0) {
		log_error("[%s] rendezvous failed: %s", a->cfg->role,
			  errmsg ? errmsg : strerror(-err));
		agent_exit(a, AGENT_EXIT_FAILURE);
		return;
	}
	rdzv_result_release(&a->round);
	a->round = *res;
	a->round.nodes = xcalloc((size_t)res->group_world_size, sizeof(*res->nodes));
	memcpy(a->round.nodes, res->nodes, (size_t)res->group_world_size * sizeof(*res->nodes));
	a->round.master_addr = xstrdup(res->master_addr);
	log_info("[%s] Rendezvous complete: round %d, group_rank %d/%d, master %s:%d, "
		 "restart_count %d",
		 a->cfg->role, res->round, res->group_rank, res->group_world_size, res->master_addr,
		 res->master_port, a->restart_count);
	agent_start_group(a);
}

static void
agent_start_round(struct agent *a)
{
	int r;

	log_info("[%s] Rendezvous'ing worker group", a->cfg->role);
	r = rdzv_next(a->rdzv);
	if (r < 0) {
		log_error("[%s] cannot start the rendezvous: %s", a->cfg->role, strerror(-r));
		agent_exit(a, AGENT_EXIT_FAILURE);
	}
}

/* ---- signals and children ---------------------------------------------- */

static void
agent_reap(struct agent *a)
{
	for (;;) {
		int status;
		pid_t pid = waitpid(-1, &status, WNOHANG);

		if (pid <= 0) {
			break;
		}
		if (a->group && group_handle_exit(a->group, pid, status)) {
			continue;
		}
		if (pid == sentinel_pid(a->sentinel)) {
			log_warn("the sentinel process %d exited; orphaned processes will not be "
				 "cleaned up if the agent dies",
				 (int)pid);
			sentinel_free(a->sentinel);
			a->sentinel = NULL;
			continue;
		}
		log_debug("reaped pid %d (not a worker: an orphan re-parented to the agent)",
			  (int)pid);
	}
	if (a->group) {
		group_after_reap(a->group);
	}
}

static void
agent_on_signal(struct agent *a, int sig)
{
	if (a->stop_signal) {
		/* Asked twice: the user means it. */
		log_warn("Received %s again while stopping; killing the workers now",
			 signal_name(sig));
		if (a->group) {
			group_stop(a->group, SIGKILL);
		}
		return;
	}
	a->stop_signal = sig;
	log_warn("Received %s death signal, shutting down workers", signal_name(sig));
	if (a->group && !group_is_done(a->group) && group_state(a->group) != WORKER_STATE_INIT) {
		group_stop(a->group, sig);
	} else {
		/* Nothing started (still in rendezvous): leave now. */
		agent_exit(a, 128 + sig);
	}
}

static void
signalfd_cb(evutil_socket_t fd, short what, void *arg)
{
	struct agent *a = arg;
	bool child = false;

	for (;;) {
		struct signalfd_siginfo si;
		ssize_t n = read(a->sigfd, &si, sizeof(si));

		if (n != (ssize_t)sizeof(si)) {
			break;
		}
		if (si.ssi_signo == SIGCHLD) {
			child = true;
		} else {
			if (child) {
				agent_reap(a);
				child = false;
			}
			agent_on_signal(a, (int)si.ssi_signo);
		}
	}
	if (child) {
		agent_reap(a);
	}
}

static int
agent_setup_signals(struct agent *a, char **reterr)
{
	struct sigaction ign = {.sa_handler = SIG_IGN};

	sigemptyset(&a->mask);
	sigaddset(&a->mask, SIGCHLD);
	for (size_t i = 0; i < a->cfg->n_signals; i++) {
		int sig = a->cfg->signals[i];
		struct sigaction old;

		/* A signal ignored when we started (nohup) stays ignored. */
		if (sigaction(sig, NULL, &old) == 0 && old.sa_handler == SIG_IGN) {
			log_debug("%s was ignored at start; not handling it", signal_name(sig));
			continue;
		}
		sigaddset(&a->mask, sig);
	}
	sigaction(SIGPIPE, &ign, NULL);
	if (sigprocmask(SIG_BLOCK, &a->mask, &a->orig_mask) < 0) {
		*reterr = xasprintf("cannot block signals: %s", strerror(errno));
		return -errno;
	}
	a->sigfd = signalfd(-1, &a->mask, SFD_NONBLOCK | SFD_CLOEXEC);
	if (a->sigfd < 0) {
		*reterr = xasprintf("cannot create a signalfd: %s", strerror(errno));
		return -errno;
	}
	a->sigev = event_new(a->base, a->sigfd, EV_READ | EV_PERSIST, signalfd_cb, a);
	event_add(a->sigev, NULL);
	return 0;
}

/* ---- start-up ---------------------------------------------------------- */

/* GPUs by PCI class (display 0x0300 / 3D 0x0302) and vendor (NVIDIA, AMD),
 * from sysfs; the AMD ES1000 BMC chip (1002:515e) is not a GPU. */
static int
gpu_count(void)
{
	DIR *d = opendir("/sys/bus/pci/devices");
	struct dirent *de;
	int n = 0;

	if (!d) {
		return 0;
	}
	while ((de = readdir(d))) {
		char *p, *cls = NULL, *ven = NULL, *dev = NULL;

		if (de->d_name[0] == '.') {
			continue;
		}
		p = xasprintf("/sys/bus/pci/devices/%s/class", de->d_name);
		(void)read_file(p, 64, &cls, NULL);
		free(p);
		p = xasprintf("/sys/bus/pci/devices/%s/vendor", de->d_name);
		(void)read_file(p, 64, &ven, NULL);
		free(p);
		p = xasprintf("/sys/bus/pci/devices/%s/device", de->d_name);
		(void)read_file(p, 64, &dev, NULL);
		free(p);
		if (cls && ven && dev &&
		    (strncmp(cls, "0x0300", 6) == 0 || strncmp(cls, "0x0302", 6) == 0) &&
		    (strncmp(ven, "0x10de", 6) == 0 ||
		     (strncmp(ven, "0x1002", 6) == 0 && strncmp(dev, "0x515e", 6) != 0))) {
			n++;
		}
		free(cls);
		free(ven);
		free(dev);
	}
	closedir(d);
	return n;
}

/* mkdir parent/<prefix><8 random [a-z0-9_]> mode 0700, as Python's mkdtemp. */
static char *
make_random_dir(const char *parent, const char *prefix, int *ret_err)
{
	static const char chars[] = "abcdefghijklmnopqrstuvwxyz0123456789_";

	for (int attempt = 0; attempt < 100; attempt++) {
		unsigned char rnd[8];
		char suffix[9];
		char *path;

		if (getrandom(rnd, sizeof(rnd), 0) != sizeof(rnd)) {
			for (size_t i = 0; i < sizeof(rnd); i++) {
				rnd[i] = (unsigned char)(now_usec() >> (i * 3));
			}
		}
		for (size_t i = 0; i < 8; i++) {
			suffix[i] = chars[rnd[i] % (sizeof(chars) - 1)];
		}
		suffix[8] = '\0';
		path = xasprintf("%s/%s%s", parent, prefix, suffix);
		if (mkdir(path, 0700) == 0) {
			return path;
		}
		free(path);
		if (errno != EEXIST) {
			*ret_err = -errno;
			return NULL;
		}
	}
	*ret_err = -EEXIST;
	return NULL;
}

static int
agent_make_run_dir(struct agent *a, char **reterr)
{
	const char *log_dir = a->cfg->log_dir;
	char *base, *prefix;
	int r = 0;
	struct stat st;

	if (log_dir && strcmp(log_dir, "/dev/null") == 0) {
		return 0;
	}
	if (log_dir) {
		if (stat(log_dir, &st) == 0 && !S_ISDIR(st.st_mode)) {
			*reterr = xasprintf("--log-dir: %s is not a directory", log_dir);
			return -ENOTDIR;
		}
		r = mkdir_p(log_dir, 0755);
		if (r < 0) {
			*reterr =
				xasprintf("--log-dir: cannot create %s: %s", log_dir, strerror(-r));
			return r;
		}
		base = xstrdup(log_dir);
	} else {
		const char *tmp = wenv_get(a->env, "TMPDIR");

		base = make_random_dir(tmp && *tmp ? tmp : "/tmp", "torchelastic_", &r);
		if (!base) {
			*reterr = xasprintf("cannot create a log directory under %s: %s",
					    tmp && *tmp ? tmp : "/tmp", strerror(-r));
			return r;
		}
	}
	prefix = xasprintf("%s_", a->cfg->rdzv_id);
	a->run_dir = make_random_dir(base, prefix, &r);
	free(prefix);
	if (!a->run_dir) {
		*reterr =
			xasprintf("cannot create the run directory in %s: %s", base, strerror(-r));
		free(base);
		return r;
	}
	free(base);
	log_info("log directory set to: %s", a->run_dir);
	return 0;
}

struct agent *
agent_new(struct event_base *base, const struct config *cfg, char *const *envp, int *ret_exit,
	  char **reterr)
{
	struct agent *a = xcalloc(1, sizeof(*a));
	const struct rdzv_callbacks rcb = {.done = rdzv_done_cb, .arg = a};
	int n;

	a->base = base;
	a->cfg = cfg;
	a->env = strv_copy(envp);
	a->sigfd = -1;
	a->state = WORKER_STATE_INIT;
	a->remaining_restarts = cfg->max_restarts;
	a->start_usec = now_usec();
	*ret_exit = AGENT_EXIT_FAILURE;

	n = config_resolve_nproc(
		cfg, cpus_allowed_count(),
		cfg->nproc_kind == NPROC_GPU || cfg->nproc_kind == NPROC_AUTO ? gpu_count() : 0);
	if (n < 0) {
		*reterr = xstrdup("--nproc-per-node: no GPU found on this node");
		*ret_exit = AGENT_EXIT_USAGE;
		goto out_free;
	}
	a->local_world_size = n;
	if (cfg->nproc_kind != NPROC_INT) {
		log_info("Using nproc_per_node=%s, setting nproc_per_node to %d",
			 cfg->nproc_kind == NPROC_CPU   ? "cpu"
			 : cfg->nproc_kind == NPROC_GPU ? "gpu"
							: "auto",
			 n);
	}
	a->rdzv = rdzv_new(base, cfg, n, &rcb, reterr);
	if (!a->rdzv) {
		*ret_exit = AGENT_EXIT_USAGE;
		goto out_free;
	}
	if (agent_make_run_dir(a, reterr) < 0) {
		goto out_free;
	}
	{
		char **argv = wenv_build_argv(cfg, a->env, 0);

		a->program = path_lookup(argv[0], wenv_get(a->env, "PATH"));
		if (!a->program) {
			log_warn("'%s' is not an executable file in PATH; the workers will fail to "
				 "start",
				 argv[0]);
			a->program = xstrdup(argv[0]);
		}
		strv_free(argv);
	}
	if (n > 1 && !wenv_get(a->env, "OMP_NUM_THREADS")) {
		a->set_omp_num_threads = true;
		log_warn("\n*****************************************\n"
			 "Setting OMP_NUM_THREADS environment variable for each process to be 1 in "
			 "default, to avoid your system being overloaded, please further tune the "
			 "variable for optimal performance in your application as needed. \n"
			 "*****************************************");
	}
	if (cfg->numa_binding) {
		log_warn("--numa-binding %s: NUMA binding is not implemented yet; workers run "
			 "unbound",
			 cfg->numa_binding);
	}
	if (prctl(PR_SET_CHILD_SUBREAPER, 1) < 0) {
		log_warn("cannot become a child subreaper: %s", strerror(errno));
	}
	if (agent_setup_signals(a, reterr) < 0) {
		goto out_free;
	}
	a->sentinel = sentinel_new();
	if (!a->sentinel) {
		log_warn("cannot start the sentinel process (%s): a SIGKILLed agent may leave "
			 "workers' children behind",
			 strerror(errno));
	}
	return a;

out_free:
	agent_free(a);
	return NULL;
}

int
agent_run(struct agent *a)
{
	log_info("[%s] starting workers for entrypoint: %s (%s)", a->cfg->role, a->cfg->entrypoint,
		 a->program);
	agent_start_round(a);
	if (!a->exiting) {
		event_base_dispatch(a->base);
	}
	log_info("elasticd exits with status %d after %.3f s", a->exit_code,
		 (double)(now_usec() - a->start_usec) / 1e6);
	return a->exit_code;
}

void
agent_free(struct agent *a)
{
	if (!a) {
		return;
	}
	group_free(a->group);
	rdzv_free(a->rdzv);
	rdzv_result_release(&a->round);
	sentinel_free(a->sentinel);
	if (a->sigev) {
		event_free(a->sigev);
	}
	/* The handled signals stay blocked: a signal pending now must not turn the
	 * exit status we chose into a death by signal. */
	if (a->sigfd >= 0) {
		close(a->sigfd);
	}
	strv_free(a->env);
	free(a->run_dir);
	free(a->program);
	free(a);
}
