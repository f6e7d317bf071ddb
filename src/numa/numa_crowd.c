/* numa_crowd.c — workers a NUMA plan crowds onto too few CPUs. */
#include "numa_crowd.h"

#include <sched.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "numa.h"
#include "util.h"

/* Is rank i bound, and to the same CPUs as rank j? */
static bool
same_cpus(const struct numa_binding *i, const struct numa_binding *j)
{
	return i->cpus && i->cpu_mask && j->cpus && j->cpu_mask && strcmp(i->cpus, j->cpus) == 0;
}

/* "0 and 1" / "0, 1 and 2" for the ranks in group (n >= 2). */
static char *
rank_list(const size_t *group, size_t n)
{
	char *s = xasprintf("%zu", group[0]);

	for (size_t i = 1; i < n; i++) {
		char *t = xasprintf("%s%s%zu", s, i + 1 == n ? " and " : ", ", group[i]);

		free(s);
		s = t;
	}
	return s;
}

/* The phrase for ranks group[0..n) bound to b's CPUs. */
static char *
crowd_phrase(const struct numa_binding *b, const size_t *group, size_t n, int ncpus)
{
	_cleanup_free_ char *ranks = rank_list(group, n);

	if (ncpus == 1) {
		return xasprintf("local_ranks %s are %s bound to CPU %s alone (%zu workers on 1 "
				 "CPU)",
				 ranks, n == 2 ? "both" : "all", b->cpus, n);
	}
	return xasprintf("local_ranks %s are %s bound to CPUs %s (%zu workers on %d CPUs)", ranks,
			 n == 2 ? "both" : "all", b->cpus, n, ncpus);
}

char *
numa_plan_crowding(const struct numa_plan *p)
{
	size_t *group = xcalloc(p->n + 1, sizeof(*group));
	char *out = NULL;

	for (size_t i = 0; i < p->n; i++) {
		const struct numa_binding *b = &p->ranks[i];
		size_t n = 0;
		bool seen = false;
		int ncpus;

		for (size_t j = 0; j < i && !seen; j++) {
			seen = same_cpus(b, &p->ranks[j]);
		}
		if (seen || !b->cpus || !b->cpu_mask) {
			continue; /* counted with an earlier rank, or unbound */
		}
		for (size_t j = i; j < p->n; j++) {
			if (same_cpus(b, &p->ranks[j])) {
				group[n++] = j;
			}
		}
		ncpus = CPU_COUNT_S(b->cpu_mask_size, b->cpu_mask);
		if (n >= 2 && n > (size_t)ncpus) {
			_cleanup_free_ char *phrase = crowd_phrase(b, group, n, ncpus);
			char *t = out ? xasprintf("%s; %s", out, phrase) : xstrdup(phrase);

			free(out);
			out = t;
		}
	}
	free(group);
	return out;
}
