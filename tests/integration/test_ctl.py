#!/usr/bin/python3
"""The control plane (man elasticd-ctl(7)): torch 2.x's WorkerServer protocol
on a Unix socket, driven with `curl --unix-socket` against the real binary.
Every route, handler and status code; permissions (another uid is refused:
curl run as nobody with setpriv); stale and live sockets; limits (oversized
requests, connections, file descriptors); the proxy to the workers' own
servers and the dump_traceback fan-out (tests/ctl_worker.py serves the
protocol on TORCH_WORKER_SERVER_SOCKET); event streams and clients that
disconnect, stall or flood while the agent keeps supervising."""

import json
import os
import re
import signal
import socket
import stat
import subprocess
import sys
import threading
import time
import uuid

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import lib  # noqa: E402

CTL_WORKER = os.path.join(lib.SOURCE_ROOT, "tests", "ctl_worker.py")
HANDLERS = ["ping", "status", "events", "logs", "nodes", "metrics", "dump_traceback", "restart",
            "drain", "exclude", "readmit", "stop", "signal", "loglevel"]
STATUS_KEYS = ["run_id", "node", "hostname", "pid", "version", "role", "rdzv_backend",
               "node_state", "round", "group_rank", "group_world_size", "world_size",
               "local_world_size", "master_addr", "master_port", "worker_state", "restart_count",
               "max_restarts", "remaining_restarts", "next_attempt_in_s", "restarts_in_window",
               "attempts_without_progress", "phase", "drain", "health", "quarantine", "root_cause",
               "quarantine_count", "excluded", "uptime_s",
               "run_dir", "degraded", "orphan_guard", "console_dropped_bytes", "orphan_cgroup",
               "sentinel_pid", "sentinel_respawns", "hang_rules", "hang_watch", "hang", "hang_stacks", "workers", "control_socket"]
WORKER_KEYS = ["local_rank", "global_rank", "role_rank", "pid", "state", "exitcode",
               "exit_status", "signal", "start_time", "exit_time", "gpu", "numa_nodes", "cpus",
               "mems", "mode", "stdout_log", "stderr_log", "error_file", "worker_server_socket",
               "hang"]
NOBODY = 65534
# One metric sample of the Prometheus text format 0.0.4.
SAMPLE = re.compile(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{([a-zA-Z_][a-zA-Z0-9_]*="(\\.|[^"\\])*",?)*\})?'
                    r' (-?[0-9.]+(e[+-]?[0-9]+)?|NaN|[+-]Inf)$')


class Reply:
    def __init__(self, rc, raw):
        self.rc = rc
        self.status = None
        self.headers = {}
        self.body = ""
        while raw.startswith(b"HTTP/"):
            head, _, raw = raw.partition(b"\r\n\r\n")
            lines = head.decode("latin-1").split("\r\n")
            self.status = int(lines[0].split()[1])
            self.headers = {}
            for line in lines[1:]:
                k, _, v = line.partition(":")
                self.headers[k.strip().lower()] = v.strip()
            if self.status != 100:
                break
        self.body = raw.decode("utf-8", "replace")

    def json(self):
        return json.loads(self.body)

    def __repr__(self):
        return "<curl rc=%r status=%r headers=%r body=%r>" % (
            self.rc, self.status, self.headers, self.body[:2000])


def curl(sock, path, method=None, data=None, data_file=None, headers=(), user=None, group=None,
         timeout=20, http10=False):
    """curl --unix-socket; user/group: run it with that uid/gid (no supplementary groups)."""
    argv = ["curl", "-sS", "-i", "--max-time", str(timeout), "--unix-socket", sock]
    if http10:
        argv.append("--http1.0")
    if method:
        argv += ["-X", method]
    if data is not None:
        argv += ["--data-binary", data]
    if data_file is not None:
        argv += ["--data-binary", "@" + data_file]
    for h in headers:
        argv += ["-H", h]
    argv.append("http://localhost" + path)
    if user is not None:
        argv = ["setpriv", "--reuid=%d" % user, "--regid=%d" % (user if group is None else group),
                "--clear-groups"] + argv
    p = subprocess.run(argv, capture_output=True, timeout=timeout + 10)
    return Reply(p.returncode, p.stdout)


def post(sock, path, **kw):
    return curl(sock, path, method="POST", **kw)


def connect(sock, timeout=10):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(timeout)
    s.connect(sock)
    return s


def read_reply(s):
    """One HTTP/1.1 reply with Content-Length from an open socket: (status, body)."""
    buf = b""
    while b"\r\n\r\n" not in buf:
        chunk = s.recv(65536)
        if not chunk:
            raise ConnectionError("closed: %r" % buf)
        buf += chunk
    head, _, body = buf.partition(b"\r\n\r\n")
    m = re.search(rb"(?i)content-length: *(\d+)", head)
    n = int(m.group(1)) if m else 0
    while len(body) < n:
        chunk = s.recv(65536)
        if not chunk:
            raise ConnectionError("closed in body")
        body += chunk
    return int(head.split()[1]), body[:n]


def get_keepalive(s, path):
    s.sendall(b"GET " + path.encode() + b" HTTP/1.1\r\nHost: localhost\r\n\r\n")
    return read_reply(s)


def metrics(sock):
    """{'name{labels}': value} of GET /metrics."""
    r = curl(sock, "/metrics")
    out = {}
    for line in r.body.splitlines():
        if line and not line.startswith("#"):
            k, _, v = line.rpartition(" ")
            out[k] = float(v)
    return out


class CtlTest(lib.ElasticdTestCase):

    # -- helpers --

    def start_agent(self, *args, nproc=2, sock=None, worker_env=None, run_id=None, env=None,
                    wait=True, **kw):
        """elasticd --standalone with tests/ctl_worker.py workers; returns (agent, socket)."""
        self.wdir = self.path("w")
        os.makedirs(self.wdir, exist_ok=True)
        for name in os.listdir(self.wdir):  # a previous agent's workers
            os.unlink(os.path.join(self.wdir, name))
        sock = sock or self.path("c.sock")
        e = env or self.env(CTL_WORKER_DIR=self.wdir, **(worker_env or {}))
        self.run_id = run_id or "ctl-" + uuid.uuid4().hex[:8]
        argv = ["--standalone", "--rdzv-id", self.run_id, "--nproc-per-node", nproc,
                "--log-dir", self.path("logs")]
        if sock != "default":
            argv += ["--control-socket", sock]
        a = self.start(*(argv + list(args) + [CTL_WORKER]), env=e, **kw)
        if wait:
            self.pids = self.worker_pids(nproc)
        return a, sock

    def worker_pids(self, n, old=None, timeout=20):
        """[(pid, worker socket path)] from the workers' pid files, once all n
        exist (and differ from old)."""
        def get():
            out = []
            for r in range(n):
                try:
                    with open(os.path.join(self.wdir, "rank%d.pid" % r)) as f:
                        pid, _, path = f.read().strip().partition(" ")
                except OSError:
                    return None
                out.append((int(pid), path))
            if old and any(o[0] == p[0] for o, p in zip(old, out)):
                return None
            return out
        got = lib.wait_until(get, timeout)
        self.assertIsNotNone(got, "workers did not start")
        return got

    def assertStatus(self, reply, status, body=None, ctype=None):
        self.assertEqual(reply.status, status, reply)
        if body is not None:
            self.assertEqual(reply.body, body, reply)
        if ctype is not None:
            self.assertEqual(reply.headers.get("content-type"), ctype, reply)

    def stop(self, a, sock):
        self.assertStatus(post(sock, "/handler/stop"), 200)
        res = a.wait(30)
        self.assertRc(res, 128 + signal.SIGTERM)
        return res

    # -- the protocol --

    def test_index_handler_list_and_routes(self):
        a, sock = self.start_agent()
        r = curl(sock, "/")
        self.assertStatus(r, 200, ctype="text/html")
        self.assertIn("<h1>elasticd</h1>", r.body)
        self.assertIn('<a href="/handler/">', r.body)
        r = curl(sock, "/handler/")
        self.assertStatus(r, 200, ctype="application/json")
        self.assertEqual(json.loads(r.body), HANDLERS)
        self.assertNotIn(" ", r.body)  # compact, as torch's
        # Methods and paths nothing serves.
        r = post(sock, "/")
        self.assertStatus(r, 405)
        self.assertEqual(r.headers.get("allow"), "GET")
        self.assertStatus(post(sock, "/handler/"), 405)
        self.assertStatus(curl(sock, "/nope"), 404, "Not found: /nope")
        self.assertStatus(curl(sock, "/handler"), 404)
        self.assertStatus(curl(sock, "/handler/ping", method="PUT"), 501)
        self.assertStatus(curl(sock, "/handler/ping", method="DELETE"), 501)
        # No HEAD: libevent 2.1 would send a body with the headers.
        s = connect(sock)
        s.sendall(b"HEAD /handler/ping HTTP/1.1\r\nHost: x\r\n\r\n")
        self.assertTrue(s.recv(4096).startswith(b"HTTP/1.1 501 "))
        s.close()
        # HTTP/1.0 without Host works too.
        self.assertStatus(curl(sock, "/handler/ping", http10=True), 200, "pong")
        self.stop(a, sock)

    def test_ping(self):
        a, sock = self.start_agent(nproc=1)
        self.assertStatus(post(sock, "/handler/ping"), 200, "pong", "text/plain; charset=utf-8")
        self.assertStatus(curl(sock, "/handler/ping"), 200, "pong")  # read-only: GET too
        self.assertStatus(post(sock, "/handler/p%69ng"), 200, "pong")  # decoded name
        self.stop(a, sock)

    def test_unknown_handler_is_404_with_torch_words(self):
        a, sock = self.start_agent(nproc=1)
        self.assertStatus(post(sock, "/handler/nope"), 404,
                          "Handler nope not found: Failed to find handler nope")
        self.assertStatus(post(sock, "/handler/PING"), 404,
                          "Handler PING not found: Failed to find handler PING")
        self.stop(a, sock)

    def test_status(self):
        a, sock = self.start_agent("--max-restarts", "2", "-r", "3")
        r = curl(sock, "/handler/status")
        self.assertStatus(r, 200, ctype="application/json")
        st = r.json()
        self.assertEqual(list(st), STATUS_KEYS)
        self.assertEqual(st["run_id"], self.run_id)
        self.assertEqual(st["pid"], a.pid)
        self.assertRegex(st["node"], r"_%d_0$" % a.pid)
        self.assertEqual(st["node_state"], "RUNNING")
        self.assertEqual(st["worker_state"], "HEALTHY")
        self.assertEqual(st["rdzv_backend"], "c10d")
        self.assertEqual((st["round"], st["group_rank"], st["group_world_size"]), (0, 0, 1))
        self.assertEqual((st["world_size"], st["local_world_size"]), (2, 2))
        self.assertIsInstance(st["master_port"], int)
        self.assertTrue(st["master_addr"])
        self.assertEqual((st["restart_count"], st["max_restarts"], st["remaining_restarts"]),
                         (0, 2, 2))
        self.assertGreater(st["uptime_s"], 0)
        self.assertEqual(st["control_socket"], sock)
        self.assertTrue(st["run_dir"].startswith(self.path("logs")))
        self.assertIsNone(st["degraded"])
        self.assertIn(st["orphan_guard"], ("cgroup", "sentinel"))
        self.assertEqual(st["orphan_cgroup"] is not None, st["orphan_guard"] == "cgroup")
        self.assertEqual(st["console_dropped_bytes"], 0)
        self.assertGreater(st["sentinel_pid"], 0)
        self.assertEqual(st["sentinel_respawns"], 0)
        self.assertEqual(len(st["workers"]), 2)
        for i, w in enumerate(st["workers"]):
            self.assertEqual(list(w), WORKER_KEYS)
            self.assertEqual((w["local_rank"], w["global_rank"], w["role_rank"]), (i, i, i))
            self.assertEqual(w["pid"], self.pids[i][0])
            self.assertEqual(w["state"], "HEALTHY")
            self.assertIsNone(w["exitcode"])
            self.assertIsNone(w["exit_time"])
            self.assertLessEqual(abs(w["start_time"] - time.time()), 60)
            self.assertTrue(w["stdout_log"].endswith("/attempt_0/%d/stdout.log" % i))
            self.assertTrue(w["stderr_log"].endswith("/attempt_0/%d/stderr.log" % i))
            self.assertTrue(w["error_file"].endswith("/attempt_0/%d/error.json" % i))
            self.assertEqual(w["worker_server_socket"], self.path("c.workers", "rank%d.sock" % i))
            self.assertEqual(w["worker_server_socket"], self.pids[i][1])
        # A worker that exits shows its exit code.
        os.kill(self.pids[1][0], signal.SIGKILL)
        self.worker_pids(2, old=self.pids)
        st = curl(sock, "/handler/status").json()
        self.assertEqual(st["restart_count"], 1)
        self.assertEqual(st["remaining_restarts"], 1)
        self.assertTrue(st["workers"][0]["stdout_log"].endswith("/attempt_1/0/stdout.log"))
        ev = [json.loads(l) for l in curl(sock, "/handler/events").body.splitlines()]
        exited = [e["event"]["metadata"] for e in ev
                  if e["event"]["name"] == "elasticd.worker.exited"]
        self.assertIn(("SIGKILL", -9, True),
                      [(m["signal"], m["exitcode"], m["failed"]) for m in exited])
        self.stop(a, sock)

    def test_parameter_errors_are_400(self):
        a, sock = self.start_agent()
        cases = [
            ("/handler/status?x=1", "Invalid parameters - unexpected param passed in: x"),
            ("/handler/events?Follow=true",
             "Invalid parameters - unexpected param passed in: Follow "
             "(parameter names are lower-case)"),
            ("/handler/events?follow=yes",
             "Invalid value for follow valid values are true or false"),
            ("/handler/events?follow=True",
             "Invalid value for follow valid values are true or false"),
            ("/handler/events?follow", "Invalid value for follow valid values are true or false"),
            ("/handler/events?limit=0",
             "Invalid value for limit: expected an integer from 1 to 1000000000, not '0'"),
            ("/handler/events?since=-1",
             "Invalid value for since: expected an integer from 0 to 9223372036854775807, "
             "not '-1'"),
            ("/handler/logs?rank=x",
             "Invalid value for rank: expected an integer from 0 to 65535, not 'x'"),
            ("/handler/logs?rank=2",
             "Invalid value for rank: no local rank 2 (local ranks 0 to 1)"),
            ("/handler/logs?stream=both",
             "Invalid value for stream: expected stdout or stderr, not 'both'"),
            ("/handler/logs?lines=1&lines=2", "Invalid parameters - lines given more than once"),
            ("/handler/logs?lines=%zz", "Invalid parameters - bad percent-encoding in '%zz'"),
            ("/handler/signal", "Invalid parameters - missing parameter: signal"),
            ("/handler/signal?signal=SIGFOO",
             "Invalid value for signal: expected a signal name (SIGUSR1, USR1) or number, "
             "not 'SIGFOO'"),
            ("/handler/signal?signal=USR1&rank=9",
             "Invalid value for rank: no local rank 9 (local ranks 0 to 1)"),
            ("/handler/loglevel?level=verbose",
             "Invalid value for level: expected debug, info, warning or error, not 'verbose'"),
            ("/handler/ping?" + "&".join("p%d=1" % i for i in range(33)),
             "Invalid parameters - more than 32 parameters"),
        ]
        for path, reason in cases:
            with self.subTest(path=path):
                self.assertStatus(post(sock, path), 400, reason, "text/plain; charset=utf-8")
        # Form-encoded bodies are parameters too, checked the same way.
        self.assertStatus(post(sock, "/handler/logs", data="rank=x"), 400,
                          "Invalid value for rank: expected an integer from 0 to 65535, not 'x'")
        self.assertStatus(post(sock, "/handler/ping", data="a=1"), 400,
                          "Invalid parameters - unexpected param passed in: a")
        # A body of another type is not read as parameters.
        self.assertStatus(post(sock, "/handler/ping", data="{}",
                               headers=["Content-Type: application/json"]), 200, "pong")
        # Nothing happened to the job.
        st = curl(sock, "/handler/status").json()
        self.assertEqual([w["pid"] for w in st["workers"]], [p for p, _ in self.pids])
        self.stop(a, sock)

    def test_state_changing_handlers_refuse_get(self):
        a, sock = self.start_agent(nproc=1)
        for name in ("restart", "stop", "signal", "loglevel"):
            with self.subTest(handler=name):
                r = curl(sock, "/handler/%s?signal=KILL" % name)
                self.assertStatus(r, 405)
                self.assertEqual(r.headers.get("allow"), "POST")
                self.assertIn("use POST", r.body)
        self.assertEqual(curl(sock, "/handler/status").json()["workers"][0]["pid"],
                         self.pids[0][0])
        self.stop(a, sock)

    # -- events --

    def test_events(self):
        a, sock = self.start_agent("--event-ring-size", "4")
        r = curl(sock, "/handler/events")
        self.assertStatus(r, 200, ctype="application/x-ndjson")
        lines = [json.loads(l) for l in r.body.splitlines()]
        self.assertTrue(lines)
        self.assertEqual(len(lines), 4)
        seqs = [l["seq"] for l in lines]
        self.assertEqual(seqs, list(range(seqs[0], seqs[0] + len(seqs))))
        for l in lines:
            self.assertEqual(list(l), ["seq", "event"])
            self.assertIn("name", l["event"])
        last = seqs[-1]
        # since / limit.
        r = curl(sock, "/handler/events?since=%d&limit=2" % (last - 3))
        self.assertEqual([json.loads(l)["seq"] for l in r.body.splitlines()],
                         [last - 2, last - 1])
        self.assertEqual(curl(sock, "/handler/events?since=%d" % last).body, "")
        # The ring of 4 lost the first events: a reader from seq 1 is told.
        self.assertGreater(seqs[0], 2)
        r = curl(sock, "/handler/events?since=1")
        first = json.loads(r.body.splitlines()[0])
        self.assertEqual(first, {"dropped": seqs[0] - 2})
        self.stop(a, sock)

    def test_events_follow_streams_and_survives_disconnects(self):
        a, sock = self.start_agent("--max-restarts", "3")
        out = self.path("follow.out")
        held = curl(sock, "/handler/events").body.splitlines()
        last = json.loads(held[-1])["seq"]
        with open(out, "wb") as f:
            follower = subprocess.Popen(
                ["curl", "-sS", "-N", "--unix-socket", sock,
                 "http://localhost/handler/events?follow=true&since=%d" % last], stdout=f)
        self.assertTrue(lib.wait_until(lambda: metrics(sock)["elasticd_control_streams"] == 1))
        # Events stream as they happen: a worker fails and the group restarts.
        os.kill(self.pids[0][0], signal.SIGKILL)
        self.pids = self.worker_pids(2, old=self.pids)

        def names():
            with open(out) as f:
                return [json.loads(l)["event"]["name"] for l in f.read().splitlines()]
        self.assertTrue(lib.wait_until(lambda: "elasticd.worker.started" in names(), 10),
                        names())
        self.assertIn("elasticd.worker.exited", names())
        self.assertIn("elasticd.agent.restart", names())
        # The follower goes away: the agent notices, unsubscribes, carries on.
        follower.kill()
        follower.wait()
        self.assertTrue(lib.wait_until(lambda: metrics(sock)["elasticd_control_streams"] == 0,
                                       10))
        # A raw client that reads the headers and closes.
        s = connect(sock)
        s.sendall(b"GET /handler/events?follow=true HTTP/1.1\r\nHost: x\r\n\r\n")
        self.assertTrue(s.recv(100).startswith(b"HTTP/1.1 200"))
        self.assertEqual(metrics(sock)["elasticd_control_streams"], 1)
        s.close()
        self.assertTrue(lib.wait_until(lambda: metrics(sock)["elasticd_control_streams"] == 0,
                                       10))
        # Events recorded with no follower left do not break anything.
        self.assertStatus(post(sock, "/handler/restart"), 200)
        self.pids = self.worker_pids(2, old=self.pids)
        # A follower with a limit gets exactly that many and a clean end.
        r = subprocess.run(["curl", "-sS", "-N", "--max-time", "20", "--unix-socket", sock,
                            "http://localhost/handler/events?follow=true&since=0&limit=3"],
                           capture_output=True, text=True)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(len(r.stdout.splitlines()), 3)
        # A follower at exit gets the last events and the end of the stream.
        last = json.loads(curl(sock, "/handler/events").body.splitlines()[-1])["seq"]
        with open(out, "wb") as f:
            follower = subprocess.Popen(
                ["curl", "-sS", "-N", "--unix-socket", sock,
                 "http://localhost/handler/events?follow=true&since=%d" % last], stdout=f)
        self.assertTrue(lib.wait_until(lambda: metrics(sock)["elasticd_control_streams"] == 1))
        self.stop(a, sock)
        self.assertEqual(follower.wait(10), 0)
        self.assertEqual(names()[-1], "elasticd.agent.exit")

    # -- logs --

    def test_logs(self):
        a, sock = self.start_agent("-r", "3", worker_env={"CTL_WORKER_LINES": "50"})
        want = ["line %d of rank 1" % i for i in range(45, 50)]
        r = lib.wait_until(lambda: curl(sock, "/handler/logs?rank=1&lines=5"), 5)
        self.assertStatus(r, 200, "\n".join(want) + "\n", "text/plain; charset=utf-8")
        r = curl(sock, "/handler/logs")
        self.assertEqual(r.body.splitlines(), ["line %d of rank 0" % i for i in range(50)])
        self.assertStatus(curl(sock, "/handler/logs?rank=0&stream=stderr"), 200, "")
        self.assertStatus(post(sock, "/handler/logs", data="rank=1&lines=1"), 200,
                          "line 49 of rank 1\n")
        self.stop(a, sock)

    def test_logs_offset(self):
        """offset=N answers the bytes from N on, as they are; the headers say
        which file and where the answer ends, the next offset to ask for."""
        a, sock = self.start_agent("-r", "3", worker_env={"CTL_WORKER_LINES": "50"})
        text = "".join("line %d of rank 0\n" % i for i in range(50))
        r = lib.wait_until(lambda: (lambda r: r if r.body == text else None)(
            curl(sock, "/handler/logs?lines=100")), 5)
        self.assertTrue(r, "rank 0 did not write its 50 lines")
        path = r.headers["x-elasticd-log-file"]
        self.assertTrue(path.endswith("/attempt_0/0/stdout.log"), r)
        self.assertEqual(int(r.headers["x-elasticd-log-offset"]), len(text), r)
        r = curl(sock, "/handler/logs?offset=20")
        self.assertStatus(r, 200, text[20:])
        self.assertEqual(int(r.headers["x-elasticd-log-offset"]), len(text), r)
        self.assertEqual(r.headers["x-elasticd-log-file"], path)
        r = curl(sock, "/handler/logs?offset=%d" % len(text))
        self.assertStatus(r, 200, "")
        self.assertEqual(int(r.headers["x-elasticd-log-offset"]), len(text), r)
        # Past the end (a truncated file): nothing, and the size.
        r = curl(sock, "/handler/logs?offset=999999")
        self.assertStatus(r, 200, "")
        self.assertEqual(int(r.headers["x-elasticd-log-offset"]), len(text), r)
        self.assertStatus(curl(sock, "/handler/logs?offset=0&rank=1"), 200,
                          text.replace("rank 0", "rank 1"))
        self.assertStatus(curl(sock, "/handler/logs?offset=-1"), 400)
        self.assertStatus(curl(sock, "/handler/logs?offset=1&lines=2"), 400,
                          "Invalid parameters - offset and lines exclude each other")
        self.stop(a, sock)

    def test_logs_without_files_is_500(self):
        a, sock = self.start_agent(nproc=1)
        r = curl(sock, "/handler/logs")
        self.assertStatus(r, 500)
        self.assertEqual(r.body, "Handler logs failed: local_rank 0's stdout is not written to a "
                         "file (start elasticd with -r 1 or -r 3, or -t, for it)")
        self.stop(a, sock)

    # -- actions --

    def test_restart_reforms_without_spending_a_restart(self):
        a, sock = self.start_agent("--max-restarts", "1", "-r", "1",
                                   worker_env={"CTL_WORKER_LINES": "1"})
        attempt = os.path.join(self.only_run_dir(self.path("logs")), "attempt_0")
        out0 = os.path.join(attempt, "0", "stdout.log")
        self.assertTrue(lib.wait_until(lambda: "line 0" in lib.read_text(out0)))
        stale = os.path.join(attempt, "1", "error.json")
        with open(stale, "w") as f:
            f.write('{"message": "from the stopped group"}')
        r = post(sock, "/handler/restart")
        self.assertStatus(r, 200)
        self.assertIn("no restart is spent", r.body)
        self.pids = self.worker_pids(2, old=self.pids)
        # Same attempt: the logs go on after the stopped workers' lines, and
        # their error file does not pass for the new workers'.
        self.assertTrue(lib.wait_until(
            lambda: lib.read_text(out0).count("line 0 of rank 0") == 2), lib.read_text(out0))
        self.assertFalse(os.path.exists(stale))
        st = curl(sock, "/handler/status").json()
        self.assertEqual((st["restart_count"], st["remaining_restarts"]), (0, 1))
        self.assertEqual(st["worker_state"], "HEALTHY")
        self.assertEqual([w["pid"] for w in st["workers"]], [p for p, _ in self.pids])
        m = metrics(sock)
        self.assertEqual(m['elasticd_restarts_total{reason="requested"}'], 1)
        self.assertEqual(m['elasticd_restarts_total{reason="failure"}'], 0)
        self.assertEqual(m["elasticd_rendezvous_rounds_total"], 2)
        ev = [json.loads(l)["event"] for l in curl(sock, "/handler/events").body.splitlines()]
        reasons = [e["metadata"]["reason"] for e in ev if e["name"] == "elasticd.agent.restart"]
        self.assertEqual(reasons, ["requested over the control socket"])
        # The one failure restart is still there to spend.
        os.kill(self.pids[1][0], signal.SIGKILL)
        self.pids = self.worker_pids(2, old=self.pids)
        self.assertEqual(curl(sock, "/handler/status").json()["remaining_restarts"], 0)
        self.stop(a, sock)

    def test_restart_without_a_running_group_is_500(self):
        # Workers that exit at once: the agent finishes; before that, while
        # stopping, a restart is refused as a handler failure.
        a, sock = self.start_agent(nproc=1)
        self.assertStatus(post(sock, "/handler/signal?signal=STOP"), 200)
        os.kill(a.pid, signal.SIGTERM)  # the stop waits for the stopped worker
        r = lib.wait_until(lambda: post(sock, "/handler/restart") if os.path.exists(sock) else None,
                           5)
        self.assertStatus(r, 500, "Handler restart failed: the agent is stopping")
        os.kill(self.pids[0][0], signal.SIGCONT)
        self.assertRc(a.wait(30), 128 + signal.SIGTERM)

    def test_status_while_waiting_in_rendezvous(self):
        # One of two nodes: it waits in the rendezvous, no worker group yet.
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        sock = self.path("c.sock")
        a = self.start("--nnodes", "2", "--rdzv-backend", "c10d", "--rdzv-endpoint",
                       "127.0.0.1:%d" % port, "--rdzv-id", "waiting", "--control-socket", sock,
                       "--no-python", "sleep", "30")
        self.assertTrue(lib.wait_for_file(sock))
        st = curl(sock, "/handler/status").json()
        self.assertEqual(st["node_state"], "INIT")
        self.assertEqual(st["worker_state"], "INIT")
        self.assertEqual([st[k] for k in ("round", "group_rank", "group_world_size",
                                          "world_size", "master_addr", "master_port")],
                         [None] * 6)
        self.assertEqual(st["workers"], [])
        self.assertStatus(post(sock, "/handler/restart"), 500,
                          "Handler restart failed: no worker group is running (worker group "
                          "INIT, rendezvous under way)")
        self.assertStatus(post(sock, "/handler/signal?signal=USR1"), 500,
                          "Handler signal failed: no worker group was started yet")
        self.assertStatus(curl(sock, "/handler/logs"), 500,
                          "Handler logs failed: no worker group was started yet")
        self.assertStatus(post(sock, "/handler/dump_traceback"), 500,
                          "Handler dump_traceback failed: no worker is running")
        self.assertStatus(post(sock, "/ranks/0/handler/ping"), 503,
                          "local_rank 0 is not running")
        self.assertEqual(metrics(sock)['elasticd_node_state{state="INIT"}'], 1)
        # Stopped while waiting: nothing started, it leaves at once.
        self.assertStatus(post(sock, "/handler/stop"), 200)
        self.assertRc(a.wait(20), 128 + signal.SIGTERM)
        self.assertFalse(os.path.exists(sock))

    def test_stop_is_sigterm(self):
        a, sock = self.start_agent()
        r = post(sock, "/handler/stop")
        self.assertStatus(r, 200)
        self.assertIn("stopping as on SIGTERM", r.body)
        res = a.wait(30)
        self.assertRc(res, 143)
        self.assertIn("stop requested over the control socket (as SIGTERM)", res.err)
        self.assertTrue(lib.wait_dead([p for p, _ in self.pids]))
        self.assertFalse(os.path.exists(sock), "the socket is removed on exit")
        self.assertFalse(os.path.exists(self.path("c.workers")), "and the workers' directory")
        self.assertNoLeftovers()

    def test_signal(self):
        a, sock = self.start_agent()
        r = post(sock, "/handler/signal?rank=1&signal=SIGUSR1")
        self.assertStatus(r, 200, "sent SIGUSR1 to local_rank 1 (pid %d)\n" % self.pids[1][0])
        self.assertTrue(lib.wait_for_file(os.path.join(self.wdir, "usr1.1"), 5))
        self.assertFalse(os.path.exists(os.path.join(self.wdir, "usr1.0")))
        self.assertStatus(post(sock, "/handler/signal?signal=10"), 200,
                          "sent SIGUSR1 to every worker\n")
        self.assertTrue(lib.wait_for_file(os.path.join(self.wdir, "usr1.0"), 5))
        self.assertEqual(curl(sock, "/handler/status").json()["worker_state"], "HEALTHY")
        self.stop(a, sock)

    def test_loglevel(self):
        a, sock = self.start_agent(nproc=1)
        self.assertStatus(post(sock, "/handler/loglevel"), 200, "info\n")
        self.assertStatus(post(sock, "/handler/loglevel?level=debug"), 200, "debug (was info)\n")
        self.assertTrue(a.wait_stderr("log level info -> debug (control socket)", 5))
        self.assertStatus(post(sock, "/handler/loglevel?level=warning"), 200,
                          "warning (was debug)\n")
        self.assertStatus(post(sock, "/handler/loglevel"), 200, "warning\n")
        self.stop(a, sock)

    # -- metrics --

    def test_metrics(self):
        a, sock = self.start_agent("--max-restarts", "1")
        r = curl(sock, "/metrics")
        self.assertStatus(r, 200, ctype="text/plain; version=0.0.4; charset=utf-8")
        self.assertEqual(post(sock, "/handler/metrics").status, 200)
        helped, typed = set(), set()
        for line in r.body.splitlines():
            if line.startswith("# HELP "):
                helped.add(line.split()[2])
            elif line.startswith("# TYPE "):
                typed.add(line.split()[2])
            else:
                m = SAMPLE.match(line)
                self.assertTrue(m, "not a sample: %r" % line)
                name = re.sub(r"_(sum|count)$", "", m.group(1))
                self.assertIn(name, typed)
        self.assertEqual(helped, typed)
        m = metrics(sock)
        self.assertEqual(m['elasticd_workers{state="HEALTHY"}'], 2)
        self.assertEqual(m['elasticd_worker_group_state{state="HEALTHY"}'], 1)
        self.assertEqual(m['elasticd_node_state{state="RUNNING"}'], 1)
        self.assertEqual(m["elasticd_rendezvous_rounds_total"], 1)
        self.assertEqual(m["elasticd_rendezvous_duration_seconds_count"], 1)
        self.assertEqual(m["elasticd_worker_starts_total"], 2)
        self.assertEqual(m["elasticd_remaining_restarts"], 1)
        self.assertEqual(m["elasticd_events_dropped_total"], 0)
        self.assertGreater(m["elasticd_events_recorded_total"], 5)
        self.assertGreaterEqual(m["elasticd_control_requests_total"], 3)
        self.assertTrue(any(k.startswith("elasticd_info{") and 'run_id="%s"' % self.run_id in k
                            for k in m))
        os.kill(self.pids[0][0], signal.SIGKILL)
        self.pids = self.worker_pids(2, old=self.pids)
        m = metrics(sock)
        self.assertEqual(m['elasticd_worker_failures_total{exitcode="-9"}'], 1)
        self.assertEqual(m['elasticd_restarts_total{reason="failure"}'], 1)
        self.assertEqual(m["elasticd_remaining_restarts"], 0)
        self.assertEqual(m["elasticd_worker_starts_total"], 4)
        self.assertEqual(m["elasticd_worker_exits_total"], 2)
        self.stop(a, sock)

    # -- the workers' own servers --

    def test_proxy_to_worker_servers(self):
        a, sock = self.start_agent()
        for r in range(2):
            path, expected = self.pids[r][1], self.path("c.workers", "rank%d.sock" % r)
            self.assertEqual(path, expected, "TORCH_WORKER_SERVER_SOCKET")
        self.assertStatus(post(sock, "/ranks/0/handler/ping"), 200, "pong")
        r = post(sock, "/ranks/1/handler/echo?a=1&b=two+words", data="k=v")
        self.assertStatus(r, 200, ctype="application/json")
        self.assertEqual(r.json(), {"method": "POST", "path": "/handler/echo",
                                    "query": {"a": ["1"], "b": ["two words"]}, "body": "k=v",
                                    "content_type": "application/x-www-form-urlencoded",
                                    "rank": "1"})
        r = curl(sock, "/ranks/1/")
        self.assertStatus(r, 200, ctype="text/html")
        self.assertIn("<h1>torch.distributed.WorkerServer</h1>", r.body)
        self.assertStatus(curl(sock, "/ranks/0"), 200)
        self.assertStatus(curl(sock, "/ranks/0/handler/"), 200,
                          '["ping","dump_traceback","echo","fail","sleep"]')
        # The worker's own statuses and words are relayed.
        self.assertStatus(post(sock, "/ranks/1/handler/fail"), 500, "Handler fail failed: boom")
        self.assertStatus(post(sock, "/ranks/1/handler/nope"), 404,
                          "Handler nope not found: Failed to find handler nope")
        # Ranks that do not exist.
        for path in ("/ranks/2/handler/ping", "/ranks/x/handler/ping", "/ranks/01x"):
            self.assertStatus(post(sock, path), 404)
        # A slow worker handler does not hold up the agent.
        slow = subprocess.Popen(["curl", "-sS", "-X", "POST", "--unix-socket", sock,
                                 "http://localhost/ranks/0/handler/sleep?seconds=2"],
                                stdout=subprocess.PIPE, text=True)
        time.sleep(0.3)
        t0 = time.monotonic()
        self.assertStatus(curl(sock, "/handler/status"), 200)
        self.assertLess(time.monotonic() - t0, 1.0)
        self.assertEqual(slow.communicate(timeout=20)[0], "slept")
        self.assertEqual(metrics(sock)["elasticd_control_proxied_total"], 8)
        self.stop(a, sock)

    def test_dump_traceback_fans_out(self):
        a, sock = self.start_agent()
        r = post(sock, "/handler/dump_traceback")
        self.assertStatus(r, 200, ctype="application/json")
        got = r.json()
        self.assertEqual(sorted(got), ["0", "1"])
        for rank in range(2):
            e = got[str(rank)]
            self.assertEqual(e["pid"], self.pids[rank][0])
            self.assertEqual(e["status"], 200)
            self.assertIn("in train_loop", e["traceback"])
            self.assertIn("Thread 0x", e["traceback"])
        self.assertEqual(curl(sock, "/handler/dump_traceback").status, 200)  # read-only
        self.stop(a, sock)

    def test_worker_server_timeouts(self):
        # Worker servers that accept and never answer: 504 after 60 s when
        # forwarding, a per-rank error after 10 s in the dump_traceback fan-out;
        # the agent answers everything else meanwhile.
        a, sock = self.start_agent(worker_env={"CTL_WORKER_HANG": "1"})
        out = self.path("proxy.out")
        with open(out, "wb") as f:
            proxied = subprocess.Popen(["curl", "-sS", "-i", "-X", "POST", "--unix-socket", sock,
                                        "http://localhost/ranks/1/handler/sleep?seconds=100"],
                                       stdout=f)
        t0 = time.monotonic()
        r = post(sock, "/handler/dump_traceback", timeout=30)
        self.assertGreater(time.monotonic() - t0, 9)
        self.assertStatus(r, 200)
        for rank in ("0", "1"):
            self.assertIsNone(r.json()[rank]["status"])
            self.assertEqual(r.json()[rank]["error"], "the worker server did not answer in time")
        self.assertStatus(curl(sock, "/handler/ping"), 200, "pong")
        self.assertEqual(proxied.wait(90), 0)
        self.assertGreater(time.monotonic() - t0, 59)
        with open(out, "rb") as f:
            r = Reply(0, f.read())
        self.assertStatus(r, 504, "the worker server did not answer in time")
        self.stop(a, sock)

    def test_forward_to_a_worker_that_exits_is_502(self):
        a, sock = self.start_agent(nproc=1)
        out = self.path("proxy.out")
        with open(out, "wb") as f:
            proxied = subprocess.Popen(["curl", "-sS", "-i", "-X", "POST", "--unix-socket", sock,
                                        "http://localhost/ranks/0/handler/sleep?seconds=30"],
                                       stdout=f)
        self.assertTrue(lib.wait_until(
            lambda: metrics(sock)["elasticd_control_proxied_total"] == 1, 10))
        # The worker exits on the SIGTERM of the stop, its server with it.
        self.stop(a, sock)
        self.assertEqual(proxied.wait(20), 0)
        with open(out, "rb") as f:
            self.assertStatus(Reply(0, f.read()), 502,
                              "the worker server closed the connection without answering")

    def test_workers_without_a_server(self):
        a, sock = self.start_agent(worker_env={"CTL_WORKER_NO_SERVER": "1"})
        r = post(sock, "/ranks/0/handler/ping")
        self.assertStatus(r, 502)
        self.assertIn("cannot connect to %s" % self.path("c.workers", "rank0.sock"), r.body)
        self.assertIn("No such file or directory", r.body)
        r = post(sock, "/handler/dump_traceback")
        self.assertStatus(r, 200)
        for rank in ("0", "1"):
            self.assertIsNone(r.json()[rank]["status"])
            self.assertIn("No such file or directory", r.json()[rank]["error"])
        self.stop(a, sock)

    def test_no_worker_server(self):
        a, sock = self.start_agent("--no-worker-server")
        self.assertEqual([path for _, path in self.pids], ["", ""])
        self.assertFalse(os.path.exists(self.path("c.workers")))
        st = curl(sock, "/handler/status").json()
        self.assertEqual([w["worker_server_socket"] for w in st["workers"]], [None, None])
        r = post(sock, "/ranks/1/handler/ping")
        self.assertStatus(r, 502, "local_rank 1 has no worker server (elasticd runs with "
                          "--no-worker-server)")
        r = post(sock, "/handler/dump_traceback").json()
        self.assertEqual(r["1"]["error"], "no worker server (--no-worker-server)")
        self.stop(a, sock)

    # -- the socket --

    def test_permissions(self):
        os.chmod(self.tmp, 0o755)  # others may reach the socket's directory
        a, sock = self.start_agent(nproc=1)
        st = os.stat(sock)
        self.assertTrue(stat.S_ISSOCK(st.st_mode))
        self.assertEqual(stat.S_IMODE(st.st_mode), 0o600)
        self.assertEqual(st.st_uid, os.geteuid())
        self.assertEqual(stat.S_IMODE(os.stat(self.path("c.workers")).st_mode), 0o700)
        # Another uid cannot even connect (mode 0600).
        r = curl(sock, "/handler/ping", user=NOBODY)
        self.assertEqual(r.rc, 7, r)
        self.assertStatus(curl(sock, "/handler/ping"), 200, "pong")
        self.stop(a, sock)

        # Widened by mode, the peer check still refuses another uid.
        a, sock = self.start_agent("--control-socket-mode", "0666", nproc=1,
                                   sock=self.path("d.sock"))
        self.assertEqual(stat.S_IMODE(os.stat(sock).st_mode), 0o666)
        r = curl(sock, "/handler/ping", user=NOBODY)
        self.assertStatus(r, 403, "Forbidden: uid %d may not use this socket" % NOBODY)
        self.assertEqual(r.headers.get("connection"), "close")
        self.assertEqual(curl(sock, "/handler/status", user=NOBODY).status, 403)
        self.assertStatus(post(sock, "/handler/stop", user=NOBODY), 403)
        self.assertEqual(metrics(sock)['elasticd_control_refused_total{reason="peer"}'], 3)
        self.assertTrue(a.wait_stderr("refused uid %d" % NOBODY))
        self.stop(a, sock)

    def test_group(self):
        os.chmod(self.tmp, 0o755)
        a, sock = self.start_agent("--control-socket-group", "nogroup", nproc=1)
        st = os.stat(sock)
        self.assertEqual(stat.S_IMODE(st.st_mode), 0o660)
        self.assertEqual(st.st_gid, NOBODY)
        # A member of the group (primary gid here) may use it.
        self.assertStatus(curl(sock, "/handler/ping", user=NOBODY, group=NOBODY), 200, "pong")
        # Another group cannot connect.
        self.assertEqual(curl(sock, "/handler/ping", user=NOBODY, group=12345).rc, 7)
        self.stop(a, sock)
        # With the mode widened too, the peer check decides by group.
        a, sock = self.start_agent("--control-socket-group", str(NOBODY),
                                   "--control-socket-mode", "666", nproc=1,
                                   sock=self.path("d.sock"))
        self.assertStatus(curl(sock, "/handler/ping", user=12345, group=NOBODY), 200, "pong")
        self.assertStatus(curl(sock, "/handler/ping", user=NOBODY, group=12345), 403)
        # A supplementary group counts (SO_PEERGROUPS).
        r = subprocess.run(["setpriv", "--reuid=12345", "--regid=12345",
                            "--groups=%d" % NOBODY, "curl", "-sS", "--unix-socket", sock,
                            "http://localhost/handler/ping"], capture_output=True, text=True)
        self.assertEqual(r.stdout, "pong")
        self.stop(a, sock)

    def test_bad_socket_settings(self):
        res = self.run_elasticd("--standalone", "--control-socket-group", "no-such-group-x",
                                "--no-python", "true")
        self.assertRc(res, 2)
        self.assertIn("--control-socket-group: no group named 'no-such-group-x'", res.err)
        res = self.run_elasticd("--standalone", "--control-socket-mode", "0400", "--no-python",
                                "true")
        self.assertRc(res, 2)
        self.assertIn("the owner needs read and write (0600)", res.err)
        res = self.run_elasticd("--standalone", "--control-socket-mode", "9", "--no-python",
                                "true")
        self.assertRc(res, 2)
        long_path = self.path("x" * 120 + ".sock")
        res = self.run_elasticd("--standalone", "--control-socket", long_path, "--no-python",
                                "true")
        self.assertRc(res, 1)
        self.assertIn("the path is too long for a Unix socket", res.err)

    def test_directory_others_can_write_is_refused(self):
        ran = self.path("ran")
        for mode, who in ((0o777, "its group and others"), (0o773, "its group and others"),
                          (0o757, "others"), (0o775, "its group")):
            d = self.path("w%o" % mode)
            os.mkdir(d)
            os.chmod(d, mode)
            sock = os.path.join(d, "ctl.sock")
            res = self.run_elasticd("--standalone", "--control-socket", sock, "--no-python",
                                    "touch", ran)
            self.assertRc(res, 1)
            self.assertIn("control socket: the directory %s is writable by %s (mode %04o), "
                          "who could replace the socket; use a directory only its owner can "
                          "write (chmod go-w %s), or a sticky one owned by root such as /tmp"
                          % (d, who, mode, d), res.err)
            self.assertFalse(os.path.exists(sock))
            self.assertFalse(os.path.exists(ran), "no worker starts")
        # Sticky but not owned by root: refused too.
        d = self.path("sticky")
        os.mkdir(d)
        os.chmod(d, 0o1777)
        if os.geteuid() == 0:
            os.chown(d, NOBODY, NOBODY)
        res = self.run_elasticd("--standalone", "--control-socket", os.path.join(d, "c.sock"),
                                "--no-python", "true")
        self.assertRc(res, 1)
        self.assertIn("(mode 1777)", res.err)

    def test_sticky_root_directory_is_accepted(self):
        st = os.stat("/tmp")
        if not (st.st_mode & stat.S_ISVTX and st.st_uid == 0 and st.st_mode & stat.S_IWOTH):
            self.skipTest("/tmp is not a sticky root-owned directory others can write")
        sock = "/tmp/elasticd-it-%s.sock" % self.marker[:12]
        try:
            res = self.run_elasticd("--standalone", "--control-socket", sock, "--no-python",
                                    "true")
        finally:
            if os.path.exists(sock):
                os.unlink(sock)
        self.assertRc(res, 0)
        self.assertIn("control socket: %s" % sock, res.err)

    def test_stale_socket_is_replaced(self):
        sock = self.path("c.sock")
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.bind(sock)
        s.close()  # a socket file nobody listens on, as a SIGKILLed agent leaves
        self.assertTrue(stat.S_ISSOCK(os.lstat(sock).st_mode))
        a, sock = self.start_agent(nproc=1)
        self.assertStatus(curl(sock, "/handler/ping"), 200, "pong")
        self.assertTrue(a.wait_stderr("replaced the stale socket %s" % sock))
        self.stop(a, sock)

    def test_live_socket_is_an_error(self):
        sock = self.path("c.sock")
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.bind(sock)
        s.listen(1)
        try:
            res = self.run_elasticd("--standalone", "--control-socket", sock, "--no-python",
                                    "sleep", "5", timeout=20)
        finally:
            s.close()
        self.assertRc(res, 1)
        self.assertIn("control socket: %s is in use: another agent answers on it" % sock,
                      res.err)
        self.assertTrue(os.path.exists(sock), "the other's socket is left alone")
        # Not a socket at all.
        path = self.path("file")
        with open(path, "w") as f:
            f.write("x")
        res = self.run_elasticd("--standalone", "--control-socket", path, "--no-python", "true")
        self.assertRc(res, 1)
        self.assertIn("%s exists and is not a socket" % path, res.err)

    def test_default_paths(self):
        # systemd's RUNTIME_DIRECTORY.
        rt = self.path("rt")
        os.mkdir(rt)
        a, sock = self.start_agent(sock="default", nproc=1,
                                   env=self.env(CTL_WORKER_DIR=self.path("w"),
                                                RUNTIME_DIRECTORY=rt))
        self.assertEqual(curl(os.path.join(rt, "elasticd.sock"), "/handler/status").json()
                         ["control_socket"], os.path.join(rt, "elasticd.sock"))
        self.assertEqual(self.pids[0][1], os.path.join(rt, "elasticd.workers", "rank0.sock"))
        self.stop(a, os.path.join(rt, "elasticd.sock"))
        self.assertEqual(os.listdir(rt), [])
        # Root without RUNTIME_DIRECTORY: /run/elasticd/<run_id>.sock; a second
        # agent of the same run id on this host takes <run_id>.<pid>.sock.
        if os.geteuid() != 0:
            self.fail("this test runs as root (the CI runs everything as root)")
        run_id = "ctl-" + uuid.uuid4().hex[:8]
        # Sockets agents killed with SIGKILL left there: removed once older
        # than a minute (with their workers' directories), younger ones kept.
        os.makedirs("/run/elasticd", exist_ok=True)
        stale = {}
        for age in ("old", "young"):
            path = "/run/elasticd/%s-%s.sock" % (run_id, age)
            s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            s.bind(path)
            s.close()
            wdir = path[:-5] + ".workers"
            os.mkdir(wdir)
            s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            s.bind(os.path.join(wdir, "rank0.sock"))
            s.close()
            if age == "old":
                os.utime(path, (time.time() - 120, time.time() - 120))
            stale[age] = (path, wdir)
        a1, _ = self.start_agent(sock="default", nproc=1, run_id=run_id)
        self.assertFalse(os.path.exists(stale["old"][0]))
        self.assertFalse(os.path.exists(stale["old"][1]))
        self.assertTrue(os.path.exists(stale["young"][0]))
        self.assertTrue(os.path.exists(stale["young"][1]))
        # (Other tests running at the same time may have left more.)
        self.assertTrue(lib.wait_until(lambda: re.search(
            r"removed \d+ sockets? left in /run/elasticd by agents that were killed",
            a1.stderr_text())), a1.stderr_text())
        os.unlink(stale["young"][0])
        os.unlink(os.path.join(stale["young"][1], "rank0.sock"))
        os.rmdir(stale["young"][1])
        first = "/run/elasticd/%s.sock" % run_id
        self.assertEqual(curl(first, "/handler/status").json()["pid"], a1.pid)
        self.assertEqual(stat.S_IMODE(os.stat("/run/elasticd").st_mode), 0o755)
        self.wdir = self.path("w2")
        os.makedirs(self.wdir)
        a2 = self.start("--standalone", "--rdzv-id", run_id, "--nproc-per-node", 1,
                        "--no-python", "sleep", "30")
        second = "/run/elasticd/%s.%d.sock" % (run_id, a2.pid)
        self.assertTrue(lib.wait_for_file(second))
        self.assertEqual(curl(second, "/handler/status").json()["pid"], a2.pid)
        self.assertTrue(a2.wait_stderr("%s is in use: another agent answers on it; this agent "
                                       "uses %s" % (first, second)))
        self.stop(a2, second)
        self.stop(a1, first)
        self.assertFalse(os.path.exists(first))
        self.assertFalse(os.path.exists(second))

    def test_socket_removed_after_success(self):
        a, sock = self.start_agent(worker_env={"CTL_WORKER_EXIT_AFTER": "0.5"})
        self.assertRc(a.wait(30), 0)
        self.assertFalse(os.path.exists(sock))

    # -- limits --

    def test_oversized_requests(self):
        a, sock = self.start_agent(nproc=1)
        big_header = "X-Big: " + "a" * 9000
        self.assertEqual(curl(sock, "/handler/ping", headers=[big_header]).status, 400)
        self.assertEqual(curl(sock, "/handler/ping?x=" + "a" * 9000).status, 400)
        body = self.path("body")
        with open(body, "wb") as f:
            f.write(b"a" * (1024 * 1024 + 1))
        self.assertStatus(post(sock, "/handler/ping", data_file=body), 413)
        self.assertStatus(post(sock, "/ranks/0/handler/echo", data_file=body), 413)
        with open(body, "wb") as f:
            f.write(b"a" * 1024 * 1024)
        r = post(sock, "/ranks/0/handler/echo", data_file=body,
                 headers=["Content-Type: application/octet-stream"])
        self.assertStatus(r, 200)
        self.assertEqual(len(r.json()["body"]), 1024 * 1024)
        # A form body over the parameter limit.
        with open(body, "w") as f:
            f.write("a=" + "b" * 20000)
        self.assertStatus(post(sock, "/handler/ping", data_file=body), 400,
                          "Invalid parameters - longer than 16384 bytes")
        self.assertStatus(curl(sock, "/handler/ping"), 200, "pong")
        self.stop(a, sock)

    def test_conflicting_content_length_is_refused(self):
        # Two Content-Length headers that disagree: the framing is ambiguous
        # (request smuggling), so 400 and the connection closes.
        a, sock = self.start_agent(nproc=1)
        s = connect(sock)
        s.sendall(b"POST /handler/ping HTTP/1.1\r\nHost: localhost\r\n"
                  b"Content-Length: 0\r\nContent-Length: 5\r\n\r\nhello")
        status, body = read_reply(s)
        self.assertEqual(status, 400, body)
        self.assertIn(b"Content-Length", body)
        s.settimeout(5)
        self.assertEqual(s.recv(100), b"")  # closed
        s.close()
        # The same header twice with one value is fine.
        s = connect(sock)
        s.sendall(b"POST /handler/ping HTTP/1.1\r\nHost: localhost\r\n"
                  b"Content-Length: 0\r\nContent-Length: 0\r\n\r\n")
        self.assertEqual(read_reply(s), (200, b"pong"))
        s.close()
        self.stop(a, sock)

    def test_connection_limit(self):
        a, sock = self.start_agent(nproc=1)
        conns = []
        try:
            for _ in range(256):
                s = connect(sock)
                self.assertEqual(get_keepalive(s, "/handler/ping"), (200, b"pong"))
                conns.append(s)
            self.assertStatus(curl(sock, "/handler/ping"), 503,
                              "Too many connections (at most 256)")
            # Those already in keep going.
            self.assertEqual(get_keepalive(conns[0], "/handler/ping"), (200, b"pong"))
        finally:
            for s in conns:
                s.close()
        r = lib.wait_until(lambda: curl(sock, "/handler/ping").status == 200, 5)
        self.assertTrue(r)
        m = metrics(sock)
        self.assertEqual(m['elasticd_control_refused_total{reason="limit"}'], 1)
        self.assertLessEqual(m["elasticd_control_connections"], 2)
        self.stop(a, sock)

    def test_out_of_file_descriptors(self):
        # Idle connections cannot take the descriptors supervision needs: the
        # listener stops at three quarters of RLIMIT_NOFILE (no busy loop),
        # and comes back once they are gone.
        a, sock = self.start_agent("--max-restarts", "1", nproc=2, nofile=64)

        def flood():
            conns = []
            for _ in range(80):
                conns.append(connect(sock, timeout=2))
            return conns
        conns = flood()
        self.assertTrue(a.wait_stderr("control socket: descriptors 48 and up are kept for the "
                                      "workers and the rendezvous (RLIMIT_NOFILE 64); not "
                                      "accepting connections for 1 s", 10), a.stderr_text())
        # Meanwhile a worker fails: the group restarts (new pipes, pidfds,
        # log files), the flood notwithstanding.
        t0 = time.monotonic()
        os.kill(self.pids[0][0], signal.SIGKILL)
        self.pids = self.worker_pids(2, old=self.pids)
        self.assertLess(time.monotonic() - t0, 10)
        self.assertNotIn("Too many open files", a.stderr_text())
        for s in conns:
            s.close()
        self.assertTrue(lib.wait_until(lambda: curl(sock, "/handler/ping").status == 200, 10))
        self.assertGreaterEqual(metrics(sock)["elasticd_control_accept_pauses_total"], 1)
        self.stop(a, sock)
        self.assertFalse(os.path.exists(sock))

    def test_stalled_and_flooding_clients_do_not_delay_supervision(self):
        a, sock = self.start_agent("--max-restarts", "1", nproc=2)
        # A client that sends half a request and stalls.
        stalled = connect(sock, timeout=20)
        stalled.sendall(b"POST /handler/ping HTTP/1.1\r\nHost: x\r\nContent-Len")
        # Clients that send requests as fast as the agent answers.
        stop = threading.Event()
        counts = []

        def flood():
            n = 0
            s = connect(sock)
            while not stop.is_set():
                get_keepalive(s, "/handler/status")
                n += 1
            s.close()
            counts.append(n)
        threads = [threading.Thread(target=flood) for _ in range(4)]
        for t in threads:
            t.start()
        try:
            time.sleep(0.5)
            t0 = time.monotonic()
            os.kill(self.pids[1][0], signal.SIGKILL)
            self.assertTrue(a.wait_stderr("failed (exitcode: -9)", 5))
            reaction = time.monotonic() - t0
            self.pids = self.worker_pids(2, old=self.pids, timeout=10)
        finally:
            stop.set()
            for t in threads:
                t.join(20)
        self.assertLess(reaction, 1.0)
        self.assertTrue(all(n > 10 for n in counts), counts)
        # The stalled client is dropped after the timeout (10 s), the agent fine.
        t0 = time.monotonic()
        self.assertEqual(stalled.recv(100), b"")
        self.assertLess(time.monotonic() - t0, 15)
        stalled.close()
        self.assertStatus(curl(sock, "/handler/ping"), 200, "pong")
        self.stop(a, sock)


if __name__ == "__main__":
    lib.main()
