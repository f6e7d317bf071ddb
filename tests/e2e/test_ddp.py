#!/usr/bin/python3
"""End-to-end tests: elasticd with real PyTorch workers (Debian's python3-torch,
gloo on CPU), and side by side with the real torchrun 1.13 of the same Python.

Run by `meson test --suite e2e` (env ELASTICD, PYTHON_EXEC, SOURCE_ROOT), or by
hand: `ELASTICD=build/src/elasticd /usr/bin/python3 tests/e2e/test_ddp.py -v`.
The test process itself runs under /usr/bin/python3 (the interpreter that has
torch); every worker is started with PYTHON_EXEC=/usr/bin/python3.

  a  examples/ddp.py under `elasticd --standalone --nproc-per-node 2` exits 0.
  b  a @record worker raising on rank 1: exit 1, torchrun's ChildFailedError
     table on stderr, the worker's error.json, and elasticd's own
     TORCHELASTIC_ERROR_FILE with "errorCode"; then the same job under torchrun
     and a text comparison of the two tables and of the two agent error files;
     the same comparison for a worker that exits 3 and one that is SIGKILLed
     (no error file), and the table's host line against socket.getfqdn().
  c  the worker contract: env, argv, cwd, fds, signal dispositions, process
     shape, dumped by every worker under elasticd and under torchrun 1.13 from
     the same caller environment, then compared (ENV_DIFFERENCES documents what
     may differ and why).
  d  --max-restarts 1 with a gloo job whose rank 1 fails on attempt 0 only.

Divergences from torchrun that are open bugs live in test_torchrun_parity.py,
which reuses the Harness below.

torchrun 1.13 on Python 3.11 crashes on its own default `-r 0 -t 0`
(Std.from_str returns None for "0" and "3": IntFlag iteration skips
non-canonical members); TORCHRUN_CODE runs torch.distributed.run as __main__
(exactly `python -m torch.distributed.run`) after patching that one function.
"""

import json
import os
import re
import shutil
import signal
import socket
import subprocess
import tempfile
import textwrap
import time
import unittest

import sys
sys.dont_write_bytecode = True  # no __pycache__ in the source tree
from e2e_common import PY, WORKER_PY, free_port, label, torch_version  # noqa: E402
HERE = os.path.dirname(os.path.abspath(__file__))
SOURCE_ROOT = os.environ.get("SOURCE_ROOT") or os.path.dirname(os.path.dirname(HERE))
ELASTICD = os.path.abspath(os.environ.get("ELASTICD")
                           or os.path.join(SOURCE_ROOT, "build", "src", "elasticd"))
# Each agent run must finish well within this (2 CPUs, torch import ~1 s/worker).
RUN_TIMEOUT = 90
# torchrun's default monitor interval (5 s) only slows the tests down; it does
# not change anything a worker sees.
TORCHRUN_MONITOR = "0.2"

TORCHRUN_CODE = r"""
import re, runpy, sys
from torch.distributed.elastic.multiprocessing import api as _api
Std = _api.Std
if Std.from_str("0") is None:  # torch 1.13 on Python >= 3.11
    def _from_str(vm):
        if re.match(_api._VALUE_REGEX, vm):
            return Std(int(vm))
        if re.match(_api._MAPPING_REGEX, vm):
            return {int(k): Std(int(v)) for k, v in (p.split(":") for p in vm.split(","))}
        raise ValueError(f"{vm} does not match: <{_api._VALUE_REGEX}> or <{_api._MAPPING_REGEX}>")
    Std.from_str = staticmethod(_from_str)
runpy.run_module("torch.distributed.run", run_name="__main__", alter_sys=True)
"""
TORCHRUN = [PY, "-c", TORCHRUN_CODE]

# What the agents set: never inherit them from whoever runs the tests.
AGENT_VARS = {
    "LOCAL_RANK", "RANK", "GROUP_RANK", "ROLE_RANK", "ROLE_NAME", "LOCAL_WORLD_SIZE",
    "WORLD_SIZE", "GROUP_WORLD_SIZE", "ROLE_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT",
    "OMP_NUM_THREADS", "NCCL_ASYNC_ERROR_HANDLING", "TORCH_NCCL_ASYNC_ERROR_HANDLING",
    "CUDA_VISIBLE_DEVICES", "LOGLEVEL", "NOTIFY_SOCKET", "WATCHDOG_USEC", "WATCHDOG_PID",
    "LISTEN_FDS", "LISTEN_PID", "LISTEN_FDNAMES",
}

# Names that the agent adds or changes in the worker environment under one agent
# and not the other, with the reason. Everything else must be identical.
# Documented differences outside the variable names, checked in compare_contract:
#  - MASTER_ADDR under --standalone: elasticd says "localhost", torchrun 1.13
#    socket.getfqdn(socket.gethostname()) (equal on hosts whose name resolves
#    back to localhost, as the CI machine's); both name this host.
#  - process shape: 1.13 leaves workers in the agent's process group; elasticd
#    makes each worker a session and process-group leader, as torchrun 2.x.
#  - values that are random by design: MASTER_PORT, TORCHELASTIC_RUN_ID, the
#    8-character suffixes of TORCHELASTIC_ERROR_FILE (shapes are compared).
# elasticd sets both NCCL names (src/worker/wenv.c says why); each torchrun one.
ENV_DIFFERENCES_1_13 = {
    # name: (agent, always set?, why)
    "TORCH_NCCL_ASYNC_ERROR_HANDLING": (
        "elasticd", True, "2.x name of NCCL_ASYNC_ERROR_HANDLING (base value or \"1\"), as "
        "torchrun 2.x"),
}
ENV_DIFFERENCES_2 = {
    "NCCL_ASYNC_ERROR_HANDLING": (
        "elasticd", True, "the pre-2.2 name, which torchrun 1.13 sets and torch 1.13 alone "
        "reads (base value or \"1\")"),
}
ENV_DIFFERENCES = {
    # name: (agent, always set?, why)
    "TORCHELASTIC_SIGNALS_TO_HANDLE": (
        "elasticd", True, "--signals-to-handle, which torch main's launch_agent exports "
        "(after 2.6); torchrun 1.13 and 2.6 do not"),
    "TORCH_WORKER_SERVER_SOCKET": (
        "elasticd", False, "each worker's own control socket (torch 2.x worker_main() starts its "
        "WorkerServer there), proxied by elasticd's control plane as /ranks/<n>/; torchrun "
        "never sets it; off with --no-worker-server. Shape checked: <dir>/rank<n>.sock, absent "
        "when the worker starts (WorkerServer refuses an existing path), directory present"),
    "ELASTICD_ROUND": (
        "elasticd", True, "the rendezvous round, one count for the whole job (equal on every "
        "node of a round), where TORCHELASTIC_RESTART_COUNT counts one node's restarts; "
        "man elasticd(8), Worker environment"),
    "ELASTICD_CONTROL_SOCKET": (
        "elasticd", False, "the agent's control socket, so that a worker can ask for its own "
        "node's exclusion (POST /handler/exclude); unset without a control socket; man "
        "elasticd(8), Worker environment"),
}
# Variables with the same value under both agents, for the same caller env.
SAME_VALUE = [
    "RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "GROUP_RANK", "GROUP_WORLD_SIZE",
    "ROLE_RANK", "ROLE_WORLD_SIZE", "ROLE_NAME", "TORCHELASTIC_RESTART_COUNT",
    "TORCHELASTIC_MAX_RESTARTS", "TORCHELASTIC_USE_AGENT_STORE", "OMP_NUM_THREADS",
]
UUID4 = re.compile(r"^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$")
TIME = re.compile(r"\d{4}-\d\d-\d\d_\d\d:\d\d:\d\d")
CFE = "torch.distributed.elastic.multiprocessing.errors.ChildFailedError:"

ENV_DUMP_WORKER = r'''
import json, os, signal, socket, stat, sys

def disp(sig):
    h = signal.getsignal(sig)
    if h is signal.SIG_DFL:
        return "SIG_DFL"
    if h is signal.SIG_IGN:
        return "SIG_IGN"
    if h is signal.default_int_handler:
        return "default_int_handler"
    return repr(h)

status = {}
with open("/proc/self/status") as f:
    for line in f:
        k, _, v = line.partition(":")
        if k in ("SigBlk", "SigIgn", "Cpus_allowed_list", "NoNewPrivs"):
            status[k] = v.strip()
fds = sorted(int(fd) for fd in os.listdir("/proc/self/fd"))
fds = [fd for fd in fds if os.path.exists(f"/proc/self/fd/{fd}")]  # the listdir fd is gone
try:
    socket.create_connection((os.environ["MASTER_ADDR"], int(os.environ["MASTER_PORT"])),
                             timeout=2).close()
    master_listening = True
except OSError:
    master_listening = False
wss = os.environ.get("TORCH_WORKER_SERVER_SOCKET")
wss = None if wss is None else {"exists": os.path.lexists(wss),
                                "dir": os.path.isdir(os.path.dirname(wss) or ".")}
um = os.umask(0o022)
os.umask(um)
out = {
    "env": dict(os.environ),
    "orig_argv": sys.orig_argv,
    "argv": sys.argv,
    "cwd": os.getcwd(),
    "pid": os.getpid(), "ppid": os.getppid(), "pgid": os.getpgid(0), "sid": os.getsid(0),
    "fds": fds,
    "stdin": stat.S_IFMT(os.fstat(0).st_mode),
    "umask": um,
    "status": status,
    "signals": {s.name: disp(s) for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP,
                                          signal.SIGQUIT, signal.SIGPIPE, signal.SIGUSR1,
                                          signal.SIGCHLD)},
    "unbuffered": sys.flags.__repr__(),
    "master_listening": master_listening,
    "wss": wss,
}
path = os.path.join(os.environ["DUMP_DIR"], "rank%s.json" % os.environ["LOCAL_RANK"])
with open(path + ".tmp", "w") as f:
    json.dump(out, f, indent=1, sort_keys=True)
os.rename(path + ".tmp", path)
'''

RECORD_WORKER = r'''
import os
import time

from torch.distributed.elastic.multiprocessing.errors import record


def explode():
    raise ValueError("boom from rank 1")


@record
def main():
    if os.environ["RANK"] == "1":
        explode()
    time.sleep(60)  # rank 0: still running when rank 1 fails; stopped by the agent


if __name__ == "__main__":
    main()
'''

PLAIN_FAIL_WORKER = r'''
import os, signal, sys, time

if os.environ["RANK"] == "1":
    ACTION
time.sleep(60)  # rank 0: stopped by the agent
'''

RESTART_WORKER = r'''
import os

import torch
import torch.distributed as dist
from torch.distributed.elastic.multiprocessing.errors import record


@record
def main():
    dist.init_process_group("gloo", init_method="env://")
    rank = dist.get_rank()
    attempt = os.environ["TORCHELASTIC_RESTART_COUNT"]
    t = torch.ones(1)
    dist.all_reduce(t)
    assert t.item() == dist.get_world_size(), t
    if attempt == "0" and rank == 1:
        raise RuntimeError("rank 1 fails on attempt 0")
    dist.barrier()
    print(f"restart_worker: rank {rank} attempt {attempt} "
          f"max_restarts {os.environ['TORCHELASTIC_MAX_RESTARTS']} ok", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
'''


def caller_env(tmp, **extra):
    """The environment both agents are started with."""
    env = {k: v for k, v in os.environ.items()
           if not (k.startswith("PET_") or k.startswith("TORCHELASTIC_") or k in AGENT_VARS)}
    env["PYTHON_EXEC"] = PY
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    env["TMPDIR"] = tmp
    if not any(k in env for k in ("LC_ALL", "LC_CTYPE", "LANG")):
        env["LANG"] = "C.UTF-8"
    env.update(extra)
    return env


class Run:
    def __init__(self, argv, rc, stdout, stderr, pid, secs):
        self.argv, self.rc, self.stdout, self.stderr, self.pid, self.secs = (
            argv, rc, stdout, stderr, pid, secs)

    def __str__(self):
        argv = self.argv
        if argv[1:2] == ["-c"]:  # TORCHRUN
            argv = argv[:1] + ["-m", "torch.distributed.run"] + argv[3:]
        return (f"$ {' '.join(argv)}"
                f"\nexit status {self.rc} after {self.secs:.1f} s\n--- stdout ---\n"
                f"{self.stdout[-4000:]}\n--- stderr ---\n{self.stderr[-8000:]}")


def run(argv, env, cwd, timeout=RUN_TIMEOUT, ignore_signals=()):
    """Run an agent in its own session; on timeout kill its whole group."""
    def pre():
        for s in ignore_signals:
            signal.signal(s, signal.SIG_IGN)

    t0 = time.monotonic()
    p = subprocess.Popen(argv, env=env, cwd=cwd, stdin=subprocess.DEVNULL,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                         start_new_session=True, preexec_fn=pre if ignore_signals else None)
    try:
        out, err = p.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        try:
            os.killpg(p.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        out, err = p.communicate()
        raise AssertionError(f"{argv[0]} did not finish within {timeout} s\nstdout:\n{out}\n"
                             f"stderr:\n{err}")
    return Run(argv, p.returncode, out, err, p.pid, time.monotonic() - t0)


def elasticd(args, env, cwd, **kw):
    return run([ELASTICD] + args, env, cwd, **kw)


def torchrun(args, env, cwd, **kw):
    return run(TORCHRUN + args, env, cwd, **kw)


def failure_table(stderr):
    """The ChildFailedError line and the table after it, up to its closing border."""
    lines = stderr.splitlines()
    for i, line in enumerate(lines):
        if line.startswith(CFE):
            out = [line]
            borders = 0
            for nxt in lines[i + 1:]:
                out.append(nxt)
                if re.fullmatch(r"=+", nxt):
                    borders += 1
                    if borders == 2:
                        return out
            return out
    return None


def border_width(lines):
    """The border width torch's ChildFailedError.format_msg gives a table (the
    CFE line first): the widest of the title and every failure's lines, at
    most 60 (torch/distributed/elastic/multiprocessing/errors/__init__.py)."""
    width = 0
    for line in lines[2:]:
        if not (re.fullmatch(r"[=-]+", line) or line in (
                "Failures:", "Root Cause (first observed failure):", "  <NO_OTHER_FAILURES>")):
            width = max(width, len(line))
    return min(width, 60)


def normalize_table(lines):
    """lines with the values that differ by run (time, pids, host, paths)
    replaced; a border of torch's width becomes "===<WIDTH>", since pids of
    different lengths widen one agent's table and not the other's."""
    out = []
    width = border_width(lines)
    for line in lines:
        if re.fullmatch(r"[=-]+", line) and len(line) == width:
            out.append(line[:3] + "<WIDTH>")
            continue
        line = TIME.sub("<TIME>", line)
        line = re.sub(r"\(pid: \d+\)", "(pid: <PID>)", line)
        line = re.sub(r"received by PID \d+$", "received by PID <PID>", line)
        line = re.sub(r"^(  host      : ).*$", r"\1<HOST>", line)
        line = re.sub(r"^(  error_file: ).*(/attempt_\d+/\d+/error\.json)$", r"\1...\2", line)
        out.append(line)
    return out


class Harness(unittest.TestCase):
    """Set-up and helpers shared with test_torchrun_parity.py; no tests."""
    maxDiff = None
    _torchrun_record = None

    @classmethod
    def setUpClass(cls):
        if not os.access(ELASTICD, os.X_OK):
            raise RuntimeError(f"no elasticd binary at {ELASTICD} (set ELASTICD)")
        torch_version()  # raises when PY has no torch: a failure, not a skip

    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="elasticd-e2e-")

    def tearDown(self):
        shutil.rmtree(self.tmp, ignore_errors=True)

    def write(self, name, text):
        path = os.path.join(self.tmp, name)
        with open(path, "w") as f:
            f.write(textwrap.dedent(text))
        return path

    def run_record_job(self, agent, own_error_file, name="record_worker.py", text=RECORD_WORKER):
        """A failing 2-worker --standalone job, with the agent's own error file."""
        script = self.write(name, text)
        env = caller_env(self.tmp, TORCHELASTIC_ERROR_FILE=own_error_file)
        if agent == "elasticd":
            return elasticd(["--standalone", "--nproc-per-node", "2", script], env, self.tmp)
        return torchrun(["--standalone", "--nproc_per_node", "2", "--monitor_interval",
                         TORCHRUN_MONITOR, script], env, self.tmp)

    def torchrun_record(self):
        """torchrun's run of the same job (shared by the b2/b3 tests)."""
        cls = type(self)
        if cls._torchrun_record is None:
            own = os.path.join(self.tmp, "agent-error.json")
            r = self.run_record_job("torchrun", own)
            with open(own) as f:
                cls._torchrun_record = (r, f.read())
        return cls._torchrun_record

    # Worker arguments: ${local_rank} substitution and what must stay verbatim.
    ARGS = ["--lr=${local_rank}", "plain", "$HOME", "$$x", "${unknown}", "a b"]

    def dump_both(self, mode="standalone", ignore_signals=()):
        """Run the env-dump worker under elasticd, then torchrun, from the same
        caller environment. mode "standalone": --standalone; "static": the
        default static backend, one node, an explicit free --master-port.
        Returns ({agent: ({local_rank: dump}, Run, agent_flags)}, caller_env)."""
        script = self.write("env_dump.py", ENV_DUMP_WORKER)
        dump = os.path.join(self.tmp, "dump")
        os.mkdir(dump)
        env = caller_env(self.tmp, DUMP_DIR=dump)
        results = {}
        for agent in ("elasticd", "torchrun"):
            if mode == "standalone":
                flags = ["--standalone"]
            else:
                flags = ["--nnodes", "1", "--master_port", str(free_port())]
            if agent == "elasticd":
                r = elasticd(flags + ["--nproc-per-node", "2", script] + self.ARGS,
                             env, self.tmp, ignore_signals=ignore_signals)
            else:
                r = torchrun(flags + ["--nproc_per_node", "2", "--monitor_interval",
                                      TORCHRUN_MONITOR, script] + self.ARGS, env, self.tmp,
                             ignore_signals=ignore_signals)
            self.assertEqual(r.rc, 0, str(r))
            ranks = {}
            for lr in (0, 1):
                with open(os.path.join(dump, f"rank{lr}.json")) as f:
                    ranks[lr] = json.load(f)
                os.unlink(os.path.join(dump, f"rank{lr}.json"))
            results[agent] = (ranks, r, flags)
        return results, env

    def compare_contract(self, results, base, mode):
        """Everything a worker saw, elasticd against torchrun. Returns
        (problems, report): what differs beyond ENV_DIFFERENCES, and a table of
        every variable the agents set."""
        problems = []
        report = []

        def check(cond, msg):
            if not cond:
                problems.append(msg)

        e_ranks, e_run, e_flags = results["elasticd"]
        t_ranks, t_run, t_flags = results["torchrun"]
        torch2 = torch_version() >= (2, 0)
        differences = dict(ENV_DIFFERENCES)
        differences.update(ENV_DIFFERENCES_2 if torch2 else ENV_DIFFERENCES_1_13)
        for lr in (0, 1):
            e, t = e_ranks[lr], t_ranks[lr]
            ee, te = e["env"], t["env"]
            e_set = {k for k in ee if base.get(k) != ee[k]}
            t_set = {k for k in te if base.get(k) != te[k]}
            e_rm = {k for k in base if k not in ee}
            t_rm = {k for k in base if k not in te}
            report.append(f"local rank {lr}: variables set or changed by the agent")
            for k in sorted(e_set | t_set):
                mark = "" if (k in e_set) == (k in t_set) else "   <-- only one agent"
                report.append(f"  {k:32} elasticd={ee.get(k)!r:48} torchrun={te.get(k)!r}{mark}")
            only_e = e_set - t_set - {k for k, v in differences.items() if v[0] == "elasticd"}
            only_t = t_set - e_set - {k for k, v in differences.items() if v[0] == "torchrun"}
            check(not only_e, f"rank {lr}: set only by elasticd: {sorted(only_e)}")
            check(not only_t, f"rank {lr}: set only by torchrun: {sorted(only_t)}")
            for k, (who, always, _) in differences.items():
                check(not always or k in (e_set if who == "elasticd" else t_set),
                      f"rank {lr}: documented difference {k} not seen under {who}")
            wss = ee.get("TORCH_WORKER_SERVER_SOCKET")
            if wss is not None:
                check(os.path.isabs(wss) and wss.endswith(f"/rank{lr}.sock")
                      and len(wss.encode()) < 108,
                      f"rank {lr}: TORCH_WORKER_SERVER_SOCKET {wss!r} is not an absolute "
                      f"<dir>/rank{lr}.sock shorter than sun_path")
                check(e["wss"] == {"exists": False, "dir": True},
                      f"rank {lr}: TORCH_WORKER_SERVER_SOCKET {wss!r} at worker start: {e['wss']} "
                      f"(WorkerServer needs the path absent and its directory present)")
            check(e_rm == t_rm, f"rank {lr}: caller variables removed: elasticd {sorted(e_rm)}, "
                                f"torchrun {sorted(t_rm)}")
            for k in SAME_VALUE:
                if mode == "standalone" and k == "TORCHELASTIC_USE_AGENT_STORE" and not torch2:
                    # Documented: elasticd's --standalone is c10d with torch 2.x's
                    # shared agent store; torchrun 1.13 lets worker RANK 0 bind.
                    check((ee.get(k), te.get(k)) == ("True", "False"),
                          f"rank {lr}: {k}: elasticd {ee.get(k)!r}, torchrun {te.get(k)!r}")
                    continue
                check(ee.get(k) == te.get(k),
                      f"rank {lr}: {k}: elasticd {ee.get(k)!r} != torchrun {te.get(k)!r}")
            check(ee.get("LOCAL_RANK") == str(lr), f"rank {lr}: LOCAL_RANK {ee.get('LOCAL_RANK')!r}")
            check(te.get("TORCH_NCCL_ASYNC_ERROR_HANDLING") == ("1" if torch2 else None),
                  f"{label()}'s torchrun: TORCH_NCCL_ASYNC_ERROR_HANDLING "
                  f"{te.get('TORCH_NCCL_ASYNC_ERROR_HANDLING')!r}")
            check(te.get("NCCL_ASYNC_ERROR_HANDLING") == (None if torch2 else "1"),
                  f"{label()}'s torchrun: NCCL_ASYNC_ERROR_HANDLING "
                  f"{te.get('NCCL_ASYNC_ERROR_HANDLING')!r}")
            for k in ("TORCH_NCCL_ASYNC_ERROR_HANDLING", "NCCL_ASYNC_ERROR_HANDLING"):
                check(ee.get(k) == "1", f"elasticd: {k} {ee.get(k)!r}")
            # Shapes.
            for who, env, flags in (("elasticd", ee, e_flags), ("torchrun", te, t_flags)):
                rid = env.get("TORCHELASTIC_RUN_ID", "")
                if mode == "standalone":
                    check(UUID4.match(rid), f"{who}: TORCHELASTIC_RUN_ID {rid!r} is not a uuid4")
                    port = env.get("MASTER_PORT", "")
                    check(re.fullmatch(r"[1-9]\d{0,4}", port) and int(port) < 65536,
                          f"{who}: MASTER_PORT {port!r} is not a decimal port")
                    # 1.13 --standalone: MASTER_ADDR = socket.getfqdn(socket.gethostname()).
                    check(env.get("MASTER_ADDR") in ("localhost",
                                                     socket.getfqdn(socket.gethostname())),
                          f"{who}: MASTER_ADDR {env.get('MASTER_ADDR')!r}")
                else:
                    check(rid == "none", f"{who}: TORCHELASTIC_RUN_ID {rid!r}, want 'none'")
                    check(env.get("MASTER_PORT") == flags[-1],
                          f"{who}: MASTER_PORT {env.get('MASTER_PORT')!r}, want {flags[-1]}")
                    check(env.get("MASTER_ADDR") == "127.0.0.1",
                          f"{who}: MASTER_ADDR {env.get('MASTER_ADDR')!r}, want '127.0.0.1'")
                ef = env.get("TORCHELASTIC_ERROR_FILE", "")
                check(re.fullmatch(re.escape(self.tmp) + r"/torchelastic_[a-z0-9_]{8}/"
                                   + re.escape(rid) + r"_[a-z0-9_]{8}/attempt_0/" + str(lr)
                                   + r"/error\.json", ef),
                      f"{who}: TORCHELASTIC_ERROR_FILE {ef!r} is not "
                      f"$TMPDIR/torchelastic_XXXXXXXX/<run_id>_XXXXXXXX/attempt_0/{lr}/error.json")
                check(os.path.isdir(os.path.dirname(ef)), f"{who}: no directory for {ef}")
            # Documented: for --standalone elasticd says "localhost", torchrun 1.13
            # socket.getfqdn(socket.gethostname()) (the same on hosts where the
            # hostname resolves back to localhost).
            check(ee.get("MASTER_ADDR") in (te.get("MASTER_ADDR"), "localhost"),
                  f"MASTER_ADDR: elasticd {ee.get('MASTER_ADDR')!r}, torchrun "
                  f"{te.get('MASTER_ADDR')!r}")
            if ee.get("MASTER_ADDR") != te.get("MASTER_ADDR"):
                report.append(f"note: MASTER_ADDR elasticd {ee.get('MASTER_ADDR')!r}, torchrun "
                              f"{te.get('MASTER_ADDR')!r} (documented)")
            # A TCPStore already listening at MASTER_ADDR:MASTER_PORT (agent store).
            # --standalone: the agent store listens already (torch 2.x); 1.13 does not.
            check(e["master_listening"] == (t["master_listening"] or mode == "standalone"),
                  f"rank {lr}: something listens at MASTER_ADDR:MASTER_PORT before the workers "
                  f"start: elasticd {e['master_listening']}, torchrun {t['master_listening']}")
            # argv: python -u script args, ${local_rank} substituted (safe_substitute).
            script = os.path.join(self.tmp, "env_dump.py")
            want = [WORKER_PY, "-u", script, f"--lr={lr}", "plain", "$HOME", "$x", "${unknown}", "a b"]
            check(t["orig_argv"] == want, f"torchrun orig_argv {t['orig_argv']}")
            check(e["orig_argv"] == t["orig_argv"],
                  f"rank {lr}: sys.orig_argv: elasticd {e['orig_argv']}, torchrun {t['orig_argv']}")
            # Process shape.
            for k in ("cwd", "fds", "stdin", "umask", "status", "signals", "unbuffered"):
                check(e[k] == t[k], f"rank {lr}: {k}: elasticd {e[k]!r}, torchrun {t[k]!r}")
            check(e["ppid"] == e_run.pid, f"elasticd worker ppid {e['ppid']}, agent {e_run.pid}")
            check(t["ppid"] == t_run.pid, f"torchrun worker ppid {t['ppid']}, agent {t_run.pid}")
            # Documented: 1.13 keeps workers in the agent's process group; elasticd
            # makes each worker a session leader, as torchrun 2.x.
            if torch2:
                check(t["pgid"] == t["pid"] and t["sid"] == t["pid"],
                      f"torchrun worker pgid {t['pgid']} sid {t['sid']} pid {t['pid']}")
            else:
                check(t["pgid"] == t_run.pid, f"torchrun worker pgid {t['pgid']}")
            check(e["pgid"] == e["pid"] and e["sid"] == e["pid"],
                  f"elasticd worker pgid {e['pgid']} sid {e['sid']} pid {e['pid']}")
        # Both ranks of one run share the run id, master and run directory.
        for who, ranks in (("elasticd", e_ranks), ("torchrun", t_ranks)):
            for k in ("TORCHELASTIC_RUN_ID", "MASTER_PORT", "MASTER_ADDR"):
                check(ranks[0]["env"][k] == ranks[1]["env"][k], f"{who}: {k} differs by rank")
            check(ranks[0]["env"]["TORCHELASTIC_ERROR_FILE"].rsplit("/", 3)[0]
                  == ranks[1]["env"]["TORCHELASTIC_ERROR_FILE"].rsplit("/", 3)[0],
                  f"{who}: the ranks' error files are in different run directories")
        return problems, report


class E2E(Harness):
    # ---- a: the DDP example ------------------------------------------------

    def test_a_ddp_example(self):
        ddp = os.path.join(SOURCE_ROOT, "examples", "ddp.py")
        self.assertTrue(os.path.exists(ddp), f"{ddp} is missing")
        r = elasticd(["--standalone", "--nproc-per-node", "2", ddp, "--steps", "20"],
                     caller_env(self.tmp), self.tmp)
        self.assertEqual(r.rc, 0, str(r))
        self.assertRegex(r.stdout, r"ddp\.py: world size 2, 20 steps, final loss [0-9.]+, "
                         r"\d+ parameters: all 2 ranks have identical weights", str(r))
        self.assertNotIn("ChildFailedError", r.stderr, str(r))

    # ---- b: @record, the failure table, error files --------------------------

    def test_b1_record_failure(self):
        own = os.path.join(self.tmp, "agent-error.json")
        with open(own, "w") as f:
            f.write("stale contents: torchrun overwrites a pre-existing file")
        r = self.run_record_job("elasticd", own)
        self.assertEqual(r.rc, 1, str(r))
        table = failure_table(r.stderr)
        self.assertIsNotNone(table, f"no line starting with {CFE!r}\n{r}")
        text = "\n".join(table)
        self.assertIn("Root Cause (first observed failure):", text, str(r))
        self.assertIn("ValueError: boom from rank 1", text, str(r))
        self.assertRegex(text, r"(?m)^  rank      : 1 \(local_rank: 1\)$", str(r))
        self.assertRegex(text, r"(?m)^  exitcode  : 1 \(pid: \d+\)$", str(r))
        self.assertRegex(text, r"(?m)^Failures:$", str(r))
        # The py_callstack, each continuation line indented by two more spaces.
        self.assertRegex(text, r"(?m)^  traceback : Traceback \(most recent call last\):$", text)
        self.assertRegex(text, r'(?m)^    File ".*/record_worker\.py", line \d+, in main$', text)
        self.assertRegex(text, r'(?m)^    File ".*/record_worker\.py", line \d+, in explode$', text)
        self.assertRegex(text, r'(?m)^      raise ValueError\("boom from rank 1"\)$', text)
        self.assertRegex(text, r"(?m)^  ValueError: boom from rank 1$", text)
        m = re.search(r"(?m)^  error_file: (.*)$", text)
        self.assertIsNotNone(m, text)
        path = m.group(1)
        self.assertRegex(path, r"/attempt_0/1/error\.json$", text)
        self.assertTrue(os.path.isfile(path), f"{path} does not exist\n{text}")
        with open(path) as f:
            worker = json.load(f)
        self.assertEqual(worker["message"]["message"], "ValueError: boom from rank 1")
        # elasticd's own error file: the root cause with errorCode inside "message".
        self.assertTrue(os.path.isfile(own), f"{own} was not written\n{r}")
        with open(own) as f:
            data = json.load(f)
        self.assertEqual(data["message"]["errorCode"], 1, data)
        self.assertEqual(data["message"]["message"], "ValueError: boom from rank 1", data)
        self.assertIn('raise ValueError("boom from rank 1")',
                      data["message"]["extraInfo"]["py_callstack"], data)
        self.assertRegex(data["message"]["extraInfo"]["timestamp"], r"^\d+$", data)
        # The rank 0 worker was stopped, not reported.
        self.assertIn("<NO_OTHER_FAILURES>", text)

    def test_b2_failure_output_matches_torchrun(self):
        own = os.path.join(self.tmp, "agent-error.json")
        e = self.run_record_job("elasticd", own)
        with open(own) as f:
            e_own = f.read()
        t, t_own = self.torchrun_record()
        self.assertEqual(t.rc, 1, str(t))
        self.assertEqual(e.rc, t.rc, str(e))
        et, tt = failure_table(e.stderr), failure_table(t.stderr)
        self.assertIsNotNone(et, str(e))
        self.assertIsNotNone(tt, str(t))
        self.assertEqual(normalize_table(et), normalize_table(tt),
                         "failure tables differ (elasticd first, torchrun second)")

        # The agent's own error file, byte for byte but the timestamp.
        def norm(s):
            return re.sub(r'"timestamp": "\d+"', '"timestamp": "<T>"', s)
        self.assertEqual(norm(e_own), norm(t_own), "agent error files differ")

    def test_b3_failures_without_record_match_torchrun(self):
        """No error file: the table's traceback line is the signal or the
        "To enable traceback" hint. torchrun writes no agent error file;
        elasticd writes one of its own making with errorCode (issue 18)."""
        for case, action in (("exit3", "sys.exit(3)"),
                             ("sigkill", "os.kill(os.getpid(), signal.SIGKILL)")):
            with self.subTest(case=case):
                text = PLAIN_FAIL_WORKER.replace("ACTION", action)
                tables, owns = {}, {}
                for agent in ("elasticd", "torchrun"):
                    own = os.path.join(self.tmp, f"agent-error-{case}-{agent}.json")
                    r = self.run_record_job(agent, own, f"{case}_worker.py", text)
                    self.assertEqual(r.rc, 1, str(r))
                    tables[agent] = failure_table(r.stderr)
                    self.assertIsNotNone(tables[agent], str(r))
                    owns[agent] = own
                self.assertEqual(normalize_table(tables["elasticd"]),
                                 normalize_table(tables["torchrun"]),
                                 "failure tables differ (elasticd first, torchrun second)")
                self.assertFalse(os.path.exists(owns["torchrun"]))
                with open(owns["elasticd"]) as f:
                    data = json.load(f)
                code = 3 if case == "exit3" else -9
                self.assertEqual(data["message"]["errorCode"], code, data)
                self.assertIn("failed with exitcode %d" % code, data["message"]["message"])
                want = ("  exitcode  : 3 (pid: <PID>)" if case == "exit3"
                        else "  exitcode  : -9 (pid: <PID>)")
                self.assertIn(want, normalize_table(tables["elasticd"]))

    def test_b4_failure_table_host_is_getfqdn(self):
        """The failure table's "host" line is torchrun's socket.getfqdn():
        gethostbyaddr(gethostname()), then the first name with a dot among the
        canonical name and the aliases, else the canonical name. It differs from
        getaddrinfo's canonical name when the reverse lookup gives another
        name (here /etc/hosts "127.0.0.1 localhost" before "127.0.0.1 vm")."""
        own = os.path.join(self.tmp, "agent-error.json")
        e = self.run_record_job("elasticd", own)
        t, _ = self.torchrun_record()
        eh = re.search(r"(?m)^  host      : (.*)$", "\n".join(failure_table(e.stderr) or []))
        th = re.search(r"(?m)^  host      : (.*)$", "\n".join(failure_table(t.stderr) or []))
        self.assertIsNotNone(eh, str(e))
        self.assertIsNotNone(th, str(t))
        self.assertEqual(th.group(1), socket.getfqdn(), "torchrun's host is socket.getfqdn()")
        self.assertEqual(
            eh.group(1), th.group(1),
            f"host line: elasticd {eh.group(1)!r}, torchrun {th.group(1)!r} "
            f"(socket.getfqdn() = {socket.getfqdn()!r}, gethostname() = {socket.gethostname()!r})")

    # ---- c: the worker contract ----------------------------------------------

    def test_c1_worker_contract(self):
        results, base = self.dump_both("standalone")
        problems, report = self.compare_contract(results, base, "standalone")
        if problems or os.environ.get("E2E_SHOW_CONTRACT"):
            self.fail("worker contract (--standalone) differs from torchrun "
                      f"({label()}):\n  "
                      + "\n  ".join(problems) + "\n\n" + "\n".join(report))

    # ---- d: a failure restart ------------------------------------------------

    def test_d_restart_after_failure(self):
        script = self.write("restart_worker.py", RESTART_WORKER)
        logs = os.path.join(self.tmp, "logs")
        r = elasticd(["--standalone", "--nproc-per-node", "2", "--max-restarts", "1",
                      "--log-dir", logs, script], caller_env(self.tmp), self.tmp)
        self.assertEqual(r.rc, 0, str(r))
        for rank in (0, 1):
            self.assertIn(f"restart_worker: rank {rank} attempt 1 max_restarts 1 ok", r.stdout,
                          str(r))
        self.assertNotIn("attempt 0 max_restarts", r.stdout, str(r))
        self.assertNotIn("ChildFailedError", r.stderr, str(r))
        self.assertIn("Worker group FAILED. 1/1 attempts left; will restart worker group",
                      r.stderr, str(r))
        # attempt_0 kept the failure's error file; attempt_1 has none.
        runs = os.listdir(logs)
        self.assertEqual(len(runs), 1, runs)
        run_dir = os.path.join(logs, runs[0])
        self.assertEqual(sorted(os.listdir(run_dir)), ["attempt_0", "attempt_1", "events.jsonl"])
        with open(os.path.join(run_dir, "attempt_0", "1", "error.json")) as f:
            self.assertEqual(json.load(f)["message"]["message"],
                             "RuntimeError: rank 1 fails on attempt 0")
        for lr in ("0", "1"):
            self.assertFalse(os.path.exists(os.path.join(run_dir, "attempt_1", lr, "error.json")))


if __name__ == "__main__":
    unittest.main(verbosity=2)
