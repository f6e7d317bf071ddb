#include "ctl_path.h"

#include <errno.h>
#include <stdbool.h>
#include <string.h>
#include <sys/stat.h>

#include "util.h"
#include "wenv.h"

static char *
sanitize_run_id(const char *run_id)
{
	char *s = xstrdup(run_id && *run_id ? run_id : "none");

	for (char *p = s; *p; p++) {
		bool ok = (*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') ||
			  (*p >= '0' && *p <= '9') || *p == '.' || *p == '_' || *p == '-';

		if (!ok) {
			*p = '_';
		}
	}
	return s;
}

char *
ctl_default_path(char *const *env, const char *run_id, uid_t euid)
{
	const char *rd = wenv_get(env, "RUNTIME_DIRECTORY");
	const char *xdg = wenv_get(env, "XDG_RUNTIME_DIR");
	_cleanup_free_ char *id = sanitize_run_id(run_id);

	if (rd && rd[0] == '/') {
		return xasprintf("%.*s/elasticd.sock", (int)strcspn(rd, ":"), rd);
	}
	if (euid == 0) {
		return xasprintf("/run/elasticd/%s.sock", id);
	}
	if (xdg && xdg[0] == '/') {
		return xasprintf("%s/elasticd/%s.sock", xdg, id);
	}
	return xasprintf("/tmp/elasticd-%u/%s.sock", (unsigned)euid, id);
}

char *
ctl_worker_dir_for(const char *socket_path)
{
	size_t n = strlen(socket_path);

	if (n > 5 && strcmp(socket_path + n - 5, ".sock") == 0) {
		n -= 5;
	}
	return xasprintf("%.*s.workers", (int)n, socket_path);
}

int
ctl_dir_check(const char *dir, mode_t mode, uid_t owner, char **reterr)
{
	bool group = mode & S_IWGRP, others = mode & S_IWOTH;

	if ((!group && !others) || ((mode & S_ISVTX) && owner == 0)) {
		return 0;
	}
	*reterr = xasprintf("the directory %s is writable by %s (mode %04o), who could replace "
			    "the socket; use a directory only its owner can write (chmod go-w "
			    "%s), or a sticky one owned by root such as /tmp",
			    dir,
			    group && others ? "its group and others"
			    : group         ? "its group"
					    : "others",
			    (unsigned)(mode & 07777), dir);
	return -EPERM;
}
