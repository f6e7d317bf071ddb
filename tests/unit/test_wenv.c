/* The worker contract: environment and argv exactly as torchrun builds them. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"
#include "util.h"
#include "wenv.h"

static const struct wenv_worker base_worker = {
	.local_rank = 1,
	.rank = 5,
	.group_rank = 2,
	.role_rank = 3,
	.role_name = "trainer",
	.local_world_size = 2,
	.world_size = 6,
	.group_world_size = 3,
	.role_world_size = 4,
	.master_addr = "node0",
	.master_port = 29500,
	.restart_count = 1,
	.round = 4,
	.max_restarts = 3,
	.run_id = "job1",
	.use_agent_store = false,
	.error_file = "/tmp/x/attempt_1/1/error.json",
	.set_omp_num_threads = true,
	.signals_to_handle = "SIGTERM,SIGINT,SIGHUP,SIGQUIT",
};

static void
test_env_contract(void **state)
{
	char *base[] = {"PATH=/usr/bin",
			"HOME=/root",
			"RANK=99",
			"NOTIFY_SOCKET=/run/x",
			"WATCHDOG_USEC=100",
			"LISTEN_FDS=2",
			"LISTEN_PID=1",
			"WATCHDOG_X=1",
			"LISTEN_FDNAMES=a",
			"NOTIFY_SOCKETS=kept",
			NULL};
	static const struct {
		const char *name;
		const char *value; /* NULL: must be absent */
	} want[] = {
		{"PATH", "/usr/bin"},
		{"HOME", "/root"},
		{"LOCAL_RANK", "1"},
		{"RANK", "5"},
		{"GROUP_RANK", "2"},
		{"ROLE_RANK", "3"},
		{"ROLE_NAME", "trainer"},
		{"LOCAL_WORLD_SIZE", "2"},
		{"WORLD_SIZE", "6"},
		{"GROUP_WORLD_SIZE", "3"},
		{"ROLE_WORLD_SIZE", "4"},
		{"MASTER_ADDR", "node0"},
		{"MASTER_PORT", "29500"},
		{"TORCHELASTIC_RESTART_COUNT", "1"},
		{"ELASTICD_ROUND", "4"},
		{"TORCHELASTIC_MAX_RESTARTS", "3"},
		{"TORCHELASTIC_RUN_ID", "job1"},
		{"TORCHELASTIC_USE_AGENT_STORE", "False"},
		{"TORCHELASTIC_ERROR_FILE", "/tmp/x/attempt_1/1/error.json"},
		{"TORCH_NCCL_ASYNC_ERROR_HANDLING", "1"},
		/* torch < 2.2 reads only the old name; >= 2.2 warns about it. */
		{"NCCL_ASYNC_ERROR_HANDLING", "1"},
		{"TORCHELASTIC_SIGNALS_TO_HANDLE", "SIGTERM,SIGINT,SIGHUP,SIGQUIT"},
		{"OMP_NUM_THREADS", "1"},
		{"NOTIFY_SOCKET", NULL},
		{"WATCHDOG_USEC", NULL},
		{"LISTEN_FDS", NULL},
		{"LISTEN_PID", NULL},
		{"WATCHDOG_X", NULL},
		{"LISTEN_FDNAMES", NULL},
		{"NOTIFY_SOCKETS", "kept"},
	};
	char **env = NULL, *err = NULL;

	assert_int_equal(wenv_build_env(base, &base_worker, &env, &err), 0);
	for (size_t i = 0; i < ARRAY_SIZE(want); i++) {
		const char *got = wenv_get(env, want[i].name);

		print_message("%s\n", want[i].name);
		if (want[i].value) {
			assert_non_null(got);
			assert_string_equal(got, want[i].value);
		} else {
			assert_null(got);
		}
	}
	/* Exactly one RANK entry: the agent's is replaced, not duplicated. */
	size_t ranks = 0;
	for (size_t i = 0; env[i]; i++) {
		ranks += strncmp(env[i], "RANK=", 5) == 0;
	}
	assert_int_equal(ranks, 1);
	assert_int_equal(strv_length(env), 3 + 21); /* PATH, HOME, NOTIFY_SOCKETS */
	strv_free(env);
}

static void
test_env_keeps_callers_values(void **state)
{
	char *base[] = {"OMP_NUM_THREADS=4", "NCCL_ASYNC_ERROR_HANDLING=0",
			"TORCH_NCCL_ASYNC_ERROR_HANDLING=3",
			"TORCHELASTIC_SIGNALS_TO_HANDLE=SIGUSR1", NULL};
	struct wenv_worker w = base_worker;
	char **env = NULL, *err = NULL;

	w.use_agent_store = true;
	assert_int_equal(wenv_build_env(base, &w, &env, &err), 0);
	assert_string_equal(wenv_get(env, "OMP_NUM_THREADS"), "4");
	assert_string_equal(wenv_get(env, "NCCL_ASYNC_ERROR_HANDLING"), "0");
	assert_string_equal(wenv_get(env, "TORCH_NCCL_ASYNC_ERROR_HANDLING"), "3");
	assert_string_equal(wenv_get(env, "TORCHELASTIC_USE_AGENT_STORE"), "True");
	/* The agent's list replaces the caller's, as torch's launch_agent. */
	assert_string_equal(wenv_get(env, "TORCHELASTIC_SIGNALS_TO_HANDLE"),
			    "SIGTERM,SIGINT,SIGHUP,SIGQUIT");
	strv_free(env);

	/* Not given: the caller's value stays. */
	w.signals_to_handle = NULL;
	assert_int_equal(wenv_build_env(base, &w, &env, &err), 0);
	assert_string_equal(wenv_get(env, "TORCHELASTIC_SIGNALS_TO_HANDLE"), "SIGUSR1");
	strv_free(env);

	/* nproc == 1: no OMP_NUM_THREADS at all. */
	w.set_omp_num_threads = false;
	assert_int_equal(wenv_build_env(NULL, &w, &env, &err), 0);
	assert_null(wenv_get(env, "OMP_NUM_THREADS"));
	strv_free(env);
}

/* TORCH_WORKER_SERVER_SOCKET: set when given (replacing the caller's, which
 * all workers would share), left alone when not. */
static void
test_env_worker_server_socket(void **state)
{
	char *base[] = {"TORCH_WORKER_SERVER_SOCKET=/shared.sock", NULL};
	struct wenv_worker w = base_worker;
	char **env = NULL, *err = NULL;

	assert_int_equal(wenv_build_env(NULL, &w, &env, &err), 0);
	assert_null(wenv_get(env, "TORCH_WORKER_SERVER_SOCKET"));
	strv_free(env);
	assert_int_equal(wenv_build_env(base, &w, &env, &err), 0);
	assert_string_equal(wenv_get(env, "TORCH_WORKER_SERVER_SOCKET"), "/shared.sock");
	strv_free(env);
	w.worker_server_socket = "/run/elasticd/j.workers/rank1.sock";
	assert_int_equal(wenv_build_env(base, &w, &env, &err), 0);
	assert_string_equal(wenv_get(env, "TORCH_WORKER_SERVER_SOCKET"),
			    "/run/elasticd/j.workers/rank1.sock");
	strv_free(env);
}

/* ELASTICD_CONTROL_SOCKET: the agent's control socket when it has one (a
 * worker asks for its node's exclusion there), else the caller's. */
static void
test_env_control_socket(void **state)
{
	char *base[] = {"ELASTICD_CONTROL_SOCKET=/outer.sock", NULL};
	struct wenv_worker w = base_worker;
	char **env = NULL, *err = NULL;

	assert_int_equal(wenv_build_env(NULL, &w, &env, &err), 0);
	assert_null(wenv_get(env, "ELASTICD_CONTROL_SOCKET"));
	strv_free(env);
	w.control_socket = "/run/elasticd/j.sock";
	assert_int_equal(wenv_build_env(base, &w, &env, &err), 0);
	assert_string_equal(wenv_get(env, "ELASTICD_CONTROL_SOCKET"), "/run/elasticd/j.sock");
	strv_free(env);
}

/* TORCHELASTIC_TIMER_FILE: the agent's FileTimer FIFO when it serves one
 * (torchrun's _setup_local_watchdog), else whatever the caller had. */
static void
test_env_timer_file(void **state)
{
	char *base[] = {"TORCHELASTIC_TIMER_FILE=/tmp/given", NULL};
	struct wenv_worker w = base_worker;
	char **env = NULL, *err = NULL;

	(void)state;
	assert_int_equal(wenv_build_env(NULL, &w, &env, &err), 0);
	assert_null(wenv_get(env, "TORCHELASTIC_TIMER_FILE"));
	strv_free(env);
	assert_int_equal(wenv_build_env(base, &w, &env, &err), 0);
	assert_string_equal(wenv_get(env, "TORCHELASTIC_TIMER_FILE"), "/tmp/given");
	strv_free(env);
	w.timer_file = "/tmp/watchdog_timer_0b9e7c52-6d0a-4c1e-9f5e-3a2b1c0d9e8f";
	assert_int_equal(wenv_build_env(NULL, &w, &env, &err), 0);
	assert_string_equal(wenv_get(env, "TORCHELASTIC_TIMER_FILE"),
			    "/tmp/watchdog_timer_0b9e7c52-6d0a-4c1e-9f5e-3a2b1c0d9e8f");
	for (size_t i = 0, n = 0; env[i]; i++) {
		n += strncmp(env[i], "TORCHELASTIC_TIMER_FILE=", 24) == 0;
		assert_true(n <= 1);
	}
	strv_free(env);
}

/* PYTHONFAULTHANDLER: "1" with hang rules on, unless the caller set it (even
 * to "" or "0"); untouched with the rules off. */
static void
test_env_faulthandler(void **state)
{
	static const struct {
		const char *given; /* NULL: unset */
		bool on;
		const char *want; /* NULL: unset */
	} rows[] = {
		{NULL, false, NULL}, {NULL, true, "1"}, {"0", true, "0"},
		{"", true, ""},      {"1", false, "1"}, {"2", true, "2"},
	};

	(void)state;
	for (size_t i = 0; i < ARRAY_SIZE(rows); i++) {
		char given[64];
		char *base[] = {given, NULL};
		struct wenv_worker w = base_worker;
		char **env = NULL, *err = NULL;

		snprintf(given, sizeof(given), "PYTHONFAULTHANDLER=%s", rows[i].given);
		w.python_faulthandler = rows[i].on;
		assert_int_equal(wenv_build_env(rows[i].given ? base : NULL, &w, &env, &err), 0);
		if (rows[i].want) {
			assert_non_null(wenv_get(env, "PYTHONFAULTHANDLER"));
			assert_string_equal(wenv_get(env, "PYTHONFAULTHANDLER"), rows[i].want);
		} else {
			assert_null(wenv_get(env, "PYTHONFAULTHANDLER"));
		}
		strv_free(env);
	}
}

static void
test_env_virtual_local_rank(void **state)
{
	char *base[] = {"CUDA_VISIBLE_DEVICES=4, 5", NULL};
	struct wenv_worker w = base_worker;
	char **env = NULL, *err = NULL;

	w.virtual_local_rank = true;
	assert_int_equal(wenv_build_env(base, &w, &env, &err), 0);
	assert_string_equal(wenv_get(env, "LOCAL_RANK"), "0");
	assert_string_equal(wenv_get(env, "CUDA_VISIBLE_DEVICES"), "5");
	strv_free(env);

	assert_int_equal(wenv_build_env(NULL, &w, &env, &err), 0);
	assert_string_equal(wenv_get(env, "CUDA_VISIBLE_DEVICES"), "1");
	strv_free(env);

	char *short_base[] = {"CUDA_VISIBLE_DEVICES=7", NULL};
	assert_int_equal(wenv_build_env(short_base, &w, &env, &err), -EINVAL);
	assert_non_null(strstr(err, "local_rank 1 exceeds available GPUs"));
	free(err);
}

static void
test_template(void **state)
{
	static const char *const keys[] = {"local_rank", "rank"};
	static const char *const values[] = {"3", "11"};
	static const struct {
		const char *in, *out;
	} cases[] = {
		{"--local-rank=${local_rank}", "--local-rank=3"},
		{"$local_rank", "3"},
		{"${rank}/${local_rank}", "11/3"},
		{"$$local_rank", "$local_rank"},
		{"cost$$", "cost$"},
		{"$unknown ${unknown} $", "$unknown ${unknown} $"},
		{"${local_rank", "${local_rank"},
		{"$local_rankX", "$local_rankX"},
		{"a$1b", "a$1b"},
		{"", ""},
	};

	for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
		char *got = wenv_template_substitute(cases[i].in, keys, values, 2);

		assert_string_equal(got, cases[i].out);
		free(got);
	}
}

static void
test_argv(void **state)
{
	char *args[] = {"--lr", "0.1", "--out=/x/${local_rank}", NULL};
	struct config cfg = {.entrypoint = "train.py", .args = args};
	char *base[] = {"PYTHON_EXEC=/usr/bin/python3", NULL};
	char **argv;

	argv = wenv_build_argv(&cfg, base, 2);
	assert_int_equal(strv_length(argv), 6);
	assert_string_equal(argv[0], "/usr/bin/python3");
	assert_string_equal(argv[1], "-u");
	assert_string_equal(argv[2], "train.py");
	assert_string_equal(argv[5], "--out=/x/2");
	strv_free(argv);

	cfg.module = true;
	argv = wenv_build_argv(&cfg, NULL, 0);
	assert_string_equal(argv[0], "python3");
	assert_string_equal(argv[2], "-m");
	assert_string_equal(argv[3], "train.py");
	strv_free(argv);

	cfg.module = false;
	cfg.no_python = true;
	cfg.entrypoint = "/bin/echo";
	argv = wenv_build_argv(&cfg, base, 1);
	assert_int_equal(strv_length(argv), 4);
	assert_string_equal(argv[0], "/bin/echo");
	assert_string_equal(argv[3], "--out=/x/1");
	strv_free(argv);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_env_contract),
		cmocka_unit_test(test_env_keeps_callers_values),
		cmocka_unit_test(test_env_virtual_local_rank),
		cmocka_unit_test(test_env_worker_server_socket),
		cmocka_unit_test(test_env_control_socket),
		cmocka_unit_test(test_env_timer_file),
		cmocka_unit_test(test_env_faulthandler),
		cmocka_unit_test(test_template),
		cmocka_unit_test(test_argv),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
