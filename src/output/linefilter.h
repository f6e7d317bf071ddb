/* linefilter.h — torchrun's --duplicate-stdout-filters and
 * --duplicate-stderr-filters: which of the console's lines of a teed stream
 * (output.h splits and prefixes them) also go to filtered_stdout.log and
 * filtered_stderr.log in the attempt directory. Pure. */
#pragma once

#include <stdbool.h>
#include <stddef.h>

/* torchrun's comma_separated_list: value split at ',' where ",," stands for
 * a literal comma. Every piece is kept, an empty one too, which matches every
 * line (as Python's `"" in line`), so "" alone duplicates everything.
 * Returns a NULL-terminated strv (strv_free) of at least one string. */
char **linefilter_parse(const char *value);

/* Whether line (len bytes: one console line without its prefix, its end
 * included) contains any of needles (NULL-terminated), as torch's TailLog
 * tests `needle in line`. */
bool linefilter_match(char *const *needles, const char *line, size_t len);
