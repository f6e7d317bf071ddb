/* config_policy.h — the values of elasticd's restart policy options
 * (--restart-backoff, --restart-window, --no-restart-exit-codes) and the
 * checks that tie the restart and signal options together. Handlers of
 * config.c's option table; nothing here prints or exits. */
#pragma once

#include <stdbool.h>

struct config;
struct config_option;

/* --restart-backoff: "MIN:MAX" seconds (0 < MIN <= MAX), "S" for MIN = MAX =
 * S, or "0" for none. Stores restart_backoff_min/max. Returns 0, or -EINVAL
 * with *reterr naming name and the value. */
int config_set_restart_backoff(struct config *cfg, const struct config_option *o, const char *name,
			       const char *value, char **reterr);

/* --restart-window: "N/W", N >= 1 failure restarts within W > 0 seconds, or
 * "" / "0" for none. Stores restart_window_n/_s. Returns 0 or -EINVAL. */
int config_set_restart_window(struct config *cfg, const struct config_option *o, const char *name,
			      const char *value, char **reterr);

/* --no-restart-exit-codes: "3,42" (1 to 255, repeats kept once), "" for none.
 * Stores no_restart_exit_codes. Returns 0 or -EINVAL. */
int config_set_exit_code_list(struct config *cfg, const struct config_option *o, const char *name,
			      const char *value, char **reterr);

/* --exit-codes: "torchrun" (0/1/2) or "detailed". Stores exit_codes_detailed.
 * Returns 0 or -EINVAL. */
int config_set_exit_codes(struct config *cfg, const struct config_option *o, const char *name,
			  const char *value, char **reterr);

/* After every layer is applied: --term-timeout, unless term_given, is
 * --shutdown-timeout; a handled signal (--signals-to-handle) is dropped from
 * --forward-signals, or refused when forward_given (the option was set, not
 * defaulted); --progress-attempts needs --progress-file when
 * attempts_given. Returns 0, or -EINVAL with *reterr. */
int config_check_policy(struct config *cfg, bool term_given, bool forward_given,
			bool attempts_given, char **reterr);

/* Whether a worker exit code is one of --no-restart-exit-codes. */
bool config_no_restart_code(const struct config *cfg, int exitcode);

/* Whether sig is one of --forward-signals. */
bool config_forwards_signal(const struct config *cfg, int sig);
