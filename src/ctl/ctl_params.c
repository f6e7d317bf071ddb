#include "ctl_params.h"

#include <errno.h>
#include <stdint.h>
#include <string.h>

#include "util.h"

/* How much of a client's text a reason quotes. */
#define SHOW_MAX 64

static int
hexval(char c)
{
	if (c >= '0' && c <= '9') {
		return c - '0';
	}
	if (c >= 'a' && c <= 'f') {
		return c - 'a' + 10;
	}
	if (c >= 'A' && c <= 'F') {
		return c - 'A' + 10;
	}
	return -1;
}

/* The client's text s[0..len) for a reason: at most SHOW_MAX bytes, control
 * bytes as '?', "..." when cut. Returns a malloc'd string. */
static char *
show(const char *s, size_t len)
{
	size_t n = len < SHOW_MAX ? len : SHOW_MAX;
	char *out = xmalloc(n + 4);

	for (size_t i = 0; i < n; i++) {
		unsigned char c = (unsigned char)s[i];

		out[i] = c < 0x20 || c == 0x7f ? '?' : (char)c;
	}
	if (n < len) {
		memcpy(out + n, "...", 3);
		n += 3;
	}
	out[n] = '\0';
	return out;
}

/* Decode s[0..len) ('+' is a space, %XX a byte) into a malloc'd string.
 * Returns NULL with *reterr on a malformed escape or a NUL byte. */
static char *
decode(const char *s, size_t len, char **reterr)
{
	char *out = xmalloc(len + 1);
	size_t n = 0;

	for (size_t i = 0; i < len; i++) {
		char c = s[i];

		if (c == '+') {
			c = ' ';
		} else if (c == '%') {
			int hi = i + 2 < len ? hexval(s[i + 1]) : -1;
			int lo = i + 2 < len ? hexval(s[i + 2]) : -1;

			if (hi < 0 || lo < 0) {
				_cleanup_free_ char *t = show(s, len);

				*reterr = xasprintf(
					"Invalid parameters - bad percent-encoding in '%s'", t);
				free(out);
				return NULL;
			}
			c = (char)(hi * 16 + lo);
			i += 2;
		}
		if (c == '\0') {
			_cleanup_free_ char *t = show(s, len);

			*reterr = xasprintf("Invalid parameters - NUL byte in '%s'", t);
			free(out);
			return NULL;
		}
		out[n++] = c;
	}
	out[n] = '\0';
	return out;
}

int
ctl_query_parse(const char *s, size_t len, struct ctl_query *q, char **reterr)
{
	size_t pos = 0;

	if (len > CTL_QUERY_MAX) {
		*reterr = xasprintf("Invalid parameters - longer than %u bytes", CTL_QUERY_MAX);
		return -EINVAL;
	}
	while (pos < len) {
		const char *pair = s + pos;
		const char *amp = memchr(pair, '&', len - pos);
		size_t plen = amp ? (size_t)(amp - pair) : len - pos;
		const char *eq = memchr(pair, '=', plen);
		size_t nlen = eq ? (size_t)(eq - pair) : plen;
		char *name, *value;

		pos += plen + (amp ? 1 : 0);
		if (plen == 0) {
			continue;
		}
		if (nlen == 0) {
			_cleanup_free_ char *t = show(pair, plen);

			*reterr = xasprintf("Invalid parameters - empty parameter name in '%s'", t);
			return -EINVAL;
		}
		if (q->n == CTL_PARAMS_MAX) {
			*reterr = xasprintf("Invalid parameters - more than %u parameters",
					    CTL_PARAMS_MAX);
			return -EINVAL;
		}
		name = decode(pair, nlen, reterr);
		if (!name) {
			return -EINVAL;
		}
		value = eq ? decode(eq + 1, plen - nlen - 1, reterr) : xstrdup("");
		if (!value) {
			free(name);
			return -EINVAL;
		}
		if (strlen(name) > CTL_PARAM_NAME_MAX) {
			_cleanup_free_ char *t = show(name, strlen(name));

			*reterr = xasprintf("Invalid parameters - parameter name longer than %u "
					    "bytes: %s",
					    CTL_PARAM_NAME_MAX, t);
			free(name);
			free(value);
			return -EINVAL;
		}
		if (strlen(value) > CTL_PARAM_VALUE_MAX) {
			_cleanup_free_ char *t = show(name, strlen(name));

			*reterr = xasprintf("Invalid value for %s: longer than %u bytes", t,
					    CTL_PARAM_VALUE_MAX);
			free(name);
			free(value);
			return -EINVAL;
		}
		q->p[q->n].name = name;
		q->p[q->n].value = value;
		q->n++;
	}
	return 0;
}

void
ctl_query_release(struct ctl_query *q)
{
	for (size_t i = 0; i < q->n; i++) {
		free(q->p[i].name);
		free(q->p[i].value);
	}
	memset(q, 0, sizeof(*q));
}

bool
ctl_param_name_valid(const char *name)
{
	size_t len = strlen(name);

	if (len == 0 || len > CTL_PARAM_NAME_MAX) {
		return false;
	}
	for (size_t i = 0; i < len; i++) {
		char c = name[i];

		if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_')) {
			return false;
		}
	}
	return true;
}

/* "a, b or c" from a NULL-terminated list; malloc'd. */
static char *
choices_text(const char *const *choices)
{
	char *out = xstrdup("");

	for (size_t i = 0; choices[i]; i++) {
		const char *sep = i == 0 ? "" : choices[i + 1] ? ", " : " or ";
		char *next = xasprintf("%s%s%s", out, sep, choices[i]);

		free(out);
		out = next;
	}
	return out;
}

/* Check one value against its spec; fill *v. */
static int
check_value(const struct ctl_param_spec *sp, const char *value, struct ctl_param_value *v,
	    char **reterr)
{
	_cleanup_free_ char *t = show(value, strlen(value));

	v->s = value;
	switch (sp->type) {
	case CTL_PARAM_BOOL:
		if (strcmp(value, "true") == 0 || strcmp(value, "false") == 0) {
			v->b = value[0] == 't';
			return 0;
		}
		/* torch 2.x's words exactly. */
		*reterr =
			xasprintf("Invalid value for %s valid values are true or false", sp->name);
		return -EINVAL;
	case CTL_PARAM_INT:
		if (parse_int(value, sp->min, sp->max, &v->i) == 0) {
			return 0;
		}
		*reterr = xasprintf("Invalid value for %s: expected an integer from %lld to %lld, "
				    "not '%s'",
				    sp->name, sp->min, sp->max, t);
		return -EINVAL;
	case CTL_PARAM_CHOICE:
		for (size_t i = 0; sp->choices[i]; i++) {
			if (strcmp(sp->choices[i], value) == 0) {
				v->i = (long long)i;
				return 0;
			}
		}
		{
			_cleanup_free_ char *list = choices_text(sp->choices);

			*reterr = xasprintf("Invalid value for %s: expected %s, not '%s'", sp->name,
					    list, t);
		}
		return -EINVAL;
	case CTL_PARAM_SIGNAL: {
		int sig = signal_from_name(value);

		if (sig > 0) {
			v->i = sig;
			return 0;
		}
		*reterr = xasprintf("Invalid value for %s: expected a signal name (SIGUSR1, USR1) "
				    "or number, not '%s'",
				    sp->name, t);
		return -EINVAL;
	}
	case CTL_PARAM_STRING:
		return 0;
	}
	return 0;
}

int
ctl_params_validate(const struct ctl_param_spec *spec, size_t n_spec, const struct ctl_query *q,
		    struct ctl_param_value *ret, char **reterr)
{
	for (size_t k = 0; k < n_spec; k++) {
		ret[k] = (struct ctl_param_value){0};
	}
	for (size_t i = 0; i < q->n; i++) {
		const char *name = q->p[i].name;
		size_t k;

		for (k = 0; k < n_spec; k++) {
			if (strcmp(spec[k].name, name) == 0) {
				break;
			}
		}
		if (k == n_spec) {
			_cleanup_free_ char *t = show(name, strlen(name));

			*reterr = xasprintf(
				"Invalid parameters - unexpected param passed in: %s%s", t,
				ctl_param_name_valid(name) ? ""
							   : " (parameter names are lower-case)");
			return -EINVAL;
		}
		if (ret[k].set) {
			*reterr = xasprintf("Invalid parameters - %s given more than once", name);
			return -EINVAL;
		}
		if (check_value(&spec[k], q->p[i].value, &ret[k], reterr) < 0) {
			return -EINVAL;
		}
		ret[k].set = true;
	}
	for (size_t k = 0; k < n_spec; k++) {
		if (spec[k].required && !ret[k].set) {
			*reterr = xasprintf("Invalid parameters - missing parameter: %s",
					    spec[k].name);
			return -EINVAL;
		}
	}
	return 0;
}
