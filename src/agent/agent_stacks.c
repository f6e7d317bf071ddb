/* agent_stacks.c — stacks before a hang's stop: a parallel fetch from the
 * workers' own servers under one deadline timer (dump_traceback, and the
 * listing GET /handler/ then the flight recorder's JSON handler when one is
 * listed), the answers written next to each rank's logs, then the event and
 * the stop (SIGABRT for a hung Python rank that gave no traceback). Nothing
 * blocks the loop but the small file writes. */
#include "agent_stacks.h"
#include "agent_internal.h"

#include <errno.h>
#include <event2/event.h>
#include <fcntl.h>
#include <jansson.h>
#include <signal.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "config.h"
#include "ctl_proxy.h"
#include "group.h"
#include "log.h"
#include "util.h"
#include "wenv.h"
#include "worker.h"

#define TRACEBACK_NAME "hang_traceback.txt"
#define TRACE_JSON_NAME "hang_traceback.json"

/* The flight recorder's JSON dumps a WorkerServer may list, the preferred
 * first: fr_trace_json (torch >= 2.7, every backend), dump_nccl_trace_json
 * (ProcessGroupNCCL, torch >= 2.4). Both take no required parameter. */
static const char *const trace_handlers[] = {"fr_trace_json", "dump_nccl_trace_json"};

struct stacks_rank {
	struct agent_stacks *s;
	int local_rank;
	bool asked;               /* its server listens: asked for its stacks */
	struct ctl_proxy *p;      /* dump_traceback, pending */
	struct ctl_proxy *list_p; /* GET /handler/, pending */
	struct ctl_proxy *json_p; /* the trace handler, pending */
	const char *json_handler; /* the one asked, NULL: none listed */
	char *path;               /* the traceback written, NULL: none */
	char *json_path;          /* the trace written, NULL: none */
};

struct agent_stacks {
	struct agent *a;
	size_t n, pending;
	struct stacks_rank *r;
	struct event *deadline;
	bool stopped; /* the stop was made */
};

/* Whether a Python worker prints its stacks on SIGABRT: python mode, and
 * PYTHONFAULTHANDLER non-empty (exported with the hang rules, wenv.h). */
static bool
faulthandler_on(const struct agent *a)
{
	const char *v = wenv_get(a->env, "PYTHONFAULTHANDLER");

	return !a->cfg->no_python && (!v || *v);
}

/* "<path>, <path>, <stderr> (SIGABRT)": where the stacks are, or NULL. */
static char *
stacks_where(const struct agent_stacks *s, const struct worker *abrt)
{
	char *where = NULL;

	for (size_t i = 0; i < 2 * s->n; i++) {
		const char *path = i % 2 ? s->r[i / 2].json_path : s->r[i / 2].path;
		char *t;

		if (!path) {
			continue;
		}
		t = xasprintf("%s%s%s", where ? where : "", where ? ", " : "", path);
		free(where);
		where = t;
	}
	if (abrt) {
		const char *err = abrt->stream_path[1] ? abrt->stream_path[1] : "stderr";
		char *t = xasprintf("%s%s%s (SIGABRT)", where ? where : "", where ? ", " : "", err);

		free(where);
		where = t;
	}
	return where;
}

static void
cancel_all(struct agent_stacks *s)
{
	for (size_t i = 0; i < s->n; i++) {
		ctl_proxy_cancel(s->r[i].p);
		ctl_proxy_cancel(s->r[i].list_p);
		ctl_proxy_cancel(s->r[i].json_p);
		s->r[i].p = s->r[i].list_p = s->r[i].json_p = NULL;
	}
}

/* The fetch is over (all answered, or the deadline): say where the stacks
 * are (log, event) and stop the group, unless it stops already (a worker
 * failed). */
static void
stacks_stop(struct agent_stacks *s)
{
	struct agent *a = s->a;
	int lr = a->hang_fired.local_rank;
	struct worker *hung = group_worker(a->group, (size_t)lr);
	struct worker *abrt = NULL;

	if (s->stopped) {
		return;
	}
	s->stopped = true;
	if (s->deadline) {
		event_del(s->deadline);
	}
	cancel_all(s);
	if (hung && !s->r[lr].path && faulthandler_on(a)) {
		abrt = hung;
		hung->stop_signal = SIGABRT;
	}
	free(a->hang_stacks);
	a->hang_stacks = stacks_where(s, abrt);
	if (a->hang_stacks) {
		log_info("[%s] hang: stacks in %s", a->cfg->role, a->hang_stacks);
	} else {
		log_info("[%s] hang: no stacks (no worker server answered; no faulthandler)",
			 a->cfg->role);
	}
	if (hung) {
		agent_record_hang(a, &a->hang_fired, hung);
	}
	if (group_state(a->group) == WORKER_STATE_HEALTHY) {
		group_stop(a->group, SIGTERM);
	}
}

/* Write text[0..len) to file name next to rank r's logs; returns the path
 * written, NULL when none (no log directory, or an error, logged). */
static char *
write_dump(const struct stacks_rank *r, const char *name, const char *text, size_t len)
{
	const struct worker *w = group_worker(r->s->a->group, (size_t)r->local_rank);
	_cleanup_free_ char *path = NULL;
	_cleanup_close_ int fd = -1;
	const char *slash;
	char *r_path;

	if (!w->error_file || !*w->error_file || !(slash = strrchr(w->error_file, '/'))) {
		return NULL;
	}
	path = xasprintf("%.*s/%s", (int)(slash - w->error_file), w->error_file, name);
	fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOCTTY, 0644);
	if (fd < 0 || write_all(fd, text, len) < 0) {
		log_warn("hang: cannot write %s: %s, ignoring", path, strerror(errno));
		return NULL;
	}
	r_path = path;
	path = NULL;
	return r_path;
}

/* Whether a request of r's to handler ended with a 200 answer; logs why not. */
static bool
fetch_ok(const struct stacks_rank *r, const char *handler, int err, const char *errmsg,
	 const struct ctl_proxy_response *resp)
{
	if (err < 0) {
		log_warn("hang: local rank %d's %s: %s", r->local_rank, handler,
			 errmsg ? errmsg : strerror(-err));
		return false;
	}
	if (resp->status != 200) {
		log_warn("hang: local rank %d's %s answered %d", r->local_rank, handler,
			 resp->status);
		return false;
	}
	return true;
}

/* One request of s's is over: the last one ends the fetch. */
static void
fetch_over(struct agent_stacks *s)
{
	if (--s->pending == 0) {
		stacks_stop(s);
	}
}

static void
fetch_done(int err, const char *errmsg, const struct ctl_proxy_response *resp, void *arg)
{
	struct stacks_rank *r = arg;
	struct agent_stacks *s = r->s;

	r->p = NULL;
	if (fetch_ok(r, "dump_traceback", err, errmsg, resp)) {
		r->path = write_dump(r, TRACEBACK_NAME, resp->body, resp->body_len);
	}
	fetch_over(s);
}

static void
json_done(int err, const char *errmsg, const struct ctl_proxy_response *resp, void *arg)
{
	struct stacks_rank *r = arg;

	r->json_p = NULL;
	if (fetch_ok(r, r->json_handler, err, errmsg, resp)) {
		r->json_path = write_dump(r, TRACE_JSON_NAME, resp->body, resp->body_len);
	}
	fetch_over(r->s);
}

/* The trace handler a WorkerServer's listing (a JSON array of names) offers,
 * the preferred first, or NULL. */
static const char *
listed_trace_handler(const char *body, size_t len)
{
	json_t *names = json_loadb(body, len, 0, NULL), *v;
	const char *found = NULL;
	size_t i;

	for (size_t h = 0; h < ARRAY_SIZE(trace_handlers) && !found; h++) {
		json_array_foreach(names, i, v)
		{
			if (json_is_string(v) &&
			    strcmp(json_string_value(v), trace_handlers[h]) == 0) {
				found = trace_handlers[h];
				break;
			}
		}
	}
	json_decref(names);
	return found;
}

/* The listing came: ask for the trace handler it lists, if any. */
static void
list_done(int err, const char *errmsg, const struct ctl_proxy_response *resp, void *arg)
{
	struct stacks_rank *r = arg;
	struct agent_stacks *s = r->s;

	r->list_p = NULL;
	if (fetch_ok(r, "handler listing", err, errmsg, resp) &&
	    (r->json_handler = listed_trace_handler(resp->body, resp->body_len))) {
		const struct worker *w = group_worker(s->a->group, (size_t)r->local_rank);
		_cleanup_free_ char *target = xasprintf("/handler/%s", r->json_handler);

		s->pending++;
		r->json_p = ctl_proxy_start(s->a->base, w->server_socket, "POST", target, NULL,
					    NULL, 0, STACKS_DEADLINE_S + 1, json_done, r);
	}
	fetch_over(s);
}

static void
deadline_cb(evutil_socket_t fd, short what, void *arg)
{
	struct agent_stacks *s = arg;

	log_warn("hang: %zu worker server(s) gave no traceback within %d s", s->pending,
		 STACKS_DEADLINE_S);
	stacks_stop(s);
}

/* Whether worker w runs and has a server listening on its socket. */
static bool
has_server(const struct worker *w)
{
	struct stat st;

	return w->pid > 0 && !w->reaped && w->server_socket && stat(w->server_socket, &st) == 0 &&
	       S_ISSOCK(st.st_mode);
}

struct agent_stacks *
agent_stacks_start(struct agent *a)
{
	struct agent_stacks *s = xcalloc(1, sizeof(*s));
	struct timeval tv = {STACKS_DEADLINE_S, 0};

	s->a = a;
	s->n = group_size(a->group);
	s->r = xcalloc(s->n, sizeof(*s->r));
	for (size_t i = 0; i < s->n; i++) {
		s->r[i] = (struct stacks_rank){.s = s, .local_rank = (int)i};
		s->r[i].asked = has_server(group_worker(a->group, i));
		s->pending += 2 * s->r[i].asked;
	}
	if (s->pending == 0) {
		stacks_stop(s);
		agent_stacks_free(s);
		return NULL;
	}
	log_info("[%s] hang: asking %zu worker server(s) for their stacks", a->cfg->role,
		 s->pending);
	for (size_t i = 0; i < s->n; i++) {
		const struct worker *w = group_worker(a->group, i);

		if (s->r[i].asked) {
			/* The deadline timer, not the proxy's, ends the wait. */
			s->r[i].p = ctl_proxy_start(a->base, w->server_socket, "POST",
						    "/handler/dump_traceback", NULL, NULL, 0,
						    STACKS_DEADLINE_S + 1, fetch_done, &s->r[i]);
			s->r[i].list_p = ctl_proxy_start(
				a->base, w->server_socket, "GET", "/handler/", NULL, NULL, 0,
				STACKS_DEADLINE_S + 1, list_done, &s->r[i]);
		}
	}
	s->deadline = evtimer_new(a->base, deadline_cb, s);
	evtimer_add(s->deadline, &tv);
	return s;
}

void
agent_stacks_free(struct agent_stacks *s)
{
	if (!s) {
		return;
	}
	cancel_all(s);
	if (!s->stopped) { /* the agent leaves mid-fetch: the hang is still told */
		const struct worker *hung =
			s->a->group ? group_worker(s->a->group, (size_t)s->a->hang_fired.local_rank)
				    : NULL;

		free(s->a->hang_stacks);
		s->a->hang_stacks = stacks_where(s, NULL);
		if (hung) {
			agent_record_hang(s->a, &s->a->hang_fired, hung);
		}
	}
	for (size_t i = 0; i < s->n; i++) {
		free(s->r[i].path);
		free(s->r[i].json_path);
	}
	if (s->deadline) {
		event_free(s->deadline);
	}
	free(s->r);
	free(s);
}
