#!/usr/bin/python3
"""bench_ctl.py -- the control socket under load (man elasticd-ctl(7)).

    /usr/bin/python3 bench/bench_ctl.py [--build build-rel] [--seconds 5] [--reps 30]

One node, --standalone, 2 workers. Figures:
  1  GET /handler/status, 1 client: requests/s, p50, p99     target >= 20000 req/s, p99 <= 1 ms
  2  GET /handler/status, 64 clients: requests/s, p50, p99   target >= 20000 req/s, p99 <= 1 ms
  3  worker exit -> SIGTERM in rank 0, control socket idle   (median, p99 of --reps runs)
  4  the same while 64 clients send GET /handler/status      target: no change from 3
  5  the same with every CPU kept busy by a spinning process and no client: the
     control experiment (on a small machine the clients of figure 4 leave no
     idle CPU, and the workers that must react wait for one)

The clients are tests/ctl_load (one epoll thread, keep-alive connections,
closed loop: each sends its next request when the previous reply is in), so
a request's latency includes the wait for the agent's one thread behind the
other clients' requests: with N clients in flight, latency >= N / throughput.
Figures 3 and 4 use bench.py's method: rank 1 stamps CLOCK_MONOTONIC and
exits 1, rank 0 stamps the arrival of the agent's SIGTERM. Standard library
only; the verdicts are informational (exit 0 whatever they say, 2 for a usage
error, 1 when a run misbehaves).
"""

import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
MS = 1e6  # ns per ms

# Rank 0 waits for the agent's SIGTERM and stamps its arrival; rank 1 waits
# for the bench's "go", stamps the time and exits 1 at once.
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
    go = os.path.join(d, "go")
    deadline = time.monotonic() + 120
    while not os.path.exists(go) and time.monotonic() < deadline:
        time.sleep(0.0005)
    with open(os.path.join(d, "exit"), "w") as f:
        f.write(str(time.clock_gettime_ns(time.CLOCK_MONOTONIC)))
        f.flush()
    os._exit(1)
"""


def wait_for(path, timeout=30):
    deadline = time.monotonic() + timeout
    while not os.path.exists(path):
        if time.monotonic() > deadline:
            raise RuntimeError("%s did not appear" % path)
        time.sleep(0.005)


def percentile(xs, p):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(p / 100.0 * (len(xs) - 1))))]


def agent_env():
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("PET_", "TORCHELASTIC_")) and k != "LOGLEVEL"}
    env["PYTHON_EXEC"] = "/usr/bin/python3"
    return env


def start_agent(elasticd, work, sock, entry):
    log = open(os.path.join(work, "agent.log"), "ab")
    return subprocess.Popen([elasticd, "--standalone", "--nproc-per-node", "2",
                             "--log-dir", os.path.join(work, "logs"), "--control-socket", sock]
                            + entry, env=agent_env(), stdin=subprocess.DEVNULL,
                            stdout=log, stderr=log)


def throughput(elasticd, load, work, seconds, clients):
    sock = os.path.join(work, "t.sock")
    p = start_agent(elasticd, work, sock, ["--no-python", "sleep", "600"])
    try:
        wait_for(sock)
        time.sleep(0.3)  # the workers are up
        out = []
        for n in clients:
            r = subprocess.run([load, sock, "/handler/status", str(n), str(seconds)],
                               capture_output=True, text=True, check=True)
            out.append(json.loads(r.stdout))
        return out
    finally:
        p.send_signal(signal.SIGTERM)
        p.wait(60)


def reaction(elasticd, load, work, script, loaded, burn=False):
    d = tempfile.mkdtemp(dir=work, prefix="lat-")
    sock = os.path.join(d, "c.sock")
    p = start_agent(elasticd, work, sock, [script, d])
    clients = None
    try:
        wait_for(os.path.join(d, "ready"))
        wait_for(sock)
        if loaded:
            clients = subprocess.Popen([load, sock, "/handler/status", "64", "30"],
                                       stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                       text=True)
            time.sleep(0.3)  # the load is on
        burners = []
        if burn:
            # The control experiment: as many busy processes, no client.
            burners = [subprocess.Popen([sys.executable, "-c", "while True: pass"])
                       for _ in range(os.cpu_count())]
            time.sleep(0.3)
        open(os.path.join(d, "go"), "w").close()
        rc = p.wait(60)
        for b in burners:
            b.kill()
            b.wait()
        if rc != 1:
            raise RuntimeError("the agent exited %r, not 1" % rc)
        served = None
        if clients:
            served = json.loads(clients.communicate(timeout=60)[0] or "{}").get("requests")
            if not served:
                raise RuntimeError("the clients got no reply")
        with open(os.path.join(d, "exit")) as f:
            t_exit = int(f.read())
        with open(os.path.join(d, "term")) as f:
            t_term = int(f.read())
        return (t_term - t_exit) / MS
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
        if clients and clients.poll() is None:
            clients.kill()
            clients.wait()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--seconds", type=int, default=5)
    ap.add_argument("--reps", type=int, default=30)
    args = ap.parse_args()
    elasticd = os.path.join(args.build, "src", "elasticd")
    load = os.path.join(args.build, "tests", "ctl_load")
    for p in (elasticd, load):
        if not os.access(p, os.X_OK):
            print("bench_ctl.py: %s is not built" % p, file=sys.stderr)
            return 2
    print("elasticd %s, %d CPUs, %d s per throughput figure, %d reaction runs" %
          (elasticd, os.cpu_count(), args.seconds, args.reps))
    with tempfile.TemporaryDirectory(prefix="bench-ctl-") as work:
        script = os.path.join(work, "latency_worker.py")
        with open(script, "w") as f:
            f.write(LATENCY_WORKER)
        try:
            one, many = throughput(elasticd, load, work, args.seconds, [1, 64])
            idle = [reaction(elasticd, load, work, script, False) for _ in range(args.reps)]
            busy = [reaction(elasticd, load, work, script, True) for _ in range(args.reps)]
            burnt = [reaction(elasticd, load, work, script, False, True)
                     for _ in range(args.reps)]
        except (RuntimeError, subprocess.SubprocessError, OSError, ValueError) as e:
            print("bench_ctl.py: %s" % e, file=sys.stderr)
            try:
                with open(os.path.join(work, "agent.log")) as f:
                    sys.stderr.write(f.read()[-4000:])
            except OSError:
                pass
            return 1
    print()
    print("%-2s %-44s %10s %9s %9s %9s  %s" % ("#", "figure", "req/s", "p50", "p99", "max",
                                             "target"))
    for n, (name, r) in enumerate((("status, 1 client", one), ("status, 64 clients", many)), 1):
        ok = r["rps"] >= 20000 and r["p99_us"] <= 1000
        print("%-2d %-44s %10.0f %7.3f ms %6.3f ms %6.3f ms  >= 20000 req/s, p99 <= 1 ms: %s" %
              (n, name, r["rps"], r["p50_us"] / 1000, r["p99_us"] / 1000, r["max_us"] / 1000,
               "met" if ok else "NOT met"))
    for n, (name, xs) in enumerate((("worker exit -> SIGTERM in rank 0, idle socket", idle),
                                    ("the same under 64 status clients", busy),
                                    ("the same, CPUs busy but no client", burnt)), 3):
        print("%-2d %-44s %10s %7.3f ms %6.3f ms %6.3f ms" %
              (n, name, "", statistics.median(xs), percentile(xs, 99), max(xs)))
    print()
    for name, xs in (("under 64 clients", busy), ("with busy CPUs, no client", burnt)):
        print("reaction %s minus idle: median %+.3f ms, p99 %+.3f ms" %
              (name, statistics.median(xs) - statistics.median(idle),
               percentile(xs, 99) - percentile(idle, 99)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
