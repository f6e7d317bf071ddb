#!/usr/bin/python3
"""bench_hang.py -- what the zero-code hang rules cost, and how fast they act.

    /usr/bin/python3 bench/bench_hang.py [--build build-rel] [--ranks 64]
        [--attempts 30] [--silence 1] [--rates 10000,50000] [--seconds 4]

Figures:
  1  detection latency with --nproc-per-node RANKS -t 3 --hang-silence S, every
     rank writing its output as fast as the agent reads it. In each attempt
     one rank (attempt % RANKS) stops writing after a random 0.5-1 s and
     stamps CLOCK_MONOTONIC right after its last write(2) returned; its
     SIGABRT handler (Python's, installed over faulthandler's) stamps again.
     latency = t_sigabrt - (t_last + S): the rule's deadline to the signal in
     the hung rank, including the agent's read lag of that last line, its
     timer, the event and the kill(2). --max-restarts ATTEMPTS-1: every
     attempt is one sample. Also, from the elasticd.worker.hang events, the
     agent's own lateness (idle_s - S at the moment the rule fired).
  2  agent CPU (utime + stime of the agent from /proc/<pid>/stat, while the
     workers write) per 1000 lines/s of tee'd output (-t 3, 8 ranks, 80-byte
     lines paced in 10 ms batches, one line in 10 matches "step [0-9]+"), with
     no rule, and with --hang-cadence 'step [0-9]+' --hang-cadence-interval 600.
     Unit: milliseconds of agent CPU per second per 1000 lines/s, i.e. tenths
     of a percent of one CPU (the same figure as microseconds per line).

The agent's stdout and stderr (where -t copies the lines) go to /dev/null.
Standard library only; exits 1 when a run fails. Prints the load average
before and after each figure.
"""

import argparse
import glob
import json
import os
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.abspath(os.path.dirname(os.path.abspath(__file__))))
PY = "/usr/bin/python3"

HUNG_WORKER = r"""
import os, random, signal, sys, time
out, silence = sys.argv[1], float(sys.argv[2])
rank = int(os.environ["LOCAL_RANK"])
attempt = int(os.environ["TORCHELASTIC_RESTART_COUNT"])
hung = rank == attempt % int(os.environ["LOCAL_WORLD_SIZE"])
line = b"rank %3d attempt %3d: " % (rank, attempt) + b"x" * 56 + b"\n"
batch = line * 64
now = lambda: time.clock_gettime_ns(time.CLOCK_MONOTONIC)
if hung:
    stamps = {}
    def abrt(signo, frame):
        t, real = now(), time.time_ns()
        with open(os.path.join(out, "a%d" % attempt), "w") as f:
            f.write("%d %d %d\n" % (stamps["last"], t, real))
        os._exit(134)
    signal.signal(signal.SIGABRT, abrt)
    end = time.monotonic() + random.uniform(0.5, 1.0)
    while time.monotonic() < end:
        os.write(1, batch)
    os.write(1, line)
    stamps["last"] = now()
    time.sleep(silence + 30)
    os._exit(3)
while True:
    os.write(1, batch)
"""

RATE_WORKER = r"""
import os, sys, time
rate, seconds, ready = float(sys.argv[1]), float(sys.argv[2]), sys.argv[3]
rank = int(os.environ["LOCAL_RANK"])
per_tick = max(1, int(rate / 100))
open(os.path.join(ready, str(rank)), "w").close()
t0 = time.monotonic()
i = 0
tick = 0
while True:
    tick += 1
    lines = []
    for _ in range(per_tick):
        if i % 10 == 0:
            lines.append("step %d loss 0.123456 lr 0.000100 rank %d tokens/s 123456.7\n" % (i // 10, rank))
        else:
            lines.append("info: rank %d batch %d shard 00017 fetched in 0.0021 s.......\n" % (rank, i))
        i += 1
    os.write(1, "".join(lines).encode())
    t = t0 + tick * 0.01
    if t - t0 >= seconds:
        break
    d = t - time.monotonic()
    if d > 0:
        time.sleep(d)
with open(os.path.join(ready, "n%d" % rank), "w") as f:
    f.write("%d %.6f\n" % (i, time.monotonic() - t0))
"""


def pct(xs, p):
    """Nearest-rank percentile."""
    s = sorted(xs)
    k = max(0, min(len(s) - 1, -(-p * len(s) // 100) - 1))
    return s[int(k)]


def load():
    return "%.2f" % os.getloadavg()[0]


def cpu_ticks(pid):
    with open("/proc/%d/stat" % pid) as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return int(fields[11]) + int(fields[12])  # utime, stime (fields 14, 15)


def env():
    e = {k: v for k, v in os.environ.items()
         if not k.startswith(("PET_", "TORCHELASTIC_")) and k != "PYTHONFAULTHANDLER"}
    e["PYTHON_EXEC"] = PY
    e["PYTHONDONTWRITEBYTECODE"] = "1"
    return e


def figure1(elasticd, ranks, attempts, silence):
    with tempfile.TemporaryDirectory(prefix="bench-hang-") as d:
        script = os.path.join(d, "hung.py")
        with open(script, "w") as f:
            f.write(HUNG_WORKER)
        out = os.path.join(d, "out")
        os.makedirs(out)
        logs = os.path.join(d, "logs")
        argv = [elasticd, "--standalone", "--nproc-per-node", str(ranks), "-t", "3",
                "--log-dir", logs, "--max-restarts", str(attempts - 1), "--hang-silence",
                str(silence), script, out, str(silence)]
        t = time.monotonic()
        res = subprocess.run(argv, env=env(), cwd=d, stdin=subprocess.DEVNULL,
                             stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, timeout=3600)
        wall = time.monotonic() - t
        if res.returncode != 1:
            sys.stderr.write(res.stderr.decode(errors="replace")[-4000:])
            raise SystemExit("bench_hang.py: figure 1: elasticd exited %d, not 1"
                             % res.returncode)
        e2e, abrt_real = {}, {}
        for p in glob.glob(os.path.join(out, "a*")):
            with open(p) as f:
                last, abrt, real = (int(x) for x in f.read().split())
            e2e[int(os.path.basename(p)[1:])] = (abrt - last) / 1e6 - silence * 1000
            abrt_real[int(os.path.basename(p)[1:])] = real / 1e6
        (run_dir,) = glob.glob(os.path.join(logs, "*"))
        with open(os.path.join(run_dir, "events.jsonl")) as f:
            evs = [json.loads(line) for line in f]
        late, agent = [], []
        for e in evs:
            if e["name"] != "elasticd.worker.hang":
                continue
            m = e["metadata"]
            late.append((m["idle_s"] - m["limit_s"]) * 1000)
            # The event is recorded right before the kill(2), its timestamp
            # in ms (truncated): the agent's deadline is idle_s - limit_s
            # before it.
            if m["attempt"] in abrt_real:
                agent.append(abrt_real[m["attempt"]] - e["timestamp"] + late[-1])
        return list(e2e.values()), agent, late, wall


def figure2(elasticd, rate, seconds, rule):
    ranks = 8
    with tempfile.TemporaryDirectory(prefix="bench-hang-") as d:
        script = os.path.join(d, "rate.py")
        with open(script, "w") as f:
            f.write(RATE_WORKER)
        ready = os.path.join(d, "ready")
        os.makedirs(ready)
        argv = [elasticd, "--standalone", "--nproc-per-node", str(ranks), "-t", "3",
                "--log-dir", os.path.join(d, "logs")]
        if rule:
            argv += ["--hang-cadence", "step [0-9]+", "--hang-cadence-interval", "600"]
        argv += [script, str(rate / ranks), str(seconds), ready]
        p = subprocess.Popen(argv, env=env(), cwd=d, stdin=subprocess.DEVNULL,
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        while len(os.listdir(ready)) < ranks:
            time.sleep(0.01)
        time.sleep(0.2)
        c0, t0 = cpu_ticks(p.pid), time.monotonic()
        time.sleep(seconds - 0.6)
        c1, t1 = cpu_ticks(p.pid), time.monotonic()
        if p.wait(timeout=120) != 0:
            raise SystemExit("bench_hang.py: figure 2: elasticd exited %d" % p.returncode)
        lines = secs = 0
        for r in range(ranks):
            with open(os.path.join(ready, "n%d" % r)) as f:
                n, s = f.read().split()
                lines += int(n)
                secs = max(secs, float(s))
        hz = os.sysconf("SC_CLK_TCK")
        cpu = (c1 - c0) / hz / (t1 - t0)  # CPUs
        real_rate = lines / secs
        return cpu, real_rate


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default=os.path.join(ROOT, "build-rel"))
    ap.add_argument("--ranks", type=int, default=64)
    ap.add_argument("--attempts", type=int, default=30)
    ap.add_argument("--silence", type=float, default=1.0)
    ap.add_argument("--rates", default="10000,50000")
    ap.add_argument("--seconds", type=float, default=4.0)
    ap.add_argument("--figures", default="1,2")
    ap.add_argument("--verbose", action="store_true", help="print figure 1's samples")
    args = ap.parse_args()
    elasticd = os.path.abspath(os.path.join(args.build, "src", "elasticd"))
    if not os.access(elasticd, os.X_OK):
        print("bench_hang.py: %s is not built" % elasticd, file=sys.stderr)
        return 2
    figs = args.figures.split(",")
    if "1" in figs:
        l0 = load()
        e2e, agent, late, wall = figure1(elasticd, args.ranks, args.attempts, args.silence)
        print("1  %d ranks teeing at full speed, --hang-silence %g, %d samples in %.0f s "
              "(load %s -> %s)" % (args.ranks, args.silence, len(e2e), wall, l0, load()))
        for name, xs in (("agent's deadline -> SIGABRT in the rank", agent),
                         ("  of which: lateness at fire (idle_s-S)", late),
                         ("last write + S -> SIGABRT in the rank", e2e)):
            print("   %-40s p50 %7.2f ms  p99 %7.2f ms  max %7.2f ms  (n=%d)%s" % (
                name, pct(xs, 50), pct(xs, 99), max(xs), len(xs),
                "  target p99 <= 50 ms: %s" % ("met" if pct(xs, 99) <= 50 else "NOT met")
                if xs is agent else ""))
        if args.verbose:
            print("   samples (agent's deadline -> SIGABRT, ms): %s" % " ".join(
                "%.1f" % x for x in sorted(agent)))
    if "2" in figs:
        for rate in (float(r) for r in args.rates.split(",")):
            for rule in (False, True):
                l0 = load()
                cpu, real = figure2(elasticd, rate, args.seconds, rule)
                print("2  %-8s %7.0f lines/s: agent %5.1f %% of a CPU = %.2f ms CPU/s per "
                      "1000 lines/s (load %s -> %s)" % (
                          "cadence" if rule else "no rule", real, cpu * 100,
                          cpu * 1000 / (real / 1000), l0, load()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
