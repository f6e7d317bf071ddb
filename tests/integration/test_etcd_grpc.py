#!/usr/bin/python3
"""etcd's native gRPC wire (src/etcd/etcd_grpc.c: h2c with nghttp2) against a
real etcd (Debian's etcd-server) through tests/grpc_tool, which encodes the
protobuf by hand: unary calls that round-trip with the JSON gateway, a watch
stream seeing a gateway write, a closed port, etcd SIGKILLed under a watch,
and 50 concurrent calls on one connection."""

import base64
import json
import os
import subprocess
import sys
import time
import unittest
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import lib  # noqa: E402
from etcd_cluster import Etcd, free_port  # noqa: E402

GRPC_TOOL = os.environ.get("GRPC_TOOL") or os.path.join(
    os.path.dirname(os.path.dirname(os.environ["ELASTICD"])), "tests", "grpc_tool")
ECONNRESET = 104


def b64(s):
    return base64.b64encode(s if isinstance(s, bytes) else s.encode()).decode()


class EtcdGrpcTest(unittest.TestCase):

    @classmethod
    def setUpClass(cls):
        cls.etcd = Etcd(1)
        cls.ep = cls.etcd.endpoints

    @classmethod
    def tearDownClass(cls):
        cls.etcd.stop()

    def tool(self, *args, ep=None, timeout=30):
        r = subprocess.run([GRPC_TOOL, ep or self.ep, *args], capture_output=True, text=True,
                           timeout=timeout)
        return r.returncode, r.stdout.splitlines()

    def gateway(self, path, body):
        req = urllib.request.Request("http://%s/v3/%s" % (self.ep, path),
                                     data=json.dumps(body).encode(), method="POST")
        with urllib.request.urlopen(req, timeout=10) as r:
            return json.load(r)

    def gateway_get(self, key):
        kvs = self.gateway("kv/range", {"key": b64(key)}).get("kvs", [])
        return base64.b64decode(kvs[0]["value"]).decode() if kvs else None

    def test_put_get_round_trip(self):
        rc, out = self.tool("put", "/grpc/k", "v1")
        self.assertEqual(rc, 0, out)
        self.assertIn("close err=0 status=0 message=", out)
        self.assertEqual(self.gateway_get("/grpc/k"), "v1")
        rc, out = self.tool("get", "/grpc/k")
        self.assertEqual(rc, 0, out)
        self.assertEqual(out[0], "value v1")
        rc, out = self.tool("get", "/grpc/absent")
        self.assertEqual((rc, out[0]), (0, "missing"))

    def test_big_value_streams(self):
        """An answer larger than the 1 MiB stream window (WINDOW_UPDATEs)."""
        value = "x" * (1100 * 1000)
        self.gateway("kv/put", {"key": b64("/grpc/big"), "value": b64(value)})
        rc, out = self.tool("get", "/grpc/big")
        self.assertEqual(rc, 0, out[1:])
        self.assertEqual(out[0], "value " + value)

    def test_error_status(self):
        """A gRPC error arrives as err 0 with grpc-status and its message:
        an empty key is InvalidArgument (3)."""
        rc, out = self.tool("put", "", "v")
        self.assertEqual(rc, 1)
        self.assertIn("close err=0 status=3 message=etcdserver: key is not provided", out)

    def test_stream_ended_by_server(self):
        """A bidirectional stream the server ends while we may still send
        (an unparsable WatchRequest) reports its trailers; an unknown method
        its grpc-status (12, Unimplemented)."""
        rc, out = self.tool("bad", "/etcdserverpb.Watch/Watch", timeout=20)
        self.assertEqual(rc, 1)
        self.assertTrue(out[0].startswith("close err=0 status=13 message=grpc: "), out)
        rc, out = self.tool("bad", "/nope.X/Y", timeout=20)
        self.assertEqual(out[0], "close err=0 status=12 message=unknown service nope.X")

    def test_cancel_before_sent(self):
        """A stream cancelled before its HEADERS left gets no callback; the
        next call on the connection works."""
        rc, out = self.tool("put", "/grpc/c", "cv")
        self.assertEqual(rc, 0, out)
        rc, out = self.tool("watch", "/grpc/c", "0")
        self.assertEqual((rc, out), (0, ["value cv", "close err=0 status=0 message=",
                                         "done failed=0"]))

    def test_watch_sees_gateway_put(self):
        p = subprocess.Popen([GRPC_TOOL, self.ep, "watch", "/grpc/w", "2"],
                             stdout=subprocess.PIPE, text=True)
        try:
            self.assertEqual(p.stdout.readline().strip(), "ready")
            self.gateway("kv/put", {"key": b64("/grpc/w"), "value": b64("a")})
            self.gateway("kv/put", {"key": b64("/grpc/w"), "value": b64("bb")})
            out, _ = p.communicate(timeout=20)
        finally:
            if p.poll() is None:
                p.kill()
                p.wait()
        lines = out.splitlines()
        self.assertEqual(p.returncode, 0, lines)
        msgs = [line for line in lines if line.startswith("message ")]
        self.assertEqual(len(msgs), 2, lines)
        # The second event's value is one byte longer.
        self.assertEqual(int(msgs[1].split()[1]), int(msgs[0].split()[1]) + 1, lines)
        self.assertIn("cancelled", lines)

    def test_closed_port(self):
        rc, out = self.tool("get", "/k", ep="127.0.0.1:%d" % free_port("127.0.0.1"))
        self.assertEqual(rc, 1)
        self.assertIn("close err=-%d status=-1 message=(none)" % ECONNRESET, out)

    def test_concurrent_calls(self):
        """50 Puts and 50 Ranges at once on one connection all complete (run
        twice: etcd may serve a Range before the Put of its key the first
        time)."""
        for _ in range(2):
            rc, out = self.tool("many", "50")
            self.assertEqual(rc, 0, out)
            closes = [line for line in out if line.startswith("close ")]
            self.assertEqual(closes, ["close err=0 status=0 message="] * 100)
        self.assertEqual(sorted(line for line in out if line.startswith("value ")),
                         sorted("value /many/%d" % i for i in range(50)))
        self.assertEqual(self.gateway_get("/many/49"), "/many/49")


class EtcdGrpcKillTest(unittest.TestCase):

    def test_etcd_killed_under_watch(self):
        etcd = Etcd(1)
        try:
            p = subprocess.Popen([GRPC_TOOL, etcd.endpoints, "watch", "/grpc/k", "5"],
                                 stdout=subprocess.PIPE, text=True)
            self.assertEqual(p.stdout.readline().strip(), "ready")
            start = time.monotonic()
            etcd.kill(0)
            out, _ = p.communicate(timeout=20)
            took = time.monotonic() - start
        finally:
            etcd.stop()
        lines = out.splitlines()
        self.assertEqual(p.returncode, 1, lines)
        close = [line for line in lines if line.startswith("close ")]
        self.assertEqual(len(close), 1, lines)
        err = int(close[0].split()[1].split("=")[1])
        self.assertLess(err, 0, lines)
        self.assertLess(took, 15)


if __name__ == "__main__":
    lib.main()
