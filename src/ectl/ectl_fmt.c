#include "ectl_fmt.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "util.h"

/* ---- tables ----------------------------------------------------------------- */

static const char *
cell_text(const struct ectl_table *t, size_t r, size_t c)
{
	const char *s = t->cells[r * t->ncols + c];

	return s ? s : "-";
}

static void
print_cell(FILE *f, const char *text, const char *sgr, int pad, bool last)
{
	if (sgr) {
		fprintf(f, "\033[%sm%s\033[0m", sgr, text);
	} else {
		fputs(text, f);
	}
	if (!last) {
		fprintf(f, "%*s", pad - (int)strlen(text) + 2, "");
	}
}

void
ectl_table_print(FILE *f, const struct ectl_table *t, bool color)
{
	int *w = xcalloc(t->ncols, sizeof(*w));

	for (size_t c = 0; c < t->ncols; c++) {
		w[c] = (int)strlen(t->header[c]);
		for (size_t r = 0; r < t->nrows; r++) {
			int n = (int)strlen(cell_text(t, r, c));

			w[c] = n > w[c] ? n : w[c];
		}
	}
	for (size_t c = 0; c < t->ncols; c++) {
		print_cell(f, t->header[c], color ? ECTL_BOLD : NULL, w[c], c + 1 == t->ncols);
	}
	fputc('\n', f);
	for (size_t r = 0; r < t->nrows; r++) {
		for (size_t c = 0; c < t->ncols; c++) {
			const char *sgr = color && t->colors ? t->colors[r * t->ncols + c] : NULL;

			print_cell(f, cell_text(t, r, c), sgr, w[c], c + 1 == t->ncols);
		}
		fputc('\n', f);
	}
	free(w);
}

/* ---- status ----------------------------------------------------------------- */

char *
ectl_fmt_duration(double seconds, char *buf, size_t n)
{
	long long s = seconds < 0 || !isfinite(seconds) ? 0 : (long long)seconds;

	if (s < 60) {
		snprintf(buf, n, "%llds", s);
	} else if (s < 3600) {
		snprintf(buf, n, "%lldm %02llds", s / 60, s % 60);
	} else if (s < 86400) {
		snprintf(buf, n, "%lldh %02lldm", s / 3600, s / 60 % 60);
	} else {
		snprintf(buf, n, "%lldd %02lldh", s / 86400, s / 3600 % 24);
	}
	return buf;
}

/* A JSON scalar as text (malloc'd), NULL for null or missing. */
static char *
scalar(json_t *obj, const char *key)
{
	json_t *v = json_object_get(obj, key);

	if (json_is_string(v)) {
		return xstrdup(json_string_value(v));
	}
	if (json_is_integer(v)) {
		return xasprintf("%lld", (long long)json_integer_value(v));
	}
	if (json_is_real(v)) {
		return xasprintf("%g", json_real_value(v));
	}
	if (json_is_boolean(v)) {
		return xstrdup(json_is_true(v) ? "true" : "false");
	}
	return NULL;
}

static const char *
state_color(const char *state)
{
	if (!state) {
		return NULL;
	}
	if (strcmp(state, "HEALTHY") == 0 || strcmp(state, "SUCCEEDED") == 0 ||
	    strcmp(state, "RUNNING") == 0) {
		return ECTL_GREEN;
	}
	if (strcmp(state, "FAILED") == 0 || strcmp(state, "UNHEALTHY") == 0) {
		return ECTL_RED;
	}
	return ECTL_YELLOW;
}

/* state, coloured by state_color() on a terminal; "-" for NULL. Malloc'd. */
static char *
paint(const char *state, bool color)
{
	if (!state) {
		return xstrdup("-");
	}
	return color ? xasprintf("\033[%sm%s\033[0m", state_color(state), state) : xstrdup(state);
}

/* A "phase:" line when the node is out of the job or on its way out
 * (quarantined, excluded, draining) or its health gate failed; nothing
 * while it simply runs. */
static void
print_phase(FILE *f, json_t *s)
{
	_cleanup_free_ char *phase = scalar(s, "phase");
	json_t *q = json_object_get(s, "quarantine");
	json_t *ex = json_object_get(s, "excluded");
	json_t *h = json_object_get(s, "health");
	char left[32];

	if (json_is_object(q)) {
		ectl_fmt_duration(json_number_value(json_object_get(q, "remaining_s")), left,
				  sizeof(left));
		fprintf(f,
			"phase:     quarantined (%lld failed attempts), rejoins in %s "
			"(quarantine %lld)\n",
			(long long)json_integer_value(json_object_get(q, "failures")), left,
			(long long)json_integer_value(json_object_get(q, "quarantines")));
	} else if (json_is_string(ex)) { /* a worker's words: visible */
		_cleanup_free_ char *why =
			ectl_fmt_visible(json_string_value(ex), json_string_length(ex));

		fprintf(f, "phase:     %s, excluded: %s\n", phase ? phase : "-",
			*why ? why : "(no reason)");
	} else if (json_is_number(json_object_get(s, "next_attempt_in_s"))) {
		ectl_fmt_duration(json_number_value(json_object_get(s, "next_attempt_in_s")), left,
				  sizeof(left));
		fprintf(f, "phase:     %s, next attempt in %s (--restart-backoff)\n",
			phase ? phase : "-", left);
	} else if (json_is_object(json_object_get(s, "drain"))) {
		fprintf(f, "phase:     %s, draining\n", phase ? phase : "-");
	} else if (json_is_object(h) && json_integer_value(json_object_get(h, "failures")) > 0) {
		_cleanup_free_ char *st = scalar(h, "state");
		_cleanup_free_ char *check = scalar(json_object_get(h, "last_failure"), "check");
		_cleanup_free_ char *res = scalar(json_object_get(h, "last_failure"), "result");

		fprintf(f, "phase:     %s, health %s (%lld failed gates; %s: %s)\n",
			phase ? phase : "-", st ? st : "-",
			(long long)json_integer_value(json_object_get(h, "failures")),
			check ? check : "-", res ? res : "-");
	} else if (json_is_object(h) && json_is_string(json_object_get(h, "state")) &&
		   strcmp(json_string_value(json_object_get(h, "state")), "waiting-gpu-memory") ==
			   0) {
		fprintf(f, "phase:     %s, waiting for the GPUs' memory (--gpu-memory-wait)\n",
			phase ? phase : "-");
	}
}

/* "key:  value" lines about the node. */
static void
print_node(FILE *f, json_t *s, bool color)
{
	_cleanup_free_ char *run_id = scalar(s, "run_id");
	_cleanup_free_ char *backend = scalar(s, "rdzv_backend");
	_cleanup_free_ char *role = scalar(s, "role");
	_cleanup_free_ char *node = scalar(s, "node");
	_cleanup_free_ char *round = scalar(s, "round");
	_cleanup_free_ char *nstate = scalar(s, "node_state");
	_cleanup_free_ char *wstate = scalar(s, "worker_state");
	_cleanup_free_ char *grank = scalar(s, "group_rank");
	_cleanup_free_ char *gworld = scalar(s, "group_world_size");
	_cleanup_free_ char *world = scalar(s, "world_size");
	_cleanup_free_ char *used = scalar(s, "restart_count");
	_cleanup_free_ char *left = scalar(s, "remaining_restarts");
	_cleanup_free_ char *max = scalar(s, "max_restarts");
	char up[32];

	fprintf(f, "job:       %s (%s, role %s)\n", run_id ? run_id : "-", backend ? backend : "-",
		role ? role : "-");
	fprintf(f, "node:      %s\n", node ? node : "-");
	fprintf(f, "round:     %s\n", round ? round : "- (no round joined yet)");
	_cleanup_free_ char *ns = paint(nstate, color);
	_cleanup_free_ char *ws = paint(wstate, color);

	fprintf(f, "state:     %s, workers %s\n", ns, ws);
	print_phase(f, s);
	fprintf(f, "group:     rank %s of %s, world size %s\n", grank ? grank : "-",
		gworld ? gworld : "-", world ? world : "-");
	fprintf(f, "restarts:  %s used, %s left (--max-restarts %s)\n", used ? used : "-",
		left ? left : "-", max ? max : "-");
	fprintf(f, "uptime:    %s\n",
		ectl_fmt_duration(json_number_value(json_object_get(s, "uptime_s")), up,
				  sizeof(up)));
}

enum {
	COL_RANK,
	COL_LOCAL,
	COL_PID,
	COL_STATE,
	COL_EXIT,
	COL_CPUS,
	COL_NUMA,
	COL_GPU,
	COL_OUTPUT,
	COL_LOG,
	NCOLS
};

static const char *const status_header[NCOLS] = {
	[COL_RANK] = "RANK",     [COL_LOCAL] = "LOCAL", [COL_PID] = "PID",   [COL_STATE] = "STATE",
	[COL_EXIT] = "EXIT",     [COL_CPUS] = "CPUS",   [COL_NUMA] = "NUMA", [COL_GPU] = "GPU",
	[COL_OUTPUT] = "OUTPUT", [COL_LOG] = "LOG",
};

/* "exit 3", "SIGKILL" or NULL while it runs. */
static char *
exit_text(json_t *w)
{
	json_t *sig = json_object_get(w, "signal");
	json_t *st = json_object_get(w, "exit_status");

	if (json_is_string(sig)) {
		return xstrdup(json_string_value(sig));
	}
	if (json_is_integer(st)) {
		return xasprintf("exit %lld", (long long)json_integer_value(st));
	}
	return NULL;
}

static char *
numa_text(json_t *w)
{
	json_t *a = json_object_get(w, "numa_nodes");
	char *out = NULL;
	size_t i;
	json_t *v;

	json_array_foreach(a, i, v)
	{
		char *o = xasprintf("%s%s%lld", out ? out : "", out ? "," : "",
				    (long long)json_integer_value(v));

		free(out);
		out = o;
	}
	return out;
}

static void
worker_row(json_t *w, char **cells, const char **colors)
{
	json_t *age = json_object_get(w, "last_output_age_s");
	char buf[32];

	cells[COL_RANK] = scalar(w, "global_rank");
	cells[COL_LOCAL] = scalar(w, "local_rank");
	cells[COL_PID] = scalar(w, "pid");
	cells[COL_STATE] = scalar(w, "state");
	cells[COL_EXIT] = exit_text(w);
	cells[COL_CPUS] = scalar(w, "cpus");
	cells[COL_NUMA] = numa_text(w);
	cells[COL_GPU] = scalar(w, "gpu");
	cells[COL_OUTPUT] = json_is_number(age)
				    ? xasprintf("%s ago", ectl_fmt_duration(json_number_value(age),
									    buf, sizeof(buf)))
				    : NULL;
	cells[COL_LOG] = scalar(w, "stdout_log");
	colors[COL_STATE] = state_color(cells[COL_STATE]);
	colors[COL_EXIT] = cells[COL_EXIT] ? ECTL_RED : NULL;
	if (cells[COL_EXIT] && strcmp(cells[COL_EXIT], "exit 0") == 0) {
		colors[COL_EXIT] = NULL;
	}
}

int
ectl_fmt_status(FILE *f, json_t *status, bool color)
{
	json_t *workers = json_object_get(status, "workers");
	size_t n = json_array_size(workers);
	char **cells = xcalloc(n * NCOLS + 1, sizeof(*cells));
	const char **colors = xcalloc(n * NCOLS + 1, sizeof(*colors));
	struct ectl_table t = {NCOLS, n, status_header, (const char **)cells, colors};
	size_t i;
	json_t *w;

	if (!json_is_object(status)) {
		free(cells);
		free(colors);
		return -EINVAL;
	}
	print_node(f, status, color);
	json_array_foreach(workers, i, w)
	{
		worker_row(w, cells + i * NCOLS, colors + i * NCOLS);
	}
	fputc('\n', f);
	if (n == 0) {
		fputs("no workers yet\n", f);
	} else {
		ectl_table_print(f, &t, color);
	}
	for (i = 0; i < n * NCOLS; i++) {
		free(cells[i]);
	}
	free(cells);
	free(colors);
	return 0;
}

/* ---- nodes ------------------------------------------------------------------ */

enum { NCOL_LIST, NCOL_RANK, NCOL_NODE, NCOL_HEARTBEAT, NCOL_ALIVE, NCOL_N };

static const char *const nodes_header[NCOL_N] = {
	[NCOL_LIST] = "LIST",           [NCOL_RANK] = "RANK",   [NCOL_NODE] = "NODE",
	[NCOL_HEARTBEAT] = "HEARTBEAT", [NCOL_ALIVE] = "ALIVE",
};

/* One member's row; self (may be NULL) is marked with " *". */
static void
member_row(json_t *m, const char *list, const char *self, char **cells, const char **colors)
{
	json_t *age = json_object_get(m, "heartbeat_age_s");
	const char *node = json_string_value(json_object_get(m, "node"));
	bool alive = json_is_true(json_object_get(m, "alive"));
	char buf[32];

	cells[NCOL_LIST] = xstrdup(list);
	cells[NCOL_RANK] = scalar(m, "group_rank");
	cells[NCOL_NODE] = xasprintf("%s%s", node ? node : "?",
				     node && self && strcmp(node, self) == 0 ? " *" : "");
	cells[NCOL_HEARTBEAT] =
		json_is_number(age) ? xasprintf("%s ago", ectl_fmt_duration(json_number_value(age),
									    buf, sizeof(buf)))
				    : NULL;
	cells[NCOL_ALIVE] = xstrdup(alive ? "yes" : "no");
	colors[NCOL_ALIVE] = alive ? ECTL_GREEN : ECTL_RED;
}

/* "key:  value" lines about the rendezvous. */
static void
print_rdzv(FILE *f, json_t *s)
{
	_cleanup_free_ char *run_id = scalar(s, "run_id");
	_cleanup_free_ char *backend = scalar(s, "backend");
	_cleanup_free_ char *node = scalar(s, "node");
	_cleanup_free_ char *round = scalar(s, "round");
	json_t *age = json_object_get(s, "state_age_s");
	const char *liveness = json_string_value(json_object_get(s, "liveness"));
	char buf[32];

	fprintf(f, "job:       %s (%s)\n", run_id ? run_id : "-", backend ? backend : "-");
	fprintf(f, "node:      %s (*)\n", node ? node : "-");
	fprintf(f, "round:     %s, %s%s\n", round ? round : "-",
		json_is_true(json_object_get(s, "complete")) ? "complete" : "gathering",
		json_is_true(json_object_get(s, "closed")) ? ", closed" : "");
	if (json_is_number(age)) {
		fprintf(f, "state:     this node's copy, read %s ago\n",
			ectl_fmt_duration(json_number_value(age), buf, sizeof(buf)));
	} else {
		fputs("state:     this node's copy, never read\n", f);
	}
	fprintf(f, "liveness:  %s\n",
		liveness && strcmp(liveness, "lease") == 0
			? "leases (alive while the lease lasts; no heartbeat time)"
			: "heartbeats (as of the copy)");
}

int
ectl_fmt_nodes(FILE *f, json_t *nodes, bool color)
{
	static const struct {
		const char *key, *list;
	} lists[] = {
		{"participants", "participant"}, {"wait_list", "waiting"}, {"spares", "spare"}};
	const char *self = json_string_value(json_object_get(nodes, "node"));
	size_t n = 0, row = 0;

	if (!json_is_object(nodes)) {
		return -EINVAL;
	}
	for (size_t l = 0; l < ARRAY_SIZE(lists); l++) {
		n += json_array_size(json_object_get(nodes, lists[l].key));
	}
	char **cells = xcalloc(n * NCOL_N + 1, sizeof(*cells));
	const char **colors = xcalloc(n * NCOL_N + 1, sizeof(*colors));
	struct ectl_table t = {NCOL_N, n, nodes_header, (const char **)cells, colors};

	for (size_t l = 0; l < ARRAY_SIZE(lists); l++) {
		size_t i;
		json_t *m;

		json_array_foreach(json_object_get(nodes, lists[l].key), i, m)
		{
			member_row(m, lists[l].list, self, cells + row * NCOL_N,
				   colors + row * NCOL_N);
			row++;
		}
	}
	print_rdzv(f, nodes);
	fprintf(f, "quarantined: %zu\n\n", json_array_size(json_object_get(nodes, "quarantined")));
	if (n == 0) {
		fputs("no nodes in the rendezvous yet\n", f);
	} else {
		ectl_table_print(f, &t, color);
	}
	for (size_t i = 0; i < n * NCOL_N; i++) {
		free(cells[i]);
	}
	free(cells);
	free(colors);
	return 0;
}

/* ---- text for a terminal ---------------------------------------------------- */

/* The length of the valid UTF-8 sequence of 2 to 4 bytes at s (n bytes
 * left), else 0. RFC 3629: no overlong forms, surrogates or code points
 * above U+10FFFF. */
static size_t
utf8_len(const unsigned char *s, size_t n)
{
	size_t len = s[0] >= 0xc2 && s[0] <= 0xdf   ? 2
		     : s[0] >= 0xe0 && s[0] <= 0xef ? 3
		     : s[0] >= 0xf0 && s[0] <= 0xf4 ? 4
						    : 0;
	unsigned char lo = s[0] == 0xe0 ? 0xa0 : s[0] == 0xf0 ? 0x90 : 0x80;
	unsigned char hi = s[0] == 0xed ? 0x9f : s[0] == 0xf4 ? 0x8f : 0xbf;

	if (len == 0 || n < len || s[1] < lo || s[1] > hi) {
		return 0;
	}
	for (size_t i = 2; i < len; i++) {
		if (s[i] < 0x80 || s[i] > 0xbf) {
			return 0;
		}
	}
	return len;
}

static bool
is_control(unsigned char c)
{
	return (c < 0x20 && c != '\n' && c != '\t') || (c >= 0x7f && c <= 0x9f);
}

char *
ectl_fmt_visible(const char *text, size_t len)
{
	const unsigned char *s = (const unsigned char *)text;
	char *out = xmalloc(len * 4 + 1);
	char *o = out;

	for (size_t i = 0; i < len;) {
		size_t n = s[i] >= 0xc2 ? utf8_len(s + i, len - i) : 0;
		bool c1 = n == 2 && s[i] == 0xc2 && s[i + 1] <= 0x9f; /* U+0080-U+009F */

		if (n > 0 && !c1) {
			memcpy(o, s + i, n);
			o += n;
			i += n;
			continue;
		}
		for (size_t k = 0; k < (c1 ? 2u : 1u); k++, i++) {
			if (c1 || is_control(s[i])) {
				o += sprintf(o, "\\x%02x", s[i]);
			} else {
				*o++ = (char)s[i];
			}
		}
	}
	*o = '\0';
	return out;
}

/* s on f, through ectl_fmt_visible() when visible. */
static void
put_text(FILE *f, const char *s, bool visible)
{
	_cleanup_free_ char *v = visible ? ectl_fmt_visible(s, strlen(s)) : NULL;

	fputs(v ? v : s, f);
}

/* ---- events ----------------------------------------------------------------- */

/* Metadata every event of a run repeats: left out of the line. */
static const char *const boring_keys[] = {
	"run_id",  "hostname",   "role",     "rdzv_backend",   "version",
	"run_dir", "entrypoint", "metadata", "total_run_time", "worker_id",
};

static bool
boring(const char *key)
{
	for (size_t i = 0; i < ARRAY_SIZE(boring_keys); i++) {
		if (strcmp(key, boring_keys[i]) == 0) {
			return true;
		}
	}
	return false;
}

/* Append " key=value" for every scalar, non-null, non-boring key of md. */
static char *
key_metadata(char *line, json_t *md)
{
	const char *k;
	json_t *v;

	json_object_foreach(md, k, v)
	{
		_cleanup_free_ char *s = boring(k) ? NULL : scalar(md, k);
		char *o;

		if (!s) {
			continue;
		}
		o = xasprintf(strpbrk(s, " \t\n") ? "%s %s='%s'" : "%s %s=%s", line, k, s);
		free(line);
		line = o;
	}
	return line;
}

static char *
format_time(json_t *ts)
{
	long long ms = json_integer_value(ts);
	time_t t = (time_t)(ms / 1000);
	struct tm tm;
	char buf[32];

	if (!json_is_integer(ts) || !localtime_r(&t, &tm)) {
		return xstrdup("-");
	}
	strftime(buf, sizeof(buf), "%Y-%m-%d %H:%M:%S", &tm);
	return xasprintf("%s.%03lld", buf, ms % 1000);
}

/* An RdzvEvent: torch's schema gives it no time of its own. */
static char *
format_rdzv(long long seq, json_t *e, const char *name)
{
	_cleanup_free_ char *state = scalar(e, "node_state");
	_cleanup_free_ char *rank = scalar(e, "rank");
	const char *msg = json_string_value(json_object_get(e, "message"));
	const char *trace = json_string_value(json_object_get(e, "error_trace"));

	return xasprintf("#%lld %-23s %-6s %s %s%s%s: %s%s%s", seq, "-", "RDZV", name ? name : "?",
			 state ? state : "-", rank ? " rank " : "", rank ? rank : "",
			 msg ? msg : "", trace && *trace ? " error: " : "",
			 trace && *trace ? trace : "");
}

static char *
format_event(long long seq, json_t *e)
{
	const char *name = json_string_value(json_object_get(e, "name"));
	const char *source = json_string_value(json_object_get(e, "source"));
	_cleanup_free_ char *when = NULL;
	char *line;

	if (source) { /* torch's Event */
		when = format_time(json_object_get(e, "timestamp"));
		line = xasprintf("#%lld %s %-6s %s", seq, when, source, name ? name : "?");
		return key_metadata(line, json_object_get(e, "metadata"));
	}
	return format_rdzv(seq, e, name);
}

char *
ectl_fmt_event(const char *line, bool visible)
{
	json_t *j = json_loads(line, JSON_DECODE_ANY, NULL);
	json_t *e = json_object_get(j, "event");
	json_t *dropped = json_object_get(j, "dropped");
	char *out;

	if (json_is_integer(dropped)) {
		out = xasprintf("... %lld earlier events are no longer held by the agent\n",
				(long long)json_integer_value(dropped));
	} else if (json_is_object(e)) {
		char *l = format_event(json_integer_value(json_object_get(j, "seq")), e);

		out = xasprintf("%s\n", l);
		free(l);
	} else {
		size_t n = strlen(line);

		out = xasprintf("%s%s", line, n > 0 && line[n - 1] == '\n' ? "" : "\n");
	}
	json_decref(j);
	if (visible) {
		char *v = ectl_fmt_visible(out, strlen(out));

		free(out);
		out = v;
	}
	return out;
}

/* ---- dump ------------------------------------------------------------------- */

static int
cmp_rank_keys(const void *a, const void *b)
{
	long long x = strtoll(*(char *const *)a, NULL, 10);
	long long y = strtoll(*(char *const *)b, NULL, 10);

	return x < y ? -1 : x > y;
}

int
ectl_fmt_dump(FILE *f, json_t *reply, bool visible)
{
	const char **keys;
	size_t n = json_object_size(reply);
	size_t i = 0;
	const char *k;
	json_t *v;

	if (!json_is_object(reply)) {
		return -EINVAL;
	}
	keys = xcalloc(n + 1, sizeof(*keys));
	json_object_foreach(reply, k, v)
	{
		keys[i++] = k;
	}
	qsort(keys, n, sizeof(*keys), cmp_rank_keys);
	for (i = 0; i < n; i++) {
		json_t *r = json_object_get(reply, keys[i]);
		_cleanup_free_ char *pid = scalar(r, "pid");
		const char *tb = json_string_value(json_object_get(r, "traceback"));
		const char *err = json_string_value(json_object_get(r, "error"));
		size_t len = tb ? strlen(tb) : 0;
		_cleanup_free_ char *text =
			tb ? xasprintf("==== local rank %s (pid %s) ====\n%s%s", keys[i],
				       pid ? pid : "-", tb,
				       len > 0 && tb[len - 1] == '\n' ? "" : "\n")
			   : xasprintf("==== local rank %s (pid %s) ====\nno traceback: %s\n",
				       keys[i], pid ? pid : "-", err ? err : "no reason given");

		fputs(i ? "\n" : "", f);
		put_text(f, text, visible);
	}
	free(keys);
	return 0;
}

/* ---- logs -f ---------------------------------------------------------------- */

size_t
ectl_fmt_complete(const char *text)
{
	const char *nl = strrchr(text, '\n');

	return nl ? (size_t)(nl - text) + 1 : 0;
}

/* The offsets of the starts of text's complete lines, and their count. */
static size_t *
line_starts(const char *text, size_t len, size_t *ret_n)
{
	size_t *starts = xcalloc(len + 2, sizeof(*starts));
	size_t n = 0;

	for (size_t i = 0; i < len; i++) {
		if (i == 0 || text[i - 1] == '\n') {
			starts[n++] = i;
		}
	}
	starts[n] = len;
	*ret_n = n;
	return starts;
}

size_t
ectl_fmt_new_lines(const char *prev, const char *cur)
{
	size_t plen = ectl_fmt_complete(prev);
	size_t clen = ectl_fmt_complete(cur);
	size_t np, nc;
	_cleanup_free_ size_t *ps = line_starts(prev, plen, &np);
	_cleanup_free_ size_t *cs = line_starts(cur, clen, &nc);

	if (np == 0) {
		return 0;
	}
	/* The longest k: cur's first k lines are prev's last k lines. */
	for (size_t k = nc < np ? nc : np; k > 0; k--) {
		size_t bytes = cs[k];

		if (plen - ps[np - k] == bytes && memcmp(prev + ps[np - k], cur, bytes) == 0) {
			return bytes;
		}
	}
	return 0;
}
