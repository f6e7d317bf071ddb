/* agent_health.h — the health gate's shell (agent_health.c): the checks of
 * --health-* (health.h) run before every rendezvous join, never blocking the
 * loop. The agent's own files only. */
#pragma once

#include <stdbool.h>
#include <sys/types.h>

#include "agent_decide.h"

struct agent;
struct agent_health;
struct json_t;

/* Set up a->health when checks or --gpu-memory-wait are configured (else
 * it stays NULL). */
void agent_health_setup(struct agent *a);

/* Before a join for reason (why): with checks configured (or, before a
 * respawn, --gpu-memory-wait: first the wait for the last attempt's GPU
 * memory, nvml.h, which only warns), enter phase HEALTH_CHECK and start
 * them, and return true: the gate then joins
 * (agent_join_round) once every check passed, or records the failure
 * (elasticd.node.unhealthy, STATUS=, the status's "health") and tries again
 * after --health-retry-interval (doubling) while --health-retries last, or
 * leaves the rendezvous and exits AGENT_EXIT_NODE_EXCLUDED. Without checks
 * returns false and does nothing. */
bool agent_health_gate(struct agent *a, enum agent_reason reason, const char *why);

/* The agent leaves phase HEALTH_CHECK for another reason (a signal, a
 * drain, an exit): kill the checks still running, stop the retry timer.
 * Their exits are still reaped (agent_health_reaped). */
void agent_health_cancel(struct agent *a);

/* Child pid exited with wait status status: when it is one of the gate's
 * checks, take its end (and its last output) and return true; else false. */
bool agent_health_reaped(struct agent *a, pid_t pid, int status);

/* The status handler's "health": null without checks, else {"state":
 * "not-checked"|"checking"|"healthy"|"unhealthy"|"waiting-gpu-memory",
 * "checks": [names],
 * "failures": failed gates in a row, "last_failure": {"check", "result",
 * "output"} or null, "retry_in_s": seconds or null}. A new reference. */
struct json_t *agent_health_status(const struct agent *a);

/* Free (killing checks still running); accepts NULL. */
void agent_health_free(struct agent_health *h);
