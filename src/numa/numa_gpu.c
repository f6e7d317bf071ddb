/* numa_gpu.c — the GPUs the local ranks use: PCI bus ids, discovery by PCI
 * class and vendor, selection by --gpu-bus-ids or CUDA_VISIBLE_DEVICES, and
 * the NUMA nodes each GPU is attached to. */
#include "numa_internal.h"

#include <ctype.h>
#include <errno.h>
#include <string.h>

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

/* ---- the GPUs ------------------------------------------------------------ */

void
numa_gpus_clear(struct numa_topology *t)
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

	numa_gpus_clear(t);
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
				numa_gpus_clear(t);
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
