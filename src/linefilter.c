#include "linefilter.h"

#include <stdbool.h>
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

void
linefilter_init(struct linefilter *f, char *const *needles, const char *prefix)
{
	memset(f, 0, sizeof(*f));
	f->needles = needles;
	f->prefix = xstrdup(prefix);
	f->prefix_len = strlen(prefix);
	f->line = xmalloc(LINEFILTER_MAX_LINE);
}

void
linefilter_release(struct linefilter *f)
{
	free(f->prefix);
	free(f->line);
	memset(f, 0, sizeof(*f));
}

static bool
matches(const struct linefilter *f)
{
	for (size_t i = 0; f->needles[i]; i++) {
		size_t n = strlen(f->needles[i]);

		if (n == 0 || memmem(f->line, f->len, f->needles[i], n)) {
			return true;
		}
	}
	return false;
}

static void
append(char **out, size_t *out_len, const char *s, size_t len)
{
	*out = xrealloc(*out, *out_len + len + 1);
	memcpy(*out + *out_len, s, len);
	*out_len += len;
}

/* The held line is complete (or as long as it may get): pass it on if it
 * matches, ended with '\n', and start a new one. */
static void
end_line(struct linefilter *f, char **out, size_t *out_len)
{
	if (f->len > 0 && matches(f)) {
		append(out, out_len, f->prefix, f->prefix_len);
		append(out, out_len, f->line, f->len);
		if (f->line[f->len - 1] != '\n') {
			append(out, out_len, "\n", 1);
		}
	}
	f->len = 0;
}

void
linefilter_feed(struct linefilter *f, const char *in, size_t len, char **out, size_t *out_len)
{
	while (len > 0) {
		const char *nl = memchr(in, '\n', len);
		size_t take = nl ? (size_t)(nl - in) + 1 : len;

		if (take > LINEFILTER_MAX_LINE - f->len) {
			take = LINEFILTER_MAX_LINE - f->len;
			nl = NULL;
		}
		memcpy(f->line + f->len, in, take);
		f->len += take;
		in += take;
		len -= take;
		if (nl || f->len == LINEFILTER_MAX_LINE) {
			end_line(f, out, out_len);
		}
	}
}

void
linefilter_flush(struct linefilter *f, char **out, size_t *out_len)
{
	end_line(f, out, out_len);
}
