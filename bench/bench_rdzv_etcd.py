#!/usr/bin/python3
"""bench_rdzv_etcd.py -- the etcd rendezvous backend at scale.

    /usr/bin/python3 bench/bench_rdzv_etcd.py [--build build] [--agents 2,16,64]
        [--swarm 16,64,256] [--reps 3]

Figures (one single-member etcd on loopback, data on /dev/shm, started here):
  1  N real elasticd processes (`--nnodes N --rdzv-backend etcd`, one
     `--no-python` worker each): time from launching the first agent to the
     moment the last worker runs (each worker stamps CLOCK_REALTIME).
  2  N rendezvous participants in one process (tests/rdzv_swarm with
     RDZV_SWARM_BACKEND=etcd: elasticd's real etcd backend, one handler per
     participant): time until every participant has its round, rank exchange
     included.

Standard library only; informational (exit 0 unless a run misbehaves badly).
"""

import argparse
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(ROOT, "tests", "integration"))

from etcd_cluster import Etcd  # noqa: E402

WORKER = "#!/bin/sh\ndate +%s.%N > \"$1/$RANK\"\n"


def agents_once(elasticd, etcd, n, run_id, tmp):
    stamps = tempfile.mkdtemp(dir=tmp)
    worker = os.path.join(tmp, "worker.sh")
    with open(worker, "w") as f:
        f.write(WORKER)
    os.chmod(worker, 0o755)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PET_", "TORCHELASTIC_"))}
    t0 = time.time()
    procs = [subprocess.Popen([elasticd, "--nnodes", str(n), "--nproc-per-node", "1",
                               "--rdzv-backend", "etcd", "--rdzv-endpoint", etcd.endpoints,
                               "--rdzv-id", run_id, "--rdzv-conf",
                               "join_timeout=300,last_call_timeout=0.5",
                               "--log-dir", os.path.join(tmp, "logs"),
                               "--no-python", worker, stamps],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
             for _ in range(n)]
    rcs = [p.wait(600) for p in procs]
    if any(rcs):
        return None
    last = max(float(open(os.path.join(stamps, f)).read()) for f in os.listdir(stamps))
    return last - t0


def swarm_once(build, etcd, n, run_id):
    env = dict(os.environ, RDZV_SWARM_BACKEND="etcd")
    r = subprocess.run([os.path.join(build, "tests", "rdzv_swarm"), str(n), etcd.endpoints,
                        "join_timeout=300,last_call_timeout=0.5", run_id],
                       env=env, capture_output=True, text=True, timeout=600)
    if r.returncode != 0:
        return None
    fields = dict(kv.split("=") for kv in r.stdout.split()[1:])
    return float(fields["last"])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--agents", default="2,16,64")
    ap.add_argument("--swarm", default="16,64,256")
    ap.add_argument("--reps", type=int, default=3)
    args = ap.parse_args()
    elasticd = os.path.join(args.build, "src", "elasticd")
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    tmp = tempfile.mkdtemp(prefix="bench-rdzv-etcd-")
    etcd = Etcd(1)
    try:
        runs = 0
        print("1  N real elasticd agents, launch -> last worker running (s)")
        for n in [int(x) for x in args.agents.split(",") if x]:
            times = []
            for _ in range(args.reps):
                runs += 1
                t = agents_once(elasticd, etcd, n, "bench%d" % runs, tmp)
                if t is not None:
                    times.append(t)
            print("   N=%-5d median %.3f  min %.3f  (%d/%d ok)" % (
                n, statistics.median(times) if times else float("nan"),
                min(times) if times else float("nan"), len(times), args.reps), flush=True)
        print("2  N participants in one process (rdzv_swarm), start -> last round (s)")
        for n in [int(x) for x in args.swarm.split(",") if x]:
            times = []
            for _ in range(args.reps):
                runs += 1
                t = swarm_once(args.build, etcd, n, "swarm%d" % runs)
                if t is not None:
                    times.append(t)
            print("   N=%-5d median %.3f  min %.3f  (%d/%d ok)" % (
                n, statistics.median(times) if times else float("nan"),
                min(times) if times else float("nan"), len(times), args.reps), flush=True)
    finally:
        etcd.stop()
        shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
