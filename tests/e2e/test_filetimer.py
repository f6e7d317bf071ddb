#!/usr/bin/python3
"""End-to-end: torch's own FileTimerClient against elasticd's FileTimer server
(torch.distributed.elastic.timer, file_based_local_timer.py; torch 1.13 as
e2e_filetimer, torch 2.6 as e2e_filetimer_torch2; e2e_common.py).

With TORCHELASTIC_ENABLE_FILE_TIMER=1 in elasticd's environment, a worker that
does timer.configure(FileTimerClient(os.environ["TORCHELASTIC_TIMER_FILE"]))
and `with timer.expires(after=1): time.sleep(30)` is SIGKILLed by elasticd
about a second later (torch's client default signal); one that leaves the
block in time is not. The FIFO is torch's default /tmp/watchdog_timer_<uuid4>
and is gone when elasticd exits.

Run by `meson test --suite e2e`, or by hand:
  ELASTICD=build/src/elasticd /usr/bin/python3 tests/e2e/test_filetimer.py -v
"""

import json
import os
import shutil
import subprocess
import sys
import tempfile
import textwrap
import time
import unittest

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
from e2e_common import ELASTICD, clean_env, label  # noqa: E402
RUN_TIMEOUT = 120

WORKER = r"""
import json, os, sys, time
import torch.distributed.elastic.timer as timer
from torch.distributed.elastic.timer import FileTimerClient

path = os.environ["TORCHELASTIC_TIMER_FILE"]
timer.configure(FileTimerClient(path))
with open(sys.argv[2] + ".tmp", "w") as f:
    json.dump({"pid": os.getpid(), "path": path, "t": time.time()}, f)
os.rename(sys.argv[2] + ".tmp", sys.argv[2])
if sys.argv[1] == "hang":
    with timer.expires(after=1):
        time.sleep(30)
else:
    with timer.expires(after=2):
        time.sleep(0.2)
    time.sleep(3)
"""



class FileTimerE2ETest(unittest.TestCase):
    maxDiff = None

    def setUp(self):
        self.assertTrue(os.access(ELASTICD, os.X_OK), ELASTICD)
        self.tmp = tempfile.mkdtemp(prefix="elasticd-e2e-filetimer-")

    def tearDown(self):
        shutil.rmtree(self.tmp, ignore_errors=True)

    def path(self, *p):
        return os.path.join(self.tmp, *p)

    def run_worker(self, mode, expect_rc):
        script = self.path("worker.py")
        with open(script, "w") as f:
            f.write(textwrap.dedent(WORKER))
        events = self.path("events.jsonl")
        note = self.path("note.json")
        argv = [ELASTICD, "--standalone", "--nproc-per-node", "1", "--log-dir",
                self.path("logs"), "--event-log-file", events, script, mode, note]
        start = time.monotonic()
        res = subprocess.run(argv, env=clean_env(TORCHELASTIC_ENABLE_FILE_TIMER="1"),
                             cwd=self.tmp, stdin=subprocess.DEVNULL, capture_output=True,
                             text=True, timeout=RUN_TIMEOUT)
        elapsed = time.monotonic() - start
        self.assertEqual(res.returncode, expect_rc, "%s\n--- stderr\n%s" % (label(),
                                                                          res.stderr[-6000:]))
        with open(events) as f:
            evs = [json.loads(line) for line in f]
        with open(note) as f:
            n = json.load(f)
        self.assertRegex(n["path"], r"^/tmp/watchdog_timer_[0-9a-f-]{36}$")
        self.assertFalse(os.path.exists(n["path"]), "FIFO left behind")
        return res, evs, n, elapsed

    def test_expired_worker_is_killed(self):
        res, evs, n, elapsed = self.run_worker("hang", 1)
        self.assertLess(elapsed, 25, res.stderr)  # the worker would sleep 30 s
        ex = [e["metadata"] for e in evs if e["name"] == "elasticd.worker.timer_expired"]
        self.assertEqual(len(ex), 1, evs)
        self.assertEqual((ex[0]["worker_pid"], ex[0]["signal"], ex[0]["action"]),
                         (n["pid"], 9, "signalled"))
        # expires() names the scope "<file>#<line>" of its caller's frame
        # (contextlib's, as it is a @contextmanager).
        self.assertRegex(ex[0]["scope_id"], r"\.py#\d+$")
        self.assertLess(ex[0]["late_ms"], 500)
        # Killed about a second after the worker was ready (import time aside).
        self.assertLess(ex[0]["expiration_time"] - n["t"], 2.0)
        exited = [e["metadata"] for e in evs if e["name"] == "elasticd.worker.exited"]
        self.assertEqual((exited[0]["pid"], exited[0]["signal"]), (n["pid"], "SIGKILL"))
        self.assertIn("FileTimer: pid %d timer" % n["pid"], res.stderr)

    def test_released_timer_does_not_fire(self):
        res, evs, n, _ = self.run_worker("release", 0)
        self.assertEqual([e for e in evs if e["name"] == "elasticd.worker.timer_expired"], [])
        self.assertNotIn("expired", res.stderr)


if __name__ == "__main__":
    unittest.main(verbosity=2)
