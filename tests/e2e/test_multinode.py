#!/usr/bin/python3
"""End-to-end: a real PyTorch DDP job (examples/ddp.py, gloo on CPU) across two
elasticd agents x two workers (world size 4) that meet through the c10d
rendezvous, the workers using group rank 0's agent store
(TORCHELASTIC_USE_AGENT_STORE=True); and the same job surviving one node's
worker failure with --max-restarts 1.

Run by `meson test --suite e2e`, or by hand:
`ELASTICD=build/src/elasticd /usr/bin/python3 tests/e2e/test_multinode.py -v`.
"""

import os
import shutil
import socket
import subprocess
import tempfile
import textwrap
import unittest

import sys
sys.dont_write_bytecode = True  # no __pycache__ in the source tree
from e2e_common import PY  # noqa: E402
HERE = os.path.dirname(os.path.abspath(__file__))
SOURCE_ROOT = os.environ.get("SOURCE_ROOT") or os.path.dirname(os.path.dirname(HERE))
ELASTICD = os.path.abspath(os.environ.get("ELASTICD")
                           or os.path.join(SOURCE_ROOT, "build", "src", "elasticd"))
DDP = os.path.join(SOURCE_ROOT, "examples", "ddp.py")
# 2 CPUs, 4 workers importing torch (~1-2 s each): generous.
RUN_TIMEOUT = 120

SCRUB = ("PET_", "TORCHELASTIC_", "TORCH_ELASTIC_")


def free_port():
    """A port below the kernel's ephemeral range (which other processes'
    outgoing connections take at any moment), free right now."""
    import random
    while True:
        port = random.randrange(20000, 32000)
        with socket.socket() as s:
            try:
                s.bind(("", port))
            except OSError:
                continue
            return port


class MultiNodeDDPTest(unittest.TestCase):

    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="elasticd-e2e-mn-")
        self.procs = []

    def tearDown(self):
        for p in self.procs:
            if p.poll() is None:
                p.kill()
                p.wait()
        shutil.rmtree(self.tmp, ignore_errors=True)

    def env(self):
        env = {k: v for k, v in os.environ.items()
               if not k.startswith(SCRUB) and k not in ("MASTER_ADDR", "MASTER_PORT", "RANK",
                                                        "WORLD_SIZE", "LOCAL_RANK")}
        env.update(PYTHON_EXEC=PY, PYTHONDONTWRITEBYTECODE="1", TMPDIR=self.tmp,
                   GLOO_SOCKET_IFNAME="lo", OMP_NUM_THREADS="1")
        return env

    def start(self, port, script, *args, extra=()):
        n = len(self.procs)
        out = open(os.path.join(self.tmp, "agent%d.out" % n), "wb")
        err = open(os.path.join(self.tmp, "agent%d.err" % n), "wb")
        p = subprocess.Popen([ELASTICD, "--nnodes", "2", "--nproc-per-node", "2",
                              "--rdzv-backend", "c10d", "--rdzv-endpoint", "127.0.0.1:%d" % port,
                              "--rdzv-id", "ddp-e2e", "--rdzv-conf",
                              "keep_alive_interval=1,keep_alive_max_attempt=5",
                              "--log-dir", os.path.join(self.tmp, "logs%d" % n)] + list(extra) +
                             [script] + list(args),
                             env=self.env(), cwd=self.tmp, stdin=subprocess.DEVNULL,
                             stdout=out, stderr=err)
        p.out_path, p.err_path = out.name, err.name
        out.close()
        err.close()
        self.procs.append(p)
        return p

    def all_logs(self):
        text = []
        for p in self.procs:
            with open(p.err_path, errors="replace") as f:
                text.append("--- %s ---\n%s" % (p.err_path, f.read()[-4000:]))
        return "\n".join(text)

    def finish(self, p):
        try:
            rc = p.wait(RUN_TIMEOUT)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()
            rc = None
        with open(p.out_path, errors="replace") as f:
            out = f.read()
        with open(p.err_path, errors="replace") as f:
            err = f.read()
        return rc, out, err

    def test_ddp_two_agents_two_workers(self):
        port = free_port()
        agents = [self.start(port, DDP, "--steps", "20") for _ in range(2)]
        results = [self.finish(a) for a in agents]
        for rc, out, err in results:
            self.assertEqual(rc, 0, "agent failed:\n%s\n%s" % (out[-3000:], self.all_logs()))
        text = "".join(out for _, out, _ in results)
        self.assertIn("ddp.py: world size 4, 20 steps", text)
        self.assertIn("all 4 ranks have identical weights", text)
        err = "".join(e for _, _, e in results)
        # The workers met on an agent's store, not on one of their own.
        self.assertRegex(err, r"Rendezvous complete: round 0, group_rank 0/2")
        self.assertRegex(err, r"Rendezvous complete: round 0, group_rank 1/2")

    def test_ddp_survives_a_worker_failure(self):
        port = free_port()
        marker = os.path.join(self.tmp, "failed-once")
        wrapper = os.path.join(self.tmp, "fail_once.py")
        with open(wrapper, "w") as f:
            f.write(textwrap.dedent("""
                import os, runpy, sys
                import torch.distributed as dist
                marker, ddp = sys.argv[1], sys.argv[2]
                print("attempt", os.environ["TORCHELASTIC_RESTART_COUNT"], "rank",
                      os.environ["RANK"], "world", os.environ["WORLD_SIZE"],
                      "agent_store", os.environ["TORCHELASTIC_USE_AGENT_STORE"], flush=True)
                if not os.path.exists(marker):
                    # Everyone meets once; then global rank 3 dies mid-job.
                    dist.init_process_group("gloo", init_method="env://")
                    dist.barrier()
                    if dist.get_rank() == 3:
                        open(marker, "w").close()
                        os._exit(7)
                    dist.barrier()  # the survivors' collective breaks
                    sys.exit(0)
                sys.argv = [ddp, "--steps", "10"]
                runpy.run_path(ddp, run_name="__main__")
                """))
        agents = [self.start(port, wrapper, marker, DDP, extra=("--max-restarts", "1"))
                  for _ in range(2)]
        results = [self.finish(a) for a in agents]
        for rc, out, err in results:
            self.assertEqual(rc, 0, "agent failed:\n%s\n%s" % (out[-3000:], self.all_logs()))
        self.assertTrue(os.path.exists(marker))
        text = "".join(out for _, out, _ in results)
        self.assertIn("ddp.py: world size 4, 10 steps", text)
        self.assertIn("all 4 ranks have identical weights", text)
        err = "".join(e for _, _, e in results)
        self.assertIn("Worker group FAILED. 1/1 attempts left", err)


if __name__ == "__main__":
    unittest.main(verbosity=2)
