#include "worker.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "log.h"
#include "output.h"
#include "spawn.h"
#include "util.h"

struct worker *
worker_new(int local_rank, int global_rank, int role_rank)
{
	struct worker *w = xcalloc(1, sizeof(*w));

	w->local_rank = local_rank;
	w->global_rank = global_rank;
	w->role_rank = role_rank;
	w->status_fd = -1;
	w->file_fd[0] = w->file_fd[1] = -1;
	return w;
}

static void
close_fds(int *fds, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		if (fds[i] >= 0) {
			close(fds[i]);
			fds[i] = -1;
		}
	}
}

int
worker_start(struct worker *w, struct event_base *base, struct spawn_args *a,
	     const struct worker_echo *echo)
{
	int child_fd[2] = {-1, -1}, pipe_rd[2] = {-1, -1};
	_cleanup_free_ char *prefix = NULL;
	int r;

	/* A group re-formed within the same attempt (a membership change, a
	 * restart asked over the control socket) reuses the attempt's directory:
	 * the logs go on after what the stopped workers wrote, and their error
	 * file, which would pass for this worker's, goes. */
	if (w->error_file && *w->error_file && unlink(w->error_file) < 0 && errno != ENOENT) {
		log_warn("cannot remove the old error file %s: %s", w->error_file, strerror(errno));
	}
	for (int s = 0; s < 2; s++) {
		int p[2];

		switch (w->stream_mode[s]) {
		case WORKER_STREAM_INHERIT:
			break;
		case WORKER_STREAM_DEVNULL:
			child_fd[s] = open("/dev/null", O_WRONLY | O_CLOEXEC);
			if (child_fd[s] < 0) {
				r = -errno;
				goto out_close;
			}
			break;
		case WORKER_STREAM_FILE:
		case WORKER_STREAM_TEE:
			w->file_fd[s] =
				open(w->stream_path[s],
				     O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC | O_NOCTTY, 0644);
			if (w->file_fd[s] < 0) {
				r = -errno;
				goto out_close;
			}
			if (w->stream_mode[s] == WORKER_STREAM_FILE) {
				child_fd[s] = w->file_fd[s];
				w->file_fd[s] = -1;
				break;
			}
			if (pipe2(p, O_CLOEXEC) < 0) {
				r = -errno;
				goto out_close;
			}
			pipe_rd[s] = p[0];
			child_fd[s] = p[1];
			break;
		}
	}
	a->stdout_fd = child_fd[0];
	a->stderr_fd = child_fd[1];
	r = spawn_process(a, &w->pid, &w->status_fd);
	if (r < 0) {
		goto out_close;
	}
	w->start_usec = now_usec();
	w->start_wall = time(NULL);
	close_fds(child_fd, 2);
	/* The prefix may name the pid: made now, before anything is read. */
	if (pipe_rd[0] >= 0 || pipe_rd[1] >= 0) {
		prefix = echo->prefix(w, echo->arg);
	}
	for (int s = 0; s < 2; s++) {
		if (pipe_rd[s] >= 0) {
			w->tee[s] = tee_new(base, pipe_rd[s], w->file_fd[s], echo->consoles[s],
					    w->local_rank, prefix, echo->eof_cb, echo->arg);
			if (echo->filters[s] && echo->filtered_fd[s] >= 0) {
				tee_duplicate(w->tee[s], echo->filtered_fd[s], echo->filters[s]);
			}
		}
	}
	return 0;

out_close:
	close_fds(child_fd, 2);
	close_fds(pipe_rd, 2);
	close_fds(w->file_fd, 2);
	return r;
}

void
worker_set_exit(struct worker *w, int wstatus)
{
	w->reaped = true;
	w->exit_usec = now_usec();
	w->exit_wall = time(NULL);
	if (WIFSIGNALED(wstatus)) {
		w->exitcode = -WTERMSIG(wstatus);
	} else {
		w->exitcode = WEXITSTATUS(wstatus);
	}
	if (w->status_fd >= 0) {
		w->exec_errno = spawn_read_status(w->status_fd);
		close(w->status_fd);
		w->status_fd = -1;
	}
}

int
worker_signal(struct worker *w, int sig)
{
	/* Never signal group 0 or 1: that would be the agent's own group or init. */
	if (w->pid <= 1 || w->group_empty) {
		return -ESRCH;
	}
	if (kill(-w->pid, sig) == 0) {
		return 0;
	}
	if (errno != ESRCH) {
		return -errno;
	}
	if (!w->reaped) {
		/* Forked but not yet in its own session: signal the child itself (its pid
		 * cannot be reused before we reap it). The signal stays pending until it
		 * restores its mask just before exec. */
		return kill(w->pid, sig) < 0 ? -errno : 0;
	}
	w->group_empty = true;
	return -ESRCH;
}

bool
worker_group_alive(struct worker *w)
{
	if (w->pid <= 1 || w->group_empty) {
		return false;
	}
	if (!w->reaped) {
		return true;
	}
	if (kill(-w->pid, 0) < 0 && errno == ESRCH) {
		w->group_empty = true;
		return false;
	}
	return true;
}

bool
worker_streams_done(const struct worker *w)
{
	for (int s = 0; s < 2; s++) {
		if (w->tee[s] && !tee_done(w->tee[s])) {
			return false;
		}
	}
	return true;
}

void
worker_streams_drain(struct worker *w)
{
	for (int s = 0; s < 2; s++) {
		if (w->tee[s]) {
			tee_drain_and_close(w->tee[s]);
		}
	}
}

void
worker_free(struct worker *w)
{
	if (!w) {
		return;
	}
	for (int s = 0; s < 2; s++) {
		tee_free(w->tee[s]);
		free(w->stream_path[s]);
	}
	close_fds(w->file_fd, 2);
	if (w->status_fd >= 0) {
		close(w->status_fd);
	}
	free(w->error_file);
	free(w->server_socket);
	free(w);
}
