/* sentinel.h — the last line of defence against orphaned processes.
 *
 * Workers carry PR_SET_PDEATHSIG(SIGKILL), so they die with the agent, but their
 * own children (data loaders, shells' background jobs) would be re-parented to
 * init and live on. The sentinel is a tiny forked helper that survives the agent:
 * the agent tells it every worker process group it creates; when the agent dies
 * for any reason, even SIGKILL, the sentinel sees end of file on its pipe,
 * SIGKILLs every process group it was told about, and exits. */
#pragma once

#include <sys/types.h>

struct sentinel;

/* Fork the sentinel (its own session, named "elasticd-sentinel", ignoring
 * terminal signals). Returns the handle, or NULL with errno set when pipe2 or
 * fork fails (the agent then runs without it). The child never returns. */
struct sentinel *sentinel_new(void);

/* Tell the sentinel to kill process group pgid (> 1) if the agent dies; forget
 * it again once the group is known to be empty. Best effort, never blocks for
 * long (one small write to a pipe). Accept a NULL sentinel. */
void sentinel_watch(struct sentinel *s, pid_t pgid);
void sentinel_forget(struct sentinel *s, pid_t pgid);

/* The sentinel's pid, or 0 for NULL. */
pid_t sentinel_pid(const struct sentinel *s);

/* The sentinel process died and was reaped: stop writing to it. Safe to keep
 * using the handle (every call becomes a no-op). */
void sentinel_reaped(struct sentinel *s);

/* Close the pipe (the sentinel kills what is still registered and exits) and
 * free; accepts NULL. */
void sentinel_free(struct sentinel *s);
