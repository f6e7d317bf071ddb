/* ectl_find.h — how elasticctl finds an agent's control socket without -s:
 * the places elasticd's own default rules (ctl_default_path) put sockets,
 * for a run id or for any, then the sockets that accept a connection. The
 * plan and the name matching are pure; ectl_find_scan reads directories. */
#pragma once

#include <stdbool.h>
#include <sys/types.h>

/* Where to look. Every vector is NULL-terminated and owned. */
struct ectl_find_plan {
	char **paths; /* exact socket paths, most likely first */
	char **dirs;  /* directories holding "<run_id>.sock" and "<run_id>.<pid>.sock" */
	char **units; /* directories whose subdirectories hold systemd units' "elasticd.sock" */
};

/* The plan for run_id (NULL: any run) from the environment env (environ-
 * style) and the effective uid, by the rules of ctl_default_path: under
 * systemd ($RUNTIME_DIRECTORY) its socket; root's /run/elasticd (where
 * elasticd@.service instances have their own directories, RuntimeDirectory=
 * elasticd/%i); and, for other users, $XDG_RUNTIME_DIR/elasticd and
 * /tmp/elasticd-<uid>. With run_id the exact default paths come first.
 * Pure. */
void ectl_find_plan(char *const *env, const char *run_id, uid_t euid, struct ectl_find_plan *ret);

/* Free the vectors of a plan; accepts a zeroed one. */
void ectl_find_plan_release(struct ectl_find_plan *p);

/* Whether a file name in a plan's dirs is the socket of run_id ("job1.sock",
 * or "job1.4242.sock" for a second agent of the run on the host), or, for
 * run_id NULL, of any run. run_id is compared as elasticd names the file
 * (bytes outside [A-Za-z0-9._-] as '_'). Pure. */
bool ectl_find_name_matches(const char *name, const char *run_id);

/* Every socket file the plan names or finds (in plan order, no duplicates,
 * only files that are sockets) into *ret (NULL-terminated, owned). For a
 * unit directory "<unit>/elasticd.sock" counts only when run_id is NULL or
 * the unit's name matches it. Returns the count. */
int ectl_find_scan(const struct ectl_find_plan *p, const char *run_id, char ***ret);

/* The plan as text for "no agent found" messages: one path or
 * "<dir>/<pattern>" per line, each indented by two spaces. Malloc'd. */
char *ectl_find_describe(const struct ectl_find_plan *p, const char *run_id);
