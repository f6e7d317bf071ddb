/* ctl_path.h — where a control socket lives: the default path rules shared
 * by elasticd (which creates the socket) and elasticctl (which looks for it).
 * Pure. */
#pragma once

#include <sys/types.h>

/* The default control socket path for a run, from the environment env
 * (environ-style), the run id and the effective uid:
 * $RUNTIME_DIRECTORY/elasticd.sock under systemd (its first entry), else
 * /run/elasticd/<run_id>.sock for root, else
 * $XDG_RUNTIME_DIR/elasticd/<run_id>.sock, else
 * /tmp/elasticd-<uid>/<run_id>.sock. Bytes of run_id outside [A-Za-z0-9._-]
 * become '_' (an empty run id is "none"). Pure; returns a malloc'd path. */
char *ctl_default_path(char *const *env, const char *run_id, uid_t euid);

/* The directory of the workers' own sockets for a control socket path: the
 * path without a ".sock" suffix, plus ".workers" ("/run/elasticd/job1.sock"
 * → "/run/elasticd/job1.workers"). Pure; returns a malloc'd path. */
char *ctl_worker_dir_for(const char *socket_path);

/* Whether a control socket may be created in directory dir, whose mode
 * (st_mode) and owner are given: not writable by its group or by others
 * (they could replace the socket), unless it is sticky and owned by root,
 * as /tmp. Returns 0, or -EPERM with *reterr (malloc'd) naming dir, who may
 * write it and how to fix it. Pure. */
int ctl_dir_check(const char *dir, mode_t mode, uid_t owner, char **reterr);
