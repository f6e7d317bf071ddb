/* fuzz_events.c — libFuzzer target: the input is one line of an event log.
 * Whatever parses must serialise to a line that parses to an equal event and
 * serialises to the same bytes again; it is also recorded through a recorder
 * with a ring and a subscriber. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "events.h"
#include "util.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void
count_cb(const struct events_entry *entry, void *arg)
{
	size_t *n = arg;

	if (strlen(entry->line) != entry->len) {
		abort();
	}
	(*n)++;
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct events_line l, again;
	struct events *e;
	char *err = NULL, *line, *line2;
	size_t len, len2, seen = 0;
	bool equal;

	if (events_parse_line((const char *)data, size, &l, &err) < 0) {
		if (!err) {
			abort();
		}
		free(err);
		return 0;
	}
	line = events_line_serialize(&l, &len);
	if (!line || strlen(line) != len || memchr(line, '\n', len)) {
		abort();
	}
	if (events_parse_line(line, len, &again, &err) < 0) {
		abort();
	}
	equal = l.kind == again.kind &&
		(l.kind == EVENTS_KIND_EVENT ? elastic_event_equal(&l.event, &again.event)
					     : rdzv_event_equal(&l.rdzv, &again.rdzv));
	line2 = events_line_serialize(&again, &len2);
	if (!equal || len2 != len || memcmp(line, line2, len) != 0) {
		abort();
	}

	e = events_new(2);
	events_subscribe(e, count_cb, &seen);
	if (l.kind == EVENTS_KIND_EVENT) {
		(void)events_record(e, &l.event);
	} else {
		(void)events_record_rdzv_event(e, &l.rdzv);
	}
	if (seen != 1 || strcmp(events_ring_get(e, 1)->line, line) != 0) {
		abort();
	}
	events_free(e);

	free(line);
	free(line2);
	events_line_release(&l);
	events_line_release(&again);
	return 0;
}
