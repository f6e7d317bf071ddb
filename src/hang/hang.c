/* hang.c — the hang rules' per-rank state and deadlines. Pure (hang.h). */
#include "hang.h"

#include <errno.h>
#include <regex.h>
#include <stdlib.h>
#include <string.h>

#include "util.h"

struct rank {
	uint64_t start;
	bool output_seen;
	uint64_t last_output;
	bool matched;
	uint64_t last_match;
	bool done;
	char *line[2]; /* the open line of each stream, HANG_LINE_MAX + 1 bytes */
	size_t line_len[2];
};

struct hang {
	struct hang_rules rules;
	char *cadence;
	bool have_re;
	regex_t re;
	struct rank *ranks;
	size_t n_ranks;
	uint64_t armed; /* what hang_next_deadline last gave */
};

const char *
hang_rule_name(enum hang_rule r)
{
	switch (r) {
	case HANG_RULE_SILENCE:
		return "silence";
	case HANG_RULE_CADENCE:
		return "cadence";
	case HANG_RULE_CADENCE_START:
		return "cadence-start";
	}
	return "?";
}

bool
hang_rules_on(const struct hang_rules *r)
{
	return r->silence_s > 0 || (r->cadence && *r->cadence);
}

int
hang_rules_check(const struct hang_rules *r, char **reterr)
{
	bool cadence = r->cadence && *r->cadence;
	regex_t re;
	int rc;

	if (!cadence) {
		if (r->cadence_s > 0 || r->cadence_start_s > 0) {
			*reterr = xstrdup("--hang-cadence-interval and --hang-cadence-start need "
					  "--hang-cadence");
			return -EINVAL;
		}
		return 0;
	}
	if (r->cadence_s <= 0) {
		*reterr = xstrdup("--hang-cadence needs --hang-cadence-interval SECONDS (> 0)");
		return -EINVAL;
	}
	rc = regcomp(&re, r->cadence, REG_EXTENDED | REG_NOSUB);
	if (rc != 0) {
		char msg[256];

		regerror(rc, &re, msg, sizeof(msg));
		*reterr = xasprintf("--hang-cadence: '%s' is not a regular expression: %s",
				    r->cadence, msg);
		return -EINVAL;
	}
	regfree(&re);
	return 0;
}

struct hang *
hang_new(const struct hang_rules *rules, size_t n_ranks, uint64_t now, char **reterr)
{
	struct hang *h;

	if (hang_rules_check(rules, reterr) < 0) {
		return NULL;
	}
	h = xcalloc(1, sizeof(*h));
	h->rules = *rules;
	if (rules->cadence && *rules->cadence) {
		h->cadence = xstrdup(rules->cadence);
		h->rules.cadence = h->cadence;
		/* Checked above: it compiles. */
		h->have_re = regcomp(&h->re, h->cadence, REG_EXTENDED | REG_NOSUB) == 0;
	} else {
		h->rules.cadence = NULL;
	}
	h->ranks = xcalloc(n_ranks ? n_ranks : 1, sizeof(*h->ranks));
	h->n_ranks = n_ranks;
	for (size_t i = 0; i < n_ranks; i++) {
		h->ranks[i].start = now;
	}
	h->armed = HANG_NEVER;
	return h;
}

void
hang_free(struct hang *h)
{
	if (!h) {
		return;
	}
	for (size_t i = 0; i < h->n_ranks; i++) {
		free(h->ranks[i].line[0]);
		free(h->ranks[i].line[1]);
	}
	if (h->have_re) {
		regfree(&h->re);
	}
	free(h->ranks);
	free(h->cadence);
	free(h);
}

static uint64_t
after(uint64_t t, double s)
{
	return t + (uint64_t)(s * (double)USEC_PER_SEC);
}

/* The rank's deadline and the rule it belongs to. */
static uint64_t
rank_deadline(const struct hang *h, const struct rank *r, enum hang_rule *ret_rule)
{
	uint64_t best = HANG_NEVER, d;

	if (r->done) {
		return HANG_NEVER;
	}
	if (h->rules.silence_s > 0 && r->output_seen) {
		best = after(r->last_output, h->rules.silence_s);
		*ret_rule = HANG_RULE_SILENCE;
	}
	if (!h->have_re) {
		return best;
	}
	if (r->matched) {
		d = after(r->last_match, h->rules.cadence_s);
		if (d < best) {
			best = d;
			*ret_rule = HANG_RULE_CADENCE;
		}
	} else if (h->rules.cadence_start_s > 0) {
		d = after(r->start, h->rules.cadence_start_s);
		if (d < best) {
			best = d;
			*ret_rule = HANG_RULE_CADENCE_START;
		}
	}
	return best;
}

/* A whole line (or its first HANG_LINE_MAX bytes) of rank r ended at now. */
static void
line_end(struct hang *h, struct rank *r, int s, uint64_t now)
{
	if (r->line_len[s] > 0) {
		r->line[s][r->line_len[s]] = '\0';
		if (regexec(&h->re, r->line[s], 0, NULL, 0) == 0) {
			r->matched = true;
			r->last_match = now;
		}
	}
	r->line_len[s] = 0;
}

/* Split buf into lines ('\n' or '\r' ends one) and match each. */
static void
feed_lines(struct hang *h, struct rank *r, int s, const char *buf, size_t len, uint64_t now)
{
	if (!r->line[s]) {
		r->line[s] = xcalloc(1, HANG_LINE_MAX + 1);
	}
	while (len > 0) {
		const char *nl = memchr(buf, '\n', len);
		const char *cr = memchr(buf, '\r', nl ? (size_t)(nl - buf) : len);
		const char *end = cr ? cr : nl;
		size_t n = end ? (size_t)(end - buf) : len;
		size_t room = HANG_LINE_MAX - r->line_len[s];
		size_t take = n < room ? n : room;

		memcpy(r->line[s] + r->line_len[s], buf, take);
		r->line_len[s] += take;
		if (!end) {
			return;
		}
		line_end(h, r, s, now);
		buf = end + 1;
		len -= n + 1;
	}
}

bool
hang_feed(struct hang *h, int local_rank, int stream, const char *buf, size_t len, uint64_t now)
{
	struct rank *r;
	enum hang_rule rule;

	if (local_rank < 0 || (size_t)local_rank >= h->n_ranks || len == 0) {
		return false;
	}
	r = &h->ranks[local_rank];
	if (r->done) {
		return false;
	}
	r->output_seen = true;
	r->last_output = now;
	if (h->have_re && buf && (stream == 0 || stream == 1)) {
		feed_lines(h, r, stream, buf, len, now);
	}
	return rank_deadline(h, r, &rule) < h->armed;
}

void
hang_rank_done(struct hang *h, int local_rank)
{
	if (local_rank >= 0 && (size_t)local_rank < h->n_ranks) {
		h->ranks[local_rank].done = true;
	}
}

uint64_t
hang_next_deadline(struct hang *h)
{
	uint64_t best = HANG_NEVER;
	enum hang_rule rule;

	for (size_t i = 0; i < h->n_ranks; i++) {
		uint64_t d = rank_deadline(h, &h->ranks[i], &rule);

		if (d < best) {
			best = d;
		}
	}
	h->armed = best;
	return best;
}

/* When the rule's clock started for rank r: its last output, match or start. */
static uint64_t
rule_since(const struct rank *r, enum hang_rule rule)
{
	switch (rule) {
	case HANG_RULE_SILENCE:
		return r->last_output;
	case HANG_RULE_CADENCE:
		return r->last_match;
	case HANG_RULE_CADENCE_START:
		return r->start;
	}
	return r->start;
}

static double
rule_limit(const struct hang_rules *rules, enum hang_rule rule)
{
	switch (rule) {
	case HANG_RULE_SILENCE:
		return rules->silence_s;
	case HANG_RULE_CADENCE:
		return rules->cadence_s;
	case HANG_RULE_CADENCE_START:
		return rules->cadence_start_s;
	}
	return 0;
}

bool
hang_check(const struct hang *h, uint64_t now, struct hang_fired *ret)
{
	uint64_t best = HANG_NEVER;
	enum hang_rule rule = HANG_RULE_SILENCE, best_rule = HANG_RULE_SILENCE;
	size_t best_i = 0;

	for (size_t i = 0; i < h->n_ranks; i++) {
		uint64_t d = rank_deadline(h, &h->ranks[i], &rule);

		if (d <= now && d < best) {
			best = d;
			best_rule = rule;
			best_i = i;
		}
	}
	if (best == HANG_NEVER) {
		return false;
	}
	*ret = (struct hang_fired){
		.rule = best_rule,
		.local_rank = (int)best_i,
		.limit_s = rule_limit(&h->rules, best_rule),
		.idle_s = (double)(now - rule_since(&h->ranks[best_i], best_rule)) /
			  (double)USEC_PER_SEC,
	};
	return true;
}

bool
hang_rank(const struct hang *h, int local_rank, struct hang_rank_view *ret)
{
	const struct rank *r;
	enum hang_rule rule;

	if (local_rank < 0 || (size_t)local_rank >= h->n_ranks) {
		return false;
	}
	r = &h->ranks[local_rank];
	*ret = (struct hang_rank_view){
		.output_seen = r->output_seen,
		.last_output = r->last_output,
		.matched = r->matched,
		.last_match = r->last_match,
		.deadline = rank_deadline(h, r, &rule),
		.done = r->done,
	};
	return true;
}

char *
hang_describe(const struct hang_rules *rules, const struct hang_fired *f)
{
	switch (f->rule) {
	case HANG_RULE_SILENCE:
		return xasprintf("hang: silence (no output for %g s) on local rank %d", f->limit_s,
				 f->local_rank);
	case HANG_RULE_CADENCE:
		return xasprintf("hang: cadence '%s' (no match for %g s) on local rank %d",
				 rules->cadence ? rules->cadence : "", f->limit_s, f->local_rank);
	case HANG_RULE_CADENCE_START:
		return xasprintf("hang: cadence '%s' (no first match for %g s) on local rank %d",
				 rules->cadence ? rules->cadence : "", f->limit_s, f->local_rank);
	}
	return xstrdup("hang");
}
