/* sd.c — sd_notify(3) and the systemd watchdog in a few lines of our own
 * (no libsystemd). See sd.h. */
#include "sd.h"

#include <errno.h>
#include <event2/event.h>
#include <limits.h>
#include <stdarg.h>
#include <stddef.h>
#include <string.h>
#include <unistd.h>

#include "util.h"

/* Longest STATUS= text sent. */
#define SD_STATUS_MAX 512
/* Shortest watchdog ping interval. */
#define SD_WATCHDOG_MIN_USEC 1000

int
sd_notify_address(const char *addr, struct sockaddr_un *ret, socklen_t *ret_len)
{
	size_t len;

	if (!addr || (addr[0] != '/' && addr[0] != '@') || addr[1] == '\0') {
		return -EINVAL;
	}
	len = strlen(addr);
	if (len > sizeof(ret->sun_path) - (addr[0] == '/' ? 1 : 0)) {
		return -ENAMETOOLONG;
	}
	memset(ret, 0, sizeof(*ret));
	ret->sun_family = AF_UNIX;
	memcpy(ret->sun_path, addr, len);
	if (addr[0] == '@') {
		ret->sun_path[0] = '\0';
		*ret_len = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + len);
	} else {
		*ret_len = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + len + 1);
	}
	return 0;
}

static int
send_datagram(int fd, const struct sockaddr_un *sa, socklen_t sa_len, const char *state)
{
	ssize_t n;

	do {
		n = sendto(fd, state, strlen(state), MSG_DONTWAIT | MSG_NOSIGNAL,
			   (const struct sockaddr *)sa, sa_len);
	} while (n < 0 && errno == EINTR);
	if (n < 0) {
		return -errno;
	}
	return 1;
}

int
sd_notify_send(const char *addr, const char *state)
{
	struct sockaddr_un sa;
	socklen_t sa_len;
	_cleanup_close_ int fd = -1;
	int r;

	if (!addr || !*addr) {
		return 0;
	}
	r = sd_notify_address(addr, &sa, &sa_len);
	if (r < 0) {
		return r;
	}
	fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (fd < 0) {
		return -errno;
	}
	return send_datagram(fd, &sa, sa_len, state);
}

static const char *
env_lookup(char *const *envp, const char *name)
{
	size_t n = strlen(name);

	for (size_t i = 0; envp && envp[i]; i++) {
		if (strncmp(envp[i], name, n) == 0 && envp[i][n] == '=') {
			return envp[i] + n + 1;
		}
	}
	return NULL;
}

int
sd_watchdog_usec(char *const *envp, pid_t pid, uint64_t *ret_usec)
{
	const char *usec_s = env_lookup(envp, "WATCHDOG_USEC");
	const char *pid_s = env_lookup(envp, "WATCHDOG_PID");
	long long usec, wpid;

	if (!usec_s) {
		return 0;
	}
	if (parse_int(usec_s, 1, LLONG_MAX, &usec) < 0) {
		return -EINVAL;
	}
	if (pid_s) {
		if (parse_int(pid_s, 1, INT_MAX, &wpid) < 0) {
			return -EINVAL;
		}
		if ((pid_t)wpid != pid) {
			return 0;
		}
	}
	*ret_usec = (uint64_t)usec;
	return 1;
}

struct sd_notifier {
	int fd; /* -1: no supervisor */
	struct sockaddr_un sa;
	socklen_t sa_len;
	struct event *watchdog;
	uint64_t watchdog_interval;
	bool ready;
	bool stopping;
	char *last_status;
	void (*error_cb)(int err, const char *state, const char *what, void *arg);
	void *arg;
};

static int
notifier_send(struct sd_notifier *n, const char *state)
{
	int r;

	if (n->fd < 0) {
		return 0;
	}
	r = send_datagram(n->fd, &n->sa, n->sa_len, state);
	if (r < 0 && n->error_cb) {
		n->error_cb(r, state, NULL, n->arg);
	}
	return r;
}

static void
watchdog_cb(evutil_socket_t fd, short what, void *arg)
{
	notifier_send(arg, "WATCHDOG=1");
}

static void notifier_error(struct sd_notifier *n, int err, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

static void
notifier_error(struct sd_notifier *n, int err, const char *fmt, ...)
{
	va_list ap;
	char *what;

	if (!n->error_cb) {
		return;
	}
	va_start(ap, fmt);
	if (vasprintf(&what, fmt, ap) < 0) {
		abort();
	}
	va_end(ap);
	n->error_cb(err, NULL, what, n->arg);
	free(what);
}

struct sd_notifier *
sd_notifier_new(struct event_base *base, char *const *envp,
		void (*error_cb)(int err, const char *state, const char *what, void *arg),
		void *arg)
{
	struct sd_notifier *n = xcalloc(1, sizeof(*n));
	const char *addr = env_lookup(envp, "NOTIFY_SOCKET");
	uint64_t usec = 0;
	int r;

	n->fd = -1;
	n->error_cb = error_cb;
	n->arg = arg;
	if (!addr || !*addr) {
		return n;
	}
	r = sd_notify_address(addr, &n->sa, &n->sa_len);
	if (r < 0) {
		notifier_error(
			n, r,
			"NOTIFY_SOCKET='%s' is not a socket address (an absolute path or @name)",
			addr);
		return n;
	}
	n->fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (n->fd < 0) {
		notifier_error(n, -errno, "cannot create a socket for NOTIFY_SOCKET='%s'", addr);
		return n;
	}
	r = sd_watchdog_usec(envp, getpid(), &usec);
	if (r < 0) {
		notifier_error(
			n, r,
			"WATCHDOG_USEC='%s' WATCHDOG_PID='%s' is not a valid watchdog request",
			env_lookup(envp, "WATCHDOG_USEC"),
			env_lookup(envp, "WATCHDOG_PID") ? env_lookup(envp, "WATCHDOG_PID") : "");
		return n;
	}
	if (r > 0) {
		struct timeval tv;

		n->watchdog_interval =
			usec / 2 < SD_WATCHDOG_MIN_USEC ? SD_WATCHDOG_MIN_USEC : usec / 2;
		tv.tv_sec = (time_t)(n->watchdog_interval / USEC_PER_SEC);
		tv.tv_usec = (suseconds_t)(n->watchdog_interval % USEC_PER_SEC);
		n->watchdog = event_new(base, -1, EV_PERSIST, watchdog_cb, n);
		if (!n->watchdog || event_add(n->watchdog, &tv) < 0) {
			abort();
		}
	}
	return n;
}

void
sd_notifier_free(struct sd_notifier *n)
{
	if (!n) {
		return;
	}
	if (n->watchdog) {
		event_free(n->watchdog);
	}
	if (n->fd >= 0) {
		close(n->fd);
	}
	free(n->last_status);
	free(n);
}

bool
sd_notifier_enabled(const struct sd_notifier *n)
{
	return n && n->fd >= 0;
}

uint64_t
sd_notifier_watchdog_interval(const struct sd_notifier *n)
{
	return n ? n->watchdog_interval : 0;
}

/* "STATUS=<text>" with control characters as spaces, cut at SD_STATUS_MAX. */
static char *
status_line(const char *text)
{
	size_t len = strnlen(text, SD_STATUS_MAX);
	char *s = xasprintf("STATUS=%.*s", (int)len, text);

	for (char *p = s; *p; p++) {
		if ((unsigned char)*p < 0x20 || *p == 0x7f) {
			*p = ' ';
		}
	}
	return s;
}

/* Send head ("READY=1", "STOPPING=1" or NULL) and the status (NULL: none);
 * remembers the status. */
static int
notify_with_status(struct sd_notifier *n, const char *head, const char *status)
{
	_cleanup_free_ char *line = status ? status_line(status) : NULL;
	_cleanup_free_ char *state = NULL;

	if (n->fd < 0) {
		return 0;
	}
	if (line) {
		if (!head && n->last_status && strcmp(n->last_status, line) == 0) {
			return 0;
		}
		free(n->last_status);
		n->last_status = xstrdup(line);
	}
	if (head && line) {
		state = xasprintf("%s\n%s", head, line);
	} else if (head) {
		state = xstrdup(head);
	} else if (line) {
		state = xstrdup(line);
	} else {
		return 0;
	}
	return notifier_send(n, state);
}

int
sd_notify_ready(struct sd_notifier *n, const char *status)
{
	bool first;

	if (!n) {
		return 0;
	}
	first = !n->ready;
	n->ready = true;
	return notify_with_status(n, first ? "READY=1" : NULL, status);
}

int
sd_notify_stopping(struct sd_notifier *n, const char *status)
{
	bool first;

	if (!n) {
		return 0;
	}
	first = !n->stopping;
	n->stopping = true;
	return notify_with_status(n, first ? "STOPPING=1" : NULL, status);
}

int
sd_notify_status(struct sd_notifier *n, const char *fmt, ...)
{
	va_list ap;
	char *text;
	int r;

	if (!n || n->fd < 0) {
		return 0;
	}
	va_start(ap, fmt);
	if (vasprintf(&text, fmt, ap) < 0) {
		abort();
	}
	va_end(ap);
	r = notify_with_status(n, NULL, text);
	free(text);
	return r;
}
