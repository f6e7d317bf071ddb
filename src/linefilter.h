/* linefilter.h — torchrun's --duplicate-stdout-filters and
 * --duplicate-stderr-filters: the lines of a teed stream that contain any of a
 * set of strings, with the console's line prefix, for filtered_stdout.log and
 * filtered_stderr.log in the attempt directory. Pure. */
#pragma once

#include <stddef.h>

/* A line longer than this is matched, and passed on, in pieces of this size,
 * each ended with '\n' (as the console gets it, output.h). */
#define LINEFILTER_MAX_LINE (64u * 1024)

/* torchrun's comma_separated_list: value split at ',' where ",," stands for
 * a literal comma. Every piece is kept, an empty one too, which matches every
 * line (as Python's `"" in line`), so "" alone duplicates everything.
 * Returns a NULL-terminated strv (strv_free) of at least one string. */
char **linefilter_parse(const char *value);

struct linefilter {
	char *const *needles; /* borrowed, NULL-terminated */
	char *prefix;
	size_t prefix_len;
	char *line; /* the current line so far, LINEFILTER_MAX_LINE bytes */
	size_t len;
};

/* Initialise f with needles (borrowed; must outlive f) and a copy of prefix. */
void linefilter_init(struct linefilter *f, char *const *needles, const char *prefix);
void linefilter_release(struct linefilter *f);

/* Feed len bytes of the stream; every line ('\n' ends one) that contains a
 * needle is appended to *out (malloc'd, *out_len bytes, grown with xrealloc;
 * *out may be NULL) as prefix + line, its '\n' included. */
void linefilter_feed(struct linefilter *f, const char *in, size_t len, char **out, size_t *out_len);

/* At end of stream: the held partial line, if it matches, ended with '\n'. */
void linefilter_flush(struct linefilter *f, char **out, size_t *out_len);
