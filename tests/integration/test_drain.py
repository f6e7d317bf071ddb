#!/usr/bin/python3
"""The drain control verb: the drained node's workers get the notice, exit,
and the node leaves the job for good (exit 0) while the others re-form without
it and without spending a restart; a worker that ignores the notice is
stopped after the grace (exit 1); a drain with no worker group leaves at
once."""

import os
import signal
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import lib  # noqa: E402
from test_ctl import curl, post  # noqa: E402
from test_rdzv_c10d import FAST, free_port  # noqa: E402

# Dumps what it got into DIR; on the notice (SIGUSR1) writes "<dump>.notice"
# and exits 0, or with "ignore" ignores it; then waits.
WORKER = r"""
import json, os, signal, sys, time
d, mode = sys.argv[1], sys.argv[2]
f = os.path.join(d, "w_%d" % os.getpid())
env = {k: os.environ.get(k) for k in ("RANK", "WORLD_SIZE", "GROUP_WORLD_SIZE",
                                      "TORCHELASTIC_RESTART_COUNT")}
env["AGENT_PID"] = os.getppid()
with open(f + ".tmp", "w") as out:
    json.dump(env, out)
os.rename(f + ".tmp", f)

def notice(sig, frame):
    open(f + ".notice", "w").close()
    sys.exit(0)

signal.signal(signal.SIGUSR1, notice if mode == "exit" else signal.SIG_IGN)
while True:
    time.sleep(1)
"""


class DrainTest(lib.ElasticdTestCase):

    def setUp(self):
        super().setUp()
        self.port = free_port()
        self.dumps = self.path("dumps")
        os.makedirs(self.dumps)
        self.script = self.write_py("worker.py", WORKER)

    def agent(self, n, mode="exit", nnodes="2:3", extra=()):
        sock = self.path("ctl%d.sock" % n)
        a = self.start("--nnodes", nnodes, "--nproc-per-node", "1", "--rdzv-backend", "c10d",
                       "--rdzv-endpoint", "127.0.0.1:%d" % self.port, "--rdzv-id", "job",
                       "--rdzv-conf", FAST, "--monitor-interval", "0.1", "--max-restarts", "3",
                       "--control-socket", sock, *extra, self.script, self.dumps, mode)
        a.sock = sock
        return a

    def three(self, mode_of_drained="exit", extra=()):
        a = [self.agent(0, extra=extra)]
        time.sleep(0.5)  # the first one hosts the c10d store: it stays
        a += [self.agent(1, extra=extra), self.agent(2, mode_of_drained, extra=extra)]
        self.wait_world(3, 3)
        return a

    def stop_all(self, agents):
        # The store host last, so that the others' stop does not race its.
        for x in reversed(agents):
            x.signal(signal.SIGTERM)
            self.assertRc(x.wait(30), 128 + signal.SIGTERM)

    def test_drain_leaves_the_others_running_without_a_restart(self):
        a = self.three()
        drained = a[2]
        r = post(drained.sock, "/handler/drain")
        self.assertEqual(r.status, 200, r.body)
        res = drained.wait(30)
        self.assertRc(res, 0)
        # Its worker got the notice and exited 0 on it.
        notices = [n for n in os.listdir(self.dumps) if n.endswith(".notice")]
        self.assertEqual(len(notices), 1, notices)
        self.assertIn("drain: sent SIGUSR1 to 1 worker process group", res.err)
        self.assertIn("leaving the rendezvous", res.err)
        # The others re-form as two nodes, for free, and keep running.
        two = self.wait_world(2, 2, timeout=30)
        self.assertEqual({d["TORCHELASTIC_RESTART_COUNT"] for d in two}, {"0"}, two)
        self.assertNotIn(drained.pid, {d["AGENT_PID"] for d in two})
        time.sleep(2)
        for x in a[:2]:
            self.assertIsNone(x.proc.poll(), "a survivor exited: %s" % x.stderr_text())
            st = curl(x.sock, "/handler/status").json()
            self.assertEqual(st["restart_count"], 0, st)
            self.assertEqual(st["group_world_size"], 2, st)
            # Two alike nodes: the world is twice this node's workers.
            self.assertEqual(st["world_size"], 2 * st["local_world_size"], st)
            self.assertEqual(st["worker_state"], "HEALTHY", st)
        self.stop_all(a[:2])

    def test_drain_stops_a_worker_that_ignores_the_notice(self):
        a = self.three("ignore")
        drained = a[2]
        t0 = time.monotonic()
        r = post(drained.sock, "/handler/drain?signal=USR1&timeout=3")
        self.assertEqual(r.status, 200, r.body)
        st = curl(drained.sock, "/handler/status").json()
        self.assertEqual(st["phase"], "draining", st)
        self.assertEqual(st["drain"]["signal"], "SIGUSR1", st)
        self.assertEqual(st["drain"]["timeout_s"], 3, st)
        self.assertTrue(0 < st["drain"]["remaining_s"] <= 3, st)
        # Asked twice: refused, the first drain goes on.
        r = post(drained.sock, "/handler/drain")
        self.assertEqual(r.status, 500, r.body)
        self.assertIn("draining already", r.body)
        res = drained.wait(40)
        self.assertRc(res, 1)
        self.assertGreaterEqual(time.monotonic() - t0, 2.9)
        self.assertIn("the workers did not exit within 3 s of SIGUSR1", res.err)
        # Still left cleanly: the others re-form without spending a restart.
        two = self.wait_world(2, 2, timeout=30)
        self.assertEqual({d["TORCHELASTIC_RESTART_COUNT"] for d in two}, {"0"}, two)
        for x in a[:2]:
            self.assertIsNone(x.proc.poll(), "a survivor exited: %s" % x.stderr_text())
        self.stop_all(a[:2])

    def test_drain_in_rendezvous_leaves_at_once(self):
        # Alone in a 2-node job: waiting in the rendezvous; drain exits 0 now.
        a = self.agent(0, nnodes="2")
        self.assertTrue(lib.wait_until(lambda: os.path.exists(a.sock), 20))
        r = post(a.sock, "/handler/drain")
        self.assertEqual(r.status, 200, r.body)
        res = a.wait(20)
        self.assertRc(res, 0)
        self.assertIn("drain: no worker group runs (rendezvous)", res.err)


if __name__ == "__main__":
    lib.main()
