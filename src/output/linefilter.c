#include "linefilter.h"

#include <string.h>

#include "util.h"

char **
linefilter_parse(const char *value)
{
	char **v = NULL;
	size_t cap = strlen(value) + 1, len = 0;
	char *piece = xmalloc(cap);

	for (const char *p = value;; p++) {
		if (*p == ',' && p[1] == ',') {
			piece[len++] = ',';
			p++;
		} else if (*p == ',' || *p == '\0') {
			piece[len] = '\0';
			strv_push(&v, piece);
			len = 0;
			if (*p == '\0') {
				break;
			}
		} else {
			piece[len++] = *p;
		}
	}
	free(piece);
	return v;
}

bool
linefilter_match(char *const *needles, const char *line, size_t len)
{
	for (size_t i = 0; needles[i]; i++) {
		size_t n = strlen(needles[i]);

		if (n == 0 || memmem(line, len, needles[i], n)) {
			return true;
		}
	}
	return false;
}
