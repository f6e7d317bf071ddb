/* filetimer_server.c — torch's FileTimerServer in the event loop (see
 * filetimer_server.h): the FIFO, one read event, one evtimer, kill(2). */
#include "filetimer_server.h"

#include <errno.h>
#include <event2/event.h>
#include <fcntl.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "events.h"
#include "filetimer.h"
#include "log.h"
#include "util.h"
#include "wenv.h"

/* Malformed or refused requests logged per attempt; later ones are counted. */
#define LOG_DROPPED_MAX 5
/* Reads per wake-up, so that a flood of requests cannot hold the loop. */
#define READS_PER_WAKEUP 16
/* Longest evtimer delay; a later deadline is re-armed when this fires (and a
 * wall-clock step is noticed within it). */
#define ARM_MAX_SEC 3600.0

struct filetimer_server {
	struct event_base *base;
	struct filetimer_server_spec spec;
	char *path;
	int fd;
	struct event *read_ev;
	struct event *timer_ev;
	struct filetimer_table *table;
	struct filetimer_lines lines;
	uint64_t dropped;
	bool made; /* the FIFO at path is ours to remove */
};

/* The wall clock in seconds since the epoch: torch's deadlines are
 * time.time() + after. */
static double
wall_seconds(void)
{
	return (double)wall_usec() / (double)USEC_PER_SEC;
}

static void
dropped(struct filetimer_server *s, const char *what, const char *why)
{
	s->dropped++;
	if (s->dropped <= LOG_DROPPED_MAX) {
		log_warn("FileTimer: dropped %s: %s%s", what, why,
			 s->dropped == LOG_DROPPED_MAX
				 ? " (further drops this attempt are not logged)"
				 : "");
	}
}

/* Arm the one timer for the earliest deadline, or disarm it. */
static void
arm(struct filetimer_server *s)
{
	double next, delay;
	struct timeval tv;

	if (!filetimer_table_next(s->table, &next)) {
		evtimer_del(s->timer_ev);
		return;
	}
	delay = next - wall_seconds();
	delay = delay < 0 ? 0 : delay > ARM_MAX_SEC ? ARM_MAX_SEC : delay;
	tv.tv_sec = (time_t)delay;
	/* Round up, so that the timer never fires before the deadline. */
	tv.tv_usec = (suseconds_t)((delay - (double)tv.tv_sec) * 1e6) + 1;
	if (tv.tv_usec >= 1000000) {
		tv.tv_sec++;
		tv.tv_usec -= 1000000;
	}
	evtimer_add(s->timer_ev, &tv);
}

static bool
pid_alive(pid_t pid, void *arg)
{
	(void)arg;
	return kill(pid, 0) == 0 || errno != ESRCH;
}

static void
apply_request(struct filetimer_server *s, const struct filetimer_request *req)
{
	int r = filetimer_table_apply(s->table, req);

	if (r == -ENOSPC && filetimer_table_prune(s->table, pid_alive, NULL) > 0) {
		r = filetimer_table_apply(s->table, req);
	}
	if (r == -ENOSPC) {
		char *why =
			xasprintf("%zu timers are armed already (pid %d, scope '%s')",
				  filetimer_table_count(s->table), (int)req->pid, req->scope_id);

		dropped(s, "a timer", why);
		free(why);
		return;
	}
	log_debug("FileTimer: pid %d scope '%s' expiration_time %.6f signal %d: %s", (int)req->pid,
		  req->scope_id, req->expiration_time, req->signal,
		  r == FILETIMER_SET        ? "set"
		  : r == FILETIMER_REPLACED ? "replaced"
		  : r == FILETIMER_RELEASED ? "released"
					    : "release of no timer");
}

static void
line_cb(const char *buf, size_t len, bool too_long, void *arg)
{
	struct filetimer_server *s = arg;
	struct filetimer_request req = {0};
	char *err = NULL;

	if (too_long) {
		dropped(s, "a request", "longer than PIPE_BUF (4096) bytes");
		return;
	}
	if (filetimer_parse(buf, len, &req, &err) < 0) {
		dropped(s, "a malformed request", err);
		free(err);
		return;
	}
	apply_request(s, &req);
	filetimer_request_release(&req);
}

static void
read_cb(evutil_socket_t fd, short what, void *arg)
{
	struct filetimer_server *s = arg;
	char buf[FILETIMER_LINE_MAX];

	(void)what;
	for (int i = 0; i < READS_PER_WAKEUP; i++) {
		ssize_t n = read(fd, buf, sizeof(buf));

		if (n < 0 && errno == EINTR) {
			continue;
		}
		if (n <= 0) {
			if (n < 0 && errno != EAGAIN) {
				log_warn("FileTimer: cannot read %s: %s", s->path, strerror(errno));
			}
			break;
		}
		filetimer_lines_feed(&s->lines, buf, (size_t)n, line_cb, s);
	}
	arm(s);
}

/* elasticd.worker.timer_expired: torch's "kill worker process" watchdog
 * event (LocalElasticAgent._log_watchdog_event) in elasticd's form. */
static void
record_expired(struct filetimer_server *s, const struct filetimer_expired *x, double now,
	       const char *action, int err)
{
	struct elastic_event ev;

	if (!events_enabled(s->spec.events)) {
		return;
	}
	elastic_event_init(&ev, "elasticd.worker.timer_expired", EVENT_SOURCE_AGENT,
			   (int64_t)(now * 1000));
	elastic_event_set_string(&ev, "run_id", s->spec.run_id);
	elastic_event_set_string(&ev, "hostname", host_fqdn());
	elastic_event_set_string(&ev, "role", s->spec.role);
	elastic_event_set_int(&ev, "attempt", s->spec.attempt);
	elastic_event_set_int(&ev, "worker_pid", x->pid);
	elastic_event_set_string(&ev, "scope_id", x->scope_id);
	elastic_event_set_double(&ev, "expiration_time", x->expiration_time);
	elastic_event_set_double(&ev, "late_ms", (now - x->expiration_time) * 1000);
	elastic_event_set_int(&ev, "expired_timers", (long long)x->n_expired);
	if (x->signal > 0) {
		elastic_event_set_int(&ev, "signal", x->signal);
	} else {
		elastic_event_set_null(&ev, "signal");
	}
	elastic_event_set_string(&ev, "action", action);
	elastic_event_set_string(&ev, "error", err ? strerror(err) : NULL);
	elastic_event_set_string(&ev, "timer_file", s->path);
	events_record(s->spec.events, &ev);
	elastic_event_release(&ev);
}

/* torch's _run_watchdog for one pid: signal it (ESRCH counts as reaped),
 * log, record. */
static void
reap(struct filetimer_server *s, const struct filetimer_expired *x, double now)
{
	const char *sig = x->signal > 0 ? signal_name(x->signal) : NULL;
	const char *action = "signalled";
	int err = 0;

	if (s->spec.expired_total) {
		(*s->spec.expired_total)++;
	}
	if (x->signal <= 0) {
		action = "not_signalled";
		log_info("FileTimer: pid %d timer '%s' expired; no signal asked, not reaped",
			 (int)x->pid, x->scope_id);
	} else if (x->pid == getpid()) {
		action = "refused";
		log_warn(
			"FileTimer: pid %d timer '%s' expired; refusing to signal the agent itself",
			(int)x->pid, x->scope_id);
	} else if (kill(x->pid, x->signal) < 0) {
		err = errno;
		action = err == ESRCH ? "no_such_process" : "failed";
		log_write(err == ESRCH ? LOG_LEVEL_INFO : LOG_LEVEL_ERROR,
			  "FileTimer: pid %d timer '%s' expired; cannot send signal %d: %s",
			  (int)x->pid, x->scope_id, x->signal, strerror(err));
	} else {
		log_warn("FileTimer: pid %d timer '%s' expired %.3f s ago; sent %s%s%d%s",
			 (int)x->pid, x->scope_id, now - x->expiration_time, sig ? sig : "",
			 sig ? " (" : "signal ", x->signal, sig ? ")" : "");
	}
	record_expired(s, x, now, action, err);
}

static void
timer_cb(evutil_socket_t fd, short what, void *arg)
{
	struct filetimer_server *s = arg;
	struct filetimer_expired *ex = NULL;
	double now = wall_seconds();
	size_t n = filetimer_table_expire(s->table, now, &ex);

	(void)fd;
	(void)what;
	for (size_t i = 0; i < n; i++) {
		reap(s, &ex[i], now);
	}
	filetimer_expired_free(ex, n);
	arm(s);
}

/* torch's FileTimerServer.__init__: remove what is there, mkfifo. */
static int
make_fifo(const char *path)
{
	if (unlink(path) < 0 && errno != ENOENT) {
		return -errno;
	}
	if (mkfifo(path, 0600) < 0) {
		return -errno;
	}
	return 0;
}

struct filetimer_server *
filetimer_server_new(struct event_base *base, char *const *env,
		     const struct filetimer_server_spec *spec)
{
	const char *enabled = wenv_get(env, "TORCHELASTIC_ENABLE_FILE_TIMER");
	const char *given = wenv_get(env, "TORCHELASTIC_TIMER_FILE");
	struct filetimer_server *s;
	char uuid[37];
	int r;

	if (!enabled || strcmp(enabled, "1") != 0) {
		return NULL;
	}
	if (!given && (r = uuid4_string(uuid)) < 0) {
		log_error("FileTimer: cannot make a FIFO name: %s", strerror(-r));
		return NULL;
	}
	s = xcalloc(1, sizeof(*s));
	s->base = base;
	s->spec = *spec;
	s->fd = -1;
	s->path = given ? xstrdup(given) : xasprintf("/tmp/watchdog_timer_%s", uuid);
	r = make_fifo(s->path);
	if (r < 0) {
		log_error("FileTimer: cannot make the FIFO '%s': %s", s->path, strerror(-r));
		goto out_free;
	}
	s->made = true;
	s->fd = open(s->path, O_RDWR | O_NONBLOCK | O_CLOEXEC);
	if (s->fd < 0) {
		log_error("FileTimer: cannot open the FIFO '%s': %s", s->path, strerror(errno));
		goto out_free;
	}
	s->table = filetimer_table_new(FILETIMER_TIMERS_MAX);
	s->read_ev = event_new(base, s->fd, EV_READ | EV_PERSIST, read_cb, s);
	s->timer_ev = evtimer_new(base, timer_cb, s);
	if (!s->read_ev || !s->timer_ev || event_add(s->read_ev, NULL) < 0) {
		log_error("FileTimer: cannot watch the FIFO '%s'", s->path);
		goto out_free;
	}
	log_info("[%s] FileTimer: serving TORCHELASTIC_TIMER_FILE=%s", spec->role, s->path);
	return s;

out_free:
	filetimer_server_free(s);
	return NULL;
}

const char *
filetimer_server_path(const struct filetimer_server *s)
{
	return s ? s->path : NULL;
}

size_t
filetimer_server_count(const struct filetimer_server *s)
{
	return s && s->table ? filetimer_table_count(s->table) : 0;
}

void
filetimer_server_free(struct filetimer_server *s)
{
	if (!s) {
		return;
	}
	if (s->read_ev) {
		event_free(s->read_ev);
	}
	if (s->timer_ev) {
		event_free(s->timer_ev);
	}
	if (s->fd >= 0) {
		close(s->fd);
	}
	if (s->made && unlink(s->path) < 0 && errno != ENOENT) {
		log_warn("FileTimer: cannot remove '%s': %s", s->path, strerror(errno));
	}
	if (s->table && filetimer_table_count(s->table) > 0) {
		log_debug("FileTimer: %zu timers dropped unfired", filetimer_table_count(s->table));
	}
	filetimer_table_free(s->table);
	free(s->path);
	free(s);
}
