/* spawn.h — start one worker process (torchrun 2.x SubprocessHandler, plus
 * what torchrun lacks). The child side is async-signal-safe: it only restores
 * signals, makes its own session, enters its cgroup, arms PR_SET_PDEATHSIG, wires fds, closes the
 * rest and execs. */
#pragma once

#include <signal.h>
#include <stddef.h>
#include <sys/types.h>

struct numa_binding;

struct spawn_args {
	char *const *argv;       /* argv[0] is looked up in path unless it has a '/' */
	char *const *envp;       /* the complete environment */
	const char *path;        /* PATH for the lookup (the worker env's), NULL: "/usr/bin:/bin" */
	int stdin_fd;            /* -1: inherit the agent's */
	int stdout_fd;           /* -1: inherit the agent's */
	int stderr_fd;           /* -1: inherit the agent's */
	const sigset_t *sigmask; /* the mask to restore (the agent's mask before it blocked) */
	const int *reset_signals; /* signals whose disposition the agent changed: set to SIG_DFL */
	size_t n_reset_signals;
	/* CPU/memory binding applied just before exec (numa_apply), NULL: none. If
	 * the kernel refuses it the child writes binding->child_error to its stderr
	 * and, unless binding->fallback, fails like an exec failure with the errno. */
	const struct numa_binding *binding;
	/* > 2: an open cgroup.procs (cgroup.h) the child moves itself into right
	 * after setsid, before anything else can fork (a failure is reported as
	 * an exec failure with the errno); 0: none (the field's zero value). */
	int cgroup_fd;
};

/* Exit statuses of a child that could not exec, as a shell and tini report them. */
#define SPAWN_EXIT_NOT_FOUND 127
#define SPAWN_EXIT_CANNOT_EXEC 126

/* fork(2) a child that execs a->argv in its own session (setsid: pgid == pid),
 * with PR_SET_PDEATHSIG(SIGKILL) re-checked against getppid(), stdio wired,
 * every fd above 2 closed, the signal mask and the reset signals restored.
 * On success returns 0, the pid in *ret_pid and in *ret_status_fd the read end of
 * a CLOEXEC pipe (owned by the caller) that carries the child's errno as an int
 * if exec failed, and reaches end of file without data when exec succeeded; the
 * child then exits SPAWN_EXIT_NOT_FOUND (ENOENT) or SPAWN_EXIT_CANNOT_EXEC.
 * Returns -errno when pipe2 or fork fails. */
int spawn_process(const struct spawn_args *a, pid_t *ret_pid, int *ret_status_fd);

/* Non-blocking read of a status pipe: the exec errno if the child reported
 * one, 0 if it exec'd (end of file) or reported nothing. */
int spawn_read_status(int status_fd);
