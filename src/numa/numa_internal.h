/* numa_internal.h — the loaded topology, shared by the NUMA module's own files
 * (numa_topology.c: loading hwloc, allowed sets; numa_gpu.c: the GPUs; numa_plan.c:
 * the per-rank plan).
 * Nothing outside numa*.c includes it. */
#pragma once

#include <hwloc.h>
#include <stdbool.h>

#include "numa.h"

/* A device's NUMA node as sysfs gives it (numa_topology_set_device_node). */
struct device_node {
	char busid[NUMA_BUSID_SIZE];
	int node;
};

struct numa_gpu {
	hwloc_obj_t dev;
	char busid[NUMA_BUSID_SIZE];
	hwloc_bitmap_t home; /* CPU-bearing NUMA nodes it is attached to, OS indices */
};

struct numa_topology {
	hwloc_topology_t topo;
	char *source; /* the XML file, or NULL for this machine */
	bool live;    /* discovered here */
	/* A saved topology: this machine's online CPUs and NUMA nodes, which a
	 * plan must stay in to be applied; NULL when live. */
	hwloc_bitmap_t host_cpus;
	hwloc_bitmap_t host_nodes;
	hwloc_bitmap_t allowed;       /* CPUs the workers may use */
	hwloc_bitmap_t allowed_nodes; /* memory nodes the workers may use */
	hwloc_bitmap_t cpuless;       /* NUMA nodes sysfs says have no CPU */

	struct device_node *dev_nodes;
	size_t n_dev_nodes;

	struct numa_gpu *gpus;
	size_t n_gpus;
	bool gpus_unknown; /* CUDA_VISIBLE_DEVICES names GPUs by UUID */
	size_t n_unknown;  /* then: how many it names */
	char *gpu_note;
};

/* ---- numa_topology.c --------------------------------------------------------- */

/* "0-3,8-11" (hwloc's list form, as sysfs and numactl), malloc'd; "" when empty. */
char *numa_bitmap_list(hwloc_const_bitmap_t b);
/* An empty bitmap; aborts when out of memory. */
hwloc_bitmap_t numa_bitmap_new(void);
/* A copy of src; aborts when out of memory. */
hwloc_bitmap_t numa_bitmap_dup(hwloc_const_bitmap_t src);
/* Whether CPUs can be bound near NUMA node n of t: it has CPUs (not GPU memory,
 * MCDRAM, NVM or another memory-only node). */
bool numa_node_has_cpus(const struct numa_topology *t, hwloc_obj_t n);

/* ---- numa_gpu.c -------------------------------------------------------------- */

/* Forget t's selected GPUs and its GPU note (numa_topology_select_gpus). */
void numa_gpus_clear(struct numa_topology *t);
