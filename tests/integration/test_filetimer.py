#!/usr/bin/python3
"""torch's FileTimer served by elasticd (torch/distributed/elastic/timer/
file_based_local_timer.py, torchrun's LocalElasticAgent._setup_local_watchdog):
workers that write the protocol by hand (no torch) to the FIFO named by
TORCHELASTIC_TIMER_FILE. Expiry signals the worker, a release prevents it,
malformed and partial writes are handled, a dead pid does not stop the server,
the FIFO is per attempt and removed, and it is off unless
TORCHELASTIC_ENABLE_FILE_TIMER=1."""

import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import lib  # noqa: E402

WORKER_PY = r"""
import json, os, stat, sys, time
path = os.environ.get("TORCHELASTIC_TIMER_FILE")
mode, out = sys.argv[1], sys.argv[2]
attempt = os.environ["TORCHELASTIC_RESTART_COUNT"]

def send(raw):
    # As FileTimerClient._send_request: open non-blocking, one write, close.
    fd = os.open(path, os.O_WRONLY | os.O_NONBLOCK)
    try:
        os.write(fd, raw.encode())
    finally:
        os.close(fd)

def req(scope, after, sig=9, pid=None):
    exp = time.time() + after if after >= 0 else -1
    return json.dumps({"version": 1, "pid": pid or os.getpid(), "scope_id": scope,
                       "expiration_time": exp, "signal": sig}) + "\n"

def note(**kw):
    with open("%s.%s.json" % (out, attempt), "w") as f:
        json.dump(kw, f)

note(pid=os.getpid(), path=path,
     fifo=bool(path and os.path.exists(path) and stat.S_ISFIFO(os.stat(path).st_mode)))
if mode == "expire":
    send(req("expire-scope", 0.5))
    time.sleep(30)
elif mode == "release":
    send(req("s", 0.5))
    time.sleep(0.1)
    send(req("s", -1, 0))
    time.sleep(1.5)
elif mode == "malformed":
    send("garbage\n")
    send('{"pid": 0, "scope_id": "z", "expiration_time": 1, "signal": 9}\n')
    send('{"pid": %d, "scope_id": "%s", "expiration_time": 1, "signal": 9}\n'
         % (os.getpid(), "x" * 5000))
    r = req("partial", 0.5, 15)
    send(r[:20])  # a request in two writes, by two opens
    time.sleep(0.2)
    send(r[20:])
    time.sleep(30)
elif mode == "dead":
    child = os.fork()
    if child == 0:
        os._exit(0)
    os.waitpid(child, 0)
    send(req("dead", 0.2, 9, pid=child))
    time.sleep(1.0)
    send(req("self", 0.3, 9))
    time.sleep(30)
elif mode == "paths":
    sys.exit(1 if attempt == "0" else 0)
"""


class FileTimerTest(lib.ElasticdTestCase):

    def run_mode(self, mode, *args, env_extra=None, timeout=30):
        fifo = self.path("timer.fifo")
        extra = {"TORCHELASTIC_ENABLE_FILE_TIMER": "1", "TORCHELASTIC_TIMER_FILE": fifo}
        extra.update(env_extra or {})
        script = self.write_py("worker.py", WORKER_PY)
        events = self.path("events.jsonl")
        res = self.run_elasticd("--standalone", "--nproc-per-node", "1", "--event-log-file",
                                events, *args, script, mode, self.path("note"),
                                env=self.env(**extra), timeout=timeout)
        evs = []
        if os.path.exists(events):
            evs = [json.loads(line) for line in lib.read_text(events).splitlines()]
        return res, evs

    def note(self, attempt=0):
        return lib.read_json(self.path("note.%d.json" % attempt))

    def expired_events(self, evs):
        return [e["metadata"] for e in evs if e["name"] == "elasticd.worker.timer_expired"]

    def test_expiry_kills_the_worker(self):
        res, evs = self.run_mode("expire")
        self.assertRc(res, 1)
        self.assertLess(res.elapsed, 15, res)  # the worker sleeps 30 s
        pid = self.note()["pid"]
        self.assertTrue(self.note()["fifo"])
        self.assertRegex(res.err, r"FileTimer: pid %d timer 'expire-scope' expired [0-9.]+ s "
                         r"ago; sent SIGKILL" % pid)
        ex = self.expired_events(evs)
        self.assertEqual(len(ex), 1, evs)
        self.assertEqual((ex[0]["worker_pid"], ex[0]["scope_id"], ex[0]["signal"],
                          ex[0]["action"]), (pid, "expire-scope", 9, "signalled"))
        self.assertLess(ex[0]["late_ms"], 1000)
        exited = [e["metadata"] for e in evs if e["name"] == "elasticd.worker.exited"]
        self.assertEqual(exited[0]["signal"], "SIGKILL")
        self.assertFalse(os.path.exists(self.path("timer.fifo")), "FIFO not removed")
        self.assertNoLeftovers()

    def test_release_prevents_expiry(self):
        res, evs = self.run_mode("release")
        self.assertRc(res, 0)
        self.assertNotIn("expired", res.err)
        self.assertEqual(self.expired_events(evs), [])

    def test_malformed_and_partial_requests(self):
        res, evs = self.run_mode("malformed")
        self.assertRc(res, 1)
        self.assertLess(res.elapsed, 15, res)
        self.assertIn("FileTimer: dropped a malformed request: not JSON", res.err)
        self.assertIn("FileTimer: dropped a malformed request: pid must be an integer > 0",
                      res.err)
        self.assertIn("FileTimer: dropped a request: longer than PIPE_BUF", res.err)
        ex = self.expired_events(evs)
        self.assertEqual([(e["scope_id"], e["signal"]) for e in ex], [("partial", 15)], evs)
        exited = [e["metadata"] for e in evs if e["name"] == "elasticd.worker.exited"]
        self.assertEqual(exited[0]["signal"], "SIGTERM")

    def test_dead_pid_then_serving_on(self):
        res, evs = self.run_mode("dead")
        self.assertRc(res, 1)
        self.assertLess(res.elapsed, 15, res)
        pid = self.note()["pid"]
        ex = self.expired_events(evs)
        self.assertEqual([(e["scope_id"], e["action"]) for e in ex],
                         [("dead", "no_such_process"), ("self", "signalled")], evs)
        self.assertEqual(ex[1]["worker_pid"], pid)
        self.assertNotEqual(ex[0]["worker_pid"], pid)

    def test_default_path_per_attempt(self):
        res, _ = self.run_mode("paths", "--max-restarts", "1",
                               env_extra={"TORCHELASTIC_TIMER_FILE": None})
        self.assertRc(res, 0)
        paths = [self.note(0)["path"], self.note(1)["path"]]
        for p in paths:
            # torch's "/tmp/watchdog_timer_" + str(uuid.uuid4()), not $TMPDIR
            self.assertRegex(p, r"^/tmp/watchdog_timer_[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-"
                             r"[89ab][0-9a-f]{3}-[0-9a-f]{12}$")
            self.assertFalse(os.path.exists(p), "FIFO %s not removed" % p)
        self.assertNotEqual(paths[0], paths[1])
        self.assertTrue(self.note(0)["fifo"] and self.note(1)["fifo"])

    def test_off_unless_enabled_exactly_1(self):
        for enabled in (None, "true", "0"):
            res, _ = self.run_mode("release", env_extra={"TORCHELASTIC_ENABLE_FILE_TIMER": enabled})
            self.assertRc(res, 1)  # the worker cannot open a FIFO that is not there
            n = self.note()
            self.assertEqual(n["path"], self.path("timer.fifo"))  # inherited as torchrun
            self.assertFalse(n["fifo"])
            self.assertNotIn("FileTimer", res.err)

    def test_given_path_replaces_a_file(self):
        # torch's FileTimerServer removes whatever is at the path.
        with open(self.path("timer.fifo"), "w") as f:
            f.write("stale")
        res, _ = self.run_mode("release")
        self.assertRc(res, 0)
        self.assertTrue(self.note()["fifo"])
        self.assertIn("FileTimer: serving TORCHELASTIC_TIMER_FILE=%s" % self.path("timer.fifo"),
                      res.err)
        self.assertFalse(os.path.exists(self.path("timer.fifo")))


if __name__ == "__main__":
    lib.main()
