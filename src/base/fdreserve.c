/* fdreserve.c — the file descriptors supervision keeps (see the header). */
#include "fdreserve.h"

#include <errno.h>
#include <event2/event.h>
#include <event2/listener.h>
#include <fcntl.h>
#include <limits.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "util.h"

struct fdreserve {
	struct evconnlistener *listener;
	struct event *timer; /* ends a pause */
	long limit;          /* RLIMIT_NOFILE */
	long floor;          /* descriptors from here on are kept */
	bool paused;
	uint64_t pauses;
	struct ratelimit tell;
	fdreserve_pause_fn cb;
	void *arg;
};

/* When any guarded listener last paused (one process, one descriptor table). */
static uint64_t last_pause_usec;

bool
fdreserve_peers_pressing(uint64_t now)
{
	return last_pause_usec && now - last_pause_usec < FDRESERVE_TELL_S * USEC_PER_SEC;
}

/* RLIMIT_NOFILE's soft limit (INT_MAX when unlimited or unknown). */
static long
nofile_limit(void)
{
	struct rlimit rl;

	if (getrlimit(RLIMIT_NOFILE, &rl) < 0 || rl.rlim_cur == RLIM_INFINITY ||
	    rl.rlim_cur > INT_MAX) {
		return INT_MAX;
	}
	return (long)rl.rlim_cur;
}

static void
resume_cb(evutil_socket_t fd, short what, void *arg)
{
	struct fdreserve *r = arg;

	r->paused = false;
	evconnlistener_enable(r->listener);
}

struct fdreserve *
fdreserve_new(struct event_base *base, struct evconnlistener *l, fdreserve_pause_fn cb, void *arg)
{
	struct fdreserve *r = xcalloc(1, sizeof(*r));

	r->listener = l;
	r->timer = evtimer_new(base, resume_cb, r);
	if (!r->timer) {
		abort();
	}
	r->limit = nofile_limit();
	r->floor = r->limit - r->limit / 4;
	r->tell.interval_usec = FDRESERVE_TELL_S * USEC_PER_SEC;
	r->cb = cb;
	r->arg = arg;
	return r;
}

/* Stop accepting for FDRESERVE_PAUSE_S; tell the owner at a bounded rate. */
static void
pause_listener(struct fdreserve *r, const char *why)
{
	struct timeval tv = {.tv_sec = FDRESERVE_PAUSE_S};
	uint64_t untold;

	if (r->paused) {
		return;
	}
	r->paused = true;
	r->pauses++;
	last_pause_usec = now_usec();
	evconnlistener_disable(r->listener);
	evtimer_add(r->timer, &tv);
	if (r->cb && ratelimit_pass(&r->tell, now_usec(), &untold)) {
		r->cb(why, untold, r->arg);
	}
}

bool
fdreserve_admit(struct fdreserve *r, int fd)
{
	int probe = fcntl(evconnlistener_get_fd(r->listener), F_DUPFD_CLOEXEC, 0);
	bool keep = fd < r->floor;

	if (probe >= 0) {
		close(probe);
	}
	if (!keep || probe < 0 || probe >= r->floor) {
		_cleanup_free_ char *why =
			xasprintf("descriptors %ld and up are kept for the workers and the "
				  "rendezvous (RLIMIT_NOFILE %ld)",
				  r->floor, r->limit);

		pause_listener(r, why);
	}
	return keep;
}

void
fdreserve_accept_failed(struct fdreserve *r, int err)
{
	_cleanup_free_ char *why = xasprintf("cannot accept a connection: %s", strerror(err));

	pause_listener(r, why);
}

long
fdreserve_floor(const struct fdreserve *r)
{
	return r->floor;
}

long
fdreserve_limit(const struct fdreserve *r)
{
	return r->limit;
}

uint64_t
fdreserve_pauses(const struct fdreserve *r)
{
	return r->pauses;
}

void
fdreserve_free(struct fdreserve *r)
{
	if (!r) {
		return;
	}
	event_free(r->timer);
	free(r);
}
