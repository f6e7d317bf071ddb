#!/usr/bin/python3
"""elasticd as a systemd service, seen from outside with the real binary:

- the --config file: a job run from it, precedence (command line > PET_* >
  file > default), the command line's entrypoint replacing the file's,
  FILE:LINE errors with exit status 2 and nothing started, the shipped example;
- sd_notify: datagrams captured on an abstract socket of the test's own
  (NOTIFY_SOCKET=@...), with the sender's pid from SCM_CREDENTIALS: READY=1
  while the first rendezvous still waits for nodes, STATUS= progress,
  STOPPING=1 at the end, WATCHDOG=1 at WATCHDOG_USEC/2, only for our pid;
- SIGHUP: re-opens the event log as a service (and keeps the workers
  running), stops the job when signals-to-handle lists it;
- installation: `meson install --destdir` puts the binary, the unit, the man
  pages and the example config in place, and `systemd-analyze verify` accepts
  the installed unit in that root (its ExecStart= binary, its man: pages).
"""

import json
import os
import shutil
import signal
import socket
import struct
import subprocess
import sys
import threading
import time
import uuid

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import lib  # noqa: E402

TESTS_DIR = os.environ.get("TESTS_DIR") or os.path.dirname(lib.HERE)
EXAMPLE = os.path.join(lib.SOURCE_ROOT, "packaging", "elasticd.conf.example")
BUILD_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(lib.ELASTICD)))
TOPO_1NODE = os.path.join(TESTS_DIR, "data", "topo", "host-1node.xml")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class NotifyReceiver:
    """An abstract AF_UNIX datagram socket standing in for systemd's: every
    datagram is kept with its arrival time and sender pid."""

    def __init__(self):
        self.name = "elasticd-it-notify-%s" % uuid.uuid4().hex
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_PASSCRED, 1)
        self.sock.bind("\0" + self.name)
        self.sock.settimeout(0.05)
        self.got = []  # (monotonic time, pid, payload str)
        self.lock = threading.Lock()
        self.stop = False
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    @property
    def address(self):
        return "@" + self.name

    def _run(self):
        creds_len = struct.calcsize("3i")
        while not self.stop:
            try:
                data, anc, _, _ = self.sock.recvmsg(4096, socket.CMSG_SPACE(creds_len))
            except socket.timeout:
                continue
            except OSError:
                return
            pid = None
            for level, kind, blob in anc:
                if level == socket.SOL_SOCKET and kind == socket.SCM_CREDENTIALS:
                    pid = struct.unpack("3i", blob[:creds_len])[0]
            with self.lock:
                self.got.append((time.monotonic(), pid, data.decode("utf-8", "replace")))

    def messages(self):
        with self.lock:
            return list(self.got)

    def payloads(self):
        return [m[2] for m in self.messages()]

    def wait_for(self, pred, timeout=20.0):
        """The first datagram whose payload satisfies pred, or None."""
        def find():
            for m in self.messages():
                if pred(m[2]):
                    return m
            return None
        return lib.wait_until(find, timeout)

    def close(self):
        self.stop = True
        self.thread.join(2)
        self.sock.close()


def lines_of(payload):
    return payload.split("\n")


class SystemdTestCase(lib.ElasticdTestCase):

    def write_conf(self, text, name="job.conf"):
        return self.write_script(name, text)

    def receiver(self):
        rx = NotifyReceiver()
        self.addCleanup(rx.close)
        return rx


# ---- the configuration file ------------------------------------------------------

# Writes its argv, one argument per line, and its role to <dir>/w_<LOCAL_RANK>.
ARGV_DUMP = """#!/bin/sh
d="$1"; shift
{ echo "ROLE_NAME=$ROLE_NAME"; echo "NOTIFY_SOCKET=${NOTIFY_SOCKET-unset}"; \
  for a in "$@"; do printf '[%s]\\n' "$a"; done; } > "$d/w_$LOCAL_RANK.tmp"
mv "$d/w_$LOCAL_RANK.tmp" "$d/w_$LOCAL_RANK"
"""


class ConfigFileTest(SystemdTestCase):

    def setUp(self):
        super().setUp()
        self.out = self.path("out")
        os.makedirs(self.out)
        self.dump = self.write_script("dump.sh", ARGV_DUMP, executable=True)

    def dumps(self):
        got = {}
        for name in sorted(os.listdir(self.out)):
            if name.startswith("w_") and not name.endswith(".tmp"):
                got[int(name[2:])] = lib.read_text(os.path.join(self.out, name)).splitlines()
        return got

    def test_job_from_file(self):
        conf = self.write_conf("""# a job, all from the file
standalone = true
nproc-per-node = 2   # two workers
no-python = yes
log_dir = %s
role = from-file
entrypoint = %s
args = %s --lr 0.1 --name "my run" 'it''s' a\\ b '' '#not-a-comment' $HOME /o.${local_rank} # comment
""" % (self.path("logs"), self.dump, self.out))
        res = self.run_elasticd("--config", conf)
        self.assertRc(res, 0)
        want_args = ["[--lr]", "[0.1]", "[--name]", "[my run]", "[its]", "[a b]", "[]",
                     "[#not-a-comment]", "[$HOME]"]
        got = self.dumps()
        self.assertEqual(sorted(got), [0, 1], res)
        for rank in (0, 1):
            self.assertEqual(got[rank], ["ROLE_NAME=from-file", "NOTIFY_SOCKET=unset"] +
                             want_args + ["[/o.%d]" % rank])
        self.assertEqual(len(self.run_dirs(self.path("logs"))), 1)

    def test_precedence(self):
        conf = self.write_conf("standalone = true\nno-python = true\nrole = file\n"
                               "entrypoint = %s\nargs = %s\n" % (self.dump, self.out))
        # The file alone.
        self.assertRc(self.run_elasticd("--config", conf), 0)
        self.assertEqual(self.dumps()[0][0], "ROLE_NAME=file")
        # PET_* beats the file.
        env = self.env(PET_ROLE="env")
        self.assertRc(self.run_elasticd("--config", conf, env=env), 0)
        self.assertEqual(self.dumps()[0][0], "ROLE_NAME=env")
        # The command line beats both.
        self.assertRc(self.run_elasticd("--config", conf, "--role", "cli", env=env), 0)
        self.assertEqual(self.dumps()[0][0], "ROLE_NAME=cli")

    def test_command_line_entrypoint_wins(self):
        other = self.write_sh("other.sh", 'echo "$@" > "$1/other"\n')
        conf = self.write_conf("standalone = true\nno-python = true\n"
                               "entrypoint = %s\nargs = %s --from-file\n" % (self.dump, self.out))
        res = self.run_elasticd("--config", conf, other, self.out, "--from-cli")
        self.assertRc(res, 0)
        self.assertEqual(self.dumps(), {}, "the file's entrypoint ran")
        self.assertEqual(lib.read_text(os.path.join(self.out, "other")),
                         "%s --from-cli\n" % self.out)

    def test_errors_name_file_and_line(self):
        logs = self.path("logs")
        cases = [
            ("standalone = true\nnproc = 2\nentrypoint = x\n",
             ":2: unknown key 'nproc' (did you mean 'nproc-per-node'?)"),
            ("max-restarts = three\nentrypoint = x\n",
             ":1: max-restarts: invalid value 'three': expected an integer"),
            ("\n\nlog-dir = /a b\nentrypoint = x\n",
             ":3: log-dir: expected one value, got 2 words"),
            ("entrypoint = x\nargs = 'open\n", ":2: args: unterminated ' quote"),
            ("role = a\nrole = b\nentrypoint = x\n", ":2: 'role' is already set on line 1"),
            ("--nnodes 2\n", ":1: expected 'key = value', got '--nnodes 2'"),
        ]
        for text, msg in cases:
            conf = self.write_conf(text, "bad.conf")
            res = self.run_elasticd("--config", conf, "--log-dir", logs)
            self.assertRc(res, 2)
            self.assertIn("elasticd: error: %s%s" % (conf, msg), res.err)
            self.assertFalse(os.path.exists(logs), "something started: %r" % res)
        res = self.run_elasticd("--config", self.path("missing.conf"), "x")
        self.assertRc(res, 2)
        self.assertIn("--config: cannot read '%s': No such file or directory"
                      % self.path("missing.conf"), res.err)

    def test_shipped_example_parses(self):
        # Every line of the example is read and checked; --dry-run then plans
        # its GPUs on a one-node, one-GPU topology (the command line's
        # --numa-binding beats the file's).
        self.assertTrue(os.path.exists(TOPO_1NODE), TOPO_1NODE)
        res = self.run_elasticd("--config", EXAMPLE, "--dry-run", "--numa-binding", "node",
                                "--topology-xml", TOPO_1NODE)
        self.assertRc(res, 0)
        plans = [json.loads(line) for line in res.out.splitlines()]
        self.assertGreaterEqual(len(plans), 1, res)
        self.assertEqual(plans[0]["mode"], "node")


# ---- sd_notify -------------------------------------------------------------------

class NotifyTest(SystemdTestCase):

    def test_ready_before_rendezvous_then_stopping(self):
        # Two nodes wanted, one started: the rendezvous waits, and READY=1 must
        # already be there. Then SIGTERM: STOPPING=1, exit 143.
        rx = self.receiver()
        port = free_port()
        out = self.path("out")
        os.makedirs(out)
        conf = self.write_conf("""nnodes = 2
rdzv-backend = c10d
rdzv-endpoint = 127.0.0.1:%d
rdzv-id = svc
rdzv-conf = join_timeout=120
log-dir = %s
no-python = true
entrypoint = /bin/sh
args = -c 'touch "$0/started"' %s
""" % (port, self.path("logs"), out))
        a = self.start("--config", conf, env=self.env(NOTIFY_SOCKET=rx.address))
        ready = rx.wait_for(lambda p: "READY=1" in lines_of(p))
        self.assertIsNotNone(ready, "no READY=1: %r\n%s" % (rx.payloads(), a.stderr_text()))
        self.assertEqual(ready[1], a.pid, "READY=1 from pid %r, not elasticd's" % ready[1])
        waiting = rx.wait_for(lambda p: "STATUS=waiting for 2 nodes: rendezvous 'svc' (c10d)"
                              in lines_of(p))
        self.assertIsNotNone(waiting, rx.payloads())
        time.sleep(0.5)
        self.assertIsNone(a.proc.poll(), "elasticd exited while waiting for a node")
        self.assertFalse(os.path.exists(os.path.join(out, "started")), "a round completed")
        # READY=1 was the first thing said, and said once.
        msgs = rx.messages()
        self.assertIn("READY=1", lines_of(msgs[0][2]))
        self.assertEqual(sum("READY=1" in lines_of(m[2]) for m in msgs), 1, msgs)

        a.signal(signal.SIGTERM)
        res = a.wait(timeout=30)
        self.assertRc(res, 143)
        stopping = rx.wait_for(lambda p: "STOPPING=1" in lines_of(p), timeout=5)
        self.assertIsNotNone(stopping, rx.payloads())
        self.assertIn("STATUS=stopping: SIGTERM received", stopping[2])
        rx.wait_for(lambda p: p == "STATUS=exiting with status 143", timeout=5)
        msgs = rx.messages()
        self.assertEqual(sum("STOPPING=1" in lines_of(m[2]) for m in msgs), 1, msgs)
        self.assertTrue(all(m[1] == a.pid for m in msgs), msgs)
        self.assertEqual(msgs[-1][2], "STATUS=exiting with status 143")

    def test_run_to_the_end(self):
        rx = self.receiver()
        out = self.path("out")
        os.makedirs(out)
        dump = self.write_script("dump.sh", ARGV_DUMP, executable=True)
        res = self.run_elasticd("--standalone", "--nproc-per-node", "2", "--rdzv-id", "run",
                                "--log-dir", self.path("logs"), "--no-python", dump, out,
                                env=self.env(NOTIFY_SOCKET=rx.address))
        self.assertRc(res, 0)
        rx.wait_for(lambda p: p == "STATUS=exiting with status 0", timeout=5)
        payloads = rx.payloads()

        def index(pred):
            for i, p in enumerate(payloads):
                if pred(p):
                    return i
            self.fail("not found in %r" % payloads)

        i_ready = index(lambda p: "READY=1" in lines_of(p))
        i_wait = index(lambda p: p.startswith("STATUS=waiting for 1 node: rendezvous 'run'"))
        i_run = index(lambda p: p.startswith("STATUS=running round 0 with 2 workers"))
        i_stop = index(lambda p: "STOPPING=1" in lines_of(p))
        self.assertEqual(i_ready, 0, payloads)
        self.assertLess(i_ready, i_wait)
        self.assertLess(i_wait, i_run)
        self.assertLess(i_run, i_stop)
        self.assertIn("STATUS=finishing: worker group succeeded", payloads[i_stop])
        self.assertEqual(payloads[-1], "STATUS=exiting with status 0")
        self.assertFalse(any(p.startswith("WATCHDOG") for p in payloads), payloads)
        # The workers do not see the notification socket.
        for rank in (0, 1):
            dumped = lib.read_text(os.path.join(out, "w_%d" % rank)).splitlines()
            self.assertEqual(dumped[1], "NOTIFY_SOCKET=unset")

    def test_logs_directory_is_the_default_log_dir(self):
        # LogsDirectory=elasticd/%i: systemd sets LOGS_DIRECTORY (a list).
        logs = self.path("var-log-job")
        res = self.run_elasticd("--standalone", "--nproc-per-node", "1", "-r", "3",
                                "--no-python", "/bin/echo", "hi",
                                env=self.env(LOGS_DIRECTORY=logs + ":" + self.path("other")))
        self.assertRc(res, 0)
        run_dir = self.only_run_dir(logs)
        self.assertEqual(lib.read_text(os.path.join(run_dir, "attempt_0", "0", "stdout.log")),
                         "hi\n")
        self.assertTrue(os.path.exists(os.path.join(run_dir, "events.jsonl")))
        self.assertFalse(os.path.exists(self.path("other")))
        # --log-dir still wins.
        res = self.run_elasticd("--standalone", "--log-dir", self.path("mine"), "--no-python",
                                "/bin/true", env=self.env(LOGS_DIRECTORY=logs))
        self.assertRc(res, 0)
        self.only_run_dir(self.path("mine"))
        self.assertEqual(len(self.run_dirs(logs)), 1)

    def test_restart_status(self):
        rx = self.receiver()
        res = self.run_elasticd("--standalone", "--max-restarts", "1", "--log-dir",
                                self.path("logs"), "--no-python", "/bin/sh", "-c", "exit 3",
                                env=self.env(NOTIFY_SOCKET=rx.address))
        self.assertRc(res, 1)
        rx.wait_for(lambda p: p.startswith("STATUS=exiting"), timeout=5)
        payloads = rx.payloads()
        self.assertTrue(any(p.startswith("STATUS=restarting:") for p in payloads), payloads)
        self.assertEqual(sum(p.startswith("STATUS=running round") for p in payloads), 2,
                         payloads)
        self.assertEqual(payloads[-1], "STATUS=exiting with status 1")

    def watchdog_run(self, seconds, watchdog_pid):
        """Run a job of `seconds` under WATCHDOG_USEC=200000; WATCHDOG_PID is
        elasticd's own pid ("self", via sh's exec), another pid, or absent."""
        rx = self.receiver()
        env = self.env(NOTIFY_SOCKET=rx.address, WATCHDOG_USEC="200000")
        args = ["--standalone", "--log-dir", self.path("logs"), "--no-python", "/bin/sh", "-c",
                "sleep %s" % seconds]
        if watchdog_pid == "self":
            cmd = ["/bin/sh", "-c", 'WATCHDOG_PID=$$; export WATCHDOG_PID; exec "$@"', "sh",
                   lib.ELASTICD] + args
        else:
            if watchdog_pid is not None:
                env["WATCHDOG_PID"] = str(watchdog_pid)
            cmd = [lib.ELASTICD] + args
        p = subprocess.run(cmd, env=env, cwd=self.tmp, stdin=subprocess.DEVNULL,
                           stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, timeout=60)
        self.assertEqual(p.returncode, 0, p.stderr.decode())
        rx.wait_for(lambda x: x.startswith("STATUS=exiting"), timeout=5)
        return rx, p.stderr.decode()

    def test_watchdog_cadence(self):
        rx, err = self.watchdog_run(1.5, "self")
        self.assertIn("systemd watchdog: pinging every 0.100 s", err)
        pings = [m for m in rx.messages() if m[2] == "WATCHDOG=1"]
        # 1.5 s of work at one ping per 0.1 s (WATCHDOG_USEC/2).
        self.assertGreaterEqual(len(pings), 9, rx.payloads())
        self.assertLessEqual(len(pings), 20, rx.payloads())
        gaps = sorted(b[0] - a[0] for a, b in zip(pings, pings[1:]))
        median = gaps[len(gaps) // 2]
        self.assertGreater(median, 0.07, gaps)
        self.assertLess(median, 0.15, gaps)
        self.assertLess(gaps[-1], 0.5, "a ping came %.3f s late" % gaps[-1])

    def test_watchdog_without_pid_and_for_another_pid(self):
        rx, _ = self.watchdog_run(0.5, None)
        self.assertGreaterEqual(rx.payloads().count("WATCHDOG=1"), 2, rx.payloads())
        rx, err = self.watchdog_run(0.5, 1)
        self.assertEqual(rx.payloads().count("WATCHDOG=1"), 0, rx.payloads())
        self.assertNotIn("systemd watchdog", err)

    def test_bad_notify_socket_is_a_warning(self):
        res = self.run_elasticd("--standalone", "--log-dir", self.path("logs"), "--no-python",
                                "/bin/true", env=self.env(NOTIFY_SOCKET="relative/path"))
        self.assertRc(res, 0)
        self.assertIn("NOTIFY_SOCKET='relative/path' is not a socket address", res.err)


# ---- SIGHUP ----------------------------------------------------------------------

# Runs until <dir>/go exists; a SIGHUP or SIGTERM is written to <dir>/sig_<rank>,
# then it exits 0.
WAITER = r"""
import os, signal, sys, time
d = sys.argv[1]
rank = os.environ["LOCAL_RANK"]
def h(sig, frame):
    with open(os.path.join(d, "sig_" + rank), "a") as f:
        f.write(signal.Signals(sig).name + "\n")
    os._exit(0)
for s in (signal.SIGHUP, signal.SIGTERM):
    signal.signal(s, h)
open(os.path.join(d, "ready_" + rank), "w").write("%d\n" % os.getpid())
while not os.path.exists(os.path.join(d, "go")):
    time.sleep(0.05)
"""


def event_names(path):
    out = []
    with open(path) as f:
        for line in f:
            ev = json.loads(line)
            md = ev.get("metadata", {})
            out.append((ev.get("name"), md.get("action") if isinstance(md, dict) else None))
    return out


class SighupTest(SystemdTestCase):

    def setUp(self):
        super().setUp()
        self.out = self.path("out")
        os.makedirs(self.out)
        self.script = self.write_py("waiter.py", WAITER)
        self.events = self.path("ev", "events.jsonl")

    def conf(self, extra=""):
        return self.write_conf("standalone = true\nnproc-per-node = 2\nevent-log-file = %s\n"
                               "log-dir = %s\nentrypoint = %s\nargs = %s\n%s"
                               % (self.events, self.path("logs"), self.script, self.out, extra))

    def wait_ready(self, n=2):
        for rank in range(n):
            self.assertTrue(lib.read_pid_file(os.path.join(self.out, "ready_%d" % rank)))

    def test_sighup_reopens_event_log_as_service(self):
        a = self.start("--config", self.conf())
        self.wait_ready()
        # logrotate: move the file away, then SIGHUP.
        rotated = self.events + ".1"
        os.rename(self.events, rotated)
        a.signal(signal.SIGHUP)
        self.assertTrue(a.wait_stderr("Received SIGHUP: re-opened the event log %s"
                                      % self.events), a.stderr_text())
        self.assertTrue(lib.wait_for_file(self.events))
        # A second rotation works the same.
        os.rename(self.events, self.events + ".2")
        a.signal(signal.SIGHUP)
        self.assertTrue(lib.wait_until(lambda: a.stderr_text().count("re-opened the event log")
                                       == 2), a.stderr_text())
        lib.wait_for_file(self.events)
        open(os.path.join(self.out, "go"), "w").close()
        res = a.wait(timeout=30)
        self.assertRc(res, 0)
        # The workers never saw SIGHUP, and kept running.
        self.assertFalse(os.path.exists(os.path.join(self.out, "sig_0")))
        self.assertFalse(os.path.exists(os.path.join(self.out, "sig_1")))
        first = event_names(rotated)
        second = event_names(self.events + ".2")
        last = event_names(self.events)
        self.assertIn(("elasticd.agent.started", None), first)
        self.assertNotIn(("elasticd.signal.received", "reopen"), first)
        # Each re-opened file starts with the event that says so.
        self.assertEqual(second[0], ("elasticd.signal.received", "reopen"))
        self.assertEqual(last[0], ("elasticd.signal.received", "reopen"))
        self.assertEqual(last[-1][0], "elasticd.agent.exit")

    def test_sighup_reopens_under_notify_socket(self):
        # No --config: NOTIFY_SOCKET alone makes it a service.
        rx = self.receiver()
        a = self.start("--standalone", "--nproc-per-node", "2", "--event-log-file", self.events,
                       "--log-dir", self.path("logs"), self.script, self.out,
                       env=self.env(NOTIFY_SOCKET=rx.address))
        self.wait_ready()
        a.signal(signal.SIGHUP)
        self.assertTrue(a.wait_stderr("re-opened the event log"), a.stderr_text())
        open(os.path.join(self.out, "go"), "w").close()
        self.assertRc(a.wait(timeout=30), 0)
        self.assertFalse(os.path.exists(os.path.join(self.out, "sig_0")))

    def test_sighup_reopens_when_not_handled_on_command_line(self):
        a = self.start("--standalone", "--signals-to-handle", "SIGTERM,SIGINT",
                       "--event-log-file", self.events, "--log-dir", self.path("logs"),
                       self.script, self.out)
        self.wait_ready(1)
        a.signal(signal.SIGHUP)
        self.assertTrue(a.wait_stderr("re-opened the event log"), a.stderr_text())
        a.signal(signal.SIGTERM)
        self.assertRc(a.wait(timeout=30), 143)

    def test_sighup_stops_when_listed(self):
        # The file lists SIGHUP: forwarded to the workers, exit 128+1.
        a = self.start("--config", self.conf("signals-to-handle = SIGTERM,SIGHUP\n"))
        self.wait_ready()
        a.signal(signal.SIGHUP)
        res = a.wait(timeout=30)
        self.assertRc(res, 129)
        self.assertNotIn("re-opened", res.err)
        for rank in (0, 1):
            self.assertEqual(lib.read_text(os.path.join(self.out, "sig_%d" % rank)), "SIGHUP\n")

    def test_sighup_without_event_file(self):
        a = self.start("--config", self.write_conf(
            "standalone = true\nevent-log-handler = null\nlog-dir = %s\nentrypoint = %s\n"
            "args = %s\n" % (self.path("logs"), self.script, self.out)))
        self.wait_ready(1)
        a.signal(signal.SIGHUP)
        self.assertTrue(a.wait_stderr("Received SIGHUP: no log file to re-open"),
                        a.stderr_text())
        open(os.path.join(self.out, "go"), "w").close()
        self.assertRc(a.wait(timeout=30), 0)


# ---- installation and the unit ------------------------------------------------

def find_one(root, name):
    hits = []
    for d, _, files in os.walk(root):
        if name in files:
            hits.append(os.path.join(d, name))
    return hits


def unit_settings(path):
    """{(section, key): [values]} of a unit file."""
    out = {}
    section = None
    with open(path) as f:
        for raw in f:
            line = raw.strip()
            if not line or line.startswith(("#", ";")):
                continue
            if line.startswith("["):
                section = line.strip("[]")
                continue
            k, _, v = line.partition("=")
            out.setdefault((section, k.strip()), []).append(v.strip())
    return out


class InstallTest(SystemdTestCase):

    def install(self):
        meson = shutil.which("meson")
        self.assertIsNotNone(meson, "meson is not in PATH")
        root = self.path("root")
        p = subprocess.run([meson, "install", "-C", BUILD_ROOT, "--destdir", root,
                            "--no-rebuild"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                           timeout=120)
        self.assertEqual(p.returncode, 0, p.stdout.decode())
        return root

    def test_install_and_verify_unit(self):
        root = self.install()
        found = {}
        for name in ("elasticd", "elasticd@.service", "elasticd.8", "elasticd.conf.5",
                     "elasticd.conf.example"):
            hits = find_one(root, name)
            self.assertEqual(len(hits), 1, "%s installed as %r" % (name, hits))
            found[name] = hits[0]
        self.assertTrue(os.access(found["elasticd"], os.X_OK))
        self.assertTrue(found["elasticd.8"].endswith("/man8/elasticd.8"))
        self.assertTrue(found["elasticd.conf.5"].endswith("/man5/elasticd.conf.5"))
        self.assertTrue(
            found["elasticd@.service"].endswith("/lib/systemd/system/elasticd@.service"))
        etc = [d for d, _, _ in os.walk(root) if d.endswith("/etc/elasticd")]
        self.assertEqual(len(etc), 1, "no etc/elasticd directory under %s" % root)

        # The installed binary runs, and reads the installed example.
        p = subprocess.run([found["elasticd"], "--version"], stdout=subprocess.PIPE, timeout=30)
        self.assertEqual(p.returncode, 0)
        self.assertRegex(p.stdout.decode(), r"^elasticd \d+\.\d+\.\d+\n$")
        res = self.run_elasticd("--config", found["elasticd.conf.example"], "--dry-run",
                                "--numa-binding", "node", "--topology-xml", TOPO_1NODE)
        self.assertRc(res, 0)

        # The unit as configured: ExecStart= the installed binary (inside root)
        # and the config path under the installed sysconfdir.
        unit = unit_settings(found["elasticd@.service"])
        bindir_path = found["elasticd"][len(root):]
        etc_path = etc[0][len(root):]
        self.assertEqual(unit[("Service", "ExecStart")],
                         ["%s --config %s/%%i.conf" % (bindir_path, etc_path)])
        want = {
            ("Service", "Type"): ["notify"],
            ("Service", "KillMode"): ["mixed"],
            ("Service", "OOMPolicy"): ["continue"],
            ("Service", "Restart"): ["on-failure"],
            ("Service", "RestartPreventExitStatus"): ["2"],
            ("Service", "SuccessExitStatus"): ["129 130 131 143"],
            ("Service", "LimitMEMLOCK"): ["infinity"],
            ("Service", "TasksMax"): ["infinity"],
            ("Service", "RuntimeDirectory"): ["elasticd/%i"],
            ("Service", "ExecReload"): ["/bin/kill -HUP $MAINPID"],
            ("Unit", "After"): ["network-online.target"],
            ("Unit", "Wants"): ["network-online.target"],
        }
        for k, v in want.items():
            self.assertEqual(unit.get(k), v, k)
        # TimeoutStopSec leaves room for the default --shutdown-timeout (30 s).
        self.assertGreaterEqual(int(unit[("Service", "TimeoutStopSec")][0].rstrip("s")), 60)
        # Settings that would break training jobs stay out.
        for k in ("PrivateDevices", "DevicePolicy", "DeviceAllow", "ProtectClock",
                  "MemoryDenyWriteExecute", "NoNewPrivileges", "ProtectKernelModules",
                  "ProtectHome", "PrivateTmp", "RestrictAddressFamilies", "SystemCallFilter",
                  "CapabilityBoundingSet", "PrivateNetwork"):
            self.assertNotIn(("Service", k), unit, k)

        # systemd-analyze verify in that root: the installed unit, the binary
        # its ExecStart= names, and its man: pages (found through MANPATH).
        analyze = shutil.which("systemd-analyze")
        self.assertIsNotNone(analyze, "systemd-analyze is missing (apt-get install systemd)")
        unit_dir = os.path.dirname(found["elasticd@.service"])
        # The root also gets what the unit refers to on every system: the
        # host's targets and slices, and /bin/kill of ExecReload=.
        host_units = "/lib/systemd/system"
        os.makedirs(os.path.join(root, "lib", "systemd", "system"), exist_ok=True)
        for name in os.listdir(host_units):
            if name.endswith((".target", ".slice")):
                src = os.path.join(host_units, name)
                dst = os.path.join(root, "lib", "systemd", "system", name)
                if os.path.isfile(src) and not os.path.exists(dst):
                    shutil.copy(src, dst)
        os.makedirs(os.path.join(root, "bin"), exist_ok=True)
        shutil.copy(os.path.realpath("/bin/kill"), os.path.join(root, "bin", "kill"))
        man_dir = os.path.dirname(os.path.dirname(found["elasticd.8"]))
        env = dict(os.environ, MANPATH=man_dir, SYSTEMD_LOG_LEVEL="notice")
        p = subprocess.run([analyze, "verify", "--root", root, "elasticd@job1.service"],
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env,
                           timeout=120)
        out = p.stdout.decode()
        self.assertEqual((p.returncode, out), (0, ""), "systemd-analyze verify in %s" % root)
        self.assertTrue(os.path.samefile(os.path.dirname(
            find_one(root, "elasticd@.service")[0]), unit_dir))

        # It does catch a broken unit: a misspelt key and a missing binary.
        broken = os.path.join(unit_dir, "elasticd-broken@.service")
        with open(found["elasticd@.service"]) as f:
            text = f.read()
        with open(broken, "w") as f:
            f.write(text.replace("KillMode=mixed", "KillMod=mixed")
                    .replace(bindir_path, bindir_path + "-missing"))
        p = subprocess.run([analyze, "verify", "--root", root, "elasticd-broken@x.service"],
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env,
                           timeout=120)
        out = p.stdout.decode()
        self.assertNotEqual(p.returncode, 0, out)
        self.assertIn("Unknown key 'KillMod'", out)
        self.assertIn("is not executable", out)


if __name__ == "__main__":
    lib.main()
