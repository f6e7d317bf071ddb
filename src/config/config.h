/* config.h — torchrun's command line (1.13 and 2.x), elasticd's own flags and
 * PET_* environment defaults, parsed into one struct that the agent only reads.
 *
 * Precedence: command line > PET_<DEST> environment variable > the --config
 * file (elasticd.conf(5)) > coded default, as torchrun's argparse `env` /
 * `check_env` actions with a file layer between the environment and the
 * defaults. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

struct health_check;

/* Which of a worker's standard streams a -r/-t mask covers (torchrun's Std). */
enum std_mask {
	STD_NONE = 0,
	STD_OUT = 1,
	STD_ERR = 2,
	STD_ALL = 3,
};

/* One local rank of a per-rank -r/-t map. */
struct std_map_entry {
	int local_rank;
	enum std_mask mask;
};

/* A -r/--redirects or -t/--tee value: "3" for every local rank, or a per-rank
 * map "0:1,1:2" (ranks not listed get STD_NONE). Multi-digit ranks are allowed
 * (torchrun's regex only takes one digit; that is a bug we do not copy). */
struct std_map {
	enum std_mask all; /* mask of ranks not in entries */
	size_t n;
	struct std_map_entry *entries;
};

/* Parse a -r/-t value s: one digit 0-3 for every local rank, or "RANK:MASK,..."
 * (ranks are decimal, >= 0, each at most once). On success *ret is overwritten
 * (release what it held first) and later released by std_map_release. Returns
 * 0, or -EINVAL with *reterr a malloc'd reason naming the value
 * ("invalid value 'x': expected ...") and *ret untouched. */
int std_map_parse(const char *s, struct std_map *ret, char **reterr);
/* The mask for local_rank: its entry's, else m->all. */
enum std_mask std_map_get(const struct std_map *m, int local_rank);
/* Free m's entries and reset it to STD_NONE for all ranks; accepts a zeroed map. */
void std_map_release(struct std_map *m);

enum nproc_kind {
	NPROC_INT,  /* --nproc-per-node N */
	NPROC_CPU,  /* "cpu": CPUs this process may use */
	NPROC_GPU,  /* "gpu": GPUs found on this node; error when none */
	NPROC_XPU,  /* "xpu": Intel GPUs found on this node; error when none */
	NPROC_AUTO, /* "auto": GPUs if any, else Intel GPUs if any, else CPUs */
};

/* The --nproc-per-node spelling of k ("cpu", "gpu", "xpu", "auto"), "int" for
 * NPROC_INT. Static storage. */
const char *config_nproc_kind_to_string(enum nproc_kind k);

/* One --rdzv-conf key=value pair, both stripped. */
struct rdzv_conf_entry {
	char *key;
	char *value;
};

struct config {
	/* Rendezvous. */
	int min_nodes; /* --nnodes N or MIN:MAX; 0 < min <= max */
	int max_nodes;
	enum nproc_kind nproc_kind;
	int nproc_per_node;  /* when nproc_kind == NPROC_INT; > 0 */
	char *rdzv_backend;  /* "static" default; "c10d", "etcd"; --standalone: "c10d" */
	char *rdzv_endpoint; /* "" when unset; --standalone: "localhost:0" */
	char *rdzv_id;       /* run id; "none" default; --standalone: a fresh uuid4 */
	struct rdzv_conf_entry *rdzv_conf;
	size_t n_rdzv_conf;
	bool standalone;
	int node_rank;        /* --node-rank, >= 0, default 0 */
	char *master_addr;    /* default "127.0.0.1" */
	int master_port;      /* default 29500 */
	bool master_port_set; /* given on the command line or in PET_MASTER_PORT */
	char *local_addr;     /* --local-addr or NULL */

	/* Workers. */
	int max_restarts;         /* >= 0, default 0 */
	double monitor_interval;  /* seconds; accepted, unused (detection is event-driven) */
	char *start_method;       /* spawn|fork|forkserver; accepted, unused for binaries */
	char *orphan_guard;       /* --orphan-guard auto|cgroup|sentinel (guard.h) */
	char *role;               /* ROLE_NAME, default "default" */
	bool module;              /* -m */
	bool no_python;           /* --no-python */
	char *log_dir;            /* --log-dir or NULL (default: under $TMPDIR) */
	struct std_map redirects; /* -r */
	struct std_map tee;       /* -t */
	/* --log-line-prefix-template, PET_LOG_LINE_PREFIX_TEMPLATE,
	 * TORCHELASTIC_LOG_LINE_PREFIX_TEMPLATE, else "[${role_name}${local_rank}]:";
	 * "" means that default too, as torch. */
	char *log_line_prefix_template;
	int *local_ranks_filter; /* --local-ranks-filter, NULL when not given or "" */
	size_t n_local_ranks_filter;
	int *signals; /* --signals-to-handle as signal numbers, in the given order, without
		       * duplicates; never SIGKILL, SIGSTOP or SIGCHLD; n_signals 0 for "" */
	size_t n_signals;
	/* Seconds, >= 0: --shutdown-timeout, PET_SHUTDOWN_TIMEOUT,
	 * TORCH_ELASTIC_SHUTDOWN_TIMEOUT, else 30. The grace of a stop caused by
	 * a failure or a re-form. */
	int shutdown_timeout;
	/* --term-timeout: seconds, >= 0, the grace of a stop caused by a handled
	 * signal (or the control socket's stop); shutdown_timeout when not given. */
	int term_timeout;
	/* --forward-signals: signal numbers sent on to every worker's process
	 * group while supervision goes on; never one of signals (a handled one is
	 * left out of the default, and refused when given). Default SIGUSR1,SIGUSR2. */
	int *forward_signals;
	size_t n_forward_signals;

	/* The restart policy (elasticd's own; config_policy.c parses it). */
	double restart_backoff_min; /* --restart-backoff MIN:MAX, seconds; max 0: none */
	double restart_backoff_max;
	int restart_window_n;       /* --restart-window N/W: at most N failure restarts */
	double restart_window_s;    /* in any W seconds; n 0: no window */
	int *no_restart_exit_codes; /* --no-restart-exit-codes, 1-255, no repeats */
	size_t n_no_restart_exit_codes;
	char *progress_file;      /* --progress-file PATH, or NULL: no no-progress rule */
	int progress_attempts;    /* --progress-attempts K, >= 1, default 3 */
	bool exit_codes_detailed; /* --exit-codes detailed (default torchrun: 0/1/2) */
	bool virtual_local_rank;  /* --virtual-local-rank */
	char *event_log_handler;  /* --event-log-handler: null, console, file (default) or
				   * dynamic_rendezvous (torch's name for a null handler) */
	char *event_log_file;     /* --event-log-file or NULL (file: <run dir>/events.jsonl) */
	int event_ring_size;      /* --event-ring-size: events kept for the control plane */
	char *logs_specs;         /* --logs-specs: "default" (the only one) or NULL */
	char *numa_binding;       /* node|socket|exclusive|core-complex or NULL */
	char *topology_xml;       /* --topology-xml: plan from this hwloc XML file, or NULL */
	char *gpu_bus_ids;  /* --gpu-bus-ids as given (checked: bus ids, no repeats) or NULL */
	bool numa_fallback; /* --numa-fallback: a rank that cannot be bound runs unbound */
	bool numa_membind;  /* --numa-membind: also bind memory (needs --numa-binding) */
	bool dry_run;       /* --dry-run: print the plan as JSON lines, start nothing */
	/* --duplicate-stdout-filters / --duplicate-stderr-filters: the raw comma list
	 * (",," escapes a comma, linefilter.h) as given, or NULL when not given. */
	char *duplicate_stdout_filters;
	char *duplicate_stderr_filters;

	/* The control socket (elasticd-ctl(7)). */
	char *control_socket;       /* --control-socket PATH, or NULL: the default path */
	int control_socket_mode;    /* --control-socket-mode (octal, includes 0600), or 0: 0600
				     * (0660 with a group) */
	char *control_socket_group; /* --control-socket-group NAME|GID, or NULL */
	bool no_worker_server;      /* --no-worker-server: no TORCH_WORKER_SERVER_SOCKET */

	/* The entrypoint: training script (or module with -m, or program with
	 * --no-python) and its arguments, verbatim. */
	char *entrypoint;
	char **args; /* NULL-terminated strv, may be empty; never NULL after CONFIG_RUN */

	char *config_file; /* --config FILE as given, or NULL */

	/* Zero-code hang rules (hang.h); 0 / NULL: off. */
	double hang_silence;          /* --hang-silence SECONDS */
	char *hang_cadence;           /* --hang-cadence REGEX */
	double hang_cadence_interval; /* --hang-cadence-interval SECONDS */
	double hang_cadence_start;    /* --hang-cadence-start SECONDS */

	/* The health gate before every rendezvous join (health.h): the checks
	 * in the order given (--health-check, --health-gpus, --health-nics,
	 * --health-writable, --health-free-space); none: no gate. */
	struct health_check *health_checks;
	size_t n_health_checks;
	char *health_root;             /* --health-root DIR: where built-ins read /sys ("/") */
	double health_timeout;         /* --health-timeout SECONDS: each check's deadline (> 0) */
	int health_retries;            /* --health-retries N: failed gates retried before exit 6 */
	double health_retry_interval;  /* --health-retry-interval SECONDS: the first wait */
	double gpu_memory_wait;        /* --gpu-memory-wait SECONDS before a respawn; 0: off */
	uint64_t gpu_memory_threshold; /* --gpu-memory-threshold SIZE: bytes used per GPU */
	char *nvml_library;            /* --nvml-library PATH (dlopen) */
	int quarantine_n;              /* --quarantine F/W: F failed attempts of this node ... */
	double quarantine_s;           /* ... within W seconds; F 0: off */
	double quarantine_cooldown;    /* --quarantine-cooldown SECONDS, the first one */
	bool quarantine_exit;          /* --quarantine-action exit (default wait) */
};

/* What config_parse asks the caller to do. */
enum config_result {
	CONFIG_RUN = 0,     /* run the agent with *ret */
	CONFIG_HELP = 1,    /* print config_usage() to stdout, exit 0 */
	CONFIG_VERSION = 2, /* print the version, exit 0 */
};

/* Parse argv (argc entries; argv[0] is the program name) with envp (an
 * environ-style NULL-terminated array, or NULL; consulted for PET_* defaults and
 * TORCH_ELASTIC_SHUTDOWN_TIMEOUT) into *ret, which is overwritten (zeroed first)
 * and later released with config_release. Nothing is borrowed from argv or envp.
 * Both "--dash-form" and "--underscore_form", "--flag=value" and "--flag value",
 * "-r3"/"-r=3"/"-r 3", flag clusters ("-mr3") and prefixes that name one option
 * ("--nproc") are accepted; the last occurrence of an option wins. The first
 * positional (or whatever follows "--") is the entrypoint; everything after it
 * is copied verbatim into args. --standalone keeps a run id given with
 * --rdzv-id/--run-id, PET_RDZV_ID or the config file, else makes a fresh uuid4.
 *
 * --config FILE is read (at most CONFIG_FILE_MAX bytes) after the command line
 * and applied between the environment and the defaults: a setting of the file
 * counts only for options that neither the command line nor PET_* set, but
 * every line is checked. The file's "entrypoint" and "args" are used only when
 * the command line has no training_script. Running as a service (--config
 * given, or a non-empty NOTIFY_SOCKET in envp) changes the default of
 * --signals-to-handle to SIGTERM,SIGINT,SIGQUIT, so that SIGHUP can re-open
 * the logs. Errors in the file read "FILE:LINE: reason".
 * Returns CONFIG_RUN with *ret filled in; CONFIG_HELP or CONFIG_VERSION (as soon
 * as -h/--help or --version is read) with *ret zeroed; or -EINVAL with *ret
 * zeroed and *reterr a malloc'd message (caller frees) that names the flag or
 * PET_* variable and the bad value (the caller prints it and exits 2). Never
 * prints, never exits. */
int config_parse(struct config *ret, int argc, char *const argv[], char *const envp[],
		 char **reterr);

/* As config_parse, with the configuration file's contents given: text (len
 * bytes) is read as the file name (as if "--config name" were on the command
 * line, replacing any --config there); no file is opened. For tests and
 * fuzzing. Returns as config_parse. */
int config_parse_text(struct config *ret, int argc, char *const argv[], char *const envp[],
		      const char *name, const char *text, size_t len, char **reterr);

/* Free everything config_parse allocated; accepts a zeroed or half-built struct. */
void config_release(struct config *cfg);

/* Print the grouped --help text to out (at most 100 columns). */
void config_usage(FILE *out);

/* Value of --rdzv-conf key, or NULL when not given. Borrowed. */
const char *config_rdzv_conf_get(const struct config *cfg, const char *key);

/* Whether local_rank passes --local-ranks-filter (true when no filter given). */
bool config_rank_in_filter(const struct config *cfg, int local_rank);

/* Resolve --nproc-per-node against this node: NPROC_INT gives the number,
 * NPROC_CPU ncpus, NPROC_GPU ngpus (NVIDIA or AMD; -ENODEV when 0: "no GPU
 * found"), NPROC_XPU nxpus (Intel GPUs; -ENODEV when 0), NPROC_AUTO ngpus when
 * > 0, else nxpus when > 0, else ncpus (torch's "auto": the accelerators
 * torch.accelerator counts, else the CPUs). Returns the count (> 0) or
 * -ENODEV. */
int config_resolve_nproc(const struct config *cfg, int ncpus, int ngpus, int nxpus);
