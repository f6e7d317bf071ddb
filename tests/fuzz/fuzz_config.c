/* fuzz_config.c — libFuzzer target for the command line: the input, split on
 * NUL or newline, is argv after argv[0]; parsed with a small fixed environment,
 * then the queries run on the result and it is released. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"
#include "util.h"

#define MAX_ARGS 256

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static char *const envp[] = {
		"PET_NNODES=1:2",     "PET_MAX_RESTARTS=1",
		"PET_TEE=0:1",        "TORCH_ELASTIC_SHUTDOWN_TIMEOUT=5",
		"PATH=/usr/bin:/bin", NULL,
	};
	char *argv[MAX_ARGS + 2];
	char *buf = xmalloc(size + 1);
	int argc = 0;
	struct config cfg;
	char *err = NULL;
	size_t start = 0;
	int r;

	memcpy(buf, data, size);
	buf[size] = '\0';
	argv[argc++] = "elasticd";
	for (size_t i = 0; i <= size && argc <= MAX_ARGS; i++) {
		if (i == size || buf[i] == '\0' || buf[i] == '\n') {
			buf[i] = '\0';
			if (i < size || i > start) {
				argv[argc++] = buf + start;
			}
			start = i + 1;
		}
	}
	argv[argc] = NULL;

	r = config_parse(&cfg, argc, argv, envp, &err);
	if (r == CONFIG_RUN) {
		if (err || !cfg.entrypoint || !cfg.args || cfg.min_nodes <= 0 ||
		    cfg.min_nodes > cfg.max_nodes || cfg.max_restarts < 0 ||
		    cfg.shutdown_timeout < 0 || cfg.master_port < 0 || cfg.master_port > 65535) {
			abort();
		}
		(void)config_resolve_nproc(&cfg, 4, 0, 0);
		(void)config_resolve_nproc(&cfg, 4, 2, 1);
		(void)config_rdzv_conf_get(&cfg, "timeout");
		for (int rank = 0; rank < 4; rank++) {
			(void)config_rank_in_filter(&cfg, rank);
			(void)std_map_get(&cfg.redirects, rank);
			(void)std_map_get(&cfg.tee, rank);
		}
	} else if (r < 0) {
		if (!err || !*err) {
			abort();
		}
	} else if (r != CONFIG_HELP && r != CONFIG_VERSION) {
		abort();
	}
	free(err);
	config_release(&cfg);

	/* Each argument is also a -r/-t value. */
	for (int i = 1; i < argc; i++) {
		struct std_map m = {.all = STD_NONE};

		err = NULL;
		if (std_map_parse(argv[i], &m, &err) == 0) {
			(void)std_map_get(&m, 0);
			std_map_release(&m);
		} else if (!err) {
			abort();
		}
		free(err);
	}
	free(buf);
	return 0;
}
