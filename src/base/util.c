#include "util.h"

#include <errno.h>
#include <fcntl.h>
#include <ctype.h>
#include <math.h>
#include <netdb.h>
#include <netinet/in.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>

static void
oom(size_t size)
{
	fprintf(stderr, "elasticd: out of memory allocating %zu bytes\n", size);
	abort();
}

void *
xmalloc(size_t size)
{
	void *p = malloc(size ? size : 1);

	if (!p) {
		oom(size);
	}
	return p;
}

void *
xcalloc(size_t nmemb, size_t size)
{
	void *p = calloc(nmemb ? nmemb : 1, size ? size : 1);

	if (!p) {
		oom(nmemb * size);
	}
	return p;
}

void *
xrealloc(void *ptr, size_t size)
{
	void *p = realloc(ptr, size ? size : 1);

	if (!p) {
		oom(size);
	}
	return p;
}

char *
xstrdup(const char *s)
{
	char *p = strdup(s);

	if (!p) {
		oom(strlen(s));
	}
	return p;
}

char *
xstrndup(const char *s, size_t n)
{
	char *p = strndup(s, n);

	if (!p) {
		oom(n);
	}
	return p;
}

char *
xvasprintf(const char *fmt, va_list ap)
{
	char *s;

	if (vasprintf(&s, fmt, ap) < 0) {
		oom(strlen(fmt));
	}
	return s;
}

char *
xasprintf(const char *fmt, ...)
{
	va_list ap;
	char *s;

	va_start(ap, fmt);
	s = xvasprintf(fmt, ap);
	va_end(ap);
	return s;
}

void
freep(void *p)
{
	void **pp = p;

	free(*pp);
	*pp = NULL;
}

void
closep(int *fd)
{
	if (*fd >= 0) {
		close(*fd);
		*fd = -1;
	}
}

size_t
strv_length(char *const *v)
{
	size_t n = 0;

	while (v && v[n]) {
		n++;
	}
	return n;
}

void
strv_consume(char ***v, char *s)
{
	size_t n = strv_length(*v);

	*v = xrealloc(*v, (n + 2) * sizeof(char *));
	(*v)[n] = s;
	(*v)[n + 1] = NULL;
}

void
strv_push(char ***v, const char *s)
{
	strv_consume(v, xstrdup(s));
}

char **
strv_copy(char *const *v)
{
	char **c;
	size_t n = strv_length(v);

	if (!v) {
		return NULL;
	}
	c = xcalloc(n + 1, sizeof(char *));
	for (size_t i = 0; i < n; i++) {
		c[i] = xstrdup(v[i]);
	}
	return c;
}

void
strv_free(char **v)
{
	for (size_t i = 0; v && v[i]; i++) {
		free(v[i]);
	}
	free(v);
}

char *
bytes_printable(const void *p, size_t n)
{
	const unsigned char *b = p;
	char *out = xmalloc(n * 4 + 1), *o = out;

	for (size_t i = 0; i < n; i++) {
		switch (b[i]) {
		case '\\':
		case '"':
			*o++ = '\\';
			*o++ = (char)b[i];
			continue;
		case '\r':
			o = stpcpy(o, "\\r");
			continue;
		case '\n':
			o = stpcpy(o, "\\n");
			continue;
		case '\t':
			o = stpcpy(o, "\\t");
			continue;
		}
		if (b[i] >= 0x20 && b[i] < 0x7f) {
			*o++ = (char)b[i];
		} else {
			o += sprintf(o, "\\x%02x", b[i]);
		}
	}
	*o = '\0';
	return out;
}

int
parse_int(const char *s, long long min, long long max, long long *ret)
{
	char *end;
	long long v;

	if (!s || !*s || isspace((unsigned char)*s)) {
		return -EINVAL;
	}
	errno = 0;
	v = strtoll(s, &end, 10);
	if (*end != '\0') {
		return -EINVAL;
	}
	if (errno == ERANGE || v < min || v > max) {
		return -ERANGE;
	}
	*ret = v;
	return 0;
}

int
parse_double(const char *s, double *ret)
{
	char *end;
	double v;

	if (!s || !*s || isspace((unsigned char)*s)) {
		return -EINVAL;
	}
	errno = 0;
	v = strtod(s, &end);
	if (*end != '\0' || errno == ERANGE || !isfinite(v)) {
		return -EINVAL;
	}
	*ret = v;
	return 0;
}

static uint64_t
clock_usec(clockid_t id)
{
	struct timespec ts;

	clock_gettime(id, &ts);
	return (uint64_t)ts.tv_sec * USEC_PER_SEC + (uint64_t)ts.tv_nsec / 1000;
}

uint64_t
now_usec(void)
{
	return clock_usec(CLOCK_MONOTONIC);
}

uint64_t
wall_usec(void)
{
	return clock_usec(CLOCK_REALTIME);
}

uint64_t
seconds_to_usec(double s)
{
	return (uint64_t)(s * (double)USEC_PER_SEC);
}

struct timeval
usec_to_timeval(uint64_t usec)
{
	return (struct timeval){(time_t)(usec / USEC_PER_SEC), (suseconds_t)(usec % USEC_PER_SEC)};
}

int
fd_nonblock(int fd, bool on)
{
	int flags = fcntl(fd, F_GETFL);

	if (flags < 0) {
		return -errno;
	}
	flags = on ? flags | O_NONBLOCK : flags & ~O_NONBLOCK;
	if (fcntl(fd, F_SETFL, flags) < 0) {
		return -errno;
	}
	return 0;
}

int
write_all(int fd, const void *buf, size_t len)
{
	const char *p = buf;

	while (len > 0) {
		ssize_t n = write(fd, p, len);

		if (n < 0) {
			if (errno == EINTR) {
				continue;
			}
			return -errno;
		}
		p += n;
		len -= (size_t)n;
	}
	return 0;
}

int
read_file(const char *path, size_t max, char **ret_buf, size_t *ret_len)
{
	_cleanup_close_ int fd = -1;
	struct stat st;
	char *buf;
	size_t len = 0, cap;

	/* O_NONBLOCK: a FIFO at the path must not block us; it is refused below. */
	fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
	if (fd < 0) {
		return -errno;
	}
	if (fstat(fd, &st) < 0) {
		return -errno;
	}
	if (!S_ISREG(st.st_mode)) {
		return -EINVAL;
	}
	/* st_size is a hint only: sysfs attributes report 4096 (a page) for a
	 * few bytes, so only reading past max says a file is too large. */
	cap = ((size_t)st.st_size < max ? (size_t)st.st_size : max) + 1;
	buf = xmalloc(cap + 1);
	for (;;) {
		ssize_t n;

		if (len == cap) {
			if (cap > max) {
				free(buf);
				return -EFBIG;
			}
			cap = cap * 2 > max + 1 ? max + 1 : cap * 2;
			buf = xrealloc(buf, cap + 1);
		}
		n = read(fd, buf + len, cap - len);
		if (n < 0) {
			if (errno == EINTR) {
				continue;
			}
			free(buf);
			return -errno;
		}
		if (n == 0) {
			break;
		}
		len += (size_t)n;
		if (len > max) {
			free(buf);
			return -EFBIG;
		}
	}
	buf[len] = '\0';
	*ret_buf = buf;
	if (ret_len) {
		*ret_len = len;
	}
	return 0;
}

int
mkdir_p(const char *path, mode_t mode)
{
	_cleanup_free_ char *p = xstrdup(path);

	for (char *s = p + 1; *s; s++) {
		if (*s != '/') {
			continue;
		}
		*s = '\0';
		if (mkdir(p, mode) < 0 && errno != EEXIST) {
			return -errno;
		}
		*s = '/';
	}
	if (mkdir(p, mode) < 0 && errno != EEXIST) {
		return -errno;
	}
	return 0;
}

static const struct {
	int signo;
	const char *name;
} signals[] = {
	{SIGHUP, "SIGHUP"},       {SIGINT, "SIGINT"},       {SIGQUIT, "SIGQUIT"},
	{SIGILL, "SIGILL"},       {SIGTRAP, "SIGTRAP"},     {SIGABRT, "SIGABRT"},
	{SIGBUS, "SIGBUS"},       {SIGFPE, "SIGFPE"},       {SIGKILL, "SIGKILL"},
	{SIGUSR1, "SIGUSR1"},     {SIGSEGV, "SIGSEGV"},     {SIGUSR2, "SIGUSR2"},
	{SIGPIPE, "SIGPIPE"},     {SIGALRM, "SIGALRM"},     {SIGTERM, "SIGTERM"},
	{SIGSTKFLT, "SIGSTKFLT"}, {SIGCHLD, "SIGCHLD"},     {SIGCONT, "SIGCONT"},
	{SIGSTOP, "SIGSTOP"},     {SIGTSTP, "SIGTSTP"},     {SIGTTIN, "SIGTTIN"},
	{SIGTTOU, "SIGTTOU"},     {SIGURG, "SIGURG"},       {SIGXCPU, "SIGXCPU"},
	{SIGXFSZ, "SIGXFSZ"},     {SIGVTALRM, "SIGVTALRM"}, {SIGPROF, "SIGPROF"},
	{SIGWINCH, "SIGWINCH"},   {SIGIO, "SIGIO"},         {SIGPWR, "SIGPWR"},
	{SIGSYS, "SIGSYS"},
};

const char *
signal_name(int signo)
{
	for (size_t i = 0; i < ARRAY_SIZE(signals); i++) {
		if (signals[i].signo == signo) {
			return signals[i].name;
		}
	}
	return NULL;
}

int
signal_from_name(const char *s)
{
	long long n;

	if (parse_int(s, 1, 64, &n) == 0) {
		return signal_name((int)n) ? (int)n : -EINVAL;
	}
	for (size_t i = 0; i < ARRAY_SIZE(signals); i++) {
		if (strcmp(signals[i].name, s) == 0 || strcmp(signals[i].name + 3, s) == 0) {
			return signals[i].signo;
		}
	}
	return -EINVAL;
}

char *
path_lookup(const char *file, const char *path)
{
	const char *p = path ? path : "/usr/bin:/bin";

	if (strchr(file, '/')) {
		return access(file, X_OK) == 0 ? xstrdup(file) : NULL;
	}
	for (;;) {
		const char *end = strchrnul(p, ':');
		char *cand =
			end == p ? xstrdup(file) : xasprintf("%.*s/%s", (int)(end - p), p, file);
		struct stat st;

		if (stat(cand, &st) == 0 && S_ISREG(st.st_mode) && access(cand, X_OK) == 0) {
			return cand;
		}
		free(cand);
		if (*end == '\0') {
			return NULL;
		}
		p = end + 1;
	}
}

int
proc_children(pid_t **ret_pids)
{
	char path[64], *buf = NULL, *p;
	pid_t *pids = NULL;
	int n = 0, r;

	snprintf(path, sizeof(path), "/proc/self/task/%d/children", (int)getpid());
	/* A proc file reports size 0: read_file reads until end of file. */
	r = read_file(path, 1 << 20, &buf, NULL);
	if (r < 0) {
		return r;
	}
	for (p = buf; *p;) {
		char *end;
		long v = strtol(p, &end, 10);

		if (end == p) {
			break;
		}
		pids = xrealloc(pids, (size_t)(n + 1) * sizeof(*pids));
		pids[n++] = (pid_t)v;
		p = end;
		while (*p == ' ' || *p == '\n') {
			p++;
		}
	}
	free(buf);
	*ret_pids = pids;
	return n;
}

int
cpus_allowed_count(void)
{
	cpu_set_t set;
	int n;

	if (sched_getaffinity(0, sizeof(set), &set) < 0) {
		n = (int)sysconf(_SC_NPROCESSORS_ONLN);
		return n > 0 ? n : 1;
	}
	n = CPU_COUNT(&set);
	return n > 0 ? n : 1;
}

const char *
host_fqdn(void)
{
	static char name[256];
	char host[256] = "";
	struct addrinfo *res = NULL;
	struct hostent *he = NULL;

	if (name[0]) {
		return name;
	}
	if (gethostname(host, sizeof(host) - 1) < 0 || !host[0]) {
		snprintf(host, sizeof(host), "localhost");
	}
	snprintf(name, sizeof(name), "%s", host);
	/* As Python's socket.getfqdn(): the first of the reverse lookup's name and
	 * aliases of the host's first address that contains a dot, else that name. */
	if (getaddrinfo(host, NULL, NULL, &res) != 0 || !res) {
		return name;
	}
	if (res->ai_family == AF_INET) {
		he = gethostbyaddr(&((struct sockaddr_in *)res->ai_addr)->sin_addr,
				   sizeof(struct in_addr), AF_INET);
	} else if (res->ai_family == AF_INET6) {
		he = gethostbyaddr(&((struct sockaddr_in6 *)res->ai_addr)->sin6_addr,
				   sizeof(struct in6_addr), AF_INET6);
	}
	if (he && he->h_name) {
		const char *pick = he->h_name;

		if (!strchr(pick, '.')) {
			for (char **al = he->h_aliases; al && *al; al++) {
				if (strchr(*al, '.')) {
					pick = *al;
					break;
				}
			}
		}
		snprintf(name, sizeof(name), "%s", pick);
	}
	freeaddrinfo(res);
	return name;
}

int
uuid4_string(char ret[37])
{
	uint8_t b[16];
	size_t got = 0;

	while (got < sizeof(b)) {
		ssize_t n = getrandom(b + got, sizeof(b) - got, 0);

		if (n < 0 && errno != EINTR) {
			return -errno;
		}
		got += n > 0 ? (size_t)n : 0;
	}
	b[6] = (uint8_t)((b[6] & 0x0f) | 0x40); /* version 4 */
	b[8] = (uint8_t)((b[8] & 0x3f) | 0x80); /* RFC 4122 variant */
	snprintf(ret, 37, "%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x",
		 b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11], b[12],
		 b[13], b[14], b[15]);
	return 0;
}

bool
ratelimit_pass(struct ratelimit *rl, uint64_t now, uint64_t *ret_suppressed)
{
	if (rl->passed && now - rl->last_usec < rl->interval_usec) {
		rl->suppressed++;
		return false;
	}
	if (ret_suppressed) {
		*ret_suppressed = rl->suppressed;
	}
	rl->suppressed = 0;
	rl->last_usec = now;
	rl->passed = true;
	return true;
}

char *
wait_status_describe(int status)
{
	if (WIFEXITED(status)) {
		return xasprintf("exit status %d", WEXITSTATUS(status));
	}
	if (WIFSIGNALED(status)) {
		return xasprintf("killed by %s", signal_name(WTERMSIG(status)));
	}
	return xasprintf("wait status %#x", (unsigned)status);
}
