/* How elasticctl looks for an agent: the plan follows elasticd's default
 * socket rules (systemd, root, XDG_RUNTIME_DIR, /tmp) for a run id or for
 * any; file names of a run; and a scan of a real directory of sockets,
 * stale files and look-alikes. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "ectl_find.h"
#include "util.h"

struct plan_case {
	const char *name;
	const char *env[3];
	const char *run_id;
	uid_t euid;
	const char *paths; /* joined with ' ' */
	const char *dirs;
	const char *units;
};

static const struct plan_case plan_cases[] = {
	{"root, a run",
	 {NULL},
	 "job1",
	 0,
	 "/run/elasticd/job1/elasticd.sock /run/elasticd/job1.sock",
	 "/run/elasticd",
	 "/run/elasticd"},
	{"root, any run",
	 {"XDG_RUNTIME_DIR=/run/user/0"},
	 NULL,
	 0,
	 "",
	 "/run/elasticd",
	 "/run/elasticd"},
	{"root, odd run id",
	 {NULL},
	 "a b/c",
	 0,
	 "/run/elasticd/a_b_c/elasticd.sock /run/elasticd/a_b_c.sock",
	 "/run/elasticd",
	 "/run/elasticd"},
	{"user with XDG",
	 {"XDG_RUNTIME_DIR=/run/user/1000"},
	 "job1",
	 1000,
	 "/run/elasticd/job1/elasticd.sock /run/elasticd/job1.sock "
	 "/run/user/1000/elasticd/job1.sock /tmp/elasticd-1000/job1.sock",
	 "/run/elasticd /run/user/1000/elasticd /tmp/elasticd-1000",
	 "/run/elasticd"},
	{"user without XDG, any",
	 {NULL},
	 NULL,
	 1000,
	 "",
	 "/run/elasticd /tmp/elasticd-1000",
	 "/run/elasticd"},
	{"under systemd",
	 {"RUNTIME_DIRECTORY=/run/elasticd/j:/x", "XDG_RUNTIME_DIR=/r"},
	 "j",
	 0,
	 "/run/elasticd/j/elasticd.sock /run/elasticd/j.sock",
	 "/run/elasticd",
	 "/run/elasticd"},
	{"relative XDG ignored",
	 {"XDG_RUNTIME_DIR=rel"},
	 NULL,
	 7,
	 "",
	 "/run/elasticd /tmp/elasticd-7",
	 "/run/elasticd"},
};

static char *
join(char *const *v)
{
	char *out = xstrdup("");

	for (; v && *v; v++) {
		char *o = xasprintf("%s%s%s", out, out[0] ? " " : "", *v);

		free(out);
		out = o;
	}
	return out;
}

static void
test_plan(void **state)
{
	for (size_t i = 0; i < ARRAY_SIZE(plan_cases); i++) {
		const struct plan_case *c = &plan_cases[i];
		struct ectl_find_plan p;
		char *paths, *dirs, *units;

		ectl_find_plan((char *const *)c->env, c->run_id, c->euid, &p);
		paths = join(p.paths);
		dirs = join(p.dirs);
		units = join(p.units);
		printf("# %s: [%s] [%s] [%s]\n", c->name, paths, dirs, units);
		assert_string_equal(paths, c->paths);
		assert_string_equal(dirs, c->dirs);
		assert_string_equal(units, c->units);
		free(paths);
		free(dirs);
		free(units);
		ectl_find_plan_release(&p);
	}
}

static void
test_names(void **state)
{
	static const struct {
		const char *name;
		const char *run_id;
		bool match;
	} cases[] = {
		{"job1.sock", "job1", true},    {"job1.4242.sock", "job1", true},
		{"job1.4242.sock", NULL, true}, {"job1.sock", NULL, true},
		{"job12.sock", "job1", false},  {"job1.x.sock", "job1", false},
		{"job1..sock", "job1", false},  {"job1.workers", "job1", false},
		{"job1.workers", NULL, false},  {".sock", NULL, false},
		{".hidden.sock", NULL, false},  {"job1.sock.bak", NULL, false},
		{"a_b.sock", "a b", true},
	};

	for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
		printf("# %s %s\n", cases[i].name, cases[i].run_id ? cases[i].run_id : "(any)");
		assert_int_equal(ectl_find_name_matches(cases[i].name, cases[i].run_id),
				 cases[i].match);
	}
}

static void
make_socket(const char *path)
{
	struct sockaddr_un sun = {.sun_family = AF_UNIX};
	int fd = socket(AF_UNIX, SOCK_STREAM, 0);

	assert_true(fd >= 0);
	snprintf(sun.sun_path, sizeof(sun.sun_path), "%s", path);
	assert_int_equal(bind(fd, (struct sockaddr *)&sun, sizeof(sun)), 0);
	close(fd);
}

static void
test_scan(void **state)
{
	char tmpl[] = "/tmp/test_ectl_find.XXXXXX";
	char *dir = mkdtemp(tmpl);
	char *units = xasprintf("%s/u", dir);
	char *unit = xasprintf("%s/u/job2", dir);
	const char *names[] = {"job1.sock", "job1.77.sock", "job2.sock", "other.sock"};
	char *plan_dirs[] = {dir, NULL};
	char *plan_units[] = {units, NULL};
	char *missing = xasprintf("%s/missing.sock", dir);
	char *plan_paths[] = {missing, NULL};
	struct ectl_find_plan p = {plan_paths, plan_dirs, plan_units};
	char **found = NULL;
	char *s;

	assert_non_null(dir);
	assert_int_equal(mkdir(units, 0700), 0);
	assert_int_equal(mkdir(unit, 0700), 0);
	for (size_t i = 0; i < ARRAY_SIZE(names); i++) {
		s = xasprintf("%s/%s", dir, names[i]);
		make_socket(s);
		free(s);
	}
	s = xasprintf("%s/elasticd.sock", unit);
	make_socket(s);
	free(s);
	s = xasprintf("%s/job1.99.sock", dir); /* a regular file: not a socket */
	fclose(fopen(s, "w"));
	free(s);

	assert_int_equal(ectl_find_scan(&p, "job1", &found), 2);
	s = join(found);
	printf("# job1: %s\n", s);
	assert_non_null(strstr(s, "/job1.77.sock "));
	assert_non_null(strstr(s, "/job1.sock"));
	free(s);
	strv_free(found);
	assert_int_equal(ectl_find_scan(&p, "job2", &found), 2);
	s = join(found);
	assert_non_null(strstr(s, "/u/job2/elasticd.sock"));
	free(s);
	strv_free(found);
	assert_int_equal(ectl_find_scan(&p, NULL, &found), 5);
	strv_free(found);
	s = ectl_find_describe(&p, "job1");
	assert_non_null(strstr(s, "  /tmp/test_ectl_find."));
	assert_non_null(strstr(s, "/job1.<pid>.sock\n"));
	free(s);

	s = xasprintf("rm -rf '%s'", dir);
	assert_int_equal(system(s), 0);
	free(s);
	free(units);
	free(unit);
	free(missing);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_plan),
		cmocka_unit_test(test_names),
		cmocka_unit_test(test_scan),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
