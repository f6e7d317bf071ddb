#!/usr/bin/python3
"""elasticd's c10d TCPStore server and client against PyTorch's own.

  - torch 1.13's Python TCPStore client (is_master=False) against our server:
    every operation 1.13 exposes, WAIT with and without timeout, the elastic
    worker path (ADD init/), a real 2-process gloo init_process_group;
  - raw sockets: CHECK, the v2 dialect (VALIDATE, PING, MULTI_GET, MULTI_SET,
    APPEND, CANCEL_WAIT), and hostile input closing only its own connection;
  - our client (tests/tcpstore_tool) against a real torch TCPStore server;
  - torch >= 2.7's queues (QUEUE_PUSH, QUEUE_POP, QUEUE_LEN; not in the
    installed torch 1.13, so driven with tests/tcpstore_tool and raw sockets,
    as upstream's libuv server answers them), on the tool's server and on the
    store a real elasticd hosts for its workers.

Needs /usr/bin/python3 with torch (Debian's python3-torch) and TCPSTORE_TOOL
(set by tests/meson.build).
"""

import os
import socket
import struct
import subprocess
import sys
import textwrap
import time
import unittest
from datetime import timedelta

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import lib  # noqa: E402

import torch.distributed as dist  # noqa: E402

TOOL = lib.TCPSTORE_TOOL
MAGIC = struct.pack("<I", 0x3C85F7CE)


def s_(b):
    return struct.pack("<Q", len(b)) + b


def u64(n):
    return struct.pack("<Q", n & 0xFFFFFFFFFFFFFFFF)


class Raw:
    """A raw socket client."""

    def __init__(self, port, timeout=3.0):
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=timeout)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def send(self, data):
        self.sock.sendall(data)

    def recv(self, n):
        buf = b""
        while len(buf) < n:
            chunk = self.sock.recv(n - len(buf))
            if not chunk:
                raise ConnectionError("closed after %r" % buf)
            buf += chunk
        return buf

    def recv_vec(self):
        n = struct.unpack("<Q", self.recv(8))[0]
        return self.recv(n)

    def recv_i64(self):
        return struct.unpack("<q", self.recv(8))[0]

    def closed(self, timeout=3.0):
        """True when the server closed this connection."""
        self.sock.settimeout(timeout)
        try:
            return self.sock.recv(1) == b""
        except ConnectionResetError:
            return True
        except socket.timeout:
            return False

    def close(self):
        self.sock.close()


class TorchClientTest(unittest.TestCase):
    """torch 1.13's TCPStore client against our server."""

    def setUp(self):
        self.server = lib.StoreServer()
        self.port = self.server.port

    def tearDown(self):
        self.server.close()

    def store(self, world_size=None, timeout=5):
        return dist.TCPStore("127.0.0.1", self.port, world_size, False,
                             timedelta(seconds=timeout))

    def test_set_get_add(self):
        s = self.store()
        s.set("k1", b"v1")
        self.assertEqual(s.get("k1"), b"v1")
        self.assertEqual(s.add("cnt", 5), 5)
        self.assertEqual(s.add("cnt", -2), 3)
        self.assertEqual(s.get("cnt"), b"3")
        self.assertEqual(s.add("cnt", 0), 3)
        s.set("big", b"x" * 300000)
        self.assertEqual(s.get("big"), b"x" * 300000)
        # Any byte in a key, an empty key.
        s.set("\u00e9\x01", b"\x00\xff")
        self.assertEqual(s.get("\u00e9\x01"), b"\x00\xff")
        s.set("", b"empty key")
        self.assertEqual(s.get(""), b"empty key")

    def test_empty_value_is_not_corked(self):
        s = self.store()
        s.set("empty", b"")
        t = time.monotonic()
        self.assertEqual(s.get("empty"), b"")
        self.assertLess(time.monotonic() - t, 0.1, "empty reply delayed (corked?)")

    def test_compare_set_rules(self):
        s = self.store()
        self.assertEqual(s.compare_set("cas", "", "new"), b"new")
        self.assertEqual(s.compare_set("cas", "new", "newer"), b"newer")
        self.assertEqual(s.compare_set("cas", "wrong", "x"), b"newer")
        self.assertEqual(s.get("cas"), b"newer")
        # Missing key with a non-empty expectation: the expectation comes back.
        self.assertEqual(s.compare_set("nokey", "exp", "x"), b"exp")
        self.assertEqual(s.num_keys(), 1)

    def test_num_keys_delete(self):
        s = self.store()
        for k in ("a", "b", "c"):
            s.set(k, b"1")
        self.assertEqual(s.num_keys(), 3)
        self.assertTrue(s.delete_key("b"))
        self.assertFalse(s.delete_key("b"))
        self.assertEqual(s.num_keys(), 2)

    def test_wait(self):
        s1, s2 = self.store(), self.store()
        s1.set("a", b"1")
        s1.wait(["a"])
        s1.wait(["a"], timedelta(seconds=1))
        # A wait released by another client's SET, then by an ADD.
        proc = subprocess.Popen([sys.executable, "-c", textwrap.dedent("""
            import sys, time, torch.distributed as d
            from datetime import timedelta
            s = d.TCPStore("127.0.0.1", %d, None, False, timedelta(seconds=10))
            print("ready", flush=True)
            t = time.monotonic()
            s.wait(["w1", "w2"])
            print("%%.3f" %% (time.monotonic() - t))
            """ % self.port)], stdout=subprocess.PIPE)
        self.assertEqual(proc.stdout.readline().strip(), b"ready")
        time.sleep(0.5)
        s2.set("w1", b"x")
        time.sleep(0.3)
        s2.add("w2", 1)
        out, _ = proc.communicate(timeout=20)
        self.assertEqual(proc.returncode, 0)
        self.assertGreater(float(out), 0.7)

    def test_wait_timeout_then_reuse(self):
        s1, s2 = self.store(), self.store()
        t = time.monotonic()
        with self.assertRaisesRegex(RuntimeError, "[Tt]imeout"):
            s1.wait(["never"], timedelta(seconds=1))
        self.assertGreater(time.monotonic() - t, 0.9)
        # The stale wait is dropped by the next request: no stray byte later.
        s1.set("k", b"v")
        s2.set("never", b"now")
        self.assertEqual(s1.get("k"), b"v")
        self.assertEqual(s1.get("never"), b"now")

    def test_get_blocks_until_set(self):
        s2 = self.store()
        proc = subprocess.Popen([sys.executable, "-c", textwrap.dedent("""
            import torch.distributed as d
            from datetime import timedelta
            s = d.TCPStore("127.0.0.1", %d, None, False, timedelta(seconds=10))
            print(s.get("later").decode())
            """ % self.port)], stdout=subprocess.PIPE)
        time.sleep(0.8)
        s2.set("later", b"value")
        out, _ = proc.communicate(timeout=20)
        self.assertEqual(out.strip(), b"value")

    def test_worker_path_init_key(self):
        # world_size given: ADD("init/", 1) without the "/" prefix.
        self.store(world_size=2)
        self.store(world_size=2)
        raw = Raw(self.port)
        raw.send(b"\x03" + s_(b"init/") + u64(0))
        self.assertEqual(raw.recv_i64(), 2)
        raw.close()

    def test_many_clients(self):
        stores = [self.store() for _ in range(40)]
        for i, s in enumerate(stores):
            s.add("n", 1)
            s.set("k%d" % i, str(i).encode())
        self.assertEqual(stores[0].add("n", 0), 40)
        self.assertEqual(stores[-1].get("k0"), b"0")

    def test_gloo_process_group(self):
        """Two workers: init_process_group(env://) with the agent store, all_reduce."""
        code = textwrap.dedent("""
            import os, torch, torch.distributed as d
            d.init_process_group("gloo", init_method="env://")
            t = torch.ones(2) * (d.get_rank() + 1)
            d.all_reduce(t)
            d.barrier()
            print(t.tolist())
            d.destroy_process_group()
            """)
        procs = []
        for r in range(2):
            env = lib.clean_env(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(self.port),
                                RANK=str(r), WORLD_SIZE="2", LOCAL_RANK=str(r),
                                TORCHELASTIC_USE_AGENT_STORE="True",
                                TORCHELASTIC_RESTART_COUNT="0", GLOO_SOCKET_IFNAME="lo")
            procs.append(subprocess.Popen([sys.executable, "-c", code], env=env,
                                          stdout=subprocess.PIPE, stderr=subprocess.PIPE))
        for p in procs:
            out, err = p.communicate(timeout=90)
            self.assertEqual(p.returncode, 0, err.decode()[-3000:])
            self.assertEqual(out.strip(), b"[3.0, 3.0]")
        raw = Raw(self.port)
        raw.send(b"\x02" + s_(b"//worker/attempt_0/default_pg/store_based_barrier_key:1"))
        self.assertEqual(raw.recv_vec(), b"2")
        raw.close()


class RawProtocolTest(unittest.TestCase):
    """Byte-level behaviour: CHECK, v2 dialect, hostile input."""

    def setUp(self):
        self.server = lib.StoreServer(max_conns=8, stall_ms=700)
        self.port = self.server.port

    def tearDown(self):
        self.server.close()

    def alive(self):
        """A fresh connection still gets answers."""
        r = Raw(self.port)
        r.send(b"\x06")
        n = r.recv_i64()
        r.close()
        return n

    def test_check_and_split_frames(self):
        r = Raw(self.port)
        r.send(b"\x00")  # type byte alone, as 1.13 sends it
        time.sleep(0.05)
        r.send(s_(b"/a"))
        time.sleep(0.05)
        r.send(s_(b"1"))
        r.send(b"\x04" + u64(1) + s_(b"/a"))
        self.assertEqual(r.recv(1), b"\x00")
        r.send(b"\x04" + u64(2) + s_(b"/a") + s_(b"/zz"))
        self.assertEqual(r.recv(1), b"\x01")
        # Pipelined requests are answered in order.
        r.send(b"\x02" + s_(b"/a") + b"\x06" + b"\x08" + s_(b"/a"))
        self.assertEqual(r.recv_vec(), b"1")
        self.assertEqual(r.recv_i64(), 1)
        self.assertEqual(r.recv_i64(), 1)
        r.close()

    def test_wait_duplicates_and_zero_keys(self):
        r, w = Raw(self.port), Raw(self.port)
        r.send(b"\x05" + u64(0))
        self.assertEqual(r.recv(1), b"\x00")
        r.send(b"\x05" + u64(2) + s_(b"d") + s_(b"d"))
        w.send(b"\x00" + s_(b"d") + s_(b"x"))
        self.assertEqual(r.recv(1), b"\x00")
        r.close()
        w.close()

    def test_v2_dialect(self):
        r = Raw(self.port)
        r.send(b"\x00" + MAGIC + b"\x0d" + struct.pack("<I", 4242))
        self.assertEqual(struct.unpack("<I", r.recv(4))[0], 4242)
        # MULTI_SET, MULTI_GET, APPEND, GET of a missing key (empty in 2.x).
        r.send(b"\x0b" + u64(2) + s_(b"a") + s_(b"1") + s_(b"b") + s_(b"22"))
        r.send(b"\x0a" + u64(2) + s_(b"a") + s_(b"b"))
        self.assertEqual(r.recv_vec(), b"1")
        self.assertEqual(r.recv_vec(), b"22")
        r.send(b"\x09" + s_(b"a") + s_(b"+x"))
        r.send(b"\x03" + s_(b"a"))
        self.assertEqual(r.recv_vec(), b"1+x")
        r.send(b"\x03" + s_(b"missing"))
        self.assertEqual(r.recv_vec(), b"")
        # WAIT then CANCEL_WAIT: 01; the key appearing later sends nothing.
        r.send(b"\x06" + u64(1) + s_(b"late"))
        time.sleep(0.1)
        r.send(b"\x0c")
        self.assertEqual(r.recv(1), b"\x01")
        w = Raw(self.port)
        w.send(b"\x00" + s_(b"late") + s_(b"x"))  # legacy SET on another connection
        w.send(b"\x06")
        self.assertEqual(w.recv_i64(), 3)
        r.send(b"\x07")
        self.assertEqual(r.recv_i64(), 3)
        r.close()
        w.close()

    def test_legacy_get_missing_closes(self):
        r = Raw(self.port)
        r.send(b"\x02" + s_(b"/missing"))
        self.assertTrue(r.closed())
        self.assertEqual(self.alive(), 0)

    def test_add_non_integer_closes(self):
        r = Raw(self.port)
        r.send(b"\x00" + s_(b"/k") + s_(b"v1"))
        r.send(b"\x03" + s_(b"/k") + u64(1))
        self.assertTrue(r.closed())
        r = Raw(self.port)
        r.send(b"\x00" + s_(b"/n") + s_(b" 42abc"))
        r.send(b"\x03" + s_(b"/n") + u64(1))
        self.assertEqual(r.recv_i64(), 43)
        r.send(b"\x00" + s_(b"/m") + s_(b"9223372036854775807"))
        r.send(b"\x03" + s_(b"/m") + u64(1))
        self.assertEqual(r.recv_i64(), -9223372036854775808)

    def test_garbage_closes_only_that_connection(self):
        good = Raw(self.port)
        good.send(b"\x00" + s_(b"/g") + s_(b"ok"))
        for junk in (b"\x20" + b"A" * 10, b"\x07" + s_(b"/w"), b"\x00" + u64(1 << 62),
                     b"\x00" + s_(b"k") + u64(1 << 40), b"\x05" + u64(1 << 30)):
            r = Raw(self.port)
            r.send(junk)
            self.assertTrue(r.closed(), "not closed after %r" % junk[:12])
        good.send(b"\x02" + s_(b"/g"))
        self.assertEqual(good.recv_vec(), b"ok")

    def test_half_frame_does_not_block_others(self):
        slow = Raw(self.port)
        slow.send(b"\x00" + u64(100) + b"abc")  # and then nothing
        t = time.monotonic()
        self.assertEqual(self.alive(), 0)
        self.assertLess(time.monotonic() - t, 0.5)
        # The stall timer (700 ms here) closes the half frame's connection.
        self.assertTrue(slow.closed(timeout=5.0))

    def test_connection_limit(self):
        conns = [Raw(self.port) for _ in range(8)]
        conns[0].send(b"\x06")
        self.assertEqual(conns[0].recv_i64(), 0)
        extra = Raw(self.port)
        self.assertTrue(extra.closed())
        conns[1].close()
        time.sleep(0.2)
        self.assertEqual(self.alive(), 0)
        for c in conns:
            c.close()


class MergeAttemptsTest(unittest.TestCase):
    """The workers' store of one round ignores the attempt number in
    "//worker/attempt_<N>/" keys: nodes whose restart counts differ meet."""

    def test_attempts_meet(self):
        server = lib.StoreServer(merge_attempts=True)
        try:
            a = Raw(server.port)
            b = Raw(server.port)
            a.send(b"\x00" + s_(b"//worker/attempt_0/default_pg/0/0/rank_0") + s_(b"hostA"))
            b.send(b"\x05" + u64(1) + s_(b"//worker/attempt_1/default_pg/0/0/rank_0"))
            self.assertEqual(b.recv(1), b"\x00")
            b.send(b"\x02" + s_(b"//worker/attempt_1/default_pg/0/0/rank_0"))
            self.assertEqual(b.recv_vec(), b"hostA")
            b.send(b"\x03" + s_(b"//worker/attempt_7/default_pg/store_based_barrier_key:1")
                   + u64(1))
            a.send(b"\x03" + s_(b"//worker/attempt_0/default_pg/store_based_barrier_key:1")
                   + u64(1))
            self.assertEqual(b.recv_i64(), 1)
            self.assertEqual(a.recv_i64(), 2)
            # Other keys are untouched; init/ too.
            a.send(b"\x00" + s_(b"/worker/attempt_3/x") + s_(b"1") + b"\x04" + u64(1)
                   + s_(b"/worker/attempt_4/x"))
            self.assertEqual(a.recv(1), b"\x01")
            a.close()
            b.close()
        finally:
            server.close()


class QueueTest(unittest.TestCase):
    """torch >= 2.7's queues (upstream TCPStoreLibUvBackend.cpp queuePush /
    queuePop / queueLen; TCPStore.cpp's queuePop(block=True) is WAIT, then
    QUEUE_POP)."""

    def setUp(self):
        self.server = lib.StoreServer(max_conns=8)
        self.port = self.server.port

    def tearDown(self):
        self.server.close()

    def tool(self, *ops, dialect="v2"):
        res = subprocess.run([TOOL, "client", "127.0.0.1", str(self.port), dialect] +
                             list(ops), stdout=subprocess.PIPE, timeout=30)
        return res.returncode, res.stdout.decode().splitlines()

    def test_fifo_len_and_empty_pop(self):
        rc, out = self.tool("qpush", "/q", "a", "qpush", "/q", "b", "qpush", "/q", "",
                            "qlen", "/q", "qpop", "/q", "qpop", "/q", "qlen", "/q",
                            "qpop", "/q", "qpop", "/q", "qlen", "/q", "qlen", "/none")
        self.assertEqual(rc, 0, out)
        self.assertEqual(out, ["qpush -> ok"] * 3 + [
            "qlen -> 3", "qpop -> 3 'a'", "qpop -> 2 'b'", "qlen -> 1", "qpop -> 1 ''",
            "qpop -> 0", "qlen -> 0", "qlen -> 0"])
        # A queue is not the key's value: the key stays unset, num_keys 0.
        rc, out = self.tool("qpush", "/q", "x", "numkeys", "check", "/q", "get", "/q")
        self.assertEqual(out, ["qpush -> ok", "numkeys -> 0", "check -> 0", "get -> ''"])

    def test_blocking_pop_woken_by_later_push(self):
        # Two poppers block (WAIT on the key); each push wakes one of them,
        # oldest first, and each gets its own value.
        first = subprocess.Popen([TOOL, "client", "127.0.0.1", str(self.port), "v2",
                                  "qpop", "/jobs@10000"], stdout=subprocess.PIPE)
        time.sleep(0.3)
        second = subprocess.Popen([TOOL, "client", "127.0.0.1", str(self.port), "v2",
                                   "qpop", "/jobs@10000"], stdout=subprocess.PIPE)
        time.sleep(0.3)
        self.assertIsNone(first.poll())
        self.assertIsNone(second.poll())
        rc, out = self.tool("qpush", "/jobs", "one")
        self.assertEqual(first.communicate(timeout=10)[0].decode(), "qpop -> 1 'one'\n")
        time.sleep(0.3)
        self.assertIsNone(second.poll(), "a push woke more than one popper")
        rc, out = self.tool("qpush", "/jobs", "two")
        self.assertEqual(second.communicate(timeout=10)[0].decode(), "qpop -> 1 'two'\n")
        # A blocking pop on an empty queue times out, and pops nothing.
        rc, out = self.tool("qpop", "/jobs@200", "qlen", "/jobs")
        self.assertEqual(out, ["qpop -> timeout", "qlen -> 0"])

    def test_bytes_on_the_wire(self):
        r = Raw(self.port)
        r.send(b"\x00" + MAGIC + b"\x0e" + s_(b"/q") + s_(b"v1") + b"\x10" + s_(b"/q"))
        self.assertEqual(r.recv(8), u64(1))
        r.send(b"\x0f" + s_(b"/q"))
        self.assertEqual(r.recv(18), u64(1) + s_(b"v1"))
        r.send(b"\x0f" + s_(b"/q") + b"\x07")  # empty: the count only, then GETNUMKEYS
        self.assertEqual(r.recv(16), u64(0) + u64(0))
        r.close()

    def test_legacy_and_limits_close_only_that_connection(self):
        rc, out = self.tool("qpush", "/q", "a", dialect="legacy")
        self.assertEqual((rc, out), (1, ["qpush -> error Invalid argument"]))
        good = Raw(self.port)
        good.send(b"\x00" + MAGIC + b"\x0e" + s_(b"/q") + s_(b"kept"))
        for junk in (b"\x0e" + s_(b"/q") + s_(b"a"),                 # legacy: unknown
                     b"\x00" + MAGIC + b"\x0e" + s_(b"/q") + u64(8 * 1024 * 1024 + 1),
                     b"\x00" + MAGIC + b"\x0f" + u64(8 * 1024 + 1),
                     b"\x00" + MAGIC + b"\x11"):                     # LIST: not served
            r = Raw(self.port)
            r.send(junk)
            self.assertTrue(r.closed(), "not closed after %r" % junk[:16])
            r.close()
        good.send(b"\x0f" + s_(b"/q"))
        self.assertEqual(good.recv(20), u64(1) + s_(b"kept"))
        good.close()


class AgentStoreQueueTest(lib.ElasticdTestCase):
    """The store a real elasticd hosts for its workers (MASTER_ADDR:MASTER_PORT,
    TORCHELASTIC_USE_AGENT_STORE=True) serves the queues to them."""

    def test_worker_uses_queues_on_the_agent_store(self):
        out = self.path("out")
        script = self.write_sh("w.sh", """
t="$1"; o="$2"
"$t" client "$MASTER_ADDR" "$MASTER_PORT" v2 qpush /q a qpush /q b qlen /q \
    qpop /q@5000 qpop /q qpop /q qlen /q > "$o.tmp" 2>&1 && mv "$o.tmp" "$o"
""")
        res = self.run_elasticd("--nnodes", "1", "--nproc-per-node", "1", "--standalone",
                                "--monitor-interval", "0.1", "--no-python", script, TOOL, out)
        self.assertRc(res, 0)
        self.assertEqual(lib.read_text(out).splitlines(), [
            "qpush -> ok", "qpush -> ok", "qlen -> 2", "qpop -> 2 'a'", "qpop -> 1 'b'",
            "qpop -> 0", "qlen -> 0"])


class OurClientTest(unittest.TestCase):
    """elasticd's client against a real torch 1.13 TCPStore server."""

    def setUp(self):
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            self.port = s.getsockname()[1]
        self.proc = subprocess.Popen([sys.executable, "-c", textwrap.dedent("""
            import sys, time, torch.distributed as d
            s = d.TCPStore("127.0.0.1", %d, 1, True)
            print("up", flush=True)
            sys.stdin.read()
            """ % self.port)], stdin=subprocess.PIPE, stdout=subprocess.PIPE)
        self.assertEqual(self.proc.stdout.readline().strip(), b"up")

    def tearDown(self):
        self.proc.stdin.close()
        self.proc.stdout.close()
        self.proc.wait(10)

    def tool(self, *ops):
        res = subprocess.run([TOOL, "client", "127.0.0.1", str(self.port), "legacy"] +
                             list(ops), stdout=subprocess.PIPE, timeout=30)
        return res.returncode, res.stdout.decode().splitlines()

    def test_operations(self):
        rc, out = self.tool("set", "/a", "1", "get", "/a", "add", "/c", "5", "add", "/c", "-2",
                            "get", "/c", "cas", "/x", "", "new", "cas", "/x", "new", "newer",
                            "cas", "/x", "bad", "z", "cas", "/nokey", "exp", "x",
                            "check", "/a,/c", "check", "/a,/zz", "numkeys", "del", "/x",
                            "del", "/x", "wait", "/a,/c", "set", "/e", "", "get", "/e")
        self.assertEqual(rc, 0, out)
        self.assertEqual(out, [
            "set -> ok", "get -> '1'", "add -> 5", "add -> 3", "get -> '3'",
            "cas -> 'new'", "cas -> 'newer'", "cas -> 'newer'", "cas -> 'exp'",
            "check -> 0", "check -> 1", "numkeys -> 4", "del -> 1", "del -> 0",
            "wait -> 0", "set -> ok", "get -> ''"])
        # What we wrote is what torch's own client reads.
        s = dist.TCPStore("127.0.0.1", self.port, None, False, timedelta(seconds=5))
        self.assertEqual(s.get("a"), b"1")
        self.assertEqual(s.get("c"), b"3")

    def test_wait_released_by_torch_client_and_timeout(self):
        proc = subprocess.Popen([TOOL, "client", "127.0.0.1", str(self.port), "legacy",
                                 "wait", "/later", "get", "/later"], stdout=subprocess.PIPE)
        time.sleep(0.8)
        s = dist.TCPStore("127.0.0.1", self.port, None, False, timedelta(seconds=5))
        s.set("later", b"now")
        out, _ = proc.communicate(timeout=20)
        self.assertEqual(out.decode().splitlines(), ["wait -> 0", "get -> 'now'"])
        rc, out = self.tool("wait", "/never@300")
        self.assertEqual(out[0], "wait -> timeout")


if __name__ == "__main__":
    unittest.main(verbosity=2)
