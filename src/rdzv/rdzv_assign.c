/* rdzv_assign.c — the coordinator's words to each node's assignment key
 * (rdzv_assign.h); the backends only write them. */
#include "rdzv_assign.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "util.h"

void
rdzv_assign_memo_init(struct rdzv_assign_memo *m)
{
	*m = (struct rdzv_assign_memo){.round = -1};
}

void
rdzv_assign_memo_reset(struct rdzv_assign_memo *m)
{
	strv_free(m->spares_told);
	rdzv_assign_memo_init(m);
}

/* Add node's value (taken), unless node is me. */
static void
say(char ***nodes, char ***vals, const char *me, const char *node, char *value)
{
	if (strcmp(node, me) == 0) {
		free(value);
		return;
	}
	strv_push(nodes, node);
	strv_consume(vals, value);
}

static int
cmp_name(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* "closed" once to each node: a joiner may be in the state's lists already
 * (its request not deleted yet) or have asked twice. Sorted by name. */
static void
say_closed(const struct rdzv_state *st, const struct rdzv_node *joiners, size_t n_joiners,
	   const char *me, char ***nodes, char ***vals)
{
	char **all = NULL;
	size_t n;

	for (size_t i = 0; !st->complete && i < st->n_participants; i++) {
		strv_push(&all, st->participants[i].node.name);
	}
	for (size_t i = 0; i < st->n_wait_list; i++) {
		strv_push(&all, st->wait_list[i].name);
	}
	for (size_t i = 0; i < st->n_redundancy_list; i++) {
		strv_push(&all, st->redundancy_list[i].name);
	}
	for (size_t i = 0; i < n_joiners; i++) {
		strv_push(&all, joiners[i].name);
	}
	n = all ? strv_length(all) : 0;
	if (n > 0) {
		qsort(all, n, sizeof(*all), cmp_name);
	}
	for (size_t i = 0; i < n; i++) {
		if (i == 0 || strcmp(all[i], all[i - 1]) != 0) {
			say(nodes, vals, me, all[i], xstrdup("closed"));
		}
	}
	strv_free(all);
}

static bool
strv_has(char *const *v, const char *s)
{
	for (size_t i = 0; v && v[i]; i++) {
		if (strcmp(v[i], s) == 0) {
			return true;
		}
	}
	return false;
}

static void
say_spares(struct rdzv_assign_memo *m, const struct rdzv_state *st, const char *me, char ***nodes,
	   char ***vals)
{
	char **now = NULL;

	for (size_t i = 0; i < st->n_redundancy_list; i++) {
		const char *name = st->redundancy_list[i].name;

		if (!strv_has(m->spares_told, name)) {
			say(nodes, vals, me, name, xstrdup("spare"));
		}
		strv_push(&now, name);
	}
	strv_free(m->spares_told);
	m->spares_told = now;
}

void
rdzv_assign_plan(struct rdzv_assign_memo *m, const struct rdzv_state *st,
		 const struct rdzv_node *joiners, size_t n_joiners, const char *me,
		 const char *suffix, char ***nodes, char ***vals)
{
	if (st->closed) {
		if (!m->closed_told) {
			m->closed_told = true;
			say_closed(st, joiners, n_joiners, me, nodes, vals);
		}
		return;
	}
	say_spares(m, st, me, nodes, vals);
	if (!st->complete || st->round == m->round) {
		return;
	}
	m->round = st->round;
	for (size_t i = 0; i < st->n_participants; i++) {
		say(nodes, vals, me, st->participants[i].node.name,
		    xasprintf("%" PRId64 " %d %zu %" PRIu64 "%s", st->round,
			      st->participants[i].rank, st->n_participants, st->gen, suffix));
	}
}
