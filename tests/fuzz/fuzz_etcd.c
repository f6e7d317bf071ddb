/* fuzz_etcd.c — libFuzzer target: the input is an answer of etcd's JSON
 * gateway (first byte: which HTTP status it came with). Whatever decodes must
 * have consistent counts, and every key and value must re-encode to base64
 * and decode back to the same bytes. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "etcd_client.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void
check_bytes(const char *p, size_t len)
{
	char *e = etcd_b64_encode(p, len), *d;
	size_t n;

	if (etcd_b64_decode(e, strlen(e), &d, &n) < 0 || n != len || memcmp(d, p, n) != 0 ||
	    d[n] != '\0') {
		abort();
	}
	free(d);
	free(e);
}

static void
check_kv(const struct etcd_kv *kv)
{
	if (!kv->key || !kv->value || kv->key[kv->key_len] != '\0' ||
	    kv->value[kv->value_len] != '\0') {
		abort();
	}
	check_bytes(kv->key, kv->key_len);
	check_bytes(kv->value, kv->value_len);
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const int statuses[] = {200, 200, 200, 503, 404, 400, 412, 500};
	struct etcd_response r;
	int status, err;

	if (size < 1) {
		return 0;
	}
	status = statuses[data[0] % (sizeof(statuses) / sizeof(statuses[0]))];
	err = etcd_response_decode(status, (const char *)data + 1, size - 1, &r);
	if (err < 0) {
		if (!r.error || r.n_ranges || r.n_events) {
			abort();
		}
	} else {
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
	return 0;
}
