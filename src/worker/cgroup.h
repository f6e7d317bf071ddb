/* cgroup.h — a cgroup v2 subtree that holds every process the workers start.
 *
 * When the agent may create cgroups under its own cgroup v2 directory (cgroup
 * v2 mounted writable, e.g. root on the host, or a subtree delegated by
 * systemd with Delegate=yes), each worker group runs in a child cgroup of
 * <own cgroup>/elasticd.<pid>: a descendant cannot leave it by setsid(),
 * double forks or re-parenting, and cgroup.kill (Linux 5.14) SIGKILLs every
 * member at once. The sentinel (sentinel.h) writes that cgroup.kill when the
 * agent dies. Nothing here depends on a cgroup controller being enabled. */
#pragma once

#include <stdbool.h>
#include <sys/types.h>

/* Create the agent's subtree <own cgroup v2 directory>/elasticd.<pid>, found
 * from /proc/self/cgroup ("0::<path>") and the cgroup2 mount in
 * /proc/self/mountinfo (one left by a dead agent with the same pid is
 * killed and made anew), and check that it has cgroup.kill and that a
 * process can be moved into a child of it: a forked probe moves itself into
 * <subtree>/probe and exits (blocks for that fork and exit). On success
 * returns 0 and the directory in *ret_path (malloc'd). Returns -errno with
 * *reterr (malloc'd, why) when there is no cgroup v2, it is read-only or not
 * ours (-EROFS, -EACCES, -EPERM), the kernel lacks cgroup.kill (-ENOTSUP),
 * etc. */
int cgroup_subtree_new(char **ret_path, char **reterr);

/* mkdir <parent>/<name>. Returns 0 and the path in *ret_path (malloc'd), or
 * -errno (an existing directory is -EEXIST). */
int cgroup_child_new(const char *parent, const char *name, char **ret_path);

/* Open <path>/cgroup.procs for writing (O_CLOEXEC): a child process writes
 * "0" to it to move itself in before exec (spawn.h). Returns the fd (owned
 * by the caller) or -errno. */
int cgroup_open_procs(const char *path);

/* Move the calling process into the cgroup whose cgroup.procs is open as
 * procs_fd. Async-signal-safe. Returns 0 or -errno. */
int cgroup_enter(int procs_fd);

/* SIGKILL every process in path and its descendant cgroups (cgroup.kill).
 * Returns 0 or -errno. */
int cgroup_kill(const char *path);

/* The processes listed in <path>/cgroup.procs (not descendant cgroups),
 * without the 0 entries the kernel writes for tasks it cannot name in our
 * pid namespace (a task in the middle of exiting is one): every pid > 0.
 * Returns the count (>= 0) and a malloc'd array in *ret_pids, or -errno. */
int cgroup_pids(const char *path, pid_t **ret_pids);

/* Whether a process is left in path or below it (cgroup.events "populated").
 * Returns 1, 0, or -errno. */
int cgroup_populated(const char *path);

/* Block (sleeping 10 ms at a time) until no process is left in path or
 * below it, or timeout_ms passed: for the sentinel and start-up only, never
 * the agent's loop. Returns whether it is empty (or unreadable). */
bool cgroup_wait_empty(const char *path, int timeout_ms);

/* rmdir path after its child directories (one level deep, as the agent makes
 * them). Returns 0, or -errno of the first rmdir that failed (-EBUSY: a
 * process is still inside). */
int cgroup_remove(const char *path);
