/* tcpstore_table.c — the TCPStore server's key table (see the header). */
#include "tcpstore_table.h"

#include <stdlib.h>
#include <string.h>

#include "tcpstore_queue.h"
#include "util.h"

static uint64_t
hash_bytes(const uint8_t *p, size_t n)
{
	uint64_t h = 0xcbf29ce484222325ULL;

	for (size_t i = 0; i < n; i++) {
		h ^= p[i];
		h *= 0x100000001b3ULL;
	}
	return h;
}

static struct tcpstore_entry **
table_slot(struct tcpstore_table *t, const uint8_t *key, size_t klen, uint64_t h)
{
	struct tcpstore_entry **pp = &t->buckets[h & (t->nbuckets - 1)];

	for (; *pp; pp = &(*pp)->next) {
		struct tcpstore_entry *e = *pp;

		if (e->hash == h && e->klen == klen &&
		    (klen == 0 || memcmp(e->key, key, klen) == 0)) {
			break;
		}
	}
	return pp;
}

void
tcpstore_table_init(struct tcpstore_table *t)
{
	memset(t, 0, sizeof(*t));
	t->nbuckets = 64;
	t->buckets = xcalloc(t->nbuckets, sizeof(*t->buckets));
}

void
tcpstore_table_release(struct tcpstore_table *t)
{
	for (size_t i = 0; i < t->nbuckets; i++) {
		struct tcpstore_entry *e = t->buckets[i], *next;

		for (; e; e = next) {
			next = e->next;
			tcpstore_queue_free(e->queue);
			free(e->key);
			free(e->val);
			free(e);
		}
	}
	free(t->buckets);
	memset(t, 0, sizeof(*t));
}

struct tcpstore_entry *
tcpstore_table_find(struct tcpstore_table *t, const struct tcpstore_bytes *k)
{
	return *table_slot(t, k->data, k->len, hash_bytes(k->data, k->len));
}

static void
table_grow(struct tcpstore_table *t)
{
	size_t n = t->nbuckets * 2;
	struct tcpstore_entry **b = xcalloc(n, sizeof(*b));

	for (size_t i = 0; i < t->nbuckets; i++) {
		struct tcpstore_entry *e = t->buckets[i], *next;

		for (; e; e = next) {
			next = e->next;
			e->next = b[e->hash & (n - 1)];
			b[e->hash & (n - 1)] = e;
		}
	}
	free(t->buckets);
	t->buckets = b;
	t->nbuckets = n;
}

struct tcpstore_entry *
tcpstore_table_get_or_add(struct tcpstore_table *t, const struct tcpstore_bytes *k)
{
	uint64_t h = hash_bytes(k->data, k->len);
	struct tcpstore_entry **pp = table_slot(t, k->data, k->len, h);
	struct tcpstore_entry *e;

	if (*pp) {
		return *pp;
	}
	e = xcalloc(1, sizeof(*e));
	e->hash = h;
	e->key = xmalloc(k->len ? k->len : 1);
	memcpy(e->key, k->data, k->len);
	e->klen = k->len;
	TAILQ_INIT(&e->waiters);
	*pp = e;
	t->nentries++;
	if (t->nentries > t->nbuckets) {
		table_grow(t);
	}
	return e;
}

void
tcpstore_table_clear_value(struct tcpstore_table *t, struct tcpstore_entry *e)
{
	if (e->has_value) {
		t->bytes -= e->klen + e->vlen;
		t->nkeys--;
	}
	free(e->val);
	e->val = NULL;
	e->vlen = 0;
	e->has_value = false;
}

void
tcpstore_table_set_value(struct tcpstore_table *t, struct tcpstore_entry *e, const void *v,
			 size_t vlen)
{
	tcpstore_table_clear_value(t, e);
	e->val = xmalloc(vlen ? vlen : 1);
	if (vlen) {
		memcpy(e->val, v, vlen);
	}
	e->vlen = vlen;
	e->has_value = true;
	t->bytes += e->klen + vlen;
	t->nkeys++;
}

size_t
tcpstore_table_queue_cost(const struct tcpstore_entry *e, size_t vlen)
{
	/* The key is charged once, while the queue is not empty. */
	return tcpstore_queue_item_cost(vlen) + (e->queue ? 0 : e->klen);
}

void
tcpstore_table_queue_push(struct tcpstore_table *t, struct tcpstore_entry *e, const void *v,
			  size_t vlen)
{
	t->bytes += tcpstore_table_queue_cost(e, vlen);
	if (!e->queue) {
		e->queue = tcpstore_queue_new();
	}
	tcpstore_queue_push(e->queue, v, vlen);
}

void
tcpstore_table_queue_pop(struct tcpstore_table *t, struct tcpstore_entry *e)
{
	struct tcpstore_bytes front;

	if (!e->queue || !tcpstore_queue_front(e->queue, &front)) {
		return;
	}
	t->bytes -= tcpstore_queue_item_cost(front.len);
	tcpstore_queue_pop(e->queue);
	if (tcpstore_queue_len(e->queue) == 0) {
		tcpstore_queue_free(e->queue);
		e->queue = NULL;
		t->bytes -= e->klen;
	}
}

void
tcpstore_table_maybe_free(struct tcpstore_table *t, struct tcpstore_entry *e)
{
	struct tcpstore_entry **pp;

	if (e->has_value || e->queue || !TAILQ_EMPTY(&e->waiters)) {
		return;
	}
	pp = table_slot(t, e->key, e->klen, e->hash);
	*pp = e->next;
	t->nentries--;
	free(e->key);
	free(e);
}
