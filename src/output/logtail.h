/* logtail.h — the last lines of a worker's log file (its stderr.log), for the
 * failure table and the agent's error file when the worker wrote no error
 * file. Pure apart from reading the file. */
#pragma once

#include <stdbool.h>
#include <stddef.h>

/* At most this many lines, taken from at most this many final bytes. */
#define LOGTAIL_MAX_LINES 20
#define LOGTAIL_MAX_BYTES 4096

/* The last lines of the text buf[0..len), which is the end of a file; at_start
 * tells whether it is also the file's beginning (otherwise the first line is
 * likely cut and is dropped, unless it is the only one). Lines end at '\n'; a
 * line redrawn with '\r' (progress bars) keeps what follows its last '\r';
 * trailing blank lines are skipped. At most max_lines lines, each prefixed
 * with indent, joined with '\n' (no trailing newline). Returns a malloc'd
 * string and the number of lines in *ret_lines, or NULL (0 lines) when
 * nothing but blank lines is there. */
char *logtail_lines(const char *buf, size_t len, bool at_start, size_t max_lines,
		    const char *indent, size_t *ret_lines);

/* logtail_lines() of the last LOGTAIL_MAX_BYTES bytes of the file path, with
 * at most LOGTAIL_MAX_LINES lines. Returns NULL (and 0 lines) when the file is
 * missing, unreadable, not a regular file or holds only blank lines. Reads at
 * most LOGTAIL_MAX_BYTES bytes and never blocks on a FIFO. */
char *logtail_read(const char *path, const char *indent, size_t *ret_lines);
