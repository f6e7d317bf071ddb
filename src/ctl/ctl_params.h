/* ctl_params.h — the parameters of a control-plane request, as torch 2.x's
 * WorkerServer handlers see them: the query string (and a form-encoded POST
 * body) split into name=value pairs, then checked against the handler's
 * parameter spec. Names are lower-case and known to the handler, booleans are
 * exactly "true" or "false", integers lie in their range; anything else is
 * refused with a one-line reason that the transport answers with 400. Pure:
 * no I/O, no libevent, no logging. */
#pragma once

#include <stdbool.h>
#include <stddef.h>

/* Limits on what a client may send. */
#define CTL_PARAMS_MAX 32        /* parameters in one request */
#define CTL_PARAM_NAME_MAX 64    /* bytes of a decoded name */
#define CTL_PARAM_VALUE_MAX 4096 /* bytes of a decoded value */
#define CTL_QUERY_MAX 16384      /* bytes of a raw query string or form body */

enum ctl_param_type {
	CTL_PARAM_BOOL,   /* exactly "true" or "false" (torch's rule) */
	CTL_PARAM_INT,    /* a base-10 integer in [min, max] */
	CTL_PARAM_CHOICE, /* exactly one of choices */
	CTL_PARAM_SIGNAL, /* "SIGTERM", "TERM" or a number 1..64 naming a signal */
	CTL_PARAM_STRING, /* any text up to CTL_PARAM_VALUE_MAX bytes */
};

/* One parameter a handler accepts. */
struct ctl_param_spec {
	const char *name; /* lower-case [a-z0-9_] */
	enum ctl_param_type type;
	long long min, max;         /* CTL_PARAM_INT: inclusive bounds */
	const char *const *choices; /* CTL_PARAM_CHOICE: NULL-terminated */
	bool required;
	const char *help; /* one line, for the man page and --help-like listings */
};

/* One parameter as received: decoded, NUL-terminated, owned by the query. */
struct ctl_query_param {
	char *name;
	char *value;
};

/* The parameters of one request, in the order received. */
struct ctl_query {
	size_t n;
	struct ctl_query_param p[CTL_PARAMS_MAX];
};

/* A parameter after validation, by spec index. */
struct ctl_param_value {
	bool set;      /* given in the request */
	bool b;        /* CTL_PARAM_BOOL */
	long long i;   /* CTL_PARAM_INT; CTL_PARAM_SIGNAL: the signal number */
	const char *s; /* the decoded text (borrowed from the query), NULL when not set */
};

/* Split s[0..len) — a query string without '?', or an
 * application/x-www-form-urlencoded body — into name=value pairs and append
 * them to *q (zero it before the first call; call again to append a body's
 * pairs). Pairs are separated by '&'; empty pairs ("a=1&&b=2") are skipped; a
 * pair without '=' has the value ""; '+' is a space and %XX a byte, as
 * cpp-httplib (torch's WorkerServer) decodes them. Refused, with *reterr a
 * malloc'd one-line reason: more than CTL_QUERY_MAX bytes or CTL_PARAMS_MAX
 * pairs in all, an empty name, a malformed %-escape, a decoded NUL byte, a name
 * over CTL_PARAM_NAME_MAX or a value over CTL_PARAM_VALUE_MAX bytes. Returns 0
 * or -EINVAL (pairs decoded so far stay in *q; release it either way). */
int ctl_query_parse(const char *s, size_t len, struct ctl_query *q, char **reterr);

/* Free the strings of *q and zero it; accepts a zeroed query. */
void ctl_query_release(struct ctl_query *q);

/* Check q against the n_spec parameters a handler accepts, as torch 2.x's
 * WorkerServer handlers do, and fill ret[0..n_spec) (overwritten; ret[i]
 * belongs to spec[i]). Each received parameter must have a lower-case name
 * ([a-z0-9_]), be one of spec's, appear once, and have a valid value; every
 * required parameter must be present. The first problem found, in the order
 * received, is the reason in *reterr (malloc'd, one line, the client's text
 * shown at most 64 bytes with control bytes as '?'), e.g.
 *   Invalid parameters - unexpected param passed in: Follow
 *   Invalid value for follow valid values are true or false
 *   Invalid value for lines: expected an integer from 1 to 100000, not 'x'
 * Returns 0, or -EINVAL (the transport's 400). ret borrows q's strings. */
int ctl_params_validate(const struct ctl_param_spec *spec, size_t n_spec, const struct ctl_query *q,
			struct ctl_param_value *ret, char **reterr);

/* Whether name is a valid parameter or handler name: 1..CTL_PARAM_NAME_MAX
 * bytes of [a-z0-9_]. */
bool ctl_param_name_valid(const char *name);
