#include "proctree.h"

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util.h"

uint64_t
proctree_start(pid_t pid)
{
	char path[64], *p;
	_cleanup_free_ char *buf = NULL;
	unsigned long long start = 0;

	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	if (read_file(path, 4096, &buf, NULL) < 0) {
		return 0;
	}
	/* The command may hold spaces and parentheses: count after the last ')'. */
	p = strrchr(buf, ')');
	if (!p || sscanf(p + 1,
			 " %*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %*u %*u %*d %*d %*d "
			 "%*d %*d %*d %llu",
			 &start) != 1) {
		return 0;
	}
	return start;
}

int
proctree_same(const struct proc_id *id)
{
	return id->pid > 1 && proctree_start(id->pid) == id->start && id->start != 0;
}

int
proctree_has(const struct proc_id *ids, size_t n, pid_t pid)
{
	for (size_t i = 0; i < n; i++) {
		if (ids[i].pid == pid) {
			return 1;
		}
	}
	return 0;
}

/* Add the pids of one children file. Returns how many were added. */
static int
add_children_file(const char *path, struct proc_id **ids, size_t *n, size_t *cap)
{
	_cleanup_free_ char *buf = NULL;
	char *s, *end;
	int added = 0;

	if (read_file(path, 1 << 20, &buf, NULL) < 0) {
		return 0;
	}
	for (s = buf;; s = end) {
		long v = strtol(s, &end, 10);
		uint64_t start;

		if (end == s) {
			break;
		}
		if (v <= 1 || proctree_has(*ids, *n, (pid_t)v)) {
			continue;
		}
		start = proctree_start((pid_t)v);
		if (!start) {
			continue;
		}
		if (*n == *cap) {
			*cap = *cap ? *cap * 2 : 64;
			*ids = xrealloc(*ids, *cap * sizeof(**ids));
		}
		(*ids)[(*n)++] = (struct proc_id){(pid_t)v, start};
		added++;
	}
	return added;
}

int
proctree_add_children(pid_t pid, struct proc_id **ids, size_t *n, size_t *cap)
{
	char path[64];
	struct dirent *e;
	DIR *d;
	int added = 0;

	snprintf(path, sizeof(path), "/proc/%d/task", (int)pid);
	d = opendir(path);
	if (!d) {
		return -errno;
	}
	while ((e = readdir(d))) {
		char file[320];

		if (e->d_name[0] == '.') {
			continue;
		}
		snprintf(file, sizeof(file), "/proc/%d/task/%s/children", (int)pid, e->d_name);
		added += add_children_file(file, ids, n, cap);
	}
	closedir(d);
	return added;
}
