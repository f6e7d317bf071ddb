#!/usr/bin/python3
"""bench_orphans.py -- orphan trials at scale (issue 19).

    python3 bench/bench_orphans.py [--elasticd build/src/elasticd] [--trials 1000]
                                   [--guard auto|cgroup|sentinel] [--parallel 4]
                                   [--nproc 2]

Each trial starts elasticd with --nproc workers; each worker starts a plain
child, a setsid'd Python grandchild, a `setsid -f` child and a double-forked
daemon (tests/integration/orphan_trials.py); the agent is SIGKILLed as soon
as everything is up (immediate, every other trial) or 1.5 s later (settled).
Prints, per case, the trials, the descendants, and the survivors by kind, then
the load average. For information, as every bench: exit status 0 whatever
the figures (2 for a usage error).
"""

import argparse
import concurrent.futures
import os
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "tests", "integration"))

import orphan_trials  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--elasticd", default=os.path.join(os.path.dirname(HERE), "build", "src",
                                                       "elasticd"))
    ap.add_argument("--trials", type=int, default=1000)
    ap.add_argument("--guard", choices=("auto", "cgroup", "sentinel"), default=None)
    ap.add_argument("--parallel", type=int, default=4)
    ap.add_argument("--nproc", type=int, default=2)
    args = ap.parse_args()
    tmp = tempfile.mkdtemp(prefix="bench_orphans.")
    worker = orphan_trials.write_worker(os.path.join(tmp, "worker.py"))
    start = orphan_trials.plain_start(args.elasticd, guard=args.guard)
    totals = {False: [0, 0, 0, {}], True: [0, 0, 0, {}]}
    t0 = time.monotonic()

    def one(i):
        settled = i % 2 == 1
        tag = "%d%04d" % (os.getpid() % 100, i)
        s, n = orphan_trials.run_trial(start, os.path.join(tmp, "t%d" % i), worker, tag,
                                       settled, nproc=args.nproc)
        return settled, s, n

    with concurrent.futures.ThreadPoolExecutor(args.parallel) as ex:
        for settled, s, n in ex.map(one, range(args.trials)):
            t = totals[settled]
            t[0] += 1
            t[1] += n
            t[2] += 1 if s else 0
            for k, v in s.items():
                t[3][k] = t[3].get(k, 0) + v
    bad = 0
    for settled in (False, True):
        t = totals[settled]
        n_surv = sum(t[3].values())
        bad += n_surv
        print("%-9s trials %5d  descendants %6d  survivors %5d  trials with survivors %4d  %r"
              % ("settled" if settled else "immediate", t[0], t[1], n_surv, t[2], t[3]))
    print("guard %s, %.0f s, load average %s" % (args.guard or "default",
                                                time.monotonic() - t0,
                                                " ".join("%.2f" % x for x in os.getloadavg())))
    print("verdict: %s" % ("no survivor" if not bad else "%d survivors" % bad))
    return 0


if __name__ == "__main__":
    sys.exit(main())
