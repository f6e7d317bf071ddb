/* events.h — torchelastic's Events API in C (torch.distributed.elastic.events).
 *
 * The model: `Event` {name, source AGENT|WORKER, timestamp, metadata} and
 * `RdzvEvent` {name, run_id, message, hostname, pid, node_state,
 * master_endpoint, rank, local_id, error_trace}. Each serialises to one JSON
 * line byte for byte as torch 1.13's `Event.serialize` / `RdzvEvent.serialize`
 * (`json.dumps(dataclasses.asdict(event))`: keys in declaration order,
 * separators ", " and ": ", ensure_ascii), so torch's `Event.deserialize` /
 * `RdzvEvent.deserialize` read every line elasticd writes, and the strict
 * parsers here read every line torch writes.
 *
 * The recorder (struct events): one sink (null, console = stderr, or a file of
 * JSON lines written with one write(2) per line in O_APPEND mode, so lines of
 * concurrent writers never interleave), a bounded ring of the latest events
 * with sequence numbers, and subscriber callbacks (the control plane). With
 * the null sink and no subscriber the recorder is disabled and nothing is
 * built: callers check events_enabled() before constructing an event, and every
 * events_record* returns at once when it is false.
 *
 * Timestamps are milliseconds since the epoch (wall clock), as torch's
 * `Event.timestamp` (which torch's own agent leaves at 0). RdzvEvent has no
 * timestamp field in torch's schema, so none is written; the ring entry keeps
 * the time it was recorded. Single-threaded: call from the event loop only. */
#pragma once

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Longest serialised event, in bytes without the newline: longer events are
 * not recorded (-E2BIG) and longer lines are not parsed. */
#define EVENTS_LINE_MAX (1024u * 1024)
/* Default and largest number of entries of the ring (--event-ring-size). */
#define EVENTS_RING_DEFAULT 1024
#define EVENTS_RING_MAX 65536
/* The ring also drops its oldest entries to stay under this many bytes. */
#define EVENTS_RING_BYTES_MAX (8u * 1024 * 1024)

/* torch's EventSource (str enum, value == name). */
enum event_source {
	EVENT_SOURCE_AGENT,
	EVENT_SOURCE_WORKER,
};

/* torch's NodeState: a node's state in the rendezvous (str enum). */
enum node_state {
	NODE_STATE_INIT,
	NODE_STATE_RUNNING,
	NODE_STATE_SUCCEEDED,
	NODE_STATE_FAILED,
};

/* "AGENT" / "WORKER"; "INIT" / "RUNNING" / "SUCCEEDED" / "FAILED". Static
 * storage. */
const char *event_source_name(enum event_source s);
const char *node_state_name(enum node_state s);
/* Parse those names (exact, upper case, as torch's `EventSource[name]`).
 * Return 0 and set *ret, or -EINVAL (*ret untouched). */
int event_source_from_name(const char *s, enum event_source *ret);
int node_state_from_name(const char *s, enum node_state *ret);

/* ---- Event ------------------------------------------------------------- */

/* torch's Event. Owns everything it points to. metadata is a jansson object
 * whose values are only strings, integers, reals, booleans and null (torch's
 * EventMetadataValue); its insertion order is the output order. */
struct elastic_event {
	char *name;
	enum event_source source;
	int64_t timestamp; /* ms since epoch; 0 = unknown (what torch's agent writes) */
	json_t *metadata;  /* object, never NULL after init */
};

/* Start an event with no metadata; name is copied (NULL is ""). Release with
 * elastic_event_release. */
void elastic_event_init(struct elastic_event *ev, const char *name, enum event_source source,
			int64_t timestamp);
/* Free what ev owns and zero it; accepts a zeroed or released ev. */
void elastic_event_release(struct elastic_event *ev);

/* Set metadata[key] (added at the end, or replaced in place when present).
 * Strings are copied; a NULL value is JSON null; bytes that are not UTF-8 are
 * written as U+FFFD. Return 0, or -EINVAL when key is NULL or not UTF-8, and
 * elastic_event_set_double -EDOM for NaN and infinities (JSON has none). */
int elastic_event_set_string(struct elastic_event *ev, const char *key, const char *value);
int elastic_event_set_int(struct elastic_event *ev, const char *key, long long value);
int elastic_event_set_double(struct elastic_event *ev, const char *key, double value);
int elastic_event_set_bool(struct elastic_event *ev, const char *key, bool value);
int elastic_event_set_null(struct elastic_event *ev, const char *key);

/* Serialise as torch 1.13 `Event.serialize`: one line, no newline, e.g.
 * {"name": "n", "source": "AGENT", "timestamp": 0, "metadata": {"k": 1}}
 * Reals as Python's repr (shortest round-trip form). Returns a malloc'd string
 * and its length in *ret_len (may be NULL). */
char *elastic_event_serialize(const struct elastic_event *ev, size_t *ret_len);

/* Parse one line (buf[0..len), a trailing newline allowed) into *ret, which is
 * overwritten and later released with elastic_event_release. Strict where torch
 * is lax: an object with exactly the keys name (string), source ("AGENT" or
 * "WORKER"), and optionally timestamp (integer, default 0) and metadata
 * (object of strings, integers, reals, booleans and null; default {});
 * duplicate keys, unknown keys, deeper nesting, \u0000, NaN, integers beyond
 * 64 bits and lines over EVENTS_LINE_MAX are refused. Returns 0, or -EINVAL
 * with *reterr (malloc'd, may be NULL) saying what is wrong ("Event: 'source'
 * must be \"AGENT\" or \"WORKER\", not \"X\""); *ret is untouched on failure. */
int elastic_event_deserialize(const char *buf, size_t len, struct elastic_event *ret,
			      char **reterr);

/* Same name, source, timestamp and metadata (keys, order, types, values). */
bool elastic_event_equal(const struct elastic_event *a, const struct elastic_event *b);

/* ---- torchrun's worker status events ------------------------------------- */

/* What torchrun's SimpleElasticAgent._construct_event (agent/server/api.py)
 * puts in a `torchelastic.worker.status.<state>` event. Strings are borrowed. */
struct events_status {
	const char *state; /* SUCCEEDED, FAILED, TERMINATED, RENDEZVOUS, ... */
	enum event_source source;
	int64_t timestamp; /* ms since epoch */
	const char *run_id;
	const char *role;
	const char *hostname;
	const char *rdzv_backend;
	const char *entry_point;  /* basename of the program (inner metadata) */
	int group_rank;           /* < 0: null (no round yet) */
	int group_world_size;     /* < 0: null (inner metadata) */
	long long total_run_time; /* whole seconds since the agent started */
	int agent_restarts;       /* max_restarts - remaining restarts */
	const char *raw_error;    /* NULL: null */
	bool has_duration;        /* duration_ms set (torch 2.x record_duration) */
	double duration_ms;
	/* Worker events (source WORKER): */
	bool worker;
	int global_rank;
	int local_rank;
	int role_rank;
	int role_world_size;
	long long worker_pid; /* worker_id is str(pid); <= 0: null */
};

/* Build torchrun's event: name "torchelastic.worker.status.<state>", metadata
 * run_id, global_rank, group_rank, worker_id, role, hostname, state,
 * total_run_time, rdzv_backend, raw_error, metadata, agent_restarts,
 * duration_ms — in that order, as torch 2.x (1.13 lacks duration_ms). The
 * inner "metadata" is a JSON string: {"group_world_size": N, "entry_point": E}
 * plus, for worker events, "local_rank": [i], "role_rank": [i],
 * "role_world_size": [n]. For agent events global_rank and worker_id are null.
 * *ev is overwritten; release it with elastic_event_release. */
void elastic_event_init_status(struct elastic_event *ev, const struct events_status *st);

/* ---- RdzvEvent --------------------------------------------------------- */

/* torch's RdzvEvent. Strings are borrowed when the caller fills one in to
 * record it (NULL is ""), owned when rdzv_event_deserialize filled it. */
struct rdzv_event {
	const char *name; /* "<file>:<function>", e.g. "rdzv_c10d.c:_add_to_participants" */
	const char *run_id;
	const char *message;
	const char *hostname;
	long long pid;
	enum node_state node_state;
	const char *master_endpoint; /* "" unless known */
	bool has_rank;               /* rank is null unless set */
	long long rank;
	bool has_local_id; /* local_id is null unless set */
	long long local_id;
	const char *error_trace; /* "" unless FAILED */
};

/* Serialise as torch 1.13 `RdzvEvent.serialize`, e.g. {"name": "n", "run_id":
 * "r", "message": "m", "hostname": "h", "pid": 1, "node_state": "INIT",
 * "master_endpoint": "", "rank": null, "local_id": null, "error_trace": ""}.
 * Returns a malloc'd string, its length in *ret_len (may be NULL). */
char *rdzv_event_serialize(const struct rdzv_event *ev, size_t *ret_len);

/* Parse one line into *ret (every string malloc'd; rdzv_event_release frees
 * them). Required: name, run_id, message, hostname (strings), pid (integer),
 * node_state (INIT, RUNNING, SUCCEEDED or FAILED); optional: master_endpoint
 * and error_trace (strings, default ""), rank and local_id (integer or null,
 * default null). Same strictness and errors as elastic_event_deserialize. */
int rdzv_event_deserialize(const char *buf, size_t len, struct rdzv_event *ret, char **reterr);

/* Free the strings of an event filled by rdzv_event_deserialize and zero it;
 * accepts a zeroed event. Never call it on an event with borrowed strings. */
void rdzv_event_release(struct rdzv_event *ev);

/* Same fields (NULL strings compare equal to ""). */
bool rdzv_event_equal(const struct rdzv_event *a, const struct rdzv_event *b);

/* ---- any line ---------------------------------------------------------- */

enum events_kind {
	EVENTS_KIND_EVENT, /* an Event (has "source") */
	EVENTS_KIND_RDZV,  /* an RdzvEvent (has "node_state") */
};

struct events_line {
	enum events_kind kind;
	struct elastic_event event; /* when kind == EVENTS_KIND_EVENT */
	struct rdzv_event rdzv;     /* when kind == EVENTS_KIND_RDZV */
};

/* Parse a line of an event log: an Event when the object has "source", an
 * RdzvEvent when it has "node_state", else an error. *ret is overwritten;
 * release with events_line_release. Returns 0 or -EINVAL with *reterr. */
int events_parse_line(const char *buf, size_t len, struct events_line *ret, char **reterr);
void events_line_release(struct events_line *l);
/* Serialise whichever event l holds (see the two serialisers). */
char *events_line_serialize(const struct events_line *l, size_t *ret_len);

/* ---- the recorder ------------------------------------------------------- */

struct events;

/* Where recorded events are written (--event-log-handler). */
enum events_sink {
	EVENTS_SINK_NULL,    /* nowhere (the ring and subscribers still get them) */
	EVENTS_SINK_CONSOLE, /* stderr, one line per event */
	EVENTS_SINK_FILE,    /* a file of JSON lines, appended */
};

/* "null", "console", "file"; and torch's "dynamic_rendezvous" (a null
 * handler in torch) as null. Returns 0 or -EINVAL. */
int events_sink_from_name(const char *name, enum events_sink *ret);
const char *events_sink_name(enum events_sink sink);

/* One recorded event, as the ring and subscribers see it. Pointers stay valid
 * until the entry leaves the ring (for subscribers: until the callback
 * returns). */
struct events_entry {
	uint64_t seq;      /* 1, 2, 3, ... in record order, never reused */
	int64_t timestamp; /* ms since epoch: the Event's own, else when recorded */
	enum events_kind kind;
	const char *name; /* the event's name */
	const char *line; /* the serialised event, NUL-terminated, no newline */
	size_t len;       /* strlen(line) */
};

/* A recorder with the null sink, no subscriber and a ring of ring_size entries
 * (0: no ring; capped at EVENTS_RING_MAX). Never NULL (aborts on OOM). */
struct events *events_new(size_t ring_size);

/* Close the sink and free everything; accepts NULL. */
void events_free(struct events *e);

/* Switch the sink. EVENTS_SINK_FILE opens path (required) with
 * O_WRONLY|O_CREAT|O_APPEND|O_CLOEXEC, mode 0644, creating missing parent
 * directories (0755); a FIFO or character device is written non-blocking and
 * a line that does not fit is dropped, never waited for. The previous sink is
 * closed. Returns 0, or -errno with *reterr ("cannot open the event log
 * '<path>': <why>") and the sink unchanged. */
int events_set_sink(struct events *e, enum events_sink sink, const char *path, char **reterr);
enum events_sink events_get_sink(const struct events *e);

/* Record from now on although no sink is open yet (events_enabled says
 * true): the file sink that events_set_sink opens next starts with the
 * events recorded since, in order, as many as the ring still holds. For the
 * agent's default event file, whose run directory exists only once the
 * rendezvous is created. A successful events_set_sink ends the hold. */
void events_hold(struct events *e);

/* The defaults events_record_rdzv fills in: run_id, hostname (NULL: the host's
 * FQDN), pid (<= 0: getpid()) and local_id (< 0: null). Strings are copied. */
void events_set_identity(struct events *e, const char *run_id, const char *hostname, long long pid,
			 long long local_id);

/* Whether recording does anything: a sink other than null, or a subscriber.
 * false for NULL. Check it before building an event. */
bool events_enabled(const struct events *e);

/* Record an Event / an RdzvEvent: serialise it, write it to the sink, keep it
 * in the ring, call the subscribers. e may be NULL (nothing happens). Returns
 * 0 (also when disabled); -E2BIG when the line exceeds EVENTS_LINE_MAX (not
 * recorded); -EBUSY from inside a subscriber; or -errno of a failed sink write
 * (the event is still in the ring and given to subscribers). */
int events_record(struct events *e, const struct elastic_event *ev);
int events_record_rdzv_event(struct events *e, const struct rdzv_event *ev);

/* torch's construct_and_record_rdzv_event, for rendezvous backends: record an
 * RdzvEvent named name ("<file>:<function>") with node_state state, the
 * message printf-formatted from fmt (formatted only when enabled), rank (< 0:
 * null), the identity's run_id, hostname, pid and local_id, master_endpoint "",
 * and for FAILED error_trace = the message (torch puts a Python traceback
 * there). Returns as events_record. */
int events_record_rdzv(struct events *e, const char *name, enum node_state state, int rank,
		       const char *fmt, ...) __attribute__((format(printf, 5, 6)));

/* Add a subscriber: cb(entry, arg) is called after each event is written to
 * the sink and the ring. It must not record events (a nested record is
 * refused with -EBUSY) and may unsubscribe itself or others. Subscribing
 * enables the recorder even with the null sink. Returns the subscriber's id
 * (> 0) for events_unsubscribe. */
int events_subscribe(struct events *e, void (*cb)(const struct events_entry *entry, void *arg),
		     void *arg);
/* Remove a subscriber by id; unknown ids are ignored. */
void events_unsubscribe(struct events *e, int id);

/* Sequence numbers: of the oldest entry the ring holds (0 when it holds none;
 * > 1 once entries were pushed out), and of the last event recorded (0 before
 * the first; the ring holds it unless its size is 0). events_ring_get gives
 * the entry with sequence number seq, or NULL when it was pushed out or not
 * recorded yet. A reader that wants every event after seq N reads N+1 ..
 * events_last_seq() and sees a gap when events_first_seq() > N+1. */
uint64_t events_first_seq(const struct events *e);
uint64_t events_last_seq(const struct events *e);
const struct events_entry *events_ring_get(const struct events *e, uint64_t seq);

/* Counters since events_new. */
struct events_stats {
	uint64_t recorded;     /* events serialised and given to the sink */
	uint64_t write_errors; /* sink writes that failed or were dropped */
	uint64_t too_big;      /* events refused with -E2BIG */
	uint64_t ring_dropped; /* entries pushed out of the ring */
	int last_errno;        /* errno of the last failed write, else 0 */
};
void events_get_stats(const struct events *e, struct events_stats *ret);
