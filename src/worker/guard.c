#include "guard.h"

#include <errno.h>
#include <signal.h>
#include <string.h>
#include <unistd.h>

#include "cgroup.h"
#include "proctree.h"
#include "sentinel.h"
#include "util.h"

struct guard {
	struct sentinel *sentinel;
	char *cgroup; /* NULL: ancestry mode */
	int procs_fd;
	/* Ancestry mode: what the sentinel holds for this group. */
	struct proc_id *handed;
	size_t n_handed, cap_handed;
};

struct guard *
guard_new(struct sentinel *s, const char *cgroup_parent, const char *name, char **reterr)
{
	struct guard *gd = xcalloc(1, sizeof(*gd));
	int r;

	gd->sentinel = s;
	if (!cgroup_parent) {
		return gd;
	}
	r = cgroup_child_new(cgroup_parent, name, &gd->cgroup);
	if (r < 0) {
		*reterr = xasprintf("cannot create the cgroup %s/%s: %s", cgroup_parent, name,
				    strerror(-r));
		free(gd);
		return NULL;
	}
	gd->procs_fd = cgroup_open_procs(gd->cgroup);
	if (gd->procs_fd < 0) {
		*reterr = xasprintf("cannot open %s/cgroup.procs: %s", gd->cgroup,
				    strerror(-gd->procs_fd));
		gd->procs_fd = 0;
		guard_free(gd);
		return NULL;
	}
	return gd;
}

bool
guard_has_cgroup(const struct guard *gd)
{
	return gd && gd->cgroup;
}

int
guard_procs_fd(const struct guard *gd)
{
	return gd ? gd->procs_fd : 0;
}

/* Forget handed processes that are gone (pid reused or exited). */
static void
guard_prune(struct guard *gd)
{
	for (size_t i = 0; i < gd->n_handed;) {
		if (proctree_same(&gd->handed[i])) {
			i++;
			continue;
		}
		sentinel_forget_pid(gd->sentinel, gd->handed[i].pid, gd->handed[i].start);
		gd->handed[i] = gd->handed[--gd->n_handed];
	}
}

size_t
guard_scan(struct guard *gd, const pid_t *roots, size_t n)
{
	struct proc_id *seen = NULL;
	size_t n_seen = 0, cap = 0, added = 0;

	if (!gd || gd->cgroup || !gd->sentinel) {
		return 0;
	}
	guard_prune(gd);
	for (size_t i = 0; i < n; i++) {
		if (roots[i] > 1 && !proctree_has(seen, n_seen, roots[i])) {
			if (n_seen == cap) {
				cap = cap ? cap * 2 : 64;
				seen = xrealloc(seen, cap * sizeof(*seen));
			}
			seen[n_seen++] = (struct proc_id){roots[i], proctree_start(roots[i])};
		}
	}
	/* Breadth first: seen grows while it is walked. */
	for (size_t i = 0; i < n_seen; i++) {
		(void)proctree_add_children(seen[i].pid, &seen, &n_seen, &cap);
	}
	for (size_t i = 0; i < n_seen; i++) {
		bool known = false;

		for (size_t k = 0; k < gd->n_handed && !known; k++) {
			known = gd->handed[k].pid == seen[i].pid &&
				gd->handed[k].start == seen[i].start;
		}
		if (known || !seen[i].start) {
			continue;
		}
		sentinel_watch_pid(gd->sentinel, seen[i].pid, seen[i].start);
		if (gd->n_handed == gd->cap_handed) {
			gd->cap_handed = gd->cap_handed ? gd->cap_handed * 2 : 64;
			gd->handed = xrealloc(gd->handed, gd->cap_handed * sizeof(*gd->handed));
		}
		gd->handed[gd->n_handed++] = seen[i];
		added++;
	}
	free(seen);
	return added;
}

int
guard_members(const struct guard *gd, pid_t **ret_pids)
{
	if (!gd || !gd->cgroup) {
		*ret_pids = NULL;
		return 0;
	}
	return cgroup_pids(gd->cgroup, ret_pids);
}

bool
guard_populated(const struct guard *gd)
{
	return gd && gd->cgroup && cgroup_populated(gd->cgroup) == 1;
}

int
guard_kill(struct guard *gd)
{
	return gd && gd->cgroup ? cgroup_kill(gd->cgroup) : 0;
}

void
guard_forget_all(struct guard *gd)
{
	if (!gd) {
		return;
	}
	for (size_t i = 0; i < gd->n_handed; i++) {
		sentinel_forget_pid(gd->sentinel, gd->handed[i].pid, gd->handed[i].start);
	}
	gd->n_handed = 0;
}

void
guard_free(struct guard *gd)
{
	if (!gd) {
		return;
	}
	guard_forget_all(gd);
	if (gd->procs_fd > 0) {
		close(gd->procs_fd);
	}
	if (gd->cgroup) {
		if (guard_populated(gd)) {
			(void)guard_kill(gd);
		}
		/* Busy while killed processes exit: the sentinel removes the
		 * subtree when the agent ends. */
		(void)cgroup_remove(gd->cgroup);
		free(gd->cgroup);
	}
	free(gd->handed);
	free(gd);
}
