/* config_policy.c — elasticd's restart policy options: value parsers for
 * config.c's option table, and the checks across options. */
#include "config_policy.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"
#include "config_internal.h"
#include "util.h"

/* Longest backoff and window accepted, seconds (a year). */

/* A number of seconds in s[0..len), 0 to CONFIG_SECONDS_MAX. */
static int
seconds_n(const char *s, size_t len, double *ret)
{
	_cleanup_free_ char *t = xstrndup(s, len);
	double v;

	if (parse_double(t, &v) < 0 || !(v >= 0 && v <= CONFIG_SECONDS_MAX)) {
		return -EINVAL;
	}
	*ret = v;
	return 0;
}

int
config_set_restart_backoff(struct config *cfg, const struct config_option *o, const char *name,
			   const char *value, char **reterr)
{
	const char *colon = strchr(value, ':');
	double min, max;

	if (seconds_n(value, colon ? (size_t)(colon - value) : strlen(value), &min) < 0 ||
	    (colon && seconds_n(colon + 1, strlen(colon + 1), &max) < 0)) {
		return config_invalid(reterr, name, value,
				      "expected MIN:MAX seconds (e.g. 1:60), or 0 for no backoff");
	}
	if (!colon) {
		max = min;
	}
	if (max > 0 && (min <= 0 || min > max)) {
		return config_invalid(reterr, name, value, "expected 0 < MIN <= MAX");
	}
	cfg->restart_backoff_min = min;
	cfg->restart_backoff_max = max;
	return 0;
}

int
config_set_restart_window(struct config *cfg, const struct config_option *o, const char *name,
			  const char *value, char **reterr)
{
	bool quarantine = strcmp(o->name, "quarantine") == 0;
	int *ret_n = quarantine ? &cfg->quarantine_n : &cfg->restart_window_n;
	double *ret_w = quarantine ? &cfg->quarantine_s : &cfg->restart_window_s;
	const char *slash = strchr(value, '/');
	_cleanup_free_ char *n_s = NULL;
	long long n;
	double w;

	if (!*value || strcmp(value, "0") == 0) {
		*ret_n = 0;
		*ret_w = 0;
		return 0;
	}
	if (!slash) {
		return config_invalid(reterr, name, value,
				      quarantine
					      ? "expected F/W: F failed attempts of this node in W "
						"seconds (e.g. 3/3600)"
					      : "expected N/W: at most N failure restarts in W "
						"seconds (e.g. 3/3600)");
	}
	n_s = xstrndup(value, (size_t)(slash - value));
	if (parse_int(n_s, 1, 1000000, &n) < 0) {
		return config_invalid(reterr, name, value,
				      "N must be an integer from 1 to 1000000");
	}
	if (seconds_n(slash + 1, strlen(slash + 1), &w) < 0 || w <= 0) {
		return config_invalid(reterr, name, value, "W must be a number of seconds > 0");
	}
	*ret_n = (int)n;
	*ret_w = w;
	return 0;
}

int
config_set_exit_code_list(struct config *cfg, const struct config_option *o, const char *name,
			  const char *value, char **reterr)
{
	int *codes = NULL;
	size_t n = 0;
	const char *p = value;

	while (*value) {
		size_t len = strcspn(p, ",");
		_cleanup_free_ char *t = xstrndup(p, len);
		long long code;
		bool seen = false;

		if (parse_int(t, 1, 255, &code) < 0) {
			free(codes);
			return config_invalid(
				reterr, name, value,
				"expected a comma-separated list of exit codes 1 to 255 "
				"(e.g. 3,42)");
		}
		for (size_t i = 0; i < n; i++) {
			seen = seen || codes[i] == (int)code;
		}
		if (!seen) {
			codes = xrealloc(codes, (n + 1) * sizeof(*codes));
			codes[n++] = (int)code;
		}
		if (p[len] == '\0') {
			break;
		}
		p += len + 1;
	}
	free(cfg->no_restart_exit_codes);
	cfg->no_restart_exit_codes = codes;
	cfg->n_no_restart_exit_codes = n;
	return 0;
}

int
config_set_exit_codes(struct config *cfg, const struct config_option *o, const char *name,
		      const char *value, char **reterr)
{
	if (strcmp(value, "torchrun") != 0 && strcmp(value, "detailed") != 0) {
		return config_invalid(reterr, name, value, "expected torchrun or detailed");
	}
	cfg->exit_codes_detailed = strcmp(value, "detailed") == 0;
	return 0;
}

static bool
handled(const struct config *cfg, int sig)
{
	for (size_t i = 0; i < cfg->n_signals; i++) {
		if (cfg->signals[i] == sig) {
			return true;
		}
	}
	return false;
}

int
config_check_policy(struct config *cfg, bool term_given, bool forward_given, bool attempts_given,
		    char **reterr)
{
	size_t n = 0;

	if (!term_given) {
		cfg->term_timeout = cfg->shutdown_timeout;
	}
	for (size_t i = 0; i < cfg->n_forward_signals; i++) {
		int sig = cfg->forward_signals[i];

		if (!handled(cfg, sig)) {
			cfg->forward_signals[n++] = sig;
		} else if (forward_given) {
			*reterr = xasprintf("--forward-signals: %s is also in --signals-to-handle "
					    "(which stops the job); list it in one of them",
					    signal_name(sig));
			return -EINVAL;
		}
	}
	cfg->n_forward_signals = n;
	if (attempts_given && !cfg->progress_file) {
		*reterr = xstrdup("--progress-attempts needs --progress-file");
		return -EINVAL;
	}
	return 0;
}

bool
config_no_restart_code(const struct config *cfg, int exitcode)
{
	for (size_t i = 0; i < cfg->n_no_restart_exit_codes; i++) {
		if (cfg->no_restart_exit_codes[i] == exitcode) {
			return true;
		}
	}
	return false;
}

bool
config_forwards_signal(const struct config *cfg, int sig)
{
	for (size_t i = 0; i < cfg->n_forward_signals; i++) {
		if (cfg->forward_signals[i] == sig) {
			return true;
		}
	}
	return false;
}
