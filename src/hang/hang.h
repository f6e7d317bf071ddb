/* hang.h — zero-code hang rules over the workers' output, pure: per local
 * rank, when it last wrote a byte and when a line last matched the cadence
 * regular expression; from those, each rank's deadline and the rule that
 * fires when it passes. Time is an argument (CLOCK_MONOTONIC usec); nothing
 * here reads a clock, logs, or touches the event loop (the agent arms one
 * timer for hang_next_deadline and calls hang_check when it fires).
 *
 * Rules (either or both):
 *   silence  a rank that has written at least one byte writes none for
 *            silence_s seconds;
 *   cadence  once a line matched the regex, no line matches for
 *            cadence_s seconds; with cadence_start_s, the first match
 *            must come within that many seconds of the rank's start. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* A line longer than this is matched on its first HANG_LINE_MAX bytes. */
#define HANG_LINE_MAX 4096u

/* No deadline. */
#define HANG_NEVER UINT64_MAX

enum hang_rule {
	HANG_RULE_SILENCE,
	HANG_RULE_CADENCE,       /* no match for cadence_s after a match */
	HANG_RULE_CADENCE_START, /* no first match within cadence_start_s */
};
#define HANG_RULE_COUNT 3

/* "silence", "cadence", "cadence-start". Static storage. */
const char *hang_rule_name(enum hang_rule r);

/* The rules as configured; 0 / NULL turns one off. */
struct hang_rules {
	double silence_s;
	const char *cadence; /* POSIX extended regex, NULL: no cadence rule */
	double cadence_s;    /* needed with cadence */
	double cadence_start_s;
};

/* Whether any rule is on. */
bool hang_rules_on(const struct hang_rules *r);

/* Check the rules: a regex that regcomp refuses, a cadence without
 * cadence_s, or cadence_s / cadence_start_s without a cadence. Returns 0,
 * or -EINVAL with *reterr (malloc'd). */
int hang_rules_check(const struct hang_rules *r, char **reterr);

/* A rule that fired. */
struct hang_fired {
	enum hang_rule rule;
	int local_rank;
	double limit_s; /* the rule's seconds */
	double idle_s;  /* since the last output / match / start */
};

struct hang;

/* Watch n_ranks ranks, all started at now. Returns NULL with *reterr when
 * the rules do not check (hang_rules_check); rules is copied. */
struct hang *hang_new(const struct hang_rules *rules, size_t n_ranks, uint64_t now, char **reterr);
void hang_free(struct hang *h);

/* Rank local_rank's stream (0 stdout, 1 stderr) wrote len bytes buf at now;
 * buf may be NULL when only the count is known (no cadence matching).
 * Returns true when the rank's deadline is now earlier than the one
 * hang_next_deadline last gave (the caller re-arms its timer). */
bool hang_feed(struct hang *h, int local_rank, int stream, const char *buf, size_t len,
	       uint64_t now);

/* The rank is gone (it exited): no rule applies to it any more. */
void hang_rank_done(struct hang *h, int local_rank);

/* The earliest deadline over every rank, HANG_NEVER for none; remembered
 * for hang_feed's answer. */
uint64_t hang_next_deadline(struct hang *h);

/* The most overdue rank whose deadline is at or before now, into *ret.
 * Returns false (and leaves *ret) when none is. */
bool hang_check(const struct hang *h, uint64_t now, struct hang_fired *ret);

/* One rank's state, for the status. */
struct hang_rank_view {
	bool output_seen;
	uint64_t last_output; /* valid with output_seen */
	bool matched;         /* the cadence matched once */
	uint64_t last_match;  /* valid with matched */
	uint64_t deadline;    /* HANG_NEVER: none */
	bool done;
};

/* Rank local_rank's state into *ret. Returns false for a rank out of range. */
bool hang_rank(const struct hang *h, int local_rank, struct hang_rank_view *ret);

/* The root cause text: "hang: silence (no output for 30 s) on local rank 2",
 * "hang: cadence 'step [0-9]+' (no match for 60 s) on local rank 0" or
 * "hang: cadence 'step' (no first match for 300 s) on local rank 1".
 * Returns a malloc'd string. */
char *hang_describe(const struct hang_rules *rules, const struct hang_fired *f);
