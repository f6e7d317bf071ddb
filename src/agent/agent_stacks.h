/* agent_stacks.h — stacks before a hang's stop. When a hang rule fires, every
 * running local rank with a TORCH_WORKER_SERVER_SOCKET is asked for its
 * dump_traceback and its handler list in parallel (STACKS_DEADLINE_S in all);
 * each traceback is written to attempt_<n>/<local_rank>/hang_traceback.txt
 * and, when the list offers fr_trace_json or dump_nccl_trace_json (torch's
 * flight recorder, WorkerServer.cpp's GET /handler/ and POST
 * /handler/<name>), that answer to hang_traceback.json (with a log
 * directory). Then a->hang_stacks says where the stacks are, the event
 * elasticd.worker.hang is recorded and the group is stopped, the hung rank
 * with SIGABRT when it gave no traceback and is a Python worker with
 * PYTHONFAULTHANDLER on (its stacks land in its stderr). Part of the agent
 * layer: it logs. */
#pragma once

struct agent;
struct agent_stacks;

/* The whole fetch, all ranks together, in seconds. */
#define STACKS_DEADLINE_S 5

/* A hang fired on a->hang_fired.local_rank and a->group still runs: fetch
 * the stacks, then stop the group (group_stop, SIGTERM) unless it is stopping
 * already. Returns the fetch (free it with agent_stacks_free, which cancels
 * what is pending), or NULL when the group was stopped at once. */
struct agent_stacks *agent_stacks_start(struct agent *a);

/* Cancel what is pending and free (recording elasticd.worker.hang with what
 * was fetched when the stop was not reached); accepts NULL. Not from inside
 * the fetch's own callbacks. */
void agent_stacks_free(struct agent_stacks *s);
