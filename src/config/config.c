/* config.c — torchrun's command line, in layers.
 *
 * A small argparse-like scanner walks argv against the option table
 * (config_options.c); then the --config file (elasticd.conf(5)) sets what the
 * command line did not; then every option still unset takes its PET_* value
 * or its coded default, converted by the option's handler (config_values.c),
 * as argparse converts string defaults through `type=`. Last come the checks
 * across options. Nothing here prints or exits. */
#include "config.h"

#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <string.h>

#include "config_file.h"
#include "config_internal.h"
#include "health.h"
#include "hang.h"
#include "config_policy.h"
#include "numa.h"
#include "util.h"

/* Where an option's value came from. */
enum option_source {
	SRC_UNSET = 0,
	SRC_DEFAULT,
	SRC_FILE,
	SRC_ENV,
	SRC_CLI,
};

/* argparse's _negative_number_matcher: ^-\d+$|^-\d*\.\d+$ */
static bool
is_negative_number(const char *arg)
{
	const char *dot;

	if (arg[0] != '-') {
		return false;
	}
	arg++;
	dot = strchr(arg, '.');
	if (!dot) {
		return config_all_digits(arg, strlen(arg));
	}
	return (dot == arg || config_all_digits(arg, (size_t)(dot - arg))) &&
	       config_all_digits(dot + 1, strlen(dot + 1));
}

/* Whether arg is an option string (known, ambiguous or unknown) rather than a
 * positional, as argparse's _parse_optional decides: "-" and "" are positional;
 * so are negative numbers and strings with a space that name no option. */
static bool
is_option_string(const char *arg)
{
	size_t n;

	if (arg[0] != '-' || arg[1] == '\0') {
		return false;
	}
	if (arg[1] == '-') {
		if (arg[2] == '\0' ||
		    config_option_find_long(arg + 2, strcspn(arg + 2, "="), &n, NULL) || n > 0) {
			return true;
		}
	} else if (config_option_find_short(arg[1])) {
		return true;
	}
	return !is_negative_number(arg) && !strchr(arg, ' ');
}

/* Command-line scanning. */

enum scan_result {
	SCAN_OPTION,
	SCAN_HELP,
	SCAN_VERSION,
};

/* Apply option o from the command line; its value is explicit (from "--x=V" or
 * "-xV") or the next argument, which *i then moves past. */
static int
take_option(struct config *cfg, const struct config_option *o, const char *explicit, int argc,
	    char *const argv[], int *i, enum option_source *src, char **reterr)
{
	_cleanup_free_ char *name = xasprintf("--%s", o->name);
	int r;

	if (explicit && o->kind != OPT_VALUE) {
		*reterr = xasprintf("%s: ignored explicit argument '%s'", name, explicit);
		return -EINVAL;
	}
	switch (o->kind) {
	case OPT_HELP:
		return SCAN_HELP;
	case OPT_VERSION:
		return SCAN_VERSION;
	case OPT_FLAG:
		break;
	case OPT_VALUE:
		if (!explicit) {
			if (*i + 1 >= argc || is_option_string(argv[*i + 1])) {
				*reterr = xasprintf("%s: expected one argument", name);
				return -EINVAL;
			}
			explicit = argv[++*i];
		}
		break;
	}
	src[o - config_options] = SRC_CLI;
	r = o->set(cfg, o, name, explicit, reterr);
	return r < 0 ? r : SCAN_OPTION;
}

static int
parse_long(struct config *cfg, int argc, char *const argv[], int *i, enum option_source *src,
	   char **reterr)
{
	const struct config_option *matches[ARRAY_SIZE(config_options)];
	const char *arg = argv[*i], *s = arg + 2;
	size_t len = strcspn(s, "="), n;
	const struct config_option *o;
	char *list;

	o = config_option_find_long(s, len, &n, matches);
	if (o) {
		return take_option(cfg, o, s[len] == '=' ? s + len + 1 : NULL, argc, argv, i, src,
				   reterr);
	}
	if (n == 0) {
		*reterr = xasprintf("unrecognized argument: %s", arg);
		return -EINVAL;
	}
	list = xstrdup("");
	for (size_t k = 0; k < n; k++) {
		char *t = xasprintf("%s%s--%s", list, k == 0 ? "" : ", ", matches[k]->name);

		free(list);
		list = t;
	}
	*reterr = xasprintf("ambiguous option: --%.*s could match %s", (int)len, s, list);
	free(list);
	return -EINVAL;
}

/* "-r3", "-r=3", "-r 3", and clusters of flags ("-mr3"). */
static int
parse_short(struct config *cfg, int argc, char *const argv[], int *i, enum option_source *src,
	    char **reterr)
{
	const char *arg = argv[*i], *p = arg + 1;

	for (;;) {
		const struct config_option *o = config_option_find_short(*p);
		int r;

		if (!o) {
			*reterr = xasprintf("unrecognized argument: %s", arg);
			return -EINVAL;
		}
		if (o->kind == OPT_VALUE) {
			const char *v = NULL;

			if (p[1] != '\0') {
				v = p == arg + 1 && p[1] == '=' ? p + 2 : p + 1;
			}
			return take_option(cfg, o, v, argc, argv, i, src, reterr);
		}
		r = take_option(cfg, o, NULL, argc, argv, i, src, reterr);
		if (r != SCAN_OPTION) {
			return r;
		}
		p++;
		if (*p == '\0') {
			return SCAN_OPTION;
		}
		if (!config_option_find_short(*p)) {
			*reterr =
				xasprintf("-%c: ignored explicit argument '%s'", o->short_name, p);
			return -EINVAL;
		}
	}
}

/* Environment and coded defaults. */

static const char *
env_get(char *const envp[], const char *name)
{
	size_t n = strlen(name);

	for (size_t i = 0; envp && envp[i]; i++) {
		if (strncmp(envp[i], name, n) == 0 && envp[i][n] == '=') {
			return envp[i] + n + 1;
		}
	}
	return NULL;
}

/* "PET_" + the dest upper-cased: "nproc-per-node" -> "PET_NPROC_PER_NODE". */
static char *
pet_name(const struct config_option *o)
{
	char *s = xasprintf("PET_%s", o->name);

	for (char *p = s + 4; *p; p++) {
		*p = *p == '-' ? '_' : (char)toupper((unsigned char)*p);
	}
	return s;
}

static int
apply_env(struct config *cfg, const struct config_option *o, const char *var, const char *value,
	  char **reterr)
{
	long long on;

	switch (o->kind) {
	case OPT_VALUE:
		return o->set(cfg, o, var, value, reterr);
	case OPT_FLAG:
		if (parse_int(value, LLONG_MIN, LLONG_MAX, &on) < 0) {
			return config_invalid(reterr, var, value,
					      "expected an integer (1 on, 0 off)");
		}
		return on ? o->set(cfg, o, var, value, reterr) : 0;
	case OPT_HELP:
	case OPT_VERSION:
		break;
	}
	return 0;
}

/* An option's value in the environment: PET_<DEST>, else its fallback
 * variable. Returns the value (borrowed from envp) with the variable's name in
 * *ret_var (caller frees), or NULL with *ret_var NULL. */
static const char *
option_env(const struct config_option *o, char *const envp[], char **ret_var)
{
	const char *value;

	*ret_var = NULL;
	if (o->env) {
		char *pet = pet_name(o);

		value = env_get(envp, pet);
		if (value) {
			*ret_var = pet;
			return value;
		}
		free(pet);
	}
	if (o->env_fallback) {
		value = env_get(envp, o->env_fallback);
		if (value) {
			*ret_var = xstrdup(o->env_fallback);
			return value;
		}
	}
	return NULL;
}

/* Every option still unset takes its environment value, else its default (the
 * service default when service). */
static int
apply_defaults(struct config *cfg, char *const envp[], enum option_source *src, bool service,
	       char **reterr)
{
	for (size_t k = 0; k < ARRAY_SIZE(config_options); k++) {
		const struct config_option *o = &config_options[k];
		const char *def = service && o->def_service ? o->def_service : o->def;
		_cleanup_free_ char *var = NULL, *name = NULL;
		const char *value;
		int r = 0;

		if (src[k] != SRC_UNSET) {
			continue;
		}
		value = option_env(o, envp, &var);
		if (value) {
			src[k] = SRC_ENV;
			r = apply_env(cfg, o, var, value, reterr);
		} else if (def) {
			src[k] = SRC_DEFAULT;
			name = xasprintf("--%s default", o->name);
			r = o->set(cfg, o, name, def, reterr);
		}
		if (r < 0) {
			return r;
		}
	}
	return 0;
}

/* The configuration file (--config): between the environment and the
 * defaults. */

/* The entrypoint and its arguments as the file gives them. */
struct file_layer {
	char *entrypoint; /* NULL: none in the file */
	char **args;      /* NULL: no args line */
	int entrypoint_line;
	int args_line;
};

static void
file_layer_release(struct file_layer *fl)
{
	free(fl->entrypoint);
	strv_free(fl->args);
	*fl = (struct file_layer){0};
}

static int
parse_bool_word(const char *s, bool *ret)
{
	static const char *const on[] = {"true", "yes", "on", "1"};
	static const char *const off[] = {"false", "no", "off", "0"};

	for (size_t i = 0; i < ARRAY_SIZE(on); i++) {
		if (strcmp(s, on[i]) == 0) {
			*ret = true;
			return 0;
		}
		if (strcmp(s, off[i]) == 0) {
			*ret = false;
			return 0;
		}
	}
	return -EINVAL;
}

static int __attribute__((format(printf, 3, 4)))
file_error(char **reterr, const char *where, const char *fmt, ...)
{
	va_list ap;
	char *reason;

	va_start(ap, fmt);
	reason = xvasprintf(fmt, ap);
	va_end(ap);
	*reterr = xasprintf("%s: %s", where, reason);
	free(reason);
	return -EINVAL;
}

/* entrypoint = SCRIPT and args = WORDS... */
static int
file_entrypoint(const struct config_file_entry *e, const char *where, struct file_layer *fl,
		char **reterr)
{
	size_t n = strv_length(e->words);

	if (strcmp(e->key, "entrypoint") == 0) {
		if (fl->entrypoint_line) {
			return file_error(reterr, where, "'entrypoint' is already set on line %d",
					  fl->entrypoint_line);
		}
		if (n != 1 || !*e->words[0]) {
			return file_error(reterr, where,
					  "entrypoint: expected one value, the training script "
					  "(its arguments go in 'args = ...')");
		}
		fl->entrypoint = xstrdup(e->words[0]);
		fl->entrypoint_line = e->line;
		return 0;
	}
	if (fl->args_line) {
		return file_error(reterr, where, "'args' is already set on line %d", fl->args_line);
	}
	fl->args = strv_copy(e->words);
	fl->args_line = e->line;
	return 0;
}

/* Store the value of one file line for o, a flag (true or false) or an option
 * that takes one value, in cfg; where and name prefix messages. Returns 0, or
 * -EINVAL with *reterr. */
static int
file_set(struct config *cfg, const struct config_option *o, const struct config_file_entry *e,
	 const char *where, const char *name, char **reterr)
{
	size_t n = strv_length(e->words);
	bool on = false;

	switch (o->kind) {
	case OPT_FLAG:
		if (n > 1) {
			return file_error(reterr, where,
					  "%s: expected true or false, got %zu words", e->key, n);
		}
		if (n != 1 || parse_bool_word(e->words[0], &on) < 0) {
			return file_error(reterr, where, "%s: expected true or false, got '%s'",
					  e->key, n == 1 ? e->words[0] : "");
		}
		if (on) {
			return o->set(cfg, o, name, e->words[0], reterr);
		}
		break;
	case OPT_VALUE:
		if (n > 1) {
			return file_error(reterr, where,
					  "%s: expected one value, got %zu words; quote a value "
					  "that contains blanks",
					  e->key, n);
		}
		return o->set(cfg, o, name, n ? e->words[0] : "", reterr);
	case OPT_HELP:
	case OPT_VERSION:
		break;
	}
	return 0;
}

/* Apply one "key = value" of the file. A value for an option that the command
 * line or the environment sets is still checked, on a scratch config. */
static int
file_apply_entry(struct config *cfg, const struct config_file_entry *e, const char *path,
		 char *const envp[], enum option_source *src, int *seen, struct file_layer *fl,
		 char **reterr)
{
	_cleanup_free_ char *where = xasprintf("%s:%d", path, e->line);
	_cleanup_free_ char *name = NULL, *var = NULL;
	const struct config_option *o;
	struct config scratch = {0};
	bool overridden;
	size_t k;
	int r;

	if (strcmp(e->key, "entrypoint") == 0 || strcmp(e->key, "args") == 0) {
		return file_entrypoint(e, where, fl, reterr);
	}
	o = config_option_find_exact(e->key);
	if (!o) {
		size_t nmatch = 0;
		const struct config_option *guess =
			config_option_find_long(e->key, strlen(e->key), &nmatch, NULL);

		if (guess) {
			return file_error(reterr, where, "unknown key '%s' (did you mean '%s'?)",
					  e->key, guess->name);
		}
		return file_error(reterr, where, "unknown key '%s'", e->key);
	}
	if (o->kind == OPT_HELP || o->kind == OPT_VERSION) {
		return file_error(reterr, where, "'%s' is not a setting", e->key);
	}
	if (strcmp(o->name, "config") == 0) {
		return file_error(reterr, where,
				  "'%s' cannot be set in a configuration file (no includes)",
				  e->key);
	}
	k = (size_t)(o - config_options);
	if (seen[k] && !o->repeat) {
		return file_error(reterr, where, "'%s' is already set on line %d", o->name,
				  seen[k]);
	}
	seen[k] = e->line;
	name = xasprintf("%s: %s", where, e->key);
	overridden = src[k] == SRC_CLI || option_env(o, envp, &var);
	r = file_set(overridden ? &scratch : cfg, o, e, where, name, reterr);
	config_release(&scratch);
	if (r < 0) {
		return r;
	}
	if (!overridden) {
		src[k] = SRC_FILE;
	}
	return 0;
}

/* Read and apply --config (text, when given, instead of the file's contents). */
static int
apply_file(struct config *cfg, const char *text, size_t len, char *const envp[],
	   enum option_source *src, struct file_layer *fl, char **reterr)
{
	const char *path = cfg->config_file;
	_cleanup_free_ char *buf = NULL;
	int seen[ARRAY_SIZE(config_options)] = {0};
	struct config_file f = {0};
	int r;

	if (!text) {
		r = read_file(path, CONFIG_FILE_MAX, &buf, &len);
		if (r < 0) {
			*reterr = xasprintf("--config: cannot read '%s': %s", path,
					    r == -EINVAL  ? "not a regular file"
					    : r == -EFBIG ? "larger than 1 MiB"
							  : strerror(-r));
			return -EINVAL;
		}
		text = buf;
	}
	r = config_file_parse(path, text, len, &f, reterr);
	if (r < 0) {
		return r;
	}
	for (size_t i = 0; i < f.n && r == 0; i++) {
		r = file_apply_entry(cfg, &f.entries[i], path, envp, src, seen, fl, reterr);
	}
	config_file_release(&f);
	if (r == 0 && fl->args_line && !fl->entrypoint_line) {
		_cleanup_free_ char *where = xasprintf("%s:%d", path, fl->args_line);

		r = file_error(reterr, where, "'args' without 'entrypoint'");
	}
	return r;
}

static bool
given(const enum option_source *src, const char *name)
{
	size_t k = config_option_index(name);

	return k < ARRAY_SIZE(config_options) &&
	       (src[k] == SRC_CLI || src[k] == SRC_ENV || src[k] == SRC_FILE);
}

/* --standalone, and (torch PR 175699, for pytorch#126510) a one-node static
 * job that names no endpoint and no --master-port, which would otherwise
 * collide on 29500 with any other such job on the machine: c10d rendezvous
 * on localhost:0, whose store takes a free port, with a fresh uuid4 run id
 * unless one was given (torch replaces even a given one; elasticd keeps it,
 * as for --standalone). Returns 0 or -EINVAL with *reterr. */
static int
local_rendezvous(struct config *ret, const enum option_source *src, char **reterr)
{
	char id[37];
	int r;

	if (!ret->standalone && (strcmp(ret->rdzv_backend, "static") != 0 || *ret->rdzv_endpoint ||
				 given(src, "master-port") || ret->max_nodes != 1)) {
		return 0;
	}
	free(ret->rdzv_backend);
	ret->rdzv_backend = xstrdup("c10d");
	free(ret->rdzv_endpoint);
	ret->rdzv_endpoint = xstrdup("localhost:0");
	if (given(src, "rdzv-id")) {
		return 0;
	}
	r = uuid4_string(id);
	if (r < 0) {
		*reterr = xasprintf("%s: cannot make a run id: %s",
				    ret->standalone ? "--standalone" : "the local c10d rendezvous",
				    strerror(-r));
		return -EINVAL;
	}
	free(ret->rdzv_id);
	ret->rdzv_id = xstrdup(id);
	return 0;
}

/* The checks across options, once every layer is applied. Returns 0, or
 * -EINVAL with *reterr. */
static int
check_all(struct config *ret, const enum option_source *src, char **reterr)
{
	int r;

	if (ret->no_python && ret->module) {
		*reterr =
			xstrdup("Don't use both the '--no-python' flag and the '--module' flag at "
				"the same time.");
		return -EINVAL;
	}
	if (ret->event_log_file && *ret->event_log_file &&
	    strcmp(ret->event_log_handler, "file") != 0) {
		*reterr = xasprintf("--event-log-file: the events go to '%s', not to a file; "
				    "drop --event-log-file or use --event-log-handler file",
				    ret->event_log_handler);
		return -EINVAL;
	}
	r = local_rendezvous(ret, src, reterr);
	if (r < 0) {
		return r;
	}
	if (ret->numa_membind && !ret->numa_binding) {
		*reterr = xstrdup("--numa-membind needs --numa-binding");
		return -EINVAL;
	}
	r = hang_rules_check(&(struct hang_rules){ret->hang_silence, ret->hang_cadence,
						  ret->hang_cadence_interval,
						  ret->hang_cadence_start},
			     reterr);
	if (r < 0) {
		return r;
	}
	return config_check_policy(ret, given(src, "term-timeout"), given(src, "forward-signals"),
				   given(src, "progress-attempts"), reterr);
}

/* Scan the options at the start of argv (up to the first positional, or past
 * "--"); *ret_i is then the index of the training script, argc when none.
 * Returns SCAN_OPTION, SCAN_HELP or SCAN_VERSION (at -h or --version), or
 * -EINVAL with *reterr. */
static int
scan_options(struct config *cfg, int argc, char *const argv[], enum option_source *src, int *ret_i,
	     char **reterr)
{
	int i, r;

	for (i = 1; i < argc; i++) {
		const char *arg = argv[i];

		if (strcmp(arg, "--") == 0) {
			i++;
			break;
		}
		if (!is_option_string(arg)) {
			break;
		}
		if (arg[1] == '-') {
			r = parse_long(cfg, argc, argv, &i, src, reterr);
		} else {
			r = parse_short(cfg, argc, argv, &i, src, reterr);
		}
		if (r < 0 || r == SCAN_HELP || r == SCAN_VERSION) {
			return r;
		}
	}
	*ret_i = i;
	return SCAN_OPTION;
}

/* The training script and its arguments: argv[i] on when i < argc (a
 * command-line entrypoint replaces the file's, and its args), else the file's,
 * taken from fl. Returns 0, or -EINVAL with *reterr when neither gives one. */
static int
take_entrypoint(struct config *cfg, int argc, char *const argv[], int i, struct file_layer *fl,
		char **reterr)
{
	if (i < argc) {
		cfg->entrypoint = xstrdup(argv[i]);
		cfg->args = xcalloc(1, sizeof(char *));
		for (i++; i < argc; i++) {
			strv_push(&cfg->args, argv[i]);
		}
		return 0;
	}
	if (fl->entrypoint) {
		cfg->entrypoint = fl->entrypoint;
		cfg->args = fl->args ? fl->args : xcalloc(1, sizeof(char *));
		*fl = (struct file_layer){0};
		return 0;
	}
	*reterr = cfg->config_file
			  ? xasprintf("the following arguments are required: "
				      "training_script (or 'entrypoint = ...' in %s)",
				      cfg->config_file)
			  : xstrdup("the following arguments are required: training_script");
	return -EINVAL;
}

/* config_parse and config_parse_text: text, when non-NULL, is the contents of
 * the configuration file named name. */
static int
parse_all(struct config *ret, int argc, char *const argv[], char *const envp[], const char *name,
	  const char *text, size_t len, char **reterr)
{
	enum option_source src[ARRAY_SIZE(config_options)] = {SRC_UNSET};
	struct file_layer fl = {0};
	const char *notify;
	bool service;
	int i = 0, r;

	memset(ret, 0, sizeof(*ret));
	*reterr = NULL;
	r = scan_options(ret, argc, argv, src, &i, reterr);
	if (r < 0) {
		goto fail;
	}
	if (r == SCAN_HELP || r == SCAN_VERSION) {
		config_release(ret);
		return r == SCAN_HELP ? CONFIG_HELP : CONFIG_VERSION;
	}

	if (text) {
		free(ret->config_file);
		ret->config_file = xstrdup(name);
	}
	if (ret->config_file) {
		r = apply_file(ret, text, len, envp, src, &fl, reterr);
		if (r < 0) {
			goto fail;
		}
	}
	notify = env_get(envp, "NOTIFY_SOCKET");
	service = ret->config_file || (notify && *notify);
	r = apply_defaults(ret, envp, src, service, reterr);
	if (r < 0) {
		goto fail;
	}
	r = take_entrypoint(ret, argc, argv, i, &fl, reterr);
	if (r < 0) {
		goto fail;
	}
	file_layer_release(&fl);

	r = check_all(ret, src, reterr);
	if (r < 0) {
		goto fail;
	}
	ret->master_port_set = given(src, "master-port");
	return CONFIG_RUN;

fail:
	file_layer_release(&fl);
	config_release(ret);
	return r;
}

int
config_parse(struct config *ret, int argc, char *const argv[], char *const envp[], char **reterr)
{
	return parse_all(ret, argc, argv, envp, NULL, NULL, 0, reterr);
}

int
config_parse_text(struct config *ret, int argc, char *const argv[], char *const envp[],
		  const char *name, const char *text, size_t len, char **reterr)
{
	return parse_all(ret, argc, argv, envp, name, text, len, reterr);
}

void
config_release(struct config *cfg)
{
	free(cfg->rdzv_backend);
	free(cfg->rdzv_endpoint);
	free(cfg->rdzv_id);
	config_rdzv_conf_free(cfg->rdzv_conf, cfg->n_rdzv_conf);
	free(cfg->master_addr);
	free(cfg->local_addr);
	free(cfg->start_method);
	free(cfg->orphan_guard);
	free(cfg->role);
	free(cfg->log_dir);
	std_map_release(&cfg->redirects);
	std_map_release(&cfg->tee);
	free(cfg->log_line_prefix_template);
	free(cfg->local_ranks_filter);
	free(cfg->signals);
	free(cfg->forward_signals);
	free(cfg->no_restart_exit_codes);
	free(cfg->progress_file);
	free(cfg->hang_cadence);
	free(cfg->event_log_handler);
	free(cfg->event_log_file);
	free(cfg->control_socket);
	free(cfg->control_socket_group);
	free(cfg->logs_specs);
	free(cfg->numa_binding);
	free(cfg->topology_xml);
	free(cfg->gpu_bus_ids);
	free(cfg->duplicate_stdout_filters);
	free(cfg->duplicate_stderr_filters);
	free(cfg->entrypoint);
	strv_free(cfg->args);
	free(cfg->config_file);
	health_checks_free(cfg->health_checks, cfg->n_health_checks);
	free(cfg->health_root);
	free(cfg->nvml_library);
	memset(cfg, 0, sizeof(*cfg));
}

/* Queries. */

const char *
config_rdzv_conf_get(const struct config *cfg, const char *key)
{
	for (size_t i = 0; i < cfg->n_rdzv_conf; i++) {
		if (strcmp(cfg->rdzv_conf[i].key, key) == 0) {
			return cfg->rdzv_conf[i].value;
		}
	}
	return NULL;
}

bool
config_rank_in_filter(const struct config *cfg, int local_rank)
{
	if (!cfg->local_ranks_filter) {
		return true;
	}
	for (size_t i = 0; i < cfg->n_local_ranks_filter; i++) {
		if (cfg->local_ranks_filter[i] == local_rank) {
			return true;
		}
	}
	return false;
}

const char *
config_nproc_kind_to_string(enum nproc_kind k)
{
	switch (k) {
	case NPROC_INT:
		return "int";
	case NPROC_CPU:
		return "cpu";
	case NPROC_GPU:
		return "gpu";
	case NPROC_XPU:
		return "xpu";
	case NPROC_AUTO:
		return "auto";
	}
	return "int";
}

int
config_resolve_nproc(const struct config *cfg, int ncpus, int ngpus, int nxpus)
{
	switch (cfg->nproc_kind) {
	case NPROC_INT:
		return cfg->nproc_per_node > 0 ? cfg->nproc_per_node : -ENODEV;
	case NPROC_CPU:
		return ncpus > 0 ? ncpus : -ENODEV;
	case NPROC_GPU:
		return ngpus > 0 ? ngpus : -ENODEV;
	case NPROC_XPU:
		return nxpus > 0 ? nxpus : -ENODEV;
	case NPROC_AUTO:
		return ngpus > 0 ? ngpus : nxpus > 0 ? nxpus : ncpus > 0 ? ncpus : -ENODEV;
	}
	return -ENODEV;
}
