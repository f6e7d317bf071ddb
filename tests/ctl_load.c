/* ctl_load.c — a closed-loop HTTP/1.1 load generator for elasticd's control
 * socket (bench/bench_ctl.py): N keep-alive connections on a Unix socket, each
 * sending `GET <path>` again as soon as the previous reply is in, for a given
 * time, from one epoll thread so that the client costs little next to the
 * server. Prints one JSON line:
 *
 *   {"connections": N, "requests": R, "errors": E, "seconds": S, "rps": X,
 *    "p50_us": ..., "p90_us": ..., "p99_us": ..., "max_us": ...}
 *
 * Usage: ctl_load SOCKET PATH CONNECTIONS SECONDS
 * A connection the server closes counts one error and is not reopened; the
 * run ends early when none is left. Exit status 0, or 2 for bad arguments, 1
 * when no request completed. */
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "util.h"

struct conn {
	int fd;
	char buf[1 << 16];
	size_t len;
	uint64_t sent_ns;
	const char *req;
	size_t req_len;
	size_t req_off;
};

static uint64_t
mono_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static int
cmp_u32(const void *a, const void *b)
{
	uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;

	return x < y ? -1 : x > y;
}

/* The length of the whole reply at the start of buf, or 0 when incomplete. */
static size_t
reply_len(const char *buf, size_t len)
{
	const char *end = memmem(buf, len, "\r\n\r\n", 4);
	const char *cl;
	size_t head, body = 0;

	if (!end) {
		return 0;
	}
	head = (size_t)(end - buf) + 4;
	cl = memmem(buf, head, "Content-Length: ", 16);
	if (cl) {
		body = strtoul(cl + 16, NULL, 10);
	}
	return len >= head + body ? head + body : 0;
}

static int
send_request(struct conn *c)
{
	while (c->req_off < c->req_len) {
		ssize_t n = send(c->fd, c->req + c->req_off, c->req_len - c->req_off, MSG_NOSIGNAL);

		if (n < 0) {
			return errno == EAGAIN ? 0 : -1;
		}
		c->req_off += (size_t)n;
	}
	return 0;
}

int
main(int argc, char **argv)
{
	struct sockaddr_un sun = {.sun_family = AF_UNIX};
	long long nconn, secs;
	struct conn *conns;
	uint32_t *lat = NULL;
	size_t nlat = 0, cap = 0, live;
	uint64_t errors = 0, start, deadline, end;
	char *req;
	int ep;

	if (argc != 5 || strlen(argv[1]) >= sizeof(sun.sun_path) ||
	    parse_int(argv[3], 1, 4096, &nconn) < 0 || parse_int(argv[4], 1, 3600, &secs) < 0) {
		fprintf(stderr, "usage: ctl_load SOCKET PATH CONNECTIONS SECONDS\n");
		return 2;
	}
	memcpy(sun.sun_path, argv[1], strlen(argv[1]) + 1);
	req = xasprintf("GET %s HTTP/1.1\r\nHost: localhost\r\n\r\n", argv[2]);
	conns = xcalloc((size_t)nconn, sizeof(*conns));
	ep = epoll_create1(EPOLL_CLOEXEC);
	start = mono_ns();
	deadline = start + (uint64_t)secs * 1000000000u;
	for (long long i = 0; i < nconn; i++) {
		struct conn *c = &conns[i];
		struct epoll_event ev = {.events = EPOLLIN, .data.ptr = c};

		c->fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
		if (c->fd < 0 || connect(c->fd, (struct sockaddr *)&sun, sizeof(sun)) < 0) {
			perror("ctl_load: connect");
			return 1;
		}
		fd_nonblock(c->fd, true);
		c->req = req;
		c->req_len = strlen(req);
		epoll_ctl(ep, EPOLL_CTL_ADD, c->fd, &ev);
		c->sent_ns = mono_ns();
		if (send_request(c) < 0) {
			perror("ctl_load: write");
			return 1;
		}
	}
	live = (size_t)nconn;
	while (live > 0) {
		struct epoll_event evs[256];
		uint64_t now = mono_ns();
		int n;

		if (now >= deadline) {
			break;
		}
		n = epoll_wait(ep, evs, 256, (int)((deadline - now) / 1000000u) + 1);
		for (int i = 0; i < n; i++) {
			struct conn *c = evs[i].data.ptr;
			ssize_t r = read(c->fd, c->buf + c->len, sizeof(c->buf) - c->len);
			size_t whole;

			if (r <= 0) {
				if (r < 0 && errno == EAGAIN) {
					continue;
				}
				errors++;
				epoll_ctl(ep, EPOLL_CTL_DEL, c->fd, NULL);
				close(c->fd);
				live--;
				continue;
			}
			c->len += (size_t)r;
			while ((whole = reply_len(c->buf, c->len)) > 0) {
				uint64_t t = mono_ns();

				if (strncmp(c->buf, "HTTP/1.1 200", 12) != 0) {
					errors++;
				}
				if (nlat == cap) {
					cap = cap ? cap * 2 : 65536;
					lat = xrealloc(lat, cap * sizeof(*lat));
				}
				lat[nlat++] = (uint32_t)((t - c->sent_ns) / 1000u);
				memmove(c->buf, c->buf + whole, c->len - whole);
				c->len -= whole;
				c->sent_ns = t;
				c->req_off = 0;
				if (send_request(c) < 0) {
					errors++;
				}
			}
			if (c->len == sizeof(c->buf)) {
				fprintf(stderr, "ctl_load: reply larger than %zu bytes\n",
					sizeof(c->buf));
				return 1;
			}
		}
	}
	end = mono_ns();
	if (nlat == 0) {
		fprintf(stderr, "ctl_load: no request completed\n");
		return 1;
	}
	qsort(lat, nlat, sizeof(*lat), cmp_u32);
	printf("{\"connections\": %lld, \"requests\": %zu, \"errors\": %llu, \"seconds\": %.3f, "
	       "\"rps\": %.0f, \"p50_us\": %u, \"p90_us\": %u, \"p99_us\": %u, \"max_us\": %u}\n",
	       nconn, nlat, (unsigned long long)errors, (double)(end - start) / 1e9,
	       (double)nlat / ((double)(end - start) / 1e9), lat[nlat / 2], lat[nlat * 9 / 10],
	       lat[nlat * 99 / 100], lat[nlat - 1]);
	return 0;
}
