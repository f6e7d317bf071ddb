/* rdzv_runs.c — run-length node lists of the rank exchange (rdzv_runs.h). */
#include <errno.h>
#include <string.h>

#include "rdzv_runs.h"
#include "util.h"

json_t *
rdzv_runs_encode(const struct ranks_node *nodes, size_t n)
{
	json_t *runs = json_array();
	size_t i = 0;

	while (i < n) {
		size_t k = i + 1;

		while (k < n && nodes[k].local_world_size == nodes[i].local_world_size &&
		       strcmp(nodes[k].role, nodes[i].role) == 0) {
			k++;
		}
		json_array_append_new(runs,
				      json_pack("[siI]", nodes[i].role, nodes[i].local_world_size,
						(json_int_t)(k - i)));
		i = k;
	}
	return runs;
}

int
rdzv_runs_decode(const json_t *runs, size_t n, struct ranks_node **ret_nodes, char ***ret_roles)
{
	struct ranks_node *nodes;
	char **roles;
	size_t i, at = 0, total = 0;
	json_t *run;

	if (!json_is_array(runs)) {
		return -EBADMSG;
	}
	json_array_foreach(runs, i, run)
	{
		json_t *role = json_array_get(run, 0), *lws = json_array_get(run, 1),
		       *count = json_array_get(run, 2);

		if (json_array_size(run) != 3 || !json_is_string(role) || !json_is_integer(lws) ||
		    json_integer_value(lws) < 1 || json_integer_value(lws) > 1 << 20 ||
		    !json_is_integer(count) || json_integer_value(count) < 1 ||
		    (size_t)json_integer_value(count) > n - total) {
			return -EBADMSG;
		}
		total += (size_t)json_integer_value(count);
	}
	if (total != n) {
		return -EBADMSG;
	}
	nodes = xcalloc(n + 1, sizeof(*nodes));
	roles = xcalloc(json_array_size(runs) + 1, sizeof(*roles));
	json_array_foreach(runs, i, run)
	{
		size_t count = (size_t)json_integer_value(json_array_get(run, 2));
		int lws = (int)json_integer_value(json_array_get(run, 1));

		/* One string per run: a member decodes a job of alike nodes
		 * with one allocation for the role, not one per node. */
		roles[i] = xstrdup(json_string_value(json_array_get(run, 0)));
		for (size_t k = 0; k < count; k++, at++) {
			nodes[at].role = roles[i];
			nodes[at].local_world_size = lws;
		}
	}
	*ret_nodes = nodes;
	*ret_roles = roles;
	return 0;
}

void
rdzv_runs_alike(const char *role, int local_world_size, size_t n, struct ranks_node **ret_nodes,
		char ***ret_roles)
{
	struct ranks_node *nodes = xcalloc(n + 1, sizeof(*nodes));
	char **roles = xcalloc(2, sizeof(*roles));

	roles[0] = xstrdup(role);
	for (size_t i = 0; i < n; i++) {
		nodes[i] = (struct ranks_node){roles[0], local_world_size};
	}
	*ret_nodes = nodes;
	*ret_roles = roles;
}
