"""Helpers for elasticd's integration tests (Python standard library only).

The tests run the real elasticd binary on real processes. Every run gets:
  - its own temporary directory (ElasticdTestCase.tmp),
  - an environment marker ELASTICD_IT_MARKER=<uuid> that every process it
    starts inherits (workers, their children, the sentinel), so that leftovers
    can be found in /proc/*/environ and killed in tearDown,
  - stdout/stderr captured into files (never pipes: a leftover process holding
    a pipe must not hang the test, and 50 MB of output must not fill one).

Environment (set by tests/meson.build): ELASTICD (the binary), PYTHON_EXEC,
TESTS_DIR, SOURCE_ROOT, SIGTERM_WITNESS.
"""

import json
import os
import re
import resource
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import unittest
import uuid

HERE = os.path.dirname(os.path.abspath(__file__))
SOURCE_ROOT = os.environ.get("SOURCE_ROOT") or os.path.dirname(os.path.dirname(HERE))
ELASTICD = os.environ.get("ELASTICD") or os.path.join(SOURCE_ROOT, "build", "src", "elasticd")
PYTHON_EXEC = os.environ.get("PYTHON_EXEC") or "/usr/bin/python3"

MARKER_VAR = "ELASTICD_IT_MARKER"

# Variables of the caller's environment that would change elasticd's behaviour.
_SCRUB_PREFIXES = ("PET_", "TORCHELASTIC_", "TORCH_ELASTIC_")
_SCRUB = {
    "OMP_NUM_THREADS", "NCCL_ASYNC_ERROR_HANDLING", "TORCH_NCCL_ASYNC_ERROR_HANDLING",
    "LOGLEVEL", "NOTIFY_SOCKET", "WATCHDOG_USEC", "WATCHDOG_PID", "LISTEN_FDS",
    "LISTEN_PID", "LISTEN_FDNAMES", "CUDA_VISIBLE_DEVICES", "MASTER_ADDR", "MASTER_PORT",
    "RANK", "LOCAL_RANK", "WORLD_SIZE", "GROUP_RANK", "ROLE_RANK", "ROLE_NAME",
    "LOCAL_WORLD_SIZE", "GROUP_WORLD_SIZE", "ROLE_WORLD_SIZE",
}

HANDLED_SIGNALS = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGQUIT)


def _install_sigterm_witness():
    """A runner killed by SIGTERM names the sender on stderr before it dies
    (tests/sigterm_witness.c); meson alone only says "killed by signal 15"."""
    path = os.environ.get("SIGTERM_WITNESS")
    if not path:
        return
    import ctypes
    if ctypes.CDLL(path).sigterm_witness_install() != 0:
        raise OSError("sigterm_witness_install failed")


_install_sigterm_witness()


def free_port(host=""):
    """A port below the kernel's ephemeral range (which other processes'
    outgoing connections take at any moment), free on host right now."""
    import random
    while True:
        port = random.randrange(20000, 32000)
        with socket.socket() as s:
            try:
                s.bind((host, port))
            except OSError:
                continue
            return port


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# A static single-node run hosts its store on --master-port, 29500 by default;
# test files run in parallel, so each gets its own default (a test that wants
# torchrun's passes PET_MASTER_PORT=None).
MASTER_PORT = str(_free_port())


TCPSTORE_TOOL = os.environ.get("TCPSTORE_TOOL") or os.path.join(
    SOURCE_ROOT, "build", "tests", "tcpstore_tool")


class StoreServer:
    """tcpstore_tool serve on an ephemeral port; stops when stdin closes."""

    def __init__(self, max_conns=None, stall_ms=None, merge_attempts=False):
        args = [TCPSTORE_TOOL, "serve", "0"] + ([str(max_conns)] if max_conns else [])
        env = dict(os.environ)
        if stall_ms:
            env["TCPSTORE_STALL_MS"] = str(stall_ms)
        if merge_attempts:
            env["TCPSTORE_MERGE_ATTEMPTS"] = "1"
        self.proc = subprocess.Popen(args, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     env=env)
        line = self.proc.stdout.readline().decode()
        assert line.startswith("port "), line
        self.port = int(line.split()[1])

    def close(self):
        self.proc.stdin.close()
        self.proc.stdout.close()
        try:
            self.proc.wait(5)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


def clean_env(**extra):
    """os.environ without anything that steers elasticd, plus this test
    process's PET_MASTER_PORT and extra (None removes)."""
    env = {k: v for k, v in os.environ.items()
           if k not in _SCRUB and not k.startswith(_SCRUB_PREFIXES)}
    env["PET_MASTER_PORT"] = MASTER_PORT
    env["PYTHON_EXEC"] = PYTHON_EXEC
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    for k, v in extra.items():
        if v is None:
            env.pop(k, None)
        else:
            env[k] = v
    return env


# ---- /proc --------------------------------------------------------------------

def proc_stat(pid):
    """(state, ppid, pgid, sid) of pid from /proc/<pid>/stat, or None when gone."""
    try:
        with open("/proc/%d/stat" % pid, "rb") as f:
            data = f.read().decode("ascii", "replace")
    except (FileNotFoundError, ProcessLookupError, PermissionError):
        return None
    rest = data[data.rindex(")") + 2:].split()
    return rest[0], int(rest[1]), int(rest[2]), int(rest[3])


def pid_alive(pid):
    """True when pid exists and is not a zombie (or dead)."""
    st = proc_stat(pid)
    return st is not None and st[0] not in ("Z", "X", "x")


def proc_comm(pid):
    try:
        with open("/proc/%d/comm" % pid) as f:
            return f.read().strip()
    except OSError:
        return None


def proc_cmdline(pid):
    try:
        with open("/proc/%d/cmdline" % pid, "rb") as f:
            return f.read().split(b"\0")
    except OSError:
        return []


def proc_environ(pid):
    try:
        with open("/proc/%d/environ" % pid, "rb") as f:
            return f.read().split(b"\0")
    except OSError:
        return []


def all_pids():
    for name in os.listdir("/proc"):
        if name.isdigit():
            yield int(name)


def find_by_cmdline(marker):
    """Live (non-zombie) pids whose command line contains marker (str or bytes)."""
    if isinstance(marker, str):
        marker = marker.encode()
    me = os.getpid()
    return [p for p in all_pids()
            if p != me and marker in b"\0".join(proc_cmdline(p)) and pid_alive(p)]


def find_by_env_marker(marker):
    """Live (non-zombie) pids whose initial environment has ELASTICD_IT_MARKER=marker."""
    needle = ("%s=%s" % (MARKER_VAR, marker)).encode()
    me = os.getpid()
    return [p for p in all_pids() if p != me and needle in proc_environ(p) and pid_alive(p)]


def children_of(pid):
    out = []
    for p in all_pids():
        st = proc_stat(p)
        if st and st[1] == pid:
            out.append(p)
    return out


def wait_until(pred, timeout=20.0, interval=0.05):
    """Poll pred() until it returns a true value; return that value or None on timeout."""
    deadline = time.monotonic() + timeout
    while True:
        v = pred()
        if v:
            return v
        if time.monotonic() >= deadline:
            return None
        time.sleep(interval)


def wait_for_file(path, timeout=20.0):
    return wait_until(lambda: os.path.exists(path), timeout)


def read_pid_file(path, timeout=20.0):
    """Wait for path to hold a complete pid line and return the pid (or None)."""
    def get():
        try:
            with open(path) as f:
                s = f.read()
        except OSError:
            return None
        if not s.endswith("\n"):
            return None
        return int(s.split()[0])
    return wait_until(get, timeout)


def wait_dead(pids, timeout=15.0):
    """True when none of pids is alive within timeout."""
    return bool(wait_until(lambda: not any(pid_alive(p) for p in pids), timeout))


def kill_quietly(pid, sig=signal.SIGKILL):
    try:
        os.kill(pid, sig)
    except (ProcessLookupError, PermissionError):
        pass


# ---- running elasticd ------------------------------------------------------------

class Result:
    def __init__(self, rc, out, err, elapsed):
        self.rc = rc
        self.out_bytes = out
        self.err_bytes = err
        self.out = out.decode("utf-8", "replace")
        self.err = err.decode("utf-8", "replace")
        self.elapsed = elapsed

    def __repr__(self):
        def tail(s):
            return s if len(s) < 4000 else "...\n" + s[-4000:]
        return "<rc=%r elapsed=%.2fs\n--- stdout ---\n%s\n--- stderr ---\n%s>" % (
            self.rc, self.elapsed, tail(self.out), tail(self.err))


class Agent:
    """A running elasticd, its output going to files."""

    def __init__(self, tc, args, env, cwd, ignore_signals, pass_fds, cpus=None, rt=False,
                 nofile=None, new_session=False):
        self.tc = tc
        n = tc._next_run()
        self.out_path = os.path.join(tc.tmp, "agent%d.stdout" % n)
        self.err_path = os.path.join(tc.tmp, "agent%d.stderr" % n)
        self._out = open(self.out_path, "wb")
        self._err = open(self.err_path, "wb")
        ignored = tuple(ignore_signals)

        def preexec():
            # Start from a known state whatever the test runner had: empty mask,
            # handled signals at their defaults (or ignored when asked: nohup).
            signal.pthread_sigmask(signal.SIG_SETMASK, [])
            for s in HANDLED_SIGNALS:
                signal.signal(s, signal.SIG_IGN if s in ignored else signal.SIG_DFL)
            if new_session:
                os.setsid()
            if nofile is not None:
                resource.setrlimit(resource.RLIMIT_NOFILE, (nofile, nofile))
            if cpus is not None:
                os.sched_setaffinity(0, cpus)
            if rt:
                # elasticd itself real-time, its children back to normal
                # (SCHED_RESET_ON_FORK): after fork the agent always runs
                # first. Best effort: needs CAP_SYS_NICE.
                try:
                    os.sched_setscheduler(0, os.SCHED_FIFO | os.SCHED_RESET_ON_FORK,
                                          os.sched_param(1))
                except OSError:
                    pass

        self.argv = [ELASTICD] + [str(a) for a in args]
        self.start = time.monotonic()
        self.proc = subprocess.Popen(self.argv, env=env, cwd=cwd, stdin=subprocess.DEVNULL,
                                     stdout=self._out, stderr=self._err,
                                     preexec_fn=preexec, pass_fds=pass_fds)
        self.pid = self.proc.pid
        self.result = None

    def signal(self, sig):
        kill_quietly(self.pid, sig)

    def stderr_text(self):
        with open(self.err_path, "rb") as f:
            return f.read().decode("utf-8", "replace")

    def wait_stderr(self, text, timeout=20.0):
        return wait_until(lambda: text in self.stderr_text(), timeout)

    def sentinel_pid(self):
        for p in children_of(self.pid):
            if proc_comm(p) == "elasticd-sentin":
                return p
        return None

    def wait(self, timeout=60.0):
        """Wait for exit; on timeout SIGKILL it, fail the test."""
        if self.result is not None:
            return self.result
        try:
            rc = self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            self._finish(None)
            self.tc.fail("elasticd did not exit within %.0f s: %r" % (timeout, self.result))
        self._finish(rc)
        return self.result

    def _finish(self, rc):
        elapsed = time.monotonic() - self.start
        self._out.close()
        self._err.close()
        with open(self.out_path, "rb") as f:
            out = f.read()
        with open(self.err_path, "rb") as f:
            err = f.read()
        self.result = Result(rc, out, err, elapsed)

    def kill(self):
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()
        if self.result is None:
            self._finish(self.proc.returncode)


class ElasticdTestCase(unittest.TestCase):
    """Base class: a temp dir, a marker, and no processes left behind."""

    maxDiff = 20000

    def setUp(self):
        self.assertTrue(os.access(ELASTICD, os.X_OK), "elasticd not built at %s" % ELASTICD)
        self.tmp = tempfile.mkdtemp(prefix="elasticd-it-%s-" % self._testMethodName[:40])
        self.marker = uuid.uuid4().hex
        self.agents = []
        self._runs = 0

    def tearDown(self):
        for a in self.agents:
            a.kill()
        # Anything that carries our marker and still lives is a leftover: kill it.
        left = wait_until(lambda: not find_by_env_marker(self.marker), timeout=3.0)
        leftovers = [] if left else find_by_env_marker(self.marker)
        for p in leftovers:
            kill_quietly(p)
        if leftovers:
            wait_dead(leftovers, 5.0)
        shutil.rmtree(self.tmp, ignore_errors=True)

    def _next_run(self):
        self._runs += 1
        return self._runs

    # -- environment and scripts --

    def env(self, **extra):
        env = clean_env(**extra)
        env[MARKER_VAR] = self.marker
        return env

    def path(self, *parts):
        return os.path.join(self.tmp, *parts)

    def write_script(self, name, text, executable=False):
        p = self.path(name)
        with open(p, "w") as f:
            f.write(text)
        if executable:
            os.chmod(p, 0o755)
        return p

    def write_py(self, name, text):
        """A Python worker script (run by elasticd as PYTHON_EXEC -u script)."""
        return self.write_script(name, text)

    def write_sh(self, name, text):
        """An executable /bin/sh script (for --no-python)."""
        return self.write_script(name, "#!/bin/sh\n" + text, executable=True)

    # -- running --

    def start(self, *args, env=None, cwd=None, ignore_signals=(), pass_fds=(), cpus=None,
              rt=False, nofile=None, new_session=False):
        """Start elasticd with args; returns an Agent. cpus: CPU affinity (a set);
        rt: run elasticd SCHED_FIFO (children SCHED_OTHER) when permitted;
        nofile: RLIMIT_NOFILE for elasticd; new_session: elasticd leads its own
        session and process group (as a job started from a terminal)."""
        a = Agent(self, args, self.env() if env is None else env, cwd or self.tmp,
                  ignore_signals, pass_fds, cpus, rt, nofile, new_session)
        self.agents.append(a)
        return a

    def run_elasticd(self, *args, timeout=60.0, **kw):
        """Run elasticd to completion; returns a Result."""
        return self.start(*args, **kw).wait(timeout)

    # -- assertions --

    def assertRc(self, res, rc):
        self.assertEqual(res.rc, rc, "unexpected exit status: %r" % (res,))

    def assertNoLeftovers(self, timeout=10.0):
        """No live process carrying this test's marker (workers, their children, sentinel)."""
        ok = wait_until(lambda: not find_by_env_marker(self.marker), timeout)
        if not ok:
            left = find_by_env_marker(self.marker)
            desc = ["%d %s %r" % (p, proc_stat(p), proc_cmdline(p)) for p in left]
            self.fail("processes left behind:\n" + "\n".join(desc))

    def run_dirs(self, log_dir):
        """The run directories (<run_id>_<8 chars>) under log_dir."""
        return sorted(os.path.join(log_dir, d) for d in os.listdir(log_dir))

    def attempts(self, run_dir):
        """The attempt_<n> directories of a run dir, sorted by n (other entries,
        such as events.jsonl, are elasticd's own)."""
        names = [d for d in os.listdir(run_dir) if re.match(r"^attempt_\d+$", d)]
        return sorted(names, key=lambda d: int(d.split("_")[1]))

    # -- the env dumps of tests whose workers write w_* JSON files to self.dumps --

    def dumps_where(self, pred):
        """The workers' env dumps in self.dumps (files w_*, JSON) that pred takes."""
        out = []
        for name in sorted(os.listdir(self.dumps)):
            if not name.startswith("w_") or "." in name:
                continue
            with open(os.path.join(self.dumps, name)) as f:
                d = json.load(f)
            if pred(d):
                out.append(d)
        return out

    def wait_world(self, world, n, timeout=40):
        """Wait for n dumps with WORLD_SIZE world; fail the test when they do not come."""
        got = wait_until(
            lambda: len(self.dumps_where(lambda d: d["WORLD_SIZE"] == str(world))) >= n or None,
            timeout)
        self.assertTrue(got, "world %d: only %r" % (world, self.dumps_where(lambda d: True)))
        return self.dumps_where(lambda d: d["WORLD_SIZE"] == str(world))

    def only_run_dir(self, log_dir, run_id=None):
        dirs = self.run_dirs(log_dir)
        self.assertEqual(len(dirs), 1, "expected one run dir in %s: %r" % (log_dir, dirs))
        if run_id is not None:
            self.assertRegex(os.path.basename(dirs[0]), r"^%s_[a-z0-9_]{8}$" % re.escape(run_id))
        return dirs[0]


def read_bytes(path):
    with open(path, "rb") as f:
        return f.read()


def read_text(path):
    with open(path) as f:
        return f.read()


def read_json(path):
    with open(path) as f:
        return json.load(f)


def failure_table(stderr):
    """The ChildFailedError table text in stderr (from the marker line on), or None."""
    i = stderr.find("torch.distributed.elastic.multiprocessing.errors.ChildFailedError:")
    return None if i < 0 else stderr[i:]


def main():
    """Run the file's tests. A skipped test (a missing dependency: no writable
    cgroup v2, no unshare) makes the exit status 77, meson's SKIP, which
    tests/run-all.sh counts as a failure: a skip is never silent."""
    result = unittest.main(verbosity=2, exit=False).result
    if not result.wasSuccessful():
        sys.exit(1)
    sys.exit(77 if result.skipped else 0)
