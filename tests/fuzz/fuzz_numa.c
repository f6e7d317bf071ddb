/* fuzz_numa.c — libFuzzer target for the NUMA module's parsers: the input is a
 * --gpu-bus-ids list, each of its comma-separated pieces a bus id, and the
 * whole a --numa-binding mode. Checks what the parsers promise: a list that
 * parses is non-empty, canonical and without repeats; a bus id that parses
 * round-trips. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "numa.h"
#include "util.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *s = xstrndup((const char *)data, size);
	char **ids = NULL, *err = NULL, *p = s;
	enum numa_mode mode;

	if (numa_busid_list_parse(s, &ids, &err) == 0) {
		if (err || !ids || !ids[0]) {
			abort();
		}
		for (size_t i = 0; ids[i]; i++) {
			char again[NUMA_BUSID_SIZE];

			if (numa_busid_parse(ids[i], again) < 0 || strcmp(again, ids[i]) != 0) {
				abort();
			}
			for (size_t j = 0; j < i; j++) {
				if (strcmp(ids[i], ids[j]) == 0) {
					abort();
				}
			}
		}
		strv_free(ids);
	} else if (!err || !*err) {
		abort();
	}
	free(err);
	for (;;) {
		char *comma = strchr(p, ',');
		char out[NUMA_BUSID_SIZE];

		if (comma) {
			*comma = '\0';
		}
		if (numa_busid_parse(p, out) == 0 && strlen(out) >= NUMA_BUSID_SIZE) {
			abort();
		}
		if (!comma) {
			break;
		}
		p = comma + 1;
	}
	if (numa_mode_from_string(s, &mode) == 0 && strcmp(numa_mode_to_string(mode), s) != 0) {
		abort();
	}
	free(s);
	return 0;
}
