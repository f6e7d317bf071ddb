/* agent_hang.h — the hang rules (hang.h) applied to one worker group: feeds
 * the core from the teed pipes (-t) or from the log files' growth (-r, a
 * cheap poll), arms one timer for the earliest deadline, and tells the agent
 * (agent_on_hang) when a rule fires. Part of the agent layer: it logs. */
#pragma once

#include <stdbool.h>
#include <stdint.h>

struct agent;
struct agent_hang;
struct hang_fired;
struct json_t;

/* The rules from a->cfg as hang.h takes them. */
struct hang_rules agent_hang_rules(const struct agent *a);

/* Watch a->group, just started. Returns NULL when no rule is configured
 * (then nothing is armed or read) or nothing can be watched. */
struct agent_hang *agent_hang_new(struct agent *a);

/* Stop watching (the group stopped) and free; accepts NULL. Never from
 * inside the watch's own callbacks. */
void agent_hang_free(struct agent_hang *h);

/* Stop a->group, which runs (agent_enter_stopping_group): at once with
 * SIGTERM, or, when a hang rule stopped it (AGENT_REASON_HANG), after its
 * stacks are fetched (agent_stacks.h), within STACKS_DEADLINE_S. */
void agent_hang_stop(struct agent *a);

/* The status's "hang" object for local rank lr: last output age, the
 * cadence's state and the time left; a new reference, NULL without a
 * watch. */
struct json_t *agent_hang_rank_json(const struct agent_hang *h, int lr, uint64_t now);
