/* agent_stacks.c — stacks before a hang's stop: a parallel dump_traceback
 * fetch from the workers' own servers under one deadline timer, the answers
 * written next to each rank's logs, then the stop (SIGABRT for a hung Python
 * rank that gave none). Nothing blocks the loop but the small file writes. */
#include "agent_stacks.h"
#include "agent_internal.h"

#include <errno.h>
#include <event2/event.h>
#include <fcntl.h>
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

struct stacks_rank {
	struct agent_stacks *s;
	int local_rank;
	bool asked;          /* its server listens: asked for its stacks */
	struct ctl_proxy *p; /* pending */
	char *path;          /* the traceback written, NULL: none */
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

	for (size_t i = 0; i < s->n; i++) {
		char *t;

		if (!s->r[i].path) {
			continue;
		}
		t = xasprintf("%s%s%s", where ? where : "", where ? ", " : "", s->r[i].path);
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

/* The fetch is over (all answered, or the deadline): say where the stacks
 * are and stop the group, unless it stops already (a worker failed). */
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
	for (size_t i = 0; i < s->n; i++) {
		ctl_proxy_cancel(s->r[i].p);
		s->r[i].p = NULL;
	}
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
	if (group_state(a->group) == WORKER_STATE_HEALTHY) {
		group_stop(a->group, SIGTERM);
	}
}

/* Write rank r's traceback next to its logs (none without a log directory). */
static void
write_traceback(struct stacks_rank *r, const char *text, size_t len)
{
	const struct worker *w = group_worker(r->s->a->group, (size_t)r->local_rank);
	_cleanup_free_ char *path = NULL;
	_cleanup_close_ int fd = -1;
	const char *slash;

	if (!w->error_file || !*w->error_file || !(slash = strrchr(w->error_file, '/'))) {
		return;
	}
	path = xasprintf("%.*s/" TRACEBACK_NAME, (int)(slash - w->error_file), w->error_file);
	fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOCTTY, 0644);
	if (fd < 0 || write_all(fd, text, len) < 0) {
		log_warn("hang: cannot write %s: %s, ignoring", path, strerror(errno));
		return;
	}
	r->path = path;
	path = NULL;
}

static void
fetch_done(int err, const char *errmsg, const struct ctl_proxy_response *resp, void *arg)
{
	struct stacks_rank *r = arg;
	struct agent_stacks *s = r->s;

	r->p = NULL;
	if (err < 0) {
		log_warn("hang: local rank %d's dump_traceback: %s", r->local_rank,
			 errmsg ? errmsg : strerror(-err));
	} else if (resp->status != 200) {
		log_warn("hang: local rank %d's dump_traceback answered %d", r->local_rank,
			 resp->status);
	} else {
		write_traceback(r, resp->body, resp->body_len);
	}
	if (--s->pending == 0) {
		stacks_stop(s);
	}
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
		s->r[i] = (struct stacks_rank){s, (int)i, false, NULL, NULL};
		s->r[i].asked = has_server(group_worker(a->group, i));
		s->pending += s->r[i].asked;
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
	for (size_t i = 0; i < s->n; i++) {
		ctl_proxy_cancel(s->r[i].p);
		free(s->r[i].path);
	}
	if (s->deadline) {
		event_free(s->deadline);
	}
	free(s->r);
	free(s);
}
