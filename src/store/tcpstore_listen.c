/* tcpstore_listen.c — the TCPStore server's listening socket (see the header). */
#include "tcpstore_listen.h"

#include <arpa/inet.h>
#include <errno.h>
#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <limits.h>
#include <netdb.h>
#include <netinet/in.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "util.h"

static int
listen_fd_once(const char *host, int port, int *ret_port, bool *ret_raced, char **reterr)
{
	struct addrinfo hints = {.ai_socktype = SOCK_STREAM,
				 .ai_flags = AI_PASSIVE | AI_NUMERICSERV};
	struct addrinfo *res = NULL, *ai;
	char portstr[16];
	int err = -EADDRNOTAVAIL, rc;
	bool any = !host || !*host || strcmp(host, "::") == 0;

	snprintf(portstr, sizeof(portstr), "%d", port);
	if (any) {
		hints.ai_family = AF_INET6;
	}
	rc = getaddrinfo(any ? "::" : host, portstr, &hints, &res);
	if (rc != 0 && any) {
		hints.ai_family = AF_INET;
		rc = getaddrinfo("0.0.0.0", portstr, &hints, &res);
	}
	if (rc != 0) {
		*reterr = xasprintf("cannot resolve '%s': %s", host ? host : "", gai_strerror(rc));
		return -EADDRNOTAVAIL;
	}
	for (ai = res; ai; ai = ai->ai_next) {
		int fd = socket(ai->ai_family, ai->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC,
				ai->ai_protocol);
		int one = 1, zero = 0;
		struct sockaddr_storage ss;
		socklen_t sl = sizeof(ss);

		if (fd < 0) {
			err = -errno;
			continue;
		}
		(void)setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
		if (ai->ai_family == AF_INET6 && any) {
			/* Dual-stack: 1.13 clients come in through v4-mapped addresses. */
			(void)setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &zero, sizeof(zero));
		}
		if (bind(fd, ai->ai_addr, ai->ai_addrlen) < 0) {
			err = -errno;
			close(fd);
			continue;
		}
		/* The longest accept queue the kernel allows (net.core.somaxconn:
		 * a larger backlog is cut to it): a job's nodes connect at once. */
		if (listen(fd, INT_MAX) < 0 || getsockname(fd, (struct sockaddr *)&ss, &sl) < 0) {
			err = -errno;
			/* Bound, yet the port is taken at listen: another process bound it
			 * (SO_REUSEADDR) at the same moment, and then both listens can fail. */
			*ret_raced |= err == -EADDRINUSE;
			close(fd);
			continue;
		}
		*ret_port = ss.ss_family == AF_INET6
				    ? ntohs(((struct sockaddr_in6 *)&ss)->sin6_port)
				    : ntohs(((struct sockaddr_in *)&ss)->sin_port);
		freeaddrinfo(res);
		return fd;
	}
	freeaddrinfo(res);
	*reterr = xasprintf("cannot listen on %s port %d: %s", any ? "every address" : host, port,
			    strerror(-err));
	return err;
}

void
tcpstore_bev_write(struct bufferevent *bev, const void *data, size_t len)
{
	struct evbuffer *out = bufferevent_get_output(bev);
	evutil_socket_t fd = bufferevent_getfd(bev);
	ssize_t n = 0;

	if (fd >= 0 && len > 0 && evbuffer_get_length(out) == 0) {
		/* write(2) as libevent's own writes (a broken pipe is the
		 * caller's SIGPIPE either way; /proc/<pid>/io counts it), on a
		 * socket the bufferevent made non-blocking. */
		n = write(fd, data, len);
		if (n < 0) {
			n = 0; /* full (EAGAIN), or an error the next write reports */
		}
	}
	if ((size_t)n < len) {
		evbuffer_add(out, (const uint8_t *)data + n, len - (size_t)n);
	}
}

/* listen_fd_once, again while it lost a bind race: two agents that start
 * together on the endpoint host may both bind (SO_REUSEADDR) and then both fail
 * to listen, leaving nobody to host the store. A short random pause breaks the
 * tie (start-up only; at most ~0.1 s), after which one listens and the other
 * sees EADDRINUSE at bind and becomes a client. */
int
tcpstore_listen(const char *host, int port, int *ret_port, char **reterr)
{
	for (int attempt = 0;; attempt++) {
		bool raced = false;
		int fd = listen_fd_once(host, port, ret_port, &raced, reterr);
		struct timespec pause = {0, 0};
		unsigned rnd = 0;

		if (fd >= 0 || !raced || attempt == 20) {
			return fd;
		}
		free(*reterr);
		*reterr = NULL;
		if (getrandom(&rnd, sizeof(rnd), GRND_NONBLOCK) != (ssize_t)sizeof(rnd)) {
			rnd = (unsigned)now_usec();
		}
		pause.tv_nsec = (long)(1000000 + rnd % 4000000);
		nanosleep(&pause, NULL);
	}
}
