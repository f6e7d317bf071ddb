/* numa.h — where each worker runs. Find the node's GPUs with hwloc, plan for
 * every local rank the CPUs (and, when asked, the memory nodes) near its GPU in
 * one of torchrun's --numa-binding modes, and apply a plan in a forked child.
 *
 * Three steps with separate jobs: numa_topology_load() and
 * numa_topology_select_gpus() do the I/O (hwloc discovery or an XML file, and
 * a few sysfs reads on a live machine); numa_plan_new() is a pure function of
 * the loaded topology; numa_apply() is two system calls, safe between fork and
 * exec. Nothing here logs: errors come back as -errno and a message.
 *
 * Rules (as torch 2.x torch/numa/binding.py, reference torchelastic-agent.md
 * §7): local rank n uses GPU n of the ordered GPU list. A GPU's NUMA node is
 * where its PCI device is attached. The CPUs of a node are those of the node
 * that the workers may use: the allowed set, see numa_topology_load(). */
#pragma once

#include <jansson.h>
#include <sched.h>
#include <stdbool.h>
#include <stddef.h>

/* torchrun's --numa-binding modes (torch's AffinityMode), plus "none". */
enum numa_mode {
	NUMA_MODE_NONE,         /* no binding; the plan only names each rank's GPU */
	NUMA_MODE_NODE,         /* every allowed CPU of the GPU's NUMA node */
	NUMA_MODE_SOCKET,       /* every allowed CPU of the nodes of the GPU's package */
	NUMA_MODE_EXCLUSIVE,    /* a share of whole cores of the node, one per GPU there */
	NUMA_MODE_CORE_COMPLEX, /* one last-level-cache group of the node */
};

/* Parse a --numa-binding value: "node", "socket", "exclusive" or
 * "core-complex"; NULL gives NUMA_MODE_NONE. Returns 0 or -EINVAL. */
int numa_mode_from_string(const char *s, enum numa_mode *ret);

/* The --numa-binding spelling of m, or NULL for NUMA_MODE_NONE. Static storage. */
const char *numa_mode_to_string(enum numa_mode m);

/* Room for a canonical PCI bus id "dddd:bb:dd.f" (a domain may have up to 8
 * hex digits) and its NUL. */
#define NUMA_BUSID_SIZE 20

/* Parse a PCI bus id as lspci, sysfs and nvidia-smi print it: "bb:dd.f" or
 * "dddd:bb:dd.f", hexadecimal, any case, the domain 1 to 8 digits (nvidia-smi's
 * "00000000:34:00.0"). Writes the canonical lower-case form
 * ("0000:34:00.0") to ret. Returns 0 or -EINVAL (ret untouched). */
int numa_busid_parse(const char *s, char ret[NUMA_BUSID_SIZE]);

/* Parse a --gpu-bus-ids value: bus ids separated by commas, spaces around
 * them allowed. On success *ret is a new strv of canonical bus ids (at least
 * one; strv_free). Returns 0, or -EINVAL with *reterr (malloc'd) naming the bad
 * entry: empty, not a bus id, or listed twice. */
int numa_busid_list_parse(const char *list, char ***ret, char **reterr);

/* ---- discovery ------------------------------------------------------------ */

struct numa_topology;

/* Load the topology once: from the hwloc XML file xml_path, or, when NULL,
 * from this machine (hwloc then also honours HWLOC_XMLFILE, HWLOC_SYNTHETIC
 * and HWLOC_FSROOT itself). I/O devices are kept at HWLOC_TYPE_FILTER_KEEP_IMPORTANT;
 * the x86, opencl and gl components (and CUDA/NVML/ROCm/Level Zero plugins if
 * installed) are disabled, so loading neither re-binds this process nor opens a
 * GPU driver. Disallowed CPUs and nodes are kept in the tree so that a device
 * whose CPUs are all disallowed keeps its real place.
 *
 * The CPUs the workers may use (the "allowed" set): on this machine, hwloc's
 * allowed set (the cgroup cpuset) intersected with this process's affinity
 * (sched_getaffinity, e.g. taskset); from a file, the file's allowed set, and
 * also this process's affinity when every CPU of the file is online here
 * (the plan can then be applied on this host). Memory nodes: hwloc's allowed
 * nodeset. On this machine NUMA nodes whose sysfs cpulist is empty are marked
 * CPU-less.
 *
 * Returns 0 and *ret (numa_topology_free), or -errno with *reterr (malloc'd):
 * -ENOENT or -EINVAL for a missing or invalid XML file. */
int numa_topology_load(const char *xml_path, struct numa_topology **ret, char **reterr);

/* Free; accepts NULL. */
void numa_topology_free(struct numa_topology *t);

/* Whether the topology was discovered on this machine (not read from a file). */
bool numa_topology_is_live(const struct numa_topology *t);

/* The CPUs the workers may use, in list form ("0-3,8-11"; "" when none).
 * Returns a malloc'd string. */
char *numa_topology_allowed_cpus(const struct numa_topology *t);

/* Narrow the allowed CPUs to those in list ("0-3,8"): what a cgroup cpuset or
 * taskset does on a real machine. Returns 0 or -EINVAL (list unparsable). */
int numa_topology_restrict(struct numa_topology *t, const char *list);

/* Record the NUMA node that sysfs (/sys/bus/pci/devices/<busid>/numa_node)
 * gives for a PCI device; -1 means unknown. numa_topology_select_gpus() reads
 * sysfs itself on a live machine; this lets a saved topology say the same (for
 * instance Intel SNC, where hwloc attaches a GPU to its whole package). Returns
 * 0, -EINVAL (bad bus id) or -ENOENT (no such PCI device in the topology). */
int numa_topology_set_device_node(struct numa_topology *t, const char *busid, int node);

/* Choose the GPUs local ranks use, in order (local rank n gets entry n).
 * bus_ids: a --gpu-bus-ids value (comma-separated bus ids): exactly those
 * PCI devices, in that order; any PCI device hwloc keeps may be named.
 * Otherwise the GPUs found: PCI devices of NVIDIA (0x10de), or when there is
 * none AMD (0x1002), of class display (0x0300, 0x0302, 0x0380) or processing
 * accelerator (0x1200), sorted by bus id (CUDA_DEVICE_ORDER=PCI_BUS_ID);
 * NVSwitches (0x0680), audio functions (0x0403) and the AMD ES1000 and Rage
 * BMC chips (1002:515e, 1002:5159) are not GPUs. Then cvd, the workers'
 * CUDA_VISIBLE_DEVICES when set, selects from that list as CUDA does: integer
 * indices, the list ending at the first entry that is not a valid new index; a
 * list with a GPU-<uuid> or MIG-... entry cannot be mapped to PCI devices, so
 * the GPUs are then "unknown" (their count is the number of entries, and no
 * rank is bound). Each GPU's NUMA node(s): on a live machine sysfs numa_node
 * when >= 0 (as torch), else (and from a file) the CPU-bearing NUMA nodes whose
 * locality equals the device's, or lies within it (SNC), or else the smallest
 * that contains it.
 * Returns the number of GPUs (>= 0), or -EINVAL with *reterr (malloc'd) when
 * bus_ids is invalid or names a device the topology lacks. */
int numa_topology_select_gpus(struct numa_topology *t, const char *bus_ids, const char *cvd,
			      char **reterr);

/* The GPUs numa_topology_count_gpus() counts. */
enum numa_gpu_vendor {
	NUMA_GPU_CUDA,  /* NVIDIA, or when there is none AMD: the GPUs CUDA or ROCm use */
	NUMA_GPU_INTEL, /* Intel: torch's xpu devices */
};

/* Count the GPUs of one vendor as numa_topology_select_gpus() finds them
 * without --gpu-bus-ids or CUDA_VISIBLE_DEVICES, one per PCI device.
 * NUMA_GPU_CUDA: the NVIDIA GPUs, or when there is none the AMD ones.
 * NUMA_GPU_INTEL: Intel (0x8086) display devices (0x0300, 0x0302, 0x0380;
 * the Data Center GPU Max and Flex series report 0x0380), but not Intel's
 * processing accelerators (0x1200), which are client NPUs, not GPUs. Pure;
 * leaves the selection alone. Returns the count (>= 0). */
int numa_topology_count_gpus(const struct numa_topology *t, enum numa_gpu_vendor vendor);

/* After numa_topology_select_gpus: one line about what the selection left out
 * or could not do (other-vendor GPUs ignored; GPUs named by UUID), or NULL.
 * Borrowed, valid until the next selection or numa_topology_free. */
const char *numa_topology_gpu_note(const struct numa_topology *t);

/* ---- the plan --------------------------------------------------------------- */

/* The binding of one local rank. Strings are owned by the plan. */
struct numa_binding {
	int local_rank;
	char *gpu;       /* canonical bus id of the rank's GPU, NULL: none (or unknown) */
	int *numa_nodes; /* OS indices, ascending: the nodes of cpus (unbound: of the GPU) */
	size_t n_numa_nodes;
	char *numa_nodes_list; /* numa_nodes in list form ("0-1"), "" when none */
	char *cpus;            /* the CPU set in list form ("0-3,8-11"); NULL: unbound */
	char *mems;            /* the memory nodes (--numa-membind) in list form; NULL: untouched */
	char *error;           /* why the rank runs unbound although binding was asked
				* (--numa-fallback), NULL otherwise */

	/* What numa_apply() does in the child, computed here so that the child
	 * only makes system calls. */
	cpu_set_t *cpu_mask; /* NULL: leave the affinity alone */
	size_t cpu_mask_size;
	unsigned long *mem_mask; /* NULL: leave the memory policy alone */
	unsigned long mem_maxnode;
	bool fallback;     /* a failure in the child is reported, and the worker runs anyway */
	char *child_error; /* one line the child writes to its stderr if the kernel refuses */
	size_t child_error_len;
};

struct numa_plan {
	enum numa_mode mode;
	bool membind;
	size_t n;                   /* local ranks */
	struct numa_binding *ranks; /* n entries, by local rank */
	char *warning;              /* about every rank (e.g. GPUs named by UUID), or NULL */
};

struct numa_request {
	enum numa_mode mode;
	int nproc;      /* local ranks, > 0 */
	bool membind;   /* also bind memory to the chosen nodes (MPOL_BIND; --numa-membind) */
	bool fallback;  /* a rank that cannot be bound runs unbound, its reason in error
			 * (--numa-fallback), instead of failing the plan */
	bool plan_only; /* --dry-run: plan even when the topology is another machine's */
};

/* Plan every local rank, as torch 2.x `_get_logical_cpus_to_bind_to` per
 * mode, but with hwloc objects for sysfs and always inside the allowed set:
 * - node: the allowed CPUs of the GPU's node(s).
 * - socket: the allowed CPUs of every CPU-bearing node whose lowest allowed CPU
 *   lies in the package of the lowest allowed CPU of the GPU's node(s).
 * - exclusive: the GPUs on the same node(s), in GPU order, share its cores
 *   (a core is its allowed CPUs, cores ordered by their lowest CPU, disallowed
 *   siblings included): C cores for G GPUs give each C / G cores, and the first
 *   C % G GPUs one more; C < G is an error ("There are only C physical cores on
 *   NUMA node N, but there are G GPUs associated with this NUMA node.").
 * - core-complex: the node's allowed CPUs grouped by their highest-level data
 *   or unified cache, groups ordered by more allowed CPUs first, then lowest
 *   CPU; the r-th GPU of the node gets group r modulo the number of groups
 *   (one group for the node when there is no cache).
 * A rank without a GPU, a GPU whose CPUs are all disallowed, an empty set or
 * (unless plan_only) a topology whose CPUs are not this machine's, or with
 * membind whose nodes are not, fails the plan. With fallback such a rank
 * runs unbound instead. CPU-less and GPU-memory NUMA nodes are never chosen.
 * Returns 0 and *ret (numa_plan_free), or -EINVAL with *reterr (malloc'd)
 * naming the local rank, its GPU and the reason; -ERANGE (and *reterr) when
 * exclusive finds fewer cores than GPUs on a node: more local ranks than the
 * allowed CPUs can take, which the caller may treat as a usage error. */
int numa_plan_new(const struct numa_topology *t, const struct numa_request *req,
		  struct numa_plan **ret, char **reterr);

/* Free; accepts NULL. */
void numa_plan_free(struct numa_plan *p);

/* Whether the plan gives some local rank a GPU: then local rank n's GPU is
 * the n-th in PCI bus id order, and workers need CUDA_DEVICE_ORDER=PCI_BUS_ID
 * for cuda:n to be it. */
bool numa_plan_names_gpus(const struct numa_plan *p);

/* The binding of local_rank as --dry-run prints it: {"local_rank": n, "gpu":
 * bus id or null, "numa_nodes": [os indices], "cpus": list or null, "mems":
 * list or null, "mode": name or null}. Returns a new reference. */
json_t *numa_binding_to_json(const struct numa_plan *p, size_t local_rank);

/* Apply b in the calling process, between fork and exec: set_mempolicy
 * (MPOL_BIND) with b->mem_mask, then sched_setaffinity with b->cpu_mask, each
 * when set; all or nothing (a refused affinity puts the memory policy back to
 * MPOL_DEFAULT), so a failure leaves the process unbound. Async-signal-safe:
 * system calls only, no allocation. Returns 0 or -errno of the call that
 * failed. */
int numa_apply(const struct numa_binding *b);
