/* guard.h — keeps hold of every process one worker group started, for the
 * promise that no process outlives the agent (sentinel.h), whatever its
 * session or process group.
 *
 * Two mechanisms, chosen once per agent (--orphan-guard):
 * - cgroup: the group gets its own cgroup v2 directory under the agent's
 *   subtree (cgroup.h); workers enter it before exec, so every descendant is
 *   inside; stops signal and kill its members, and the sentinel kills the
 *   subtree with cgroup.kill when the agent dies. No window.
 * - ancestry: every GUARD_SCAN_MS (GUARD_SCAN_FAST_MS for GUARD_FAST_S after
 *   a scan found a new process: processes come in bursts) the group walks
 *   /proc from its workers and the agent's re-parented children down
 *   (proctree.h) and hands each new process (pid and start time) to the
 *   sentinel. Limit: a process created and then re-parented away from its
 *   creator (double fork, setsid -f), or whose parent died, within the last
 *   scan before the agent is SIGKILLed is not known yet. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

struct sentinel;
struct guard;

/* How often ancestry mode hands new descendants to the sentinel, in ms. */
#define GUARD_SCAN_MS 100
#define GUARD_SCAN_FAST_MS 10
#define GUARD_FAST_S 2

/* A guard for one group. cgroup_parent: the agent's subtree (cgroup mode) or
 * NULL (ancestry mode); name: the group's directory under it (unique per
 * agent); s: the sentinel, may be NULL (both borrowed). Returns NULL with
 * *reterr (malloc'd) when the group's cgroup cannot be created. */
struct guard *guard_new(struct sentinel *s, const char *cgroup_parent, const char *name,
			char **reterr);

/* Whether the group has a cgroup (cgroup mode). */
bool guard_has_cgroup(const struct guard *gd);

/* The cgroup.procs fd a worker enters before exec (spawn_args.cgroup_fd), 0
 * in ancestry mode. Owned by the guard. */
int guard_procs_fd(const struct guard *gd);

/* Ancestry mode: hand the sentinel every descendant of roots[0..n) (and the
 * roots themselves) not handed yet, and forget those that are gone. Returns
 * how many were new (0 in cgroup mode: a no-op). */
size_t guard_scan(struct guard *gd, const pid_t *roots, size_t n);

/* cgroup mode: the processes in the group's cgroup. Returns the count and a
 * malloc'd array in *ret_pids; 0 in ancestry mode; -errno. */
int guard_members(const struct guard *gd, pid_t **ret_pids);

/* cgroup mode: whether any process is left in the group's cgroup; false in
 * ancestry mode. */
bool guard_populated(const struct guard *gd);

/* cgroup mode: SIGKILL everything in the group's cgroup (cgroup.kill).
 * Returns 0 (a no-op in ancestry mode and for NULL), or cgroup_kill's
 * -errno. */
int guard_kill(struct guard *gd);

/* The group is gone: tell the sentinel to forget what was handed to it. */
void guard_forget_all(struct guard *gd);

/* Forget, remove the group's cgroup (killing what is left in it) and free;
 * accepts NULL. */
void guard_free(struct guard *gd);
