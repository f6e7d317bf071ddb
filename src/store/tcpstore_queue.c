/* tcpstore_queue.c — a FIFO of byte values (see the header). */
#include "tcpstore_queue.h"

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/queue.h>

#include "util.h"

struct item {
	STAILQ_ENTRY(item) link;
	size_t len;
	uint8_t data[];
};

struct tcpstore_queue {
	STAILQ_HEAD(, item) items;
	size_t n;
};

struct tcpstore_queue *
tcpstore_queue_new(void)
{
	struct tcpstore_queue *q = xcalloc(1, sizeof(*q));

	STAILQ_INIT(&q->items);
	return q;
}

void
tcpstore_queue_free(struct tcpstore_queue *q)
{
	if (!q) {
		return;
	}
	while (q->n > 0) {
		tcpstore_queue_pop(q);
	}
	free(q);
}

void
tcpstore_queue_push(struct tcpstore_queue *q, const void *data, size_t len)
{
	struct item *it = xmalloc(sizeof(*it) + len);

	it->len = len;
	if (len) {
		memcpy(it->data, data, len);
	}
	STAILQ_INSERT_TAIL(&q->items, it, link);
	q->n++;
}

bool
tcpstore_queue_front(const struct tcpstore_queue *q, struct tcpstore_bytes *ret)
{
	struct item *it = STAILQ_FIRST(&q->items);

	if (!it) {
		return false;
	}
	ret->data = it->data;
	ret->len = it->len;
	return true;
}

void
tcpstore_queue_pop(struct tcpstore_queue *q)
{
	struct item *it = STAILQ_FIRST(&q->items);

	if (!it) {
		return;
	}
	STAILQ_REMOVE_HEAD(&q->items, link);
	q->n--;
	free(it);
}

size_t
tcpstore_queue_len(const struct tcpstore_queue *q)
{
	return q->n;
}

size_t
tcpstore_queue_item_cost(size_t len)
{
	return sizeof(struct item) + len;
}
