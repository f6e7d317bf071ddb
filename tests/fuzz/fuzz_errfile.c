/* fuzz_errfile.c — libFuzzer target: the input is an error file. Whatever
 * parses is also rendered as a ChildFailedError table (next to a failure
 * without a file) and re-encoded as torchrun writes it. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "errfile.h"
#include "util.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct process_failure f[2];
	char *err = NULL;
	char *text;
	size_t root;

	memset(f, 0, sizeof(f));
	f[0].local_rank = 0;
	f[0].global_rank = 4;
	f[0].pid = 1234;
	f[0].exitcode = 1;
	if (errfile_parse((const char *)data, size, &f[0].data, &f[0].message, &f[0].timestamp,
			  &err) < 0) {
		if (!err) {
			abort();
		}
		free(err);
		return 0;
	}
	if (!f[0].data || !f[0].message) {
		abort();
	}
	f[0].error_file = xstrdup("/logs/attempt_0/0/error.json");
	process_failure_init(&f[1], 1, 5, 1235, -9, NULL, 1700000000);

	root = errfile_root_cause(f, 2);
	text = errfile_format_table("train.py FAILED", f, 2, root, "node1.example.com");
	if (text[0] != '\n') {
		abort();
	}
	free(text);

	text = errfile_json_dumps(f[0].data);
	free(text);

	process_failure_release(&f[0]);
	process_failure_release(&f[1]);
	return 0;
}
