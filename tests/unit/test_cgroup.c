/* cgroup_pids (src/worker/cgroup.c) over cgroup.procs files written by the
 * test: the kernel lists a task it cannot name in our pid namespace (one
 * in the middle of exiting) as 0, and a 0 handed on to kill(2) would reach
 * the agent's own process group (a CI failure: the test runner SIGTERMed). */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cgroup.h"
#include "util.h"

static const struct {
	const char *procs; /* cgroup.procs as the kernel writes it */
	int n;
	pid_t pids[4];
} rows[] = {
	{"", 0, {0}},
	{"4242\n", 1, {4242}},
	{"4242\n17\n", 2, {4242, 17}},
	{"0\n", 0, {0}},
	{"0\n4242\n0\n17\n", 2, {4242, 17}},
};

static void
test_procs(void **state)
{
	char dir[] = "/tmp/elasticd-test-cgroup.XXXXXX";

	assert_non_null(mkdtemp(dir));
	for (size_t r = 0; r < ARRAY_SIZE(rows); r++) {
		_cleanup_free_ char *path = xasprintf("%s/cgroup.procs", dir);
		FILE *f = fopen(path, "w");
		pid_t *pids = NULL;
		int n;

		print_message("cgroup.procs: \"%s\"\n", rows[r].procs);
		assert_non_null(f);
		fputs(rows[r].procs, f);
		fclose(f);
		n = cgroup_pids(dir, &pids);
		assert_int_equal(n, rows[r].n);
		for (int i = 0; i < n; i++) {
			assert_int_equal(pids[i], rows[r].pids[i]);
		}
		free(pids);
		unlink(path);
	}
	rmdir(dir);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_procs),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
