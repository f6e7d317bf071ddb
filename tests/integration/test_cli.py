#!/usr/bin/python3
"""elasticd's command line: help, version, usage errors (exit 2 naming the flag),
spellings, PET_* defaults and their precedence."""

import os
import socket
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import lib  # noqa: E402

# A worker that leaves one file per local rank in the directory given as $0.
COUNT = ["--no-python", "/bin/sh", "-c", 'echo "$RANK $LOCAL_WORLD_SIZE" > "$0/w_$LOCAL_RANK"']


class CliTest(lib.ElasticdTestCase):

    def count_dir(self):
        d = self.path("count")
        os.makedirs(d, exist_ok=True)
        return d

    def workers_started(self, d):
        return sorted(os.listdir(d))

    def assertUsageError(self, res, *names):
        self.assertRc(res, 2)
        for n in names:
            self.assertIn(n, res.err, "stderr does not name %r: %r" % (n, res))

    # -- help and version --

    def test_help(self):
        res = self.run_elasticd("--help")
        self.assertRc(res, 0)
        self.assertIn("Usage:", res.out)
        for flag in ("--nproc-per-node", "--max-restarts", "--nnodes", "--rdzv-backend",
                     "--standalone", "--redirects", "--tee", "--log-dir", "--no-python",
                     "--role", "--shutdown-timeout", "--local-ranks-filter"):
            self.assertIn(flag, res.out)
        # Options are grouped under headings.
        for heading in ("Workers:", "Rendezvous:"):
            self.assertIn(heading, res.out)
        self.assertEqual(res.err, "")
        for line in res.out.splitlines():
            self.assertLessEqual(len(line), 100, "help line too wide: %r" % line)

    def test_config_page_examples_are_accepted(self):
        # Every example file in elasticd.conf(5) is one a newcomer copies:
        # elasticd must read each (--dry-run: nothing runs; the file gives
        # the entrypoint or "t" does).
        import re
        with open(os.path.join(lib.SOURCE_ROOT, "man", "elasticd.conf.5.scd")) as f:
            page = f.read()
        topo = os.path.join(lib.SOURCE_ROOT, "tests", "data", "topo", "host-1node.xml")
        n = 0
        for block in re.findall(r"```\n(.*?)```", page, re.S):
            lines = [l for l in block.splitlines() if l.strip() and not l.startswith("#")]
            if not all(re.match(r"^[a-z][a-z_-]* *=", l) for l in lines):
                continue
            n += 1
            conf = self.path("example%d.conf" % n)
            with open(conf, "w") as f:
                f.write(block)
            entry = [] if "entrypoint" in block else ["t"]
            res = self.run_elasticd("--config", conf, "--dry-run", "--numa-binding", "node",
                                    "--topology-xml", topo, "--nproc-per-node", "1", *entry)
            self.assertRc(res, 0)
        self.assertGreaterEqual(n, 5)

    def test_help_short(self):
        res = self.run_elasticd("-h")
        self.assertRc(res, 0)
        self.assertIn("--nproc-per-node", res.out)

    def test_help_wins_over_entrypoint_errors(self):
        # -h is acted on as soon as it is read, like argparse.
        res = self.run_elasticd("--help", "--nnodes", "bogus")
        self.assertRc(res, 0)
        self.assertIn("Usage:", res.out)

    def test_version(self):
        res = self.run_elasticd("--version")
        self.assertRc(res, 0)
        self.assertRegex(res.out, r"^elasticd \d+\.\d+\.\d+")

    # -- usage errors --

    def test_unknown_flag(self):
        d = self.count_dir()
        res = self.run_elasticd("--bogus-flag", "x", *COUNT, d)
        self.assertUsageError(res, "--bogus-flag")
        self.assertEqual(self.workers_started(d), [])

    def test_unknown_short_flag(self):
        res = self.run_elasticd("-Z", "script.py")
        self.assertUsageError(res, "-Z")

    def test_bad_values_name_the_flag(self):
        cases = [
            (["--nnodes", "abc"], "--nnodes"),
            (["--nnodes", "0"], "--nnodes"),
            (["--nnodes", "3:2"], "--nnodes"),
            (["--nnodes", "1:2:3"], "--nnodes"),
            (["--max-restarts", "-1"], "--max-restarts"),
            (["--max-restarts", "x"], "--max-restarts"),
            (["--max_restarts", "1.5"], "--max-restarts"),
            (["--nproc-per-node", "0"], "--nproc-per-node"),
            (["--nproc-per-node", "foo"], "--nproc-per-node"),
            (["--nproc_per_node", "-2"], "--nproc-per-node"),
            (["-r", "9"], "--redirects"),
            (["-t", "0:4"], "--tee"),
            (["--local-ranks-filter", "a,b"], "--local-ranks-filter"),
            (["--shutdown-timeout", "-1"], "--shutdown-timeout"),
            (["--master-port", "port"], "--master-port"),
            (["--logs-specs", "nosuch"], "--logs-specs"),
        ]
        d = self.count_dir()
        for args, name in cases:
            with self.subTest(args=args):
                res = self.run_elasticd(*args, *COUNT, d)
                self.assertUsageError(res, name)
                # ... and the bad value itself.
                self.assertIn(args[1], res.err)
        self.assertEqual(self.workers_started(d), [])

    def test_nproc_device_types_elasticd_cannot_count(self):
        # torch accepts its PrivateUse1 backend's name (npu with torch_npu);
        # elasticd cannot count such devices and says so, naming the flag.
        d = self.count_dir()
        for value in ("npu", "hpu", "mtia", "mps", "cuda"):
            with self.subTest(value=value):
                res = self.run_elasticd("--nproc-per-node", value, *COUNT, d)
                self.assertUsageError(res, "--nproc-per-node")
                self.assertIn("'%s': elasticd cannot count %s devices here; give a number"
                              % (value, value), res.err)
        res = self.run_elasticd(*COUNT, d, env=self.env(PET_NPROC_PER_NODE="npu"))
        self.assertUsageError(res, "PET_NPROC_PER_NODE")
        self.assertIn("elasticd cannot count npu devices", res.err)
        self.assertEqual(self.workers_started(d), [])

    # -- endpoints and IPv6 --

    def test_unbracketed_ipv6_endpoint_refused(self):
        # "::1:29618" is an address, or an address and a port: refuse it and
        # show the bracketed form, for every backend (one parser).
        d = self.count_dir()
        for backend in ("c10d", "etcd", "static"):
            with self.subTest(backend=backend):
                res = self.run_elasticd("--nnodes", "1", "--rdzv-backend", backend,
                                        "--rdzv-endpoint", "::1:29618", *COUNT, d, timeout=20)
                self.assertUsageError(res, "--rdzv-endpoint", "[::1]:29618")
        res = self.run_elasticd("--nnodes", "1", "--rdzv-backend", "c10d", "--rdzv-endpoint",
                                "fe80::1", *COUNT, d, timeout=20)
        self.assertUsageError(res, "--rdzv-endpoint", "[fe80::1]:PORT")
        self.assertEqual(self.workers_started(d), [])

    def ping_master(self):
        """A worker that dumps MASTER_ADDR and checks a TCPStore answers there
        (v2 VALIDATE + PING, the nonce comes back)."""
        return self.write_script("ping.py", """
import os, socket, struct, sys
addr, port = os.environ["MASTER_ADDR"], int(os.environ["MASTER_PORT"])
s = socket.create_connection((addr, port), timeout=10)
s.sendall(b"\\x00" + struct.pack("<I", 0x3C85F7CE) + b"\\x0d" + struct.pack("<I", 4242))
got = b""
while len(got) < 4:
    b = s.recv(4 - len(got))
    if not b:
        break
    got += b
with open(sys.argv[1], "w") as f:
    f.write("%s %d\\n" % (addr, struct.unpack("<I", got)[0] if len(got) == 4 else -1))
""")

    def test_ipv6_master_addr_and_bracketed_endpoint(self):
        # --master-addr takes a bare IPv6 address, --rdzv-endpoint the
        # bracketed form; the workers reach the agent store there.
        try:
            with socket.socket(socket.AF_INET6) as s:
                s.bind(("::1", 0))
        except OSError as e:
            self.fail("this machine has no IPv6 loopback: %s" % e)
        script = self.ping_master()
        runs = {
            "master-addr": ["--master-addr", "::1", "--master-port", str(lib._free_port())],
            "endpoint": ["--rdzv-endpoint", "[::1]:%d" % lib._free_port()],
        }
        for name, args in runs.items():
            with self.subTest(name):
                out = self.path("ping_" + name)
                res = self.run_elasticd("--nnodes", "1", "--rdzv-backend", "static", *args,
                                        "--no-python", lib.PYTHON_EXEC, script, out)
                self.assertRc(res, 0)
                self.assertEqual(lib.read_text(out), "::1 4242\n")

    def test_missing_value(self):
        res = self.run_elasticd("--nproc-per-node")
        self.assertUsageError(res, "--nproc-per-node")

    def test_missing_entrypoint(self):
        res = self.run_elasticd("--standalone", "--nproc-per-node", "2")
        self.assertUsageError(res, "training_script")

    def test_missing_entrypoint_after_double_dash(self):
        res = self.run_elasticd("--standalone", "--")
        self.assertRc(res, 2)

    def test_run_path_refused(self):
        script = self.write_py("w.py", "print('should not run')\n")
        res = self.run_elasticd("--run-path", script)
        self.assertUsageError(res, "--run-path")
        self.assertNotIn("should not run", res.out)

    def test_run_path_underscore_refused(self):
        res = self.run_elasticd("--run_path", "script.py")
        self.assertRc(res, 2)

    def test_no_python_with_module(self):
        res = self.run_elasticd("--no-python", "-m", "/bin/true")
        self.assertUsageError(res, "--no-python", "--module")

    def test_bad_pet_value_names_variable(self):
        res = self.run_elasticd("--no-python", "/bin/true",
                                env=self.env(PET_MAX_RESTARTS="abc"))
        self.assertUsageError(res, "PET_MAX_RESTARTS", "abc")

    # -- spellings and precedence --

    def test_underscore_spellings(self):
        d = self.count_dir()
        res = self.run_elasticd("--nproc_per_node", "2", "--max_restarts", "0",
                                "--rdzv_id", "under", "--no_python", "/bin/sh", "-c",
                                'echo "$TORCHELASTIC_RUN_ID" > "$0/w_$LOCAL_RANK"', d)
        self.assertRc(res, 0)
        self.assertEqual(self.workers_started(d), ["w_0", "w_1"])
        self.assertEqual(lib.read_text(os.path.join(d, "w_1")), "under\n")

    def test_equals_form(self):
        d = self.count_dir()
        res = self.run_elasticd("--nproc-per-node=2", "--no-python", *COUNT[1:], d)
        self.assertRc(res, 0)
        self.assertEqual(self.workers_started(d), ["w_0", "w_1"])

    def test_unambiguous_prefix(self):
        # argparse-style abbreviations: --nproc names one option (both spellings).
        d = self.count_dir()
        res = self.run_elasticd("--nproc", "2", *COUNT, d)
        self.assertRc(res, 0)
        self.assertEqual(self.workers_started(d), ["w_0", "w_1"])

    def test_ambiguous_prefix(self):
        res = self.run_elasticd("--rdzv", "x", "--no-python", "/bin/true")
        self.assertUsageError(res, "--rdzv", "ambiguous")

    def test_pet_nproc_per_node(self):
        d = self.count_dir()
        res = self.run_elasticd(*COUNT, d, env=self.env(PET_NPROC_PER_NODE="3"))
        self.assertRc(res, 0)
        self.assertEqual(self.workers_started(d), ["w_0", "w_1", "w_2"])
        self.assertEqual(lib.read_text(os.path.join(d, "w_2")), "2 3\n")

    def test_cli_beats_pet(self):
        d = self.count_dir()
        res = self.run_elasticd("--nproc-per-node", "1", *COUNT, d,
                                env=self.env(PET_NPROC_PER_NODE="3"))
        self.assertRc(res, 0)
        self.assertEqual(self.workers_started(d), ["w_0"])

    def test_pet_boolean_flag(self):
        # PET_NO_PYTHON=1 enables --no-python (torchrun's check_env).
        d = self.count_dir()
        res = self.run_elasticd("/bin/sh", "-c", 'touch "$0/w_$LOCAL_RANK"', d,
                                env=self.env(PET_NO_PYTHON="1"))
        self.assertRc(res, 0)
        self.assertEqual(self.workers_started(d), ["w_0"])

    def test_last_occurrence_wins(self):
        d = self.count_dir()
        res = self.run_elasticd("--nproc-per-node", "3", "--nproc-per-node", "2", *COUNT, d)
        self.assertRc(res, 0)
        self.assertEqual(self.workers_started(d), ["w_0", "w_1"])

    def test_script_args_verbatim(self):
        # Everything after the entrypoint belongs to the worker, even elasticd-looking flags.
        out = self.path("args.txt")
        res = self.run_elasticd("--nproc-per-node", "1", "--no-python", "/bin/sh", "-c",
                                'printf "%s\\n" "$@" > "$0"', out,
                                "--nproc-per-node", "5", "--bogus", "-r", "3", "--")
        self.assertRc(res, 0)
        self.assertEqual(lib.read_text(out).splitlines(),
                         ["--nproc-per-node", "5", "--bogus", "-r", "3", "--"])

    def test_double_dash_ends_options(self):
        d = self.count_dir()
        res = self.run_elasticd("--nproc-per-node", "2", "--no-python", "--", *COUNT[1:], d)
        self.assertRc(res, 0)
        self.assertEqual(self.workers_started(d), ["w_0", "w_1"])


if __name__ == "__main__":
    lib.main()
