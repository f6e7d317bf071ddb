/* config_file.c — "key = value" lines with shell-like quoting of values.
 * See config_file.h and elasticd.conf(5). */
#include "config_file.h"

#include <errno.h>
#include <stdbool.h>
#include <string.h>

#include "util.h"

static bool
is_blank(char c)
{
	return c == ' ' || c == '\t' || c == '\r';
}

static bool
is_key_char(char c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
	       c == '-' || c == '_';
}

/* A word under construction. */
struct word {
	char *s;
	size_t len, cap;
};

static void
word_add(struct word *w, char c)
{
	if (w->len + 1 >= w->cap) {
		w->cap = w->cap ? 2 * w->cap : 32;
		w->s = xrealloc(w->s, w->cap);
	}
	w->s[w->len++] = c;
	w->s[w->len] = '\0';
}

/* The word so far, "" when it has no character yet (an empty quoted word). */
static char *
word_take(struct word *w)
{
	char *s = w->s ? w->s : xstrdup("");

	*w = (struct word){0};
	return s;
}

/* Add the '...' quote that starts at p to w. Returns the character after the
 * closing quote, or NULL with *reterr when there is none. */
static const char *
single_quoted(const char *p, struct word *w, char **reterr)
{
	const char *end = strchr(p + 1, '\'');

	if (!end) {
		*reterr = xstrdup("unterminated ' quote");
		return NULL;
	}
	for (const char *q = p + 1; q < end; q++) {
		word_add(w, *q);
	}
	if (end == p + 1 && !w->s) {
		w->s = xstrdup(""); /* '' is an empty word */
		w->cap = 1;
	}
	return end + 1;
}

/* Add the "..." quote that starts at p to w (\" and \\ stand for " and \).
 * Returns the character after the closing quote, or NULL with *reterr when
 * there is none. */
static const char *
double_quoted(const char *p, struct word *w, char **reterr)
{
	const char *q = p + 1;

	if (!w->s) {
		w->s = xstrdup("");
		w->cap = 1;
	}
	for (;;) {
		if (*q == '\0') {
			*reterr = xstrdup("unterminated \" quote");
			return NULL;
		}
		if (*q == '"') {
			break;
		}
		if (*q == '\\' && (q[1] == '"' || q[1] == '\\')) {
			q++;
		}
		word_add(w, *q);
		q++;
	}
	return q + 1;
}

int
config_file_split(const char *value, char ***ret_words, char **reterr)
{
	char **words = xcalloc(1, sizeof(char *));
	struct word w = {0};
	bool in_word = false;
	const char *p = value;

	for (;;) {
		char c = *p;

		if (c == '\0' || is_blank(c)) {
			if (in_word) {
				strv_consume(&words, word_take(&w));
				in_word = false;
			}
			if (c == '\0') {
				break;
			}
			p++;
			continue;
		}
		if (c == '#' && !in_word) {
			break; /* a comment, to the end of the line */
		}
		in_word = true;
		if (c == '\'' || c == '"') {
			p = c == '\'' ? single_quoted(p, &w, reterr) : double_quoted(p, &w, reterr);
			if (!p) {
				goto fail;
			}
			continue;
		}
		if (c == '\\') {
			if (p[1] == '\0') {
				*reterr = xstrdup(
					"a backslash at the end of the line (a setting cannot "
					"continue on the next line)");
				goto fail;
			}
			word_add(&w, p[1]);
			p += 2;
			continue;
		}
		word_add(&w, c);
		p++;
	}
	*ret_words = words;
	return 0;

fail:
	free(w.s);
	strv_free(words);
	return -EINVAL;
}

void
config_file_release(struct config_file *f)
{
	for (size_t i = 0; i < f->n; i++) {
		free(f->entries[i].key);
		strv_free(f->entries[i].words);
	}
	free(f->entries);
	*f = (struct config_file){0};
}

/* One line (NUL-terminated, without its "\n"): adds an entry to f, or returns
 * -EINVAL with *reterr the reason. */
static int
parse_line(char *line, int lineno, struct config_file *f, char **reterr)
{
	char *p = line, *eq, *key_end, *err = NULL;
	char **words = NULL;
	struct config_file_entry *e;

	while (is_blank(*p)) {
		p++;
	}
	if (*p == '\0' || *p == '#') {
		return 0;
	}
	eq = strchr(p, '=');
	if (!eq) {
		*reterr = xasprintf("expected 'key = value', got '%s'", p);
		return -EINVAL;
	}
	key_end = eq;
	while (key_end > p && is_blank(key_end[-1])) {
		key_end--;
	}
	if (key_end == p) {
		*reterr = xstrdup("expected a key before '='");
		return -EINVAL;
	}
	*key_end = '\0';
	if (p[0] == '-' && p[1] == '-') {
		*reterr = xasprintf("keys are option names without '--': write '%s = ...'", p + 2);
		return -EINVAL;
	}
	for (const char *k = p; *k; k++) {
		if (!is_key_char(*k)) {
			*reterr = xasprintf("invalid key '%s': keys are option names such as "
					    "nproc-per-node",
					    p);
			return -EINVAL;
		}
	}
	if (config_file_split(eq + 1, &words, &err) < 0) {
		*reterr = xasprintf("%s: %s", p, err);
		free(err);
		return -EINVAL;
	}
	f->entries = xrealloc(f->entries, (f->n + 1) * sizeof(*f->entries));
	e = &f->entries[f->n++];
	e->key = xstrdup(p);
	e->words = words;
	e->line = lineno;
	return 0;
}

int
config_file_parse(const char *name, const char *text, size_t len, struct config_file *ret,
		  char **reterr)
{
	struct config_file f = {0};
	size_t pos = 0;
	int lineno = 0;

	*ret = (struct config_file){0};
	if (len >= 3 && memcmp(text, "\xef\xbb\xbf", 3) == 0) {
		pos = 3;
	}
	while (pos < len) {
		const char *start = text + pos;
		const char *nl = memchr(start, '\n', len - pos);
		size_t n = nl ? (size_t)(nl - start) : len - pos;
		_cleanup_free_ char *line = NULL;
		char *why = NULL;

		lineno++;
		pos += n + (nl ? 1 : 0);
		if (memchr(start, '\0', n)) {
			*reterr = xasprintf("%s:%d: a NUL byte (this is not a text file)", name,
					    lineno);
			config_file_release(&f);
			return -EINVAL;
		}
		line = xstrndup(start, n);
		if (parse_line(line, lineno, &f, &why) < 0) {
			*reterr = xasprintf("%s:%d: %s", name, lineno, why);
			free(why);
			config_file_release(&f);
			return -EINVAL;
		}
	}
	*ret = f;
	return 0;
}
