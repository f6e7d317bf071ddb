#!/usr/bin/python3
"""The c10d rendezvous on a store no agent hosts (tests/tcpstore_tool serve,
as a store torch hosts would be): one participant takes the lease
"<key>/lease" and coordinates, as the store host does otherwise (issue #14).
What a user relies on: the job forms and re-forms with torch's semantics
(every shared case of rdzv_cases.py), a participant learns
its round from O(1) bytes however many nodes join, and when the
coordinator itself is SIGKILLed another participant takes over and the
others form the next round."""

import json
import os
import signal
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import ectl_nodes  # noqa: E402
import lib  # noqa: E402
import rdzv_cases  # noqa: E402
from test_ctl import curl  # noqa: E402
from test_rdzv_c10d import left_asker_case  # noqa: E402

FAST = ("keep_alive_interval=0.5,keep_alive_max_attempt=3,last_call_timeout=0.5,"
        "is_host=false")


class C10dExternalTest(rdzv_cases.RdzvCases, lib.ElasticdTestCase):

    BACKEND = "c10d"
    FAST = FAST
    LIVENESS = "heartbeat"
    AGENT_STORE = "True"

    def setUp(self):
        super().setUp()
        self.store = lib.StoreServer()

    def tearDown(self):
        super().tearDown()
        self.store.close()

    def rdzv_endpoint(self):
        return "127.0.0.1:%d" % self.store.port

    def fresh_rendezvous(self):
        self.store.close()
        self.store = lib.StoreServer()

    def host_conf(self, host):
        return ",is_host=false"

    # -- cost per participant ------------------------------------------------------

    def swarm_bytes(self, n):
        """n participants (tests/rdzv_swarm, the real c10d backend) against
        the external store, in two processes of n/2, the second started a
        second after the first (its participants join a round the
        coordinator, in the first, has already written into the state);
        the bytes the second's participants read per participant to hold
        the first round."""
        swarm = os.environ.get("RDZV_SWARM") or os.path.join(
            os.path.dirname(os.path.dirname(os.environ["ELASTICD"])), "tests", "rdzv_swarm")
        store = lib.StoreServer(4 * n + 64)
        procs = []
        try:
            for first in (0, n // 2):
                procs.append(subprocess.Popen(
                    [swarm, str(n), "127.0.0.1:%d" % store.port,
                     "join_timeout=60,is_host=false", "ext%d" % n],
                    env=dict(os.environ, RDZV_SWARM_ROUNDS="1",
                             RDZV_SWARM_SLICE="%d:%d" % (first, n // 2)),
                    stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True))
                time.sleep(1)
            outs = [p.communicate(timeout=90) for p in procs]
        finally:
            for p in procs:
                if p.poll() is None:
                    p.kill()
                    p.wait()
            store.close()
        for p, (out, err) in zip(procs, outs):
            self.assertEqual(p.returncode, 0, err[-2000:])
        lines = {line.split()[0]: dict(kv.split("=", 1) for kv in line.split()[1:])
                 for line in outs[1][0].splitlines() if line.strip()}
        self.assertEqual(lines["swarm"]["world"], str(n), outs[1][0])
        return int(lines["swarm"]["rchar"]) / int(lines["swarm"]["local"])

    def test_bytes_read_per_participant_do_not_grow_with_n(self):
        # torch's own loop has every node read the whole state, again and
        # again (O(N) each); with a coordinator elected through the store a
        # node reads its lease probe, its own assignment key and the
        # exchange's runs, also when it joins late, into a state already
        # written: twenty times the nodes, not twenty times the bytes.
        small = self.swarm_bytes(16)
        large = self.swarm_bytes(320)
        print("external store, bytes read per late participant: %d B at N=16, %d B at N=320"
              % (small, large), file=sys.stderr)
        self.assertLess(large, 2 * small + 512, "per participant: %d B at N=16, %d B at N=320"
                        % (small, large))

    # -- what a torch agent finds in the store ------------------------------------------

    def store_get(self, *keys):
        ops = []
        for k in keys:
            ops += ["get", k]
        res = subprocess.run([lib.TCPSTORE_TOOL, "client", "127.0.0.1", str(self.store.port),
                              "v2"] + ops, stdout=subprocess.PIPE, timeout=30)
        self.assertEqual(res.returncode, 0, res.stdout)
        return res.stdout.decode().splitlines()

    def test_the_store_holds_torchs_exchange_and_barrier_keys(self):
        # torch 2.x's agent reads its bases from assigned_ranks/<group rank>
        # and meets the others at terminal_state/last_member: after a round
        # of a 1-worker and a 2-worker node, the keys hold what it expects.
        agents = [self.agent("2", nproc=n) for n in (1, 2)]
        self.assertAllRc(self.wait_all(agents), 0)
        dumps = self.worker_dumps()
        lws = {int(d["GROUP_RANK"]): int(d["LOCAL_WORLD_SIZE"]) for d in dumps}
        p = "/torch.rendezvous.job.0/"
        got = self.store_get(p + "torchelastic/role_info/1",
                             p + "torchelastic/assigned_ranks/0",
                             p + "torchelastic/assigned_ranks/1", p + "MASTER_ADDR",
                             p + "MASTER_PORT", p + "torchelastic/agent/terminal_state/num_members",
                             p + "torchelastic/agent/terminal_state/last_member")
        self.assertEqual(got, [
            "get -> '{\"role\":\"default\",\"rank\":1,\"local_world_size\":%d}'" % lws[1],
            "get -> '[0, 3, 0, 3]'", "get -> '[%d, 3, %d, 3]'" % (lws[0], lws[0]),
            "get -> '%s'" % dumps[0]["MASTER_ADDR"], "get -> '%s'" % dumps[0]["MASTER_PORT"],
            "get -> '2'", "get -> '1'"])

    # -- who coordinates ---------------------------------------------------------------

    def test_nodes_and_metrics_name_the_coordinator(self):
        # `elasticctl nodes` names the lease holder on every agent, and its
        # metric is 1 on that agent alone.
        socks = [self.path("a%d.sock" % i) for i in range(3)]
        agents = [self.agent("3", body="sleep 60", extra=("--control-socket", s))
                  for s in socks]
        ectl_nodes.check_nodes(self, socks, self.BACKEND, self.LIVENESS)
        got = [ectl_nodes.nodes_json(self, s) for s in socks]
        names = {g["coordinator"] for g in got}
        self.assertEqual(len(names), 1, got)
        coord = names.pop()
        self.assertIn(coord, {p["node"] for p in got[0]["participants"]})
        for g, s in zip(got, socks):
            want = "1" if g["node"] == coord else "0"
            self.assertIn("\nelasticd_rdzv_coordinator %s\n" % want, curl(s, "/metrics").body)
        ectl_nodes.stop(agents)

    # -- the coordinator dies ------------------------------------------------------

    def coordinators(self, agents):
        return [a for a in agents if "coordinates the rendezvous" in a.stderr_text()]

    def test_coordinator_sigkilled_another_takes_over(self):
        body = 'if [ "$WORLD_SIZE" = 2 ]; then exit 0; fi; sleep 60'
        evlogs = [self.path("ev%d.jsonl" % i) for i in range(3)]
        a = [self.agent("2:3", body=body, extra=("--event-log-file", evlogs[i]))
             for i in range(3)]
        self.wait_dumps(3, pred=lambda d: d["WORLD_SIZE"] == "3")
        first = self.coordinators(a)
        self.assertEqual(len(first), 1, [x.stderr_text()[-800:] for x in a])
        victim = first[0]
        rest = [x for x in a if x is not victim]
        t = time.monotonic()
        victim.signal(signal.SIGKILL)
        victim.wait(10)
        results = self.wait_all(rest, timeout=40)
        self.assertAllRc(results, 0)
        self.assertLess(time.monotonic() - t, 25)
        two = [d for d in self.worker_dumps() if d["WORLD_SIZE"] == "2"]
        self.check_world(two, 2, 2)
        self.assertNotIn(str(victim.pid), {d["AGENT_PID"] for d in two})
        # A survivor took the lease over, from where the victim's queue was.
        self.assertEqual(len([r for r in results if "coordinates the rendezvous" in r.err]), 1,
                         results)
        coord = []
        for i, x in enumerate(a):
            if x is victim:
                continue
            with open(evlogs[i]) as f:
                coord += [json.loads(line) for line in f
                          if '"rdzv_c10d.c:_coordinate"' in line]
        self.assertEqual(len(coord), 1, coord)
        self.assertRegex(coord[0]["message"], r"coordinates the rendezvous 'job'")

    def test_node_that_leaves_while_its_request_is_unread_is_not_admitted(self):
        # The coordinator (A, the lease holder) is stopped; the store is
        # not: B queues its request and finishes its leave before A reads.
        left_asker_case(self, FAST + ",join_timeout=8")


    def test_rejoiner_takes_the_lease_over_and_leaves_its_round(self):
        # The coordinator stops answering (SIGSTOP) as B asks to rejoin: B
        # waits blind for a delegated exit, then takes the lease over, reads
        # the state, finds itself still in its old round and runs the exit
        # op itself. That op's read must not race the old read's write (two
        # store calls at once: a CI crash in cas_cb, SIGSEGV).
        flag = self.path("fail")
        a = self.agent("2", body="sleep 60")
        self.assertTrue(a.wait_stderr("coordinates the rendezvous", 20), a.stderr_text())
        b = self.agent("2", body="while [ ! -e %s ]; do sleep 0.05; done; exit 1" % flag,
                       extra=("--max-restarts", "1"))
        self.wait_dumps(2)
        a.signal(signal.SIGSTOP)
        try:
            open(flag, "w").close()
            self.assertTrue(b.wait_stderr("coordinates the rendezvous", 20), b.stderr_text())
            time.sleep(2)
            self.assertIsNone(b.proc.poll(), b.stderr_text()[-3000:])
        finally:
            a.signal(signal.SIGCONT)
        for x in (b, a):
            x.signal(signal.SIGTERM)
            self.assertRc(x.wait(30), 128 + signal.SIGTERM)

    def test_store_gone_during_a_keep_alive_fails_every_node(self):
        # The store stops answering while the coordinator's keep-alive op
        # waits on it, then dies: that op ends with the error, and the
        # running round is told too (it was not: the coordinator's workers
        # ran on with no store), as the other node's is.
        a = self.agent("2", body="sleep 60")
        self.assertTrue(a.wait_stderr("coordinates the rendezvous", 20), a.stderr_text())
        b = self.agent("2", body="sleep 60")
        self.wait_dumps(2)
        time.sleep(1)
        os.kill(self.store.proc.pid, signal.SIGSTOP)
        time.sleep(1.5)  # keep-alives every 0.5 s: one waits on the store now
        os.kill(self.store.proc.pid, signal.SIGKILL)
        for x in (a, b):
            res = x.wait(20)
            self.assertRc(res, 1)
            self.assertRegex(res.err, r"the rendezvous store at 127\.0\.0\.1:%d is gone"
                             % self.store.port)

if __name__ == "__main__":
    lib.main()
