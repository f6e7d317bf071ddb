#!/usr/bin/python3
"""Several real elasticd processes forming one job through the etcd (v3)
rendezvous backend, against real etcd members (Debian's etcd-server) started
by the test on loopback ports with their data in a temp dir: completion, the
keys cleaned up and a reused run id, min:max with a late joiner, a crowd
starting together, a SIGKILLed agent whose lease expires (also the one that
admits the others), etcd unreachable, and a 3-member cluster losing a member
during the rendezvous."""

import base64
import json
import os
import shutil
import signal
import sys
import time
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import ectl_nodes  # noqa: E402
import lib  # noqa: E402
from etcd_cluster import Etcd, free_port  # noqa: E402
from test_ctl import curl  # noqa: E402

DUMP = r"""
d="$1"; shift
f="$d/w_${TORCHELASTIC_RUN_ID}_$$"
printf '%s\n' "RANK=$RANK" "LOCAL_RANK=$LOCAL_RANK" "WORLD_SIZE=$WORLD_SIZE" \
  "GROUP_RANK=$GROUP_RANK" "GROUP_WORLD_SIZE=$GROUP_WORLD_SIZE" \
  "MASTER_ADDR=$MASTER_ADDR" "MASTER_PORT=$MASTER_PORT" \
  "TORCHELASTIC_USE_AGENT_STORE=$TORCHELASTIC_USE_AGENT_STORE" \
  "TORCHELASTIC_RESTART_COUNT=$TORCHELASTIC_RESTART_COUNT" "ELASTICD_ROUND=$ELASTICD_ROUND" \
  "AGENT_PID=$PPID" > "$f.tmp"
mv "$f.tmp" "$f"
exec /bin/sh -c "$@"
"""

# Lease TTL 3 s (keep_alive_interval * keep_alive_max_attempt).
FAST = "keep_alive_interval=1,keep_alive_max_attempt=3,last_call_timeout=0.5"


class EtcdTest(lib.ElasticdTestCase):

    def setUp(self):
        super().setUp()
        self.etcd = None
        self.dumps = self.path("dumps")
        os.makedirs(self.dumps)
        self.script = self.write_sh("dump.sh", DUMP)

    def tearDown(self):
        super().tearDown()
        if self.etcd:
            self.etcd.stop()

    def start_etcd(self, n=1):
        self.etcd = Etcd(n)
        return self.etcd

    def agent(self, nnodes, body="exit 0", conf=FAST, endpoint=None, run_id="job", extra=()):
        args = ["--nnodes", nnodes, "--nproc-per-node", "1", "--rdzv-backend", "etcd",
                "--rdzv-endpoint", endpoint or self.etcd.endpoints, "--rdzv-id", run_id,
                "--monitor-interval", "0.1"]
        if conf:
            args += ["--rdzv-conf", conf]
        args += list(extra) + ["--no-python", self.script, self.dumps, body]
        return self.start(*args)

    def worker_dumps(self):
        out = []
        for name in sorted(os.listdir(self.dumps)):
            if name.endswith(".tmp"):
                continue
            with open(os.path.join(self.dumps, name)) as f:
                out.append(dict(line.strip().split("=", 1) for line in f if "=" in line))
        return out

    def wait_dumps(self, n, timeout=60, pred=None):
        def ready():
            d = self.worker_dumps()
            if pred:
                d = [x for x in d if pred(x)]
            return d if len(d) >= n else None
        got = lib.wait_until(ready, timeout)
        self.assertIsNotNone(got, "only %r" % self.worker_dumps())
        return got

    def wait_all(self, agents, timeout=90):
        return [a.wait(timeout) for a in agents]

    def check_world(self, dumps, world):
        self.assertEqual(sorted(int(d["RANK"]) for d in dumps), list(range(world)))
        for d in dumps:
            self.assertEqual(d["WORLD_SIZE"], str(world))
            self.assertEqual(d["GROUP_WORLD_SIZE"], str(world))
            self.assertEqual(d["TORCHELASTIC_USE_AGENT_STORE"], "False")
        self.assertEqual(len({(d["MASTER_ADDR"], d["MASTER_PORT"]) for d in dumps}), 1)

    # -- cases, in priority order ----------------------------------------------

    def test_two_agents_single_member(self):
        self.start_etcd(1)
        a = [self.agent("2") for _ in range(2)]
        for r in self.wait_all(a):
            self.assertRc(r, 0)
        self.check_world(self.worker_dumps(), 2)
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

    def test_nodes_from_every_agent(self):
        self.start_etcd(1)
        socks = [self.path("a%d.sock" % i) for i in range(3)]
        agents = [self.agent("3", body="sleep 60", extra=("--control-socket", s))
                  for s in socks]
        ectl_nodes.check_nodes(self, socks, "etcd", "lease")
        ectl_nodes.stop(agents)

    def test_worker_failure_one_round_count_on_every_node(self):
        # Group rank 1 fails once: both nodes re-form, and the workers of each
        # round see the same ELASTICD_ROUND although only the failing node's
        # TORCHELASTIC_RESTART_COUNT moved.
        self.start_etcd(1)
        marker = self.path("failed-once")
        body = ('if [ ! -e %s ]; then if [ "$GROUP_RANK" = 1 ]; then sleep 1; touch %s; '
                'exit 5; fi; sleep 60; fi; exit 0' % (marker, marker))
        a = [self.agent("2", body=body, extra=("--max-restarts", "1")) for _ in range(2)]
        for r in self.wait_all(a):
            self.assertRc(r, 0)
        dumps = self.worker_dumps()
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

    def test_others_name_the_node_that_failed(self):
        # Group rank 1's worker exits 3 for good: its closing records it, and
        # the other agent names it in its log line, failure table and events.
        self.start_etcd(1)
        body = 'if [ "$GROUP_RANK" = 1 ]; then sleep 0.5; exit 3; fi; sleep 60'
        evlogs = [self.path("ev%d.jsonl" % i) for i in range(2)]
        a = [self.agent("2", body=body, extra=("--event-log-file", evlogs[i]))
             for i in range(2)]
        results = self.wait_all(a, timeout=60)
        self.assertEqual(sorted(r.rc for r in results), [1, 1])
        failer = next(d for d in self.worker_dumps() if d["GROUP_RANK"] == "1")
        i = 0 if str(a[1].pid) == failer["AGENT_PID"] else 1
        self.assertNotEqual(str(a[i].pid), failer["AGENT_PID"])
        why = (r"closed by another node: its workers failed \(node [^ ]+_%s_0 \(group rank 1\): "
               r"local rank 0 \(rank 1\) exited with code 3\)" % failer["AGENT_PID"])
        self.assertRegex(results[i].err, why)
        self.assertRegex(results[i].err, r"ChildFailedError: \n=+\n.* FAILED on node \S+ "
                         r"\(group rank 1\)")
        self.assertRegex(results[i].err, r"exitcode\s+: 3 \(pid: [1-9]\d*\)")
        with open(evlogs[i]) as f:
            ev = [json.loads(line) for line in f]
        failed = [e for e in ev if e["name"] == "torchelastic.worker.status.FAILED"
                  and e["source"] == "AGENT"]
        self.assertEqual(len(failed), 1, [e["name"] for e in ev])
        self.assertRegex(failed[0]["metadata"]["raw_error"], why)

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

    def test_min_max_late_joiner(self):
        self.start_etcd(1)
        body = 'if [ "$WORLD_SIZE" = 3 ]; then exit 0; fi; sleep 60'
        a = [self.agent("2:3", body=body) for _ in range(2)]
        self.wait_dumps(2, pred=lambda d: d["WORLD_SIZE"] == "2")
        t = time.monotonic()
        a.append(self.agent("2:3", body=body))
        results = self.wait_all(a)
        for r in results:
            self.assertRc(r, 0)
        self.assertLess(time.monotonic() - t, 30)
        three = [d for d in self.worker_dumps() if d["WORLD_SIZE"] == "3"]
        self.check_world(three, 3)
        self.assertEqual({d["TORCHELASTIC_RESTART_COUNT"] for d in three}, {"0"})

    def test_killed_agent_lease_expires_and_the_rest_reform(self):
        self.start_etcd(1)
        body = 'if [ "$WORLD_SIZE" = 2 ]; then exit 0; fi; sleep 60'
        a = [self.agent("2:3", body=body) for _ in range(3)]
        self.wait_dumps(3, pred=lambda d: d["WORLD_SIZE"] == "3")
        victim = a[2]
        t = time.monotonic()
        victim.signal(signal.SIGKILL)
        victim.wait(10)
        results = self.wait_all(a[:2])
        for r in results:
            self.assertRc(r, 0)
        self.assertLess(time.monotonic() - t, 40)
        two = [d for d in self.worker_dumps() if d["WORLD_SIZE"] == "2"]
        self.check_world(two, 2)
        self.assertNotIn(str(victim.pid), {d["AGENT_PID"] for d in two})

    def test_sigterm_leaves_the_rendezvous(self):
        # A graceful stop takes the node out of the round (without closing the
        # rendezvous): the survivor re-forms at once, not when the stopped
        # node's keep-alive expires (15 s here), and a node started in its
        # place joins within seconds.
        self.start_etcd(1)
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

    def test_crowd_starting_together(self):
        # Eight agents at once: the first one in admits the others as they
        # ask; every rank of the world exactly once, one master.
        self.start_etcd(1)
        a = [self.agent("8") for _ in range(8)]
        for r in self.wait_all(a):
            self.assertRc(r, 0)
        self.check_world(self.worker_dumps(), 8)

    def test_admitting_agent_killed_while_others_wait(self):
        # The oldest agent admits the others. SIGKILL it while a second one
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

    def test_bad_endpoint(self):
        r = self.run_elasticd("--nnodes", "2", "--rdzv-backend", "etcd", "--rdzv-endpoint",
                              "https://127.0.0.1:2379", "--no-python", "/bin/true")
        self.assertEqual(r.rc, 2, r)
        self.assertIn("TLS", r.err)


if __name__ == "__main__":
    lib.main()
