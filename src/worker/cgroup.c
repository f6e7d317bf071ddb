#include "cgroup.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "util.h"

/* The cgroup2 mount point whose root is "/" (or a prefix of own), from
 * /proc/self/mountinfo; the mount's root in *ret_root. Malloc'd, NULL if none. */
static char *
cgroup2_mount(char **ret_root)
{
	_cleanup_free_ char *buf = NULL;
	char *line, *save = NULL;

	if (read_file("/proc/self/mountinfo", 1 << 22, &buf, NULL) < 0) {
		return NULL;
	}
	for (line = strtok_r(buf, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
		char root[4096], mnt[4096];
		const char *dash = strstr(line, " - ");

		if (!dash || strncmp(dash, " - cgroup2 ", 11) != 0) {
			continue;
		}
		if (sscanf(line, "%*s %*s %*s %4095s %4095s", root, mnt) != 2) {
			continue;
		}
		*ret_root = xstrdup(root);
		return xstrdup(mnt);
	}
	return NULL;
}

/* The agent's cgroup v2 directory ("0::<path>" under the cgroup2 mount).
 * Malloc'd, or NULL with *reterr. */
static char *
own_cgroup_dir(char **reterr)
{
	_cleanup_free_ char *buf = NULL, *mnt = NULL, *root = NULL;
	const char *own, *rel;
	char *end;
	int r = read_file("/proc/self/cgroup", 1 << 16, &buf, NULL);

	if (r < 0) {
		*reterr = xasprintf("cannot read /proc/self/cgroup: %s", strerror(-r));
		return NULL;
	}
	own = strstr(buf, "0::/");
	if (own && own != buf && own[-1] != '\n') {
		own = NULL;
	}
	if (!own) {
		*reterr = xstrdup("no cgroup v2 hierarchy in /proc/self/cgroup");
		return NULL;
	}
	own += 3;
	end = strchr(own, '\n');
	if (end) {
		*end = '\0';
	}
	mnt = cgroup2_mount(&root);
	if (!mnt) {
		*reterr = xstrdup("cgroup2 is not mounted");
		return NULL;
	}
	rel = own;
	if (strcmp(root, "/") != 0) {
		size_t n = strlen(root);

		if (strncmp(own, root, n) != 0 || (own[n] != '/' && own[n] != '\0')) {
			*reterr =
				xasprintf("own cgroup %s is outside the cgroup2 mount %s (root %s)",
					  own, mnt, root);
			return NULL;
		}
		rel = own + n;
	}
	return xasprintf("%s%s", mnt, strcmp(rel, "/") == 0 ? "" : rel);
}

/* Fork a child that moves itself into <path>/probe and exits: the kernel's
 * own answer to whether the workers can be moved (permissions on the common
 * ancestor, the no-internal-process rule). Returns 0 or -errno. */
static int
probe_move(const char *path)
{
	_cleanup_free_ char *probe = NULL;
	int fd, r, status;
	pid_t pid;

	r = cgroup_child_new(path, "probe", &probe);
	if (r < 0) {
		return r;
	}
	fd = cgroup_open_procs(probe);
	if (fd < 0) {
		(void)rmdir(probe);
		return fd;
	}
	pid = fork();
	if (pid == 0) {
		_exit(-cgroup_enter(fd) & 0xff);
	}
	r = pid < 0 ? -errno : 0;
	close(fd);
	while (pid > 0 && waitpid(pid, &status, 0) < 0) {
		if (errno != EINTR) {
			r = -errno;
			break;
		}
	}
	if (r == 0 && (!WIFEXITED(status) || WEXITSTATUS(status) != 0)) {
		r = WIFEXITED(status) ? -WEXITSTATUS(status) : -EIO;
	}
	/* The child is gone: the probe is empty again. */
	(void)rmdir(probe);
	return r;
}

int
cgroup_subtree_new(char **ret_path, char **reterr)
{
	_cleanup_free_ char *dir = own_cgroup_dir(reterr), *kill_path = NULL;
	char *path = NULL;
	int r, fd;

	if (!dir) {
		return -ENOENT;
	}
	path = xasprintf("%s/elasticd.%d", dir, (int)getpid());
	r = mkdir(path, 0755) < 0 ? -errno : 0;
	if (r == -EEXIST) {
		/* Left by a dead agent that had our pid (its sentinel died too):
		 * what is inside is orphaned; kill it and start clean. */
		(void)cgroup_kill(path);
		(void)cgroup_wait_empty(path, 1000);
		(void)cgroup_remove(path);
		r = mkdir(path, 0755) < 0 && errno != EEXIST ? -errno : 0;
	}
	if (r < 0) {
		*reterr = xasprintf("cannot create %s: %s", path, strerror(-r));
		free(path);
		return r;
	}
	kill_path = xasprintf("%s/cgroup.kill", path);
	fd = open(kill_path, O_WRONLY | O_CLOEXEC);
	if (fd < 0) {
		r = errno == ENOENT ? -ENOTSUP : -errno;
		*reterr = xasprintf("cannot open %s: %s", kill_path,
				    errno == ENOENT ? "the kernel lacks cgroup.kill (Linux < 5.14)"
						    : strerror(errno));
		(void)rmdir(path);
		free(path);
		return r;
	}
	close(fd);
	r = probe_move(path);
	if (r < 0) {
		*reterr = xasprintf("cannot move a process into %s/probe: %s", path, strerror(-r));
		(void)cgroup_remove(path);
		free(path);
		return r;
	}
	*ret_path = path;
	return 0;
}

int
cgroup_child_new(const char *parent, const char *name, char **ret_path)
{
	char *path = xasprintf("%s/%s", parent, name);
	if (mkdir(path, 0755) < 0) {
		int r = -errno;

		free(path);
		return r;
	}
	*ret_path = path;
	return 0;
}

int
cgroup_open_procs(const char *path)
{
	_cleanup_free_ char *p = xasprintf("%s/cgroup.procs", path);
	int fd = open(p, O_WRONLY | O_CLOEXEC);

	return fd < 0 ? -errno : fd;
}

int
cgroup_enter(int procs_fd)
{
	ssize_t n;

	do {
		n = write(procs_fd, "0", 1);
	} while (n < 0 && errno == EINTR);
	return n == 1 ? 0 : -errno;
}

int
cgroup_kill(const char *path)
{
	_cleanup_free_ char *p = xasprintf("%s/cgroup.kill", path);
	int fd = open(p, O_WRONLY | O_CLOEXEC), r = 0;

	if (fd < 0) {
		return -errno;
	}
	if (write(fd, "1", 1) != 1) {
		r = -errno;
	}
	close(fd);
	return r;
}

int
cgroup_pids(const char *path, pid_t **ret_pids)
{
	_cleanup_free_ char *p = xasprintf("%s/cgroup.procs", path), *buf = NULL;
	pid_t *pids = NULL;
	char *s, *end;
	int n = 0, r;

	r = read_file(p, 1 << 22, &buf, NULL);
	if (r < 0) {
		return r;
	}
	for (s = buf;; s = end) {
		long pid = strtol(s, &end, 10);

		if (end == s) {
			break;
		}
		if (pid <= 0) {
			/* A task the kernel cannot name in our pid namespace: one
			 * exiting (its pid already released) shows as 0. Signalling
			 * "0" would reach the agent's whole process group. */
			continue;
		}
		pids = xrealloc(pids, (size_t)(n + 1) * sizeof(*pids));
		pids[n++] = (pid_t)pid;
	}
	*ret_pids = pids;
	return n;
}

int
cgroup_populated(const char *path)
{
	_cleanup_free_ char *p = xasprintf("%s/cgroup.events", path), *buf = NULL;
	const char *s;
	int r = read_file(p, 1 << 16, &buf, NULL);

	if (r < 0) {
		return r;
	}
	s = strstr(buf, "populated ");
	if (!s) {
		return -EINVAL;
	}
	return s[10] == '1';
}

bool
cgroup_wait_empty(const char *path, int timeout_ms)
{
	for (int waited = 0; cgroup_populated(path) == 1; waited += 10) {
		if (waited >= timeout_ms) {
			return false;
		}
		usleep(10 * 1000);
	}
	return true;
}

int
cgroup_remove(const char *path)
{
	DIR *d = opendir(path);
	struct dirent *e;
	int r = 0;

	if (!d) {
		return errno == ENOENT ? 0 : -errno;
	}
	while ((e = readdir(d))) {
		_cleanup_free_ char *child = NULL;

		if (e->d_type != DT_DIR || e->d_name[0] == '.') {
			continue;
		}
		child = xasprintf("%s/%s", path, e->d_name);
		if (rmdir(child) < 0 && errno != ENOENT && r == 0) {
			r = -errno;
		}
	}
	closedir(d);
	if (rmdir(path) < 0 && errno != ENOENT && r == 0) {
		r = -errno;
	}
	return r;
}
