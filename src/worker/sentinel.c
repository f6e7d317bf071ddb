#include "sentinel.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <string.h>
#include <sys/prctl.h>
#include <unistd.h>

#include "cgroup.h"
#include "proctree.h"
#include "util.h"

enum sentinel_kind {
	MSG_WATCH_GROUP = 1,
	MSG_FORGET_GROUP,
	MSG_WATCH_PID,
	MSG_FORGET_PID,
};

/* One message on the pipe (16 bytes: one atomic pipe write). */
struct sentinel_msg {
	int32_t kind;
	int32_t pid;
	uint64_t start;
};

/* What the sentinel holds for the agent. */
struct watch {
	const char *cgroup;
	pid_t *groups;
	size_t n_groups, cap_groups;
	struct proc_id *procs;
	size_t n_procs, cap_procs;
};

struct sentinel {
	pid_t pid;
	int fd;
	char *cgroup;
	/* What the agent handed over, mirrored: a new sentinel starts with it. */
	struct watch held;
};

static void
watch_take(struct watch *w, const struct sentinel_msg *m)
{
	switch ((enum sentinel_kind)m->kind) {
	case MSG_WATCH_GROUP:
		if (w->n_groups == w->cap_groups) {
			w->cap_groups = w->cap_groups ? w->cap_groups * 2 : 64;
			w->groups = xrealloc(w->groups, w->cap_groups * sizeof(*w->groups));
		}
		w->groups[w->n_groups++] = m->pid;
		return;
	case MSG_FORGET_GROUP:
		for (size_t i = 0; i < w->n_groups; i++) {
			if (w->groups[i] == m->pid) {
				w->groups[i] = w->groups[--w->n_groups];
				return;
			}
		}
		return;
	case MSG_WATCH_PID:
		if (w->n_procs == w->cap_procs) {
			w->cap_procs = w->cap_procs ? w->cap_procs * 2 : 64;
			w->procs = xrealloc(w->procs, w->cap_procs * sizeof(*w->procs));
		}
		w->procs[w->n_procs++] = (struct proc_id){m->pid, m->start};
		return;
	case MSG_FORGET_PID:
		for (size_t i = 0; i < w->n_procs; i++) {
			if (w->procs[i].pid == m->pid && w->procs[i].start == m->start) {
				w->procs[i] = w->procs[--w->n_procs];
				return;
			}
		}
		return;
	}
}

/* The agent is gone: nothing of its workers may stay behind. Kill the cgroup
 * subtree; stop every watched process and group, walk their descendants
 * (stopped in turn, so that none forks or is re-parented away meanwhile)
 * until no new one shows up, then SIGKILL them all. */
static void
watch_kill(struct watch *w)
{
	int added = 1;

	if (w->cgroup) {
		(void)cgroup_kill(w->cgroup);
	}
	for (size_t i = 0; i < w->n_groups; i++) {
		kill(-w->groups[i], SIGSTOP);
	}
	for (int pass = 0; added > 0 && pass < 16; pass++) {
		added = 0;
		for (size_t i = 0; i < w->n_procs; i++) {
			int r;

			if (!proctree_same(&w->procs[i])) {
				continue;
			}
			kill(w->procs[i].pid, SIGSTOP);
			r = proctree_add_children(w->procs[i].pid, &w->procs, &w->n_procs,
						  &w->cap_procs);
			added += r > 0 ? r : 0;
		}
	}
	for (size_t i = 0; i < w->n_groups; i++) {
		kill(-w->groups[i], SIGKILL);
	}
	for (size_t i = 0; i < w->n_procs; i++) {
		if (proctree_same(&w->procs[i])) {
			kill(w->procs[i].pid, SIGKILL);
		}
	}
}

/* Remove the agent's cgroup subtree once its processes are gone (up to 5 s). */
static void
watch_remove_cgroup(const struct watch *w)
{
	if (!w->cgroup) {
		return;
	}
	(void)cgroup_wait_empty(w->cgroup, 5000);
	(void)cgroup_remove(w->cgroup);
}

static void
sentinel_main(int fd, struct watch w)
{
	static const int ignored[] = {SIGINT,  SIGTERM, SIGHUP,  SIGQUIT, SIGPIPE,
				      SIGUSR1, SIGUSR2, SIGTSTP, SIGTTIN, SIGTTOU};
	struct sigaction ign = {.sa_handler = SIG_IGN};
	sigset_t none;

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
		watch_take(&w, &m);
	}
	watch_kill(&w);
	watch_remove_cgroup(&w);
	_exit(0);
}

/* Fork a sentinel that starts with what s holds. Returns 0 or -errno. */
static int
sentinel_fork(struct sentinel *s)
{
	int p[2];
	pid_t pid;

	if (pipe2(p, O_CLOEXEC) < 0) {
		return -errno;
	}
	pid = fork();
	if (pid < 0) {
		int err = errno;

		close(p[0]);
		close(p[1]);
		return -err;
	}
	if (pid == 0) {
		close(p[1]);
		sentinel_main(p[0], s->held); /* the fork's copy of what s holds */
	}
	close(p[0]);
	s->pid = pid;
	s->fd = p[1];
	return 0;
}

struct sentinel *
sentinel_new(const char *cgroup)
{
	struct sentinel *s = xcalloc(1, sizeof(*s));
	int r;

	s->fd = -1;
	s->cgroup = cgroup ? xstrdup(cgroup) : NULL;
	s->held.cgroup = s->cgroup;
	r = sentinel_fork(s);
	if (r < 0) {
		sentinel_free(s);
		errno = -r;
		return NULL;
	}
	return s;
}

int
sentinel_respawn(struct sentinel *s)
{
	if (!s || s->pid) {
		return -EBUSY;
	}
	return sentinel_fork(s);
}

void
sentinel_held(const struct sentinel *s, size_t *groups, size_t *procs)
{
	*groups = s ? s->held.n_groups : 0;
	*procs = s ? s->held.n_procs : 0;
}

static void
send_msg(struct sentinel *s, enum sentinel_kind kind, pid_t pid, uint64_t start)
{
	struct sentinel_msg m = {.kind = (int32_t)kind, .pid = (int32_t)pid, .start = start};

	if (!s) {
		return;
	}
	watch_take(&s->held, &m);
	if (s->fd >= 0) {
		(void)write_all(s->fd, &m, sizeof(m));
	}
}

void
sentinel_watch(struct sentinel *s, pid_t pgid)
{
	if (pgid > 1) {
		send_msg(s, MSG_WATCH_GROUP, pgid, 0);
	}
}

void
sentinel_forget(struct sentinel *s, pid_t pgid)
{
	if (pgid > 1) {
		send_msg(s, MSG_FORGET_GROUP, pgid, 0);
	}
}

void
sentinel_watch_pid(struct sentinel *s, pid_t pid, uint64_t start)
{
	if (pid > 1 && start) {
		send_msg(s, MSG_WATCH_PID, pid, start);
	}
}

void
sentinel_forget_pid(struct sentinel *s, pid_t pid, uint64_t start)
{
	if (pid > 1 && start) {
		send_msg(s, MSG_FORGET_PID, pid, start);
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
	free(s->held.groups);
	free(s->held.procs);
	free(s->cgroup);
	free(s);
}
