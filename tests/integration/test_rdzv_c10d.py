#!/usr/bin/python3
"""Several real elasticd processes on loopback forming one job through the c10d
rendezvous: completion at max, min:max with last call, heterogeneous nodes and
roles, a late joiner restarting the group for free, a SIGKILLed agent dropped
by the survivors, join timeout, the store host dying, a node failing for good,
the exit barrier, IPv6 endpoints, spares, the shared worker store, and a crowd
starting together (the store host admits them, each keeps alive through its
own key)."""

import json
import os
import re
import signal
import socket
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import lib  # noqa: E402
import ectl_nodes  # noqa: E402

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

FAST = "keep_alive_interval=0.5,keep_alive_max_attempt=3,last_call_timeout=0.5"


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


class C10dTest(lib.ElasticdTestCase):

    def setUp(self):
        super().setUp()
        self.port = free_port()
        self.dumps = self.path("dumps")
        os.makedirs(self.dumps)
        self.script = self.write_sh("dump.sh", DUMP)

    def agent(self, nnodes, body="exit 0", nproc=1, conf=FAST, endpoint=None, extra=(),
              env=None, run_id="job"):
        args = ["--nnodes", nnodes, "--nproc-per-node", str(nproc), "--rdzv-backend", "c10d",
                "--rdzv-endpoint", endpoint or "127.0.0.1:%d" % self.port, "--rdzv-id", run_id,
                "--monitor-interval", "0.1"]
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

    def wait_dumps(self, n, timeout=30, pred=None):
        def ready():
            d = self.worker_dumps()
            if pred:
                d = [x for x in d if pred(x)]
            return d if len(d) >= n else None
        got = lib.wait_until(ready, timeout)
        self.assertIsNotNone(got, "only %r" % self.worker_dumps())
        return got

    def wait_all(self, agents, timeout=60):
        return [a.wait(timeout) for a in agents]

    def assertAllRc(self, results, rc):
        for r in results:
            self.assertRc(r, rc)

    # -- completion ----------------------------------------------------------------

    def check_world(self, dumps, world, nodes):
        ranks = sorted(int(d["RANK"]) for d in dumps)
        self.assertEqual(ranks, list(range(world)))
        for d in dumps:
            self.assertEqual(d["WORLD_SIZE"], str(world))
            self.assertEqual(d["GROUP_WORLD_SIZE"], str(nodes))
        self.assertEqual(len({(d["MASTER_ADDR"], d["MASTER_PORT"]) for d in dumps}), 1)

    def test_two_to_four_nodes_complete(self):
        for n in (2, 3, 4):
            for name in os.listdir(self.dumps):
                os.unlink(os.path.join(self.dumps, name))
            self.port = free_port()
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
            # The workers' store is an agent's own server (torch 2.x shared store).
            self.assertEqual({d["TORCHELASTIC_USE_AGENT_STORE"] for d in dumps}, {"True"})
            self.assertEqual({d["TORCHELASTIC_RESTART_COUNT"] for d in dumps}, {"0"})
            for r in results:
                self.assertIn("Done waiting for other agents", r.err)
        self.assertNoLeftovers()

    def test_nodes_from_every_agent(self):
        socks = [self.path("a%d.sock" % i) for i in range(3)]
        agents = [self.agent("3", body="sleep 60", extra=("--control-socket", s))
                  for s in socks]
        ectl_nodes.check_nodes(self, socks, "c10d", "heartbeat")
        ectl_nodes.stop(agents)

    def test_crowd_starting_together(self):
        # Eight agents at once, each job longer than the keep-alive window:
        # the store host admits them, folds their heartbeats, nobody is
        # dropped; every rank exactly once.
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

    # -- min:max and last call -----------------------------------------------------

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
        self.assertRegex(results[0].err, r"2 nodes joined .*last call ends in")

    # -- membership changes while running ------------------------------------------

    def test_late_joiner_restarts_for_free(self):
        # World 2 runs until a third node arrives; world 3 finishes.
        body = 'if [ "$WORLD_SIZE" = 3 ]; then exit 0; fi; sleep 60'
        a = [self.agent("2:3", body=body) for _ in range(2)]
        self.wait_dumps(2, pred=lambda d: d["WORLD_SIZE"] == "2")
        t = time.monotonic()
        a.append(self.agent("2:3", body=body))
        results = self.wait_all(a)
        self.assertAllRc(results, 0)
        self.assertLess(time.monotonic() - t, 20)
        three = [d for d in self.worker_dumps() if d["WORLD_SIZE"] == "3"]
        self.check_world(three, 3, 3)
        # Free: no restart spent (--max-restarts 0), the count did not move.
        self.assertEqual({d["TORCHELASTIC_RESTART_COUNT"] for d in three}, {"0"})
        for r in results[:2]:
            self.assertIn("will restart worker group", r.err)

    def test_killed_agent_is_dropped_and_the_rest_reform(self):
        body = 'if [ "$WORLD_SIZE" = 2 ]; then exit 0; fi; sleep 60'
        a = [self.agent("2:3", body=body) for _ in range(3)]
        dumps = self.wait_dumps(3, pred=lambda d: d["WORLD_SIZE"] == "3")
        victim = a[2]
        t = time.monotonic()
        victim.signal(signal.SIGKILL)
        victim.wait(10)
        results = self.wait_all(a[:2], timeout=40)
        self.assertAllRc(results, 0)
        self.assertLess(time.monotonic() - t, 25)
        two = [d for d in self.worker_dumps() if d["WORLD_SIZE"] == "2"]
        self.check_world(two, 2, 2)
        self.assertNotIn(str(victim.pid), {d["AGENT_PID"] for d in two})
        self.assertTrue(any("left" in r.err or "no longer" in r.err for r in results),
                        results)
        del dumps

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

    # -- cost per participant ------------------------------------------------------

    def swarm_bytes(self, n):
        """n participants (tests/rdzv_swarm, the real c10d backend) against a
        store hosted by participant 0 in a process of its own, for two rounds
        (every participant asks for the next one at once, as after a worker
        failure); returns the bytes the others read, per participant, to hold
        the first round and then the second."""
        swarm = os.environ.get("RDZV_SWARM") or os.path.join(
            os.path.dirname(os.path.dirname(os.environ["ELASTICD"])), "tests", "rdzv_swarm")
        endpoint = "127.0.0.1:%d" % self.port
        conf = "join_timeout=60"
        host = subprocess.Popen([swarm, str(n), endpoint, conf, "bytes%d" % n],
                                env=dict(os.environ, RDZV_SWARM_HOST="1", RDZV_SWARM_ROUNDS="2",
                                         RDZV_SWARM_SLICE="0:1", RDZV_SWARM_HOLD="1"),
                                stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE)
        try:
            time.sleep(0.3)
            rest = subprocess.run([swarm, str(n), endpoint, conf + ",is_host=false",
                                   "bytes%d" % n],
                                  env=dict(os.environ, RDZV_SWARM_SLICE="1:%d" % (n - 1),
                                           RDZV_SWARM_ROUNDS="2"),
                                  capture_output=True, text=True, timeout=90)
            self.assertEqual(rest.returncode, 0, rest.stderr[-2000:])
        finally:
            host.communicate(b"", timeout=30)
        lines = {line.split()[0]: dict(kv.split("=", 1) for kv in line.split()[1:])
                 for line in rest.stdout.splitlines() if line.strip()}
        for what in ("swarm", "reform"):
            self.assertEqual(lines[what]["world"], str(n), rest.stdout)
        return [int(lines[what]["rchar"]) / (n - 1) for what in ("swarm", "reform")]

    def test_bytes_read_per_participant_do_not_grow_with_n(self):
        # A coordinated joiner learns its round, rank and world size from its
        # own assignment key and the exchange's runs, not from the whole
        # state, and the coordinator runs the exit op of a node asking for
        # the next round: ten times the nodes, not ten times the bytes each.
        small = self.swarm_bytes(16)
        self.port = free_port()
        large = self.swarm_bytes(160)
        for what, s, l in zip(("first round", "next round"), small, large):
            self.assertLess(l, 2 * s + 512, "%s, per participant: %d B at N=16, %d B at "
                            "N=160" % (what, s, l))

    # -- failures ------------------------------------------------------------------

    def test_join_timeout(self):
        conf = FAST + ",join_timeout=1.5"
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

    def test_store_host_dies_others_fail_fast(self):
        host = self.agent("2", body="sleep 60", conf=FAST + ",is_host=true")
        time.sleep(0.3)
        evlog = self.path("other.jsonl")
        other = self.agent("2", body="sleep 60", conf=FAST + ",is_host=false",
                           extra=("--event-log-file", evlog))
        self.wait_dumps(2)
        t = time.monotonic()
        host.signal(signal.SIGKILL)
        res = other.wait(30)
        self.assertRc(res, 1)
        self.assertLess(time.monotonic() - t, 10)
        self.assertRegex(res.err, r"the rendezvous store at 127\.0\.0\.1:%d is gone" % self.port)
        self.assertNoLeftovers()
        # As torchrun: num_nodes_waiting() failed, then the agent's run.
        with open(evlog) as f:
            ev = [json.loads(line) for line in f]
        failed = [e for e in ev if e["name"] == "rdzv_c10d.c:num_nodes_waiting"]
        self.assertEqual(len(failed), 1, [e["name"] for e in ev])
        self.assertEqual(failed[0]["node_state"], "FAILED")
        self.assertRegex(failed[0]["message"], r"^RendezvousConnectionError: .*is gone")
        agent = [e for e in ev if e["name"] == "torchelastic.worker.status.FAILED"
                 and e["source"] == "AGENT"]
        self.assertEqual([e["metadata"]["raw_error"] for e in agent], [failed[0]["message"]])

    def test_no_store_fails_within_join_timeout(self):
        a = self.agent("2", conf=FAST + ",is_host=false,join_timeout=1")
        res = a.wait(30)
        self.assertRc(res, 1)
        self.assertIn("cannot reach the rendezvous store at 127.0.0.1:%d" % self.port, res.err)
        self.assertLess(res.elapsed, 10)

    def not_a_store(self, argv):
        """Start argv (something that listens on self.port and is not a
        TCPStore); wait until it accepts connections."""
        import subprocess
        p = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                             env=self.env(), cwd=self.tmp)
        self.addCleanup(lambda: (p.kill(), p.wait()))

        def up():
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=1).close()
                return True
            except OSError:
                return False
        self.assertTrue(lib.wait_until(up, 20), "%r did not listen" % argv)

    def test_http_server_on_the_endpoint_fails_fast(self):
        # An HTTP server reads the handshake as the start of a request line and
        # waits for the rest: nothing answers. Fail well within the join
        # timeout (600 s), naming the endpoint and what happened there.
        self.not_a_store([lib.PYTHON_EXEC, "-m", "http.server", str(self.port), "--bind",
                          "127.0.0.1"])
        a = self.start("--nnodes", "1", "--nproc-per-node", "1", "--rdzv-backend", "c10d",
                       "--rdzv-endpoint", "127.0.0.1:%d" % self.port, "--no-python", "true")
        res = a.wait(60)
        self.assertRc(res, 1)
        self.assertLess(res.elapsed, 30)
        self.assertIn("the rendezvous endpoint 127.0.0.1:%d is not a TCPStore" % self.port,
                      res.err)
        self.assertIn("answered nothing to the TCPStore handshake", res.err)

    def test_other_protocol_on_the_endpoint_fails_at_once(self):
        # A server that speaks first (an SSH banner) or answers with bytes that
        # cannot be a PING's echo: fail at once, showing what it said.
        banner = self.write_script("banner.py", """
import socket, sys
srv = socket.socket()
srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
srv.bind(("127.0.0.1", int(sys.argv[1])))
srv.listen(64)
keep = []
while True:
    c, _ = srv.accept()
    c.sendall(b"SSH-2.0-OpenSSH_9.2p1 Debian\\r\\n\\x01")
    keep.append(c)
""")
        self.not_a_store([lib.PYTHON_EXEC, banner, str(self.port)])
        a = self.start("--nnodes", "1", "--nproc-per-node", "1", "--rdzv-backend", "c10d",
                       "--rdzv-endpoint", "127.0.0.1:%d" % self.port, "--no-python", "true")
        res = a.wait(60)
        self.assertRc(res, 1)
        self.assertLess(res.elapsed, 5)
        self.assertIn("the rendezvous endpoint 127.0.0.1:%d is not a TCPStore: it answered "
                      "the TCPStore handshake with \"SSH-2.0-OpenSSH_9.2p1 Debian\\r\\n\\x01\""
                      % self.port, res.err)

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
        results = self.wait_all(a, timeout=40)
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
        # The store host's worker ignores SIGTERM, so the host stays up a
        # while after the other node's worker failed for good and closed the
        # rendezvous: a node that joins then is told who failed.
        host = self.agent("2", body='trap "" TERM; sleep 60', conf=FAST + ",is_host=true",
                          extra=("--shutdown-timeout", "20"))
        time.sleep(0.3)
        other = self.agent("2", body="sleep 0.5; exit 3", conf=FAST + ",is_host=false")
        self.assertRc(other.wait(30), 1)
        late = self.agent("2", conf=FAST + ",is_host=false").wait(15)
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
        results = self.wait_all(a, timeout=60)
        self.assertAllRc(results, 0)
        dumps = self.worker_dumps()
        self.assertEqual(len(dumps), 4)
        counts = sorted(d["TORCHELASTIC_RESTART_COUNT"] for d in dumps)
        self.assertEqual(counts, ["0", "0", "0", "1"])
        self.assertTrue(any("Worker group FAILED. 1/1 attempts left" in r.err for r in results))
        # The job-wide count: equal on both nodes of a round, though the
        # node restarted for free still has TORCHELASTIC_RESTART_COUNT=0.
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

    # -- exit barrier ----------------------------------------------------------------

    def test_exit_barrier_waits_for_the_others(self):
        body = 'if [ "$GROUP_RANK" = 1 ]; then sleep 2; fi; exit 0'
        a = [self.agent("2", body=body) for _ in range(2)]
        results = self.wait_all(a)
        self.assertAllRc(results, 0)
        for r in results:
            self.assertGreater(r.elapsed, 1.8)
            self.assertIn("Done waiting for other agents", r.err)

    # -- addresses and stores -----------------------------------------------------

    def test_ipv6_endpoint(self):
        try:
            with socket.socket(socket.AF_INET6) as s:
                s.bind(("::1", 0))
        except OSError as e:
            self.fail("this machine has no IPv6 loopback: %s" % e)
        ep = "[::1]:%d" % self.port
        a = [self.agent("2", endpoint=ep) for _ in range(2)]
        self.assertAllRc(self.wait_all(a), 0)
        self.check_world(self.worker_dumps(), 2, 2)

    def test_disable_shared_store(self):
        env = self.env(TORCH_DISABLE_SHARE_RDZV_TCP_STORE="1")
        a = [self.agent("2", env=env) for _ in range(2)]
        self.assertAllRc(self.wait_all(a), 0)
        dumps = self.worker_dumps()
        self.assertEqual({d["TORCHELASTIC_USE_AGENT_STORE"] for d in dumps}, {"False"})

    def test_spare_node_exits_gracefully(self):
        body = 'sleep 1.5; exit 0'
        a = [self.agent("1:2", body=body) for _ in range(2)]
        self.wait_dumps(2)
        spare = self.agent("1:2", body=body)
        results = self.wait_all(a + [spare], timeout=40)
        self.assertAllRc(results, 0)
        self.assertIn("Rendezvous gracefully exited", results[2].err)
        self.assertEqual(len(self.worker_dumps()), 2)

    def test_bad_rdzv_conf(self):
        res = self.run_elasticd("--nnodes", "2", "--rdzv-backend", "c10d", "--rdzv-endpoint",
                                "127.0.0.1:%d" % self.port, "--rdzv-conf", "join_timeout=-1",
                                "--no-python", "true")
        self.assertRc(res, 2)
        self.assertIn("join_timeout", res.err)
        res = self.run_elasticd("--nnodes", "2", "--rdzv-backend", "c10d", "--rdzv-endpoint",
                                "127.0.0.1:%d" % self.port, "--rdzv-conf", "is_host=maybe",
                                "--no-python", "true")
        self.assertRc(res, 2)
        self.assertIn("is_host", res.err)


if __name__ == "__main__":
    lib.main()
