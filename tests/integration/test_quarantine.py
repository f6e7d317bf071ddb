#!/usr/bin/python3
"""Quarantine shared by the job (issue 16, its leftovers): readmit from any
agent (the entry ends in the shared rendezvous state and the quarantined
agent notices), only the root cause of a failure job-wide counts toward
--quarantine (failure reports in the state), and the count survives a
restart of the agent. On both backends, with the agents of test_health.py."""

import os
import signal
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import lib  # noqa: E402
from test_ctl import curl, post  # noqa: E402
from test_health import ELASTICCTL, ETCD_FAST, HealthBase, events, quarantine_flags  # noqa: E402
from test_rdzv_c10d import FAST  # noqa: E402


class QuarantineBase(HealthBase):

    def readmit_from_another_agent(self):
        # A long cooldown: only the readmit verb, sent to another agent,
        # can end it in time.
        a, bad = self.quarantine_one_of_three(lambda n: quarantine_flags(n, 1, 60))
        st = curl(bad.sock, "/handler/status").json()
        self.assertEqual(st["phase"], "quarantined", st)
        self.assertEqual(st["quarantine"]["watch_s"], 2, st)
        if self.etcd:
            # Its watch reads the state as an observer: no lease, no a/ key
            # (the others would count it alive), never the coordinator.
            self.assertTrue(lib.wait_until(lambda: curl(bad.sock, "/handler/status").json()[
                "quarantine"]["state_reads"] >= 1, 20), bad.stderr_text())
            alive = self.etcd.keys("/elasticd/job/a/")
            self.assertEqual(len(alive), 2, alive)
            self.assertFalse([x for x in alive if x.startswith("/elasticd/job/a/127.0.0.3_")])
        self.assertTrue(lib.wait_until(lambda: [
            x for x in curl(a[1].sock, "/handler/nodes").json()["quarantined"]
            if x["active"]], 20))
        # Unknown node (elasticctl shows the agent's 404), and a node that
        # is not quarantined (409): nothing changes.
        p = subprocess.run([ELASTICCTL, "-s", a[1].sock, "readmit", "node=10.9.9.9"],
                           capture_output=True, text=True, timeout=30, env=self.env())
        self.assertEqual(p.returncode, 1, p.stderr)
        self.assertIn("unknown node '10.9.9.9'", p.stderr)
        self.assertIn("(HTTP 404)", p.stderr)
        r = post(a[0].sock, "/handler/readmit?node=127.0.0.2")
        self.assertEqual(r.status, 409, r.body)
        self.assertIn("node '127.0.0.2' is not quarantined", r.body)
        # Readmitted from another agent: written to the shared state, and
        # the quarantined agent notices within its watch interval.
        t0 = time.monotonic()
        r = post(a[1].sock, "/handler/readmit?node=127.0.0.3")
        self.assertEqual(r.status, 200, r.body)
        self.assertIn("readmitted 127.0.0.3: its quarantine is over", r.body)
        self.assertTrue(lib.wait_until(
            lambda: events(bad.events, "elasticd.node.readmitted"), 20), bad.stderr_text())
        self.assertLess(time.monotonic() - t0, 15)
        r_ev = events(bad.events, "elasticd.node.readmitted")[0]
        self.assertEqual(r_ev["by"], "readmit", r_ev)
        self.assertLess(r_ev["after_s"], 40, r_ev)
        self.assertIn("readmitted by another agent (readmit verb)", bad.stderr_text())
        mine = events(a[1].events, "elasticd.node.readmitted")
        self.assertEqual([(e["node"], e["requested_on"], e["result"]) for e in mine],
                         [("127.0.0.3", "127.0.0.2", "ok")], mine)
        self.assertIn("readmit '127.0.0.3': readmitted 127.0.0.3", a[1].stderr_text())
        self.assertIn("elasticd_readmit_requests_total 1", curl(a[1].sock, "/metrics").body)
        # It rejoins, its worker fails again: quarantined again, twice as long.
        self.assertTrue(lib.wait_until(
            lambda: len(events(bad.events, "elasticd.node.quarantined")) == 2, 40),
            bad.stderr_text())
        q2 = events(bad.events, "elasticd.node.quarantined")[1]
        self.assertEqual((q2["quarantines"], q2["cooldown_s"]), (2, 120), q2)
        bad.signal(signal.SIGTERM)
        self.assertRc(bad.wait(30), 128 + signal.SIGTERM)
        self.stop_all(a)

    def root_cause_across_nodes(self):
        # Node 2's workers crash; node 1's die of it a little later. Only
        # node 2 was the root cause: it alone is quarantined.
        def q(n):
            return quarantine_flags(n, 2, 60, "--max-restarts", "6")
        a = [self.agent(0, extra=q(0))]
        time.sleep(0.5)  # the first one hosts the c10d store
        victim = self.agent(1, "victim", extra=q(1))
        culprit = self.agent(2, "culprit", extra=q(2))
        self.assertTrue(lib.wait_until(
            lambda: events(culprit.events, "elasticd.node.quarantined"), 60),
            culprit.stderr_text())
        mine = events(culprit.events, "elasticd.node.root_cause")
        self.assertEqual([e["verdict"] for e in mine], ["this node", "this node"], mine)
        theirs = lib.wait_until(
            lambda: events(victim.events, "elasticd.node.root_cause") or None, 20)
        self.assertTrue(theirs, victim.stderr_text())
        for e in theirs:
            self.assertEqual(e["verdict"], "another node", theirs)
            self.assertTrue(e["earliest_other"].startswith("127.0.0.3_"), theirs)
            self.assertGreater(e["earlier_ms"], 100, theirs)
        self.assertIn("127.0.0.3_", victim.stderr_text())
        self.assertIn("the root cause; not counted toward --quarantine", victim.stderr_text())
        self.assertIn("this node failed first, the root cause", culprit.stderr_text())
        # The others go on at 2 nodes; the victim was never quarantined.
        self.wait_world(2, 2, timeout=40)
        time.sleep(1)
        self.assertEqual(events(victim.events, "elasticd.node.quarantined"), [])
        st = curl(victim.sock, "/handler/status").json()
        self.assertEqual(st["root_cause"]["verdict"], "another node", st)
        self.assertNotEqual(st["phase"], "quarantined", st)
        culprit.signal(signal.SIGTERM)
        self.assertRc(culprit.wait(30), 128 + signal.SIGTERM)
        self.stop_all([a[0], victim])

    def quarantine_count_survives_a_restart(self):
        # The quarantined node's agent is restarted: the new one reads the
        # host's count from the shared state, and its cooldown keeps doubling.
        def q(n):
            return quarantine_flags(n, 1, 2)
        a, bad = self.quarantine_one_of_three(q)
        # Its leave wrote the entry (a SIGTERM before that would cut it short).
        self.assertTrue(lib.wait_until(lambda: [
            x for x in curl(a[1].sock, "/handler/nodes").json()["quarantined"]
            if x["host"] == "127.0.0.3"], 20), bad.stderr_text())
        bad.signal(signal.SIGTERM)
        self.assertRc(bad.wait(30), 128 + signal.SIGTERM)
        again = self.agent(3, "crash", extra=q(2))
        self.assertTrue(lib.wait_until(
            lambda: events(again.events, "elasticd.node.quarantined"), 40), again.stderr_text())
        ev = events(again.events, "elasticd.node.quarantined")[0]
        self.assertEqual((ev["quarantines"], ev["cooldown_s"], ev["inherited"]), (2, 4, 1),
                         "%r\n%s" % (ev, again.stderr_text()))
        self.assertIn("the rendezvous state records 1 earlier quarantine of this host",
                      again.stderr_text())
        st = curl(again.sock, "/handler/status").json()
        self.assertEqual(st["quarantine_count"],
                         {"quarantines": 2, "inherited": 1, "exemptions": 0}, st)
        # The event comes when the quarantine starts; the entry reaches the
        # shared state with the leave that follows, and a[1] sees it then.
        def counts():
            got = curl(a[1].sock, "/handler/nodes").json()["quarantined"]
            return [(x["host"], x["count"]) for x in got]
        lib.wait_until(lambda: counts() == [("127.0.0.3", 2)], 20)
        self.assertEqual(counts(), [("127.0.0.3", 2)], again.stderr_text())
        again.signal(signal.SIGTERM)
        self.assertRc(again.wait(30), 128 + signal.SIGTERM)
        self.stop_all(a)


class QuarantineTest(QuarantineBase):

    def test_readmit_from_another_agent(self):
        self.readmit_from_another_agent()

    def test_root_cause_across_nodes(self):
        self.root_cause_across_nodes()

    def test_quarantine_count_survives_a_restart(self):
        self.quarantine_count_survives_a_restart()

    def test_sigterm_during_the_quarantine_leave_keeps_the_entry(self):
        # The quarantine's leave writes the node's entry into the shared
        # state. A SIGTERM (systemd stopping the unit) that comes while the
        # leave is unanswered (here: the store host stopped) waits for it:
        # the entry is written and a restarted agent stays out.
        def q(n):
            return quarantine_flags(n, 1, 60)
        host = self.agent(0, nnodes="1:2", extra=q(0))
        time.sleep(0.5)  # it hosts the c10d store
        bad = self.agent(2, "crash", nnodes="1:2", extra=q(2))
        self.assertTrue(lib.wait_until(
            lambda: self.dumps_where(lambda d: d["AGENT_PID"] == bad.pid), 30))
        host.signal(signal.SIGSTOP)  # its worker crashes 0.3 s after its dump
        try:
            # Its failure report cannot be written: after 4 s it counts its
            # own failure, is quarantined, and leaves (unanswered too).
            self.assertTrue(lib.wait_until(
                lambda: events(bad.events, "elasticd.node.quarantined"), 30),
                bad.stderr_text())
            bad.signal(signal.SIGTERM)
            time.sleep(0.5)
        finally:
            host.signal(signal.SIGCONT)
        res = bad.wait(30)
        self.assertRc(res, 128 + signal.SIGTERM)
        self.assertIn("left the rendezvous 'job' (it stays open for the others)", res.err)
        def entries():
            return [(x["host"], x["active"]) for x in curl(
                host.sock, "/handler/nodes").json()["quarantined"]]
        self.assertTrue(lib.wait_until(lambda: entries() == [("127.0.0.3", True)], 10),
                        entries())
        host.signal(signal.SIGTERM)
        self.assertRc(host.wait(30), 128 + signal.SIGTERM)

    def test_store_host_is_exempt(self):
        # The crashing node hosts the store (is_host=true). Quarantining it
        # would take the job's store and admissions away: the others would
        # wait for a round nobody forms. It stays and says why.
        def q(n):
            return quarantine_flags(n, 1, 60, "--rdzv-conf",
                                    FAST + (",is_host=true" if n == 2 else ",is_host=false"))
        bad = self.agent(2, "crash", extra=q(2))
        time.sleep(0.5)
        a = [self.agent(n, extra=q(n)) for n in (0, 1)]
        self.assertTrue(lib.wait_until(
            lambda: events(bad.events, "elasticd.node.quarantine_exempt"), 40),
            bad.stderr_text())
        ev = events(bad.events, "elasticd.node.quarantine_exempt")[0]
        self.assertEqual((ev["node"], ev["failures"], ev["why"]),
                         ("127.0.0.3", 1, "hosts the c10d store"), ev)
        self.assertIn("but it hosts the c10d rendezvous store: not quarantined",
                      bad.stderr_text())
        self.assertEqual(events(bad.events, "elasticd.node.quarantined"), [])
        st = curl(bad.sock, "/handler/status").json()
        self.assertGreaterEqual(st["quarantine_count"]["exemptions"], 1, st)
        self.assertNotEqual(st["phase"], "quarantined", st)
        self.assertRegex(curl(bad.sock, "/metrics").body,
                         r"elasticd_quarantine_exemptions_total [1-9]")
        for x in a + [bad]:
            x.signal(signal.SIGTERM)
        for x in a + [bad]:
            x.wait(30)


class EtcdQuarantineTest(QuarantineBase):
    """The same on the etcd backend (a real etcd member)."""

    backend = "etcd"

    def test_readmit_from_another_agent(self):
        self.readmit_from_another_agent()

    def test_root_cause_across_nodes(self):
        self.root_cause_across_nodes()

    def test_quarantine_count_survives_a_restart(self):
        self.quarantine_count_survives_a_restart()

    def test_leave_while_etcd_is_stopped_ends_the_lease(self):
        # etcd stops answering (SIGSTOP) while the workers run: "degraded".
        # Then the node is quarantined: its leave's write and the revoke
        # fail. The handle it left stays through the cooldown: once etcd
        # answers again, no keep-alive of it renews the lease (its a/ key
        # is gone), and it no longer says the rendezvous is degraded.
        def q(n):
            return quarantine_flags(n, 1, 60, "--rdzv-conf", ETCD_FAST + ",close_timeout=2")
        good = self.agent(0, nnodes="1:2", extra=q(0))
        time.sleep(0.5)
        bad = self.agent(2, "victim", nnodes="1:2", extra=q(2))
        self.wait_world(2, 2, timeout=30)
        member = self.etcd.members[0]["proc"]
        member.send_signal(signal.SIGSTOP)
        try:
            self.assertTrue(bad.wait_stderr("rendezvous degraded: etcd unreachable", 40),
                            bad.stderr_text())
            open(os.path.join(self.dumps, "dead_0"), "w").close()  # its worker exits
            self.assertTrue(lib.wait_until(
                lambda: events(bad.events, "elasticd.node.quarantined"), 30),
                bad.stderr_text())
            # Its write fails (two tries of 10 s), then the revoke (the
            # lease goes at its TTL on its own).
            self.assertTrue(bad.wait_stderr("leaving the rendezvous: ", 90), bad.stderr_text())
        finally:
            member.send_signal(signal.SIGCONT)
        def mine():
            return [x for x in self.etcd.keys("/elasticd/job/a/")
                    if x.startswith("/elasticd/job/a/127.0.0.3_")]
        self.assertTrue(lib.wait_until(lambda: mine() == [], 10), (mine(), bad.stderr_text()))
        time.sleep(4)  # more than the TTL: a renewed lease would show
        self.assertEqual(mine(), [], bad.stderr_text())
        st = curl(bad.sock, "/handler/status").json()
        self.assertEqual(st["phase"], "quarantined", st)
        self.assertIsNone(st["degraded"], st)
        self.assertIn("\nelasticd_rdzv_degraded 0\n", curl(bad.sock, "/metrics").body)
        self.assertNotIn("rendezvous back", bad.stderr_text())
        bad.signal(signal.SIGTERM)
        self.assertRc(bad.wait(30), 128 + signal.SIGTERM)
        # The other lost its lease to the stop (longer than the TTL).
        good.signal(signal.SIGTERM)
        good.wait(30)

if __name__ == "__main__":
    lib.main()
