/* config_internal.h — what config.c, config_values.c, config_options.c and
 * config_usage.c share and nothing else may use: the option table's row type,
 * the table itself, its lookups and the value handlers its rows name. */
#pragma once

#include <stdbool.h>
#include <stddef.h>

struct config;
struct rdzv_conf_entry;

/* The option table's row type; the handlers below read `offset`, `choices`,
 * `min` and `max` from it. */
enum option_kind {
	OPT_VALUE,   /* takes one value: --x V, --x=V, -xV, -x V */
	OPT_FLAG,    /* no value; PET_<DEST> is an integer, non-zero turns it on */
	OPT_HELP,    /* -h/--help: config_parse returns CONFIG_HELP */
	OPT_VERSION, /* --version: config_parse returns CONFIG_VERSION */
};

enum option_group {
	GROUP_WORKERS,
	GROUP_RESTARTS,
	GROUP_HANG,
	GROUP_HEALTH,
	GROUP_RDZV,
	GROUP_LOGS,
	GROUP_SIGNALS,
	GROUP_OTHER,
	GROUP_COUNT,
};

struct config_option {
	const char *name;  /* long name, dash spelling, without "--"; gives the underscore
			    * spelling, the dest and PET_<DEST> */
	const char *alias; /* a second long name for the same option (--run-id), or NULL */
	char short_name;   /* 'r' for -r, or 0 */
	enum option_kind kind;
	bool env;                 /* default from PET_<DEST> (torchrun's `env`/`check_env`) */
	const char *env_fallback; /* variable consulted after PET_<DEST>, or NULL */
	const char *def;          /* coded default, converted by `set`; NULL: none */
	const char *def_service;  /* the default as a service (--config given or
				   * $NOTIFY_SOCKET set), when it differs; NULL: def */
	/* Validate and store a value (OPT_VALUE, OPT_FLAG). 0 or -EINVAL. */
	int (*set)(struct config *cfg, const struct config_option *o, const char *name,
		   const char *value, char **reterr);
	size_t offset;              /* field for the generic handlers */
	const char *const *choices; /* set_choice: NULL-terminated list */
	long long min, max;         /* set_int: inclusive bounds */
	enum option_group group;    /* --help section */
	const char *metavar;        /* --help: what the value looks like */
	const char *help;           /* --help: one sentence, no default */
	bool repeat;                /* each occurrence adds (--health-check); the file may
				     * set it on several lines */
};

/* Value handlers (config_values.c): the functions the table's rows name as
 * `set`. Each validates value, stores it in cfg (the last occurrence wins) and
 * returns 0, or -EINVAL with *reterr "NAME: invalid value 'VALUE': reason";
 * name is where the value came from ("--nnodes", "PET_NNODES"). */

/* A copy of value in the char * field at o->offset. */
int config_set_string(struct config *cfg, const struct config_option *o, const char *name,
		      const char *value, char **reterr);
/* As config_set_string, but an empty value is refused (-EINVAL): a path. */
int config_set_nonempty_string(struct config *cfg, const struct config_option *o, const char *name,
			       const char *value, char **reterr);
/* One of o->choices, copied to the char * field at o->offset. */
int config_set_choice(struct config *cfg, const struct config_option *o, const char *name,
		      const char *value, char **reterr);
/* An integer in o->min..o->max, in the int field at o->offset. */
int config_set_int(struct config *cfg, const struct config_option *o, const char *name,
		   const char *value, char **reterr);
/* The longest duration a seconds option takes: a year (31536000 s). Longer
 * ones would overflow the microsecond timers (doubled cooldowns included). */
#define CONFIG_SECONDS_MAX (365.0 * 24 * 3600)

/* A number of seconds from 0 to CONFIG_SECONDS_MAX, in the double field at
 * o->offset. */
int config_set_seconds(struct config *cfg, const struct config_option *o, const char *name,
		       const char *value, char **reterr);
/* Sets the bool field at o->offset; value is ignored. */
int config_set_flag(struct config *cfg, const struct config_option *o, const char *name,
		    const char *value, char **reterr);
/* An octal file mode, at most 0777, with 0600 in it (--control-socket-mode). */
int config_set_mode(struct config *cfg, const struct config_option *o, const char *name,
		    const char *value, char **reterr);
/* --run-path: always refused, with the reason. */
int config_refuse_run_path(struct config *cfg, const struct config_option *o, const char *name,
			   const char *value, char **reterr);
/* --nnodes: "N" or "MIN:MAX". */
int config_set_nnodes(struct config *cfg, const struct config_option *o, const char *name,
		      const char *value, char **reterr);
/* --nproc-per-node: a number, cpu, gpu, xpu or auto. */
int config_set_nproc(struct config *cfg, const struct config_option *o, const char *name,
		     const char *value, char **reterr);
/* --gpu-bus-ids: a list of PCI bus ids (numa_busid_list_parse). */
int config_set_gpu_bus_ids(struct config *cfg, const struct config_option *o, const char *name,
			   const char *value, char **reterr);
/* --rdzv-conf: "k=v,k=v", stripped; a repeated key keeps its last value. */
int config_set_rdzv_conf(struct config *cfg, const struct config_option *o, const char *name,
			 const char *value, char **reterr);
/* -r/--redirects, -t/--tee: a std_map in the field at o->offset. */
int config_set_std_map(struct config *cfg, const struct config_option *o, const char *name,
		       const char *value, char **reterr);
/* --local-ranks-filter: "0,2,..." local ranks. */
int config_set_ranks_filter(struct config *cfg, const struct config_option *o, const char *name,
			    const char *value, char **reterr);
/* --signals-to-handle: a list of signal names. */
int config_set_signals(struct config *cfg, const struct config_option *o, const char *name,
		       const char *value, char **reterr);
/* --forward-signals: a list of signal names, "" for none. */
int config_set_forward_signals(struct config *cfg, const struct config_option *o, const char *name,
			       const char *value, char **reterr);
/* --logs-specs: only "default". */
int config_set_logs_specs(struct config *cfg, const struct config_option *o, const char *name,
			  const char *value, char **reterr);
/* --rdzv-backend: a choice; "etcd-v2" refused with the reason. */
int config_set_rdzv_backend(struct config *cfg, const struct config_option *o, const char *name,
			    const char *value, char **reterr);

/* --health-check, --health-writable: a check of that kind with value. */
int config_add_health_check(struct config *cfg, const struct config_option *o, const char *name,
			    const char *value, char **reterr);
/* --health-gpus N (>= 1; replaces an earlier one). */
int config_set_health_gpus(struct config *cfg, const struct config_option *o, const char *name,
			   const char *value, char **reterr);
/* --health-nics LIST (health_parse_nics; replaces an earlier one). */
int config_set_health_nics(struct config *cfg, const struct config_option *o, const char *name,
			   const char *value, char **reterr);
/* --health-free-space PATH:SIZE (health_parse_free_space). */
int config_add_health_free_space(struct config *cfg, const struct config_option *o,
				 const char *name, const char *value, char **reterr);
/* --gpu-memory-threshold: a size > 0 (health_parse_size) in the uint64_t field. */
int config_set_size(struct config *cfg, const struct config_option *o, const char *name,
		    const char *value, char **reterr);
/* --quarantine-action: wait or exit, in quarantine_exit. */
int config_set_quarantine_action(struct config *cfg, const struct config_option *o,
				 const char *name, const char *value, char **reterr);
/* --health-timeout and the like: seconds > 0, at most CONFIG_SECONDS_MAX. */
int config_set_positive_seconds(struct config *cfg, const struct config_option *o, const char *name,
				const char *value, char **reterr);

/* Helpers of the handlers that the other config files use too. */

/* Returns -EINVAL with *reterr "NAME: invalid value 'VALUE': REASON". */
int config_invalid(char **reterr, const char *name, const char *value, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));
/* A new "a, b or c" (last_sep " or "), each item prefixed with prefix. */
char *config_join_list(const char *const *items, const char *prefix, const char *last_sep);
/* Whether s[0..len) is one or more decimal digits. */
bool config_all_digits(const char *s, size_t len);
/* Frees n --rdzv-conf entries and the array. */
void config_rdzv_conf_free(struct rdzv_conf_entry *entries, size_t n);

/* The option table (config_options.c): one row per option, in --help order
 * within each group. */
#define CONFIG_OPTION_COUNT 73
extern const struct config_option config_options[CONFIG_OPTION_COUNT];

/* The index in config_options of the option whose long name is name (dash
 * spelling), or CONFIG_OPTION_COUNT when none is. */
size_t config_option_index(const char *name);

/* The option named by "--" + s[0..len): exactly in any of its spellings, or as
 * a prefix of the spellings of one option only (argparse's allow_abbrev). NULL
 * with *ret_n the number of options the prefix matches (0 unknown, > 1
 * ambiguous), listed in matches when non-NULL. */
const struct config_option *config_option_find_long(const char *s, size_t len, size_t *ret_n,
						    const struct config_option **matches);

/* The option whose short letter is c, or NULL (always NULL for c == 0). */
const struct config_option *config_option_find_short(char c);

/* The option whose long name or alias is key, in its dash or underscore
 * spelling; no prefixes. NULL when none. */
const struct config_option *config_option_find_exact(const char *key);
