/* tcpstore_client_str.c — the client's shorthands for string keys (see
 * tcpstore_client.h), over tcpstore_client_request. */
#include <string.h>

#include "tcpstore_client.h"

static struct tcpstore_bytes
str_bytes(const char *s)
{
	struct tcpstore_bytes b = {(const uint8_t *)s, strlen(s)};

	return b;
}

int
tcpstore_client_set(struct tcpstore_client *c, const char *key, const void *value, size_t len,
		    tcpstore_reply_fn fn, void *arg)
{
	struct tcpstore_req req = {
		.cmd = TCPSTORE_CMD_SET, .key = str_bytes(key), .value = {value, len}};

	return tcpstore_client_request(c, &req, 0, fn, arg);
}

int
tcpstore_client_get(struct tcpstore_client *c, const char *key, tcpstore_reply_fn fn, void *arg)
{
	struct tcpstore_req req = {.cmd = TCPSTORE_CMD_GET, .key = str_bytes(key)};

	return tcpstore_client_request(c, &req, 0, fn, arg);
}

int
tcpstore_client_add(struct tcpstore_client *c, const char *key, int64_t delta, tcpstore_reply_fn fn,
		    void *arg)
{
	struct tcpstore_req req = {.cmd = TCPSTORE_CMD_ADD, .key = str_bytes(key), .delta = delta};

	return tcpstore_client_request(c, &req, 0, fn, arg);
}

int
tcpstore_client_compare_set(struct tcpstore_client *c, const char *key, const void *expected,
			    size_t explen, const void *desired, size_t deslen, tcpstore_reply_fn fn,
			    void *arg)
{
	struct tcpstore_req req = {.cmd = TCPSTORE_CMD_COMPARE_SET,
				   .key = str_bytes(key),
				   .value = {expected, explen},
				   .desired = {desired, deslen}};

	return tcpstore_client_request(c, &req, 0, fn, arg);
}

int
tcpstore_client_delete(struct tcpstore_client *c, const char *key, tcpstore_reply_fn fn, void *arg)
{
	struct tcpstore_req req = {.cmd = TCPSTORE_CMD_DELETE_KEY, .key = str_bytes(key)};

	return tcpstore_client_request(c, &req, 0, fn, arg);
}

int
tcpstore_client_queue_push(struct tcpstore_client *c, const char *key, const void *value,
			   size_t len, tcpstore_reply_fn fn, void *arg)
{
	struct tcpstore_req req = {
		.cmd = TCPSTORE_CMD_QUEUE_PUSH, .key = str_bytes(key), .value = {value, len}};

	return tcpstore_client_request(c, &req, 0, fn, arg);
}

int
tcpstore_client_queue_len(struct tcpstore_client *c, const char *key, tcpstore_reply_fn fn,
			  void *arg)
{
	struct tcpstore_req req = {.cmd = TCPSTORE_CMD_QUEUE_LEN, .key = str_bytes(key)};

	return tcpstore_client_request(c, &req, 0, fn, arg);
}
