#!/usr/bin/python3
"""elasticctl(1) against the real agent: every command in text and --json,
finding the agent by elasticd's default socket rules (one agent, several,
one that is gone: exit 3 with the paths tried), verbs the agent lacks, and
usage errors (exit 2 naming the flag). Workers are tests/ctl_worker.py.

The discovery tests run elasticd and elasticctl as root with a private
directory bound over /run/elasticd, each in a mount namespace of its own
(unshare -m), so that agents of other tests on the machine stay out of
sight; they are skipped where that is not possible."""

import json
import os
import pty
import re
import signal
import socket
import subprocess
import sys
import threading
import time
import uuid

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import lib  # noqa: E402

ELASTICCTL = os.environ.get("ELASTICCTL") or os.path.join(lib.SOURCE_ROOT, "build", "src",
                                                          "elasticctl")
CTL_WORKER = os.path.join(lib.SOURCE_ROOT, "tests", "ctl_worker.py")
RUN_DIR = "/run/elasticd"


def unshare_problem():
    """Why the discovery tests cannot run here, or None. They need root, to
    bind a private directory over /run/elasticd in a mount namespace (created
    here when missing: it is root's default socket directory anyway). A
    problem fails the tests: .ci/run runs as root."""
    if os.geteuid() != 0:
        return "the discovery tests need root (unshare -m, mount)"
    os.makedirs(RUN_DIR, exist_ok=True)
    p = subprocess.run(["unshare", "-m", "--propagation", "private", "sh", "-c",
                        "mount -t tmpfs none %s" % RUN_DIR], capture_output=True, text=True)
    return None if p.returncode == 0 else "unshare -m: " + p.stderr.strip()


class ElasticctlTest(lib.ElasticdTestCase):

    def start_agent(self, nproc=2, sock=None, run_id=None, lines=5, extra=()):
        """elasticd --standalone -t 3 with ctl_worker.py workers; returns (agent, socket)."""
        self.wdir = self.path("w")
        os.makedirs(self.wdir, exist_ok=True)
        sock = sock or self.path("c.sock")
        run_id = run_id or "ectl-" + uuid.uuid4().hex[:8]
        e = self.env(CTL_WORKER_DIR=self.wdir, CTL_WORKER_LINES=str(lines))
        argv = ["--standalone", "--rdzv-id", run_id, "--nproc-per-node", nproc, "-t", "3",
                "--log-dir", self.path("logs")] + list(extra)
        if sock != "default":
            argv += ["--control-socket", sock]
        a = self.start(*(argv + [CTL_WORKER]), env=e)
        a.run_id = run_id
        return a, sock

    def wait_workers(self, sock, n=2, lines=5):
        """Until every worker runs and printed its lines."""
        def ready():
            r = self.ctl("-s", sock, "status", "--json")
            if r.rc != 0:
                return False
            s = json.loads(r.out)
            return (s["worker_state"] == "HEALTHY" and len(s["workers"]) == n and
                    all(os.path.exists(os.path.join(self.wdir, "rank%d.pid" % i))
                        for i in range(n)))
        self.assertTrue(lib.wait_until(ready, 30), "workers did not start")

    def ctl(self, *args, timeout=30, wrap=()):
        argv = list(wrap) + [ELASTICCTL] + [str(a) for a in args]
        start = time.monotonic()
        p = subprocess.run(argv, capture_output=True, timeout=timeout, env=self.env())
        return lib.Result(p.returncode, p.stdout, p.stderr, time.monotonic() - start)

    def assertCtl(self, res, rc):
        self.assertEqual(res.rc, rc, "unexpected exit status: %r" % (res,))

    def fake_agent(self, name, reply):
        """A socket at self.path(name) that answers one request with reply (the
        bytes of a whole HTTP response) and closes; returns its path."""
        path = self.path(name)
        srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        srv.bind(path)
        srv.listen(1)

        def serve():
            with srv:
                c, _ = srv.accept()
                with c:
                    head = b""
                    while b"\r\n\r\n" not in head:
                        d = c.recv(4096)
                        if not d:
                            return
                        head += d
                    try:
                        c.sendall(reply)
                    except OSError:
                        pass
        threading.Thread(target=serve, daemon=True).start()
        return path

    # ---- commands ----

    def test_status_text_and_json(self):
        a, sock = self.start_agent()
        self.wait_workers(sock)
        r = self.ctl("-s", sock, "status")
        self.assertCtl(r, 0)
        self.assertIn("job:       %s (c10d, role default)" % a.run_id, r.out)
        self.assertIn("state:     RUNNING, workers HEALTHY", r.out)
        self.assertIn("restarts:  0 used, 0 left", r.out)
        self.assertNotIn("\033[", r.out)  # not a terminal: no colour
        rows = [l for l in r.out.splitlines() if re.match(r"^[01] ", l)]
        self.assertEqual(len(rows), 2, r.out)
        for i, row in enumerate(rows):
            cols = row.split()
            self.assertEqual(cols[0], str(i))
            self.assertEqual(cols[3], "HEALTHY")
            self.assertTrue(cols[-1].endswith("/%d/stdout.log" % i), row)
            self.assertIn(" ago ", row)
        r = self.ctl("-s", sock, "status", "--json")
        self.assertCtl(r, 0)
        s = json.loads(r.out)
        self.assertEqual(s["run_id"], a.run_id)
        self.assertEqual([w["local_rank"] for w in s["workers"]], [0, 1])
        self.assertNotIn("last_output_age_s", s["workers"][0])  # the agent's JSON, as is

    def test_events(self):
        a, sock = self.start_agent()
        self.wait_workers(sock)
        r = self.ctl("-s", sock, "events")
        self.assertCtl(r, 0)
        started = [l for l in r.out.splitlines() if " AGENT  elasticd.agent.started " in l]
        self.assertEqual(len(started), 1, r.out)
        self.assertRegex(started[0], r"^#\d+ \d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d{3} AGENT ")
        self.assertIn("local_world_size=2", started[0])
        self.assertRegex(r.out, r"(?m)^#\d+ -\s+RDZV   rdzv_c10d\.c:next_rendezvous RUNNING")
        r = self.ctl("-s", sock, "events", "--json")
        self.assertCtl(r, 0)
        lines = [json.loads(l) for l in r.out.splitlines()]
        seqs = [l["seq"] for l in lines]
        self.assertEqual(seqs, list(range(1, len(seqs) + 1)))
        r = self.ctl("-s", sock, "events", "--json", "--since", seqs[-2])
        self.assertEqual([json.loads(l)["seq"] for l in r.out.splitlines()], seqs[-1:])
        # -f: the events of a restart arrive while following
        out = self.path("follow.out")
        with open(out, "wb") as f:
            p = subprocess.Popen([ELASTICCTL, "-s", sock, "events", "-f", "--since",
                                  str(seqs[-1])], stdout=f, stderr=subprocess.STDOUT,
                                 env=self.env())
        try:
            self.assertCtl(self.ctl("-s", sock, "restart"), 0)
            self.assertTrue(lib.wait_until(
                lambda: "elasticd.agent.restart" in lib.read_text(out), 20),
                lib.read_text(out))
            self.assertIsNone(p.poll())
        finally:
            p.kill()
            p.wait()

    def test_events_long_line(self):
        """An event line over 4 MiB is reported and skipped, the next one
        printed (with --json too)."""
        head = b"HTTP/1.1 200 OK\r\nContent-Type: application/x-ndjson\r\n\r\n"
        long = b'{"seq":1,"event":{"name":"' + b"x" * (4 << 20) + b'"}}\n'
        good = (b'{"seq":2,"event":{"name":"n","source":"AGENT","timestamp":0,'
                b'"metadata":{"k":1}}}\n')
        for args in [(), ("--json",)]:
            sock = self.fake_agent("ev%d.sock" % len(args), head + good + long + good)
            r = self.ctl("-s", sock, "events", *args)
            self.assertCtl(r, 0)
            self.assertEqual(r.err, "elasticctl: events: skipped an event line of %d bytes "
                             "(more than 4194304)\n" % (len(long) - 1))
            lines = r.out.splitlines()
            self.assertEqual(len(lines), 2, r.out[:200])
            self.assertEqual(lines[0], lines[1])
            self.assertIn("AGENT  n k=1" if not args else good.strip().decode(), lines[0])

    def test_error_text_cut(self):
        """An error reply's text is cut at 64 KiB, for events -f too."""
        body = b"E" * (1 << 20)
        sock = self.fake_agent("err.sock", b"HTTP/1.1 500 Internal Server Error\r\n"
                               b"Content-Length: %d\r\n\r\n" % len(body) + body)
        r = self.ctl("-s", sock, "events", "-f")
        self.assertCtl(r, 1)
        self.assertRegex(r.err, r"^elasticctl: events: E{65536}\.\.\. \(HTTP 500\)\n$")
        sock = self.fake_agent("err2.sock", b"HTTP/1.1 500 Internal Server Error\r\n"
                               b"Content-Length: %d\r\n\r\n" % len(body) + body)
        r = self.ctl("-s", sock, "restart")
        self.assertCtl(r, 1)
        self.assertRegex(r.err, r"^elasticctl: restart: E{65536}\.\.\. \(HTTP 500\)\n$")

    def ctl_tty(self, *args):
        """elasticctl with its stdout and stderr on a terminal: (rc, what it wrote)."""
        master, slave = pty.openpty()
        p = subprocess.Popen([ELASTICCTL] + [str(a) for a in args], stdin=subprocess.DEVNULL,
                             stdout=slave, stderr=slave, env=self.env())
        os.close(slave)
        out = b""
        while True:
            try:
                d = os.read(master, 65536)
            except OSError:  # EIO: every writer is gone
                break
            if not d:
                break
            out += d
        os.close(master)
        return p.wait(30), out

    def test_worker_text_on_a_terminal(self):
        """Control characters that workers put in events and error text reach a
        terminal escaped; piped, and with --json, they stay as they are."""
        ev = (b'{"seq":1,"event":{"name":"n","source":"WORKER","timestamp":0,'
              b'"metadata":{"m":"\\u001b]0;owned\\u0007\\u009b2J"}}}\n')
        head = b"HTTP/1.1 200 OK\r\nContent-Type: application/x-ndjson\r\n\r\n"
        rc, out = self.ctl_tty("-s", self.fake_agent("t1.sock", head + ev), "events")
        self.assertEqual(rc, 0, out)
        self.assertIn(b"m=\\x1b]0;owned\\x07\\xc2\\x9b2J\r\n", out)
        self.assertNotIn(b"\x1b", out)
        r = self.ctl("-s", self.fake_agent("t2.sock", head + ev), "events")
        self.assertIn(b"m=\x1b]0;owned\x07\xc2\x9b2J\n", r.out_bytes)
        r = self.ctl("-s", self.fake_agent("t3.sock", head + ev), "events", "--json")
        self.assertEqual(r.out_bytes, ev)
        err = b"HTTP/1.1 500 X\r\nContent-Length: 9\r\n\r\nbad\x1b[2J\x9b!"
        rc, out = self.ctl_tty("-s", self.fake_agent("t4.sock", err), "restart")
        self.assertEqual(rc, 1, out)
        self.assertEqual(out, b"elasticctl: restart: bad\\x1b[2J\\x9b! (HTTP 500)\r\n")

    def test_logs(self):
        a, sock = self.start_agent(lines=5)
        self.wait_workers(sock)
        self.assertTrue(lib.wait_until(
            lambda: "line 4 of rank 1" in self.ctl("-s", sock, "logs", 1).out, 10))
        r = self.ctl("-s", sock, "logs", 1, "-n", 2)
        self.assertCtl(r, 0)
        self.assertEqual(r.out, "line 3 of rank 1\nline 4 of rank 1\n")
        r = self.ctl("-s", sock, "logs", 0, "--stderr")
        self.assertCtl(r, 0)
        self.assertNotIn("line 0 of rank 0", r.out)
        r = self.ctl("-s", sock, "logs", 7)
        self.assertCtl(r, 1)
        self.assertIn("no local rank 7", r.err)
        # -f: a restart's workers append their lines to the same log
        out = self.path("logs.out")
        with open(out, "wb") as f:
            p = subprocess.Popen([ELASTICCTL, "-s", sock, "logs", "0", "-f", "-n", "1"],
                                 stdout=f, stderr=subprocess.STDOUT, env=self.env())
        try:
            self.assertTrue(lib.wait_until(
                lambda: lib.read_text(out) == "line 4 of rank 0\n", 10), lib.read_text(out))
            self.assertCtl(self.ctl("-s", sock, "restart"), 0)
            want = "line 4 of rank 0\n" + "".join("line %d of rank 0\n" % i for i in range(5))
            self.assertTrue(lib.wait_until(lambda: lib.read_text(out) == want, 20),
                            lib.read_text(out))
        finally:
            p.kill()
            p.wait()

    def test_logs_follow_loses_nothing(self):
        """logs -f reads by offset: a burst of identical lines, far more than
        1000 a second, arrives whole (the old reading of the last 1000 lines
        printed none of them)."""
        script = self.path("burst.py")
        with open(script, "w") as f:
            f.write("import os, sys, time\n"
                    "print('start', flush=True)\n"
                    "while not os.path.exists(sys.argv[1]):\n"
                    "    time.sleep(0.05)\n"
                    "for i in range(3):\n"
                    "    sys.stdout.write('same\\n' * 5000)\n"
                    "    sys.stdout.flush()\n"
                    "    time.sleep(0.3)\n"
                    "print('end', flush=True)\n"
                    "time.sleep(60)\n")
        go = self.path("go")
        sock = self.path("c.sock")
        self.start("--standalone", "--nproc-per-node", 1, "-t", "3", "--log-dir",
                   self.path("logs"), "--control-socket", sock, script, go)
        self.assertTrue(lib.wait_until(
            lambda: self.ctl("-s", sock, "logs", 0).out == "start\n", 30))
        out = self.path("logs.out")
        with open(out, "wb") as f:
            p = subprocess.Popen([ELASTICCTL, "-s", sock, "logs", "0", "-f", "-n", "1"],
                                 stdout=f, stderr=subprocess.STDOUT, env=self.env())
        try:
            self.assertTrue(lib.wait_until(lambda: lib.read_text(out) == "start\n", 10),
                            lib.read_text(out))
            open(go, "w").close()
            want = "start\n" + "same\n" * 15000 + "end\n"
            self.assertTrue(lib.wait_until(lambda: lib.read_text(out) == want, 20),
                            lib.read_text(out)[-300:])
        finally:
            p.kill()
            p.wait()

    def test_logs_follow_ends_with_the_agent(self):
        """logs -f, as events -f, ends with status 0 when the job ends: the
        agent's exit is the end of the log, not "cannot reach elasticd"."""
        go = self.path("go")
        sock = self.path("c.sock")
        a = self.start("--standalone", "--nproc-per-node", 1, "-r", "3", "--log-dir",
                       self.path("logs"), "--control-socket", sock, "--no-python", "/bin/sh",
                       "-c", 'echo first; while [ ! -e "$0" ]; do sleep 0.05; done; echo last',
                       go)
        self.assertTrue(lib.wait_until(
            lambda: self.ctl("-s", sock, "logs", 0).out == "first\n", 30))
        p = subprocess.Popen([ELASTICCTL, "-s", sock, "logs", "0", "-f"],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=self.env())
        try:
            time.sleep(1.5)
            open(go, "w").close()
            self.assertRc(a.wait(30), 0)
            out, err = p.communicate(timeout=20)
        finally:
            if p.poll() is None:
                p.kill()
                p.wait()
        self.assertEqual((p.returncode, out, err), (0, b"first\nlast\n", b""))

    def test_signal_dump_metrics(self):
        a, sock = self.start_agent()
        self.wait_workers(sock)
        r = self.ctl("-s", sock, "signal", "USR1", 1)
        self.assertCtl(r, 0)
        self.assertIn("sent SIGUSR1 to local_rank 1", r.out)
        self.assertTrue(lib.wait_for_file(os.path.join(self.wdir, "usr1.1")))
        self.assertFalse(os.path.exists(os.path.join(self.wdir, "usr1.0")))
        r = self.ctl("-s", sock, "signal", "USR1", 5)
        self.assertCtl(r, 1)
        self.assertIn("no local rank 5", r.err)
        r = self.ctl("-s", sock, "dump")
        self.assertCtl(r, 0)
        self.assertRegex(r.out, r"(?s)^==== local rank 0 \(pid \d+\) ====\n.*ctl_worker\.py.*"
                                r"\n==== local rank 1 \(pid \d+\) ====\n")
        r = self.ctl("-s", sock, "dump", "--json")
        self.assertCtl(r, 0)
        self.assertEqual(sorted(json.loads(r.out)), ["0", "1"])
        r = self.ctl("-s", sock, "metrics")
        self.assertCtl(r, 0)
        self.assertIn('elasticd_info{version="', r.out)
        self.assertIn("elasticd_workers{", r.out)

    def test_restart_and_stop(self):
        a, sock = self.start_agent()
        self.wait_workers(sock)
        before = [w["pid"] for w in json.loads(self.ctl("-s", sock, "status", "--json").out)
                  ["workers"]]
        r = self.ctl("-s", sock, "restart")
        self.assertCtl(r, 0)
        self.assertIn("no restart is spent", r.out)

        def new_pids():
            s = json.loads(self.ctl("-s", sock, "status", "--json").out)
            pids = [w["pid"] for w in s["workers"]]
            return s["worker_state"] == "HEALTHY" and None not in pids and \
                not set(pids) & set(before)
        self.assertTrue(lib.wait_until(new_pids, 30))
        r = self.ctl("-s", sock, "stop")
        self.assertCtl(r, 0)
        self.assertRc(a.wait(30), 143)
        r = self.ctl("-s", sock, "status")
        self.assertCtl(r, 3)
        self.assertIn("cannot reach elasticd at %s" % sock, r.err)

    def test_verbs(self):
        a, sock = self.start_agent(nproc=1)
        self.wait_workers(sock, n=1)
        r = self.ctl("-s", sock, "ping")
        self.assertCtl(r, 0)
        self.assertEqual(r.out, "pong\n")
        r = self.ctl("-s", sock, "loglevel", "level=debug")
        self.assertCtl(r, 0)
        self.assertEqual(r.out, "debug (was info)\n")
        r = self.ctl("-s", sock, "loglevel", "level=loud")
        self.assertCtl(r, 1)
        self.assertIn("elasticctl: loglevel: Invalid value for level", r.err)
        # Neither knows it.
        r = self.ctl("-s", sock, "frobnicate", "x=1")
        self.assertCtl(r, 2)
        self.assertIn("has no 'frobnicate' handler; it answers: ping,", r.err)

    def test_drain(self):
        # The workers take SIGTERM as their notice and exit 0: the agent exits 0.
        a, sock = self.start_agent(nproc=1)
        self.wait_workers(sock, n=1)
        r = self.ctl("-s", sock, "drain", "signal=TERM", "timeout=30")
        self.assertCtl(r, 0)
        self.assertIn("draining", r.out)
        res = a.wait(30)
        self.assertRc(res, 0)
        self.assertIn("drain: the workers exited; leaving the job (exit status 0)", res.err)
        r = self.ctl("help", "drain")
        self.assertCtl(r, 0)
        self.assertIn("timeout=", r.out)

    def test_usage(self):
        for args, flag in [(["logs", "0", "-n", "x"], "-n: expected an integer"),
                           (["events", "--since=-3"], "--since: expected an integer"),
                           (["status", "--bogus"], "unknown option '--bogus'"),
                           (["status", "-f"], "-f is not an option of 'status'"),
                           (["signal", "NOPE"], "SIG: expected a signal name"),
                           (["logs"], "logs: missing RANK"),
                           (["a b"], "'a b' is not a command or handler name"),
                           (["-s", "/x", "x?y"], "'x?y' is not a command or handler name"),
                           (["-s", "/x", "-j", "y", "status"], "-s and -j exclude each other")]:
            r = self.ctl(*args)
            self.assertCtl(r, 2)
            self.assertIn(flag, r.err)
        r = self.ctl("logs", "--help")
        self.assertCtl(r, 0)
        self.assertIn("usage: elasticctl [-s SOCKET | -j RUN_ID] [--json] logs RANK", r.out)
        r = self.ctl("--help")
        self.assertCtl(r, 0)
        for name in ["status", "events", "logs", "restart", "stop", "signal", "dump", "metrics"]:
            self.assertRegex(r.out, r"(?m)^  %s " % name)
        r = self.ctl("-s", self.path("nothing.sock"), "status")
        self.assertCtl(r, 3)
        self.assertIn("cannot reach elasticd at %s" % self.path("nothing.sock"), r.err)

    # ---- finding the agent (default sockets, in a private /run/elasticd) ----

    def in_ns(self):
        """A wrapper that runs its arguments with self.run_dir on /run/elasticd."""
        self.run_dir = self.path("run")
        os.makedirs(self.run_dir, exist_ok=True)
        return self.write_sh("in-ns", 'exec unshare -m --propagation private /bin/sh -c '
                             '\'mount --bind "$0" %s && exec "$@"\' "%s" "$@"\n'
                             % (RUN_DIR, self.run_dir))

    def start_in_ns(self, run_id):
        wrap = self.in_ns()
        agent = self.write_sh("elasticd-in-ns", 'exec "%s" "%s" "$@"\n' % (wrap, lib.ELASTICD))
        saved = lib.ELASTICD
        lib.ELASTICD = agent
        try:
            a, _ = self.start_agent(sock="default", run_id=run_id, nproc=1)
        finally:
            lib.ELASTICD = saved
        # the wrappers exec elasticd: the pid is the agent's
        p = os.path.join(self.run_dir, run_id + ".sock")
        self.assertTrue(lib.wait_until(lambda: os.path.exists(p), 20), a.stderr_text())
        return a, wrap

    def test_discovery_one_and_several(self):
        problem = unshare_problem()
        if problem:
            self.fail(problem)
        a1, wrap = self.start_in_ns("job-a")
        r = self.ctl("status", "--json", wrap=[wrap])
        self.assertCtl(r, 0)
        self.assertEqual(json.loads(r.out)["run_id"], "job-a")
        a2, _ = self.start_in_ns("job-b")
        r = self.ctl("status", wrap=[wrap])
        self.assertCtl(r, 2)
        self.assertIn("2 elasticd agents answer here; choose one with -j RUN_ID or -s SOCKET",
                      r.err)
        self.assertIn("%s/job-a.sock  (run job-a, " % RUN_DIR, r.err)
        self.assertIn("%s/job-b.sock  (run job-b, " % RUN_DIR, r.err)
        r = self.ctl("-j", "job-b", "status", "--json", wrap=[wrap])
        self.assertCtl(r, 0)
        self.assertEqual(json.loads(r.out)["run_id"], "job-b")

    def test_discovery_agent_gone(self):
        problem = unshare_problem()
        if problem:
            self.fail(problem)
        a, wrap = self.start_in_ns("job-gone")
        a.signal(signal.SIGKILL)
        a.wait(20)
        self.assertTrue(os.path.exists(os.path.join(self.run_dir, "job-gone.sock")))
        r = self.ctl("status", wrap=[wrap])
        self.assertCtl(r, 3)
        self.assertIn("no elasticd agent found; tried:\n  %s/*.sock\n  %s/*/elasticd.sock\n"
                      % (RUN_DIR, RUN_DIR), r.err)
        self.assertIn("  %s/job-gone.sock: Connection refused" % RUN_DIR, r.err)
        stale = os.path.join(self.run_dir, "job-gone.sock")
        r = self.ctl("-s", stale, "status")
        self.assertCtl(r, 3)
        self.assertIn("cannot reach elasticd at %s: Connection refused" % stale, r.err)
        r = self.ctl("-j", "job-gone", "status", wrap=[wrap])
        self.assertCtl(r, 3)
        self.assertIn("no elasticd agent found for run 'job-gone'; tried:\n"
                      "  %s/job-gone/elasticd.sock\n  %s/job-gone.sock\n"
                      "  %s/job-gone.<pid>.sock\n" % (RUN_DIR, RUN_DIR, RUN_DIR), r.err)


if __name__ == "__main__":
    lib.main()
