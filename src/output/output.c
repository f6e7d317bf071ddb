#include "output.h"

#include <errno.h>
#include <event2/event.h>
#include <string.h>
#include <unistd.h>

#include "console.h"
#include "linefilter.h"
#include "util.h"

#define READ_CHUNK (64u * 1024)

void
prefixer_init(struct prefixer *p, const char *prefix)
{
	memset(p, 0, sizeof(*p));
	p->prefix = xstrdup(prefix);
	p->prefix_len = strlen(prefix);
	p->pending = xmalloc(OUTPUT_MAX_PENDING);
}

void
prefixer_release(struct prefixer *p)
{
	free(p->prefix);
	free(p->pending);
	memset(p, 0, sizeof(*p));
}

/* The capacity of a buffer holding n bytes: the power of two above n (at
 * least 256), so that appending line by line copies O(n) bytes in all, not
 * O(n^2) (a 64 KiB read is ~10 000 short lines; ASan's realloc always
 * copies). */
static size_t
capacity(size_t n)
{
	size_t c = 256;

	while (c <= n) {
		c *= 2;
	}
	return c;
}

static void
append(char **out, size_t *out_len, const char *s, size_t len)
{
	if (!*out || capacity(*out_len + len) > capacity(*out_len)) {
		*out = xrealloc(*out, capacity(*out_len + len));
	}
	memcpy(*out + *out_len, s, len);
	*out_len += len;
}

/* Append s to the line open in *out, opening one with the prefix if none is. */
static void
put(struct prefixer *p, const char *s, size_t len, char **out, size_t *out_len)
{
	if (len == 0) {
		return;
	}
	if (!p->mid_line) {
		p->line_start = *out_len;
		append(out, out_len, p->prefix, p->prefix_len);
		p->mid_line = true;
	}
	append(out, out_len, s, len);
}

/* The open line ends with what was put last: show it to line_cb. */
static void
line_done(struct prefixer *p, char **out, size_t *out_len)
{
	if (!p->mid_line) {
		return;
	}
	p->mid_line = false;
	if (p->line_cb) {
		p->line_cb(*out + p->line_start, *out_len - p->line_start, p->line_arg);
	}
}

/* Pass on the piece of a line too long to hold back as a line of its own:
 * the console is shared by every rank, so a line left open there would be
 * continued by another rank's output. The rest follows with a prefix. */
static void
emit_piece(struct prefixer *p, const char *s, size_t len, char **out, size_t *out_len)
{
	if (len == 0) {
		return;
	}
	put(p, s, len, out, out_len);
	put(p, "\n", 1, out, out_len);
	line_done(p, out, out_len);
	p->broken = true;
}

/* A '\r' held back at the end of the last chunk ends its line, with the
 * '\n' that may start this one ("\r\n"). Returns the bytes of in used. */
static size_t
end_held_cr(struct prefixer *p, const char *in, size_t len, char **out, size_t *out_len)
{
	size_t used = 0;

	if (len == 0 || p->pending_len == 0 || p->pending[p->pending_len - 1] != '\r') {
		return 0;
	}
	put(p, p->pending, p->pending_len, out, out_len);
	p->pending_len = 0;
	if (in[0] == '\n') {
		put(p, "\n", 1, out, out_len);
		used = 1;
	}
	line_done(p, out, out_len);
	/* This line ended on its own: a '\n' next is an empty line, not the
	 * end of a long line already ended by its last piece. */
	p->broken = false;
	return used;
}

/* Hold in (no line end), or pass a too-long line on in pieces. */
static void
hold(struct prefixer *p, const char *in, size_t len, char **out, size_t *out_len)
{
	if (p->pending_len + len > OUTPUT_MAX_PENDING) {
		emit_piece(p, p->pending, p->pending_len, out, out_len);
		p->pending_len = 0;
		if (len >= OUTPUT_MAX_PENDING) {
			emit_piece(p, in, len, out, out_len);
			return;
		}
	}
	memcpy(p->pending + p->pending_len, in, len);
	p->pending_len += len;
}

void
prefixer_feed(struct prefixer *p, const char *in, size_t len, char **out, size_t *out_len)
{
	size_t used = end_held_cr(p, in, len, out, out_len);

	in += used;
	len -= used;
	while (len > 0) {
		size_t i = 0;

		while (i < len && in[i] != '\n' && in[i] != '\r') {
			i++;
		}
		if (i < len && in[i] == '\r') {
			if (i + 1 == len) {
				/* Maybe the first half of "\r\n": wait for the next byte. */
				i = len;
			} else if (in[i + 1] == '\n') {
				i++;
			}
		}
		if (i == len) {
			hold(p, in, len, out, out_len);
			return;
		}
		/* in[0..i] completes a line. */
		if (p->broken && p->pending_len == 0 && i == 0 && in[0] == '\n') {
			/* The long line's last piece ended it on the console already. */
			p->broken = false;
			in++;
			len--;
			continue;
		}
		put(p, p->pending, p->pending_len, out, out_len);
		p->pending_len = 0;
		put(p, in, i + 1, out, out_len);
		line_done(p, out, out_len);
		p->broken = false;
		in += i + 1;
		len -= i + 1;
	}
}

void
prefixer_flush(struct prefixer *p, char **out, size_t *out_len)
{
	put(p, p->pending, p->pending_len, out, out_len);
	p->pending_len = 0;
	if (p->mid_line) {
		put(p, "\n", 1, out, out_len);
		line_done(p, out, out_len);
	}
}

struct tee {
	struct event *ev;
	int pipe_fd;
	int file_fd;
	struct console *console;
	int rank; /* for the console's drop count */
	struct prefixer prefixer;
	int filtered_fd;      /* --duplicate-*-filters file (borrowed), or -1 */
	char *const *needles; /* when filtered_fd >= 0 (borrowed) */
	char *filtered;       /* the matching lines of this read */
	size_t filtered_len;
	bool done;
	void (*eof_cb)(struct tee *t, void *arg);
	void *arg;
	void (*watch)(const char *buf, size_t len, void *arg); /* tee_watch */
	void *watch_arg;
};

/* A line on its way to the console: keep it for filtered_fd if it matches. */
static void
tee_line_cb(const char *line, size_t len, void *arg)
{
	struct tee *t = arg;
	size_t skip = t->prefixer.prefix_len;

	if (linefilter_match(t->needles, line + skip, len - skip)) {
		append(&t->filtered, &t->filtered_len, line, len);
	}
}

static void
tee_pass(struct tee *t, const char *buf, size_t len)
{
	char *out = NULL;
	size_t out_len = 0;

	if (len > 0 && t->watch) {
		t->watch(buf, len, t->watch_arg);
	}
	if (t->file_fd >= 0) {
		(void)write_all(t->file_fd, buf, len);
	}
	if (!t->console && t->filtered_fd < 0) {
		return;
	}
	if (len > 0) {
		prefixer_feed(&t->prefixer, buf, len, &out, &out_len);
	} else {
		prefixer_flush(&t->prefixer, &out, &out_len);
	}
	if (t->console && out_len > 0) {
		console_write_from(t->console, out, out_len, t->rank);
	}
	free(out);
	/* Whole lines in one write to an O_APPEND file: ranks never mix. */
	if (t->filtered_len > 0) {
		(void)write_all(t->filtered_fd, t->filtered, t->filtered_len);
	}
	free(t->filtered);
	t->filtered = NULL;
	t->filtered_len = 0;
}

/* Read until EAGAIN (returns false) or end of file/error (returns true). */
static bool
tee_read(struct tee *t)
{
	char buf[READ_CHUNK];

	for (int rounds = 0; rounds < 16; rounds++) {
		ssize_t n = read(t->pipe_fd, buf, sizeof(buf));

		if (n > 0) {
			tee_pass(t, buf, (size_t)n);
			continue;
		}
		if (n < 0 && errno == EINTR) {
			continue;
		}
		if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
			return false;
		}
		return true;
	}
	/* Plenty read; give the rest of the loop a turn. */
	return false;
}

static void
tee_finish(struct tee *t)
{
	tee_pass(t, NULL, 0);
	if (t->ev) {
		event_free(t->ev);
		t->ev = NULL;
	}
	if (t->pipe_fd >= 0) {
		close(t->pipe_fd);
		t->pipe_fd = -1;
	}
	t->done = true;
}

static void
tee_read_cb(evutil_socket_t fd, short what, void *arg)
{
	struct tee *t = arg;

	if (!tee_read(t)) {
		return;
	}
	tee_finish(t);
	if (t->eof_cb) {
		t->eof_cb(t, t->arg);
	}
}

struct tee *
tee_new(struct event_base *base, int pipe_fd, int file_fd, struct console *console, int rank,
	const char *prefix, void (*eof_cb)(struct tee *t, void *arg), void *arg)
{
	struct tee *t = xcalloc(1, sizeof(*t));

	t->rank = rank;
	t->pipe_fd = pipe_fd;
	t->file_fd = file_fd;
	t->filtered_fd = -1;
	t->console = console;
	t->eof_cb = eof_cb;
	t->arg = arg;
	prefixer_init(&t->prefixer, prefix);
	(void)fd_nonblock(pipe_fd, true);
	t->ev = event_new(base, pipe_fd, EV_READ | EV_PERSIST, tee_read_cb, t);
	event_add(t->ev, NULL);
	return t;
}

void
tee_duplicate(struct tee *t, int fd, char *const *needles)
{
	t->filtered_fd = fd;
	t->needles = needles;
	t->prefixer.line_cb = tee_line_cb;
	t->prefixer.line_arg = t;
}

void
tee_watch(struct tee *t, void (*cb)(const char *buf, size_t len, void *arg), void *arg)
{
	t->watch = cb;
	t->watch_arg = arg;
}

void
tee_drain_and_close(struct tee *t)
{
	if (t->done) {
		return;
	}
	(void)tee_read(t);
	tee_finish(t);
}

bool
tee_done(const struct tee *t)
{
	return t->done;
}

void
tee_free(struct tee *t)
{
	if (!t) {
		return;
	}
	if (t->ev) {
		event_free(t->ev);
	}
	if (t->pipe_fd >= 0) {
		close(t->pipe_fd);
	}
	prefixer_release(&t->prefixer);
	free(t->filtered);
	free(t);
}
