/* rdzv_state.h — the shared state of the dynamic rendezvous (torch's
 * _RendezvousState, reference rendezvous.md §2.1) and its encoding in the
 * store. Pure: no I/O, no clock.
 *
 * Fields are torch 2.x's: round, complete, deadline, closed, participants
 * (node -> rank), wait_list, redundancy_list, last_heartbeats; times are wall
 * clock microseconds since the epoch (torch: UTC datetimes). elasticd adds one
 * field, gen: a counter bumped by every write that a waiting node must react
 * to (see rdzv_dynamic.h); nodes block on the store key "<state key>/gen/<n>"
 * instead of polling.
 *
 * Encoding: ASCII lines, versioned, node lists sorted by node order:
 *   "elasticd-rdzv 1 <round> <gen> <complete> <closed> <deadline|-1>\n"
 *   "p <node> <rank>\n" per participant, "w <node>\n" per waiting node,
 *   "r <node>\n" per redundant node, "h <node> <usec>\n" per heartbeat,
 *   and, in a closed state only, at most one closing record
 *   "c <node> <group rank> <rank> <local rank> <pid> <exitcode> <signal>\n",
 *   then "q <node> <until usec> <count>\n" per quarantined host (elasticd's
 *   --quarantine: the node that quarantined itself, its host being its
 *   descriptor's addr; one entry per host),
 *   then "f <node> <round> <usec>\n" per failure report (elasticd's
 *   --quarantine root cause: the node's workers failed in that round, the
 *   first of them at wall usec; one per node, the latest round's only).
 * torch pickles its state; nodes of torchrun and elasticd cannot share one
 * rendezvous anyway (reference §5.1). */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Bounds on a decoded state (a corrupt or hostile value fails to decode). */
#define RDZV_MAX_NODE_LEN 512
#define RDZV_MAX_NODES (1u << 20)

/* Bound of a rank key (--rdzv-conf rank_key). */
#define RDZV_MAX_KEY_LEN 128

/* A node descriptor (torch's _NodeDesc): "<addr>_<pid>_<local_id>", and with
 * a rank key (elasticd's --rdzv-conf rank_key) "<addr>_<pid>_<local_id>@<key>":
 * the key travels wherever the node's name does (join requests, every list
 * of the state), so whoever completes a round can order ranks by it. The key
 * is not part of the node's identity (rdzv_node_cmp). */
struct rdzv_node {
	char *name;      /* the whole descriptor, owned */
	size_t addr_len; /* bytes of name before "_<pid>_<local_id>" */
	long long pid;
	long long local_id;
	size_t key_len; /* 0: no rank key; else the last key_len bytes of name */
};

struct rdzv_participant {
	struct rdzv_node node;
	int rank; /* 0 while the round gathers; the sorted position once complete */
};

struct rdzv_heartbeat {
	struct rdzv_node node;
	int64_t usec; /* wall clock of the node's last keep-alive */
};

/* Why a node closed the rendezvous: its workers failed for good. Written
 * with the closing, so every other node can say who failed. */
struct rdzv_close_record {
	struct rdzv_node node; /* the node whose workers failed */
	int group_rank;        /* its rank in the round, or -1 */
	int rank;              /* the failed worker's global rank, or -1 */
	int local_rank;        /* the failed worker's local rank, or -1 */
	int pid;               /* the failed worker's pid, or -1 */
	int exitcode;          /* exit status, or -signal (Python's returncode) */
	int signal;            /* the signal that ended it, or 0 */
};

/* Bounds of a decoded closing record's numbers. */
#define RDZV_CLOSE_MAX_RANK (1 << 30)
#define RDZV_CLOSE_MAX_SIGNAL 128

/* A quarantined host (--quarantine): written by its node as it leaves, and
 * honoured at admission: until then no other node of that host joins (the
 * quarantined node itself waits out its cooldown on its own, and may be
 * readmitted early); its next join ends the entry (until becomes now) but
 * keeps it, so that a restarted agent of the host learns its count. */
struct rdzv_quarantine {
	struct rdzv_node node; /* the node that quarantined itself; its addr is the host */
	int64_t until;         /* wall usec: the host may join again from then */
	int count;             /* that node's quarantines so far, >= 1 */
};

/* A failure report (--quarantine's root cause across nodes): node's
 * workers failed in round, the first of them at usec (wall clock). Whoever
 * failed earliest in a round, job-wide, is its root cause. */
struct rdzv_failure {
	struct rdzv_node node;
	int64_t round;
	int64_t usec;
};

/* Bound of a decoded quarantine count. */
#define RDZV_QUARANTINE_MAX_COUNT (1 << 20)

struct rdzv_state {
	int64_t round;
	uint64_t gen;
	bool complete;
	bool closed;
	int64_t deadline; /* wall usec of the last call, or -1 */
	/* Each array sorted by node order, no duplicates. */
	struct rdzv_participant *participants;
	size_t n_participants;
	struct rdzv_node *wait_list;
	size_t n_wait_list;
	struct rdzv_node *redundancy_list;
	size_t n_redundancy_list;
	struct rdzv_heartbeat *heartbeats;
	size_t n_heartbeats;
	/* Set only when closed, and only by the node that closed it because its
	 * workers failed (NULL: the job ended, or an older elasticd closed it). */
	struct rdzv_close_record *closed_by;
	/* Quarantined hosts, sorted by node order, one per addr. */
	struct rdzv_quarantine *quarantine;
	size_t n_quarantine;
	/* Failure reports, sorted by node order, one per node (rdzv_failure.c). */
	struct rdzv_failure *failures;
	size_t n_failures;
};

/* Make a node from its parts. addr must be non-empty and free of whitespace
 * and control bytes. Returns 0 or -EINVAL; *ret owned by the caller
 * (rdzv_node_release). */
int rdzv_node_init(struct rdzv_node *ret, const char *addr, long long pid, long long local_id);

/* As rdzv_node_init, with a rank key (NULL: none) that rdzv_key_ok accepts.
 * Returns 0 or -EINVAL. */
int rdzv_node_init_key(struct rdzv_node *ret, const char *addr, long long pid, long long local_id,
		       const char *key);

/* Parse "<addr>_<pid>_<local_id>[@<key>]" (pid and local_id decimal, >= 0;
 * addr without '@'; key as rdzv_key_ok). Returns 0 or -EINVAL. */
int rdzv_node_parse(struct rdzv_node *ret, const char *s, size_t len);

/* Deep copy. */
void rdzv_node_copy(struct rdzv_node *ret, const struct rdzv_node *n);
void rdzv_node_release(struct rdzv_node *n);

/* torch's _NodeDesc order: addr (bytewise, = code point order of UTF-8), then
 * pid, then local_id. <0, 0, >0. */
int rdzv_node_cmp(const struct rdzv_node *a, const struct rdzv_node *b);

/* A fresh state: round 0, nothing in it, deadline -1. */
void rdzv_state_init(struct rdzv_state *st);
/* Free every member and re-init. */
void rdzv_state_release(struct rdzv_state *st);
/* Deep copy into *ret (overwritten). */
void rdzv_state_copy(struct rdzv_state *ret, const struct rdzv_state *st);

/* Lookups (binary search). Index or -1. */
long rdzv_state_find_participant(const struct rdzv_state *st, const struct rdzv_node *n);
long rdzv_state_find_wait(const struct rdzv_state *st, const struct rdzv_node *n);
long rdzv_state_find_redundant(const struct rdzv_state *st, const struct rdzv_node *n);
long rdzv_state_find_heartbeat(const struct rdzv_state *st, const struct rdzv_node *n);

/* Set operations keeping the arrays sorted. Adding an existing node updates
 * it (rank, usec); removing a missing one does nothing. Each returns whether
 * the state changed. */
bool rdzv_state_add_participant(struct rdzv_state *st, const struct rdzv_node *n, int rank);
bool rdzv_state_remove_participant(struct rdzv_state *st, const struct rdzv_node *n);
bool rdzv_state_add_wait(struct rdzv_state *st, const struct rdzv_node *n);
bool rdzv_state_remove_wait(struct rdzv_state *st, const struct rdzv_node *n);
bool rdzv_state_add_redundant(struct rdzv_state *st, const struct rdzv_node *n);
bool rdzv_state_remove_redundant(struct rdzv_state *st, const struct rdzv_node *n);
bool rdzv_state_set_heartbeat(struct rdzv_state *st, const struct rdzv_node *n, int64_t usec);
bool rdzv_state_remove_heartbeat(struct rdzv_state *st, const struct rdzv_node *n);

/* The quarantine entry of n's host (its addr), or -1. */
long rdzv_state_find_quarantine(const struct rdzv_state *st, const struct rdzv_node *n);
/* Record q (copied), replacing any entry of the same host. Returns whether
 * the state changed. */
bool rdzv_state_set_quarantine(struct rdzv_state *st, const struct rdzv_quarantine *q);
/* Drop the entry of n's host. Returns whether there was one. */
bool rdzv_state_remove_quarantine(struct rdzv_state *st, const struct rdzv_node *n);
/* Whether n may not join at now_wall: its host has an entry written by
 * another agent (another pid: a restarted agent, say) whose until is still
 * ahead. */
bool rdzv_state_quarantined(const struct rdzv_state *st, const struct rdzv_node *n,
			    int64_t now_wall);
/* The entry whose host (its node's addr) or whole descriptor is name (as an
 * operator names a node: --local-addr or the FQDN), or -1. */
long rdzv_state_find_quarantine_host(const struct rdzv_state *st, const char *name);
/* Whether name's entry (rdzv_state_find_quarantine_host) is still in force
 * at now_wall (wall usec). */
bool rdzv_state_host_quarantined(const struct rdzv_state *st, const char *name, int64_t now_wall);
/* The readmit verb: an entry of name in force at now_wall ends now (its
 * until becomes now_wall; node and count stay, so a later quarantine of the
 * host keeps doubling). Returns whether the state changed. */
bool rdzv_state_expire_quarantine(struct rdzv_state *st, const char *name, int64_t now_wall);

/* ---- failure reports (rdzv_failure.c) ---- */

/* Record that n's workers failed in round, the first at usec (wall usec),
 * replacing n's earlier report and dropping every report of an earlier
 * round. Returns whether the state changed. */
bool rdzv_state_report_failure(struct rdzv_state *st, const struct rdzv_node *n, int64_t round,
			       int64_t usec);
/* Whether n's report is exactly (round, usec). */
bool rdzv_state_failure_reported(const struct rdzv_state *st, const struct rdzv_node *n,
				 int64_t round, int64_t usec);
/* Whether me, whose workers failed first at usec in round, is that round's
 * root cause: no other node reported a failure of the round more than
 * tolerance_usec earlier (torch's rule: the earliest failure; ties within
 * the tolerance count for both). *ret_first (may be NULL): the index of the
 * earliest other report of the round, or -1. */
bool rdzv_state_root_cause(const struct rdzv_state *st, const struct rdzv_node *me, int64_t round,
			   int64_t usec, int64_t tolerance_usec, long *ret_first);
/* For rdzv_state.c: free, deep-copy (ret's are overwritten) and decode one
 * "f" line's fields (f[0] the tag; -EBADMSG when malformed or unsorted). */
void rdzv_failures_release(struct rdzv_state *st);
void rdzv_failures_copy(struct rdzv_state *ret, const struct rdzv_state *st);
int rdzv_failure_decode(struct rdzv_state *st, const char **f, size_t *fl, size_t nf);
/* For the state's line decoders: the decimal filling s[0..len) (not
 * NUL-terminated) in [lo, hi], spelled canonically ("-0", "+1", "007" and
 * embedded NULs refused, so that decode and encode agree). 0, or -EINVAL. */
int rdzv_parse_i64(const char *s, size_t len, int64_t lo, int64_t hi, int64_t *ret);

/* ---- summaries (rdzv_summary.c) ----
 * What a node running a round needs of a state (rdzv_round_check_summary)
 * in a few bytes, however many nodes it holds: c10d's gen key
 * "<state key>/gen/<gen>" holds the summary of the state that set it, so
 * that a running node hears of a change without reading the state. */
struct rdzv_summary {
	int64_t round;
	bool complete;
	bool closed;
	size_t n_participants;
	size_t n_wait_list;
};

/* Bytes of the longest encoded summary, NUL included. */
#define RDZV_SUMMARY_MAX 64

/* st's summary. */
struct rdzv_summary rdzv_summary_of(const struct rdzv_state *st);
/* "<round> <complete> <closed> <participants> <waiting>" (flags 0 or 1)
 * into buf (RDZV_SUMMARY_MAX bytes, NUL-terminated). Returns its length. */
size_t rdzv_summary_encode(const struct rdzv_summary *sum, char *buf);
/* Decode buf[0..len) as rdzv_summary_encode writes it (canonical numbers,
 * round >= 0, counts at most RDZV_MAX_NODES). Returns 0, or -EBADMSG for
 * anything else (an empty value included). */
int rdzv_summary_decode(const char *buf, size_t len, struct rdzv_summary *ret);

/* Replace the heartbeats with one per node of the participants, wait list
 * and redundancy list, each stamped usec (for a store where liveness lives
 * elsewhere, as etcd leases: the state is kept without "h" lines). */
void rdzv_state_stamp_members(struct rdzv_state *st, int64_t usec);

/* Set st->closed_by to a copy of rec (NULL clears it). */
void rdzv_state_set_closed_by(struct rdzv_state *st, const struct rdzv_close_record *rec);

/* "node N (group rank G): local rank L (rank R) exited with code C" (or
 * "was killed by signal S (SIGNAME)"); -1 ranks are left out. malloc'd. */
char *rdzv_close_record_describe(const struct rdzv_close_record *rec);

/* Encode into a malloc'd buffer (not NUL-terminated; *ret_len bytes). */
char *rdzv_state_encode(const struct rdzv_state *st, size_t *ret_len);

/* Decode buf[0..len) into *ret (overwritten; release with
 * rdzv_state_release). Returns 0, or -EBADMSG for anything malformed:
 * unknown version, bad numbers, unsorted or duplicate nodes, names that are
 * not node descriptors, a node count over RDZV_MAX_NODES (torch raises
 * RendezvousStateError for a state it cannot read). */
int rdzv_state_decode(const char *buf, size_t len, struct rdzv_state *ret);
