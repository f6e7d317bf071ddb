"""`elasticctl nodes` from every agent of a running multi-node job: each one
shows the same participants with group ranks 0..n-1 (text and --json). Used
by test_rdzv_c10d.py and test_rdzv_etcd.py."""

import json
import os
import subprocess
import time

import lib

ELASTICCTL = os.environ.get("ELASTICCTL") or os.path.join(lib.SOURCE_ROOT, "build", "src",
                                                          "elasticctl")


def ctl(tc, *args):
    p = subprocess.run([ELASTICCTL] + [str(a) for a in args], capture_output=True,
                       timeout=30, env=tc.env())
    return p.returncode, p.stdout.decode(), p.stderr.decode()


def nodes_json(tc, sock):
    """The nodes object from the agent at sock, or None while it cannot say."""
    rc, out, _ = ctl(tc, "-s", sock, "nodes", "--json")
    return json.loads(out) if rc == 0 else None


def check_nodes(tc, socks, backend, liveness):
    """Wait until every agent at socks sees a complete round of len(socks)
    participants, then check that they all show the same one, both ways."""
    n = len(socks)

    def complete():
        got = [nodes_json(tc, s) for s in socks]
        ok = all(g and g["complete"] and len(g["participants"]) == n for g in got)
        return got if ok else None
    got = lib.wait_until(complete, 60)
    tc.assertIsNotNone(got, "nodes never showed a complete round of %d: %r"
                       % (n, [ctl(tc, "-s", s, "nodes", "--json") for s in socks]))
    first = [(p["node"], p["group_rank"]) for p in got[0]["participants"]]
    tc.assertEqual([r for _, r in first], list(range(n)))
    selves = set()
    for g in got:
        tc.assertEqual(g["backend"], backend)
        tc.assertEqual(g["liveness"], liveness)
        tc.assertEqual(g["run_id"], "job")
        tc.assertEqual([(p["node"], p["group_rank"]) for p in g["participants"]], first)
        tc.assertEqual(g["wait_list"], [])
        tc.assertEqual(g["spares"], [])
        tc.assertEqual(g["quarantined"], [])
        tc.assertGreaterEqual(g["state_age_s"], 0)
        for p in g["participants"]:
            tc.assertTrue(p["alive"], p)
            if liveness == "heartbeat":
                tc.assertGreaterEqual(p["heartbeat_age_s"], 0)
            else:
                tc.assertIsNone(p["heartbeat_age_s"])
        selves.add(g["node"])
    # Each agent names itself, and itself is one of the participants.
    tc.assertEqual(selves, {node for node, _ in first})
    for s in socks:
        rc, out, err = ctl(tc, "-s", s, "nodes")
        tc.assertEqual(rc, 0, err)
        tc.assertIn("job:       job (%s)" % backend, out)
        tc.assertIn("round:     ", out)
        tc.assertIn("quarantined: 0\n", out)
        rows = [line.split() for line in out.splitlines() if line.startswith("participant")]
        tc.assertEqual([(r[2], int(r[1])) for r in rows], first)
        tc.assertEqual(sum(1 for r in rows if "*" in r), 1, out)
        tc.assertTrue(all(r[-1] == "yes" for r in rows), out)


def stop(agents):
    import signal
    for a in agents:
        a.signal(signal.SIGTERM)
    deadline = time.monotonic() + 60
    for a in agents:
        a.wait(max(1, deadline - time.monotonic()))
