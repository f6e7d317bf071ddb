/* fuzz_rdzv_state.c — libFuzzer target: the input is a rendezvous state value
 * read from the store, or a gen key's summary of one. Whatever decodes must
 * encode back to the same bytes, and every decision and action must run on a
 * state without breaking the sorted sets. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "rdzv_dynamic.h"
#include "rdzv_state.h"
#include "util.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void
check_sorted(const struct rdzv_state *st)
{
	for (size_t i = 1; i < st->n_participants; i++) {
		if (rdzv_node_cmp(&st->participants[i - 1].node, &st->participants[i].node) >= 0) {
			abort();
		}
	}
	for (size_t i = 1; i < st->n_heartbeats; i++) {
		if (rdzv_node_cmp(&st->heartbeats[i - 1].node, &st->heartbeats[i].node) >= 0) {
			abort();
		}
	}
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const struct rdzv_settings s = {2, 4, 30000000, 5000000, 3, 0};
	struct rdzv_state st;
	struct rdzv_node me;
	struct rdzv_summary sum;
	char sbuf[RDZV_SUMMARY_MAX];
	char *enc;
	size_t len;

	if (rdzv_summary_decode((const char *)data, size, &sum) == 0 &&
	    (rdzv_summary_encode(&sum, sbuf) != size || memcmp(sbuf, data, size) != 0)) {
		abort();
	}
	if (rdzv_state_decode((const char *)data, size, &st) < 0) {
		return 0;
	}
	enc = rdzv_state_encode(&st, &len);
	if (len != size || memcmp(enc, data, size) != 0) {
		abort();
	}
	free(enc);
	if (rdzv_node_init(&me, "me", 1, 0) < 0) {
		abort();
	}
	for (int op = RDZV_OP_EXIT; op <= RDZV_OP_REPORT_FAILURE; op++) {
		struct rdzv_state cp;
		/* The closing record goes with every closing the actions make. */
		static const struct rdzv_close_record rec = {
			{NULL, 0, 0, 0, 0}, 1, 3, 1, 77, -9, 9};
		static const struct rdzv_failure fail = {{NULL, 0, 0, 0, 0}, 3, 999000000};
		struct rdzv_ctx ctx = {&s,   &me,  1000000000, 500000000, 510000000,
				       &rec, NULL, "me",       &fail};
		enum rdzv_action a;

		rdzv_state_copy(&cp, &st);
		(void)rdzv_sanitize(&cp, &s, ctx.now_wall, NULL);
		a = rdzv_decide((enum rdzv_op)op, &cp, &ctx);
		(void)rdzv_apply(&cp, a, &ctx);
		if (cp.closed_by) {
			char *who = rdzv_close_record_describe(cp.closed_by);
			size_t n;

			free(who);
			free(rdzv_state_encode(&cp, &n));
		}
		(void)rdzv_next_wake_usec((enum rdzv_op)op, &cp, &ctx);
		check_sorted(&cp);
		rdzv_state_release(&cp);
	}
	rdzv_node_release(&me);
	rdzv_state_release(&st);
	return 0;
}
