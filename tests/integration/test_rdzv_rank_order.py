#!/usr/bin/python3
"""Rank order of the dynamic rendezvous, the same cases for both backends
(c10d on a TCPStore one agent hosts, etcd against a real etcd member):
TORCH_ELASTIC_WORKER_IDENTICAL=1 (torch main's fast path: ranks from the
group rank and this node's local world size, no rank exchange),
--rdzv-conf rank_key (group ranks ordered by a per-node key from env:VAR,
file:PATH or hostname, in natural order, agents started in the opposite
order), segment=2 parking a spare that is promoted after a SIGKILL, and bad
rank_key / segment values (exit 2 naming the key)."""

import os
import signal
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import lib  # noqa: E402
from etcd_cluster import Etcd  # noqa: E402
from test_rdzv_c10d import free_port  # noqa: E402

DUMP = r"""
d="$1"; shift
f="$d/w_$$"
printf '%s\n' "RANK=$RANK" "LOCAL_RANK=$LOCAL_RANK" "WORLD_SIZE=$WORLD_SIZE" \
  "GROUP_RANK=$GROUP_RANK" "GROUP_WORLD_SIZE=$GROUP_WORLD_SIZE" \
  "ROLE_RANK=$ROLE_RANK" "ROLE_WORLD_SIZE=$ROLE_WORLD_SIZE" \
  "LOCAL_WORLD_SIZE=$LOCAL_WORLD_SIZE" "KEY=$MYKEY" "ROUND=$ELASTICD_ROUND" > "$f.tmp"
mv "$f.tmp" "$f"
exec /bin/sh -c "$@"
"""

FAST = "keep_alive_interval=1,keep_alive_max_attempt=3,last_call_timeout=0.5"


class RankOrderBase:
    backend = None

    def setUp(self):
        super().setUp()
        self.dumps = self.path("dumps")
        os.makedirs(self.dumps)
        self.script = self.write_sh("dump.sh", DUMP)

    def endpoint(self):
        raise NotImplementedError

    def agent(self, nnodes, nproc=1, conf="", env_add=None, extra=(), body="exit 0"):
        env = self.env()
        env.update(env_add or {})
        args = ["--nnodes", nnodes, "--nproc-per-node", str(nproc), "--rdzv-backend",
                self.backend, "--rdzv-endpoint", self.endpoint(), "--rdzv-id", "job",
                "--monitor-interval", "0.1", "--rdzv-conf", FAST + ("," + conf if conf else "")]
        args += list(extra) + ["--no-python", self.script, self.dumps, body]
        return self.start(*args, env=env)

    def worker_dumps(self):
        out = []
        for name in sorted(os.listdir(self.dumps)):
            if name.endswith(".tmp"):
                continue
            with open(os.path.join(self.dumps, name)) as f:
                out.append(dict(line.strip().split("=", 1) for line in f if "=" in line))
        return out

    def run_all(self, agents):
        for a in agents:
            self.assertRc(a.wait(90), 0)
        return self.worker_dumps()

    def test_worker_identical(self):
        # Local world sizes 2 and 1 on purpose: with the fast path each node
        # computes from its own size (torch: group_rank * local_world_size,
        # world group_world_size * local_world_size), where the exchange
        # would give one world of 3.
        env = {"TORCH_ELASTIC_WORKER_IDENTICAL": "1"}
        agents = [self.agent("2", nproc=2, env_add=env), self.agent("2", nproc=1, env_add=env)]
        dumps = self.run_all(agents)
        self.assertIn("TORCH_ELASTIC_WORKER_IDENTICAL=1", agents[0].result.err)
        self.assertEqual(len(dumps), 3, dumps)
        for d in dumps:
            lws, g, lr = int(d["LOCAL_WORLD_SIZE"]), int(d["GROUP_RANK"]), int(d["LOCAL_RANK"])
            self.assertEqual(int(d["RANK"]), g * lws + lr, d)
            self.assertEqual(int(d["WORLD_SIZE"]), 2 * lws, d)
            self.assertEqual(d["ROLE_RANK"], d["RANK"], d)
            self.assertEqual(d["ROLE_WORLD_SIZE"], d["WORLD_SIZE"], d)
        self.assertEqual(sorted(d["GROUP_RANK"] for d in dumps),
                         sorted(["0", "0", "1"]) if [d for d in dumps if d["GROUP_RANK"] == "0"
                                                     and d["LOCAL_WORLD_SIZE"] == "2"]
                         else ["0", "1", "1"])

    def test_worker_identical_same_size(self):
        env = {"TORCH_ELASTIC_WORKER_IDENTICAL": "1"}
        dumps = self.run_all([self.agent("2", nproc=2, env_add=env) for _ in range(2)])
        self.assertEqual(sorted(int(d["RANK"]) for d in dumps), [0, 1, 2, 3])
        for d in dumps:
            self.assertEqual(d["WORLD_SIZE"], "4")
            self.assertEqual(int(d["RANK"]), int(d["GROUP_RANK"]) * 2 + int(d["LOCAL_RANK"]))

    def check_order(self, dumps, keys_in_rank_order):
        self.assertEqual(len(dumps), len(keys_in_rank_order), dumps)
        got = {d["KEY"]: d for d in dumps}
        for g, key in enumerate(keys_in_rank_order):
            self.assertEqual(got[key]["GROUP_RANK"], str(g), dumps)
            self.assertEqual(got[key]["RANK"], str(g), dumps)
            self.assertEqual(got[key]["WORLD_SIZE"], str(len(keys_in_rank_order)))

    def test_rank_key_env_natural_order(self):
        # Started in the opposite order to their keys (node order, the
        # default, follows the pids: the first started would be rank 0), and
        # "10" sorts after "9" (bytewise it would come first).
        agents = []
        for key in ["10", "9", "2"]:
            agents.append(self.agent("3", conf="rank_key=env:MYKEY", env_add={"MYKEY": key}))
        self.check_order(self.run_all(agents), ["2", "9", "10"])
        self.assertIn("rank key '10'", agents[0].result.err)

    def test_rank_key_with_sizes_that_differ(self):
        # Group rank 0 gathers the nodes' sizes in group rank order, which
        # with rank keys is not the order the state keeps its nodes in
        # (by name: here the reverse of the keys').
        sizes = {"10": 1, "9": 2, "2": 3}
        agents = [self.agent("3", nproc=sizes[k], conf="rank_key=env:MYKEY",
                             env_add={"MYKEY": k}) for k in ["10", "9", "2"]]
        dumps = self.run_all(agents)
        self.assertEqual(len(dumps), 6, dumps)
        base = {"2": 0, "9": 3, "10": 5}
        for d in dumps:
            k = d["KEY"]
            self.assertEqual(d["GROUP_RANK"], str(["2", "9", "10"].index(k)), dumps)
            self.assertEqual(d["LOCAL_WORLD_SIZE"], str(sizes[k]), dumps)
            self.assertEqual(int(d["RANK"]), base[k] + int(d["LOCAL_RANK"]), dumps)
            self.assertEqual(d["WORLD_SIZE"], "6", dumps)

    def test_rank_key_file(self):
        agents = []
        for key in ["rack-b:3", "rack-a:12", "rack-a:4"]:
            f = self.path("key-%s" % key.replace(":", "_"))
            with open(f, "w") as fh:
                fh.write("  %s\n" % key)
            agents.append(self.agent("3", conf="rank_key=file:" + f, env_add={"MYKEY": key}))
        self.check_order(self.run_all(agents), ["rack-a:4", "rack-a:12", "rack-b:3"])

    def test_rank_key_hostname(self):
        # One host: every node has the same key, the node order decides.
        dumps = self.run_all([self.agent("2", conf="rank_key=hostname") for _ in range(2)])
        self.assertEqual(sorted(d["GROUP_RANK"] for d in dumps), ["0", "1"])

    def wait_round(self, want, timeout=45):
        """Wait for workers of one round whose (KEY, GROUP_RANK) pairs are
        exactly want (a dict), each with GROUP_WORLD_SIZE len(want)."""
        def ready():
            by_round = {}
            for d in self.worker_dumps():
                by_round.setdefault(d["ROUND"], {})[d["KEY"]] = d
            for ds in by_round.values():
                if ({k: d["GROUP_RANK"] for k, d in ds.items()} == want and
                        all(d["GROUP_WORLD_SIZE"] == str(len(want)) for d in ds.values())):
                    return ds
            return None
        got = lib.wait_until(ready, timeout)
        self.assertIsNotNone(got, "no round %r in %r" % (want, self.worker_dumps()))
        return got

    def test_segment_spare_promoted(self):
        # segment=2: one domain (prefix "r1") of three nodes gives one whole
        # segment, r1-1 and r1-2; r1-3 is parked as a spare with no worker.
        # SIGKILL r1-1: once its lease / heartbeat expires the spare is
        # promoted, and the next round is r1-2 (rank 0) and r1-3 (rank 1).
        conf = "rank_key=env:MYKEY,segment=2"
        agents = {}
        for key in ["r1-3", "r1-2", "r1-1"]:
            agents[key] = self.agent("2:3", conf=conf, env_add={"MYKEY": key},
                                     body="sleep 60")
        self.wait_round({"r1-1": "0", "r1-2": "1"})
        self.assertNotIn("r1-3", {d["KEY"] for d in self.worker_dumps()})
        agents["r1-1"].signal(signal.SIGKILL)
        self.wait_round({"r1-2": "0", "r1-3": "1"})
        for a in agents.values():
            a.signal(signal.SIGTERM)

    def test_bad_segment(self):
        r = self.agent("2", conf="segment=3").wait(30)
        self.assertEqual(r.rc, 2, r)
        self.assertIn("segment", r.err)

    def test_bad_rank_key(self):
        empty = self.path("empty")
        open(empty, "w").close()
        cases = [
            ("rank_key=env:NO_SUCH_VAR_X", {}, "not set or is empty"),
            ("rank_key=env:MYKEY", {"MYKEY": ""}, "not set or is empty"),
            ("rank_key=file:" + self.path("missing"), {}, "cannot be read or is empty"),
            ("rank_key=file:" + empty, {}, "cannot be read or is empty"),
            ("rank_key=dns", {}, "expected env:VAR, file:PATH or hostname"),
            ("rank_key=env:MYKEY", {"MYKEY": "a b"}, "invalid key"),
            ("rank_key=env:MYKEY", {"MYKEY": "x@y"}, "invalid key"),
        ]
        for conf, env, why in cases:
            r = self.agent("1", conf=conf, env_add=env).wait(30)
            self.assertEqual(r.rc, 2, (conf, r))
            self.assertIn("rank_key", r.err, (conf, r))
            self.assertIn(why, r.err, (conf, r))


class C10dRankOrder(RankOrderBase, lib.ElasticdTestCase):
    backend = "c10d"

    def setUp(self):
        super().setUp()
        self.port = free_port()

    def endpoint(self):
        return "127.0.0.1:%d" % self.port


class EtcdRankOrder(RankOrderBase, lib.ElasticdTestCase):
    backend = "etcd"

    def setUp(self):
        super().setUp()
        self.etcd = Etcd(1)

    def tearDown(self):
        super().tearDown()
        self.etcd.stop()

    def endpoint(self):
        return self.etcd.endpoints


if __name__ == "__main__":
    lib.main()
