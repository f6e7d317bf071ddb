/* rdzv_summary.c — a state's summary (rdzv_state.h): what a node running a
 * round needs of the state in a few bytes, for c10d's gen keys. Pure: no
 * I/O, no clock. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "rdzv_state.h"

struct rdzv_summary
rdzv_summary_of(const struct rdzv_state *st)
{
	return (struct rdzv_summary){
		.round = st->round,
		.complete = st->complete,
		.closed = st->closed,
		.n_participants = st->n_participants,
		.n_wait_list = st->n_wait_list,
	};
}

size_t
rdzv_summary_encode(const struct rdzv_summary *sum, char *buf)
{
	int n = snprintf(buf, RDZV_SUMMARY_MAX, "%" PRId64 " %d %d %zu %zu", sum->round,
			 sum->complete, sum->closed, sum->n_participants, sum->n_wait_list);

	return n > 0 ? (size_t)n : 0;
}

int
rdzv_summary_decode(const char *buf, size_t len, struct rdzv_summary *ret)
{
	static const int64_t hi[] = {INT64_MAX, 1, 1, RDZV_MAX_NODES, RDZV_MAX_NODES};
	int64_t v[5];
	size_t i = 0;

	if (len == 0) {
		return -EBADMSG;
	}
	for (size_t k = 0; k < 5; k++) {
		const char *sp = k < 4 ? memchr(buf + i, ' ', len - i) : NULL;
		size_t end = sp ? (size_t)(sp - buf) : len;

		if ((k < 4 && !sp) || rdzv_parse_i64(buf + i, end - i, 0, hi[k], &v[k]) < 0) {
			return -EBADMSG;
		}
		i = end + 1;
	}
	*ret = (struct rdzv_summary){
		.round = v[0],
		.complete = v[1] == 1,
		.closed = v[2] == 1,
		.n_participants = (size_t)v[3],
		.n_wait_list = (size_t)v[4],
	};
	return 0;
}
