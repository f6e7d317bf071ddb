/* The health gate's checks (src/health/health.c): parsing their settings, the
 * built-in checks over fixture trees, and how a check's end reads. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "health.h"
#include "nvml.h"
#include "util.h"

static void
test_parse_size(void **state)
{
	static const struct {
		const char *s;
		int r;
		uint64_t v;
	} rows[] = {
		{"4096", 0, 4096},        {"0", 0, 0},
		{"1K", 0, 1024},          {"1k", 0, 1024},
		{"10G", 0, 10ULL << 30},  {"10GiB", 0, 10ULL << 30},
		{"10GB", 0, 10ULL << 30}, {"1.5M", 0, 3ULL << 19},
		{"2T", 0, 2ULL << 40},    {"100B", 0, 100},
		{"", -EINVAL, 0},         {"-1G", -EINVAL, 0},
		{"+1", -EINVAL, 0},       {" 1", -EINVAL, 0},
		{"G", -EINVAL, 0},        {"1X", -EINVAL, 0},
		{"1GG", -EINVAL, 0},      {"nan", -EINVAL, 0},
		{"20000P", -EINVAL, 0}, /* past 2^64 */
	};

	for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
		uint64_t v = 12345;
		int r = health_parse_size(rows[i].s, &v);

		if (r != rows[i].r || (r == 0 && v != rows[i].v)) {
			fail_msg("'%s': got %d %llu, want %d %llu", rows[i].s, r,
				 (unsigned long long)v, rows[i].r, (unsigned long long)rows[i].v);
		}
	}
}

static void
test_parse_free_space(void **state)
{
	char *path = NULL, *err = NULL;
	uint64_t b = 0;

	assert_int_equal(health_parse_free_space("/ckpt:100G", &path, &b, &err), 0);
	assert_string_equal(path, "/ckpt");
	assert_true(b == 100ULL << 30);
	free(path);
	/* The last ':' splits: a path may hold one. */
	assert_int_equal(health_parse_free_space("/a:b:1M", &path, &b, &err), 0);
	assert_string_equal(path, "/a:b");
	free(path);
	assert_int_equal(health_parse_free_space("/ckpt", &path, &b, &err), -EINVAL);
	assert_non_null(strstr(err, "PATH:SIZE"));
	free(err);
	assert_int_equal(health_parse_free_space("ckpt:1G", &path, &b, &err), -EINVAL);
	assert_non_null(strstr(err, "absolute"));
	free(err);
	assert_int_equal(health_parse_free_space("/ckpt:lots", &path, &b, &err), -EINVAL);
	assert_non_null(strstr(err, "'lots' is not a size"));
	free(err);
}

static void
test_parse_nics(void **state)
{
	char **v = NULL, *err = NULL;

	assert_int_equal(health_parse_nics("ib,eth0,ib0.8001", &v, &err), 0);
	assert_int_equal(strv_length(v), 3);
	assert_string_equal(v[0], "ib");
	assert_string_equal(v[2], "ib0.8001");
	strv_free(v);
	static const char *const bad[] = {
		"",   "eth0,", ",eth0", "../x",   "a/b", "eth0,eth0", "sixteen-bytes-xx",
		"..", "a b",   "eth0 ", "eth0:1", "a\tb"};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		v = NULL;
		if (health_parse_nics(bad[i], &v, &err) != -EINVAL) {
			fail_msg("'%s' accepted", bad[i]);
		}
		assert_null(v);
		free(err);
	}
}

static void
write_at(const char *root, const char *rel, const char *text)
{
	_cleanup_free_ char *path = xasprintf("%s/%s", root, rel);
	_cleanup_free_ char *dir = xstrdup(path);
	FILE *f;

	*strrchr(dir, '/') = '\0';
	assert_int_equal(mkdir_p(dir, 0755), 0);
	f = fopen(path, "w");
	assert_non_null(f);
	fputs(text, f);
	fclose(f);
}

static void
test_nics_fixture(void **state)
{
	char root[] = "/tmp/test_health_XXXXXX";
	char *nics_ib[] = {"ib", NULL}, *nics_eth[] = {"eth0", NULL}, *nics_bad[] = {"eth1", NULL};
	char *msg = NULL;

	assert_non_null(mkdtemp(root));
	/* No InfiniBand at all: unhealthy. */
	assert_false(health_check_nics(root, nics_ib, &msg));
	assert_non_null(strstr(msg, "no InfiniBand port"));
	free(msg);
	write_at(root, "sys/class/infiniband/mlx5_0/ports/1/state", "4: ACTIVE\n");
	write_at(root, "sys/class/infiniband/mlx5_1/ports/1/state", "4: ACTIVE\n");
	assert_true(health_check_nics(root, nics_ib, &msg));
	assert_string_equal(msg, "ib: 2 ports ACTIVE");
	free(msg);
	write_at(root, "sys/class/infiniband/mlx5_1/ports/1/state", "1: DOWN\n");
	assert_false(health_check_nics(root, nics_ib, &msg));
	assert_string_equal(msg, "ib mlx5_1/ports/1: 1: DOWN");
	free(msg);
	write_at(root, "sys/class/net/eth0/operstate", "up\n");
	write_at(root, "sys/class/net/eth1/operstate", "down\n");
	assert_true(health_check_nics(root, nics_eth, &msg));
	assert_string_equal(msg, "eth0: up");
	free(msg);
	assert_false(health_check_nics(root, nics_bad, &msg));
	assert_string_equal(msg, "eth1: down");
	free(msg);
	_cleanup_free_ char *cmd = xasprintf("rm -rf '%s'", root);
	assert_int_equal(system(cmd), 0);
}

/* The real sysfs: its attributes report st_size 4096 (a page), far more
 * than they hold; the loopback device exists in every network namespace. */
static void
test_nics_real_sysfs(void **state)
{
	char *nics_lo[] = {"lo", NULL};
	char *msg = NULL;

	assert_int_equal(access("/sys/class/net/lo/operstate", R_OK), 0);
	assert_true(health_check_nics("/", nics_lo, &msg));
	assert_true(strcmp(msg, "lo: unknown") == 0 || strcmp(msg, "lo: up") == 0);
	free(msg);
	/* loopback's operstate is "unknown" (no driver state): usable, as
	 * the kernel's operstates.rst says, and as is an up one */
	char root[] = "/tmp/test_health_XXXXXX";
	char *nics_tun[] = {"tun0", NULL};

	assert_non_null(mkdtemp(root));
	write_at(root, "sys/class/net/tun0/operstate", "unknown\n");
	assert_true(health_check_nics(root, nics_tun, &msg));
	assert_string_equal(msg, "tun0: unknown");
	free(msg);
	_cleanup_free_ char *cmd = xasprintf("rm -rf '%s'", root);
	assert_int_equal(system(cmd), 0);
}

static void
test_paths(void **state)
{
	char root[] = "/tmp/test_health_XXXXXX";
	char *msg = NULL;
	_cleanup_free_ char *missing = NULL;

	assert_non_null(mkdtemp(root));
	assert_true(health_check_writable(root, &msg));
	free(msg);
	missing = xasprintf("%s/none", root);
	assert_false(health_check_writable(missing, &msg));
	assert_non_null(strstr(msg, "cannot create a file"));
	free(msg);
	assert_true(health_check_free_space(root, 1, &msg));
	free(msg);
	assert_false(health_check_free_space(root, UINT64_MAX, &msg));
	assert_non_null(strstr(msg, "bytes free"));
	free(msg);
	assert_false(health_check_free_space(missing, 1, &msg));
	free(msg);
	/* Nothing left behind by the writable check. */
	_cleanup_free_ char *cmd = xasprintf("rmdir '%s'", root);
	assert_int_equal(system(cmd), 0);
}

static void
test_tail(void **state)
{
	struct health_tail t = {0};
	char *s;

	s = health_tail_lines(&t, 3);
	assert_string_equal(s, "");
	free(s);
	health_tail_append(&t, "a\nb\nc\n", 6);
	health_tail_append(&t, "d\ne", 3);
	s = health_tail_lines(&t, 3);
	assert_string_equal(s, "c\\nd\\ne");
	free(s);
	s = health_tail_lines(&t, 10);
	assert_string_equal(s, "a\\nb\\nc\\nd\\ne");
	free(s);
	/* More than the buffer: the last bytes stay. */
	for (int i = 0; i < 1000; i++) {
		char line[16];
		int n = snprintf(line, sizeof(line), "line %d\n", i);

		health_tail_append(&t, line, (size_t)n);
	}
	assert_true(t.cut);
	assert_true(t.len <= HEALTH_TAIL_BYTES);
	s = health_tail_lines(&t, 2);
	assert_string_equal(s, "line 998\\nline 999");
	free(s);
}

static void
test_end(void **state)
{
	char *s;

	assert_true(health_end_ok(0, false, 0));
	assert_false(health_end_ok(3 << 8, false, 0));
	assert_false(health_end_ok(0, true, 0));
	assert_false(health_end_ok(0, false, ENOENT));
	assert_false(health_end_ok(SIGKILL, false, 0));
	s = health_describe_end(3 << 8, false, 5, 0);
	assert_string_equal(s, "exit status 3");
	free(s);
	s = health_describe_end(SIGKILL, true, 2.5, 0);
	assert_string_equal(s, "timed out after 2.5 s");
	free(s);
	s = health_describe_end(SIGSEGV, false, 5, 0);
	assert_string_equal(s, "killed by SIGSEGV");
	free(s);
	s = health_describe_end(127 << 8, false, 5, ENOENT);
	assert_string_equal(s, "cannot run: No such file or directory");
	free(s);
}

static void
test_retry_delay(void **state)
{
	uint64_t s = 1000000;

	assert_true(health_retry_delay(s, 1) == s);
	assert_true(health_retry_delay(s, 2) == 2 * s);
	assert_true(health_retry_delay(s, 3) == 4 * s);
	assert_true(health_retry_delay(s, 5) == 16 * s);
	assert_true(health_retry_delay(s, 6) == 16 * s);
	assert_true(health_retry_delay(s, 1000) == HEALTH_RETRY_MAX_FACTOR * s);
}

static void
test_checks_add(void **state)
{
	struct health_check *v = NULL;
	size_t n = 0;

	health_checks_add(&v, &n, HEALTH_COMMAND, xstrdup("nvidia-smi -L"), NULL, 0, 0);
	health_checks_add(&v, &n, HEALTH_GPUS, NULL, NULL, 0, 8);
	health_checks_add(&v, &n, HEALTH_FREE_SPACE, xstrdup("/ckpt"), NULL, 1, 0);
	assert_int_equal(n, 3);
	assert_string_equal(v[0].name, "command:nvidia-smi -L");
	assert_string_equal(v[1].name, "gpus");
	assert_string_equal(v[2].name, "free-space:/ckpt");
	health_checks_free(v, n);
}

/* nvml_released: every GPU under the threshold and free of the watched pids. */
static void
test_nvml_released(void **state)
{
	static struct nvml_gpu g[2];
	const pid_t watch[] = {4711, 4712};
	int busy = 99;

	g[0].used_bytes = 100ULL << 20;
	g[1].used_bytes = 200ULL << 20;
	assert_true(nvml_released(g, 2, 1ULL << 30, watch, 2, &busy));
	assert_int_equal(busy, -1);
	g[1].used_bytes = 1ULL << 30; /* at the threshold: held */
	assert_false(nvml_released(g, 2, 1ULL << 30, watch, 2, &busy));
	assert_int_equal(busy, 1);
	g[1].used_bytes = 0;
	g[0].pids[0] = 1000; /* someone else's process: not ours to wait for */
	g[0].n_pids = 1;
	assert_true(nvml_released(g, 2, 1ULL << 30, watch, 2, &busy));
	g[0].pids[1] = 4712;
	g[0].n_pids = 2;
	assert_false(nvml_released(g, 2, 1ULL << 30, watch, 2, &busy));
	assert_int_equal(busy, 0);
	assert_true(nvml_released(g, 0, 0, NULL, 0, &busy));
}

/* A library that is not there is absent, not an error to wait on. */
static void
test_nvml_absent(void **state)
{
	struct nvml *n = NULL;
	char *err = NULL;
	int p[2];
	char buf[256] = "";

	assert_int_equal(nvml_open("/nonexistent/libnvidia-ml.so.1", &n, &err), -ENOENT);
	assert_non_null(strstr(err, "cannot load /nonexistent/libnvidia-ml.so.1"));
	free(err);
	assert_int_equal(pipe(p), 0);
	assert_int_equal(nvml_wait_released("/nonexistent/x.so", 1, NULL, 0, 5, 0.1, p[1]), 2);
	close(p[1]);
	assert_true(read(p[0], buf, sizeof(buf) - 1) > 0);
	close(p[0]);
	assert_non_null(strstr(buf, "cannot load"));
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_parse_size),
		cmocka_unit_test(test_parse_free_space),
		cmocka_unit_test(test_parse_nics),
		cmocka_unit_test(test_nics_fixture),
		cmocka_unit_test(test_nics_real_sysfs),
		cmocka_unit_test(test_paths),
		cmocka_unit_test(test_tail),
		cmocka_unit_test(test_end),
		cmocka_unit_test(test_retry_delay),
		cmocka_unit_test(test_checks_add),
		cmocka_unit_test(test_nvml_released),
		cmocka_unit_test(test_nvml_absent),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
