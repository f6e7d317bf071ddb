/* console.h — the agent's own stdout and stderr, written without ever blocking
 * the event loop. A console nobody reads (a full pipe, a stopped terminal)
 * must not stop supervision: bytes that cannot be written now are queued (up
 * to CONSOLE_MAX_QUEUED bytes, CONSOLE_OWN_RESERVE more for elasticd's own
 * lines) and written when the fd is writable again;
 * beyond that whole writes (whole lines: the tees pass complete lines only)
 * are dropped and counted, never a part of one, so no line is torn. Every
 * drop is announced on the console itself: one line per episode, when the
 * console has caught up, or every CONSOLE_NOTE_S while it has not, and at
 * exit: "elasticd: console too slow: N bytes (L lines) of output dropped
 * from local ranks R,R,... (log files keep everything)". At exit console_drain writes what is
 * queued for up to a deadline. Regular files are written directly (they do not block). */
#pragma once

#include <stddef.h>
#include <stdint.h>

struct event_base;
struct console;

#define CONSOLE_MAX_QUEUED (4u * 1024 * 1024)
/* elasticd's own lines (rank -1: failures, the root cause table, the exit
 * line) have no other copy: they may queue this much beyond
 * CONSOLE_MAX_QUEUED, so that a flood of worker lines (which the log files
 * keep) cannot drop them. */
#define CONSOLE_OWN_RESERVE (1u * 1024 * 1024)
/* The longest a drop episode goes unannounced while the console is behind;
 * announcements are at least CONSOLE_NOTE_MIN_S apart. */
#define CONSOLE_NOTE_S 5
#define CONSOLE_NOTE_MIN_S 1
/* At exit (console_drain from agent_run): how long the queue may take to
 * reach the console, in ms (it holds at most CONSOLE_MAX_QUEUED bytes). */
#define CONSOLE_EXIT_DRAIN_MS 5000

/* A console on fd (borrowed; 1 or 2). Pipes, FIFOs and terminals are reopened
 * through /proc/self/fd as a separate non-blocking open file description, so
 * the O_NONBLOCK flag never reaches the workers that share the fd; sockets
 * are written with MSG_DONTWAIT. Returns the console (console_free). */
struct console *console_new(struct event_base *base, int fd);

/* Queue len bytes from local rank `rank` (-1: elasticd's own lines) for the
 * console; writes what it can at once. Never blocks. The bytes of one call
 * are written contiguously (never interleaved with another call's) or
 * dropped as a whole and counted for that rank. Accepts a NULL console (then
 * writes to nothing). */
void console_write_from(struct console *c, const void *buf, size_t len, int rank);

/* console_write_from with rank -1. */
void console_write(struct console *c, const void *buf, size_t len);

/* Bytes dropped so far (queue full, or left at the exit deadline). */
size_t console_dropped(const struct console *c);

/* Block (poll) until the queue is written or deadline_usec (now_usec()
 * clock) passes; a line begun by then is still finished for up to one more
 * second; what is left is dropped and counted, and the drop announcement is
 * written (up to 100 ms more). Accepts NULL. */
void console_drain(struct console *c, uint64_t deadline_usec);

/* console_drain for up to half a second, then free; accepts NULL. */
void console_free(struct console *c);
