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
		f[root].message = xstrdup(a->hang_cause);
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
