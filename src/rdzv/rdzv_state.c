/* rdzv_state.c — rendezvous state, node descriptors, encoding (see header). */
#include "rdzv_state.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rdzv_rankkey.h"
#include "util.h"

#define STATE_MAGIC "elasticd-rdzv 1"

/* ---- nodes ------------------------------------------------------------- */

static bool
addr_ok(const char *s, size_t len)
{
	if (len == 0 || len > RDZV_MAX_NODE_LEN - 48) {
		return false;
	}
	for (size_t i = 0; i < len; i++) {
		unsigned char c = (unsigned char)s[i];

		if (c <= 0x20 || c == 0x7f || c == '@') {
			return false;
		}
	}
	return true;
}

int
rdzv_node_init(struct rdzv_node *ret, const char *addr, long long pid, long long local_id)
{
	return rdzv_node_init_key(ret, addr, pid, local_id, NULL);
}

int
rdzv_node_init_key(struct rdzv_node *ret, const char *addr, long long pid, long long local_id,
		   const char *key)
{
	size_t len = strlen(addr), klen = key ? strlen(key) : 0;

	if (!addr_ok(addr, len) || pid < 0 || local_id < 0 || (key && !rdzv_key_ok(key, klen))) {
		return -EINVAL;
	}
	ret->name = key ? xasprintf("%s_%lld_%lld@%s", addr, pid, local_id, key)
			: xasprintf("%s_%lld_%lld", addr, pid, local_id);
	ret->addr_len = len;
	ret->pid = pid;
	ret->local_id = local_id;
	ret->key_len = klen;
	return 0;
}

/* A decimal number >= 0 filling s[0..len). */
static int
parse_dec(const char *s, size_t len, long long *ret)
{
	long long v = 0;

	if (len == 0 || len > 18 || (len > 1 && s[0] == '0')) {
		/* Canonical only: one spelling per number. */
		return -EINVAL;
	}
	for (size_t i = 0; i < len; i++) {
		if (s[i] < '0' || s[i] > '9') {
			return -EINVAL;
		}
		v = v * 10 + (s[i] - '0');
	}
	*ret = v;
	return 0;
}

int
rdzv_node_parse(struct rdzv_node *ret, const char *s, size_t len)
{
	const char *u2 = NULL, *u1 = NULL, *at;
	long long pid, lid;
	size_t nlen = len;

	if (len == 0 || len >= RDZV_MAX_NODE_LEN) {
		return -EINVAL;
	}
	if ((at = memchr(s, '@', len)) != NULL) {
		nlen = (size_t)(at - s);
		if (!rdzv_key_ok(at + 1, len - nlen - 1)) {
			return -EINVAL;
		}
	}
	for (size_t i = nlen; i > 0; i--) {
		if (s[i - 1] == '_') {
			if (!u2) {
				u2 = s + i - 1;
			} else {
				u1 = s + i - 1;
				break;
			}
		}
	}
	if (!u1 || !addr_ok(s, (size_t)(u1 - s)) ||
	    parse_dec(u1 + 1, (size_t)(u2 - u1 - 1), &pid) < 0 ||
	    parse_dec(u2 + 1, (size_t)(s + nlen - u2 - 1), &lid) < 0) {
		return -EINVAL;
	}
	ret->name = xstrndup(s, len);
	ret->addr_len = (size_t)(u1 - s);
	ret->pid = pid;
	ret->local_id = lid;
	ret->key_len = at ? len - nlen - 1 : 0;
	return 0;
}

void
rdzv_node_copy(struct rdzv_node *ret, const struct rdzv_node *n)
{
	*ret = *n;
	ret->name = xstrdup(n->name);
}

void
rdzv_node_release(struct rdzv_node *n)
{
	free(n->name);
	n->name = NULL;
}

int
rdzv_node_cmp(const struct rdzv_node *a, const struct rdzv_node *b)
{
	size_t n = a->addr_len < b->addr_len ? a->addr_len : b->addr_len;
	int r = memcmp(a->name, b->name, n);

	if (r != 0) {
		return r;
	}
	if (a->addr_len != b->addr_len) {
		return a->addr_len < b->addr_len ? -1 : 1;
	}
	if (a->pid != b->pid) {
		return a->pid < b->pid ? -1 : 1;
	}
	if (a->local_id != b->local_id) {
		return a->local_id < b->local_id ? -1 : 1;
	}
	return 0;
}

/* ---- sorted arrays whose elements start with a struct rdzv_node --------- */

static const struct rdzv_node *
elem(const void *arr, size_t size, size_t i)
{
	return (const struct rdzv_node *)((const char *)arr + i * size);
}

/* Index of n, or -(insertion point) - 1. */
static long
search(const void *arr, size_t count, size_t size, const struct rdzv_node *n)
{
	size_t lo = 0, hi = count;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		int c = rdzv_node_cmp(elem(arr, size, mid), n);

		if (c == 0) {
			return (long)mid;
		}
		if (c < 0) {
			lo = mid + 1;
		} else {
			hi = mid;
		}
	}
	return -(long)lo - 1;
}

/* Arrays are allocated in powers of two: room for count elements is
 * capacity(count) (0 for none), so that appending N nodes costs O(N). */
static size_t
capacity(size_t count)
{
	size_t c = 1;

	if (count == 0) {
		return 0;
	}
	while (c < count) {
		c *= 2;
	}
	return c;
}

/* Insert a zeroed element for n at its place; returns it (with node set). */
static void *
insert(void **arr, size_t *count, size_t size, long pos, const struct rdzv_node *n)
{
	size_t at = (size_t)(-pos - 1);
	char *base;

	if (*count + 1 > capacity(*count)) {
		*arr = xrealloc(*arr, capacity(*count + 1) * size);
	}
	base = *arr;
	memmove(base + (at + 1) * size, base + at * size, (*count - at) * size);
	memset(base + at * size, 0, size);
	rdzv_node_copy((struct rdzv_node *)(base + at * size), n);
	(*count)++;
	return base + at * size;
}

static void
erase(void *arr, size_t *count, size_t size, long pos)
{
	char *base = arr;

	rdzv_node_release((struct rdzv_node *)(base + (size_t)pos * size));
	memmove(base + (size_t)pos * size, base + ((size_t)pos + 1) * size,
		(*count - (size_t)pos - 1) * size);
	(*count)--;
}

long
rdzv_state_find_participant(const struct rdzv_state *st, const struct rdzv_node *n)
{
	long i = search(st->participants, st->n_participants, sizeof(*st->participants), n);

	return i < 0 ? -1 : i;
}

long
rdzv_state_find_wait(const struct rdzv_state *st, const struct rdzv_node *n)
{
	long i = search(st->wait_list, st->n_wait_list, sizeof(*st->wait_list), n);

	return i < 0 ? -1 : i;
}

long
rdzv_state_find_redundant(const struct rdzv_state *st, const struct rdzv_node *n)
{
	long i =
		search(st->redundancy_list, st->n_redundancy_list, sizeof(*st->redundancy_list), n);

	return i < 0 ? -1 : i;
}

long
rdzv_state_find_heartbeat(const struct rdzv_state *st, const struct rdzv_node *n)
{
	long i = search(st->heartbeats, st->n_heartbeats, sizeof(*st->heartbeats), n);

	return i < 0 ? -1 : i;
}

bool
rdzv_state_add_participant(struct rdzv_state *st, const struct rdzv_node *n, int rank)
{
	long i = search(st->participants, st->n_participants, sizeof(*st->participants), n);
	struct rdzv_participant *p;

	if (i >= 0) {
		if (st->participants[i].rank == rank) {
			return false;
		}
		st->participants[i].rank = rank;
		return true;
	}
	p = insert((void **)&st->participants, &st->n_participants, sizeof(*p), i, n);
	p->rank = rank;
	return true;
}

bool
rdzv_state_remove_participant(struct rdzv_state *st, const struct rdzv_node *n)
{
	long i = search(st->participants, st->n_participants, sizeof(*st->participants), n);

	if (i < 0) {
		return false;
	}
	erase(st->participants, &st->n_participants, sizeof(*st->participants), i);
	return true;
}

bool
rdzv_state_add_wait(struct rdzv_state *st, const struct rdzv_node *n)
{
	long i = search(st->wait_list, st->n_wait_list, sizeof(*st->wait_list), n);

	if (i >= 0) {
		return false;
	}
	insert((void **)&st->wait_list, &st->n_wait_list, sizeof(*st->wait_list), i, n);
	return true;
}

bool
rdzv_state_remove_wait(struct rdzv_state *st, const struct rdzv_node *n)
{
	long i = search(st->wait_list, st->n_wait_list, sizeof(*st->wait_list), n);

	if (i < 0) {
		return false;
	}
	erase(st->wait_list, &st->n_wait_list, sizeof(*st->wait_list), i);
	return true;
}

bool
rdzv_state_add_redundant(struct rdzv_state *st, const struct rdzv_node *n)
{
	long i =
		search(st->redundancy_list, st->n_redundancy_list, sizeof(*st->redundancy_list), n);

	if (i >= 0) {
		return false;
	}
	insert((void **)&st->redundancy_list, &st->n_redundancy_list, sizeof(*st->redundancy_list),
	       i, n);
	return true;
}

bool
rdzv_state_remove_redundant(struct rdzv_state *st, const struct rdzv_node *n)
{
	long i =
		search(st->redundancy_list, st->n_redundancy_list, sizeof(*st->redundancy_list), n);

	if (i < 0) {
		return false;
	}
	erase(st->redundancy_list, &st->n_redundancy_list, sizeof(*st->redundancy_list), i);
	return true;
}

bool
rdzv_state_set_heartbeat(struct rdzv_state *st, const struct rdzv_node *n, int64_t usec)
{
	long i = search(st->heartbeats, st->n_heartbeats, sizeof(*st->heartbeats), n);
	struct rdzv_heartbeat *h;

	if (i >= 0) {
		if (st->heartbeats[i].usec == usec) {
			return false;
		}
		st->heartbeats[i].usec = usec;
		return true;
	}
	h = insert((void **)&st->heartbeats, &st->n_heartbeats, sizeof(*h), i, n);
	h->usec = usec;
	return true;
}

bool
rdzv_state_remove_heartbeat(struct rdzv_state *st, const struct rdzv_node *n)
{
	long i = search(st->heartbeats, st->n_heartbeats, sizeof(*st->heartbeats), n);

	if (i < 0) {
		return false;
	}
	erase(st->heartbeats, &st->n_heartbeats, sizeof(*st->heartbeats), i);
	return true;
}

/* ---- whole state ------------------------------------------------------- */

void
rdzv_state_init(struct rdzv_state *st)
{
	memset(st, 0, sizeof(*st));
	st->deadline = -1;
}

void
rdzv_state_stamp_members(struct rdzv_state *st, int64_t usec)
{
	size_t cap = st->n_participants + st->n_wait_list + st->n_redundancy_list;
	/* capacity(cap) >= capacity(n): the arrays' growth rule holds. */
	struct rdzv_heartbeat *hb = xcalloc(capacity(cap) + 1, sizeof(*hb));
	size_t ip = 0, iw = 0, ir = 0, n = 0;

	/* A merge of the three sorted lists; a node is in one list at most,
	 * but a duplicate would be dropped. */
	while (ip < st->n_participants || iw < st->n_wait_list || ir < st->n_redundancy_list) {
		const struct rdzv_node *next = NULL;

		if (ip < st->n_participants) {
			next = &st->participants[ip].node;
		}
		if (iw < st->n_wait_list &&
		    (!next || rdzv_node_cmp(&st->wait_list[iw], next) < 0)) {
			next = &st->wait_list[iw];
		}
		if (ir < st->n_redundancy_list &&
		    (!next || rdzv_node_cmp(&st->redundancy_list[ir], next) < 0)) {
			next = &st->redundancy_list[ir];
		}
		if (n == 0 || rdzv_node_cmp(&hb[n - 1].node, next) != 0) {
			rdzv_node_copy(&hb[n].node, next);
			hb[n++].usec = usec;
		}
		if (ip < st->n_participants && next == &st->participants[ip].node) {
			ip++;
		} else if (iw < st->n_wait_list && next == &st->wait_list[iw]) {
			iw++;
		} else {
			ir++;
		}
	}
	for (size_t i = 0; i < st->n_heartbeats; i++) {
		rdzv_node_release(&st->heartbeats[i].node);
	}
	free(st->heartbeats);
	st->heartbeats = hb;
	st->n_heartbeats = n;
}

void
rdzv_state_release(struct rdzv_state *st)
{
	for (size_t i = 0; i < st->n_participants; i++) {
		rdzv_node_release(&st->participants[i].node);
	}
	for (size_t i = 0; i < st->n_wait_list; i++) {
		rdzv_node_release(&st->wait_list[i]);
	}
	for (size_t i = 0; i < st->n_redundancy_list; i++) {
		rdzv_node_release(&st->redundancy_list[i]);
	}
	for (size_t i = 0; i < st->n_heartbeats; i++) {
		rdzv_node_release(&st->heartbeats[i].node);
	}
	free(st->participants);
	free(st->wait_list);
	free(st->redundancy_list);
	free(st->heartbeats);
	for (size_t i = 0; i < st->n_quarantine; i++) {
		rdzv_node_release(&st->quarantine[i].node);
	}
	free(st->quarantine);
	rdzv_failures_release(st);
	rdzv_state_set_closed_by(st, NULL);
	rdzv_state_init(st);
}

void
rdzv_state_set_closed_by(struct rdzv_state *st, const struct rdzv_close_record *rec)
{
	if (st->closed_by) {
		rdzv_node_release(&st->closed_by->node);
		free(st->closed_by);
		st->closed_by = NULL;
	}
	if (rec) {
		st->closed_by = xmalloc(sizeof(*st->closed_by));
		*st->closed_by = *rec;
		rdzv_node_copy(&st->closed_by->node, &rec->node);
	}
}

char *
rdzv_close_record_describe(const struct rdzv_close_record *rec)
{
	_cleanup_free_ char *where = NULL;
	_cleanup_free_ char *who = NULL;
	_cleanup_free_ char *how = NULL;

	where = rec->group_rank >= 0
			? xasprintf("node %s (group rank %d)", rec->node.name, rec->group_rank)
			: xasprintf("node %s", rec->node.name);
	if (rec->local_rank >= 0 && rec->rank >= 0) {
		who = xasprintf("local rank %d (rank %d)", rec->local_rank, rec->rank);
	} else if (rec->local_rank >= 0) {
		who = xasprintf("local rank %d", rec->local_rank);
	} else {
		who = xstrdup("a worker");
	}
	if (rec->signal > 0) {
		how = xasprintf("was killed by signal %d (%s), exitcode %d", rec->signal,
				signal_name(rec->signal), rec->exitcode);
	} else {
		how = xasprintf("exited with code %d", rec->exitcode);
	}
	return xasprintf("%s: %s %s", where, who, how);
}

void
rdzv_state_copy(struct rdzv_state *ret, const struct rdzv_state *st)
{
	*ret = *st;
	ret->participants = st->n_participants ? xcalloc(capacity(st->n_participants),
							 sizeof(*st->participants))
					       : NULL;
	ret->wait_list =
		st->n_wait_list ? xcalloc(capacity(st->n_wait_list), sizeof(*st->wait_list)) : NULL;
	ret->redundancy_list = st->n_redundancy_list ? xcalloc(capacity(st->n_redundancy_list),
							       sizeof(*st->redundancy_list))
						     : NULL;
	ret->heartbeats = st->n_heartbeats
				  ? xcalloc(capacity(st->n_heartbeats), sizeof(*st->heartbeats))
				  : NULL;
	for (size_t i = 0; i < st->n_participants; i++) {
		rdzv_node_copy(&ret->participants[i].node, &st->participants[i].node);
		ret->participants[i].rank = st->participants[i].rank;
	}
	for (size_t i = 0; i < st->n_wait_list; i++) {
		rdzv_node_copy(&ret->wait_list[i], &st->wait_list[i]);
	}
	for (size_t i = 0; i < st->n_redundancy_list; i++) {
		rdzv_node_copy(&ret->redundancy_list[i], &st->redundancy_list[i]);
	}
	for (size_t i = 0; i < st->n_heartbeats; i++) {
		rdzv_node_copy(&ret->heartbeats[i].node, &st->heartbeats[i].node);
		ret->heartbeats[i].usec = st->heartbeats[i].usec;
	}
	ret->closed_by = NULL;
	rdzv_state_set_closed_by(ret, st->closed_by);
	ret->quarantine = st->n_quarantine
				  ? xcalloc(capacity(st->n_quarantine), sizeof(*st->quarantine))
				  : NULL;
	for (size_t i = 0; i < st->n_quarantine; i++) {
		ret->quarantine[i] = st->quarantine[i];
		rdzv_node_copy(&ret->quarantine[i].node, &st->quarantine[i].node);
	}
	rdzv_failures_copy(ret, st);
}

/* ---- quarantined hosts --------------------------------------------------- */

static bool
same_host(const struct rdzv_node *a, const struct rdzv_node *b)
{
	return a->addr_len == b->addr_len && memcmp(a->name, b->name, a->addr_len) == 0;
}

long
rdzv_state_find_quarantine(const struct rdzv_state *st, const struct rdzv_node *n)
{
	for (size_t i = 0; i < st->n_quarantine; i++) {
		if (same_host(&st->quarantine[i].node, n)) {
			return (long)i;
		}
	}
	return -1;
}

bool
rdzv_state_remove_quarantine(struct rdzv_state *st, const struct rdzv_node *n)
{
	long pos = rdzv_state_find_quarantine(st, n);

	if (pos < 0) {
		return false;
	}
	erase(st->quarantine, &st->n_quarantine, sizeof(*st->quarantine), pos);
	return true;
}

bool
rdzv_state_set_quarantine(struct rdzv_state *st, const struct rdzv_quarantine *q)
{
	long pos = rdzv_state_find_quarantine(st, &q->node);
	struct rdzv_quarantine *e;

	if (pos >= 0) {
		e = &st->quarantine[pos];
		if (rdzv_node_cmp(&e->node, &q->node) == 0 && e->until == q->until &&
		    e->count == q->count) {
			return false;
		}
		erase(st->quarantine, &st->n_quarantine, sizeof(*st->quarantine), pos);
	}
	pos = search(st->quarantine, st->n_quarantine, sizeof(*st->quarantine), &q->node);
	e = insert((void **)&st->quarantine, &st->n_quarantine, sizeof(*st->quarantine), pos,
		   &q->node);
	e->until = q->until;
	e->count = q->count;
	return true;
}

bool
rdzv_state_quarantined(const struct rdzv_state *st, const struct rdzv_node *n, int64_t now_wall)
{
	long pos = rdzv_state_find_quarantine(st, n);

	/* The quarantined agent itself (same host, same pid) waits on its own
	 * and may be readmitted early; another agent of the host may not join. */
	return pos >= 0 && st->quarantine[pos].until > now_wall &&
	       st->quarantine[pos].node.pid != n->pid;
}

long
rdzv_state_find_quarantine_host(const struct rdzv_state *st, const char *name)
{
	size_t len = strlen(name);

	for (size_t i = 0; i < st->n_quarantine; i++) {
		const struct rdzv_node *n = &st->quarantine[i].node;

		if ((n->addr_len == len && memcmp(n->name, name, len) == 0) ||
		    strcmp(n->name, name) == 0) {
			return (long)i;
		}
	}
	return -1;
}

bool
rdzv_state_host_quarantined(const struct rdzv_state *st, const char *name, int64_t now_wall)
{
	long pos = rdzv_state_find_quarantine_host(st, name);

	return pos >= 0 && st->quarantine[pos].until > now_wall;
}

bool
rdzv_state_expire_quarantine(struct rdzv_state *st, const char *name, int64_t now_wall)
{
	long pos = rdzv_state_find_quarantine_host(st, name);

	if (pos < 0 || st->quarantine[pos].until <= now_wall) {
		return false;
	}
	st->quarantine[pos].until = now_wall;
	return true;
}

/* ---- encoding ---------------------------------------------------------- */

struct out {
	char *buf;
	size_t len;
	size_t cap;
};

static void
out_reserve(struct out *o, size_t n)
{
	if (o->cap - o->len < n) {
		size_t cap = o->cap ? o->cap : 256;

		while (cap - o->len < n) {
			cap *= 2;
		}
		o->buf = xrealloc(o->buf, cap);
		o->cap = cap;
	}
}

static void
out_line(struct out *o, char tag, const struct rdzv_node *n, bool with_num, long long num)
{
	size_t len = strlen(n->name);

	out_reserve(o, len + 32);
	o->buf[o->len++] = tag;
	o->buf[o->len++] = ' ';
	memcpy(o->buf + o->len, n->name, len);
	o->len += len;
	if (with_num) {
		o->len += (size_t)snprintf(o->buf + o->len, 24, " %lld", num);
	}
	o->buf[o->len++] = '\n';
}

char *
rdzv_state_encode(const struct rdzv_state *st, size_t *ret_len)
{
	struct out o = {0};

	out_reserve(&o, 128);
	o.len = (size_t)snprintf(
		o.buf, 128, STATE_MAGIC " %" PRId64 " %" PRIu64 " %d %d %" PRId64 "\n", st->round,
		st->gen, st->complete ? 1 : 0, st->closed ? 1 : 0, st->deadline);
	for (size_t i = 0; i < st->n_participants; i++) {
		out_line(&o, 'p', &st->participants[i].node, true, st->participants[i].rank);
	}
	for (size_t i = 0; i < st->n_wait_list; i++) {
		out_line(&o, 'w', &st->wait_list[i], false, 0);
	}
	for (size_t i = 0; i < st->n_redundancy_list; i++) {
		out_line(&o, 'r', &st->redundancy_list[i], false, 0);
	}
	for (size_t i = 0; i < st->n_heartbeats; i++) {
		out_line(&o, 'h', &st->heartbeats[i].node, true, st->heartbeats[i].usec);
	}
	if (st->closed && st->closed_by) {
		const struct rdzv_close_record *c = st->closed_by;

		out_line(&o, 'c', &c->node, false, 0);
		out_reserve(&o, 80);
		o.len--; /* the newline, written again below */
		o.len += (size_t)snprintf(o.buf + o.len, 80, " %d %d %d %d %d %d\n", c->group_rank,
					  c->rank, c->local_rank, c->pid, c->exitcode, c->signal);
	}
	for (size_t i = 0; i < st->n_quarantine; i++) {
		const struct rdzv_quarantine *q = &st->quarantine[i];

		out_line(&o, 'q', &q->node, true, q->until);
		out_reserve(&o, 24);
		o.len--; /* the newline, written again below */
		o.len += (size_t)snprintf(o.buf + o.len, 24, " %d\n", q->count);
	}
	for (size_t i = 0; i < st->n_failures; i++) {
		out_line(&o, 'f', &st->failures[i].node, true, st->failures[i].round);
		out_reserve(&o, 24);
		o.len--; /* the newline, written again below */
		o.len +=
			(size_t)snprintf(o.buf + o.len, 24, " %" PRId64 "\n", st->failures[i].usec);
	}
	*ret_len = o.len;
	return o.buf;
}

/* A signed decimal filling s[0..len). */
int
rdzv_parse_i64(const char *s, size_t len, int64_t lo, int64_t hi, int64_t *ret)
{
	char tmp[24];
	long long v;

	if (len == 0 || len >= sizeof(tmp)) {
		return -EINVAL;
	}
	memcpy(tmp, s, len);
	tmp[len] = '\0';
	if (parse_int(tmp, lo, hi, &v) < 0) {
		return -EINVAL;
	}
	/* Canonical only ("-0", "+1", "007" refused): decode and encode agree. */
	{
		char back[24];

		snprintf(back, sizeof(back), "%lld", v);
		if (strlen(back) != len || memcmp(back, s, len) != 0) {
			return -EINVAL;
		}
	}
	*ret = v;
	return 0;
}

/* Split one line at every space (empty fields included) into at most max
 * fields; returns the count, or max + 1 when there are more. */
static size_t
fields(const char *s, size_t len, const char **f, size_t *flen, size_t max)
{
	size_t n = 0, start = 0;

	for (size_t i = 0; i <= len; i++) {
		if (i < len && s[i] != ' ') {
			continue;
		}
		if (n == max) {
			return max + 1;
		}
		f[n] = s + start;
		flen[n] = i - start;
		n++;
		start = i + 1;
	}
	return n;
}

static int
decode_entry(struct rdzv_state *st, char tag, const char **f, size_t *fl, size_t nf)
{
	struct rdzv_node node;
	int64_t num = 0;
	long pos;
	int r = -EBADMSG;

	if (nf != (tag == 'p' || tag == 'h' ? 3u : 2u) || rdzv_node_parse(&node, f[1], fl[1]) < 0) {
		return -EBADMSG;
	}
	if (nf == 3 && rdzv_parse_i64(f[2], fl[2], tag == 'p' ? 0 : INT64_MIN,
				      tag == 'p' ? RDZV_MAX_NODES : INT64_MAX, &num) < 0) {
		goto out;
	}
	/* Appending in order: each node must sort after the previous one. */
	switch (tag) {
	case 'p':
		if (st->n_participants &&
		    rdzv_node_cmp(&st->participants[st->n_participants - 1].node, &node) >= 0) {
			goto out;
		}
		pos = -(long)st->n_participants - 1;
		((struct rdzv_participant *)insert((void **)&st->participants, &st->n_participants,
						   sizeof(*st->participants), pos, &node))
			->rank = (int)num;
		break;
	case 'w':
		if (st->n_wait_list &&
		    rdzv_node_cmp(&st->wait_list[st->n_wait_list - 1], &node) >= 0) {
			goto out;
		}
		insert((void **)&st->wait_list, &st->n_wait_list, sizeof(*st->wait_list),
		       -(long)st->n_wait_list - 1, &node);
		break;
	case 'r':
		if (st->n_redundancy_list &&
		    rdzv_node_cmp(&st->redundancy_list[st->n_redundancy_list - 1], &node) >= 0) {
			goto out;
		}
		insert((void **)&st->redundancy_list, &st->n_redundancy_list,
		       sizeof(*st->redundancy_list), -(long)st->n_redundancy_list - 1, &node);
		break;
	case 'h':
		if (st->n_heartbeats &&
		    rdzv_node_cmp(&st->heartbeats[st->n_heartbeats - 1].node, &node) >= 0) {
			goto out;
		}
		((struct rdzv_heartbeat *)insert((void **)&st->heartbeats, &st->n_heartbeats,
						 sizeof(*st->heartbeats),
						 -(long)st->n_heartbeats - 1, &node))
			->usec = num;
		break;
	default:
		goto out;
	}
	r = 0;
out:
	rdzv_node_release(&node);
	return r;
}

/* The closing record "c <node> <group rank> <rank> <local rank> <pid>
 * <exitcode> <signal>": at most one, in a closed state only, numbers in their
 * bounds. */
static int
decode_close(struct rdzv_state *st, const char **f, size_t *fl, size_t nf)
{
	static const int64_t lo[6] = {-1, -1, -1, -1, -RDZV_CLOSE_MAX_SIGNAL, 0};
	static const int64_t hi[6] = {
		RDZV_CLOSE_MAX_RANK,  RDZV_CLOSE_MAX_RANK, RDZV_CLOSE_MAX_RANK, INT32_MAX, 255,
		RDZV_CLOSE_MAX_SIGNAL};
	struct rdzv_close_record rec;
	int64_t v[6];

	if (nf != 8 || !st->closed || st->closed_by) {
		return -EBADMSG;
	}
	for (size_t i = 0; i < 6; i++) {
		if (rdzv_parse_i64(f[2 + i], fl[2 + i], lo[i], hi[i], &v[i]) < 0) {
			return -EBADMSG;
		}
	}
	if (rdzv_node_parse(&rec.node, f[1], fl[1]) < 0) {
		return -EBADMSG;
	}
	rec.group_rank = (int)v[0];
	rec.rank = (int)v[1];
	rec.local_rank = (int)v[2];
	rec.pid = (int)v[3];
	rec.exitcode = (int)v[4];
	rec.signal = (int)v[5];
	rdzv_state_set_closed_by(st, &rec);
	rdzv_node_release(&rec.node);
	return 0;
}

/* A quarantine entry "q <node> <until> <count>": sorted, one per host. */
static int
decode_quarantine(struct rdzv_state *st, const char **f, size_t *fl, size_t nf)
{
	struct rdzv_quarantine q;
	int64_t count;

	if (nf != 4 || rdzv_node_parse(&q.node, f[1], fl[1]) < 0) {
		return -EBADMSG;
	}
	if (rdzv_parse_i64(f[2], fl[2], INT64_MIN, INT64_MAX, &q.until) < 0 ||
	    rdzv_parse_i64(f[3], fl[3], 1, RDZV_QUARANTINE_MAX_COUNT, &count) < 0 ||
	    (st->n_quarantine &&
	     rdzv_node_cmp(&st->quarantine[st->n_quarantine - 1].node, &q.node) >= 0) ||
	    rdzv_state_find_quarantine(st, &q.node) >= 0) {
		rdzv_node_release(&q.node);
		return -EBADMSG;
	}
	q.count = (int)count;
	rdzv_state_set_quarantine(st, &q);
	rdzv_node_release(&q.node);
	return 0;
}

int
rdzv_state_decode(const char *buf, size_t len, struct rdzv_state *ret)
{
	struct rdzv_state st;
	const char *p = buf, *end = buf + len, *nl;
	const char *f[8];
	size_t fl[8], nf, total = 0, last_section = 0;
	int64_t v[5];

	rdzv_state_init(&st);
	nl = memchr(p, '\n', len);
	if (!nl || (size_t)(nl - p) < sizeof(STATE_MAGIC) ||
	    memcmp(p, STATE_MAGIC " ", sizeof(STATE_MAGIC)) != 0) {
		return -EBADMSG;
	}
	nf = fields(p + sizeof(STATE_MAGIC), (size_t)(nl - p) - sizeof(STATE_MAGIC), f, fl, 5);
	if (nf != 5 || rdzv_parse_i64(f[0], fl[0], 0, INT64_MAX, &v[0]) < 0 ||
	    rdzv_parse_i64(f[1], fl[1], 0, INT64_MAX, &v[1]) < 0 ||
	    rdzv_parse_i64(f[2], fl[2], 0, 1, &v[2]) < 0 ||
	    rdzv_parse_i64(f[3], fl[3], 0, 1, &v[3]) < 0 ||
	    rdzv_parse_i64(f[4], fl[4], -1, INT64_MAX, &v[4]) < 0) {
		return -EBADMSG;
	}
	st.round = v[0];
	st.gen = (uint64_t)v[1];
	st.complete = v[2] != 0;
	st.closed = v[3] != 0;
	st.deadline = v[4];
	p = nl + 1;
	while (p < end) {
		static const char order[] = "pwrhcqf";
		const char *section;
		char tag;

		nl = memchr(p, '\n', (size_t)(end - p));
		if (!nl || nl - p < 3 || p[1] != ' ' || ++total > 4 * (size_t)RDZV_MAX_NODES) {
			goto bad;
		}
		tag = p[0];
		/* Sections in the encoder's order, so that the encoding is unique. */
		section = tag ? strchr(order, tag) : NULL;
		if (!section || section < order + last_section) {
			goto bad;
		}
		last_section = (size_t)(section - order);
		nf = fields(p, (size_t)(nl - p), f, fl, 8);
		if (nf > 8 || (tag == 'c'   ? decode_close(&st, f, fl, nf)
			       : tag == 'q' ? decode_quarantine(&st, f, fl, nf)
			       : tag == 'f' ? rdzv_failure_decode(&st, f, fl, nf)
					    : decode_entry(&st, tag, f, fl, nf)) < 0) {
			goto bad;
		}
		p = nl + 1;
	}
	if (st.n_participants > RDZV_MAX_NODES || st.n_wait_list > RDZV_MAX_NODES ||
	    st.n_redundancy_list > RDZV_MAX_NODES || st.n_heartbeats > RDZV_MAX_NODES ||
	    st.n_quarantine > RDZV_MAX_NODES) {
		goto bad;
	}
	*ret = st;
	return 0;
bad:
	rdzv_state_release(&st);
	return -EBADMSG;
}
