#!/usr/bin/python3
"""The events elasticd emits (man elasticd(8), EVENTS): where they go
(--event-log-handler null|console|file, --event-log-file, the default
<run dir>/events.jsonl), what a run writes (torchrun's worker status events,
RdzvEvents, elasticd's lifecycle events) and in which order, and that every
line reads back through elasticd's strict parser as the same bytes
(tests/events_tool check). torch's own reader is exercised in
tests/e2e/test_events_compat.py."""

import json
import os
import signal
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import lib  # noqa: E402

EVENTS_TOOL = os.environ.get("EVENTS_TOOL") or os.path.join(
    lib.SOURCE_ROOT, "build", "tests", "events_tool")

STATUS_KEYS = ["run_id", "global_rank", "group_rank", "worker_id", "role", "hostname", "state",
               "total_run_time", "rdzv_backend", "raw_error", "metadata", "agent_restarts",
               "duration_ms"]
RDZV_KEYS = ["name", "run_id", "message", "hostname", "pid", "node_state", "master_endpoint",
             "rank", "local_id", "error_trace"]
COMMON = ["run_id", "hostname", "role"]

# Rank 1 fails at once; rank 0 waits to be stopped.
FAIL_SH = """\
if [ "$LOCAL_RANK" = 1 ]; then exit 3; fi
exec sleep 30
"""

# Writes a flat-form error file, then fails.
ERRFILE_PY = r"""
import json, os, sys
with open(os.environ["TORCHELASTIC_ERROR_FILE"], "w") as f:
    json.dump({"message": "boom \u2603", "timestamp": 1700000000}, f)
sys.exit(5)
"""


def names(events):
    return [e["name"] for e in events]


def statuses(events):
    return [(e["source"], e["metadata"]["state"]) for e in events
            if e["name"].startswith("torchelastic.worker.status.")]


class EventsTest(lib.ElasticdTestCase):

    # -- helpers --

    def read_events(self, path):
        """The lines of an event log, checked: whole lines, each read back by
        elasticd's parser as the same bytes, then parsed with Python's json."""
        data = lib.read_bytes(path)
        self.assertTrue(data.endswith(b"\n"), "last line is not complete")
        check = subprocess.run([EVENTS_TOOL, "check", path], capture_output=True, text=True)
        self.assertEqual(check.returncode, 0, check.stderr + check.stdout)
        out = []
        for line in data.decode("utf-8").splitlines():
            obj = json.loads(line)
            if "source" in obj:
                self.assertEqual(list(obj), ["name", "source", "timestamp", "metadata"])
            else:
                self.assertEqual(list(obj), RDZV_KEYS)
            out.append(obj)
        return out

    def run_logged(self, *args, rc=0, **kw):
        log_dir = self.path("logs")
        res = self.run_elasticd("--log-dir", log_dir, *args, **kw)
        self.assertRc(res, rc)
        run_dir = self.only_run_dir(log_dir)
        path = os.path.join(run_dir, "events.jsonl")
        self.assertTrue(os.path.exists(path), "no %s: %r" % (path, res))
        return res, run_dir, self.read_events(path)

    def by_name(self, events, name):
        return [e for e in events if e["name"] == name]

    # -- a successful run --

    def test_success_default_file(self):
        t0 = int(time.time() * 1000)
        # The static backend: only the agent's rendezvous events (a c10d
        # rendezvous adds its own steps).
        res, run_dir, ev = self.run_logged("--rdzv-id", "evjob", "--nproc-per-node", "2",
                                           "--no-python", "/bin/true")
        t1 = int(time.time() * 1000)
        self.assertEqual(names(ev), [
            "elasticd.agent.started",
            "rdzv_static.c:next_rendezvous",
            "rdzv_static.c:next_rendezvous",
            "torchelastic.worker.status.RENDEZVOUS",
            "torchelastic.worker.status.ASSIGN_WORKER_RANKS",
            "elasticd.worker.started",
            "elasticd.worker.started",
            "elasticd.worker.exited",
            "elasticd.worker.exited",
            "torchelastic.worker.status.SUCCEEDED",
            "torchelastic.worker.status.SUCCEEDED",
            "torchelastic.worker.status.SUCCEEDED",
            "elasticd.agent.exit",
        ])
        agent_pid = ev[0]["metadata"]["pid"]
        for e in ev:
            if "source" in e:
                self.assertTrue(t0 <= e["timestamp"] <= t1, e)
                self.assertEqual(e["metadata"]["run_id"], "evjob")
            else:
                self.assertEqual(e["pid"], agent_pid)
                self.assertEqual(e["run_id"], "evjob")
                self.assertEqual(e["local_id"], 0)
        self.assertEqual(ev[0]["metadata"]["run_dir"], run_dir)
        self.assertEqual(ev[0]["metadata"]["local_world_size"], 2)

        # torchrun's status events: exact keys in torchrun's order.
        st = [e for e in ev if e["name"].startswith("torchelastic.worker.status.")]
        for e in st:
            self.assertEqual(list(e["metadata"]), STATUS_KEYS)
            md = e["metadata"]
            self.assertEqual(md["rdzv_backend"], "static")
            self.assertEqual(md["group_rank"], 0)
            self.assertEqual(md["agent_restarts"], 0)
            self.assertIsInstance(md["total_run_time"], int)
        self.assertEqual(statuses(ev), [("AGENT", "RENDEZVOUS"), ("AGENT", "ASSIGN_WORKER_RANKS"),
                                        ("WORKER", "SUCCEEDED"), ("WORKER", "SUCCEEDED"),
                                        ("AGENT", "SUCCEEDED")])
        self.assertIsInstance(st[0]["metadata"]["duration_ms"], float)
        self.assertIsNone(st[2]["metadata"]["duration_ms"])
        started = self.by_name(ev, "elasticd.worker.started")
        workers = [e for e in st if e["source"] == "WORKER"]
        for lr, (s, w) in enumerate(zip(started, workers)):
            md = w["metadata"]
            self.assertEqual(md["global_rank"], lr)
            self.assertEqual(md["worker_id"], str(s["metadata"]["pid"]))
            self.assertIsNone(md["raw_error"])
            self.assertEqual(json.loads(md["metadata"]), {
                "group_world_size": 1, "entry_point": "true", "local_rank": [lr],
                "role_rank": [lr], "role_world_size": [2]})
            self.assertEqual(s["source"], "WORKER")
            for k in ("gpu", "numa_nodes", "cpus", "mems", "mode"):
                self.assertIsNone(s["metadata"][k], k)
            self.assertEqual(s["metadata"]["error_file"],
                             os.path.join(run_dir, "attempt_0", str(lr), "error.json"))
        agent = st[-1]["metadata"]
        self.assertIsNone(agent["global_rank"])
        self.assertIsNone(agent["worker_id"])
        self.assertEqual(json.loads(agent["metadata"]),
                         {"group_world_size": 1, "entry_point": "true"})
        for x in self.by_name(ev, "elasticd.worker.exited"):
            self.assertEqual(x["metadata"]["exitcode"], 0)
            self.assertEqual(x["metadata"]["exit_status"], 0)
            self.assertIsNone(x["metadata"]["signal"])
            self.assertFalse(x["metadata"]["failed"])
        rd = [e for e in ev if "node_state" in e]
        self.assertEqual([(e["node_state"], e["rank"]) for e in rd],
                         [("RUNNING", None), ("RUNNING", 0)])
        self.assertIn("attempts to join the next round of the rendezvous 'evjob'", rd[0]["message"])
        self.assertIn("has joined round 0 of the rendezvous 'evjob' as rank 0 in a world of size 1",
                      rd[1]["message"])
        self.assertEqual(ev[-1]["metadata"]["exit_code"], 0)
        self.assertIsNone(ev[-1]["metadata"]["signal"])

    # -- failures, restarts, error files --

    def test_failure_with_restart(self):
        script = self.write_sh("fail.sh", FAIL_SH)
        res, run_dir, ev = self.run_logged("--nproc-per-node", "2", "--max-restarts", "1",
                                           "--rdzv-id", "r", "--no-python", script, rc=1)
        restarts = self.by_name(ev, "elasticd.agent.restart")
        self.assertEqual(len(restarts), 1)
        self.assertEqual(restarts[0]["metadata"]["attempt"], 1)
        self.assertEqual(restarts[0]["metadata"]["remaining_restarts"], 0)
        self.assertEqual(restarts[0]["metadata"]["reason"], "worker group FAILED")
        stopping = self.by_name(ev, "elasticd.group.stopping")
        self.assertEqual([s["metadata"]["attempt"] for s in stopping], [0, 1])
        self.assertEqual(stopping[0]["metadata"]["signal"], "SIGTERM")
        exited = self.by_name(ev, "elasticd.worker.exited")
        self.assertEqual(sorted((x["metadata"]["attempt"], x["metadata"]["local_rank"],
                                 x["metadata"]["exitcode"], x["metadata"]["failed"])
                                for x in exited),
                         [(0, 0, -15, False), (0, 1, 3, True), (1, 0, -15, False),
                          (1, 1, 3, True)])
        term = [x for x in exited if x["metadata"]["exitcode"] == -15][0]["metadata"]
        self.assertEqual(term["signal"], "SIGTERM")
        self.assertIsNone(term["exit_status"])
        # torchrun's end of run(): FAILED for the failed worker, TERMINATED for
        # the one stopped because of it, then AGENT SUCCEEDED (run() returned).
        end = statuses(ev)[-3:]
        self.assertEqual(end, [("WORKER", "TERMINATED"), ("WORKER", "FAILED"),
                               ("AGENT", "SUCCEEDED")])
        failed = [e for e in ev if e["name"] == "torchelastic.worker.status.FAILED"][0]
        self.assertEqual(failed["metadata"]["raw_error"], '{"message": "<NONE>"}')
        self.assertEqual(failed["metadata"]["agent_restarts"], 1)
        self.assertEqual(failed["metadata"]["global_rank"], 1)
        self.assertEqual(ev[-1]["name"], "elasticd.agent.exit")
        self.assertEqual(ev[-1]["metadata"]["exit_code"], 1)
        self.assertEqual(ev[-1]["metadata"]["attempt"], 1)
        self.assertEqual(ev[-2]["name"], "torchelastic.worker.status.SUCCEEDED")
        # Two rendezvous rounds.
        joined = [e for e in ev if e.get("rank") is not None]
        self.assertEqual(len(joined), 2)
        self.assertIn("has joined round 1 ", joined[1]["message"])

    def test_raw_error_is_the_error_file(self):
        script = self.write_py("err.py", ERRFILE_PY)
        res, run_dir, ev = self.run_logged("--nproc-per-node", "1", script, rc=1)
        failed = [e for e in ev if e["name"] == "torchelastic.worker.status.FAILED"]
        self.assertEqual(len(failed), 1)
        raw = failed[0]["metadata"]["raw_error"]
        with open(os.path.join(run_dir, "attempt_0", "0", "error.json")) as f:
            data = json.load(f)
        # json.dumps(failure.error_file_data), byte for byte.
        self.assertEqual(raw, json.dumps(data))
        self.assertIn("\\u2603", raw)
        md = json.loads(failed[0]["metadata"]["metadata"])
        self.assertEqual(md["entry_point"], os.path.basename(lib.PYTHON_EXEC))

    def test_exec_failure(self):
        res, run_dir, ev = self.run_logged("--no-python", self.path("missing"), rc=1)
        exited = self.by_name(ev, "elasticd.worker.exited")
        self.assertEqual(exited[0]["metadata"]["exitcode"], 127)
        self.assertEqual(exited[0]["metadata"]["exec_error"], "No such file or directory")
        self.assertTrue(exited[0]["metadata"]["failed"])

    # -- signals --

    def test_signal(self):
        script = self.write_sh("sleep.sh", "exec sleep 30\n")
        evfile = self.path("ev", "events.jsonl")
        a = self.start("--nproc-per-node", "2", "--event-log-file", evfile, "--no-python",
                       script)

        def started():
            try:
                return lib.read_text(evfile).count("elasticd.worker.started") == 2
            except OSError:
                return False
        self.assertTrue(lib.wait_until(started), a.stderr_text())
        a.signal(signal.SIGTERM)
        res = a.wait()
        self.assertRc(res, 128 + signal.SIGTERM)
        ev = self.read_events(evfile)
        sig = self.by_name(ev, "elasticd.signal.received")
        self.assertEqual([(s["metadata"]["signal"], s["metadata"]["action"]) for s in sig],
                         [("SIGTERM", "stop")])
        stopping = self.by_name(ev, "elasticd.group.stopping")
        self.assertEqual(stopping[0]["metadata"]["reason"], "signal received")
        self.assertEqual(stopping[0]["metadata"]["signal"], "SIGTERM")
        self.assertEqual(sorted(x["metadata"]["signal"]
                                for x in self.by_name(ev, "elasticd.worker.exited")),
                         ["SIGTERM", "SIGTERM"])
        # torchrun: a signal makes run() raise, so no worker status events, and
        # the launcher records AGENT FAILED with the SignalException.
        self.assertEqual(statuses(ev)[-1], ("AGENT", "FAILED"))
        self.assertFalse([s for s in statuses(ev) if s[0] == "WORKER"])
        failed = self.by_name(ev, "torchelastic.worker.status.FAILED")[0]["metadata"]
        self.assertEqual(failed["raw_error"],
                         "SignalException: Process %d got signal: %d" % (a.pid, signal.SIGTERM))
        self.assertEqual(ev[-1]["name"], "elasticd.agent.exit")
        self.assertEqual(ev[-1]["metadata"]["signal"], "SIGTERM")
        self.assertEqual(ev[-1]["metadata"]["exit_code"], 128 + signal.SIGTERM)
        self.assertNoLeftovers()

    # -- sinks --

    def test_console(self):
        log_dir = self.path("logs")
        res = self.run_elasticd("--log-dir", log_dir, "--event-log-handler", "console",
                                "--no-python", "/bin/true")
        self.assertRc(res, 0)
        lines = [ln for ln in res.err.splitlines() if ln.startswith("{")]
        self.assertEqual(json.loads(lines[0])["name"], "elasticd.agent.started")
        self.assertEqual(json.loads(lines[-1])["name"], "elasticd.agent.exit")
        self.assertEqual(len(lines), 10)
        run_dir = self.only_run_dir(log_dir)
        self.assertFalse(os.path.exists(os.path.join(run_dir, "events.jsonl")))
        path = self.path("console.jsonl")
        with open(path, "w") as f:
            f.write("\n".join(lines) + "\n")
        self.read_events(path)

    def test_null_and_dynamic_rendezvous(self):
        for handler, env in (("null", None), (None, "dynamic_rendezvous")):
            log_dir = self.path("logs-%s" % (handler or env))
            args = ["--log-dir", log_dir]
            if handler:
                args += ["--event-log-handler", handler]
            res = self.run_elasticd(*args, "--no-python", "/bin/true",
                                    env=self.env(PET_EVENT_LOG_HANDLER=env))
            self.assertRc(res, 0)
            self.assertNotIn('{"name"', res.err)
            self.assertEqual(os.listdir(self.only_run_dir(log_dir)), ["attempt_0"])

    def test_event_log_file_appends(self):
        path = self.path("a", "b", "events.jsonl")
        for _ in range(2):
            res = self.run_elasticd("--event-log-file", path, "--log-dir", self.path("logs"),
                                    "--no-python", "/bin/true")
            self.assertRc(res, 0)
        ev = self.read_events(path)
        starts = self.by_name(ev, "elasticd.agent.started")
        self.assertEqual(len(starts), 2)
        self.assertNotEqual(starts[0]["metadata"]["pid"], starts[1]["metadata"]["pid"])
        self.assertIn(starts[0]["metadata"]["orphan_guard"], ("cgroup", "sentinel"))
        self.assertEqual(len(self.by_name(ev, "elasticd.agent.exit")), 2)
        # Not also in the run directories.
        for d in self.run_dirs(self.path("logs")):
            self.assertFalse(os.path.exists(os.path.join(d, "events.jsonl")))

    def test_log_dir_dev_null(self):
        res = self.run_elasticd("--log-dir", "/dev/null", "--no-python", "/bin/true")
        self.assertRc(res, 0)
        res = self.run_elasticd("--log-dir", "/dev/null", "--event-log-handler", "console",
                                "--no-python", "/bin/true")
        self.assertRc(res, 0)
        self.assertIn('{"name": "elasticd.agent.exit"', res.err)

    def test_many_workers_whole_lines(self):
        path = self.path("events.jsonl")
        res = self.run_elasticd("--nproc-per-node", "16", "--max-restarts", "2",
                                "--event-log-file", path, "--no-python", "/bin/false")
        self.assertRc(res, 1)
        ev = self.read_events(path)
        self.assertEqual(len(self.by_name(ev, "elasticd.worker.started")), 48)
        self.assertEqual(len(self.by_name(ev, "elasticd.worker.exited")), 48)
        self.assertEqual(len([s for s in statuses(ev) if s[0] == "WORKER"]), 16)

    # -- errors --

    def test_bad_settings(self):
        res = self.run_elasticd("--event-log-handler", "syslog", "--no-python", "/bin/true")
        self.assertRc(res, 2)
        self.assertIn("--event-log-handler: invalid value 'syslog': expected null, console, "
                      "file or dynamic_rendezvous", res.err)
        res = self.run_elasticd("--event-log-handler", "console", "--event-log-file",
                                self.path("x"), "--no-python", "/bin/true")
        self.assertRc(res, 2)
        self.assertIn("--event-log-file: the events go to 'console', not to a file", res.err)
        res = self.run_elasticd("--event-ring-size", "-1", "--no-python", "/bin/true")
        self.assertRc(res, 2)
        blocker = self.write_script("blocker", "")
        res = self.run_elasticd("--event-log-file", os.path.join(blocker, "ev.jsonl"),
                                "--no-python", "/bin/true")
        self.assertRc(res, 1)
        self.assertIn("cannot open the event log '%s/ev.jsonl': Not a directory" % blocker,
                      res.err)

    def test_rendezvous_cannot_be_created(self):
        res = self.run_elasticd("--event-log-handler", "console", "--rdzv-backend", "static",
                                "--nnodes", "2", "--node-rank", "5", "--no-python", "/bin/true")
        self.assertRc(res, 2)
        lines = [json.loads(ln) for ln in res.err.splitlines() if ln.startswith("{")]
        self.assertEqual(len(lines), 1, res)
        self.assertEqual(lines[0]["name"], "rdzv_static.c:create_handler")
        self.assertEqual(lines[0]["node_state"], "FAILED")
        self.assertIn("ValueError: --node-rank: invalid value '5'", lines[0]["message"])
        self.assertEqual(lines[0]["error_trace"], lines[0]["message"])

    # -- a c10d rendezvous: torch's steps, each with torch's node_state --

    def test_c10d_steps(self):
        port = str(lib._free_port())
        agents = [self.start("--nnodes", "2", "--rdzv-backend", "c10d", "--rdzv-endpoint",
                             "127.0.0.1:" + port, "--rdzv-id", "steps", "--log-dir",
                             self.path("logs%d" % i), "--no-python", "/bin/true")
                  for i in range(2)]
        files = []
        for i, a in enumerate(agents):
            self.assertRc(a.wait(), 0)
            run_dir = self.only_run_dir(self.path("logs%d" % i))
            rdzv = [e for e in self.read_events(os.path.join(run_dir, "events.jsonl"))
                    if "node_state" in e]
            files.append((a.pid, rdzv))
        # One agent hosts the store: its file starts with that (recorded
        # before the run directory existed).
        hosts = [(pid, ev) for pid, ev in files if ev[0]["name"] == "rdzv_c10d.c:_create_tcp_store"]
        self.assertEqual(len(hosts), 1, files)
        pid, ev = hosts[0]
        self.assertEqual((ev[0]["node_state"], ev[0]["message"]),
                         ("INIT", "Process %d hosts the TCP store for the C10d rendezvous "
                          "backend." % pid))
        completes = 0
        for pid, ev in files:
            steps = [e["name"].split(":")[1] for e in ev]
            joined = [e for e in ev if "has joined" in e["message"]]
            self.assertEqual(len(joined), 1, steps)
            self.assertEqual(joined[0]["node_state"], "RUNNING")
            # Each node's own join step, the keep-alive it carries, before it joined.
            first = steps.index("_add_to_participants")
            self.assertEqual(steps[first + 1], "_keep_alive")
            self.assertLess(first, ev.index(joined[0]))
            completes += steps.count("_mark_rendezvous_complete")
            for e in ev:
                step = e["name"].split(":")[1]
                want = ("INIT" if step == "_create_tcp_store" else
                        "SUCCEEDED" if step in ("_mark_rendezvous_complete",
                                                "_mark_rendezvous_closed", "_close") else
                        "RUNNING")
                self.assertEqual(e["node_state"], want, e)
                # rank: on the "has joined" event only, as torch.
                self.assertEqual(e["rank"] is not None, e is joined[0], e)
                if step != "_create_tcp_store":
                    self.assertRegex(e["message"], r"^The node '[^']+_%d_0' " % pid)
            self.assertEqual(steps[-1], "_close")
        # The node whose step filled the round marked it complete.
        self.assertEqual(completes, 1, files)


if __name__ == "__main__":
    lib.main()
