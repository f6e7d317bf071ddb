/* rdzv_failure.c — the failure reports of the shared state ("f" lines,
 * rdzv_state.h): which node's workers failed first in a round, the root
 * cause job-wide (--quarantine counts only those). Pure: no I/O, no clock. */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "rdzv_state.h"
#include "util.h"

void
rdzv_failures_release(struct rdzv_state *st)
{
	for (size_t i = 0; i < st->n_failures; i++) {
		rdzv_node_release(&st->failures[i].node);
	}
	free(st->failures);
	st->failures = NULL;
	st->n_failures = 0;
}

void
rdzv_failures_copy(struct rdzv_state *ret, const struct rdzv_state *st)
{
	ret->n_failures = st->n_failures;
	ret->failures = st->n_failures ? xcalloc(st->n_failures, sizeof(*st->failures)) : NULL;
	for (size_t i = 0; i < st->n_failures; i++) {
		ret->failures[i] = st->failures[i];
		rdzv_node_copy(&ret->failures[i].node, &st->failures[i].node);
	}
}

static int
cmp_failure(const void *x, const void *y)
{
	const struct rdzv_failure *a = x, *b = y;

	return rdzv_node_cmp(&a->node, &b->node);
}

bool
rdzv_state_report_failure(struct rdzv_state *st, const struct rdzv_node *n, int64_t round,
			  int64_t usec)
{
	bool changed = false, found = false;
	size_t kept = 0;

	for (size_t i = 0; i < st->n_failures; i++) {
		struct rdzv_failure *f = &st->failures[i];

		if (f->round < round) { /* an older round's: nobody compares with it now */
			rdzv_node_release(&f->node);
			changed = true;
			continue;
		}
		if (rdzv_node_cmp(&f->node, n) == 0) {
			found = true;
			changed = changed || f->round != round || f->usec != usec;
			f->round = round;
			f->usec = usec;
		}
		st->failures[kept++] = *f;
	}
	st->n_failures = kept;
	if (!found) {
		st->failures = xrealloc(st->failures, (kept + 1) * sizeof(*st->failures));
		rdzv_node_copy(&st->failures[kept].node, n);
		st->failures[kept].round = round;
		st->failures[kept].usec = usec;
		st->n_failures++;
		qsort(st->failures, st->n_failures, sizeof(*st->failures), cmp_failure);
		changed = true;
	}
	return changed;
}

bool
rdzv_state_failure_reported(const struct rdzv_state *st, const struct rdzv_node *n, int64_t round,
			    int64_t usec)
{
	for (size_t i = 0; i < st->n_failures; i++) {
		const struct rdzv_failure *f = &st->failures[i];

		if (rdzv_node_cmp(&f->node, n) == 0) {
			return f->round == round && f->usec == usec;
		}
	}
	return false;
}

bool
rdzv_state_root_cause(const struct rdzv_state *st, const struct rdzv_node *me, int64_t round,
		      int64_t usec, int64_t tolerance_usec, long *ret_first)
{
	long first = -1;

	for (size_t i = 0; i < st->n_failures; i++) {
		const struct rdzv_failure *f = &st->failures[i];

		if (f->round != round || rdzv_node_cmp(&f->node, me) == 0) {
			continue;
		}
		if (first < 0 || f->usec < st->failures[first].usec) {
			first = (long)i;
		}
	}
	if (ret_first) {
		*ret_first = first;
	}
	return first < 0 || usec - st->failures[first].usec <= tolerance_usec;
}

int
rdzv_failure_decode(struct rdzv_state *st, const char **f, size_t *fl, size_t nf)
{
	struct rdzv_failure x;

	if (nf != 4 || rdzv_node_parse(&x.node, f[1], fl[1]) < 0) {
		return -EBADMSG;
	}
	/* usec: wall clock, at most INT64_MAX / 2 so that comparisons cannot
	 * overflow. */
	if (rdzv_parse_i64(f[2], fl[2], 0, INT64_MAX, &x.round) < 0 ||
	    rdzv_parse_i64(f[3], fl[3], 0, INT64_MAX / 2, &x.usec) < 0 ||
	    (st->n_failures &&
	     rdzv_node_cmp(&st->failures[st->n_failures - 1].node, &x.node) >= 0) ||
	    st->n_failures >= RDZV_MAX_NODES) {
		rdzv_node_release(&x.node);
		return -EBADMSG;
	}
	st->failures = xrealloc(st->failures, (st->n_failures + 1) * sizeof(*st->failures));
	st->failures[st->n_failures++] = x;
	return 0;
}
