#!/usr/bin/python3
"""End-to-end: a zero-code hang rule against a real DDP job (gloo on CPU;
torch 1.13 as e2e_hang, torch 2.6 as e2e_hang_torch2; e2e_common.py).

Two ranks train a DDP model; only rank 1 prints "step <n>" lines. In attempt
0, rank 1 gets stuck in time.sleep inside wait_for_data() before its step 5
(rank 0 then waits in the gradients' all-reduce). With --hang-cadence
'step [0-9]+' --hang-cadence-interval 3, elasticd finds rank 1 hung, stops it
with SIGABRT (it exports PYTHONFAULTHANDLER=1, the workers have no worker
server), so that Python writes the stuck stack ("Current thread ...",
'File "...", line N in wait_for_data') to attempt_0/1/stderr.log; the attempt
is a failure, and the restart (attempt 1) trains to the end: exit 0.

Run by `meson test --suite e2e`, or by hand:
  ELASTICD=build/src/elasticd /usr/bin/python3 tests/e2e/test_hang.py -v
"""

import glob
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import unittest

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
from e2e_common import ELASTICD, clean_env, label  # noqa: E402
RUN_TIMEOUT = 120

WORKER = r"""
import os, sys, time
import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP

dist.init_process_group("gloo", init_method="env://")
rank = dist.get_rank()
attempt = int(os.environ["TORCHELASTIC_RESTART_COUNT"])
torch.set_num_threads(1)
torch.manual_seed(rank)
model = DDP(torch.nn.Linear(4, 1))
opt = torch.optim.SGD(model.parameters(), lr=0.1)


def wait_for_data(step):
    if attempt == 0 and rank == 1 and step == 5:
        time.sleep(600)  # the hang: a stuck data loader


for step in range(10):
    wait_for_data(step)
    loss = model(torch.randn(8, 4)).pow(2).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
    if rank == 1:
        print("step %d loss %.4f" % (step, loss.item()), flush=True)
dist.barrier()
dist.destroy_process_group()
"""


class HangE2ETest(unittest.TestCase):
    maxDiff = None

    def setUp(self):
        self.assertTrue(os.access(ELASTICD, os.X_OK), ELASTICD)
        self.tmp = tempfile.mkdtemp(prefix="elasticd-e2e-hang-")

    def tearDown(self):
        shutil.rmtree(self.tmp, ignore_errors=True)

    def test_hung_ddp_rank_sigabrt_stack_then_restart(self):
        script = os.path.join(self.tmp, "hang_ddp.py")
        with open(script, "w") as f:
            f.write(WORKER)
        logs = os.path.join(self.tmp, "logs")
        argv = [ELASTICD, "--standalone", "--nproc-per-node", "2", "--max-restarts", "1",
                "--log-dir", logs, "-t", "3", "--hang-cadence", "step [0-9]+",
                "--hang-cadence-interval", "3", script]
        start = time.monotonic()
        res = subprocess.run(argv, env=clean_env(), cwd=self.tmp, stdin=subprocess.DEVNULL,
                             capture_output=True, text=True, timeout=RUN_TIMEOUT)
        elapsed = time.monotonic() - start
        ctx = "%s\n--- stderr\n%s" % (label(), res.stderr[-8000:])
        self.assertEqual(res.returncode, 0, ctx)
        self.assertLess(elapsed, 100, ctx)  # rank 1 would sleep 600 s
        (run_dir,) = glob.glob(os.path.join(logs, "*"))
        self.assertTrue(os.path.isdir(os.path.join(run_dir, "attempt_1")), ctx)

        # The SIGABRT stack of the rank stuck in time.sleep, in its stderr.log.
        err_log = os.path.join(run_dir, "attempt_0", "1", "stderr.log")
        with open(err_log, errors="replace") as f:
            text = f.read()
        self.assertIn("Fatal Python error: Aborted", text, ctx)
        self.assertRegex(text, r"Current thread 0x[0-9a-f]+ \(most recent call first\):")
        self.assertRegex(text, r'File "[^"]*hang_ddp\.py", line [0-9]+ in wait_for_data')
        self.assertRegex(text, r'File "[^"]*hang_ddp\.py", line [0-9]+ in <module>')
        self.assertIn("hang: cadence 'step [0-9]+' (no match for 3 s) on local rank 1",
                      res.stderr)
        self.assertIn("stacks in %s (SIGABRT)" % err_log, res.stderr)

        with open(os.path.join(run_dir, "events.jsonl")) as f:
            evs = [json.loads(line) for line in f]
        hang = [e["metadata"] for e in evs if e["name"] == "elasticd.worker.hang"]
        self.assertEqual(len(hang), 1, hang)
        self.assertEqual((hang[0]["rule"], hang[0]["local_rank"], hang[0]["global_rank"]),
                         ("cadence", 1, 1))
        self.assertEqual(hang[0]["stacks"], "%s (SIGABRT)" % err_log)
        # The restart trained to the end: rank 1's last step in attempt 1.
        with open(os.path.join(run_dir, "attempt_1", "1", "stdout.log")) as f:
            self.assertTrue(re.search(r"^step 9 ", f.read(), re.M), ctx)


if __name__ == "__main__":
    unittest.main(verbosity=2)
