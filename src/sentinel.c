#include "sentinel.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <string.h>
#include <sys/prctl.h>
#include <unistd.h>

#include "util.h"

struct sentinel {
	pid_t pid;
	int fd;
};

/* One message on the pipe: +pgid to watch, -pgid to forget. */
struct sentinel_msg {
	int32_t pgid;
};

static void
sentinel_main(int fd)
{
	static const int ignored[] = {SIGINT,  SIGTERM, SIGHUP,  SIGQUIT, SIGPIPE,
				      SIGUSR1, SIGUSR2, SIGTSTP, SIGTTIN, SIGTTOU};
	struct sigaction ign = {.sa_handler = SIG_IGN};
	sigset_t none;
	pid_t *groups = NULL;
	size_t n = 0, cap = 0;

	setsid();
	prctl(PR_SET_NAME, "elasticd-sentin", 0, 0, 0);
	for (size_t i = 0; i < ARRAY_SIZE(ignored); i++) {
		sigaction(ignored[i], &ign, NULL);
	}
	sigemptyset(&none);
	sigprocmask(SIG_SETMASK, &none, NULL);
	if (fd != 3) {
		dup2(fd, 3);
		fd = 3;
	}
	close_range(0, 2, 0);
	close_range(4, ~0U, 0);
	(void)fd_nonblock(fd, false);

	for (;;) {
		struct sentinel_msg m;
		ssize_t r = read(fd, &m, sizeof(m));

		if (r < 0 && errno == EINTR) {
			continue;
		}
		if (r != (ssize_t)sizeof(m)) {
			break;
		}
		if (m.pgid > 1) {
			if (n == cap) {
				cap = cap ? cap * 2 : 64;
				groups = xrealloc(groups, cap * sizeof(*groups));
			}
			groups[n++] = m.pgid;
		} else if (m.pgid < -1) {
			for (size_t i = 0; i < n; i++) {
				if (groups[i] == -m.pgid) {
					groups[i] = groups[--n];
					break;
				}
			}
		}
	}
	/* The agent is gone: nothing of its workers may stay behind. */
	for (size_t i = 0; i < n; i++) {
		kill(-groups[i], SIGKILL);
	}
	_exit(0);
}

struct sentinel *
sentinel_new(void)
{
	struct sentinel *s;
	int p[2];
	pid_t pid;

	if (pipe2(p, O_CLOEXEC) < 0) {
		return NULL;
	}
	pid = fork();
	if (pid < 0) {
		int err = errno;

		close(p[0]);
		close(p[1]);
		errno = err;
		return NULL;
	}
	if (pid == 0) {
		close(p[1]);
		sentinel_main(p[0]);
	}
	close(p[0]);
	s = xcalloc(1, sizeof(*s));
	s->pid = pid;
	s->fd = p[1];
	return s;
}

static void
send_msg(struct sentinel *s, int32_t pgid)
{
	struct sentinel_msg m = {.pgid = pgid};

	if (s && s->fd >= 0) {
		(void)write_all(s->fd, &m, sizeof(m));
	}
}

void
sentinel_watch(struct sentinel *s, pid_t pgid)
{
	if (pgid > 1) {
		send_msg(s, pgid);
	}
}

void
sentinel_forget(struct sentinel *s, pid_t pgid)
{
	if (pgid > 1) {
		send_msg(s, -pgid);
	}
}

void
sentinel_reaped(struct sentinel *s)
{
	if (!s) {
		return;
	}
	if (s->fd >= 0) {
		close(s->fd);
		s->fd = -1;
	}
	s->pid = 0;
}

pid_t
sentinel_pid(const struct sentinel *s)
{
	return s ? s->pid : 0;
}

void
sentinel_free(struct sentinel *s)
{
	if (!s) {
		return;
	}
	if (s->fd >= 0) {
		close(s->fd);
	}
	free(s);
}
