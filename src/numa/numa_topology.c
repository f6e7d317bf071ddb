/* numa_topology.c — the machine's topology: loading it with hwloc (this
 * machine, or a saved XML file), which NUMA nodes have CPUs, and the CPUs and
 * memory nodes the workers may use. */
#include "numa_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <hwloc.h>
#include <string.h>
#include <unistd.h>

#include "util.h"

/* ---- bitmaps ---------------------------------------------------------------- */

/* "0-3,8-11" (hwloc's list form, as sysfs and numactl); "" for an empty set. */
char *
numa_bitmap_list(hwloc_const_bitmap_t b)
{
	char *s = NULL;

	if (hwloc_bitmap_iszero(b)) {
		return xstrdup("");
	}
	if (hwloc_bitmap_list_asprintf(&s, b) < 0 || !s) {
		abort();
	}
	return s;
}

hwloc_bitmap_t
numa_bitmap_new(void)
{
	hwloc_bitmap_t b = hwloc_bitmap_alloc();

	if (!b) {
		abort();
	}
	return b;
}

hwloc_bitmap_t
numa_bitmap_dup(hwloc_const_bitmap_t src)
{
	hwloc_bitmap_t b = hwloc_bitmap_dup(src);

	if (!b) {
		abort();
	}
	return b;
}

/* Parse a sysfs list ("0-3,8") from a file; NULL when unreadable. */
static hwloc_bitmap_t
bitmap_read(const char *path)
{
	_cleanup_free_ char *buf = NULL;
	hwloc_bitmap_t b;

	if (read_file(path, 65536, &buf, NULL) < 0) {
		return NULL;
	}
	buf[strcspn(buf, "\n")] = '\0';
	b = numa_bitmap_new();
	if (*buf && hwloc_bitmap_list_sscanf(b, buf) < 0) {
		hwloc_bitmap_free(b);
		return NULL;
	}
	return b;
}

/* ---- discovery -------------------------------------------------------------- */

/* This process's CPU affinity, or NULL when it cannot be read. */
static hwloc_bitmap_t
affinity_get(void)
{
	for (int ncpus = 1024; ncpus <= (1 << 20); ncpus *= 2) {
		size_t size = CPU_ALLOC_SIZE(ncpus);
		cpu_set_t *set = xcalloc(1, size);
		hwloc_bitmap_t b;

		if (sched_getaffinity(0, size, set) < 0) {
			free(set);
			if (errno == EINVAL) {
				continue;
			}
			return NULL;
		}
		b = numa_bitmap_new();
		for (int i = 0; i < ncpus; i++) {
			if (CPU_ISSET_S(i, size, set)) {
				hwloc_bitmap_set(b, (unsigned)i);
			}
		}
		free(set);
		return b;
	}
	return NULL;
}

static void
mark_cpuless_nodes(struct numa_topology *t)
{
	hwloc_obj_t n = NULL;

	while ((n = hwloc_get_next_obj_by_type(t->topo, HWLOC_OBJ_NUMANODE, n))) {
		char path[64];
		hwloc_bitmap_t cpus;

		snprintf(path, sizeof(path), "/sys/devices/system/node/node%u/cpulist",
			 n->os_index);
		cpus = bitmap_read(path);
		if (cpus && hwloc_bitmap_iszero(cpus)) {
			hwloc_bitmap_set(t->cpuless, n->os_index);
		}
		hwloc_bitmap_free(cpus);
	}
}

/* Mark every NUMA node under @obj's memory children as one that has CPUs
 * (memory-side caches sit between an object and its nodes). */
static void
mark_memory_children(hwloc_obj_t obj, hwloc_bitmap_t with_cpus)
{
	for (hwloc_obj_t m = obj->memory_first_child; m; m = m->next_sibling) {
		if (m->type == HWLOC_OBJ_NUMANODE) {
			hwloc_bitmap_set(with_cpus, m->os_index);
		} else {
			mark_memory_children(m, with_cpus);
		}
	}
}

/* A saved topology has no sysfs to ask, and hwloc gives a CPU-less node the
 * cpuset of the object it hangs from. Linux's rule, from the tree: a node has
 * CPUs when it is a local node of some PU, that is a memory child of the PU's
 * nearest ancestor that has memory children. */
static void
mark_cpuless_nodes_from_tree(struct numa_topology *t)
{
	hwloc_bitmap_t with_cpus = numa_bitmap_new();
	hwloc_obj_t pu = NULL;
	hwloc_obj_t n = NULL;

	while ((pu = hwloc_get_next_obj_by_type(t->topo, HWLOC_OBJ_PU, pu))) {
		hwloc_obj_t a = pu->parent;

		while (a && !a->memory_arity) {
			a = a->parent;
		}
		if (a) {
			mark_memory_children(a, with_cpus);
		}
	}
	while ((n = hwloc_get_next_obj_by_type(t->topo, HWLOC_OBJ_NUMANODE, n))) {
		if (!hwloc_bitmap_isset(with_cpus, n->os_index)) {
			hwloc_bitmap_set(t->cpuless, n->os_index);
		}
	}
	hwloc_bitmap_free(with_cpus);
}

/* Whether the first 64 KiB of the file at path hold an XML comment. */
static bool
xml_has_comment(const char *path)
{
	char buf[65536];
	ssize_t n = -1;
	int fd = open(path, O_RDONLY | O_CLOEXEC);

	if (fd >= 0) {
		n = read(fd, buf, sizeof(buf) - 1);
		close(fd);
	}
	if (n <= 0) {
		return false;
	}
	buf[n] = '\0';
	return strstr(buf, "<!--") != NULL;
}

/* The message for an XML file hwloc refused. hwloc's built-in reader (the one
 * in use without libhwloc-plugins, whose libxml2 reader takes any XML, or with
 * HWLOC_LIBXML_IMPORT=0) refuses a comment anywhere, the commonest reason a
 * hand-edited topology loads on one machine and not on another. */
static char *
xml_refused(const char *path)
{
	if (xml_has_comment(path)) {
		return xasprintf("%s is not an hwloc XML topology that hwloc %s reads: it holds "
				 "an XML comment, which hwloc's built-in XML reader refuses (the "
				 "libxml2 reader comes with libhwloc-plugins); remove the comments "
				 "or install libhwloc-plugins",
				 path, HWLOC_VERSION);
	}
	return xasprintf("%s is not an hwloc XML topology that hwloc %s reads "
			 "(HWLOC_XML_VERBOSE=1 tells why)",
			 path, HWLOC_VERSION);
}

/* A saved topology: this machine's online CPUs and NUMA nodes, which its plan
 * must stay in to be applied. */
static void
read_host_sets(struct numa_topology *t)
{
	/* Without sysfs: CPUs 0..n-1 and node 0. */
	long n = sysconf(_SC_NPROCESSORS_CONF);
	hwloc_bitmap_t host_fallback = numa_bitmap_new();

	hwloc_bitmap_set_range(host_fallback, 0, n > 0 ? (int)n - 1 : 0);
	t->host_cpus = bitmap_read("/sys/devices/system/cpu/online");
	if (!t->host_cpus) {
		t->host_cpus = numa_bitmap_dup(host_fallback);
	}
	t->host_nodes = bitmap_read("/sys/devices/system/node/online");
	if (!t->host_nodes) {
		hwloc_bitmap_only(host_fallback, 0);
		t->host_nodes = numa_bitmap_dup(host_fallback);
	}
	hwloc_bitmap_free(host_fallback);
}

int
numa_topology_load(const char *xml_path, struct numa_topology **ret, char **reterr)
{
	/* Components that would re-bind us (x86 runs CPUID on every PU) or open a
	 * GPU driver inside the daemon, and libpciaccess (pci: it reads config
	 * space and leaks; the linux component reads PCI devices from sysfs).
	 * Those not installed answer -1. */
	static const char *const disabled[] = {"x86",  "opencl", "gl",        "pci",
					       "cuda", "nvml",   "levelzero", "rsmi"};
	struct numa_topology *t = xcalloc(1, sizeof(*t));
	int r;

	if (hwloc_topology_init(&t->topo) < 0) {
		r = -errno;
		*reterr = xasprintf("hwloc: cannot start: %s", strerror(-r));
		free(t);
		return r;
	}
	hwloc_topology_set_flags(t->topo, HWLOC_TOPOLOGY_FLAG_INCLUDE_DISALLOWED |
						  HWLOC_TOPOLOGY_FLAG_DONT_CHANGE_BINDING);
	hwloc_topology_set_io_types_filter(t->topo, HWLOC_TYPE_FILTER_KEEP_IMPORTANT);
	for (size_t i = 0; i < ARRAY_SIZE(disabled); i++) {
		(void)hwloc_topology_set_components(
			t->topo, HWLOC_TOPOLOGY_COMPONENTS_FLAG_BLACKLIST, disabled[i]);
	}
	if (xml_path) {
		t->source = xstrdup(xml_path);
		if (access(xml_path, R_OK) < 0) {
			r = -errno;
			*reterr = xasprintf("cannot read %s: %s", xml_path, strerror(-r));
			goto fail;
		}
		if (hwloc_topology_set_xml(t->topo, xml_path) < 0) {
			r = -EINVAL;
			*reterr = xml_refused(xml_path);
			goto fail;
		}
	}
	if (hwloc_topology_load(t->topo) < 0) {
		r = xml_path ? -EINVAL : (errno ? -errno : -EIO);
		*reterr = xml_path ? xml_refused(xml_path)
				   : xasprintf("hwloc cannot discover this machine: %s",
					       strerror(-r));
		goto fail;
	}
	t->live = hwloc_topology_is_thissystem(t->topo);
	if (!t->live && !t->source) {
		const char *env = getenv("HWLOC_XMLFILE");

		t->source = xstrdup(env ? env : "the HWLOC_* environment");
	}
	t->allowed = numa_bitmap_dup(hwloc_topology_get_allowed_cpuset(t->topo));
	t->allowed_nodes = numa_bitmap_dup(hwloc_topology_get_allowed_nodeset(t->topo));
	t->cpuless = numa_bitmap_new();
	if (t->live) {
		mark_cpuless_nodes(t);
	} else {
		mark_cpuless_nodes_from_tree(t);
		read_host_sets(t);
	}
	/* This process's affinity narrows the plan when the topology's CPUs are
	 * this machine's. */
	if (t->live ||
	    hwloc_bitmap_isincluded(hwloc_topology_get_complete_cpuset(t->topo), t->host_cpus)) {
		hwloc_bitmap_t aff = affinity_get();

		if (aff) {
			hwloc_bitmap_and(t->allowed, t->allowed, aff);
			hwloc_bitmap_free(aff);
		}
	}
	*ret = t;
	return 0;

fail:
	numa_topology_free(t);
	return r;
}

void
numa_topology_free(struct numa_topology *t)
{
	if (!t) {
		return;
	}
	numa_gpus_clear(t);
	hwloc_bitmap_free(t->allowed);
	hwloc_bitmap_free(t->allowed_nodes);
	hwloc_bitmap_free(t->cpuless);
	if (t->topo) {
		hwloc_topology_destroy(t->topo);
	}
	free(t->dev_nodes);
	free(t->source);
	hwloc_bitmap_free(t->host_cpus);
	hwloc_bitmap_free(t->host_nodes);
	free(t);
}

bool
numa_topology_is_live(const struct numa_topology *t)
{
	return t->live;
}

char *
numa_topology_allowed_cpus(const struct numa_topology *t)
{
	return numa_bitmap_list(t->allowed);
}

int
numa_topology_restrict(struct numa_topology *t, const char *list)
{
	hwloc_bitmap_t b = numa_bitmap_new();

	if (*list && hwloc_bitmap_list_sscanf(b, list) < 0) {
		hwloc_bitmap_free(b);
		return -EINVAL;
	}
	hwloc_bitmap_and(t->allowed, t->allowed, b);
	hwloc_bitmap_free(b);
	return 0;
}

/* A NUMA node CPUs can be bound near: it has CPUs (not GPU memory, MCDRAM,
 * NVM or another memory-only node). */
bool
numa_node_has_cpus(const struct numa_topology *t, hwloc_obj_t n)
{
	if (!n->cpuset || hwloc_bitmap_iszero(n->cpuset) ||
	    hwloc_bitmap_isset(t->cpuless, n->os_index)) {
		return false;
	}
	return !n->subtype || strcmp(n->subtype, "DRAM") == 0;
}
