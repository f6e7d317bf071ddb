/* filetimer.h — torch's FileTimer protocol, the pure part: one request line
 * parsed into a struct, and the table of armed timers.
 *
 * The protocol is torch.distributed.elastic.timer.file_based_local_timer
 * (identical on the wire in torch 1.13 and 2.6): FileTimerClient opens the
 * FIFO named by TORCHELASTIC_TIMER_FILE with O_WRONLY|O_NONBLOCK, writes one
 * JSON object and a newline in one write(2) (FileTimerRequest.to_json(); it
 * refuses requests over select.PIPE_BUF = 4096 bytes, so each is atomic), and
 * closes it:
 *
 *   {"version": 1, "pid": <worker pid>, "scope_id": "<file>#<line>",
 *    "expiration_time": <seconds since the epoch, float>, "signal": <int>}
 *
 * acquire: expiration_time = time.time() + after, signal = the client's
 * (SIGKILL by default); release: expiration_time = -1, signal = 0. The server
 * (FileTimerServer) reads the keys pid, scope_id, expiration_time and signal
 * (version is ignored) and keys its timers by (pid, scope_id): a negative
 * expiration_time removes the key, anything else sets it (replacing). When
 * timers expire (expiration_time <= now), for each pid it takes the expired
 * timers in expiration order, signals the pid with the first signal > 0
 * (none: the pid is not signalled), and then removes every timer of that
 * pid, expired or not (_run_watchdog, clear_timers).
 *
 * Nothing here does I/O, reads a clock or logs. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

/* Longest request line, without its newline: torch's FileTimerClient refuses
 * a request longer than select.PIPE_BUF (4096) characters, all ASCII
 * (json.dumps' ensure_ascii). */
#define FILETIMER_LINE_MAX 4096
/* Default bound on the timers one table holds (torch has none). */
#define FILETIMER_TIMERS_MAX 1024

/* One FileTimerRequest. */
struct filetimer_request {
	pid_t pid;              /* > 0 */
	char *scope_id;         /* malloc'd, NUL-terminated, no NUL inside */
	double expiration_time; /* seconds since the epoch; < 0: release */
	int signal;             /* <= 0: expire without signalling */
};

/* Parse one request line buf[0..len) (no newline; a trailing "\r" or blanks
 * are allowed). torch's FileTimerServer._get_requests does json.loads(line)
 * and reads request["pid"], ["scope_id"], ["expiration_time"], ["signal"];
 * here the same four keys are required, other keys are ignored, and the types
 * are checked where torch would fail later or do harm: pid an integer in
 * [1, INT_MAX] (torch would os.kill(0 or -n), a whole process group),
 * scope_id a string without NUL, expiration_time a finite number (JSON has
 * no NaN/Infinity; Python's json.dumps writes them for an infinite `after`,
 * and such a line is refused), signal an integer in [INT_MIN, INT_MAX].
 * Returns 0 and fills *ret (release it with filetimer_request_release), or
 * -EINVAL with *reterr (malloc'd; "pid must be an integer > 0") and *ret
 * untouched; -E2BIG when len > FILETIMER_LINE_MAX. */
int filetimer_parse(const char *buf, size_t len, struct filetimer_request *ret, char **reterr);

/* Free what r owns and zero it; accepts a zeroed request. */
void filetimer_request_release(struct filetimer_request *r);

/* ---- lines ---------------------------------------------------------------- */

/* Splits what the FIFO delivers into request lines. Writers' requests arrive
 * whole (each is one write of at most PIPE_BUF bytes), but a read may end
 * inside one, and a writer that is not torch's client may send anything.
 * Zero-initialise; holds at most FILETIMER_LINE_MAX bytes. */
struct filetimer_lines {
	char buf[FILETIMER_LINE_MAX];
	size_t len;
	bool skipping; /* inside a line already reported too long */
};

/* Called for each complete line (without its newline), or once for a line
 * that outgrew FILETIMER_LINE_MAX (too_long; buf holds its first
 * FILETIMER_LINE_MAX bytes; the rest, up to its newline, is dropped). buf is
 * valid during the call only. */
typedef void (*filetimer_line_fn)(const char *buf, size_t len, bool too_long, void *arg);

/* Feed len bytes of data; complete lines go to fn at once, a partial last
 * line is kept for the next call. */
void filetimer_lines_feed(struct filetimer_lines *l, const char *data, size_t len,
			  filetimer_line_fn fn, void *arg);

/* ---- the table ---------------------------------------------------------- */

struct filetimer_table;

/* An empty table holding at most max_timers timers (0: FILETIMER_TIMERS_MAX).
 * Never NULL (aborts on OOM). */
struct filetimer_table *filetimer_table_new(size_t max_timers);

/* Free the table and its timers; accepts NULL. */
void filetimer_table_free(struct filetimer_table *t);

/* What filetimer_table_apply did. */
enum filetimer_applied {
	FILETIMER_SET,      /* acquire: a new timer */
	FILETIMER_REPLACED, /* acquire: the (pid, scope_id) timer got a new deadline */
	FILETIMER_RELEASED, /* release: the timer was removed */
	FILETIMER_UNKNOWN,  /* release of a key that has no timer: nothing to do */
};

/* Apply a request as torch's register_timers: expiration_time < 0 removes
 * the (pid, scope_id) timer, else sets it (copying scope_id; a replaced timer
 * keeps its place in the tie-break order, as a Python dict key does).
 * Returns the enum value (>= 0), or -ENOSPC when a new key would exceed the
 * table's bound (nothing changes). */
int filetimer_table_apply(struct filetimer_table *t, const struct filetimer_request *req);

/* Number of timers held. */
size_t filetimer_table_count(const struct filetimer_table *t);

/* The earliest expiration_time held (seconds since the epoch) in *ret.
 * Returns false (and leaves *ret) when the table is empty. */
bool filetimer_table_next(const struct filetimer_table *t, double *ret);

/* One pid whose timers expired: what torch's _run_watchdog does for it. */
struct filetimer_expired {
	pid_t pid;
	int signal;             /* the first expired timer's signal > 0, else 0: no kill */
	char *scope_id;         /* that timer's scope (or the earliest's), malloc'd */
	double expiration_time; /* that timer's */
	size_t n_expired;       /* how many of the pid's timers had expired */
	size_t n_cleared;       /* how many timers of the pid were removed (>= n_expired) */
};

/* Expire at now (seconds since the epoch): every timer with expiration_time
 * <= now, grouped by pid in order of each pid's earliest expired timer; for
 * each pid the expired timers in expiration order (ties: insertion order),
 * the first with signal > 0 chosen; then every timer of those pids removed
 * (torch clears a reaped pid's unexpired timers too). Returns the number of
 * pids and sets *ret to a malloc'd array of them (NULL when 0), released with
 * filetimer_expired_free. */
size_t filetimer_table_expire(struct filetimer_table *t, double now,
			      struct filetimer_expired **ret);

/* Free an array from filetimer_table_expire; accepts NULL. */
void filetimer_expired_free(struct filetimer_expired *e, size_t n);

/* Remove every timer whose pid alive(pid, arg) says is gone (torch 2.6's
 * clear_timers drops the timers of processes that no longer run). alive is
 * called once per distinct pid. Returns the number of timers removed. */
size_t filetimer_table_prune(struct filetimer_table *t, bool (*alive)(pid_t pid, void *arg),
			     void *arg);
