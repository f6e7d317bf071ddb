#!/usr/bin/python3
"""End-to-end: elasticd's event log against PyTorch's own Events API
(torch.distributed.elastic.events of Debian 12's python3-torch 1.13, and of
Debian 13's 2.6 as e2e_events_compat_torch2; e2e_common.py). torch is used in
processes of its own interpreter (torch_events_side.py), never imported here.

  a  elasticd -> torch: every line elasticd writes in real torch jobs (a gloo
     all_reduce job that fails on attempt 0 and restarts, with an @record error
     file) is read by torch's Event.deserialize / RdzvEvent.deserialize, and
     torch serialises it back to the very same bytes; so are the events
     `events_tool write` builds (odd values: unicode, floats, int64 limits).
  b  torch -> elasticd: the lines torch itself writes are read by elasticd's
     strict parser and serialised back to the same bytes (events_tool check):
     a real torchrun job whose "null" and "dynamic_rendezvous" event
     handlers are replaced by a file (its worker status events and the real
     c10d rendezvous's RdzvEvents), and a set of hand-built events.
  c  the schema of torchrun's worker status events and elasticd's is the
     same: keys and their order (elasticd appends torch 2.x's duration_ms),
     the inner metadata's keys, and the states at the end of a run.

Run by `meson test --suite e2e` (env ELASTICD, EVENTS_TOOL), or by hand:
  ELASTICD=build/src/elasticd EVENTS_TOOL=build/tests/events_tool \
      /usr/bin/python3 tests/e2e/test_events_compat.py -v
"""

import json
import os
import shutil
import subprocess
import sys
import tempfile
import textwrap
import unittest

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
from e2e_common import ELASTICD, EVENTS_TOOL, HERE, PY, clean_env, torch2  # noqa: E402
RUN_TIMEOUT = 120

TORCH_SIDE = os.path.join(HERE, "torch_events_side.py")

STATUS_KEYS = ["run_id", "global_rank", "group_rank", "worker_id", "role", "hostname",
                   "state", "total_run_time", "rdzv_backend", "raw_error", "metadata",
                   "agent_restarts"]

# torchrun 1.13 as `python -m torch.distributed.run`, with its Std parsing bug
# on Python >= 3.11 patched (see test_ddp.py), and its "null" and
# "dynamic_rendezvous" event handlers (NullHandlers) replaced by a file, so
# that every event it records is written, exactly as serialize() makes it.
TORCHRUN_CODE = r"""
import logging, os, re, runpy, sys
from torch.distributed.elastic.multiprocessing import api as _api
from torch.distributed.elastic.events import handlers
Std = _api.Std
if Std.from_str("0") is None:
    def _from_str(vm):
        if re.match(_api._VALUE_REGEX, vm):
            return Std(int(vm))
        if re.match(_api._MAPPING_REGEX, vm):
            return {int(k): Std(int(v)) for k, v in (p.split(":") for p in vm.split(","))}
        raise ValueError(vm)
    Std.from_str = staticmethod(_from_str)
h = logging.FileHandler(os.environ["TORCH_EVENTS_FILE"])
h.setFormatter(logging.Formatter("%(message)s"))
handlers._log_handlers["null"] = h
handlers._log_handlers["dynamic_rendezvous"] = h
runpy.run_module("torch.distributed.run", run_name="__main__", alter_sys=True)
"""

# Two gloo ranks: all_reduce; rank 1 raises on attempt 0 (an @record error file).
RESTART_WORKER = r'''
import os

import torch
import torch.distributed as dist
from torch.distributed.elastic.multiprocessing.errors import record


@record
def main():
    dist.init_process_group("gloo", init_method="env://")
    t = torch.ones(1)
    dist.all_reduce(t)
    assert t.item() == dist.get_world_size(), t
    if os.environ["TORCHELASTIC_RESTART_COUNT"] == "0" and dist.get_rank() == 1:
        raise RuntimeError("rank 1 fails on attempt 0 \u2603")
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
'''

# The same, failing before any rank writes to the store. torchrun 2.6 gives
# every attempt's workers the agent store without a per-attempt prefix
# (torch/distributed/rendezvous.py, _create_c10d_store: "We create a new
# TCPStore for every retry so no need to add prefix"), so attempt 1's gloo
# reads attempt 0's addresses and fails ("Gloo connectFullMesh failed") when
# attempt 0 got as far as init_process_group. elasticd's agent store is not
# affected (RESTART_WORKER restarts under elasticd with both versions).
RESTART_BEFORE_INIT_WORKER = r'''
import os, time

import torch
import torch.distributed as dist
from torch.distributed.elastic.multiprocessing.errors import record


@record
def main():
    if os.environ["TORCHELASTIC_RESTART_COUNT"] == "0":
        if os.environ["RANK"] == "1":
            raise RuntimeError("rank 1 fails on attempt 0 \u2603")
        time.sleep(60)  # rank 0: stopped by the agent
    dist.init_process_group("gloo", init_method="env://")
    t = torch.ones(1)
    dist.all_reduce(t)
    assert t.item() == dist.get_world_size(), t
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
'''

OK_WORKER = r'''
import os, sys
sys.exit(0)
'''



def torch_reads_back(tc, lines):
    """torch's deserialize reads every line, and its serialize gives the same
    bytes; returns torch_events_side.py's view of each event (dicts)."""
    path = os.path.join(tc.tmp, "readback.jsonl")
    with open(path, "w", encoding="utf-8") as f:
        f.write("".join(ln + "\n" for ln in lines))
    res = subprocess.run([PY, TORCH_SIDE, "readback", path], capture_output=True, text=True,
                         cwd=tc.tmp, timeout=RUN_TIMEOUT)
    tc.assertEqual(res.returncode, 0, res.stderr[-6000:])
    evs = json.loads(res.stdout)
    tc.assertEqual(len(evs), len(lines))
    for line, ev in zip(lines, evs):
        tc.assertTrue(ev["typed"], ev)
        tc.assertEqual(ev.get("again", line), line)
    return evs


class EventsCompatTest(unittest.TestCase):
    maxDiff = None

    def setUp(self):
        self.assertTrue(os.access(ELASTICD, os.X_OK), ELASTICD)
        self.assertTrue(os.access(EVENTS_TOOL, os.X_OK), EVENTS_TOOL)
        self.tmp = tempfile.mkdtemp(prefix="elasticd-e2e-events-")

    def tearDown(self):
        shutil.rmtree(self.tmp, ignore_errors=True)

    def path(self, *p):
        return os.path.join(self.tmp, *p)

    def write(self, name, text):
        p = self.path(name)
        with open(p, "w") as f:
            f.write(textwrap.dedent(text))
        return p

    def run_cmd(self, argv, env, expect_rc):
        res = subprocess.run(argv, env=env, cwd=self.tmp, stdin=subprocess.DEVNULL,
                             capture_output=True, text=True, timeout=RUN_TIMEOUT)
        self.assertTrue(expect_rc is None or res.returncode == expect_rc,
                         "%r\n--- stdout\n%s\n--- stderr\n%s" % (argv, res.stdout,
                                                                 res.stderr[-6000:]))
        return res

    def elasticd_events(self, script, *args, expect_rc=0, name="elasticd.jsonl"):
        path = self.path(name)
        self.run_cmd([ELASTICD, "--log-dir", self.path("logs"), "--event-log-file", path,
                      *args, script], clean_env(), expect_rc)
        with open(path, encoding="utf-8") as f:
            return [ln.rstrip("\n") for ln in f]

    def torchrun_events(self, script, *args, name="torchrun.jsonl"):
        """The events of a torchrun job. Its exit status is not checked:
        torchrun 1.13 sometimes fails to close its own c10d rendezvous at the
        end (RendezvousConnectionError: Broken pipe, exit 1) after every event
        of the run was recorded; the tests check the events themselves."""
        path = self.path(name)
        self.run_cmd([PY, "-c", TORCHRUN_CODE, "--monitor_interval", "0.2", *args, script],
                     clean_env(TORCH_EVENTS_FILE=path), None)
        with open(path, encoding="utf-8") as f:
            return [ln.rstrip("\n") for ln in f]

    def events_tool_check(self, lines, name):
        p = self.path(name)
        with open(p, "w", encoding="utf-8") as f:
            f.write("".join(ln + "\n" for ln in lines))
        res = subprocess.run([EVENTS_TOOL, "check", p], capture_output=True, text=True)
        self.assertEqual(res.returncode, 0, res.stderr + res.stdout)
        return res.stdout

    # -- a: elasticd -> torch --

    def test_a_torch_reads_elasticd_job_with_restart(self):
        worker = self.write("restart.py", RESTART_WORKER)
        lines = self.elasticd_events(worker, "--standalone", "--nproc-per-node", "2",
                                     "--max-restarts", "1")
        self.assertGreater(len(lines), 20)
        evs = torch_reads_back(self, lines)
        names = [e["name"] for e in evs]
        self.assertIn("elasticd.agent.restart", names)
        self.assertEqual(names[-1], "elasticd.agent.exit")
        # The failed attempt's root cause is in the log as elasticd saw it; the
        # last attempt succeeded: torchrun's end-of-run events.
        ends = [(e["source"], e["metadata"]["state"]) for e in evs
                if e["kind"] == "Event" and e["name"].startswith("torchelastic.worker.status.")]
        self.assertEqual(ends[-3:], [("WORKER", "SUCCEEDED"), ("WORKER", "SUCCEEDED"),
                                     ("AGENT", "SUCCEEDED")])
        rdzv = [e for e in evs if e["kind"] == "RdzvEvent"]
        self.assertEqual([e["node_state"] for e in rdzv][-1], "SUCCEEDED")
        self.assertEqual(sum(1 for e in rdzv if e["rank"] is not None), 2)

    def test_a_torch_reads_elasticd_failure_with_error_file(self):
        worker = self.write("restart.py", RESTART_WORKER)
        lines = self.elasticd_events(worker, "--standalone", "--nproc-per-node", "2",
                                     expect_rc=1)
        evs = torch_reads_back(self, lines)
        failed = [e for e in evs if e["name"] == "torchelastic.worker.status.FAILED"]
        self.assertEqual(len(failed), 1)
        raw = json.loads(failed[0]["metadata"]["raw_error"])
        self.assertIn("rank 1 fails on attempt 0 \u2603", raw["message"]["message"])
        self.assertIn("py_callstack", raw["message"]["extraInfo"])
        self.assertIn("torchelastic.worker.status.TERMINATED", [e["name"] for e in evs])

    def test_a_torch_reads_events_tool_write(self):
        out = subprocess.run([EVENTS_TOOL, "write"], capture_output=True, text=True,
                             check=True).stdout
        lines = out.splitlines()
        self.assertEqual(len(lines), 5)
        evs = torch_reads_back(self, lines)
        odd = evs[2]["metadata"]
        self.assertEqual(odd["unicode"], "na\u00efve \u2603 \U0001F600 \x7f")
        self.assertEqual(odd["quotes"], "\"'\\/\t\n")
        self.assertEqual(odd["min"], -2**63)
        self.assertEqual(odd["third"], 1 / 3)
        self.assertEqual(odd["big"], 1e300)
        self.assertEqual(odd["tiny"], 5e-324)
        self.assertIsInstance(odd["whole"], float)
        self.assertIs(odd["no"], False)
        self.assertIsNone(odd["none"])
        self.assertEqual(evs[4]["node_state"], "FAILED")
        self.assertEqual(evs[3]["rank"], 1)

    # -- b: torch -> elasticd --

    def test_b_elasticd_reads_torchrun_job(self):
        worker = self.write("restart.py", RESTART_BEFORE_INIT_WORKER)
        lines = self.torchrun_events(worker, "--standalone", "--nproc_per_node", "2",
                                     "--max_restarts", "1")
        kinds = [("source" in json.loads(ln)) for ln in lines]
        # The end of torchrun's run() was recorded (the launcher's AGENT event).
        self.assertIn('"name": "torchelastic.worker.status.SUCCEEDED", "source": "AGENT"',
                      "\n".join(lines))
        # The real c10d rendezvous's RdzvEvents and torchrun's status events.
        self.assertIn(True, kinds)
        self.assertIn(False, kinds)
        out = self.events_tool_check(lines, "torchrun.jsonl")
        self.assertIn("%d lines" % len(lines), out)

    def test_b_elasticd_reads_torch_built_events(self):
        path = self.path("torch_built.jsonl")
        self.run_cmd([PY, TORCH_SIDE, "build", path], clean_env(), 0)
        with open(path, encoding="utf-8") as f:
            lines = [ln.rstrip("\n") for ln in f]
        self.assertEqual(len(lines), 9)
        out = self.events_tool_check(lines, "torch_built.jsonl")
        self.assertIn("9 lines: 2 Event, 7 RdzvEvent, 0 bad", out)

    # -- c: the same schema --

    def test_c_status_event_schema_matches_torchrun(self):
        worker = self.write("ok.py", OK_WORKER)
        mine = [json.loads(ln) for ln in self.elasticd_events(worker, "--standalone",
                                                                "--nproc-per-node", "2")]
        theirs = [json.loads(ln) for ln in self.torchrun_events(worker, "--standalone",
                                                                 "--nproc_per_node", "2")]

        def status(evs):
            return [e for e in evs if "source" in e
                    and e["name"].startswith("torchelastic.worker.status.")]
        s_mine, s_theirs = status(mine), status(theirs)
        end = ([("WORKER", "torchelastic.worker.status.SUCCEEDED")] * 2
               + [("AGENT", "torchelastic.worker.status.SUCCEEDED")])
        # torch 2.x starts with its agent's RENDEZVOUS and ASSIGN_WORKER_RANKS
        # events, as elasticd does; torch 1.13 has none: the whole sequence
        # matches torchrun 2.x, the end matches 1.13.
        start = ([("AGENT", "torchelastic.worker.status.RENDEZVOUS"),
                  ("AGENT", "torchelastic.worker.status.ASSIGN_WORKER_RANKS")]
                 if torch2() else [])
        self.assertEqual([(e["source"], e["name"]) for e in s_theirs], start + end)
        self.assertEqual([(e["source"], e["name"]) for e in s_mine][-len(start + end):],
                         [(e["source"], e["name"]) for e in s_theirs])
        s_theirs = s_theirs[len(start):]
        for a, b in zip(s_mine[-3:], s_theirs):
            self.assertEqual(list(a), list(b))
            self.assertEqual(list(a["metadata"]), STATUS_KEYS + ["duration_ms"])
            # torch 2.x appends duration_ms as elasticd does; 1.13 has none.
            self.assertEqual(list(b["metadata"]),
                             STATUS_KEYS + (["duration_ms"] if torch2() else []))
            # Not hostname: util.c's host_fqdn() keeps gethostname() when no
            # name of the host has a dot, where Python's getfqdn() takes
            # gethostbyaddr()'s name ("localhost" on a VM whose /etc/hosts maps
            # its name to 127.0.0.1).
            for k in ("global_rank", "group_rank", "role", "state", "rdzv_backend", "raw_error",
                      "agent_restarts"):
                self.assertEqual(a["metadata"][k], b["metadata"][k], k)
            self.assertEqual(type(a["metadata"]["worker_id"]), type(b["metadata"]["worker_id"]))
            ia, ib = json.loads(a["metadata"]["metadata"]), json.loads(b["metadata"]["metadata"])
            self.assertEqual(ia, ib)
            self.assertEqual(list(ia), list(ib))
        # Both c10d rendezvous logs: joined as rank 0 of 1, closed at the end.
        for evs in (mine, theirs):
            rd = [e for e in evs if "node_state" in e]
            joined = [e for e in rd if e["rank"] is not None]
            self.assertEqual(len(joined), 1, rd)
            self.assertTrue(joined[0]["name"].endswith("next_rendezvous"), joined)
            self.assertRegex(joined[0]["message"], r"has joined round 0 of the rendezvous "
                             r"'[^']+' as rank 0 in a world of size 1\.$")
            self.assertEqual(rd[-1]["node_state"], "SUCCEEDED")
            self.assertIn("has closed the rendezvous", rd[-1]["message"])


if __name__ == "__main__":
    unittest.main(verbosity=2)
