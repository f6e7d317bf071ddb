/* ectl_fmt.h — how elasticctl shows what the agent answers: the status
 * table, one line per event, the dump_traceback sections, the new lines of a
 * followed log, and the plain table renderer under them. Pure: JSON or text
 * in, text out (to a FILE the caller chooses); no clock but the one given. */
#pragma once

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

/* SGR colour codes for table cells (without "\033[" and "m"). */
#define ECTL_GREEN "32"
#define ECTL_RED "31"
#define ECTL_YELLOW "33"
#define ECTL_BOLD "1"

/* A table: ncols headers, then nrows * ncols cells (row-major; NULL shows as
 * "-"), and optionally a colour per cell (NULL: none). */
struct ectl_table {
	size_t ncols;
	size_t nrows;
	const char *const *header;
	const char **cells;
	const char **colors;
};

/* Print t left-aligned, columns two spaces apart, the last column unpadded
 * and no trailing blanks; with color the header is bold and coloured cells
 * are wrapped in their SGR codes (widths count only the text). */
void ectl_table_print(FILE *f, const struct ectl_table *t, bool color);

/* Print the agent's status object (elasticd-ctl(7) "status") as a table of
 * the node, then one row per local rank. A worker's "last_output_age_s"
 * (a number the caller may add: seconds since its log last changed) fills
 * the OUTPUT column. Returns 0, or -EINVAL when status is not an object. */
int ectl_fmt_status(FILE *f, json_t *status, bool color);

/* Print the nodes handler's object (elasticd-ctl(7) "nodes"): the job,
 * this node (marked "*"), round, the copy's age and the liveness kind, the
 * number quarantined, then one row per participant (group rank order),
 * waiting node and spare: list, group rank, node, heartbeat age, alive.
 * Returns 0, or -EINVAL when nodes is not an object. */
int ectl_fmt_nodes(FILE *f, json_t *nodes, bool color);

/* text[0..len) with what a terminal would act on made visible, each such
 * byte as "\xHH" (lower-case hex): C0 controls but '\n' and '\t', DEL,
 * C1 controls (bytes 0x80-0x9f that are not part of a valid UTF-8
 * sequence), and U+0080-U+009F encoded in UTF-8 (both bytes). Other bytes,
 * valid UTF-8 and stray non-control bytes included, are kept; so is '\\'.
 * For text that workers control, on its way to a terminal. Returns a
 * malloc'd, NUL-terminated string. */
char *ectl_fmt_visible(const char *text, size_t len);

/* One readable line (with its '\n') for one line of the events handler:
 * "#<seq> <time> <source> <name> <key metadata>" for torch's Event (time
 * from its timestamp in milliseconds, shown in local time), RDZV and the
 * node state and message for an RdzvEvent (which carries no time), or a
 * note for {"dropped": K}. A line that is not such JSON comes back as it
 * is. visible: passed through ectl_fmt_visible() (for a terminal). Returns
 * a malloc'd string. */
char *ectl_fmt_event(const char *line, bool visible);

/* Print dump_traceback's reply (local rank → {pid, status, traceback |
 * error}) as one section per local rank, in rank order; visible: what the
 * workers sent through ectl_fmt_visible() (for a terminal). Returns 0, or
 * -EINVAL when it is not an object. */
int ectl_fmt_dump(FILE *f, json_t *reply, bool visible);

/* For `logs -f`: prev and cur are two readings of a log's last lines, cur the
 * later. Returns the offset in cur where the lines not in prev begin: after
 * the longest run of cur's first lines that prev ends with, or 0 (all of cur
 * is new) when prev is empty or they share nothing, as after a restart. Only
 * complete lines count; see ectl_fmt_complete(). */
size_t ectl_fmt_new_lines(const char *prev, const char *cur);

/* The length of text up to and including its last '\n' (0 without one). */
size_t ectl_fmt_complete(const char *text);

/* "3s", "4m 05s", "2h 03m", "5d 04h": a duration for people. Static
 * storage is not used: writes into buf of size n and returns it. */
char *ectl_fmt_duration(double seconds, char *buf, size_t n);
