#include "ectl_find.h"

#include <dirent.h>
#include <libgen.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "ctl_path.h"
#include "util.h"
#include "wenv.h"

static bool
strv_has(char *const *v, const char *s)
{
	for (; v && *v; v++) {
		if (strcmp(*v, s) == 0) {
			return true;
		}
	}
	return false;
}

/* Push s (taking it) unless v holds it already. */
static void
push_unique(char ***v, char *s)
{
	if (strv_has(*v, s)) {
		free(s);
	} else {
		strv_consume(v, s);
	}
}

static char *
dir_of(const char *path)
{
	_cleanup_free_ char *copy = xstrdup(path);

	return xstrdup(dirname(copy));
}

/* The file stem elasticd gives run_id ("job 1" → "job_1"): its default
 * socket's name without ".sock", from ctl_default_path itself. */
static char *
run_stem(const char *run_id)
{
	_cleanup_free_ char *p = ctl_default_path(NULL, run_id, 0);
	const char *base = strrchr(p, '/') + 1;

	return xstrndup(base, strlen(base) - strlen(".sock"));
}

void
ectl_find_plan(char *const *env, const char *run_id, uid_t euid, struct ectl_find_plan *ret)
{
	const char *rd = wenv_get(env, "RUNTIME_DIRECTORY");
	const char *xdg = wenv_get(env, "XDG_RUNTIME_DIR");
	_cleanup_free_ char *xdg_var = xdg ? xasprintf("XDG_RUNTIME_DIR=%s", xdg) : NULL;
	char *user_env[] = {xdg_var, NULL}; /* the environment without systemd's */
	const char *id = run_id ? run_id : "any";
	_cleanup_free_ char *root = ctl_default_path(user_env, id, 0);
	_cleanup_free_ char *root_dir = dir_of(root);
	_cleanup_free_ char *stem = run_stem(id);

	memset(ret, 0, sizeof(*ret));
	if (rd && rd[0] == '/') {
		strv_consume(&ret->paths, ctl_default_path(env, id, euid));
	}
	if (run_id) {
		push_unique(&ret->paths, xasprintf("%s/%s/elasticd.sock", root_dir, stem));
		push_unique(&ret->paths, xstrdup(root));
	}
	strv_push(&ret->dirs, root_dir);
	strv_push(&ret->units, root_dir);
	if (euid == 0) {
		return;
	}
	for (int i = 0; i < 2; i++) {
		/* $XDG_RUNTIME_DIR/elasticd, then /tmp/elasticd-<uid> */
		char *p = ctl_default_path(i == 0 ? user_env : NULL, id, euid);

		push_unique(&ret->dirs, dir_of(p));
		if (run_id) {
			push_unique(&ret->paths, p);
		} else {
			free(p);
		}
	}
}

void
ectl_find_plan_release(struct ectl_find_plan *p)
{
	strv_free(p->paths);
	strv_free(p->dirs);
	strv_free(p->units);
	memset(p, 0, sizeof(*p));
}

bool
ectl_find_name_matches(const char *name, const char *run_id)
{
	size_t n = strlen(name);
	_cleanup_free_ char *stem = NULL;
	size_t s;

	if (n <= strlen(".sock") || strcmp(name + n - 5, ".sock") != 0 || name[0] == '.') {
		return false;
	}
	if (!run_id) {
		return true;
	}
	stem = run_stem(run_id);
	s = strlen(stem);
	n -= 5;
	if (strncmp(name, stem, s) != 0) {
		return false;
	}
	if (n == s) {
		return true;
	}
	/* "<stem>.<pid>.sock" */
	if (name[s] != '.' || n == s + 1) {
		return false;
	}
	for (size_t i = s + 1; i < n; i++) {
		if (name[i] < '0' || name[i] > '9') {
			return false;
		}
	}
	return true;
}

static bool
is_socket(const char *path)
{
	struct stat st;

	return lstat(path, &st) == 0 && S_ISSOCK(st.st_mode);
}

static int
cmp_names(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* The entries of dir, sorted ("." and ".." left out). */
static char **
list_dir(const char *dir)
{
	DIR *d = opendir(dir);
	char **names = NULL;
	struct dirent *e;

	if (!d) {
		return NULL;
	}
	while ((e = readdir(d))) {
		if (strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0) {
			strv_push(&names, e->d_name);
		}
	}
	closedir(d);
	if (names) {
		qsort(names, strv_length(names), sizeof(*names), cmp_names);
	}
	return names;
}

static void
scan_dir(const char *dir, const char *run_id, bool units, char ***ret)
{
	char **names = list_dir(dir);
	_cleanup_free_ char *stem = run_id ? run_stem(run_id) : NULL;

	for (char **n = names; n && *n; n++) {
		char *p;

		if (units && (!stem || strcmp(*n, stem) == 0)) {
			p = xasprintf("%s/%s/elasticd.sock", dir, *n);
		} else if (!units && ectl_find_name_matches(*n, run_id)) {
			p = xasprintf("%s/%s", dir, *n);
		} else {
			continue;
		}
		if (is_socket(p)) {
			push_unique(ret, p);
		} else {
			free(p);
		}
	}
	strv_free(names);
}

int
ectl_find_scan(const struct ectl_find_plan *p, const char *run_id, char ***ret)
{
	char **found = NULL;

	for (char **s = p->paths; s && *s; s++) {
		if (is_socket(*s)) {
			push_unique(&found, xstrdup(*s));
		}
	}
	for (char **d = p->dirs; d && *d; d++) {
		scan_dir(*d, run_id, false, &found);
	}
	for (char **d = p->units; d && *d; d++) {
		scan_dir(*d, run_id, true, &found);
	}
	*ret = found;
	return (int)strv_length(found);
}

char *
ectl_find_describe(const struct ectl_find_plan *p, const char *run_id)
{
	_cleanup_free_ char *stem = run_id ? run_stem(run_id) : NULL;
	char *out = xstrdup("");

	for (char **s = p->paths; s && *s; s++) {
		char *o = xasprintf("%s  %s\n", out, *s);

		free(out);
		out = o;
	}
	for (char **d = p->dirs; d && *d; d++) {
		char *o = stem ? xasprintf("%s  %s/%s.<pid>.sock\n", out, *d, stem)
			       : xasprintf("%s  %s/*.sock\n", out, *d);

		free(out);
		out = o;
	}
	for (char **d = p->units; d && *d && !stem; d++) {
		char *o = xasprintf("%s  %s/*/elasticd.sock\n", out, *d);

		free(out);
		out = o;
	}
	return out;
}
