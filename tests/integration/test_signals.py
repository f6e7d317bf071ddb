#!/usr/bin/python3
"""Signals: the agent forwards SIGTERM/SIGINT/SIGHUP/SIGQUIT to every worker's
process group, escalates to SIGKILL after --shutdown-timeout, exits 128+signo;
workers start with a clean signal mask and default dispositions; a signal
ignored at start (nohup) stays ignored."""

import os
import signal
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import lib  # noqa: E402

# A worker that records the signals it receives, then exits with argv[2].
CATCHER = r"""
import os, signal, sys, time
out = sys.argv[1]
code = int(sys.argv[2])
lr = os.environ['LOCAL_RANK']
def handler(sig, frame):
    with open(os.path.join(out, 'sig_%s' % lr), 'a') as f:
        f.write(signal.Signals(sig).name + '\n')
    os._exit(code)
for s in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGQUIT):
    signal.signal(s, handler)
with open(os.path.join(out, 'ready_%s.tmp' % lr), 'w') as f:
    f.write('%d\n' % os.getpid())
os.rename(os.path.join(out, 'ready_%s.tmp' % lr), os.path.join(out, 'ready_%s' % lr))
while True:
    time.sleep(1)
"""

# Ignores SIGTERM in the whole process group (sleep inherits SIG_IGN).
STUBBORN_SH = 'trap "" TERM; echo $$$$ > "$0/ready_$LOCAL_RANK"; sleep 1000; sleep 1000'


class SignalsTest(lib.ElasticdTestCase):

    def out_dir(self):
        d = self.path("out")
        os.makedirs(d, exist_ok=True)
        return d

    def start_catchers(self, nproc=2, code=0, *extra):
        out = self.out_dir()
        script = self.write_py("catcher.py", CATCHER)
        a = self.start("--standalone", "--nproc-per-node", str(nproc), *extra, script, out,
                       str(code))
        pids = [lib.read_pid_file(os.path.join(out, "ready_%d" % lr)) for lr in range(nproc)]
        if not all(pids):
            a.kill()
            self.fail("workers did not start: %r" % (a.result,))
        return a, out, pids

    def forward_case(self, sig, rc):
        a, out, pids = self.start_catchers()
        a.signal(sig)
        res = a.wait(timeout=30)
        self.assertRc(res, rc)
        for lr in range(2):
            self.assertEqual(lib.read_text(os.path.join(out, "sig_%d" % lr)),
                             signal.Signals(sig).name + "\n")
        self.assertTrue(lib.wait_dead(pids))
        # Workers that die from the forwarded signal are not failures.
        self.assertNotIn("ChildFailedError", res.err)
        self.assertNoLeftovers()
        return res

    def test_sigterm_forwarded(self):
        self.forward_case(signal.SIGTERM, 143)

    def test_sigint_forwarded(self):
        self.forward_case(signal.SIGINT, 130)

    def test_sighup_forwarded(self):
        self.forward_case(signal.SIGHUP, 129)

    def test_sigquit_forwarded(self):
        self.forward_case(signal.SIGQUIT, 131)

    def test_ctrl_c_to_process_group_reaches_workers_once(self):
        # A terminal's Ctrl-C signals elasticd's whole process group. Workers
        # live in their own sessions, so they see SIGINT once: the forwarded one.
        out = self.out_dir()
        script = self.write_py("catcher.py", CATCHER.replace("os._exit(code)",
                                                             "time.sleep(0.5); os._exit(code)"))
        a = self.start("--standalone", "--nproc-per-node", "2", script, out, "0",
                       new_session=True)
        pids = [lib.read_pid_file(os.path.join(out, "ready_%d" % lr)) for lr in range(2)]
        self.assertTrue(all(pids))
        for p in pids:
            self.assertNotEqual(os.getpgid(p), a.pid)
        os.killpg(a.pid, signal.SIGINT)
        res = a.wait(timeout=30)
        self.assertRc(res, 130)
        for lr in range(2):
            self.assertEqual(lib.read_text(os.path.join(out, "sig_%d" % lr)), "SIGINT\n")
        self.assertNoLeftovers()

    def test_second_different_signal_kills_at_once(self):
        out = self.out_dir()
        a = self.start("--standalone", "--shutdown-timeout", "120", "--no-python", "/bin/sh",
                       "-c", STUBBORN_SH.replace("TERM", "TERM INT"), out)
        pid = lib.read_pid_file(os.path.join(out, "ready_0"))
        self.assertTrue(pid)
        a.signal(signal.SIGTERM)
        self.assertTrue(a.wait_stderr("death signal"))
        a.signal(signal.SIGINT)
        res = a.wait(timeout=60)
        self.assertLess(res.elapsed, 60)
        self.assertIn(res.rc, (143, 130))
        self.assertTrue(lib.wait_dead([pid]))

    def test_signal_while_stopping_a_failed_group(self):
        # Rank 1 failed; rank 0 ignores SIGTERM so the group is still stopping
        # when the agent is told to stop: a second signal must still cut it short.
        out = self.out_dir()
        a = self.start("--standalone", "--nproc-per-node", "2", "--shutdown-timeout", "120",
                       "--no-python", "/bin/sh", "-c",
                       'if [ "$LOCAL_RANK" = 0 ]; then ' + STUBBORN_SH + '; fi;'
                       ' while [ ! -e "$0/ready_0" ]; do sleep 0.05; done; exit 1', out)
        pid = lib.read_pid_file(os.path.join(out, "ready_0"))
        self.assertTrue(pid)
        self.assertTrue(a.wait_stderr("closing signal"))
        a.signal(signal.SIGTERM)
        self.assertTrue(a.wait_stderr("death signal"))
        a.signal(signal.SIGTERM)
        res = a.wait(timeout=60)
        self.assertLess(res.elapsed, 60)
        self.assertIn(res.rc, (1, 143))
        self.assertTrue(lib.wait_dead([pid]))
        self.assertNoLeftovers()

    def test_worker_nonzero_exit_on_signal_is_not_a_failure(self):
        a, out, pids = self.start_catchers(2, 7)
        a.signal(signal.SIGTERM)
        res = a.wait(timeout=30)
        self.assertRc(res, 143)
        self.assertNotIn("ChildFailedError", res.err)

    def test_signal_does_not_restart(self):
        log_dir = self.path("logs")
        a, out, pids = self.start_catchers(2, 1, "--max-restarts", "3", "--log-dir", log_dir)
        a.signal(signal.SIGTERM)
        res = a.wait(timeout=30)
        self.assertRc(res, 143)
        self.assertEqual(self.attempts(self.only_run_dir(log_dir)), ["attempt_0"])

    def test_signal_reaches_background_children(self):
        # The whole process group is signalled, not just the worker.
        out = self.out_dir()
        a = self.start("--standalone", "--no-python", "/bin/sh", "-c",
                       'sleep 1000 & echo $! > "$0/bg"; wait', out)
        bg = lib.read_pid_file(os.path.join(out, "bg"))
        self.assertTrue(bg)
        a.signal(signal.SIGTERM)
        res = a.wait(timeout=30)
        self.assertRc(res, 143)
        self.assertTrue(lib.wait_dead([bg]))

    def test_sigterm_escalates_to_sigkill(self):
        out = self.out_dir()
        a = self.start("--standalone", "--nproc-per-node", "2", "--shutdown-timeout", "2",
                       "--no-python", "/bin/sh", "-c", STUBBORN_SH, out)
        pids = [lib.read_pid_file(os.path.join(out, "ready_%d" % lr)) for lr in range(2)]
        self.assertTrue(all(pids))
        t0 = time.monotonic()
        a.signal(signal.SIGTERM)
        res = a.wait(timeout=30)
        took = time.monotonic() - t0
        self.assertRc(res, 143)
        self.assertGreaterEqual(took, 1.5, "SIGKILL came before the shutdown timeout")
        self.assertLess(took, 15)
        self.assertIn("forcefully", res.err)
        self.assertTrue(lib.wait_dead(pids))
        self.assertNoLeftovers()

    def test_shutdown_timeout_from_env(self):
        out = self.out_dir()
        a = self.start("--standalone", "--no-python", "/bin/sh", "-c", STUBBORN_SH, out,
                       env=self.env(TORCH_ELASTIC_SHUTDOWN_TIMEOUT="1"))
        self.assertTrue(lib.read_pid_file(os.path.join(out, "ready_0")))
        t0 = time.monotonic()
        a.signal(signal.SIGTERM)
        res = a.wait(timeout=30)
        self.assertRc(res, 143)
        self.assertLess(time.monotonic() - t0, 15)

    def test_second_signal_kills_at_once(self):
        out = self.out_dir()
        a = self.start("--standalone", "--nproc-per-node", "2", "--shutdown-timeout", "120",
                       "--no-python", "/bin/sh", "-c", STUBBORN_SH, out)
        pids = [lib.read_pid_file(os.path.join(out, "ready_%d" % lr)) for lr in range(2)]
        self.assertTrue(all(pids))
        a.signal(signal.SIGTERM)
        self.assertTrue(a.wait_stderr("death signal"), "first SIGTERM not logged")
        time.sleep(0.3)
        self.assertTrue(all(lib.pid_alive(p) for p in pids), "SIGTERM should be ignored")
        t0 = time.monotonic()
        a.signal(signal.SIGTERM)
        res = a.wait(timeout=60)
        self.assertLess(time.monotonic() - t0, 30)
        self.assertRc(res, 143)
        self.assertTrue(lib.wait_dead(pids))
        self.assertNoLeftovers()

    def test_worker_signal_state_is_clean(self):
        # The agent blocks the handled signals and ignores SIGPIPE; none of that
        # may leak into workers (python and plain programs alike).
        out = self.out_dir()
        script = self.write_py("st.py", r"""
import os, sys
status = open('/proc/self/status').read()
f = dict(l.split(':\t', 1) for l in status.splitlines() if ':\t' in l)
with open(os.path.join(sys.argv[1], 'py_%s' % os.environ['LOCAL_RANK']), 'w') as o:
    o.write('%s %s\n' % (f['SigBlk'].strip(), f['SigIgn'].strip()))
""")
        res = self.run_elasticd("--standalone", "--nproc-per-node", "2", "-t", "3", script, out)
        self.assertRc(res, 0)
        res = self.run_elasticd("--standalone", "--no-python", "/bin/sh", "-c",
                                'grep -E "^Sig(Blk|Ign)" /proc/self/status > "$0/sh"', out)
        self.assertRc(res, 0)
        for lr in range(2):
            blk, ign = lib.read_text(os.path.join(out, "py_%d" % lr)).split()
            self.assertEqual(int(blk, 16), 0, "SigBlk of a worker: %s" % blk)
            # Python itself ignores SIGPIPE and SIGXFSZ at start-up; nothing else.
            own = (1 << (signal.SIGPIPE - 1)) | (1 << (signal.SIGXFSZ - 1))
            self.assertEqual(int(ign, 16) & ~own, 0, "SigIgn of a worker: %s" % ign)
        fields = dict((k, v.strip()) for k, v in (
            line.split(":", 1) for line in lib.read_text(os.path.join(out, "sh")).splitlines()))
        self.assertEqual(int(fields["SigBlk"], 16), 0)
        # Started with nothing ignored, so the worker ignores nothing.
        self.assertEqual(int(fields["SigIgn"], 16), 0)

    def test_sigpipe_default_in_worker(self):
        # A worker writing to a closed pipe dies of SIGPIPE like under a shell.
        out = self.out_dir()
        res = self.run_elasticd("--standalone", "--no-python", "/bin/sh", "-c",
                                '{ yes; echo $? > "$0/st"; } | head -n 1 > /dev/null', out,
                                timeout=30)
        self.assertRc(res, 0)
        # 128 + SIGPIPE: killed by the signal, not "write error: Broken pipe".
        self.assertEqual(lib.read_text(os.path.join(out, "st")), "141\n")

    def test_nohup_sighup_ignored(self):
        out = self.out_dir()
        a = self.start("--standalone", "--no-python", "/bin/sh", "-c",
                       'echo $$$$ > "$0/ready_0"; sleep 2; echo finished > "$0/done"', out,
                       ignore_signals=(signal.SIGHUP,))
        self.assertTrue(lib.read_pid_file(os.path.join(out, "ready_0")))
        a.signal(signal.SIGHUP)
        time.sleep(0.2)
        a.signal(signal.SIGHUP)
        res = a.wait(timeout=30)
        self.assertRc(res, 0)
        self.assertEqual(lib.read_text(os.path.join(out, "done")), "finished\n")

    def test_nohup_sighup_stays_ignored_in_workers(self):
        # nohup elasticd: the workers ignore SIGHUP too; SIGINT and SIGQUIT,
        # which a shell ignores for background jobs, are back at default
        # (as under torchrun: tests/e2e/test_torchrun_parity.py).
        out = self.out_dir()
        res = self.run_elasticd("--standalone", "--nproc-per-node", "1", "--no-python",
                                "/bin/sh", "-c", 'grep "^SigIgn" /proc/self/status > "$0/sh"',
                                out, ignore_signals=(signal.SIGHUP, signal.SIGINT,
                                                     signal.SIGQUIT))
        self.assertRc(res, 0)
        ign = int(lib.read_text(os.path.join(out, "sh")).split(":")[1].strip(), 16)
        self.assertEqual(ign, 1 << (signal.SIGHUP - 1), "SigIgn of a worker: %x" % ign)

    def test_nohup_sigterm_still_handled(self):
        # Only the signal ignored at start is left alone.
        out = self.out_dir()
        script = self.write_py("catcher.py", CATCHER)
        a = self.start("--standalone", script, out, "0", ignore_signals=(signal.SIGHUP,))
        self.assertTrue(lib.read_pid_file(os.path.join(out, "ready_0")))
        a.signal(signal.SIGTERM)
        res = a.wait(timeout=30)
        self.assertRc(res, 143)
        self.assertEqual(lib.read_text(os.path.join(out, "sig_0")), "SIGTERM\n")

    def test_signals_to_handle(self):
        # --signals-to-handle adds SIGUSR1: forwarded, exit 128+10.
        out = self.out_dir()
        script = self.write_py("usr.py", r"""
import os, signal, sys, time
out = sys.argv[1]
def h(sig, frame):
    open(os.path.join(out, 'sig_0'), 'w').write(signal.Signals(sig).name + '\n')
    os._exit(0)
signal.signal(signal.SIGUSR1, h)
open(os.path.join(out, 'ready_0'), 'w').write('%d\n' % os.getpid())
while True:
    time.sleep(1)
""")
        a = self.start("--standalone", "--signals-to-handle", "SIGTERM,SIGUSR1", script, out)
        self.assertTrue(lib.read_pid_file(os.path.join(out, "ready_0")))
        a.signal(signal.SIGUSR1)
        res = a.wait(timeout=30)
        self.assertRc(res, 128 + signal.SIGUSR1)
        self.assertEqual(lib.read_text(os.path.join(out, "sig_0")), "SIGUSR1\n")


if __name__ == "__main__":
    lib.main()
