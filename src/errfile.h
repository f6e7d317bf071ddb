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
	int exitcode;	  /* >= 0: exit status; < 0: killed by signal -exitcode (Python's returncode) */
	char *error_file; /* path of the worker's error file if it wrote one, else NULL */
	char *message;	  /* the "traceback" text of the table, never NULL */
	int64_t timestamp; /* epoch seconds: from the error file, else the time the exit was seen */
	json_t *data;	   /* the parsed error file (owned), NULL when none or unreadable */
	char *problem;	   /* why an existing error file could not be used (malformed, too big,
			    * unreadable), else NULL; the agent logs it */
};

/* Parse the text of an error file: nested form
 *   {"message": {"message": "...", "extraInfo": {"py_callstack": "...", "timestamp": "<int>"}}}
 * or flat form {"message": "<text>", "timestamp": <int>} (timestamp optional, 0).
 * On success returns 0 and gives a new reference in *ret_data, the message text
 * (py_callstack, else inner message, else "<N/A>"; flat: the string) in
 * *ret_message (malloc'd) and the timestamp in *ret_timestamp.
 * Returns -EINVAL with *reterr (malloc'd) when the text is not JSON or not one
 * of the two shapes. Never crashes on any input. */
int
errfile_parse(const char *buf, size_t len, json_t **ret_data, char **ret_message,
	      int64_t *ret_timestamp, char **reterr);

/* Build a ProcessFailure for a worker that exited with exitcode (< 0 = signal).
 * Reads error_file_path if it exists (at most ERRFILE_MAX_BYTES). Without a file:
 * error_file NULL, timestamp = now (epoch seconds), message "Signal <n> (<NAME>)
 * received by PID <pid>" for signals, else "To enable traceback see:
 * https://pytorch.org/docs/stable/elastic/errors.html". A malformed or huge file
 * sets ->problem and is treated as no file. Release with process_failure_release. */
void
process_failure_init(struct process_failure *f, int local_rank, int global_rank, pid_t pid,
		     int exitcode, const char *error_file_path, int64_t now);
void
process_failure_release(struct process_failure *f);

/* Index of the root cause: the smallest timestamp, ties to the lowest index. n > 0. */
size_t
errfile_root_cause(const struct process_failure *f, size_t n);

/* Render torchrun's ChildFailedError message for failures f[0..n) with root
 * index root: starts with "\n", "=" border, "<title>", "-" border,
 * "Failures:", the other failures or "  <NO_OTHER_FAILURES>", "Root Cause
 * (first observed failure):", the root block, "=" border; width = max(title,
 * longest block line) capped at 60. Times are local time "YYYY-MM-DD_HH:MM:SS".
 * host is the agent host's FQDN. Returns a malloc'd string. */
char *
errfile_format_table(const char *title, const struct process_failure *f, size_t n, size_t root,
		     const char *host);

/* Copy the root cause's error-file JSON into dest_path (the agent's own
 * TORCHELASTIC_ERROR_FILE) with "errorCode": exitcode added inside the
 * "message" object when it is an object and exitcode != 0, as torchrun's
 * ErrorHandler.dump_error_file. An existing file is replaced. Returns 0,
 * -ENOENT when the root cause has no error-file data, or -errno on I/O errors. */
int
errfile_write_root_cause(const char *dest_path, const struct process_failure *root);
