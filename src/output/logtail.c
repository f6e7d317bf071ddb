/* logtail.c — the last lines of a worker's log file. */
#include "logtail.h"

#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "util.h"

/* Is line[0..n) blank (spaces, tabs, '\r' only)? */
static bool
is_blank(const char *line, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		if (line[i] != ' ' && line[i] != '\t' && line[i] != '\r') {
			return false;
		}
	}
	return true;
}

/* The part of line[0..*n) a terminal shows: after its last '\r' that is not
 * the line's end. */
static const char *
shown_part(const char *line, size_t *n)
{
	size_t len = *n;

	while (len > 0 && line[len - 1] == '\r') {
		len--;
	}
	for (size_t i = len; i > 0; i--) {
		if (line[i - 1] == '\r') {
			*n = len - i;
			return line + i;
		}
	}
	*n = len;
	return line;
}

char *
logtail_lines(const char *buf, size_t len, bool at_start, size_t max_lines, const char *indent,
	      size_t *ret_lines)
{
	const char *end = buf + len, *first = buf, *p;
	const char *starts[LOGTAIL_MAX_LINES + 1];
	size_t lens[LOGTAIL_MAX_LINES + 1], count = 0, ind = indent ? strlen(indent) : 0;
	char *out, *q;

	*ret_lines = 0;
	if (max_lines > LOGTAIL_MAX_LINES) {
		max_lines = LOGTAIL_MAX_LINES;
	}
	if (!at_start && (p = memchr(buf, '\n', len)) && p + 1 < end) {
		first = p + 1; /* the cut first line goes, unless it is all there is */
	}
	/* Walk back from the end, collecting non-blank lines once one was seen. */
	p = end;
	while (p > first && count < max_lines) {
		const char *e = p, *s = p;
		size_t n;

		if (e > first && e[-1] == '\n') {
			e--;
		}
		s = e;
		while (s > first && s[-1] != '\n') {
			s--;
		}
		p = s;
		n = (size_t)(e - s);
		if (count == 0 && is_blank(s, n)) {
			continue;
		}
		starts[count] = shown_part(s, &n);
		lens[count++] = n;
	}
	if (count == 0) {
		return NULL;
	}
	len = 0;
	for (size_t i = 0; i < count; i++) {
		len += ind + lens[i] + 1;
	}
	out = q = xmalloc(len);
	for (size_t i = count; i-- > 0;) {
		memcpy(q, indent ? indent : "", ind);
		memcpy(q + ind, starts[i], lens[i]);
		q += ind + lens[i];
		*q++ = i > 0 ? '\n' : '\0';
	}
	*ret_lines = count;
	return out;
}

char *
logtail_read(const char *path, const char *indent, size_t *ret_lines)
{
	char buf[LOGTAIL_MAX_BYTES];
	_cleanup_close_ int fd = -1;
	struct stat st;
	off_t off = 0;
	ssize_t n;

	*ret_lines = 0;
	fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
	if (fd < 0 || fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
		return NULL;
	}
	if (st.st_size > (off_t)sizeof(buf)) {
		off = st.st_size - (off_t)sizeof(buf);
	}
	do {
		n = pread(fd, buf, sizeof(buf), off);
	} while (n < 0 && errno == EINTR);
	if (n <= 0) {
		return NULL;
	}
	return logtail_lines(buf, (size_t)n, off == 0, LOGTAIL_MAX_LINES, indent, ret_lines);
}
