/* sentinel.h — the last line of defence against orphaned processes.
 *
 * Workers carry PR_SET_PDEATHSIG(SIGKILL), so they die with the agent, but their
 * own children (data loaders, daemons, anything that called setsid()) would be
 * re-parented to init and live on. The sentinel is a tiny forked helper that
 * survives the agent: when the agent dies for any reason, even SIGKILL, it sees
 * end of file on its pipe, kills what it was handed and exits:
 *
 * - cgroup mode (cgroup.h): the agent's cgroup subtree, given at start;
 *   cgroup.kill takes every process inside, whatever its session or group;
 * - ancestry mode: the process groups and the processes (pid and start time)
 *   the agent handed it. It first stops (SIGSTOP) each one still alive and
 *   every descendant found under them, so that nothing forks or re-parents
 *   while it looks, then SIGKILLs them all. A process that was both created
 *   and re-parented away from its parent after the agent's last hand-over (the
 *   agent scans every ESCAPE_SCAN_MS, group.c) can escape: that is this mode's
 *   limit. */
#pragma once

#include <stdint.h>
#include <sys/types.h>

struct sentinel;

/* Fork the sentinel (its own session, named "elasticd-sentin", ignoring
 * terminal signals). cgroup: the agent's cgroup subtree to kill and remove
 * when the agent goes (copied), NULL for ancestry mode only. Returns the
 * handle, or NULL with errno set when pipe2 or fork fails (the agent then
 * runs without it). The child never returns. */
struct sentinel *sentinel_new(const char *cgroup);

/* Tell the sentinel to kill process group pgid (> 1) if the agent dies; forget
 * it again once the group is known to be empty. Best effort, never blocks for
 * long (one small write to a pipe). Accept a NULL sentinel. */
void sentinel_watch(struct sentinel *s, pid_t pgid);
void sentinel_forget(struct sentinel *s, pid_t pgid);

/* Tell the sentinel to kill process pid, started at start (clock ticks after
 * boot, proctree.h), and its descendants if the agent dies; forget it again.
 * The sentinel checks the start time before it signals anything. Accept a
 * NULL sentinel. */
void sentinel_watch_pid(struct sentinel *s, pid_t pid, uint64_t start);
void sentinel_forget_pid(struct sentinel *s, pid_t pid, uint64_t start);

/* The sentinel's pid, or 0 for NULL. */
pid_t sentinel_pid(const struct sentinel *s);

/* The sentinel process died and was reaped: stop writing to it. Safe to keep
 * using the handle: the watch calls only update what it holds for a respawn. */
void sentinel_reaped(struct sentinel *s);

/* Fork a new sentinel after sentinel_reaped; it starts with everything handed
 * over and not forgotten since sentinel_new (the mirror the handle keeps), so
 * nothing watched is lost. Returns 0, -EBUSY when the sentinel still runs (or
 * s is NULL), or -errno from pipe2/fork. */
int sentinel_respawn(struct sentinel *s);

/* How many process groups and processes the sentinel holds (0 for NULL). */
void sentinel_held(const struct sentinel *s, size_t *groups, size_t *procs);

/* Close the pipe (the sentinel kills what is still registered and exits) and
 * free; accepts NULL. */
void sentinel_free(struct sentinel *s);
