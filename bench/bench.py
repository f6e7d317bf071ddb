#!/usr/bin/python3
"""bench.py -- elasticd against torchrun on the same jobs (see bench/README.md).

    /usr/bin/python3 bench/bench.py [--elasticd build/src/elasticd] [--reps 20]
                                    [--torchrun-reps 3] [--no-torchrun]

Figures (each one job of 2 local workers, --standalone):
  1  wall time of `--no-python /bin/true`                 target <= 20 ms  (median)
  2  the agent's peak RSS (VmHWM) while 2 x `sleep 0.5`   target <= 4 MiB  (max)
  3  wall time of 2 x /bin/false with --max-restarts 3    target <= 100 ms (median)
  4  worker exit -> agent reaction (SIGTERM in rank 0)    target <= 1 ms   (p99)

Standard library only. torchrun is `/usr/bin/python3 -m torch.distributed.run`
(torch 1.13 from Debian's python3-torch), run with its default monitor interval
and with --monitor_interval 0.1. The verdicts are informational: the exit status
is 0 whatever they say (2 for a usage error, 1 when a run misbehaves).
"""

import argparse
import glob
import math
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time

PY = "/usr/bin/python3"
HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)

# torch 1.13 on Python >= 3.11 crashes on its own default `-r 0 -t 0`
# (Std.from_str returns None for "0" and "3"). Patch that one function, then
# run torch.distributed.run as __main__, i.e. exactly `python -m
# torch.distributed.run`. Costs nothing measurable: torch is imported anyway.
TORCHRUN_CODE = r"""
import re, runpy, sys
from torch.distributed.elastic.multiprocessing import api as _api
Std = _api.Std
if Std.from_str("0") is None:
    def _from_str(vm):
        if re.match(_api._VALUE_REGEX, vm):
            return Std(int(vm))
        if re.match(_api._MAPPING_REGEX, vm):
            return {int(k): Std(int(v)) for k, v in (p.split(":") for p in vm.split(","))}
        raise ValueError(f"{vm} does not match: <{_api._VALUE_REGEX}> or <{_api._MAPPING_REGEX}>")
    Std.from_str = staticmethod(_from_str)
runpy.run_module("torch.distributed.run", run_name="__main__", alter_sys=True)
"""

# Rank 0 waits in signal.pause() for the agent's SIGTERM and stamps its
# arrival; rank 1 waits until rank 0's handler is in place, stamps the time and
# exits 1 at once. Both stamps are CLOCK_MONOTONIC nanoseconds.
LATENCY_WORKER = r"""
import os, signal, sys, time

d = sys.argv[1]
if os.environ["LOCAL_RANK"] == "0":
    def on_term(signum, frame):
        t = time.clock_gettime_ns(time.CLOCK_MONOTONIC)
        with open(os.path.join(d, "term"), "w") as f:
            f.write(str(t))
        os._exit(0)
    signal.signal(signal.SIGTERM, on_term)
    open(os.path.join(d, "ready"), "w").close()
    while True:
        signal.pause()
else:
    ready = os.path.join(d, "ready")
    deadline = time.monotonic() + 60
    while not os.path.exists(ready) and time.monotonic() < deadline:
        time.sleep(0.001)
    time.sleep(0.01)  # let rank 0 settle into pause()
    with open(os.path.join(d, "exit"), "w") as f:
        f.write(str(time.clock_gettime_ns(time.CLOCK_MONOTONIC)))
        f.flush()
    os._exit(1)
"""

MIB = 1024 * 1024
MS = 1e6  # ns per ms

FIGURES = {
    1: ("wall 2 x /bin/true", "ms", 20.0, "median"),
    2: ("agent peak RSS (VmHWM)", "MiB", 4.0, "max"),
    3: ("wall 2 x /bin/false, --max-restarts 3", "ms", 100.0, "median"),
    4: ("worker exit -> SIGTERM in rank 0", "ms", 1.0, "p99"),
}


class Agent:
    """How to spell one agent's command line."""

    def __init__(self, name, argv0, dash, extra=()):
        self.name, self.argv0, self.dash, self.extra = name, list(argv0), dash, list(extra)

    def argv(self, nproc=2, max_restarts=None, no_python=False, entry=()):
        def flag(s):
            return "--" + (s.replace("_", "-") if self.dash else s)

        a = self.argv0 + ["--standalone", flag("nproc_per_node"), str(nproc)] + self.extra
        if max_restarts is not None:
            a += [flag("max_restarts"), str(max_restarts)]
        if no_python:
            a.append(flag("no_python"))
        return a + list(entry)


def percentile(xs, p):
    """Nearest-rank percentile."""
    s = sorted(xs)
    return s[max(0, math.ceil(p / 100.0 * len(s)) - 1)]


def agent_env(tmpdir):
    env = {k: v for k, v in os.environ.items()
           if not (k.startswith("PET_") or k.startswith("TORCHELASTIC_")
                   or k in ("OMP_NUM_THREADS", "NOTIFY_SOCKET", "LOGLEVEL"))}
    env["PYTHON_EXEC"] = PY
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    env["TMPDIR"] = tmpdir  # both agents make their log dirs here; removed at the end
    return env


LOG = None  # --log: a file that collects every agent's output


def spawn(argv, env):
    if LOG:
        LOG.write(f"\n===== {' '.join(argv if argv[1:2] != ['-c'] else argv[:1] + ['-m', 'torch.distributed.run'] + argv[3:])}\n")
        LOG.flush()
    out = LOG if LOG else subprocess.DEVNULL
    return subprocess.Popen(argv, env=env, stdin=subprocess.DEVNULL, stdout=out, stderr=out,
                            start_new_session=True)


def wait(p, argv, timeout=120):
    """A blocking waitpid(): Popen.wait(timeout=...) polls with growing sleeps
    (0.5, 1, 2, 4 ... ms), which would add up to several ms to every wall time.
    A timer thread kills the run's process group if it hangs."""
    fired = []

    def kill():
        fired.append(True)
        try:
            os.killpg(p.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass

    timer = threading.Timer(timeout, kill)
    timer.daemon = True
    timer.start()
    try:
        rc = p.wait()
    finally:
        timer.cancel()
    if fired:
        raise RuntimeError(f"timed out after {timeout} s: {' '.join(argv[:6])} ...")
    return rc


def timed(argv, env, want_rc):
    t0 = time.perf_counter_ns()
    p = spawn(argv, env)
    rc = wait(p, argv)
    t1 = time.perf_counter_ns()
    if rc != want_rc:
        raise RuntimeError(f"exit status {rc}, expected {want_rc}: {' '.join(argv[:6])} ...")
    return (t1 - t0) / MS


def read_status(pid, keys):
    out = {}
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                k, _, v = line.partition(":")
                if k in keys:
                    out[k] = int(v.split()[0]) * 1024  # kB
    except (OSError, ValueError):
        pass
    return out


def sentinel_pids(pid):
    """elasticd's sentinel: the agent's child named elasticd-sentin."""
    out = []
    try:
        with open(f"/proc/{pid}/task/{pid}/children") as f:
            kids = f.read().split()
    except OSError:
        return out
    for k in kids:
        try:
            with open(f"/proc/{k}/comm") as f:
                if f.read().strip() == "elasticd-sentin":
                    out.append(int(k))
        except OSError:
            pass
    return out


def peak_rss(argv, env):
    """VmHWM of the agent process, read until just before it exits; also the
    sentinel's, when there is one."""
    p = spawn(argv, env)
    hwm = sent = 0
    sentinels = []
    while p.poll() is None:
        st = read_status(p.pid, ("VmHWM",))
        if "VmHWM" in st:
            hwm = st["VmHWM"]
        if not sentinels:
            sentinels = sentinel_pids(p.pid)
        for s in sentinels:
            sent = max(sent, read_status(s, ("VmHWM",)).get("VmHWM", 0))
        time.sleep(0.002)
    if p.returncode != 0:
        raise RuntimeError(f"exit status {p.returncode}: {' '.join(argv[:6])} ...")
    if hwm == 0:
        raise RuntimeError("could not read VmHWM of the agent")
    return hwm / MIB, sent / MIB


def latency(agent, env, script, work):
    d = tempfile.mkdtemp(dir=work, prefix="lat-")
    argv = agent.argv(entry=[script, d])
    p = spawn(argv, env)
    rc = wait(p, argv)
    try:
        with open(os.path.join(d, "exit")) as f:
            t_exit = int(f.read())
        with open(os.path.join(d, "term")) as f:
            t_term = int(f.read())
    except (OSError, ValueError) as e:
        raise RuntimeError(f"latency run left no stamps ({e}); agent exit status {rc}")
    shutil.rmtree(d, ignore_errors=True)
    return (t_term - t_exit) / MS


def signal_floor(env, script, work):
    """What figure 4 costs without an agent: this process stamps the time and
    sends SIGTERM to a rank-0 latency worker waiting in signal.pause()."""
    d = tempfile.mkdtemp(dir=work, prefix="floor-")
    p = subprocess.Popen([PY, "-u", script, d], env=dict(env, LOCAL_RANK="0"),
                         stdin=subprocess.DEVNULL)
    deadline = time.monotonic() + 30
    while not os.path.exists(os.path.join(d, "ready")):
        if time.monotonic() > deadline or p.poll() is not None:
            p.kill()
            raise RuntimeError("the floor worker did not start")
        time.sleep(0.001)
    time.sleep(0.01)
    t0 = time.clock_gettime_ns(time.CLOCK_MONOTONIC)
    os.kill(p.pid, signal.SIGTERM)
    p.wait()
    with open(os.path.join(d, "term")) as f:
        t1 = int(f.read())
    shutil.rmtree(d, ignore_errors=True)
    return (t1 - t0) / MS


def exit_floor(env):
    """The other part of figure 4 that no agent can remove: a Python process
    stamps the time and os._exit(1)s; this process stamps when its blocking
    waitpid() returns (process teardown + wake-up)."""
    r, w = os.pipe()
    code = ("import os, time; os.write(%d, str(time.clock_gettime_ns(time.CLOCK_MONOTONIC))"
            ".encode()); os._exit(1)" % w)
    p = subprocess.Popen([PY, "-c", code], env=env, pass_fds=(w,), stdin=subprocess.DEVNULL)
    os.close(w)
    with os.fdopen(r, "rb") as f:
        t0 = int(f.read())  # EOF when the child's fd closes, i.e. as it exits
    os.waitpid(p.pid, 0)
    t1 = time.clock_gettime_ns(time.CLOCK_MONOTONIC)
    p.returncode = 1  # reaped above
    return (t1 - t0) / MS


def measure(fig, agent, reps, env, work, script):
    xs, extra = [], []
    for _ in range(reps):
        if fig == 1:
            xs.append(timed(agent.argv(no_python=True, entry=["/bin/true"]), env, 0))
        elif fig == 2:
            hwm, sent = peak_rss(agent.argv(no_python=True, entry=["/bin/sleep", "0.5"]), env)
            xs.append(hwm)
            extra.append(sent)
        elif fig == 3:
            # A private TMPDIR per run, to check that all 4 attempts happened.
            tmp = tempfile.mkdtemp(dir=work, prefix="restarts-")
            ms = timed(agent.argv(max_restarts=3, no_python=True, entry=["/bin/false"]),
                       dict(env, TMPDIR=tmp), 1)
            attempts = glob.glob(os.path.join(tmp, "torchelastic_*", "*", "attempt_*"))
            shutil.rmtree(tmp, ignore_errors=True)
            if len(attempts) != 4:
                print(f"warning: {agent.name}: a run made {len(attempts)} attempts, not 4; "
                      f"not counted (use --log FILE to see why)", file=sys.stderr)
                continue
            xs.append(ms)
        else:
            xs.append(latency(agent, env, script, work))
    return xs, extra


def fmt(x, unit):
    if unit == "MiB":
        return f"{x:9.2f}"
    return f"{x:9.3f}" if x < 100 else f"{x:9.1f}" if x < 10000 else f"{x:9.0f}"


def main():
    ap = argparse.ArgumentParser(description="elasticd vs torchrun micro-benchmarks")
    ap.add_argument("--elasticd", default=os.path.join(ROOT, "build", "src", "elasticd"),
                    help="elasticd binary (default: build/src/elasticd)")
    ap.add_argument("--reps", type=int, default=20, help="repetitions for elasticd (20)")
    ap.add_argument("--torchrun-reps", type=int, default=3,
                    help="repetitions for each torchrun variant (3)")
    ap.add_argument("--no-torchrun", action="store_true", help="measure elasticd only")
    ap.add_argument("--figures", default="1,2,3,4", help="which figures, e.g. 1,4 (all)")
    ap.add_argument("--log", metavar="FILE", help="append every agent's stdout/stderr to FILE")
    args = ap.parse_args()
    if args.reps < 1 or args.torchrun_reps < 1:
        ap.error("--reps and --torchrun-reps must be >= 1")
    try:
        figs = [int(x) for x in args.figures.split(",")]
        if not all(f in FIGURES for f in figs):
            raise ValueError
    except ValueError:
        ap.error(f"--figures: expected a comma list of 1..4, not {args.figures!r}")
    global LOG
    if args.log:
        LOG = open(args.log, "a")
    ed = os.path.abspath(args.elasticd)
    if not os.access(ed, os.X_OK):
        ap.error(f"--elasticd: {ed} is not an executable (build it: ninja -C build)")

    agents = [(Agent("elasticd", [ed], dash=True), args.reps)]
    have_torch = False
    if not args.no_torchrun:
        have_torch = subprocess.run([PY, "-c", "import torch.distributed.run"],
                                    capture_output=True).returncode == 0
        if have_torch:
            tr = [PY, "-c", TORCHRUN_CODE]
            agents.append((Agent("torchrun (monitor 5 s)", tr, dash=False), args.torchrun_reps))
            agents.append((Agent("torchrun --monitor_interval 0.1", tr, dash=False,
                                 extra=["--monitor_interval", "0.1"]), args.torchrun_reps))
        else:
            print(f"note: {PY} cannot import torch.distributed.run; torchrun skipped",
                  file=sys.stderr)

    load0 = os.getloadavg()
    work = tempfile.mkdtemp(prefix="elasticd-bench-")
    env = agent_env(work)
    script = os.path.join(work, "latency_worker.py")
    with open(script, "w") as f:
        f.write(LATENCY_WORKER)

    rows = []
    try:
        # Harness cost: Popen + wait of one /bin/true, no agent.
        base = [timed(["/bin/true"], env, 0) for _ in range(args.reps)]
        # Warm the page cache once per agent.
        for agent, _ in agents:
            timed(agent.argv(no_python=True, entry=["/bin/true"]), env, 0)
        for fig in figs:
            name, unit, target, judged = FIGURES[fig]
            if fig == 4:
                floor = [signal_floor(env, script, work) for _ in range(args.reps)]
                rows.append((fig, "  floor: kill() -> handler, no agent", "(info)", unit, None,
                             judged, floor))
                floor = [exit_floor(env) for _ in range(args.reps)]
                rows.append((fig, "  floor: _exit() -> waitpid(), no agent", "(info)", unit,
                             None, judged, floor))
            for agent, reps in agents:
                print(f"  figure {fig}: {agent.name} x {reps} ...", file=sys.stderr, flush=True)
                xs, extra = measure(fig, agent, reps, env, work, script)
                rows.append((fig, name, agent.name, unit, target, judged, xs))
                if extra and any(extra):
                    rows.append((fig, "  sentinel process VmHWM (info)", agent.name, unit, None,
                                 judged, extra))
    finally:
        shutil.rmtree(work, ignore_errors=True)

    uname = os.uname()
    print(f"\nelasticd {ed}\nhost {uname.nodename} {uname.release}, {os.cpu_count()} CPUs, "
          f"{time.strftime('%Y-%m-%d %H:%M %Z')}")
    load1 = os.getloadavg()
    print("load average (1 min) before {:.2f}, after {:.2f}{}".format(
        load0[0], load1[0], "  <- other work on this machine skews the figures"
        if max(load0[0], load1[0]) > 1.5 else ""))
    print(f"harness: Popen+wait of /bin/true alone: median {statistics.median(base):.3f} ms "
          f"(included in every wall time)\n")
    hdr = (f"{'#':>1} {'figure':40} {'agent':32} {'n':>3} {'median':>9} {'p90':>9} {'p99':>9} "
           f"{'max':>9} {'unit':4} {'target':>8} {'on':6} verdict")
    print(hdr)
    print("-" * len(hdr))
    for fig, name, agent, unit, target, judged, xs in rows:
        if not xs:
            print(f"{fig:>1} {name:40} {agent:32} {0:>3} (no valid run)")
            continue
        st = {"median": statistics.median(xs), "p90": percentile(xs, 90),
              "p99": percentile(xs, 99), "max": max(xs)}
        if target is None:
            tgt, on, verdict = "", "", ""
        else:
            tgt, on = f"<= {target:g}", judged
            verdict = "PASS" if st[judged] <= target else "MISS"
        print(f"{fig:>1} {name:40} {agent:32} {len(xs):>3} {fmt(st['median'], unit)} "
              f"{fmt(st['p90'], unit)} {fmt(st['p99'], unit)} {fmt(st['max'], unit)} "
              f"{unit:4} {tgt:>8} {on:6} {verdict}")
    if have_torch and 4 in figs:
        print("\nnote: torchrun notices a worker exit only at its next monitor poll (it sleeps "
              "--monitor_interval\nbefore every poll), so its figure 4 is spread over "
              "[0, interval] plus the poll's own cost.")
    return 0


if __name__ == "__main__":
    sys.exit(main())
