/* rdzv_assign.c — the coordinator's words to each node's assignment key
 * (rdzv_assign.h); the backends only write them. */
#include "rdzv_assign.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rdzv_dynamic.h"
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

/* ---- delegated exits ------------------------------------------------------ */

void
rdzv_exits_request(int64_t round, char *buf, size_t len)
{
	if (round < 0) {
		snprintf(buf, len, "%s", "");
		return;
	}
	snprintf(buf, len, "x%" PRId64, round);
}

bool
rdzv_exits_still_in(const struct rdzv_state *st, const struct rdzv_node *me, int64_t round)
{
	return round >= 0 && st->round == round && st->complete &&
	       rdzv_state_find_participant(st, me) >= 0;
}

bool
rdzv_exits_note(struct rdzv_exits *e, const struct rdzv_node *n, const char *value, size_t len)
{
	char buf[32];
	long long round = RDZV_EXITS_LEAVE;
	size_t i;

	if (len == strlen(RDZV_EXITS_WITHDRAW) && memcmp(value, RDZV_EXITS_WITHDRAW, len) == 0) {
		/* round stays RDZV_EXITS_LEAVE */
	} else if (len < 2 || len >= sizeof(buf) || value[0] != 'x') {
		return false;
	} else {
		memcpy(buf, value + 1, len - 1);
		buf[len - 1] = '\0';
		if (parse_int(buf, 0, INT64_MAX, &round) < 0) {
			return false;
		}
	}
	for (i = 0; i < e->n && rdzv_node_cmp(&e->nodes[i], n) != 0; i++) {
	}
	if (i == e->n) {
		e->nodes = xrealloc(e->nodes, (i + 1) * sizeof(*e->nodes));
		e->rounds = xrealloc(e->rounds, (i + 1) * sizeof(*e->rounds));
		rdzv_node_copy(&e->nodes[e->n++], n);
	} else if (e->rounds[i] == RDZV_EXITS_LEAVE) {
		e->n_leaves--;
	}
	e->rounds[i] = round;
	e->n_leaves += round == RDZV_EXITS_LEAVE;
	return true;
}

bool
rdzv_exits_forget(struct rdzv_exits *e, const struct rdzv_node *n)
{
	for (size_t i = 0; i < e->n; i++) {
		if (rdzv_node_cmp(&e->nodes[i], n) == 0) {
			e->n_leaves -= e->rounds[i] == RDZV_EXITS_LEAVE;
			rdzv_node_release(&e->nodes[i]);
			memmove(e->nodes + i, e->nodes + i + 1, (e->n - i - 1) * sizeof(*e->nodes));
			memmove(e->rounds + i, e->rounds + i + 1,
				(e->n - i - 1) * sizeof(*e->rounds));
			e->n--;
			return true;
		}
	}
	return false;
}

/* Whether exit i is still due on st: then its node's exit (or leave) op
 * action (no deadline: it asked now) into *ret, and its context into
 * *ret_ctx. */
static bool
exit_due(const struct rdzv_exits *e, const struct rdzv_state *st, size_t i,
	 const struct rdzv_ctx *ctx, enum rdzv_action *ret, struct rdzv_ctx *ret_ctx)
{
	bool leave = e->rounds[i] == RDZV_EXITS_LEAVE;

	*ret_ctx = *ctx;
	if (!leave && st->round != e->rounds[i]) {
		return false;
	}
	ret_ctx->node = &e->nodes[i];
	ret_ctx->op_deadline = UINT64_MAX;
	/* The node's own op: none of the coordinator's records. */
	ret_ctx->close_record = NULL;
	ret_ctx->quarantine = NULL;
	ret_ctx->readmit = NULL;
	ret_ctx->failure = NULL;
	*ret = rdzv_decide(leave ? RDZV_OP_LEAVE : RDZV_OP_EXIT, st, ret_ctx);
	return rdzv_action_is_mutation(*ret);
}

size_t
rdzv_exits_apply(const struct rdzv_exits *e, struct rdzv_state *st, const struct rdzv_ctx *ctx,
		 bool *notable)
{
	size_t n = 0;

	for (size_t i = 0; i < e->n; i++) {
		struct rdzv_ctx x;
		enum rdzv_action a;

		if (!exit_due(e, st, i, ctx, &a, &x)) {
			continue; /* out already */
		}
		if (rdzv_apply(st, a, &x)) {
			*notable = true;
		}
		n++;
	}
	return n;
}

bool
rdzv_exits_due(const struct rdzv_exits *e, const struct rdzv_state *st, const struct rdzv_node *n,
	       const struct rdzv_ctx *ctx)
{
	struct rdzv_ctx x;
	enum rdzv_action a;

	for (size_t i = 0; i < e->n; i++) {
		if (rdzv_node_cmp(&e->nodes[i], n) == 0) {
			return exit_due(e, st, i, ctx, &a, &x);
		}
	}
	return false;
}

void
rdzv_exits_prune(struct rdzv_exits *e, const struct rdzv_state *st, const struct rdzv_ctx *ctx)
{
	struct rdzv_ctx x;
	enum rdzv_action a;
	size_t k = 0;

	for (size_t i = 0; i < e->n; i++) {
		if (exit_due(e, st, i, ctx, &a, &x)) {
			e->rounds[k] = e->rounds[i];
			e->nodes[k++] = e->nodes[i];
		} else {
			e->n_leaves -= e->rounds[i] == RDZV_EXITS_LEAVE;
			rdzv_node_release(&e->nodes[i]);
		}
	}
	e->n = k;
}

void
rdzv_exits_release(struct rdzv_exits *e)
{
	for (size_t i = 0; i < e->n; i++) {
		rdzv_node_release(&e->nodes[i]);
	}
	free(e->nodes);
	free(e->rounds);
	*e = (struct rdzv_exits){0};
}
