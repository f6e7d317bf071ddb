/* filetimer_server.h — torch's FileTimerServer served by the event loop.
 *
 * torchrun's LocalElasticAgent._setup_local_watchdog (torch 1.13 and 2.6,
 * agent/server/local_elastic_agent.py), at every worker-group start: when
 * the agent's environment has TORCHELASTIC_ENABLE_FILE_TIMER=1 it makes the
 * FIFO TORCHELASTIC_TIMER_FILE (or /tmp/watchdog_timer_<uuid4>, a new one per
 * attempt), exports its path to the workers, and runs a FileTimerServer on
 * it (file_based_local_timer.py); _shutdown stops it and removes the FIFO.
 * Here the FIFO is read by one libevent event (opened O_RDWR, so it never
 * reads EOF when the last writer closes) and the timers wait on one evtimer
 * armed for the earliest deadline: no thread, no 0.1 s scan. The protocol
 * itself is filetimer.h.
 *
 * Limits on what a worker can make the agent hold: requests longer than
 * FILETIMER_LINE_MAX bytes are dropped, at most FILETIMER_TIMERS_MAX timers
 * (when full, timers of processes that no longer exist are pruned first, as
 * torch 2.6's clear_timers does), and malformed requests are logged (the
 * first few per attempt) and dropped. */
#pragma once

#include <stddef.h>
#include <stdint.h>

struct event_base;
struct events;
struct filetimer_server;

/* Who the server works for, for its log lines and events. Borrowed: the
 * strings, events and counter must outlive the server. */
struct filetimer_server_spec {
	const char *run_id;
	const char *role;
	int attempt;             /* TORCHELASTIC_RESTART_COUNT of the group */
	struct events *events;   /* elasticd.worker.timer_expired goes here; may be NULL */
	uint64_t *expired_total; /* +1 per pid whose timers expired; may be NULL */
};

/* Start serving when env (the agent's environment, environ-style) has
 * TORCHELASTIC_ENABLE_FILE_TIMER=1, exactly "1" as torch checks: remove
 * whatever is at the path (TORCHELASTIC_TIMER_FILE, else
 * /tmp/watchdog_timer_<uuid4> as torch, not $TMPDIR), make a FIFO there (mode
 * 0600), open it O_RDWR|O_NONBLOCK|O_CLOEXEC and watch it on base. Returns
 * the server, or NULL when not enabled (nothing logged) or when the FIFO
 * cannot be made (logged as an error; torchrun would raise and stop; the
 * workers then run without a timer server, and torch's FileTimerClient raises
 * BrokenPipeError in the worker that uses it). */
struct filetimer_server *filetimer_server_new(struct event_base *base, char *const *env,
					      const struct filetimer_server_spec *spec);

/* The FIFO's path, to export as TORCHELASTIC_TIMER_FILE; NULL for NULL.
 * Borrowed, valid until filetimer_server_free. */
const char *filetimer_server_path(const struct filetimer_server *s);

/* Timers armed now (for tests and status); 0 for NULL. */
size_t filetimer_server_count(const struct filetimer_server *s);

/* Stop serving: drop the timers unfired, close and remove the FIFO (torch's
 * FileTimerServer.stop). Accepts NULL. Never call it from inside the
 * server's own callbacks (it has none that call out). */
void filetimer_server_free(struct filetimer_server *s);
