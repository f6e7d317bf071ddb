/* filetimer.c — torch's FileTimer protocol: request parser and timer table
 * (see filetimer.h). The table is a plain array: it holds at most a few
 * thousand timers, and every operation is one pass over it. */
#include "filetimer.h"

#include <errno.h>
#include <jansson.h>
#include <limits.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "util.h"

struct timer {
	pid_t pid;
	char *scope_id;
	double expiration_time;
	int signal;
	uint64_t seq; /* insertion order, for ties */
};

struct filetimer_table {
	struct timer *timers;
	size_t n;
	size_t max;
	uint64_t next_seq;
};

/* ---- requests ------------------------------------------------------------ */

static int
fail(char **reterr, const char *msg)
{
	*reterr = xstrdup(msg);
	return -EINVAL;
}

/* The four keys torch reads, checked. Returns 0 or -EINVAL with *reterr. */
static int
parse_object(json_t *o, struct filetimer_request *ret, char **reterr)
{
	json_t *pid = json_object_get(o, "pid");
	json_t *scope = json_object_get(o, "scope_id");
	json_t *exp = json_object_get(o, "expiration_time");
	json_t *sig = json_object_get(o, "signal");

	if (!pid || !scope || !exp || !sig) {
		return fail(reterr, "a request needs pid, scope_id, expiration_time and signal");
	}
	if (!json_is_integer(pid) || json_integer_value(pid) <= 0 ||
	    json_integer_value(pid) > INT_MAX) {
		return fail(reterr, "pid must be an integer > 0");
	}
	if (!json_is_string(scope) ||
	    strlen(json_string_value(scope)) != json_string_length(scope)) {
		return fail(reterr, "scope_id must be a string without NUL");
	}
	if (!json_is_number(exp) || !isfinite(json_number_value(exp))) {
		return fail(reterr, "expiration_time must be a number");
	}
	if (!json_is_integer(sig) || json_integer_value(sig) < INT_MIN ||
	    json_integer_value(sig) > INT_MAX) {
		return fail(reterr, "signal must be an integer");
	}
	ret->pid = (pid_t)json_integer_value(pid);
	ret->scope_id = xstrdup(json_string_value(scope));
	ret->expiration_time = json_number_value(exp);
	ret->signal = (int)json_integer_value(sig);
	return 0;
}

int
filetimer_parse(const char *buf, size_t len, struct filetimer_request *ret, char **reterr)
{
	struct filetimer_request req = {0};
	json_error_t jerr;
	json_t *o;
	int r;

	if (len > FILETIMER_LINE_MAX) {
		*reterr = xasprintf("request longer than %d bytes", FILETIMER_LINE_MAX);
		return -E2BIG;
	}
	o = json_loadb(buf, len, 0, &jerr);
	if (!o) {
		*reterr = xasprintf("not JSON: %s", jerr.text);
		return -EINVAL;
	}
	if (!json_is_object(o)) {
		json_decref(o);
		return fail(reterr, "a request must be a JSON object");
	}
	r = parse_object(o, &req, reterr);
	json_decref(o);
	if (r < 0) {
		return r;
	}
	*ret = req;
	return 0;
}

void
filetimer_request_release(struct filetimer_request *r)
{
	free(r->scope_id);
	memset(r, 0, sizeof(*r));
}

/* ---- lines ----------------------------------------------------------------- */

void
filetimer_lines_feed(struct filetimer_lines *l, const char *data, size_t len, filetimer_line_fn fn,
		     void *arg)
{
	while (len > 0) {
		const char *nl = memchr(data, '\n', len);
		size_t take = nl ? (size_t)(nl - data) : len;

		if (l->skipping) {
			/* the rest of a line already reported */
		} else if (take > sizeof(l->buf) - l->len) {
			size_t room = sizeof(l->buf) - l->len;

			memcpy(l->buf + l->len, data, room);
			fn(l->buf, sizeof(l->buf), true, arg);
			l->len = 0;
			l->skipping = true;
		} else if (nl && l->len == 0) {
			fn(data, take, false, arg); /* the usual case: no copy */
		} else {
			memcpy(l->buf + l->len, data, take);
			l->len += take;
			if (nl) {
				fn(l->buf, l->len, false, arg);
				l->len = 0;
			}
		}
		if (!nl) {
			return;
		}
		l->skipping = false;
		data = nl + 1;
		len -= take + 1;
	}
}

/* ---- the table ------------------------------------------------------------- */

struct filetimer_table *
filetimer_table_new(size_t max_timers)
{
	struct filetimer_table *t = xcalloc(1, sizeof(*t));

	t->max = max_timers ? max_timers : FILETIMER_TIMERS_MAX;
	return t;
}

void
filetimer_table_free(struct filetimer_table *t)
{
	if (!t) {
		return;
	}
	for (size_t i = 0; i < t->n; i++) {
		free(t->timers[i].scope_id);
	}
	free(t->timers);
	free(t);
}

static struct timer *
find(struct filetimer_table *t, pid_t pid, const char *scope_id)
{
	for (size_t i = 0; i < t->n; i++) {
		if (t->timers[i].pid == pid && strcmp(t->timers[i].scope_id, scope_id) == 0) {
			return &t->timers[i];
		}
	}
	return NULL;
}

/* Remove timers[i], keeping the order of the rest. */
static void
remove_at(struct filetimer_table *t, size_t i)
{
	free(t->timers[i].scope_id);
	memmove(&t->timers[i], &t->timers[i + 1], (t->n - i - 1) * sizeof(t->timers[0]));
	t->n--;
}

int
filetimer_table_apply(struct filetimer_table *t, const struct filetimer_request *req)
{
	struct timer *tm = find(t, req->pid, req->scope_id);

	if (req->expiration_time < 0) {
		if (!tm) {
			return FILETIMER_UNKNOWN;
		}
		remove_at(t, (size_t)(tm - t->timers));
		return FILETIMER_RELEASED;
	}
	if (tm) {
		tm->expiration_time = req->expiration_time;
		tm->signal = req->signal;
		return FILETIMER_REPLACED;
	}
	if (t->n >= t->max) {
		return -ENOSPC;
	}
	t->timers = xrealloc(t->timers, (t->n + 1) * sizeof(t->timers[0]));
	t->timers[t->n++] = (struct timer){
		.pid = req->pid,
		.scope_id = xstrdup(req->scope_id),
		.expiration_time = req->expiration_time,
		.signal = req->signal,
		.seq = t->next_seq++,
	};
	return FILETIMER_SET;
}

size_t
filetimer_table_count(const struct filetimer_table *t)
{
	return t->n;
}

bool
filetimer_table_next(const struct filetimer_table *t, double *ret)
{
	double best;

	if (t->n == 0) {
		return false;
	}
	best = t->timers[0].expiration_time;
	for (size_t i = 1; i < t->n; i++) {
		if (t->timers[i].expiration_time < best) {
			best = t->timers[i].expiration_time;
		}
	}
	*ret = best;
	return true;
}

static int
cmp_expiration(const void *pa, const void *pb)
{
	const struct timer *a = *(const struct timer *const *)pa;
	const struct timer *b = *(const struct timer *const *)pb;

	if (a->expiration_time != b->expiration_time) {
		return a->expiration_time < b->expiration_time ? -1 : 1;
	}
	return a->seq < b->seq ? -1 : a->seq > b->seq;
}

static struct filetimer_expired *
find_pid(struct filetimer_expired *e, size_t n, pid_t pid)
{
	for (size_t i = 0; i < n; i++) {
		if (e[i].pid == pid) {
			return &e[i];
		}
	}
	return NULL;
}

/* Group the expired timers (sorted) by pid, choosing each pid's signal. */
static size_t
group_by_pid(struct timer **sorted, size_t n_sorted, struct filetimer_expired *out)
{
	size_t n = 0;

	for (size_t i = 0; i < n_sorted; i++) {
		const struct timer *tm = sorted[i];
		struct filetimer_expired *x = find_pid(out, n, tm->pid);

		if (!x) {
			x = &out[n++];
			*x = (struct filetimer_expired){
				.pid = tm->pid,
				.scope_id = xstrdup(tm->scope_id),
				.expiration_time = tm->expiration_time,
			};
		}
		x->n_expired++;
		if (x->signal <= 0 && tm->signal > 0) {
			x->signal = tm->signal;
			x->expiration_time = tm->expiration_time;
			free(x->scope_id);
			x->scope_id = xstrdup(tm->scope_id);
		}
	}
	return n;
}

size_t
filetimer_table_expire(struct filetimer_table *t, double now, struct filetimer_expired **ret)
{
	struct timer **sorted = xcalloc(t->n ? t->n : 1, sizeof(*sorted));
	struct filetimer_expired *out;
	size_t n_sorted = 0, n;

	for (size_t i = 0; i < t->n; i++) {
		if (t->timers[i].expiration_time <= now) {
			sorted[n_sorted++] = &t->timers[i];
		}
	}
	*ret = NULL;
	if (n_sorted == 0) {
		free(sorted);
		return 0;
	}
	qsort(sorted, n_sorted, sizeof(*sorted), cmp_expiration);
	out = xcalloc(n_sorted, sizeof(*out));
	n = group_by_pid(sorted, n_sorted, out);
	free(sorted);
	for (size_t i = 0; i < t->n;) {
		struct filetimer_expired *x = find_pid(out, n, t->timers[i].pid);

		if (x) {
			x->n_cleared++;
			remove_at(t, i);
		} else {
			i++;
		}
	}
	*ret = out;
	return n;
}

void
filetimer_expired_free(struct filetimer_expired *e, size_t n)
{
	for (size_t i = 0; e && i < n; i++) {
		free(e[i].scope_id);
	}
	free(e);
}

size_t
filetimer_table_prune(struct filetimer_table *t, bool (*alive)(pid_t pid, void *arg), void *arg)
{
	pid_t *dead = xcalloc(t->n ? t->n : 1, sizeof(*dead));
	pid_t *seen = xcalloc(t->n ? t->n : 1, sizeof(*seen));
	size_t n_dead = 0, n_seen = 0, removed = 0;

	for (size_t i = 0; i < t->n; i++) {
		pid_t pid = t->timers[i].pid;
		bool known = false;

		for (size_t j = 0; j < n_seen && !known; j++) {
			known = seen[j] == pid;
		}
		if (known) {
			continue;
		}
		seen[n_seen++] = pid;
		if (!alive(pid, arg)) {
			dead[n_dead++] = pid;
		}
	}
	for (size_t i = 0; i < t->n;) {
		bool gone = false;

		for (size_t j = 0; j < n_dead && !gone; j++) {
			gone = dead[j] == t->timers[i].pid;
		}
		if (gone) {
			remove_at(t, i);
			removed++;
		} else {
			i++;
		}
	}
	free(dead);
	free(seen);
	return removed;
}
