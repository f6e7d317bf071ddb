/* unhex.h — test helper: bytes from hex text, for the TCPStore wire tests. */
#pragma once

#include <stdint.h>
#include <string.h>

#include "util.h"

/* The bytes that hex spells, two digits a byte, blanks ignored (as the tables
 * write frames: "06 02 0100000000000000 61"). Returns a malloc'd buffer of
 * *ret_len bytes; hex must be well formed (it is the tests' own text). */
static inline uint8_t *
unhex(const char *hex, size_t *ret_len)
{
	uint8_t *out = xmalloc(strlen(hex) / 2 + 1);
	size_t n = 0;
	int hi = -1;

	for (const char *p = hex; *p; p++) {
		int v;

		if (*p == ' ') {
			continue;
		}
		v = *p <= '9' ? *p - '0' : (*p | 0x20) - 'a' + 10;
		if (hi < 0) {
			hi = v;
		} else {
			out[n++] = (uint8_t)(hi << 4 | v);
			hi = -1;
		}
	}
	*ret_len = n;
	return out;
}
