/* wenv.h — what one worker process receives: its argv and its environment,
 * exactly as torchrun builds them (reference torchelastic-agent.md §2). Pure. */
#pragma once

#include <stdbool.h>
#include <stddef.h>

struct config;

/* Everything that differs between workers and rounds. */
struct wenv_worker {
	int local_rank;
	int rank;       /* global rank */
	int group_rank; /* this agent's rank in the round */
	int role_rank;
	const char *role_name;
	int local_world_size;
	int world_size;
	int group_world_size;
	int role_world_size;
	const char *master_addr;
	int master_port;
	int restart_count; /* failure restarts so far, of this node */
	/* ELASTICD_ROUND: the rendezvous round, the same on every node of the
	 * round (TORCHELASTIC_RESTART_COUNT counts only this node's restarts). */
	int round;
	int max_restarts;
	const char *run_id;
	bool use_agent_store;
	const char *error_file;   /* TORCHELASTIC_ERROR_FILE value ("" when disabled) */
	bool set_omp_num_threads; /* add OMP_NUM_THREADS=1 when the base has none */
	bool virtual_local_rank;  /* --virtual-local-rank */
	bool cuda_device_order;   /* add CUDA_DEVICE_ORDER=PCI_BUS_ID when the base has none */
	/* TORCH_WORKER_SERVER_SOCKET for torch 2.x's worker_main() (its own
	 * WorkerServer), or NULL to leave the base's value alone. */
	const char *worker_server_socket;
	/* ELASTICD_CONTROL_SOCKET: the agent's control socket (elasticd-ctl(7)),
	 * so that a worker can ask for its own node's exclusion; NULL: unset. */
	const char *control_socket;
	/* TORCHELASTIC_SIGNALS_TO_HANDLE (--signals-to-handle, which torch 2.x's
	 * launch_agent puts in its own environment), or NULL to leave the
	 * base's value alone. */
	const char *signals_to_handle;
	/* TORCHELASTIC_TIMER_FILE: the FileTimer FIFO the agent serves, as
	 * torchrun's LocalElasticAgent._setup_local_watchdog exports it (1.13
	 * and 2.6); NULL leaves the base's value alone. */
	const char *timer_file;
	/* PYTHONFAULTHANDLER=1 when the base has none (hang rules are on: a
	 * hung Python rank stopped with SIGABRT prints every thread's stack). */
	bool python_faulthandler;
};

/* Python string.Template.safe_substitute: "$$" becomes "$", "$name" and
 * "${name}" become the value of key `name` when keys[i] == name, any other
 * "$..." is kept as written. Returns a malloc'd string. */
char *wenv_template_substitute(const char *tmpl, const char *const *keys, const char *const *values,
			       size_t n);

/* The worker's environment: a copy of base (an environ-style array, usually the
 * agent's environ) without NOTIFY_SOCKET, WATCHDOG_USEC, WATCHDOG_PID,
 * LISTEN_FDS, LISTEN_PID and LISTEN_FDNAMES, overlaid with torchrun's variables
 * (LOCAL_RANK, RANK, GROUP_RANK, ROLE_RANK, ROLE_NAME, LOCAL_WORLD_SIZE,
 * WORLD_SIZE, GROUP_WORLD_SIZE, ROLE_WORLD_SIZE, MASTER_ADDR, MASTER_PORT,
 * TORCHELASTIC_RESTART_COUNT, ELASTICD_ROUND, TORCHELASTIC_MAX_RESTARTS, TORCHELASTIC_RUN_ID,
 * TORCHELASTIC_USE_AGENT_STORE "True"/"False", TORCHELASTIC_ERROR_FILE,
 * TORCH_NCCL_ASYNC_ERROR_HANDLING (base's value or "1"; NCCL_ASYNC_ERROR_HANDLING
 * only as base has it), OMP_NUM_THREADS=1 and CUDA_DEVICE_ORDER=PCI_BUS_ID when
 * asked and unset, TORCH_WORKER_SERVER_SOCKET, ELASTICD_CONTROL_SOCKET and
 * TORCHELASTIC_SIGNALS_TO_HANDLE when given, PYTHONFAULTHANDLER=1 when asked
 * and unset). With virtual_local_rank LOCAL_RANK is "0" and
 * CUDA_VISIBLE_DEVICES the local_rank-th entry of the
 * base's list (or the local rank itself when the base has none).
 * Returns 0 and a new strv in *ret_env (strv_free), or -EINVAL with *reterr
 * (malloc'd) when CUDA_VISIBLE_DEVICES has too few entries. */
int wenv_build_env(char *const *base, const struct wenv_worker *w, char ***ret_env, char **reterr);

/* The worker's argv, as torchrun: python mode [<$PYTHON_EXEC or "python3">,
 * "-u", ("-m",) entrypoint, args...]; --no-python [entrypoint, args...]. Every
 * "${local_rank}" in the arguments is substituted (Template.safe_substitute).
 * base gives PYTHON_EXEC. Returns a new strv (strv_free). */
char **wenv_build_argv(const struct config *cfg, char *const *base, int local_rank);

/* Value of name in an environ-style array, or NULL. Borrowed. */
const char *wenv_get(char *const *env, const char *name);
