/* config_options.c — torchrun's command line as a table of options, and the
 * lookups over it.
 *
 * Every option is one row of `config_options[]` (data, not code): its long
 * name (the dash spelling; the underscore spelling, the argparse dest and the
 * PET_<DEST> variable are derived from it), an optional alias and short letter,
 * whether it takes a value, the handler (config_values.c) that validates and
 * stores the value, its defaults and its help text. */
#include "config.h"

#include <limits.h>
#include <stddef.h>
#include <string.h>

#include "config_internal.h"
#include "config_policy.h"
#include "util.h"

/* The option table. To add an option, add a row (and a handler in
 * config_values.c when no generic one fits: config_set_string,
 * config_set_choice, config_set_int, config_set_seconds, config_set_flag).
 * Rows are listed in --help order within each group. */

static const char *const rdzv_backends[] = {"static", "c10d", "etcd", NULL};
static const char *const start_methods[] = {"spawn", "fork", "forkserver", NULL};
static const char *const orphan_guards[] = {"auto", "cgroup", "sentinel", NULL};
static const char *const exit_code_modes[] = {"torchrun", "detailed", NULL};
static const char *const numa_modes[] = {"node", "socket", "exclusive", "core-complex", NULL};
/* torch's handler names; dynamic_rendezvous is a null handler there. */
static const char *const event_log_handlers[] = {"null", "console", "file", "dynamic_rendezvous",
						 NULL};

const struct config_option config_options[] = {
	/* Workers. */
	{
		.name = "nproc-per-node",
		.kind = OPT_VALUE,
		.env = true,
		.def = "1",
		.set = config_set_nproc,
		.group = GROUP_WORKERS,
		.metavar = "N|cpu|gpu|xpu|auto",
		.help = "Workers on this node: a number, the CPUs this process may use (cpu), "
			"the NVIDIA or AMD GPUs found (gpu), the Intel GPUs found (xpu), or "
			"GPUs if any, else Intel GPUs if any, else CPUs (auto).",
	},
	{
		.name = "max-restarts",
		.kind = OPT_VALUE,
		.env = true,
		.def = "0",
		.set = config_set_int,
		.offset = offsetof(struct config, max_restarts),
		.min = 0,
		.max = INT_MAX,
		.group = GROUP_WORKERS,
		.metavar = "N",
		.help = "Restarts of the worker group before the job fails.",
	},
	{
		.name = "monitor-interval",
		.kind = OPT_VALUE,
		.env = true,
		.def = "0.1",
		.set = config_set_seconds,
		.offset = offsetof(struct config, monitor_interval),
		.group = GROUP_WORKERS,
		.metavar = "SECONDS",
		.help = "Accepted for torchrun compatibility; elasticd sees worker exits at once.",
	},
	{
		.name = "start-method",
		.kind = OPT_VALUE,
		.env = true,
		.def = "spawn",
		.set = config_set_choice,
		.offset = offsetof(struct config, start_method),
		.choices = start_methods,
		.group = GROUP_WORKERS,
		.metavar = "spawn|fork|forkserver",
		.help = "Accepted for torchrun compatibility; workers are always new processes.",
	},
	{
		.name = "orphan-guard",
		.kind = OPT_VALUE,
		.def = "auto",
		.set = config_set_choice,
		.offset = offsetof(struct config, orphan_guard),
		.choices = orphan_guards,
		.group = GROUP_WORKERS,
		.metavar = "auto|cgroup|sentinel",
		.help = "How every process the workers start is killed with a SIGKILLed "
			"agent: a cgroup v2 subtree (cgroup.kill), the sentinel tracking "
			"them by ancestry, or auto: cgroup where elasticd may create one, "
			"else the sentinel.",
	},
	{
		.name = "role",
		.kind = OPT_VALUE,
		.env = true,
		.def = "default",
		.set = config_set_string,
		.offset = offsetof(struct config, role),
		.group = GROUP_WORKERS,
		.metavar = "NAME",
		.help = "Role of the workers (ROLE_NAME, and the tee line prefix).",
	},
	{
		.name = "module",
		.short_name = 'm',
		.kind = OPT_FLAG,
		.env = true,
		.set = config_set_flag,
		.offset = offsetof(struct config, module),
		.group = GROUP_WORKERS,
		.help = "Run training_script as a Python module (python -u -m).",
	},
	{
		.name = "no-python",
		.kind = OPT_FLAG,
		.env = true,
		.set = config_set_flag,
		.offset = offsetof(struct config, no_python),
		.group = GROUP_WORKERS,
		.help = "Execute training_script directly, without a Python interpreter.",
	},
	{
		.name = "run-path",
		.kind = OPT_FLAG,
		.env = true,
		.set = config_refuse_run_path,
		.group = GROUP_WORKERS,
		.help = "Not supported (torchrun runs the script in a Python multiprocessing "
			"child).",
	},
	{
		.name = "virtual-local-rank",
		.kind = OPT_FLAG,
		.env = true,
		.set = config_set_flag,
		.offset = offsetof(struct config, virtual_local_rank),
		.group = GROUP_WORKERS,
		.help = "Give every worker LOCAL_RANK=0 and only its own GPU in "
			"CUDA_VISIBLE_DEVICES.",
	},
	{
		.name = "numa-binding",
		.kind = OPT_VALUE,
		.set = config_set_choice,
		.offset = offsetof(struct config, numa_binding),
		.choices = numa_modes,
		.group = GROUP_WORKERS,
		.metavar = "MODE",
		.help = "Bind each worker to the CPUs near its GPU (local rank n uses GPU n): "
			"node, socket, exclusive or core-complex.",
	},
	{
		.name = "numa-membind",
		.kind = OPT_FLAG,
		.set = config_set_flag,
		.offset = offsetof(struct config, numa_membind),
		.group = GROUP_WORKERS,
		.help = "With --numa-binding, also bind each worker's memory to the NUMA nodes "
			"of its CPUs.",
	},
	{
		.name = "numa-fallback",
		.kind = OPT_FLAG,
		.set = config_set_flag,
		.offset = offsetof(struct config, numa_fallback),
		.group = GROUP_WORKERS,
		.help = "Run a worker that cannot be bound unbound, with a warning, instead of "
			"failing.",
	},
	{
		.name = "gpu-bus-ids",
		.kind = OPT_VALUE,
		.set = config_set_gpu_bus_ids,
		.offset = offsetof(struct config, gpu_bus_ids),
		.group = GROUP_WORKERS,
		.metavar = "BUSID,...",
		.help = "The PCI bus ids of the local ranks' GPUs, in local rank order (default: "
			"the NVIDIA or AMD GPUs by bus id, as CUDA_VISIBLE_DEVICES selects).",
	},
	{
		.name = "topology-xml",
		.kind = OPT_VALUE,
		.set = config_set_string,
		.offset = offsetof(struct config, topology_xml),
		.group = GROUP_WORKERS,
		.metavar = "FILE",
		.help = "Read the machine's topology from an hwloc XML file (lstopo --of xml) "
			"instead of this machine ($HWLOC_XMLFILE does the same).",
	},
	{
		.name = "dry-run",
		.kind = OPT_FLAG,
		.set = config_set_flag,
		.offset = offsetof(struct config, dry_run),
		.group = GROUP_WORKERS,
		.help = "Print each local rank's GPU and binding as JSON lines and exit, "
			"starting nothing.",
	},

	/* Restart policy. */
	{
		.name = "restart-backoff",
		.kind = OPT_VALUE,
		.env = true,
		.def = "0",
		.set = config_set_restart_backoff,
		.group = GROUP_RESTARTS,
		.metavar = "MIN:MAX",
		.help = "After a worker failure, wait MIN seconds before the next attempt, twice "
			"as long after each failure in a row, at most MAX, plus jitter (0: at "
			"once). Re-forms for membership changes and requested restarts never "
			"wait.",
	},
	{
		.name = "restart-window",
		.kind = OPT_VALUE,
		.env = true,
		.def = "",
		.set = config_set_restart_window,
		.group = GROUP_RESTARTS,
		.metavar = "N/W",
		.help = "At most N failure restarts in any W seconds; a failure past that ends "
			"the job (restarts exhausted). --max-restarts still applies.",
	},
	{
		.name = "no-restart-exit-codes",
		.kind = OPT_VALUE,
		.env = true,
		.def = "",
		.set = config_set_exit_code_list,
		.group = GROUP_RESTARTS,
		.metavar = "CODE,...",
		.help = "A worker exiting with one of these codes ends the job without a restart.",
	},
	{
		.name = "progress-file",
		.kind = OPT_VALUE,
		.env = true,
		.set = config_set_string,
		.offset = offsetof(struct config, progress_file),
		.group = GROUP_RESTARTS,
		.metavar = "PATH",
		.help = "A file the workers keep a number in (their iteration, say): when it has "
			"not risen over --progress-attempts failed attempts in a row, the job "
			"ends.",
	},
	{
		.name = "progress-attempts",
		.kind = OPT_VALUE,
		.env = true,
		.def = "3",
		.set = config_set_int,
		.offset = offsetof(struct config, progress_attempts),
		.min = 1,
		.max = INT_MAX,
		.group = GROUP_RESTARTS,
		.metavar = "K",
		.help = "Failed attempts in a row without progress in --progress-file that end "
			"the job.",
	},
	{
		.name = "exit-codes",
		.kind = OPT_VALUE,
		.env = true,
		.def = "torchrun",
		.set = config_set_exit_codes,
		.choices = exit_code_modes,
		.group = GROUP_RESTARTS,
		.metavar = "torchrun|detailed",
		.help = "elasticd's exit status: torchrun's 0, 1 and 2, or detailed: also 3 "
			"restarts exhausted, 4 a no-restart exit code, 5 no progress (see "
			"elasticd(8)).",
	},

	/* Hang detection (hang.h): no PET_ variables, as other elasticd-only
	 * options outside torchrun's restart policy. */
	{
		.name = "hang-silence",
		.kind = OPT_VALUE,
		.def = "0",
		.set = config_set_seconds,
		.offset = offsetof(struct config, hang_silence),
		.group = GROUP_HANG,
		.metavar = "SECONDS",
		.help = "A rank that wrote output and then writes no byte to stdout or stderr "
			"for this long is hung: the attempt fails (0: off; needs -r or -t).",
	},
	{
		.name = "hang-cadence",
		.kind = OPT_VALUE,
		.set = config_set_string,
		.offset = offsetof(struct config, hang_cadence),
		.group = GROUP_HANG,
		.metavar = "REGEX",
		.help = "A POSIX extended regular expression (e.g. 'step [0-9]+') that must "
			"match a line of each rank at least every --hang-cadence-interval "
			"seconds once it has matched once.",
	},
	{
		.name = "hang-cadence-interval",
		.kind = OPT_VALUE,
		.def = "0",
		.set = config_set_seconds,
		.offset = offsetof(struct config, hang_cadence_interval),
		.group = GROUP_HANG,
		.metavar = "SECONDS",
		.help = "The longest gap between two --hang-cadence matches.",
	},
	{
		.name = "hang-cadence-start",
		.kind = OPT_VALUE,
		.def = "0",
		.set = config_set_seconds,
		.offset = offsetof(struct config, hang_cadence_start),
		.group = GROUP_HANG,
		.metavar = "SECONDS",
		.help = "The first --hang-cadence match must come within this long of the "
			"rank's start (0: no limit).",
	},

	/* The health gate (health.h), before every rendezvous join: elasticd's
	 * own, no PET_ variables. */
	{
		.name = "health-check",
		.kind = OPT_VALUE,
		.set = config_add_health_check,
		.group = GROUP_HEALTH,
		.metavar = "CMD",
		.help = "Before every rendezvous join run CMD (/bin/sh -c) with the node's facts "
			"in ELASTICD_* variables; exit 0 is healthy. Repeatable.",
		.repeat = true,
	},
	{
		.name = "health-gpus",
		.kind = OPT_VALUE,
		.set = config_set_health_gpus,
		.group = GROUP_HEALTH,
		.metavar = "N",
		.help = "Healthy with at least N GPUs, counted as --nproc-per-node gpu counts "
			"them (hwloc, or --topology-xml).",
	},
	{
		.name = "health-nics",
		.kind = OPT_VALUE,
		.set = config_set_health_nics,
		.group = GROUP_HEALTH,
		.metavar = "ib|NETDEV,...",
		.help = "Healthy when every InfiniBand port is ACTIVE (ib) and each named netdev's "
			"operstate is up (or unknown), read under --health-root.",
	},
	{
		.name = "health-writable",
		.kind = OPT_VALUE,
		.set = config_add_health_check,
		.group = GROUP_HEALTH,
		.metavar = "DIR",
		.help = "Healthy when a file can be created in DIR (a checkpoint directory). "
			"Repeatable.",
		.repeat = true,
	},
	{
		.name = "health-free-space",
		.kind = OPT_VALUE,
		.set = config_add_health_free_space,
		.group = GROUP_HEALTH,
		.metavar = "PATH:SIZE",
		.help = "Healthy with at least SIZE bytes (K, M, G, T, P suffixes) free on PATH's "
			"file system. Repeatable.",
		.repeat = true,
	},
	{
		.name = "health-root",
		.kind = OPT_VALUE,
		.def = "/",
		.set = config_set_nonempty_string,
		.offset = offsetof(struct config, health_root),
		.group = GROUP_HEALTH,
		.metavar = "DIR",
		.help = "The root under which --health-nics reads sys/class (a fixture tree in "
			"tests).",
	},
	{
		.name = "health-timeout",
		.kind = OPT_VALUE,
		.def = "60",
		.set = config_set_positive_seconds,
		.offset = offsetof(struct config, health_timeout),
		.group = GROUP_HEALTH,
		.metavar = "SECONDS",
		.help = "Each check's deadline: a check still running then is killed and fails.",
	},
	{
		.name = "health-retries",
		.kind = OPT_VALUE,
		.def = "0",
		.set = config_set_int,
		.offset = offsetof(struct config, health_retries),
		.min = 0,
		.max = INT_MAX,
		.group = GROUP_HEALTH,
		.metavar = "N",
		.help = "Failed health gates tried again (after --health-retry-interval, doubling) "
			"before elasticd exits 6 (bad node).",
	},
	{
		.name = "health-retry-interval",
		.kind = OPT_VALUE,
		.def = "10",
		.set = config_set_positive_seconds,
		.offset = offsetof(struct config, health_retry_interval),
		.group = GROUP_HEALTH,
		.metavar = "SECONDS",
		.help = "The wait after the first failed health gate; each further failure "
			"doubles it, up to 16 times.",
	},

	{
		.name = "gpu-memory-wait",
		.kind = OPT_VALUE,
		.def = "0",
		.set = config_set_seconds,
		.offset = offsetof(struct config, gpu_memory_wait),
		.group = GROUP_HEALTH,
		.metavar = "SECONDS",
		.help = "Before a respawn wait up to this long for every GPU's used memory to "
			"fall below --gpu-memory-threshold and the last attempt's processes to "
			"leave them (NVML; 0: off).",
	},
	{
		.name = "gpu-memory-threshold",
		.kind = OPT_VALUE,
		.def = "1G",
		.set = config_set_size,
		.offset = offsetof(struct config, gpu_memory_threshold),
		.group = GROUP_HEALTH,
		.metavar = "SIZE",
		.help = "A GPU using less memory than this is released (K, M, G, T, P suffixes).",
	},
	{
		.name = "nvml-library",
		.kind = OPT_VALUE,
		.def = "libnvidia-ml.so.1",
		.set = config_set_nonempty_string,
		.offset = offsetof(struct config, nvml_library),
		.group = GROUP_HEALTH,
		.metavar = "PATH",
		.help = "The NVML library --gpu-memory-wait loads (dlopen); without it there "
			"is nothing to wait for.",
	},

	{
		.name = "quarantine",
		.kind = OPT_VALUE,
		.def = "",
		.set = config_set_restart_window,
		.group = GROUP_HEALTH,
		.metavar = "F/W",
		.help = "F failed attempts of this node's workers within W seconds quarantine "
			"it: it leaves the job for --quarantine-cooldown, then rejoins.",
	},
	{
		.name = "quarantine-cooldown",
		.kind = OPT_VALUE,
		.def = "300",
		.set = config_set_positive_seconds,
		.offset = offsetof(struct config, quarantine_cooldown),
		.group = GROUP_HEALTH,
		.metavar = "SECONDS",
		.help = "How long a quarantine keeps the node out; doubled for each earlier one.",
	},
	{
		.name = "quarantine-action",
		.kind = OPT_VALUE,
		.def = "wait",
		.set = config_set_quarantine_action,
		.group = GROUP_HEALTH,
		.metavar = "wait|exit",
		.help = "A quarantined node waits out the cooldown, or exits 6 (bad node).",
	},

	/* Rendezvous. */
	{
		.name = "nnodes",
		.kind = OPT_VALUE,
		.env = true,
		.def = "1:1",
		.set = config_set_nnodes,
		.group = GROUP_RDZV,
		.metavar = "N|MIN:MAX",
		.help = "Number of nodes, or the range of nodes of an elastic job.",
	},
	{
		.name = "rdzv-backend",
		.kind = OPT_VALUE,
		.env = true,
		.def = "static",
		.set = config_set_rdzv_backend,
		.offset = offsetof(struct config, rdzv_backend),
		.choices = rdzv_backends,
		.group = GROUP_RDZV,
		.metavar = "NAME",
		.help = "Rendezvous backend: static, c10d or etcd (etcd's v3 API).",
	},
	{
		.name = "rdzv-endpoint",
		.kind = OPT_VALUE,
		.env = true,
		.def = "",
		.set = config_set_string,
		.offset = offsetof(struct config, rdzv_endpoint),
		.group = GROUP_RDZV,
		.metavar = "HOST[:PORT]",
		.help = "Rendezvous endpoint (static: --master-addr:--master-port when empty).",
	},
	{
		.name = "rdzv-id",
		.alias = "run-id",
		.kind = OPT_VALUE,
		.env = true,
		.def = "none",
		.set = config_set_string,
		.offset = offsetof(struct config, rdzv_id),
		.group = GROUP_RDZV,
		.metavar = "ID",
		.help = "Run id shared by every node of the job (TORCHELASTIC_RUN_ID).",
	},
	{
		.name = "rdzv-conf",
		.kind = OPT_VALUE,
		.env = true,
		.def = "",
		.set = config_set_rdzv_conf,
		.group = GROUP_RDZV,
		.metavar = "K=V,...",
		.help = "More rendezvous settings (e.g. timeout=900,join_timeout=600).",
	},
	{
		.name = "standalone",
		.kind = OPT_FLAG,
		.env = true,
		.set = config_set_flag,
		.offset = offsetof(struct config, standalone),
		.group = GROUP_RDZV,
		.help = "Single-node job: c10d rendezvous on localhost:0 with a fresh run id "
			"(unless --rdzv-id is given).",
	},
	{
		.name = "node-rank",
		.kind = OPT_VALUE,
		.env = true,
		.def = "0",
		.set = config_set_int,
		.offset = offsetof(struct config, node_rank),
		.min = 0,
		.max = INT_MAX,
		.group = GROUP_RDZV,
		.metavar = "N",
		.help = "Rank of this node (static backend only).",
	},
	{
		.name = "master-addr",
		.kind = OPT_VALUE,
		.env = true,
		.def = "127.0.0.1",
		.set = config_set_string,
		.offset = offsetof(struct config, master_addr),
		.group = GROUP_RDZV,
		.metavar = "HOST",
		.help = "Address of the node of rank 0 (static backend only).",
	},
	{
		.name = "master-port",
		.kind = OPT_VALUE,
		.env = true,
		.def = "29500",
		.set = config_set_int,
		.offset = offsetof(struct config, master_port),
		.min = 0,
		.max = 65535,
		.group = GROUP_RDZV,
		.metavar = "PORT",
		.help = "Port on the node of rank 0 (static backend only). Without it, a one-node "
			"static job runs as --standalone does.",
	},
	{
		.name = "local-addr",
		.kind = OPT_VALUE,
		.env = true,
		.set = config_set_string,
		.offset = offsetof(struct config, local_addr),
		.group = GROUP_RDZV,
		.metavar = "ADDR",
		.help = "Address this node advertises as MASTER_ADDR (default: localhost for a "
			"one-node job).",
	},

	/* Logs and output. */
	{
		.name = "log-dir",
		.kind = OPT_VALUE,
		.env = true,
		.set = config_set_string,
		.offset = offsetof(struct config, log_dir),
		.group = GROUP_LOGS,
		.metavar = "DIR",
		.help = "Base directory of the per-run log directories (default: under $TMPDIR).",
	},
	{
		.name = "redirects",
		.short_name = 'r',
		.kind = OPT_VALUE,
		.env = true,
		.def = "0",
		.set = config_set_std_map,
		.offset = offsetof(struct config, redirects),
		.group = GROUP_LOGS,
		.metavar = "MASK|RANK:MASK,...",
		.help = "Send workers' streams to files in the log directory: 1 stdout, 2 stderr, "
			"3 both, for every local rank or per rank (0:1,1:2).",
	},
	{
		.name = "tee",
		.short_name = 't',
		.kind = OPT_VALUE,
		.env = true,
		.def = "0",
		.set = config_set_std_map,
		.offset = offsetof(struct config, tee),
		.group = GROUP_LOGS,
		.metavar = "MASK|RANK:MASK,...",
		.help = "As --redirects, and also copy the lines to the console with a "
			"[<role><local_rank>]: prefix.",
	},
	{
		.name = "log-line-prefix-template",
		.kind = OPT_VALUE,
		.env = true,
		.env_fallback = "TORCHELASTIC_LOG_LINE_PREFIX_TEMPLATE",
		.def = "[${role_name}${local_rank}]:",
		.set = config_set_string,
		.offset = offsetof(struct config, log_line_prefix_template),
		.group = GROUP_LOGS,
		.metavar = "TEMPLATE",
		.help = "The prefix of teed lines: ${role_name}, ${local_rank}, ${rank} (global), "
			"${hostname} and ${pid} (the worker's) are replaced.",
	},
	{
		.name = "local-ranks-filter",
		.kind = OPT_VALUE,
		.env = true,
		.def = "",
		.set = config_set_ranks_filter,
		.group = GROUP_LOGS,
		.metavar = "RANK,...",
		.help = "Show only these local ranks' output on the console (log files keep all).",
	},
	{
		.name = "logs-specs",
		.kind = OPT_VALUE,
		.set = config_set_logs_specs,
		.offset = offsetof(struct config, logs_specs),
		.group = GROUP_LOGS,
		.metavar = "default",
		.help = "The layout of the log directory: only torchrun's default exists; any "
			"other name is an error.",
	},
	{
		.name = "duplicate-stdout-filters",
		.kind = OPT_VALUE,
		.env = true,
		.set = config_set_string,
		.offset = offsetof(struct config, duplicate_stdout_filters),
		.group = GROUP_LOGS,
		.metavar = "FILTER,...",
		.help = "Also copy teed stdout lines that contain any of these strings (,, is a "
			"comma) to filtered_stdout.log in the attempt directory.",
	},
	{
		.name = "duplicate-stderr-filters",
		.kind = OPT_VALUE,
		.env = true,
		.set = config_set_string,
		.offset = offsetof(struct config, duplicate_stderr_filters),
		.group = GROUP_LOGS,
		.metavar = "FILTER,...",
		.help = "As --duplicate-stdout-filters, for stderr: filtered_stderr.log.",
	},
	{
		.name = "event-log-handler",
		.kind = OPT_VALUE,
		.env = true,
		.def = "file",
		.set = config_set_choice,
		.offset = offsetof(struct config, event_log_handler),
		.choices = event_log_handlers,
		.group = GROUP_LOGS,
		.metavar = "NAME",
		.help = "Where agent and rendezvous events go, as JSON lines torch's Event and "
			"RdzvEvent read: null, console (stderr) or file (events.jsonl in the run's "
			"log directory, or --event-log-file).",
	},
	{
		.name = "event-log-file",
		.kind = OPT_VALUE,
		.env = true,
		.set = config_set_string,
		.offset = offsetof(struct config, event_log_file),
		.group = GROUP_LOGS,
		.metavar = "PATH",
		.help = "Append events to this file (with --event-log-handler file).",
	},
	{
		.name = "event-ring-size",
		.kind = OPT_VALUE,
		.env = true,
		.def = "1024",
		.set = config_set_int,
		.offset = offsetof(struct config, event_ring_size),
		.min = 0,
		.max = 65536,
		.group = GROUP_LOGS,
		.metavar = "N",
		.help = "Latest events kept in memory for the control socket (0: none).",
	},

	/* Signals and shutdown. */
	{
		.name = "signals-to-handle",
		.kind = OPT_VALUE,
		.env = true,
		.def = "SIGTERM,SIGINT,SIGHUP,SIGQUIT",
		/* systemd's reload and logrotate send SIGHUP: re-open the logs. */
		.def_service = "SIGTERM,SIGINT,SIGQUIT",
		.set = config_set_signals,
		.group = GROUP_SIGNALS,
		.metavar = "SIG,...",
		.help = "Signals that stop the workers with the same signal, then elasticd. "
			"SIGHUP, when not listed, re-opens the event log file instead.",
	},
	{
		.name = "shutdown-timeout",
		.kind = OPT_VALUE,
		.env = true,
		.env_fallback = "TORCH_ELASTIC_SHUTDOWN_TIMEOUT",
		.def = "30",
		.set = config_set_int,
		.offset = offsetof(struct config, shutdown_timeout),
		.min = 0,
		.max = INT_MAX,
		.group = GROUP_SIGNALS,
		.metavar = "SECONDS",
		.help = "Grace time between the stop signal and SIGKILL when the workers are "
			"stopped for a restart or a failure.",
	},
	{
		.name = "term-timeout",
		.kind = OPT_VALUE,
		.env = true,
		.set = config_set_int,
		.offset = offsetof(struct config, term_timeout),
		.min = 0,
		.max = INT_MAX,
		.group = GROUP_SIGNALS,
		.metavar = "SECONDS",
		.help = "Grace time between a handled signal, forwarded to the workers, and "
			"SIGKILL (default: --shutdown-timeout).",
	},
	{
		.name = "forward-signals",
		.kind = OPT_VALUE,
		.env = true,
		.def = "SIGUSR1,SIGUSR2",
		.set = config_set_forward_signals,
		.group = GROUP_SIGNALS,
		.metavar = "SIG,...",
		.help = "Signals sent on to every worker's process group while the workers go on "
			"running (a preemption notice); \"\" for none.",
	},

	/* Other. */
	{
		.name = "control-socket",
		.kind = OPT_VALUE,
		.env = true,
		.set = config_set_string,
		.offset = offsetof(struct config, control_socket),
		.group = GROUP_OTHER,
		.metavar = "PATH",
		.help = "Serve the control plane (elasticd-ctl(7)) on this Unix socket (default: "
			"$RUNTIME_DIRECTORY/elasticd.sock under systemd, else "
			"/run/elasticd/<run_id>.sock for root, else "
			"$XDG_RUNTIME_DIR/elasticd/<run_id>.sock, else /tmp/elasticd-<uid>/).",
	},
	{
		.name = "control-socket-mode",
		.kind = OPT_VALUE,
		.env = true,
		.set = config_set_mode,
		.offset = offsetof(struct config, control_socket_mode),
		.group = GROUP_OTHER,
		.metavar = "MODE",
		.help = "File mode of the control socket, in octal (default: 0600, 0660 with "
			"--control-socket-group).",
	},
	{
		.name = "control-socket-group",
		.kind = OPT_VALUE,
		.env = true,
		.set = config_set_string,
		.offset = offsetof(struct config, control_socket_group),
		.group = GROUP_OTHER,
		.metavar = "GROUP",
		.help = "Also let this group (name or number) use the control socket.",
	},
	{
		.name = "no-worker-server",
		.kind = OPT_FLAG,
		.env = true,
		.set = config_set_flag,
		.offset = offsetof(struct config, no_worker_server),
		.group = GROUP_OTHER,
		.help = "Do not give workers TORCH_WORKER_SERVER_SOCKET (their own control socket, "
			"reached through /ranks/<n>/ on the control socket).",
	},
	{
		.name = "config",
		.kind = OPT_VALUE,
		.set = config_set_string,
		.offset = offsetof(struct config, config_file),
		.group = GROUP_OTHER,
		.metavar = "FILE",
		.help = "Read settings from FILE: key = value lines with the long option names "
			"(see elasticd.conf(5)). The command line and PET_* variables beat it.",
	},
	{
		.name = "help",
		.short_name = 'h',
		.kind = OPT_HELP,
		.group = GROUP_OTHER,
		.help = "Show this help and exit.",
	},
	{
		.name = "version",
		.kind = OPT_VERSION,
		.group = GROUP_OTHER,
		.help = "Show the version and exit.",
	},
};

_Static_assert(ARRAY_SIZE(config_options) == CONFIG_OPTION_COUNT,
	       "CONFIG_OPTION_COUNT (config_internal.h) must count the rows of config_options[]");

/* Option lookup. */

size_t
config_option_index(const char *name)
{
	size_t i;

	for (i = 0; i < ARRAY_SIZE(config_options); i++) {
		if (strcmp(config_options[i].name, name) == 0) {
			break;
		}
	}
	return i;
}

/* Whether s[0..len) is a prefix of canon, with '-' read as '_' when underscore;
 * *ret_exact tells whether it is all of it. */
static bool
spelling_prefix(const char *canon, bool underscore, const char *s, size_t len, bool *ret_exact)
{
	for (size_t k = 0; k < len; k++) {
		char c = canon[k];

		if (c == '\0') {
			return false;
		}
		if (underscore && c == '-') {
			c = '_';
		}
		if (s[k] != c) {
			return false;
		}
	}
	*ret_exact = canon[len] == '\0';
	return true;
}

/* Find the option named by "--" + s[0..len), exactly in any of its spellings or
 * as a prefix of the spellings of one option only (argparse's allow_abbrev).
 * Returns the option, or NULL with *ret_n the number of distinct options the
 * prefix matches (0 unknown, > 1 ambiguous), listed in matches when non-NULL. */
const struct config_option *
config_option_find_long(const char *s, size_t len, size_t *ret_n,
			const struct config_option **matches)
{
	const struct config_option *only = NULL;
	size_t n = 0;

	if (len == 0) {
		*ret_n = 0;
		return NULL;
	}
	for (size_t i = 0; i < ARRAY_SIZE(config_options); i++) {
		const char *spellings[] = {config_options[i].name, config_options[i].alias};
		bool hit = false;

		for (size_t j = 0; j < ARRAY_SIZE(spellings) && spellings[j]; j++) {
			for (int u = 0; u < 2; u++) {
				bool exact = false;

				if (spelling_prefix(spellings[j], u, s, len, &exact)) {
					if (exact) {
						return &config_options[i];
					}
					hit = true;
				}
			}
		}
		if (hit) {
			if (matches) {
				matches[n] = &config_options[i];
			}
			n++;
			only = &config_options[i];
		}
	}
	*ret_n = n;
	return n == 1 ? only : NULL;
}

const struct config_option *
config_option_find_short(char c)
{
	for (size_t i = 0; i < ARRAY_SIZE(config_options); i++) {
		if (c != '\0' && config_options[i].short_name == c) {
			return &config_options[i];
		}
	}
	return NULL;
}

/* The option whose long name or alias is key, in its dash or underscore
 * spelling; no prefixes. */
const struct config_option *
config_option_find_exact(const char *key)
{
	size_t len = strlen(key);

	for (size_t i = 0; i < ARRAY_SIZE(config_options); i++) {
		const char *spellings[] = {config_options[i].name, config_options[i].alias};

		for (size_t j = 0; j < ARRAY_SIZE(spellings) && spellings[j]; j++) {
			for (int u = 0; u < 2; u++) {
				bool exact = false;

				if (spelling_prefix(spellings[j], u, key, len, &exact) && exact) {
					return &config_options[i];
				}
			}
		}
	}
	return NULL;
}
