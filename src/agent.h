/* agent.h — the elastic agent of one node: torchrun's
 * SimpleElasticAgent._invoke_run made event-driven. Rendezvous, start the
 * local worker group, react to its outcome (restart while restarts remain,
 * else report the root cause), and stop everything on a handled signal.
 * Child exits and signals both arrive through one signalfd; there is no
 * monitor poll. */
#pragma once

struct config;
struct event_base;
struct events;
struct agent;

/* Exit statuses of elasticd (torchrun-compatible 0/1/2; 128+signo when a
 * handled signal stopped the agent, after its workers were stopped). */
#define AGENT_EXIT_SUCCESS 0
#define AGENT_EXIT_FAILURE 1
#define AGENT_EXIT_USAGE 2

/* Build the agent: block and route the handled signals (cfg->signals minus
 * those ignored at start, plus SIGCHLD) to a signalfd, become a child
 * subreaper, start the sentinel, resolve --nproc-per-node, create the run log
 * directory and the rendezvous. envp is the environment the workers inherit
 * (copied). Returns NULL with *ret_exit set to the exit status (2 for a bad
 * setting, 1 for a system error) and *reterr a malloc'd message. */
struct agent *agent_new(struct event_base *base, const struct config *cfg, char *const *envp,
			int *ret_exit, char **reterr);

/* Run until the job ends; returns elasticd's exit status. */
int agent_run(struct agent *a);

/* The agent's event recorder (events.h), never NULL: for the control plane
 * to read the ring (events_ring_get) and subscribe. Borrowed; it lives as long
 * as the agent. */
struct events *agent_events(struct agent *a);

/* Free everything; accepts NULL. The handled signals stay blocked (the
 * process is about to exit with the status agent_run chose). */
void agent_free(struct agent *a);
