#!/usr/bin/python3
"""What a failure leaves behind when the worker wrote no error file: the last
lines of its captured stderr in the ChildFailedError table, and the agent's
own TORCHELASTIC_ERROR_FILE (a made-up entry for such a worker, torch's
SignalException when elasticd is stopped by a signal)."""

import os
import re
import signal
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import lib  # noqa: E402

HINT = "To enable traceback see: https://pytorch.org/docs/stable/elastic/errors.html"

# Writes n numbered lines to stderr, then ends as asked ("exit N" or "kill").
NOISY = r"""
i=1
while [ "$i" -le "$1" ]; do echo "oops line $i" >&2; i=$((i + 1)); done
echo "to stdout"
if [ "$2" = kill ]; then kill -9 $$; fi
exit "$2"
"""


class ReportTest(lib.ElasticdTestCase):

    def noisy(self):
        return self.write_sh("noisy.sh", NOISY)

    def stderr_log(self, log_dir):
        return os.path.join(self.only_run_dir(log_dir), "attempt_0", "0", "stderr.log")

    def root_block(self, res):
        table = lib.failure_table(res.err)
        self.assertIsNotNone(table, res)
        return table[table.index("Root Cause (first observed failure):"):]

    # -- item 8: the table shows the cause --

    def test_table_shows_last_stderr_lines_with_redirect(self):
        log_dir = self.path("logs")
        res = self.run_elasticd("--standalone", "-r", "2", "--log-dir", log_dir, "--no-python",
                                self.noisy(), "30", "3")
        self.assertRc(res, 1)
        root = self.root_block(res)
        path = self.stderr_log(log_dir)
        self.assertIn("  error_file: <N/A>\n"
                      "  traceback : last 20 lines of stderr (%s):\n" % path, root)
        lines = "".join("    oops line %d\n" % i for i in range(11, 31))
        self.assertIn(lines + "=", root)
        self.assertNotIn("oops line 10\n", root)
        self.assertNotIn(HINT, root)
        # torch's layout otherwise: the border is at most 60 wide.
        self.assertIn("\n" + "=" * 60 + "\n", lib.failure_table(res.err))

    def test_table_shows_stderr_after_the_signal_with_tee(self):
        log_dir = self.path("logs")
        res = self.run_elasticd("--standalone", "-t", "2", "--log-dir", log_dir, "--no-python",
                                self.noisy(), "1", "kill")
        self.assertRc(res, 1)
        root = self.root_block(res)
        m = re.search(r"  exitcode  : -9 \(pid: (\d+)\)\n", root)
        self.assertIsNotNone(m, root)
        self.assertIn("  traceback : Signal 9 (SIGKILL) received by PID %s; last line of stderr "
                      "(%s):\n    oops line 1\n" % (m.group(1), self.stderr_log(log_dir)), root)

    def test_table_bounds_the_lines_by_bytes(self):
        # One huge line then two short ones: only what fits 4 KiB, the cut line dropped.
        script = self.write_sh("long.sh", "head -c 10000 /dev/zero | tr '\\0' x >&2\n"
                               "printf '\\nshort 1\\nshort 2\\n' >&2\nexit 4\n")
        res = self.run_elasticd("--standalone", "-r", "2", "--log-dir", self.path("logs"),
                                "--no-python", script)
        self.assertRc(res, 1)
        root = self.root_block(res)
        self.assertIn("last 2 lines of stderr", root)
        self.assertIn("    short 1\n    short 2\n", root)
        self.assertNotIn("xxxx", root)

    def test_table_unchanged_without_captured_stderr(self):
        res = self.run_elasticd("--standalone", "-r", "1", "--log-dir", self.path("logs"),
                                "--no-python", self.noisy(), "3", "3")
        self.assertRc(res, 1)
        root = self.root_block(res)
        self.assertIn("  error_file: <N/A>\n  traceback : " + HINT + "\n", root)
        self.assertNotIn("last 3 lines", root)

    # -- item 7: the agent's own error file --

    def test_agent_error_file_made_up_with_stderr_lines(self):
        own = self.path("agent_error.json")
        log_dir = self.path("logs")
        res = self.run_elasticd("--standalone", "-r", "2", "--log-dir", log_dir, "--no-python",
                                self.noisy(), "2", "9", env=self.env(TORCHELASTIC_ERROR_FILE=own))
        self.assertRc(res, 1)
        data = lib.read_json(own)
        msg = data["message"]
        self.assertEqual(list(data), ["message"])
        self.assertEqual(list(msg), ["message", "extraInfo", "errorCode"])
        self.assertEqual(msg["errorCode"], 9)
        self.assertRegex(msg["message"], r"^ChildFailedError: local_rank 0 \(rank 0\) failed "
                         r"with exitcode 9 \(pid: \d+\)\n")
        tail = "last 2 lines of stderr (%s):\n  oops line 1\n  oops line 2" % \
            self.stderr_log(log_dir)
        self.assertTrue(msg["message"].endswith("\n" + tail), msg)
        self.assertEqual(msg["extraInfo"]["py_callstack"], tail)
        self.assertRegex(msg["extraInfo"]["timestamp"], r"^\d+$")
        # torch's json.dumps layout, one line.
        self.assertTrue(lib.read_text(own).startswith('{"message": {"message": "ChildFailed'))

    def test_agent_error_file_made_up_without_stderr(self):
        own = self.path("agent_error.json")
        res = self.run_elasticd("--standalone", "--no-python", "/bin/sh", "-c", "exit 9",
                                env=self.env(TORCHELASTIC_ERROR_FILE=own))
        self.assertRc(res, 1)
        msg = lib.read_json(own)["message"]
        self.assertEqual(msg["errorCode"], 9)
        self.assertEqual(msg["extraInfo"]["py_callstack"], HINT)
        self.assertIn("failed with exitcode 9", msg["message"])

    def test_agent_error_file_on_sigterm(self):
        own = self.path("agent_error.json")
        started = self.path("started")
        a = self.start("--standalone", "--no-python", "/bin/sh", "-c",
                       'touch "$0"; exec sleep 60', started,
                       env=self.env(TORCHELASTIC_ERROR_FILE=own))
        lib.wait_for_file(started)
        a.signal(signal.SIGTERM)
        res = a.wait()
        self.assertRc(res, 128 + signal.SIGTERM)
        msg = lib.read_json(own)["message"]
        want = "SignalException: Process %d got signal: 15" % a.pid
        self.assertEqual(msg["message"], want)
        self.assertEqual(msg["extraInfo"]["py_callstack"],
                         "torch.distributed.elastic.multiprocessing.api." + want + "\n")
        self.assertNotIn("errorCode", msg)
        self.assertNoLeftovers()

    def test_agent_error_file_on_sigint_during_rendezvous(self):
        # Stopped before any worker started (waiting for a second node).
        own = self.path("agent_error.json")
        a = self.start("--nnodes", "2", "--rdzv-backend", "c10d", "--rdzv-endpoint",
                       "127.0.0.1:%s" % lib._free_port(), "--no-python", "true",
                       env=self.env(TORCHELASTIC_ERROR_FILE=own))
        self.assertTrue(a.wait_stderr("rendezvous"), a.stderr_text())
        a.signal(signal.SIGINT)
        res = a.wait()
        self.assertRc(res, 128 + signal.SIGINT)
        self.assertEqual(lib.read_json(own)["message"]["message"],
                         "SignalException: Process %d got signal: 2" % a.pid)


if __name__ == "__main__":
    lib.main()
