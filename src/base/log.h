/* log.h — the agent's human log on stderr. One event per line, short.
 * Only the agent layer (main, agent, group) logs; pure modules return errors. */
#pragma once

#include <stdbool.h>
#include <stddef.h>

enum log_level {
	LOG_LEVEL_DEBUG,
	LOG_LEVEL_INFO,
	LOG_LEVEL_WARNING,
	LOG_LEVEL_ERROR,
};

/* Set the minimum level written. */
void log_set_level(enum log_level level);
enum log_level log_get_level(void);

/* Parse "debug", "info", "warning"/"warn", "error" (any case), as Python's
 * LOGLEVEL names. Returns 0 and sets *ret, or -EINVAL. */
int log_level_parse(const char *s, enum log_level *ret);

/* Send every log line (and log_raw text) to write(buf, len, arg) instead of
 * stderr, e.g. the agent's non-blocking console; NULL restores plain blocking
 * writes to stderr. */
void log_set_sink(void (*write)(const void *buf, size_t len, void *arg), void *arg);

/* Write text as is, without a prefix, where log lines go (the failure table,
 * console events). */
void log_raw(const char *buf, size_t len);

/* Write one line "elasticd <L> <HH:MM:SS.mmm> <message>" to stderr when level is
 * enabled. A trailing newline in fmt is not needed. */
void log_write(enum log_level level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#define log_debug(...) log_write(LOG_LEVEL_DEBUG, __VA_ARGS__)
#define log_info(...) log_write(LOG_LEVEL_INFO, __VA_ARGS__)
#define log_warn(...) log_write(LOG_LEVEL_WARNING, __VA_ARGS__)
#define log_error(...) log_write(LOG_LEVEL_ERROR, __VA_ARGS__)
