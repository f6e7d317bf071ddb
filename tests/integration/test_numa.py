#!/usr/bin/python3
"""NUMA binding seen from outside: --dry-run's JSON plan, the CPUs a worker
really gets (/proc/self/status Cpus_allowed_list), the plan staying inside the
agent's own affinity (as under taskset), memory binding, and the errors.

Topologies come from hwloc XML files: tests/data/topo (hand-made; the host-*
ones only use CPUs 0 and 1, so their plans apply on any machine with two CPUs)
and ../shared/topologies (real machines; they must be there)."""

import contextlib
import json
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import lib  # noqa: E402

TESTS_DIR = os.environ.get("TESTS_DIR") or os.path.dirname(lib.HERE)
TOPO = os.path.join(TESTS_DIR, "data", "topo")
SHARED = os.path.join(os.path.dirname(os.path.abspath(lib.SOURCE_ROOT)), "shared", "topologies")
DGX2 = os.path.join(SHARED, "nvidiaDGX2.xml")
KEYS = {"local_rank", "gpu", "numa_nodes", "cpus", "mems", "mode"}

# A worker that records what it got: "<Cpus_allowed_list>|<CUDA_DEVICE_ORDER>|<bound>"
# in <dir>/w_<LOCAL_RANK>; bound is the number of memory mappings with an MPOL_BIND
# policy to node 0.
REPORT = ["--no-python", "/bin/sh", "-c",
          'c=$(sed -n "s/^Cpus_allowed_list:[[:space:]]*//p" /proc/self/status); '
          'b=$(grep -c " bind:0 " /proc/self/numa_maps); '
          'echo "$c|${CUDA_DEVICE_ORDER-unset}|$b" > "$0/w_$LOCAL_RANK"']


def topo(name):
    return os.path.join(TOPO, name + ".xml")


@contextlib.contextmanager
def affinity(cpus):
    """Run the block with this process (and so the elasticd it starts) restricted
    to cpus, as `taskset -c`."""
    old = os.sched_getaffinity(0)
    os.sched_setaffinity(0, cpus)
    try:
        yield
    finally:
        os.sched_setaffinity(0, old)


class NumaTest(lib.ElasticdTestCase):

    def setUp(self):
        super().setUp()
        self.assertTrue(os.path.exists(DGX2), "the shared topologies are missing: %s" % DGX2)
        self.assertTrue({0, 1} <= os.sched_getaffinity(0),
                        "these tests need CPUs 0 and 1, this process has %s"
                        % sorted(os.sched_getaffinity(0)))

    def out_dir(self):
        d = self.path("out")
        os.makedirs(d, exist_ok=True)
        return d

    def reports(self, d):
        got = {}
        for name in sorted(os.listdir(d)):
            with open(os.path.join(d, name)) as f:
                cpus, order, bound = f.read().strip().split("|")
            got[int(name[2:])] = {"cpus": cpus, "order": order, "bound": int(bound)}
        return got

    def plan(self, *args, env=None, rc=0):
        """Run elasticd --dry-run with args; returns the JSON objects, by line."""
        d = self.out_dir()
        res = self.run_elasticd("--dry-run", *args, *REPORT, d, env=env)
        self.assertRc(res, rc)
        # --dry-run starts nothing.
        self.assertEqual(os.listdir(d), [])
        if rc != 0:
            self.assertEqual(res.out, "")
            return res
        lines = res.out.splitlines()
        objs = [json.loads(line) for line in lines]
        for i, o in enumerate(objs):
            self.assertEqual(set(o), KEYS, "keys of line %d: %r" % (i, res))
            self.assertEqual(o["local_rank"], i)
        return objs

    def run_workers(self, *args, env=None, rc=0):
        d = self.out_dir()
        res = self.run_elasticd("--standalone", "--log-dir", self.path("logs"), *args, *REPORT,
                                d, env=env)
        self.assertRc(res, rc)
        return res, self.reports(d)

    def events(self, name):
        """The events of that name in the run's events.jsonl."""
        run_dir = self.only_run_dir(self.path("logs"))
        with open(os.path.join(run_dir, "events.jsonl")) as f:
            return [e for e in map(json.loads, f) if e["name"] == name]

    # -- --dry-run ------------------------------------------------------------

    def test_dry_run_dgx2_every_mode(self):
        node0 = ["0000:34:00.0", "0000:36:00.0", "0000:39:00.0", "0000:3b:00.0",
                 "0000:57:00.0", "0000:59:00.0", "0000:5c:00.0", "0000:5e:00.0"]
        node1 = ["0000:b7:00.0", "0000:b9:00.0", "0000:bc:00.0", "0000:be:00.0",
                 "0000:e0:00.0", "0000:e2:00.0", "0000:e5:00.0", "0000:e7:00.0"]
        for mode in ("node", "socket", "core-complex"):
            with self.subTest(mode=mode):
                objs = self.plan("--nproc-per-node", "gpu", "--numa-binding", mode,
                                 "--topology-xml", DGX2)
                self.assertEqual(len(objs), 16)
                for i, o in enumerate(objs):
                    first = i < 8
                    self.assertEqual(o["gpu"], (node0 + node1)[i])
                    self.assertEqual(o["numa_nodes"], [0] if first else [1])
                    self.assertEqual(o["cpus"], "0-1" if first else "24-25")
                    self.assertIsNone(o["mems"])
                    self.assertEqual(o["mode"], mode)

    def test_dry_run_dgx2_exclusive_fails_clearly(self):
        res = self.plan("--nproc-per-node", "gpu", "--numa-binding", "exclusive",
                        "--topology-xml", DGX2, rc=2)
        self.assertIn("local_rank 0 (GPU 0000:34:00.0): There are only 2 physical cores on "
                      "NUMA node 0, but there are 8 GPUs associated with this NUMA node.",
                      res.err)

    def test_dry_run_exclusive_with_fallback(self):
        objs = self.plan("--nproc-per-node", "gpu", "--numa-binding", "exclusive",
                         "--numa-fallback", "--topology-xml", DGX2)
        self.assertEqual([o["cpus"] for o in objs], [None] * 16)
        self.assertEqual(objs[9]["gpu"], "0000:b9:00.0")
        self.assertEqual(objs[9]["numa_nodes"], [1])

    def test_dry_run_membind_and_smt(self):
        objs = self.plan("--nproc-per-node", "gpu", "--numa-binding", "exclusive",
                         "--numa-membind", "--topology-xml", topo("uneven-smt"))
        self.assertEqual([(o["cpus"], o["mems"]) for o in objs],
                         [("0-1,8-9", "0"), ("2,10", "0"), ("3,11", "0"), ("4-7,12-15", "1")])

    def test_dry_run_without_binding(self):
        # The GPUs each rank gets, nothing bound.
        objs = self.plan("--nproc-per-node", "5", "--topology-xml", topo("uneven-smt"))
        self.assertEqual([o["gpu"] for o in objs],
                         ["0000:17:00.0", "0000:18:00.0", "0000:3a:00.0", "0000:b1:00.0", None])
        self.assertEqual([o["mode"] for o in objs], [None] * 5)
        self.assertEqual([o["cpus"] for o in objs], [None] * 5)

    def test_dry_run_this_machine(self):
        objs = self.plan("--nproc-per-node", "2")
        self.assertEqual(len(objs), 2)
        self.assertEqual(objs[1]["mode"], None)

    def test_dry_run_hwloc_xmlfile(self):
        objs = self.plan("--nproc-per-node", "gpu", "--numa-binding", "core-complex",
                         env=self.env(HWLOC_XMLFILE=topo("l3-groups")))
        self.assertEqual([o["cpus"] for o in objs], ["0-3", "4-7", "0-3", "10-13"])

    def test_cuda_visible_devices_selects(self):
        objs = self.plan("--nproc-per-node", "gpu", "--numa-binding", "node",
                         "--topology-xml", topo("uneven-smt"),
                         env=self.env(CUDA_VISIBLE_DEVICES="3,1"))
        self.assertEqual([(o["gpu"], o["cpus"]) for o in objs],
                         [("0000:b1:00.0", "4-7,12-15"), ("0000:18:00.0", "0-3,8-11")])

    def test_cuda_visible_devices_uuid_binds_nothing(self):
        objs = self.plan("--nproc-per-node", "gpu", "--numa-binding", "node",
                         "--topology-xml", topo("uneven-smt"),
                         env=self.env(CUDA_VISIBLE_DEVICES="GPU-5e0d2b1c-aaaa-bbbb"))
        self.assertEqual(len(objs), 1)
        self.assertIsNone(objs[0]["cpus"])
        self.assertIsNone(objs[0]["gpu"])
        self.assertIn("names GPUs by UUID", self.agents[-1].stderr_text())

    def test_nproc_gpu_counts_hwloc_gpus(self):
        self.assertEqual(len(self.plan("--nproc-per-node", "gpu",
                                       "--topology-xml", topo("uneven-smt"))), 4)
        self.assertEqual(len(self.plan("--nproc-per-node", "auto",
                                       "--topology-xml", topo("more-gpus-than-cores"))), 4)
        res = self.plan("--nproc-per-node", "gpu", "--topology-xml", topo("gpuless"), rc=2)
        self.assertIn("--nproc-per-node: no GPU found", res.err)

    def test_nproc_xpu_counts_intel_gpus(self):
        # Intel GPUs only: xpu counts them (not the NPU), gpu finds none.
        objs = self.plan("--nproc-per-node", "xpu", "--topology-xml", topo("intel-gpus"))
        self.assertEqual(len(objs), 3)
        self.assertIn("Using nproc_per_node=xpu, setting nproc_per_node to 3",
                      self.agents[-1].stderr_text())
        res = self.plan("--nproc-per-node", "gpu", "--topology-xml", topo("intel-gpus"), rc=2)
        self.assertIn("--nproc-per-node: no GPU found", res.err)
        # NVIDIA GPUs only: no Intel GPU for xpu, a usage error as for gpu.
        res = self.plan("--nproc-per-node", "xpu", "--topology-xml", topo("uneven-smt"), rc=2)
        self.assertIn("--nproc-per-node: no Intel GPU (xpu) found on this node", res.err)
        # auto: torch's accelerator count, Intel GPUs when there is no other GPU.
        objs = self.plan("--nproc-per-node", "auto", "--topology-xml", topo("intel-gpus"))
        self.assertEqual(len(objs), 3)
        # The binding knows NVIDIA and AMD GPUs only: a usage error up front.
        for kind in ("xpu", "auto"):
            res = self.plan("--nproc-per-node", kind, "--numa-binding", "node",
                            "--topology-xml", topo("intel-gpus"), rc=2)
            self.assertIn("--numa-binding node: binds workers to NVIDIA and AMD GPUs only, and "
                          "--nproc-per-node %s counted 3 Intel GPUs" % kind, res.err)

    # -- the binding, applied ----------------------------------------------------

    def test_worker_cpus_equal_the_plan(self):
        args = ["--nproc-per-node", "2", "--numa-binding", "exclusive",
                "--topology-xml", topo("host-1node")]
        objs = self.plan(*args)
        self.assertEqual([o["cpus"] for o in objs], ["0", "1"])
        res, got = self.run_workers(*args)
        self.assertEqual({r: g["cpus"] for r, g in got.items()}, {0: "0", 1: "1"})
        # cuda:<local rank> is the GPU bound for.
        self.assertEqual({g["order"] for g in got.values()}, {"PCI_BUS_ID"})
        # One info line per worker with its CPU set.
        self.assertRegex(res.err, r"local_rank 0 \(pid \d+\): GPU 0000:01:00\.0, NUMA node 0, "
                                  r"CPUs 0\n")
        self.assertRegex(res.err, r"local_rank 1 \(pid \d+\): GPU 0000:02:00\.0, NUMA node 0, "
                                  r"CPUs 1\n")
        # The worker-started events carry the binding.
        started = [e["metadata"] for e in self.events("elasticd.worker.started")]
        self.assertEqual([(m["local_rank"], m["gpu"], m["numa_nodes"], m["cpus"], m["mems"],
                           m["mode"]) for m in started],
                         [(0, "0000:01:00.0", "0", "0", None, "exclusive"),
                          (1, "0000:02:00.0", "0", "1", None, "exclusive")])

    def test_status_shows_the_plan(self):
        # While the workers run, the control plane's status gives each one's
        # binding with --dry-run's keys and values.
        args = ["--nproc-per-node", "2", "--numa-binding", "exclusive", "--numa-membind",
                "--gpu-bus-ids", "02:00.0,01:00.0", "--topology-xml", topo("host-1node")]
        plan = self.plan(*args)
        sock, go = self.path("ctl.sock"), self.path("go")
        a = self.start("--standalone", "--control-socket", sock, *args, "--no-python",
                       "/bin/sh", "-c", 'while [ ! -e "$0" ]; do sleep 0.05; done', go)
        self.assertTrue(a.wait_stderr("local_rank 1 (pid"), a.stderr_text())
        st = json.loads(subprocess.run(
            ["curl", "-sS", "--max-time", "10", "--unix-socket", sock,
             "http://localhost/handler/status"], capture_output=True, check=True).stdout)
        got = [{k: w[k] for k in KEYS} for w in st["workers"]]
        open(go, "w").close()
        self.assertRc(a.wait(), 0)
        self.assertEqual(got, plan)
        self.assertEqual([(o["gpu"], o["cpus"], o["mems"]) for o in plan],
                         [("0000:02:00.0", "0", "0"), ("0000:01:00.0", "1", "0")])

    def test_gpu_bus_ids_order(self):
        args = ["--nproc-per-node", "gpu", "--numa-binding", "node",
                "--gpu-bus-ids", "81:00.0,0000:01:00.0", "--topology-xml", topo("host-2node")]
        objs = self.plan(*args)
        self.assertEqual([(o["gpu"], o["numa_nodes"], o["cpus"]) for o in objs],
                         [("0000:81:00.0", [1], "1"), ("0000:01:00.0", [0], "0")])
        _, got = self.run_workers(*args)
        self.assertEqual({r: g["cpus"] for r, g in got.items()}, {0: "1", 1: "0"})

    def test_user_cuda_device_order_kept(self):
        _, got = self.run_workers("--nproc-per-node", "1", "--numa-binding", "node",
                                  "--topology-xml", topo("host-1node"),
                                  env=self.env(CUDA_DEVICE_ORDER="FASTEST_FIRST"))
        self.assertEqual(got[0]["order"], "FASTEST_FIRST")

    def test_device_order_when_gpus_are_named(self):
        # No binding, but the plan names GPU n for local rank n: cuda:n must be it.
        mine = lib.read_text("/proc/self/status").split("Cpus_allowed_list:")[1].split()[0]
        _, got = self.run_workers("--nproc-per-node", "1", "--topology-xml", topo("host-1node"))
        self.assertEqual(got[0], {"cpus": mine, "order": "PCI_BUS_ID", "bound": 0})
        # No GPU named (GPU-less machine, UUIDs in CUDA_VISIBLE_DEVICES): left alone.
        _, got = self.run_workers("--nproc-per-node", "1", "--topology-xml", topo("gpuless"))
        self.assertEqual(got[0]["order"], "unset")
        _, got = self.run_workers("--nproc-per-node", "1", "--topology-xml", topo("host-1node"),
                                  env=self.env(CUDA_VISIBLE_DEVICES="GPU-8a9b8c7d-1111"))
        self.assertEqual(got[0]["order"], "unset")

    def test_membind(self):
        args = ["--nproc-per-node", "1", "--numa-binding", "node", "--numa-membind",
                "--topology-xml", topo("host-1node")]
        self.assertEqual(self.plan(*args)[0]["mems"], "0")
        res, got = self.run_workers(*args)
        self.assertGreater(got[0]["bound"], 0, "no MPOL_BIND mapping in numa_maps")
        self.assertIn("CPUs 0-1, memory nodes 0", res.err)
        # Off by default, as torchrun.
        _, got = self.run_workers("--nproc-per-node", "1", "--numa-binding", "node",
                                  "--topology-xml", topo("host-1node"))
        self.assertEqual(got[0]["bound"], 0)

    # -- under taskset: the plan stays inside the agent's CPUs -----------------------

    def test_taskset_narrows_the_plan(self):
        args = ["--nproc-per-node", "2", "--numa-binding", "node",
                "--topology-xml", topo("host-1node")]
        self.assertEqual([o["cpus"] for o in self.plan(*args)], ["0-1", "0-1"])
        with affinity({0}):
            self.assertEqual([o["cpus"] for o in self.plan(*args)], ["0", "0"])
            _, got = self.run_workers(*args)
        self.assertEqual({r: g["cpus"] for r, g in got.items()}, {0: "0", 1: "0"})

    def test_taskset_too_few_cores_for_exclusive(self):
        with affinity({1}):
            res = self.plan("--nproc-per-node", "2", "--numa-binding", "exclusive",
                            "--topology-xml", topo("host-1node"), rc=2)
        self.assertIn("There are only 1 physical cores on NUMA node 0, but there are 2 GPUs",
                      res.err)

    def test_too_few_cores_for_exclusive_is_a_usage_error(self):
        # A usage error (exit 2) before any worker starts, naming the counts.
        with affinity({1}):
            res, got = self.run_workers("--nproc-per-node", "2", "--numa-binding", "exclusive",
                                        "--topology-xml", topo("host-1node"), rc=2)
        self.assertEqual(got, {})
        self.assertIn("--numa-binding exclusive: local_rank 0 (GPU 0000:01:00.0): There are "
                      "only 1 physical cores on NUMA node 0, but there are 2 GPUs associated "
                      "with this NUMA node. Start fewer local ranks (--nproc-per-node)", res.err)
        self.assertFalse(os.path.exists(self.path("logs")) and
                         any(self.attempts(d) for d in self.run_dirs(self.path("logs"))))

    def test_taskset_warns_once_when_ranks_share_a_cpu(self):
        args = ["--nproc-per-node", "2", "--numa-binding", "node",
                "--topology-xml", topo("host-1node")]
        res, _ = self.run_workers(*args)
        self.assertNotIn("bound to CPU", res.err)
        with affinity({0}):
            res, got = self.run_workers(*args)
        self.assertEqual({r: g["cpus"] for r, g in got.items()}, {0: "0", 1: "0"})
        want = ("--numa-binding node: local_ranks 0 and 1 are both bound to CPU 0 alone "
                "(2 workers on 1 CPU)")
        self.assertEqual(res.err.count(want), 1, res.err)

    def test_taskset_node_without_cpus_is_an_error(self):
        args = ["--nproc-per-node", "2", "--numa-binding", "node",
                "--topology-xml", topo("host-2node")]
        with affinity({0}):
            res = self.plan(*args, rc=1)
            self.assertIn("local_rank 1 (GPU 0000:81:00.0): none of the CPUs of NUMA node 1 may "
                          "be used here (allowed CPUs: 0)", res.err)
            # --numa-fallback: that rank runs unbound (with the agent's CPUs).
            res, got = self.run_workers(*args, "--numa-fallback")
        self.assertEqual({r: g["cpus"] for r, g in got.items()}, {0: "0", 1: "0"})
        self.assertRegex(res.err, r"local_rank 1 \(pid \d+\) runs unbound: none of the CPUs")

    # -- a topology of another machine ------------------------------------------------

    def test_other_machine_topology_is_not_applied(self):
        args = ["--nproc-per-node", "2", "--numa-binding", "node",
                "--topology-xml", topo("far-cpus")]
        self.assertEqual([o["cpus"] for o in self.plan(*args)], ["4000-4001"] * 2)
        res, got = self.run_workers(*args, rc=1)
        self.assertIn("is not this machine's (CPUs 4000-4001 of this rank's plan are not online here)", res.err)
        self.assertEqual(got, {})
        res, got = self.run_workers(*args, "--numa-fallback")
        self.assertEqual(sorted(got), [0, 1])

    # -- usage errors ---------------------------------------------------------------

    def test_usage_errors(self):
        cases = [
            (["--gpu-bus-ids", "zz:00.0"], "--gpu-bus-ids: invalid value 'zz:00.0'"),
            (["--gpu-bus-ids", "01:00.0,1:0.0"], "0000:01:00.0 is listed twice"),
            (["--gpu-bus-ids", "0000:99:00.0", "--topology-xml", topo("host-1node")],
             "--gpu-bus-ids: no PCI device 0000:99:00.0 in "),
            (["--numa-membind"], "--numa-membind needs --numa-binding"),
            (["--numa-binding", "nodes"], "--numa-binding: invalid value 'nodes'"),
            (["--topology-xml", self.path("missing.xml")], "--topology-xml: cannot read"),
            (["--topology-xml", self.write_script("bad.xml", "<nope/>\n")],
             "is not an hwloc XML topology"),
        ]
        for args, msg in cases:
            with self.subTest(args=args):
                res = self.plan(*args, rc=2)
                self.assertIn(msg, res.err)

    def test_help_lists_the_flags(self):
        res = self.run_elasticd("--help")
        self.assertRc(res, 0)
        for flag in ("--numa-binding", "--numa-membind", "--numa-fallback", "--gpu-bus-ids",
                     "--topology-xml", "--dry-run"):
            self.assertIn(flag, res.out)
        self.assertNotIn("Not implemented yet", res.out)


if __name__ == "__main__":
    lib.main()
