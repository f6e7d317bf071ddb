/* config_values.c — the value handlers of config_options.c's table: each
 * validates one value of one option and stores it in the config, and the
 * std_map type of -r/--redirects and -t/--tee. Nothing here prints or exits. */
#include "config.h"

#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "config_internal.h"
#include "health.h"
#include "numa.h"
#include "util.h"

/* std_map: -r/--redirects and -t/--tee values. */

bool
config_all_digits(const char *s, size_t len)
{
	if (len == 0) {
		return false;
	}
	for (size_t i = 0; i < len; i++) {
		if (!isdigit((unsigned char)s[i])) {
			return false;
		}
	}
	return true;
}

static bool
is_mask(const char *s, size_t len)
{
	return len == 1 && s[0] >= '0' && s[0] <= '3';
}

int
std_map_parse(const char *s, struct std_map *ret, char **reterr)
{
	struct std_map m = {.all = STD_NONE};
	const char *p = s;

	if (is_mask(s, strlen(s))) {
		*ret = (struct std_map){.all = (enum std_mask)(s[0] - '0')};
		return 0;
	}
	for (;;) {
		size_t len = strcspn(p, ",");
		const char *colon = memchr(p, ':', len);
		_cleanup_free_ char *rank_s = NULL;
		long long rank;

		if (!colon || !config_all_digits(p, (size_t)(colon - p)) ||
		    !is_mask(colon + 1, len - (size_t)(colon - p) - 1)) {
			goto invalid;
		}
		rank_s = xstrndup(p, (size_t)(colon - p));
		if (parse_int(rank_s, 0, INT_MAX, &rank) < 0) {
			goto invalid;
		}
		for (size_t i = 0; i < m.n; i++) {
			if (m.entries[i].local_rank == (int)rank) {
				*reterr = xasprintf(
					"invalid value '%s': local rank %lld is given twice", s,
					rank);
				free(m.entries);
				return -EINVAL;
			}
		}
		m.entries = xrealloc(m.entries, (m.n + 1) * sizeof(*m.entries));
		m.entries[m.n].local_rank = (int)rank;
		m.entries[m.n].mask = (enum std_mask)(colon[1] - '0');
		m.n++;
		if (p[len] == '\0') {
			break;
		}
		p += len + 1;
	}
	*ret = m;
	return 0;

invalid:
	free(m.entries);
	*reterr = xasprintf("invalid value '%s': expected a mask 0-3 (1 stdout, 2 stderr, 3 both) "
			    "or LOCAL_RANK:MASK,... (e.g. 0:1,1:2)",
			    s);
	return -EINVAL;
}

enum std_mask
std_map_get(const struct std_map *m, int local_rank)
{
	for (size_t i = 0; i < m->n; i++) {
		if (m->entries[i].local_rank == local_rank) {
			return m->entries[i].mask;
		}
	}
	return m->all;
}

void
std_map_release(struct std_map *m)
{
	free(m->entries);
	*m = (struct std_map){.all = STD_NONE};
}

/* Value handlers. Each validates one value and stores it in the config,
 * replacing what an earlier occurrence stored (the last occurrence wins, as in
 * argparse). `name` is what the value came from ("--nnodes", "PET_NNODES"), for
 * messages. Flags get value NULL from the command line, or the PET_* string. */

#define FIELD(cfg, o, type) ((type *)(void *)((char *)(cfg) + (o)->offset))

int __attribute__((format(printf, 4, 5)))
config_invalid(char **reterr, const char *name, const char *value, const char *fmt, ...)
{
	va_list ap;
	char *reason;

	va_start(ap, fmt);
	reason = xvasprintf(fmt, ap);
	va_end(ap);
	*reterr = xasprintf("%s: invalid value '%s': %s", name, value, reason);
	free(reason);
	return -EINVAL;
}

/* "a, b or c" (last_sep " or "), each item prefixed with prefix. */
char *
config_join_list(const char *const *items, const char *prefix, const char *last_sep)
{
	char *s = xstrdup("");

	for (size_t i = 0; items[i]; i++) {
		const char *sep = i == 0 ? "" : items[i + 1] ? ", " : last_sep;
		char *t = xasprintf("%s%s%s%s", s, sep, prefix, items[i]);

		free(s);
		s = t;
	}
	return s;
}

/* Python's str.strip() of s[0..len), copied. */
static char *
strip_dup(const char *s, size_t len)
{
	while (len > 0 && isspace((unsigned char)*s)) {
		s++;
		len--;
	}
	while (len > 0 && isspace((unsigned char)s[len - 1])) {
		len--;
	}
	return xstrndup(s, len);
}

static int
parse_bounded(const char *name, const char *value, long long min, long long max, long long *ret,
	      char **reterr)
{
	long long v;
	int r;

	r = parse_int(value, LLONG_MIN, LLONG_MAX, &v);
	if (r == -ERANGE) {
		v = value[0] == '-' ? LLONG_MIN : LLONG_MAX;
	} else if (r < 0) {
		return config_invalid(reterr, name, value, "expected an integer");
	}
	if (v < min) {
		return config_invalid(reterr, name, value, "must be >= %lld", min);
	}
	if (v > max) {
		return config_invalid(reterr, name, value, "must be <= %lld", max);
	}
	*ret = v;
	return 0;
}

int
config_set_string(struct config *cfg, const struct config_option *o, const char *name,
		  const char *value, char **reterr)
{
	char **field = FIELD(cfg, o, char *);

	free(*field);
	*field = xstrdup(value);
	return 0;
}

int
config_set_nonempty_string(struct config *cfg, const struct config_option *o, const char *name,
			   const char *value, char **reterr)
{
	if (!*value) {
		return config_invalid(reterr, name, value, "must not be empty");
	}
	return config_set_string(cfg, o, name, value, reterr);
}

int
config_set_choice(struct config *cfg, const struct config_option *o, const char *name,
		  const char *value, char **reterr)
{
	_cleanup_free_ char *text = NULL;

	for (size_t i = 0; o->choices[i]; i++) {
		if (strcmp(o->choices[i], value) == 0) {
			return config_set_string(cfg, o, name, value, reterr);
		}
	}
	text = config_join_list(o->choices, "", " or ");
	return config_invalid(reterr, name, value, "expected %s", text);
}

int
config_set_int(struct config *cfg, const struct config_option *o, const char *name,
	       const char *value, char **reterr)
{
	long long v = 0;
	int r;

	r = parse_bounded(name, value, o->min, o->max, &v, reterr);
	if (r < 0) {
		return r;
	}
	*FIELD(cfg, o, int) = (int)v;
	return 0;
}

int
config_set_seconds(struct config *cfg, const struct config_option *o, const char *name,
		   const char *value, char **reterr)
{
	double v;

	if (parse_double(value, &v) < 0) {
		return config_invalid(reterr, name, value, "expected a number of seconds");
	}
	if (v < 0) {
		return config_invalid(reterr, name, value, "must be >= 0");
	}
	if (v > CONFIG_SECONDS_MAX) {
		return config_invalid(reterr, name, value, "at most %.0f seconds (a year)",
				      CONFIG_SECONDS_MAX);
	}
	*FIELD(cfg, o, double) = v;
	return 0;
}

int
config_set_flag(struct config *cfg, const struct config_option *o, const char *name,
		const char *value, char **reterr)
{
	*FIELD(cfg, o, bool) = true;
	return 0;
}

/* A socket's file mode in octal ("0660", "660"), at most 0777, that lets its
 * owner read and write (0600). */
int
config_set_mode(struct config *cfg, const struct config_option *o, const char *name,
		const char *value, char **reterr)
{
	long v = 0;
	size_t i;

	for (i = 0; value[i] >= '0' && value[i] <= '7' && i < 5; i++) {
		v = v * 8 + (value[i] - '0');
	}
	if (i == 0 || value[i] != '\0' || v > 0777) {
		return config_invalid(reterr, name, value,
				      "expected an octal file mode such as 0660");
	}
	if ((v & 0600) != 0600) {
		return config_invalid(reterr, name, value, "the owner needs read and write (0600)");
	}
	*FIELD(cfg, o, int) = (int)v;
	return 0;
}

int
config_refuse_run_path(struct config *cfg, const struct config_option *o, const char *name,
		       const char *value, char **reterr)
{
	static const char msg[] = "--run-path is not supported by elasticd: it runs the script "
				  "inside a Python multiprocessing child; drop --run-path to run "
				  "it as a process";

	if (value) {
		*reterr = xasprintf("%s=%s: %s", name, value, msg);
	} else {
		*reterr = xstrdup(msg);
	}
	return -EINVAL;
}

int
config_set_nnodes(struct config *cfg, const struct config_option *o, const char *name,
		  const char *value, char **reterr)
{
	const char *colon = strchr(value, ':');
	_cleanup_free_ char *min_s = NULL;
	long long min, max;

	if (!colon) {
		if (parse_int(value, LLONG_MIN, LLONG_MAX, &min) < 0) {
			goto invalid;
		}
		max = min;
	} else {
		min_s = xstrndup(value, (size_t)(colon - value));
		if (parse_int(min_s, LLONG_MIN, LLONG_MAX, &min) < 0 ||
		    parse_int(colon + 1, LLONG_MIN, LLONG_MAX, &max) < 0) {
			goto invalid;
		}
	}
	if (min <= 0 || min > max || max > INT_MAX) {
		return config_invalid(reterr, name, value,
				      "expected N or MIN:MAX with 0 < MIN <= MAX");
	}
	cfg->min_nodes = (int)min;
	cfg->max_nodes = (int)max;
	return 0;

invalid:
	return config_invalid(reterr, name, value, "expected N or MIN:MAX");
}

int
config_set_nproc(struct config *cfg, const struct config_option *o, const char *name,
		 const char *value, char **reterr)
{
	static const struct {
		const char *name;
		enum nproc_kind kind;
	} kinds[] = {
		{"cpu", NPROC_CPU},
		{"gpu", NPROC_GPU},
		{"xpu", NPROC_XPU},
		{"auto", NPROC_AUTO},
	};
	/* torch device types (c10 DeviceTypeName) and npu, the name Ascend's
	 * torch_npu gives torch's PrivateUse1 backend, which torchrun also accepts. */
	static const char *const uncountable[] = {"cuda", "hpu", "mps", "mtia", "npu"};
	long long n;
	int r;

	for (size_t i = 0; i < ARRAY_SIZE(kinds); i++) {
		if (strcmp(value, kinds[i].name) == 0) {
			cfg->nproc_kind = kinds[i].kind;
			cfg->nproc_per_node = 0;
			return 0;
		}
	}
	for (size_t i = 0; i < ARRAY_SIZE(uncountable); i++) {
		if (strcmp(value, uncountable[i]) == 0) {
			*reterr = xasprintf("%s: '%s': elasticd cannot count %s devices here; give "
					    "a number instead%s",
					    name, value, value,
					    strcmp(value, "cuda") == 0 ? ", or gpu" : "");
			return -EINVAL;
		}
	}
	r = parse_int(value, LLONG_MIN, LLONG_MAX, &n);
	if (r == -EINVAL) {
		return config_invalid(reterr, name, value,
				      "expected an integer, cpu, gpu, xpu or auto");
	}
	if (r < 0 || n <= 0 || n > INT_MAX) {
		return config_invalid(reterr, name, value, "must be > 0 and <= %d", INT_MAX);
	}
	cfg->nproc_kind = NPROC_INT;
	cfg->nproc_per_node = (int)n;
	return 0;
}

int
config_set_gpu_bus_ids(struct config *cfg, const struct config_option *o, const char *name,
		       const char *value, char **reterr)
{
	char **ids = NULL, *err = NULL;

	if (numa_busid_list_parse(value, &ids, &err) < 0) {
		*reterr = xasprintf("%s: %s", name, err);
		free(err);
		return -EINVAL;
	}
	strv_free(ids);
	return config_set_string(cfg, o, name, value, reterr);
}

void
config_rdzv_conf_free(struct rdzv_conf_entry *entries, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		free(entries[i].key);
		free(entries[i].value);
	}
	free(entries);
}

/* Split value on ',' and hand each piece to one(), which returns 0, or -EINVAL
 * with *reterr set. Empty pieces go to one() too. */
static int
split_commas(const char *value, int (*one)(const char *piece, void *userdata, char **reterr),
	     void *userdata, char **reterr)
{
	const char *p = value;

	for (;;) {
		size_t len = strcspn(p, ",");
		_cleanup_free_ char *piece = xstrndup(p, len);
		int r;

		r = one(piece, userdata, reterr);
		if (r < 0) {
			return r;
		}
		if (p[len] == '\0') {
			return 0;
		}
		p += len + 1;
	}
}

struct rdzv_conf_list {
	struct rdzv_conf_entry *v;
	size_t n;
	const char *name;  /* for messages */
	const char *value; /* the whole value, for messages */
};

static int
rdzv_conf_one(const char *piece, void *userdata, char **reterr)
{
	struct rdzv_conf_list *l = userdata;
	const char *eq = strchr(piece, '=');
	_cleanup_free_ char *key = strip_dup(piece, eq ? (size_t)(eq - piece) : strlen(piece));
	_cleanup_free_ char *val = eq ? strip_dup(eq + 1, strlen(eq + 1)) : NULL;
	size_t i;

	if (!*key) {
		return config_invalid(reterr, l->name, l->value,
				      "The rendezvous configuration string must be in format "
				      "<key1>=<value1>,...,<keyN>=<valueN>.");
	}
	if (!val || !*val) {
		return config_invalid(reterr, l->name, l->value,
				      "The rendezvous configuration option '%s' must have a value "
				      "specified.",
				      key);
	}
	for (i = 0; i < l->n && strcmp(l->v[i].key, key) != 0; i++) {
	}
	if (i == l->n) {
		l->v = xrealloc(l->v, (l->n + 1) * sizeof(*l->v));
		l->v[l->n].key = key;
		l->v[l->n].value = NULL;
		key = NULL;
		l->n++;
	}
	free(l->v[i].value);
	l->v[i].value = val;
	val = NULL;
	return 0;
}

/* torchrun's _parse_rendezvous_config: "k=v,k=v", the whole string, keys and
 * values stripped; a repeated key keeps its last value. */
int
config_set_rdzv_conf(struct config *cfg, const struct config_option *o, const char *name,
		     const char *value, char **reterr)
{
	_cleanup_free_ char *all = strip_dup(value, strlen(value));
	struct rdzv_conf_list l = {.name = name, .value = value};

	if (*all && split_commas(all, rdzv_conf_one, &l, reterr) < 0) {
		config_rdzv_conf_free(l.v, l.n);
		return -EINVAL;
	}
	config_rdzv_conf_free(cfg->rdzv_conf, cfg->n_rdzv_conf);
	cfg->rdzv_conf = l.v;
	cfg->n_rdzv_conf = l.n;
	return 0;
}

int
config_set_std_map(struct config *cfg, const struct config_option *o, const char *name,
		   const char *value, char **reterr)
{
	struct std_map *field = FIELD(cfg, o, struct std_map), m;
	_cleanup_free_ char *why = NULL;

	if (std_map_parse(value, &m, &why) < 0) {
		*reterr = xasprintf("%s: %s", name, why);
		return -EINVAL;
	}
	std_map_release(field);
	*field = m;
	return 0;
}

struct int_list {
	int *v;
	size_t n;
	const char *name;  /* for messages */
	const char *value; /* the whole value, for messages */
};

static void
int_list_add(struct int_list *l, int x)
{
	l->v = xrealloc(l->v, (l->n + 1) * sizeof(*l->v));
	l->v[l->n++] = x;
}

static int
local_rank_one(const char *piece, void *userdata, char **reterr)
{
	struct int_list *l = userdata;
	size_t len;
	_cleanup_free_ char *t = NULL;
	long long rank;

	/* Python's int() takes surrounding blanks: "0, 1" works with torchrun. */
	while (isspace((unsigned char)*piece)) {
		piece++;
	}
	len = strlen(piece);
	while (len > 0 && isspace((unsigned char)piece[len - 1])) {
		len--;
	}
	t = xstrndup(piece, len);
	if (!config_all_digits(t, len) || parse_int(t, 0, INT_MAX, &rank) < 0) {
		return config_invalid(
			reterr, l->name, l->value,
			"expected a comma-separated list of local ranks >= 0 (e.g. 0,1,2)");
	}
	int_list_add(l, (int)rank);
	return 0;
}

int
config_set_ranks_filter(struct config *cfg, const struct config_option *o, const char *name,
			const char *value, char **reterr)
{
	struct int_list l = {.name = name, .value = value};

	/* torchrun: `if args.local_ranks_filter:`, so "" means no filter. */
	if (*value && split_commas(value, local_rank_one, &l, reterr) < 0) {
		free(l.v);
		return -EINVAL;
	}
	free(cfg->local_ranks_filter);
	cfg->local_ranks_filter = l.v;
	cfg->n_local_ranks_filter = l.n;
	return 0;
}

static int
signal_one(const char *piece, void *userdata, char **reterr)
{
	struct int_list *l = userdata;
	_cleanup_free_ char *sig = strip_dup(piece, strlen(piece));
	int signo;

	signo = signal_from_name(sig);
	if (signo < 0) {
		return config_invalid(
			reterr, l->name, l->value,
			"unknown signal '%s' (expected names like SIGTERM or TERM, or "
			"numbers)",
			sig);
	}
	if (signo == SIGKILL || signo == SIGSTOP) {
		return config_invalid(reterr, l->name, l->value, "%s cannot be caught",
				      signal_name(signo));
	}
	if (signo == SIGCHLD) {
		return config_invalid(
			reterr, l->name, l->value,
			"SIGCHLD is how elasticd reaps its workers; it cannot be forwarded");
	}
	for (size_t i = 0; i < l->n; i++) {
		if (l->v[i] == signo) {
			return 0;
		}
	}
	int_list_add(l, signo);
	return 0;
}

int
config_set_signals(struct config *cfg, const struct config_option *o, const char *name,
		   const char *value, char **reterr)
{
	struct int_list l = {.name = name, .value = value};

	/* "" handles no signal, as torchrun (which only warns about the name ""). */
	if (*value && split_commas(value, signal_one, &l, reterr) < 0) {
		free(l.v);
		return -EINVAL;
	}
	free(cfg->signals);
	cfg->signals = l.v;
	cfg->n_signals = l.n;
	return 0;
}

int
config_set_forward_signals(struct config *cfg, const struct config_option *o, const char *name,
			   const char *value, char **reterr)
{
	struct int_list l = {.name = name, .value = value};

	if (*value && split_commas(value, signal_one, &l, reterr) < 0) {
		free(l.v);
		return -EINVAL;
	}
	free(cfg->forward_signals);
	cfg->forward_signals = l.v;
	cfg->n_forward_signals = l.n;
	return 0;
}

/* --logs-specs: torchrun loads the class of this name from the entry point
 * group torchrun.logs_specs, where torch itself registers only "default"
 * (DefaultLogsSpecs, the layout elasticd writes). There are no plug-ins here,
 * so any other name is refused rather than silently ignored. */
int
config_set_logs_specs(struct config *cfg, const struct config_option *o, const char *name,
		      const char *value, char **reterr)
{
	if (strcmp(value, "default") != 0) {
		return config_invalid(
			reterr, name, value,
			"only the default logs spec exists (torch's DefaultLogsSpecs); "
			"elasticd loads no torchrun.logs_specs plug-ins");
	}
	return config_set_string(cfg, o, name, value, reterr);
}

/* --rdzv-backend: a choice, with a word for torch's etcd v2 backend. */
int
config_set_rdzv_backend(struct config *cfg, const struct config_option *o, const char *name,
			const char *value, char **reterr)
{
	if (strcmp(value, "etcd-v2") == 0) {
		return config_invalid(
			reterr, name, value,
			"etcd's v2 API is not supported; use etcd (its v3 API) or c10d");
	}
	return config_set_choice(cfg, o, name, value, reterr);
}

/* ---- the health gate (health.h) ------------------------------------------- */

/* Drop the checks of kind from cfg's list (an option given again replaces
 * its check). */
static void
drop_health_checks(struct config *cfg, enum health_kind kind)
{
	size_t j = 0;

	for (size_t i = 0; i < cfg->n_health_checks; i++) {
		if (cfg->health_checks[i].kind == kind) {
			free(cfg->health_checks[i].name);
			free(cfg->health_checks[i].arg);
			strv_free(cfg->health_checks[i].nics);
			continue;
		}
		cfg->health_checks[j++] = cfg->health_checks[i];
	}
	cfg->n_health_checks = j;
}

int
config_add_health_check(struct config *cfg, const struct config_option *o, const char *name,
			const char *value, char **reterr)
{
	bool command = strcmp(o->name, "health-check") == 0;

	if (!*value) {
		return config_invalid(reterr, name, value,
				      command ? "expected a command" : "expected a directory");
	}
	if (!command && value[0] != '/') {
		return config_invalid(reterr, name, value, "the path must be absolute");
	}
	health_checks_add(&cfg->health_checks, &cfg->n_health_checks,
			  command ? HEALTH_COMMAND : HEALTH_WRITABLE, xstrdup(value), NULL, 0, 0);
	return 0;
}

int
config_set_health_gpus(struct config *cfg, const struct config_option *o, const char *name,
		       const char *value, char **reterr)
{
	long long v = 0;

	if (parse_int(value, 1, 1 << 20, &v) < 0) {
		return config_invalid(reterr, name, value, "expected a number of GPUs from 1 to %d",
				      1 << 20);
	}
	drop_health_checks(cfg, HEALTH_GPUS);
	health_checks_add(&cfg->health_checks, &cfg->n_health_checks, HEALTH_GPUS, NULL, NULL, 0,
			  (int)v);
	return 0;
}

int
config_set_health_nics(struct config *cfg, const struct config_option *o, const char *name,
		       const char *value, char **reterr)
{
	_cleanup_free_ char *why = NULL;
	char **nics = NULL;

	if (health_parse_nics(value, &nics, &why) < 0) {
		return config_invalid(reterr, name, value, "%s", why);
	}
	drop_health_checks(cfg, HEALTH_NICS);
	health_checks_add(&cfg->health_checks, &cfg->n_health_checks, HEALTH_NICS, NULL, nics, 0,
			  0);
	return 0;
}

int
config_add_health_free_space(struct config *cfg, const struct config_option *o, const char *name,
			     const char *value, char **reterr)
{
	_cleanup_free_ char *why = NULL;
	char *path = NULL;
	uint64_t bytes = 0;

	if (health_parse_free_space(value, &path, &bytes, &why) < 0) {
		return config_invalid(reterr, name, value, "%s", why);
	}
	health_checks_add(&cfg->health_checks, &cfg->n_health_checks, HEALTH_FREE_SPACE, path, NULL,
			  bytes, 0);
	return 0;
}

int
config_set_positive_seconds(struct config *cfg, const struct config_option *o, const char *name,
			    const char *value, char **reterr)
{
	double v;

	if (parse_double(value, &v) < 0 || !(v > 0)) {
		return config_invalid(reterr, name, value, "expected a number of seconds > 0");
	}
	return config_set_seconds(cfg, o, name, value, reterr);
}

int
config_set_size(struct config *cfg, const struct config_option *o, const char *name,
		const char *value, char **reterr)
{
	uint64_t v;

	if (health_parse_size(value, &v) < 0) {
		return config_invalid(reterr, name, value,
				      "expected a size in bytes, or with K, M, G, T, P");
	}
	if (v == 0) { /* no GPU uses less than 0 bytes: every wait would time out */
		return config_invalid(reterr, name, value, "must be > 0");
	}
	*FIELD(cfg, o, uint64_t) = v;
	return 0;
}

int
config_set_quarantine_action(struct config *cfg, const struct config_option *o, const char *name,
			     const char *value, char **reterr)
{
	if (strcmp(value, "wait") != 0 && strcmp(value, "exit") != 0) {
		return config_invalid(reterr, name, value, "expected wait or exit");
	}
	cfg->quarantine_exit = strcmp(value, "exit") == 0;
	return 0;
}
