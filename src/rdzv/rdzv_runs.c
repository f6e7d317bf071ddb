/* rdzv_runs.c — run-length node lists of the rank exchange (rdzv_runs.h). */
#include <errno.h>
#include <limits.h>
#include <stdint.h>
#include <string.h>

#include "rdzv_runs.h"
#include "util.h"

json_t *
rdzv_runs_encode(const struct ranks_run *runs, size_t n_runs)
{
	json_t *json = json_array();

	for (size_t i = 0; i < n_runs; i++) {
		json_array_append_new(json,
				      json_pack("[siI]", runs[i].role, runs[i].local_world_size,
						(json_int_t)runs[i].count));
	}
	return json;
}

int
rdzv_runs_decode(const json_t *json, size_t n, struct ranks_run **ret_runs, size_t *ret_n_runs,
		 char ***ret_roles)
{
	struct ranks_run *runs;
	char **roles;
	size_t i, total = 0;
	int64_t world = 0;
	json_t *run;

	if (!json_is_array(json) || json_array_size(json) == 0) {
		return -EBADMSG;
	}
	json_array_foreach(json, i, run)
	{
		json_t *role = json_array_get(run, 0), *lws = json_array_get(run, 1),
		       *count = json_array_get(run, 2);

		if (json_array_size(run) != 3 || !json_is_string(role) || !json_is_integer(lws) ||
		    json_integer_value(lws) < 1 ||
		    json_integer_value(lws) > RANKS_MAX_LOCAL_WORLD || !json_is_integer(count) ||
		    json_integer_value(count) < 1 ||
		    (size_t)json_integer_value(count) > n - total) {
			return -EBADMSG;
		}
		total += (size_t)json_integer_value(count);
		/* Both factors are bounded (2^20, n): no overflow before the check. */
		world += json_integer_value(lws) * json_integer_value(count);
		if (world > INT_MAX) {
			return -EBADMSG;
		}
	}
	if (total != n) {
		return -EBADMSG;
	}
	runs = xcalloc(json_array_size(json) + 1, sizeof(*runs));
	roles = xcalloc(json_array_size(json) + 1, sizeof(*roles));
	json_array_foreach(json, i, run)
	{
		/* One string per run: a member decodes a job of alike nodes
		 * with one allocation for the role, not one per node. */
		roles[i] = xstrdup(json_string_value(json_array_get(run, 0)));
		runs[i] = (struct ranks_run){roles[i],
					     (int)json_integer_value(json_array_get(run, 1)),
					     (size_t)json_integer_value(json_array_get(run, 2))};
	}
	*ret_runs = runs;
	*ret_n_runs = json_array_size(json);
	*ret_roles = roles;
	return 0;
}

void
rdzv_runs_copy(const struct ranks_run *runs, size_t n_runs, struct ranks_run **ret_runs,
	       char ***ret_roles)
{
	struct ranks_run *copy = xcalloc(n_runs + 1, sizeof(*copy));
	char **roles = xcalloc(n_runs + 1, sizeof(*roles));

	for (size_t i = 0; i < n_runs; i++) {
		roles[i] = xstrdup(runs[i].role);
		copy[i] = runs[i];
		copy[i].role = roles[i];
	}
	*ret_runs = copy;
	*ret_roles = roles;
}

void
rdzv_runs_alike(const char *role, int local_world_size, size_t n, struct ranks_run **ret_runs,
		size_t *ret_n_runs, char ***ret_roles)
{
	struct ranks_run *runs = xcalloc(1, sizeof(*runs));
	char **roles = xcalloc(2, sizeof(*roles));

	roles[0] = xstrdup(role);
	runs[0] = (struct ranks_run){roles[0], local_world_size, n};
	*ret_runs = runs;
	*ret_n_runs = 1;
	*ret_roles = roles;
}
