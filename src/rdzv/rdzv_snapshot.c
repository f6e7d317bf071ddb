/* rdzv_snapshot.c — see rdzv_snapshot.h. */
#include "rdzv_snapshot.h"

#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "util.h"

void
rdzv_snapshot_release(struct rdzv_snapshot *s)
{
	free(s->self);
	free(s->coordinator);
	rdzv_state_release(&s->st);
	for (size_t i = 0; s->dead && s->dead[i]; i++) {
		free(s->dead[i]);
	}
	free(s->dead);
	memset(s, 0, sizeof(*s));
	rdzv_state_init(&s->st);
}

static bool
is_dead(const struct rdzv_snapshot *s, const char *name)
{
	for (size_t i = 0; s->dead && s->dead[i]; i++) {
		if (strcmp(s->dead[i], name) == 0) {
			return true;
		}
	}
	return false;
}

/* usec as seconds, never negative (clocks of two hosts). */
static json_t *
seconds(int64_t usec)
{
	return json_real((double)(usec < 0 ? 0 : usec) / 1e6);
}

/* One member: its descriptor, parts and liveness (rank < 0: none). */
static json_t *
member_json(const struct rdzv_snapshot *s, const struct rdzv_node *n, int rank, int64_t now)
{
	json_t *o = json_object();
	json_t *age = NULL;
	bool alive = false;

	json_object_set_new(o, "node", json_string(n->name));
	json_object_set_new(o, "addr", json_stringn(n->name, n->addr_len));
	json_object_set_new(o, "pid", json_integer(n->pid));
	if (rank >= 0) {
		json_object_set_new(o, "group_rank", json_integer(rank));
	}
	switch (s->liveness) {
	case RDZV_LIVENESS_HEARTBEAT: {
		long i = rdzv_state_find_heartbeat(&s->st, n);

		if (i >= 0 && s->st.heartbeats[i].usec > 0) {
			int64_t hb = s->st.heartbeats[i].usec;

			age = seconds(now - hb);
			/* As of the copy: a later heartbeat is not in it. */
			alive = s->read_usec >= 0 &&
				s->read_usec - hb <= (int64_t)s->heartbeat_timeout_usec;
		}
		break;
	}
	case RDZV_LIVENESS_LEASE:
		alive = !is_dead(s, n->name);
		break;
	}
	json_object_set_new(o, "heartbeat_age_s", age ? age : json_null());
	json_object_set_new(o, "alive", json_boolean(alive));
	return o;
}

static const char *
liveness_name(enum rdzv_liveness l)
{
	switch (l) {
	case RDZV_LIVENESS_HEARTBEAT:
		return "heartbeat";
	case RDZV_LIVENESS_LEASE:
		return "lease";
	}
	return "?";
}

/* Participants in group-rank order (the state keeps them in node order,
 * which is rank order once the round is complete; sort anyway). */
static json_t *
participants_json(const struct rdzv_snapshot *s, int64_t now)
{
	json_t *a = json_array();
	size_t n = s->st.n_participants;
	size_t *order = xcalloc(n ? n : 1, sizeof(*order));

	for (size_t i = 0; i < n; i++) {
		size_t j = i;

		while (j > 0 &&
		       s->st.participants[order[j - 1]].rank > s->st.participants[i].rank) {
			order[j] = order[j - 1];
			j--;
		}
		order[j] = i;
	}
	for (size_t i = 0; i < n; i++) {
		const struct rdzv_participant *p = &s->st.participants[order[i]];

		json_array_append_new(a, member_json(s, &p->node, p->rank, now));
	}
	free(order);
	return a;
}

static json_t *
list_json(const struct rdzv_snapshot *s, const struct rdzv_node *nodes, size_t n, int64_t now)
{
	json_t *a = json_array();

	for (size_t i = 0; i < n; i++) {
		json_array_append_new(a, member_json(s, &nodes[i], -1, now));
	}
	return a;
}

/* The quarantined hosts: {node, host, until (epoch seconds), remaining_s,
 * count, active}. */
static json_t *
quarantine_json(const struct rdzv_snapshot *s, int64_t now_usec)
{
	json_t *arr = json_array();

	for (size_t i = 0; i < s->st.n_quarantine; i++) {
		const struct rdzv_quarantine *q = &s->st.quarantine[i];
		int64_t left = q->until > now_usec ? q->until - now_usec : 0;

		json_array_append_new(
			arr, json_pack("{s:s, s:s%, s:f, s:f, s:i, s:b}", "node", q->node.name,
				       "host", q->node.name, q->node.addr_len, "until",
				       (double)q->until / 1e6, "remaining_s", (double)left / 1e6,
				       "count", q->count, "active", left > 0));
	}
	return arr;
}

json_t *
rdzv_snapshot_json(const struct rdzv_snapshot *s, int64_t now_usec)
{
	json_t *o = json_object();

	json_object_set_new(o, "backend", json_string(s->backend ? s->backend : ""));
	json_object_set_new(o, "node", s->self ? json_string(s->self) : json_null());
	json_object_set_new(o, "round", json_integer(s->st.round));
	json_object_set_new(o, "complete", json_boolean(s->st.complete));
	json_object_set_new(o, "closed", json_boolean(s->st.closed));
	json_object_set_new(o, "state_age_s",
			    s->read_usec < 0 ? json_null() : seconds(now_usec - s->read_usec));
	json_object_set_new(o, "liveness", json_string(liveness_name(s->liveness)));
	json_object_set_new(o, "coordinator",
			    s->coordinator ? json_string(s->coordinator) : json_null());
	json_object_set_new(o, "participants", participants_json(s, now_usec));
	json_object_set_new(o, "wait_list",
			    list_json(s, s->st.wait_list, s->st.n_wait_list, now_usec));
	json_object_set_new(o, "spares",
			    list_json(s, s->st.redundancy_list, s->st.n_redundancy_list, now_usec));
	json_object_set_new(o, "quarantined", quarantine_json(s, now_usec));
	return o;
}
