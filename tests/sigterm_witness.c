/* Loaded into the integration tests' Python runner (lib.py, ctypes): when a
 * SIGTERM arrives, write who sent it (pid, command line, parent) to stderr,
 * then die of it as before. A test runner killed by SIGTERM otherwise leaves
 * only "killed by signal 15" in meson's log, with no way to tell the sender.
 * Async-signal-safe calls only in the handler. Built without sanitizers: the
 * runner is the system's python3. */
#include <fcntl.h>
#include <signal.h>
#include <string.h>
#include <unistd.h>

static void
put(const char *s, size_t n)
{
	while (n > 0) {
		ssize_t w = write(STDERR_FILENO, s, n);

		if (w <= 0) {
			return;
		}
		s += w;
		n -= (size_t)w;
	}
}

static void
put_str(const char *s)
{
	put(s, strlen(s));
}

/* v in decimal, written backwards ending at end (no NUL); returns its
 * first character. Async-signal-safe (no snprintf). */
static char *
decimal(char *end, long v)
{
	unsigned long u = v < 0 ? -(unsigned long)v : (unsigned long)v;
	char *p = end;

	do {
		*--p = (char)('0' + u % 10);
		u /= 10;
	} while (u);
	if (v < 0) {
		*--p = '-';
	}
	return p;
}

static void
put_int(long v)
{
	char buf[24], *p = decimal(buf + sizeof(buf), v);

	put(p, (size_t)(buf + sizeof(buf) - p));
}

/* /proc/<pid>/<what>, NULs shown as spaces, at most 400 bytes. */
static void
put_proc(long pid, const char *what)
{
	char path[64] = "/proc/", data[400], num[24];
	size_t n = strlen(path);
	ssize_t got;
	int fd;

	num[sizeof(num) - 1] = '\0';
	strcpy(path + n, decimal(num + sizeof(num) - 1, pid));
	n = strlen(path);
	path[n++] = '/';
	strcpy(path + n, what);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		put_str("(gone)");
		return;
	}
	got = read(fd, data, sizeof(data));
	close(fd);
	for (ssize_t i = 0; i < got; i++) {
		if (data[i] == '\0' || data[i] == '\n') {
			data[i] = ' ';
		}
	}
	put(data, got > 0 ? (size_t)got : 0);
}

static void
on_sigterm(int sig, siginfo_t *si, void *uctx)
{
	(void)uctx;
	put_str("\nsigterm_witness: test runner ");
	put_int(getpid());
	put_str(" got SIGTERM from pid ");
	put_int(si->si_pid);
	put_str(" uid ");
	put_int(si->si_uid);
	put_str(" si_code ");
	put_int(si->si_code);
	put_str("\nsigterm_witness: sender cmdline: ");
	put_proc(si->si_pid, "cmdline");
	put_str("\nsigterm_witness: sender stat: ");
	put_proc(si->si_pid, "stat");
	put_str("\n");
	signal(sig, SIG_DFL);
	raise(sig);
}

/* Install the handler; lib.py calls this once at import. Returns 0 or -1. */
int sigterm_witness_install(void);

int
sigterm_witness_install(void)
{
	struct sigaction sa;

	memset(&sa, 0, sizeof(sa));
	sa.sa_sigaction = on_sigterm;
	sa.sa_flags = SA_SIGINFO | SA_RESTART;
	sigemptyset(&sa.sa_mask);
	return sigaction(SIGTERM, &sa, NULL);
}
