/* elasticctl — the operator's client of elasticd's control socket
 * (elasticctl(1); the protocol is elasticd-ctl(7)). Finds the agent, sends
 * one request per command, prints what comes back for people (or as it is
 * with --json). Exit statuses: 0 done, 1 the agent answered an error, 2
 * usage, 3 no agent reachable. */
#include <errno.h>
#include <jansson.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "ectl_args.h"
#include "ectl_find.h"
#include "ectl_fmt.h"
#include "ectl_http.h"
#include "util.h"
#include "version.h"

extern char **environ;

enum {
	EXIT_OK = 0,
	EXIT_AGENT = 1,   /* the agent answered an error */
	EXIT_USAGE = 2,   /* a malformed command line, or several agents */
	EXIT_NOAGENT = 3, /* no agent reachable */
};

#define REQUEST_TIMEOUT_S 70   /* above the agent's 60 s for forwarded requests */
#define REPLY_MAX (256u << 20) /* bytes of one reply kept in memory */
#define FOLLOW_WINDOW 1000     /* lines asked for on each reading of logs -f */
#define FOLLOW_INTERVAL_NS 1000000000L
#define LOGS_REPLY_MAX (1024u * 1024) /* the most one logs?offset= reply holds */
#define EVENT_LINE_MAX (4u << 20)     /* bytes of one event line; longer: skipped */
#define ERROR_TEXT_MAX (64u << 10)    /* bytes of an error reply's text shown */

struct ctx {
	const struct ectl_args *args;
	const char *socket;
};

/* ---- requests --------------------------------------------------------------- */

/* A reply that did not come: 3 when the agent cannot be reached, else 1. */
static int
request_failed(const struct ctx *c, int r)
{
	switch (-r) {
	case ENOENT:
	case ECONNREFUSED:
	case EACCES:
	case ENAMETOOLONG:
	case ENOTSOCK:
	case EPIPE:
	case ECONNRESET:
		fprintf(stderr, "elasticctl: cannot reach elasticd at %s: %s\n", c->socket,
			strerror(-r));
		return EXIT_NOAGENT;
	}
	fprintf(stderr, "elasticctl: %s: %s\n", c->socket,
		r == -EBADMSG ? "the reply is not HTTP" : strerror(-r));
	return EXIT_AGENT;
}

/* Send a request and keep the whole reply in *out. Returns 0 with *status,
 * or an exit status (the reason printed). */
static int
call(const struct ctx *c, const char *method, const char *target, struct ectl_buf *out, int *status)
{
	int r;

	out->max = REPLY_MAX;
	ectl_http_collect(0, "", 0, out);
	r = ectl_http_request(c->socket, method, target, REQUEST_TIMEOUT_S, ectl_http_collect, out,
			      status, NULL);
	return r < 0 ? request_failed(c, r) : 0;
}

/* The handler names the agent lists, as "a, b, c" (malloc'd), or NULL. */
static char *
handler_list(const struct ctx *c)
{
	struct ectl_buf b = {0};
	int status = 0;
	json_t *a = NULL;
	char *out = NULL;
	size_t i;
	json_t *v;

	if (call(c, "GET", "/handler/", &b, &status) == 0 && status == 200) {
		a = json_loads(b.data, 0, NULL);
	}
	json_array_foreach(a, i, v)
	{
		char *o = xasprintf("%s%s%s", out ? out : "", out ? ", " : "",
				    json_string_value(v) ? json_string_value(v) : "?");

		free(out);
		out = o;
	}
	json_decref(a);
	free(b.data);
	return out;
}

/* An error reply: its text on stderr. A handler the agent lacks is said
 * plainly, with what it has: 1 when elasticctl knows the verb (the agent is
 * older), 2 for a command neither knows. */
static int
agent_error(const struct ctx *c, const char *name, int status, const char *body)
{
	size_t n = strlen(body);
	_cleanup_free_ char *shown = NULL;

	if (status == 404 && strncmp(body, "Handler ", 8) == 0) {
		_cleanup_free_ char *list = handler_list(c);

		fprintf(stderr,
			"elasticctl: the agent at %s has no '%s' handler%s; it answers: %s\n",
			c->socket, name,
			c->args->known ? " (it is older than this elasticctl)" : "",
			list ? list : "?");
		return c->args->known ? EXIT_AGENT : EXIT_USAGE;
	}
	while (n > 0 && body[n - 1] == '\n') {
		n--;
	}
	n = n > ERROR_TEXT_MAX ? ERROR_TEXT_MAX : n;
	shown = isatty(STDERR_FILENO) ? ectl_fmt_visible(body, n) : xstrndup(body, n);
	fprintf(stderr, "elasticctl: %s: %s%s (HTTP %d)\n", name, shown,
		strlen(body) > ERROR_TEXT_MAX ? "..." : "", status);
	return EXIT_AGENT;
}

/* Run method on /handler/<name><query> and print the reply as it is. */
static int
run_plain(const struct ctx *c, const char *method, const char *name, const char *query)
{
	_cleanup_free_ char *target = xasprintf("/handler/%s%s", name, query ? query : "");
	struct ectl_buf b = {0};
	int status = 0;
	int r = call(c, method, target, &b, &status);

	if (r == 0 && status != 200) {
		r = agent_error(c, name, status, b.data);
	} else if (r == 0) {
		fputs(b.data, stdout);
		if (b.len > 0 && b.data[b.len - 1] != '\n') {
			fputc('\n', stdout);
		}
	}
	free(b.data);
	return r;
}

/* Run a JSON handler; on 200 *ret gets the parsed reply (or the raw text
 * was printed, with --json: *ret NULL). Returns an exit status. */
static int
run_json(const struct ctx *c, const char *method, const char *name, json_t **ret)
{
	_cleanup_free_ char *target = xasprintf("/handler/%s", name);
	struct ectl_buf b = {0};
	json_error_t err;
	int status = 0;
	int r = call(c, method, target, &b, &status);

	*ret = NULL;
	if (r == 0 && status != 200) {
		r = agent_error(c, name, status, b.data);
	} else if (r == 0 && c->args->json) {
		printf("%s%s", b.data, b.len > 0 && b.data[b.len - 1] == '\n' ? "" : "\n");
	} else if (r == 0 && !(*ret = json_loads(b.data, 0, &err))) {
		_cleanup_free_ char *why = isatty(STDERR_FILENO)
						   ? ectl_fmt_visible(err.text, strlen(err.text))
						   : xstrdup(err.text);

		fprintf(stderr, "elasticctl: %s: the reply is not JSON: %s\n", name, why);
		r = EXIT_AGENT;
	}
	free(b.data);
	return r;
}

/* ---- commands --------------------------------------------------------------- */

static bool
use_color(void)
{
	const char *term = getenv("TERM");

	return isatty(STDOUT_FILENO) && !getenv("NO_COLOR") && term && strcmp(term, "dumb") != 0;
}

/* Seconds since w's log files last changed, into w "last_output_age_s". */
static void
add_output_age(json_t *w, time_t now)
{
	static const char *const keys[] = {"stdout_log", "stderr_log"};
	time_t last = 0;

	for (size_t i = 0; i < ARRAY_SIZE(keys); i++) {
		const char *p = json_string_value(json_object_get(w, keys[i]));
		struct stat st;

		if (p && stat(p, &st) == 0 && st.st_mtime > last) {
			last = st.st_mtime;
		}
	}
	if (last > 0) {
		json_object_set_new(w, "last_output_age_s", json_integer(now - last));
	}
}

static int
cmd_status(const struct ctx *c)
{
	json_t *s;
	int r = run_json(c, "GET", "status", &s);
	size_t i;
	json_t *w;

	if (r != 0 || !s) {
		return r;
	}
	json_array_foreach(json_object_get(s, "workers"), i, w)
	{
		add_output_age(w, time(NULL));
	}
	if (ectl_fmt_status(stdout, s, use_color()) < 0) {
		fprintf(stderr, "elasticctl: status: the reply is not a JSON object\n");
		r = EXIT_AGENT;
	}
	json_decref(s);
	return r;
}

static int
cmd_dump(const struct ctx *c)
{
	json_t *d;
	int r = run_json(c, "POST", "dump_traceback", &d);

	if (r != 0 || !d) {
		return r;
	}
	if (ectl_fmt_dump(stdout, d, isatty(STDOUT_FILENO)) < 0) {
		fprintf(stderr, "elasticctl: dump: the reply is not a JSON object\n");
		r = EXIT_AGENT;
	}
	json_decref(d);
	return r;
}

static int
cmd_nodes(const struct ctx *c)
{
	json_t *n;
	int r = run_json(c, "GET", "nodes", &n);

	if (r != 0 || !n) {
		return r;
	}
	if (ectl_fmt_nodes(stdout, n, use_color()) < 0) {
		fprintf(stderr, "elasticctl: nodes: the reply is not a JSON object\n");
		r = EXIT_AGENT;
	}
	json_decref(n);
	return r;
}

/* Events arrive as JSON lines, possibly split anywhere: print whole lines,
 * each at most EVENT_LINE_MAX bytes. */
struct event_stream {
	bool json;
	bool visible; /* stdout is a terminal: escape control characters */
	struct ectl_buf line;
	size_t skipping;       /* >0: the bytes so far of a line over the limit */
	struct ectl_buf error; /* the first bytes of a non-200 reply */
};

static void
event_line(struct event_stream *s, const char *line)
{
	if (s->json) {
		printf("%s\n", line);
	} else {
		_cleanup_free_ char *l = ectl_fmt_event(line, s->visible);

		fputs(l, stdout);
	}
	fflush(stdout);
}

/* The end of a line: print it, or report the one skipped. */
static void
event_line_end(struct event_stream *s)
{
	if (s->skipping > 0) {
		fprintf(stderr,
			"elasticctl: events: skipped an event line of %zu bytes (more than %u)\n",
			s->skipping, EVENT_LINE_MAX);
		s->skipping = 0;
	} else if (s->line.len > 0) {
		event_line(s, s->line.data);
	}
	s->line.len = 0;
}

static int
event_bytes(struct event_stream *s, const char *data, size_t len)
{
	while (len > 0) {
		const char *nl = memchr(data, '\n', len);
		size_t n = nl ? (size_t)(nl - data) : len;

		if (s->skipping == 0 && s->line.len + n > EVENT_LINE_MAX) {
			s->skipping = s->line.len; /* dropped: memory stays bounded */
			s->line.len = 0;
		}
		if (s->skipping > 0) {
			s->skipping += n;
		} else {
			ectl_http_collect(0, data, n, &s->line);
		}
		if (nl) {
			event_line_end(s);
			n++;
		}
		data += n;
		len -= n;
	}
	return 0;
}

/* The status of a streamed reply is known only once it is read; a
 * non-200 reply is text for the message: keep its first bytes (enough for
 * agent_error() to show that it is cut), drop the rest. */
static int
events_body(int status, const char *data, size_t len, void *arg)
{
	struct event_stream *s = arg;
	size_t room = ERROR_TEXT_MAX + 1 - s->error.len;

	if (status == 200) {
		return event_bytes(s, data, len);
	}
	return ectl_http_collect(status, data, len < room ? len : room, &s->error);
}

static int
cmd_events(const struct ctx *c)
{
	_cleanup_free_ char *target = xasprintf("/handler/events?since=%lld%s", c->args->since,
						c->args->follow ? "&follow=true" : "");
	struct event_stream s = {.json = c->args->json, .visible = isatty(STDOUT_FILENO)};
	_cleanup_free_ char *head = NULL;
	int status = 0;
	int r;

	r = ectl_http_request(c->socket, "GET", target, c->args->follow ? 0 : REQUEST_TIMEOUT_S,
			      events_body, &s, &status, &head);
	if (r == 0 && (s.line.len > 0 || s.skipping > 0)) {
		event_line_end(&s); /* a last line without its '\n' */
	}
	r = r < 0 ? request_failed(c, r) : 0;
	if (r == 0 && status != 200) {
		r = agent_error(c, "events", status, s.error.data ? s.error.data : "");
	}
	free(s.line.data);
	free(s.error.data);
	return r;
}

/* read_log()'s return when, following, the agent is gone (it exited): the
 * end of the log, as the end of the events stream is for events -f. */
#define LOG_AGENT_GONE (-1)

/* One reading of a rank's log into *out: its last `lines` lines, or with
 * offset >= 0 (lines ignored) its bytes from that offset on; *ret_head (may
 * be NULL) gets the reply's head (X-Elasticd-Log-File, -Offset). following:
 * an agent no longer there returns LOG_AGENT_GONE, silently. */
static int
read_log(const struct ctx *c, long long lines, long long offset, struct ectl_buf *out,
	 char **ret_head, bool following)
{
	_cleanup_free_ char *target =
		offset >= 0 ? xasprintf("/handler/logs?rank=%lld&offset=%lld%s", c->args->rank,
					offset, c->args->use_stderr ? "&stream=stderr" : "")
			    : xasprintf("/handler/logs?rank=%lld&lines=%lld%s", c->args->rank,
					lines, c->args->use_stderr ? "&stream=stderr" : "");
	int status = 0;
	int r;

	out->max = REPLY_MAX;
	ectl_http_collect(0, "", 0, out);
	r = ectl_http_request(c->socket, "GET", target, REQUEST_TIMEOUT_S, ectl_http_collect, out,
			      &status, ret_head);
	if (r < 0 && following &&
	    (r == -ENOENT || r == -ECONNREFUSED || r == -ECONNRESET || r == -EPIPE)) {
		return LOG_AGENT_GONE;
	}
	if (r < 0) {
		return request_failed(c, r);
	}
	return status != 200 ? agent_error(c, "logs", status, out->data) : 0;
}

/* The last n complete lines of text: their offset. */
static size_t
last_lines(const char *text, size_t len, long long n)
{
	size_t i = len;

	while (i > 0 && n >= 0) {
		i--;
		if (text[i] == '\n' && n-- == 0) {
			return i + 1;
		}
	}
	return 0;
}

/* logs -f against an agent without the offset parameter: read its last
 * FOLLOW_WINDOW lines once a second and print what is new since the last
 * reading (complete lines only). Lossy: over FOLLOW_WINDOW lines a second,
 * or repeated identical lines, are missed (elasticctl(1) BUGS). */
static int
follow_log_window(const struct ctx *c, struct ectl_buf prev)
{
	long long window = c->args->lines > FOLLOW_WINDOW ? c->args->lines : FOLLOW_WINDOW;
	int r = 0;

	while (r == 0) {
		struct ectl_buf cur = {0};
		struct timespec ts = {0, FOLLOW_INTERVAL_NS};
		size_t end;

		nanosleep(&ts, NULL);
		r = read_log(c, window, -1, &cur, NULL, true);
		if (r == 0) {
			size_t from = ectl_fmt_new_lines(prev.data, cur.data);

			end = ectl_fmt_complete(cur.data);
			fwrite(cur.data + from, 1, end > from ? end - from : 0, stdout);
			fflush(stdout);
			free(prev.data);
			prev = cur;
		} else {
			free(cur.data);
		}
	}
	free(prev.data);
	return r == LOG_AGENT_GONE ? 0 : r;
}

/* Where a logs reply's bytes end (X-Elasticd-Log-Offset) and which file they
 * are from (X-Elasticd-Log-File, malloc'd into *ret_file); -1 without. */
static long long
log_reply_end(const char *head, char **ret_file)
{
	_cleanup_free_ char *v = head ? ectl_http_header(head, "X-Elasticd-Log-Offset") : NULL;
	char *e = NULL;
	long long end;

	*ret_file = head ? ectl_http_header(head, "X-Elasticd-Log-File") : NULL;
	end = v ? strtoll(v, &e, 10) : -1;
	return v && *v && !*e && end >= 0 && *ret_file ? end : -1;
}

/* logs -f: print the last lines, then every byte the log gains, read by
 * offset (complete lines, except a line over a whole reply); a new file (the
 * next attempt's) or a shorter one is read from its start. */
static int
follow_log(const struct ctx *c)
{
	long long window = c->args->lines > FOLLOW_WINDOW ? c->args->lines : FOLLOW_WINDOW;
	struct ectl_buf b = {0};
	_cleanup_free_ char *head = NULL, *file = NULL;
	int r = read_log(c, window, -1, &b, &head, false);
	long long off;
	size_t end, from;

	if (r != 0) {
		free(b.data);
		return r;
	}
	end = ectl_fmt_complete(b.data);
	from = last_lines(b.data, end, c->args->lines);
	fwrite(b.data + from, 1, end - from, stdout);
	fflush(stdout);
	off = log_reply_end(head, &file);
	if (off < 0) { /* an agent without offset= */
		return follow_log_window(c, b);
	}
	off -= (long long)(b.len - end);
	while (r == 0) {
		_cleanup_free_ char *h = NULL, *f = NULL;
		long long got_end;

		free(b.data);
		b = (struct ectl_buf){0};
		r = read_log(c, 0, off, &b, &h, true);
		got_end = r == 0 ? log_reply_end(h, &f) : -1;
		if (r != 0 || got_end < 0) {
			break;
		}
		if (strcmp(f, file) != 0 || got_end < off) { /* a new attempt, or truncated */
			free(file);
			file = f;
			f = NULL;
			off = 0;
			continue;
		}
		end = ectl_fmt_complete(b.data);
		end = end == 0 && b.len >= LOGS_REPLY_MAX ? b.len : end;
		fwrite(b.data, 1, end, stdout);
		fflush(stdout);
		off += (long long)end;
		if (b.len < LOGS_REPLY_MAX) {
			struct timespec ts = {0, FOLLOW_INTERVAL_NS};

			nanosleep(&ts, NULL);
		}
	}
	free(b.data);
	return r == LOG_AGENT_GONE ? 0 : r;
}

static int
cmd_logs(const struct ctx *c)
{
	struct ectl_buf b = {0};
	int r;

	if (c->args->follow) {
		return follow_log(c);
	}
	r = read_log(c, c->args->lines, -1, &b, NULL, false);
	if (r == 0) {
		fputs(b.data, stdout);
	}
	free(b.data);
	return r;
}

static int
cmd_signal(const struct ctx *c)
{
	_cleanup_free_ char *sig = ectl_http_escape(c->args->sig);
	_cleanup_free_ char *query = c->args->rank >= 0
					     ? xasprintf("?signal=%s&rank=%lld", sig, c->args->rank)
					     : xasprintf("?signal=%s", sig);

	return run_plain(c, "POST", "signal", query);
}

/* Any other handler: POST /handler/<name>?NAME=VALUE&... */
static int
cmd_verb(const struct ctx *c)
{
	char *query = xstrdup("");
	int r;

	for (const char **p = c->args->params; p && *p; p++) {
		const char *eq = strchr(*p, '=');
		_cleanup_free_ char *k = xstrndup(*p, (size_t)(eq - *p));
		_cleanup_free_ char *ek = ectl_http_escape(k);
		_cleanup_free_ char *ev = ectl_http_escape(eq + 1);
		char *q = xasprintf("%s%c%s=%s", query, query[0] ? '&' : '?', ek, ev);

		free(query);
		query = q;
	}
	r = run_plain(c, "POST", c->args->name, query);
	free(query);
	return r;
}

static int
cmd_metrics(const struct ctx *c)
{
	struct ectl_buf b = {0};
	int status = 0;
	int r = call(c, "GET", "/metrics", &b, &status);

	if (r == 0 && status != 200) {
		r = agent_error(c, "metrics", status, b.data);
	} else if (r == 0) {
		fputs(b.data, stdout);
	}
	free(b.data);
	return r;
}

static int
run_command(const struct ctx *c)
{
	switch (c->args->cmd) {
	case ECTL_CMD_STATUS:
		return cmd_status(c);
	case ECTL_CMD_EVENTS:
		return cmd_events(c);
	case ECTL_CMD_LOGS:
		return cmd_logs(c);
	case ECTL_CMD_RESTART:
		return run_plain(c, "POST", "restart", NULL);
	case ECTL_CMD_STOP:
		return run_plain(c, "POST", "stop", NULL);
	case ECTL_CMD_SIGNAL:
		return cmd_signal(c);
	case ECTL_CMD_DUMP:
		return cmd_dump(c);
	case ECTL_CMD_METRICS:
		return cmd_metrics(c);
	case ECTL_CMD_NODES:
		return cmd_nodes(c);
	case ECTL_CMD_VERB:
		return cmd_verb(c);
	case ECTL_CMD_HELP:
		ectl_args_usage(stdout, c->args->known);
		return EXIT_OK;
	}
	return EXIT_USAGE;
}

/* ---- finding the agent ------------------------------------------------------ */

/* "run_id on node" of the agent at path, for the list of several. */
static char *
describe_agent(const char *path)
{
	struct ectl_buf b = {.max = REPLY_MAX};
	int status = 0;
	json_t *s = NULL;
	char *out;

	if (ectl_http_request(path, "GET", "/handler/status", 5, ectl_http_collect, &b, &status,
			      NULL) == 0 &&
	    status == 200) {
		s = json_loads(b.data, 0, NULL);
	}
	out = s ? xasprintf("run %s, %s, %s",
			    json_string_value(json_object_get(s, "run_id")) ?: "?",
			    json_string_value(json_object_get(s, "node_state")) ?: "?",
			    json_string_value(json_object_get(s, "node")) ?: "?")
		: xstrdup("(no status)");
	json_decref(s);
	free(b.data);
	return out;
}

static int
report_none(const struct ectl_find_plan *plan, const char *run_id, char **found)
{
	_cleanup_free_ char *tried = ectl_find_describe(plan, run_id);

	fprintf(stderr, "elasticctl: no elasticd agent found%s%s%s; tried:\n%s",
		run_id ? " for run '" : "", run_id ? run_id : "", run_id ? "'" : "", tried);
	for (char **p = found; p && *p; p++) {
		int fd = ectl_http_connect(*p);

		fprintf(stderr, "  %s: %s\n", *p, strerror(fd < 0 ? -fd : 0));
		if (fd >= 0) {
			close(fd);
		}
	}
	fprintf(stderr,
		"Give the socket with -s SOCKET (elasticd logs \"control socket: PATH\").\n");
	return EXIT_NOAGENT;
}

static int
report_several(char **live, const char *run_id)
{
	fprintf(stderr, "elasticctl: %zu elasticd agents answer here%s%s%s; choose one with %s:\n",
		strv_length(live), run_id ? " for run '" : "", run_id ? run_id : "",
		run_id ? "'" : "", run_id ? "-s SOCKET" : "-j RUN_ID or -s SOCKET");
	for (char **p = live; *p; p++) {
		_cleanup_free_ char *d = describe_agent(*p);

		fprintf(stderr, "  %s  (%s)\n", *p, d);
	}
	return EXIT_USAGE;
}

/* Choose the socket: -s, else the one agent that answers where elasticd's
 * default rules put sockets. Returns 0 with *ret (malloc'd) or an exit
 * status, the reason printed. */
static int
find_socket(const struct ectl_args *a, char **ret)
{
	struct ectl_find_plan plan;
	char **found = NULL;
	char **live = NULL;
	int r;

	if (a->socket) {
		*ret = xstrdup(a->socket);
		return 0;
	}
	ectl_find_plan(environ, a->run_id, geteuid(), &plan);
	ectl_find_scan(&plan, a->run_id, &found);
	for (char **p = found; p && *p; p++) {
		int fd = ectl_http_connect(*p);

		if (fd >= 0) {
			close(fd);
			strv_push(&live, *p);
		}
	}
	r = strv_length(live) == 1 ? 0
	    : !live                ? report_none(&plan, a->run_id, found)
				   : report_several(live, a->run_id);
	if (r == 0) {
		*ret = xstrdup(live[0]);
	}
	strv_free(found);
	strv_free(live);
	ectl_find_plan_release(&plan);
	return r;
}

int
main(int argc, char **argv)
{
	struct ectl_args a;
	_cleanup_free_ char *err = NULL;
	_cleanup_free_ char *sock = NULL;
	int r;

	signal(SIGPIPE, SIG_IGN);
	if (ectl_args_parse(argc, argv, &a, &err) < 0) {
		fprintf(stderr, "elasticctl: %s\nTry 'elasticctl --help'.\n", err);
		ectl_args_release(&a);
		return EXIT_USAGE;
	}
	if (a.version || a.help || a.cmd == ECTL_CMD_HELP) {
		if (a.version) {
			printf("elasticctl %s\n", ELASTICD_VERSION);
		} else {
			ectl_args_usage(stdout, a.known);
		}
		ectl_args_release(&a);
		return EXIT_OK;
	}
	if (a.socket && a.run_id) {
		fprintf(stderr, "elasticctl: -s and -j exclude each other\n");
		ectl_args_release(&a);
		return EXIT_USAGE;
	}
	r = find_socket(&a, &sock);
	if (r == 0) {
		struct ctx c = {&a, sock};

		r = run_command(&c);
	}
	ectl_args_release(&a);
	return r;
}
