"""The rendezvous cases every backend meets (DESIGN: both backends pass the
same tests): several real elasticd processes forming one job, completion at
max, min:max with last call, heterogeneous nodes and roles, a late joiner
restarting the group for free, a SIGKILLed agent dropped by the survivors, a
SIGTERMed one leaving, join timeout, a node failing for good and naming
itself, the exit barrier, spares, a crowd starting together, and `elasticctl
nodes` from every agent.

RdzvCases is a mixin: test_rdzv_c10d.py and test_rdzv_etcd.py each combine
it with lib.ElasticdTestCase and fill in the hooks (the backend's name, its
endpoint, its fast keep-alive settings, what the workers' store is), then add
the cases only their backend has."""

import json
import os
import re
import signal
import time

import ectl_nodes
import lib

# Dumps what the worker got, then runs the rest of its command line.
DUMP = r"""
d="$1"; shift
f="$d/w_${TORCHELASTIC_RUN_ID}_$$"
printf '%s\n' "RANK=$RANK" "LOCAL_RANK=$LOCAL_RANK" "WORLD_SIZE=$WORLD_SIZE" \
  "GROUP_RANK=$GROUP_RANK" "GROUP_WORLD_SIZE=$GROUP_WORLD_SIZE" "ROLE_RANK=$ROLE_RANK" \
  "ROLE_NAME=$ROLE_NAME" "ROLE_WORLD_SIZE=$ROLE_WORLD_SIZE" "LOCAL_WORLD_SIZE=$LOCAL_WORLD_SIZE" \
  "MASTER_ADDR=$MASTER_ADDR" "MASTER_PORT=$MASTER_PORT" \
  "TORCHELASTIC_USE_AGENT_STORE=$TORCHELASTIC_USE_AGENT_STORE" \
  "TORCHELASTIC_RESTART_COUNT=$TORCHELASTIC_RESTART_COUNT" "ELASTICD_ROUND=$ELASTICD_ROUND" \
  "AGENT_PID=$PPID" > "$f.tmp"
mv "$f.tmp" "$f"
exec /bin/sh -c "$@"
"""


class RdzvCases:
    """The shared cases; mix in before lib.ElasticdTestCase."""

    # -- hooks: a backend's subclass sets these -----------------------------------

    BACKEND = None            # --rdzv-backend
    FAST = None               # --rdzv-conf for quick keep-alive and last call
    LIVENESS = None           # how `elasticctl nodes` says a node is alive
    AGENT_STORE = None        # TORCHELASTIC_USE_AGENT_STORE the workers get
    WAIT_DUMPS_S = 30         # default wait for workers to start
    WAIT_ALL_S = 60           # default wait for agents to exit
    LATE_JOIN_S = 20          # a late joiner's round complete and done within
    REFORM_WAIT_S = 40        # survivors of a SIGKILLed node exit within
    REFORM_S = 25             # ... and re-formed and done within
    FAILED_WAIT_S = 40        # a node failing for good: the agents exit within

    def rdzv_endpoint(self):
        """The --rdzv-endpoint of this test's rendezvous (starting the
        backend's server when the backend needs one started first)."""
        raise NotImplementedError

    def fresh_rendezvous(self):
        """Make the next agents meet apart from the earlier ones' rendezvous
        (besides a new run id)."""

    def host_conf(self, host):
        """--rdzv-conf to add for the node that must host the rendezvous
        (host=True) or must not (False)."""
        return ""

    # -- helpers ------------------------------------------------------------------

    def setUp(self):
        super().setUp()
        self.dumps = self.path("dumps")
        os.makedirs(self.dumps)
        self.script = self.write_sh("dump.sh", DUMP)

    def agent(self, nnodes, body="exit 0", nproc=1, conf=None, endpoint=None, extra=(),
              env=None, run_id="job"):
        """Start an agent of nnodes ("n" or "min:max") whose workers dump what
        they got to self.dumps and then run body; conf=None is self.FAST,
        "" none."""
        conf = self.FAST if conf is None else conf
        args = ["--nnodes", nnodes, "--nproc-per-node", str(nproc), "--rdzv-backend",
                self.BACKEND, "--rdzv-endpoint", endpoint or self.rdzv_endpoint(),
                "--rdzv-id", run_id, "--monitor-interval", "0.1"]
        if conf:
            args += ["--rdzv-conf", conf]
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

    def wait_dumps(self, n, timeout=None, pred=None):
        def ready():
            d = self.worker_dumps()
            if pred:
                d = [x for x in d if pred(x)]
            return d if len(d) >= n else None
        got = lib.wait_until(ready, timeout or self.WAIT_DUMPS_S)
        self.assertIsNotNone(got, "only %r" % self.worker_dumps())
        return got

    def wait_all(self, agents, timeout=None):
        return [a.wait(timeout or self.WAIT_ALL_S) for a in agents]

    def assertAllRc(self, results, rc):
        for r in results:
            self.assertRc(r, rc)

    def check_world(self, dumps, world, nodes=None):
        """dumps are one world of world ranks over nodes nodes (default: one
        worker per node), one master, the backend's kind of worker store."""
        ranks = sorted(int(d["RANK"]) for d in dumps)
        self.assertEqual(ranks, list(range(world)))
        for d in dumps:
            self.assertEqual(d["WORLD_SIZE"], str(world))
            self.assertEqual(d["GROUP_WORLD_SIZE"], str(world if nodes is None else nodes))
            self.assertEqual(d["TORCHELASTIC_USE_AGENT_STORE"], self.AGENT_STORE)
        self.assertEqual(len({(d["MASTER_ADDR"], d["MASTER_PORT"]) for d in dumps}), 1)

    # -- completion ---------------------------------------------------------------

    def test_two_to_four_nodes_complete(self):
        for n in (2, 3, 4):
            for name in os.listdir(self.dumps):
                os.unlink(os.path.join(self.dumps, name))
            self.fresh_rendezvous()
            agents = [self.agent(str(n), nproc=2, run_id="job%d" % n) for _ in range(n)]
            results = self.wait_all(agents)
            self.assertAllRc(results, 0)
            dumps = self.worker_dumps()
            self.assertEqual(len(dumps), 2 * n)
            self.check_world(dumps, 2 * n, n)
            # Group ranks follow the node descriptors' order: same host, so pid.
            by_agent = {}
            for d in dumps:
                by_agent[int(d["AGENT_PID"])] = int(d["GROUP_RANK"])
            self.assertEqual([by_agent[p] for p in sorted(by_agent)], list(range(n)))
            for d in dumps:
                g, lr = int(d["GROUP_RANK"]), int(d["LOCAL_RANK"])
                self.assertEqual(int(d["RANK"]), 2 * g + lr)
            self.assertEqual({d["TORCHELASTIC_RESTART_COUNT"] for d in dumps}, {"0"})
            for r in results:
                self.assertIn("Done waiting for other agents", r.err)
        self.assertNoLeftovers()

    def test_nodes_from_every_agent(self):
        socks = [self.path("a%d.sock" % i) for i in range(3)]
        agents = [self.agent("3", body="sleep 60", extra=("--control-socket", s))
                  for s in socks]
        ectl_nodes.check_nodes(self, socks, self.BACKEND, self.LIVENESS)
        ectl_nodes.stop(agents)

    def test_crowd_starting_together(self):
        # Eight agents at once, each job longer than the keep-alive window:
        # the first one in admits the others, folds their keep-alives,
        # nobody is dropped; every rank exactly once, one master.
        # Keep-alive window 10 s: no node may drop out, even on a loaded CI
        # machine under ASan.
        conf = "keep_alive_interval=1,keep_alive_max_attempt=10,last_call_timeout=0.5"
        body = "sleep 3"
        agents = [self.agent("8", body=body, conf=conf) for _ in range(8)]
        results = self.wait_all(agents)
        self.assertAllRc(results, 0)
        dumps = self.worker_dumps()
        self.check_world(dumps, 8, 8)
        self.assertFalse(any(re.search(r"nodes of round \d+ left|no longer in round", r.err)
                             for r in results), results)

    def test_two_agents_are_fast(self):
        t = time.monotonic()
        agents = [self.agent("2") for _ in range(2)]
        self.assertAllRc(self.wait_all(agents), 0)
        # Generous: the target is 150 ms on an idle machine.
        self.assertLess(time.monotonic() - t, 5.0)

    def test_heterogeneous_nodes_and_roles(self):
        specs = [(1, "trainer"), (2, "ps"), (3, "trainer")]
        agents = []
        for nproc, role in specs:
            agents.append(self.agent("3", nproc=nproc, extra=("--role", role)))
        self.assertAllRc(self.wait_all(agents), 0)
        dumps = self.worker_dumps()
        self.assertEqual(len(dumps), 6)
        self.check_world(dumps, 6, 3)
        # Rebuild what every agent must have computed from the group order.
        nodes = {}
        for d in dumps:
            nodes[int(d["GROUP_RANK"])] = (d["ROLE_NAME"], int(d["LOCAL_WORLD_SIZE"]))
        self.assertEqual(sorted(nodes.values()), sorted((r, n) for n, r in specs))
        for d in dumps:
            g, lr, role = int(d["GROUP_RANK"]), int(d["LOCAL_RANK"]), d["ROLE_NAME"]
            base = sum(nodes[i][1] for i in range(g))
            role_base = sum(nodes[i][1] for i in range(g) if nodes[i][0] == role)
            role_world = sum(n for r, n in nodes.values() if r == role)
            self.assertEqual(int(d["RANK"]), base + lr)
            self.assertEqual(int(d["ROLE_RANK"]), role_base + lr)
            self.assertEqual(int(d["ROLE_WORLD_SIZE"]), role_world)

    # -- min:max and last call ----------------------------------------------------

    def test_min_max_last_call(self):
        conf = "keep_alive_interval=0.5,keep_alive_max_attempt=4,last_call_timeout=2"
        t = time.monotonic()
        a = [self.agent("2:4", conf=conf) for _ in range(2)]
        time.sleep(0.5)
        a.append(self.agent("2:4", conf=conf))  # joins during the last call
        results = self.wait_all(a)
        elapsed = time.monotonic() - t
        self.assertAllRc(results, 0)
        self.check_world(self.worker_dumps(), 3, 3)
        self.assertGreater(elapsed, 1.5, "completed before the last call ended")
        self.assertLess(elapsed, 20)
        # The last call's progress: the coordinator logs it (c10d: the store
        # host; etcd: the holder of w/coord); its joiners wait on their own key,
        # not the state.
        progress = r"2 nodes joined .*last call ends in"
        self.assertTrue(any(re.search(progress, r.err) for r in results),
                        [r.err for r in results])

    # -- membership changes while running -----------------------------------------

    def test_late_joiner_restarts_for_free(self):
        # World 2 runs until a third node arrives; world 3 finishes.
        body = 'if [ "$WORLD_SIZE" = 3 ]; then exit 0; fi; sleep 60'
        a = [self.agent("2:3", body=body) for _ in range(2)]
        self.wait_dumps(2, pred=lambda d: d["WORLD_SIZE"] == "2")
        t = time.monotonic()
        a.append(self.agent("2:3", body=body))
        results = self.wait_all(a)
        self.assertAllRc(results, 0)
        self.assertLess(time.monotonic() - t, self.LATE_JOIN_S)
        three = [d for d in self.worker_dumps() if d["WORLD_SIZE"] == "3"]
        self.check_world(three, 3, 3)
        # Free: no restart spent (--max-restarts 0), the count did not move.
        self.assertEqual({d["TORCHELASTIC_RESTART_COUNT"] for d in three}, {"0"})
        for r in results[:2]:
            self.assertIn("will restart worker group", r.err)

    def test_killed_agent_is_dropped_and_the_rest_reform(self):
        # The victim's keep-alive (c10d heartbeat, etcd lease) expires.
        body = 'if [ "$WORLD_SIZE" = 2 ]; then exit 0; fi; sleep 60'
        a = [self.agent("2:3", body=body) for _ in range(3)]
        self.wait_dumps(3, pred=lambda d: d["WORLD_SIZE"] == "3")
        victim = a[2]
        t = time.monotonic()
        victim.signal(signal.SIGKILL)
        victim.wait(10)
        results = self.wait_all(a[:2], timeout=self.REFORM_WAIT_S)
        self.assertAllRc(results, 0)
        self.assertLess(time.monotonic() - t, self.REFORM_S)
        two = [d for d in self.worker_dumps() if d["WORLD_SIZE"] == "2"]
        self.check_world(two, 2, 2)
        self.assertNotIn(str(victim.pid), {d["AGENT_PID"] for d in two})
        self.assertTrue(any("left" in r.err or "no longer" in r.err for r in results),
                        results)

    def test_sigterm_leaves_the_rendezvous(self):
        # A graceful stop takes the node out of the round (without closing the
        # rendezvous): the survivor re-forms at once, not when the stopped
        # node's keep-alive expires (15 s here), and a node started in its
        # place joins within seconds.
        conf = "keep_alive_interval=5,keep_alive_max_attempt=3,last_call_timeout=0.5"
        a = [self.agent("1:2", body="sleep 60", conf=conf)]
        time.sleep(0.5)  # the first one hosts (c10d): it stays
        a.append(self.agent("1:2", body="sleep 60", conf=conf))
        self.wait_dumps(2, pred=lambda d: d["WORLD_SIZE"] == "2")
        stopped = a[1]
        stopped.signal(signal.SIGTERM)
        self.assertRc(stopped.wait(20), 128 + signal.SIGTERM)
        t = time.monotonic()
        self.wait_dumps(1, timeout=10, pred=lambda d: d["WORLD_SIZE"] == "1")
        self.assertLess(time.monotonic() - t, 8)
        t = time.monotonic()
        back = self.agent("1:2", body="sleep 60", conf=conf)
        two = self.wait_dumps(4, timeout=10, pred=lambda d: d["WORLD_SIZE"] == "2")
        self.assertLess(time.monotonic() - t, 8)
        self.assertIn(str(back.pid), {d["AGENT_PID"] for d in two})
        self.assertIsNone(a[0].proc.poll(), "the survivor exited")
        a[0].signal(signal.SIGTERM)
        back.signal(signal.SIGTERM)
        for x in (a[0], back):
            self.assertRc(x.wait(20), 128 + signal.SIGTERM)

    def test_spare_node_exits_gracefully(self):
        body = 'sleep 1.5; exit 0'
        a = [self.agent("1:2", body=body) for _ in range(2)]
        self.wait_dumps(2)
        spare = self.agent("1:2", body=body)
        results = self.wait_all(a + [spare], timeout=40)
        self.assertAllRc(results, 0)
        self.assertIn("Rendezvous gracefully exited", results[2].err)
        self.assertEqual(len(self.worker_dumps()), 2)

    # -- failures -----------------------------------------------------------------

    def test_join_timeout(self):
        conf = self.FAST + ",join_timeout=1.5"
        t = time.monotonic()
        a = [self.agent("3", conf=conf) for _ in range(2)]
        results = self.wait_all(a, timeout=40)
        elapsed = time.monotonic() - t
        self.assertAllRc(results, 1)
        # Both time out together; the first to give up closes the rendezvous,
        # so the other may see it closed instead.
        self.assertTrue(any("did not complete within the join timeout" in r.err
                            for r in results), results)
        for r in results:
            self.assertRegex(r.err, r"did not complete within the join timeout of 1.5 s: [12] of "
                                    r"at least 3 nodes joined|rendezvous 'job' is closed")
        self.assertGreater(elapsed, 1.4)
        self.assertLess(elapsed, 15)
        self.assertEqual(self.worker_dumps(), [])

    def test_node_failing_for_good_stops_the_others(self):
        body = 'if [ "$GROUP_RANK" = 1 ]; then sleep 0.5; exit 3; fi; sleep 60'
        a = [self.agent("2", body=body) for _ in range(2)]
        results = self.wait_all(a, timeout=40)
        rcs = sorted(r.rc for r in results)
        self.assertEqual(rcs, [1, 1])
        for r in results:
            self.assertLess(r.elapsed, 20, "did not stop promptly: %r" % r)
        self.assertTrue(any("closed by another node" in r.err for r in results), results)
        self.assertNoLeftovers()

    def test_others_name_the_node_that_failed(self):
        # Group rank 1's worker exits 3 for good: it records itself with the
        # closing, and the other agent names it in its log line, failure
        # table and events.
        body = 'if [ "$GROUP_RANK" = 1 ]; then sleep 0.5; exit 3; fi; sleep 60'
        evlogs = [self.path("ev%d.jsonl" % i) for i in range(2)]
        a = [self.agent("2", body=body, extra=("--event-log-file", evlogs[i]))
             for i in range(2)]
        results = self.wait_all(a, timeout=self.FAILED_WAIT_S)
        self.assertEqual(sorted(r.rc for r in results), [1, 1])
        failer = next(d for d in self.worker_dumps() if d["GROUP_RANK"] == "1")
        i = 0 if str(a[1].pid) == failer["AGENT_PID"] else 1
        self.assertNotEqual(str(a[i].pid), failer["AGENT_PID"])
        node = r"[^ ]+_%s_0" % failer["AGENT_PID"]
        why = (r"closed by another node: its workers failed \(node (%s) \(group rank 1\): "
               r"local rank 0 \(rank 1\) exited with code 3\)" % node)
        self.assertRegex(results[i].err, why)
        self.assertRegex(results[i].err, r"ChildFailedError: \n=+\n.* FAILED on node \S+ "
                         r"\(group rank 1\)")
        self.assertRegex(results[i].err, r"rank\s+: 1 \(local_rank: 0\)")
        self.assertRegex(results[i].err, r"exitcode\s+: 3 \(pid: [1-9]\d*\)")
        with open(evlogs[i]) as f:
            ev = [json.loads(line) for line in f]
        failed = [e for e in ev if e["name"] == "torchelastic.worker.status.FAILED"
                  and e["source"] == "AGENT"]
        self.assertEqual(len(failed), 1, [e["name"] for e in ev])
        self.assertRegex(failed[0]["metadata"]["raw_error"], why)
        self.assertNoLeftovers()

    def test_joiner_names_the_node_that_failed(self):
        # The first node's worker ignores SIGTERM, so that node stays up a
        # while after the other node's worker failed for good and closed the
        # rendezvous: a node that joins then is told who failed.
        host = self.agent("2", body='trap "" TERM; sleep 60',
                          conf=self.FAST + self.host_conf(True),
                          extra=("--shutdown-timeout", "20"))
        time.sleep(0.3)
        other = self.agent("2", body="sleep 0.5; exit 3", conf=self.FAST + self.host_conf(False))
        self.assertRc(other.wait(30), 1)
        late = self.agent("2", conf=self.FAST + self.host_conf(False)).wait(15)
        host.kill()
        self.assertRc(late, 1)
        self.assertRegex(late.err, r"rendezvous 'job' is closed by another node: its workers "
                         r"failed \(node [^ ]+_%d_0 \(group rank \d\): local rank 0 \(rank "
                         r"\d\) exited with code 3\)" % other.pid)
        self.assertRegex(late.err, r"FAILED on node \S+ \(group rank \d\)")

    def test_worker_failure_restarts_every_node(self):
        # Attempt 0: group rank 1 fails; with a restart left every node re-forms.
        # The failing node spends its restart; the other restarts for free.
        marker = self.path("failed-once")
        # (Rank 1 marks the failure only after rank 0 had time to look.)
        body = ('if [ ! -e %s ]; then if [ "$GROUP_RANK" = 1 ]; then sleep 1; touch %s; '
                'exit 5; fi; sleep 60; fi; exit 0' % (marker, marker))
        a = [self.agent("2", body=body, extra=("--max-restarts", "1")) for _ in range(2)]
        results = self.wait_all(a, timeout=max(60, self.WAIT_ALL_S))
        self.assertAllRc(results, 0)
        dumps = self.worker_dumps()
        self.assertEqual(len(dumps), 4)
        counts = sorted(d["TORCHELASTIC_RESTART_COUNT"] for d in dumps)
        self.assertEqual(counts, ["0", "0", "0", "1"])
        self.assertTrue(any("Worker group FAILED. 1/1 attempts left" in r.err for r in results))
        # The job-wide count: the workers of each round see the same
        # ELASTICD_ROUND on both nodes, though the node restarted for free
        # still has TORCHELASTIC_RESTART_COUNT=0.
        rounds = {}
        for d in dumps:
            rounds.setdefault(d["ELASTICD_ROUND"], []).append(d)
        self.assertEqual(len(rounds), 2, dumps)
        first, second = sorted(rounds, key=lambda r: int(r or -1))
        for r in (first, second):
            self.assertEqual(len({d["AGENT_PID"] for d in rounds[r]}), 2, dumps)
        self.assertLess(int(first), int(second))
        self.assertEqual(sorted(d["TORCHELASTIC_RESTART_COUNT"] for d in rounds[second]),
                         ["0", "1"])

    # -- exit barrier -------------------------------------------------------------

    def test_exit_barrier_waits_for_the_others(self):
        body = 'if [ "$GROUP_RANK" = 1 ]; then sleep 2; fi; exit 0'
        a = [self.agent("2", body=body) for _ in range(2)]
        results = self.wait_all(a)
        self.assertAllRc(results, 0)
        for r in results:
            self.assertGreater(r.elapsed, 1.8)
            self.assertIn("Done waiting for other agents", r.err)
