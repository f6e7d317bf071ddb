/* fuzz_etcd_pb.c — libFuzzer target: the input is what an etcd member sends
 * on a gRPC stream (first byte: which call it answers), split into messages
 * with etcd_pb_next_message and each decoded with etcd_pb_decode. Splitting
 * must stay inside the input; whatever decodes must have consistent counts
 * and NUL-terminated keys and values; whatever fails must say why and hold
 * nothing. */
#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include "etcd_pb.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void
check_kv(const struct etcd_kv *kv)
{
	if (!kv->key || !kv->value || kv->key[kv->key_len] != '\0' ||
	    kv->value[kv->value_len] != '\0') {
		abort();
	}
}

static void
check_decode(enum etcd_call call, const uint8_t *msg, size_t len)
{
	struct etcd_response r;
	int err = etcd_pb_decode(call, msg, len, &r);

	if (err < 0) {
		if (err != -EBADMSG || !r.error || r.n_ranges || r.n_events) {
			abort();
		}
	} else {
		if (r.error) {
			abort();
		}
		for (size_t i = 0; i < r.n_ranges; i++) {
			for (size_t k = 0; k < r.ranges[i].n_kvs; k++) {
				check_kv(&r.ranges[i].kvs[k]);
			}
		}
		for (size_t i = 0; i < r.n_events; i++) {
			check_kv(&r.events[i].kv);
		}
	}
	etcd_response_release(&r);
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	enum etcd_call call;
	const uint8_t *msg;
	size_t msg_len, used;

	if (size < 1) {
		return 0;
	}
	call = (enum etcd_call)(data[0] % (ETCD_CALL_WATCH + 1));
	data++;
	size--;
	while (etcd_pb_next_message(data, size, &msg, &msg_len, &used) == 1) {
		if (used > size || msg != data + ETCD_PB_FRAME || used != ETCD_PB_FRAME + msg_len) {
			abort();
		}
		check_decode(call, msg, msg_len);
		data += used;
		size -= used;
	}
	/* An unframed input is a message too. */
	check_decode(call, data, size);
	return 0;
}
