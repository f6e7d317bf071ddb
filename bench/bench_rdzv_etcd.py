#!/usr/bin/python3
"""bench_rdzv_etcd.py -- the etcd rendezvous backend at scale.

    /usr/bin/python3 bench/bench_rdzv_etcd.py [--build build] [--agents 2,16,64]
        [--swarm 16,64,256] [--reps 3] [--slice 2500] [--barrier N,...] [--again N,...]
        [--tuned]
        [--protocol grpc|json]

--protocol picks how elasticd talks to etcd (--rdzv-conf etcd_protocol):
grpc, etcd's native API over HTTP/2 (elasticd's default), or json, its JSON
gateway over HTTP/1.1.

--tuned runs etcd as a large job's operator may: GOGC=400 in its environment
(Go's garbage collector runs a quarter as often: GC was about 14 % of etcd's
CPU here) and --backend-batch-interval=10ms (etcd 3.4 commits its write
buffer more often, so the buffer each reader copies stays small); defaults
otherwise.

Figures (one single-member etcd on loopback, data on /dev/shm, started here):
  1  N real elasticd processes (`--nnodes N --rdzv-backend etcd`, one
     `--no-python` worker each): time from launching the first agent to the
     moment the last worker runs (each worker stamps CLOCK_REALTIME).
  2  N rendezvous participants (tests/rdzv_swarm with
     RDZV_SWARM_BACKEND=etcd: elasticd's real etcd backend, one handler per
     participant) in processes of at most --slice each, started at once: time
     until every participant has its round, rank exchange included, and the
     bytes read and written per participant (/proc/<pid>/io rchar/wchar of the
     swarm processes; etcd's own traffic is not in it), and the CPU seconds
     etcd spent on the run (/proc/<etcd pid>/stat utime + stime): on a
     2-vCPU machine etcd's CPU, not the network, bounds the time. Each run
     starts once etcd holds no lease of an earlier run (a swarm exits
     without revoking its leases; their expiry would skew the next run).
  3  (--barrier N,...) N participants hold a round as in 2, then all enter
     the exit barrier at once (as every agent does when its workers
     succeeded): time from the last participant holding its round to the
     last one through the barrier, and the bytes read and written per
     participant in the barrier.
  4  (--again N,...) N participants hold a round as in 2, then all ask for
     the next round at once (what every agent does when a worker of the job
     failed): time from the last participant holding the first round to the
     last one holding the next, and the bytes per participant for it.

Standard library only; informational (exit 0 unless a run misbehaves badly).
"""

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(ROOT, "tests", "integration"))

from etcd_cluster import Etcd  # noqa: E402

WORKER = "#!/bin/sh\ndate +%s.%N > \"$1/$RANK\"\n"


def agents_once(elasticd, etcd, n, run_id, tmp, conf):
    stamps = tempfile.mkdtemp(dir=tmp)
    worker = os.path.join(tmp, "worker.sh")
    with open(worker, "w") as f:
        f.write(WORKER)
    os.chmod(worker, 0o755)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PET_", "TORCHELASTIC_"))}
    t0 = time.time()
    procs = [subprocess.Popen([elasticd, "--nnodes", str(n), "--nproc-per-node", "1",
                               "--rdzv-backend", "etcd", "--rdzv-endpoint", etcd.endpoints,
                               "--rdzv-id", run_id, "--rdzv-conf", conf,
                               "--log-dir", os.path.join(tmp, "logs"),
                               "--no-python", worker, stamps],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
             for _ in range(n)]
    rcs = [p.wait(600) for p in procs]
    if any(rcs):
        return None
    last = max(float(open(os.path.join(stamps, f)).read()) for f in os.listdir(stamps))
    return last - t0


def etcd_cpu(etcd):
    """CPU seconds the etcd members have used so far."""
    total = 0.0
    for m in etcd.members:
        with open("/proc/%d/stat" % m["proc"].pid) as f:
            fields = f.read().rsplit(")", 1)[1].split()
        total += (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    return total


def leases(etcd):
    """How many leases etcd holds (/v3/lease/leases)."""
    req = urllib.request.Request(
        "http://127.0.0.1:%d/v3/lease/leases" % etcd.members[0]["client"], data=b"{}",
        method="POST")
    with urllib.request.urlopen(req, timeout=30) as r:
        return len(json.loads(r.read()).get("leases") or [])


def quiet(etcd, timeout=120):
    """Wait until the leases of the last run are gone: a swarm exits
    without revoking its participants' leases, and thousands expiring at
    once (a raft write each) would land in the next run's figure."""
    deadline = time.time() + timeout
    while leases(etcd) and time.time() < deadline:
        time.sleep(1)


def parse_swarm(out, what="swarm"):
    """rdzv_swarm's "<what> k=v ..." line as a dict."""
    for line in out.decode().splitlines():
        if line.startswith(what + " "):
            return dict(kv.split("=", 1) for kv in line.split()[1:])
    return None


def swarm_once(build, etcd, n, run_id, slice_size, then, conf):
    """n participants in processes of at most slice_size each (the fd limit
    is per process), all started at once. Returns (seconds from the first
    start to the last participant holding its round, bytes read and written
    per participant: /proc/<pid>/io of the swarm processes, the coordinator's
    O(N) included; etcd's CPU seconds), or None. then "barrier": then every
    participant enters the exit barrier; "reform": then every participant
    asks for the next round at once (as after a worker failed); the result
    is then (seconds from the last participant holding its round to the last
    one through the barrier, or holding the next round; bytes read, written
    per participant in that phase; etcd's CPU seconds for both phases)."""
    env = dict(os.environ, RDZV_SWARM_BACKEND="etcd",
               RDZV_SWARM_BARRIER="1" if then == "barrier" else "0",
               RDZV_SWARM_ROUNDS="2" if then == "reform" else "1")
    driver = os.path.join(build, "tests", "rdzv_swarm")
    procs = []
    first = 0
    cpu0 = etcd_cpu(etcd)
    t0 = time.time()
    while first < n:
        count = min(slice_size, n - first)
        procs.append(subprocess.Popen([driver, str(n), etcd.endpoints, conf, run_id],
                                      env=dict(env, RDZV_SWARM_SLICE="%d:%d" % (first, count)),
                                      stdout=subprocess.PIPE, stderr=subprocess.PIPE))
        first += count
    outs, bars = [], []
    try:
        for p in procs:
            out, err = p.communicate(timeout=600)
            if p.returncode != 0:
                sys.stderr.write(err.decode()[-500:])
                return None
            outs.append(parse_swarm(out))
            bars.append(parse_swarm(out, then) if then else None)
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
    last = max(float(o["last_abs"]) for o in outs)
    if then:
        if any(b is None or b["failed"] != "0" for b in bars):
            return None
        return (max(float(b["last_abs"]) for b in bars) - last,
                sum(int(b["rchar"]) for b in bars) / n,
                sum(int(b["wchar"]) for b in bars) / n, etcd_cpu(etcd) - cpu0)
    rd = sum(int(o["rchar"]) for o in outs) / n
    wr = sum(int(o["wchar"]) for o in outs) / n
    return last - t0, rd, wr, etcd_cpu(etcd) - cpu0


def swarm_figure(args, etcd, sizes, name, then):
    """Figure 2 (3 with then "barrier", 4 with "reform"): --reps runs of each size in sizes
    ("N,..."), run ids <name><i>, one line each."""
    for n in [int(x) for x in sizes.split(",") if x]:
        res = []
        for i in range(args.reps):
            quiet(etcd)
            r = swarm_once(args.build, etcd, n, "%s%d_%d" % (name, n, i), args.slice, then,
                           conf(args))
            if r is not None:
                res.append(r)
        times = [r[0] for r in res]
        print("   N=%-5d median %.3f  min %.3f  (%d/%d ok)  read %s B  written %s B  "
              "etcd CPU %s s  load %s" % (
                  n, statistics.median(times) if times else float("nan"),
                  min(times) if times else float("nan"), len(times), args.reps,
                  "%.0f" % statistics.median(r[1] for r in res) if res else "-",
                  "%.0f" % statistics.median(r[2] for r in res) if res else "-",
                  "%.1f" % statistics.median(r[3] for r in res) if res else "-",
                  open("/proc/loadavg").read().split()[0]), flush=True)


def conf(args):
    """The agents' --rdzv-conf."""
    return "join_timeout=300,last_call_timeout=0.5,etcd_protocol=" + args.protocol


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--agents", default="2,16,64")
    ap.add_argument("--swarm", default="16,64,256")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--slice", type=int, default=2500,
                    help="participants per swarm process (each holds ~3 fds per participant)")
    ap.add_argument("--barrier", default="",
                    help="N,... : the exit barrier after a round of N participants")
    ap.add_argument("--again", default="",
                    help="N,... : all N participants of a round ask for the next one")
    ap.add_argument("--tuned", action="store_true",
                    help="etcd with GOGC=400 and --backend-batch-interval=10ms")
    ap.add_argument("--protocol", choices=("grpc", "json"), default="grpc",
                    help="how elasticd talks to etcd (--rdzv-conf etcd_protocol)")
    args = ap.parse_args()
    elasticd = os.path.join(args.build, "src", "elasticd")
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    tmp = tempfile.mkdtemp(prefix="bench-rdzv-etcd-")
    if args.tuned:
        etcd = Etcd(1, ["--backend-batch-interval=10ms"], dict(os.environ, GOGC="400"))
        print("etcd tuned: GOGC=400 --backend-batch-interval=10ms")
    else:
        etcd = Etcd(1)
    try:
        runs = 0
        print("elasticd talks to etcd over " + args.protocol)
        print("1  N real elasticd agents, launch -> last worker running (s)")
        for n in [int(x) for x in args.agents.split(",") if x]:
            times = []
            for _ in range(args.reps):
                runs += 1
                t = agents_once(elasticd, etcd, n, "bench%d" % runs, tmp, conf(args))
                if t is not None:
                    times.append(t)
            print("   N=%-5d median %.3f  min %.3f  (%d/%d ok)" % (
                n, statistics.median(times) if times else float("nan"),
                min(times) if times else float("nan"), len(times), args.reps), flush=True)
        print("2  N participants (rdzv_swarm, processes of at most %d), start -> last round "
              "held (s), bytes read / written per participant" % args.slice)
        swarm_figure(args, etcd, args.swarm, "swarm", None)
        if args.barrier:
            print("3  N participants hold a round, then all enter the exit barrier: last "
                  "round held -> last one through (s), bytes read / written per participant "
                  "in the barrier, etcd CPU for round and barrier")
        swarm_figure(args, etcd, args.barrier, "barrier", "barrier")
        if args.again:
            print("4  N participants hold a round, then all ask for the next round at once "
                  "(every agent restarting its workers after one failed): last round held -> "
                  "last next round held (s), bytes read / written per participant for it")
        swarm_figure(args, etcd, args.again, "again", "reform")
    finally:
        etcd.stop()
        shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
