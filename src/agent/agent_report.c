/* agent_report.c — what a failure leaves behind besides the exit status: the
 * failure table (with the stderr lines) and the agent's own error file. */
#include "agent_internal.h"

#include <errno.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "errfile.h"
#include "group.h"
#include "log.h"
#include "logtail.h"
#include "util.h"
#include "wenv.h"
#include "worker.h"

void
agent_report_add_stderr(struct process_failure *f, const struct worker *w)
{
	const char *path = w ? w->stream_path[1] : NULL;
	_cleanup_free_ char *lines = NULL;
	_cleanup_free_ char *what = NULL;
	size_t n;
	char *msg;

	if (!path || f->error_file || w->exec_errno) {
		return;
	}
	lines = logtail_read(path, "  ", &n);
	if (!lines) {
		return;
	}
	what = n == 1 ? xstrdup("last line") : xasprintf("last %zu lines", n);
	if (f->exitcode < 0) {
		msg = xasprintf("%s; %s of stderr (%s):\n%s", f->message, what, path, lines);
	} else {
		msg = xasprintf("%s of stderr (%s):\n%s", what, path, lines);
	}
	free(f->message);
	f->message = msg;
}

void
agent_report_error_file(const char *own, const struct process_failure *root)
{
	_cleanup_free_ char *msg = NULL;
	int r;

	if (root->data) {
		r = errfile_write_root_cause(own, root);
		if (r < 0) {
			log_error("cannot write the error file %s: %s", own, strerror(-r));
		}
		return;
	}
	log_info("local_rank %d FAILED with no error file. Decorate your entrypoint fn with "
		 "@record for traceback info. See: "
		 "https://pytorch.org/docs/stable/elastic/errors.html",
		 root->local_rank);
	msg = xasprintf("ChildFailedError: local_rank %d (rank %d) failed with exitcode %d "
			"(pid: %ld)\n%s",
			root->local_rank, root->global_rank, root->exitcode, (long)root->pid,
			root->message ? root->message : "");
	r = errfile_write_record(own, msg, root->message, root->timestamp, root->exitcode);
	if (r < 0) {
		log_error("cannot write the error file %s: %s", own, strerror(-r));
	}
}

void
agent_report_signal(struct agent *a)
{
	const char *own = wenv_get(a->env, "TORCHELASTIC_ERROR_FILE");
	_cleanup_free_ char *msg = NULL;
	_cleanup_free_ char *stack = NULL;
	int r;

	if (!own || !*own || a->signo <= 0) {
		return;
	}
	/* torch: f"{type(e).__name__}: {e}", and the traceback's last line. */
	msg = xasprintf("SignalException: Process %d got signal: %d", (int)getpid(), a->signo);
	stack = xasprintf("torch.distributed.elastic.multiprocessing.api.%s\n", msg);
	r = errfile_write_record(own, msg, stack, (int64_t)time(NULL), 0);
	if (r < 0) {
		log_error("cannot write the error file %s: %s", own, strerror(-r));
	}
}

/* Whether the job ends because this node's workers failed. */
static bool
reason_is_worker_failure(enum agent_reason r)
{
	switch (r) {
	case AGENT_REASON_WORKER_FAILED:
	case AGENT_REASON_EXHAUSTED:
	case AGENT_REASON_WINDOW:
	case AGENT_REASON_NO_RESTART_CODE:
	case AGENT_REASON_NO_PROGRESS:
	case AGENT_REASON_HANG:
		return true;
	case AGENT_REASON_DRAIN: /* a drain leaves, it does not close */
	case AGENT_REASON_DRAIN_FAILED:
	case AGENT_REASON_UNHEALTHY: /* as a drain: leaves, does not close */
	case AGENT_REASON_EXCLUDED:
	case AGENT_REASON_QUARANTINED: /* it leaves, the job goes on */
	case AGENT_REASON_NONE:
	case AGENT_REASON_SUCCEEDED:
	case AGENT_REASON_MEMBERSHIP:
	case AGENT_REASON_REQUESTED:
	case AGENT_REASON_RDZV_FAILED:
	case AGENT_REASON_SIGNAL:
	case AGENT_REASON_UNEXPECTED:
		return false;
	}
	return false;
}

void
agent_report_close_record(struct agent *a)
{
	const struct worker *first = NULL;

	if (!a->rdzv || !a->group || !reason_is_worker_failure(a->reason)) {
		return;
	}
	for (size_t i = 0; i < group_size(a->group); i++) {
		const struct worker *w = group_worker(a->group, i);

		if (w->failed && (!first || w->exit_usec < first->exit_usec)) {
			first = w;
		}
	}
	if (first) {
		rdzv_set_close_record(a->rdzv, a->round.runs ? a->round.group_rank : -1,
				      first->global_rank, first->local_rank, (int)first->pid,
				      first->exitcode);
	}
}

void
agent_report_remote_failure(struct agent *a, const struct rdzv_close_record *rec)
{
	_cleanup_free_ char *host = xstrndup(rec->node.name, rec->node.addr_len);
	_cleanup_free_ char *title = NULL;
	_cleanup_free_ char *table = NULL;
	_cleanup_free_ char *text = NULL;
	struct process_failure f;
	char *msg;

	process_failure_init(&f, rec->local_rank, rec->rank, (pid_t)rec->pid, rec->exitcode, NULL,
			     (int64_t)time(NULL));
	msg = xasprintf("%s\n(node %s, group rank %d, closed the rendezvous; its agent's log and "
			"error file have the worker's own error)",
			rec->signal > 0 ? f.message : "the worker of another node failed",
			rec->node.name, rec->group_rank);
	free(f.message);
	f.message = msg;
	title = xasprintf("%s FAILED on node %s (group rank %d)", a->program ? a->program : "",
			  host, rec->group_rank);
	table = errfile_format_table(title, &f, 1, 0, host);
	text = xasprintf("torch.distributed.elastic.multiprocessing.errors.ChildFailedError: %s\n",
			 table);
	log_raw(text, strlen(text));
	process_failure_release(&f);
}

void
agent_report_failure(struct agent *a)
{
	struct group *g = a->group;
	size_t n = 0, root, hung_at = SIZE_MAX;
	struct process_failure *f = xcalloc(group_size(g), sizeof(*f));
	const char *own = wenv_get(a->env, "TORCHELASTIC_ERROR_FILE");
	char *title, *table;

	for (size_t i = 0; i < group_size(g); i++) {
		struct worker *w = group_worker(g, i);
		bool hung = a->hung && (int)i == a->hang_fired.local_rank;

		if (!w->failed && !hung) {
			continue;
		}
		process_failure_init(&f[n], w->local_rank, w->global_rank, w->pid, w->exitcode,
				     w->error_file && *w->error_file ? w->error_file : NULL,
				     w->exit_wall);
		if (f[n].problem) {
			log_warn("%s", f[n].problem);
		}
		if (w->exec_errno) {
			free(f[n].message);
			f[n].message = xasprintf("elasticd could not execute the worker: %s",
						 strerror(w->exec_errno));
		}
		if (hung) {
			hung_at = n;
		}
		n++;
	}
	if (n == 0) {
		free(f);
		return;
	}
	root = hung_at < n ? hung_at : errfile_root_cause(f, n);
	if (hung_at < n) {
		free(f[root].message);
		f[root].message =
			a->hang_stacks ? xasprintf("%s; stacks: %s", a->hang_cause, a->hang_stacks)
				       : xstrdup(a->hang_cause);
	} else {
		agent_report_add_stderr(&f[root], group_worker(g, (size_t)f[root].local_rank));
	}
	title = xasprintf("%s FAILED", group_entrypoint_name(g));
	table = errfile_format_table(title, f, n, root, host_fqdn());
	{
		_cleanup_free_ char *text = xasprintf(
			"torch.distributed.elastic.multiprocessing.errors.ChildFailedError: %s\n",
			table);

		log_raw(text, strlen(text));
	}
	if (own && *own) {
		agent_report_error_file(own, &f[root]);
	}
	free(title);
	free(table);
	for (size_t i = 0; i < n; i++) {
		process_failure_release(&f[i]);
	}
	free(f);
}
