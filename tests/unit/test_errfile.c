/* test_errfile.c — error-file parsing, ProcessFailure, root cause, the
 * ChildFailedError table and the root-cause copy. Golden strings were produced
 * by torch 1.13's own ChildFailedError / json.dumps (TZ=UTC, socket.getfqdn()
 * patched to "node1.example.com"). */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "errfile.h"
#include "util.h"

#define HOST "node1.example.com"
#define NO_TB "To enable traceback see: https://pytorch.org/docs/stable/elastic/errors.html"
#define TB                                                                                         \
	"Traceback (most recent call last):\n  File \"/w/train.py\", line 9, in <module>\n"        \
	"    main()\n  File \"/w/train.py\", line 5, in main\n    raise ValueError(\"boom\")\n"    \
	"ValueError: boom\n"
#define TB_JSON                                                                                    \
	"Traceback (most recent call last):\\n  File \\\"/w/train.py\\\", line 9, in <module>\\n"  \
	"    main()\\n  File \\\"/w/train.py\\\", line 5, in main\\n    raise "                    \
	"ValueError(\\\"boom\\\")\\nValueError: boom\\n"
/* Exactly what torch's @record writes (json.dump, no newline). */
#define RECORD_JSON(ts)                                                                            \
	"{\"message\": {\"message\": \"ValueError: boom\", \"extraInfo\": {\"py_callstack\": "     \
	"\"" TB_JSON "\", \"timestamp\": \"" ts "\"}}}"

static char *tmpdir;

static int
group_setup(void **state)
{
	char tmpl[] = "/tmp/test_errfile.XXXXXX";

	(void)state;
	if (!mkdtemp(tmpl)) {
		return -1;
	}
	tmpdir = xstrdup(tmpl);
	return 0;
}

static void
rm_rf(const char *path)
{
	DIR *d = opendir(path);
	struct dirent *de;

	if (!d) {
		unlink(path);
		return;
	}
	while ((de = readdir(d))) {
		char *p;

		if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0) {
			continue;
		}
		p = xasprintf("%s/%s", path, de->d_name);
		rm_rf(p);
		free(p);
	}
	closedir(d);
	rmdir(path);
}

static int
group_teardown(void **state)
{
	(void)state;
	rm_rf(tmpdir);
	free(tmpdir);
	return 0;
}

static char *
tmp_path(const char *name)
{
	return xasprintf("%s/%s", tmpdir, name);
}

static void
write_text(const char *path, const char *text, size_t len)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);

	assert_true(fd >= 0);
	assert_int_equal(write_all(fd, text, len), 0);
	assert_int_equal(close(fd), 0);
}

static char *
slurp(const char *path)
{
	char *buf = NULL;
	size_t len;

	assert_int_equal(read_file(path, 1 << 20, &buf, &len), 0);
	assert_int_equal(strlen(buf), len);
	return buf;
}

/* --- errfile_parse ----------------------------------------------------- */

/* Generated inputs for cases too large to spell out. */
static char *
gen_deep_array(size_t *len)
{
	size_t n = 5000;
	char *s = xmalloc(2 * n + 1);

	memset(s, '[', n);
	memset(s + n, ']', n);
	*len = 2 * n;
	return s;
}

/* Depth 1000 (below jansson's 2048) inside an otherwise valid nested file. */
static char *
gen_deep_valid(size_t *len)
{
	const char *head = "{\"message\": {\"message\": \"deep\", \"extraInfo\": {\"x\": ";
	const char *tail = ", \"timestamp\": \"5\"}}}";
	size_t n = 1000;
	char *s = xmalloc(strlen(head) + 2 * n + strlen(tail) + 1);
	char *p = s;

	p = stpcpy(p, head);
	memset(p, '[', n);
	p += n;
	memset(p, ']', n);
	p += n;
	p = stpcpy(p, tail);
	*len = (size_t)(p - s);
	return s;
}

#define HUGE_LEN (3u * 1024 * 1024)

static char *
gen_huge_string(size_t *len)
{
	const char *head =
		"{\"message\": {\"message\": \"m\", \"extraInfo\": {\"py_callstack\": \"";
	const char *tail = "\", \"timestamp\": \"9\"}}}";
	char *s = xmalloc(strlen(head) + HUGE_LEN + strlen(tail) + 1);
	char *p = s;

	p = stpcpy(p, head);
	memset(p, 'a', HUGE_LEN);
	p += HUGE_LEN;
	p = stpcpy(p, tail);
	*len = (size_t)(p - s);
	return s;
}

struct parse_case {
	const char *name;
	const char *input; /* NULL: gen */
	size_t len;        /* 0: strlen(input) */
	char *(*gen)(size_t *len);
	int rc;
	const char *message; /* on success; NULL: not checked (huge) */
	int64_t timestamp;   /* on success */
	const char *err;     /* on failure: expected reterr ... */
	bool err_prefix;     /* ... exactly, or as a prefix */
};

static const struct parse_case parse_cases[] = {
	{.name = "nested as @record writes it",
	 .input = RECORD_JSON("1795947362"),
	 .message = TB,
	 .timestamp = 1795947362},
	{.name = "flat",
	 .input = "{\"message\": \"flat text\", \"timestamp\": 17}",
	 .message = "flat text",
	 .timestamp = 17},
	{.name = "flat without timestamp", .input = "{\"message\": \"no ts\"}", .message = "no ts"},
	{.name = "flat with string timestamp",
	 .input = "{\"message\": \"s\", \"timestamp\": \"42\"}",
	 .message = "s",
	 .timestamp = 42},
	{.name = "flat with null timestamp",
	 .input = "{\"message\": \"s\", \"timestamp\": null}",
	 .message = "s"},
	{.name = "flat empty message", .input = "{\"message\": \"\"}", .message = ""},
	{.name = "nested without py_callstack",
	 .input = "{\"message\": {\"message\": \"inner\", \"extraInfo\": {\"timestamp\": \"3\"}}}",
	 .message = "inner",
	 .timestamp = 3},
	{.name = "nested without py_callstack or message",
	 .input = "{\"message\": {\"extraInfo\": {}}}",
	 .message = "<N/A>"},
	{.name = "nested without extraInfo",
	 .input = "{\"message\": {\"message\": \"only\"}}",
	 .message = "only"},
	{.name = "nested with extraInfo not an object",
	 .input = "{\"message\": {\"message\": \"m\", \"extraInfo\": 5}}",
	 .message = "m"},
	{.name = "nested with non-string py_callstack",
	 .input = "{\"message\": {\"message\": \"m\", \"extraInfo\": {\"py_callstack\": 1}}}",
	 .message = "m"},
	{.name = "nested with integer timestamp",
	 .input = "{\"message\": {\"message\": \"m\", \"extraInfo\": {\"timestamp\": 1700000000}}}",
	 .message = "m",
	 .timestamp = 1700000000},
	{.name = "nested with real timestamp",
	 .input = "{\"message\": {\"message\": \"m\", \"extraInfo\": {\"timestamp\": 12.9}}}",
	 .message = "m",
	 .timestamp = 12},
	{.name = "nested with boolean timestamp",
	 .input = "{\"message\": {\"message\": \"m\", \"extraInfo\": {\"timestamp\": true}}}",
	 .message = "m",
	 .timestamp = 1},
	{.name = "nested with padded timestamp string",
	 .input =
		 "{\"message\": {\"message\": \"m\", \"extraInfo\": {\"timestamp\": \" -77\\n\"}}}",
	 .message = "m",
	 .timestamp = -77},
	{.name = "nested with non-integer timestamp string",
	 .input = "{\"message\": {\"message\": \"m\", \"extraInfo\": {\"timestamp\": \"12.5\"}}}",
	 .message = "m"},
	{.name = "nested with word timestamp",
	 .input = "{\"message\": {\"message\": \"m\", \"extraInfo\": {\"timestamp\": \"soon\"}}}",
	 .message = "m"},
	{.name = "nested with out-of-range timestamp",
	 .input = "{\"message\": {\"message\": \"m\", \"extraInfo\": {\"timestamp\": "
		  "\"99999999999999999999\"}}}",
	 .message = "m"},
	{.name = "nested with array timestamp",
	 .input = "{\"message\": {\"message\": \"m\", \"extraInfo\": {\"timestamp\": [1]}}}",
	 .message = "m"},
	{.name = "extra keys ignored",
	 .input = "{\"a\": 1, \"message\": \"x\", \"timestamp\": 2, \"z\": [null]}",
	 .message = "x",
	 .timestamp = 2},
	{.name = "unicode message",
	 .input = "{\"message\": \"caf\\u00e9 \xe4\xb8\xad\"}",
	 .message = "caf\xc3\xa9 \xe4\xb8\xad"},
	{.name = "deep but valid", .gen = gen_deep_valid, .message = "deep", .timestamp = 5},
	{.name = "huge string", .gen = gen_huge_string, .timestamp = 9},
	{.name = "not JSON",
	 .input = "x",
	 .rc = -EINVAL,
	 .err = "not valid JSON: '[' or '{' expected near 'x' (line 1, column 1)"},
	{.name = "empty",
	 .input = "",
	 .rc = -EINVAL,
	 .err = "not valid JSON: '[' or '{' expected near end of file",
	 .err_prefix = true},
	{.name = "whitespace only",
	 .input = " \n",
	 .rc = -EINVAL,
	 .err = "not valid JSON: ",
	 .err_prefix = true},
	{.name = "top-level array",
	 .input = "[{\"message\": \"x\"}]",
	 .rc = -EINVAL,
	 .err = "not a torch error file: the top level is an array, not an object"},
	{.name = "top-level string",
	 .input = "\"message\"",
	 .rc = -EINVAL,
	 .err = "not valid JSON: ",
	 .err_prefix = true},
	{.name = "message missing",
	 .input = "{\"timestamp\": 1}",
	 .rc = -EINVAL,
	 .err = "not a torch error file: no \"message\" key"},
	{.name = "message a number",
	 .input = "{\"message\": 5}",
	 .rc = -EINVAL,
	 .err = "not a torch error file: \"message\" is a number, not a string or an object"},
	{.name = "message null",
	 .input = "{\"message\": null}",
	 .rc = -EINVAL,
	 .err = "not a torch error file: \"message\" is null, not a string or an object"},
	{.name = "message an array",
	 .input = "{\"message\": [\"x\"]}",
	 .rc = -EINVAL,
	 .err = "not a torch error file: \"message\" is an array, not a string or an object"},
	{.name = "truncated",
	 .input = "{\"message\": {\"message\": \"x\"",
	 .rc = -EINVAL,
	 .err = "not valid JSON: ",
	 .err_prefix = true},
	{.name = "trailing garbage",
	 .input = "{\"message\": \"x\"} y",
	 .rc = -EINVAL,
	 .err = "not valid JSON: end of file expected",
	 .err_prefix = true},
	{.name = "deep nesting",
	 .gen = gen_deep_array,
	 .rc = -EINVAL,
	 .err = "not valid JSON: maximum parsing depth reached",
	 .err_prefix = true},
	{.name = "raw NUL byte",
	 .input = "{\"message\": \"a\0b\"}",
	 .len = 19,
	 .rc = -EINVAL,
	 .err = "not valid JSON: ",
	 .err_prefix = true},
	{.name = "escaped NUL",
	 .input = "{\"message\": \"a\\u0000b\"}",
	 .rc = -EINVAL,
	 .err = "not valid JSON: \\u0000 is not allowed without JSON_ALLOW_NUL",
	 .err_prefix = true},
	{.name = "NUL before the text",
	 .input = "\0{\"message\": \"x\"}",
	 .len = 18,
	 .rc = -EINVAL,
	 .err = "not valid JSON: ",
	 .err_prefix = true},
	{.name = "duplicate keys",
	 .input = "{\"message\": \"a\", \"message\": \"b\"}",
	 .rc = -EINVAL,
	 .err = "not valid JSON: duplicate object key",
	 .err_prefix = true},
	{.name = "duplicate nested keys",
	 .input = "{\"message\": {\"extraInfo\": {\"timestamp\": \"1\", \"timestamp\": \"2\"}}}",
	 .rc = -EINVAL,
	 .err = "not valid JSON: duplicate object key",
	 .err_prefix = true},
	{.name = "invalid UTF-8",
	 .input = "{\"message\": \"\xff\xfe\"}",
	 .rc = -EINVAL,
	 .err = "not valid JSON: ",
	 .err_prefix = true},
	{.name = "NaN",
	 .input = "{\"message\": \"x\", \"timestamp\": NaN}",
	 .rc = -EINVAL,
	 .err = "not valid JSON: ",
	 .err_prefix = true},
};

static void
test_parse(void **state)
{
	(void)state;
	for (size_t i = 0; i < ARRAY_SIZE(parse_cases); i++) {
		const struct parse_case *c = &parse_cases[i];
		char *gen = NULL;
		const char *in = c->input;
		size_t len = c->len;
		json_t *data = NULL;
		char *message = NULL;
		char *err = NULL;
		int64_t ts = -12345;
		int r;

		print_message("parse: %s\n", c->name);
		if (c->gen) {
			in = gen = c->gen(&len);
		} else if (len == 0) {
			len = strlen(in);
		}
		r = errfile_parse(in, len, &data, &message, &ts, &err);
		assert_int_equal(r, c->rc);
		if (r == 0) {
			assert_non_null(data);
			assert_true(json_is_object(data));
			assert_non_null(message);
			if (c->message) {
				assert_string_equal(message, c->message);
			} else {
				assert_int_equal(strlen(message), HUGE_LEN);
			}
			assert_int_equal(ts, c->timestamp);
			assert_null(err);
		} else {
			assert_null(data);
			assert_null(message);
			assert_int_equal(ts, -12345);
			assert_non_null(err);
			if (c->err_prefix) {
				if (strncmp(err, c->err, strlen(c->err)) != 0) {
					fail_msg("'%s' does not start with '%s'", err, c->err);
				}
			} else {
				assert_string_equal(err, c->err);
			}
		}
		json_decref(data);
		free(message);
		free(err);
		free(gen);
	}
}

static void
test_parse_null_outputs(void **state)
{
	const char *in = "{\"message\": \"x\"}";

	(void)state;
	assert_int_equal(errfile_parse(in, strlen(in), NULL, NULL, NULL, NULL), 0);
	assert_int_equal(errfile_parse("[", 1, NULL, NULL, NULL, NULL), -EINVAL);
	assert_int_equal(errfile_parse(NULL, 0, NULL, NULL, NULL, NULL), -EINVAL);
}

/* --- process_failure_init ---------------------------------------------- */

#define NOW 1700000000

enum file_kind {
	FILE_NONE,     /* no file at the path */
	FILE_TEXT,     /* a file with content */
	FILE_SPARSE,   /* a file of size bytes (zeros) */
	FILE_FILLED,   /* a valid flat file of exactly size bytes */
	FILE_DIR,      /* a directory at the path */
	FILE_NOPATH,   /* error_file_path NULL */
	FILE_EMPTYPATH /* error_file_path "" */
};

struct init_case {
	const char *name;
	const char *file; /* name inside tmpdir */
	enum file_kind kind;
	const char *content;
	size_t size;
	int exitcode;
	pid_t pid;
	/* expected */
	bool has_error_file;
	const char *message; /* NULL: not checked */
	int64_t timestamp;
	const char *problem; /* after "error file <path> "; NULL: none */
};

static const struct init_case init_cases[] = {
	{.name = "nested file",
	 .file = "nested.json",
	 .kind = FILE_TEXT,
	 .content = RECORD_JSON("1795947362"),
	 .exitcode = 1,
	 .pid = 100,
	 .has_error_file = true,
	 .message = TB,
	 .timestamp = 1795947362},
	{.name = "flat file",
	 .file = "flat.json",
	 .kind = FILE_TEXT,
	 .content = "{\"message\": \"flat\", \"timestamp\": 5}",
	 .exitcode = -11,
	 .pid = 101,
	 .has_error_file = true,
	 .message = "flat",
	 .timestamp = 5},
	{.name = "flat file with empty message, signal",
	 .file = "flatempty.json",
	 .kind = FILE_TEXT,
	 .content = "{\"message\": \"\"}",
	 .exitcode = -9,
	 .pid = 102,
	 .has_error_file = true,
	 .message = "Signal 9 (SIGKILL) received by PID 102"},
	{.name = "flat file with empty message, exit",
	 .file = "flatempty2.json",
	 .kind = FILE_TEXT,
	 .content = "{\"message\": \"\", \"timestamp\": 8}",
	 .exitcode = 3,
	 .pid = 103,
	 .has_error_file = true,
	 .message = NO_TB,
	 .timestamp = 8},
	{.name = "missing file, SIGKILL",
	 .file = "missing.json",
	 .kind = FILE_NONE,
	 .exitcode = -9,
	 .pid = 123,
	 .message = "Signal 9 (SIGKILL) received by PID 123",
	 .timestamp = NOW},
	{.name = "missing file, SIGSEGV",
	 .file = "missing.json",
	 .kind = FILE_NONE,
	 .exitcode = -11,
	 .pid = 7,
	 .message = "Signal 11 (SIGSEGV) received by PID 7",
	 .timestamp = NOW},
	{.name = "missing file, SIGRTMIN",
	 .file = "missing.json",
	 .kind = FILE_NONE,
	 .exitcode = -34,
	 .pid = 8,
	 .message = "Signal 34 (SIGRTMIN) received by PID 8",
	 .timestamp = NOW},
	{.name = "missing file, unnamed signal",
	 .file = "missing.json",
	 .kind = FILE_NONE,
	 .exitcode = -40,
	 .pid = 9,
	 .message = "Signal 40 (<N/A>) received by PID 9",
	 .timestamp = NOW},
	{.name = "missing file, exit code",
	 .file = "missing.json",
	 .kind = FILE_NONE,
	 .exitcode = 1,
	 .pid = 10,
	 .message = NO_TB,
	 .timestamp = NOW},
	{.name = "missing directory",
	 .file = "nodir/error.json",
	 .kind = FILE_NONE,
	 .exitcode = 2,
	 .pid = 11,
	 .message = NO_TB,
	 .timestamp = NOW},
	{.name = "path through a file",
	 .file = "flat.json/error.json",
	 .kind = FILE_NONE,
	 .exitcode = 2,
	 .pid = 11,
	 .message = NO_TB,
	 .timestamp = NOW},
	{.name = "NULL path",
	 .kind = FILE_NOPATH,
	 .exitcode = -15,
	 .pid = 12,
	 .message = "Signal 15 (SIGTERM) received by PID 12",
	 .timestamp = NOW},
	{.name = "empty path",
	 .kind = FILE_EMPTYPATH,
	 .exitcode = 1,
	 .pid = 13,
	 .message = NO_TB,
	 .timestamp = NOW},
	{.name = "malformed file",
	 .file = "bad.json",
	 .kind = FILE_TEXT,
	 .content = "x",
	 .exitcode = 1,
	 .pid = 14,
	 .message = NO_TB,
	 .timestamp = NOW,
	 .problem = "is not valid JSON: '[' or '{' expected near 'x' (line 1, column 1)"},
	{.name = "malformed file, signal",
	 .file = "bad2.json",
	 .kind = FILE_TEXT,
	 .content = "{\"message\": ",
	 .exitcode = -6,
	 .pid = 15,
	 .message = "Signal 6 (SIGABRT) received by PID 15",
	 .timestamp = NOW,
	 .problem = "is not valid JSON: unexpected token near end of file (line 1, column 12)"},
	{.name = "empty file",
	 .file = "empty.json",
	 .kind = FILE_TEXT,
	 .content = "",
	 .exitcode = 1,
	 .pid = 16,
	 .message = NO_TB,
	 .timestamp = NOW,
	 .problem = "is not valid JSON: '[' or '{' expected near end of file (line 1, column "
		    "0)"},
	{.name = "array file",
	 .file = "array.json",
	 .kind = FILE_TEXT,
	 .content = "[]",
	 .exitcode = 1,
	 .pid = 17,
	 .message = NO_TB,
	 .timestamp = NOW,
	 .problem = "is not a torch error file: the top level is an array, not an object"},
	{.name = "message a number",
	 .file = "num.json",
	 .kind = FILE_TEXT,
	 .content = "{\"message\": 3}",
	 .exitcode = 1,
	 .pid = 18,
	 .message = NO_TB,
	 .timestamp = NOW,
	 .problem = "is not a torch error file: \"message\" is a number, not a string or an "
		    "object"},
	{.name = "oversized file",
	 .file = "big.json",
	 .kind = FILE_SPARSE,
	 .size = 5000000,
	 .exitcode = 1,
	 .pid = 19,
	 .message = NO_TB,
	 .timestamp = NOW,
	 .problem = "is too big (5000000 bytes, limit 4194304)"},
	{.name = "one byte over the limit",
	 .file = "big2.json",
	 .kind = FILE_SPARSE,
	 .size = ERRFILE_MAX_BYTES + 1,
	 .exitcode = 1,
	 .pid = 20,
	 .message = NO_TB,
	 .timestamp = NOW,
	 .problem = "is too big (4194305 bytes, limit 4194304)"},
	{.name = "exactly at the limit",
	 .file = "limit.json",
	 .kind = FILE_FILLED,
	 .size = ERRFILE_MAX_BYTES,
	 .exitcode = 1,
	 .pid = 21,
	 .has_error_file = true},
	{.name = "a directory",
	 .file = "adir.json",
	 .kind = FILE_DIR,
	 .exitcode = 1,
	 .pid = 22,
	 .message = NO_TB,
	 .timestamp = NOW,
	 .problem = "is not a regular file"},
};

static void
test_process_failure_init(void **state)
{
	(void)state;
	for (size_t i = 0; i < ARRAY_SIZE(init_cases); i++) {
		const struct init_case *c = &init_cases[i];
		struct process_failure f;
		char *path = NULL;
		const char *arg = NULL;

		print_message("init: %s\n", c->name);
		if (c->file) {
			path = tmp_path(c->file);
			arg = path;
		}
		switch (c->kind) {
		case FILE_NONE:
			break;
		case FILE_TEXT:
			write_text(path, c->content, strlen(c->content));
			break;
		case FILE_SPARSE: {
			int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);

			assert_true(fd >= 0);
			assert_int_equal(ftruncate(fd, (off_t)c->size), 0);
			close(fd);
			break;
		}
		case FILE_FILLED: {
			char *buf = xmalloc(c->size);

			memset(buf, 'a', c->size);
			memcpy(buf, "{\"message\": \"", 13);
			memcpy(buf + c->size - 2, "\"}", 2);
			write_text(path, buf, c->size);
			free(buf);
			break;
		}
		case FILE_DIR:
			assert_int_equal(mkdir(path, 0755), 0);
			break;
		case FILE_NOPATH:
			arg = NULL;
			break;
		case FILE_EMPTYPATH:
			arg = "";
			break;
		}

		process_failure_init(&f, 3, 7, c->pid, c->exitcode, arg, NOW);
		assert_int_equal(f.local_rank, 3);
		assert_int_equal(f.global_rank, 7);
		assert_int_equal(f.pid, c->pid);
		assert_int_equal(f.exitcode, c->exitcode);
		assert_non_null(f.message);
		if (c->message && !c->problem) {
			assert_string_equal(f.message, c->message);
		}
		assert_int_equal(f.timestamp, c->timestamp);
		if (c->has_error_file) {
			assert_non_null(f.error_file);
			assert_string_equal(f.error_file, path);
			assert_non_null(f.data);
		} else if (c->problem) {
			/* There but unusable: named, with why as the traceback. */
			assert_non_null(f.error_file);
			assert_string_equal(f.error_file, path);
			assert_null(f.data);
		} else {
			assert_null(f.error_file);
			assert_null(f.data);
		}
		if (c->problem) {
			char *want = NULL;

			assert_non_null(f.problem);
			want = xasprintf("error file %s %s", path, c->problem);
			assert_string_equal(f.problem, want);
			assert_string_equal(f.message, want);
			free(want);
		} else {
			assert_null(f.problem);
		}
		process_failure_release(&f);
		assert_null(f.message);
		assert_null(f.data);
		process_failure_release(&f); /* twice is harmless */
		free(path);
	}
}

static void
test_process_failure_unreadable(void **state)
{
	char *path = tmp_path("unreadable.json");
	struct process_failure f;

	(void)state;
	write_text(path, "{\"message\": \"x\"}", 16);
	assert_int_equal(chmod(path, 0), 0);
	process_failure_init(&f, 0, 0, 1, 1, path, NOW);
	if (geteuid() == 0) {
		/* root reads it anyway. */
		assert_null(f.problem);
		assert_string_equal(f.message, "x");
	} else {
		char *want = xasprintf("error file %s cannot be read: Permission denied", path);

		assert_string_equal(f.problem, want);
		assert_null(f.error_file);
		assert_string_equal(f.message, NO_TB);
		free(want);
	}
	process_failure_release(&f);
	process_failure_release(NULL);
	free(path);
}

/* --- errfile_root_cause ------------------------------------------------ */

struct root_case {
	const char *name;
	size_t n;
	int64_t ts[5];
	size_t root;
};

static const struct root_case root_cases[] = {
	{"one", 1, {5}, 0},
	{"smallest in the middle", 3, {3, 1, 2}, 1},
	{"smallest last", 3, {3, 2, 1}, 2},
	{"tie of all", 3, {4, 4, 4}, 0},
	{"tie after a larger one", 4, {9, 2, 7, 2}, 1},
	{"negative and zero", 5, {0, 1, -1, INT64_MIN, INT64_MAX}, 3},
	{"zero from a flat file wins", 3, {NOW, 0, NOW}, 1},
};

static void
test_root_cause(void **state)
{
	(void)state;
	for (size_t i = 0; i < ARRAY_SIZE(root_cases); i++) {
		const struct root_case *c = &root_cases[i];
		struct process_failure f[5];

		print_message("root: %s\n", c->name);
		memset(f, 0, sizeof(f));
		for (size_t j = 0; j < c->n; j++) {
			f[j].timestamp = c->ts[j];
		}
		assert_int_equal(errfile_root_cause(f, c->n), c->root);
	}
}

/* --- errfile_format_table ---------------------------------------------- */

struct fdesc {
	int local_rank;
	int global_rank;
	pid_t pid;
	int exitcode;
	const char *json;       /* error file text, NULL: none */
	const char *error_file; /* path shown */
	int64_t now;
};

/* Build a failure as process_failure_init would from a file at a fixed path. */
static void
make_failure(struct process_failure *f, const struct fdesc *d)
{
	process_failure_init(f, d->local_rank, d->global_rank, d->pid, d->exitcode, NULL, d->now);
	if (d->json) {
		free(f->message);
		f->message = NULL;
		assert_int_equal(errfile_parse(d->json, strlen(d->json), &f->data, &f->message,
					       &f->timestamp, NULL),
				 0);
		f->error_file = xstrdup(d->error_file);
	}
}

#define FLAT2 "{\"message\": \"flat line one\\nflat line two\", \"timestamp\": 1699999995}"
#define UNICODE_JSON                                                                               \
	"{\"message\": {\"message\": \"RuntimeError: \\u00e9\\u00e9\\u00e9 \\u4e2d\\u6587 "        \
	"caf\\u00e9 ok\", \"extraInfo\": {\"timestamp\": \"1700000001\"}}}"

struct table_case {
	const char *name;
	const char *title;
	size_t n;
	struct fdesc f[3];
	size_t root;
	const char *want;
};

static const struct table_case table_cases[] = {
	{"one failure, signal",
	 "train.py FAILED",
	 1,
	 {{0, 0, 123, -9, NULL, NULL, NOW}},
	 0,
	 "\n"
	 "====================================================\n"
	 "train.py FAILED\n"
	 "----------------------------------------------------\n"
	 "Failures:\n"
	 "  <NO_OTHER_FAILURES>\n"
	 "----------------------------------------------------\n"
	 "Root Cause (first observed failure):\n"
	 "[0]:\n"
	 "  time      : 2023-11-14_22:13:20\n"
	 "  host      : node1.example.com\n"
	 "  rank      : 0 (local_rank: 0)\n"
	 "  exitcode  : -9 (pid: 123)\n"
	 "  error_file: <N/A>\n"
	 "  traceback : Signal 9 (SIGKILL) received by PID 123\n"
	 "===================================================="},
	{"three failures, root in the middle, flat not indented",
	 "train.py FAILED",
	 3,
	 {{0, 0, 200, 1, NULL, NULL, NOW},
	  {1, 1, 201, 1, RECORD_JSON("1699999990"), "/logs/attempt_0/1/error.json", NOW},
	  {2, 2, 202, -15, FLAT2, "/logs/attempt_0/2/error.json", NOW}},
	 1,
	 "\n"
	 "============================================================\n"
	 "train.py FAILED\n"
	 "------------------------------------------------------------\n"
	 "Failures:\n"
	 "[0]:\n"
	 "  time      : 2023-11-14_22:13:20\n"
	 "  host      : node1.example.com\n"
	 "  rank      : 0 (local_rank: 0)\n"
	 "  exitcode  : 1 (pid: 200)\n"
	 "  error_file: <N/A>\n"
	 "  traceback : To enable traceback see: "
	 "https://pytorch.org/docs/stable/elastic/errors.html\n"
	 "[2]:\n"
	 "  time      : 2023-11-14_22:13:15\n"
	 "  host      : node1.example.com\n"
	 "  rank      : 2 (local_rank: 2)\n"
	 "  exitcode  : -15 (pid: 202)\n"
	 "  error_file: /logs/attempt_0/2/error.json\n"
	 "  traceback : flat line one\n"
	 "flat line two\n"
	 "------------------------------------------------------------\n"
	 "Root Cause (first observed failure):\n"
	 "[1]:\n"
	 "  time      : 2023-11-14_22:13:10\n"
	 "  host      : node1.example.com\n"
	 "  rank      : 1 (local_rank: 1)\n"
	 "  exitcode  : 1 (pid: 201)\n"
	 "  error_file: /logs/attempt_0/1/error.json\n"
	 "  traceback : Traceback (most recent call last):\n"
	 "    File \"/w/train.py\", line 9, in <module>\n"
	 "      main()\n"
	 "    File \"/w/train.py\", line 5, in main\n"
	 "      raise ValueError(\"boom\")\n"
	 "  ValueError: boom\n"
	 "  \n"
	 "============================================================"},
	{"multi-line traceback, global rank differs",
	 "/abs/path/to/train.py FAILED",
	 1,
	 {{1, 5, 4242, 1, RECORD_JSON("1700000123"), "/tmp/el/attempt_0/1/error.json", NOW}},
	 0,
	 "\n"
	 "================================================\n"
	 "/abs/path/to/train.py FAILED\n"
	 "------------------------------------------------\n"
	 "Failures:\n"
	 "  <NO_OTHER_FAILURES>\n"
	 "------------------------------------------------\n"
	 "Root Cause (first observed failure):\n"
	 "[0]:\n"
	 "  time      : 2023-11-14_22:15:23\n"
	 "  host      : node1.example.com\n"
	 "  rank      : 5 (local_rank: 1)\n"
	 "  exitcode  : 1 (pid: 4242)\n"
	 "  error_file: /tmp/el/attempt_0/1/error.json\n"
	 "  traceback : Traceback (most recent call last):\n"
	 "    File \"/w/train.py\", line 9, in <module>\n"
	 "      main()\n"
	 "    File \"/w/train.py\", line 5, in main\n"
	 "      raise ValueError(\"boom\")\n"
	 "  ValueError: boom\n"
	 "  \n"
	 "================================================"},
	{"long title caps the width at 60",
	 "a_very_long_entrypoint_name_that_goes_on_and_on_for_quite_a_while.py FAILED",
	 1,
	 {{0, 0, 7, 2, NULL, NULL, NOW}},
	 0,
	 "\n"
	 "============================================================\n"
	 "a_very_long_entrypoint_name_that_goes_on_and_on_for_quite_a_while.py FAILED\n"
	 "------------------------------------------------------------\n"
	 "Failures:\n"
	 "  <NO_OTHER_FAILURES>\n"
	 "------------------------------------------------------------\n"
	 "Root Cause (first observed failure):\n"
	 "[0]:\n"
	 "  time      : 2023-11-14_22:13:20\n"
	 "  host      : node1.example.com\n"
	 "  rank      : 0 (local_rank: 0)\n"
	 "  exitcode  : 2 (pid: 7)\n"
	 "  error_file: <N/A>\n"
	 "  traceback : To enable traceback see: "
	 "https://pytorch.org/docs/stable/elastic/errors.html\n"
	 "============================================================"},
	{"tie: the first is the root",
	 "t.py FAILED",
	 2,
	 {{0, 0, 10, 1, NULL, NULL, NOW}, {1, 1, 11, -6, NULL, NULL, NOW}},
	 0,
	 "\n"
	 "============================================================\n"
	 "t.py FAILED\n"
	 "------------------------------------------------------------\n"
	 "Failures:\n"
	 "[1]:\n"
	 "  time      : 2023-11-14_22:13:20\n"
	 "  host      : node1.example.com\n"
	 "  rank      : 1 (local_rank: 1)\n"
	 "  exitcode  : -6 (pid: 11)\n"
	 "  error_file: <N/A>\n"
	 "  traceback : Signal 6 (SIGABRT) received by PID 11\n"
	 "------------------------------------------------------------\n"
	 "Root Cause (first observed failure):\n"
	 "[0]:\n"
	 "  time      : 2023-11-14_22:13:20\n"
	 "  host      : node1.example.com\n"
	 "  rank      : 0 (local_rank: 0)\n"
	 "  exitcode  : 1 (pid: 10)\n"
	 "  error_file: <N/A>\n"
	 "  traceback : To enable traceback see: "
	 "https://pytorch.org/docs/stable/elastic/errors.html\n"
	 "============================================================"},
	{"width counts characters, not bytes",
	 "t.py FAILED",
	 1,
	 {{0, 0, 12, 1, UNICODE_JSON, "/e.json", NOW}},
	 0,
	 "\n"
	 "==========================================\n"
	 "t.py FAILED\n"
	 "------------------------------------------\n"
	 "Failures:\n"
	 "  <NO_OTHER_FAILURES>\n"
	 "------------------------------------------\n"
	 "Root Cause (first observed failure):\n"
	 "[0]:\n"
	 "  time      : 2023-11-14_22:13:21\n"
	 "  host      : node1.example.com\n"
	 "  rank      : 0 (local_rank: 0)\n"
	 "  exitcode  : 1 (pid: 12)\n"
	 "  error_file: /e.json\n"
	 "  traceback : RuntimeError: \xc3\xa9\xc3\xa9\xc3\xa9 \xe4\xb8\xad\xe6\x96\x87 "
	 "caf\xc3\xa9 ok\n"
	 "=========================================="},
};

static void
test_format_table(void **state)
{
	(void)state;
	for (size_t i = 0; i < ARRAY_SIZE(table_cases); i++) {
		const struct table_case *c = &table_cases[i];
		struct process_failure f[3];
		char *got;

		print_message("table: %s\n", c->name);
		for (size_t j = 0; j < c->n; j++) {
			make_failure(&f[j], &c->f[j]);
		}
		assert_int_equal(errfile_root_cause(f, c->n), c->root);
		got = errfile_format_table(c->title, f, c->n, c->root, HOST);
		assert_string_equal(got, c->want);
		free(got);
		for (size_t j = 0; j < c->n; j++) {
			process_failure_release(&f[j]);
		}
	}
}

/* The time line for unusual timestamps (torch raises outside years 1..9999). */
struct time_case {
	int64_t ts;
	const char *line;
};

static const struct time_case time_cases[] = {
	{0, "  time      : 1970-01-01_00:00:00\n"},
	{-1, "  time      : 1969-12-31_23:59:59\n"},
	{1795947362, "  time      : 2026-11-29_10:16:02\n"},
	{253402300799, "  time      : 9999-12-31_23:59:59\n"},
	{253402300800, "  time      : 253402300800\n"},
	{-62135596800, "  time      : 0001-01-01_00:00:00\n"},
	{-62135596801, "  time      : -62135596801\n"},
	{INT64_MAX, "  time      : 9223372036854775807\n"},
	{INT64_MIN, "  time      : -9223372036854775808\n"},
};

static void
test_format_time(void **state)
{
	(void)state;
	for (size_t i = 0; i < ARRAY_SIZE(time_cases); i++) {
		struct process_failure f;
		char *got;

		process_failure_init(&f, 0, 0, 1, 1, NULL, time_cases[i].ts);
		got = errfile_format_table("x FAILED", &f, 1, 0, HOST);
		if (!strstr(got, time_cases[i].line)) {
			fail_msg("no '%s' in '%s'", time_cases[i].line, got);
		}
		free(got);
		process_failure_release(&f);
	}
}

static void
test_format_table_odd_arguments(void **state)
{
	struct process_failure f[2];
	char *a;
	char *b;

	(void)state;
	process_failure_init(&f[0], 0, 0, 1, 1, NULL, 20);
	process_failure_init(&f[1], 1, 1, 2, 1, NULL, 10);
	/* An out-of-range root index falls back to the real root cause. */
	a = errfile_format_table("t FAILED", f, 2, 99, HOST);
	b = errfile_format_table("t FAILED", f, 2, 1, HOST);
	assert_string_equal(a, b);
	free(a);
	free(b);
	a = errfile_format_table(NULL, f, 2, 0, NULL);
	assert_non_null(strstr(a, "  host      : <N/A>\n"));
	free(a);
	a = errfile_format_table("t FAILED", f, 0, 0, HOST);
	assert_non_null(strstr(a, "  <NO_OTHER_FAILURES>"));
	free(a);
	process_failure_release(&f[0]);
	process_failure_release(&f[1]);
}

/* --- errfile_write_root_cause / errfile_json_dumps ----------------------- */

struct write_case {
	const char *name;
	const char *input;
	int exitcode;
	const char *want; /* Python's json.dumps after torch's errorCode override */
};

static const struct write_case write_cases[] = {
	{"nested, signal", RECORD_JSON("1795947362"), -9,
	 "{\"message\": {\"message\": \"ValueError: boom\", \"extraInfo\": {\"py_callstack\": "
	 "\"" TB_JSON "\", \"timestamp\": \"1795947362\"}, \"errorCode\": -9}}"},
	{"nested, exit 0 adds nothing", RECORD_JSON("1795947362"), 0, RECORD_JSON("1795947362")},
	{"flat is copied unchanged", "{\"message\":\"flat text\",\"timestamp\":17}", 1,
	 "{\"message\": \"flat text\", \"timestamp\": 17}"},
	{"existing errorCode keeps its place",
	 "{\"message\":{\"errorCode\":5,\"message\":\"x\",\"extraInfo\":{\"timestamp\":\"1\"}},"
	 "\"other\":[1,2.5,null,true,false,{},[]]}",
	 3,
	 "{\"message\": {\"errorCode\": 3, \"message\": \"x\", \"extraInfo\": {\"timestamp\": "
	 "\"1\"}}, \"other\": [1, 2.5, null, true, false, {}, []]}"},
	{"ensure_ascii escapes and float reprs",
	 "{\"message\":{\"message\":\"caf\xc3\xa9 \xf0\x9f\x98\x80 \x7f/\\\\ \\\" "
	 "\\t\\b\\f\\r\\u0001 \\ud83d\\ude00 \\u00e9\",\"f\":[1e16,1e15,0.0001,1e-05,1.5e300,-0."
	 "0,123.456,5e-324,1.7976931348623157e308,100.0,0.1,2.2250738585072014e-308,"
	 "9007199254740993.0,1E2,-1.25e-7,-9223372036854775808,9223372036854775807,0,-0]},"
	 "\"timestamp\":1}",
	 1,
	 "{\"message\": {\"message\": \"caf\\u00e9 \\ud83d\\ude00 \\u007f/\\\\ \\\" "
	 "\\t\\b\\f\\r\\u0001 \\ud83d\\ude00 \\u00e9\", \"f\": [1e+16, 1000000000000000.0, "
	 "0.0001, 1e-05, 1.5e+300, -0.0, 123.456, 5e-324, 1.7976931348623157e+308, 100.0, 0.1, "
	 "2.2250738585072014e-308, 9007199254740992.0, 100.0, -1.25e-07, -9223372036854775808, "
	 "9223372036854775807, 0, 0], \"errorCode\": 1}, \"timestamp\": 1}"},
};

/* Files in tmpdir/out whose name starts with prefix. */
static int
count_files(const char *dir, const char *prefix)
{
	DIR *d = opendir(dir);
	struct dirent *de;
	int n = 0;

	assert_non_null(d);
	while ((de = readdir(d))) {
		if (strncmp(de->d_name, prefix, strlen(prefix)) == 0) {
			n++;
		}
	}
	closedir(d);
	return n;
}

static void
test_write_root_cause(void **state)
{
	char *dir = tmp_path("out");
	char *dest = tmp_path("out/parent_error.json");
	mode_t old = umask(022);
	struct stat st;

	(void)state;
	assert_int_equal(mkdir(dir, 0755), 0);
	/* A stale file is replaced, as torchrun's _rm + write. */
	write_text(dest, "stale contents that are longer than some outputs", 49);
	for (size_t i = 0; i < ARRAY_SIZE(write_cases); i++) {
		const struct write_case *c = &write_cases[i];
		struct process_failure f;
		char *got;

		print_message("write: %s\n", c->name);
		memset(&f, 0, sizeof(f));
		f.exitcode = c->exitcode;
		assert_int_equal(errfile_parse(c->input, strlen(c->input), &f.data, &f.message,
					       &f.timestamp, NULL),
				 0);
		f.error_file = xstrdup("/child/error.json");
		assert_int_equal(errfile_write_root_cause(dest, &f), 0);
		got = slurp(dest);
		assert_string_equal(got, c->want);
		free(got);
		got = errfile_json_dumps(f.data);
		if (c->exitcode == 0 || !json_is_object(json_object_get(f.data, "message"))) {
			assert_string_equal(got, c->want);
		}
		free(got);
		process_failure_release(&f);
	}
	assert_int_equal(stat(dest, &st), 0);
	assert_int_equal(st.st_mode & 0777, 0644);
	/* Only the destination is left behind. */
	assert_int_equal(count_files(dir, "parent_error.json"), 1);
	umask(old);
	free(dest);
	free(dir);
}

static void
test_write_record(void **state)
{
	char *dest = tmp_path("record.json");
	char *got;

	(void)state;
	assert_int_equal(errfile_write_record(dest, "SignalException: Process 7 got signal: 15",
					      "x.SignalException\n", 1700000000, 0),
			 0);
	got = slurp(dest);
	assert_string_equal(got, "{\"message\": {\"message\": \"SignalException: Process 7 got "
				 "signal: 15\", \"extraInfo\": {\"py_callstack\": "
				 "\"x.SignalException\\n\", \"timestamp\": \"1700000000\"}}}");
	free(got);
	/* errorCode last; bytes that are not UTF-8 become U+FFFD. */
	assert_int_equal(errfile_write_record(dest, "bad \xff byte", NULL, 5, -9), 0);
	got = slurp(dest);
	assert_string_equal(got, "{\"message\": {\"message\": \"bad \\ufffd byte\", "
				 "\"extraInfo\": {\"py_callstack\": \"\", \"timestamp\": "
				 "\"5\"}, \"errorCode\": -9}}");
	free(got);
	assert_int_equal(errfile_write_record("/nonexistent/dir/e.json", "m", "s", 0, 1), -ENOENT);
	unlink(dest);
	free(dest);
}

static void
test_write_root_cause_errors(void **state)
{
	char *dest = tmp_path("out2.json");
	char *nodir = tmp_path("nodir/x/error.json");
	char *isdir = tmp_path("adir2");
	struct process_failure f;

	(void)state;
	process_failure_init(&f, 0, 0, 1, -9, NULL, NOW);
	/* No error file: nothing written. */
	assert_int_equal(errfile_write_root_cause(dest, &f), -ENOENT);
	assert_int_equal(access(dest, F_OK), -1);
	assert_int_equal(errfile_write_root_cause(dest, NULL), -ENOENT);
	process_failure_release(&f);

	assert_int_equal(
		errfile_parse("{\"message\": \"m\"}", 16, &f.data, &f.message, &f.timestamp, NULL),
		0);
	f.exitcode = 1;
	assert_int_equal(errfile_write_root_cause(nodir, &f), -ENOENT);
	assert_int_equal(mkdir(isdir, 0755), 0);
	assert_int_equal(errfile_write_root_cause(isdir, &f), -EISDIR);
	assert_int_equal(count_files(tmpdir, "adir2."), 0);
	process_failure_release(&f);
	free(dest);
	free(nodir);
	free(isdir);
}

static void
test_json_dumps(void **state)
{
	static const struct {
		const char *in;
		const char *want;
	} cases[] = {
		{"{}", "{}"},
		{"[]", "[]"},
		{"{\"a\": {\"b\": []}, \"c\": [[], {}]}", "{\"a\": {\"b\": []}, \"c\": [[], {}]}"},
		{"[\"\\u001f\\u0020~\\u0080\\uffff\"]", "[\"\\u001f ~\\u0080\\uffff\"]"},
		{"[0.5, 2.0, 1e22, 1e-7, 0.001]", "[0.5, 2.0, 1e+22, 1e-07, 0.001]"},
	};
	char *got;

	(void)state;
	for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
		json_t *v = json_loads(cases[i].in, 0, NULL);

		assert_non_null(v);
		got = errfile_json_dumps(v);
		assert_string_equal(got, cases[i].want);
		free(got);
		json_decref(v);
	}
	got = errfile_json_dumps(NULL);
	assert_string_equal(got, "null");
	free(got);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_parse),
		cmocka_unit_test(test_parse_null_outputs),
		cmocka_unit_test(test_process_failure_init),
		cmocka_unit_test(test_process_failure_unreadable),
		cmocka_unit_test(test_root_cause),
		cmocka_unit_test(test_format_table),
		cmocka_unit_test(test_format_time),
		cmocka_unit_test(test_format_table_odd_arguments),
		cmocka_unit_test(test_write_root_cause),
		cmocka_unit_test(test_write_root_cause_errors),
		cmocka_unit_test(test_write_record),
		cmocka_unit_test(test_json_dumps),
	};

	return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
