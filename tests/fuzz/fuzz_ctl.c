/* fuzz_ctl.c — libFuzzer target for what a control-socket client or a worker
 * server controls: the first byte picks the parser.
 *   even: the rest is a query string (then, after a NUL, a form body) parsed
 *         and validated against every handler's parameter spec; whatever is
 *         accepted must be consistent (set values have text, signals are
 *         signals, integers in range, booleans from "true"/"false").
 *   odd:  the rest is a worker server's response, parsed as received so far
 *         (every prefix) and at end of file; a parsed body never exceeds the
 *         input. */
#include <signal.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "ctl_handlers.h"
#include "ctl_params.h"
#include "ctl_proxy.h"
#include "util.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void
check_params(const char *s, size_t len)
{
	const char *nul = memchr(s, '\0', len);
	size_t qlen = nul ? (size_t)(nul - s) : len;
	struct ctl_query q = {0};
	char *err = NULL;
	int r = ctl_query_parse(s, qlen, &q, &err);

	if (r == 0 && nul) {
		r = ctl_query_parse(nul + 1, len - qlen - 1, &q, &err);
	}
	if ((r < 0) != (err != NULL) || q.n > CTL_PARAMS_MAX) {
		abort();
	}
	free(err);
	err = NULL;
	for (size_t i = 0; i < q.n; i++) {
		if (strlen(q.p[i].name) == 0 || strlen(q.p[i].name) > CTL_PARAM_NAME_MAX ||
		    strlen(q.p[i].value) > CTL_PARAM_VALUE_MAX) {
			abort();
		}
	}
	for (size_t h = 0; h < ctl_n_handlers; h++) {
		const struct ctl_handler *hd = &ctl_handlers[h];
		struct ctl_param_value v[CTL_HANDLER_PARAMS_MAX];

		if (ctl_params_validate(hd->params, hd->n_params, &q, v, &err) < 0) {
			if (!err || strchr(err, '\n')) {
				abort();
			}
			free(err);
			err = NULL;
			continue;
		}
		for (size_t k = 0; k < hd->n_params; k++) {
			const struct ctl_param_spec *sp = &hd->params[k];

			if (v[k].set != (v[k].s != NULL) || (sp->required && !v[k].set)) {
				abort();
			}
			if (!v[k].set) {
				continue;
			}
			switch (sp->type) {
			case CTL_PARAM_BOOL:
				if (strcmp(v[k].s, v[k].b ? "true" : "false") != 0) {
					abort();
				}
				break;
			case CTL_PARAM_INT:
				if (v[k].i < sp->min || v[k].i > sp->max) {
					abort();
				}
				break;
			case CTL_PARAM_CHOICE:
				if (strcmp(sp->choices[v[k].i], v[k].s) != 0) {
					abort();
				}
				break;
			case CTL_PARAM_SIGNAL:
				if (v[k].i < 1 || v[k].i > 64 || !signal_name((int)v[k].i)) {
					abort();
				}
				break;
			case CTL_PARAM_STRING:
				break;
			}
		}
	}
	ctl_query_release(&q);
}

static void
check_response(const char *s, size_t len)
{
	/* A few prefixes, then all of it at end of file. */
	for (size_t cut = 0; cut <= len; cut += len / 4 + 1) {
		for (int eof = 0; eof < 2; eof++) {
			struct ctl_proxy_response r = {0};
			char *err = NULL;
			size_t n = cut < len ? cut : len;
			int ret = ctl_proxy_parse_response(s, n, eof, &r, &err);

			if ((ret < 0) != (err != NULL)) {
				abort();
			}
			if (ret == 1 && (r.body_len > n || r.status < 100 || r.status > 999 ||
					 r.body[r.body_len] != '\0')) {
				abort();
			}
			if (eof && ret == 0) {
				abort(); /* at end of file there is an answer or an error */
			}
			free(err);
			ctl_proxy_response_release(&r);
		}
	}
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *s;

	if (size == 0) {
		return 0;
	}
	s = xmalloc(size);
	memcpy(s, data + 1, size - 1);
	if (data[0] % 2 == 0) {
		check_params(s, size - 1);
	} else {
		check_response(s, size - 1);
	}
	free(s);
	return 0;
}
