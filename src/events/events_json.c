/* events_json.c — the JSON lines of torchelastic's Event and RdzvEvent
 * (torch's schema, key for key).
 *
 * Events are built as jansson values and encoded by errfile_json_dumps, the
 * byte-exact Python json.dumps encoder (ensure_ascii with lower-case \u
 * escapes, DEL escaped, reals as Python's repr): jansson's own json_dumps
 * differs from Python in all three. Parsing is jansson's with duplicate keys
 * refused, after a cheap nesting pre-scan (an event is at most two levels
 * deep, so nothing deeper ever reaches the recursive parser). */
#include "events.h"
#include "events_internal.h"

#include <errno.h>
#include <stdarg.h>
#include <string.h>

#include "errfile.h"
#include "util.h"

/* An Event is an object holding one object (metadata) of scalars; one level
 * more is let through to be refused with the key's name (too_deep). */
#define EVENTS_DEPTH_MAX 3
/* Longest key or value quoted in an error message. */
#define ERR_QUOTE_MAX 40

/* ---- jansson helpers ------------------------------------------------------ */

static char *
dump_line(const json_t *v, size_t *ret_len)
{
	char *s = errfile_json_dumps(v);

	if (ret_len) {
		*ret_len = strlen(s);
	}
	return s;
}

static const char *
type_phrase(const json_t *v)
{
	switch (json_typeof(v)) {
	case JSON_OBJECT:
		return "an object";
	case JSON_ARRAY:
		return "an array";
	case JSON_STRING:
		return "a string";
	case JSON_INTEGER:
		return "an integer";
	case JSON_REAL:
		return "a float";
	case JSON_TRUE:
	case JSON_FALSE:
		return "a boolean";
	case JSON_NULL:
		return "null";
	}
	return "a value";
}

/* s as a JSON string literal for messages, cut to ERR_QUOTE_MAX characters. */
static char *
quote(const char *s, size_t len)
{
	bool cut = len > ERR_QUOTE_MAX;
	json_t *v = json_stringn_nocheck(s, cut ? ERR_QUOTE_MAX : len);
	char *q = errfile_json_dumps(v);
	char *r;

	json_decref(v);
	if (!cut) {
		return q;
	}
	r = xasprintf("%s...", q);
	free(q);
	return r;
}

static int __attribute__((format(printf, 2, 3))) fail(char **reterr, const char *fmt, ...)
{
	va_list ap;
	char *msg;

	if (!reterr) {
		return -EINVAL;
	}
	va_start(ap, fmt);
	if (vasprintf(&msg, fmt, ap) < 0) {
		abort();
	}
	va_end(ap);
	*reterr = msg;
	return -EINVAL;
}

/* Whether buf nests objects or arrays deeper than max (outside strings):
 * an event is an object with a metadata object, so one level more is an
 * array or object as a metadata value, refused later naming the key. */
static bool
too_deep(const char *buf, size_t len, int max)
{
	int depth = 0;
	bool in_string = false;

	for (size_t i = 0; i < len; i++) {
		char c = buf[i];

		if (in_string) {
			if (c == '\\') {
				i++;
			} else if (c == '"') {
				in_string = false;
			}
			continue;
		}
		if (c == '"') {
			in_string = true;
		} else if (c == '{' || c == '[') {
			if (++depth > max) {
				return true;
			}
		} else if (c == '}' || c == ']') {
			depth--;
		}
	}
	return false;
}

/* Parse one line into a JSON object (new reference), or NULL with *reterr. */
static json_t *
parse_object(const char *buf, size_t len, char **reterr)
{
	json_error_t err;
	json_t *root;

	if (!buf) {
		fail(reterr, "no input");
		return NULL;
	}
	if (len > 0 && buf[len - 1] == '\n') {
		len--;
	}
	if (len > EVENTS_LINE_MAX) {
		fail(reterr, "line too long (%zu bytes, limit %u)", len, EVENTS_LINE_MAX);
		return NULL;
	}
	if (memchr(buf, '\n', len)) {
		fail(reterr, "more than one line");
		return NULL;
	}
	if (too_deep(buf, len, EVENTS_DEPTH_MAX)) {
		fail(reterr, "nested too deeply (an event is an object with a metadata object of "
			     "plain values)");
		return NULL;
	}
	root = json_loadb(buf, len, JSON_REJECT_DUPLICATES, &err);
	if (!root) {
		fail(reterr, "not valid JSON: %s (column %d)", err.text, err.column);
		return NULL;
	}
	if (!json_is_object(root)) {
		fail(reterr, "not a JSON object but %s", type_phrase(root));
		json_decref(root);
		return NULL;
	}
	return root;
}

static bool
is_scalar(const json_t *v)
{
	return !json_is_object(v) && !json_is_array(v);
}

/* ---- Event ------------------------------------------------------------- */

static json_t *
event_to_json(const struct elastic_event *ev)
{
	json_t *o = json_object();

	json_object_set_new_nocheck(o, "name", jstr(ev->name));
	json_object_set_new_nocheck(o, "source", json_string(event_source_name(ev->source)));
	json_object_set_new_nocheck(o, "timestamp", json_integer(ev->timestamp));
	if (ev->metadata) {
		json_object_set_nocheck(o, "metadata", ev->metadata);
	} else {
		json_object_set_new_nocheck(o, "metadata", json_object());
	}
	return o;
}

char *
elastic_event_serialize(const struct elastic_event *ev, size_t *ret_len)
{
	json_t *o = event_to_json(ev);
	char *s = dump_line(o, ret_len);

	json_decref(o);
	return s;
}

static int
event_from_json(json_t *root, struct elastic_event *ret, char **reterr)
{
	json_t *name = NULL, *source = NULL, *timestamp = NULL, *metadata = NULL, *v;
	const char *key;
	enum event_source src;

	json_object_foreach(root, key, v)
	{
		if (strcmp(key, "name") == 0) {
			name = v;
		} else if (strcmp(key, "source") == 0) {
			source = v;
		} else if (strcmp(key, "timestamp") == 0) {
			timestamp = v;
		} else if (strcmp(key, "metadata") == 0) {
			metadata = v;
		} else {
			_cleanup_free_ char *q = quote(key, strlen(key));

			return fail(reterr, "Event: unknown key %s", q);
		}
	}
	if (!name) {
		return fail(reterr, "Event: 'name' is missing");
	}
	if (!json_is_string(name)) {
		return fail(reterr, "Event: 'name' must be a string, not %s", type_phrase(name));
	}
	if (!source) {
		return fail(reterr, "Event: 'source' is missing");
	}
	if (!json_is_string(source) ||
	    event_source_from_name(json_string_value(source), &src) < 0) {
		_cleanup_free_ char *q = json_is_string(source) ? quote(json_string_value(source),
									json_string_length(source))
								: xstrdup(type_phrase(source));

		return fail(reterr, "Event: 'source' must be \"AGENT\" or \"WORKER\", not %s", q);
	}
	if (timestamp && !json_is_integer(timestamp)) {
		return fail(reterr, "Event: 'timestamp' must be an integer, not %s",
			    type_phrase(timestamp));
	}
	if (metadata) {
		if (!json_is_object(metadata)) {
			return fail(reterr, "Event: 'metadata' must be an object, not %s",
				    type_phrase(metadata));
		}
		json_object_foreach(metadata, key, v)
		{
			if (!is_scalar(v)) {
				_cleanup_free_ char *q = quote(key, strlen(key));

				return fail(reterr,
					    "Event: metadata %s must be a string, integer, float, "
					    "boolean or null, not %s",
					    q, type_phrase(v));
			}
		}
	}
	ret->name = xstrndup(json_string_value(name), json_string_length(name));
	ret->source = src;
	ret->timestamp = timestamp ? json_integer_value(timestamp) : 0;
	ret->metadata = metadata ? json_incref(metadata) : json_object();
	return 0;
}

int
elastic_event_deserialize(const char *buf, size_t len, struct elastic_event *ret, char **reterr)
{
	json_t *root = parse_object(buf, len, reterr);
	struct elastic_event ev = {0};
	int r;

	if (!root) {
		return -EINVAL;
	}
	r = event_from_json(root, &ev, reterr);
	json_decref(root);
	if (r < 0) {
		return r;
	}
	*ret = ev;
	return 0;
}

/* ---- RdzvEvent --------------------------------------------------------- */

static json_t *
rdzv_to_json(const struct rdzv_event *ev)
{
	json_t *o = json_object();

	json_object_set_new_nocheck(o, "name", jstr(ev->name));
	json_object_set_new_nocheck(o, "run_id", jstr(ev->run_id));
	json_object_set_new_nocheck(o, "message", jstr(ev->message));
	json_object_set_new_nocheck(o, "hostname", jstr(ev->hostname));
	json_object_set_new_nocheck(o, "pid", json_integer(ev->pid));
	json_object_set_new_nocheck(o, "node_state", json_string(node_state_name(ev->node_state)));
	json_object_set_new_nocheck(o, "master_endpoint", jstr(ev->master_endpoint));
	json_object_set_new_nocheck(o, "rank", ev->has_rank ? json_integer(ev->rank) : json_null());
	json_object_set_new_nocheck(o, "local_id",
				    ev->has_local_id ? json_integer(ev->local_id) : json_null());
	json_object_set_new_nocheck(o, "error_trace", jstr(ev->error_trace));
	return o;
}

char *
rdzv_event_serialize(const struct rdzv_event *ev, size_t *ret_len)
{
	json_t *o = rdzv_to_json(ev);
	char *s = dump_line(o, ret_len);

	json_decref(o);
	return s;
}

enum rdzv_field {
	RF_NAME,
	RF_RUN_ID,
	RF_MESSAGE,
	RF_HOSTNAME,
	RF_PID,
	RF_NODE_STATE,
	RF_MASTER_ENDPOINT,
	RF_RANK,
	RF_LOCAL_ID,
	RF_ERROR_TRACE,
	RF_COUNT,
};

/* RdzvEvent's fields in declaration order: the JSON type each takes. */
static const struct {
	const char *key;
	bool required;
	bool integer;  /* an integer (else a string) */
	bool nullable; /* null allowed (Optional[int]) */
} rdzv_fields[RF_COUNT] = {
	[RF_NAME] = {"name", true, false, false},
	[RF_RUN_ID] = {"run_id", true, false, false},
	[RF_MESSAGE] = {"message", true, false, false},
	[RF_HOSTNAME] = {"hostname", true, false, false},
	[RF_PID] = {"pid", true, true, false},
	[RF_NODE_STATE] = {"node_state", true, false, false},
	[RF_MASTER_ENDPOINT] = {"master_endpoint", false, false, false},
	[RF_RANK] = {"rank", false, true, true},
	[RF_LOCAL_ID] = {"local_id", false, true, true},
	[RF_ERROR_TRACE] = {"error_trace", false, false, false},
};

static char *
dup_json_string(const json_t *v)
{
	return v ? xstrndup(json_string_value(v), json_string_length(v)) : xstrdup("");
}

static int
rdzv_from_json(json_t *root, struct rdzv_event *ret, char **reterr)
{
	json_t *f[RF_COUNT] = {NULL}, *v;
	const char *key;
	enum node_state state;

	json_object_foreach(root, key, v)
	{
		size_t i;

		for (i = 0; i < RF_COUNT; i++) {
			if (strcmp(key, rdzv_fields[i].key) == 0) {
				break;
			}
		}
		if (i == RF_COUNT) {
			_cleanup_free_ char *q = quote(key, strlen(key));

			return fail(reterr, "RdzvEvent: unknown key %s", q);
		}
		f[i] = v;
	}
	for (size_t i = 0; i < RF_COUNT; i++) {
		bool ok;

		if (!f[i]) {
			if (rdzv_fields[i].required) {
				return fail(reterr, "RdzvEvent: '%s' is missing",
					    rdzv_fields[i].key);
			}
			continue;
		}
		if (rdzv_fields[i].integer) {
			ok = json_is_integer(f[i]) ||
			     (rdzv_fields[i].nullable && json_is_null(f[i]));
		} else {
			ok = json_is_string(f[i]);
		}
		if (!ok) {
			return fail(reterr, "RdzvEvent: '%s' must be %s, not %s",
				    rdzv_fields[i].key,
				    !rdzv_fields[i].integer   ? "a string"
				    : rdzv_fields[i].nullable ? "an integer or null"
							      : "an integer",
				    type_phrase(f[i]));
		}
	}
	if (node_state_from_name(json_string_value(f[RF_NODE_STATE]), &state) < 0) {
		_cleanup_free_ char *q = quote(json_string_value(f[RF_NODE_STATE]),
					       json_string_length(f[RF_NODE_STATE]));

		return fail(reterr,
			    "RdzvEvent: 'node_state' must be \"INIT\", \"RUNNING\", \"SUCCEEDED\" "
			    "or \"FAILED\", not %s",
			    q);
	}
	*ret = (struct rdzv_event){
		.name = dup_json_string(f[RF_NAME]),
		.run_id = dup_json_string(f[RF_RUN_ID]),
		.message = dup_json_string(f[RF_MESSAGE]),
		.hostname = dup_json_string(f[RF_HOSTNAME]),
		.pid = json_integer_value(f[RF_PID]),
		.node_state = state,
		.master_endpoint = dup_json_string(f[RF_MASTER_ENDPOINT]),
		.has_rank = f[RF_RANK] && json_is_integer(f[RF_RANK]),
		.rank = json_integer_value(f[RF_RANK]),
		.has_local_id = f[RF_LOCAL_ID] && json_is_integer(f[RF_LOCAL_ID]),
		.local_id = json_integer_value(f[RF_LOCAL_ID]),
		.error_trace = dup_json_string(f[RF_ERROR_TRACE]),
	};
	return 0;
}

int
rdzv_event_deserialize(const char *buf, size_t len, struct rdzv_event *ret, char **reterr)
{
	json_t *root = parse_object(buf, len, reterr);
	int r;

	if (!root) {
		return -EINVAL;
	}
	r = rdzv_from_json(root, ret, reterr);
	json_decref(root);
	return r;
}

/* ---- any line ---------------------------------------------------------- */

int
events_parse_line(const char *buf, size_t len, struct events_line *ret, char **reterr)
{
	json_t *root = parse_object(buf, len, reterr);
	struct events_line l = {0};
	int r;

	if (!root) {
		return -EINVAL;
	}
	if (json_object_get(root, "source")) {
		l.kind = EVENTS_KIND_EVENT;
		r = event_from_json(root, &l.event, reterr);
	} else if (json_object_get(root, "node_state")) {
		l.kind = EVENTS_KIND_RDZV;
		r = rdzv_from_json(root, &l.rdzv, reterr);
	} else {
		r = fail(reterr, "neither an Event (no 'source') nor an RdzvEvent (no "
				 "'node_state')");
	}
	json_decref(root);
	if (r < 0) {
		return r;
	}
	*ret = l;
	return 0;
}

void
events_line_release(struct events_line *l)
{
	elastic_event_release(&l->event);
	rdzv_event_release(&l->rdzv);
}

char *
events_line_serialize(const struct events_line *l, size_t *ret_len)
{
	switch (l->kind) {
	case EVENTS_KIND_EVENT:
		return elastic_event_serialize(&l->event, ret_len);
	case EVENTS_KIND_RDZV:
		return rdzv_event_serialize(&l->rdzv, ret_len);
	}
	return NULL;
}
