/* agent_setup.c — what agent_new sets up before the first rendezvous: the
 * plan (GPUs, --nproc-per-node, each local rank's binding), the run
 * directory, the event recorder and its file, the workers' program, the
 * consoles. */
#include "agent.h"
#include "agent_internal.h"

#include <errno.h>
#include <event2/event.h>
#include <jansson.h>
#include <stdio.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include "config.h"
#include "console.h"
#include "events.h"
#include "group.h"
#include "log.h"
#include "numa.h"
#include "numa_crowd.h"
#include "util.h"
#include "wenv.h"
#include "worker.h"

/* Whether this run needs the hwloc topology: to bind, to count GPUs or to
 * show the plan. */
static bool
agent_needs_topology(const struct config *cfg)
{
	return cfg->numa_binding || cfg->dry_run || cfg->topology_xml || cfg->gpu_bus_ids ||
	       cfg->nproc_kind == NPROC_GPU || cfg->nproc_kind == NPROC_XPU ||
	       cfg->nproc_kind == NPROC_AUTO;
}

/* What --nproc-per-node of kind k found none of, for its error. */
static const char *
nproc_none_found(enum nproc_kind k)
{
	switch (k) {
	case NPROC_INT: /* a number is never short */
	case NPROC_GPU:
		return "no GPU";
	case NPROC_CPU:
		return "no usable CPU";
	case NPROC_XPU:
		return "no Intel GPU (xpu)";
	case NPROC_AUTO:
		return "no GPU and no usable CPU";
	}
	return "no GPU";
}

/* Resolve --nproc-per-node on this node: ngpus NVIDIA or AMD GPUs (as
 * selected), Intel GPUs counted in t (NULL: no topology loaded). Returns the
 * number of local workers, or -1 with *reterr set (a usage error). */
static int
agent_resolve_nproc(const struct config *cfg, const struct numa_topology *t, int ngpus,
		    char **reterr)
{
	bool xpu = cfg->nproc_kind == NPROC_XPU || cfg->nproc_kind == NPROC_AUTO;
	int nxpus = t && xpu ? numa_topology_count_gpus(t, NUMA_GPU_INTEL) : 0;
	int n = config_resolve_nproc(cfg, cpus_allowed_count(), ngpus, nxpus);

	if (n < 0) {
		*reterr = xasprintf("--nproc-per-node: %s found on this node",
				    nproc_none_found(cfg->nproc_kind));
		return -1;
	}
	/* The plan binds to NVIDIA and AMD GPUs only (numa_gpu.c): refuse before a
	 * worker starts rather than fail the plan. */
	if (cfg->numa_binding && ngpus == 0 && nxpus > 0 && n == nxpus) {
		*reterr = xasprintf("--numa-binding %s: binds workers to NVIDIA and AMD GPUs only, "
				    "and --nproc-per-node %s counted %d Intel GPUs; drop "
				    "--numa-binding or give --nproc-per-node a number",
				    cfg->numa_binding, config_nproc_kind_to_string(cfg->nproc_kind),
				    nxpus);
		return -1;
	}
	if (cfg->nproc_kind != NPROC_INT) {
		log_info("Using nproc_per_node=%s, setting nproc_per_node to %d",
			 config_nproc_kind_to_string(cfg->nproc_kind), n);
	}
	return n;
}

/* Warn once when the plan binds more workers to some CPUs than they have
 * (taskset -c 0 with two ranks). */
static void
agent_plan_warn_crowding(struct agent *a)
{
	_cleanup_free_ char *crowd = numa_plan_crowding(a->numa);

	if (crowd) {
		log_warn("--numa-binding %s: %s", a->cfg->numa_binding, crowd);
	}
}

/* What the plan a->numa (made in mode from topology t) leaves to say: its
 * warning or the GPUs' note, crowded CPUs, each rank that runs unbound or
 * whose GPU spans NUMA nodes. */
static void
agent_plan_warn(struct agent *a, enum numa_mode mode, const struct numa_topology *t)
{
	const struct config *cfg = a->cfg;

	if (a->numa->warning) {
		log_warn("--numa-binding %s: %s", cfg->numa_binding, a->numa->warning);
	} else if (numa_topology_gpu_note(t)) {
		log_info("GPUs: %s", numa_topology_gpu_note(t));
	}
	agent_plan_warn_crowding(a);
	for (size_t i = 0; i < a->numa->n; i++) {
		const struct numa_binding *b = &a->numa->ranks[i];

		if (b->error) {
			log_warn("--numa-binding %s: local_rank %zu runs unbound "
				 "(--numa-fallback): %s",
				 cfg->numa_binding, i, b->error);
		} else if (b->gpu && b->n_numa_nodes > 1 && mode != NUMA_MODE_NONE &&
			   mode != NUMA_MODE_SOCKET) {
			/* torch would read sysfs's numa_node, -1 here, as node 0. */
			log_warn("--numa-binding %s: local_rank %zu: GPU %s has no NUMA node of "
				 "its own (its locality spans nodes %s); bound to all of them",
				 cfg->numa_binding, i, b->gpu, b->numa_nodes_list);
		}
	}
}

/* Find the GPUs (hwloc, when needed), resolve --nproc-per-node and plan each
 * local rank's binding into a->numa. Returns the number of local workers, or
 * -1 with *ret_exit and *reterr set. */
int
agent_plan(struct agent *a, int *ret_exit, char **reterr)
{
	const struct config *cfg = a->cfg;
	const char *xml = cfg->topology_xml ? cfg->topology_xml : wenv_get(a->env, "HWLOC_XMLFILE");
	struct numa_request req = {
		.membind = cfg->numa_membind,
		.fallback = cfg->numa_fallback,
		.plan_only = cfg->dry_run,
	};
	struct numa_topology *t = NULL;
	char *err = NULL;
	int ngpus = 0, n, r;

	(void)numa_mode_from_string(cfg->numa_binding, &req.mode); /* config checked it */
	if (agent_needs_topology(cfg)) {
		if (numa_topology_load(xml && *xml ? xml : NULL, &t, &err) < 0) {
			*reterr = cfg->topology_xml ? xasprintf("--topology-xml: %s", err)
						    : xasprintf("NUMA topology: %s", err);
			*ret_exit = cfg->topology_xml ? AGENT_EXIT_USAGE : AGENT_EXIT_FAILURE;
			free(err);
			return -1;
		}
		if (!numa_topology_is_live(t)) {
			log_info("hwloc topology read from %s, not discovered on this machine",
				 xml && *xml ? xml : "the HWLOC_* environment");
		}
		ngpus = numa_topology_select_gpus(t, cfg->gpu_bus_ids,
						  wenv_get(a->env, "CUDA_VISIBLE_DEVICES"), reterr);
		if (ngpus < 0) {
			*ret_exit = AGENT_EXIT_USAGE;
			numa_topology_free(t);
			return -1;
		}
	}
	n = agent_resolve_nproc(cfg, t, ngpus, reterr);
	if (n < 0) {
		*ret_exit = AGENT_EXIT_USAGE;
		numa_topology_free(t);
		return -1;
	}
	if (!t) {
		return n;
	}
	req.nproc = n;
	r = numa_plan_new(t, &req, &a->numa, &err);
	if (r < 0) {
		/* -ERANGE: more ranks than cores, a usage error (numa.h). */
		*reterr = xasprintf("--numa-binding %s: %s%s", cfg->numa_binding, err,
				    r == -ERANGE ? " Start fewer local ranks (--nproc-per-node), "
						   "give elasticd more cores, or use another mode."
						 : "");
		*ret_exit = r == -ERANGE ? AGENT_EXIT_USAGE : AGENT_EXIT_FAILURE;
		free(err);
		numa_topology_free(t);
		return -1;
	}
	agent_plan_warn(a, req.mode, t);
	numa_topology_free(t);
	return n;
}

/* --dry-run: the plan as JSON lines on stdout, one object per local rank. */
int
agent_print_plan(struct agent *a)
{
	for (size_t i = 0; i < a->numa->n; i++) {
		json_t *j = numa_binding_to_json(a->numa, i);
		char *line = json_dumps(j, JSON_COMPACT);

		printf("%s\n", line);
		free(line);
		json_decref(j);
	}
	if (fflush(stdout) != 0 || ferror(stdout)) {
		log_error("--dry-run: cannot write the plan: %s", strerror(errno));
		return AGENT_EXIT_FAILURE;
	}
	return AGENT_EXIT_SUCCESS;
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

int
agent_make_run_dir(struct agent *a, char **reterr)
{
	const char *log_dir = a->cfg->log_dir;
	const char *logs = wenv_get(a->env, "LOGS_DIRECTORY");
	_cleanup_free_ char *service_dir = NULL;
	char *base, *prefix;
	int r = 0;
	struct stat st;

	if (!log_dir && logs && logs[0] == '/') {
		/* A service's LogsDirectory= (the first of a ':' list). */
		service_dir = xstrndup(logs, strcspn(logs, ":"));
		log_dir = service_dir;
	}
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

/* The event recorder, and its sink when it is known before the run
 * directory: events first, so that a rendezvous that cannot be created is
 * reported (to the console or a given file). *ret_sink: the sink asked for.
 * Returns 0, or -errno with *reterr. */
int
agent_setup_events(struct agent *a, enum events_sink *ret_sink, char **reterr)
{
	const struct config *cfg = a->cfg;
	bool log_file_given = cfg->event_log_file && *cfg->event_log_file;
	enum events_sink sink = EVENTS_SINK_NULL;
	int r;

	a->events = events_new((size_t)cfg->event_ring_size);
	events_set_identity(a->events, cfg->rdzv_id, NULL, (long long)getpid(), 0);
	(void)events_sink_from_name(cfg->event_log_handler, &sink);
	*ret_sink = sink;
	if (sink == EVENTS_SINK_CONSOLE || (sink == EVENTS_SINK_FILE && log_file_given)) {
		r = events_set_sink(a->events, sink, cfg->event_log_file, reterr);
		if (r < 0) {
			return r;
		}
		if (sink == EVENTS_SINK_FILE) {
			a->event_log_path = xstrdup(cfg->event_log_file);
		}
	} else if (sink == EVENTS_SINK_FILE) {
		/* events.jsonl in the run directory, made after the rendezvous
		 * (whose creation records events already). */
		events_hold(a->events);
	}
	return 0;
}

/* The default event file, events.jsonl in the run directory (none for
 * --log-dir /dev/null). Returns 0, or -errno with *reterr. */
int
agent_open_event_file(struct agent *a, char **reterr)
{
	_cleanup_free_ char *path = a->run_dir ? xasprintf("%s/events.jsonl", a->run_dir) : NULL;
	int r = path ? events_set_sink(a->events, EVENTS_SINK_FILE, path, reterr) : 0;

	if (r < 0) {
		return r;
	}
	a->event_log_path = path ? xstrdup(path) : NULL;
	log_debug("events: %s", path ? path : "none (--log-dir /dev/null)");
	return 0;
}

/* One line per started worker with its binding, when binding was asked. */
void
agent_log_bindings(struct agent *a)
{
	if (!a->numa || a->numa->mode == NUMA_MODE_NONE) {
		return;
	}
	for (size_t i = 0; a->group && i < group_size(a->group) && i < a->numa->n; i++) {
		const struct worker *w = group_worker(a->group, i);
		const struct numa_binding *b = &a->numa->ranks[i];

		if (w->pid <= 0) {
			continue;
		}
		if (b->cpus) {
			log_info("[%s] local_rank %d (pid %d): GPU %s, NUMA node%s %s, CPUs %s%s%s",
				 a->cfg->role, w->local_rank, (int)w->pid, b->gpu,
				 b->n_numa_nodes == 1 ? "" : "s", b->numa_nodes_list, b->cpus,
				 b->mems ? ", memory nodes " : "", b->mems ? b->mems : "");
		} else {
			const char *why = b->error ? b->error : a->numa->warning;

			log_warn("[%s] local_rank %d (pid %d) runs unbound: %s", a->cfg->role,
				 w->local_rank, (int)w->pid, why ? why : "no GPU");
		}
	}
}

/* The workers' program as found in PATH, for messages; and torchrun's
 * OMP_NUM_THREADS=1 default for more than one local worker. */
void
agent_find_program(struct agent *a)
{
	char **argv = wenv_build_argv(a->cfg, a->env, 0);

	a->program = path_lookup(argv[0], wenv_get(a->env, "PATH"));
	if (!a->program) {
		log_warn("'%s' is not an executable file in PATH; the workers will fail to start",
			 argv[0]);
		a->program = xstrdup(argv[0]);
	}
	strv_free(argv);
	if (a->local_world_size > 1 && !wenv_get(a->env, "OMP_NUM_THREADS")) {
		a->set_omp_num_threads = true;
		log_warn("\n*****************************************\n"
			 "Setting OMP_NUM_THREADS environment variable for each process to be 1 in "
			 "default, to avoid your system being overloaded, please further tune the "
			 "variable for optimal performance in your application as needed. \n"
			 "*****************************************");
	}
}

struct event_base *
agent_base_new(void)
{
	struct event_config *ec = event_config_new();
	struct timeval slice = {0, AGENT_DISPATCH_SLICE_USEC};
	struct event_base *base;

	if (!ec) {
		return NULL;
	}
	/* Priorities after AGENT_PRIO_SUPERVISION yield after the slice. */
	if (event_config_set_max_dispatch_interval(ec, &slice, -1, AGENT_PRIO_SUPERVISION + 1) <
	    0) {
		log_debug("cannot bound the loop's dispatch; output may delay supervision");
	}
	base = event_base_new_with_config(ec);
	event_config_free(ec);
	return base;
}

/* ---- the consoles ------------------------------------------------------- */

static bool
same_file(int a, int b)
{
	struct stat sa, sb;

	return fstat(a, &sa) == 0 && fstat(b, &sb) == 0 && sa.st_dev == sb.st_dev &&
	       sa.st_ino == sb.st_ino;
}

static void
log_to_console(const void *buf, size_t len, void *arg)
{
	console_write(arg, buf, len);
}

void
agent_setup_consoles(struct agent *a)
{
	a->consoles[0] = console_new(a->base, STDOUT_FILENO);
	/* One file (2>&1, one terminal): one queue, so that stdout's and
	 * stderr's lines never cut into each other. */
	a->consoles[1] = same_file(STDOUT_FILENO, STDERR_FILENO)
				 ? a->consoles[0]
				 : console_new(a->base, STDERR_FILENO);
	log_set_sink(log_to_console, a->consoles[1]);
}

void
agent_drain_consoles(struct agent *a)
{
	uint64_t deadline = now_usec() + CONSOLE_EXIT_DRAIN_MS * 1000ULL;

	console_drain(a->consoles[0], deadline);
	if (a->consoles[1] != a->consoles[0]) {
		console_drain(a->consoles[1], deadline);
	}
}

void
agent_free_consoles(struct agent *a)
{
	log_set_sink(NULL, NULL);
	if (a->consoles[1] != a->consoles[0]) {
		console_free(a->consoles[1]);
	}
	console_free(a->consoles[0]);
}
