/* worker.h — one worker process, torchrun's SubprocessHandler: its ranks, its
 * files, its pid and process group, and how it ended. Owned by its group. */
#pragma once

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

struct numa_binding;

struct console;
struct event_base;
struct spawn_args;
struct tee;

/* Where the two standard streams of a worker go. */
enum worker_stream_mode {
	WORKER_STREAM_INHERIT, /* the agent's own fd (torchrun: not redirected) */
	WORKER_STREAM_FILE,    /* the rank's log file is the child's fd (redirect) */
	WORKER_STREAM_TEE,     /* a pipe read by the agent: file + prefixed console */
	WORKER_STREAM_DEVNULL, /* not redirected, but outside --local-ranks-filter */
};

struct worker {
	int local_rank;
	int global_rank;
	int role_rank;
	/* Its GPU and binding (numa.h), borrowed from the agent's plan, which
	 * outlives every group; NULL when no topology was planned. */
	const struct numa_binding *binding;

	char *stream_path[2]; /* stdout.log / stderr.log, NULL when not written */
	enum worker_stream_mode stream_mode[2];
	char *error_file; /* TORCHELASTIC_ERROR_FILE given to the worker, "" when disabled */
	/* TORCH_WORKER_SERVER_SOCKET given to the worker, NULL: none. */
	char *server_socket;

	pid_t pid; /* 0 until started; also the process group id (setsid) */
	int status_fd;
	int file_fd[2];
	struct tee *tee[2];

	uint64_t start_usec; /* CLOCK_MONOTONIC */
	int64_t start_wall;  /* epoch seconds */
	bool reaped;
	int exitcode;       /* Python's returncode: >= 0 exit status, < 0 -signal */
	int exec_errno;     /* errno of a failed exec, else 0 */
	uint64_t exit_usec; /* CLOCK_MONOTONIC when reaped */
	int64_t exit_wall;  /* epoch seconds when reaped */
	bool failed;        /* counted as a failure (exited non-zero before any stop) */
	bool group_empty;   /* its process group has no member left */
	/* Sent by a group stop instead of the group's signal (SIGKILL stays
	 * SIGKILL), e.g. SIGABRT to a hung Python rank; 0: the group's. */
	int stop_signal;
};

/* Where a worker's teed streams go besides its log files, [0] stdout and [1]
 * stderr. Everything is borrowed. */
struct worker_echo {
	struct console *const *consoles; /* the agent's console of each stream */
	/* The console line prefix, called once the pid is known; returns a
	 * malloc'd string. */
	char *(*prefix)(const struct worker *w, void *arg);
	/* --duplicate-*-filters: the shared filtered_*.log of each stream (-1:
	 * none) and its needles (NULL-terminated; NULL: none). */
	int filtered_fd[2];
	char *const *filters[2];
	/* Called once for each teed stream at end of file. */
	void (*eof_cb)(struct tee *t, void *arg);
	void *arg; /* for prefix and eof_cb */
};

/* A new worker with the given ranks and no process; worker_free releases it. */
struct worker *worker_new(int local_rank, int global_rank, int role_rank);

/* Open the stream files and pipes per stream_mode/stream_path, fork and exec
 * with a (whose stdout_fd/stderr_fd are filled in here). Teed streams go
 * where echo says (prefixed lines on its consoles) and report end of file to
 * echo->eof_cb. Returns 0 or -errno (nothing started, files closed). */
int worker_start(struct worker *w, struct event_base *base, struct spawn_args *a,
		 const struct worker_echo *echo);

/* Record a waitpid(2) status for this worker's pid. */
void worker_set_exit(struct worker *w, int wstatus);

/* Send sig to the worker's whole process group (killpg), even when its leader
 * was already reaped, unless the group is known to be empty. Returns 0,
 * -ESRCH when the group is empty (then marks it so), or -errno. A child that
 * has not reached setsid() yet is signalled directly; the signal stays pending
 * until it execs. */
int worker_signal(struct worker *w, int sig);

/* Whether the worker's process group still has members (kill(-pgid, 0)); updates
 * group_empty. A worker never started has none. */
bool worker_group_alive(struct worker *w);

/* Both standard-stream pipes reached end of file (or there were none). */
bool worker_streams_done(const struct worker *w);

/* Read what the pipes hold now, flush and close them. */
void worker_streams_drain(struct worker *w);

/* Free; closes fds, frees tees; accepts NULL. Does not signal the process. */
void worker_free(struct worker *w);
