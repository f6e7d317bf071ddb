/* tcpstore_queue.h — the FIFO of byte values behind one TCPStore queue key
 * (torch >= 2.7's queuePush / queuePop / queueLen). Pure: no I/O, no limits of
 * its own; the server decides what a queue may hold and charges its bytes
 * with tcpstore_queue_item_cost. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tcpstore_proto.h"

struct tcpstore_queue;

/* An empty queue. Aborts on out-of-memory, as every x*alloc. */
struct tcpstore_queue *tcpstore_queue_new(void);

/* Free q and every value in it. Accepts NULL. */
void tcpstore_queue_free(struct tcpstore_queue *q);

/* Append a copy of data[0..len) at the back. */
void tcpstore_queue_push(struct tcpstore_queue *q, const void *data, size_t len);

/* The value at the front (owned by q, valid until the next pop or free) in
 * *ret; returns false, leaving *ret alone, when q is empty. */
bool tcpstore_queue_front(const struct tcpstore_queue *q, struct tcpstore_bytes *ret);

/* Drop the value at the front; nothing when q is empty. */
void tcpstore_queue_pop(struct tcpstore_queue *q);

/* Values held. */
size_t tcpstore_queue_len(const struct tcpstore_queue *q);

/* Memory one value of len bytes takes in a queue (its bytes and its
 * bookkeeping), for the owner's byte limit: an empty value is not free. */
size_t tcpstore_queue_item_cost(size_t len);
