/* main.c — elasticd: parse the command line, build the agent, run it. The only
 * place that decides the process exit status. */
#include <errno.h>
#include <event2/event.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agent.h"
#include "config.h"
#include "log.h"
#include "util.h"
#include "version.h"

extern char **environ;

int
main(int argc, char **argv)
{
	struct config cfg = {0};
	struct event_base *base;
	struct agent *a;
	char *err = NULL;
	const char *level = getenv("LOGLEVEL");
	enum log_level lvl;
	int r, code;

	r = config_parse(&cfg, argc, argv, environ, &err);
	if (r < 0) {
		fprintf(stderr,
			"elasticd: error: %s\nTry 'elasticd --help' for more information.\n",
			err ? err : strerror(-r));
		free(err);
		config_release(&cfg);
		return AGENT_EXIT_USAGE;
	}
	if (r == CONFIG_HELP) {
		config_usage(stdout);
		config_release(&cfg);
		return 0;
	}
	if (r == CONFIG_VERSION) {
		printf("elasticd %s\n", ELASTICD_VERSION);
		config_release(&cfg);
		return 0;
	}
	if (level && log_level_parse(level, &lvl) == 0) {
		log_set_level(lvl);
	}
	json_object_seed(0);

	base = event_base_new();
	if (!base) {
		fprintf(stderr, "elasticd: error: cannot create the event loop\n");
		config_release(&cfg);
		return AGENT_EXIT_FAILURE;
	}
	a = agent_new(base, &cfg, environ, &code, &err);
	if (!a) {
		fprintf(stderr, "elasticd: error: %s\n", err ? err : "cannot start the agent");
		free(err);
		event_base_free(base);
		config_release(&cfg);
		return code;
	}
	code = agent_run(a);
	agent_free(a);
	event_base_free(base);
	config_release(&cfg);
	return code;
}
