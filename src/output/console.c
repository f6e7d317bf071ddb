#include "console.h"

#include <errno.h>
#include <event2/buffer.h>
#include <event2/event.h>
#include <fcntl.h>
#include <poll.h>
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

/* Whose bytes the queue holds, in order: one entry per queued write. */
struct seg {
	int rank;
	size_t len;
};

struct console {
	enum console_mode mode;
	int fd;      /* the fd written to */
	bool own_fd; /* fd was opened here */
	struct evbuffer *queue;
	struct seg *segs; /* segs[seg_head..n_segs) describe the queue */
	size_t seg_head, n_segs, cap_segs;
	struct event *ev;
	struct event *note_timer;
	size_t dropped;
	bool broken;   /* the reader went away: drop everything */
	bool mid_line; /* the last byte written was not '\n' */
	/* The drop episode not announced yet. */
	size_t ep_bytes, ep_lines;
	int *ep_ranks; /* sorted, unique */
	size_t n_ep_ranks;
	uint64_t last_note_usec;
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
	if (n > 0) {
		c->mid_line = ((const char *)buf)[n - 1] != '\n';
	}
	return n;
}

static size_t
count_lines(const char *buf, size_t len)
{
	size_t n = 0;
	const char *p = buf, *end = buf + len;

	while ((p = memchr(p, '\n', (size_t)(end - p)))) {
		n++;
		p++;
	}
	return n;
}

static void
add_rank(struct console *c, int rank)
{
	size_t i = 0;

	while (i < c->n_ep_ranks && c->ep_ranks[i] < rank) {
		i++;
	}
	if (i < c->n_ep_ranks && c->ep_ranks[i] == rank) {
		return;
	}
	c->ep_ranks = xrealloc(c->ep_ranks, (c->n_ep_ranks + 1) * sizeof(int));
	memmove(c->ep_ranks + i + 1, c->ep_ranks + i, (c->n_ep_ranks - i) * sizeof(int));
	c->ep_ranks[i] = rank;
	c->n_ep_ranks++;
}

/* len bytes of rank's output were queued: note whose they are. The array
 * grows geometrically and is compacted once its written half is large. */
static void
push_seg(struct console *c, int rank, size_t len)
{
	if (c->seg_head > 64 && c->seg_head * 2 > c->n_segs) {
		memmove(c->segs, c->segs + c->seg_head,
			(c->n_segs - c->seg_head) * sizeof(*c->segs));
		c->n_segs -= c->seg_head;
		c->seg_head = 0;
	}
	if (c->n_segs == c->cap_segs) {
		c->cap_segs = c->cap_segs ? c->cap_segs * 2 : 64;
		c->segs = xrealloc(c->segs, c->cap_segs * sizeof(*c->segs));
	}
	c->segs[c->n_segs++] = (struct seg){rank, len};
}

/* len bytes of rank's output will not reach the console: count them. */
static void
drop(struct console *c, const char *buf, size_t len, int rank)
{
	struct timeval tv = {CONSOLE_NOTE_S, 0};

	c->dropped += len;
	c->ep_bytes += len;
	c->ep_lines += count_lines(buf, len);
	add_rank(c, rank);
	if (c->note_timer && !evtimer_pending(c->note_timer, NULL)) {
		evtimer_add(c->note_timer, &tv);
	}
}

/* Queue the episode's announcement (never dropped) and start a new one. */
static void
note_queue(struct console *c)
{
	char note[512], *p = note, *end = note + sizeof(note) - 80;
	size_t before = evbuffer_get_length(c->queue);
	bool own = c->n_ep_ranks > 0 && c->ep_ranks[0] < 0;

	if (c->ep_bytes == 0 || c->broken) {
		return;
	}
	p += snprintf(p, (size_t)(end - p),
		      "elasticd: console too slow: %zu bytes (%zu lines) of output dropped from",
		      c->ep_bytes, c->ep_lines);
	for (size_t i = own ? 1 : 0; i < c->n_ep_ranks && p < end; i++) {
		p += snprintf(p, (size_t)(end - p), "%s%d",
			      i == (own ? 1u : 0u) ? " local ranks " : ",", c->ep_ranks[i]);
	}
	if (p >= end) {
		p = end;
		p += snprintf(p, 8, ",...");
	}
	p += snprintf(p, (size_t)(note + sizeof(note) - p), "%s%s (log files keep everything)\n",
		      own && c->n_ep_ranks > 1 ? " and" : "", own ? " elasticd's own lines" : "");
	c->ep_bytes = c->ep_lines = 0;
	c->n_ep_ranks = 0;
	c->last_note_usec = now_usec();
	if (c->mid_line && before == 0) {
		/* Never glue the note to a line cut by the exit deadline. */
		evbuffer_add(c->queue, "\n", 1);
	}
	evbuffer_add(c->queue, note, (size_t)(p - note));
	push_seg(c, -1, evbuffer_get_length(c->queue) - before);
}

/* n bytes of the queue were written or dropped: advance the segments. */
static void
consume(struct console *c, size_t n)
{
	while (n > 0 && c->seg_head < c->n_segs) {
		struct seg *s = &c->segs[c->seg_head];
		size_t k = n < s->len ? n : s->len;

		s->len -= k;
		n -= k;
		if (s->len == 0) {
			c->seg_head++;
		}
	}
	if (c->seg_head == c->n_segs || evbuffer_get_length(c->queue) == 0) {
		c->seg_head = c->n_segs = 0;
	}
}

/* Write from the queue until it is empty, the fd would block or, with
 * to_eol, the line begun is finished. */
static void
console_flush_upto(struct console *c, bool to_eol)
{
	while (evbuffer_get_length(c->queue) > 0 && !c->broken) {
		size_t len = evbuffer_get_contiguous_space(c->queue);
		const char *p = (const char *)evbuffer_pullup(c->queue, (ssize_t)len);
		ssize_t n;

		if (to_eol) {
			const char *nl = memchr(p, '\n', len);

			if (!c->mid_line) {
				return;
			}
			len = nl ? (size_t)(nl - p) + 1 : len;
		}
		n = write_some(c, p, len);
		if (n < 0) {
			c->broken = true;
		} else if (n == 0) {
			return;
		} else {
			evbuffer_drain(c->queue, (size_t)n);
			consume(c, (size_t)n);
		}
	}
	if (c->broken) {
		evbuffer_drain(c->queue, evbuffer_get_length(c->queue));
		c->seg_head = c->n_segs = 0;
	}
}

static void
console_flush(struct console *c)
{
	console_flush_upto(c, false);
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
note_timer_cb(evutil_socket_t fd, short what, void *arg)
{
	struct console *c = arg;

	note_queue(c);
	console_flush(c);
	console_arm(c);
}

static void
console_writable_cb(evutil_socket_t fd, short what, void *arg)
{
	struct console *c = arg;

	console_flush(c);
	/* Caught up: the episode is over; say so now unless the last note was
	 * just now (then the timer does). */
	if (evbuffer_get_length(c->queue) == 0 && c->ep_bytes > 0 &&
	    now_usec() - c->last_note_usec >= CONSOLE_NOTE_MIN_S * USEC_PER_SEC) {
		evtimer_del(c->note_timer);
		note_queue(c);
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
		c->note_timer = evtimer_new(base, note_timer_cb, c);
	}
	return c;
}

void
console_write_from(struct console *c, const void *buf, size_t len, int rank)
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
	} else if (evbuffer_get_length(c->queue) + len >
		   CONSOLE_MAX_QUEUED + (rank < 0 ? CONSOLE_OWN_RESERVE : 0)) {
		/* Whole writes only: a part already on the console is finished
		 * (the branch above), never cut. */
		drop(c, buf, len, rank);
		return;
	}
	evbuffer_add(c->queue, buf, len);
	push_seg(c, rank, len);
	console_arm(c);
}

void
console_write(struct console *c, const void *buf, size_t len)
{
	console_write_from(c, buf, len, -1);
}

size_t
console_dropped(const struct console *c)
{
	return c ? c->dropped : 0;
}

/* Wait until fd is writable or deadline passes. Returns false at the deadline. */
static bool
wait_writable(struct console *c, uint64_t deadline)
{
	uint64_t now = now_usec();
	struct pollfd pfd = {.fd = c->fd, .events = POLLOUT};

	if (now >= deadline) {
		return false;
	}
	(void)poll(&pfd, 1, (int)((deadline - now + 999) / 1000));
	return true;
}

/* Drop what is still queued at the deadline, counted for its ranks. */
static void
drop_queue(struct console *c)
{
	size_t len = evbuffer_get_length(c->queue);
	const char *p = len ? (const char *)evbuffer_pullup(c->queue, -1) : NULL;

	const char *end = p ? p + len : NULL;

	for (size_t i = c->seg_head; i < c->n_segs && p < end; i++) {
		size_t k = c->segs[i].len < (size_t)(end - p) ? c->segs[i].len : (size_t)(end - p);

		if (k > 0) {
			drop(c, p, k, c->segs[i].rank);
		}
		p += k;
	}
	evbuffer_drain(c->queue, len);
	c->seg_head = c->n_segs = 0;
}

void
console_drain(struct console *c, uint64_t deadline_usec)
{
	uint64_t eol_deadline = deadline_usec + USEC_PER_SEC, note_deadline;

	if (!c) {
		return;
	}
	console_flush(c);
	while (evbuffer_get_length(c->queue) > 0 && !c->broken && wait_writable(c, deadline_usec)) {
		console_flush(c);
	}
	/* A line begun is finished (a little longer), the rest dropped. */
	while (c->mid_line && evbuffer_get_length(c->queue) > 0 && !c->broken &&
	       wait_writable(c, eol_deadline)) {
		console_flush_upto(c, true);
	}
	drop_queue(c);
	if (c->note_timer) {
		evtimer_del(c->note_timer);
	}
	/* Then the announcement: 100 ms more at most. */
	note_queue(c);
	note_deadline = now_usec() + USEC_PER_SEC / 10;
	console_flush(c);
	while (evbuffer_get_length(c->queue) > 0 && !c->broken && wait_writable(c, note_deadline)) {
		console_flush(c);
	}
}

void
console_free(struct console *c)
{
	if (!c) {
		return;
	}
	console_drain(c, now_usec() + USEC_PER_SEC / 2);
	if (c->ev) {
		event_free(c->ev);
	}
	if (c->note_timer) {
		event_free(c->note_timer);
	}
	evbuffer_free(c->queue);
	free(c->segs);
	free(c->ep_ranks);
	if (c->own_fd) {
		close(c->fd);
	}
	free(c);
}
