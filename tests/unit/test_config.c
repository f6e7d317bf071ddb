/* test_config.c — the torchrun command line: table-driven cases of argv + envp
 * -> fields or error message, and the small queries on the result. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"
#include "util.h"

/* argv after argv[0], and envp, as NULL-terminated lists. */
#define ARGV(...) ((const char *const[]){__VA_ARGS__, NULL})
#define NOARGS ((const char *const[]){NULL})
#define ENV(...) ((const char *const[]){__VA_ARGS__, NULL})

static int
parse(const char *const *args, const char *const *envp, struct config *cfg, char **err)
{
	char *argv[64];
	int argc = 0;

	argv[argc++] = "elasticd";
	for (size_t i = 0; args[i]; i++) {
		assert_true(argc < 63);
		argv[argc++] = (char *)args[i];
	}
	argv[argc] = NULL;
	return config_parse(cfg, argc, argv, (char *const *)envp, err);
}

static char *
join_std_map(const struct std_map *m)
{
	char *s;

	if (m->n == 0) {
		return xasprintf("all=%d", (int)m->all);
	}
	s = xstrdup("");
	for (size_t i = 0; i < m->n; i++) {
		char *t = xasprintf("%s%s%d:%d", s, i ? "," : "", m->entries[i].local_rank,
				    (int)m->entries[i].mask);

		free(s);
		s = t;
	}
	return s;
}

static char *
join_ints(const int *v, size_t n)
{
	char *s = xstrdup("");

	for (size_t i = 0; i < n; i++) {
		char *t = xasprintf("%s%s%d", s, i ? "," : "", v[i]);

		free(s);
		s = t;
	}
	return s;
}

static char *
str_or_null(const char *s)
{
	return xstrdup(s ? s : "(null)");
}

/* One field of cfg rendered as a string, by a short key. */
static char *
render(const struct config *cfg, const char *key)
{
	static const char *const nproc_names[] = {[NPROC_INT] = "int",
						  [NPROC_CPU] = "cpu",
						  [NPROC_GPU] = "gpu",
						  [NPROC_XPU] = "xpu",
						  [NPROC_AUTO] = "auto"};

	if (strcmp(key, "nnodes") == 0) {
		return xasprintf("%d:%d", cfg->min_nodes, cfg->max_nodes);
	} else if (strcmp(key, "nproc") == 0) {
		if (cfg->nproc_kind == NPROC_INT) {
			return xasprintf("%d", cfg->nproc_per_node);
		}
		return xstrdup(nproc_names[cfg->nproc_kind]);
	} else if (strcmp(key, "rdzv_backend") == 0) {
		return str_or_null(cfg->rdzv_backend);
	} else if (strcmp(key, "rdzv_endpoint") == 0) {
		return str_or_null(cfg->rdzv_endpoint);
	} else if (strcmp(key, "rdzv_id") == 0) {
		return str_or_null(cfg->rdzv_id);
	} else if (strcmp(key, "rdzv_conf") == 0) {
		char *s = xstrdup("");

		for (size_t i = 0; i < cfg->n_rdzv_conf; i++) {
			char *t = xasprintf("%s%s%s=%s", s, i ? "," : "", cfg->rdzv_conf[i].key,
					    cfg->rdzv_conf[i].value);

			free(s);
			s = t;
		}
		return s;
	} else if (strcmp(key, "standalone") == 0) {
		return xasprintf("%d", cfg->standalone);
	} else if (strcmp(key, "node_rank") == 0) {
		return xasprintf("%d", cfg->node_rank);
	} else if (strcmp(key, "master_addr") == 0) {
		return str_or_null(cfg->master_addr);
	} else if (strcmp(key, "master_port") == 0) {
		return xasprintf("%d", cfg->master_port);
	} else if (strcmp(key, "master_port_set") == 0) {
		return xasprintf("%d", cfg->master_port_set);
	} else if (strcmp(key, "local_addr") == 0) {
		return str_or_null(cfg->local_addr);
	} else if (strcmp(key, "max_restarts") == 0) {
		return xasprintf("%d", cfg->max_restarts);
	} else if (strcmp(key, "monitor_interval") == 0) {
		return xasprintf("%g", cfg->monitor_interval);
	} else if (strcmp(key, "start_method") == 0) {
		return str_or_null(cfg->start_method);
	} else if (strcmp(key, "role") == 0) {
		return str_or_null(cfg->role);
	} else if (strcmp(key, "module") == 0) {
		return xasprintf("%d", cfg->module);
	} else if (strcmp(key, "no_python") == 0) {
		return xasprintf("%d", cfg->no_python);
	} else if (strcmp(key, "log_dir") == 0) {
		return str_or_null(cfg->log_dir);
	} else if (strcmp(key, "redirects") == 0) {
		return join_std_map(&cfg->redirects);
	} else if (strcmp(key, "tee") == 0) {
		return join_std_map(&cfg->tee);
	} else if (strcmp(key, "prefix") == 0) {
		return str_or_null(cfg->log_line_prefix_template);
	} else if (strcmp(key, "filter") == 0) {
		if (!cfg->local_ranks_filter) {
			return xstrdup("(null)");
		}
		return join_ints(cfg->local_ranks_filter, cfg->n_local_ranks_filter);
	} else if (strcmp(key, "signals") == 0) {
		return join_ints(cfg->signals, cfg->n_signals);
	} else if (strcmp(key, "shutdown_timeout") == 0) {
		return xasprintf("%d", cfg->shutdown_timeout);
	} else if (strcmp(key, "term_timeout") == 0) {
		return xasprintf("%d", cfg->term_timeout);
	} else if (strcmp(key, "forward") == 0) {
		return join_ints(cfg->forward_signals, cfg->n_forward_signals);
	} else if (strcmp(key, "backoff") == 0) {
		return xasprintf("%g:%g", cfg->restart_backoff_min, cfg->restart_backoff_max);
	} else if (strcmp(key, "window") == 0) {
		return xasprintf("%d/%g", cfg->restart_window_n, cfg->restart_window_s);
	} else if (strcmp(key, "no_restart_codes") == 0) {
		return join_ints(cfg->no_restart_exit_codes, cfg->n_no_restart_exit_codes);
	} else if (strcmp(key, "progress_file") == 0) {
		return str_or_null(cfg->progress_file);
	} else if (strcmp(key, "progress_attempts") == 0) {
		return xasprintf("%d", cfg->progress_attempts);
	} else if (strcmp(key, "exit_codes") == 0) {
		return xstrdup(cfg->exit_codes_detailed ? "detailed" : "torchrun");
	} else if (strcmp(key, "hang") == 0) {
		return xasprintf("%g %s %g %g", cfg->hang_silence,
				 cfg->hang_cadence ? cfg->hang_cadence : "(null)",
				 cfg->hang_cadence_interval, cfg->hang_cadence_start);
	} else if (strcmp(key, "virtual_local_rank") == 0) {
		return xasprintf("%d", cfg->virtual_local_rank);
	} else if (strcmp(key, "event_log_handler") == 0) {
		return str_or_null(cfg->event_log_handler);
	} else if (strcmp(key, "event_log_file") == 0) {
		return str_or_null(cfg->event_log_file);
	} else if (strcmp(key, "event_ring_size") == 0) {
		return xasprintf("%d", cfg->event_ring_size);
	} else if (strcmp(key, "logs_specs") == 0) {
		return str_or_null(cfg->logs_specs);
	} else if (strcmp(key, "numa_binding") == 0) {
		return str_or_null(cfg->numa_binding);
	} else if (strcmp(key, "dup_out") == 0) {
		return str_or_null(cfg->duplicate_stdout_filters);
	} else if (strcmp(key, "dup_err") == 0) {
		return str_or_null(cfg->duplicate_stderr_filters);
	} else if (strcmp(key, "entrypoint") == 0) {
		return str_or_null(cfg->entrypoint);
	} else if (strcmp(key, "args") == 0) {
		char *s = xstrdup("");

		for (size_t i = 0; cfg->args && cfg->args[i]; i++) {
			char *t = xasprintf("%s%s%s", s, i ? "|" : "", cfg->args[i]);

			free(s);
			s = t;
		}
		return s;
	}
	fail_msg("unknown key %s", key);
	return NULL;
}

struct kv {
	const char *key;
	const char *want;
};

struct ok_case {
	const char *const *argv; /* after argv[0] */
	const char *const *envp;
	struct kv expect[10];
};

static const struct ok_case ok_cases[] = {
	/* Defaults. */
	{.argv = ARGV("train.py"),
	 .expect = {{"nnodes", "1:1"},
		    {"nproc", "1"},
		    /* One node, no endpoint, no --master-port: c10d (PR 175699). */
		    {"rdzv_backend", "c10d"},
		    {"rdzv_endpoint", "localhost:0"},
		    {"rdzv_conf", ""},
		    {"standalone", "0"},
		    {"node_rank", "0"},
		    {"master_addr", "127.0.0.1"},
		    {"master_port", "29500"}}},
	{.argv = ARGV("train.py"),
	 .expect = {{"master_port_set", "0"},
		    {"local_addr", "(null)"},
		    {"max_restarts", "0"},
		    {"monitor_interval", "0.1"},
		    {"start_method", "spawn"},
		    {"role", "default"},
		    {"module", "0"},
		    {"no_python", "0"},
		    {"log_dir", "(null)"},
		    {"redirects", "all=0"}}},
	{.argv = ARGV("train.py"),
	 .expect = {{"tee", "all=0"},
		    {"filter", "(null)"},
		    {"shutdown_timeout", "30"},
		    {"virtual_local_rank", "0"},
		    {"event_log_handler", "file"},
		    {"logs_specs", "(null)"},
		    {"numa_binding", "(null)"},
		    {"dup_out", "(null)"},
		    {"dup_err", "(null)"},
		    {"entrypoint", "train.py"}}},
	{.argv = ARGV("train.py"), .expect = {{"args", ""}, {"signals", "15,2,1,3"}}},

	/* Every flag, both spellings, "--flag value" and "--flag=value". */
	{.argv = ARGV("--nnodes", "2", "t"), .expect = {{"nnodes", "2:2"}}},
	{.argv = ARGV("--nnodes=1:4", "t"), .expect = {{"nnodes", "1:4"}}},
	{.argv = ARGV("--nnodes", "3:3", "t"), .expect = {{"nnodes", "3:3"}}},
	{.argv = ARGV("--nproc-per-node", "4", "t"), .expect = {{"nproc", "4"}}},
	{.argv = ARGV("--nproc_per_node=8", "t"), .expect = {{"nproc", "8"}}},
	{.argv = ARGV("--nproc-per-node=cpu", "t"), .expect = {{"nproc", "cpu"}}},
	{.argv = ARGV("--nproc_per_node", "gpu", "t"), .expect = {{"nproc", "gpu"}}},
	{.argv = ARGV("--nproc-per-node", "auto", "t"), .expect = {{"nproc", "auto"}}},
	{.argv = ARGV("--nproc-per-node", "xpu", "t"), .expect = {{"nproc", "xpu"}}},
	{.argv = ARGV("t"), .envp = ENV("PET_NPROC_PER_NODE=xpu"), .expect = {{"nproc", "xpu"}}},
	{.argv = ARGV("--rdzv-backend", "c10d", "t"), .expect = {{"rdzv_backend", "c10d"}}},
	{.argv = ARGV("--rdzv_backend=etcd", "t"), .expect = {{"rdzv_backend", "etcd"}}},
	{.argv = ARGV("--rdzv-endpoint", "node0:29400", "t"),
	 .expect = {{"rdzv_endpoint", "node0:29400"}}},
	{.argv = ARGV("--rdzv_endpoint=[::1]:5", "t"), .expect = {{"rdzv_endpoint", "[::1]:5"}}},
	{.argv = ARGV("--rdzv-id", "job1", "t"), .expect = {{"rdzv_id", "job1"}}},
	{.argv = ARGV("--rdzv_id=job2", "t"), .expect = {{"rdzv_id", "job2"}}},
	{.argv = ARGV("--run-id", "job3", "t"), .expect = {{"rdzv_id", "job3"}}},
	{.argv = ARGV("--run_id=job4", "t"), .expect = {{"rdzv_id", "job4"}}},
	{.argv = ARGV("--rdzv-id=", "t"), .expect = {{"rdzv_id", ""}}},
	{.argv = ARGV("--rdzv-conf", " timeout = 60 , join_timeout=5 ", "t"),
	 .expect = {{"rdzv_conf", "timeout=60,join_timeout=5"}}},
	{.argv = ARGV("--rdzv_conf=a=1,b=2,a=3", "t"), .expect = {{"rdzv_conf", "a=3,b=2"}}},
	{.argv = ARGV("--rdzv-conf", "k=v=w", "t"), .expect = {{"rdzv_conf", "k=v=w"}}},
	{.argv = ARGV("--rdzv-conf", "  ", "t"), .expect = {{"rdzv_conf", ""}}},
	{.argv = ARGV("--standalone", "t"),
	 .expect = {{"standalone", "1"},
		    {"rdzv_backend", "c10d"},
		    {"rdzv_endpoint", "localhost:0"},
		    {"entrypoint", "t"}}},
	{.argv = ARGV("--standalone", "--rdzv-backend", "etcd", "--rdzv-endpoint", "h:1", "t"),
	 .expect = {{"rdzv_backend", "c10d"}, {"rdzv_endpoint", "localhost:0"}}},
	{.argv = ARGV("--standalone", "--run-id", "mine", "t"),
	 .expect = {{"rdzv_id", "mine"}, {"rdzv_backend", "c10d"}}},
	{.argv = ARGV("--rdzv_id", "mine", "--standalone", "t"), .expect = {{"rdzv_id", "mine"}}},
	{.argv = ARGV("--standalone", "t"),
	 .envp = ENV("PET_RDZV_ID=envid"),
	 .expect = {{"rdzv_id", "envid"}}},
	/* torch PR 175699: static, no endpoint, no --master-port and at most one
	 * node is c10d on localhost:0 (pytorch#126510: two such jobs on one
	 * machine took 29500 both); anything else stays as it was. */
	{.argv = ARGV("--rdzv-backend", "static", "t"),
	 .expect = {{"rdzv_backend", "c10d"},
		    {"rdzv_endpoint", "localhost:0"},
		    {"standalone", "0"}}},
	{.argv = ARGV("--rdzv-id", "mine", "t"),
	 .expect = {{"rdzv_id", "mine"}, {"rdzv_backend", "c10d"}}},
	{.argv = ARGV("--master-port", "29500", "t"),
	 .expect = {{"rdzv_backend", "static"},
		    {"rdzv_endpoint", ""},
		    {"rdzv_id", "none"},
		    {"master_port", "29500"}}},
	{.argv = ARGV("t"),
	 .envp = ENV("PET_MASTER_PORT=29501"),
	 .expect = {{"rdzv_backend", "static"}, {"master_port", "29501"}}},
	{.argv = ARGV("--nnodes", "1:2", "t"),
	 .expect = {{"rdzv_backend", "static"}, {"rdzv_endpoint", ""}}},
	{.argv = ARGV("--nnodes", "2", "t"), .expect = {{"rdzv_backend", "static"}}},
	{.argv = ARGV("--rdzv-endpoint", "h:1", "t"),
	 .expect = {{"rdzv_backend", "static"}, {"rdzv_endpoint", "h:1"}}},
	{.argv = ARGV("--rdzv-backend", "etcd", "t"),
	 .expect = {{"rdzv_backend", "etcd"}, {"rdzv_endpoint", ""}}},
	{.argv = ARGV("--node-rank", "3", "t"), .expect = {{"node_rank", "3"}}},
	{.argv = ARGV("--node_rank=2", "t"), .expect = {{"node_rank", "2"}}},
	{.argv = ARGV("--master-addr", "10.0.0.1", "t"), .expect = {{"master_addr", "10.0.0.1"}}},
	{.argv = ARGV("--master_addr=[0:0:0:0:0:0:0:1]", "t"),
	 .expect = {{"master_addr", "[0:0:0:0:0:0:0:1]"}}},
	{.argv = ARGV("--master-port", "1234", "t"),
	 .expect = {{"master_port", "1234"}, {"master_port_set", "1"}}},
	{.argv = ARGV("--master_port=0", "t"),
	 .expect = {{"master_port", "0"}, {"master_port_set", "1"}}},
	{.argv = ARGV("--master-port=65535", "t"), .expect = {{"master_port", "65535"}}},
	{.argv = ARGV("--local-addr", "10.1.1.1", "t"), .expect = {{"local_addr", "10.1.1.1"}}},
	{.argv = ARGV("--local_addr=node7", "t"), .expect = {{"local_addr", "node7"}}},
	{.argv = ARGV("--max-restarts", "3", "t"), .expect = {{"max_restarts", "3"}}},
	{.argv = ARGV("--max_restarts=4", "t"), .expect = {{"max_restarts", "4"}}},
	{.argv = ARGV("--monitor-interval", "5", "t"), .expect = {{"monitor_interval", "5"}}},
	{.argv = ARGV("--monitor_interval=0", "t"), .expect = {{"monitor_interval", "0"}}},
	{.argv = ARGV("--monitor-interval=0.5", "t"), .expect = {{"monitor_interval", "0.5"}}},
	{.argv = ARGV("--start-method", "fork", "t"), .expect = {{"start_method", "fork"}}},
	{.argv = ARGV("--start_method=forkserver", "t"),
	 .expect = {{"start_method", "forkserver"}}},
	{.argv = ARGV("--role", "trainer", "t"), .expect = {{"role", "trainer"}}},
	{.argv = ARGV("--role=", "t"), .expect = {{"role", ""}}},
	{.argv = ARGV("-m", "pkg.train"), .expect = {{"module", "1"}, {"entrypoint", "pkg.train"}}},
	{.argv = ARGV("--module", "pkg.train"), .expect = {{"module", "1"}}},
	{.argv = ARGV("--no-python", "/bin/true", "-x"),
	 .expect = {{"no_python", "1"}, {"entrypoint", "/bin/true"}, {"args", "-x"}}},
	{.argv = ARGV("--no_python", "t"), .expect = {{"no_python", "1"}}},
	{.argv = ARGV("--log-dir", "/tmp/x", "t"), .expect = {{"log_dir", "/tmp/x"}}},
	{.argv = ARGV("--log_dir=/var/log/e", "t"), .expect = {{"log_dir", "/var/log/e"}}},
	{.argv = ARGV("-r", "3", "t"), .expect = {{"redirects", "all=3"}}},
	{.argv = ARGV("-r3", "t"), .expect = {{"redirects", "all=3"}}},
	{.argv = ARGV("-r=1", "t"), .expect = {{"redirects", "all=1"}}},
	{.argv = ARGV("--redirects", "0:1,1:2", "t"), .expect = {{"redirects", "0:1,1:2"}}},
	{.argv = ARGV("--redirects=10:3,2:0", "t"), .expect = {{"redirects", "10:3,2:0"}}},
	{.argv = ARGV("-t", "2", "t"), .expect = {{"tee", "all=2"}}},
	{.argv = ARGV("-t0:3", "t"), .expect = {{"tee", "0:3"}}},
	{.argv = ARGV("--tee=1", "t"), .expect = {{"tee", "all=1"}}},
	{.argv = ARGV("--tee", "3", "-r", "1", "t"),
	 .expect = {{"tee", "all=3"}, {"redirects", "all=1"}}},
	{.argv = ARGV("--local-ranks-filter", "0,2", "t"), .expect = {{"filter", "0,2"}}},
	{.argv = ARGV("--local_ranks_filter=1", "t"), .expect = {{"filter", "1"}}},
	{.argv = ARGV("--local-ranks-filter=", "t"), .expect = {{"filter", "(null)"}}},
	{.argv = ARGV("--local-ranks-filter", " 0, 2 ", "t"), .expect = {{"filter", "0,2"}}},
	{.argv = ARGV("--logs-specs", "default", "t"), .expect = {{"logs_specs", "default"}}},
	{.argv = ARGV("--logs_specs=default", "t"), .expect = {{"logs_specs", "default"}}},
	{.argv = ARGV("--numa-binding", "node", "t"), .expect = {{"numa_binding", "node"}}},
	{.argv = ARGV("--numa_binding=core-complex", "t"),
	 .expect = {{"numa_binding", "core-complex"}}},
	{.argv = ARGV("--numa-binding=socket", "t"), .expect = {{"numa_binding", "socket"}}},
	{.argv = ARGV("--numa-binding", "exclusive", "t"),
	 .expect = {{"numa_binding", "exclusive"}}},
	{.argv = ARGV("--signals-to-handle", "SIGUSR1,TERM,2", "t"),
	 .expect = {{"signals", "10,15,2"}}},
	{.argv = ARGV("--signals_to_handle=SIGTERM, SIGUSR2 ,15", "t"),
	 .expect = {{"signals", "15,12"}}},
	{.argv = ARGV("--signals-to-handle=", "t"), .expect = {{"signals", ""}}},
	{.argv = ARGV("--shutdown-timeout", "5", "t"), .expect = {{"shutdown_timeout", "5"}}},
	{.argv = ARGV("--shutdown_timeout=0", "t"), .expect = {{"shutdown_timeout", "0"}}},
	{.argv = ARGV("--virtual-local-rank", "t"), .expect = {{"virtual_local_rank", "1"}}},
	{.argv = ARGV("--virtual_local_rank", "t"), .expect = {{"virtual_local_rank", "1"}}},
	{.argv = ARGV("--event-log-handler", "console", "t"),
	 .expect = {{"event_log_handler", "console"}}},
	{.argv = ARGV("--event_log_handler=dynamic_rendezvous", "t"),
	 .expect = {{"event_log_handler", "dynamic_rendezvous"}}},
	{.argv = ARGV("t"), .expect = {{"event_log_file", "(null)"}, {"event_ring_size", "1024"}}},
	{.argv = ARGV("--event-log-handler", "null", "t"),
	 .expect = {{"event_log_handler", "null"}}},
	{.argv = ARGV("--event-log-file", "/x/ev.jsonl", "t"),
	 .expect = {{"event_log_handler", "file"}, {"event_log_file", "/x/ev.jsonl"}}},
	{.argv = ARGV("--event_log_handler=file", "--event_log_file=e", "t"),
	 .expect = {{"event_log_file", "e"}}},
	{.argv = ARGV("--event-log-handler", "console", "--event-log-file=", "t"),
	 .expect = {{"event_log_handler", "console"}, {"event_log_file", ""}}},
	{.argv = ARGV("--event-ring-size", "0", "t"), .expect = {{"event_ring_size", "0"}}},
	{.argv = ARGV("--event_ring_size=65536", "t"), .expect = {{"event_ring_size", "65536"}}},
	{.argv = ARGV("t"),
	 .envp = ENV("PET_EVENT_LOG_FILE=/e", "PET_EVENT_RING_SIZE=7"),
	 .expect = {{"event_log_file", "/e"}, {"event_ring_size", "7"}}},
	{.argv = ARGV("--duplicate-stdout-filters", "a,,b", "t"), .expect = {{"dup_out", "a,,b"}}},
	{.argv = ARGV("--duplicate_stdout_filters=x", "t"), .expect = {{"dup_out", "x"}}},
	{.argv = ARGV("--duplicate-stderr-filters", "err", "t"), .expect = {{"dup_err", "err"}}},
	{.argv = ARGV("--duplicate_stderr_filters=", "t"), .expect = {{"dup_err", ""}}},

	/* Short clusters, the last occurrence wins. */
	{.argv = ARGV("-mr3", "t"), .expect = {{"module", "1"}, {"redirects", "all=3"}}},
	{.argv = ARGV("-mt", "0:1", "t"), .expect = {{"module", "1"}, {"tee", "0:1"}}},
	{.argv = ARGV("--nnodes", "2", "--nnodes", "3", "t"), .expect = {{"nnodes", "3:3"}}},
	{.argv = ARGV("-r", "3", "-r", "0:1", "t"), .expect = {{"redirects", "0:1"}}},
	{.argv = ARGV("-r", "0:1", "-r", "2", "t"), .expect = {{"redirects", "all=2"}}},
	{.argv = ARGV("--rdzv-conf", "a=1", "--rdzv-conf", "b=2", "t"),
	 .expect = {{"rdzv_conf", "b=2"}}},
	{.argv = ARGV("--local-ranks-filter", "1", "--local-ranks-filter", "", "t"),
	 .expect = {{"filter", "(null)"}}},
	{.argv = ARGV("--signals-to-handle", "INT", "--signals-to-handle", "HUP", "t"),
	 .expect = {{"signals", "1"}}},
	{.argv = ARGV("--log-dir", "a", "--log_dir", "b", "t"), .expect = {{"log_dir", "b"}}},

	/* Unambiguous prefixes, also of one spelling only. */
	{.argv = ARGV("--nproc", "2", "t"), .expect = {{"nproc", "2"}}},
	{.argv = ARGV("--nproc=3", "t"), .expect = {{"nproc", "3"}}},
	{.argv = ARGV("--nproc-per", "4", "t"), .expect = {{"nproc", "4"}}},
	{.argv = ARGV("--nproc_p", "5", "t"), .expect = {{"nproc", "5"}}},
	{.argv = ARGV("--nn", "2", "t"), .expect = {{"nnodes", "2:2"}}},
	{.argv = ARGV("--stand", "t"), .expect = {{"standalone", "1"}}},
	{.argv = ARGV("--run-i", "j", "t"), .expect = {{"rdzv_id", "j"}}},
	{.argv = ARGV("--rdzv-i", "k", "t"), .expect = {{"rdzv_id", "k"}}},
	{.argv = ARGV("--max", "2", "t"), .expect = {{"max_restarts", "2"}}},
	{.argv = ARGV("--red", "3", "t"), .expect = {{"redirects", "all=3"}}},
	{.argv = ARGV("--mod", "t"), .expect = {{"module", "1"}}},
	{.argv = ARGV("--no-p", "t"), .expect = {{"no_python", "1"}}},
	{.argv = ARGV("--virt", "t"), .expect = {{"virtual_local_rank", "1"}}},

	/* The entrypoint and its arguments, verbatim. */
	{.argv = ARGV("train.py", "--nnodes", "5", "-m", "--", "x"),
	 .expect = {{"entrypoint", "train.py"},
		    {"args", "--nnodes|5|-m|--|x"},
		    {"nnodes", "1:1"},
		    {"module", "0"}}},
	{.argv = ARGV("--", "--weird", "a"), .expect = {{"entrypoint", "--weird"}, {"args", "a"}}},
	{.argv = ARGV("--nnodes", "2", "--", "train.py", "--", "b"),
	 .expect = {{"nnodes", "2:2"}, {"entrypoint", "train.py"}, {"args", "--|b"}}},
	{.argv = ARGV("--no-python", "python3", "-u", "train.py", "--lr=1", "${local_rank}"),
	 .expect = {{"entrypoint", "python3"}, {"args", "-u|train.py|--lr=1|${local_rank}"}}},
	{.argv = ARGV("-", "x"), .expect = {{"entrypoint", "-"}, {"args", "x"}}},
	{.argv = ARGV("-1", "-2"), .expect = {{"entrypoint", "-1"}, {"args", "-2"}}},
	{.argv = ARGV("--a b", "c"), .expect = {{"entrypoint", "--a b"}, {"args", "c"}}},
	{.argv = ARGV("train.py", "--help"), .expect = {{"args", "--help"}}},
	{.argv = ARGV("train.py", "--foo", "--r"), .expect = {{"args", "--foo|--r"}}},
	{.argv = ARGV("--rdzv-id", "-", "t"), .expect = {{"rdzv_id", "-"}, {"entrypoint", "t"}}},
	{.argv = ARGV("--rdzv-id", "-5", "t"), .expect = {{"rdzv_id", "-5"}}},
	{.argv = ARGV("--rdzv-id", "-x y", "t"), .expect = {{"rdzv_id", "-x y"}}},
	{.argv = ARGV("--rdzv-id=--x", "t"), .expect = {{"rdzv_id", "--x"}}},
	{.argv = ARGV("--", "--"), .expect = {{"entrypoint", "--"}, {"args", ""}}},

	/* PET_* defaults; the command line beats them. */
	{.argv = ARGV("t"), .envp = ENV("PET_NPROC_PER_NODE=4"), .expect = {{"nproc", "4"}}},
	{.argv = ARGV("--nproc-per-node", "2", "t"),
	 .envp = ENV("PET_NPROC_PER_NODE=4"),
	 .expect = {{"nproc", "2"}}},
	{.argv = ARGV("--nproc_per_node=gpu", "t"),
	 .envp = ENV("PET_NPROC_PER_NODE=bad"),
	 .expect = {{"nproc", "gpu"}}},
	{.argv = ARGV("--nnodes", "2", "t"),
	 .envp = ENV("PET_NNODES=x"),
	 .expect = {{"nnodes", "2:2"}}},
	{.argv = ARGV("t"),
	 .envp = ENV("PET_NNODES=2:3", "PET_REDIRECTS=3", "PET_TEE=0:1", "PET_RDZV_ID=envid",
		     "PET_MAX_RESTARTS=3", "PET_MONITOR_INTERVAL=2", "PET_START_METHOD=fork",
		     "PET_ROLE=r", "PET_LOG_DIR=/l"),
	 .expect = {{"nnodes", "2:3"},
		    {"redirects", "all=3"},
		    {"tee", "0:1"},
		    {"rdzv_id", "envid"},
		    {"max_restarts", "3"},
		    {"monitor_interval", "2"},
		    {"start_method", "fork"},
		    {"role", "r"},
		    {"log_dir", "/l"}}},
	{.argv = ARGV("t"),
	 .envp = ENV("PET_NODE_RANK=1", "PET_MASTER_ADDR=a", "PET_MASTER_PORT=1000",
		     "PET_LOCAL_ADDR=b", "PET_RDZV_BACKEND=c10d", "PET_RDZV_ENDPOINT=e:1",
		     "PET_RDZV_CONF=a=b", "PET_LOCAL_RANKS_FILTER=0", "PET_SHUTDOWN_TIMEOUT=7"),
	 .expect = {{"node_rank", "1"},
		    {"master_addr", "a"},
		    {"master_port", "1000"},
		    {"master_port_set", "1"},
		    {"local_addr", "b"},
		    {"rdzv_backend", "c10d"},
		    {"rdzv_endpoint", "e:1"},
		    {"rdzv_conf", "a=b"},
		    {"filter", "0"},
		    {"shutdown_timeout", "7"}}},
	{.argv = ARGV("t"),
	 .envp = ENV("PET_SIGNALS_TO_HANDLE=SIGUSR2", "PET_EVENT_LOG_HANDLER=console",
		     "PET_DUPLICATE_STDOUT_FILTERS=x", "PET_DUPLICATE_STDERR_FILTERS=y",
		     "PET_NUMA_BINDING=node", "PET_LOGS_SPECS=z"),
	 .expect = {{"signals", "12"},
		    {"event_log_handler", "console"},
		    {"dup_out", "x"},
		    {"dup_err", "y"},
		    {"numa_binding", "(null)"},
		    {"logs_specs", "(null)"}}},
	{.argv = ARGV("--run-id", "cli", "t"),
	 .envp = ENV("PET_RDZV_ID=envid"),
	 .expect = {{"rdzv_id", "cli"}}},
	{.argv = ARGV("-r", "1", "t"),
	 .envp = ENV("PET_REDIRECTS=3"),
	 .expect = {{"redirects", "all=1"}}},
	{.argv = ARGV("t"),
	 .envp = ENV("PET_NNODESX=9", "XPET_NNODES=8"),
	 .expect = {{"nnodes", "1:1"}}},
	{.argv = ARGV("t"),
	 .envp = ENV("PET_RDZV_ID=first", "PET_RDZV_ID=second"),
	 .expect = {{"rdzv_id", "first"}}},
	{.argv = ARGV("--nnodes", "2", "t"),
	 .envp = ENV("PET_RDZV_ENDPOINT="),
	 .expect = {{"rdzv_endpoint", ""}}},

	/* Boolean flags through PET_*: an integer, non-zero is on. */
	{.argv = ARGV("t"),
	 .envp = ENV("PET_STANDALONE=1"),
	 .expect = {{"standalone", "1"},
		    {"rdzv_backend", "c10d"},
		    {"rdzv_endpoint", "localhost:0"}}},
	{.argv = ARGV("t"), .envp = ENV("PET_STANDALONE=0"), .expect = {{"standalone", "0"}}},
	{.argv = ARGV("--standalone", "t"),
	 .envp = ENV("PET_STANDALONE=0"),
	 .expect = {{"standalone", "1"}}},
	{.argv = ARGV("t"), .envp = ENV("PET_MODULE=1"), .expect = {{"module", "1"}}},
	{.argv = ARGV("t"), .envp = ENV("PET_NO_PYTHON=2"), .expect = {{"no_python", "1"}}},
	{.argv = ARGV("t"),
	 .envp = ENV("PET_VIRTUAL_LOCAL_RANK=1"),
	 .expect = {{"virtual_local_rank", "1"}}},
	{.argv = ARGV("t"), .envp = ENV("PET_RUN_PATH=0"), .expect = {{"entrypoint", "t"}}},
	{.argv = ARGV("-m", "t"), .envp = ENV("PET_NO_PYTHON=0"), .expect = {{"module", "1"}}},

	/* --shutdown-timeout: CLI > PET_SHUTDOWN_TIMEOUT > TORCH_ELASTIC_SHUTDOWN_TIMEOUT > 30. */
	{.argv = ARGV("t"),
	 .envp = ENV("TORCH_ELASTIC_SHUTDOWN_TIMEOUT=12"),
	 .expect = {{"shutdown_timeout", "12"}}},
	{.argv = ARGV("t"),
	 .envp = ENV("TORCH_ELASTIC_SHUTDOWN_TIMEOUT=12", "PET_SHUTDOWN_TIMEOUT=7"),
	 .expect = {{"shutdown_timeout", "7"}}},
	{.argv = ARGV("--shutdown-timeout", "3", "t"),
	 .envp = ENV("TORCH_ELASTIC_SHUTDOWN_TIMEOUT=x", "PET_SHUTDOWN_TIMEOUT=7"),
	 .expect = {{"shutdown_timeout", "3"}}},

	/* --log-line-prefix-template: the flag (CLI, then PET_) beats
	 * TORCHELASTIC_LOG_LINE_PREFIX_TEMPLATE (torch PR 191265), which beats
	 * torchrun's default. */
	{.argv = ARGV("t"), .expect = {{"prefix", "[${role_name}${local_rank}]:"}}},
	{.argv = ARGV("t"),
	 .envp = ENV("TORCHELASTIC_LOG_LINE_PREFIX_TEMPLATE=[${rank}]:"),
	 .expect = {{"prefix", "[${rank}]:"}}},
	{.argv = ARGV("t"),
	 .envp = ENV("TORCHELASTIC_LOG_LINE_PREFIX_TEMPLATE=[${rank}]:",
		     "PET_LOG_LINE_PREFIX_TEMPLATE=${hostname}:"),
	 .expect = {{"prefix", "${hostname}:"}}},
	{.argv = ARGV("--log-line-prefix-template", "${pid}|", "t"),
	 .envp = ENV("TORCHELASTIC_LOG_LINE_PREFIX_TEMPLATE=[${rank}]:",
		     "PET_LOG_LINE_PREFIX_TEMPLATE=${hostname}:"),
	 .expect = {{"prefix", "${pid}|"}}},
	{.argv = ARGV("--log_line_prefix_template=", "t"), .expect = {{"prefix", ""}}},

	/* The restart policy: off by default, torchrun's exit statuses. */
	{.argv = ARGV("t"),
	 .expect = {{"backoff", "0:0"},
		    {"window", "0/0"},
		    {"no_restart_codes", ""},
		    {"progress_file", "(null)"},
		    {"progress_attempts", "3"},
		    {"exit_codes", "torchrun"}}},
	{.argv = ARGV("--restart-backoff", "0.2:0.8", "t"), .expect = {{"backoff", "0.2:0.8"}}},
	/* Hang rules: off by default; elasticd's own, so no PET_ variable. */
	{.argv = ARGV("t"),
	 .envp = ENV("PET_HANG_SILENCE=5"),
	 .expect = {{"hang", "0 (null) 0 0"}}},
	{.argv = ARGV("--hang-silence", "2.5", "--hang-cadence", "step [0-9]+",
		      "--hang-cadence-interval=60", "--hang_cadence_start", "300", "t"),
	 .expect = {{"hang", "2.5 step [0-9]+ 60 300"}}},
	{.argv = ARGV("--restart_backoff=5", "t"), .expect = {{"backoff", "5:5"}}},
	{.argv = ARGV("--restart-backoff", "0", "t"), .expect = {{"backoff", "0:0"}}},
	{.argv = ARGV("t"),
	 .envp = ENV("PET_RESTART_BACKOFF=1:60"),
	 .expect = {{"backoff", "1:60"}}},
	{.argv = ARGV("--restart-window", "3/3600", "t"), .expect = {{"window", "3/3600"}}},
	{.argv = ARGV("--restart_window=2/0.5", "t"), .expect = {{"window", "2/0.5"}}},
	{.argv = ARGV("--restart-window", "", "t"), .expect = {{"window", "0/0"}}},
	{.argv = ARGV("t"), .envp = ENV("PET_RESTART_WINDOW=1/60"), .expect = {{"window", "1/60"}}},
	{.argv = ARGV("--no-restart-exit-codes", "3,42,3", "t"),
	 .expect = {{"no_restart_codes", "3,42"}}},
	{.argv = ARGV("t"),
	 .envp = ENV("PET_NO_RESTART_EXIT_CODES=255"),
	 .expect = {{"no_restart_codes", "255"}}},
	{.argv = ARGV("--progress-file", "/run/it", "--progress-attempts", "2", "t"),
	 .expect = {{"progress_file", "/run/it"}, {"progress_attempts", "2"}}},
	{.argv = ARGV("t"),
	 .envp = ENV("PET_PROGRESS_FILE=p", "PET_PROGRESS_ATTEMPTS=5"),
	 .expect = {{"progress_file", "p"}, {"progress_attempts", "5"}}},
	{.argv = ARGV("--exit-codes", "detailed", "t"), .expect = {{"exit_codes", "detailed"}}},
	{.argv = ARGV("t"),
	 .envp = ENV("PET_EXIT_CODES=detailed"),
	 .expect = {{"exit_codes", "detailed"}}},
	/* --no-p still means --no-python, as in torchrun. */
	{.argv = ARGV("--no-p", "t"), .expect = {{"no_python", "1"}, {"progress_attempts", "3"}}},

	/* --term-timeout: the shutdown timeout unless given; --forward-signals:
	 * SIGUSR1,SIGUSR2 less the handled signals. */
	{.argv = ARGV("t"),
	 .expect = {{"term_timeout", "30"}, {"forward", "10,12"}, {"shutdown_timeout", "30"}}},
	{.argv = ARGV("--term-timeout", "1800", "t"),
	 .expect = {{"term_timeout", "1800"}, {"shutdown_timeout", "30"}}},
	{.argv = ARGV("--shutdown-timeout", "5", "t"), .expect = {{"term_timeout", "5"}}},
	{.argv = ARGV("t"),
	 .envp = ENV("TORCH_ELASTIC_SHUTDOWN_TIMEOUT=12"),
	 .expect = {{"term_timeout", "12"}}},
	{.argv = ARGV("--shutdown-timeout", "5", "t"),
	 .envp = ENV("PET_TERM_TIMEOUT=0"),
	 .expect = {{"term_timeout", "0"}, {"shutdown_timeout", "5"}}},
	{.argv = ARGV("--forward-signals", "USR2,SIGWINCH,12", "t"),
	 .expect = {{"forward", "12,28"}}},
	{.argv = ARGV("--forward_signals=", "t"), .expect = {{"forward", ""}}},
	{.argv = ARGV("t"),
	 .envp = ENV("PET_FORWARD_SIGNALS=SIGUSR1"),
	 .expect = {{"forward", "10"}}},
	{.argv = ARGV("--signals-to-handle", "SIGTERM,SIGUSR1", "t"),
	 .expect = {{"forward", "12"}, {"signals", "15,10"}}},
	{.argv = ARGV("--signals-to-handle", "SIGUSR1,SIGUSR2", "t"), .expect = {{"forward", ""}}},
	/* SIGHUP forwarded, not handled (it then does not re-open the logs). */
	{.argv = ARGV("--signals-to-handle", "TERM", "--forward-signals", "HUP", "t"),
	 .expect = {{"forward", "1"}, {"signals", "15"}}},
};

static void
test_parse_ok(void **state)
{
	for (size_t i = 0; i < ARRAY_SIZE(ok_cases); i++) {
		const struct ok_case *c = &ok_cases[i];
		struct config cfg;
		char *err = NULL;
		int r;

		r = parse(c->argv, c->envp, &cfg, &err);
		if (r != CONFIG_RUN) {
			fail_msg("case %zu (%s ...): r=%d err=%s", i, c->argv[0], r, err);
		}
		assert_null(err);
		for (size_t k = 0; k < ARRAY_SIZE(c->expect) && c->expect[k].key; k++) {
			char *got = render(&cfg, c->expect[k].key);

			if (strcmp(got, c->expect[k].want) != 0) {
				fail_msg("case %zu (%s ...): %s = '%s', want '%s'", i, c->argv[0],
					 c->expect[k].key, got, c->expect[k].want);
			}
			free(got);
		}
		config_release(&cfg);
	}
}

struct err_case {
	const char *const *argv;
	const char *const *envp;
	const char *want[3]; /* substrings of the message */
};

static const struct err_case err_cases[] = {
	/* --nnodes */
	{ARGV("--nnodes", "x", "t"), NULL, {"--nnodes: invalid value 'x': expected N or MIN:MAX"}},
	{ARGV("--nnodes", "0", "t"), NULL, {"--nnodes: invalid value '0'", "0 < MIN <= MAX"}},
	{ARGV("--nnodes=3:2", "t"), NULL, {"--nnodes: invalid value '3:2'", "0 < MIN <= MAX"}},
	{ARGV("--nnodes", "1:2:3", "t"),
	 NULL,
	 {"--nnodes: invalid value '1:2:3': expected N or MIN:MAX"}},
	{ARGV("--nnodes", ":2", "t"), NULL, {"--nnodes: invalid value ':2'"}},
	{ARGV("--nnodes", "1:", "t"), NULL, {"--nnodes: invalid value '1:'"}},
	{ARGV("--nnodes=-1:2", "t"), NULL, {"--nnodes: invalid value '-1:2'"}},
	{ARGV("--nnodes", "-1:2", "t"), NULL, {"--nnodes: expected one argument"}},
	{ARGV("--nnodes=", "t"), NULL, {"--nnodes: invalid value ''"}},
	{ARGV("--nnodes", " 2", "t"), NULL, {"--nnodes: invalid value ' 2'"}},
	/* --nproc-per-node */
	{ARGV("--nproc-per-node", "x", "t"),
	 NULL,
	 {"--nproc-per-node: invalid value 'x': expected an integer, cpu, gpu, xpu or auto"}},
	{ARGV("--nproc_per_node=0", "t"), NULL, {"--nproc-per-node: invalid value '0'", "> 0"}},
	{ARGV("--nproc-per-node=-2", "t"), NULL, {"--nproc-per-node: invalid value '-2'", "> 0"}},
	{ARGV("--nproc-per-node", "GPU", "t"), NULL, {"--nproc-per-node: invalid value 'GPU'"}},
	{ARGV("--nproc-per-node", "XPU", "t"), NULL, {"--nproc-per-node: invalid value 'XPU'"}},
	/* Device types torch knows but elasticd cannot count. */
	{ARGV("--nproc-per-node", "npu", "t"),
	 NULL,
	 {"--nproc-per-node: 'npu': elasticd cannot count npu devices here; give a number"}},
	{ARGV("--nproc-per-node=hpu", "t"),
	 NULL,
	 {"--nproc-per-node: 'hpu': elasticd cannot count"}},
	{ARGV("--nproc-per-node=mtia", "t"), NULL, {"'mtia': elasticd cannot count mtia devices"}},
	{ARGV("--nproc-per-node=mps", "t"), NULL, {"'mps': elasticd cannot count mps devices"}},
	{ARGV("--nproc-per-node", "cuda", "t"),
	 NULL,
	 {"--nproc-per-node: 'cuda': elasticd cannot count cuda devices", "or gpu"}},
	{ARGV("t"), ENV("PET_NPROC_PER_NODE=npu"), {"PET_NPROC_PER_NODE: 'npu': elasticd cannot"}},
	/* rendezvous */
	{ARGV("--rdzv-backend", "zk", "t"),
	 NULL,
	 {"--rdzv-backend: invalid value 'zk': expected static, c10d or etcd"}},
	{ARGV("--rdzv-backend", "etcd-v2", "t"),
	 NULL,
	 {"--rdzv-backend: invalid value 'etcd-v2': etcd's v2 API is not supported; use etcd "
	  "(its v3 API) or c10d"}},
	{ARGV("--rdzv-conf", "=v", "t"),
	 NULL,
	 {"--rdzv-conf: invalid value '=v'", "must be in format <key1>=<value1>"}},
	{ARGV("--rdzv-conf", "a=1,k", "t"),
	 NULL,
	 {"--rdzv-conf: invalid value 'a=1,k'",
	  "The rendezvous configuration option 'k' must have a value specified."}},
	{ARGV("--rdzv_conf=k= ", "t"), NULL, {"option 'k' must have a value specified."}},
	{ARGV("--rdzv-conf", "a=1,,b=2", "t"), NULL, {"--rdzv-conf: invalid value 'a=1,,b=2'"}},
	{ARGV("--rdzv-conf", "a=1,", "t"), NULL, {"--rdzv-conf: invalid value 'a=1,'"}},
	{ARGV("--node-rank", "-1", "t"), NULL, {"--node-rank: invalid value '-1': must be >= 0"}},
	{ARGV("--node_rank", "one", "t"),
	 NULL,
	 {"--node-rank: invalid value 'one': expected an integer"}},
	{ARGV("--master-port", "65536", "t"),
	 NULL,
	 {"--master-port: invalid value '65536': must be <= 65535"}},
	{ARGV("--master_port=-1", "t"), NULL, {"--master-port: invalid value '-1': must be >= 0"}},
	{ARGV("--master-port", "http", "t"), NULL, {"--master-port: invalid value 'http'"}},
	/* workers */
	{ARGV("--max-restarts", "-1", "t"),
	 NULL,
	 {"--max-restarts: invalid value '-1': must be >= 0"}},
	{ARGV("--max_restarts=x", "t"),
	 NULL,
	 {"--max-restarts: invalid value 'x': expected an integer"}},
	{ARGV("--max-restarts", "99999999999", "t"),
	 NULL,
	 {"--max-restarts: invalid value '99999999999': must be <="}},
	{ARGV("--max-restarts", "99999999999999999999999", "t"),
	 NULL,
	 {"--max-restarts: invalid value", "must be <="}},
	{ARGV("--monitor-interval", "-0.5", "t"),
	 NULL,
	 {"--monitor-interval: invalid value '-0.5': must be >= 0"}},
	{ARGV("--monitor_interval=soon", "t"), NULL, {"--monitor-interval: invalid value 'soon'"}},
	{ARGV("--monitor-interval", "nan", "t"), NULL, {"--monitor-interval: invalid value 'nan'"}},
	{ARGV("--monitor-interval", "inf", "t"), NULL, {"--monitor-interval: invalid value 'inf'"}},
	/* huge seconds overflow the timers into 0 s: at most a year */
	{ARGV("--quarantine-cooldown", "1e308", "t"),
	 NULL,
	 {"--quarantine-cooldown: invalid value '1e308'", "at most 31536000"}},
	{ARGV("--health-timeout", "1e300", "t"), NULL, {"--health-timeout: invalid value '1e300'"}},
	{ARGV("--health-retry-interval", "31536001", "t"),
	 NULL,
	 {"--health-retry-interval: invalid value '31536001'"}},
	{ARGV("--hang-silence", "1e300", "t"), NULL, {"--hang-silence: invalid value '1e300'"}},
	{ARGV("--gpu-memory-wait", "1e20", "t"), NULL, {"--gpu-memory-wait: invalid value '1e20'"}},
	/* no GPU uses less than 0 bytes: the wait would always time out */
	{ARGV("--gpu-memory-threshold", "0", "t"),
	 NULL,
	 {"--gpu-memory-threshold: invalid value '0': must be > 0"}},
	/* an empty path would read /sys of the root or dlopen the program */
	{ARGV("--health-root=", "t"), NULL, {"--health-root: invalid value '': must not be empty"}},
	{ARGV("--nvml-library=", "t"),
	 NULL,
	 {"--nvml-library: invalid value '': must not be empty"}},
	{ARGV("--health-gpus", "99999999999", "t"),
	 NULL,
	 {"--health-gpus: invalid value '99999999999': expected a number of GPUs from 1 to "
	  "1048576"}},
	{ARGV("--health-nics", "a b", "t"), NULL, {"--health-nics: invalid value 'a b'"}},
	{ARGV("--start-method", "thread", "t"),
	 NULL,
	 {"--start-method: invalid value 'thread': expected spawn, fork or forkserver"}},
	{ARGV("--numa-binding", "foo", "t"),
	 NULL,
	 {"--numa-binding: invalid value 'foo': expected node, socket, exclusive or core-complex"}},
	/* events */
	{ARGV("--event-log-handler", "syslog", "t"),
	 NULL,
	 {"--event-log-handler: invalid value 'syslog': expected null, console, file or "
	  "dynamic_rendezvous"}},
	{ARGV("--event-log-handler", "console", "--event-log-file", "f", "t"),
	 NULL,
	 {"--event-log-file: the events go to 'console', not to a file"}},
	{ARGV("--event-log-file", "f", "t"),
	 ENV("PET_EVENT_LOG_HANDLER=null"),
	 {"--event-log-file: the events go to 'null'"}},
	{ARGV("--event-ring-size", "-1", "t"),
	 NULL,
	 {"--event-ring-size: invalid value '-1': must be >= 0"}},
	{ARGV("--event-ring-size", "65537", "t"),
	 NULL,
	 {"--event-ring-size: invalid value '65537': must be <= 65536"}},
	{ARGV("--no-python", "-m", "t"),
	 NULL,
	 {"Don't use both the '--no-python' flag and the '--module' flag at the same time."}},
	{ARGV("-m", "t"), ENV("PET_NO_PYTHON=1"), {"Don't use both the '--no-python' flag"}},
	{ARGV("--run-path", "t"),
	 NULL,
	 {"--run-path is not supported by elasticd: it runs the script inside a Python "
	  "multiprocessing child; drop --run-path to run it as a process"}},
	{ARGV("--run_path", "t"), NULL, {"--run-path is not supported by elasticd"}},
	{ARGV("t"), ENV("PET_RUN_PATH=1"), {"PET_RUN_PATH=1", "--run-path is not supported"}},
	/* -r / -t */
	{ARGV("-r", "4", "t"), NULL, {"--redirects: invalid value '4'", "0-3"}},
	{ARGV("-r0:4", "t"), NULL, {"--redirects: invalid value '0:4'"}},
	{ARGV("--redirects", "0:1,0:2", "t"),
	 NULL,
	 {"--redirects: invalid value '0:1,0:2'", "local rank 0 is given twice"}},
	{ARGV("--redirects=a:1", "t"), NULL, {"--redirects: invalid value 'a:1'"}},
	{ARGV("-r", "0:1,", "t"), NULL, {"--redirects: invalid value '0:1,'"}},
	{ARGV("-r=", "t"), NULL, {"--redirects: invalid value ''"}},
	{ARGV("-t", "x", "t"), NULL, {"--tee: invalid value 'x'"}},
	{ARGV("--tee=33", "t"), NULL, {"--tee: invalid value '33'"}},
	/* --local-ranks-filter */
	{ARGV("--local-ranks-filter", "a", "t"),
	 NULL,
	 {"--local-ranks-filter: invalid value 'a'", "comma-separated"}},
	{ARGV("--local_ranks_filter=-1", "t"), NULL, {"--local-ranks-filter: invalid value '-1'"}},
	{ARGV("--local-ranks-filter", "0,,1", "t"),
	 NULL,
	 {"--local-ranks-filter: invalid value '0,,1'"}},
	{ARGV("--local-ranks-filter", "0,", "t"),
	 NULL,
	 {"--local-ranks-filter: invalid value '0,'"}},
	/* --signals-to-handle */
	{ARGV("--signals-to-handle", "SIGTERM,SIGFOO", "t"),
	 NULL,
	 {"--signals-to-handle: invalid value 'SIGTERM,SIGFOO'", "unknown signal 'SIGFOO'"}},
	{ARGV("--signals-to-handle", "SIGKILL", "t"),
	 NULL,
	 {"--signals-to-handle: invalid value 'SIGKILL'", "SIGKILL cannot be caught"}},
	{ARGV("--signals_to_handle=STOP", "t"),
	 NULL,
	 {"invalid value 'STOP'", "SIGSTOP cannot be caught"}},
	{ARGV("--signals-to-handle", "SIGCHLD", "t"), NULL, {"invalid value 'SIGCHLD'", "SIGCHLD"}},
	{ARGV("--signals-to-handle", "TERM,,INT", "t"),
	 NULL,
	 {"invalid value 'TERM,,INT'", "unknown signal ''"}},
	{ARGV("--signals-to-handle", "0", "t"), NULL, {"unknown signal '0'"}},
	/* --shutdown-timeout */
	{ARGV("--shutdown-timeout", "-1", "t"),
	 NULL,
	 {"--shutdown-timeout: invalid value '-1': must be >= 0"}},
	{ARGV("t"),
	 ENV("TORCH_ELASTIC_SHUTDOWN_TIMEOUT=x"),
	 {"TORCH_ELASTIC_SHUTDOWN_TIMEOUT: invalid value 'x'"}},
	{ARGV("t"),
	 ENV("TORCH_ELASTIC_SHUTDOWN_TIMEOUT=-5"),
	 {"TORCH_ELASTIC_SHUTDOWN_TIMEOUT: invalid value '-5': must be >= 0"}},
	{ARGV("t"), ENV("PET_SHUTDOWN_TIMEOUT=-5"), {"PET_SHUTDOWN_TIMEOUT: invalid value '-5'"}},
	/* --term-timeout, --forward-signals */
	{ARGV("--term-timeout", "-1", "t"),
	 NULL,
	 {"--term-timeout: invalid value '-1': must be >= 0"}},
	{ARGV("--term-timeout", "1h", "t"), NULL, {"--term-timeout: invalid value '1h'"}},
	{ARGV("t"), ENV("PET_TERM_TIMEOUT=x"), {"PET_TERM_TIMEOUT: invalid value 'x'"}},
	{ARGV("--forward-signals", "SIGKILL", "t"),
	 NULL,
	 {"--forward-signals: invalid value 'SIGKILL'", "cannot be caught"}},
	{ARGV("--forward-signals", "USR1,SIGFOO", "t"),
	 NULL,
	 {"--forward-signals: invalid value 'USR1,SIGFOO'", "unknown signal 'SIGFOO'"}},
	{ARGV("--forward-signals", "CHLD", "t"), NULL, {"--forward-signals: invalid value 'CHLD'"}},
	{ARGV("--forward-signals", "SIGUSR1,SIGTERM", "t"),
	 NULL,
	 {"--forward-signals: SIGTERM is also in --signals-to-handle"}},
	{ARGV("--signals-to-handle", "USR1", "t"),
	 ENV("PET_FORWARD_SIGNALS=USR1"),
	 {"--forward-signals: SIGUSR1 is also in --signals-to-handle"}},
	/* Hang rules. */
	{ARGV("--hang-silence", "x", "t"), NULL, {"--hang-silence: invalid value 'x'"}},
	{ARGV("--hang-cadence", "step", "t"), NULL, {"needs --hang-cadence-interval"}},
	{ARGV("--hang-cadence", "a(", "--hang-cadence-interval", "1", "t"),
	 NULL,
	 {"--hang-cadence: 'a(' is not a regular expression"}},
	{ARGV("--hang-cadence-start", "5", "t"), NULL, {"need --hang-cadence"}},
	/* The restart policy. */
	{ARGV("--restart-backoff", "x", "t"),
	 NULL,
	 {"--restart-backoff: invalid value 'x': expected MIN:MAX seconds"}},
	{ARGV("--restart-backoff", "2:1", "t"),
	 NULL,
	 {"--restart-backoff: invalid value '2:1': expected 0 < MIN <= MAX"}},
	{ARGV("--restart-backoff", "0:5", "t"), NULL, {"invalid value '0:5': expected 0 < MIN"}},
	{ARGV("--restart-backoff", "-1", "t"), NULL, {"--restart-backoff: invalid value '-1'"}},
	{ARGV("--restart-backoff", "1:2:3", "t"),
	 NULL,
	 {"--restart-backoff: invalid value '1:2:3'"}},
	{ARGV("--restart-backoff", "1:", "t"), NULL, {"--restart-backoff: invalid value '1:'"}},
	{ARGV("t"), ENV("PET_RESTART_BACKOFF=1:x"), {"PET_RESTART_BACKOFF: invalid value '1:x'"}},
	{ARGV("--restart-window", "3", "t"),
	 NULL,
	 {"--restart-window: invalid value '3': expected N/W"}},
	{ARGV("--restart-window", "0/10", "t"), NULL, {"invalid value '0/10': N must be"}},
	{ARGV("--restart-window", "x/10", "t"), NULL, {"invalid value 'x/10': N must be"}},
	{ARGV("--restart-window", "3/0", "t"), NULL, {"invalid value '3/0': W must be"}},
	{ARGV("--restart-window", "3/-1", "t"), NULL, {"invalid value '3/-1': W must be"}},
	{ARGV("t"), ENV("PET_RESTART_WINDOW=3/"), {"PET_RESTART_WINDOW: invalid value '3/'"}},
	{ARGV("--no-restart-exit-codes", "0", "t"),
	 NULL,
	 {"--no-restart-exit-codes: invalid value '0'", "1 to 255"}},
	{ARGV("--no-restart-exit-codes", "3,256", "t"),
	 NULL,
	 {"--no-restart-exit-codes: invalid value '3,256'"}},
	{ARGV("--no-restart-exit-codes", "3,,4", "t"),
	 NULL,
	 {"--no-restart-exit-codes: invalid value '3,,4'"}},
	{ARGV("--no-restart-exit-codes", "3,", "t"),
	 NULL,
	 {"--no-restart-exit-codes: invalid value '3,'"}},
	{ARGV("--progress-attempts", "0", "t"),
	 NULL,
	 {"--progress-attempts: invalid value '0': must be >= 1"}},
	{ARGV("--progress-attempts", "2", "t"),
	 NULL,
	 {"--progress-attempts needs --progress-file"}},
	{ARGV("--exit-codes", "fancy", "t"),
	 NULL,
	 {"--exit-codes: invalid value 'fancy': expected torchrun or detailed"}},
	{ARGV("t"), ENV("PET_EXIT_CODES=1"), {"PET_EXIT_CODES: invalid value '1'"}},
	/* Bad PET_* values name the variable and the value. */
	{ARGV("t"), ENV("PET_NNODES=x"), {"PET_NNODES: invalid value 'x': expected N or MIN:MAX"}},
	{ARGV("t"), ENV("PET_NPROC_PER_NODE="), {"PET_NPROC_PER_NODE: invalid value ''"}},
	{ARGV("t"),
	 ENV("PET_MAX_RESTARTS=-2"),
	 {"PET_MAX_RESTARTS: invalid value '-2': must be >= 0"}},
	{ARGV("t"), ENV("PET_REDIRECTS=9"), {"PET_REDIRECTS: invalid value '9'"}},
	{ARGV("t"), ENV("PET_MASTER_PORT=70000"), {"PET_MASTER_PORT: invalid value '70000'"}},
	{ARGV("t"), ENV("PET_RDZV_CONF=k"), {"PET_RDZV_CONF: invalid value 'k'"}},
	{ARGV("t"), ENV("PET_START_METHOD=x"), {"PET_START_METHOD: invalid value 'x'"}},
	{ARGV("t"), ENV("PET_STANDALONE=yes"), {"PET_STANDALONE: invalid value 'yes'", "integer"}},
	{ARGV("t"), ENV("PET_MODULE=true"), {"PET_MODULE: invalid value 'true'"}},
	{ARGV("t"), ENV("PET_NO_PYTHON="), {"PET_NO_PYTHON: invalid value ''"}},
	{ARGV("t"),
	 ENV("PET_VIRTUAL_LOCAL_RANK=1.0"),
	 {"PET_VIRTUAL_LOCAL_RANK: invalid value '1.0'"}},
	/* Unknown, ambiguous and malformed options. */
	{ARGV("--foo", "t"), NULL, {"unrecognized argument: --foo"}},
	{ARGV("--foo=1", "t"), NULL, {"unrecognized argument: --foo=1"}},
	{ARGV("-x", "t"), NULL, {"unrecognized argument: -x"}},
	{ARGV("--nproc-per-nodes", "2", "t"), NULL, {"unrecognized argument: --nproc-per-nodes"}},
	{ARGV("--nproc_per-node", "2", "t"), NULL, {"unrecognized argument: --nproc_per-node"}},
	{ARGV("---nnodes", "2", "t"), NULL, {"unrecognized argument: ---nnodes"}},
	{ARGV("--=x", "t"), NULL, {"unrecognized argument: --=x"}},
	{ARGV("--m", "t"),
	 NULL,
	 {"ambiguous option: --m could match ", "--max-restarts", "--module"}},
	{ARGV("--ma=3", "t"),
	 NULL,
	 {"ambiguous option: --ma could match --max-restarts, --master-addr, --master-port"}},
	{ARGV("--rdzv", "x", "t"),
	 NULL,
	 {"ambiguous option: --rdzv could match", "--rdzv-backend", "--rdzv-conf"}},
	{ARGV("--ru", "t"), NULL, {"ambiguous option: --ru could match --run-path, --rdzv-id"}},
	{ARGV("--v", "t"),
	 NULL,
	 {"ambiguous option: --v could match --virtual-local-rank, --version"}},
	{ARGV("--dup", "x", "t"),
	 NULL,
	 {"could match --duplicate-stdout-filters, --duplicate-stderr-filters"}},
	/* --logs-specs: torch registers only "default"; no plug-ins here. */
	{ARGV("--logs-specs", "nosuch", "t"),
	 NULL,
	 {"--logs-specs: invalid value 'nosuch'", "only the default"}},
	{ARGV("--logs_specs=", "t"), NULL, {"--logs-specs: invalid value ''"}},
	{ARGV("--nnodes"), NULL, {"--nnodes: expected one argument"}},
	{ARGV("--nnodes", "--max-restarts", "1", "t"), NULL, {"--nnodes: expected one argument"}},
	{ARGV("--rdzv-id", "--", "t"), NULL, {"--rdzv-id: expected one argument"}},
	{ARGV("--rdzv-id", "-r", "t"), NULL, {"--rdzv-id: expected one argument"}},
	{ARGV("--rdzv-id", "--ma", "t"), NULL, {"--rdzv-id: expected one argument"}},
	{ARGV("--rdzv-id", "-zz", "t"), NULL, {"--rdzv-id: expected one argument"}},
	{ARGV("-r"), NULL, {"--redirects: expected one argument"}},
	{ARGV("--standalone=1", "t"), NULL, {"--standalone: ignored explicit argument '1'"}},
	{ARGV("-mx", "t"), NULL, {"-m: ignored explicit argument 'x'"}},
	{ARGV("-m=1", "t"), NULL, {"-m: ignored explicit argument '=1'"}},
	{ARGV("--help=1", "t"), NULL, {"--help: ignored explicit argument '1'"}},
	/* The entrypoint is required. */
	{NOARGS, NULL, {"the following arguments are required: training_script"}},
	{ARGV("--nnodes", "2"), NULL, {"the following arguments are required: training_script"}},
	{ARGV("--"), NULL, {"the following arguments are required: training_script"}},
	{ARGV("-m", "--standalone"),
	 NULL,
	 {"the following arguments are required: training_script"}},
};

static void
test_parse_err(void **state)
{
	for (size_t i = 0; i < ARRAY_SIZE(err_cases); i++) {
		const struct err_case *c = &err_cases[i];
		struct config cfg, zero;
		char *err = NULL;
		int r;

		memset(&zero, 0, sizeof(zero));
		r = parse(c->argv, c->envp, &cfg, &err);
		if (r != -EINVAL) {
			fail_msg("case %zu (%s ...): r=%d, want -EINVAL", i,
				 c->argv[0] ? c->argv[0] : "", r);
		}
		assert_non_null(err);
		for (size_t k = 0; k < ARRAY_SIZE(c->want) && c->want[k]; k++) {
			if (!strstr(err, c->want[k])) {
				fail_msg("case %zu: message '%s' lacks '%s'", i, err, c->want[k]);
			}
		}
		/* Nothing is left allocated, and release is harmless. */
		assert_memory_equal(&cfg, &zero, sizeof(cfg));
		config_release(&cfg);
		free(err);
	}
}

struct result_case {
	const char *const *argv;
	const char *const *envp;
	int want;
};

static const struct result_case result_cases[] = {
	{ARGV("--help"), NULL, CONFIG_HELP},
	{ARGV("-h"), NULL, CONFIG_HELP},
	{ARGV("--hel"), NULL, CONFIG_HELP}, /* --he: --health-* too, ambiguous */
	{ARGV("-mh"), NULL, CONFIG_HELP},
	{ARGV("--nnodes", "2", "--help", "--bogus"), NULL, CONFIG_HELP},
	{ARGV("--help"), ENV("PET_NNODES=x", "PET_STANDALONE=yes"), CONFIG_HELP},
	{ARGV("--version"), NULL, CONFIG_VERSION},
	{ARGV("--vers", "t"), NULL, CONFIG_VERSION},
	{ARGV("--version", "--help"), NULL, CONFIG_VERSION},
	{ARGV("t", "--help"), NULL, CONFIG_RUN},
	{ARGV("--", "--help"), NULL, CONFIG_RUN},
	{ARGV("--max-restarts", "x", "--help"), NULL, -EINVAL},
};

static void
test_parse_result(void **state)
{
	for (size_t i = 0; i < ARRAY_SIZE(result_cases); i++) {
		const struct result_case *c = &result_cases[i];
		struct config cfg;
		char *err = NULL;
		int r;

		r = parse(c->argv, c->envp, &cfg, &err);
		if (r != c->want) {
			fail_msg("case %zu (%s ...): r=%d, want %d (%s)", i, c->argv[0], r, c->want,
				 err);
		}
		if (r != CONFIG_RUN) {
			struct config zero;

			memset(&zero, 0, sizeof(zero));
			assert_memory_equal(&cfg, &zero, sizeof(cfg));
		}
		assert_true((r == -EINVAL) == (err != NULL));
		config_release(&cfg);
		free(err);
	}
}

static void
assert_uuid4(const char *s)
{
	assert_int_equal(strlen(s), 36);
	for (size_t i = 0; i < 36; i++) {
		if (i == 8 || i == 13 || i == 18 || i == 23) {
			assert_int_equal(s[i], '-');
		} else {
			assert_true(isxdigit((unsigned char)s[i]) && !isupper((unsigned char)s[i]));
		}
	}
	assert_int_equal(s[14], '4');
	assert_non_null(strchr("89ab", s[19]));
}

static void
test_standalone_run_id(void **state)
{
	struct config a, b;
	char *err = NULL;

	assert_int_equal(parse(ARGV("--standalone", "t"), NULL, &a, &err), CONFIG_RUN);
	assert_int_equal(parse(ARGV("t"), ENV("PET_STANDALONE=1"), &b, &err), CONFIG_RUN);
	assert_uuid4(a.rdzv_id);
	assert_uuid4(b.rdzv_id);
	assert_string_not_equal(a.rdzv_id, b.rdzv_id);
	assert_string_equal(a.rdzv_backend, "c10d");
	assert_string_equal(a.rdzv_endpoint, "localhost:0");
	config_release(&a);
	config_release(&b);

	/* A one-node job without --master-port gets one too (PR 175699). */
	assert_int_equal(parse(ARGV("t"), NULL, &a, &err), CONFIG_RUN);
	assert_int_equal(parse(ARGV("t"), NULL, &b, &err), CONFIG_RUN);
	assert_uuid4(a.rdzv_id);
	assert_string_not_equal(a.rdzv_id, b.rdzv_id);
	config_release(&a);
	config_release(&b);
}

/* config_release frees what a parse filled in and leaves the struct all zero
 * bytes, so that a second release (or a release of a zeroed struct) is safe. */
static void
test_release_zeroed(void **state)
{
	static const unsigned char zero[sizeof(struct config)];
	struct config cfg = {0};
	char *err = NULL;
	const char *const *args =
		ARGV("--rdzv-backend", "c10d", "--rdzv-endpoint", "h:1", "--rdzv-conf", "timeout=5",
		     "--role", "r", "--log-dir", "/tmp", "-r", "0:1", "-t", "1:2",
		     "--signals-to-handle", "SIGTERM", "--event-log-file", "/tmp/e",
		     "--control-socket", "/tmp/s", "train.py", "a", "b");

	assert_int_equal(parse(args, NULL, &cfg, &err), CONFIG_RUN);
	assert_null(err);
	assert_non_null(cfg.rdzv_backend);
	assert_non_null(cfg.rdzv_conf);
	assert_non_null(cfg.args);
	/* (No byte compare before the release: the struct's padding is not
	 * initialised by the parse, and valgrind rightly says so.) */
	config_release(&cfg);
	assert_memory_equal(&cfg, zero, sizeof(cfg));
	config_release(&cfg);
	assert_memory_equal(&cfg, zero, sizeof(cfg));
}

struct std_map_case {
	const char *s;
	const char *err;       /* substring of the error, or NULL on success */
	int ranks[4];          /* probed local ranks */
	enum std_mask want[4]; /* their masks */
};

static const struct std_map_case std_map_cases[] = {
	{"0", NULL, {0, 1, 7, 100}, {STD_NONE, STD_NONE, STD_NONE, STD_NONE}},
	{"1", NULL, {0, 1, 7, 100}, {STD_OUT, STD_OUT, STD_OUT, STD_OUT}},
	{"2", NULL, {0, 1, 7, 100}, {STD_ERR, STD_ERR, STD_ERR, STD_ERR}},
	{"3", NULL, {0, 1, 7, 100}, {STD_ALL, STD_ALL, STD_ALL, STD_ALL}},
	{"0:1,1:2", NULL, {0, 1, 2, 3}, {STD_OUT, STD_ERR, STD_NONE, STD_NONE}},
	{"1:3", NULL, {0, 1, 2, 3}, {STD_NONE, STD_ALL, STD_NONE, STD_NONE}},
	{"12:3", NULL, {12, 1, 2, 120}, {STD_ALL, STD_NONE, STD_NONE, STD_NONE}},
	{"0:1,10:2,100:3", NULL, {0, 10, 100, 1}, {STD_OUT, STD_ERR, STD_ALL, STD_NONE}},
	{"2147483647:1", NULL, {2147483647, 0, 1, 2}, {STD_OUT, STD_NONE, STD_NONE, STD_NONE}},
	{"0:0,1:1", NULL, {0, 1, 2, 3}, {STD_NONE, STD_OUT, STD_NONE, STD_NONE}},
	{"4", "invalid value '4'", {0}, {0}},
	{"", "invalid value ''", {0}, {0}},
	{"x", "invalid value 'x'", {0}, {0}},
	{"03", "invalid value '03'", {0}, {0}},
	{"0:", "invalid value '0:'", {0}, {0}},
	{":1", "invalid value ':1'", {0}, {0}},
	{"0:4", "invalid value '0:4'", {0}, {0}},
	{"0:11", "invalid value '0:11'", {0}, {0}},
	{"0:1,", "invalid value '0:1,'", {0}, {0}},
	{",0:1", "invalid value ',0:1'", {0}, {0}},
	{"0:1;1:2", "invalid value '0:1;1:2'", {0}, {0}},
	{" 0:1", "invalid value ' 0:1'", {0}, {0}},
	{"0:1 ", "invalid value '0:1 '", {0}, {0}},
	{"-1:1", "invalid value '-1:1'", {0}, {0}},
	{"+1:1", "invalid value '+1:1'", {0}, {0}},
	{"1:1:1", "invalid value '1:1:1'", {0}, {0}},
	{"2147483648:1", "invalid value '2147483648:1'", {0}, {0}},
	{"0:1,0:2", "local rank 0 is given twice", {0}, {0}},
	{"01:1,1:2", "local rank 1 is given twice", {0}, {0}},
};

static void
test_std_map(void **state)
{
	for (size_t i = 0; i < ARRAY_SIZE(std_map_cases); i++) {
		const struct std_map_case *c = &std_map_cases[i];
		struct std_map m = {.all = STD_OUT};
		char *err = NULL;
		int r;

		r = std_map_parse(c->s, &m, &err);
		if (c->err) {
			if (r != -EINVAL || !err || !strstr(err, c->err)) {
				fail_msg("'%s': r=%d err=%s, want '%s'", c->s, r, err, c->err);
			}
			/* Untouched on failure. */
			assert_int_equal(m.all, STD_OUT);
			assert_null(m.entries);
			assert_int_equal(m.n, 0);
			free(err);
			continue;
		}
		if (r != 0) {
			fail_msg("'%s': r=%d err=%s", c->s, r, err);
		}
		for (size_t k = 0; k < ARRAY_SIZE(c->ranks); k++) {
			if (std_map_get(&m, c->ranks[k]) != c->want[k]) {
				fail_msg("'%s': rank %d has %d, want %d", c->s, c->ranks[k],
					 (int)std_map_get(&m, c->ranks[k]), (int)c->want[k]);
			}
		}
		std_map_release(&m);
		assert_null(m.entries);
		assert_int_equal(m.n, 0);
		std_map_release(&m);
	}
}

struct nproc_case {
	const char *value;
	int ncpus, ngpus, nxpus, want;
};

static const struct nproc_case nproc_cases[] = {
	{"4", 16, 8, 0, 4},         {"4", 16, 0, 0, 4},     {"cpu", 16, 8, 0, 16},
	{"cpu", 3, 0, 0, 3},        {"gpu", 16, 8, 0, 8},   {"gpu", 16, 0, 0, -ENODEV},
	{"auto", 16, 8, 0, 8},      {"auto", 16, 0, 0, 16}, {"auto", 0, 0, 0, -ENODEV},
	{"cpu", 0, 2, 0, -ENODEV},  {"xpu", 16, 8, 4, 4},   {"xpu", 16, 8, 0, -ENODEV},
	{"gpu", 16, 0, 4, -ENODEV}, {"cpu", 16, 0, 4, 16},  {"auto", 16, 0, 4, 4},
	{"auto", 16, 8, 4, 8},
};

static void
test_resolve_nproc(void **state)
{
	struct config zero = {0};

	for (size_t i = 0; i < ARRAY_SIZE(nproc_cases); i++) {
		const struct nproc_case *c = &nproc_cases[i];
		struct config cfg;
		char *err = NULL;

		assert_int_equal(parse(ARGV("--nproc-per-node", c->value, "t"), NULL, &cfg, &err),
				 CONFIG_RUN);
		if (config_resolve_nproc(&cfg, c->ncpus, c->ngpus, c->nxpus) != c->want) {
			fail_msg("%s with %d cpus, %d gpus, %d xpus: %d, want %d", c->value,
				 c->ncpus, c->ngpus, c->nxpus,
				 config_resolve_nproc(&cfg, c->ncpus, c->ngpus, c->nxpus), c->want);
		}
		config_release(&cfg);
	}
	/* A zeroed struct is NPROC_INT with no count. */
	assert_int_equal(config_resolve_nproc(&zero, 4, 4, 4), -ENODEV);
}

struct filter_case {
	const char *value; /* NULL: option not given */
	int rank;
	bool want;
};

static const struct filter_case filter_cases[] = {
	{NULL, 0, true},   {NULL, 99, true}, {"", 5, true},     {"0,2", 0, true},
	{"0,2", 1, false}, {"0,2", 2, true}, {"0,2", 3, false}, {"10", 10, true},
	{"10", 1, false},  {"1,1", 1, true}, {"0", -1, false},
};

static void
test_rank_in_filter(void **state)
{
	for (size_t i = 0; i < ARRAY_SIZE(filter_cases); i++) {
		const struct filter_case *c = &filter_cases[i];
		struct config cfg;
		char *err = NULL;

		if (c->value) {
			assert_int_equal(parse(ARGV("--local-ranks-filter", c->value, "t"), NULL,
					       &cfg, &err),
					 CONFIG_RUN);
		} else {
			assert_int_equal(parse(ARGV("t"), NULL, &cfg, &err), CONFIG_RUN);
		}
		if (config_rank_in_filter(&cfg, c->rank) != c->want) {
			fail_msg("filter '%s', rank %d: want %d", c->value, c->rank, c->want);
		}
		config_release(&cfg);
	}
}

static void
test_rdzv_conf_get(void **state)
{
	struct config cfg;
	char *err = NULL;

	assert_int_equal(
		parse(ARGV("--rdzv-conf", "timeout=60, join_timeout = 5 ,x=a=b,timeout=90", "t"),
		      NULL, &cfg, &err),
		CONFIG_RUN);
	assert_int_equal(cfg.n_rdzv_conf, 3);
	assert_string_equal(config_rdzv_conf_get(&cfg, "timeout"), "90");
	assert_string_equal(config_rdzv_conf_get(&cfg, "join_timeout"), "5");
	assert_string_equal(config_rdzv_conf_get(&cfg, "x"), "a=b");
	assert_null(config_rdzv_conf_get(&cfg, "rank"));
	assert_null(config_rdzv_conf_get(&cfg, "time"));
	config_release(&cfg);

	assert_int_equal(parse(ARGV("t"), NULL, &cfg, &err), CONFIG_RUN);
	assert_null(config_rdzv_conf_get(&cfg, "timeout"));
	config_release(&cfg);
}

static void
test_usage(void **state)
{
	static const char *const longs[] = {
		"--nnodes",
		"--nproc-per-node",
		"--rdzv-backend",
		"--rdzv-endpoint",
		"--rdzv-id",
		"--run-id",
		"--rdzv-conf",
		"--standalone",
		"--max-restarts",
		"--monitor-interval",
		"--start-method",
		"--role",
		"--module",
		"--no-python",
		"--run-path",
		"--log-dir",
		"--redirects",
		"--tee",
		"--node-rank",
		"--master-addr",
		"--master-port",
		"--local-addr",
		"--event-log-handler",
		"--event-log-file",
		"--event-ring-size",
		"--local-ranks-filter",
		"--logs-specs",
		"--numa-binding",
		"--signals-to-handle",
		"--shutdown-timeout",
		"--virtual-local-rank",
		"--duplicate-stdout-filters",
		"--duplicate-stderr-filters",
		"--log-line-prefix-template",
		"TORCHELASTIC_LOG_LINE_PREFIX_TEMPLATE",
		"--help",
		"--version",
		"-m, --module",
		"-r, --redirects",
		"-t, --tee",
		"-h, --help",
		"Usage: elasticd [options] [--] training_script [args...]",
		"\nWorkers:\n",
		"\nRendezvous:\n",
		"\nLogs and output:\n",
		"\nSignals and shutdown:\n",
		"\nOther:\n",
		"underscore",
		"PET_",
		"SIGTERM,SIGINT,SIGHUP,SIGQUIT",
		"TORCH_ELASTIC_SHUTDOWN_TIMEOUT",
	};
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);
	const char *line;

	assert_non_null(f);
	config_usage(f);
	assert_int_equal(fclose(f), 0);
	for (size_t i = 0; i < ARRAY_SIZE(longs); i++) {
		if (!strstr(buf, longs[i])) {
			fail_msg("--help lacks '%s':\n%s", longs[i], buf);
		}
	}
	line = buf;
	while (*line) {
		size_t n = strcspn(line, "\n");

		if (n > 100) {
			fail_msg("line over 100 columns: %.*s", (int)n, line);
		}
		assert_null(memchr(line, '\t', n));
		line += n + (line[n] == '\n');
	}
	free(buf);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_parse_ok),       cmocka_unit_test(test_parse_err),
		cmocka_unit_test(test_parse_result),   cmocka_unit_test(test_standalone_run_id),
		cmocka_unit_test(test_release_zeroed), cmocka_unit_test(test_std_map),
		cmocka_unit_test(test_resolve_nproc),  cmocka_unit_test(test_rank_in_filter),
		cmocka_unit_test(test_rdzv_conf_get),  cmocka_unit_test(test_usage),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
