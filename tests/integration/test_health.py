#!/usr/bin/python3
"""Bad nodes stay out (issue 16): the health gate before every rendezvous
join (--health-check commands with a deadline, built-in checks over a
fixture root, retries, exit 6), and the exclude verb (an operator, or a
worker through ELASTICD_CONTROL_SOCKET): the excluded node exits 6 while
the others re-form without it and without spending a restart."""

import json
import os
import signal
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import lib  # noqa: E402
from test_ctl import curl, post  # noqa: E402
from test_rdzv_c10d import FAST, free_port  # noqa: E402
from test_systemd import NotifyReceiver  # noqa: E402
from etcd_cluster import Etcd  # noqa: E402

# Lease TTL 3 s, as test_rdzv_etcd.py.
ETCD_FAST = "keep_alive_interval=1,keep_alive_max_attempt=3,last_call_timeout=0.5"

ELASTICCTL = os.environ.get("ELASTICCTL") or os.path.join(lib.SOURCE_ROOT, "build", "src",
                                                          "elasticctl")
FAKE_NVML = os.environ.get("FAKE_NVML") or os.path.join(lib.SOURCE_ROOT, "build", "tests",
                                                        "libfake_nvml.so")
TOPO = os.path.join(os.environ.get("TESTS_DIR", os.path.join(os.path.dirname(__file__), "..")),
                    "data", "topo")

# Dumps what it got into DIR, then waits (or with "exclude" asks its own
# agent to exclude this node over ELASTICD_CONTROL_SOCKET, once).
WORKER = r"""
import json, os, signal, socket, sys, time
d, mode = sys.argv[1], sys.argv[2]
f = os.path.join(d, "w_%d" % os.getpid())
env = {k: os.environ.get(k) for k in ("RANK", "WORLD_SIZE", "GROUP_WORLD_SIZE",
                                      "TORCHELASTIC_RESTART_COUNT", "ELASTICD_CONTROL_SOCKET")}
env["AGENT_PID"] = os.getppid()
with open(f + ".tmp", "w") as out:
    json.dump(env, out)
os.rename(f + ".tmp", f)
if mode == "crash":
    time.sleep(0.3)
    sys.exit(1)
if mode == "culprit":  # crashes, leaving a mark
    time.sleep(0.3)
    open(os.path.join(d, "dead_%d" % os.getpid()), "w").close()
    sys.exit(1)
if mode == "victim":  # dies of a culprit's death, as NCCL would, a bit later
    def marks():
        return {n for n in os.listdir(d) if n.startswith("dead_")}
    seen = marks()
    while not marks() - seen:
        time.sleep(0.05)
    time.sleep(0.3)
    sys.exit(2)
if mode == "exclude" and env["WORLD_SIZE"] == "3":
    signal.signal(signal.SIGTERM, signal.SIG_IGN)  # until the reply is read
    time.sleep(0.5)
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.connect(os.environ["ELASTICD_CONTROL_SOCKET"])
    s.sendall(b"POST /handler/exclude?reason=ecc%20errors HTTP/1.1\r\nHost: x\r\n"
              b"Content-Length: 0\r\nConnection: close\r\n\r\n")
    reply = b""
    while True:
        b = s.recv(4096)
        if not b:
            break
        reply += b
    open(f + ".reply", "wb").write(reply)
    sys.exit(0)
while True:
    time.sleep(1)
"""


def events(path, name):
    if not os.path.exists(path):
        return []
    with open(path) as f:
        evs = [json.loads(line) for line in f]
    return [ev["metadata"] for ev in evs if ev.get("name") == name]


def quarantine_flags(n, f, cooldown, *extra):
    """--quarantine F/60 and a cooldown (seconds) for agent n, on a host of its
    own (127.0.0.<n+1>): a quarantine is a host's."""
    return ("--quarantine", "%d/60" % f, "--quarantine-cooldown", str(cooldown), *extra,
            "--local-addr", "127.0.0.%d" % (n + 1))


class HealthBase(lib.ElasticdTestCase):
    """Agents of one job on the backend this class names."""

    backend = "c10d"

    def setUp(self):
        super().setUp()
        self.etcd = Etcd(1) if self.backend == "etcd" else None
        self.port = free_port()
        self.dumps = self.path("dumps")
        os.makedirs(self.dumps)
        self.script = self.write_py("worker.py", WORKER)

    def agent(self, n, mode="wait", nnodes="2:3", extra=()):
        sock = self.path("ctl%d.sock" % n)
        ev = self.path("events%d.jsonl" % n)
        endpoint = self.etcd.endpoints if self.etcd else "127.0.0.1:%d" % self.port
        a = self.start("--nnodes", nnodes, "--nproc-per-node", "1", "--rdzv-backend",
                       self.backend, "--rdzv-endpoint", endpoint, "--rdzv-id", "job",
                       "--rdzv-conf", ETCD_FAST if self.etcd else FAST,
                       "--monitor-interval", "0.1", "--max-restarts", "3",
                       "--event-log-file", ev, "--control-socket", sock, *extra,
                       self.script, self.dumps, mode)
        a.sock, a.events = sock, ev
        return a

    def tearDown(self):
        super().tearDown()
        if self.etcd:
            self.etcd.stop()

    def stop_all(self, agents):
        for x in reversed(agents):
            x.signal(signal.SIGTERM)
            self.assertRc(x.wait(30), 128 + signal.SIGTERM)

    def assert_survivors(self, agents, world):
        two = self.wait_world(world, world, timeout=30)
        self.assertEqual({d["TORCHELASTIC_RESTART_COUNT"] for d in two}, {"0"}, two)
        time.sleep(1.5)
        for x in agents:
            self.assertIsNone(x.proc.poll(), "a survivor exited: %s" % x.stderr_text())
            st = curl(x.sock, "/handler/status").json()
            self.assertEqual(st["restart_count"], 0, st)
            self.assertEqual(st["group_world_size"], world, st)
            self.assertEqual(st["worker_state"], "HEALTHY", st)
        return two

    def quarantine_one_of_three(self, q):
        """Agents 0 and 1 run; agent 2's workers crash until it is
        quarantined. q(n): agent n's flags. Returns (the two, agent 2)."""
        a = [self.agent(0, extra=q(0))]
        time.sleep(0.5)  # the first one hosts the c10d store
        a += [self.agent(1, extra=q(1))]
        bad = self.agent(2, "crash", extra=q(2))
        self.assertTrue(lib.wait_until(
            lambda: events(bad.events, "elasticd.node.quarantined"), 40), bad.stderr_text())
        return a, bad

    def failing_check_keeps_a_node_out(self):
        facts = self.path("facts")
        good = ("--health-check", "env | grep ^ELASTICD_ > %s.$$" % facts,
                "--health-check", "true")
        a = [self.agent(0, extra=good)]
        time.sleep(0.5)  # the first one hosts the c10d store
        bad = self.agent(2, extra=("--health-check",
                                   "echo checking; echo 'GPU 3 fell off the bus' >&2; exit 1"))
        a.append(self.agent(1, extra=good))
        res = bad.wait(30)
        self.assertRc(res, 6)
        self.assertIn("health check command:echo checking; echo 'GPU 3 fell off the bus' >&2; "
                      "exit 1 failed (exit status 1): checking\\nGPU 3 fell off the bus", res.err)
        self.assertIn("no --health-retries left; leaving the job (exit status 6)", res.err)
        ev = events(bad.events, "elasticd.node.unhealthy")
        self.assertEqual(len(ev), 1, ev)
        self.assertEqual(ev[0]["result"], "exit status 1")
        self.assertEqual(ev[0]["output"], "checking\\nGPU 3 fell off the bus")
        self.assertEqual(ev[0]["action"], "exit")
        self.assertFalse(ev[0]["timed_out"])
        # It never joined: the two others run the job at 2 nodes.
        two = self.assert_survivors(a, 2)
        self.assertNotIn(bad.pid, {d["AGENT_PID"] for d in two})
        # The checks ran with the node's facts.
        fact_files = [n for n in os.listdir(self.tmp) if n.startswith("facts.")]
        self.assertGreaterEqual(len(fact_files), 2, fact_files)
        env = dict(line.split("=", 1) for line in lib.read_text(
            self.path(fact_files[0])).splitlines())
        self.assertEqual(env["ELASTICD_RUN_ID"], "job")
        self.assertEqual(env["ELASTICD_LOCAL_WORLD_SIZE"], "1")
        self.assertEqual(env["ELASTICD_RESTART_COUNT"], "0")
        self.assertIn("ELASTICD_NODE", env)
        self.assertIn("ELASTICD_GPU_BUS_IDS", env)
        self.assertTrue(env["ELASTICD_CONTROL_SOCKET"].endswith(".sock"), env)
        st = curl(a[0].sock, "/handler/status").json()
        self.assertEqual(st["health"]["state"], "healthy", st)
        self.assertEqual(st["health"]["failures"], 0, st)
        m = curl(a[0].sock, "/metrics").body
        self.assertIn('elasticd_health_gates_total{result="passed"} 1', m)
        self.stop_all(a)

    def three(self, mode="wait"):
        a = [self.agent(0)]
        time.sleep(0.5)  # the first one hosts the c10d store: it stays
        a += [self.agent(1), self.agent(2, mode)]
        self.wait_world(3, 3)
        return a

    def exclude_by_operator(self):
        a = self.three()
        bad = a[2]
        r = post(bad.sock, "/handler/exclude?reason=xid%2079")
        self.assertEqual(r.status, 200, r.body)
        res = bad.wait(30)
        self.assertRc(res, 6)
        self.assertIn("excluded over the control socket: xid 79", res.err)
        self.assertIn("exclude: leaving the rendezvous", res.err)
        ev = events(bad.events, "elasticd.node.excluded")
        self.assertEqual(ev[0]["reason"], "xid 79", ev)
        self.assertEqual(ev[0]["phase"], "running", ev)
        two = self.assert_survivors(a[:2], 2)
        self.assertNotIn(bad.pid, {d["AGENT_PID"] for d in two})
        self.stop_all(a[:2])


    def quarantine_with_a_spare(self):
        def q(n):
            return quarantine_flags(n, 2, 4)
        # Node 2's workers fail twice: quarantined; a spare takes its place.
        a, bad = self.quarantine_one_of_three(q)
        spare = self.agent(3, extra=q(3))
        q_ev = events(bad.events, "elasticd.node.quarantined")[0]
        self.assertEqual(q_ev["failures"], 2, q_ev)
        self.assertEqual(q_ev["cooldown_s"], 4, q_ev)
        self.assertEqual(q_ev["quarantines"], 1, q_ev)
        st = curl(bad.sock, "/handler/status").json()
        self.assertEqual(st["phase"], "quarantined", st)
        self.assertTrue(0 < st["quarantine"]["remaining_s"] <= 4, st)
        got = lib.wait_until(lambda: self.dumps_where(
            lambda d: d["AGENT_PID"] == spare.pid and d["WORLD_SIZE"] == "3") or None, 40)
        self.assertTrue(got, "the spare never joined: %s" % spare.stderr_text())
        self.assertIn("quarantined: 2 failed attempts of this node within 60 s", bad.stderr_text())
        # Recorded in the rendezvous state: every agent lists it, and
        # another agent of that host (a restarted one) is not admitted.
        got = curl(a[1].sock, "/handler/nodes").json()["quarantined"]
        self.assertEqual(len(got), 1, got)
        self.assertEqual(got[0]["host"], "127.0.0.3", got)
        self.assertEqual(got[0]["count"], 1, got)
        self.assertTrue(got[0]["active"], got)
        self.assertTrue(0 < got[0]["remaining_s"] <= 4, got)
        twin = self.agent(4, extra=q(2))
        time.sleep(1.5)
        self.assertEqual(self.dumps_where(lambda d: d["AGENT_PID"] == twin.pid), [])
        self.assertEqual(curl(twin.sock, "/handler/status").json()["phase"], "rendezvous")
        nodes = curl(a[1].sock, "/handler/nodes").json()
        listed = [m["node"] for k in ("participants", "wait_list", "spares")
                  for m in nodes[k]]
        self.assertFalse([n for n in listed if n.startswith("127.0.0.3_%d_" % twin.pid)],
                         nodes)
        twin.signal(signal.SIGTERM)
        self.assertRc(twin.wait(30), 128 + signal.SIGTERM)
        # The cooldown ends: readmitted, it rejoins (as a spare now: 3 is the most).
        self.assertTrue(lib.wait_until(
            lambda: events(bad.events, "elasticd.node.readmitted"), 30), bad.stderr_text())
        r_ev = events(bad.events, "elasticd.node.readmitted")[0]
        # Back in (as a spare): the entry is over; its count stays.
        self.assertTrue(lib.wait_until(lambda: [
            (x["host"], x["count"], x["active"]) for x in curl(
                a[1].sock, "/handler/nodes").json()["quarantined"]] == [
                    ("127.0.0.3", 1, False)], 20))
        self.assertEqual(r_ev["by"], "cooldown", r_ev)
        self.assertGreaterEqual(r_ev["after_s"], 3.9, r_ev)
        for x in a[:2] + [spare]:
            self.assertIsNone(x.proc.poll(), "an agent exited: %s" % x.stderr_text())
            st = curl(x.sock, "/handler/status").json()
            self.assertEqual(st["restart_count"], 0, st)  # re-forms only: nothing spent
        m = curl(bad.sock, "/metrics").body
        self.assertIn("elasticd_quarantines_total 1", m)
        self.assertIn("elasticd_readmissions_total 1", m)
        bad.signal(signal.SIGTERM)
        self.assertRc(bad.wait(30), 128 + signal.SIGTERM)
        self.stop_all(a[:2] + [spare])



class HealthTest(HealthBase):

    def test_quarantine_a_spare_takes_its_place_then_readmitted(self):
        self.quarantine_with_a_spare()

    def test_quarantine_readmit_verb_and_doubling(self):
        sock, ev = self.path("q.sock"), self.path("ev.jsonl")
        fail = self.write_sh("fail.sh", "exit 1\n")
        a = self.start("--standalone", "--nproc-per-node", "1", "--no-python",
                       "--max-restarts", "5", "--quarantine", "1/60",
                       "--quarantine-cooldown", "60", "--control-socket", sock,
                       "--event-log-file", ev, fail)
        self.assertTrue(lib.wait_until(
            lambda: len(events(ev, "elasticd.node.quarantined")) == 1, 30), a.stderr_text())
        st = curl(sock, "/handler/status").json()
        self.assertEqual(st["phase"], "quarantined", st)
        self.assertEqual(st["quarantine"]["cooldown_s"], 60, st)
        r = post(sock, "/handler/readmit?node=elsewhere")
        self.assertEqual(r.status, 404, r.body)
        self.assertIn("unknown node 'elsewhere'", r.body)
        time.sleep(0.5)  # its leave of the rendezvous is over
        r = post(sock, "/handler/readmit")
        self.assertEqual(r.status, 200, r.body)
        # It rejoins, fails again: quarantined again, for twice as long.
        self.assertTrue(lib.wait_until(
            lambda: len(events(ev, "elasticd.node.quarantined")) == 2, 30), a.stderr_text())
        self.assertEqual(events(ev, "elasticd.node.readmitted")[0]["by"], "readmit")
        self.assertEqual(events(ev, "elasticd.node.quarantined")[1]["cooldown_s"], 120)
        st = curl(sock, "/handler/status").json()
        self.assertEqual(st["restart_count"], 0, st)  # a quarantine spends no restart
        r = post(sock, "/handler/restart")
        self.assertEqual(r.status, 500, r.body)
        self.assertIn("quarantined", r.body)
        a.signal(signal.SIGTERM)
        self.assertRc(a.wait(30), 128 + signal.SIGTERM)

    def test_quarantine_action_exit(self):
        fail = self.write_sh("fail.sh", "exit 1\n")
        res = self.run_elasticd("--standalone", "--nproc-per-node", "1", "--no-python",
                                "--max-restarts", "5", "--quarantine", "2/60",
                                "--quarantine-action", "exit", fail)
        self.assertRc(res, 6)
        self.assertIn("quarantined (--quarantine-action exit): leaving the job (exit status 6)",
                      res.err)
        self.assertEqual(res.err.count("Worker group FAILED"), 1, res.err)

    def test_failing_check_keeps_a_node_out_of_a_2_3_job(self):
        self.failing_check_keeps_a_node_out()

    def test_exclude_by_operator_re_forms_without_a_restart(self):
        self.exclude_by_operator()

    # -- the health gate -------------------------------------------------------

    def test_check_that_times_out_is_killed_and_retried(self):
        sock = self.path("s.sock")
        rx = NotifyReceiver()
        self.addCleanup(rx.close)
        t0 = time.monotonic()
        a = self.start("--standalone", "--nproc-per-node", "1", "--no-python",
                       "--control-socket", sock, "--health-check",
                       "echo started; exec sleep 60", "--health-timeout", "1",
                       "--health-retries", "1", "--health-retry-interval", "1",
                       "/bin/true", env=self.env(NOTIFY_SOCKET=rx.address))
        self.assertTrue(lib.wait_until(lambda: os.path.exists(sock), 20))
        st = curl(sock, "/handler/status").json()
        self.assertEqual(st["phase"], "health-check", st)
        self.assertEqual(st["node_state"], "INIT", st)
        self.assertIn(st["health"]["state"], ("checking", "unhealthy"), st)
        self.assertEqual(st["health"]["checks"], ["command:echo started; exec sleep 60"], st)
        self.assertTrue(lib.wait_until(
            lambda: curl(sock, "/handler/status").json()["health"]["failures"] == 1, 20))
        st = curl(sock, "/handler/status").json()
        self.assertEqual(st["health"]["last_failure"]["result"], "timed out after 1 s", st)
        self.assertEqual(st["health"]["last_failure"]["output"], "started", st)
        m = curl(sock, "/metrics").body
        self.assertIn('elasticd_health_check_failures_total{how="timeout"} 1', m)
        self.assertIn('elasticd_health_gates_total{result="failed"} 1', m)
        res = a.wait(30)
        self.assertRc(res, 6)
        # Two tries of about 1 s each and a 1 s wait between them.
        self.assertGreaterEqual(time.monotonic() - t0, 2.9)
        self.assertEqual(res.err.count("still runs after 1 s: killing it"), 2, res.err)
        self.assertIn("trying again in 1.0 s (1 of --health-retries 1)", res.err)
        self.assertNoLeftovers()
        # systemd hears why (systemctl status shows the last STATUS=).
        status = [p for p in rx.payloads() if "STATUS=" in p]
        self.assertTrue(any("STATUS=checking node health: 1 check" in p for p in status), status)
        self.assertTrue(any("STATUS=unhealthy: health check command:echo started; exec sleep 60: "
                            "timed out after 1 s; trying again in 1 s" in p for p in status),
                        status)
        self.assertTrue(any("STOPPING=1" in p and "timed out after 1 s; exiting with status 6" in p
                            for p in status), status)

    def test_check_dies_with_a_sigkilled_agent(self):
        # A check's own children (a GPU burn under a wrapper) are no orphans
        # either: SIGKILL the agent mid-check, in both guards.
        # (checks do not inherit ELASTICD_* variables, the test marker
        # among them: a unique sleep length marks the check's processes)
        for n, guard in enumerate(("cgroup", "sentinel")):
            started = self.path("started-%s" % guard)
            tag = "60.%d%d" % (os.getpid(), n)
            a = self.start("--standalone", "--orphan-guard", guard, "--no-python",
                           "--health-check", "touch %s; sleep %s & sleep %s" % (started, tag, tag),
                           "/bin/true")
            self.assertTrue(lib.wait_until(lambda: os.path.exists(started), 20), guard)

            def left():
                return [p for p in lib.all_pids()
                        if [x for x in lib.proc_cmdline(p) if x][-1:] == [tag.encode()]
                        and lib.pid_alive(p)]
            self.assertTrue(lib.wait_until(lambda: len(left()) == 2, 10), guard)
            a.signal(signal.SIGKILL)
            a.wait(30)
            survivors = left() if not lib.wait_until(lambda: not left(), 10) else []
            for p in survivors:
                lib.kill_quietly(p)
            self.assertEqual(survivors, [], "%s: the check's sleeps outlived the agent" % guard)

    def test_check_passes_on_retry_and_before_every_join(self):
        runs, mark = self.path("runs"), self.path("mark")
        check = "echo x >> %s; test -e %s || { touch %s; exit 1; }" % (runs, mark, mark)
        fail_once = self.write_sh("w.sh", "test -e %s.w && exit 0; touch %s.w; exit 3\n"
                                  % (mark, mark))
        res = self.run_elasticd("--standalone", "--nproc-per-node", "1", "--no-python",
                                "--max-restarts", "1", "--health-check", check,
                                "--health-retries", "2", "--health-retry-interval", "0.2",
                                fail_once, timeout=60)
        self.assertRc(res, 0)
        # Failed once, passed, then ran again before the rejoin after the
        # worker's failure: three runs.
        self.assertEqual(lib.read_text(runs).count("x"), 3, res.err)
        self.assertIn("trying again in 0.2 s (1 of --health-retries 2)", res.err)
        self.assertEqual(res.err.count("health: 1 check passed"), 2, res.err)

    def test_builtin_checks_read_the_fixture_root(self):
        root = self.path("root")
        ports = os.path.join(root, "sys/class/infiniband/mlx5_0/ports/1")
        os.makedirs(ports)
        os.makedirs(os.path.join(root, "sys/class/net/eth0"))
        with open(os.path.join(ports, "state"), "w") as f:
            f.write("1: DOWN\n")
        with open(os.path.join(root, "sys/class/net/eth0/operstate"), "w") as f:
            f.write("up\n")
        args = ("--standalone", "--nproc-per-node", "1", "--no-python",
                "--health-root", root, "--health-nics", "ib,eth0",
                "--health-writable", self.tmp, "--health-free-space", self.tmp + ":1K",
                "--health-gpus", "2", "--topology-xml", os.path.join(TOPO, "host-2node.xml"))
        res = self.run_elasticd(*args, "/bin/true")
        self.assertRc(res, 6)
        self.assertIn("health check nics failed (exit status 1): ib mlx5_0/ports/1: 1: DOWN; "
                      "eth0: up", res.err)
        self.assertNotIn("health check writable", res.err)
        self.assertNotIn("health check gpus", res.err)
        with open(os.path.join(ports, "state"), "w") as f:
            f.write("4: ACTIVE\n")
        res = self.run_elasticd(*args, "/bin/true")
        self.assertRc(res, 0)
        self.assertIn("health: 4 checks passed", res.err)
        res = self.run_elasticd(*args[:-4], "--health-gpus", "3", *args[-2:], "/bin/true")
        self.assertRc(res, 6)
        self.assertIn("health check gpus failed (exit status 1): 2 GPUs found, 3 expected",
                      res.err)
        # Too few GPUs, a full disk, a directory that is not there.
        res = self.run_elasticd("--standalone", "--nproc-per-node", "1", "--no-python",
                                "--health-gpus", "1", "--topology-xml",
                                os.path.join(TOPO, "gpuless.xml"),
                                "--health-free-space", self.tmp + ":1000000T",
                                "--health-writable", self.path("none"), "/bin/true")
        self.assertRc(res, 6)
        self.assertIn("health check gpus failed (exit status 1): 0 GPUs found, 1 expected",
                      res.err)
        self.assertIn("health check free-space:%s failed" % self.tmp, res.err)
        self.assertIn("health check writable:%s failed" % self.path("none"), res.err)

    def test_bad_health_settings_are_usage_errors(self):
        for args, text in [
                (("--health-free-space", "/x"), "--health-free-space: invalid value '/x'"),
                (("--health-free-space", "/x:lots"), "'lots' is not a size"),
                (("--health-timeout", "0"), "--health-timeout: invalid value '0'"),
                (("--health-nics", "eth0,eth0"), "'eth0' is given twice"),
                (("--health-gpus", "0"), "--health-gpus: invalid value '0'"),
                (("--health-writable", "rel"), "the path must be absolute")]:
            res = self.run_elasticd("--standalone", *args, "--no-python", "/bin/true")
            self.assertRc(res, 2)
            self.assertIn(text, res.err)

    def test_config_file_repeats_health_check(self):
        conf = self.write_script("e.conf", "health-check = true\n"
                                 "health-check = \"echo second; exit 4\"\n")
        res = self.run_elasticd("--config", conf, "--standalone", "--no-python", "/bin/true")
        self.assertRc(res, 6)
        self.assertIn("health check command:echo second; exit 4 failed (exit status 4)",
                      res.err)

    # -- the GPU memory wait before a respawn (fake NVML) -------------------------

    def gpu_run(self, wait, used, pids="", lib_path=None, release_after=None):
        """A job whose first attempt fails (exit 3, after writing its pid to
        the fake NVML's process list) and whose second succeeds, with
        --gpu-memory-wait. release_after: seconds after the first poll at
        which the test frees the GPUs (used 100 MiB, no processes)."""
        used_f, pids_f, calls = self.path("used"), self.path("pids"), self.path("calls")
        starts = self.path("starts")
        with open(used_f, "w") as f:
            f.write(used)
        with open(pids_f, "w") as f:
            f.write(pids)
        w = self.write_sh("w.sh", 'date +%%s.%%N >> %s\n'
                          'if [ ! -e %s.done ]; then touch %s.done; printf $$ > %s; exit 3; fi\n'
                          % (starts, starts, starts, pids_f if pids == "self" else "/dev/null"))
        if pids == "self":
            open(pids_f, "w").close()
        env = self.env(FAKE_NVML_USED=used_f, FAKE_NVML_PIDS=pids_f, FAKE_NVML_CALLS=calls)
        ev = self.path("events.jsonl")
        a = self.start("--standalone", "--nproc-per-node", "1", "--no-python",
                       "--max-restarts", "1", "--event-log-file", ev,
                       "--gpu-memory-wait", str(wait), "--gpu-memory-threshold", "1G",
                       "--nvml-library", lib_path or FAKE_NVML, w, env=env)
        released = None
        if release_after is not None:
            self.assertTrue(lib.wait_until(lambda: os.path.exists(calls), 30), a.stderr_text())
            time.sleep(release_after)
            with open(used_f + ".tmp", "w") as f:
                f.write("100,100")
            os.rename(used_f + ".tmp", used_f)
            open(pids_f, "w").close()
            released = time.time()
        res = a.wait(60)
        t = [float(x) for x in lib.read_text(starts).split()]
        return res, t, released, events(ev, "elasticd.gpu.memory_wait"), calls

    def test_gpu_memory_held_then_released(self):
        res, starts, released, ev, calls = self.gpu_run(30, "40000,100", release_after=1.5)
        self.assertRc(res, 0)
        self.assertEqual(len(starts), 2, starts)
        # The second attempt started only once the memory was released.
        self.assertGreaterEqual(starts[1], released - 0.05)
        self.assertRegex(res.err, r"GPU memory: 2 GPUs released after \d+\.\d s")
        self.assertEqual([e["result"] for e in ev], ["released"], ev)
        self.assertGreaterEqual(ev[0]["waited_s"], 1.4)
        polls = lib.read_text(calls).splitlines()
        self.assertIn("0 40000", polls)
        self.assertIn("0 100", polls)
        self.assertEqual(polls[0], "0 40000")  # held at the first look

    def test_gpu_memory_processes_of_the_last_attempt(self):
        # Memory under the threshold, but the failed worker's pid still on
        # GPU 0: held until it leaves.
        res, starts, released, ev, _ = self.gpu_run(30, "100", pids="self", release_after=1.0)
        self.assertRc(res, 0)
        self.assertGreaterEqual(starts[1], released - 0.05)
        self.assertEqual(ev[0]["result"], "released", ev)
        self.assertEqual(ev[0]["processes_watched"], 1, ev)

    def test_gpu_memory_still_held_at_the_deadline(self):
        res, starts, _, ev, _ = self.gpu_run(1, "40000")
        self.assertRc(res, 0)
        self.assertIn("GPU memory still held after --gpu-memory-wait 1 s: GPU 0 still holds "
                      "40000 MiB (0 processes) after 1.", res.err)
        self.assertIn("starting the new attempt anyway", res.err)
        self.assertGreaterEqual(starts[1] - starts[0], 0.9)
        self.assertEqual(ev[0]["result"], "timeout", ev)

    def test_gpu_memory_without_nvml(self):
        res, starts, _, ev, _ = self.gpu_run(30, "40000", lib_path=self.path("no-libnvidia-ml.so.1"))
        self.assertRc(res, 0)
        self.assertIn("GPU memory: not waiting: cannot load %s" % self.path("no-libnvidia-ml.so.1"),
                      res.err)
        self.assertEqual(ev[0]["result"], "unavailable", ev)
        self.assertLess(starts[1] - starts[0], 10)

    # -- exclusion ---------------------------------------------------------------

    def test_exclude_from_a_worker(self):
        a = self.three("exclude")
        bad = a[2]
        res = bad.wait(30)
        self.assertRc(res, 6)
        replies = [n for n in os.listdir(self.dumps) if n.endswith(".reply")]
        self.assertEqual(len(replies), 1, replies)
        reply = lib.read_text(os.path.join(self.dumps, replies[0]))
        self.assertIn("200", reply.splitlines()[0])
        self.assertIn("excluded over the control socket: ecc errors", res.err)
        self.assertEqual({d["ELASTICD_CONTROL_SOCKET"] for d in self.dumps_where(
            lambda d: d["AGENT_PID"] == bad.pid)}, {bad.sock})
        self.assert_survivors(a[:2], 2)
        self.stop_all(a[:2])

    def test_exclude_while_waiting_with_elasticctl(self):
        a = self.agent(0, nnodes="2")
        self.assertTrue(lib.wait_until(lambda: os.path.exists(a.sock), 20))
        p = subprocess.run([ELASTICCTL, "-s", a.sock, "exclude", "reason=bad disk"],
                           capture_output=True, text=True, timeout=30, env=self.env())
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertIn("excluding this node", p.stdout)
        res = a.wait(20)
        self.assertRc(res, 6)
        self.assertIn("excluded over the control socket: bad disk: no worker group runs; "
                      "leaving the job", res.err)
        self.assertEqual(events(a.events, "elasticd.node.excluded")[0]["phase"], "rendezvous")


class EtcdHealthTest(HealthBase):
    """The same on the etcd backend (a real etcd member)."""

    backend = "etcd"

    def test_quarantine_a_spare_takes_its_place_then_readmitted(self):
        self.quarantine_with_a_spare()

    def test_failing_check_keeps_a_node_out_of_a_2_3_job(self):
        self.failing_check_keeps_a_node_out()

    def test_exclude_by_operator_re_forms_without_a_restart(self):
        self.exclude_by_operator()


if __name__ == "__main__":
    lib.main()
