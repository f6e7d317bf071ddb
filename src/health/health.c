/* health.c — the health gate's checks: parsing their settings, the
 * built-in checks, and reading how a check ended (health.h). */
#include "health.h"

#include <errno.h>
#include <fcntl.h>
#include <glob.h>
#include <math.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/wait.h>
#include <unistd.h>

#include "numa.h"
#include "util.h"

/* ---- settings ------------------------------------------------------------- */

int
health_parse_size(const char *s, uint64_t *ret)
{
	static const char units[] = "KMGTP";
	char *end = NULL;
	double v, mul = 1;
	const char *u;

	if (!s || !*s || *s == '-' || *s == '+' || *s == ' ') {
		return -EINVAL;
	}
	errno = 0;
	v = strtod(s, &end);
	if (errno || end == s || !isfinite(v) || v < 0) {
		return -EINVAL;
	}
	if (*end && (u = strchr(units, *end & ~0x20)) != NULL) {
		for (const char *k = units; k <= u; k++) {
			mul *= 1024.0;
		}
		end++;
		if (*end == 'i') {
			end++;
		}
		if (*end == 'B' || *end == 'b') {
			end++;
		}
	} else if (*end == 'B' || *end == 'b') {
		end++;
	}
	if (*end || v * mul >= 18446744073709551616.0) {
		return -EINVAL;
	}
	*ret = (uint64_t)(v * mul);
	return 0;
}

int
health_parse_free_space(const char *value, char **ret_path, uint64_t *ret_bytes, char **reterr)
{
	const char *colon = strrchr(value, ':');
	uint64_t bytes;

	if (!colon || colon == value) {
		*reterr = xstrdup("expected PATH:SIZE, e.g. /checkpoints:100G");
		return -EINVAL;
	}
	if (value[0] != '/') {
		*reterr = xstrdup("the path must be absolute");
		return -EINVAL;
	}
	if (health_parse_size(colon + 1, &bytes) < 0) {
		*reterr = xasprintf("'%s' is not a size (bytes, or with K, M, G, T, P)", colon + 1);
		return -EINVAL;
	}
	*ret_path = xstrndup(value, (size_t)(colon - value));
	*ret_bytes = bytes;
	return 0;
}

int
health_parse_nics(const char *value, char ***ret, char **reterr)
{
	char **v = NULL;
	const char *p = value;

	for (;;) {
		size_t len = strcspn(p, ",");
		_cleanup_free_ char *name = xstrndup(p, len);

		/* The kernel's dev_valid_name(): 1 to IFNAMSIZ - 1 bytes, not "." or
		 * "..", no '/', ':' or white space. */
		if (len == 0 || len > 15 || strpbrk(name, "/: \t\n\v\f\r") || !strcmp(name, ".") ||
		    !strcmp(name, "..")) {
			*reterr = xasprintf("'%s' is not a netdev name or \"ib\"", name);
			strv_free(v);
			return -EINVAL;
		}
		for (size_t i = 0; v && v[i]; i++) {
			if (!strcmp(v[i], name)) {
				*reterr = xasprintf("'%s' is given twice", name);
				strv_free(v);
				return -EINVAL;
			}
		}
		strv_push(&v, name);
		if (!p[len]) {
			break;
		}
		p += len + 1;
	}
	*ret = v;
	return 0;
}

void
health_checks_add(struct health_check **v, size_t *n, enum health_kind kind, char *arg, char **nics,
		  uint64_t min_bytes, int gpus)
{
	struct health_check *c;

	*v = xrealloc(*v, (*n + 1) * sizeof(**v));
	c = &(*v)[(*n)++];
	*c = (struct health_check){kind, NULL, arg, nics, min_bytes, gpus};
	switch (kind) {
	case HEALTH_COMMAND:
		c->name = xasprintf("command:%s", arg);
		return;
	case HEALTH_GPUS:
		c->name = xstrdup("gpus");
		return;
	case HEALTH_NICS:
		c->name = xstrdup("nics");
		return;
	case HEALTH_WRITABLE:
		c->name = xasprintf("writable:%s", arg);
		return;
	case HEALTH_FREE_SPACE:
		c->name = xasprintf("free-space:%s", arg);
		return;
	case HEALTH_GPU_MEMORY:
		c->name = xstrdup("gpu-memory");
		return;
	}
}

void
health_checks_free(struct health_check *v, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		free(v[i].name);
		free(v[i].arg);
		strv_free(v[i].nics);
	}
	free(v);
}

/* ---- built-in checks ------------------------------------------------------- */

/* The first line of a small file, or NULL with errno set. */
static char *
read_line(const char *path)
{
	char *buf = NULL;
	int r = read_file(path, 256, &buf, NULL);

	if (r < 0) {
		errno = -r;
		return NULL;
	}
	buf[strcspn(buf, "\n")] = '\0';
	return buf;
}

/* Every InfiniBand port under root ACTIVE (at least one): appends to *msg
 * (replaced: the old string is freed). */
static bool
check_ib(const char *root, char **msg)
{
	_cleanup_free_ char *pattern =
		xasprintf("%s/sys/class/infiniband/*/ports/*/state", strcmp(root, "/") ? root : "");
	glob_t g = {0};
	bool ok;
	int n_bad = 0;

	if (glob(pattern, 0, NULL, &g) != 0 || g.gl_pathc == 0) {
		char *old = *msg;

		globfree(&g);
		*msg = xasprintf("%sib: no InfiniBand port found; ", old);
		free(old);
		return false;
	}
	for (size_t i = 0; i < g.gl_pathc; i++) {
		_cleanup_free_ char *state = read_line(g.gl_pathv[i]);
		const char *dev = g.gl_pathv[i] + strlen(pattern) - strlen("*/ports/*/state");
		char *old = *msg;

		if (state && strstr(state, "ACTIVE")) {
			continue;
		}
		n_bad++;
		*msg = xasprintf("%sib %.*s: %s; ", old, (int)(strlen(dev) - strlen("/state")), dev,
				 state ? state : "unreadable");
		free(old);
	}
	ok = n_bad == 0;
	if (ok) {
		char *old = *msg;

		*msg = xasprintf("%sib: %zu port%s ACTIVE; ", old, g.gl_pathc,
				 g.gl_pathc == 1 ? "" : "s");
		free(old);
	}
	globfree(&g);
	return ok;
}

bool
health_check_nics(const char *root, char *const *nics, char **ret_msg)
{
	char *msg = xstrdup("");
	bool ok = true;

	for (size_t i = 0; nics && nics[i]; i++) {
		_cleanup_free_ char *path = NULL, *state = NULL;
		char *old;

		if (!strcmp(nics[i], "ib")) {
			ok &= check_ib(root, &msg);
			continue;
		}
		path = xasprintf("%s/sys/class/net/%s/operstate", strcmp(root, "/") ? root : "",
				 nics[i]);
		state = read_line(path);
		old = msg;
		msg = xasprintf("%s%s: %s; ", old, nics[i],
				state             ? state
				: errno == ENOENT ? "no such netdev"
						  : strerror(errno));
		free(old);
		/* "unknown": a driver that does not track it, to be taken as
		 * usable (the kernel's operstates.rst); down is "down". */
		ok &= state && (!strcmp(state, "up") || !strcmp(state, "unknown"));
	}
	if (strlen(msg) >= 2) {
		msg[strlen(msg) - 2] = '\0';
	}
	*ret_msg = msg;
	return ok;
}

bool
health_check_writable(const char *path, char **ret_msg)
{
	_cleanup_free_ char *tmpl = xasprintf("%s/.elasticd-health-XXXXXX", path);
	int fd = mkostemp(tmpl, O_CLOEXEC);
	int err;

	if (fd < 0) {
		*ret_msg = xasprintf("%s: cannot create a file: %s", path, strerror(errno));
		return false;
	}
	err = write_all(fd, "elasticd\n", 9);
	if (close(fd) < 0 && err == 0) {
		err = -errno;
	}
	unlink(tmpl);
	if (err < 0) {
		*ret_msg = xasprintf("%s: cannot write a file: %s", path, strerror(-err));
		return false;
	}
	*ret_msg = xasprintf("%s: writable", path);
	return true;
}

bool
health_check_free_space(const char *path, uint64_t min_bytes, char **ret_msg)
{
	struct statvfs st;
	uint64_t avail;

	if (statvfs(path, &st) < 0) {
		*ret_msg = xasprintf("%s: %s", path, strerror(errno));
		return false;
	}
	avail = (uint64_t)st.f_bavail * (uint64_t)st.f_frsize;
	*ret_msg = xasprintf("%s: %llu bytes free, %llu needed", path, (unsigned long long)avail,
			     (unsigned long long)min_bytes);
	return avail >= min_bytes;
}

bool
health_check_gpus(const char *xml, const char *bus_ids, const char *cvd, int min, char **ret_msg)
{
	struct numa_topology *t = NULL;
	char *err = NULL;
	int n;

	if (numa_topology_load(xml, &t, &err) < 0) {
		*ret_msg = xasprintf("cannot read the topology: %s", err);
		free(err);
		return false;
	}
	n = numa_topology_select_gpus(t, bus_ids, cvd, &err);
	numa_topology_free(t);
	if (n < 0) {
		*ret_msg = err;
		return false;
	}
	*ret_msg = xasprintf("%d GPU%s found, %d expected", n, n == 1 ? "" : "s", min);
	return n >= min;
}

/* ---- a check's end ---------------------------------------------------------- */

void
health_tail_append(struct health_tail *t, const void *p, size_t n)
{
	const char *s = p;

	if (n >= sizeof(t->buf)) {
		s += n - sizeof(t->buf);
		t->cut |= t->len > 0 || n > sizeof(t->buf);
		n = sizeof(t->buf);
		t->len = 0;
	} else if (t->len + n > sizeof(t->buf)) {
		size_t drop = t->len + n - sizeof(t->buf);

		memmove(t->buf, t->buf + drop, t->len - drop);
		t->len -= drop;
		t->cut = true;
	}
	memcpy(t->buf + t->len, s, n);
	t->len += n;
}

char *
health_tail_lines(const struct health_tail *t, int max_lines)
{
	size_t end = t->len, start;
	int lines = 0;

	while (end > 0 && t->buf[end - 1] == '\n') {
		end--;
	}
	start = end;
	while (start > 0) {
		if (t->buf[start - 1] == '\n' && ++lines >= max_lines) {
			break;
		}
		start--;
	}
	if (start == end) {
		return xstrdup("");
	}
	return bytes_printable(t->buf + start, end - start);
}

char *
health_describe_end(int status, bool timed_out, double deadline_s, int spawn_err)
{
	if (spawn_err > 0) {
		return xasprintf("cannot run: %s", strerror(spawn_err));
	}
	if (timed_out) {
		return xasprintf("timed out after %g s", deadline_s);
	}
	return wait_status_describe(status);
}

bool
health_end_ok(int status, bool timed_out, int spawn_err)
{
	return spawn_err <= 0 && !timed_out && WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

uint64_t
health_retry_delay(uint64_t interval_usec, int failures)
{
	uint64_t d = interval_usec;

	for (int i = 1; i < failures && d < interval_usec * HEALTH_RETRY_MAX_FACTOR; i++) {
		d *= 2;
	}
	return d < interval_usec * HEALTH_RETRY_MAX_FACTOR
		       ? d
		       : interval_usec * HEALTH_RETRY_MAX_FACTOR;
}
