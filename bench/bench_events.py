#!/usr/bin/python3
"""bench_events.py -- what events cost.

    /usr/bin/python3 bench/bench_events.py [--build build] [--events 200000] [--reps 30]

Figures:
  1  events/s through the file sink: torchrun worker status events (~660 bytes
     each) built, serialised and appended with one write(2) each, ring on
     (tests/events_tool bench; also `meson test --benchmark events_file_sink`)
  2  the same into the ring with a subscriber and the null sink
  3  the cost of a disabled recorder (null sink, no subscriber: nothing built)
  4  elasticd's wall time for `--nproc-per-node 2 --no-python /bin/true`
     (about 14 events) with --event-log-handler file (the default) and null
     (median of --reps runs)

Standard library only; exits 1 when a run fails.
"""

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def wall_ms(elasticd, handler, reps):
    times = []
    for _ in range(reps):
        with tempfile.TemporaryDirectory() as d:
            t = time.monotonic()
            subprocess.run([elasticd, "--nproc-per-node", "2", "--log-dir", d,
                            "--event-log-handler", handler, "--no-python", "/bin/true"],
                           stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                           stderr=subprocess.DEVNULL, check=True)
            times.append((time.monotonic() - t) * 1000)
    return statistics.median(times)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--events", type=int, default=200000)
    ap.add_argument("--reps", type=int, default=30)
    args = ap.parse_args()
    tool = os.path.join(args.build, "tests", "events_tool")
    elasticd = os.path.join(args.build, "src", "elasticd")
    for p in (tool, elasticd):
        if not os.access(p, os.X_OK):
            print("bench_events.py: %s is not built" % p, file=sys.stderr)
            return 2
    with tempfile.TemporaryDirectory() as d:
        out = subprocess.run([tool, "bench", str(args.events), os.path.join(d, "ev.jsonl")],
                             capture_output=True, text=True, check=True).stdout
    for n, line in enumerate(out.splitlines(), 1):
        print("%d  %s" % (n, line))
    f = wall_ms(elasticd, "file", args.reps)
    z = wall_ms(elasticd, "null", args.reps)
    print("4  elasticd 2 x /bin/true: %.2f ms with the file sink, %.2f ms with null (+%.2f ms)"
          % (f, z, f - z))
    return 0


if __name__ == "__main__":
    sys.exit(main())
