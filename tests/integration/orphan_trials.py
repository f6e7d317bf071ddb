"""Orphan trials (issue 19): workers that start the four kinds of descendants,
then the agent is SIGKILLed, at once or once settled; count the survivors.

Shared by test_orphans.py (50 trials in CI) and bench/bench_orphans.py (1000).
Standard library only.

Each of the --nproc-per-node workers starts:
  plain    a plain child (subprocess.Popen(['sleep', ...]));
  setsid   a forked Python grandchild that calls os.setsid();
  setsidf  `setsid -f sh -c ...` (re-parented to the agent at once);
  daemon   a double-forked daemon (fork, setsid, fork, the middle one exits);
each writes its own pid file once it is in place, then the worker writes
ready_<rank>. "immediate": SIGKILL as soon as every worker is ready; "settled":
SIGKILL 1.5 s later.
"""

import os
import signal
import subprocess
import sys
import time

KINDS = ("plain", "setsid", "setsidf", "daemon")

WORKER = r"""
import os, subprocess, sys, time
out, tag = sys.argv[1], sys.argv[2]
lr = os.environ['LOCAL_RANK']

def rec(kind, pid):
    p = os.path.join(out, '%s_%s' % (kind, lr))
    with open(p + '.tmp', 'w') as f:
        f.write('%d\n' % pid)
    os.rename(p + '.tmp', p)

def sleeper():
    # Never returns: a Python process that only sleeps.
    while True:
        time.sleep(1000)

plain = subprocess.Popen(['sleep', '1000.' + tag])
rec('plain', plain.pid)
if os.fork() == 0:
    os.setsid()
    rec('setsid', os.getpid())
    sleeper()
subprocess.call(['setsid', '-f', 'sh', '-c', 'echo $$ > "$0/setsidf_$1.tmp";'
                 ' mv "$0/setsidf_$1.tmp" "$0/setsidf_$1"; exec sleep 1000.' + tag, out, lr])
mid = os.fork()
if mid == 0:
    os.setsid()
    if os.fork() == 0:
        rec('daemon', os.getpid())
        sleeper()
    os._exit(0)
os.waitpid(mid, 0)
while not all(os.path.exists(os.path.join(out, '%s_%s' % (k, lr)))
              for k in ('plain', 'setsid', 'setsidf', 'daemon')):
    time.sleep(0.005)
rec('ready', os.getpid())
sleeper()
"""


def read_pid(path):
    try:
        with open(path) as f:
            s = f.read()
    except OSError:
        return None
    return int(s) if s.endswith("\n") and s.strip().isdigit() else None


def alive(pid):
    try:
        with open("/proc/%d/stat" % pid, "rb") as f:
            data = f.read().decode("ascii", "replace")
    except OSError:
        return False
    return data[data.rindex(")") + 2] not in "ZXx"


def write_worker(path):
    with open(path, "w") as f:
        f.write(WORKER)
    return path


def run_trial(start, out, worker, tag, settled, nproc=2, up_timeout=60.0, dead_timeout=10.0):
    """One trial. start(*args) starts elasticd and returns an object with pid,
    signal(sig) and wait(timeout). Returns (survivors, n_descendants) where
    survivors maps each surviving kind to its count; raises RuntimeError when
    the workers never came up."""
    os.makedirs(out, exist_ok=True)
    a = start("--standalone", "--nproc-per-node", str(nproc), "--log-dir", "/dev/null",
              worker, out, tag)
    deadline = time.monotonic() + up_timeout
    while not all(read_pid(os.path.join(out, "ready_%d" % lr)) for lr in range(nproc)):
        if time.monotonic() > deadline:
            a.signal(signal.SIGKILL)
            a.wait(10)
            raise RuntimeError("workers not ready after %.0f s" % up_timeout)
        time.sleep(0.005)
    if settled:
        time.sleep(1.5)
    a.signal(signal.SIGKILL)
    a.wait(10)
    pids = {}
    for k in KINDS:
        for lr in range(nproc):
            p = read_pid(os.path.join(out, "%s_%d" % (k, lr)))
            if p:
                pids[p] = k
    deadline = time.monotonic() + dead_timeout
    while any(alive(p) for p in pids) and time.monotonic() < deadline:
        time.sleep(0.05)
    survivors = {}
    for p, k in pids.items():
        if alive(p):
            survivors[k] = survivors.get(k, 0) + 1
            try:
                os.kill(p, signal.SIGKILL)
            except OSError:
                pass
    return survivors, len(pids)


def plain_start(elasticd, env_extra=None, guard=None):
    """A start() for run_trial outside the test library (the bench)."""
    class Agent:
        def __init__(self, args):
            argv = [elasticd] + (["--orphan-guard", guard] if guard else []) + list(args)
            env = dict(os.environ, **(env_extra or {}))
            self.proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL,
                                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                         env=env)
            self.pid = self.proc.pid

        def signal(self, sig):
            try:
                os.kill(self.pid, sig)
            except OSError:
                pass

        def wait(self, timeout):
            return self.proc.wait(timeout)

    return lambda *args: Agent(args)


if __name__ == "__main__":
    sys.exit("import me")
