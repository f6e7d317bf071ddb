#!/usr/bin/python3
"""End-to-end: what only torch 2.x has, against the real torch 2.6 (Debian 13's
python3-torch in the root tests/torch2/torch2-root.sh builds; e2e_common.py).

  a  every TCPStore call of torch 2.6's client on elasticd's agent store
     (MASTER_ADDR:MASTER_PORT, TORCHELASTIC_USE_AGENT_STORE=True): set, get,
     add, wait with and without a timeout, compare_set, check, multi_get,
     multi_set, append, num_keys, delete_key; each answer as torch gives it
  b  torch 2.6's own worker_main() WorkerServer in every worker, reached
     through elasticd's control socket as /ranks/<n>/handler/...: the handler
     list, ping, dump_traceback (the worker's real Python stack)

The queue commands of torch >= 2.7 (QUEUE_PUSH/POP/LEN) are not in 2.6; the
store's own client tests them (tests/integration/test_tcpstore.py).

Run by `meson test --suite torch2` (e2e_torch2), or by hand as root:
  tests/torch2/torch2-root.sh setup
  TORCH_PYTHON=tests/torch2/python3 ELASTICD=build/src/elasticd \\
      /usr/bin/python3 tests/e2e/test_torch2.py -v
"""

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import textwrap
import time
import unittest

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
from e2e_common import ELASTICD, PY, clean_env, torch_version  # noqa: E402

RUN_TIMEOUT = 120

STORE_WORKER = r'''
import json, os, sys, time
from datetime import timedelta
import torch.distributed as dist

out = sys.argv[1]
rank = int(os.environ["RANK"])
assert os.environ["TORCHELASTIC_USE_AGENT_STORE"] == "True"
store = dist.TCPStore(os.environ["MASTER_ADDR"], int(os.environ["MASTER_PORT"]),
                      is_master=False, timeout=timedelta(seconds=30),
                      use_libuv=os.environ.get("USE_LIBUV", "1") != "0")
if rank == 1:
    time.sleep(1.0)
    store.set("t2/late", "from rank 1")
    sys.exit(0)

r = {}
r["torch"] = __import__("torch").__version__
store.set("t2/k", "v")
r["get"] = store.get("t2/k").decode()
r["add"] = [store.add("t2/n", 5), store.add("t2/n", -2), store.get("t2/n").decode()]
r["compare_set"] = [store.compare_set("t2/cs", "", "first").decode(),
                    store.compare_set("t2/cs", "wrong", "x").decode(),
                    store.compare_set("t2/cs", "first", "second").decode(),
                    store.get("t2/cs").decode()]
r["check"] = [store.check(["t2/k"]), store.check(["t2/nokey"]), store.check(["t2/k", "t2/nokey"])]
store.multi_set(["t2/a", "t2/b"], ["1", "2"])
r["multi_get"] = [v.decode() for v in store.multi_get(["t2/a", "t2/b", "t2/k"])]
store.append("t2/ap", "x")
store.append("t2/ap", "yz")
r["append"] = store.get("t2/ap").decode()
before = store.num_keys()
store.set("t2/new", "1")
r["num_keys_grows_by"] = store.num_keys() - before
t0 = time.monotonic()
store.wait(["t2/late"])
r["wait"] = [store.get("t2/late").decode(), round(time.monotonic() - t0, 1)]
t0 = time.monotonic()
try:
    store.wait(["t2/never"], timedelta(seconds=1))
    r["wait_timeout"] = "returned"
except Exception as e:  # torch raises DistStoreError (a RuntimeError)
    r["wait_timeout"] = [type(e).__name__, round(time.monotonic() - t0, 1)]
r["delete_key"] = [store.delete_key("t2/k"), store.delete_key("t2/k"), store.check(["t2/k"])]
with open(out, "w") as f:
    json.dump(r, f)
'''

SERVER_WORKER = r'''
import os, sys, time
from torch.distributed.elastic.control_plane import worker_main

def train_loop_of_rank(flag):
    with open(flag, "w") as f:
        f.write(os.environ["TORCH_WORKER_SERVER_SOCKET"])
    time.sleep(120)

with worker_main():
    train_loop_of_rank(os.path.join(sys.argv[1], "up%s" % os.environ["LOCAL_RANK"]))
'''



def curl(sock, path, method="POST"):
    r = subprocess.run(["curl", "-sS", "--max-time", "30", "-X", method, "-w", "\n%{http_code}",
                        "--unix-socket", sock, "http://localhost" + path],
                       capture_output=True, text=True, timeout=60)
    body, _, code = r.stdout.rpartition("\n")
    return int(code or 0), body


class Torch2Test(unittest.TestCase):
    maxDiff = None

    @classmethod
    def setUpClass(cls):
        if not os.access(ELASTICD, os.X_OK):
            raise RuntimeError(f"no elasticd binary at {ELASTICD} (set ELASTICD)")
        if torch_version() < (2, 0):
            raise RuntimeError(f"{PY} has torch {torch_version()}, these tests need 2.x "
                               f"(set TORCH_PYTHON=tests/torch2/python3)")

    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="elasticd-e2e-t2-")

    def tearDown(self):
        shutil.rmtree(self.tmp, ignore_errors=True)

    def write(self, name, text):
        path = os.path.join(self.tmp, name)
        with open(path, "w") as f:
            f.write(textwrap.dedent(text))
        return path

    def test_a_tcpstore_calls_on_the_agent_store(self):
        script = self.write("store_worker.py", STORE_WORKER)
        out = os.path.join(self.tmp, "store.json")
        r = subprocess.run([ELASTICD, "--standalone", "--nproc-per-node", "2", script, out],
                           env=clean_env(TMPDIR=self.tmp), cwd=self.tmp, capture_output=True,
                           text=True, timeout=RUN_TIMEOUT, stdin=subprocess.DEVNULL)
        self.assertEqual(r.returncode, 0, r.stderr[-6000:])
        with open(out) as f:
            got = json.load(f)
        self.assertTrue(got.pop("torch").startswith("2."), got)
        wait_secs = got["wait"].pop()
        self.assertLess(wait_secs, 20.0)
        timeout_name, timeout_secs = got.pop("wait_timeout")
        self.assertIn(timeout_name, ("DistStoreError", "RuntimeError"))
        self.assertGreaterEqual(timeout_secs, 0.9)
        self.assertLess(timeout_secs, 15.0)
        self.assertEqual(got, {
            "get": "v",
            "add": [5, 3, "3"],
            "compare_set": ["first", "first", "second", "second"],
            "check": [True, False, False],
            "multi_get": ["1", "2", "v"],
            "append": "xyz",
            "num_keys_grows_by": 1,
            "wait": ["from rank 1"],
            "delete_key": [True, False, False],
        })

    def test_b_worker_main_server_through_the_control_socket(self):
        script = self.write("server_worker.py", SERVER_WORKER)
        sock = os.path.join(self.tmp, "ctl.sock")
        p = subprocess.Popen([ELASTICD, "--standalone", "--nproc-per-node", "2",
                              "--control-socket", sock, script, self.tmp],
                             env=clean_env(TMPDIR=self.tmp), cwd=self.tmp, stdin=subprocess.DEVNULL,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            deadline = time.monotonic() + RUN_TIMEOUT
            flags = [os.path.join(self.tmp, "up%d" % r) for r in (0, 1)]
            while not all(os.path.exists(f) for f in flags):
                self.assertIsNone(p.poll(), "elasticd exited early")
                self.assertLess(time.monotonic(), deadline, "the workers never came up")
                time.sleep(0.1)
            for rank in (0, 1):
                with self.subTest(rank=rank):
                    code, body = curl(sock, "/ranks/%d/handler/" % rank, "GET")
                    self.assertEqual(code, 200, body)
                    names = json.loads(body)
                    self.assertIn("ping", names)
                    self.assertIn("dump_traceback", names)
                    self.assertEqual(curl(sock, "/ranks/%d/handler/ping" % rank), (200, "pong"))
                    code, body = curl(sock, "/ranks/%d/handler/dump_traceback" % rank)
                    self.assertEqual(code, 200, body)
                    self.assertIn("train_loop_of_rank", body)
                    self.assertIn("server_worker.py", body)
                    code, body = curl(sock, "/ranks/%d/handler/nosuch" % rank)
                    self.assertEqual(code, 404, body)
        finally:
            p.send_signal(signal.SIGTERM)
            out, err = p.communicate(timeout=60)
        self.assertEqual(p.returncode, 128 + signal.SIGTERM, err[-4000:])


if __name__ == "__main__":
    unittest.main(verbosity=2)
