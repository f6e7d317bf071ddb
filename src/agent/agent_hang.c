/* agent_hang.c — the hang rules' shell: one timer for the earliest deadline
 * (hang_next_deadline), re-armed only when output brings a deadline nearer
 * or when it fires; teed pipes feed the core as they are read, log files
 * written by the workers themselves (-r) are polled for growth. */
#include "agent_hang.h"
#include "agent_internal.h"
#include "agent_stacks.h"

#include <errno.h>
#include <event2/event.h>
#include <fcntl.h>
#include <signal.h>
#include <jansson.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "config.h"
#include "group.h"
#include "hang.h"
#include "log.h"
#include "output.h"
#include "util.h"
#include "worker.h"

/* Poll log files this often at most, and at least 4 times per rule period. */
#define POLL_MAX_USEC (500 * 1000ULL)
#define POLL_MIN_USEC (50 * 1000ULL)
/* Read at most this much of a grown log file per poll (the rest is counted). */
#define POLL_READ_MAX (1024 * 1024)

/* One watched stream of one rank. */
struct hang_src {
	struct agent_hang *owner;
	int rank;
	int stream;
	int fd;    /* the log file, read-only (-r), else -1 (a teed pipe) */
	off_t off; /* how far it was seen */
};

struct agent_hang {
	struct agent *a;
	struct hang *core;
	struct event *timer;
	struct hang_src *src; /* 2 per rank */
	size_t n_src;
	uint64_t poll_usec; /* 0: no file to poll */
	bool fired;
	struct agent_stacks *stacks; /* the fetch before the stop, NULL: none */
};

struct hang_rules
agent_hang_rules(const struct agent *a)
{
	return (struct hang_rules){a->cfg->hang_silence, a->cfg->hang_cadence,
				   a->cfg->hang_cadence_interval, a->cfg->hang_cadence_start};
}

static void
arm(struct agent_hang *h, uint64_t now)
{
	uint64_t next = hang_next_deadline(h->core);
	struct timeval tv;

	if (h->fired) {
		return;
	}
	if (h->poll_usec && now + h->poll_usec < next) {
		next = now + h->poll_usec;
	}
	if (next == HANG_NEVER) {
		event_del(h->timer);
		return;
	}
	next = next > now ? next - now : 0;
	tv.tv_sec = (time_t)(next / USEC_PER_SEC);
	tv.tv_usec = (suseconds_t)(next % USEC_PER_SEC);
	event_add(h->timer, &tv);
}

static void
tee_watch_cb(const char *buf, size_t len, void *arg)
{
	struct hang_src *s = arg;
	uint64_t now = now_usec();

	if (hang_feed(s->owner->core, s->rank, s->stream, buf, len, now)) {
		arm(s->owner, now);
	}
}

/* What a log file grew by since the last poll, into the core. */
static void
poll_file(struct agent_hang *h, struct hang_src *s, bool cadence, uint64_t now)
{
	struct stat st;
	char buf[64 * 1024];
	size_t budget = POLL_READ_MAX;

	if (fstat(s->fd, &st) < 0 || st.st_size == s->off) {
		return;
	}
	if (st.st_size < s->off) { /* truncated */
		s->off = st.st_size;
		return;
	}
	if (!cadence) {
		hang_feed(h->core, s->rank, s->stream, NULL, (size_t)(st.st_size - s->off), now);
		s->off = st.st_size;
		return;
	}
	while (s->off < st.st_size && budget > 0) {
		ssize_t n = pread(s->fd, buf, sizeof(buf), s->off);

		if (n <= 0) {
			break;
		}
		hang_feed(h->core, s->rank, s->stream, buf, (size_t)n, now);
		s->off += n;
		budget -= (size_t)n < budget ? (size_t)n : budget;
	}
	if (s->off < st.st_size) {
		hang_feed(h->core, s->rank, s->stream, NULL, (size_t)(st.st_size - s->off), now);
		s->off = st.st_size;
	}
}

static void
timer_cb(evutil_socket_t fd, short what, void *arg)
{
	struct agent_hang *h = arg;
	struct agent *a = h->a;
	uint64_t now = now_usec();
	bool cadence = a->cfg->hang_cadence && *a->cfg->hang_cadence;
	struct hang_fired f;

	for (size_t i = 0; i < h->n_src; i++) {
		if (h->src[i].fd >= 0) {
			poll_file(h, &h->src[i], cadence, now);
		}
	}
	for (size_t i = 0; i < group_size(a->group); i++) {
		if (group_worker(a->group, i)->reaped) {
			hang_rank_done(h->core, (int)i);
		}
	}
	if (a->phase == AGENT_PHASE_RUNNING && hang_check(h->core, now, &f)) {
		h->fired = true;
		agent_on_hang(a, &f);
		return;
	}
	arm(h, now);
}

/* Watch stream s of worker w through src: its pipe, or its log file. */
static bool
watch_stream(struct agent_hang *h, struct worker *w, int s, struct hang_src *src)
{
	struct stat st;

	*src = (struct hang_src){h, w->local_rank, s, -1, 0};
	if (w->tee[s]) {
		tee_watch(w->tee[s], tee_watch_cb, src);
		return true;
	}
	if (w->stream_mode[s] != WORKER_STREAM_FILE || !w->stream_path[s]) {
		return false;
	}
	src->fd = open(w->stream_path[s], O_RDONLY | O_CLOEXEC | O_NOCTTY);
	if (src->fd < 0) {
		log_warn("hang rules: cannot watch %s: %s", w->stream_path[s], strerror(errno));
		return false;
	}
	src->off = fstat(src->fd, &st) == 0 ? st.st_size : 0;
	return true;
}

/* How often to poll files: a quarter of the shortest rule, within bounds. */
static uint64_t
poll_period(const struct hang_rules *r)
{
	double s = 0;
	uint64_t p;

	if (r->silence_s > 0) {
		s = r->silence_s;
	}
	if (r->cadence && *r->cadence && (s == 0 || r->cadence_s < s)) {
		s = r->cadence_s;
	}
	p = (uint64_t)(s / 4 * (double)USEC_PER_SEC);
	return p < POLL_MIN_USEC ? POLL_MIN_USEC : p > POLL_MAX_USEC ? POLL_MAX_USEC : p;
}

struct agent_hang *
agent_hang_new(struct agent *a)
{
	struct hang_rules rules = agent_hang_rules(a);
	struct agent_hang *h;
	size_t n = a->group ? group_size(a->group) : 0;
	bool files = false;
	char *err = NULL;

	if (!hang_rules_on(&rules) || n == 0) {
		log_debug("%s: hang rules off, no timer armed", __func__);
		return NULL;
	}
	h = xcalloc(1, sizeof(*h));
	h->a = a;
	h->core = hang_new(&rules, n, now_usec(), &err);
	if (!h->core) { /* config_parse checked them */
		log_error("hang rules: %s", err);
		free(err);
		free(h);
		return NULL;
	}
	h->src = xcalloc(2 * n, sizeof(*h->src));
	h->n_src = 2 * n;
	for (size_t i = 0; i < n; i++) {
		struct worker *w = group_worker(a->group, i);
		bool seen[2];

		for (int s = 0; s < 2; s++) {
			struct hang_src *src = &h->src[2 * i + s];

			seen[s] = watch_stream(h, w, s, src);
			files |= src->fd >= 0;
		}
		if (seen[0] != seen[1] && rules.silence_s > 0) {
			/* what goes to the stream not seen counts as silence */
			log_warn(
				"hang rules: local rank %zu's %s is not redirected: --hang-silence "
				"hears its %s alone (-r 3 or -t 3 for both)",
				i, seen[0] ? "stderr" : "stdout", seen[0] ? "stdout" : "stderr");
		}
		if (!seen[0] && !seen[1]) {
			log_warn(
				"hang rules: local rank %zu's output is not redirected (-r or -t), "
				"not watched",
				i);
			hang_rank_done(h->core, (int)i);
		}
	}
	h->poll_usec = files ? poll_period(&rules) : 0;
	h->timer = evtimer_new(a->base, timer_cb, h);
	/* Before any ready output: a deadline is kept to within one read. */
	event_priority_set(h->timer, AGENT_PRIO_SUPERVISION);
	arm(h, now_usec());
	log_debug("%s: watching %zu ranks%s", __func__, n, files ? ", polling log files" : "");
	return h;
}

void
agent_hang_free(struct agent_hang *h)
{
	if (!h) {
		return;
	}
	for (size_t i = 0; i < h->n_src; i++) {
		struct worker *w = h->a->group ? group_worker(h->a->group, i / 2) : NULL;

		if (h->src[i].fd >= 0) {
			close(h->src[i].fd);
		} else if (w && w->tee[i % 2]) {
			tee_watch(w->tee[i % 2], NULL, NULL);
		}
	}
	if (h->timer) {
		event_free(h->timer);
	}
	agent_stacks_free(h->stacks);
	hang_free(h->core);
	free(h->src);
	free(h);
}

void
agent_hang_stop(struct agent *a)
{
	if (a->reason != AGENT_REASON_HANG || !a->hang || a->hang->stacks) {
		group_stop(a->group, SIGTERM);
		return;
	}
	a->hang->stacks = agent_stacks_start(a);
}

static json_t *
age_or_null(bool have, uint64_t t, uint64_t now)
{
	return have ? json_real((double)(now > t ? now - t : 0) / (double)USEC_PER_SEC)
		    : json_null();
}

json_t *
agent_hang_rank_json(const struct agent_hang *h, int lr, uint64_t now)
{
	struct hang_rank_view v;
	json_t *o;

	if (!h || !hang_rank(h->core, lr, &v)) {
		return NULL;
	}
	o = json_object();
	json_object_set_new(o, "last_output_age_s", age_or_null(v.output_seen, v.last_output, now));
	json_object_set_new(o, "last_match_age_s", age_or_null(v.matched, v.last_match, now));
	json_object_set_new(o, "deadline_in_s",
			    v.deadline == HANG_NEVER
				    ? json_null()
				    : json_real(v.deadline > now ? (double)(v.deadline - now) /
									   (double)USEC_PER_SEC
								 : 0.0));
	json_object_set_new(o, "watched", json_boolean(!v.done));
	return o;
}
