/* Helpers every module relies on: strict number parsing, signal names,
 * endpoints, strv. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>

#include "endpoint.h"
#include "util.h"

/* sysfs attributes report st_size 4096 for a few bytes: read them (NUMA
 * nodes of GPUs, --health-nics); a file over max is still refused. */
static void
test_read_file_sysfs(void **state)
{
	char *buf = NULL;
	size_t len = 0;

	assert_int_equal(read_file("/sys/class/net/lo/operstate", 64, &buf, &len), 0);
	assert_true(len > 0 && len < 64);
	assert_int_equal(buf[len - 1], '\n');
	free(buf);
	assert_int_equal(read_file("/sys/class/net/lo/operstate", 2, &buf, &len), -EFBIG);
	assert_int_equal(read_file("/sys/class/net/lo", 64, &buf, &len), -EINVAL);
}

static void
test_parse_int(void **state)
{
	static const struct {
		const char *s;
		long long min, max;
		int ret;
		long long value;
	} cases[] = {
		{"0", 0, 10, 0, 0},
		{"10", 0, 10, 0, 10},
		{"-1", 0, 10, -ERANGE, 0},
		{"11", 0, 10, -ERANGE, 0},
		{"", 0, 10, -EINVAL, 0},
		{" 1", 0, 10, -EINVAL, 0},
		{"1 ", 0, 10, -EINVAL, 0},
		{"1x", 0, 10, -EINVAL, 0},
		{"x", 0, 10, -EINVAL, 0},
		{"-5", -10, 10, 0, -5},
		{"99999999999999999999", 0, 10, -ERANGE, 0},
		{"0x10", 0, 100, -EINVAL, 0},
	};

	for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
		long long v = -42;
		int r = parse_int(cases[i].s, cases[i].min, cases[i].max, &v);

		print_message("'%s'\n", cases[i].s);
		assert_int_equal(r, cases[i].ret);
		assert_int_equal(v, r == 0 ? cases[i].value : -42);
	}
}

static void
test_parse_double(void **state)
{
	double d;

	assert_int_equal(parse_double("0.1", &d), 0);
	assert_true(d > 0.09 && d < 0.11);
	assert_int_equal(parse_double("5", &d), 0);
	assert_int_equal(parse_double("nan", &d), -EINVAL);
	assert_int_equal(parse_double("inf", &d), -EINVAL);
	assert_int_equal(parse_double("1e999", &d), -EINVAL);
	assert_int_equal(parse_double("0.1s", &d), -EINVAL);
	assert_int_equal(parse_double("", &d), -EINVAL);
}

static void
test_signals(void **state)
{
	assert_string_equal(signal_name(SIGTERM), "SIGTERM");
	assert_string_equal(signal_name(SIGKILL), "SIGKILL");
	assert_null(signal_name(0));
	assert_int_equal(signal_from_name("SIGUSR1"), SIGUSR1);
	assert_int_equal(signal_from_name("HUP"), SIGHUP);
	assert_int_equal(signal_from_name("15"), SIGTERM);
	assert_int_equal(signal_from_name("SIGFOO"), -EINVAL);
	assert_int_equal(signal_from_name("sigterm"), -EINVAL);
	assert_int_equal(signal_from_name("0"), -EINVAL);
}

static void
test_endpoint(void **state)
{
	static const struct {
		const char *in;
		int ret;
		const char *host;
		int port;
	} cases[] = {
		{"node0:29400", 0, "node0", 29400},
		{"node0", 0, "node0", 1234},
		{"[::1]:29400", 0, "::1", 29400},
		{"[::1]", 0, "::1", 1234},
		{"::1", -EINVAL, "[::1]:PORT", 0},
		{"::1:29618", -EINVAL, "[::1]:29618", 0},
		{"fe80::1:2", -EINVAL, "[fe80::1]:2", 0},
		{"a:b:c", -EINVAL, "[IPV6]:PORT", 0},
		{"10.0.0.1:0", 0, "10.0.0.1", 0},
		{"node0:", -EINVAL, NULL, 0},
		{"node0:x", -EINVAL, NULL, 0},
		{"node0:70000", -EINVAL, NULL, 0},
		{":29400", -EINVAL, NULL, 0},
		{"[::1", -EINVAL, NULL, 0},
		{"[::1]x", -EINVAL, NULL, 0},
		{"", -EINVAL, NULL, 0},
	};

	for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
		char *host = NULL, *why = NULL;
		int port = -1;
		int r = endpoint_parse(cases[i].in, 1234, &host, &port, &why);

		print_message("'%s'\n", cases[i].in);
		assert_int_equal(r, cases[i].ret);
		if (r == 0) {
			assert_string_equal(host, cases[i].host);
			assert_int_equal(port, cases[i].port);
			assert_null(why);
		} else {
			/* The reason; for IPv6 without brackets, the hint (.host). */
			assert_non_null(why);
			assert_null(host);
			if (cases[i].host) {
				assert_non_null(strstr(why, cases[i].host));
			}
		}
		free(host);
		free(why);
	}
}

static void
test_bytes_printable(void **state)
{
	char *s = bytes_printable("HTTP/1.0 \"x\"\\\r\n\t\x00\xff~", 19);

	assert_string_equal(s, "HTTP/1.0 \\\"x\\\"\\\\\\r\\n\\t\\x00\\xff~");
	free(s);
	s = bytes_printable("", 0);
	assert_string_equal(s, "");
	free(s);
}

static void
test_strv(void **state)
{
	char **v = NULL, **c;

	assert_int_equal(strv_length(v), 0);
	strv_push(&v, "a");
	strv_consume(&v, xstrdup("b"));
	assert_int_equal(strv_length(v), 2);
	c = strv_copy(v);
	assert_string_equal(c[1], "b");
	assert_null(c[2]);
	strv_free(v);
	strv_free(c);
	assert_null(strv_copy(NULL));
}

static void
test_durations(void **state)
{
	struct timeval tv;

	assert_int_equal(seconds_to_usec(0), 0);
	assert_int_equal(seconds_to_usec(2.5), 2500000);
	/* the largest setting (CONFIG_SECONDS_MAX), doubled ten times, fits */
	assert_true(seconds_to_usec(1e9) << 10 > seconds_to_usec(1e9));
	tv = usec_to_timeval(3000001);
	assert_int_equal(tv.tv_sec, 3);
	assert_int_equal(tv.tv_usec, 1);
	tv = usec_to_timeval(999999);
	assert_int_equal(tv.tv_sec, 0);
	assert_int_equal(tv.tv_usec, 999999);
}

static void
test_ratelimit(void **state)
{
	struct ratelimit rl = {.interval_usec = 10};
	uint64_t held = 99;

	assert_true(ratelimit_pass(&rl, 1000, &held));
	assert_int_equal(held, 0);
	assert_false(ratelimit_pass(&rl, 1001, &held));
	assert_false(ratelimit_pass(&rl, 1009, &held));
	assert_true(ratelimit_pass(&rl, 1010, &held));
	assert_int_equal(held, 2);
	assert_true(ratelimit_pass(&rl, 2000, NULL));
	assert_false(ratelimit_pass(&rl, 2000, NULL));
	assert_true(ratelimit_pass(&rl, 2010, &held));
	assert_int_equal(held, 1);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_read_file_sysfs),
		cmocka_unit_test(test_parse_int),
		cmocka_unit_test(test_parse_double),
		cmocka_unit_test(test_signals),
		cmocka_unit_test(test_endpoint),
		cmocka_unit_test(test_bytes_printable),
		cmocka_unit_test(test_strv),
		cmocka_unit_test(test_ratelimit),
		cmocka_unit_test(test_durations),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
