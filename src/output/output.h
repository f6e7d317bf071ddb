/* output.h — a worker's teed stream: a pipe read in the event loop, every byte
 * written to the rank's log file as is and to the agent's console with
 * torchrun's "[<role><local_rank>]:" prefix at the start of every line; the
 * console's lines that --duplicate-*-filters match also to filtered_*.log. */
#pragma once

#include <stdbool.h>
#include <stddef.h>

struct console;
struct event_base;

/* The pure part: inserts a prefix at the start of every line of a byte stream.
 * '\n', '\r' and "\r\n" end a line (progress bars redraw with their prefix). A
 * partial line is held back (up to OUTPUT_MAX_PENDING bytes) so that lines of
 * different ranks do not interleave mid-line; a longer line is passed on in
 * pieces of at least that size, each ended with '\n' and prefixed (on the
 * shared console a piece left open would be continued by another rank). The
 * log files get the worker's bytes as they are. */
#define OUTPUT_MAX_PENDING (64u * 1024)

struct prefixer {
	char *prefix;
	size_t prefix_len;
	bool mid_line;     /* a line is open in the caller's *out ... */
	size_t line_start; /* ... at this offset (its prefix) */
	bool broken;       /* a piece of a long line was passed on, '\n' ended */
	char *pending;     /* held partial line, OUTPUT_MAX_PENDING bytes */
	size_t pending_len;
	/* Shown every line passed on: prefix + line + its end ('\n', '\r',
	 * "\r\n", or the '\n' that ends a piece or the last line), len bytes
	 * in *out as the console gets them. Optional. */
	void (*line_cb)(const char *line, size_t len, void *arg);
	void *line_arg;
};

/* Initialise p with a copy of prefix and no line_cb. */
void prefixer_init(struct prefixer *p, const char *prefix);
void prefixer_release(struct prefixer *p);

/* Feed len bytes; append what is ready for the console to *out (NULL, or a
 * buffer that these functions grew, holding *out_len bytes: its capacity is
 * theirs to know; free() it): complete lines only, each also shown to
 * line_cb as it is appended. */
void prefixer_feed(struct prefixer *p, const char *in, size_t len, char **out, size_t *out_len);

/* At end of stream: pass on the held partial line, terminated with '\n'. */
void prefixer_flush(struct prefixer *p, char **out, size_t *out_len);

struct tee;

/* Start reading pipe_fd (owned: closed by tee_free) in base. Bytes go to file_fd
 * (borrowed; -1 for none) as they come, and through a prefixer to console
 * (borrowed; NULL for none), one console_write_from per read, as local rank
 * rank, so that the lines of different ranks never interleave mid-line and a
 * drop is announced for the rank. eof_cb runs once when the pipe reaches end
 * of file or fails. Returns the tee (tee_free). */
struct tee *tee_new(struct event_base *base, int pipe_fd, int file_fd, struct console *console,
		    int rank, const char *prefix, void (*eof_cb)(struct tee *t, void *arg),
		    void *arg);

/* Also append the console's lines that contain any of needles (borrowed,
 * NULL-terminated, matched without the prefix, see linefilter.h) to fd
 * (borrowed; an O_APPEND file that other tees may share), prefixed, one write
 * per read. Call right after tee_new, before the loop runs. */
void tee_duplicate(struct tee *t, int fd, char *const *needles);

/* Also show every byte read from the pipe, as read (before any prefix), to
 * cb(buf, len, arg) from the loop; cb NULL stops it. The hang rules watch
 * the workers' output through this. */
void tee_watch(struct tee *t, void (*cb)(const char *buf, size_t len, void *arg), void *arg);

/* Read what is buffered in the pipe now, pass it on, flush the held partial
 * line and stop (no eof_cb). For stops that cannot wait for end of file. */
void tee_drain_and_close(struct tee *t);

/* Whether the pipe reached end of file (or was drained and closed). */
bool tee_done(const struct tee *t);

/* Stop watching and free; accepts NULL. Does not run eof_cb. */
void tee_free(struct tee *t);
