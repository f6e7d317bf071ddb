#!/usr/bin/python3
"""The etcd (v3) rendezvous against real etcd members (Debian's etcd-server)
started by the test on loopback ports with their data in a temp dir: the
cases every backend meets (rdzv_cases.py) on a single member, and what only
etcd has: the keys cleaned up and a reused run id, a stale closed run, the
agent that admits the others SIGKILLed, etcd unreachable, a 3-member
cluster losing a member during the rendezvous or its quorum, every member
down while the workers run, and TLS endpoints refused."""

import base64
import json
import os
import shutil
import signal
import subprocess
import sys
import time
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import lib  # noqa: E402
import rdzv_cases  # noqa: E402
from etcd_cluster import Etcd, free_port  # noqa: E402
from test_ctl import curl  # noqa: E402

# Lease TTL 3 s (keep_alive_interval * keep_alive_max_attempt).
FAST = "keep_alive_interval=1,keep_alive_max_attempt=3,last_call_timeout=0.5"


class EtcdTest(rdzv_cases.RdzvCases, lib.ElasticdTestCase):

    BACKEND = "etcd"
    FAST = FAST
    LIVENESS = "lease"
    # The workers meet on their own store at group rank 0, as torch's etcd
    # backends.
    AGENT_STORE = "False"
    WAIT_DUMPS_S = 60
    WAIT_ALL_S = 90
    LATE_JOIN_S = 30
    REFORM_WAIT_S = 90
    REFORM_S = 40
    FAILED_WAIT_S = 60

    def setUp(self):
        self.etcd = None
        super().setUp()

    def rdzv_endpoint(self):
        """A single-member etcd unless the test started its own."""
        if self.etcd is None:
            self.start_etcd(1)
        return self.etcd.endpoints

    def tearDown(self):
        super().tearDown()
        if self.etcd:
            self.etcd.stop()

    def start_etcd(self, n=1):
        self.etcd = Etcd(n)
        return self.etcd

    # -- cost per participant ------------------------------------------------------

    def swarm_bytes(self, n, barrier=False, again=False, conf=None, nnodes=None):
        """n participants (tests/rdzv_swarm, the real etcd backend): participant
        0 alone in a process started first (it takes the w/coord key: the
        coordinator), the others in a second process; returns the bytes that
        second process read per participant until every one held its round,
        rank assignment included (barrier: then in the exit barrier that all
        enter next). again: all n in one process instead (none starts the
        next round before all hold theirs: a node that left first would have
        the others read the state to re-form), and the bytes it read per
        participant, the coordinator's O(N) included, while all ask for the
        next round at once and get it. conf, nnodes: other --rdzv-conf and
        --nnodes than the defaults' (lease TTL 15 s, last call 0.5 s; n)."""
        swarm = os.environ.get("RDZV_SWARM") or os.path.join(
            os.path.dirname(os.path.dirname(os.environ["ELASTICD"])), "tests", "rdzv_swarm")
        endpoints = self.rdzv_endpoint()
        conf = conf or "join_timeout=60,last_call_timeout=0.5"
        run_id = "bytes%d" % n
        env = dict(os.environ, RDZV_SWARM_BACKEND="etcd",
                   RDZV_SWARM_BARRIER="1" if barrier else "0",
                   RDZV_SWARM_ROUNDS="2" if again else "1")
        if nnodes:
            env["RDZV_SWARM_NNODES"] = nnodes
        if again:
            run = subprocess.run([swarm, str(n), endpoints, conf, run_id], env=env,
                                 capture_output=True, text=True, timeout=90)
            self.assertEqual(run.returncode, 0, run.stderr[-2000:])
            lines = {ln.split()[0]: dict(kv.split("=", 1) for kv in ln.split()[1:])
                     for ln in run.stdout.splitlines() if ln.strip()}
            self.assertEqual(lines["reform"]["failed"], "0", run.stdout)
            self.assertEqual(lines["reform"]["world"], str(n), run.stdout)
            return int(lines["reform"]["rchar"]) / n
        first = subprocess.Popen([swarm, str(n), endpoints, conf, run_id],
                                 env=dict(env, RDZV_SWARM_SLICE="0:1", RDZV_SWARM_HOLD="1"),
                                 stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                 stderr=subprocess.PIPE)
        try:
            time.sleep(0.5)
            rest = subprocess.run([swarm, str(n), endpoints, conf, run_id],
                                  env=dict(env, RDZV_SWARM_SLICE="1:%d" % (n - 1)),
                                  capture_output=True, text=True, timeout=90)
            self.assertEqual(rest.returncode, 0, rest.stderr[-2000:])
        finally:
            first.communicate(b"", timeout=30)
        lines = {ln.split()[0]: dict(kv.split("=", 1) for kv in ln.split()[1:])
                 for ln in rest.stdout.splitlines() if ln.strip()}
        self.assertEqual(lines["swarm"]["world"], str(n), rest.stdout)
        if barrier:
            self.assertEqual(lines["barrier"]["failed"], "0", rest.stdout)
            return int(lines["barrier"]["rchar"]) / (n - 1)
        return int(lines["swarm"]["rchar"]) / (n - 1)

    def test_etcd_calls_per_participant(self):
        # What bounds an etcd rendezvous at scale is etcd's CPU per call
        # through its JSON gateway (about 1 ms each on this machine). A
        # participant that does not coordinate costs a lease grant, one txn
        # (its a/ key, its join request and its first look ride together),
        # and one watch stream (its n/<node> and w/ on it together); it has
        # no deaths watch of its own (the coordinator writes the dead out).
        # Before: two txns and three watch streams each, then 1.06 and 2.
        self.start_etcd(1)
        n = 200
        before = self.etcd.requests()
        self.swarm_bytes(n)
        # Streams end when the swarm exits: wait until etcd has counted them.
        self.assertTrue(lib.wait_until(
            lambda: self.etcd.requests().get("Watch", 0) - before.get("Watch", 0)
            >= n - 1, 10), "etcd did not count the swarm's watch streams")
        after = self.etcd.requests()
        per = {k: (after.get(k, 0) - before.get(k, 0)) / n for k in after}
        print("etcd calls per participant at N=%d: %s" % (
            n, ", ".join("%s %.2f" % kv for kv in sorted(per.items()) if kv[1])),
            file=sys.stderr)
        self.assertEqual(per["LeaseGrant"], 1.0, per)
        self.assertLessEqual(per["Txn"], 1.2, per)
        self.assertLessEqual(per["Watch"], 1.1, per)

    def test_bytes_read_per_participant_do_not_grow_with_n(self):
        # A joiner learns its round, rank and world size from its own
        # assignment key (n/<node>) and the exchange's runs, never from the
        # whole state: twenty times the nodes, not twenty times the bytes each.
        small = self.swarm_bytes(10)
        large = self.swarm_bytes(200)
        print("bytes read per participant: %d B at N=10, %d B at N=200" % (small, large),
              file=sys.stderr)
        self.assertLess(large, 1.5 * small + 512,
                        "per participant: %d B at N=10, %d B at N=200" % (small, large))

    def test_exit_barrier_reads_do_not_grow_with_n(self):
        # Each node puts its arrival where only group rank 0 looks, and
        # waits for the one key rank 0 puts once all are in: before, every
        # arrival reached every node (N x N events) and each node read the
        # whole state after its own (1000 nodes timed out after 300 s).
        small = self.swarm_bytes(10, barrier=True)
        large = self.swarm_bytes(200, barrier=True)
        print("bytes read per participant in the exit barrier: %d B at N=10, %d B at N=200" % (
            small, large), file=sys.stderr)
        self.assertLess(large, 1.5 * small + 512,
                        "per participant: %d B at N=10, %d B at N=200" % (small, large))

    def test_all_again_reads_do_not_grow_with_n(self):
        # When one worker fails every node asks for the next round at once.
        # A node of the last round does not run torch's exit op itself (a
        # read and a write of the whole state: O(N) bytes each, 10 s for 200
        # nodes, none in 60 s for 1000): its join request says which round it
        # leaves ("x<round>"), the coordinator takes it out in the write that
        # admits it, and the node waits for its n/<node> key as a first join.
        small = self.swarm_bytes(10, again=True)
        large = self.swarm_bytes(200, again=True)
        print("bytes read per participant asking for the next round: %d B at N=10, "
              "%d B at N=200" % (small, large), file=sys.stderr)
        self.assertLess(large, 1.5 * small + 512,
                        "per participant: %d B at N=10, %d B at N=200" % (small, large))

    def test_all_again_with_a_last_call_longer_than_the_lease(self):
        # min < max nodes: a round completes at the end of its last call,
        # here 4 s, past the lease TTL (3 s); the rejoining nodes hear
        # nothing until then. That is no reason to read the state: each
        # still reads O(1) bytes (before: every node read the state after a
        # TTL, then on every change for the rest of its join).
        conf = "join_timeout=60,last_call_timeout=4," + FAST.replace(
            ",last_call_timeout=0.5", "")
        small = self.swarm_bytes(10, again=True, conf=conf, nnodes="2:11")
        large = self.swarm_bytes(100, again=True, conf=conf, nnodes="2:101")
        print("bytes read per participant asking for the next round, last call 4 s: "
              "%d B at N=10, %d B at N=100" % (small, large), file=sys.stderr)
        self.assertLess(large, 1.5 * small + 512,
                        "per participant: %d B at N=10, %d B at N=100" % (small, large))

    def test_all_again_coordinator_gone_node_exits_itself(self):
        # The coordinator dies just before the others ask for the next round
        # at once: their requests ask it to take them out of the round they
        # ran, and nobody does. Once its lease expires (or after a
        # keep-alive window with no word) a node reads the state, finds
        # itself still in that round, leaves it itself (torch's exit op,
        # and says so), and the round re-forms without the dead one well
        # within the join timeout.
        self.start_etcd(1)
        n = 6
        swarm = os.environ.get("RDZV_SWARM") or os.path.join(
            os.path.dirname(os.path.dirname(os.environ["ELASTICD"])), "tests", "rdzv_swarm")
        conf = "join_timeout=30," + FAST  # lease TTL 3 s
        env = dict(os.environ, RDZV_SWARM_BACKEND="etcd", RDZV_SWARM_NNODES="2:%d" % n,
                   RDZV_SWARM_PROGRESS="1")
        # Participant 0 alone, first: it takes w/coord.
        first = subprocess.Popen([swarm, str(n), self.etcd.endpoints, conf, "gone"],
                                 env=dict(env, RDZV_SWARM_SLICE="0:1", RDZV_SWARM_HOLD="1"),
                                 stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                 stderr=subprocess.PIPE)
        rest = None
        try:
            time.sleep(0.5)
            rest = subprocess.Popen([swarm, str(n), self.etcd.endpoints, conf, "gone"],
                                    env=dict(env, RDZV_SWARM_SLICE="1:%d" % (n - 1),
                                             RDZV_SWARM_ROUNDS="2",
                                             RDZV_SWARM_AGAIN_AFTER="500"),
                                    stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            line = rest.stdout.readline()
            self.assertTrue(line.startswith("swarm "), line)
            self.assertIn(" world=%d " % n, line)
            # The round runs; its coordinator dies before the others ask
            # again (in 0.5 s), its lease still held for up to 3 s.
            first.kill()
            t = time.monotonic()
            out, err = rest.communicate(timeout=60)
            took = time.monotonic() - t
        finally:
            if first.poll() is None:
                first.kill()
            first.communicate()
            if rest and rest.poll() is None:
                rest.kill()
                rest.communicate()
        self.assertEqual(rest.returncode, 0, err[-3000:])
        reform = dict(kv.split("=", 1) for kv in out.split("\n")[0].split()[1:])
        self.assertEqual(reform["failed"], "0", out)
        self.assertEqual(reform["world"], str(n - 1), out)
        self.assertLess(took, 20, err[-3000:])
        self.assertIn("leaving it itself", err, err[-3000:])

    # -- what only etcd has ------------------------------------------------------

    def test_two_agents_single_member(self):
        self.start_etcd(1)
        a = [self.agent("2") for _ in range(2)]
        results = self.wait_all(a)
        for r in results:
            self.assertRc(r, 0)
        self.check_world(self.worker_dumps(), 2)
        # One of them took the w/coord key and said so (the other may
        # take it over while the first leaves).
        said = [r for r in results if "coordinates the rendezvous 'job'" in r.err]
        self.assertGreaterEqual(len(said), 1, results)
        # etcd's native API by default.
        for r in results:
            self.assertRegex(r.err, r"etcd at 127\.0\.0\.1:\d+ \(gRPC\) granted lease", r.err)
        # The last one out removed the run's keys.
        self.assertTrue(lib.wait_until(lambda: self.etcd.keys("/elasticd/") == [], 10),
                        self.etcd.keys("/elasticd/"))
        # The same run id again starts clean.
        shutil.rmtree(self.dumps)
        os.makedirs(self.dumps)
        a = [self.agent("2") for _ in range(2)]
        for r in self.wait_all(a):
            self.assertRc(r, 0)
        self.check_world(self.worker_dumps(), 2)

    def test_stale_closed_run_is_cleaned(self):
        self.start_etcd(1)
        # A job whose agents all died after closing: write a closed state by hand.
        closed = b"elasticd-rdzv 1 3 1 0 1 -1\n"
        body = json.dumps({"key": base64.b64encode(b"/p/job/state").decode(),
                           "value": base64.b64encode(closed).decode()}).encode()
        req = urllib.request.Request(
            "http://127.0.0.1:%d/v3/kv/put" % self.etcd.members[0]["client"], data=body,
            method="POST")
        urllib.request.urlopen(req, timeout=10).read()
        a = [self.agent("2", conf=FAST + ",etcd_prefix=/p") for _ in range(2)]
        results = self.wait_all(a)
        for r in results:
            self.assertRc(r, 0)
        self.check_world(self.worker_dumps(), 2)
        self.assertTrue(any("earlier job" in r.err for r in results), results)
        self.assertEqual(self.etcd.keys("/p/"), [])

    def test_admitting_agent_killed_while_others_wait(self):
        # The first agent (w/coord) admits the others. SIGKILL it while a second one
        # waits in the round: once its lease expires the second takes over
        # and admits the late ones; the job forms without the dead one.
        self.start_etcd(1)

        def alive():
            return [k for k in self.etcd.keys("/elasticd/job/a/")]
        first = self.agent("3")
        self.assertTrue(lib.wait_until(lambda: len(alive()) == 1, 20), alive())
        second = self.agent("3")
        self.assertTrue(lib.wait_until(lambda: len(alive()) == 2, 20), alive())
        # The second is a participant (admitted) before the first goes.
        self.assertTrue(lib.wait_until(
            lambda: len(self.etcd.keys("/elasticd/job/j/")) == 0, 20),
            self.etcd.keys("/elasticd/job/j/"))
        first.signal(signal.SIGKILL)
        first.wait(10)
        late = [self.agent("3") for _ in range(2)]
        for r in self.wait_all([second] + late):
            self.assertRc(r, 0)
        dumps = self.worker_dumps()
        self.check_world(dumps, 3)
        self.assertNotIn(str(first.pid), {d["AGENT_PID"] for d in dumps})

    def test_coordinator_killed_while_the_round_runs(self):
        # Only the coordinator watches for deaths. SIGKILL it while the
        # round runs: the others hear of it through w/coord (a deletion on
        # their w/ watch), one takes the key, writes the dead one out, and
        # the two re-form.
        self.start_etcd(1)
        body = 'if [ "$WORLD_SIZE" = 2 ]; then exit 0; fi; sleep 60'
        a = [self.agent("2:3", body=body) for _ in range(3)]
        self.wait_dumps(3, pred=lambda d: d["WORLD_SIZE"] == "3")
        holder = [x for x in a if "coordinates the rendezvous 'job'" in x.stderr_text()]
        self.assertEqual(len(holder), 1, [x.stderr_text()[-2000:] for x in a])
        victim = holder[0]
        rest = [x for x in a if x is not victim]
        victim.signal(signal.SIGKILL)
        victim.wait(10)
        results = self.wait_all(rest, timeout=self.REFORM_WAIT_S)
        self.assertAllRc(results, 0)
        two = [d for d in self.worker_dumps() if d["WORLD_SIZE"] == "2"]
        self.check_world(two, 2, 2)
        self.assertNotIn(str(victim.pid), {d["AGENT_PID"] for d in two})
        self.assertTrue(any("coordinates the rendezvous 'job'" in r.err for r in results),
                        results)

    def test_etcd_unreachable_clear_error(self):
        port = free_port()
        t = time.monotonic()
        a = self.agent("2", endpoint="127.0.0.1:%d" % port, conf=FAST + ",join_timeout=6")
        self.assertTrue(a.wait_stderr("cannot reach etcd", timeout=6), a.stderr_text())
        self.assertLess(time.monotonic() - t, 6)
        r = a.wait(60)
        self.assertNotEqual(r.rc, 0)
        self.assertIn("127.0.0.1:%d" % port, r.err)
        self.assertIn("join timeout", r.err)
        self.assertLess(time.monotonic() - t, 40)

    def test_three_members_one_killed_during_rendezvous(self):
        self.start_etcd(3)
        body = "exit 0"
        first = self.agent("2", body=body)
        # The first agent is in: kill the member it talks to first.
        time.sleep(1.0)
        self.etcd.kill(0)
        second = self.agent("2", body=body)
        for r in self.wait_all([first, second]):
            self.assertRc(r, 0)
        self.check_world(self.worker_dumps(), 2)

    def test_lost_quorum_clear_error_at_join_timeout(self):
        self.start_etcd(3)
        self.etcd.kill(1)
        self.etcd.kill(2)
        t = time.monotonic()
        r = self.agent("2", conf=FAST + ",join_timeout=8").wait(60)
        self.assertNotEqual(r.rc, 0)
        self.assertIn("cannot reach etcd", r.err)
        self.assertIn("join timeout of 8 s", r.err)
        self.assertLess(time.monotonic() - t, 25)

    def test_every_member_down_while_workers_run_is_degraded_not_fatal(self):
        # etcd gone while the workers run: they keep running (they need no
        # etcd), the agent says the rendezvous is degraded once (then at most
        # once a minute) and records _keep_alive FAILED events, and once the
        # workers end it passes the exit barrier as it can and exits 0.
        self.start_etcd(1)
        ev = self.path("events.jsonl")
        sock = self.path("a.sock")
        a = self.agent("1", body="sleep 6; exit 0", conf=FAST + ",exit_barrier_timeout=3",
                       extra=("--event-log-file", ev, "--control-socket", sock))
        self.wait_dumps(1, timeout=30)
        self.assertIsNone(curl(sock, "/handler/status").json()["degraded"])
        self.etcd.kill(0)
        t = time.monotonic()
        self.assertTrue(a.wait_stderr("rendezvous degraded: etcd unreachable", 10),
                        a.stderr_text())
        self.assertLess(time.monotonic() - t, 5)
        # The status says so while it lasts, and so does the metric.
        deg = curl(sock, "/handler/status").json()["degraded"]
        self.assertIsNotNone(deg)
        self.assertTrue(deg["reason"].startswith("etcd unreachable: "), deg)
        self.assertGreaterEqual(deg["for_s"], 0)
        self.assertIn("\nelasticd_rdzv_degraded 1\n", curl(sock, "/metrics").body)
        r = a.wait(120)
        self.assertRc(r, 0)
        self.assertEqual(r.err.count("rendezvous degraded"), 1, r.err)
        self.assertNotIn("Sending process", r.err)  # the worker was never stopped
        with open(ev) as f:
            events = [json.loads(line) for line in f if line.strip()]
        failed = [e for e in events if e.get("name", "").endswith("_keep_alive")
                  and e.get("node_state") == "FAILED"]
        self.assertTrue(failed, events[-5:])

    def test_keep_alives_share_one_stream(self):
        # Over gRPC, an agent's keep-alives are messages on one
        # LeaseKeepAlive stream (as etcd's own client sends them), not a
        # stream each: at 10 000 agents, a keep-alive every TTL/3 seconds
        # each is what etcd's CPU goes to.
        self.start_etcd(1)
        before = self.etcd.requests("grpc_server_started_total")
        sent0 = self.etcd.requests("grpc_server_msg_received_total")
        # TTL 3 s: a keep-alive a second, about five in the run.
        r = self.agent("1", body="sleep 5.5").wait(60)
        self.assertRc(r, 0)
        streams = (self.etcd.requests("grpc_server_started_total").get("LeaseKeepAlive", 0)
                   - before.get("LeaseKeepAlive", 0))
        sent = (self.etcd.requests("grpc_server_msg_received_total").get("LeaseKeepAlive", 0)
                - sent0.get("LeaseKeepAlive", 0))
        self.assertGreaterEqual(sent, 4, "keep-alives received by etcd")
        self.assertEqual(streams, 1, "LeaseKeepAlive streams for %d keep-alives" % sent)

    def member_killed_while_workers_run(self, conf, wire):
        """Two agents on three members; the member they talk to first is
        SIGKILLed while their workers run (keep-alives every second, TTL
        3 s): their keep-alives, watches and exit barrier move to another
        member, and no lease is lost."""
        self.start_etcd(3)
        a = [self.agent("2", body="sleep 6", conf=conf) for _ in range(2)]
        self.wait_dumps(2, timeout=60)
        self.etcd.kill(0)
        results = self.wait_all(a)
        for r in results:
            self.assertRc(r, 0)
            self.assertIn("(%s) granted lease" % wire, r.err)
            self.assertNotIn("this node's etcd lease expired", r.err)
        self.check_world(self.worker_dumps(), 2)
        self.assertTrue(lib.wait_until(lambda: self.etcd.keys("/elasticd/") == [],
                                       10), self.etcd.keys("/elasticd/"))

    def test_member_killed_while_workers_run(self):
        self.member_killed_while_workers_run(FAST, "gRPC")

    def test_member_hung_while_workers_run(self):
        # The member the agents talk to stops answering with its TCP
        # connections up (SIGSTOP: a frozen VM, a stalled disk). After 5 s
        # of silence an HTTP/2 PING goes unanswered for 3 s and the
        # connection is dropped: keep-alives, watches and the exit barrier
        # move to another member before the 12 s lease runs out (a
        # keep-alive waiting out its 10 s deadline would lose it).
        self.start_etcd(3)
        conf = "keep_alive_interval=4,keep_alive_max_attempt=3,last_call_timeout=0.5"
        a = [self.agent("2", body="sleep 20", conf=conf) for _ in range(2)]
        self.wait_dumps(2, timeout=60)
        self.etcd.pause(0)
        try:
            results = self.wait_all(a, timeout=60)
        finally:
            self.etcd.resume(0)
        for r in results:
            self.assertRc(r, 0)
            self.assertNotIn("this node's etcd lease expired", r.err)
        self.check_world(self.worker_dumps(), 2)

    def test_json_gateway_protocol(self):
        # --rdzv-conf etcd_protocol=json: the same rendezvous through etcd's
        # JSON gateway (HTTP/1.1), for endpoints that pass only HTTP/1.1.
        self.member_killed_while_workers_run(FAST + ",etcd_protocol=json", "JSON gateway")

    def test_bad_etcd_protocol(self):
        r = self.run_elasticd("--nnodes", "2", "--rdzv-backend", "etcd", "--rdzv-endpoint",
                              "127.0.0.1:2379", "--rdzv-conf", "etcd_protocol=http3",
                              "--no-python", "/bin/true")
        self.assertEqual(r.rc, 2, r)
        self.assertIn("etcd_protocol", r.err)
        self.assertIn("'http3'", r.err)

    def test_bad_endpoint(self):
        r = self.run_elasticd("--nnodes", "2", "--rdzv-backend", "etcd", "--rdzv-endpoint",
                              "https://127.0.0.1:2379", "--no-python", "/bin/true")
        self.assertEqual(r.rc, 2, r)
        self.assertIn("TLS", r.err)


if __name__ == "__main__":
    lib.main()
