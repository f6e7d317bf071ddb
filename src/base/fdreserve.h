/* fdreserve.h — the file descriptors supervision keeps for itself.
 *
 * Peers that connect (control-socket clients, TCPStore clients) must not take
 * the descriptors that starting workers (pipes, log files, pidfds) and the
 * rendezvous need: the last quarter of RLIMIT_NOFILE is kept for those. A
 * listener guarded by a fdreserve pauses for FDRESERVE_PAUSE_S when the
 * lowest free descriptor is in the reserve, or when accept(2) itself fails
 * (EMFILE, ENFILE, ENOMEM: the listening socket stays readable, and without
 * a pause the loop would spin on it), then listens again. One mechanism for
 * every listener of the agent; it does not log: the owner is told of pauses
 * at a bounded rate and says so. */
#pragma once

#include <stdbool.h>
#include <stdint.h>

struct event_base;
struct evconnlistener;
struct fdreserve;

/* How long a paused listener stays paused, seconds. */
#define FDRESERVE_PAUSE_S 1
/* At most one pause is told per this many seconds; the others are counted. */
#define FDRESERVE_TELL_S 10

/* A pause began: why (valid during the call), and how many pauses were not
 * told since the last told one. */
typedef void (*fdreserve_pause_fn)(const char *why, uint64_t untold, void *arg);

/* Guard listener l (borrowed: free the fdreserve first, or with it). The
 * reserve is sized from RLIMIT_NOFILE's soft limit now. cb (may be NULL) is
 * told of pauses. Returns the guard (aborts on out-of-memory). */
struct fdreserve *fdreserve_new(struct event_base *base, struct evconnlistener *l,
				fdreserve_pause_fn cb, void *arg);

/* After an accept: whether fd (the descriptor just accepted; -1: not known
 * yet) is below the reserve and may be kept. When fd, or the next descriptor
 * an accept would get, is in the reserve, the listener pauses. The caller
 * closes an fd for which this returns false. */
bool fdreserve_admit(struct fdreserve *r, int fd);

/* accept(2) failed with errno err (not a client that went away): pause. */
void fdreserve_accept_failed(struct fdreserve *r, int err);

/* The first descriptor of the reserve (RLIMIT_NOFILE minus its quarter),
 * and the limit it was computed from. */
long fdreserve_floor(const struct fdreserve *r);
long fdreserve_limit(const struct fdreserve *r);

/* Pauses so far. */
uint64_t fdreserve_pauses(const struct fdreserve *r);

/* Whether peers press on the reserve now: some guarded listener of this
 * process paused within the last FDRESERVE_TELL_S seconds (at now, a
 * now_usec()). For a caller that gets EMFILE and must tell a shortage that
 * peers cause, and that passes, from one of its own, that does not. */
bool fdreserve_peers_pressing(uint64_t now);

/* Free (the listener is left as it is). Accepts NULL. */
void fdreserve_free(struct fdreserve *r);
