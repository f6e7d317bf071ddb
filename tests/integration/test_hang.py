#!/usr/bin/python3
"""Zero-code hang rules (--hang-silence, --hang-cadence): a rank that goes
silent, or whose step lines stop, fails its attempt (restarted while restarts
remain) with the rule as root cause; a rank that never printed is not silent;
with no rule nothing is armed."""

import json
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import lib  # noqa: E402
from test_ctl import CTL_WORKER, curl  # noqa: E402

# Attempt 0: prints, records when, then goes silent (sleeps); later attempts
# exit 0. argv[1]: the output directory.
SILENT = r"""
import os, sys, time
out = sys.argv[1]
n = int(os.environ['TORCHELASTIC_RESTART_COUNT'])
with open(os.path.join(out, 'attempts'), 'a') as f:
    f.write('%d %.6f\n' % (n, time.monotonic()))
if n > 0:
    sys.exit(0)
print('hello', flush=True)
with open(os.path.join(out, 'last_print'), 'w') as f:
    f.write('%.6f\n' % time.monotonic())
time.sleep(600)
"""

# Steps for a while, then keeps printing other lines only.
CADENCE = r"""
import sys, time
for i in range(5):
    print('step %d' % i, flush=True)
    time.sleep(0.2)
while True:
    print('loss 0.5', flush=True)
    time.sleep(0.2)
"""

# Never prints; exits 0 after argv[1] seconds.
QUIET = r"""
import sys, time
time.sleep(float(sys.argv[1]))
"""


def events(path, name):
    with open(path) as f:
        evs = [json.loads(line) for line in f]
    return [ev["metadata"] for ev in evs if ev.get("name") == name]


class HangTest(lib.ElasticdTestCase):

    def silent_run(self, *args, restarts="1"):
        out = self.path("out")
        os.makedirs(out)
        script = self.write_py("silent.py", SILENT)
        res = self.run_elasticd("--standalone", "--log-dir", self.path("logs"),
                                "--max-restarts", restarts, "--hang-silence", "2", *args,
                                script, out, timeout=120)
        with open(os.path.join(out, "attempts")) as f:
            starts = [float(line.split()[1]) for line in f]
        return res, out, starts

    def check_restarted(self, res, out, starts):
        self.assertRc(res, 0)
        self.assertEqual(len(starts), 2, res)
        with open(os.path.join(out, "last_print")) as f:
            printed = float(f.read())
        run_dir = self.only_run_dir(self.path("logs"))
        self.assertTrue(os.path.isdir(os.path.join(run_dir, "attempt_1")), res)
        hang = events(os.path.join(run_dir, "events.jsonl"), "elasticd.worker.hang")
        self.assertEqual(len(hang), 1, hang)
        self.assertEqual(hang[0]["rule"], "silence")
        self.assertEqual(hang[0]["local_rank"], 0)
        # Detected within S + 1 s of the last output (generous: the machine
        # is shared); the restart follows at once.
        self.assertLess(hang[0]["idle_s"], 3.0, hang)
        self.assertGreaterEqual(hang[0]["idle_s"], 2.0, hang)
        self.assertLess(starts[1] - printed, 15, (starts, printed))
        self.assertIn("hang: silence (no output for 2 s) on local rank 0", res.err)

    def test_silence_tee_restarts(self):
        res, out, starts = self.silent_run("-t", "3")
        self.check_restarted(res, out, starts)

    def test_silence_redirect_restarts(self):
        res, out, starts = self.silent_run("-r", "3")
        self.check_restarted(res, out, starts)

    def test_silence_root_cause_in_table(self):
        res, out, starts = self.silent_run("-t", "3", restarts="0")
        self.assertRc(res, 1)
        self.assertEqual(len(starts), 1, res)
        table = lib.failure_table(res.err)
        self.assertIn("hang: silence (no output for 2 s) on local rank 0", table)

    def test_silence_sigabrt_stacks(self):
        """A Python rank hung in time.sleep, with no worker server: SIGABRT
        with PYTHONFAULTHANDLER (exported by elasticd) puts its stack in
        stderr.log, and the table says so."""
        res, out, starts = self.silent_run("-t", "3", restarts="0")
        self.assertRc(res, 1)
        err_log = os.path.join(self.only_run_dir(self.path("logs")), "attempt_0", "0",
                               "stderr.log")
        text = lib.read_text(err_log)
        self.assertIn("Fatal Python error: Aborted", text)
        self.assertRegex(text, r'File "[^"]*silent\.py", line [0-9]+ in <module>')
        table = lib.failure_table(res.err)
        self.assertIn("stacks: %s (SIGABRT)" % err_log, table)
        self.assertIn("exitcode  : -6", table)

    def test_faulthandler_user_choice_kept(self):
        """PYTHONFAULTHANDLER set (even empty) is the user's: an empty one
        means no faulthandler, so no SIGABRT either."""
        out = self.path("out")
        os.makedirs(out)
        script = self.write_py("silent.py", SILENT)
        res = self.run_elasticd("--standalone", "--log-dir", self.path("logs"),
                                "--max-restarts", "0", "--hang-silence", "2", "-t", "3",
                                script, out, env=self.env(PYTHONFAULTHANDLER=""), timeout=120)
        self.assertRc(res, 1)
        self.assertNotIn("(SIGABRT)", res.err)
        self.assertNotIn("Fatal Python error", res.err)
        self.assertIn("hang: no stacks", res.err)

    def test_worker_server_traceback_file(self):
        """Workers serving the WorkerServer protocol: every rank's
        dump_traceback lands in attempt_0/<local_rank>/hang_traceback.txt
        before the stop (SIGTERM, not SIGABRT), and the status and the table
        name the files."""
        sock = self.path("c.sock")
        wdir = self.path("w")
        os.makedirs(wdir)
        e = self.env(CTL_WORKER_DIR=wdir, CTL_WORKER_LINES="1")
        res = self.run_elasticd("--standalone", "--nproc-per-node", "2", "--max-restarts", "0",
                                "--log-dir", self.path("logs"), "--control-socket", sock,
                                "--hang-silence", "2", "-t", "3", CTL_WORKER, env=e,
                                timeout=120)
        self.assertRc(res, 1)
        attempt = os.path.join(self.only_run_dir(self.path("logs")), "attempt_0")
        files = [os.path.join(attempt, str(r), "hang_traceback.txt") for r in range(2)]
        for f in files:
            self.assertIn("train_loop", lib.read_text(f), f)
        table = lib.failure_table(res.err)
        self.assertIn("stacks: %s" % files[0], table)
        self.assertNotIn("SIGABRT", table)
        self.assertNotIn("Fatal Python error", lib.read_text(os.path.join(attempt, "0",
                                                                          "stderr.log")))

    def trace_run(self, handler, *extra_env):
        sock = self.path("c.sock")
        wdir = self.path("w")
        os.makedirs(wdir)
        e = self.env(CTL_WORKER_DIR=wdir, CTL_WORKER_LINES="1", CTL_WORKER_TRACE=handler,
                     **dict(extra_env))
        res = self.run_elasticd("--standalone", "--nproc-per-node", "2", "--max-restarts", "0",
                                "--log-dir", self.path("logs"), "--control-socket", sock,
                                "--hang-silence", "2", "-t", "3", CTL_WORKER, env=e,
                                timeout=120)
        self.assertRc(res, 1)
        return res, self.only_run_dir(self.path("logs"))

    def test_worker_server_trace_json(self):
        """A worker server that lists dump_nccl_trace_json: its answer is
        written as is to attempt_0/<local_rank>/hang_traceback.json next to
        the .txt, and the table and the event name both files."""
        res, run_dir = self.trace_run("dump_nccl_trace_json")
        attempt = os.path.join(run_dir, "attempt_0")
        txt = [os.path.join(attempt, str(r), "hang_traceback.txt") for r in range(2)]
        js = [os.path.join(attempt, str(r), "hang_traceback.json") for r in range(2)]
        for r in range(2):
            self.assertIn("train_loop", lib.read_text(txt[r]))
            with open(js[r]) as f:
                trace = json.load(f)
            self.assertEqual(trace["rank"], str(r), trace)
            self.assertEqual(trace["handler"], "dump_nccl_trace_json", trace)
            self.assertEqual(trace["entries"][0]["profiling_name"], "gloo:all_reduce")
        where = ", ".join([txt[0], js[0], txt[1], js[1]])
        self.assertIn("stacks: %s" % where, lib.failure_table(res.err))
        hang = events(os.path.join(run_dir, "events.jsonl"), "elasticd.worker.hang")
        self.assertEqual(len(hang), 1, hang)
        self.assertEqual(hang[0]["stacks"], where, hang)
        self.assertEqual(hang[0]["rule"], "silence", hang)

    def test_worker_server_fr_trace_json(self):
        """fr_trace_json (torch >= 2.7) is asked for as well."""
        res, run_dir = self.trace_run("fr_trace_json")
        with open(os.path.join(run_dir, "attempt_0", "1", "hang_traceback.json")) as f:
            self.assertEqual(json.load(f)["handler"], "fr_trace_json")

    def test_worker_server_unlisted_trace(self):
        """A server that lists no trace handler: no .json file, and the
        event says where the tracebacks are."""
        res, run_dir = self.trace_run("")
        attempt = os.path.join(run_dir, "attempt_0")
        self.assertFalse(os.path.exists(os.path.join(attempt, "0", "hang_traceback.json")))
        hang = events(os.path.join(run_dir, "events.jsonl"), "elasticd.worker.hang")
        self.assertEqual(hang[0]["stacks"], "%s, %s" % (
            os.path.join(attempt, "0", "hang_traceback.txt"),
            os.path.join(attempt, "1", "hang_traceback.txt")), hang)

    def test_worker_server_silent_deadline(self):
        """A worker server that never answers dump_traceback: the stop comes
        after the fetch's deadline (5 s), and the hung Python rank, with no
        traceback, is stopped with SIGABRT (its stack in stderr.log)."""
        sock = self.path("c.sock")
        wdir = self.path("w")
        os.makedirs(wdir)
        e = self.env(CTL_WORKER_DIR=wdir, CTL_WORKER_LINES="1", CTL_WORKER_HANG="1")
        t0 = time.monotonic()
        res = self.run_elasticd("--standalone", "--max-restarts", "0", "--log-dir",
                                self.path("logs"), "--control-socket", sock, "--hang-silence",
                                "2", "-t", "3", CTL_WORKER, env=e, timeout=120)
        self.assertRc(res, 1)
        self.assertLess(time.monotonic() - t0, 25, res)
        self.assertIn("gave no traceback within 5 s", res.err)
        err_log = os.path.join(self.only_run_dir(self.path("logs")), "attempt_0", "0",
                               "stderr.log")
        self.assertIn("Fatal Python error: Aborted", lib.read_text(err_log))
        self.assertIn("stacks: %s (SIGABRT)" % err_log, lib.failure_table(res.err))

    def test_cadence_stops(self):
        script = self.write_py("cadence.py", CADENCE)
        t0 = time.monotonic()
        res = self.run_elasticd("--standalone", "--max-restarts", "0", "-t", "3",
                                "--hang-silence", "30", "--hang-cadence", "step [0-9]+",
                                "--hang-cadence-interval", "2", script, timeout=120)
        self.assertRc(res, 1)
        self.assertLess(time.monotonic() - t0, 30, res)
        self.assertIn("hang: cadence 'step [0-9]+' (no match for 2 s) on local rank 0",
                      lib.failure_table(res.err))

    def test_never_printed_is_not_silent(self):
        script = self.write_py("quiet.py", QUIET)
        res = self.run_elasticd("--standalone", "--nproc-per-node", "2", "-r", "3",
                                "--hang-silence", "1", script, "4", timeout=120)
        self.assertRc(res, 0)
        self.assertNotIn("hang:", res.err)

    def test_silence_with_one_stream_redirected_warns(self):
        # -r 1: the rank's stderr goes to the console, unseen; --hang-silence
        # would count a rank that writes there as silent: say so at the start.
        res = self.run_elasticd("--standalone", "-r", "1", "--hang-silence", "30",
                                "--no-python", "/bin/true")
        self.assertRc(res, 0)
        self.assertIn("local rank 0's stderr is not redirected: --hang-silence hears its "
                      "stdout alone", res.err)
        res = self.run_elasticd("--standalone", "-r", "3", "--hang-silence", "30",
                                "--no-python", "/bin/true")
        self.assertRc(res, 0)
        self.assertNotIn("is not redirected", res.err)

    def status_of(self, *rules):
        sock = self.path("ctl%d.sock" % len(rules))
        script = self.write_py("quiet.py", QUIET)
        a = self.start("--standalone", "-t", "3", "--control-socket", sock, *rules, script,
                       "30")
        self.assertTrue(lib.wait_until(
            lambda: os.path.exists(sock) and
            curl(sock, "/handler/status").json().get("worker_state") == "HEALTHY", 30))
        st = curl(sock, "/handler/status").json()
        a.signal(15)
        a.wait(60)
        return st

    def test_no_rule_nothing_armed(self):
        st = self.status_of()
        self.assertEqual(st["hang_rules"], "off", st)
        self.assertFalse(st["hang_watch"], st)
        self.assertIsNone(st["workers"][0]["hang"], st)
        st = self.status_of("--hang-silence", "60")
        self.assertEqual(st["hang_rules"]["silence_s"], 60, st)
        self.assertTrue(st["hang_watch"], st)
        w = st["workers"][0]["hang"]
        self.assertIsNone(w["last_output_age_s"], w)
        self.assertIsNone(w["deadline_in_s"], w)
        self.assertTrue(w["watched"], w)


if __name__ == "__main__":
    lib.main()
