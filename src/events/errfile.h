/* errfile.h — torch's @record error files, the root cause and torchrun's
 * ChildFailedError table (torch.distributed.elastic.multiprocessing.errors,
 * identical in 1.13 and 2.x). Pure apart from reading/writing the files. */
#pragma once

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* Error files larger than this are reported, not read. */
#define ERRFILE_MAX_BYTES (4u * 1024 * 1024)

/* One failed worker, as torchrun's ProcessFailure. */
struct process_failure {
	int local_rank;
	int global_rank;
	pid_t pid;
	int exitcode; /* >= 0: exit status; < 0: killed by signal -exitcode (Python's returncode) */
	char *error_file;  /* path of the worker's error file if it wrote one, else NULL */
	char *message;     /* the "traceback" text of the table, never NULL */
	int64_t timestamp; /* epoch seconds: from the error file, else the time the exit was seen */
	json_t *data;      /* the parsed error file (owned), NULL when none or unreadable */
	char *problem;     /* why an existing error file could not be used (malformed, too big,
			    * unreadable), else NULL; the agent logs it */
};

/* Parse the text of an error file: nested form
 *   {"message": {"message": "...", "extraInfo": {"py_callstack": "...", "timestamp": "<int>"}}}
 * or flat form {"message": "<text>", "timestamp": <int>} (timestamp optional, 0).
 * On success returns 0 and gives a new reference in *ret_data, the message text
 * (py_callstack, else inner message, else "<N/A>"; flat: the string) in
 * *ret_message (malloc'd) and the timestamp in *ret_timestamp.
 * Returns -EINVAL with *reterr (malloc'd) when the text is not JSON or not one
 * of the two shapes. Never crashes on any input.
 * Leniencies where torch would raise: a missing or non-object "extraInfo", a
 * non-string py_callstack or inner message, and a timestamp that Python's int()
 * refuses (or that does not fit in 64 bits) give timestamp 0. JSON parsing is
 * jansson's with JSON_REJECT_DUPLICATES (duplicate keys, NaN, \u0000 and
 * integers beyond 64 bits are refused). reterr reads "not valid JSON: <why>
 * (line L, column C)" or "not a torch error file: <why>". Any ret_* / reterr
 * may be NULL; outputs are untouched on failure. */
int errfile_parse(const char *buf, size_t len, json_t **ret_data, char **ret_message,
		  int64_t *ret_timestamp, char **reterr);

/* Build a ProcessFailure for a worker that exited with exitcode (< 0 = signal).
 * Reads error_file_path if it exists (at most ERRFILE_MAX_BYTES). Without a file:
 * error_file NULL, timestamp = now (epoch seconds), message "Signal <n> (<NAME>)
 * received by PID <pid>" for signals, else "To enable traceback see:
 * https://pytorch.org/docs/stable/elastic/errors.html". A malformed or huge file
 * sets ->problem, keeps error_file (the path) with no data, and has the problem
 * as its message (the table's traceback). Release with process_failure_release.
 * A NULL or "" path, a missing file or a missing directory is "no file" without a
 * problem; a non-regular file (never opened: a FIFO would block), an unreadable,
 * oversized or malformed one sets ->problem ("error file <path> is too big (N
 * bytes, limit 4194304)", "... is not valid JSON: ...", "... cannot be read:
 * <strerror>", "... is not a regular file"). As torch, a flat-form file whose
 * message is "" keeps error_file and its timestamp but gets the made-up message.
 * Unknown signal names (torch would raise) print as "<N/A>". */
void process_failure_init(struct process_failure *f, int local_rank, int global_rank, pid_t pid,
			  int exitcode, const char *error_file_path, int64_t now);
/* Free what f owns and NULL those fields; accepts NULL and a released f. */
void process_failure_release(struct process_failure *f);

/* Index of the root cause: the smallest timestamp, ties to the lowest index. n > 0
 * (0 is returned for n == 0). */
size_t errfile_root_cause(const struct process_failure *f, size_t n);

/* Render torchrun's ChildFailedError message for failures f[0..n) with root
 * index root: starts with "\n", "=" border, "<title>", "-" border,
 * "Failures:", the other failures or "  <NO_OTHER_FAILURES>", "Root Cause
 * (first observed failure):", the root block, "=" border; width = max(title,
 * longest block line) capped at 60. Times are local time "YYYY-MM-DD_HH:MM:SS".
 * host is the agent host's FQDN. Returns a malloc'd string.
 * title is the whole title line ("<entrypoint> FAILED"). Like str(ChildFailedError)
 * the text has no trailing newline. The traceback's "\n"s become "\n  " unless the
 * failure's error file had the flat form (data's "message" is a string), which torch
 * shows as it is. Widths count characters (UTF-8 code points), as Python's len().
 * A timestamp outside years 1..9999 (torch would raise) is shown as epoch seconds.
 * root >= n falls back to errfile_root_cause(); NULL title is "", NULL host "<N/A>". */
char *errfile_format_table(const char *title, const struct process_failure *f, size_t n,
			   size_t root, const char *host);

/* Copy the root cause's error-file JSON into dest_path (the agent's own
 * TORCHELASTIC_ERROR_FILE) with "errorCode": exitcode added inside the
 * "message" object when it is an object and exitcode != 0, as torchrun's
 * ErrorHandler.dump_error_file. An existing file is replaced. Returns 0,
 * -ENOENT when the root cause has no error-file data, or -errno on I/O errors.
 * The bytes are json.dumps' (errfile_json_dumps; no trailing newline), written
 * to "<dest_path>.<pid>.<n>.tmp" (mode 0666 & ~umask, as Python's open) and
 * renamed over dest_path. Note that a missing parent directory of dest_path
 * also gives -ENOENT. */
int errfile_write_root_cause(const char *dest_path, const struct process_failure *root);

/* Write an error file of elasticd's own making to dest_path, in the nested form
 * torch's @record writes (json.dumps, keys in this order):
 *   {"message": {"message": message, "extraInfo": {"py_callstack": py_callstack,
 *    "timestamp": "<timestamp>"}, "errorCode": error_code}}
 * "errorCode" only when error_code != 0 (torchrun adds it to a copied worker
 * file; torch's own exceptions, such as SignalException, have none). Replaces
 * dest_path as errfile_write_root_cause does. Returns 0 or -errno. */
int errfile_write_record(const char *dest_path, const char *message, const char *py_callstack,
			 int64_t timestamp, int error_code);

/* Encode v exactly as Python's json.dumps(v) with its defaults: separators ", "
 * and ": ", ensure_ascii (lower-case \uXXXX escapes, surrogate pairs, DEL
 * escaped), floats as Python's repr, key order kept; no trailing newline. NULL
 * gives "null". Returns a malloc'd string. */
char *errfile_json_dumps(const json_t *v);
