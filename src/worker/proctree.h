/* proctree.h — processes by ancestry, from /proc (CONFIG_PROC_CHILDREN).
 *
 * Where no cgroup holds the workers (cgroup.h), the agent and the sentinel
 * find every process a worker started by walking /proc/<pid>/task/<tid>/children
 * from the workers and the agent's re-parented children down; a pid is paired
 * with its start time so that a pid reused by an unrelated process is never
 * taken for one of ours. */
#pragma once

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* One process: its pid and its start time in clock ticks after boot
 * (/proc/<pid>/stat field 22). */
struct proc_id {
	pid_t pid;
	uint64_t start;
};

/* The start time of pid (clock ticks after boot), or 0 when it is gone or
 * unreadable. */
uint64_t proctree_start(pid_t pid);

/* Whether id still names the same live process (pid exists, same start). */
int proctree_same(const struct proc_id *id);

/* Append to *ids (count *n, capacity *cap; a malloc'd array the caller owns)
 * the children of every thread of pid not already in it. Returns how many were
 * added (>= 0), or -errno when /proc/<pid>/task cannot be read (the process
 * is gone). */
int proctree_add_children(pid_t pid, struct proc_id **ids, size_t *n, size_t *cap);

/* Whether pid is in ids[0..n). */
int proctree_has(const struct proc_id *ids, size_t n, pid_t pid);
