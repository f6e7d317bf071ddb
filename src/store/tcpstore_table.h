/* tcpstore_table.h — the TCPStore server's key table: under each key, its
 * value (when set), its queue of values (torch >= 2.7, apart from the value)
 * and the server's waiters on it; with the count of keys that have a value
 * (GETNUMKEYS) and the bytes held (the server's byte limit). Pure: no I/O, no
 * limits of its own (the server checks them before it stores). */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/queue.h>

#include "tcpstore_proto.h"

struct tcpstore_queue;
struct tcpstore_wait_node; /* the server's: one key of one pending WAIT */

/* One key. An entry with no value and an empty queue lives only while someone
 * waits on it (see tcpstore_table_maybe_free). */
struct tcpstore_entry {
	struct tcpstore_entry *next; /* hash chain */
	uint64_t hash;
	uint8_t *key;
	size_t klen;
	uint8_t *val;
	size_t vlen;
	bool has_value;
	struct tcpstore_queue *queue; /* NULL when empty */
	/* Oldest first; the table only inits it and checks it is empty. */
	TAILQ_HEAD(tcpstore_waiters, tcpstore_wait_node) waiters;
};

struct tcpstore_table {
	struct tcpstore_entry **buckets;
	size_t nbuckets;
	size_t nentries;
	size_t nkeys; /* entries with a value */
	size_t bytes; /* keys with a value or a queue, values, queued values */
};

/* An empty table / free every entry (waiters are the caller's to drop first). */
void tcpstore_table_init(struct tcpstore_table *t);
void tcpstore_table_release(struct tcpstore_table *t);

/* The entry of key k, or NULL. */
struct tcpstore_entry *tcpstore_table_find(struct tcpstore_table *t,
					   const struct tcpstore_bytes *k);

/* The entry of key k, made empty when missing (pair it with
 * tcpstore_table_maybe_free if nothing ends up under it). */
struct tcpstore_entry *tcpstore_table_get_or_add(struct tcpstore_table *t,
						 const struct tcpstore_bytes *k);

/* Replace e's value with a copy of v[0..vlen), or remove it. */
void tcpstore_table_set_value(struct tcpstore_table *t, struct tcpstore_entry *e, const void *v,
			      size_t vlen);
void tcpstore_table_clear_value(struct tcpstore_table *t, struct tcpstore_entry *e);

/* The bytes queueing a vlen-byte value under e would add to t->bytes. */
size_t tcpstore_table_queue_cost(const struct tcpstore_entry *e, size_t vlen);

/* Queue a copy of v[0..vlen) at the back of e's queue. */
void tcpstore_table_queue_push(struct tcpstore_table *t, struct tcpstore_entry *e, const void *v,
			       size_t vlen);

/* Drop the front of e's queue (nothing when empty); an emptied queue is
 * freed (e->queue NULL again). */
void tcpstore_table_queue_pop(struct tcpstore_table *t, struct tcpstore_entry *e);

/* Remove e from t and free it when it holds nothing and nobody waits on it;
 * otherwise nothing. */
void tcpstore_table_maybe_free(struct tcpstore_table *t, struct tcpstore_entry *e);
