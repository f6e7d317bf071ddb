"""The multi-node DDP cases every rendezvous backend meets: a real PyTorch DDP
job (examples/ddp.py, gloo on CPU) across two elasticd agents x two workers
(world size 4), and the same job surviving one node's worker failure with
--max-restarts 1. test_multinode.py (c10d) and test_multinode_etcd.py (etcd)
each subclass MultiNodeCases and say how their agents meet (rdzv_flags)."""

import os
import shutil
import subprocess
import tempfile
import textwrap

from e2e_common import ELASTICD, SOURCE_ROOT, clean_env, torch_version

DDP = os.path.join(SOURCE_ROOT, "examples", "ddp.py")

# A worker that meets the others once, then global rank 3 dies mid-job on the
# first attempt; later attempts run ddp.py. argv: marker file, ddp.py.
FAIL_ONCE = textwrap.dedent("""
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
    """)


class MultiNodeCases:
    """Mix in before unittest.TestCase; set TMP_PREFIX and rdzv_flags()."""

    TMP_PREFIX = "elasticd-e2e-mn-"
    # 2 CPUs, 4 workers importing torch (~1-2 s each): generous.
    RUN_TIMEOUT = 120

    def rdzv_flags(self):
        """The agents' --rdzv-* (and address) flags: how they meet."""
        raise NotImplementedError

    def setUp(self):
        super().setUp()
        self.tmp = tempfile.mkdtemp(prefix=self.TMP_PREFIX)
        self.procs = []

    def tearDown(self):
        for p in self.procs:
            if p.poll() is None:
                p.kill()
                p.wait()
        shutil.rmtree(self.tmp, ignore_errors=True)
        super().tearDown()

    def env(self):
        return clean_env(TMPDIR=self.tmp, GLOO_SOCKET_IFNAME="lo", OMP_NUM_THREADS="1")

    def start(self, script, *args, extra=()):
        """An agent of a 2-node job with 2 workers running script args."""
        n = len(self.procs)
        out = open(os.path.join(self.tmp, "agent%d.out" % n), "wb")
        err = open(os.path.join(self.tmp, "agent%d.err" % n), "wb")
        p = subprocess.Popen([ELASTICD, "--nnodes", "2", "--nproc-per-node", "2"]
                             + self.rdzv_flags()
                             + ["--log-dir", os.path.join(self.tmp, "logs%d" % n)] + list(extra)
                             + [script] + list(args),
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
            rc = p.wait(self.RUN_TIMEOUT)
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
            self.assertEqual(rc, 0, "agent failed:\n%s\n%s" % (out[-3000:], self.all_logs()))
        text = "".join(out for _, out, _ in results)
        self.assertIn("ddp.py: world size 4, 20 steps", text)
        self.assertIn("all 4 ranks have identical weights", text)
        err = "".join(e for _, _, e in results)
        self.assertRegex(err, r"Rendezvous complete: round 0, group_rank 0/2")
        self.assertRegex(err, r"Rendezvous complete: round 0, group_rank 1/2")

    def test_ddp_survives_a_worker_failure(self):
        torch_version()
        marker = os.path.join(self.tmp, "failed-once")
        wrapper = os.path.join(self.tmp, "fail_once.py")
        with open(wrapper, "w") as f:
            f.write(FAIL_ONCE)
        agents = [self.start(wrapper, marker, DDP, extra=("--max-restarts", "1"))
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

