/* agent.h — the elastic agent of one node: torchrun's
 * SimpleElasticAgent._invoke_run made event-driven. Rendezvous, start the
 * local worker group, react to its outcome (restart while restarts remain,
 * else report the root cause), and stop everything on a handled signal.
 * Child exits and signals both arrive through one signalfd; there is no
 * monitor poll. */
#pragma once

#include <stdint.h>

#include "agent_decide.h" /* AGENT_EXIT_* */

struct config;
struct ctl_agent_stats;
struct ctl_worker_view;
struct event_base;
struct events;
struct json_t;
struct agent;

/* The event loop for an agent: while callbacks of the default priority
 * (output, control clients) are ready, the loop looks again for timers and
 * for supervision events (the signalfd, the hang rules' timer) once
 * AGENT_DISPATCH_SLICE_USEC microseconds went to them (libevent's
 * event_config_set_max_dispatch_interval), so that busy output cannot delay
 * them by more than about one callback. Returns NULL when libevent cannot
 * make one. Free it with event_base_free. */
#define AGENT_DISPATCH_SLICE_USEC 1000
struct event_base *agent_base_new(void);

/* Build the agent: block and route the handled signals (cfg->signals minus
 * those ignored at start, plus SIGCHLD) to a signalfd, become a child
 * subreaper, start the sentinel, resolve --nproc-per-node, create the run log
 * directory and the rendezvous. envp is the environment the workers inherit
 * (copied). Returns NULL with *ret_exit set to the exit status (2 for a bad
 * setting, 1 for a system error) and *reterr a malloc'd message. */
struct agent *agent_new(struct event_base *base, const struct config *cfg, char *const *envp,
			int *ret_exit, char **reterr);

/* Where local rank n's worker server socket goes ("<dir>/rank<n>.sock",
 * TORCH_WORKER_SERVER_SOCKET), from the next group on; NULL: none. Borrowed:
 * dir must outlive agent_run (it is the control plane's, ctl_worker_dir). */
void agent_set_worker_server_dir(struct agent *a, const char *dir);

/* The control socket's path, exported to the workers and the health checks
 * as ELASTICD_CONTROL_SOCKET from the next group on; NULL: none. Borrowed:
 * must outlive agent_run (ctl_socket_path). */
void agent_set_control_socket(struct agent *a, const char *path);

/* Run until the job ends; returns elasticd's exit status. The control plane,
 * if any, is started before (main.c) so that it listens before READY=1. */
int agent_run(struct agent *a);

/* The agent's event recorder (events.h), never NULL: for the control plane
 * to read the ring (events_ring_get) and subscribe. Borrowed; it lives as long
 * as the agent. */
struct events *agent_events(struct agent *a);

/* Free everything; accepts NULL. The handled signals stay blocked (the
 * process is about to exit with the status agent_run chose). */
void agent_free(struct agent *a);

/* ---- for the control plane (ctl.h) ----------------------------------------
 * A read API and a few actions that take the agent's own paths, in the shapes
 * of struct ctl_agent_ops (main.c wires them). Call them from the loop only
 * (the agent is single-threaded). */

/* The agent's state as a new JSON object (the caller owns the reference):
 * run_id, node, hostname, pid, version, role, rdzv_backend, node_state
 * (torch's NodeState of this node), round, group_rank, group_world_size,
 * world_size, local_world_size, master_addr, master_port (null before the
 * first round), worker_state (torch's WorkerState of the group),
 * restart_count, max_restarts, remaining_restarts, uptime_s, run_dir and
 * workers[]: local_rank, global_rank, role_rank, pid, state, exitcode,
 * exit_status, signal, start_time, exit_time (epoch seconds), gpu, cpus,
 * mems, numa_nodes, stdout_log, stderr_log, error_file, worker_server_socket.
 * elasticd-ctl(7) documents each field. */
struct json_t *agent_status_json(struct agent *a);

/* The nodes handler's JSON object, a new reference: run_id and
 * rdzv_snapshot_json() of this node's copy of the rendezvous state (no store
 * read). NULL with *reterr (malloc'd) for a backend without shared state
 * (static). */
struct json_t *agent_nodes_json(struct agent *a, char **reterr);

/* The counters, states and labels the metrics handler shows (ctl.h), into
 * *ret (every field; the strings are borrowed from the agent). */
void agent_get_stats(struct agent *a, struct ctl_agent_stats *ret);

/* The number of local workers (the resolved --nproc-per-node). */
int agent_local_world_size(const struct agent *a);

/* The current worker group's worker of local_rank into *ret (its strings
 * borrowed until the group is replaced, a later loop turn). Returns 0,
 * -ENOENT before the first group, or -ERANGE for a rank out of range; *ret is
 * untouched on error. */
int agent_worker_view(struct agent *a, int local_rank, struct ctl_worker_view *ret);

/* Re-form the worker group now: stop it (SIGTERM, escalation as always) and
 * rejoin the rendezvous without spending a restart, as when nodes wait to join
 * (torchrun's num_nodes_waiting() > 0). Returns 0, or -EBUSY with *reterr
 * (malloc'd) when no worker group is running (rendezvous under way, group
 * stopping, agent stopping or finishing). */
int agent_request_restart(struct agent *a, char **reterr);

/* Drain this node out of the job (elasticd-ctl(7), drain): send sig (<= 0:
 * the first of --forward-signals, else SIGUSR1) to every worker's process
 * group, wait up to timeout_s seconds (< 0: --term-timeout) for the workers to
 * exit, stop those still running (SIGTERM, SIGKILL after --shutdown-timeout),
 * leave the rendezvous open so that the other nodes re-form without spending
 * a restart, and exit: 0 when every worker exited 0, else 1. In rendezvous or
 * a restart backoff it leaves at once and exits 0. Returns 0, or -EALREADY
 * (draining) / -EBUSY (stopping, finishing, the rendezvous failed) with
 * *reterr (malloc'd). */
int agent_request_drain(struct agent *a, int sig, int timeout_s, char **reterr);

/* Exclude this node from the job (elasticd-ctl(7), exclude; an operator or
 * one of its own workers through ELASTICD_CONTROL_SOCKET says it is bad):
 * record reason (copied; "" for none), stop a running group (SIGTERM, SIGKILL
 * after --shutdown-timeout), leave the rendezvous open so that the other
 * nodes re-form without spending a restart, and exit 6
 * (AGENT_EXIT_NODE_EXCLUDED). With no group running (health check,
 * rendezvous, a restart backoff) it leaves at once. Returns 0, or -EALREADY
 * (excluded already) / -EBUSY (stopping, draining, finishing) with *reterr
 * (malloc'd). */
int agent_request_exclude(struct agent *a, const char *reason, char **reterr);

/* End a quarantine now (elasticd-ctl(7), readmit; --quarantine). node
 * NULL/"" or this node's name (--local-addr, else host_fqdn): this node's,
 * at once: the next round with a new rendezvous handle. Another node's name
 * (its --local-addr or FQDN, as the nodes verb lists it): its entry in the
 * shared rendezvous state ends (rdzv_readmit, a compare-and-set; retried
 * for up to 10 s while the rendezvous is busy), and that node's agent,
 * which re-reads the state every 2 s of its cooldown, rejoins. Returns 0
 * (this node's: done), 1 (another node's: a fresh read of the state, then
 * the write; reply(call, status, msg) says how it ended, once, from the
 * loop: 200, 404 unknown node, 409 not quarantined, 503 the rendezvous
 * stayed busy or unreachable, 500 the write failed; a log line and an
 * elasticd.node.readmitted event too), or with *reterr (malloc'd) -ENOENT (no such node in the
 * shared state), -EBUSY (not quarantined, still leaving, or a readmit under way) or -EOPNOTSUPP (no
 * shared state: the static backend). */
int agent_request_readmit(struct agent *a, const char *node,
			  void (*reply)(void *call, int status, const char *msg), void *call,
			  char **reterr);

/* The caller of a pending readmit of another node went away: its reply is
 * not called (the readmission itself goes on). */
void agent_readmit_cancel(struct agent *a);

/* Stop the agent exactly as if the handled signal sig (SIGTERM) had arrived:
 * the workers get sig, SIGKILL after the shutdown timeout, and elasticd exits
 * 128 + sig. A second request while stopping kills the workers at once, as a
 * second signal does. */
void agent_request_stop(struct agent *a, int sig);

/* Send sig to local_rank's worker, its whole process group (every worker
 * when local_rank is -1). Returns 0, or -ESRCH (not running) / -ENOENT (no
 * worker group yet) / -errno of kill(2) with *reterr (malloc'd). */
int agent_signal_worker(struct agent *a, int local_rank, int sig, char **reterr);
