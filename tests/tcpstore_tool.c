/* tcpstore_tool.c — test-only driver of elasticd's TCPStore server and client.
 *
 *   tcpstore_tool serve [PORT [MAX_CONNECTIONS]]
 *       run the server (port 0: ephemeral), print "port N" on stdout, serve
 *       until stdin reaches EOF or SIGTERM.
 *   tcpstore_tool client HOST PORT legacy|v2 OP...
 *       connect with the client and run the OPs in order, one output line each:
 *         set K V | get K | add K N | cas K EXP DES | del K | numkeys
 *         check K1,K2 | wait K1,K2[@TIMEOUT_MS] | mget K1,K2 | mset K1=V1,K2=V2
 *         qpush K V | qlen K | qpop K[@TIMEOUT_MS]   (v2 only: torch >= 2.7)
 *       qpop prints the queue's length before the pop, then the value when
 *       there was one ("qpop -> 2 'a'", "qpop -> 0"); with @ it blocks as
 *       torch's queue_pop(key, block=True): WAIT on K first (@0: no timeout).
 *       Values are printed as repr-like text; the exit status is 0 when every
 *       op got a reply, 1 otherwise (the error is printed). */
#include <errno.h>
#include <event2/event.h>
#include <inttypes.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tcpstore_client.h"
#include "tcpstore_server.h"
#include "util.h"

static struct event_base *base;
static struct tcpstore_client *client;
static char **ops;
static int nops, cur, status;

static void
print_bytes(const struct tcpstore_bytes *b)
{
	putchar('\'');
	for (size_t i = 0; i < b->len; i++) {
		uint8_t ch = b->data[i];

		if (ch >= 0x20 && ch < 0x7f && ch != '\'' && ch != '\\') {
			putchar(ch);
		} else {
			printf("\\x%02x", ch);
		}
	}
	putchar('\'');
}

/* Split "a,b,c" into a strv. */
static char **
split(const char *s, char sep)
{
	char **v = NULL;
	const char *p = s;

	for (;;) {
		const char *e = strchr(p, sep);

		strv_consume(&v, e ? xstrndup(p, (size_t)(e - p)) : xstrdup(p));
		if (!e) {
			break;
		}
		p = e + 1;
	}
	return v;
}

static void run_next(void);

static void
reply_cb(int err, const struct tcpstore_reply *rep, void *arg)
{
	const char *op = arg;

	if (err == -ETIMEDOUT) {
		/* A WAIT past its timeout: go on (v2 cancelled it; legacy closed). */
		printf("%s -> timeout\n", op);
		fflush(stdout);
		run_next();
		return;
	}
	if (err < 0) {
		printf("%s -> error %s\n", op, strerror(-err));
		status = 1;
		fflush(stdout);
		event_base_loopbreak(base);
		return;
	}
	if (strcmp(op, "get") == 0 || strcmp(op, "cas") == 0) {
		printf("%s -> ", op);
		print_bytes(&rep->value);
		putchar('\n');
	} else if (strcmp(op, "qpop") == 0) {
		printf("%s -> %" PRId64, op, rep->i64);
		if (rep->i64 > 0) {
			putchar(' ');
			print_bytes(&rep->value);
		}
		putchar('\n');
	} else if (strcmp(op, "add") == 0 || strcmp(op, "del") == 0 || strcmp(op, "numkeys") == 0 ||
		   strcmp(op, "qlen") == 0) {
		printf("%s -> %" PRId64 "\n", op, rep->i64);
	} else if (strcmp(op, "check") == 0 || strcmp(op, "wait") == 0) {
		printf("%s -> %u\n", op, rep->status);
	} else if (strcmp(op, "mget") == 0) {
		printf("%s ->", op);
		for (size_t i = 0; i < rep->n; i++) {
			putchar(' ');
			print_bytes(&rep->values[i]);
		}
		putchar('\n');
	} else {
		printf("%s -> ok\n", op);
	}
	fflush(stdout);
	run_next();
}

/* Cut "@MS" off arg: the timeout in usec (0 without one), *ret_at whether
 * there was one. */
static uint64_t
cut_timeout(char *arg, bool *ret_at)
{
	char *at = strchr(arg, '@');

	*ret_at = at != NULL;
	if (!at) {
		return 0;
	}
	*at = '\0';
	return strtoull(at + 1, NULL, 10) * USEC_PER_MSEC;
}

/* check, wait or mget over "K1,K2[@MS]". */
static int
run_keys(const char *op, const char *spec)
{
	char *arg = xstrdup(spec);
	bool at;
	uint64_t timeout = cut_timeout(arg, &at);
	char **keys = split(arg, ',');
	enum tcpstore_cmd cmd = op[0] == 'c'   ? TCPSTORE_CMD_CHECK
				: op[0] == 'w' ? TCPSTORE_CMD_WAIT
					       : TCPSTORE_CMD_MULTI_GET;
	int r = tcpstore_client_keys(client, cmd, (const char *const *)keys, strv_length(keys),
				     timeout, reply_cb, (void *)op);

	strv_free(keys);
	free(arg);
	return r;
}

/* qpop "K[@MS]": with @, a blocking pop. */
static int
run_qpop(const char *spec)
{
	char *key = xstrdup(spec);
	bool block;
	uint64_t timeout = cut_timeout(key, &block);
	int r = tcpstore_client_queue_pop(client, key, block, timeout, reply_cb, "qpop");

	free(key);
	return r;
}

/* mset "K1=V1,K2=V2". */
static int
run_mset(const char *spec)
{
	char **pairs = split(spec, ',');
	size_t n = strv_length(pairs);
	struct tcpstore_bytes *k = xcalloc(n, sizeof(*k)), *v = xcalloc(n, sizeof(*v));
	struct tcpstore_req req = {.cmd = TCPSTORE_CMD_MULTI_SET, .n = n, .keys = k, .values = v};
	int r;

	for (size_t i = 0; i < n; i++) {
		char *eq = strchr(pairs[i], '=');

		*eq = '\0';
		k[i].data = (const uint8_t *)pairs[i];
		k[i].len = strlen(pairs[i]);
		v[i].data = (const uint8_t *)eq + 1;
		v[i].len = strlen(eq + 1);
	}
	r = tcpstore_client_request(client, &req, 0, reply_cb, "mset");
	free(k);
	free(v);
	strv_free(pairs);
	return r;
}

static void
sync_cb(int err, const struct tcpstore_reply *rep, void *arg)
{
	event_base_loopbreak(base);
}

static void
run_next(void)
{
	const char *op;
	int r = 0;

	if (cur >= nops) {
		/* Requests without a reply (set, qpush) may still sit in the
		 * output buffer: a last round trip flushes them, and the server
		 * has handled them once it answers. */
		struct tcpstore_req sync = {.cmd = TCPSTORE_CMD_GETNUMKEYS};

		if (tcpstore_client_request(client, &sync, 0, sync_cb, NULL) < 0) {
			event_base_loopbreak(base);
		}
		return;
	}
	op = ops[cur++];
	if (strcmp(op, "set") == 0 && cur + 2 <= nops) {
		r = tcpstore_client_set(client, ops[cur], ops[cur + 1], strlen(ops[cur + 1]),
					reply_cb, "set");
		cur += 2;
	} else if (strcmp(op, "get") == 0 && cur + 1 <= nops) {
		r = tcpstore_client_get(client, ops[cur++], reply_cb, "get");
	} else if (strcmp(op, "add") == 0 && cur + 2 <= nops) {
		r = tcpstore_client_add(client, ops[cur], strtoll(ops[cur + 1], NULL, 10), reply_cb,
					"add");
		cur += 2;
	} else if (strcmp(op, "cas") == 0 && cur + 3 <= nops) {
		r = tcpstore_client_compare_set(client, ops[cur], ops[cur + 1],
						strlen(ops[cur + 1]), ops[cur + 2],
						strlen(ops[cur + 2]), reply_cb, "cas");
		cur += 3;
	} else if (strcmp(op, "del") == 0 && cur + 1 <= nops) {
		r = tcpstore_client_delete(client, ops[cur++], reply_cb, "del");
	} else if (strcmp(op, "numkeys") == 0) {
		struct tcpstore_req req = {.cmd = TCPSTORE_CMD_GETNUMKEYS};

		r = tcpstore_client_request(client, &req, 0, reply_cb, "numkeys");
	} else if ((strcmp(op, "check") == 0 || strcmp(op, "wait") == 0 ||
		    strcmp(op, "mget") == 0) &&
		   cur + 1 <= nops) {
		r = run_keys(op, ops[cur++]);
	} else if (strcmp(op, "qpush") == 0 && cur + 2 <= nops) {
		r = tcpstore_client_queue_push(client, ops[cur], ops[cur + 1], strlen(ops[cur + 1]),
					       reply_cb, "qpush");
		cur += 2;
	} else if (strcmp(op, "qlen") == 0 && cur + 1 <= nops) {
		r = tcpstore_client_queue_len(client, ops[cur++], reply_cb, "qlen");
	} else if (strcmp(op, "qpop") == 0 && cur + 1 <= nops) {
		r = run_qpop(ops[cur++]);
	} else if (strcmp(op, "mset") == 0 && cur + 1 <= nops) {
		r = run_mset(ops[cur++]);
	} else {
		fprintf(stderr, "tcpstore_tool: bad op '%s'\n", op);
		status = 2;
		event_base_loopbreak(base);
		return;
	}
	if (r < 0) {
		printf("%s -> error %s\n", op, strerror(-r));
		status = 1;
		event_base_loopbreak(base);
	}
}

static void
connected_cb(struct tcpstore_client *c, int err, void *arg)
{
	if (err < 0) {
		printf("connect -> error %s\n", strerror(-err));
		status = 1;
		event_base_loopbreak(base);
		return;
	}
	run_next();
}

static void
closed_cb(struct tcpstore_client *c, int err, void *arg)
{
	printf("closed -> %s\n", strerror(-err));
	fflush(stdout);
}

static void
stdin_cb(evutil_socket_t fd, short what, void *arg)
{
	char buf[256];

	if (read(fd, buf, sizeof(buf)) <= 0) {
		event_base_loopbreak(base);
	}
}

static void
term_cb(evutil_socket_t fd, short what, void *arg)
{
	event_base_loopbreak(base);
}

int
main(int argc, char **argv)
{
	signal(SIGPIPE, SIG_IGN);
	base = event_base_new();
	if (argc >= 2 && strcmp(argv[1], "serve") == 0) {
		struct tcpstore_server_limits lim;
		struct tcpstore_server *s;
		struct event *in, *term;
		char *err = NULL;
		int e = 0;

		tcpstore_server_limits_default(&lim);
		if (argc >= 4) {
			lim.max_connections = (size_t)atoi(argv[3]);
		}
		if (getenv("TCPSTORE_STALL_MS")) {
			lim.frame_stall_ms = (unsigned)atoi(getenv("TCPSTORE_STALL_MS"));
		}
		s = tcpstore_server_new(base, NULL, argc >= 3 ? atoi(argv[2]) : 0, &lim, &e, &err);
		if (!s) {
			fprintf(stderr, "tcpstore_tool: %s\n", err);
			return 1;
		}
		if (getenv("TCPSTORE_MERGE_ATTEMPTS")) {
			tcpstore_server_set_merge_attempts(s, true);
		}
		printf("port %d\n", tcpstore_server_port(s));
		fflush(stdout);
		in = event_new(base, 0, EV_READ | EV_PERSIST, stdin_cb, NULL);
		if (isatty(0) || lseek(0, 0, SEEK_CUR) < 0) {
			/* A pipe or terminal: EOF ends the server. */
			event_add(in, NULL);
		}
		term = evsignal_new(base, SIGTERM, term_cb, NULL);
		event_add(term, NULL);
		event_base_dispatch(base);
		event_free(in);
		event_free(term);
		tcpstore_server_free(s);
	} else if (argc >= 5 && strcmp(argv[1], "client") == 0) {
		struct tcpstore_client_callbacks cb = {.connected = connected_cb,
						       .closed = closed_cb};

		client = tcpstore_client_new(base, argv[2], atoi(argv[3]),
					     strcmp(argv[4], "v2") == 0 ? TCPSTORE_DIALECT_V2
									: TCPSTORE_DIALECT_LEGACY,
					     &cb);
		ops = argv + 5;
		nops = argc - 5;
		tcpstore_client_connect(client, now_usec() + 10 * USEC_PER_SEC);
		event_base_dispatch(base);
		tcpstore_client_free(client);
	} else {
		fprintf(stderr,
			"usage: tcpstore_tool serve [PORT] | client HOST PORT legacy|v2 OP...\n");
		return 2;
	}
	event_base_free(base);
	return status;
}
