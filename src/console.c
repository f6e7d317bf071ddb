#include "console.h"

#include <errno.h>
#include <event2/buffer.h>
#include <event2/event.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "util.h"

enum console_mode {
	CONSOLE_DIRECT,   /* regular file (or nothing better): plain writes */
	CONSOLE_NONBLOCK, /* our own non-blocking open file description */
	CONSOLE_SOCKET,   /* send(MSG_DONTWAIT) on the shared socket */
};

struct console {
	enum console_mode mode;
	int fd;      /* the fd written to */
	bool own_fd; /* fd was opened here */
	struct evbuffer *queue;
	struct event *ev;
	size_t dropped;
	size_t dropped_reported;
	bool broken; /* the reader went away: drop everything */
};

/* Write up to len bytes without blocking. Returns bytes written, 0 when the fd
 * would block, -1 when it is gone. */
static ssize_t
write_some(struct console *c, const void *buf, size_t len)
{
	ssize_t n = -1;

	switch (c->mode) {
	case CONSOLE_DIRECT:
		return write_all(c->fd, buf, len) < 0 ? -1 : (ssize_t)len;
	case CONSOLE_NONBLOCK:
		do {
			n = write(c->fd, buf, len);
		} while (n < 0 && errno == EINTR);
		break;
	case CONSOLE_SOCKET:
		do {
			n = send(c->fd, buf, len, MSG_DONTWAIT | MSG_NOSIGNAL);
		} while (n < 0 && errno == EINTR);
		break;
	}
	if (n < 0) {
		return errno == EAGAIN || errno == EWOULDBLOCK ? 0 : -1;
	}
	return n;
}

/* Write from the queue until it is empty or the fd would block. */
static void
console_flush(struct console *c)
{
	while (evbuffer_get_length(c->queue) > 0 && !c->broken) {
		size_t len = evbuffer_get_contiguous_space(c->queue);
		const void *p = evbuffer_pullup(c->queue, (ssize_t)len);
		ssize_t n = write_some(c, p, len);

		if (n < 0) {
			c->broken = true;
		} else if (n == 0) {
			return;
		} else {
			evbuffer_drain(c->queue, (size_t)n);
		}
	}
	if (c->broken) {
		evbuffer_drain(c->queue, evbuffer_get_length(c->queue));
	}
}

static void
console_arm(struct console *c)
{
	if (c->ev && evbuffer_get_length(c->queue) > 0 && !c->broken &&
	    !event_pending(c->ev, EV_WRITE, NULL)) {
		event_add(c->ev, NULL);
	}
}

static void
console_writable_cb(evutil_socket_t fd, short what, void *arg)
{
	struct console *c = arg;

	console_flush(c);
	if (evbuffer_get_length(c->queue) == 0 && c->dropped > c->dropped_reported) {
		char note[160];
		int n = snprintf(
			note, sizeof(note),
			"elasticd: %zu bytes of output were dropped while this console was "
			"not being read\n",
			c->dropped - c->dropped_reported);

		c->dropped_reported = c->dropped;
		evbuffer_add(c->queue, note, (size_t)n);
		console_flush(c);
	}
	console_arm(c);
}

struct console *
console_new(struct event_base *base, int fd)
{
	struct console *c = xcalloc(1, sizeof(*c));
	struct stat st;

	c->fd = fd;
	c->mode = CONSOLE_DIRECT;
	c->queue = evbuffer_new();
	if (fstat(fd, &st) == 0 && S_ISSOCK(st.st_mode)) {
		c->mode = CONSOLE_SOCKET;
	} else if (fstat(fd, &st) == 0 && !S_ISREG(st.st_mode)) {
		char path[64];
		int nfd;

		snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
		nfd = open(path, O_WRONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
		if (nfd >= 0) {
			c->fd = nfd;
			c->own_fd = true;
			c->mode = CONSOLE_NONBLOCK;
		}
	}
	if (c->mode != CONSOLE_DIRECT) {
		c->ev = event_new(base, c->fd, EV_WRITE, console_writable_cb, c);
	}
	return c;
}

void
console_write(struct console *c, const void *buf, size_t len)
{
	if (!c || c->broken || len == 0) {
		return;
	}
	if (evbuffer_get_length(c->queue) == 0) {
		ssize_t n = write_some(c, buf, len);

		if (n < 0) {
			c->broken = true;
			return;
		}
		buf = (const char *)buf + n;
		len -= (size_t)n;
		if (len == 0) {
			return;
		}
	}
	if (evbuffer_get_length(c->queue) + len > CONSOLE_MAX_QUEUED) {
		c->dropped += len;
		return;
	}
	evbuffer_add(c->queue, buf, len);
	console_arm(c);
}

size_t
console_dropped(const struct console *c)
{
	return c ? c->dropped : 0;
}

void
console_free(struct console *c)
{
	if (!c) {
		return;
	}
	console_flush(c);
	if (c->ev) {
		event_free(c->ev);
	}
	evbuffer_free(c->queue);
	if (c->own_fd) {
		close(c->fd);
	}
	free(c);
}
