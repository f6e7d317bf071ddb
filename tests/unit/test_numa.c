/* NUMA binding: GPU discovery and the per-rank plan in every mode, on the
 * hand-made topologies in tests/data/topo and on the real machines in
 * ../shared/topologies; the CLI flags; applying a plan in a child. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "config.h"
#include "numa.h"
#include "numa_crowd.h"
#include "spawn.h"
#include "util.h"
#include "wenv.h"

/* ---- fixtures -------------------------------------------------------------- */

/* tests/data/topo/<name>.xml, or ../shared/topologies/<name>.xml for a name
 * starting with "shared/". Fails the test when the file is not there. */
static char *
topo_path(const char *name)
{
	const char *tests = getenv("TESTS_DIR");
	const char *root = getenv("SOURCE_ROOT");
	char *path;

	if (strncmp(name, "shared/", 7) == 0) {
		if (!root) {
			fail_msg("SOURCE_ROOT is not set (run the tests with meson test)");
		}
		path = xasprintf("%s/../shared/topologies/%s.xml", root, name + 7);
	} else {
		if (!tests) {
			fail_msg("TESTS_DIR is not set (run the tests with meson test)");
		}
		path = xasprintf("%s/data/topo/%s.xml", tests, name);
	}
	if (access(path, R_OK) < 0) {
		fail_msg("topology fixture %s is missing: %s", path, strerror(errno));
	}
	return path;
}

static struct numa_topology *
load(const char *name)
{
	char *path = topo_path(name), *err = NULL;
	struct numa_topology *t = NULL;
	int r = numa_topology_load(path, &t, &err);

	if (r < 0) {
		fail_msg("cannot load %s: %s", path, err ? err : strerror(-r));
	}
	free(path);
	assert_false(numa_topology_is_live(t));
	return t;
}

/* ---- GPU discovery ----------------------------------------------------------- */

struct gpus_case {
	const char *topo;
	const char *bus_ids; /* --gpu-bus-ids */
	const char *cvd;     /* CUDA_VISIBLE_DEVICES */
	int count;           /* numa_topology_select_gpus's answer */
	const char *gpus[17];
	const char *note; /* substring of the note, NULL: none */
};

static const struct gpus_case gpus_cases[] = {
	/* NVSwitch, audio function and Matrox BMC VGA are not GPUs; bus-id order. */
	{"uneven-smt", .count = 4,
	 .gpus = {"0000:17:00.0", "0000:18:00.0", "0000:3a:00.0", "0000:b1:00.0"}},
	{"gpuless", .count = 0},
	/* NVIDIA wins over AMD: CUDA sees only the NVIDIA ones. */
	{"mixed-vendors", .count = 2, .gpus = {"0000:03:00.0", "0000:83:00.0"},
	 .note = "2 AMD GPUs ignored"},
	/* AMD only: display and processing-accelerator classes, not the ES1000. */
	{"amd-only", .count = 2, .gpus = {"0000:04:00.0", "0000:84:00.0"}},
	{"shared/nvidiaDGX2", .count = 16,
	 .gpus = {"0000:34:00.0", "0000:36:00.0", "0000:39:00.0", "0000:3b:00.0", "0000:57:00.0",
		  "0000:59:00.0", "0000:5c:00.0", "0000:5e:00.0", "0000:b7:00.0", "0000:b9:00.0",
		  "0000:bc:00.0", "0000:be:00.0", "0000:e0:00.0", "0000:e2:00.0", "0000:e5:00.0",
		  "0000:e7:00.0"}},
	{"shared/32em64t-2n8c2t-pci-normalio", .count = 3,
	 .gpus = {"0000:03:00.0", "0000:83:00.0", "0000:84:00.0"}, .note = "1 AMD GPU ignored"},
	/* Integer CUDA_VISIBLE_DEVICES selects, in its order. */
	{"uneven-smt", .cvd = "3,1", .count = 2, .gpus = {"0000:b1:00.0", "0000:18:00.0"}},
	{"uneven-smt", .cvd = " 2 , 0 ", .count = 2, .gpus = {"0000:3a:00.0", "0000:17:00.0"}},
	/* CUDA stops at the first invalid or repeated index. */
	{"uneven-smt", .cvd = "1,7,0", .count = 1, .gpus = {"0000:18:00.0"}},
	{"uneven-smt", .cvd = "0,0,1", .count = 1, .gpus = {"0000:17:00.0"}},
	{"uneven-smt", .cvd = "-1", .count = 0},
	{"uneven-smt", .cvd = "", .count = 0},
	/* UUID and MIG forms: counted, not mapped. */
	{"uneven-smt",
	 .cvd = "GPU-8a9b8c7d-1111-2222-3333-444455556666,GPU-0a9b8c7d-1111-2222-3333-4444",
	 .count = 2, .note = "names GPUs by UUID"},
	{"uneven-smt", .cvd = "MIG-GPU-abc/1/0", .count = 1, .note = "names GPUs by UUID"},
	/* --gpu-bus-ids: exactly those devices, in that order, any spelling. */
	{"uneven-smt", .bus_ids = "B1:00.0, 00000000:17:00.0", .cvd = "1", .count = 2,
	 .gpus = {"0000:b1:00.0", "0000:17:00.0"}},
	/* Any PCI device hwloc keeps may be named, even one that is not a GPU. */
	{"gpuless", .bus_ids = "0000:82:00.0", .count = 1, .gpus = {"0000:82:00.0"}},
};

static void
test_select_gpus(void **state)
{
	for (size_t c = 0; c < ARRAY_SIZE(gpus_cases); c++) {
		const struct gpus_case *tc = &gpus_cases[c];
		struct numa_topology *t = load(tc->topo);
		struct numa_plan *p = NULL;
		struct numa_request req = {.nproc = tc->count > 0 ? tc->count : 1};
		char *err = NULL;
		int n = numa_topology_select_gpus(t, tc->bus_ids, tc->cvd, &err);
		const char *note = numa_topology_gpu_note(t);

		if (n != tc->count) {
			fail_msg("case %zu (%s cvd=%s): %d GPUs, expected %d (%s)", c, tc->topo,
				 tc->cvd ? tc->cvd : "unset", n, tc->count, err ? err : "");
		}
		if (tc->note) {
			if (!note || !strstr(note, tc->note)) {
				fail_msg("case %zu: note '%s' lacks '%s'", c,
					 note ? note : "(none)", tc->note);
			}
		} else if (note) {
			fail_msg("case %zu: unexpected note '%s'", c, note);
		}
		/* The plan without a mode names each rank's GPU. */
		assert_int_equal(numa_plan_new(t, &req, &p, &err), 0);
		for (int i = 0; i < tc->count; i++) {
			const char *got = p->ranks[i].gpu;

			if (!tc->gpus[i] ? got != NULL : !got || strcmp(got, tc->gpus[i]) != 0) {
				fail_msg("case %zu: local rank %d has GPU %s, expected %s", c, i,
					 got ? got : "(none)",
					 tc->gpus[i] ? tc->gpus[i] : "(none)");
			}
			assert_null(p->ranks[i].cpus);
			assert_null(p->ranks[i].mems);
		}
		numa_plan_free(p);
		numa_topology_free(t);
	}
}

static void
test_select_gpus_errors(void **state)
{
	static const struct {
		const char *bus_ids;
		const char *msg;
	} cases[] = {
		{"0000:99:00.0", "--gpu-bus-ids: no PCI device 0000:99:00.0 in "},
		{"17:00.0,nope", "'nope' is not a PCI bus id"},
		{"17:00.0,,18:00.0", "empty bus id"},
		{"17:00.0,0000:17:00.0", "0000:17:00.0 is listed twice"},
	};

	for (size_t c = 0; c < ARRAY_SIZE(cases); c++) {
		struct numa_topology *t = load("uneven-smt");
		char *err = NULL;

		assert_int_equal(numa_topology_select_gpus(t, cases[c].bus_ids, NULL, &err),
				 -EINVAL);
		assert_non_null(err);
		if (!strstr(err, cases[c].msg)) {
			fail_msg("case %zu: '%s' lacks '%s'", c, err, cases[c].msg);
		}
		free(err);
		numa_topology_free(t);
	}
}

/* numa_topology_count_gpus: one vendor's GPUs, as "gpu" and "xpu" count them. */
static void
test_count_gpus(void **state)
{
	static const struct {
		const char *topo;
		enum numa_gpu_vendor vendor;
		int count;
	} cases[] = {
		/* Two Max 1550s (display 0x0380) and an Arc VGA; not the NPU (0x1200), the
		 * ASPEED BMC VGA or the Ethernet controller. */
		{"intel-gpus", NUMA_GPU_INTEL, 3},
		{"intel-gpus", NUMA_GPU_CUDA, 0},
		/* NVIDIA, else AMD, as numa_topology_select_gpus() without a selection. */
		{"uneven-smt", NUMA_GPU_CUDA, 4},
		{"mixed-vendors", NUMA_GPU_CUDA, 2},
		{"amd-only", NUMA_GPU_CUDA, 2},
		{"shared/nvidiaDGX2", NUMA_GPU_CUDA, 16},
		/* Intel Ethernet is no GPU; nor is anything NVIDIA or AMD. */
		{"gpuless", NUMA_GPU_INTEL, 0},
		{"uneven-smt", NUMA_GPU_INTEL, 0},
		{"mixed-vendors", NUMA_GPU_INTEL, 0},
	};

	for (size_t c = 0; c < ARRAY_SIZE(cases); c++) {
		struct numa_topology *t = load(cases[c].topo);
		int n = numa_topology_count_gpus(t, cases[c].vendor);

		if (n != cases[c].count) {
			fail_msg("case %zu (%s): %d GPUs, expected %d", c, cases[c].topo, n,
				 cases[c].count);
		}
		numa_topology_free(t);
	}
}

/* ---- the plan ------------------------------------------------------------------ */

struct rank_want {
	const char *gpu;
	const char *nodes; /* numa_nodes in list form */
	const char *cpus;  /* NULL: unbound */
	const char *mems;
};

struct plan_case {
	const char *topo;
	enum numa_mode mode;
	int nproc;
	const char *restrict_to; /* numa_topology_restrict: a cgroup or taskset */
	const char *cvd;
	const char *bus_ids;
	bool membind;
	bool fallback;
	const char *device_node; /* "BUSID=NODE": what sysfs numa_node says */
	const char *error;       /* substring of the plan error; NULL: succeeds */
	struct rank_want want[17];
};

#define U NUMA_MODE_NONE
#define N NUMA_MODE_NODE
#define S NUMA_MODE_SOCKET
#define X NUMA_MODE_EXCLUSIVE
#define C NUMA_MODE_CORE_COMPLEX

static const struct plan_case plan_cases[] = {
	/* uneven-smt: node 0 = cores {0,8} {1,9} {2,10} {3,11} and GPUs 17, 18, 3a;
	 * node 1 = cores {4,12}..{7,15} and GPU b1. */
	{"uneven-smt", N, 4,
	 .want = {{"0000:17:00.0", "0", "0-3,8-11"},
		  {"0000:18:00.0", "0", "0-3,8-11"},
		  {"0000:3a:00.0", "0", "0-3,8-11"},
		  {"0000:b1:00.0", "1", "4-7,12-15"}}},
	{"uneven-smt", S, 4,
	 .want = {{"0000:17:00.0", "0", "0-3,8-11"},
		  {"0000:18:00.0", "0", "0-3,8-11"},
		  {"0000:3a:00.0", "0", "0-3,8-11"},
		  {"0000:b1:00.0", "1", "4-7,12-15"}}},
	/* 4 cores for 3 GPUs: the first GPU gets the extra core; whole cores with
	 * both hyperthreads. */
	{"uneven-smt", X, 4,
	 .want = {{"0000:17:00.0", "0", "0-1,8-9"},
		  {"0000:18:00.0", "0", "2,10"},
		  {"0000:3a:00.0", "0", "3,11"},
		  {"0000:b1:00.0", "1", "4-7,12-15"}}},
	/* One L3 per node: the complex is the node. */
	{"uneven-smt", C, 4,
	 .want = {{"0000:17:00.0", "0", "0-3,8-11"},
		  {"0000:18:00.0", "0", "0-3,8-11"},
		  {"0000:3a:00.0", "0", "0-3,8-11"},
		  {"0000:b1:00.0", "1", "4-7,12-15"}}},
	/* Fewer workers than GPUs: the shares still count every GPU of the node. */
	{"uneven-smt", X, 2,
	 .want = {{"0000:17:00.0", "0", "0-1,8-9"}, {"0000:18:00.0", "0", "2,10"}}},
	/* CUDA_VISIBLE_DEVICES=2,3: rank 0 is GPU 3a, alone on node 0 now. */
	{"uneven-smt", X, 2, .cvd = "2,3",
	 .want = {{"0000:3a:00.0", "0", "0-3,8-11"}, {"0000:b1:00.0", "1", "4-7,12-15"}}},
	/* --gpu-bus-ids order is the GPU order within a node. */
	{"uneven-smt", X, 3, .bus_ids = "3a:00.0,17:00.0,18:00.0",
	 .want = {{"0000:3a:00.0", "0", "0-1,8-9"},
		  {"0000:17:00.0", "0", "2,10"},
		  {"0000:18:00.0", "0", "3,11"}}},
	/* --numa-membind: the nodes of the CPUs. */
	{"uneven-smt", N, 4, .membind = true,
	 .want = {{"0000:17:00.0", "0", "0-3,8-11", "0"},
		  {"0000:18:00.0", "0", "0-3,8-11", "0"},
		  {"0000:3a:00.0", "0", "0-3,8-11", "0"},
		  {"0000:b1:00.0", "1", "4-7,12-15", "1"}}},
	/* No mode: GPUs and their nodes only. */
	{"uneven-smt", U, 5,
	 .want = {{"0000:17:00.0", "0"},
		  {"0000:18:00.0", "0"},
		  {"0000:3a:00.0", "0"},
		  {"0000:b1:00.0", "1"},
		  {NULL, ""}}},
	/* A taskset: the plan stays inside it. */
	{"uneven-smt", N, 4, .restrict_to = "1-2,9,12-15",
	 .want = {{"0000:17:00.0", "0", "1-2,9"},
		  {"0000:18:00.0", "0", "1-2,9"},
		  {"0000:3a:00.0", "0", "1-2,9"},
		  {"0000:b1:00.0", "1", "12-15"}}},
	/* Cores are keyed by their lowest CPU even when it is not allowed. */
	{"uneven-smt", X, 4, .restrict_to = "8-15",
	 .want = {{"0000:17:00.0", "0", "8-9"},
		  {"0000:18:00.0", "0", "10"},
		  {"0000:3a:00.0", "0", "11"},
		  {"0000:b1:00.0", "1", "12-15"}}},

	/* ... and ordered by it: core 1 keeps its place with only CPU 9 left. */
	{"uneven-smt", X, 4, .restrict_to = "0,2-15",
	 .want = {{"0000:17:00.0", "0", "0,8-9"},
		  {"0000:18:00.0", "0", "2,10"},
		  {"0000:3a:00.0", "0", "3,11"},
		  {"0000:b1:00.0", "1", "4-7,12-15"}}},

	/* cpuset-excluded: allowed CPUs 0-2,8,10, memory node 0. */
	{"cpuset-excluded", N, 3,
	 .want = {{"0000:17:00.0", "0", "0-2,8,10"},
		  {"0000:18:00.0", "0", "0-2,8,10"},
		  {"0000:3a:00.0", "0", "0-2,8,10"}}},
	{"cpuset-excluded", X, 3,
	 .want = {{"0000:17:00.0", "0", "0,8"},
		  {"0000:18:00.0", "0", "1"},
		  {"0000:3a:00.0", "0", "2,10"}}},
	/* The GPU of node 1, whose CPUs are all disallowed, is never re-homed. */
	{"cpuset-excluded", N, 4,
	 .error = "local_rank 3 (GPU 0000:b1:00.0): none of the CPUs of NUMA node 1 may be used "
		  "here (allowed CPUs: 0-2,8,10); Must bind to a non-empty set of CPU indices"},
	{"cpuset-excluded", S, 4,
	 .error = "local_rank 3 (GPU 0000:b1:00.0): none of the CPUs of NUMA node 1"},
	/* ... unless --numa-fallback: that rank runs unbound. */
	{"cpuset-excluded", N, 4, .fallback = true,
	 .want = {{"0000:17:00.0", "0", "0-2,8,10"},
		  {"0000:18:00.0", "0", "0-2,8,10"},
		  {"0000:3a:00.0", "0", "0-2,8,10"},
		  {"0000:b1:00.0", "1", NULL}}},
	/* 3 allowed cores for 4 GPUs of node 0 ... */
	{"cpuset-excluded", X, 4, .bus_ids = "17:00.0,18:00.0,3a:00.0,b1:00.0",
	 .restrict_to = "0-1",
	 .error = "local_rank 0 (GPU 0000:17:00.0): There are only 2 physical cores on NUMA node "
		  "0, but there are 3 GPUs associated with this NUMA node."},
	/* No CPU at all. */
	{"cpuset-excluded", N, 1, .restrict_to = "",
	 .error = "none of the CPUs of NUMA node 0 may be used here (allowed CPUs: none)"},

	/* mems-excluded: every CPU allowed, memory node 0 only. */
	{"mems-excluded", N, 2, .membind = true,
	 .error = "local_rank 1 (GPU 0000:81:00.0): --numa-membind: the memory of NUMA node 1 may "
		  "not be used here (allowed memory nodes: 0)"},
	{"mems-excluded", N, 2,
	 .want = {{"0000:01:00.0", "0", "0-1"}, {"0000:81:00.0", "1", "2-3"}}},
	{"mems-excluded", N, 2, .membind = true, .fallback = true,
	 .want = {{"0000:01:00.0", "0", "0-1", "0"}, {"0000:81:00.0", "1", NULL, NULL}}},

	/* l3-groups: node 0 = L3s 0-3, 4-7 and GPUs 01, 02, 03; node 1 = L3s 8-9
	 * and 10-13 and GPU 41; one package. */
	{"l3-groups", C, 4,
	 .want = {{"0000:01:00.0", "0", "0-3"},
		  {"0000:02:00.0", "0", "4-7"},
		  {"0000:03:00.0", "0", "0-3"},
		  {"0000:41:00.0", "1", "10-13"}}},
	/* Bigger complexes first: with CPU 0-1 excluded, 4-7 comes before 2-3. */
	{"l3-groups", C, 4, .restrict_to = "2-13",
	 .want = {{"0000:01:00.0", "0", "4-7"},
		  {"0000:02:00.0", "0", "2-3"},
		  {"0000:03:00.0", "0", "4-7"},
		  {"0000:41:00.0", "1", "10-13"}}},
	{"l3-groups", X, 4,
	 .want = {{"0000:01:00.0", "0", "0-2"},
		  {"0000:02:00.0", "0", "3-5"},
		  {"0000:03:00.0", "0", "6-7"},
		  {"0000:41:00.0", "1", "8-13"}}},
	{"l3-groups", N, 4,
	 .want = {{"0000:01:00.0", "0", "0-7"},
		  {"0000:02:00.0", "0", "0-7"},
		  {"0000:03:00.0", "0", "0-7"},
		  {"0000:41:00.0", "1", "8-13"}}},
	/* Both nodes are on the one package. */
	{"l3-groups", S, 4, .membind = true,
	 .want = {{"0000:01:00.0", "0-1", "0-13", "0-1"},
		  {"0000:02:00.0", "0-1", "0-13", "0-1"},
		  {"0000:03:00.0", "0-1", "0-13", "0-1"},
		  {"0000:41:00.0", "0-1", "0-13", "0-1"}}},
	/* A node without allowed CPUs drops out of its socket. */
	{"l3-groups", S, 1, .restrict_to = "8-13", .bus_ids = "41:00.0",
	 .want = {{"0000:41:00.0", "1", "8-13"}}},

	/* more-gpus-than-cores: 2 cores {0,2} {1,3}, 4 GPUs. */
	{"more-gpus-than-cores", X, 4,
	 .error = "local_rank 0 (GPU 0000:07:00.0): There are only 2 physical cores on NUMA node "
		  "0, but there are 4 GPUs associated with this NUMA node."},
	{"more-gpus-than-cores", X, 4, .fallback = true,
	 .want = {{"0000:07:00.0", "0", NULL},
		  {"0000:08:00.0", "0", NULL},
		  {"0000:09:00.0", "0", NULL},
		  {"0000:0a:00.0", "0", NULL}}},
	/* Two GPUs fit. */
	{"more-gpus-than-cores", X, 2, .cvd = "3,2",
	 .want = {{"0000:0a:00.0", "0", "0,2"}, {"0000:09:00.0", "0", "1,3"}}},
	/* core-complex shares the one L3. */
	{"more-gpus-than-cores", C, 4,
	 .want = {{"0000:07:00.0", "0", "0-3"},
		  {"0000:08:00.0", "0", "0-3"},
		  {"0000:09:00.0", "0", "0-3"},
		  {"0000:0a:00.0", "0", "0-3"}}},

	/* GPU-less: a mode needs a GPU per rank. */
	{"gpuless", N, 2, .error = "local_rank 0: no GPU for this local rank (0 GPUs found)"},
	{"gpuless", U, 2, .want = {{NULL, ""}, {NULL, ""}}},
	{"gpuless", X, 2, .fallback = true, .want = {{NULL, "", NULL}, {NULL, "", NULL}}},
	/* More workers than GPUs. */
	{"uneven-smt", N, 5, .error = "local_rank 4: no GPU for this local rank (4 GPUs to share"},

	/* snc-gpumem: the GPU sits on the package, which spans nodes 0 and 1; the
	 * GPU-memory node 2 is never chosen. */
	{"snc-gpumem", N, 1, .membind = true, .want = {{"0009:01:00.0", "0-1", "0-7", "0-1"}}},
	{"snc-gpumem", X, 1, .want = {{"0009:01:00.0", "0-1", "0-7"}}},
	{"snc-gpumem", C, 1, .want = {{"0009:01:00.0", "0", "0-3"}}},
	/* ... unless sysfs names one node (as torch reads it). */
	{"snc-gpumem", N, 1, .device_node = "0009:01:00.0=1", .membind = true,
	 .want = {{"0009:01:00.0", "1", "4-7", "1"}}},
	/* sysfs naming the GPU-memory node is ignored. */
	{"snc-gpumem", N, 1, .device_node = "0009:01:00.0=2",
	 .want = {{"0009:01:00.0", "0-1", "0-7"}}},

	/* cpuless-dram: the same with node 2 a plain (no subtype) memory-only node;
	 * the tree, not sysfs, says it has no CPUs. */
	{"cpuless-dram", N, 1, .membind = true, .want = {{"0009:01:00.0", "0-1", "0-7", "0-1"}}},
	{"cpuless-dram", S, 1, .membind = true, .want = {{"0009:01:00.0", "0-1", "0-7", "0-1"}}},

	/* bus-order: GPU order is bus order, whatever the tree's order. */
	{"bus-order", N, 3, .membind = true,
	 .want = {{"0000:17:00.0", "1", "2-3", "1"},
		  {"0000:b1:00.0", "0", "0-1", "0"},
		  {"0000:b2:00.0", "0", "0-1", "0"}}},
	{"bus-order", X, 3,
	 .want = {{"0000:17:00.0", "1", "2-3"},
		  {"0000:b1:00.0", "0", "0"},
		  {"0000:b2:00.0", "0", "1"}}},

	/* UUIDs in CUDA_VISIBLE_DEVICES: nothing is bound, not an error. */
	{"uneven-smt", N, 2, .cvd = "GPU-8a9b8c7d-1111-2222-3333-444455556666,GPU-1",
	 .want = {{NULL, ""}, {NULL, ""}}},

	/* The DGX-2: 16 V100, 8 per node, 2 cores per node (CPUs 0-1 and 24-25). */
	{"shared/nvidiaDGX2", N, 16,
	 .want = {{"0000:34:00.0", "0", "0-1"},
		  {"0000:36:00.0", "0", "0-1"},
		  {"0000:39:00.0", "0", "0-1"},
		  {"0000:3b:00.0", "0", "0-1"},
		  {"0000:57:00.0", "0", "0-1"},
		  {"0000:59:00.0", "0", "0-1"},
		  {"0000:5c:00.0", "0", "0-1"},
		  {"0000:5e:00.0", "0", "0-1"},
		  {"0000:b7:00.0", "1", "24-25"},
		  {"0000:b9:00.0", "1", "24-25"},
		  {"0000:bc:00.0", "1", "24-25"},
		  {"0000:be:00.0", "1", "24-25"},
		  {"0000:e0:00.0", "1", "24-25"},
		  {"0000:e2:00.0", "1", "24-25"},
		  {"0000:e5:00.0", "1", "24-25"},
		  {"0000:e7:00.0", "1", "24-25"}}},
	{"shared/nvidiaDGX2", S, 2, .cvd = "0,15",
	 .want = {{"0000:34:00.0", "0", "0-1"}, {"0000:e7:00.0", "1", "24-25"}}},
	{"shared/nvidiaDGX2", C, 2, .cvd = "7,8",
	 .want = {{"0000:5e:00.0", "0", "0-1"}, {"0000:b7:00.0", "1", "24-25"}}},
	{"shared/nvidiaDGX2", X, 16,
	 .error = "local_rank 0 (GPU 0000:34:00.0): There are only 2 physical cores on NUMA node "
		  "0, but there are 8 GPUs associated with this NUMA node."},
	/* 2 GPUs per node fit on 2 cores. */
	{"shared/nvidiaDGX2", X, 4, .cvd = "0,1,8,9",
	 .want = {{"0000:34:00.0", "0", "0"},
		  {"0000:36:00.0", "0", "1"},
		  {"0000:b7:00.0", "1", "24"},
		  {"0000:b9:00.0", "1", "25"}}},

	/* 2 sockets x 8 cores x 2 threads: node 0 = 0-7,16-23, node 1 = 8-15,24-31. */
	{"shared/32em64t-2n8c2t-pci-normalio", X, 3,
	 .want = {{"0000:03:00.0", "0", "0-7,16-23"},
		  {"0000:83:00.0", "1", "8-11,24-27"},
		  {"0000:84:00.0", "1", "12-15,28-31"}}},
	{"shared/32em64t-2n8c2t-pci-normalio", S, 3,
	 .want = {{"0000:03:00.0", "0", "0-7,16-23"},
		  {"0000:83:00.0", "1", "8-15,24-31"},
		  {"0000:84:00.0", "1", "8-15,24-31"}}},
};

static void
check_plan_case(size_t c, const struct plan_case *tc)
{
	struct numa_topology *t = load(tc->topo);
	struct numa_request req = {
		.mode = tc->mode,
		.nproc = tc->nproc,
		.membind = tc->membind,
		.fallback = tc->fallback,
		.plan_only = true,
	};
	struct numa_plan *p = NULL;
	char *err = NULL;
	int r;

	if (tc->restrict_to) {
		assert_int_equal(numa_topology_restrict(t, tc->restrict_to), 0);
	}
	if (tc->device_node) {
		char busid[32];
		int node;

		assert_int_equal(sscanf(tc->device_node, "%31[^=]=%d", busid, &node), 2);
		assert_int_equal(numa_topology_set_device_node(t, busid, node), 0);
	}
	r = numa_topology_select_gpus(t, tc->bus_ids, tc->cvd, &err);
	if (r < 0) {
		fail_msg("case %zu: select: %s", c, err);
	}
	r = numa_plan_new(t, &req, &p, &err);
	if (tc->error) {
		/* Fewer cores than GPUs is -ERANGE, the rest -EINVAL. */
		int want = strstr(tc->error, "physical cores on") ? -ERANGE : -EINVAL;

		if (r != want || !err || !strstr(err, tc->error)) {
			fail_msg("case %zu (%s %s): expected error '%s', got %d '%s'", c, tc->topo,
				 numa_mode_to_string(tc->mode), tc->error, r, err ? err : "");
		}
		free(err);
		numa_topology_free(t);
		return;
	}
	if (r < 0) {
		fail_msg("case %zu (%s %s): %s", c, tc->topo, numa_mode_to_string(tc->mode), err);
	}
	assert_int_equal(p->n, (size_t)tc->nproc);
	assert_int_equal(p->mode, tc->mode);
	for (int i = 0; i < tc->nproc; i++) {
		const struct rank_want *w = &tc->want[i];
		const struct numa_binding *b = &p->ranks[i];
		bool gpu_ok = !w->gpu ? !b->gpu : b->gpu && strcmp(b->gpu, w->gpu) == 0;
		bool cpus_ok = !w->cpus ? !b->cpus : b->cpus && strcmp(b->cpus, w->cpus) == 0;
		bool mems_ok = !w->mems ? !b->mems : b->mems && strcmp(b->mems, w->mems) == 0;

		if (!gpu_ok || !cpus_ok || !mems_ok || strcmp(b->numa_nodes_list, w->nodes) != 0) {
			fail_msg("case %zu (%s %s) local_rank %d: got gpu %s nodes '%s' cpus %s "
				 "mems "
				 "%s (%s), expected gpu %s nodes '%s' cpus %s mems %s",
				 c, tc->topo, numa_mode_to_string(tc->mode), i,
				 b->gpu ? b->gpu : "-", b->numa_nodes_list, b->cpus ? b->cpus : "-",
				 b->mems ? b->mems : "-", b->error ? b->error : "",
				 w->gpu ? w->gpu : "-", w->nodes, w->cpus ? w->cpus : "-",
				 w->mems ? w->mems : "-");
		}
		assert_int_equal(b->local_rank, i);
		/* Asked to bind but unbound: only with --numa-fallback, and it says why. */
		if (tc->mode != NUMA_MODE_NONE && !b->cpus && !tc->cvd) {
			assert_true(tc->fallback);
			assert_non_null(b->error);
		}
		assert_true(!b->cpus == !b->cpu_mask);
		assert_true(!b->mems == !b->mem_mask);
	}
	numa_plan_free(p);
	numa_topology_free(t);
}

static void
test_plan(void **state)
{
	for (size_t c = 0; c < ARRAY_SIZE(plan_cases); c++) {
		check_plan_case(c, &plan_cases[c]);
	}
}

/* The allowed CPUs: the file's allowed set, narrowed like a cgroup or taskset. */
static void
test_allowed(void **state)
{
	static const struct {
		const char *topo;
		const char *restrict_to; /* NULL: none */
		const char *allowed;
	} cases[] = {
		{"uneven-smt", NULL, "0-15"},
		{"cpuset-excluded", NULL, "0-2,8,10"},
		{"cpuset-excluded", "1-3,9-12", "1-2,10"},
		{"uneven-smt", "", ""},
	};

	for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
		struct numa_topology *t = load(cases[i].topo);
		char *allowed;

		if (cases[i].restrict_to) {
			assert_int_equal(numa_topology_restrict(t, cases[i].restrict_to), 0);
		}
		allowed = numa_topology_allowed_cpus(t);
		assert_string_equal(allowed, cases[i].allowed);
		free(allowed);
		assert_int_equal(numa_topology_restrict(t, "0-x"), -EINVAL);
		numa_topology_free(t);
	}
}

/* A plan whose GPUs are named by UUID says why nothing is bound. */
static void
test_plan_uuid_warning(void **state)
{
	struct numa_topology *t = load("uneven-smt");
	struct numa_request req = {.mode = NUMA_MODE_NODE, .nproc = 1};
	struct numa_plan *p = NULL;
	char *err = NULL;

	assert_int_equal(numa_topology_select_gpus(t, NULL, "GPU-1234", &err), 1);
	assert_int_equal(numa_plan_new(t, &req, &p, &err), 0);
	assert_non_null(p->warning);
	assert_non_null(strstr(p->warning, "CUDA_VISIBLE_DEVICES=GPU-1234"));
	assert_non_null(strstr(p->warning, "no worker is bound"));
	assert_null(p->ranks[0].cpus);
	numa_plan_free(p);
	numa_topology_free(t);
}

/* A saved topology of another machine (CPUs 4000-4001): planning works
 * (--dry-run), applying does not, unless --numa-fallback. */
static void
test_plan_other_machine(void **state)
{
	struct numa_topology *t = load("far-cpus");
	struct numa_request req = {.mode = NUMA_MODE_NODE, .nproc = 2};
	struct numa_plan *p = NULL;
	char *err = NULL;

	assert_int_equal(numa_topology_select_gpus(t, NULL, NULL, &err), 2);
	assert_int_equal(numa_plan_new(t, &req, &p, &err), -EINVAL);
	assert_non_null(strstr(err, "is not this machine's (CPUs 4000-4001 of this rank's plan "
				    "are not online here)"));
	free(err);
	req.plan_only = true;
	assert_int_equal(numa_plan_new(t, &req, &p, &err), 0);
	assert_string_equal(p->ranks[1].cpus, "4000-4001");
	numa_plan_free(p);
	req.plan_only = false;
	req.fallback = true;
	assert_int_equal(numa_plan_new(t, &req, &p, &err), 0);
	for (size_t i = 0; i < p->n; i++) {
		assert_null(p->ranks[i].cpus);
		assert_non_null(strstr(p->ranks[i].error, "not this machine's"));
	}
	numa_plan_free(p);
	numa_topology_free(t);
}

static void
test_plan_json(void **state)
{
	struct numa_topology *t = load("uneven-smt");
	struct numa_request req = {
		.mode = NUMA_MODE_EXCLUSIVE,
		.nproc = 5,
		.membind = true,
		.fallback = true,
		.plan_only = true,
	};
	struct numa_plan *p = NULL;
	char *err = NULL, *s;
	json_t *j;

	assert_int_equal(numa_topology_select_gpus(t, NULL, NULL, &err), 4);
	assert_int_equal(numa_plan_new(t, &req, &p, &err), 0);
	j = numa_binding_to_json(p, 0);
	s = json_dumps(j, JSON_COMPACT);
	assert_string_equal(s, "{\"local_rank\":0,\"gpu\":\"0000:17:00.0\",\"numa_nodes\":[0],"
			       "\"cpus\":\"0-1,8-9\",\"mems\":\"0\",\"mode\":\"exclusive\"}");
	free(s);
	json_decref(j);
	j = numa_binding_to_json(p, 4);
	s = json_dumps(j, JSON_COMPACT);
	assert_string_equal(s, "{\"local_rank\":4,\"gpu\":null,\"numa_nodes\":[],\"cpus\":null,"
			       "\"mems\":null,\"mode\":\"exclusive\"}");
	free(s);
	json_decref(j);
	numa_plan_free(p);

	req.mode = NUMA_MODE_NONE;
	req.nproc = 1;
	assert_int_equal(numa_plan_new(t, &req, &p, &err), 0);
	j = numa_binding_to_json(p, 0);
	s = json_dumps(j, JSON_COMPACT);
	assert_string_equal(s, "{\"local_rank\":0,\"gpu\":\"0000:17:00.0\",\"numa_nodes\":[0],"
			       "\"cpus\":null,\"mems\":null,\"mode\":null}");
	free(s);
	json_decref(j);
	numa_plan_free(p);
	numa_topology_free(t);
}

/* ---- parsing ------------------------------------------------------------------- */

static void
test_busid_parse(void **state)
{
	static const struct {
		const char *in;
		const char *out; /* NULL: -EINVAL */
	} cases[] = {
		{"0000:34:00.0", "0000:34:00.0"},
		{"34:00.0", "0000:34:00.0"},
		{"00000000:B7:00.0", "0000:b7:00.0"},
		{"0002:03:1f.7", "0002:03:1f.7"},
		{"10000:e1:00.0", "10000:e1:00.0"},
		{"1:2:3.4", "0001:02:03.4"},
		{"0000:34:00", NULL},
		{"0000:34:20.0", NULL},
		{"0000:34:00.8", NULL},
		{"0000:134:00.0", NULL},
		{"000000000:34:00.0", NULL},
		{"0000:34:00.0 ", NULL},
		{" 34:00.0", NULL},
		{"0000:34:00.0.1", NULL},
		{"g0:00.0", NULL},
		{"", NULL},
		{"::.", NULL},
	};

	for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
		char out[NUMA_BUSID_SIZE] = "untouched";
		int r = numa_busid_parse(cases[i].in, out);

		if (cases[i].out) {
			if (r != 0 || strcmp(out, cases[i].out) != 0) {
				fail_msg("'%s': %d '%s', expected '%s'", cases[i].in, r, out,
					 cases[i].out);
			}
		} else if (r != -EINVAL || strcmp(out, "untouched") != 0) {
			fail_msg("'%s': %d '%s', expected -EINVAL", cases[i].in, r, out);
		}
	}
}

static void
test_mode_names(void **state)
{
	static const char *const names[] = {"node", "socket", "exclusive", "core-complex"};
	enum numa_mode m;

	for (size_t i = 0; i < ARRAY_SIZE(names); i++) {
		assert_int_equal(numa_mode_from_string(names[i], &m), 0);
		assert_string_equal(numa_mode_to_string(m), names[i]);
	}
	assert_int_equal(numa_mode_from_string(NULL, &m), 0);
	assert_int_equal(m, NUMA_MODE_NONE);
	assert_null(numa_mode_to_string(NUMA_MODE_NONE));
	assert_int_equal(numa_mode_from_string("Node", &m), -EINVAL);
}

#define ARGV(...) ((char *[]){"elasticd", __VA_ARGS__, NULL})

static int
argc_of(char **argv)
{
	int n = 0;

	while (argv[n]) {
		n++;
	}
	return n;
}

/* The flags this module adds to the command line. */
static void
test_config_flags(void **state)
{
	struct config cfg;
	char *err = NULL;
	char **ok = ARGV("--numa-binding", "socket", "--topology-xml", "/x.xml", "--gpu-bus-ids",
			 "34:00.0,00000000:B7:00.0", "--numa-fallback", "--numa_membind",
			 "--dry-run", "t");
	char **plain = ARGV("t");
	const struct {
		char **argv;
		const char *msg;
	} bad[] = {
		{ARGV("--gpu-bus-ids", "34:00.0,x", "t"),
		 "--gpu-bus-ids: invalid value '34:00.0,x': 'x' is not a PCI bus id"},
		{ARGV("--gpu-bus-ids", "", "t"), "--gpu-bus-ids: invalid value '': empty bus id"},
		{ARGV("--gpu-bus-ids=34:00.0,34:00.0", "t"), "0000:34:00.0 is listed twice"},
		{ARGV("--numa-membind", "t"), "--numa-membind needs --numa-binding"},
		{ARGV("--dry-run=1", "t"), "--dry-run"},
	};
	char *env[] = {"PET_DRY_RUN=1", "PET_NUMA_FALLBACK=1", NULL};

	assert_int_equal(config_parse(&cfg, argc_of(ok), ok, NULL, &err), CONFIG_RUN);
	assert_string_equal(cfg.numa_binding, "socket");
	assert_string_equal(cfg.topology_xml, "/x.xml");
	assert_string_equal(cfg.gpu_bus_ids, "34:00.0,00000000:B7:00.0");
	assert_true(cfg.numa_fallback);
	assert_true(cfg.numa_membind);
	assert_true(cfg.dry_run);
	config_release(&cfg);

	/* Off by default, and no PET_* variable turns them on. */
	assert_int_equal(config_parse(&cfg, argc_of(plain), plain, env, &err), CONFIG_RUN);
	assert_null(cfg.numa_binding);
	assert_null(cfg.topology_xml);
	assert_null(cfg.gpu_bus_ids);
	assert_false(cfg.numa_fallback);
	assert_false(cfg.numa_membind);
	assert_false(cfg.dry_run);
	config_release(&cfg);

	for (size_t i = 0; i < ARRAY_SIZE(bad); i++) {
		err = NULL;
		assert_int_equal(config_parse(&cfg, argc_of(bad[i].argv), bad[i].argv, NULL, &err),
				 -EINVAL);
		if (!err || !strstr(err, bad[i].msg)) {
			fail_msg("case %zu: '%s' lacks '%s'", i, err ? err : "", bad[i].msg);
		}
		free(err);
	}
}

/* ---- applying ------------------------------------------------------------------- */

/* Apply a plan for CPU 0 (and memory node 0) in a child and read back what
 * the kernel says. */
static void
test_apply(void **state)
{
	struct numa_topology *t = load("host-1node");
	struct numa_request req = {.mode = NUMA_MODE_EXCLUSIVE, .nproc = 1, .membind = true};
	struct numa_plan *p = NULL;
	char *err = NULL;
	pid_t pid;
	int status;

	assert_int_equal(numa_topology_select_gpus(t, NULL, NULL, &err), 2);
	if (numa_plan_new(t, &req, &p, &err) < 0) {
		fail_msg("%s", err);
	}
	assert_string_equal(p->ranks[0].cpus, "0");
	assert_string_equal(p->ranks[0].mems, "0");
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		cpu_set_t set;
		int r = numa_apply(&p->ranks[0]);

		if (r < 0) {
			_exit(10);
		}
		CPU_ZERO(&set);
		if (sched_getaffinity(0, sizeof(set), &set) < 0 || CPU_COUNT(&set) != 1 ||
		    !CPU_ISSET(0, &set)) {
			_exit(11);
		}
		_exit(0);
	}
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_true(WIFEXITED(status));
	assert_int_equal(WEXITSTATUS(status), 0);
	numa_plan_free(p);
	numa_topology_free(t);
}

/* The kernel refuses a binding (a CPU that does not exist): the worker is not
 * started, its stderr says why and the agent gets the errno; with fallback it
 * runs unbound. */
static void
test_apply_refused_in_child(void **state)
{
	char msg[] = "elasticd: local_rank 0: the kernel refused the NUMA binding\n";
	struct numa_binding b = {
		.cpu_mask_size = CPU_ALLOC_SIZE(4096),
		.child_error = msg,
		.child_error_len = sizeof(msg) - 1,
	};
	char *argv[] = {"/bin/true", NULL}, *envp[] = {NULL};
	sigset_t mask;

	b.cpu_mask = xcalloc(1, b.cpu_mask_size);
	CPU_SET_S(4095, b.cpu_mask_size, b.cpu_mask);
	sigemptyset(&mask);
	for (int fallback = 0; fallback < 2; fallback++) {
		struct spawn_args a = {
			.argv = argv,
			.envp = envp,
			.stdin_fd = -1,
			.stdout_fd = -1,
			.sigmask = &mask,
			.binding = &b,
		};
		char buf[256] = "";
		int p[2], status, status_fd;
		ssize_t n;
		pid_t pid;

		b.fallback = fallback;
		assert_int_equal(pipe(p), 0);
		a.stderr_fd = p[1];
		assert_int_equal(spawn_process(&a, &pid, &status_fd), 0);
		close(p[1]);
		assert_int_equal(waitpid(pid, &status, 0), pid);
		n = read(p[0], buf, sizeof(buf) - 1);
		close(p[0]);
		assert_true(n > 0);
		assert_string_equal(buf, msg);
		assert_true(WIFEXITED(status));
		if (fallback) {
			assert_int_equal(WEXITSTATUS(status), 0);
			assert_int_equal(spawn_read_status(status_fd), 0);
		} else {
			assert_int_equal(WEXITSTATUS(status), SPAWN_EXIT_CANNOT_EXEC);
			assert_int_equal(spawn_read_status(status_fd), EINVAL);
		}
		close(status_fd);
	}
	free(b.cpu_mask);
}

/* Workers that are bound get CUDA_DEVICE_ORDER=PCI_BUS_ID unless it is set. */
static void
test_cuda_device_order(void **state)
{
	char *base[] = {"PATH=/bin", NULL}, *set[] = {"CUDA_DEVICE_ORDER=FASTEST_FIRST", NULL};
	struct wenv_worker w = {
		.role_name = "r", .master_addr = "a", .run_id = "x", .error_file = ""};
	char **env = NULL, *err = NULL;

	assert_int_equal(wenv_build_env(base, &w, &env, &err), 0);
	assert_null(wenv_get(env, "CUDA_DEVICE_ORDER"));
	strv_free(env);
	w.cuda_device_order = true;
	assert_int_equal(wenv_build_env(base, &w, &env, &err), 0);
	assert_string_equal(wenv_get(env, "CUDA_DEVICE_ORDER"), "PCI_BUS_ID");
	strv_free(env);
	assert_int_equal(wenv_build_env(set, &w, &env, &err), 0);
	assert_string_equal(wenv_get(env, "CUDA_DEVICE_ORDER"), "FASTEST_FIRST");
	strv_free(env);
}

/* hwloc's built-in XML reader (forced with HWLOC_LIBXML_IMPORT=0, as on a
 * machine without libhwloc-plugins) refuses a comment; the error says so. The
 * same file without the comment loads. */
static void
test_xml_comment_refused(void **state)
{
	char *src = topo_path("host-1node"), *text = NULL, *err = NULL, *at;
	char dir[] = "/tmp/elasticd-test-numa.XXXXXX", *path;
	struct numa_topology *t = NULL;
	size_t len = 0;
	FILE *f;

	(void)state;
	assert_int_equal(setenv("HWLOC_LIBXML_IMPORT", "0", 1), 0);
	assert_non_null(mkdtemp(dir));
	path = xasprintf("%s/commented.xml", dir);
	assert_non_null(f = fopen(src, "r"));
	assert_true(getdelim(&text, &len, '\0', f) > 0);
	fclose(f);
	at = strstr(text, "<topology");
	assert_non_null(at);
	assert_non_null(f = fopen(path, "w"));
	fprintf(f, "%.*s<!-- a note -->\n%s", (int)(at - text), text, at);
	fclose(f);
	assert_int_equal(numa_topology_load(path, &t, &err), -EINVAL);
	assert_null(t);
	assert_non_null(strstr(err, "holds an XML comment"));
	assert_non_null(strstr(err, "libhwloc-plugins"));
	free(err);
	err = NULL;
	assert_int_equal(numa_topology_load(src, &t, &err), 0);
	numa_topology_free(t);
	unlink(path);
	rmdir(dir);
	free(path);
	free(text);
	free(src);
	assert_int_equal(unsetenv("HWLOC_LIBXML_IMPORT"), 0);
}

/* A plan whose rank i is bound to cpus[i] (list form of CPUs < 8; NULL: unbound). */
static struct numa_plan *
crowd_plan(const char *const *cpus, size_t n)
{
	struct numa_plan *p = xcalloc(1, sizeof(*p));

	p->n = n;
	p->ranks = xcalloc(n + 1, sizeof(*p->ranks));
	for (size_t i = 0; i < n; i++) {
		struct numa_binding *b = &p->ranks[i];

		if (!cpus[i]) {
			continue;
		}
		b->cpus = xstrdup(cpus[i]);
		b->cpu_mask_size = CPU_ALLOC_SIZE(8);
		b->cpu_mask = xcalloc(1, b->cpu_mask_size);
		for (const char *c = cpus[i]; *c; c++) {
			if (*c >= '0' && *c <= '7') {
				CPU_SET_S((size_t)(*c - '0'), b->cpu_mask_size, b->cpu_mask);
			}
		}
	}
	return p;
}

static void
test_plan_crowding(void **state)
{
	static const struct {
		const char *cpus[4];
		size_t n;
		const char *want;
	} rows[] = {
		{{"0", "0"},
		 2,
		 "local_ranks 0 and 1 are both bound to CPU 0 alone (2 workers on 1 CPU)"},
		{{"0", "1"}, 2, NULL},
		{{"01", "01"}, 2, NULL},
		{{"01", "01", "01"},
		 3,
		 "local_ranks 0, 1 and 2 are all bound to CPUs 01 (3 workers on 2 CPUs)"},
		{{"0", NULL, "0", "1"},
		 4,
		 "local_ranks 0 and 2 are both bound to CPU 0 alone (2 workers on 1 CPU)"},
		{{"0", "1", "0", "1"},
		 4,
		 "local_ranks 0 and 2 are both bound to CPU 0 alone (2 workers on 1 CPU); "
		 "local_ranks 1 and 3 are both bound to CPU 1 alone (2 workers on 1 CPU)"},
		{{NULL, NULL}, 2, NULL},
	};

	(void)state;
	for (size_t i = 0; i < ARRAY_SIZE(rows); i++) {
		struct numa_plan *p = crowd_plan(rows[i].cpus, rows[i].n);
		char *got = numa_plan_crowding(p);

		if (rows[i].want) {
			assert_non_null(got);
			assert_string_equal(got, rows[i].want);
		} else {
			assert_null(got);
		}
		free(got);
		numa_plan_free(p);
	}
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_select_gpus),
		cmocka_unit_test(test_select_gpus_errors),
		cmocka_unit_test(test_count_gpus),
		cmocka_unit_test(test_plan),
		cmocka_unit_test(test_allowed),
		cmocka_unit_test(test_plan_uuid_warning),
		cmocka_unit_test(test_plan_other_machine),
		cmocka_unit_test(test_plan_json),
		cmocka_unit_test(test_busid_parse),
		cmocka_unit_test(test_mode_names),
		cmocka_unit_test(test_config_flags),
		cmocka_unit_test(test_apply),
		cmocka_unit_test(test_apply_refused_in_child),
		cmocka_unit_test(test_cuda_device_order),
		cmocka_unit_test(test_xml_comment_refused),
		cmocka_unit_test(test_plan_crowding),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
