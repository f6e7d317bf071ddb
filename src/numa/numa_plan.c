/* numa_plan.c — the per-rank plan: for each local rank, the CPUs and memory
 * nodes near its GPU in the mode asked for (node, socket, exclusive,
 * core-complex), and the plan as JSON. Pure: reads a loaded topology. */
#include "numa_internal.h"

#include <errno.h>
#include <string.h>

#include "util.h"

/* ---- modes ---------------------------------------------------------------- */

static const char *const mode_names[] = {
	[NUMA_MODE_NONE] = NULL,
	[NUMA_MODE_NODE] = "node",
	[NUMA_MODE_SOCKET] = "socket",
	[NUMA_MODE_EXCLUSIVE] = "exclusive",
	[NUMA_MODE_CORE_COMPLEX] = "core-complex",
};

int
numa_mode_from_string(const char *s, enum numa_mode *ret)
{
	if (!s) {
		*ret = NUMA_MODE_NONE;
		return 0;
	}
	for (size_t i = 0; i < ARRAY_SIZE(mode_names); i++) {
		if (mode_names[i] && strcmp(mode_names[i], s) == 0) {
			*ret = (enum numa_mode)i;
			return 0;
		}
	}
	return -EINVAL;
}

const char *
numa_mode_to_string(enum numa_mode m)
{
	switch (m) {
	case NUMA_MODE_NONE:
	case NUMA_MODE_NODE:
	case NUMA_MODE_SOCKET:
	case NUMA_MODE_EXCLUSIVE:
	case NUMA_MODE_CORE_COMPLEX:
		return mode_names[m];
	}
	return NULL;
}

/* ---- the plan ------------------------------------------------------------------ */

/* a & b, a new bitmap. */
static hwloc_bitmap_t
bitmap_and(hwloc_const_bitmap_t a, hwloc_const_bitmap_t b)
{
	hwloc_bitmap_t r = numa_bitmap_new();

	hwloc_bitmap_and(r, a, b);
	return r;
}

/* The bits of a that are not in b, in list form (malloc'd). */
static char *
bitmap_list_andnot(hwloc_const_bitmap_t a, hwloc_const_bitmap_t b)
{
	hwloc_bitmap_t d = numa_bitmap_new();
	char *s;

	hwloc_bitmap_andnot(d, a, b);
	s = numa_bitmap_list(d);
	hwloc_bitmap_free(d);
	return s;
}

/* The allowed CPUs of a set of NUMA nodes. */
static hwloc_bitmap_t
nodes_cpus(const struct numa_topology *t, hwloc_const_bitmap_t nodes)
{
	hwloc_bitmap_t cpus = numa_bitmap_new();
	unsigned i;

	hwloc_bitmap_foreach_begin(i, nodes)
	{
		hwloc_obj_t n = hwloc_get_numanode_obj_by_os_index(t->topo, i);

		if (n && numa_node_has_cpus(t, n)) {
			hwloc_bitmap_or(cpus, cpus, n->cpuset);
		}
	}
	hwloc_bitmap_foreach_end();
	hwloc_bitmap_and(cpus, cpus, t->allowed);
	return cpus;
}

/* The package of the lowest allowed CPU of node n; NULL when it has none or
 * the topology has no packages (*ret_none tells which). */
static hwloc_obj_t
node_package(const struct numa_topology *t, hwloc_obj_t n, bool *ret_none)
{
	hwloc_bitmap_t cpus = bitmap_and(n->cpuset, t->allowed);
	int first = hwloc_bitmap_first(cpus);
	hwloc_obj_t pu;

	hwloc_bitmap_free(cpus);
	*ret_none = first < 0;
	if (first < 0) {
		return NULL;
	}
	pu = hwloc_get_pu_obj_by_os_index(t->topo, (unsigned)first);
	return pu ? hwloc_get_ancestor_obj_by_type(t->topo, HWLOC_OBJ_PACKAGE, pu) : NULL;
}

/* socket mode: every CPU-bearing node whose lowest allowed CPU lies in a
 * package of the home nodes' lowest allowed CPUs. */
static hwloc_bitmap_t
socket_nodes(const struct numa_topology *t, hwloc_const_bitmap_t home)
{
	hwloc_bitmap_t pkgs = numa_bitmap_new(), nodes = numa_bitmap_new();
	bool whole_machine = false;
	hwloc_obj_t n = NULL;
	unsigned i;

	hwloc_bitmap_foreach_begin(i, home)
	{
		hwloc_obj_t h = hwloc_get_numanode_obj_by_os_index(t->topo, i);
		bool none;
		hwloc_obj_t pkg = h ? node_package(t, h, &none) : NULL;

		if (pkg) {
			hwloc_bitmap_set(pkgs, pkg->logical_index);
		} else if (h && !none) {
			whole_machine = true; /* no Package objects: one socket */
		}
	}
	hwloc_bitmap_foreach_end();
	while ((n = hwloc_get_next_obj_by_type(t->topo, HWLOC_OBJ_NUMANODE, n))) {
		bool none;
		hwloc_obj_t pkg;

		if (!numa_node_has_cpus(t, n)) {
			continue;
		}
		pkg = node_package(t, n, &none);
		if (none) {
			continue;
		}
		if (whole_machine || (pkg && hwloc_bitmap_isset(pkgs, pkg->logical_index))) {
			hwloc_bitmap_set(nodes, n->os_index);
		}
	}
	hwloc_bitmap_free(pkgs);
	return nodes;
}

/* CPUs grouped under a key (a core's or a cache's lowest CPU). */
struct cpu_group {
	int key;
	hwloc_bitmap_t cpus;
};

struct cpu_groups {
	size_t n;
	struct cpu_group *g;
};

static void
groups_add(struct cpu_groups *gs, int key, unsigned cpu)
{
	for (size_t i = 0; i < gs->n; i++) {
		if (gs->g[i].key == key) {
			hwloc_bitmap_set(gs->g[i].cpus, cpu);
			return;
		}
	}
	gs->g = xrealloc(gs->g, (gs->n + 1) * sizeof(*gs->g));
	gs->g[gs->n].key = key;
	gs->g[gs->n].cpus = numa_bitmap_new();
	hwloc_bitmap_set(gs->g[gs->n].cpus, cpu);
	gs->n++;
}

static void
groups_release(struct cpu_groups *gs)
{
	for (size_t i = 0; i < gs->n; i++) {
		hwloc_bitmap_free(gs->g[i].cpus);
	}
	free(gs->g);
}

static int
cmp_group_key(const void *a, const void *b)
{
	const struct cpu_group *x = a, *y = b;

	return (x->key > y->key) - (x->key < y->key);
}

/* More allowed CPUs first, then the lower key. */
static int
cmp_group_size(const void *a, const void *b)
{
	const struct cpu_group *x = a, *y = b;
	int wx = hwloc_bitmap_weight(x->cpus), wy = hwloc_bitmap_weight(y->cpus);

	if (wx != wy) {
		return wx > wy ? -1 : 1;
	}
	return cmp_group_key(a, b);
}

/* The key of a CPU's physical core: its lowest CPU, disallowed siblings
 * included (as torch's thread_siblings_list). */
static int
core_key(const struct numa_topology *t, unsigned cpu)
{
	hwloc_obj_t pu = hwloc_get_pu_obj_by_os_index(t->topo, cpu);
	hwloc_obj_t core = pu ? hwloc_get_ancestor_obj_by_type(t->topo, HWLOC_OBJ_CORE, pu) : NULL;

	return core ? hwloc_bitmap_first(core->cpuset) : (int)cpu;
}

/* The key of a CPU's highest-level data or unified cache: its lowest CPU;
 * -1 when the CPU has no cache. */
static int
cache_key(const struct numa_topology *t, unsigned cpu)
{
	hwloc_obj_t pu = hwloc_get_pu_obj_by_os_index(t->topo, cpu), best = NULL;

	for (hwloc_obj_t o = pu ? pu->parent : NULL; o; o = o->parent) {
		if (hwloc_obj_type_is_dcache(o->type) &&
		    (!best || o->attr->cache.depth > best->attr->cache.depth)) {
			best = o;
		}
	}
	return best ? hwloc_bitmap_first(best->cpuset) : -1;
}

static void
group_cpus(const struct numa_topology *t, hwloc_const_bitmap_t cpus,
	   int (*key)(const struct numa_topology *, unsigned), struct cpu_groups *ret)
{
	unsigned i;

	hwloc_bitmap_foreach_begin(i, cpus)
	{
		groups_add(ret, key(t, i), i);
	}
	hwloc_bitmap_foreach_end();
}

/* The GPUs on the same node(s) as GPU self: how many, and self's position. */
static size_t
node_peers(const struct numa_topology *t, size_t self, size_t *ret_pos)
{
	size_t count = 0;

	for (size_t i = 0; i < t->n_gpus; i++) {
		if (hwloc_bitmap_isequal(t->gpus[i].home, t->gpus[self].home)) {
			if (i == self) {
				*ret_pos = count;
			}
			count++;
		}
	}
	return count;
}

static char *
nodes_phrase(hwloc_const_bitmap_t nodes)
{
	_cleanup_free_ char *list = numa_bitmap_list(nodes);

	return xasprintf("NUMA node%s %s", hwloc_bitmap_weight(nodes) == 1 ? "" : "s", list);
}

/* How exclusive_cpus() says that a node has fewer cores than GPUs (torch's
 * words); numa_plan_new() tells that error from the others by it. */
#define SHORTAGE_PREFIX "There are only "

static char *
exclusive_cpus(const struct numa_topology *t, size_t gpu, hwloc_const_bitmap_t domain,
	       hwloc_bitmap_t ret)
{
	struct cpu_groups cores = {0};
	size_t pos = 0, ngpus = node_peers(t, gpu, &pos), base, extra, start, end;

	group_cpus(t, domain, core_key, &cores);
	qsort(cores.g, cores.n, sizeof(*cores.g), cmp_group_key);
	base = cores.n / ngpus;
	extra = cores.n % ngpus;
	if (base < 1) {
		_cleanup_free_ char *where = nodes_phrase(t->gpus[gpu].home);
		char *err = xasprintf(SHORTAGE_PREFIX "%zu physical cores on %s, but there are %zu "
						      "GPUs associated with this NUMA node.",
				      cores.n, where, ngpus);

		groups_release(&cores);
		return err;
	}
	start = pos * base + (pos < extra ? pos : extra);
	end = start + base + (pos < extra ? 1 : 0);
	for (size_t i = start; i < end; i++) {
		hwloc_bitmap_or(ret, ret, cores.g[i].cpus);
	}
	groups_release(&cores);
	return NULL;
}

static void
core_complex_cpus(const struct numa_topology *t, size_t gpu, hwloc_const_bitmap_t domain,
		  hwloc_bitmap_t ret)
{
	struct cpu_groups ccx = {0};
	size_t pos = 0;

	(void)node_peers(t, gpu, &pos);
	group_cpus(t, domain, cache_key, &ccx);
	qsort(ccx.g, ccx.n, sizeof(*ccx.g), cmp_group_size);
	hwloc_bitmap_copy(ret, ccx.g[pos % ccx.n].cpus);
	groups_release(&ccx);
}

/* Fill b's node list from a nodeset. */
static void
binding_set_nodes(struct numa_binding *b, hwloc_const_bitmap_t nodes)
{
	unsigned i;
	int w = hwloc_bitmap_weight(nodes);

	free(b->numa_nodes);
	free(b->numa_nodes_list);
	b->numa_nodes = xcalloc(w > 0 ? (size_t)w : 1, sizeof(int));
	b->n_numa_nodes = 0;
	hwloc_bitmap_foreach_begin(i, nodes)
	{
		b->numa_nodes[b->n_numa_nodes++] = (int)i;
	}
	hwloc_bitmap_foreach_end();
	b->numa_nodes_list = numa_bitmap_list(nodes);
}

static void
binding_set_masks(struct numa_binding *b, hwloc_const_bitmap_t cpus, hwloc_const_bitmap_t mems)
{
	const size_t bits = 8 * sizeof(unsigned long);
	unsigned i;

	if (cpus) {
		int n = hwloc_bitmap_last(cpus) + 1;

		b->cpu_mask_size = CPU_ALLOC_SIZE(n);
		b->cpu_mask = xcalloc(1, b->cpu_mask_size);
		hwloc_bitmap_foreach_begin(i, cpus)
		{
			CPU_SET_S(i, b->cpu_mask_size, b->cpu_mask);
		}
		hwloc_bitmap_foreach_end();
	}
	if (mems) {
		size_t words = (size_t)hwloc_bitmap_last(mems) / bits + 1;

		b->mem_mask = xcalloc(words, sizeof(unsigned long));
		/* The kernel reads maxnode - 1 bits. */
		b->mem_maxnode = (unsigned long)(words * bits + 1);
		hwloc_bitmap_foreach_begin(i, mems)
		{
			b->mem_mask[i / bits] |= 1UL << (i % bits);
		}
		hwloc_bitmap_foreach_end();
	}
}

/* The CPUs of one rank (GPU gpu) in its domain, by the mode of req, into
 * cpus. Returns NULL, or why it cannot be bound (malloc'd). */
static char *
rank_cpus(const struct numa_topology *t, const struct numa_request *req, size_t gpu,
	  hwloc_const_bitmap_t domain, hwloc_bitmap_t cpus)
{
	char *err = NULL;

	switch (req->mode) {
	case NUMA_MODE_NONE:
	case NUMA_MODE_NODE:
	case NUMA_MODE_SOCKET:
		hwloc_bitmap_copy(cpus, domain);
		break;
	case NUMA_MODE_EXCLUSIVE:
		err = exclusive_cpus(t, gpu, domain, cpus);
		break;
	case NUMA_MODE_CORE_COMPLEX:
		core_complex_cpus(t, gpu, domain, cpus);
		break;
	}
	if (err) {
		return err;
	}
	if (hwloc_bitmap_iszero(cpus)) {
		return xstrdup("Must bind to a non-empty set of CPU indices");
	}
	if (!req->plan_only && t->host_cpus && !hwloc_bitmap_isincluded(cpus, t->host_cpus)) {
		_cleanup_free_ char *missing = bitmap_list_andnot(cpus, t->host_cpus);

		return xasprintf("the topology in %s is not this machine's (CPUs %s of this "
				 "rank's plan are not online here): its plan cannot be applied",
				 t->source, missing);
	}
	return NULL;
}

/* --numa-membind: the memory nodes of a rank whose CPUs are on nodes, into
 * *ret_mems (a new bitmap, also on failure). Returns NULL, or why it cannot be
 * bound (malloc'd). */
static char *
rank_mems(const struct numa_topology *t, const struct numa_request *req, hwloc_const_bitmap_t nodes,
	  hwloc_bitmap_t *ret_mems)
{
	hwloc_bitmap_t mems = bitmap_and(nodes, t->allowed_nodes);

	*ret_mems = mems;
	if (hwloc_bitmap_iszero(mems)) {
		_cleanup_free_ char *where = nodes_phrase(nodes),
				    *allowed = numa_bitmap_list(t->allowed_nodes);

		return xasprintf("--numa-membind: the memory of %s may not be used here "
				 "(allowed memory nodes: %s)",
				 where, *allowed ? allowed : "none");
	}
	if (!req->plan_only && t->host_nodes && !hwloc_bitmap_isincluded(mems, t->host_nodes)) {
		_cleanup_free_ char *missing = bitmap_list_andnot(mems, t->host_nodes);

		return xasprintf("--numa-membind: the topology in %s is not this machine's "
				 "(NUMA nodes %s of this rank's plan are not online here)",
				 t->source, missing);
	}
	return NULL;
}

/* Fill b from the rank's nodes, CPUs and memory nodes (mems NULL: unbound
 * memory), with the message its child writes when the kernel refuses. */
static void
binding_fill(struct numa_binding *b, hwloc_const_bitmap_t nodes, hwloc_const_bitmap_t cpus,
	     hwloc_const_bitmap_t mems)
{
	if (mems) {
		b->mems = numa_bitmap_list(mems);
	}
	binding_set_nodes(b, nodes);
	b->cpus = numa_bitmap_list(cpus);
	binding_set_masks(b, cpus, mems);
	b->child_error = xasprintf(
		"elasticd: local_rank %d: the kernel refused the NUMA binding "
		"(CPUs %s%s%s); %s\n",
		b->local_rank, b->cpus, b->mems ? ", memory nodes " : "", b->mems ? b->mems : "",
		b->fallback ? "running unbound (--numa-fallback)" : "not starting the worker");
	b->child_error_len = strlen(b->child_error);
}

/* Plan one rank that has GPU gpu (an index into t->gpus, or t->n_gpus for
 * none). Returns NULL, or why it cannot be bound (malloc'd). */
static char *
plan_rank(const struct numa_topology *t, const struct numa_request *req, size_t gpu,
	  struct numa_binding *b)
{
	hwloc_bitmap_t domain_nodes = NULL, domain = NULL, cpus = NULL, nodes = NULL, mems = NULL;
	hwloc_const_bitmap_t home;
	char *err = NULL;
	hwloc_obj_t n = NULL;

	if (gpu >= t->n_gpus) {
		return xasprintf("no GPU for this local rank (%zu GPU%s %s)", t->n_gpus,
				 t->n_gpus == 1 ? "" : "s", t->n_gpus ? "to share out" : "found");
	}
	home = t->gpus[gpu].home;
	if (hwloc_bitmap_iszero(home)) {
		return xasprintf("hwloc cannot tell which NUMA node GPU %s is attached to",
				 t->gpus[gpu].busid);
	}
	domain_nodes =
		req->mode == NUMA_MODE_SOCKET ? socket_nodes(t, home) : numa_bitmap_dup(home);
	domain = nodes_cpus(t, domain_nodes);
	if (hwloc_bitmap_iszero(domain)) {
		_cleanup_free_ char *where = nodes_phrase(home),
				    *allowed = numa_bitmap_list(t->allowed);

		err = xasprintf("none of the CPUs of %s may be used here (allowed CPUs: %s); "
				"Must bind to a non-empty set of CPU indices",
				where, *allowed ? allowed : "none");
		goto out;
	}
	cpus = numa_bitmap_new();
	err = rank_cpus(t, req, gpu, domain, cpus);
	if (err) {
		goto out;
	}
	/* The nodes of the chosen CPUs. */
	nodes = numa_bitmap_new();
	while ((n = hwloc_get_next_obj_by_type(t->topo, HWLOC_OBJ_NUMANODE, n))) {
		if (hwloc_bitmap_isset(domain_nodes, n->os_index) && numa_node_has_cpus(t, n) &&
		    hwloc_bitmap_intersects(n->cpuset, cpus)) {
			hwloc_bitmap_set(nodes, n->os_index);
		}
	}
	if (req->membind) {
		err = rank_mems(t, req, nodes, &mems);
		if (err) {
			goto out;
		}
	}
	binding_fill(b, nodes, cpus, mems);

out:
	hwloc_bitmap_free(domain_nodes);
	hwloc_bitmap_free(domain);
	hwloc_bitmap_free(cpus);
	hwloc_bitmap_free(nodes);
	hwloc_bitmap_free(mems);
	return err;
}

int
numa_plan_new(const struct numa_topology *t, const struct numa_request *req, struct numa_plan **ret,
	      char **reterr)
{
	struct numa_plan *p = xcalloc(1, sizeof(*p));
	bool bind = req->mode != NUMA_MODE_NONE && !t->gpus_unknown;
	hwloc_bitmap_t none = numa_bitmap_new();

	p->mode = req->mode;
	p->membind = req->membind && bind;
	p->n = req->nproc > 0 ? (size_t)req->nproc : 0;
	p->ranks = xcalloc(p->n + 1, sizeof(*p->ranks));
	if (req->mode != NUMA_MODE_NONE && t->gpus_unknown) {
		p->warning = xasprintf("%s: no worker is bound", t->gpu_note);
	}
	for (size_t r = 0; r < p->n; r++) {
		struct numa_binding *b = &p->ranks[r];
		size_t gpu = r < t->n_gpus ? r : t->n_gpus;
		char *err;

		b->local_rank = (int)r;
		b->fallback = req->fallback;
		if (gpu < t->n_gpus) {
			b->gpu = xstrdup(t->gpus[gpu].busid);
		}
		if (!bind) {
			binding_set_nodes(b, gpu < t->n_gpus ? t->gpus[gpu].home : none);
			continue;
		}
		err = plan_rank(t, req, gpu, b);
		if (!err) {
			continue;
		}
		if (!req->fallback) {
			bool shortage = strncmp(err, SHORTAGE_PREFIX, strlen(SHORTAGE_PREFIX)) == 0;

			*reterr = b->gpu ? xasprintf("local_rank %zu (GPU %s): %s", r, b->gpu, err)
					 : xasprintf("local_rank %zu: %s", r, err);
			free(err);
			hwloc_bitmap_free(none);
			numa_plan_free(p);
			return shortage ? -ERANGE : -EINVAL;
		}
		b->error = err;
		binding_set_nodes(b, gpu < t->n_gpus ? t->gpus[gpu].home : none);
	}
	hwloc_bitmap_free(none);
	*ret = p;
	return 0;
}

void
numa_plan_free(struct numa_plan *p)
{
	if (!p) {
		return;
	}
	for (size_t i = 0; i < p->n; i++) {
		struct numa_binding *b = &p->ranks[i];

		free(b->gpu);
		free(b->numa_nodes);
		free(b->numa_nodes_list);
		free(b->cpus);
		free(b->mems);
		free(b->error);
		free(b->cpu_mask);
		free(b->mem_mask);
		free(b->child_error);
	}
	free(p->ranks);
	free(p->warning);
	free(p);
}

bool
numa_plan_names_gpus(const struct numa_plan *p)
{
	for (size_t i = 0; i < p->n; i++) {
		if (p->ranks[i].gpu) {
			return true;
		}
	}
	return false;
}

json_t *
numa_binding_to_json(const struct numa_plan *p, size_t local_rank)
{
	const struct numa_binding *b = &p->ranks[local_rank];
	const char *mode = numa_mode_to_string(p->mode);
	json_t *nodes = json_array();

	for (size_t i = 0; i < b->n_numa_nodes; i++) {
		json_array_append_new(nodes, json_integer(b->numa_nodes[i]));
	}
	return json_pack("{s:i, s:o, s:o, s:o, s:o, s:o}", "local_rank", b->local_rank, "gpu",
			 b->gpu ? json_string(b->gpu) : json_null(), "numa_nodes", nodes, "cpus",
			 b->cpus ? json_string(b->cpus) : json_null(), "mems",
			 b->mems ? json_string(b->mems) : json_null(), "mode",
			 mode ? json_string(mode) : json_null());
}
