/* numa_crowd.h — workers a NUMA plan crowds onto too few CPUs (under
 * taskset or a small cpuset, several ranks can end up bound to one CPU).
 * Pure. */
#pragma once

struct numa_plan;

/* Ranks bound to the very same CPU set, more ranks than it has CPUs: one
 * phrase per such set, joined with "; ", e.g. "local_ranks 0 and 1 are
 * both bound to CPU 0 alone (2 workers on 1 CPU)" or "local_ranks 0, 1 and
 * 2 are all bound to CPUs 0-1 (3 workers on 2 CPUs)". Unbound ranks are not
 * counted. Returns a malloc'd string, or NULL when no CPU is crowded. */
char *numa_plan_crowding(const struct numa_plan *p);
