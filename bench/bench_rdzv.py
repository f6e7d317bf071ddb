#!/usr/bin/python3
"""bench_rdzv.py -- the c10d rendezvous at scale, elasticd against torchrun.

    /usr/bin/python3 bench/bench_rdzv.py [--build build] [--agents 2,16,64,256]
        [--swarm 1000,10000] [--torchrun 2,4,8] [--reps 3]

Figures:
  1  N real elasticd processes (`--nnodes N --rdzv-backend c10d`, one
     `--no-python` worker each) on loopback: time from launching the first
     agent to the moment the last worker runs (each worker stamps
     CLOCK_REALTIME as it starts). Target: N = 2 <= 150 ms.
  2  N rendezvous participants (tests/rdzv_swarm: elasticd's real c10d
     backend, one handler per participant, one connection each), split
     over processes of at most --slice participants (the hard RLIMIT_NOFILE
     caps one process), all against one store process: time from launching
     the swarm to every participant holding its round (rank exchange
     included), and the bytes read and written per participant (the swarm
     processes' /proc/<pid>/io rchar + wchar over their participants; the
     store's own traffic is not in it). The store process holds one
     connection per participant: an N whose N + 64 fds exceed the hard
     limit is skipped, with the reason. --somaxconn raises the kernel's
     accept queue limit for the figure where it may be written (root;
     never required: a burst that overflows it is retransmitted in) and
     puts the old value back after. Then "all again": every participant
     asks for the next round at once (as every agent does after a worker
     failed), time from the first round held to the second, and its bytes
     read per participant. --again-after MS: the others hold their first
     round MS ms before they ask (participant 0 asks at once, as a node
     whose workers failed would), and the note adds the bytes each read
     meanwhile, still running its round, to learn that it must re-form
     (the time then includes the MS). Each line ends with the 1-minute load
     average.
     Targets (issue #14): N = 1000 <= 0.5 s; N = 10 000 <= 10 s and at
     most 15 times N = 1000. Two ways:
       hosted    participant 0 hosts the store in the same process, as the
                 agent on the endpoint host does: it coordinates (admits the
                 others, folds their keep-alives); 2 fds per participant
       external  the store is tests/tcpstore_tool serve in its own process,
                 as a store hosted by torch would be: the participants elect
                 a coordinator through the store (the lease key), which then
                 does what the store host does; 1 fd per participant, 2 for
                 the coordinator
  3  torchrun 1.13's c10d rendezvous with N agents on loopback, same worker,
     same measure as 1, at the N it reaches within --torchrun-timeout.

Standard library only; informational (exit 0 unless a run misbehaves badly).
Runs on 2 CPUs take a while: every process of figure 1 is a real agent.
"""

import argparse
import os
import resource
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time

PY = "/usr/bin/python3"
HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)

WORKER = "#!/bin/sh\ndate +%s.%N > \"$1/$RANK\"\n"

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
        raise ValueError(vm)
    Std.from_str = staticmethod(_from_str)
runpy.run_module("torch.distributed.run", run_name="__main__", alter_sys=True)
"""


def free_port():
    """A port below the kernel's ephemeral range (which other processes'
    outgoing connections take at any moment), free right now."""
    import random
    while True:
        port = random.randrange(20000, 32000)
        with socket.socket() as s:
            try:
                s.bind(("", port))
            except OSError:
                continue
            return port


def raise_fd_limit():
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    return hard


def run_agents(cmd_for, n, tmp, timeout):
    """Start n agents (cmd_for(i, stamps) -> argv), return seconds to the last
    worker's stamp, or None on failure/timeout."""
    stamps = tempfile.mkdtemp(dir=tmp)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PET_", "TORCHELASTIC_"))}
    env["PYTHON_EXEC"] = PY
    env["LOGLEVEL"] = "ERROR"
    t0 = time.time()
    procs = [subprocess.Popen(cmd_for(i, stamps), env=env, cwd=tmp, stdin=subprocess.DEVNULL,
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
             for i in range(n)]
    ok = True
    deadline = time.monotonic() + timeout
    for p in procs:
        try:
            rc = p.wait(max(0.1, deadline - time.monotonic()))
            ok = ok and rc == 0
        except subprocess.TimeoutExpired:
            ok = False
    for p in procs:
        if p.poll() is None:
            p.kill()
            p.wait()
    files = os.listdir(stamps)
    if not ok or len(files) < n:
        return None
    last = max(float(open(os.path.join(stamps, f)).read()) for f in files)
    shutil.rmtree(stamps, ignore_errors=True)
    return last - t0


def elasticd_cmd(elasticd, worker, n, port):
    def cmd(i, stamps):
        return [elasticd, "--nnodes", str(n), "--nproc-per-node", "1", "--rdzv-backend", "c10d",
                "--rdzv-endpoint", "127.0.0.1:%d" % port, "--rdzv-id", "bench%d" % port,
                "--log-dir", "/dev/null", "--no-python", worker, stamps]
    return cmd


def torchrun_cmd(worker, n, port):
    def cmd(i, stamps):
        return [PY, "-c", TORCHRUN_CODE, "--nnodes", str(n), "--nproc_per_node", "1",
                "--rdzv_backend", "c10d", "--rdzv_endpoint", "127.0.0.1:%d" % port,
                "--rdzv_id", "bench%d" % port, "--monitor_interval", "0.1",
                "--rdzv_conf", "last_call_timeout=1", "--no_python", worker, stamps]
    return cmd


def parse_swarm(out):
    """rdzv_swarm's lines: {"swarm": {...}, "reform": {...}}."""
    res = {}
    for line in out.decode().splitlines():
        words = line.split()
        if words:
            res[words[0]] = dict(kv.split("=", 1) for kv in words[1:])
    return res


def swarm_multi(build, mode, n, timeout, slice_size, again=True, stagger=0.0, again_after=0):
    """Run n participants as processes of at most slice_size each against one
    store, twice: the first round, then every participant asks for the next
    one at once (as after a worker failure). Returns (seconds to the last
    round held, bytes read per participant, bytes written per participant,
    seconds of the re-formed round, its bytes read per participant, note)."""
    tool = os.path.join(build, "tests", "tcpstore_tool")
    driver = os.path.join(build, "tests", "rdzv_swarm")
    conf = "join_timeout=%d" % timeout
    run_id = "%s%d_%d" % (mode, n, os.getpid())
    server = host = None
    procs = []
    first = 0
    env = dict(os.environ, RDZV_SWARM_ROUNDS="2" if again else "1")
    if mode == "external":
        server = subprocess.Popen([tool, "serve", "0", str(4 * n + 64)], stdin=subprocess.PIPE,
                                  stdout=subprocess.PIPE)
        endpoint = "127.0.0.1:%d" % int(server.stdout.readline().split()[1])
        conf += ",is_host=false"
    else:
        endpoint = "127.0.0.1:%d" % free_port()
    t0 = time.time()
    try:
        if mode == "hosted":
            # Participant 0 alone hosts the store (and coordinates).
            host = subprocess.Popen(
                [driver, str(n), endpoint, conf, run_id],
                env=dict(env, RDZV_SWARM_HOST="1", RDZV_SWARM_SLICE="0:1", RDZV_SWARM_HOLD="1"),
                stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
            first = 1
            # No pause for the host to listen: the others start with it, as
            # agents do, and retry a refused connection (20 ms backoff, up).
            conf += ",is_host=false"
        while first < n:
            count = min(slice_size, n - first)
            procs.append(subprocess.Popen(
                [driver, str(n), endpoint, conf, run_id],
                env=dict(env, RDZV_SWARM_SLICE="%d:%d" % (first, count),
                         **({"RDZV_SWARM_AGAIN_AFTER": str(again_after)} if again_after else {})),
                stdout=subprocess.PIPE, stderr=subprocess.PIPE))
            first += count
            if stagger and first < n:
                time.sleep(stagger)
        outs = []
        for p in procs:
            out, err = p.communicate(timeout=timeout + 60)
            if p.returncode != 0:
                return None, None, None, None, None, (out + err).decode()[-300:]
            outs.append(parse_swarm(out))
        if host:
            out, err = host.communicate(b"", timeout=60)
            if host.returncode != 0:
                return None, None, None, None, None, (out + err).decode()[-300:]
            outs.append(parse_swarm(out))
    except subprocess.TimeoutExpired:
        return None, None, None, None, None, "timeout"
    finally:
        for p in procs + ([host] if host else []):
            if p.poll() is None:
                p.kill()
                p.wait()
        if server:
            server.stdin.close()
            server.stdout.close()
            server.wait()
    first_end = max(float(o["swarm"]["last_abs"]) for o in outs)
    # The hosting process carries the store's traffic: participants only.
    parts = outs[:-1] if host else outs
    k = sum(int(o["swarm"]["local"]) for o in parts)
    rd = sum(int(o["swarm"]["rchar"]) for o in parts) / k
    wr = sum(int(o["swarm"]["wchar"]) for o in parts) / k
    again = rd2 = None
    if all("reform" in o for o in outs):
        again = max(float(o["reform"]["last_abs"]) for o in outs) - first_end
        rd2 = sum(int(o["reform"]["rchar"]) for o in parts) / k
    # One process holds the coordinator (O(N) per admission batch): the
    # least per process is what a participant without it reads.
    least = min(int(o["swarm"]["rchar"]) / int(o["swarm"]["local"]) for o in parts)
    note = "%d processes; least read per participant in one process: %.0f B" % (
        len(procs) + (1 if host else 0), least)
    if again_after and all("wait_rchar" in o.get("reform", {}) for o in parts):
        note += "; %d told to re-form while running, reading %.0f B per participant" % (
            sum(int(o["reform"]["told"]) for o in parts),
            sum(int(o["reform"]["wait_rchar"]) for o in parts) / k)
    return (first_end - t0, rd, wr, again, rd2, note)


SOMAXCONN = "/proc/sys/net/core/somaxconn"


def somaxconn(want):
    """net.core.somaxconn, raised to want first when that is larger and the
    file may be written (root in a network namespace). Returns (the value in
    force as text, the value to put back or None)."""
    now = "?"
    try:
        with open(SOMAXCONN) as f:
            now = old = int(f.read())
        if want > now:
            with open(SOMAXCONN, "w") as f:
                f.write(str(want))
            with open(SOMAXCONN) as f:
                now = int(f.read())
            return "%d (raised from %d)" % (now, old), old
    except OSError as e:
        return "%s (not raised: %s)" % (now, e.strerror), None
    return str(now), None


def somaxconn_restore(old):
    if old is not None:
        with open(SOMAXCONN, "w") as f:
            f.write(str(old))


def fmt(x):
    return "failed" if x is None else "%.3f s" % x


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--agents", default="2,16,64,256")
    ap.add_argument("--swarm", default="1000,2000,5000,10000")
    ap.add_argument("--slice", type=int, default=2500,
                    help="participants per swarm process")
    ap.add_argument("--stagger", type=float, default=0.0,
                    help="seconds between starting two swarm processes (each one's "
                    "connections then fit the store's listen queue; counted in the time)")
    ap.add_argument("--modes", default="hosted,external",
                    help="figure 2's stores, comma-separated: hosted, external")
    ap.add_argument("--external-again", action="store_true",
                    help="the all-again round for the external store too")
    ap.add_argument("--again-after", type=int, default=0, metavar="MS",
                    help="all again: the participants but 0 hold their round MS ms "
                    "before they ask (0 asks at once)")
    ap.add_argument("--somaxconn", type=int, default=0,
                    help="raise net.core.somaxconn to this first, where writable")
    ap.add_argument("--torchrun", default="2,4,8")
    ap.add_argument("--torchrun-timeout", type=int, default=120)
    ap.add_argument("--reps", type=int, default=3)
    args = ap.parse_args()
    args.build = os.path.abspath(args.build)
    elasticd = os.path.join(args.build, "src", "elasticd")
    hard = raise_fd_limit()
    tmp = tempfile.mkdtemp(prefix="bench-rdzv-")
    worker = os.path.join(tmp, "stamp.sh")
    with open(worker, "w") as f:
        f.write(WORKER)
    os.chmod(worker, 0o755)
    print("fd limit %d; %d CPUs" % (hard, os.cpu_count()))

    print("\n1  elasticd agents, start -> last worker running (median of %d)" % args.reps)
    for n in [int(x) for x in args.agents.split(",") if x]:
        reps = args.reps if n <= 64 else 1
        times = [run_agents(elasticd_cmd(elasticd, worker, n, free_port()), n, tmp, 120)
                 for _ in range(reps)]
        good = [t for t in times if t is not None]
        med = statistics.median(good) if good else None
        extra = "  (target <= 0.150 s)" if n == 2 else ""
        print("   N=%-5d %s%s  runs: %s" % (n, fmt(med), extra, ", ".join(fmt(t) for t in times)))

    print("\n2  participants in processes of <= %d, one store process; "
          "start -> every round held, bytes per participant" % args.slice)
    shown, old_somaxconn = somaxconn(args.somaxconn)
    print("   net.core.somaxconn = %s" % shown)
    for mode in [m for m in args.modes.split(",") if m]:
        for n in [int(x) for x in args.swarm.split(",") if x]:
            if n + 64 > hard:
                print("   %-8s N=%-6d skipped: the store process needs %d fds, the hard "
                      "limit is %d" % (mode, n, n + 64, hard))
                continue
            last, rd, wr, again, rd2, note = swarm_multi(
                args.build, mode, n, 600, args.slice,
                again=mode == "hosted" or args.external_again, stagger=args.stagger,
                again_after=args.again_after)
            extra = "  (target <= 0.5 s)" if n == 1000 else ""
            if last is None:
                print("   %-8s N=%-6d failed  [%s, load %.2f]" % (mode, n, note,
                                                                os.getloadavg()[0]))
                continue
            print("   %-8s N=%-6d %s%s  read %.0f B, written %.0f B per participant; "
                  "all again: %s, read %s B  [%s, load %.2f]" % (
                      mode, n, fmt(last), extra, rd, wr,
                      fmt(again) if mode == "hosted" or args.external_again else "not run",
                      "-" if rd2 is None else "%.0f" % rd2, note, os.getloadavg()[0]))
            sys.stdout.flush()
    somaxconn_restore(old_somaxconn)

    print("\n3  torchrun 1.13 c10d agents, start -> last worker running")
    for n in [int(x) for x in args.torchrun.split(",") if x]:
        t = run_agents(torchrun_cmd(worker, n, free_port()), n, tmp, args.torchrun_timeout)
        print("   N=%-5d %s" % (n, fmt(t)))
        if t is None:
            break
    shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
