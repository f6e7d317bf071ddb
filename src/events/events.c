/* events.c — torchelastic's Event / RdzvEvent built as jansson values,
 * torchrun's worker status events, and the recorder: sequence numbers, the
 * ring, the subscribers and the sink. Their JSON lines are events_json.c's. */
#include "events.h"
#include "events_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "errfile.h"
#include "log.h"
#include "util.h"

/* ---- names --------------------------------------------------------------- */

const char *
event_source_name(enum event_source s)
{
	switch (s) {
	case EVENT_SOURCE_AGENT:
		return "AGENT";
	case EVENT_SOURCE_WORKER:
		return "WORKER";
	}
	return "AGENT";
}

const char *
node_state_name(enum node_state s)
{
	switch (s) {
	case NODE_STATE_INIT:
		return "INIT";
	case NODE_STATE_RUNNING:
		return "RUNNING";
	case NODE_STATE_SUCCEEDED:
		return "SUCCEEDED";
	case NODE_STATE_FAILED:
		return "FAILED";
	}
	return "INIT";
}

int
event_source_from_name(const char *s, enum event_source *ret)
{
	static const enum event_source all[] = {EVENT_SOURCE_AGENT, EVENT_SOURCE_WORKER};

	for (size_t i = 0; s && i < ARRAY_SIZE(all); i++) {
		if (strcmp(s, event_source_name(all[i])) == 0) {
			*ret = all[i];
			return 0;
		}
	}
	return -EINVAL;
}

int
node_state_from_name(const char *s, enum node_state *ret)
{
	static const enum node_state all[] = {NODE_STATE_INIT, NODE_STATE_RUNNING,
					      NODE_STATE_SUCCEEDED, NODE_STATE_FAILED};

	for (size_t i = 0; s && i < ARRAY_SIZE(all); i++) {
		if (strcmp(s, node_state_name(all[i])) == 0) {
			*ret = all[i];
			return 0;
		}
	}
	return -EINVAL;
}

const char *
events_sink_name(enum events_sink sink)
{
	switch (sink) {
	case EVENTS_SINK_NULL:
		return "null";
	case EVENTS_SINK_CONSOLE:
		return "console";
	case EVENTS_SINK_FILE:
		return "file";
	}
	return "null";
}

int
events_sink_from_name(const char *name, enum events_sink *ret)
{
	if (!name) {
		return -EINVAL;
	}
	if (strcmp(name, "null") == 0 || strcmp(name, "dynamic_rendezvous") == 0) {
		*ret = EVENTS_SINK_NULL;
	} else if (strcmp(name, "console") == 0) {
		*ret = EVENTS_SINK_CONSOLE;
	} else if (strcmp(name, "file") == 0) {
		*ret = EVENTS_SINK_FILE;
	} else {
		return -EINVAL;
	}
	return 0;
}

/* ---- Event ------------------------------------------------------------- */

void
elastic_event_init(struct elastic_event *ev, const char *name, enum event_source source,
		   int64_t timestamp)
{
	ev->name = xstrdup(name ? name : "");
	ev->source = source;
	ev->timestamp = timestamp;
	ev->metadata = json_object();
	if (!ev->metadata) {
		abort();
	}
}

void
elastic_event_release(struct elastic_event *ev)
{
	free(ev->name);
	json_decref(ev->metadata);
	memset(ev, 0, sizeof(*ev));
}

static int
set_value(struct elastic_event *ev, const char *key, json_t *v)
{
	if (!v) {
		abort();
	}
	if (!key || !ev->metadata) {
		json_decref(v);
		return -EINVAL;
	}
	/* json_object_set_new checks that the key is UTF-8 and steals v. */
	return json_object_set_new(ev->metadata, key, v) < 0 ? -EINVAL : 0;
}

int
elastic_event_set_string(struct elastic_event *ev, const char *key, const char *value)
{
	return set_value(ev, key, jstr_or_null(value));
}

int
elastic_event_set_int(struct elastic_event *ev, const char *key, long long value)
{
	return set_value(ev, key, json_integer(value));
}

int
elastic_event_set_double(struct elastic_event *ev, const char *key, double value)
{
	if (!isfinite(value)) {
		return -EDOM;
	}
	return set_value(ev, key, json_real(value));
}

int
elastic_event_set_bool(struct elastic_event *ev, const char *key, bool value)
{
	return set_value(ev, key, json_boolean(value));
}

int
elastic_event_set_null(struct elastic_event *ev, const char *key)
{
	return set_value(ev, key, json_null());
}

/* Same keys in the same order with equal values of the same type. */
static bool
metadata_equal(json_t *a, json_t *b)
{
	void *ia, *ib;

	if (!a || !b) {
		return json_object_size(a) == 0 && json_object_size(b) == 0;
	}
	if (json_object_size(a) != json_object_size(b)) {
		return false;
	}
	ia = json_object_iter(a);
	ib = json_object_iter(b);
	while (ia && ib) {
		json_t *va = json_object_iter_value(ia), *vb = json_object_iter_value(ib);

		if (strcmp(json_object_iter_key(ia), json_object_iter_key(ib)) != 0 ||
		    json_typeof(va) != json_typeof(vb) || !json_equal(va, vb)) {
			return false;
		}
		ia = json_object_iter_next(a, ia);
		ib = json_object_iter_next(b, ib);
	}
	return !ia && !ib;
}

static bool
str_equal(const char *a, const char *b)
{
	return strcmp(a ? a : "", b ? b : "") == 0;
}

bool
elastic_event_equal(const struct elastic_event *a, const struct elastic_event *b)
{
	return str_equal(a->name, b->name) && a->source == b->source &&
	       a->timestamp == b->timestamp && metadata_equal(a->metadata, b->metadata);
}

/* ---- torchrun's worker status events ------------------------------------- */

static json_t *
one_int_list(int v)
{
	json_t *a = json_array();

	json_array_append_new(a, json_integer(v));
	return a;
}

void
elastic_event_init_status(struct elastic_event *ev, const struct events_status *st)
{
	_cleanup_free_ char *name =
		xasprintf("torchelastic.worker.status.%s", st->state ? st->state : "UNKNOWN");
	json_t *md = json_object();
	char *md_str;

	/* _construct_event's md, then json.dumps(md). */
	json_object_set_new_nocheck(md, "group_world_size",
				    st->group_world_size < 0 ? json_null()
							     : json_integer(st->group_world_size));
	json_object_set_new_nocheck(md, "entry_point", jstr_or_null(st->entry_point));
	if (st->worker) {
		json_object_set_new_nocheck(md, "local_rank", one_int_list(st->local_rank));
		json_object_set_new_nocheck(md, "role_rank", one_int_list(st->role_rank));
		json_object_set_new_nocheck(md, "role_world_size",
					    one_int_list(st->role_world_size));
	}
	md_str = errfile_json_dumps(md);
	json_decref(md);

	elastic_event_init(ev, name, st->source, st->timestamp);
	elastic_event_set_string(ev, "run_id", st->run_id);
	if (st->worker) {
		elastic_event_set_int(ev, "global_rank", st->global_rank);
	} else {
		elastic_event_set_null(ev, "global_rank");
	}
	if (st->group_rank < 0) {
		elastic_event_set_null(ev, "group_rank");
	} else {
		elastic_event_set_int(ev, "group_rank", st->group_rank);
	}
	if (st->worker && st->worker_pid > 0) {
		char id[24];

		snprintf(id, sizeof(id), "%lld", st->worker_pid);
		elastic_event_set_string(ev, "worker_id", id);
	} else {
		elastic_event_set_null(ev, "worker_id");
	}
	elastic_event_set_string(ev, "role", st->role);
	elastic_event_set_string(ev, "hostname", st->hostname);
	elastic_event_set_string(ev, "state", st->state);
	elastic_event_set_int(ev, "total_run_time", st->total_run_time);
	elastic_event_set_string(ev, "rdzv_backend", st->rdzv_backend);
	elastic_event_set_string(ev, "raw_error", st->raw_error);
	elastic_event_set_string(ev, "metadata", md_str);
	elastic_event_set_int(ev, "agent_restarts", st->agent_restarts);
	if (!st->has_duration || elastic_event_set_double(ev, "duration_ms", st->duration_ms) < 0) {
		elastic_event_set_null(ev, "duration_ms");
	}
	free(md_str);
}

/* ---- RdzvEvent --------------------------------------------------------- */

void
rdzv_event_release(struct rdzv_event *ev)
{
	free((void *)ev->name);
	free((void *)ev->run_id);
	free((void *)ev->message);
	free((void *)ev->hostname);
	free((void *)ev->master_endpoint);
	free((void *)ev->error_trace);
	memset(ev, 0, sizeof(*ev));
}

bool
rdzv_event_equal(const struct rdzv_event *a, const struct rdzv_event *b)
{
	return str_equal(a->name, b->name) && str_equal(a->run_id, b->run_id) &&
	       str_equal(a->message, b->message) && str_equal(a->hostname, b->hostname) &&
	       a->pid == b->pid && a->node_state == b->node_state &&
	       str_equal(a->master_endpoint, b->master_endpoint) && a->has_rank == b->has_rank &&
	       (!a->has_rank || a->rank == b->rank) && a->has_local_id == b->has_local_id &&
	       (!a->has_local_id || a->local_id == b->local_id) &&
	       str_equal(a->error_trace, b->error_trace);
}

/* ---- the recorder ------------------------------------------------------- */

struct subscriber {
	int id;
	void (*cb)(const struct events_entry *entry, void *arg); /* NULL once removed */
	void *arg;
};

struct events {
	enum events_sink sink;
	int fd;        /* the sink's fd, -1 for null */
	bool own_fd;   /* ours to close (file), not stderr */
	bool nonblock; /* a FIFO or device: drop what does not fit */
	bool held;     /* events_hold: record for a file sink to come */
	uint64_t held_from;

	/* Ring: slot (seq - 1) % cap holds entry seq for the count entries from
	 * first_seq on (sequence numbers are contiguous). */
	struct events_entry *ring;
	size_t cap;
	size_t count;
	uint64_t first_seq; /* oldest held, when count > 0 */
	uint64_t next_seq;  /* given to the next event, from 1 */
	size_t ring_bytes;

	struct subscriber *subs;
	size_t n_subs;
	size_t n_live_subs;
	int next_sub_id;
	bool dispatching;

	char *run_id;
	char *hostname;
	long long pid;
	long long local_id;

	struct events_stats stats;
};

struct events *
events_new(size_t ring_size)
{
	struct events *e = xcalloc(1, sizeof(*e));

	e->fd = -1;
	e->cap = ring_size > EVENTS_RING_MAX ? EVENTS_RING_MAX : ring_size;
	if (e->cap > 0) {
		e->ring = xcalloc(e->cap, sizeof(*e->ring));
	}
	e->next_seq = 1;
	e->next_sub_id = 1;
	e->local_id = -1;
	return e;
}

static void
close_sink(struct events *e)
{
	if (e->own_fd && e->fd >= 0) {
		close(e->fd);
	}
	e->fd = -1;
	e->own_fd = false;
	e->nonblock = false;
	e->sink = EVENTS_SINK_NULL;
}

/* A slot's line and name live in one block starting at line. */
static void
slot_free(struct events_entry *slot)
{
	free((void *)slot->line);
	memset(slot, 0, sizeof(*slot));
}

void
events_free(struct events *e)
{
	if (!e) {
		return;
	}
	close_sink(e);
	for (size_t i = 0; i < e->cap; i++) {
		slot_free(&e->ring[i]);
	}
	free(e->ring);
	free(e->subs);
	free(e->run_id);
	free(e->hostname);
	free(e);
}

static int
parent_dir_create(const char *path)
{
	_cleanup_free_ char *dir = xstrdup(path);
	char *slash = strrchr(dir, '/');

	if (!slash || slash == dir) {
		return 0;
	}
	*slash = '\0';
	return mkdir_p(dir, 0755);
}

static void write_held(struct events *e);

int
events_set_sink(struct events *e, enum events_sink sink, const char *path, char **reterr)
{
	struct stat st;
	int fd = -1, r;

	switch (sink) {
	case EVENTS_SINK_NULL:
		close_sink(e);
		e->held = false;
		return 0;
	case EVENTS_SINK_CONSOLE:
		close_sink(e);
		e->sink = sink;
		e->fd = STDERR_FILENO;
		e->held = false;
		return 0;
	case EVENTS_SINK_FILE:
		break;
	}
	if (!path || !*path) {
		if (reterr) {
			*reterr = xstrdup("the event log needs a file name");
		}
		return -EINVAL;
	}
	r = parent_dir_create(path);
	if (r == 0) {
		/* O_NONBLOCK: opening a FIFO nobody reads fails (ENXIO) instead
		 * of blocking the agent. */
		fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC | O_NOCTTY | O_NONBLOCK,
			  0644);
		if (fd < 0) {
			r = -errno;
		} else if (fstat(fd, &st) < 0) {
			r = -errno;
			close(fd);
		}
	}
	if (r < 0) {
		if (reterr) {
			*reterr =
				xasprintf("cannot open the event log '%s': %s", path, strerror(-r));
		}
		return r;
	}
	close_sink(e);
	e->sink = sink;
	e->fd = fd;
	e->own_fd = true;
	e->nonblock = !S_ISREG(st.st_mode);
	if (!e->nonblock) {
		(void)fd_nonblock(fd, false);
	}
	if (e->held) {
		write_held(e);
		e->held = false;
	}
	return 0;
}

enum events_sink
events_get_sink(const struct events *e)
{
	return e ? e->sink : EVENTS_SINK_NULL;
}

void
events_set_identity(struct events *e, const char *run_id, const char *hostname, long long pid,
		    long long local_id)
{
	free(e->run_id);
	free(e->hostname);
	e->run_id = run_id ? xstrdup(run_id) : NULL;
	e->hostname = hostname ? xstrdup(hostname) : NULL;
	e->pid = pid;
	e->local_id = local_id;
}

bool
events_enabled(const struct events *e)
{
	return e && (e->sink != EVENTS_SINK_NULL || e->n_live_subs > 0 || e->held);
}

void
events_hold(struct events *e)
{
	e->held = true;
	e->held_from = e->next_seq;
}

/* One write(2) of the whole line. A regular file in O_APPEND mode takes it at
 * once; only a full disk or a signal could split it, and then the rest follows
 * at once. A pipe or device that is full drops the line. */
static int
sink_write(struct events *e, const char *buf, size_t len)
{
	ssize_t n;
	int r;

	if (e->sink == EVENTS_SINK_CONSOLE) {
		/* Where the agent's log goes: never blocks the loop. */
		log_raw(buf, len);
		return 0;
	}
	do {
		n = write(e->fd, buf, len);
	} while (n < 0 && errno == EINTR);
	if (n < 0) {
		return -errno;
	}
	if ((size_t)n == len) {
		return 0;
	}
	/* Part of a line went out (a full disk, a signal, a full pipe): finish
	 * it rather than leave half a line, waiting for this line only. */
	if (e->nonblock) {
		(void)fd_nonblock(e->fd, false);
	}
	r = write_all(e->fd, buf + n, len - (size_t)n);
	if (e->nonblock) {
		(void)fd_nonblock(e->fd, true);
	}
	return r;
}

/* The file sink just opened gets what was recorded while held. */
static void
write_held(struct events *e)
{
	uint64_t from = e->count > 0 && e->first_seq > e->held_from ? e->first_seq : e->held_from;

	for (uint64_t seq = from; e->count > 0 && seq < e->next_seq; seq++) {
		const struct events_entry *x = events_ring_get(e, seq);
		_cleanup_free_ char *line = x ? xasprintf("%s\n", x->line) : NULL;

		if (line && sink_write(e, line, x->len + 1) < 0) {
			e->stats.write_errors++;
		}
	}
}

static void
ring_drop_oldest(struct events *e)
{
	struct events_entry *slot = &e->ring[(e->first_seq - 1) % e->cap];

	e->ring_bytes -= slot->len + strlen(slot->name) + 2;
	slot_free(slot);
	e->stats.ring_dropped++;
	e->first_seq++;
	e->count--;
}

/* Keep entry (whose line block is taken over) in the ring. */
static const struct events_entry *
ring_push(struct events *e, const struct events_entry *entry)
{
	size_t bytes = entry->len + strlen(entry->name) + 2;
	struct events_entry *slot;

	while (e->count > 0 &&
	       (e->count >= e->cap || e->ring_bytes + bytes > EVENTS_RING_BYTES_MAX)) {
		ring_drop_oldest(e);
	}
	if (e->count == 0) {
		e->first_seq = entry->seq;
	}
	slot = &e->ring[(entry->seq - 1) % e->cap];
	*slot = *entry;
	e->ring_bytes += bytes;
	e->count++;
	return slot;
}

static void
dispatch(struct events *e, const struct events_entry *entry)
{
	size_t live = 0;

	if (e->n_live_subs == 0) {
		return;
	}
	e->dispatching = true;
	/* n_subs is read each turn: a callback may subscribe more. */
	for (size_t i = 0; i < e->n_subs; i++) {
		if (e->subs[i].cb) {
			e->subs[i].cb(entry, e->subs[i].arg);
		}
	}
	e->dispatching = false;
	/* Compact what callbacks unsubscribed. */
	for (size_t i = 0; i < e->n_subs; i++) {
		if (e->subs[i].cb) {
			e->subs[live++] = e->subs[i];
		}
	}
	e->n_subs = live;
}

/* Record the serialised line (malloc'd, taken over). */
static int
record_line(struct events *e, char *line, size_t len, const char *name, int64_t timestamp,
	    enum events_kind kind)
{
	size_t name_len = strlen(name);
	struct events_entry entry;
	int r = 0;

	if (len > EVENTS_LINE_MAX) {
		free(line);
		e->stats.too_big++;
		return -E2BIG;
	}
	/* line, "\n", then the name after the line's NUL: one block. */
	line = xrealloc(line, len + 2 + name_len + 1);
	line[len] = '\n';
	line[len + 1] = '\0';
	memcpy(line + len + 2, name, name_len + 1);
	e->stats.recorded++;
	if (e->sink != EVENTS_SINK_NULL) {
		r = sink_write(e, line, len + 1);
		if (r < 0) {
			e->stats.write_errors++;
			e->stats.last_errno = -r;
		}
	}
	line[len] = '\0';
	entry = (struct events_entry){
		.seq = e->next_seq++,
		.timestamp = timestamp,
		.kind = kind,
		.name = line + len + 2,
		.line = line,
		.len = len,
	};
	if (e->cap > 0) {
		dispatch(e, ring_push(e, &entry));
	} else {
		dispatch(e, &entry);
		free(line);
	}
	return r;
}

int
events_record(struct events *e, const struct elastic_event *ev)
{
	size_t len;
	char *line;

	if (!events_enabled(e)) {
		return 0;
	}
	if (e->dispatching) {
		return -EBUSY;
	}
	line = elastic_event_serialize(ev, &len);
	return record_line(e, line, len, ev->name ? ev->name : "", ev->timestamp,
			   EVENTS_KIND_EVENT);
}

int
events_record_rdzv_event(struct events *e, const struct rdzv_event *ev)
{
	size_t len;
	char *line;

	if (!events_enabled(e)) {
		return 0;
	}
	if (e->dispatching) {
		return -EBUSY;
	}
	line = rdzv_event_serialize(ev, &len);
	return record_line(e, line, len, ev->name ? ev->name : "",
			   (int64_t)(wall_usec() / USEC_PER_MSEC), EVENTS_KIND_RDZV);
}

int
events_record_rdzv(struct events *e, const char *name, enum node_state state, int rank,
		   const char *fmt, ...)
{
	_cleanup_free_ char *message = NULL;
	struct rdzv_event ev;
	va_list ap;

	if (!events_enabled(e)) {
		return 0;
	}
	va_start(ap, fmt);
	if (vasprintf(&message, fmt, ap) < 0) {
		abort();
	}
	va_end(ap);
	ev = (struct rdzv_event){
		.name = name,
		.run_id = e->run_id,
		.message = message,
		.hostname = e->hostname ? e->hostname : host_fqdn(),
		.pid = e->pid > 0 ? e->pid : (long long)getpid(),
		.node_state = state,
		.master_endpoint = "",
		.has_rank = rank >= 0,
		.rank = rank,
		.has_local_id = e->local_id >= 0,
		.local_id = e->local_id,
		.error_trace = state == NODE_STATE_FAILED ? message : "",
	};
	return events_record_rdzv_event(e, &ev);
}

int
events_subscribe(struct events *e, void (*cb)(const struct events_entry *entry, void *arg),
		 void *arg)
{
	e->subs = xrealloc(e->subs, (e->n_subs + 1) * sizeof(*e->subs));
	e->subs[e->n_subs++] = (struct subscriber){.id = e->next_sub_id, .cb = cb, .arg = arg};
	e->n_live_subs++;
	return e->next_sub_id++;
}

void
events_unsubscribe(struct events *e, int id)
{
	for (size_t i = 0; i < e->n_subs; i++) {
		if (e->subs[i].id != id || !e->subs[i].cb) {
			continue;
		}
		e->n_live_subs--;
		if (e->dispatching) {
			e->subs[i].cb = NULL; /* compacted after the dispatch */
		} else {
			memmove(&e->subs[i], &e->subs[i + 1],
				(e->n_subs - i - 1) * sizeof(*e->subs));
			e->n_subs--;
		}
		return;
	}
}

uint64_t
events_first_seq(const struct events *e)
{
	return e && e->count > 0 ? e->first_seq : 0;
}

uint64_t
events_last_seq(const struct events *e)
{
	return e ? e->next_seq - 1 : 0;
}

const struct events_entry *
events_ring_get(const struct events *e, uint64_t seq)
{
	if (!e || e->count == 0 || seq < e->first_seq || seq - e->first_seq >= e->count) {
		return NULL;
	}
	return &e->ring[(seq - 1) % e->cap];
}

void
events_get_stats(const struct events *e, struct events_stats *ret)
{
	if (!e) {
		*ret = (struct events_stats){0};
		return;
	}
	*ret = e->stats;
}
