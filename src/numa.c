#include "numa_internal.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <hwloc.h>
#include <string.h>
#include <unistd.h>

#include "util.h"

/* ---- bus ids ------------------------------------------------------------- */

/* Read 1..max hex digits at *p into *ret, advancing *p. */
static bool
scan_hex(const char **p, size_t max, unsigned *ret)
{
	unsigned v = 0;
	size_t n = 0;

	while (n < max && isxdigit((unsigned char)(*p)[n])) {
		char c = (char)tolower((unsigned char)(*p)[n]);

		v = v * 16 + (unsigned)(c <= '9' ? c - '0' : c - 'a' + 10);
		n++;
	}
	if (n == 0 || isxdigit((unsigned char)(*p)[n])) {
		return false;
	}
	*p += n;
	*ret = v;
	return true;
}

static int
busid_scan(const char *s, unsigned *dom, unsigned *bus, unsigned *dev, unsigned *func)
{
	const char *p = s;
	unsigned a, b;

	/* "bb:dd.f" or "dddd:bb:dd.f": tell them apart by the number of colons. */
	if (strchr(s, ':') != strrchr(s, ':')) {
		if (!scan_hex(&p, 8, &a) || *p++ != ':') {
			return -EINVAL;
		}
	} else {
		a = 0;
	}
	if (!scan_hex(&p, 2, &b) || *p++ != ':') {
		return -EINVAL;
	}
	*dom = a;
	*bus = b;
	if (!scan_hex(&p, 2, dev) || *dev > 0x1f || *p++ != '.' || !scan_hex(&p, 1, func) ||
	    *func > 7 || *p) {
		return -EINVAL;
	}
	return 0;
}

static void
busid_format(char ret[NUMA_BUSID_SIZE], unsigned dom, unsigned bus, unsigned dev, unsigned func)
{
	snprintf(ret, NUMA_BUSID_SIZE, "%04x:%02x:%02x.%x", dom, bus, dev, func);
}

int
numa_busid_parse(const char *s, char ret[NUMA_BUSID_SIZE])
{
	unsigned dom, bus, dev, func;

	if (busid_scan(s, &dom, &bus, &dev, &func) < 0) {
		return -EINVAL;
	}
	busid_format(ret, dom, bus, dev, func);
	return 0;
}

int
numa_busid_list_parse(const char *list, char ***ret, char **reterr)
{
	char **ids = xcalloc(1, sizeof(char *));
	const char *p = list;

	for (;;) {
		size_t len = strcspn(p, ",");
		_cleanup_free_ char *entry = NULL;
		char canon[NUMA_BUSID_SIZE];
		const char *s;

		while (len > 0 && isspace((unsigned char)*p)) {
			p++;
			len--;
		}
		entry = xstrndup(p, len);
		while (len > 0 && isspace((unsigned char)entry[len - 1])) {
			entry[--len] = '\0';
		}
		s = entry;
		if (!*s) {
			*reterr = xasprintf("invalid value '%s': empty bus id", list);
			goto fail;
		}
		if (numa_busid_parse(s, canon) < 0) {
			*reterr = xasprintf("invalid value '%s': '%s' is not a PCI bus id "
					    "([DOMAIN:]BUS:DEVICE.FUNCTION, hexadecimal)",
					    list, s);
			goto fail;
		}
		for (size_t i = 0; ids[i]; i++) {
			if (strcmp(ids[i], canon) == 0) {
				*reterr = xasprintf("invalid value '%s': %s is listed twice", list,
						    canon);
				goto fail;
			}
		}
		strv_push(&ids, canon);
		p = strchr(p, ',');
		if (!p) {
			break;
		}
		p++;
	}
	*ret = ids;
	return 0;

fail:
	strv_free(ids);
	return -EINVAL;
}

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
		/* Without sysfs: CPUs 0..n-1 and node 0. */
		long n = sysconf(_SC_NPROCESSORS_CONF);
		hwloc_bitmap_t host_fallback = numa_bitmap_new();

		mark_cpuless_nodes_from_tree(t);
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

static void
gpus_clear(struct numa_topology *t)
{
	for (size_t i = 0; i < t->n_gpus; i++) {
		hwloc_bitmap_free(t->gpus[i].home);
	}
	free(t->gpus);
	t->gpus = NULL;
	t->n_gpus = 0;
	t->gpus_unknown = false;
	t->n_unknown = 0;
	free(t->gpu_note);
	t->gpu_note = NULL;
}

void
numa_topology_free(struct numa_topology *t)
{
	if (!t) {
		return;
	}
	gpus_clear(t);
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

static hwloc_obj_t
find_pcidev(const struct numa_topology *t, const char *busid)
{
	unsigned dom, bus, dev, func;

	if (busid_scan(busid, &dom, &bus, &dev, &func) < 0) {
		return NULL;
	}
	return hwloc_get_pcidev_by_busid(t->topo, dom, bus, dev, func);
}

int
numa_topology_set_device_node(struct numa_topology *t, const char *busid, int node)
{
	char canon[NUMA_BUSID_SIZE];

	if (numa_busid_parse(busid, canon) < 0) {
		return -EINVAL;
	}
	if (!find_pcidev(t, canon)) {
		return -ENOENT;
	}
	for (size_t i = 0; i < t->n_dev_nodes; i++) {
		if (strcmp(t->dev_nodes[i].busid, canon) == 0) {
			t->dev_nodes[i].node = node;
			return 0;
		}
	}
	t->dev_nodes = xrealloc(t->dev_nodes, (t->n_dev_nodes + 1) * sizeof(*t->dev_nodes));
	memcpy(t->dev_nodes[t->n_dev_nodes].busid, canon, sizeof(canon));
	t->dev_nodes[t->n_dev_nodes].node = node;
	t->n_dev_nodes++;
	return 0;
}

/* The node sysfs gives for a device: recorded, else read on a live machine;
 * -1 when unknown. */
static int
device_node(const struct numa_topology *t, const char *busid)
{
	_cleanup_free_ char *path = NULL, *buf = NULL;
	long long v;

	for (size_t i = 0; i < t->n_dev_nodes; i++) {
		if (strcmp(t->dev_nodes[i].busid, busid) == 0) {
			return t->dev_nodes[i].node;
		}
	}
	if (!t->live) {
		return -1;
	}
	path = xasprintf("/sys/bus/pci/devices/%s/numa_node", busid);
	if (read_file(path, 64, &buf, NULL) < 0) {
		return -1;
	}
	buf[strcspn(buf, "\n")] = '\0';
	if (parse_int(buf, -1, INT32_MAX, &v) < 0) {
		return -1;
	}
	return (int)v;
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

/* The CPU-bearing NUMA nodes a device is attached to. */
static hwloc_bitmap_t
device_home(const struct numa_topology *t, hwloc_obj_t dev, const char *busid)
{
	static const unsigned long tries[] = {
		0,
		HWLOC_LOCAL_NUMANODE_FLAG_SMALLER_LOCALITY,
		HWLOC_LOCAL_NUMANODE_FLAG_LARGER_LOCALITY,
	};
	int nnodes = hwloc_get_nbobjs_by_type(t->topo, HWLOC_OBJ_NUMANODE);
	hwloc_obj_t *nodes = xcalloc(nnodes > 0 ? (size_t)nnodes : 1, sizeof(*nodes));
	hwloc_bitmap_t home = numa_bitmap_new();
	int sysfs = device_node(t, busid);

	if (sysfs >= 0) {
		hwloc_obj_t n = hwloc_get_numanode_obj_by_os_index(t->topo, (unsigned)sysfs);

		if (n && numa_node_has_cpus(t, n)) {
			hwloc_bitmap_set(home, n->os_index);
			free(nodes);
			return home;
		}
	}
	for (size_t k = 0; k < ARRAY_SIZE(tries) && hwloc_bitmap_iszero(home); k++) {
		struct hwloc_location loc = {
			.type = HWLOC_LOCATION_TYPE_OBJECT,
			.location.object = dev,
		};
		unsigned nr = (unsigned)nnodes;
		int best = -1;

		if (hwloc_get_local_numanode_objs(t->topo, &loc, &nr, nodes, tries[k]) < 0) {
			continue;
		}
		for (unsigned i = 0; i < nr && i < (unsigned)nnodes; i++) {
			int w = hwloc_bitmap_weight(nodes[i]->cpuset);

			if (!numa_node_has_cpus(t, nodes[i])) {
				continue;
			}
			/* Of the nodes around the device, the closest ones. */
			if (tries[k] == HWLOC_LOCAL_NUMANODE_FLAG_LARGER_LOCALITY) {
				if (best >= 0 && w > best) {
					continue;
				}
				if (best < 0 || w < best) {
					hwloc_bitmap_zero(home);
					best = w;
				}
			}
			hwloc_bitmap_set(home, nodes[i]->os_index);
		}
	}
	free(nodes);
	return home;
}

#define PCI_VENDOR_NVIDIA 0x10de
#define PCI_VENDOR_AMD 0x1002
#define PCI_VENDOR_INTEL 0x8086

static bool
pci_is_gpu(hwloc_obj_t o, unsigned vendor)
{
	/* Server BMC display chips with a GPU vendor's id. */
	static const struct {
		unsigned short vendor, device;
	} bmc[] = {
		{PCI_VENDOR_AMD, 0x515e}, /* ATI ES1000 */
		{PCI_VENDOR_AMD, 0x5159}, /* ATI Rage XL / Radeon 7000 */
	};
	const struct hwloc_pcidev_attr_s *p = &o->attr->pcidev;

	if (p->vendor_id != vendor) {
		return false;
	}
	/* Display (VGA, 3D, other) and processing accelerators. Everything else,
	 * e.g. NVSwitch bridges (0x0680) and HDMI audio (0x0403), is not a GPU. */
	if (p->class_id != 0x0300 && p->class_id != 0x0302 && p->class_id != 0x0380 &&
	    p->class_id != 0x1200) {
		return false;
	}
	/* Intel's data-center GPUs are display controllers (0x0380); its
	 * processing accelerators are NPUs (e.g. 8086:7d1d), which torch.xpu
	 * does not see. */
	if (p->vendor_id == PCI_VENDOR_INTEL && p->class_id == 0x1200) {
		return false;
	}
	for (size_t i = 0; i < ARRAY_SIZE(bmc); i++) {
		if (p->vendor_id == bmc[i].vendor && p->device_id == bmc[i].device) {
			return false;
		}
	}
	return true;
}

static int
cmp_pcidev(const void *a, const void *b)
{
	const struct hwloc_pcidev_attr_s *x = &(*(hwloc_obj_t const *)a)->attr->pcidev;
	const struct hwloc_pcidev_attr_s *y = &(*(hwloc_obj_t const *)b)->attr->pcidev;

	if (x->domain != y->domain) {
		return x->domain < y->domain ? -1 : 1;
	}
	if (x->bus != y->bus) {
		return x->bus < y->bus ? -1 : 1;
	}
	if (x->dev != y->dev) {
		return x->dev < y->dev ? -1 : 1;
	}
	return x->func < y->func ? -1 : x->func > y->func ? 1 : 0;
}

/* The PCI vendors of a GPU vendor choice, in order of preference. */
static void
gpu_vendor_ids(enum numa_gpu_vendor vendor, const unsigned **ret, size_t *ret_n)
{
	static const unsigned cuda[] = {PCI_VENDOR_NVIDIA, PCI_VENDOR_AMD};
	static const unsigned intel[] = {PCI_VENDOR_INTEL};

	*ret = cuda;
	*ret_n = ARRAY_SIZE(cuda);
	switch (vendor) {
	case NUMA_GPU_CUDA:
		break;
	case NUMA_GPU_INTEL:
		*ret = intel;
		*ret_n = ARRAY_SIZE(intel);
		break;
	}
}

static size_t
count_vendor_gpus(const struct numa_topology *t, unsigned vendor)
{
	hwloc_obj_t o = NULL;
	size_t n = 0;

	while ((o = hwloc_get_next_pcidev(t->topo, o))) {
		n += pci_is_gpu(o, vendor);
	}
	return n;
}

/* The GPUs of the first PCI vendor of `vendor` that has any (NVIDIA, else AMD;
 * or Intel), ordered by bus id; *ret_other: the other vendors' GPUs left out. */
static size_t
find_gpus(const struct numa_topology *t, enum numa_gpu_vendor vendor, hwloc_obj_t **ret,
	  size_t *ret_other)
{
	const unsigned *ids;
	size_t n_ids, pick = 0, total = 0, n = 0;
	hwloc_obj_t o = NULL, *list;

	gpu_vendor_ids(vendor, &ids, &n_ids);
	for (size_t v = n_ids; v-- > 0;) {
		size_t c = count_vendor_gpus(t, ids[v]);

		if (c > 0) {
			pick = v;
		}
		total += c;
	}
	list = xcalloc(total + 1, sizeof(*list));
	while ((o = hwloc_get_next_pcidev(t->topo, o))) {
		if (pci_is_gpu(o, ids[pick])) {
			list[n++] = o;
		}
	}
	qsort(list, n, sizeof(*list), cmp_pcidev);
	*ret_other = total - n;
	*ret = list;
	return n;
}

int
numa_topology_count_gpus(const struct numa_topology *t, enum numa_gpu_vendor vendor)
{
	hwloc_obj_t *found = NULL;
	size_t other, n = find_gpus(t, vendor, &found, &other);

	free(found);
	return (int)n;
}

static void
gpu_add(struct numa_topology *t, hwloc_obj_t dev)
{
	struct numa_gpu *g;
	const struct hwloc_pcidev_attr_s *p = &dev->attr->pcidev;

	t->gpus = xrealloc(t->gpus, (t->n_gpus + 1) * sizeof(*t->gpus));
	g = &t->gpus[t->n_gpus++];
	g->dev = dev;
	busid_format(g->busid, p->domain, p->bus, p->dev, p->func);
	g->home = device_home(t, dev, g->busid);
}

/* Apply an integer CUDA_VISIBLE_DEVICES to found[0..n). */
static void
select_visible(struct numa_topology *t, hwloc_obj_t *found, size_t n, const char *cvd)
{
	bool *used = xcalloc(n + 1, sizeof(*used));
	const char *p = cvd;

	/* GPU-<uuid> or MIG-<...> anywhere: CUDA maps them with NVML, we cannot. */
	for (const char *q = cvd; *q; q++) {
		if ((q == cvd || q[-1] == ',' || isspace((unsigned char)q[-1])) &&
		    (strncmp(q, "GPU-", 4) == 0 || strncmp(q, "MIG-", 4) == 0)) {
			t->gpus_unknown = true;
		}
	}
	if (t->gpus_unknown) {
		for (const char *q = cvd;; q++) {
			q += strspn(q, " \t");
			t->n_unknown += *q && *q != ',';
			q += strcspn(q, ",");
			if (!*q) {
				break;
			}
		}
		t->gpu_note =
			xasprintf("CUDA_VISIBLE_DEVICES=%s names GPUs by UUID, which elasticd "
				  "cannot map to PCI devices (that needs NVML)",
				  cvd);
		free(used);
		return;
	}
	while (*p) {
		size_t len = strcspn(p, ",");
		_cleanup_free_ char *entry = xstrndup(p, len);
		char *s = entry, *end;
		long long idx;

		while (isspace((unsigned char)*s)) {
			s++;
		}
		end = s + strlen(s);
		while (end > s && isspace((unsigned char)end[-1])) {
			*--end = '\0';
		}
		/* CUDA stops at the first entry that is not a valid new index. */
		if (parse_int(s, 0, (long long)n - 1, &idx) < 0 || used[idx]) {
			break;
		}
		used[idx] = true;
		gpu_add(t, found[idx]);
		if (!p[len]) {
			break;
		}
		p += len + 1;
	}
	free(used);
}

int
numa_topology_select_gpus(struct numa_topology *t, const char *bus_ids, const char *cvd,
			  char **reterr)
{
	hwloc_obj_t *found = NULL;
	size_t n, other = 0;

	gpus_clear(t);
	if (bus_ids) {
		char **ids = NULL;
		char *err = NULL;

		if (numa_busid_list_parse(bus_ids, &ids, &err) < 0) {
			*reterr = xasprintf("--gpu-bus-ids: %s", err);
			free(err);
			return -EINVAL;
		}
		for (size_t i = 0; ids[i]; i++) {
			hwloc_obj_t dev = find_pcidev(t, ids[i]);

			if (!dev) {
				*reterr = xasprintf("--gpu-bus-ids: no PCI device %s %s%s", ids[i],
						    t->source ? "in " : "on this machine",
						    t->source ? t->source : "");
				strv_free(ids);
				gpus_clear(t);
				return -EINVAL;
			}
			gpu_add(t, dev);
		}
		strv_free(ids);
		return (int)t->n_gpus;
	}
	n = find_gpus(t, NUMA_GPU_CUDA, &found, &other);
	if (cvd) {
		select_visible(t, found, n, cvd);
	} else {
		for (size_t i = 0; i < n; i++) {
			gpu_add(t, found[i]);
		}
	}
	if (!t->gpu_note && other > 0) {
		t->gpu_note = xasprintf("%zu AMD GPU%s ignored: local ranks use the NVIDIA GPUs",
					other, other == 1 ? "" : "s");
	}
	free(found);
	return (int)(t->gpus_unknown ? t->n_unknown : t->n_gpus);
}

const char *
numa_topology_gpu_note(const struct numa_topology *t)
{
	return t->gpu_note;
}
