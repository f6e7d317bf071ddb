/* config_usage.c — elasticd --help: the option table (config_options.c)
 * rendered by group, each option's help word-wrapped beside it with its
 * default. */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config_internal.h"
#include "util.h"

static const char *const group_titles[GROUP_COUNT] = {
	[GROUP_WORKERS] = "Workers",
	[GROUP_RESTARTS] = "Restart policy",
	[GROUP_HANG] = "Hang detection",
	[GROUP_HEALTH] = "Node health",
	[GROUP_RDZV] = "Rendezvous",
	[GROUP_LOGS] = "Logs and output",
	[GROUP_SIGNALS] = "Signals and shutdown",
	[GROUP_OTHER] = "Other",
};

/* --help. */

#define USAGE_WIDTH 100
#define USAGE_HELP_COLUMN 34

/* A space that print_wrapped does not break at. */
#define NBSP "\x1f"

/* Print text word-wrapped from column col to USAGE_WIDTH, continuation lines
 * indented to indent; ends the line. */
static void
print_wrapped(FILE *out, const char *text, size_t col, size_t indent)
{
	const char *p = text;

	while (*p) {
		size_t len = strcspn(p, " ");

		if (col > indent && col + 1 + len > USAGE_WIDTH) {
			fprintf(out, "\n%*s", (int)indent, "");
			col = indent;
		} else if (col > indent) {
			fputc(' ', out);
			col++;
		}
		for (size_t k = 0; k < len; k++) {
			fputc(p[k] == NBSP[0] ? ' ' : p[k], out);
		}
		col += len;
		p += len;
		while (*p == ' ') {
			p++;
		}
	}
	fputc('\n', out);
}

static void
print_option(FILE *out, const struct config_option *o)
{
	_cleanup_free_ char *left = NULL, *text = NULL;
	size_t col;

	left = xasprintf("  %c%c%s--%s%s%s%s%s", o->short_name ? '-' : ' ',
			 o->short_name ? o->short_name : ' ', o->short_name ? ", " : "  ", o->name,
			 o->alias ? ", --" : "", o->alias ? o->alias : "", o->metavar ? " " : "",
			 o->metavar ? o->metavar : "");
	if (o->env_fallback) {
		text = xasprintf("%s (default:" NBSP "$%s, else" NBSP "%s)", o->help,
				 o->env_fallback, o->def);
	} else if (o->def_service) {
		text = xasprintf("%s (default:" NBSP "%s; as a service, with --config or "
				 "$NOTIFY_SOCKET:" NBSP "%s)",
				 o->help, o->def, o->def_service);
	} else if (o->def && *o->def) {
		text = xasprintf("%s (default:" NBSP "%s)", o->help, o->def);
	} else {
		text = xstrdup(o->help);
	}
	fputs(left, out);
	col = strlen(left);
	if (col + 2 > USAGE_HELP_COLUMN) {
		fputc('\n', out);
		col = 0;
	}
	fprintf(out, "%*s", (int)(USAGE_HELP_COLUMN - col), "");
	print_wrapped(out, text, USAGE_HELP_COLUMN, USAGE_HELP_COLUMN);
}

void
config_usage(FILE *out)
{
	const char *no_env[ARRAY_SIZE(config_options) + 1] = {NULL};
	_cleanup_free_ char *list = NULL, *note = NULL;
	size_t n = 0;

	fputs("Usage: elasticd [options] [--] training_script [args...]\n\n", out);
	fputs("Start, supervise and restart the local workers of a distributed PyTorch job "
	      "(torchrun's agent).\n",
	      out);
	for (int g = 0; g < GROUP_COUNT; g++) {
		fprintf(out, "\n%s:\n", group_titles[g]);
		for (size_t i = 0; i < ARRAY_SIZE(config_options); i++) {
			if (config_options[i].group == (enum option_group)g) {
				print_option(out, &config_options[i]);
			}
		}
	}
	for (size_t i = 0; i < ARRAY_SIZE(config_options); i++) {
		if (!config_options[i].env) {
			no_env[n++] = config_options[i].name;
		}
	}
	list = config_join_list(no_env, "--", " and ");
	note = xasprintf(
		"Every option also has an underscore spelling (--nproc_per_node for "
		"--nproc-per-node) and a default in the environment variable PET_<NAME> "
		"(PET_NPROC_PER_NODE; 1 or 0 for flags), except %s. The command line beats "
		"the environment, which beats the --config file, which beats the default. "
		"Unambiguous prefixes of long "
		"options work (--nproc). Everything after training_script (or after --) is "
		"passed to it unchanged.",
		list);
	fputc('\n', out);
	print_wrapped(out, note, 0, 0);
}
