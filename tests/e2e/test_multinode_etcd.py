#!/usr/bin/python3
"""End-to-end: a real PyTorch DDP job (examples/ddp.py, gloo on CPU) across two
elasticd agents x two workers (world size 4) that meet through the etcd
rendezvous backend on a throwaway single-member etcd; the workers meet on
their own TCPStore at group rank 0's MASTER_ADDR:MASTER_PORT
(TORCHELASTIC_USE_AGENT_STORE=False, as torch's etcd backends).

Run by `meson test --suite e2e`, or by hand:
`ELASTICD=build/src/elasticd /usr/bin/python3 tests/e2e/test_multinode_etcd.py -v`.
"""

import os
import shutil
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "integration"))

from etcd_cluster import Etcd  # noqa: E402

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
from e2e_common import PY, torch_version  # noqa: E402
SOURCE_ROOT = os.environ.get("SOURCE_ROOT") or os.path.dirname(os.path.dirname(HERE))
ELASTICD = os.path.abspath(os.environ.get("ELASTICD")
                           or os.path.join(SOURCE_ROOT, "build", "src", "elasticd"))
DDP = os.path.join(SOURCE_ROOT, "examples", "ddp.py")
RUN_TIMEOUT = 180

SCRUB = ("PET_", "TORCHELASTIC_", "TORCH_ELASTIC_")


class MultiNodeEtcdDDPTest(unittest.TestCase):

    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="elasticd-e2e-etcd-")
        self.procs = []
        self.etcd = Etcd(1)

    def tearDown(self):
        for p in self.procs:
            if p.poll() is None:
                p.kill()
                p.wait()
        self.etcd.stop()
        shutil.rmtree(self.tmp, ignore_errors=True)

    def env(self):
        env = {k: v for k, v in os.environ.items()
               if not k.startswith(SCRUB) and k not in ("MASTER_ADDR", "MASTER_PORT", "RANK",
                                                        "WORLD_SIZE", "LOCAL_RANK")}
        env.update(PYTHON_EXEC=PY, PYTHONDONTWRITEBYTECODE="1", TMPDIR=self.tmp,
                   GLOO_SOCKET_IFNAME="lo", OMP_NUM_THREADS="1")
        return env

    def start(self, *args):
        n = len(self.procs)
        out = open(os.path.join(self.tmp, "agent%d.out" % n), "wb")
        err = open(os.path.join(self.tmp, "agent%d.err" % n), "wb")
        p = subprocess.Popen([ELASTICD, "--nnodes", "2", "--nproc-per-node", "2",
                              "--rdzv-backend", "etcd", "--rdzv-endpoint", self.etcd.endpoints,
                              "--rdzv-id", "ddp-e2e-etcd", "--rdzv-conf",
                              "keep_alive_interval=1,keep_alive_max_attempt=5",
                              "--local-addr", "127.0.0.1",
                              "--log-dir", os.path.join(self.tmp, "logs%d" % n)] + list(args),
                             env=self.env(), cwd=self.tmp, stdin=subprocess.DEVNULL,
                             stdout=out, stderr=err)
        p.out_path, p.err_path = out.name, err.name
        out.close()
        err.close()
        self.procs.append(p)
        return p

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
        torch_version()  # raises when PY has no torch: a failure, not a skip
        agents = [self.start(DDP, "--steps", "20") for _ in range(2)]
        results = [self.finish(a) for a in agents]
        for rc, out, err in results:
            self.assertEqual(rc, 0, "agent failed:\n%s\n%s" % (out[-3000:], err[-3000:]))
        text = "".join(out for _, out, _ in results)
        self.assertIn("ddp.py: world size 4, 20 steps", text)
        self.assertIn("all 4 ranks have identical weights", text)
        err = "".join(e for _, _, e in results)
        self.assertRegex(err, r"Rendezvous complete: round 0, group_rank 0/2")
        self.assertRegex(err, r"Rendezvous complete: round 0, group_rank 1/2")
        # The job's keys are gone from etcd.
        self.assertEqual(self.etcd.keys("/elasticd/"), [])


if __name__ == "__main__":
    unittest.main(verbosity=2)
