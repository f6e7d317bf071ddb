/* health.h — the node's health gate, without the event loop: the checks an
 * agent runs before it joins a rendezvous round (the --health-* options),
 * the built-in checks themselves, and how a check's end reads (its status,
 * its output's last lines, the wait before the gate is tried again).
 *
 * A command check is any program (exit 0: healthy). A built-in check reads
 * files only, under a root directory that tests point at a fixture tree
 * (as --topology-xml does for hwloc); the agent runs each check, commands
 * and built-ins alike, in a child process with a deadline (agent_health.c),
 * so nothing here may block its loop. Only the agent logs. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* What a check looks at. */
enum health_kind {
	HEALTH_COMMAND,    /* --health-check CMD: /bin/sh -c CMD, exit 0 healthy */
	HEALTH_GPUS,       /* --health-gpus N: at least N GPUs (as --nproc-per-node gpu counts) */
	HEALTH_NICS,       /* --health-nics LIST: InfiniBand ports ACTIVE, netdevs up */
	HEALTH_WRITABLE,   /* --health-writable PATH: a file can be made there */
	HEALTH_FREE_SPACE, /* --health-free-space PATH:SIZE: SIZE bytes free for us there */
	HEALTH_GPU_MEMORY, /* --gpu-memory-wait: the last attempt's GPU memory released (nvml.h) */
};

/* One check. Strings owned by the check (health_checks_free). */
struct health_check {
	enum health_kind kind;
	char *name;         /* what events and status call it: "command:CMD", "gpus", ... */
	char *arg;          /* the command, the path; NULL for gpus and nics */
	char **nics;        /* HEALTH_NICS: "ib" (every InfiniBand port) or netdev names */
	uint64_t min_bytes; /* HEALTH_FREE_SPACE */
	int gpus;           /* HEALTH_GPUS */
};

/* Keep this many lines, at most this many bytes, of a check's output. */
#define HEALTH_TAIL_LINES 10
#define HEALTH_TAIL_BYTES 4096

/* The longest wait between two tries of the gate: --health-retry-interval
 * times this. */
#define HEALTH_RETRY_MAX_FACTOR 16

/* "10G", "512M", "1.5T", "4096": a size in bytes, suffixes K, M, G, T, P
 * (powers of 1024, an optional "B" or "iB" after them). Returns 0 with *ret,
 * or -EINVAL (empty, not a number, negative, past 2^64). Pure. */
int health_parse_size(const char *s, uint64_t *ret);

/* A --health-free-space value "PATH:SIZE" (split at the last ':'; PATH
 * absolute). Returns 0 with *ret_path (malloc'd) and *ret_bytes, or -EINVAL
 * with *reterr (malloc'd, the reason). Pure. */
int health_parse_free_space(const char *value, char **ret_path, uint64_t *ret_bytes, char **reterr);

/* A --health-nics value: "ib" and netdev names (no '/', at most 15 bytes, as
 * the kernel's IFNAMSIZ), separated by commas, no repeats. Returns 0 with
 * *ret (a new strv), or -EINVAL with *reterr (malloc'd). Pure. */
int health_parse_nics(const char *value, char ***ret, char **reterr);

/* Append a check of kind to *v (*n entries; both grown), taking the strings
 * given (arg, nics: owned by the list from now on; either may be NULL). The
 * name is made from kind and arg. */
void health_checks_add(struct health_check **v, size_t *n, enum health_kind kind, char *arg,
		       char **nics, uint64_t min_bytes, int gpus);

/* Free n checks and the array; accepts NULL. */
void health_checks_free(struct health_check *v, size_t n);

/* ---- the built-in checks (I/O; run in a child) --------------------------- */

/* HEALTH_NICS under root ("/" on a real node): "ib" needs at least one
 * <root>/sys/class/infiniband/<dev>/ports/<n>/state, and every one of them
 * ACTIVE ("4: ACTIVE"); a name needs <root>/sys/class/net/<name>/operstate
 * "up". Returns true when healthy; *ret_msg (malloc'd) says what was found
 * either way. */
bool health_check_nics(const char *root, char *const *nics, char **ret_msg);

/* HEALTH_WRITABLE: path is a directory in which a file can be created,
 * written and removed. Returns true when healthy; *ret_msg (malloc'd). */
bool health_check_writable(const char *path, char **ret_msg);

/* HEALTH_FREE_SPACE: at least min_bytes are free for an unprivileged user
 * on the file system of path (statvfs f_bavail). Returns true when healthy;
 * *ret_msg (malloc'd). */
bool health_check_free_space(const char *path, uint64_t min_bytes, char **ret_msg);

/* HEALTH_GPUS: count the GPUs as --nproc-per-node gpu does (hwloc; the
 * topology from xml when non-NULL, bus_ids and cvd as
 * numa_topology_select_gpus takes them). Returns true when there are at
 * least min; *ret_msg (malloc'd). */
bool health_check_gpus(const char *xml, const char *bus_ids, const char *cvd, int min,
		       char **ret_msg);

/* ---- reading a check's end (pure) ---------------------------------------- */

/* The last bytes of a check's output. Zero-initialised is empty. */
struct health_tail {
	char buf[HEALTH_TAIL_BYTES];
	size_t len;
	bool cut; /* earlier output was dropped */
};

/* Append p[0..n) to t, keeping the last HEALTH_TAIL_BYTES bytes. */
void health_tail_append(struct health_tail *t, const void *p, size_t n);

/* The last max_lines lines of t (without a trailing newline, non-printable
 * bytes escaped as bytes_printable does); "" when t is empty. Malloc'd. */
char *health_tail_lines(const struct health_tail *t, int max_lines);

/* How a check ended, as its report says it: "exit status 3", "killed by
 * SIGKILL", "timed out after 5 s", "cannot run: No such file or directory".
 * status: a wait status; timed_out: its deadline (deadline_s) passed and the
 * agent killed it; spawn_err: > 0 the errno of a failed start. Malloc'd. */
char *health_describe_end(int status, bool timed_out, double deadline_s, int spawn_err);

/* Whether a check that ended so (as health_describe_end's arguments) is
 * healthy: it exited 0 within its deadline. */
bool health_end_ok(int status, bool timed_out, int spawn_err);

/* The wait before try number failures + 1 of the gate, after failures
 * failed tries in a row (>= 1): interval_usec * 2^(failures-1), at most
 * interval_usec * HEALTH_RETRY_MAX_FACTOR. */
uint64_t health_retry_delay(uint64_t interval_usec, int failures);
