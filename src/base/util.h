/* util.h — small helpers shared by every module: allocation that aborts on
 * out-of-memory, string vectors, strict number parsing, clocks and fds. */
#pragma once

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/time.h>
#include <unistd.h>

#define ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))

/* A macro's value as a string literal: STRINGIFY(RETRIES) is "3". */
#define STRINGIFY(x) STRINGIFY_(x)
#define STRINGIFY_(x) #x

#define USEC_PER_SEC 1000000ULL
#define USEC_PER_MSEC 1000ULL

/* malloc/calloc/realloc/strdup that abort(3) with a message on out-of-memory.
 * Never return NULL; every peer-controlled size is bounded before it gets here. */
void *xmalloc(size_t size);
void *xcalloc(size_t nmemb, size_t size);
void *xrealloc(void *ptr, size_t size);
char *xstrdup(const char *s);
char *xstrndup(const char *s, size_t n);

/* printf into a newly allocated string (caller frees). Aborts on OOM. */
char *xasprintf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* xasprintf with a va_list (left to the caller to va_end). */
char *xvasprintf(const char *fmt, va_list ap) __attribute__((format(printf, 1, 0)));

/* Free *p and set it to NULL. */
void freep(void *p);

#define _cleanup_free_ __attribute__((cleanup(freep)))
void closep(int *fd);
#define _cleanup_close_ __attribute__((cleanup(closep)))

/* A NULL-terminated vector of owned strings ("strv"). */

/* Number of entries before the terminating NULL; 0 for a NULL vector. */
size_t strv_length(char *const *v);
/* Append a copy of s; *v may be NULL (then a new vector is made). */
void strv_push(char ***v, const char *s);
/* Append s itself, taking ownership of it. */
void strv_consume(char ***v, char *s);
/* Deep copy; NULL gives NULL. */
char **strv_copy(char *const *v);
/* Free every string and the vector; accepts NULL. */
void strv_free(char **v);

/* n bytes a peer sent, for a message: printable ASCII as it is, \\ and " escaped,
 * \r \n \t as such, every other byte as \xNN. Returns a malloc'd string. */
char *bytes_printable(const void *p, size_t n);

/* Parse a whole string as a base-10 integer in [min, max]. Leading and trailing
 * whitespace are refused. Returns 0, -EINVAL (not a number) or -ERANGE. *ret is
 * untouched on failure. */
int parse_int(const char *s, long long min, long long max, long long *ret);
/* Parse a whole string as a finite double. Returns 0 or -EINVAL. */
int parse_double(const char *s, double *ret);

/* CLOCK_MONOTONIC in microseconds: for deadlines and durations. */
uint64_t now_usec(void);
/* CLOCK_REALTIME in microseconds: for timestamps that leave the process. */
uint64_t wall_usec(void);

/* s seconds (finite, >= 0: the settings cap them at CONFIG_SECONDS_MAX) in
 * microseconds, truncated. */
uint64_t seconds_to_usec(double s);
/* usec microseconds as a struct timeval, for evtimer_add. */
struct timeval usec_to_timeval(uint64_t usec);

/* Set O_NONBLOCK on fd. Returns 0 or -errno. */
int fd_nonblock(int fd, bool on);

/* Write all of buf to a blocking fd, retrying on EINTR and short writes.
 * Returns 0 or -errno. */
int write_all(int fd, const void *buf, size_t len);

/* Read a whole regular file of at most max bytes into a NUL-terminated buffer
 * (caller frees); *ret_len (may be NULL) gets its length. Returns 0, -ENOENT,
 * -EINVAL when it is not a regular file (a FIFO is refused, never waited on),
 * -EFBIG when it holds more than max bytes (st_size is not trusted: sysfs
 * attributes report a page whatever they hold), or -errno. */
int read_file(const char *path, size_t max, char **ret_buf, size_t *ret_len);

/* mkdir -p with mode for every created component. Returns 0 or -errno. */
int mkdir_p(const char *path, mode_t mode);

/* Signal name with its "SIG" prefix ("SIGTERM" for 15), or NULL if
 * unknown. Static storage. */
const char *signal_name(int signo);

/* A waitpid(2) status in words: "exit status 3", "killed by SIGKILL", else
 * "wait status 0x...". Newly allocated (caller frees). */
char *wait_status_describe(int status);
/* Parse "SIGTERM", "TERM" or "15". Returns the number, or -EINVAL. */
int signal_from_name(const char *s);

/* Find an executable as execvp(3) would: file itself when it contains a '/',
 * else the first "<dir>/<file>" of path (colon-separated; NULL means
 * "/usr/bin:/bin") that is executable. Returns a malloc'd path or NULL. */
char *path_lookup(const char *file, const char *path);

/* This process's children (from /proc/self/task/<pid>/children; the agent is
 * single-threaded). Returns the count (>= 0) and a malloc'd array in
 * *ret_pids, or -errno (e.g. -ENOENT without CONFIG_PROC_CHILDREN). */
int proc_children(pid_t **ret_pids);

/* Number of CPUs this process may run on (sched_getaffinity), at least 1. */
int cpus_allowed_count(void);

/* The host's fully qualified name, as Python's socket.getfqdn(): the canonical
 * name of gethostname() when it resolves, else gethostname(). Looked up once and
 * cached (static storage); may block on DNS the first time. */
const char *host_fqdn(void);

/* A random (version 4) UUID into ret, lower-case 8-4-4-4-12 with a
 * terminating NUL, as Python's str(uuid.uuid4()) (getrandom(2)). Returns 0 or
 * -errno. */
int uuid4_string(char ret[37]);

/* A message at a bounded rate: at most one per interval_usec. Zero-initialise,
 * then set interval_usec. */
struct ratelimit {
	uint64_t interval_usec;
	uint64_t last_usec;  /* when one last passed */
	uint64_t suppressed; /* held back since */
	bool passed;         /* one passed already */
};

/* Whether a message at now (now_usec()) may go out: the first always, then at
 * most one per interval. When it may, *ret_suppressed (may be NULL) gets the
 * number held back since the last one that went out; when not, this one is
 * counted as held back. */
bool ratelimit_pass(struct ratelimit *rl, uint64_t now, uint64_t *ret_suppressed);
