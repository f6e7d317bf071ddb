/* The store host's in-process view of its TCPStore server: what it puts is
 * there for clients and for itself, and the set hook reports every store
 * under its prefix (and nothing else) with the key and the new value. */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>
#include <event2/event.h>

#include "tcpstore_server.h"
#include "util.h"

struct seen {
	int calls;
	char key[64];
	char value[64];
};

static void
on_set(const uint8_t *key, size_t klen, const uint8_t *value, size_t vlen, void *arg)
{
	struct seen *s = arg;

	s->calls++;
	snprintf(s->key, sizeof(s->key), "%.*s", (int)klen, (const char *)key);
	snprintf(s->value, sizeof(s->value), "%.*s", (int)vlen, (const char *)value);
}

static void
test_put_get_and_hook(void **state)
{
	struct event_base *base = event_base_new();
	struct tcpstore_server *srv;
	struct seen seen = {0};
	const uint8_t *v;
	size_t len;
	char *err = NULL;
	int rc = 0;

	srv = tcpstore_server_new(base, "127.0.0.1", 0, NULL, &rc, &err);
	assert_non_null(srv);
	assert_int_equal(tcpstore_server_get(srv, "/r/coordinator", &v, &len), -ENOENT);
	assert_int_equal(tcpstore_server_put(srv, "/r/coordinator", "me", 2), 0);
	assert_int_equal(tcpstore_server_get(srv, "/r/coordinator", &v, &len), 0);
	assert_int_equal(len, 2);
	assert_memory_equal(v, "me", 2);
	assert_int_equal(tcpstore_server_num_keys(srv), 1);

	tcpstore_server_on_set(srv, "/r/j/", on_set, &seen);
	assert_int_equal(tcpstore_server_put(srv, "/r/gen/1", "", 0), 0);
	assert_int_equal(seen.calls, 0);
	assert_int_equal(tcpstore_server_put(srv, "/r/j/host_12_0", "x", 1), 0);
	assert_int_equal(seen.calls, 1);
	assert_string_equal(seen.key, "/r/j/host_12_0");
	assert_string_equal(seen.value, "x");
	/* A key shorter than the prefix, and the hook removed. */
	assert_int_equal(tcpstore_server_put(srv, "/r/j", "y", 1), 0);
	assert_int_equal(seen.calls, 1);
	tcpstore_server_on_set(srv, NULL, NULL, NULL);
	assert_int_equal(tcpstore_server_put(srv, "/r/j/other_1_0", "", 0), 0);
	assert_int_equal(seen.calls, 1);

	tcpstore_server_free(srv);
	event_base_free(base);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_put_get_and_hook),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
