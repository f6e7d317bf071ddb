#include "log.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <sys/time.h>
#include <time.h>

static enum log_level min_level = LOG_LEVEL_INFO;
static void (*sink_write)(const void *buf, size_t len, void *arg);
static void *sink_arg;

void
log_set_sink(void (*write)(const void *buf, size_t len, void *arg), void *arg)
{
	sink_write = write;
	sink_arg = arg;
}

void
log_raw(const char *buf, size_t len)
{
	if (sink_write) {
		sink_write(buf, len, sink_arg);
		return;
	}
	fwrite(buf, 1, len, stderr);
	fflush(stderr);
}

void
log_set_level(enum log_level level)
{
	min_level = level;
}

enum log_level
log_get_level(void)
{
	return min_level;
}

int
log_level_parse(const char *s, enum log_level *ret)
{
	static const struct {
		const char *name;
		enum log_level level;
	} names[] = {
		{"debug", LOG_LEVEL_DEBUG},     {"info", LOG_LEVEL_INFO},
		{"warning", LOG_LEVEL_WARNING}, {"warn", LOG_LEVEL_WARNING},
		{"error", LOG_LEVEL_ERROR},     {"critical", LOG_LEVEL_ERROR},
	};

	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
		if (strcasecmp(s, names[i].name) == 0) {
			*ret = names[i].level;
			return 0;
		}
	}
	return -EINVAL;
}

static char
level_letter(enum log_level level)
{
	switch (level) {
	case LOG_LEVEL_DEBUG:
		return 'D';
	case LOG_LEVEL_INFO:
		return 'I';
	case LOG_LEVEL_WARNING:
		return 'W';
	case LOG_LEVEL_ERROR:
		return 'E';
	}
	return '?';
}

void
log_write(enum log_level level, const char *fmt, ...)
{
	char line[4096];
	struct timeval tv;
	struct tm tm;
	va_list ap;
	int n, m;

	if (level < min_level) {
		return;
	}
	gettimeofday(&tv, NULL);
	localtime_r(&tv.tv_sec, &tm);
	n = snprintf(line, sizeof(line), "elasticd %c %02d:%02d:%02d.%03ld ", level_letter(level),
		     tm.tm_hour, tm.tm_min, tm.tm_sec, (long)tv.tv_usec / 1000);
	va_start(ap, fmt);
	m = vsnprintf(line + n, sizeof(line) - (size_t)n - 1, fmt, ap);
	va_end(ap);
	if (m < 0) {
		m = 0;
	}
	n += m;
	if ((size_t)n > sizeof(line) - 2) {
		n = sizeof(line) - 2;
	}
	line[n++] = '\n';
	/* One write per line so that concurrent writers do not interleave. */
	log_raw(line, (size_t)n);
}
