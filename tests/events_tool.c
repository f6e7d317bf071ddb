/* events_tool.c — elasticd's event model from the command line, for the
 * integration and end-to-end tests and the bench.
 *
 *   events_tool check [FILE...]
 *	Read event-log lines (FILE or stdin) with elasticd's strict parser,
 *	serialise each again and require the same bytes: what torch's
 *	Event.serialize / RdzvEvent.serialize write is canonical, so every line
 *	either of them wrote passes. Prints "<n> lines: <e> Event, <r> RdzvEvent"
 *	and, per bad line, "<file>:<line>: <why>" on stderr; exit 1 on any.
 *   events_tool write
 *	Print, one per line, the events elasticd builds for a fixed set of
 *	inputs (torchrun's status events, an RdzvEvent, odd values), for torch
 *	to read back.
 *   events_tool bench [N] [PATH]
 *	Record N (default 200000) torchrun worker status events through the
 *	file sink at PATH (default a new temporary file, removed), then through
 *	a disabled recorder (null sink, no subscriber) and a ring-only one;
 *	print events/s for each. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "events.h"
#include "util.h"

static int
check_stream(FILE *f, const char *name, size_t *ret_events, size_t *ret_rdzv)
{
	char *buf = NULL;
	size_t cap = 0, lineno = 0;
	ssize_t n;
	int bad = 0;

	while ((n = getline(&buf, &cap, f)) >= 0) {
		struct events_line l;
		char *err = NULL, *again;
		size_t len = (size_t)n;

		lineno++;
		if (len > 0 && buf[len - 1] == '\n') {
			len--;
		}
		if (events_parse_line(buf, len, &l, &err) < 0) {
			fprintf(stderr, "%s:%zu: %s\n", name, lineno, err);
			free(err);
			bad++;
			continue;
		}
		again = events_line_serialize(&l, NULL);
		if (strlen(again) != len || memcmp(again, buf, len) != 0) {
			fprintf(stderr,
				"%s:%zu: reads back as different bytes:\n  in:  %.*s\n  out: %s\n",
				name, lineno, (int)len, buf, again);
			bad++;
		} else if (l.kind == EVENTS_KIND_EVENT) {
			(*ret_events)++;
		} else {
			(*ret_rdzv)++;
		}
		free(again);
		events_line_release(&l);
	}
	free(buf);
	return bad;
}

static int
cmd_check(int argc, char **argv)
{
	size_t events = 0, rdzv = 0;
	int bad = 0;

	if (argc == 0) {
		bad = check_stream(stdin, "<stdin>", &events, &rdzv);
	}
	for (int i = 0; i < argc; i++) {
		FILE *f = fopen(argv[i], "re");

		if (!f) {
			fprintf(stderr, "events_tool: %s: %s\n", argv[i], strerror(errno));
			return 1;
		}
		bad += check_stream(f, argv[i], &events, &rdzv);
		fclose(f);
	}
	printf("%zu lines: %zu Event, %zu RdzvEvent, %d bad\n", events + rdzv + (size_t)bad, events,
	       rdzv, bad);
	return bad ? 1 : 0;
}

static const struct events_status status_template = {
	.state = "FAILED",
	.source = EVENT_SOURCE_WORKER,
	.timestamp = 1700000000123,
	.run_id = "job-7",
	.role = "trainer",
	.hostname = "node1.example.com",
	.rdzv_backend = "c10d",
	.entry_point = "python3",
	.group_rank = 1,
	.group_world_size = 2,
	.total_run_time = 12,
	.agent_restarts = 2,
	.raw_error = "{\"message\": {\"message\": \"ValueError: boom\", \"extraInfo\": "
		     "{\"py_callstack\": \"Traceback (most recent call last):\\n  ...\", "
		     "\"timestamp\": \"1700000000\"}}}",
	.worker = true,
	.global_rank = 3,
	.local_rank = 1,
	.role_rank = 3,
	.role_world_size = 4,
	.worker_pid = 4242,
};

static void
print_event(struct elastic_event *ev)
{
	char *s = elastic_event_serialize(ev, NULL);

	puts(s);
	free(s);
	elastic_event_release(ev);
}

static int
cmd_write(void)
{
	struct events_status st = status_template;
	struct elastic_event ev;
	struct rdzv_event rv = {
		.name = "rdzv_c10d.c:next_rendezvous",
		.run_id = "job-7",
		.message =
			"The node 'node1.example.com_4242_0' has joined round 3 of the rendezvous "
			"'job-7' as rank 1 in a world of size 2.",
		.hostname = "node1.example.com",
		.pid = 4242,
		.node_state = NODE_STATE_RUNNING,
		.has_rank = true,
		.rank = 1,
		.has_local_id = true,
		.local_id = 0,
	};
	char *s;

	elastic_event_init_status(&ev, &st);
	print_event(&ev);
	st.source = EVENT_SOURCE_AGENT;
	st.worker = false;
	st.state = "RENDEZVOUS";
	st.raw_error = NULL;
	st.has_duration = true;
	st.duration_ms = 1.25;
	elastic_event_init_status(&ev, &st);
	print_event(&ev);

	elastic_event_init(&ev, "elasticd.worker.exited", EVENT_SOURCE_WORKER, 1700000000999);
	elastic_event_set_string(&ev, "unicode", "na\xc3\xafve \xe2\x98\x83 \xf0\x9f\x98\x80 \x7f");
	elastic_event_set_string(&ev, "quotes", "\"'\\/\t\n");
	elastic_event_set_int(&ev, "min", -9223372036854775807LL - 1);
	elastic_event_set_double(&ev, "third", 1.0 / 3.0);
	elastic_event_set_double(&ev, "big", 1e300);
	elastic_event_set_double(&ev, "tiny", 5e-324);
	elastic_event_set_double(&ev, "whole", 42.0);
	elastic_event_set_bool(&ev, "no", false);
	elastic_event_set_null(&ev, "none");
	print_event(&ev);

	s = rdzv_event_serialize(&rv, NULL);
	puts(s);
	free(s);
	rv.node_state = NODE_STATE_FAILED;
	rv.has_rank = false;
	rv.message = rv.error_trace = "RendezvousTimeoutError: timed out";
	rv.master_endpoint = "node0:29400";
	s = rdzv_event_serialize(&rv, NULL);
	puts(s);
	free(s);
	return 0;
}

static double
bench_run(struct events *e, long n)
{
	struct events_status st = status_template;
	uint64_t t0 = now_usec();

	for (long i = 0; i < n; i++) {
		struct elastic_event ev;

		/* What the agent does: check, then build and record. */
		if (!events_enabled(e)) {
			continue;
		}
		st.worker_pid = 1000 + i;
		st.timestamp = (int64_t)(wall_usec() / USEC_PER_MSEC);
		elastic_event_init_status(&ev, &st);
		if (events_record(e, &ev) < 0) {
			fprintf(stderr, "events_tool: record failed\n");
			exit(1);
		}
		elastic_event_release(&ev);
	}
	return (double)(now_usec() - t0) / 1e6;
}

static void
noop_cb(const struct events_entry *entry, void *arg)
{
}

static int
cmd_bench(int argc, char **argv)
{
	long n = argc > 0 ? atol(argv[0]) : 200000;
	char tmpl[] = "/tmp/events_bench.XXXXXX";
	const char *path = argc > 1 ? argv[1] : NULL;
	struct events *e;
	char *err = NULL;
	double secs;
	long size;
	FILE *f;

	if (n <= 0) {
		fprintf(stderr, "events_tool: bench: N must be > 0\n");
		return 2;
	}
	if (!path) {
		int fd = mkstemp(tmpl);

		if (fd < 0) {
			perror("mkstemp");
			return 1;
		}
		close(fd);
		path = tmpl;
	}
	e = events_new(EVENTS_RING_DEFAULT);
	if (events_set_sink(e, EVENTS_SINK_FILE, path, &err) < 0) {
		fprintf(stderr, "events_tool: %s\n", err);
		return 1;
	}
	secs = bench_run(e, n);
	events_free(e);
	f = fopen(path, "re");
	fseek(f, 0, SEEK_END);
	size = ftell(f);
	fclose(f);
	printf("file sink:  %ld events in %.3f s = %.0f events/s (%.1f MB/s, %ld bytes/event, "
	       "ring %d)\n",
	       n, secs, (double)n / secs, (double)size / secs / 1e6, size / n, EVENTS_RING_DEFAULT);
	if (path == tmpl) {
		unlink(tmpl);
	}

	e = events_new(EVENTS_RING_DEFAULT);
	events_subscribe(e, noop_cb, NULL);
	secs = bench_run(e, n);
	printf("ring only:  %ld events in %.3f s = %.0f events/s (null sink, one subscriber)\n", n,
	       secs, (double)n / secs);
	events_free(e);

	e = events_new(EVENTS_RING_DEFAULT);
	secs = bench_run(e, n * 100);
	printf("disabled:   %ld events in %.3f s = %.0f events/s (null sink, no subscriber: "
	       "nothing built)\n",
	       n * 100, secs, (double)n * 100 / (secs > 0 ? secs : 1e-9));
	events_free(e);
	return 0;
}

int
main(int argc, char **argv)
{
	json_object_seed(0);
	if (argc >= 2 && strcmp(argv[1], "check") == 0) {
		return cmd_check(argc - 2, argv + 2);
	}
	if (argc == 2 && strcmp(argv[1], "write") == 0) {
		return cmd_write();
	}
	if (argc >= 2 && strcmp(argv[1], "bench") == 0) {
		return cmd_bench(argc - 2, argv + 2);
	}
	fprintf(stderr, "usage: events_tool check [FILE...] | write | bench [N] [PATH]\n");
	return 2;
}
