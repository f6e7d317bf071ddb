/* group.h — the local worker group of one attempt (torchrun's PContext):
 * starts the --nproc-per-node workers, takes their exits from the agent's
 * reaper, decides the group's outcome at the first failure or when every rank
 * has exited 0, and stops every process group with escalation (signal, then
 * SIGKILL after the shutdown timeout; never a sleep). */
#pragma once

#include <signal.h>
#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

struct config;
struct console;
struct event_base;
struct rdzv_result;
struct numa_plan;
struct sentinel;
struct worker;
struct group;

/* torchrun's WorkerState (str enum, value == name). */
enum worker_state {
	WORKER_STATE_UNKNOWN,
	WORKER_STATE_INIT,
	WORKER_STATE_HEALTHY,
	WORKER_STATE_UNHEALTHY,
	WORKER_STATE_STOPPED,
	WORKER_STATE_SUCCEEDED,
	WORKER_STATE_FAILED,
};

/* "HEALTHY" etc. Static storage. */
const char *worker_state_name(enum worker_state s);

struct group_spec {
	const struct config *cfg;
	char *const *base_env;          /* the agent's environment for the workers */
	const struct rdzv_result *rdzv; /* the round these workers belong to */
	int local_world_size;
	int restart_count;        /* TORCHELASTIC_RESTART_COUNT */
	const char *attempt_dir;  /* <run dir>/attempt_<n>, NULL for --log-dir /dev/null */
	bool set_omp_num_threads; /* OMP_NUM_THREADS=1 for workers that lack it */
	const sigset_t *sigmask;  /* to restore in the children */
	const int *reset_signals; /* dispositions to reset to SIG_DFL in the children */
	size_t n_reset_signals;
	struct sentinel *sentinel; /* may be NULL */
	/* cgroup mode (guard.h): the agent's cgroup subtree, and the name of this
	 * group's directory under it (unique per agent); NULL: ancestry mode. */
	const char *cgroup;
	const char *cgroup_name;
	/* Each local rank's GPU and CPU/memory binding, applied in the child; NULL:
	 * unbound. Borrowed: must outlive the group (workers point into it). */
	const struct numa_plan *numa;
	/* The agent's non-blocking stdout [0] and stderr [1] for teed output. */
	struct console *const *consoles;
	/* Where local rank n gets TORCH_WORKER_SERVER_SOCKET=<dir>/rank<n>.sock
	 * (a stale file there is removed first); NULL: not set. */
	const char *worker_server_dir;
	/* ELASTICD_CONTROL_SOCKET for every worker (the agent's control socket);
	 * NULL: not set. */
	const char *control_socket;
	/* TORCHELASTIC_TIMER_FILE for every worker (the FileTimer FIFO the agent
	 * serves for this attempt); NULL: the base environment's, if any. */
	const char *timer_file;
};

struct group_callbacks {
	/* The outcome is known (SUCCEEDED or FAILED); the group is now stopping
	 * whatever is left. Called once, from the loop. */
	void (*outcome)(struct group *g, enum worker_state state, void *arg);
	/* Every process of the group is gone and every pipe drained. Called once,
	 * after outcome (or after a group_stop); the group may be freed from here
	 * on the next loop turn, not inside the call. */
	void (*stopped)(struct group *g, void *arg);
	void *arg;
};

/* Prepare the workers of one attempt (directories are created here).
 * Returns NULL with *reterr (malloc'd) on a bad spec (e.g.
 * --virtual-local-rank with too few CUDA_VISIBLE_DEVICES). */
struct group *group_new(struct event_base *base, const struct group_spec *spec,
			const struct group_callbacks *cb, char **reterr);

/* Start every worker. A worker that cannot be started at all (fork failed,
 * log file not writable) fails the group at once. One that cannot be started
 * for lack of descriptors others hold for now (ENFILE; EMFILE while peers
 * press on the descriptor reserve, fdreserve_peers_pressing) is tried again
 * every 500 ms, with the ranks after it, for up to 300 s (a warning every
 * 10 s at most): meanwhile the group is HEALTHY and those ranks have pid 0;
 * past that, it fails as any other. EMFILE with no peers pressing is the
 * job's own shortage and fails at once. Returns 0 (started, or some
 * deferred) or -errno of the failure (the group then stops what it started
 * and reports FAILED). */
int group_start(struct group *g);

/* Record a reaped child. Returns false when pid is not one of this group's
 * workers. Decisions wait for group_after_reap. */
bool group_handle_exit(struct group *g, pid_t pid, int wstatus);

/* After a batch of waitpid results: decide the outcome (first failure, or all
 * ranks done) and check whether stopping has finished. */
void group_after_reap(struct group *g);

/* Stop every worker with sig (their whole process groups), SIGKILL after the
 * shutdown timeout. The outcome callback is not called for a stop that was
 * asked for; stopped is. Idempotent (a second call with another signal only
 * re-sends it). */
void group_stop(struct group *g, int sig);

/* As group_stop, with SIGKILL after timeout_s seconds instead of the shutdown
 * timeout (a stop on a handled signal: --term-timeout). A SIGKILL timer armed
 * by an earlier stop keeps its deadline. */
void group_stop_within(struct group *g, int sig, int timeout_s);

/* The group's state: HEALTHY while running, then SUCCEEDED / FAILED /
 * STOPPED (stopped on request). */
enum worker_state group_state(const struct group *g);

/* Whether every process of the group is gone (the stopped callback ran). */
bool group_is_done(const struct group *g);

/* Workers, by local rank. */
size_t group_size(const struct group *g);
struct worker *group_worker(const struct group *g, size_t local_rank);

/* The program name for the failure table title, as torchrun: the script for
 * python entrypoints, else the program. Borrowed. */
const char *group_entrypoint_name(const struct group *g);

/* Free; accepts NULL. The caller makes sure the group has stopped. */
void group_free(struct group *g);
