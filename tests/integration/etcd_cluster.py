"""A throwaway etcd cluster for the tests (Debian's etcd-server, tech-notes
§4.3): n members on loopback ports picked here, data in a temp dir (on
/dev/shm when there is one), killed and removed by stop()."""

import base64
import json
import os
import random
import shutil
import signal
import subprocess
import tempfile
import time
import urllib.request

from lib import free_port

ETCD = shutil.which("etcd") or "/usr/bin/etcd"


def wait_until(pred, timeout=20.0, interval=0.05):
    end = time.monotonic() + timeout
    while True:
        v = pred()
        if v or time.monotonic() >= end:
            return v
        time.sleep(interval)


class Etcd:
    """A throwaway etcd cluster of n members on loopback (tech-notes §4.3)."""

    def __init__(self, n=1, extra_args=(), env=None):
        """extra_args: more etcd flags for every member; env: its environment
        (None: ours)."""
        self.dir = tempfile.mkdtemp(prefix="elasticd-etcd-",
                                    dir="/dev/shm" if os.path.isdir("/dev/shm") else None)
        self.members = []
        token = "t%d" % random.randrange(1 << 30)
        for i in range(n):
            self.members.append({"name": "m%d" % i, "client": free_port("127.0.0.1"),
                                 "peer": free_port("127.0.0.1")})
        cluster = ",".join("%s=http://127.0.0.1:%d" % (m["name"], m["peer"])
                           for m in self.members)
        for m in self.members:
            args = [ETCD, "--name", m["name"], "--data-dir", os.path.join(self.dir, m["name"]),
                    "--listen-client-urls", "http://127.0.0.1:%d" % m["client"],
                    "--advertise-client-urls", "http://127.0.0.1:%d" % m["client"],
                    "--listen-peer-urls", "http://127.0.0.1:%d" % m["peer"],
                    "--initial-advertise-peer-urls", "http://127.0.0.1:%d" % m["peer"],
                    "--initial-cluster", cluster, "--initial-cluster-state", "new",
                    "--initial-cluster-token", token, "--logger", "zap",
                    "--log-level", "error", "--heartbeat-interval", "50",
                    "--election-timeout", "500", *extra_args]
            m["log"] = open(os.path.join(self.dir, m["name"] + ".log"), "w")
            m["proc"] = subprocess.Popen(args, stdout=m["log"], stderr=subprocess.STDOUT,
                                         env=env)
        for m in self.members:
            ok = wait_until(lambda: self.healthy(m), timeout=30, interval=0.1)
            if not ok:
                self.stop()
                raise RuntimeError("etcd did not become healthy")

    def healthy(self, m):
        try:
            with urllib.request.urlopen("http://127.0.0.1:%d/health" % m["client"],
                                        timeout=1) as r:
                return json.load(r).get("health") == "true"
        except (OSError, ValueError):
            return False

    @property
    def endpoints(self):
        return ",".join("127.0.0.1:%d" % m["client"] for m in self.members)

    def kill(self, i):
        p = self.members[i]["proc"]
        p.kill()
        p.wait()

    def pause(self, i):
        """SIGSTOP member i: its connections stay up, it answers nothing."""
        self.members[i]["proc"].send_signal(signal.SIGSTOP)

    def resume(self, i):
        self.members[i]["proc"].send_signal(signal.SIGCONT)

    def keys(self, prefix="/"):
        """Every key under prefix (through the first live member)."""
        end = prefix[:-1] + chr(ord(prefix[-1]) + 1)
        body = json.dumps({"key": base64.b64encode(prefix.encode()).decode(),
                           "range_end": base64.b64encode(end.encode()).decode(),
                           "keys_only": True}).encode()
        for m in self.members:
            if m["proc"].poll() is not None:
                continue
            req = urllib.request.Request("http://127.0.0.1:%d/v3/kv/range" % m["client"],
                                         data=body, method="POST")
            with urllib.request.urlopen(req, timeout=10) as r:
                return sorted(base64.b64decode(kv["key"]).decode()
                              for kv in json.load(r).get("kvs", []))
        return None

    def requests(self, metric="grpc_server_handled_total"):
        """gRPC calls the first member has handled so far, by method
        ("Txn", "Watch", "LeaseGrant", ...), from its /metrics: each call
        through the JSON gateway (a unary call, a watch stream) is one.
        metric: another of etcd's per-method counters, such as
        grpc_server_started_total (streams opened) or
        grpc_server_msg_received_total (messages received on them)."""
        counts = {}
        m = self.members[0]
        with urllib.request.urlopen("http://127.0.0.1:%d/metrics" % m["client"],
                                    timeout=10) as r:
            for line in r.read().decode().splitlines():
                if line.startswith(metric + "{"):
                    method = line.split('grpc_method="', 1)[1].split('"', 1)[0]
                    counts[method] = counts.get(method, 0) + float(line.rsplit(" ", 1)[1])
        return counts

    def stop(self):
        for m in self.members:
            if m["proc"].poll() is None:
                m["proc"].kill()
                m["proc"].wait()
            m["log"].close()
        shutil.rmtree(self.dir, ignore_errors=True)
