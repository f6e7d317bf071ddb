#include "wenv.h"

#include <ctype.h>
#include <errno.h>
#include <string.h>

#include "config.h"
#include "util.h"

const char *
wenv_get(char *const *env, const char *name)
{
	size_t len = strlen(name);

	for (size_t i = 0; env && env[i]; i++) {
		if (strncmp(env[i], name, len) == 0 && env[i][len] == '=') {
			return env[i] + len + 1;
		}
	}
	return NULL;
}

static bool
is_ident_start(char c)
{
	return c == '_' || isalpha((unsigned char)c);
}

static bool
is_ident(char c)
{
	return c == '_' || isalnum((unsigned char)c);
}

static const char *
lookup(const char *name, size_t len, const char *const *keys, const char *const *values, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		if (strlen(keys[i]) == len && strncmp(keys[i], name, len) == 0) {
			return values[i];
		}
	}
	return NULL;
}

char *
wenv_template_substitute(const char *tmpl, const char *const *keys, const char *const *values,
			 size_t n)
{
	size_t cap = strlen(tmpl) + 64, len = 0;
	char *out = xmalloc(cap);
	const char *p = tmpl;

#define PUT(s, l)                                                                                  \
	do {                                                                                       \
		size_t l_ = (l);                                                                   \
		if (len + l_ + 1 > cap) {                                                          \
			cap = (len + l_ + 1) * 2;                                                  \
			out = xrealloc(out, cap);                                                  \
		}                                                                                  \
		memcpy(out + len, (s), l_);                                                        \
		len += l_;                                                                         \
	} while (0)

	while (*p) {
		const char *name, *val;
		size_t nlen;

		if (*p != '$') {
			PUT(p, 1);
			p++;
			continue;
		}
		if (p[1] == '$') {
			PUT("$", 1);
			p += 2;
			continue;
		}
		if (p[1] == '{' && is_ident_start(p[2])) {
			name = p + 2;
			nlen = 0;
			while (is_ident(name[nlen])) {
				nlen++;
			}
			val = name[nlen] == '}' ? lookup(name, nlen, keys, values, n) : NULL;
			if (val) {
				PUT(val, strlen(val));
				p = name + nlen + 1;
			} else {
				PUT(p, 1);
				p++;
			}
			continue;
		}
		if (is_ident_start(p[1])) {
			name = p + 1;
			nlen = 0;
			while (is_ident(name[nlen])) {
				nlen++;
			}
			val = lookup(name, nlen, keys, values, n);
			if (val) {
				PUT(val, strlen(val));
			} else {
				PUT(p, nlen + 1);
			}
			p = name + nlen;
			continue;
		}
		PUT(p, 1);
		p++;
	}
#undef PUT
	out[len] = '\0';
	return out;
}

static void
env_set(char ***env, const char *name, const char *value)
{
	size_t len = strlen(name);
	char *entry = xasprintf("%s=%s", name, value);

	for (size_t i = 0; (*env)[i]; i++) {
		if (strncmp((*env)[i], name, len) == 0 && (*env)[i][len] == '=') {
			free((*env)[i]);
			(*env)[i] = entry;
			return;
		}
	}
	strv_consume(env, entry);
}

static void
env_set_int(char ***env, const char *name, int value)
{
	char buf[32];

	snprintf(buf, sizeof(buf), "%d", value);
	env_set(env, name, buf);
}

static bool
is_dropped(const char *entry)
{
	/* systemd's, meant for elasticd alone: NOTIFY_SOCKET, WATCHDOG_*
	 * (USEC, PID) and LISTEN_* (FDS, PID, FDNAMES). */
	return strncmp(entry, "NOTIFY_SOCKET=", 14) == 0 || strncmp(entry, "WATCHDOG_", 9) == 0 ||
	       strncmp(entry, "LISTEN_", 7) == 0;
}

/* The idx-th comma-separated entry of list, stripped, or NULL. */
static char *
list_entry(const char *list, int idx)
{
	const char *p = list;

	for (int i = 0; i < idx; i++) {
		p = strchr(p, ',');
		if (!p) {
			return NULL;
		}
		p++;
	}
	while (isspace((unsigned char)*p)) {
		p++;
	}
	size_t len = strcspn(p, ",");
	while (len > 0 && isspace((unsigned char)p[len - 1])) {
		len--;
	}
	return xstrndup(p, len);
}

/* LOCAL_RANK, and with virtual_local_rank CUDA_VISIBLE_DEVICES, into *env
 * (wenv_build_env). Returns 0, or -EINVAL with *reterr (malloc'd) when the
 * base's CUDA_VISIBLE_DEVICES has too few entries. */
static int
wenv_set_local_rank(char ***env, char *const *base, const struct wenv_worker *w, char **reterr)
{
	const char *cvd = wenv_get(base, "CUDA_VISIBLE_DEVICES");
	char *dev;

	if (!w->virtual_local_rank) {
		env_set_int(env, "LOCAL_RANK", w->local_rank);
		return 0;
	}
	env_set(env, "LOCAL_RANK", "0");
	if (!cvd) {
		env_set_int(env, "CUDA_VISIBLE_DEVICES", w->local_rank);
		return 0;
	}
	dev = list_entry(cvd, w->local_rank);
	if (!dev) {
		*reterr = xasprintf("local_rank %d exceeds available GPUs in "
				    "CUDA_VISIBLE_DEVICES=%s",
				    w->local_rank, cvd);
		return -EINVAL;
	}
	env_set(env, "CUDA_VISIBLE_DEVICES", dev);
	free(dev);
	return 0;
}

int
wenv_build_env(char *const *base, const struct wenv_worker *w, char ***ret_env, char **reterr)
{
	char **env = xcalloc(1, sizeof(char *));
	const char *v;

	for (size_t i = 0; base && base[i]; i++) {
		if (!is_dropped(base[i]) && strchr(base[i], '=')) {
			strv_push(&env, base[i]);
		}
	}

	if (wenv_set_local_rank(&env, base, w, reterr) < 0) {
		strv_free(env);
		return -EINVAL;
	}
	env_set_int(&env, "RANK", w->rank);
	env_set_int(&env, "GROUP_RANK", w->group_rank);
	env_set_int(&env, "ROLE_RANK", w->role_rank);
	env_set(&env, "ROLE_NAME", w->role_name);
	env_set_int(&env, "LOCAL_WORLD_SIZE", w->local_world_size);
	env_set_int(&env, "WORLD_SIZE", w->world_size);
	env_set_int(&env, "GROUP_WORLD_SIZE", w->group_world_size);
	env_set_int(&env, "ROLE_WORLD_SIZE", w->role_world_size);
	env_set(&env, "MASTER_ADDR", w->master_addr);
	env_set_int(&env, "MASTER_PORT", w->master_port);
	env_set_int(&env, "TORCHELASTIC_RESTART_COUNT", w->restart_count);
	env_set_int(&env, "ELASTICD_ROUND", w->round);
	env_set_int(&env, "TORCHELASTIC_MAX_RESTARTS", w->max_restarts);
	env_set(&env, "TORCHELASTIC_RUN_ID", w->run_id);
	env_set(&env, "TORCHELASTIC_USE_AGENT_STORE", w->use_agent_store ? "True" : "False");
	env_set(&env, "TORCHELASTIC_ERROR_FILE", w->error_file);
	/* Both names, each the caller's value or "1": torchrun 1.13 sets the old
	 * one, torchrun 2.x the new one, and elasticd cannot know which torch its
	 * workers run. torch < 2.2 (Debian 12's 1.13) reads only the old name,
	 * and without it a NCCL collective whose peer died hangs instead of
	 * failing the group. torch >= 2.2 reads {TORCH_NCCL_ASYNC_ERROR_HANDLING,
	 * NCCL_ASYNC_ERROR_HANDLING} with getCvarInt() (c10d/Utils.hpp), which
	 * warns once per process that the old name is deprecated: a line of
	 * stderr per NCCL worker is the price of 1.13 not hanging. */
	v = wenv_get(base, "TORCH_NCCL_ASYNC_ERROR_HANDLING");
	env_set(&env, "TORCH_NCCL_ASYNC_ERROR_HANDLING", v ? v : "1");
	v = wenv_get(base, "NCCL_ASYNC_ERROR_HANDLING");
	env_set(&env, "NCCL_ASYNC_ERROR_HANDLING", v ? v : "1");
	if (w->signals_to_handle) {
		env_set(&env, "TORCHELASTIC_SIGNALS_TO_HANDLE", w->signals_to_handle);
	}
	if (w->set_omp_num_threads && !wenv_get(base, "OMP_NUM_THREADS")) {
		env_set(&env, "OMP_NUM_THREADS", "1");
	}
	if (w->cuda_device_order && !wenv_get(base, "CUDA_DEVICE_ORDER")) {
		env_set(&env, "CUDA_DEVICE_ORDER", "PCI_BUS_ID");
	}
	if (w->worker_server_socket) {
		env_set(&env, "TORCH_WORKER_SERVER_SOCKET", w->worker_server_socket);
	}
	if (w->timer_file) {
		env_set(&env, "TORCHELASTIC_TIMER_FILE", w->timer_file);
	}
	if (w->control_socket) {
		env_set(&env, "ELASTICD_CONTROL_SOCKET", w->control_socket);
	}
	/* Set, even to "" or "0", is the user's choice: kept as it is. */
	if (w->python_faulthandler && !wenv_get(base, "PYTHONFAULTHANDLER")) {
		env_set(&env, "PYTHONFAULTHANDLER", "1");
	}
	*ret_env = env;
	return 0;
}

char **
wenv_build_argv(const struct config *cfg, char *const *base, int local_rank)
{
	static const char *const keys[] = {"local_rank"};
	char rank[16];
	const char *values[] = {rank};
	char **argv = NULL;

	snprintf(rank, sizeof(rank), "%d", local_rank);
	if (cfg->no_python) {
		strv_push(&argv, cfg->entrypoint);
	} else {
		const char *py = wenv_get(base, "PYTHON_EXEC");

		strv_push(&argv, py && *py ? py : "python3");
		strv_push(&argv, "-u");
		if (cfg->module) {
			strv_push(&argv, "-m");
		}
		/* torchrun substitutes every interpreter argument, the script too. */
		strv_consume(&argv, wenv_template_substitute(cfg->entrypoint, keys, values, 1));
	}
	for (size_t i = 0; cfg->args && cfg->args[i]; i++) {
		strv_consume(&argv, wenv_template_substitute(cfg->args[i], keys, values, 1));
	}
	return argv;
}
