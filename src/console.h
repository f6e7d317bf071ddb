/* console.h — the agent's own stdout and stderr, written without ever blocking
 * the event loop. A console nobody reads (a full pipe, a stopped terminal)
 * must not stop supervision: bytes that cannot be written now are queued (up
 * to CONSOLE_MAX_QUEUED bytes) and written when the fd is writable again;
 * beyond that they are dropped and counted, and a note says so once the
 * console drains. Regular files are written directly (they do not block). */
#pragma once

#include <stddef.h>

struct event_base;
struct console;

#define CONSOLE_MAX_QUEUED (4u * 1024 * 1024)

/* A console on fd (borrowed; 1 or 2). Pipes, FIFOs and terminals are reopened
 * through /proc/self/fd as a separate non-blocking open file description, so
 * the O_NONBLOCK flag never reaches the workers that share the fd; sockets
 * are written with MSG_DONTWAIT. Returns the console (console_free). */
struct console *console_new(struct event_base *base, int fd);

/* Queue len bytes for the console; writes what it can at once. Never blocks.
 * The bytes of one call are written contiguously (never interleaved with
 * another call's). Accepts a NULL console (then writes to nothing). */
void console_write(struct console *c, const void *buf, size_t len);

/* Bytes dropped so far because the queue was full. */
size_t console_dropped(const struct console *c);

/* Try once more to write what is queued (without blocking), then free;
 * accepts NULL. */
void console_free(struct console *c);
