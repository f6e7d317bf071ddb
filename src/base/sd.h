/* sd.h — systemd's service notification protocol, without libsystemd: the
 * READY=1 / STATUS= / STOPPING=1 / WATCHDOG=1 datagrams of sd_notify(3) and
 * the watchdog interval of sd_watchdog_enabled(3).
 *
 * The protocol (sd_notify(3), NOTES): when $NOTIFY_SOCKET is set, send one
 * AF_UNIX SOCK_DGRAM datagram of newline-separated KEY=VALUE lines to it; a
 * leading '@' names the Linux abstract namespace (the '@' becomes a NUL byte,
 * and the address ends with the name: no trailing NUL). systemd learns the
 * sender from the kernel (SCM_CREDENTIALS) and never answers. Names here
 * avoid libsystemd's own (sd_notify, sd_watchdog_enabled, ...). */
#pragma once

#include <stdbool.h>
#include <stdint.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <sys/un.h>

struct event_base;

/* Fill *ret with the socket address addr names: an absolute path, or "@name"
 * for the abstract namespace; *ret_len is the length to pass to sendto(2).
 * Returns 0, -EINVAL when addr is neither form (empty, relative, "@" alone),
 * or -ENAMETOOLONG when it does not fit sun_path. Pure. */
int sd_notify_address(const char *addr, struct sockaddr_un *ret, socklen_t *ret_len);

/* Send state (KEY=VALUE lines separated by "\n", as sd_notify(3)) as one
 * datagram to addr (as sd_notify_address; NULL or "" means no supervisor),
 * from a socket opened and closed here, without waiting (MSG_DONTWAIT: a full
 * queue drops it). Returns 1 when sent, 0 when addr is NULL or "", or -errno
 * (-EINVAL/-ENAMETOOLONG for a bad address, -EAGAIN for a full queue, ...). */
int sd_notify_send(const char *addr, const char *state);

/* The watchdog interval asked of process pid, as sd_watchdog_enabled(3): envp's
 * WATCHDOG_USEC (microseconds, > 0) when its WATCHDOG_PID is absent or equals
 * pid. envp is an environ-style array (NULL: empty). Returns 1 with *ret_usec
 * set, 0 when no watchdog is asked of pid (no WATCHDOG_USEC, or another pid's),
 * or -EINVAL when WATCHDOG_USEC or WATCHDOG_PID is not a positive integer.
 * *ret_usec is untouched unless 1 is returned. Pure. */
int sd_watchdog_usec(char *const *envp, pid_t pid, uint64_t *ret_usec);

/* The agent's link to systemd: the notification socket of $NOTIFY_SOCKET (one
 * socket for the process's life: pings still go out when every other fd is
 * used) and the watchdog timer. Without $NOTIFY_SOCKET every call is a no-op
 * returning 0. */
struct sd_notifier;

/* Read NOTIFY_SOCKET, WATCHDOG_USEC and WATCHDOG_PID from envp (borrowed for
 * the call only) and, when a watchdog is asked of this process and there is a
 * notification socket, send "WATCHDOG=1" every WATCHDOG_USEC/2 microseconds
 * (never more often than every millisecond) from a persistent timer in base.
 * error_cb (may be NULL) is called with arg for every failed send (err -errno,
 * state the datagram, what NULL), from the caller's call or the timer; and at
 * creation for a malformed environment or a socket that cannot be created
 * (state NULL, what says which variable holds what), which disables that
 * part. Never NULL (aborts on OOM). */
struct sd_notifier *sd_notifier_new(struct event_base *base, char *const *envp,
				    void (*error_cb)(int err, const char *state, const char *what,
						     void *arg),
				    void *arg);

/* Stop the timer, close the socket, free; accepts NULL. */
void sd_notifier_free(struct sd_notifier *n);

/* Whether $NOTIFY_SOCKET names a usable socket. false for NULL. */
bool sd_notifier_enabled(const struct sd_notifier *n);

/* The watchdog ping interval in microseconds (WATCHDOG_USEC/2), 0 when no
 * watchdog runs. */
uint64_t sd_notifier_watchdog_interval(const struct sd_notifier *n);

/* "READY=1" with "STATUS=<status>" (status may be NULL) the first time; later
 * calls send the status only. Tell systemd once the service is usable: for
 * elasticd, once its control socket listens, before the first rendezvous.
 * Returns 1 when sent, 0 when there is nothing to send or no supervisor, or
 * -errno. */
int sd_notify_ready(struct sd_notifier *n, const char *status);

/* "STATUS=<text>", text printf-formatted from fmt: one line of progress that
 * systemctl status shows. Control characters (a newline would start a new
 * KEY=VALUE) become spaces and the text is cut at 512 bytes. The same text
 * twice in a row is sent once. Returns as sd_notify_ready. */
int sd_notify_status(struct sd_notifier *n, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

/* "STOPPING=1" with "STATUS=<status>" (may be NULL) the first time; later
 * calls send the status only. The watchdog keeps pinging until
 * sd_notifier_free. Returns as sd_notify_ready. */
int sd_notify_stopping(struct sd_notifier *n, const char *status);
