/* fuzz_config_file.c — libFuzzer target for the --config file: the input is
 * the file's text, parsed for its syntax (config_file_parse) and then for its
 * meaning with a small fixed environment (config_parse_text), once with no
 * command line and once with a command-line entrypoint; every line is also
 * split as a value (config_file_split). */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"
#include "config_file.h"
#include "util.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void
check_config(int r, const struct config *cfg, const char *err)
{
	if (r == CONFIG_RUN) {
		if (err || !cfg->entrypoint || !cfg->args || !cfg->config_file ||
		    cfg->min_nodes <= 0 || cfg->min_nodes > cfg->max_nodes ||
		    cfg->max_restarts < 0 || cfg->shutdown_timeout < 0 || cfg->master_port < 0 ||
		    cfg->master_port > 65535) {
			abort();
		}
		(void)config_resolve_nproc(cfg, 4, 2, 1);
		(void)config_rdzv_conf_get(cfg, "timeout");
		(void)config_rank_in_filter(cfg, 1);
	} else if (r < 0) {
		if (!err || !*err) {
			abort();
		}
	} else {
		abort(); /* no --help or --version in a file */
	}
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static char *const envp[] = {"PET_MAX_RESTARTS=1", "NOTIFY_SOCKET=@fuzz", NULL};
	char *argv_none[] = {"elasticd", NULL};
	char *argv_entry[] = {"elasticd", "--nnodes", "1:2", "train.py", "--lr", NULL};
	const char *text = (const char *)data;
	struct config_file f = {0};
	struct config cfg;
	char *err = NULL;
	int r;

	if (size > CONFIG_FILE_MAX) {
		return 0;
	}
	r = config_file_parse("fuzz.conf", text, size, &f, &err);
	if (r == 0) {
		if (err) {
			abort();
		}
		for (size_t i = 0; i < f.n; i++) {
			if (!f.entries[i].key || !*f.entries[i].key || !f.entries[i].words ||
			    f.entries[i].line <= 0) {
				abort();
			}
		}
	} else if (!err || strncmp(err, "fuzz.conf:", 10) != 0 || f.n != 0) {
		abort();
	}
	config_file_release(&f);
	free(err);

	err = NULL;
	r = config_parse_text(&cfg, 1, argv_none, envp, "fuzz.conf", text, size, &err);
	check_config(r, &cfg, err);
	free(err);
	config_release(&cfg);

	err = NULL;
	r = config_parse_text(&cfg, 5, argv_entry, envp, "fuzz.conf", text, size, &err);
	check_config(r, &cfg, err);
	if (r == CONFIG_RUN && strcmp(cfg.entrypoint, "train.py") != 0) {
		abort(); /* the command line's entrypoint wins */
	}
	free(err);
	config_release(&cfg);

	/* Each line as a value, up to its first NUL. */
	for (size_t pos = 0; pos < size;) {
		const char *nl = memchr(text + pos, '\n', size - pos);
		size_t n = nl ? (size_t)(nl - (text + pos)) : size - pos;
		char *line = xstrndup(text + pos, n);
		char **words = NULL;

		err = NULL;
		if (config_file_split(line, &words, &err) == 0) {
			if (!words || err) {
				abort();
			}
		} else if (!err || words) {
			abort();
		}
		strv_free(words);
		free(err);
		free(line);
		pos += n + 1;
	}
	return 0;
}
