/* errfile.c — torch's @record error files, the root cause and torchrun's
 * ChildFailedError table, reproduced byte for byte from
 * torch/distributed/elastic/multiprocessing/errors/{__init__,error_handler}.py. */
#include "errfile.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <math.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "util.h"

#define NOT_AVAILABLE "<N/A>"
#define NO_TRACEBACK_MSG                                                                           \
	"To enable traceback see: https://pytorch.org/docs/stable/elastic/errors.html"
#define TABLE_MAX_WIDTH 60

/* A growing NUL-terminated string; aborts on out-of-memory like xmalloc. */
struct strbuf {
	char *s;
	size_t len;
	size_t cap;
};

static void
sb_reserve(struct strbuf *sb, size_t n)
{
	size_t need = sb->len + n + 1;

	if (need <= sb->cap) {
		return;
	}
	if (sb->cap < 64) {
		sb->cap = 64;
	}
	while (sb->cap < need) {
		sb->cap *= 2;
	}
	sb->s = xrealloc(sb->s, sb->cap);
}

static void
sb_addn(struct strbuf *sb, const char *p, size_t n)
{
	sb_reserve(sb, n);
	memcpy(sb->s + sb->len, p, n);
	sb->len += n;
	sb->s[sb->len] = '\0';
}

static void
sb_adds(struct strbuf *sb, const char *s)
{
	sb_addn(sb, s, strlen(s));
}

static void
sb_addch(struct strbuf *sb, char c)
{
	sb_addn(sb, &c, 1);
}

static void
sb_repeat(struct strbuf *sb, char c, size_t n)
{
	sb_reserve(sb, n);
	memset(sb->s + sb->len, c, n);
	sb->len += n;
	sb->s[sb->len] = '\0';
}

static void __attribute__((format(printf, 2, 3))) sb_addf(struct strbuf *sb, const char *fmt, ...)
{
	char small[128];
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(small, sizeof(small), fmt, ap);
	va_end(ap);
	if (n < 0) {
		return;
	}
	if ((size_t)n < sizeof(small)) {
		sb_addn(sb, small, (size_t)n);
		return;
	}
	sb_reserve(sb, (size_t)n);
	va_start(ap, fmt);
	vsnprintf(sb->s + sb->len, (size_t)n + 1, fmt, ap);
	va_end(ap);
	sb->len += (size_t)n;
}

/* Hand over the string (never NULL). */
static char *
sb_steal(struct strbuf *sb)
{
	char *s;

	if (!sb->s) {
		return xstrdup("");
	}
	s = sb->s;
	sb->s = NULL;
	sb->len = sb->cap = 0;
	return s;
}

/* Decode one UTF-8 sequence of s[0..len) (len > 0). Returns its length and the
 * code point in *cp, or 0 when s does not start with a valid, shortest-form,
 * non-surrogate sequence. */
static size_t
utf8_decode(const unsigned char *s, size_t len, uint32_t *cp)
{
	uint32_t c = s[0];
	size_t n;
	uint32_t min;

	if (c < 0x80) {
		*cp = c;
		return 1;
	} else if (c >= 0xc2 && c <= 0xdf) {
		n = 2;
		c &= 0x1f;
		min = 0x80;
	} else if (c >= 0xe0 && c <= 0xef) {
		n = 3;
		c &= 0x0f;
		min = 0x800;
	} else if (c >= 0xf0 && c <= 0xf4) {
		n = 4;
		c &= 0x07;
		min = 0x10000;
	} else {
		return 0;
	}
	if (len < n) {
		return 0;
	}
	for (size_t i = 1; i < n; i++) {
		if ((s[i] & 0xc0) != 0x80) {
			return 0;
		}
		c = (c << 6) | (s[i] & 0x3f);
	}
	if (c < min || c > 0x10ffff || (c >= 0xd800 && c <= 0xdfff)) {
		return 0;
	}
	*cp = c;
	return n;
}

/* Python's len() of s[0..len) decoded as UTF-8 with surrogateescape: one per
 * code point, one per byte of an invalid sequence. */
static size_t
py_strlen(const char *s, size_t len)
{
	const unsigned char *p = (const unsigned char *)s;
	size_t count = 0;

	while (len > 0) {
		uint32_t cp;
		size_t n = utf8_decode(p, len, &cp);

		if (n == 0) {
			n = 1;
		}
		p += n;
		len -= n;
		count++;
	}
	return count;
}

/* The longest line (split on "\n" only) of s, in Python characters. */
static size_t
longest_line(const char *s)
{
	size_t width = 0;

	for (;;) {
		const char *nl = strchr(s, '\n');
		size_t n = nl ? (size_t)(nl - s) : strlen(s);
		size_t w = py_strlen(s, n);

		if (w > width) {
			width = w;
		}
		if (!nl) {
			return width;
		}
		s = nl + 1;
	}
}

/* Python's json.dumps() with its defaults (ensure_ascii, separators ", " and
 * ": ", allow_nan) — what torchrun writes. */

static void
pyjson_hex4(struct strbuf *sb, uint32_t u)
{
	sb_addf(sb, "\\u%04x", (unsigned)u);
}

static void
pyjson_string(struct strbuf *sb, const char *s, size_t len)
{
	const unsigned char *p = (const unsigned char *)s;

	sb_addch(sb, '"');
	while (len > 0) {
		uint32_t c;
		size_t n = utf8_decode(p, len, &c);

		if (n == 0) {
			/* Python strings cannot hold invalid UTF-8: substitute. */
			c = 0xfffd;
			n = 1;
		}
		p += n;
		len -= n;
		if (c >= ' ' && c <= '~' && c != '\\' && c != '"') {
			sb_addch(sb, (char)c);
			continue;
		}
		switch (c) {
		case '\\':
			sb_adds(sb, "\\\\");
			break;
		case '"':
			sb_adds(sb, "\\\"");
			break;
		case '\b':
			sb_adds(sb, "\\b");
			break;
		case '\f':
			sb_adds(sb, "\\f");
			break;
		case '\n':
			sb_adds(sb, "\\n");
			break;
		case '\r':
			sb_adds(sb, "\\r");
			break;
		case '\t':
			sb_adds(sb, "\\t");
			break;
		default:
			if (c >= 0x10000) {
				c -= 0x10000;
				pyjson_hex4(sb, 0xd800 | (c >> 10));
				pyjson_hex4(sb, 0xdc00 | (c & 0x3ff));
			} else {
				pyjson_hex4(sb, c);
			}
			break;
		}
	}
	sb_addch(sb, '"');
}

/* Does the decimal string "<m>e<e10>" read back as exactly x? */
static bool
roundtrips(unsigned long long m, int e10, double x)
{
	char buf[64];

	snprintf(buf, sizeof(buf), "%llue%d", m, e10);
	return strtod(buf, NULL) == x;
}

/* The shortest decimal digits that read back as x (finite, > 0), the closest
 * to x among those, as David Gay's dtoa mode 0 (Python's repr): the value is
 * 0.<digits> * 10^*ret_decpt. */
static void
shortest_digits(double x, char digits[static 24], int *ret_decpt)
{
	unsigned long long m = 0;
	int e10 = 0;

	for (int p = 1; p <= 17; p++) {
		char buf[64];
		char *e;
		int exp10;

		snprintf(buf, sizeof(buf), "%.*e", p - 1, x);
		e = strchr(buf, 'e');
		if (!e) {
			continue;
		}
		exp10 = atoi(e + 1);
		m = 0;
		for (const char *q = buf; q < e; q++) {
			if (*q >= '0' && *q <= '9') {
				m = m * 10 + (unsigned long long)(*q - '0');
			}
		}
		e10 = exp10 - (p - 1);
		if (roundtrips(m, e10, x)) {
			break;
		}
		/* At a power of two the rounding interval is lopsided: the
		 * correctly rounded p digits may miss it while a neighbour hits. */
		if (m > 1 && roundtrips(m - 1, e10, x)) {
			m--;
			break;
		}
		if (roundtrips(m + 1, e10, x)) {
			m++;
			break;
		}
	}
	snprintf(digits, 24, "%llu", m);
	*ret_decpt = (int)strlen(digits) + e10;
	for (size_t n = strlen(digits); n > 1 && digits[n - 1] == '0'; n--) {
		digits[n - 1] = '\0';
	}
}

/* Python's float.__repr__ (float_repr_style "short"). */
static void
pyjson_real(struct strbuf *sb, double x)
{
	char digits[24];
	int decpt;
	int ndigits;

	if (isnan(x)) {
		sb_adds(sb, "NaN");
		return;
	}
	if (isinf(x)) {
		sb_adds(sb, x < 0 ? "-Infinity" : "Infinity");
		return;
	}
	if (x == 0) {
		sb_adds(sb, signbit(x) ? "-0.0" : "0.0");
		return;
	}
	if (x < 0) {
		sb_addch(sb, '-');
		x = -x;
	}
	shortest_digits(x, digits, &decpt);
	ndigits = (int)strlen(digits);
	if (decpt <= -4 || decpt > 16) {
		int exp = decpt - 1;

		sb_addch(sb, digits[0]);
		if (ndigits > 1) {
			sb_addch(sb, '.');
			sb_adds(sb, digits + 1);
		}
		sb_addf(sb, "e%c%02d", exp < 0 ? '-' : '+', exp < 0 ? -exp : exp);
	} else if (decpt <= 0) {
		sb_adds(sb, "0.");
		sb_repeat(sb, '0', (size_t)-decpt);
		sb_adds(sb, digits);
	} else if (decpt >= ndigits) {
		sb_adds(sb, digits);
		sb_repeat(sb, '0', (size_t)(decpt - ndigits));
		sb_adds(sb, ".0");
	} else {
		sb_addn(sb, digits, (size_t)decpt);
		sb_addch(sb, '.');
		sb_adds(sb, digits + decpt);
	}
}

static void
pyjson_dump(struct strbuf *sb, const json_t *v)
{
	switch (json_typeof(v)) {
	case JSON_OBJECT: {
		const char *key;
		json_t *val;
		bool first = true;

		sb_addch(sb, '{');
		json_object_foreach((json_t *)v, key, val)
		{
			if (!first) {
				sb_adds(sb, ", ");
			}
			first = false;
			pyjson_string(sb, key, strlen(key));
			sb_adds(sb, ": ");
			pyjson_dump(sb, val);
		}
		sb_addch(sb, '}');
		break;
	}
	case JSON_ARRAY:
		sb_addch(sb, '[');
		for (size_t i = 0; i < json_array_size(v); i++) {
			if (i > 0) {
				sb_adds(sb, ", ");
			}
			pyjson_dump(sb, json_array_get(v, i));
		}
		sb_addch(sb, ']');
		break;
	case JSON_STRING:
		pyjson_string(sb, json_string_value(v), json_string_length(v));
		break;
	case JSON_INTEGER:
		sb_addf(sb, "%" JSON_INTEGER_FORMAT, json_integer_value(v));
		break;
	case JSON_REAL:
		pyjson_real(sb, json_real_value(v));
		break;
	case JSON_TRUE:
		sb_adds(sb, "true");
		break;
	case JSON_FALSE:
		sb_adds(sb, "false");
		break;
	case JSON_NULL:
		sb_adds(sb, "null");
		break;
	}
}

char *
errfile_json_dumps(const json_t *v)
{
	struct strbuf sb = {0};

	if (!v) {
		return xstrdup("null");
	}
	pyjson_dump(&sb, v);
	return sb_steal(&sb);
}

/* The ASCII characters Python's int() ignores around the digits. */
static bool
is_py_space(char c)
{
	return c == ' ' || (c >= '\t' && c <= '\r');
}

/* "a string", "a number"... for error messages. */
static const char *
json_type_phrase(const json_t *v)
{
	switch (json_typeof(v)) {
	case JSON_OBJECT:
		return "an object";
	case JSON_ARRAY:
		return "an array";
	case JSON_STRING:
		return "a string";
	case JSON_INTEGER:
	case JSON_REAL:
		return "a number";
	case JSON_TRUE:
	case JSON_FALSE:
		return "a boolean";
	case JSON_NULL:
		return "null";
	}
	return "unknown";
}

/* Python's int(v) for a timestamp value; anything int() would refuse, or that
 * does not fit in 64 bits, is 0. */
static int64_t
timestamp_value(const json_t *v)
{
	if (json_is_integer(v)) {
		return json_integer_value(v);
	}
	if (json_is_real(v)) {
		double d = json_real_value(v);

		if (isfinite(d) && d > -9223372036854775808.0 && d < 9223372036854775808.0) {
			return (int64_t)d;
		}
		return 0;
	}
	if (json_is_true(v)) {
		return 1;
	}
	if (json_is_string(v)) {
		const char *s = json_string_value(v);
		size_t len = json_string_length(v);
		_cleanup_free_ char *t = NULL;
		long long n;

		while (len > 0 && is_py_space(*s)) {
			s++;
			len--;
		}
		while (len > 0 && is_py_space(s[len - 1])) {
			len--;
		}
		t = xstrndup(s, len);
		if (parse_int(t, INT64_MIN, INT64_MAX, &n) == 0) {
			return n;
		}
	}
	return 0;
}

int
errfile_parse(const char *buf, size_t len, json_t **ret_data, char **ret_message,
	      int64_t *ret_timestamp, char **reterr)
{
	json_error_t jerr;
	json_t *root;
	json_t *msg;
	const char *text;
	int64_t ts;

	root = json_loadb(buf ? buf : "", buf ? len : 0, JSON_REJECT_DUPLICATES, &jerr);
	if (!root) {
		if (reterr) {
			*reterr = xasprintf("not valid JSON: %s (line %d, column %d)", jerr.text,
					    jerr.line, jerr.column);
		}
		return -EINVAL;
	}
	if (!json_is_object(root)) {
		if (reterr) {
			*reterr = xstrdup("not a torch error file: the top level is an array, "
					  "not an object");
		}
		json_decref(root);
		return -EINVAL;
	}
	msg = json_object_get(root, "message");
	if (json_is_string(msg)) {
		/* Flat form. */
		text = json_string_value(msg);
		ts = timestamp_value(json_object_get(root, "timestamp"));
	} else if (json_is_object(msg)) {
		/* Nested form, as @record writes it. */
		json_t *extra = json_object_get(msg, "extraInfo");
		json_t *stack = json_object_get(extra, "py_callstack");
		json_t *inner = json_object_get(msg, "message");

		if (json_is_string(stack)) {
			text = json_string_value(stack);
		} else if (json_is_string(inner)) {
			text = json_string_value(inner);
		} else {
			text = NOT_AVAILABLE;
		}
		ts = timestamp_value(json_object_get(extra, "timestamp"));
	} else {
		if (reterr) {
			if (!msg) {
				*reterr = xstrdup("not a torch error file: no \"message\" key");
			} else {
				*reterr = xasprintf(
					"not a torch error file: \"message\" is %s, not a "
					"string or an object",
					json_type_phrase(msg));
			}
		}
		json_decref(root);
		return -EINVAL;
	}
	if (ret_message) {
		*ret_message = xstrdup(text);
	}
	if (ret_timestamp) {
		*ret_timestamp = ts;
	}
	if (ret_data) {
		*ret_data = root;
	} else {
		json_decref(root);
	}
	return 0;
}

/* torch's name for signal signo (signal.Signals(signo).name). */
static const char *
failure_signal_name(long long signo)
{
	const char *name;

	if (signo <= 0 || signo > 64) {
		return NOT_AVAILABLE;
	}
	name = signal_name((int)signo);
	if (name) {
		return name;
	}
	if (signo == SIGRTMIN) {
		return "SIGRTMIN";
	}
	if (signo == SIGRTMAX) {
		return "SIGRTMAX";
	}
	return NOT_AVAILABLE;
}

/* Why error_file_path could not be used, or NULL when it simply does not exist. */
static char *
read_error_file(const char *path, char **ret_buf, size_t *ret_len)
{
	struct stat st;
	int r;

	/* Checked before opening: open(2) on a FIFO would block. */
	if (stat(path, &st) < 0) {
		if (errno == ENOENT || errno == ENOTDIR) {
			return NULL;
		}
		return xasprintf("error file %s cannot be read: %s", path, strerror(errno));
	}
	if (!S_ISREG(st.st_mode)) {
		return xasprintf("error file %s is not a regular file", path);
	}
	r = read_file(path, ERRFILE_MAX_BYTES, ret_buf, ret_len);
	if (r == 0) {
		return NULL;
	}
	switch (r) {
	case -ENOENT:
	case -ENOTDIR:
		/* Removed since the stat(2). */
		return NULL;
	case -EFBIG:
		if (stat(path, &st) == 0 && (uintmax_t)st.st_size > ERRFILE_MAX_BYTES) {
			return xasprintf("error file %s is too big (%jd bytes, limit %u)", path,
					 (intmax_t)st.st_size, ERRFILE_MAX_BYTES);
		}
		return xasprintf("error file %s is too big (more than %u bytes)", path,
				 ERRFILE_MAX_BYTES);
	case -EINVAL:
		return xasprintf("error file %s is not a regular file", path);
	default:
		return xasprintf("error file %s cannot be read: %s", path, strerror(-r));
	}
}

void
process_failure_init(struct process_failure *f, int local_rank, int global_rank, pid_t pid,
		     int exitcode, const char *error_file_path, int64_t now)
{
	_cleanup_free_ char *buf = NULL;
	size_t len = 0;

	memset(f, 0, sizeof(*f));
	f->local_rank = local_rank;
	f->global_rank = global_rank;
	f->pid = pid;
	f->exitcode = exitcode;
	f->timestamp = now;

	if (error_file_path && *error_file_path) {
		f->problem = read_error_file(error_file_path, &buf, &len);
	}
	if (buf) {
		_cleanup_free_ char *err = NULL;

		if (errfile_parse(buf, len, &f->data, &f->message, &f->timestamp, &err) == 0) {
			f->error_file = xstrdup(error_file_path);
		} else {
			f->problem = xasprintf("error file %s is %s", error_file_path, err);
			f->timestamp = now;
		}
	}
	if (f->problem) {
		/* The file is there but unusable: the table names it and says why,
		 * in place of torch's hint on how to get a traceback. */
		f->error_file = xstrdup(error_file_path);
		f->message = xstrdup(f->problem);
	}
	/* torch: "if not self.message" — an empty flat message is made up too. */
	if (f->message && *f->message == '\0' &&
	    json_is_string(json_object_get(f->data, "message"))) {
		free(f->message);
		f->message = NULL;
	}
	if (!f->message) {
		if (exitcode < 0) {
			long long signo = -(long long)exitcode;

			f->message = xasprintf("Signal %lld (%s) received by PID %ld", signo,
					       failure_signal_name(signo), (long)pid);
		} else {
			f->message = xstrdup(NO_TRACEBACK_MSG);
		}
	}
}

void
process_failure_release(struct process_failure *f)
{
	if (!f) {
		return;
	}
	free(f->error_file);
	free(f->message);
	json_decref(f->data);
	free(f->problem);
	f->error_file = NULL;
	f->message = NULL;
	f->data = NULL;
	f->problem = NULL;
}

size_t
errfile_root_cause(const struct process_failure *f, size_t n)
{
	size_t root = 0;

	for (size_t i = 1; i < n; i++) {
		if (f[i].timestamp < f[root].timestamp) {
			root = i;
		}
	}
	return root;
}

/* datetime.fromtimestamp(ts).isoformat(sep="_"); outside Python's years
 * 1..9999 (where torch would raise) the raw epoch seconds. */
static void
format_time(struct strbuf *sb, int64_t ts)
{
	time_t t = (time_t)ts;
	struct tm tm;

	if ((int64_t)t != ts || !localtime_r(&t, &tm) || tm.tm_year < 1 - 1900 ||
	    tm.tm_year > 9999 - 1900) {
		sb_addf(sb, "%" PRId64, ts);
		return;
	}
	sb_addf(sb, "%04d-%02d-%02d_%02d:%02d:%02d", tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday,
		tm.tm_hour, tm.tm_min, tm.tm_sec);
}

/* torch indents the traceback (every "\n" becomes "\n  ") only when the error
 * file had the nested form; a flat-form message is shown as it is. */
static bool
failure_indents(const struct process_failure *f)
{
	return !json_is_string(json_object_get(f->data, "message"));
}

/* _FAILURE_FORMAT_TEMPLATE; returns the block's width. */
static size_t
format_failure(struct strbuf *sb, size_t idx, const struct process_failure *f, const char *host)
{
	size_t start = sb->len;
	const char *msg = f->message ? f->message : NOT_AVAILABLE;

	sb_addf(sb, "[%zu]:\n", idx);
	sb_adds(sb, "  time      : ");
	format_time(sb, f->timestamp);
	sb_addf(sb, "\n  host      : %s\n", host);
	sb_addf(sb, "  rank      : %d (local_rank: %d)\n", f->global_rank, f->local_rank);
	sb_addf(sb, "  exitcode  : %d (pid: %ld)\n", f->exitcode, (long)f->pid);
	sb_addf(sb, "  error_file: %s\n", f->error_file ? f->error_file : NOT_AVAILABLE);
	sb_adds(sb, "  traceback : ");
	if (failure_indents(f)) {
		for (const char *p = msg; *p; p++) {
			sb_addch(sb, *p);
			if (*p == '\n') {
				sb_adds(sb, "  ");
			}
		}
	} else {
		sb_adds(sb, msg);
	}
	return longest_line(sb->s + start);
}

char *
errfile_format_table(const char *title, const struct process_failure *f, size_t n, size_t root,
		     const char *host)
{
	struct strbuf others = {0};
	struct strbuf root_block = {0};
	struct strbuf out = {0};
	size_t width;

	if (!title) {
		title = "";
	}
	if (!host) {
		host = NOT_AVAILABLE;
	}
	if (n > 0 && root >= n) {
		root = errfile_root_cause(f, n);
	}
	width = py_strlen(title, strlen(title));
	for (size_t i = 0; i < n; i++) {
		size_t w;

		if (i == root) {
			w = format_failure(&root_block, i, &f[i], host);
		} else {
			if (others.len > 0) {
				sb_addch(&others, '\n');
			}
			w = format_failure(&others, i, &f[i], host);
		}
		if (w > width) {
			width = w;
		}
	}
	if (width > TABLE_MAX_WIDTH) {
		width = TABLE_MAX_WIDTH;
	}

	sb_addch(&out, '\n');
	sb_repeat(&out, '=', width);
	sb_addch(&out, '\n');
	sb_adds(&out, title);
	sb_addch(&out, '\n');
	sb_repeat(&out, '-', width);
	sb_adds(&out, "\nFailures:\n");
	sb_adds(&out, others.len > 0 ? others.s : "  <NO_OTHER_FAILURES>");
	sb_addch(&out, '\n');
	sb_repeat(&out, '-', width);
	sb_adds(&out, "\nRoot Cause (first observed failure):\n");
	sb_adds(&out, root_block.s ? root_block.s : "");
	sb_addch(&out, '\n');
	sb_repeat(&out, '=', width);
	free(others.s);
	free(root_block.s);
	return sb_steal(&out);
}

/* Write buf to a new file next to dest_path, then rename it over dest_path. */
static int
replace_file(const char *dest_path, const char *buf, size_t len)
{
	static unsigned counter;
	_cleanup_free_ char *tmp = NULL;
	int fd = -1;
	int r;

	for (int attempt = 0; attempt < 100; attempt++) {
		free(tmp);
		tmp = xasprintf("%s.%ld.%u.tmp", dest_path, (long)getpid(), counter++);
		/* 0666 and the umask, as Python's open(path, "w"). */
		fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOCTTY, 0666);
		if (fd >= 0 || errno != EEXIST) {
			break;
		}
	}
	if (fd < 0) {
		return -errno;
	}
	r = write_all(fd, buf, len);
	if (close(fd) < 0 && r == 0) {
		r = -errno;
	}
	if (r == 0 && rename(tmp, dest_path) < 0) {
		r = -errno;
	}
	if (r < 0) {
		unlink(tmp);
	}
	return r;
}

int
errfile_write_root_cause(const char *dest_path, const struct process_failure *root)
{
	json_t *data;
	json_t *msg;
	_cleanup_free_ char *text = NULL;

	if (!root || !root->data) {
		return -ENOENT;
	}
	data = json_deep_copy(root->data);
	if (!data) {
		return -ENOMEM;
	}
	msg = json_object_get(data, "message");
	if (root->exitcode != 0 && json_is_object(msg)) {
		/* Python's dict assignment: an existing key keeps its place. */
		json_object_set_new(msg, "errorCode", json_integer(root->exitcode));
	}
	text = errfile_json_dumps(data);
	json_decref(data);
	return replace_file(dest_path, text, strlen(text));
}

int
errfile_write_record(const char *dest_path, const char *message, const char *py_callstack,
		     int64_t timestamp, int error_code)
{
	json_t *data = json_object();
	json_t *msg = json_object();
	json_t *extra = json_object();
	_cleanup_free_ char *ts = xasprintf("%" PRId64, timestamp);
	_cleanup_free_ char *text = NULL;

	if (!message) {
		message = "";
	}
	if (!py_callstack) {
		py_callstack = "";
	}
	/* Unchecked: a worker's bytes need not be UTF-8; the encoder substitutes. */
	json_object_set_new(msg, "message", json_stringn_nocheck(message, strlen(message)));
	json_object_set_new(extra, "py_callstack",
			    json_stringn_nocheck(py_callstack, strlen(py_callstack)));
	json_object_set_new(extra, "timestamp", json_string(ts));
	json_object_set_new(msg, "extraInfo", extra);
	if (error_code != 0) {
		json_object_set_new(msg, "errorCode", json_integer(error_code));
	}
	json_object_set_new(data, "message", msg);
	text = errfile_json_dumps(data);
	json_decref(data);
	return replace_file(dest_path, text, strlen(text));
}
