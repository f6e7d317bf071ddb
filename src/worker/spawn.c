#include "spawn.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <string.h>
#include <sys/prctl.h>
#include <unistd.h>

#include "cgroup.h"
#include "numa.h"
#include "util.h"

#ifndef CLOSE_RANGE_CLOEXEC
#define CLOSE_RANGE_CLOEXEC (1U << 2)
#endif

/* Child side: only async-signal-safe calls from here to exec. */
static void
child_fail(int status_fd, int err)
{
	ssize_t r;

	do {
		r = write(status_fd, &err, sizeof(err));
	} while (r < 0 && errno == EINTR);
	_exit(err == ENOENT ? SPAWN_EXIT_NOT_FOUND : SPAWN_EXIT_CANNOT_EXEC);
}

static int
child_dup(int from, int to)
{
	if (from < 0 || from == to) {
		return 0;
	}
	return dup2(from, to) < 0 ? -1 : 0;
}

static void
child_exec(const struct spawn_args *a, int status_fd)
{
	const char *file = a->argv[0];
	const char *path = a->path ? a->path : "/usr/bin:/bin";
	char buf[PATH_MAX];
	bool seen_eacces = false;

	if (strchr(file, '/')) {
		execve(file, a->argv, a->envp);
		child_fail(status_fd, errno);
	}
	for (const char *p = path;; p++) {
		const char *end = strchrnul(p, ':');
		size_t dlen = (size_t)(end - p), flen = strlen(file);

		if (dlen == 0) {
			/* An empty PATH entry means the current directory. */
			memcpy(buf, file, flen + 1);
		} else if (dlen + 1 + flen + 1 <= sizeof(buf)) {
			memcpy(buf, p, dlen);
			buf[dlen] = '/';
			memcpy(buf + dlen + 1, file, flen + 1);
		} else {
			buf[0] = '\0';
		}
		if (buf[0]) {
			execve(buf, a->argv, a->envp);
			if (errno == EACCES) {
				seen_eacces = true;
			} else if (errno != ENOENT && errno != ENOTDIR && errno != ENAMETOOLONG) {
				child_fail(status_fd, errno);
			}
		}
		if (*end == '\0') {
			break;
		}
		p = end;
	}
	child_fail(status_fd, seen_eacces ? EACCES : ENOENT);
}

static void
child_main(const struct spawn_args *a, pid_t parent, int status_fd)
{
	struct sigaction dfl = {.sa_handler = SIG_DFL};

	for (size_t i = 0; i < a->n_reset_signals; i++) {
		sigaction(a->reset_signals[i], &dfl, NULL);
	}
	if (setsid() < 0) {
		child_fail(status_fd, errno);
	}
	if (a->cgroup_fd > 2) {
		int r = cgroup_enter(a->cgroup_fd);

		if (r < 0) {
			child_fail(status_fd, -r);
		}
	}
	if (prctl(PR_SET_PDEATHSIG, SIGKILL) < 0) {
		child_fail(status_fd, errno);
	}
	/* The agent may have died between fork and prctl: then nobody would kill us. */
	if (getppid() != parent) {
		_exit(SPAWN_EXIT_CANNOT_EXEC);
	}
	if (child_dup(a->stdin_fd, 0) < 0 || child_dup(a->stdout_fd, 1) < 0 ||
	    child_dup(a->stderr_fd, 2) < 0) {
		child_fail(status_fd, errno);
	}
	/* Everything above 2 but the status pipe goes; the pipe is CLOEXEC. */
	if (status_fd > 3) {
		close_range(3, (unsigned)status_fd - 1, 0);
	}
	close_range((unsigned)status_fd + 1, ~0U, 0);
	if (a->binding) {
		int r = numa_apply(a->binding);

		if (r < 0) {
			ssize_t n = write(2, a->binding->child_error, a->binding->child_error_len);

			(void)n;
			if (!a->binding->fallback) {
				child_fail(status_fd, -r);
			}
		}
	}
	if (sigprocmask(SIG_SETMASK, a->sigmask, NULL) < 0) {
		child_fail(status_fd, errno);
	}
	child_exec(a, status_fd);
}

int
spawn_process(const struct spawn_args *a, pid_t *ret_pid, int *ret_status_fd)
{
	pid_t parent = getpid(), pid;
	int p[2];

	if (pipe2(p, O_CLOEXEC) < 0) {
		return -errno;
	}
	/* The status pipe must not land on 0..2, which the child overwrites. */
	for (int i = 0; i < 2; i++) {
		if (p[i] <= 2) {
			int fd = fcntl(p[i], F_DUPFD_CLOEXEC, 3);

			if (fd < 0) {
				int err = -errno;

				close(p[0]);
				close(p[1]);
				return err;
			}
			close(p[i]);
			p[i] = fd;
		}
	}
	pid = fork();
	if (pid < 0) {
		int err = -errno;

		close(p[0]);
		close(p[1]);
		return err;
	}
	if (pid == 0) {
		close(p[0]);
		child_main(a, parent, p[1]);
		_exit(SPAWN_EXIT_CANNOT_EXEC);
	}
	close(p[1]);
	*ret_pid = pid;
	*ret_status_fd = p[0];
	return 0;
}

int
spawn_read_status(int status_fd)
{
	int err = 0;
	ssize_t n;

	if (fd_nonblock(status_fd, true) < 0) {
		return 0;
	}
	do {
		n = read(status_fd, &err, sizeof(err));
	} while (n < 0 && errno == EINTR);
	return n == (ssize_t)sizeof(err) ? err : 0;
}
