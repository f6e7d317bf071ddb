#!/usr/bin/python3
"""The restart policy and the exit-status contract (elasticd(8), EXIT STATUS):
--restart-backoff grows and caps and never delays a requested re-form,
--restart-window refills, --no-restart-exit-codes and the no-progress rule
end the job at once, --exit-codes detailed tells them apart; --forward-signals
reaches the workers while they go on, and --term-timeout gives a signalled
worker time to finish."""

import json
import os
import re
import signal
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import lib  # noqa: E402
from test_ctl import curl, post  # noqa: E402

# A worker that logs "<attempt> <CLOCK_MONOTONIC>" and exits with the code the
# attempt's line of argv[2] gives ("1,1,0": attempts 0 and 1 fail); an entry
# "s<N>:<code>" sleeps N seconds first.
ATTEMPTS = r"""
import os, sys, time
out, plan = sys.argv[1], sys.argv[2].split(',')
n = int(os.environ['TORCHELASTIC_RESTART_COUNT'])
with open(os.path.join(out, 'attempts'), 'a') as f:
    f.write('%d %.6f\n' % (n, time.monotonic()))
step = plan[min(n, len(plan) - 1)]
if step.startswith('s'):
    secs, _, step = step[1:].partition(':')
    time.sleep(float(secs))
sys.exit(int(step))
"""

# Catches SIGUSR1 (and SIGUSR2) and keeps running until argv[1]/go exists.
NOTICE = r"""
import os, signal, sys, time
out = sys.argv[1]
lr = os.environ['LOCAL_RANK']
def notice(sig, frame):
    with open(os.path.join(out, 'notice_%s' % lr), 'a') as f:
        f.write('%s %d\n' % (signal.Signals(sig).name, os.getpid()))
signal.signal(signal.SIGUSR1, notice)
signal.signal(signal.SIGUSR2, notice)
with open(os.path.join(out, 'ready_%s' % lr), 'w') as f:
    f.write('%d\n' % os.getpid())
while not os.path.exists(os.path.join(out, 'go')):
    time.sleep(0.05)
"""

# On SIGTERM: take argv[2] seconds to "write a checkpoint", then exit.
CHECKPOINT = r"""
import os, signal, sys, time
out, secs = sys.argv[1], float(sys.argv[2])
def term(sig, frame):
    time.sleep(secs)
    with open(os.path.join(out, 'checkpoint.tmp'), 'w') as f:
        f.write('saved\n')
    os.rename(os.path.join(out, 'checkpoint.tmp'), os.path.join(out, 'checkpoint'))
    sys.exit(0)
signal.signal(signal.SIGTERM, term)
with open(os.path.join(out, 'ready_0'), 'w') as f:
    f.write('%d\n' % os.getpid())
while True:
    time.sleep(1)
"""

# Writes argv[2]'s entry for this attempt to the progress file argv[3], fails.
PROGRESS = r"""
import os, sys
out, plan, path = sys.argv[1], sys.argv[2].split(','), sys.argv[3]
n = int(os.environ['TORCHELASTIC_RESTART_COUNT'])
with open(os.path.join(out, 'attempts'), 'a') as f:
    f.write('%d\n' % n)
v = plan[min(n, len(plan) - 1)]
if v != '-':
    with open(path + '.tmp', 'w') as f:
        f.write(v + '\n')
    os.rename(path + '.tmp', path)
sys.exit(1)
"""


def events(path, name):
    out = []
    with open(path) as f:
        for line in f:
            ev = json.loads(line)
            if ev.get("name") == name:
                out.append(ev["metadata"])
    return out


class RestartPolicyTest(lib.ElasticdTestCase):

    def out_dir(self):
        d = self.path("out")
        os.makedirs(d, exist_ok=True)
        return d

    def run_attempts(self, plan, *args, name="out", timeout=120):
        out = self.path(name)
        os.makedirs(out)
        script = self.write_py("attempts.py", ATTEMPTS)
        res = self.run_elasticd("--standalone", "--log-dir", self.path("logs"), *args, script,
                                out, plan, timeout=timeout)
        return res, self.attempt_times(out)

    def attempt_times(self, out):
        path = os.path.join(out, "attempts")
        if not os.path.exists(path):
            return []
        with open(path) as f:
            return [float(line.split()[1]) for line in f]

    def event_log(self):
        run_dir = self.only_run_dir(self.path("logs"))
        return os.path.join(run_dir, "events.jsonl")

    # -- backoff --

    def test_backoff_grows_and_caps(self):
        res, times = self.run_attempts("1", "--max-restarts", "5", "--restart-backoff",
                                       "0.2:0.8")
        self.assertRc(res, 1)
        self.assertEqual(len(times), 6, res)
        # The waits decided: 0.2 then 0.4 (each plus up to half by jitter),
        # then 0.8, capped.
        waits = [ev["backoff_s"] for ev in events(self.event_log(), "elasticd.agent.restart")]
        self.assertEqual(len(waits), 5, waits)
        self.assertTrue(0.2 <= waits[0] <= 0.3, waits)
        self.assertTrue(0.4 <= waits[1] <= 0.6, waits)
        self.assertEqual(waits[2:], [0.8, 0.8, 0.8])
        # The attempts really waited that long (lower bounds; the machine may
        # be slow, but never fast), and the cap holds (no 1.6 s, 3.2 s waits).
        gaps = [b - a for a, b in zip(times, times[1:])]
        for gap, wait in zip(gaps, waits):
            self.assertGreaterEqual(gap, wait - 0.01, (gaps, waits))
        self.assertLess(max(gaps[3:]), 1.5, gaps)
        self.assertIn("restart backoff: next attempt in 0.800 s", res.err)
        self.assertIn("restarts exhausted: 5 of --max-restarts 5 spent (exit status 1)",
                      res.err)

    def test_requested_restart_is_not_delayed(self):
        # A failure waits 60 s; the status shows the wait; the operator's
        # restart ends it at once, and itself never waits.
        out = self.out_dir()
        sock = self.path("ctl.sock")
        script = self.write_py("attempts.py", ATTEMPTS)
        a = self.start("--standalone", "--max-restarts", "3", "--restart-backoff", "60:60",
                       "--control-socket", sock, script, out, "1,s600:0")
        self.assertTrue(a.wait_stderr("restart backoff: next attempt in 60.000 s", 30),
                        a.stderr_text())
        st = curl(sock, "/handler/status").json()
        self.assertTrue(50 < st["next_attempt_in_s"] <= 60, st)
        self.assertIsNone(st["restarts_in_window"])
        self.assertIsNone(st["attempts_without_progress"])
        t0 = time.monotonic()
        self.assertEqual(post(sock, "/handler/restart").status, 200)
        self.assertTrue(lib.wait_until(lambda: len(self.attempt_times(out)) >= 2, 20))
        self.assertLess(time.monotonic() - t0, 20)
        st = curl(sock, "/handler/status").json()
        self.assertIsNone(st["next_attempt_in_s"], st)
        self.assertEqual(st["restart_count"], 1)
        # A restart of a running group (a free re-form) does not wait either.
        t0 = time.monotonic()
        self.assertEqual(post(sock, "/handler/restart").status, 200)
        self.assertTrue(lib.wait_until(lambda: len(self.attempt_times(out)) >= 3, 20))
        self.assertLess(time.monotonic() - t0, 20)
        # (The re-formed group keeps attempt 1, which sleeps: stop it.)
        a.signal(signal.SIGTERM)
        res = a.wait(60)
        self.assertRc(res, 143)
        self.assertNoLeftovers()

    # -- the window --

    def test_window_exhausted(self):
        res, times = self.run_attempts("1", "--max-restarts", "100", "--restart-window", "2/60")
        self.assertRc(res, 1)
        self.assertEqual(len(times), 3, res)
        self.assertIn("restarts exhausted: 2 failure restarts within the last 60 s", res.err)
        self.assertIn("ChildFailedError", res.err)

    def test_window_refills(self):
        # Two quick failures fill a 2-in-3-s window; the third attempt fails
        # after 3.5 s, when both have left it, so it is restarted; the fourth
        # succeeds.
        res, times = self.run_attempts("1,1,s3.5:1,0", "--max-restarts", "100",
                                       "--restart-window", "2/3")
        self.assertRc(res, 0)
        self.assertEqual(len(times), 4, res)
        self.assertNotIn("restarts exhausted", res.err)

    # -- exit codes that end the job, no progress --

    def test_no_restart_exit_code_ends_the_job_at_once(self):
        for mode, rc in (("torchrun", 1), ("detailed", 4)):
            with self.subTest(mode=mode):
                res, times = self.run_attempts("42", "--max-restarts", "5",
                                               "--restart-backoff", "30:30",
                                               "--no-restart-exit-codes", "3,42",
                                               "--exit-codes", mode, name=mode)
                self.assertRc(res, rc)
                self.assertEqual(len(times), 1)
                self.assertLess(res.elapsed, 25)
                table = lib.failure_table(res.err)
                self.assertIsNotNone(table, res)
                self.assertIn("exitcode  : 42", table)
                self.assertIn("exited with 42, one of --no-restart-exit-codes: no restart "
                              "(exit status %d)" % rc, res.err)

    def test_other_exit_codes_still_restart(self):
        res, times = self.run_attempts("7,0", "--max-restarts", "5",
                                       "--no-restart-exit-codes", "3,42")
        self.assertRc(res, 0)
        self.assertEqual(len(times), 2)

    def progress_run(self, plan, *args):
        out = self.out_dir()
        prog = self.path("progress")
        script = self.write_py("progress.py", PROGRESS)
        res = self.run_elasticd("--standalone", "--max-restarts", "20", "--progress-file", prog,
                                *args, script, out, plan, prog, timeout=120)
        with open(os.path.join(out, "attempts")) as f:
            return res, len(f.read().split())

    def test_no_progress_ends_the_job(self):
        # 5, 10: progress; 10, 7 (an older checkpoint): none, two in a row.
        res, n = self.progress_run("5,10,10,7,99", "--progress-attempts", "2")
        self.assertRc(res, 1)
        self.assertEqual(n, 4, res)
        self.assertIn("no progress in '%s' over 2 failed attempts in a row: no restart "
                      "(exit status 1)" % self.path("progress"), res.err)

    def test_progress_keeps_restarting(self):
        # Rising values never stall; the budget ends the job.
        res, n = self.progress_run("1,2,3,4", "--progress-attempts", "1", "--max-restarts", "3",
                                   "--exit-codes", "detailed")
        self.assertRc(res, 3)
        self.assertEqual(n, 4, res)

    def test_no_progress_without_a_file(self):
        # A job that never writes its progress file makes no progress.
        res, n = self.progress_run("-", "--exit-codes", "detailed")
        self.assertRc(res, 5)
        self.assertEqual(n, 3, res)

    # -- the exit-status contract --

    def contract_rows(self):
        """The statuses elasticd(8)'s EXIT STATUS table lists."""
        with open(os.path.join(lib.SOURCE_ROOT, "man", "elasticd.8.scd")) as f:
            text = f.read()
        section = text.split("# EXIT STATUS", 1)[1].split("\n# ", 1)[0]
        return re.findall(r"^\|\s+\*([0-9+N*]+)\*", section, re.M)

    def test_every_exit_status_of_the_contract(self):
        out = self.out_dir()
        fail = self.write_sh("fail.sh", "exit 1\n")
        ok = self.write_sh("ok.sh", "exit 0\n")
        cases = {
            "0": lambda: self.run_elasticd("--standalone", "--exit-codes", "detailed",
                                           "--no-python", ok),
            "1": lambda: self.run_elasticd("--standalone", "--no-python", fail),
            "2": lambda: self.run_elasticd("--standalone", "--restart-window", "x",
                                           "--no-python", ok),
            "3": lambda: self.run_elasticd("--standalone", "--exit-codes", "detailed",
                                           "--max-restarts", "1", "--no-python", fail),
            "4": lambda: self.run_elasticd("--standalone", "--exit-codes", "detailed",
                                           "--max-restarts", "1", "--no-restart-exit-codes",
                                           "1", "--no-python", fail),
            "5": lambda: self.run_elasticd("--standalone", "--exit-codes", "detailed",
                                           "--max-restarts", "5", "--progress-file",
                                           os.path.join(out, "none"), "--progress-attempts",
                                           "1", "--no-python", fail),
            "6": lambda: self.run_elasticd("--standalone", "--health-check", "exit 1",
                                           "--no-python", ok),
            "128+N": self.signal_exit,
        }
        rows = self.contract_rows()
        self.assertEqual(rows, ["0", "1", "2", "3", "4", "5", "6", "128*+*N"])
        for row in rows:
            key = row.replace("*", "")
            with self.subTest(status=key):
                res = cases[key]()
                want = 128 + signal.SIGTERM if key == "128+N" else int(key)
                self.assertRc(res, want)
        # Without --exit-codes detailed, each is 1, as torchrun.
        res = self.run_elasticd("--standalone", "--max-restarts", "1", "--no-restart-exit-codes",
                                "1", "--no-python", fail)
        self.assertRc(res, 1)
        res = self.run_elasticd("--standalone", "--restart-window", "x", "--no-python", ok)
        self.assertRc(res, 2)
        self.assertIn("--restart-window: invalid value 'x'", res.err)

    def signal_exit(self):
        out = self.out_dir()
        a = self.start("--standalone", "--exit-codes", "detailed", "--no-python", "/bin/sh",
                       "-c", 'echo $$$$ > "$0/ready_sig"; exec sleep 1000', out)
        self.assertTrue(lib.read_pid_file(os.path.join(out, "ready_sig")))
        a.signal(signal.SIGTERM)
        return a.wait(30)

    # -- signals --

    def test_sigusr1_forwarded_while_workers_run(self):
        out = self.out_dir()
        sock = self.path("ctl.sock")
        script = self.write_py("notice.py", NOTICE)
        a = self.start("--standalone", "--nproc-per-node", "2", "--log-dir", self.path("logs"),
                       "--control-socket", sock, script, out)
        pids = [lib.read_pid_file(os.path.join(out, "ready_%d" % lr)) for lr in range(2)]
        self.assertTrue(all(pids), a.stderr_text())
        a.signal(signal.SIGUSR1)
        a.signal(signal.SIGUSR2)

        def noticed():
            try:
                return all(lib.read_text(os.path.join(out, "notice_%d" % lr)).count("\n") == 2
                           for lr in range(2))
            except OSError:
                return False
        self.assertTrue(lib.wait_until(noticed, 20), a.stderr_text())
        for lr in range(2):
            lines = lib.read_text(os.path.join(out, "notice_%d" % lr)).split()
            self.assertEqual(sorted(lines[0::2]), ["SIGUSR1", "SIGUSR2"])
            self.assertEqual(lines[1::2], [str(pids[lr])] * 2)
        # Supervision goes on: the same workers, HEALTHY, no restart.
        self.assertIsNone(a.proc.poll())
        st = curl(sock, "/handler/status").json()
        self.assertEqual(st["worker_state"], "HEALTHY")
        self.assertEqual([w["pid"] for w in st["workers"]], pids)
        self.assertIn("Received SIGUSR1: forwarded to 2 worker process groups", a.stderr_text())
        m = curl(sock, "/handler/metrics").body
        self.assertIn("\nelasticd_signals_forwarded_total 2\n", m)
        with open(os.path.join(out, "go"), "w"):
            pass
        res = a.wait(60)
        self.assertRc(res, 0)
        fwd = [ev for ev in events(self.event_log(), "elasticd.signal.received")]
        self.assertEqual([(ev["signal"], ev["action"]) for ev in fwd],
                         [("SIGUSR1", "forward"), ("SIGUSR2", "forward")])
        self.assertNoLeftovers()

    def test_forwarded_signals_reach_workers_unblocked(self):
        # Started with SIGUSR1 blocked, elasticd still hands its workers an
        # unblocked SIGUSR1 at its default.
        out = self.out_dir()
        # exec: grep reads its own mask, the one the worker exec'd with; a
        # grep child reading /proc/$$ could catch dash with every signal
        # blocked around its fork.
        sh = self.write_sh("mask.sh",
                           'exec grep -E "^Sig(Blk|Ign)" /proc/self/status > "$1/mask"\n')
        launcher = self.write_py("launch.py",
                                 "import os, signal, sys\n"
                                 "signal.pthread_sigmask(signal.SIG_BLOCK, [signal.SIGUSR1])\n"
                                 "signal.signal(signal.SIGUSR2, signal.SIG_IGN)\n"
                                 "os.execv(sys.argv[1], sys.argv[1:])\n")
        res = self.run_elasticd_via(launcher, "--standalone", "--no-python", sh, out)
        self.assertRc(res, 0)
        masks = dict(line.split(":") for line in lib.read_text(os.path.join(out, "mask"))
                     .splitlines())
        for key in ("SigBlk", "SigIgn"):
            bits = int(masks[key].strip(), 16)
            for sig in (signal.SIGUSR1, signal.SIGUSR2):
                self.assertFalse(bits & (1 << (sig - 1)), (key, masks))

    def run_elasticd_via(self, launcher, *args):
        """Run elasticd exec'd by launcher (which changes its signal state)."""
        err_path = self.path("via.stderr")
        with open(err_path, "wb") as err:
            p = subprocess.run([lib.PYTHON_EXEC, launcher, lib.ELASTICD] + list(args),
                               env=self.env(), cwd=self.tmp, stdin=subprocess.DEVNULL,
                               stdout=subprocess.DEVNULL, stderr=err, timeout=60)
        return lib.Result(p.returncode, b"", lib.read_bytes(err_path), 0)

    def test_sigterm_with_a_long_term_timeout_lets_a_worker_finish(self):
        out = self.out_dir()
        script = self.write_py("checkpoint.py", CHECKPOINT)
        a = self.start("--standalone", "--shutdown-timeout", "1", "--term-timeout", "60",
                       "--log-dir", self.path("logs"), script, out, "3")
        self.assertTrue(lib.read_pid_file(os.path.join(out, "ready_0")), a.stderr_text())
        a.signal(signal.SIGTERM)
        res = a.wait(60)
        self.assertRc(res, 143)
        self.assertEqual(lib.read_text(os.path.join(out, "checkpoint")), "saved\n")
        self.assertGreaterEqual(res.elapsed, 3)
        self.assertNotIn("forcefully exiting via SIGKILL", res.err)
        stopping = events(self.event_log(), "elasticd.group.stopping")
        self.assertEqual([(ev["signal"], ev["shutdown_timeout"]) for ev in stopping],
                         [("SIGTERM", 60)])
        self.assertNoLeftovers()

    def test_short_term_timeout_kills(self):
        out = self.out_dir()
        script = self.write_py("checkpoint.py", CHECKPOINT)
        a = self.start("--standalone", "--shutdown-timeout", "60", "--term-timeout", "1",
                       script, out, "30")
        self.assertTrue(lib.read_pid_file(os.path.join(out, "ready_0")), a.stderr_text())
        a.signal(signal.SIGTERM)
        res = a.wait(40)
        self.assertRc(res, 143)
        self.assertLess(res.elapsed, 25)
        self.assertFalse(os.path.exists(os.path.join(out, "checkpoint")))
        self.assertIn("forcefully exiting via SIGKILL", res.err)
        self.assertNoLeftovers()


class MembershipNotDelayedTest(lib.ElasticdTestCase):
    """--restart-backoff delays failure restarts only: a node joining a
    running 2:3 c10d job re-forms it at once, also when the group runs after
    a failure restart that waited out the backoff (the streak is not reset
    yet, so a failure restart now would wait again)."""

    WORKER = (
        "import os, sys, time\n"
        "d = sys.argv[1]\n"
        "tag = '%s_%s_%s' % (os.environ['WORLD_SIZE'], os.environ['TORCHELASTIC_RESTART_COUNT'],"
        " os.getpid())\n"
        "open(os.path.join(d, tag), 'w').close()\n"
        "first = os.path.join(d, 'failed_once')\n"
        "if os.environ['RANK'] == '0' and not os.path.exists(first):\n"
        "    open(first, 'w').close()\n"
        "    sys.exit(3)\n"
        "time.sleep(120)\n")

    def agent(self, port, script, out, n):
        from test_rdzv_c10d import FAST
        return self.start("--nnodes", "2:3", "--nproc-per-node", "1", "--rdzv-backend", "c10d",
                          "--rdzv-endpoint", "127.0.0.1:%d" % port, "--rdzv-id", "job",
                          "--rdzv-conf", FAST, "--max-restarts", "3",
                          "--restart-backoff", "10:10", "--control-socket",
                          self.path("ctl%d.sock" % n), script, out)

    def worlds(self, out):
        return [n.split("_") for n in os.listdir(out) if n[0].isdigit()]

    def test_a_joining_node_is_not_delayed_by_the_backoff(self):
        from test_rdzv_c10d import free_port
        port, out = free_port(), self.path("out")
        os.makedirs(out)
        script = self.write_py("worker.py", self.WORKER)
        a = [self.agent(port, script, out, 0)]
        time.sleep(0.5)  # the first one hosts the c10d store
        a.append(self.agent(port, script, out, 1))
        # Rank 0 fails once; the restart waits out the 10 s backoff, then both
        # nodes run a second group (the other node re-forms for free, so only
        # the failed node's TORCHELASTIC_RESTART_COUNT is 1).
        self.assertTrue(lib.wait_until(
            lambda: sum(1 for w in self.worlds(out) if w[0] == "2") >= 4, 60),
            self.worlds(out))
        # A third node now: the job re-forms as 3 nodes well within 10 s.
        t0 = time.monotonic()
        a.append(self.agent(port, script, out, 2))
        self.assertTrue(lib.wait_until(
            lambda: sum(1 for w in self.worlds(out) if w[0] == "3") >= 3, 30),
            self.worlds(out))
        self.assertLess(time.monotonic() - t0, 8)
        st = curl(self.path("ctl0.sock"), "/handler/status").json()
        self.assertEqual(st["restart_count"], 1, st)
        for x in reversed(a):
            x.signal(signal.SIGTERM)
            self.assertRc(x.wait(30), 128 + signal.SIGTERM)


if __name__ == "__main__":
    lib.main()
