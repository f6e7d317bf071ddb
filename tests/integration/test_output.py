#!/usr/bin/python3
"""Worker output: redirects (-r), tee (-t) with torchrun's line prefix, per-rank
maps, --local-ranks-filter, partial/huge/\\r lines, large volumes, and the
log directory layout."""

import hashlib
import os
import re
import socket
import signal
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import lib  # noqa: E402

# Prints "out-<rank> <n>" lines on stdout and "err-<rank> <n>" on stderr.
SPEAKER = r"""
import os, sys
lr = os.environ['LOCAL_RANK']
for i in range(3):
    sys.stdout.write('out-%s %d\n' % (lr, i))
    sys.stderr.write('err-%s %d\n' % (lr, i))
"""


def expected_lines(kind, lr):
    return "".join("%s-%d %d\n" % (kind, lr, i) for i in range(3))


class OutputTest(lib.ElasticdTestCase):

    def speak(self, *extra, nproc=2, env=None, cwd=None):
        script = self.write_py("speaker.py", SPEAKER)
        log_dir = self.path("logs")
        res = self.run_elasticd("--standalone", "--nproc-per-node", str(nproc),
                                "--rdzv-id", "outjob", "--log-dir", log_dir, *extra, script,
                                env=env, cwd=cwd)
        self.assertRc(res, 0)
        return res, self.only_run_dir(log_dir, "outjob")

    def assertRawLines(self, text, kind, lr):
        """text holds rank lr's unprefixed kind lines, in order (other ranks may interleave)."""
        got = [line for line in text.splitlines() if line.startswith("%s-%d " % (kind, lr))]
        self.assertEqual(got, expected_lines(kind, lr).splitlines(), text)

    def rank_file(self, run_dir, lr, name, attempt=0):
        return os.path.join(run_dir, "attempt_%d" % attempt, str(lr), name)

    # -- redirect --

    def test_redirect_all(self):
        res, run = self.speak("-r", "3")
        for lr in range(2):
            self.assertEqual(lib.read_text(self.rank_file(run, lr, "stdout.log")),
                             expected_lines("out", lr))
            self.assertEqual(lib.read_text(self.rank_file(run, lr, "stderr.log")),
                             expected_lines("err", lr))
        self.assertNotIn("out-", res.out + res.err)
        self.assertNotIn("err-", res.out + res.err)

    def test_redirect_stdout_only(self):
        res, run = self.speak("--redirects", "1")
        for lr in range(2):
            self.assertEqual(lib.read_text(self.rank_file(run, lr, "stdout.log")),
                             expected_lines("out", lr))
            self.assertFalse(os.path.exists(self.rank_file(run, lr, "stderr.log")))
            # Not redirected: inherited as is (no prefix).
            self.assertRawLines(res.err, "err", lr)
        self.assertNotIn("out-", res.out)

    def test_redirected_worker_sees_its_file(self):
        # Redirect: fd 1 is the log file itself. Tee: fd 1 is a pipe to the agent.
        script = self.write_py("st.py", r"""
import os, stat, sys
st = os.fstat(1)
kind = 'reg' if stat.S_ISREG(st.st_mode) else 'fifo' if stat.S_ISFIFO(st.st_mode) else 'other'
print(kind, st.st_dev, st.st_ino, file=sys.stderr)
""")
        for flag, kind in (("-r", "reg"), ("-t", "fifo")):
            log_dir = self.path("logs" + flag)
            res = self.run_elasticd("--standalone", flag, "1", "--log-dir", log_dir, script)
            self.assertRc(res, 0)
            m = re.search(r"^(reg|fifo|other) (\d+) (\d+)$", res.err, re.M)
            self.assertIsNotNone(m, res)
            self.assertEqual(m.group(1), kind)
            if kind == "reg":
                st = os.stat(self.rank_file(self.only_run_dir(log_dir), 0, "stdout.log"))
                self.assertEqual((int(m.group(2)), int(m.group(3))), (st.st_dev, st.st_ino))

    # -- tee --

    def test_tee_all(self):
        res, run = self.speak("-t", "3")
        for lr in range(2):
            # Files: raw bytes, no prefix.
            self.assertEqual(lib.read_text(self.rank_file(run, lr, "stdout.log")),
                             expected_lines("out", lr))
            self.assertEqual(lib.read_text(self.rank_file(run, lr, "stderr.log")),
                             expected_lines("err", lr))
            # Console: every line prefixed, on the matching stream, in order.
            outs = [line for line in res.out.splitlines()
                    if line.startswith("[default%d]:" % lr)]
            self.assertEqual(outs, ["[default%d]:out-%d %d" % (lr, lr, i) for i in range(3)])
            errs = [line for line in res.err.splitlines()
                    if line.startswith("[default%d]:" % lr)]
            self.assertEqual(errs, ["[default%d]:err-%d %d" % (lr, lr, i) for i in range(3)])
        self.assertNotIn("err-", res.out)
        self.assertNotIn("out-", res.err)
        # Nothing unprefixed from the workers on stdout.
        for line in res.out.splitlines():
            self.assertRegex(line, r"^\[default[01]\]:")

    def test_tee_role_prefix(self):
        res, run = self.speak("-t", "3", "--role", "trainer")
        self.assertIn("[trainer0]:out-0 0\n", res.out)
        self.assertIn("[trainer1]:err-1 2\n", res.err)
        self.assertNotIn("[default", res.out + res.err)

    def test_tee_prefix_template(self):
        script = self.write_py("speaker.py", SPEAKER)
        log_dir = self.path("logs")
        env = self.env(TORCHELASTIC_LOG_LINE_PREFIX_TEMPLATE="[${rank}|${role_name}"
                                                             "|${local_rank}|$other]:")
        res = self.run_elasticd("--nnodes", "2", "--node-rank", "1", "--nproc-per-node", "2",
                                "--log-dir", log_dir, "-t", "3", script, env=env)
        self.assertRc(res, 0)
        self.assertIn("[2|default|0|$other]:out-0 0\n", res.out)
        self.assertIn("[3|default|1|$other]:out-1 1\n", res.out)
        self.assertIn("[3|default|1|$other]:err-1 2\n", res.err)

    def test_tee_prefix_template_flag(self):
        # Every placeholder; ${pid} is the worker's own pid (torch PR 162018).
        script = self.write_py("speaker.py", SPEAKER + "print('pid', os.getpid())\n")
        log_dir = self.path("logs")
        res = self.run_elasticd(
            "--standalone", "--nproc-per-node", "2", "--log-dir", log_dir, "-t", "1",
            "--log-line-prefix-template", "${hostname}|${role_name}|${local_rank}|${rank}|"
                                          "${pid}|$$|${nope}: ", script)
        self.assertRc(res, 0)
        host = socket.gethostname()
        pids = re.findall(r"^%s\|default\|(\d)\|(\d)\|(\d+)\|\$\|\$\{nope\}: pid (\d+)$"
                          % re.escape(host), res.out, re.M)
        self.assertEqual(sorted((lr, r) for lr, r, _, _ in pids), [("0", "0"), ("1", "1")],
                         res.out)
        for _, _, prefix_pid, worker_pid in pids:
            self.assertEqual(prefix_pid, worker_pid)
        self.assertIn(host + "|default|1|1|", res.out)

    def test_tee_prefix_template_flag_beats_env(self):
        res, run = self.speak("-t", "3", "--log-line-prefix-template", "<${local_rank}> ",
                              env=self.env(TORCHELASTIC_LOG_LINE_PREFIX_TEMPLATE="[${rank}]:"))
        self.assertIn("<0> out-0 0\n", res.out)
        self.assertNotIn("[0]:", res.out)

    def test_tee_prefix_template_pet_beats_env(self):
        # PET_LOG_LINE_PREFIX_TEMPLATE is the flag's default: it beats it too.
        res, run = self.speak("-t", "3",
                              env=self.env(TORCHELASTIC_LOG_LINE_PREFIX_TEMPLATE="[${rank}]:",
                                           PET_LOG_LINE_PREFIX_TEMPLATE="{${rank}}"))
        self.assertIn("{1}err-1 2\n", res.err)

    def test_tee_prefix_template_empty_is_default(self):
        res, run = self.speak("-t", "1", "--log-line-prefix-template", "")
        self.assertIn("[default1]:out-1 0\n", res.out)

    def test_duplicate_filters(self):
        res, run = self.speak("-t", "3", "--duplicate-stdout-filters", "out-0 1,out-1 2",
                              "--duplicate-stderr-filters", "err-1")
        attempt = os.path.join(run, "attempt_0")
        out = lib.read_text(os.path.join(attempt, "filtered_stdout.log"))
        err = lib.read_text(os.path.join(attempt, "filtered_stderr.log"))
        self.assertEqual(sorted(out.splitlines(keepends=True)),
                         ["[default0]:out-0 1\n", "[default1]:out-1 2\n"])
        self.assertEqual(sorted(err.splitlines(keepends=True)),
                         ["[default1]:err-1 %d\n" % i for i in range(3)])
        # The console and the ranks' logs are unchanged.
        self.assertIn("[default0]:out-0 0\n", res.out)
        self.assertEqual(lib.read_text(self.rank_file(run, 1, "stderr.log")),
                         expected_lines("err", 1))

    def test_duplicate_filters_follow_tee_and_ranks_filter(self):
        # As torch: only streams that are teed and shown are duplicated.
        res, run = self.speak("-t", "1", "--local-ranks-filter", "1",
                              "--duplicate-stdout-filters", "",
                              "--duplicate-stderr-filters", "err")
        attempt = os.path.join(run, "attempt_0")
        out = lib.read_text(os.path.join(attempt, "filtered_stdout.log"))
        self.assertEqual(out, "".join("[default1]:out-1 %d\n" % i for i in range(3)))
        self.assertEqual(lib.read_text(os.path.join(attempt, "filtered_stderr.log")), "")

    def test_duplicate_filters_carriage_returns(self):
        # A progress bar's '\r' ends a line in filtered_*.log as it does on
        # the console (and in torch's tailer): only the matching redraws.
        script = self.write_py("bar.py", r"""
import sys
w = sys.stdout.buffer
for i in range(5):
    w.write(b'step %d/4\r' % i)
w.write(b'loss 0.5\r\nstep done\n')
w.flush()
""")
        log_dir = self.path("logs")
        res = self.run_elasticd("--standalone", "--log-dir", log_dir, "-t", "1",
                                "--duplicate-stdout-filters", "step 3,loss", script)
        self.assertRc(res, 0)
        run = self.only_run_dir(log_dir)
        got = lib.read_bytes(os.path.join(run, "attempt_0", "filtered_stdout.log"))
        self.assertEqual(got, b"[default0]:step 3/4\r[default0]:loss 0.5\r\n")
        self.assertIn(b"\r[default0]:step 3/4\r[default0]:step 4/4\r", res.out_bytes)
        self.assertIn(b"\r[default0]:loss 0.5\r\n[default0]:step done\n", res.out_bytes)

    def test_no_filtered_files_without_filters(self):
        res, run = self.speak("-t", "3")
        self.assertFalse(os.path.exists(os.path.join(run, "attempt_0", "filtered_stdout.log")))
        self.assertFalse(os.path.exists(os.path.join(run, "attempt_0", "filtered_stderr.log")))

    def test_tee_prefix_template_rank_only(self):
        res, run = self.speak("-t", "3",
                              env=self.env(TORCHELASTIC_LOG_LINE_PREFIX_TEMPLATE="[${rank}]:"))
        self.assertIn("[0]:out-0 0\n", res.out)
        self.assertIn("[1]:out-1 2\n", res.out)

    def test_tee_per_rank_map(self):
        res, run = self.speak("-t", "0:3")
        self.assertIn("[default0]:out-0 1\n", res.out)
        self.assertIn("[default0]:err-0 1\n", res.err)
        # Rank 1 is neither teed nor redirected: raw on the console, no files.
        self.assertRawLines(res.out, "out", 1)
        self.assertRawLines(res.err, "err", 1)
        self.assertNotIn("[default1]", res.out + res.err)
        self.assertEqual(lib.read_text(self.rank_file(run, 0, "stdout.log")),
                         expected_lines("out", 0))
        self.assertFalse(os.path.exists(self.rank_file(run, 1, "stdout.log")))
        self.assertFalse(os.path.exists(self.rank_file(run, 1, "stderr.log")))
        self.assertTrue(os.path.isdir(os.path.join(run, "attempt_0", "1")))

    def test_tee_per_rank_streams(self):
        res, run = self.speak("-t", "0:1,1:2")
        self.assertIn("[default0]:out-0 0\n", res.out)
        self.assertRawLines(res.err, "err", 0)      # rank 0 stderr: inherited
        self.assertIn("[default1]:err-1 0\n", res.err)
        self.assertRawLines(res.out, "out", 1)      # rank 1 stdout: inherited
        self.assertTrue(os.path.exists(self.rank_file(run, 0, "stdout.log")))
        self.assertFalse(os.path.exists(self.rank_file(run, 0, "stderr.log")))
        self.assertFalse(os.path.exists(self.rank_file(run, 1, "stdout.log")))
        self.assertTrue(os.path.exists(self.rank_file(run, 1, "stderr.log")))

    def test_redirect_and_tee_combined(self):
        # -r 3 -t 1: stdout teed, stderr only to the file.
        res, run = self.speak("-r", "3", "-t", "1")
        for lr in range(2):
            self.assertIn("[default%d]:out-%d 0\n" % (lr, lr), res.out)
            self.assertEqual(lib.read_text(self.rank_file(run, lr, "stderr.log")),
                             expected_lines("err", lr))
        self.assertNotIn("err-", res.err)

    def test_local_ranks_filter_tee(self):
        res, run = self.speak("-t", "3", "--local-ranks-filter", "1")
        self.assertNotIn("[default0]", res.out + res.err)
        self.assertNotIn("out-0", res.out)
        self.assertIn("[default1]:out-1 0\n", res.out)
        self.assertIn("[default1]:err-1 2\n", res.err)
        # Files are written for every rank.
        self.assertEqual(lib.read_text(self.rank_file(run, 0, "stdout.log")),
                         expected_lines("out", 0))
        self.assertEqual(lib.read_text(self.rank_file(run, 0, "stderr.log")),
                         expected_lines("err", 0))

    def test_local_ranks_filter_without_tee(self):
        # Ranks outside the filter lose their (non-redirected) console output.
        res, run = self.speak("--local-ranks-filter", "0")
        self.assertRawLines(res.out, "out", 0)
        self.assertRawLines(res.err, "err", 0)
        self.assertNotIn("out-1", res.out)
        self.assertNotIn("err-1", res.err)

    # -- awkward output --

    def test_partial_last_line(self):
        log_dir = self.path("logs")
        res = self.run_elasticd("--standalone", "--log-dir", log_dir, "-t", "3", "--no-python",
                                "/bin/sh", "-c",
                                "printf 'first\\nno-newline-end'; printf 'err-tail' >&2")
        self.assertRc(res, 0)
        run = self.only_run_dir(log_dir)
        self.assertEqual(lib.read_bytes(self.rank_file(run, 0, "stdout.log")),
                         b"first\nno-newline-end")
        self.assertEqual(lib.read_bytes(self.rank_file(run, 0, "stderr.log")), b"err-tail")
        self.assertIn("[default0]:first\n[default0]:no-newline-end\n", res.out)
        self.assertIn("[default0]:err-tail\n", res.err)

    def test_partial_last_line_on_failure(self):
        log_dir = self.path("logs")
        res = self.run_elasticd("--standalone", "--log-dir", log_dir, "-t", "3", "--no-python",
                                "/bin/sh", "-c", "printf 'dying words'; exit 3")
        self.assertRc(res, 1)
        self.assertIn("[default0]:dying words\n", res.out)

    def test_long_lines_of_two_ranks_do_not_splice(self):
        # Both ranks write a 200 KB line in 4 KiB writes at the same time: on
        # the shared console every line is one rank's, with its prefix.
        script = self.write_py("two.py", r"""
import os, sys, time
c = b"0123456789"[int(os.environ["LOCAL_RANK"])]
w = sys.stdout.buffer
for _ in range(50):
    w.write(bytes([c]) * 4096)
    w.flush()
    time.sleep(0.002)
w.write(b"\n")
w.flush()
""")
        res = self.run_elasticd("--standalone", "--nproc-per-node", "2", "--log-dir",
                                self.path("logs"), "-t", "3", script, timeout=60)
        self.assertRc(res, 0)
        got = {0: 0, 1: 0}
        for line in res.out_bytes.split(b"\n")[:-1]:
            m = re.match(rb"^\[default([01])\]:(.*)$", line, re.S)
            self.assertTrue(m, line[:80])
            rank = int(m.group(1))
            self.assertEqual(m.group(2), str(rank).encode() * len(m.group(2)), line[:80])
            got[rank] += len(m.group(2))
        self.assertEqual(got, {0: 200 * 1024, 1: 200 * 1024})

    def test_huge_line_and_carriage_returns(self):
        script = self.write_py("big.py", r"""
import sys
w = sys.stdout.buffer
w.write(b'x' * (1 << 20) + b'\n')
for i in range(200):
    w.write(b'progress %3d%%\r' % (i // 2))
w.write(b'done\n')
w.write(b'tail \r\r\n\n')
w.flush()
""")
        expected = (b"x" * (1 << 20) + b"\n"
                    + b"".join(b"progress %3d%%\r" % (i // 2) for i in range(200))
                    + b"done\n" + b"tail \r\r\n\n")
        log_dir = self.path("logs")
        res = self.run_elasticd("--standalone", "--log-dir", log_dir, "-t", "3", script,
                                timeout=60)
        self.assertRc(res, 0)
        run = self.only_run_dir(log_dir)
        self.assertEqual(lib.read_bytes(self.rank_file(run, 0, "stdout.log")), expected)
        # The console carries the same bytes once the prefixes are taken out,
        # the 1 MiB line as prefixed lines of at least 64 KiB.
        lines = res.out_bytes.split(b"\n")
        big = [ln for ln in lines if ln.startswith(b"[default0]:x")]
        self.assertGreater(len(big), 1)
        self.assertTrue(all(len(ln) >= 64 * 1024 for ln in big[:-1]))
        self.assertEqual(b"".join(ln[len(b"[default0]:"):] for ln in big), b"x" * (1 << 20))
        rest = b"\n".join(lines[len(big):])
        self.assertEqual(rest.replace(b"[default0]:", b""), expected[(1 << 20) + 1:])
        self.assertTrue(res.out_bytes.startswith(b"[default0]:xxxx"))
        self.assertIn(b"\r[default0]:progress", res.out_bytes)
        self.assertIn(b"\r[default0]:done\n[default0]:tail \r", res.out_bytes)

    def test_binary_bytes_pass_through(self):
        script = self.write_py("bin.py", r"""
import sys
sys.stdout.buffer.write(bytes(range(256)) + b'\n' + '\u00e9t\u00e9 \U0001f600\n'.encode())
""")
        expected = bytes(range(256)) + b"\n" + "\u00e9t\u00e9 \U0001f600\n".encode()
        log_dir = self.path("logs")
        res = self.run_elasticd("--standalone", "--log-dir", log_dir, "-t", "1", script)
        self.assertRc(res, 0)
        run = self.only_run_dir(log_dir)
        self.assertEqual(lib.read_bytes(self.rank_file(run, 0, "stdout.log")), expected)
        self.assertEqual(res.out_bytes.replace(b"[default0]:", b""), expected)

    def test_ranks_do_not_tear_lines(self):
        # Four ranks write lines in odd-sized pieces at the same time: on the
        # console every line is whole, behind its own rank's prefix.
        script = self.write_py("torn.py", r"""
import os, random
lr = int(os.environ['LOCAL_RANK'])
rnd = random.Random(lr)
data = b''.join(b'%d' % lr * (rnd.randrange(1, 3000)) + b'\n' for _ in range(2000))
i = 0
while i < len(data):
    n = rnd.randrange(1, 700)
    os.write(1, data[i:i + n])
    i += n
""")
        log_dir = self.path("logs")
        res = self.run_elasticd("--standalone", "--nproc-per-node", "4", "--log-dir", log_dir,
                                "-t", "1", script, timeout=60)
        self.assertRc(res, 0)
        counts = [0] * 4
        for line in res.out_bytes.split(b"\n")[:-1]:
            m = re.match(rb"^\[default(\d)\]:(\d)+$", line)
            self.assertIsNotNone(m, "torn line: %r" % line[:200])
            self.assertEqual(set(line[len(b"[default0]:"):]), {m.group(1)[0]},
                             "rank %s line mixes ranks: %r" % (m.group(1), line[:200]))
            counts[int(m.group(1))] += 1
        self.assertEqual(counts, [2000] * 4)

    def test_fifty_megabytes_through_tee(self):
        # 2 ranks x 25 MiB on stdout (100-byte lines) + 1 MiB each on stderr.
        script = self.write_py("flood.py", r"""
import os, sys
lr = int(os.environ['LOCAL_RANK'])
line = (b'%d' % lr) * 99 + b'\n'
block = line * 1024
for _ in range(256):
    sys.stdout.buffer.write(block)
sys.stderr.buffer.write(b'e' * 1023 + b'\n' * 1)
sys.stderr.buffer.write((b'E' * 1023 + b'\n') * 1023)
""")
        log_dir = self.path("logs")
        res = self.run_elasticd("--standalone", "--nproc-per-node", "2", "--log-dir", log_dir,
                                "-t", "3", script, timeout=120)
        self.assertRc(res, 0)
        run = self.only_run_dir(log_dir)
        n_lines = 256 * 1024
        for lr in range(2):
            line = (b"%d" % lr) * 99 + b"\n"
            path = self.rank_file(run, lr, "stdout.log")
            self.assertEqual(os.path.getsize(path), 100 * n_lines)
            h = hashlib.sha256()
            with open(path, "rb") as f:
                for chunk in iter(lambda: f.read(1 << 20), b""):
                    h.update(chunk)
            self.assertEqual(h.hexdigest(), hashlib.sha256(line * n_lines).hexdigest())
            self.assertEqual(os.path.getsize(self.rank_file(run, lr, "stderr.log")), 1 << 20)
            prefix = b"[default%d]:" % lr
            self.assertEqual(res.out_bytes.count(prefix + line), n_lines)
        # Console stdout: exactly the prefixed lines, nothing lost or torn.
        self.assertEqual(len(res.out_bytes), 2 * n_lines * (100 + len(b"[default0]:")))

    def test_console_closed(self):
        # The console's reader went away (EPIPE): the job and its files carry on.
        r, w = os.pipe()
        os.close(r)
        log_dir = self.path("logs")
        try:
            proc = subprocess.Popen([lib.ELASTICD, "--standalone", "--log-dir", log_dir,
                                     "-t", "3", "--no-python", "/bin/sh", "-c", "seq 1 100000"],
                                    stdout=w, stderr=subprocess.DEVNULL, env=self.env(),
                                    cwd=self.tmp)
            try:
                rc = proc.wait(timeout=60)
            finally:
                if proc.poll() is None:
                    proc.kill()
                    proc.wait()
            self.assertEqual(rc, 0)
        finally:
            os.close(w)
        expected = "".join("%d\n" % i for i in range(1, 100001))
        run = self.only_run_dir(log_dir)
        self.assertEqual(lib.read_text(self.rank_file(run, 0, "stdout.log")), expected)

    def test_stalled_console_does_not_block_signals(self):
        # Nobody reads the agent's stdout (a stuck pipe). The agent must still
        # handle SIGTERM: its loop must not sit in a blocking write to the console.
        r, w = os.pipe()
        log_dir = self.path("logs")
        proc = subprocess.Popen(
            [lib.ELASTICD, "--standalone", "-t", "3", "--shutdown-timeout", "2", "--log-dir",
             log_dir, "--no-python", "/bin/sh", "-c",
             "yes 0123456789abcdefghijklmnopqrstuvwxyz | head -c 4000000; sleep 1000"],
            stdout=w, stderr=subprocess.DEVNULL, env=self.env(), cwd=self.tmp)
        os.close(w)
        try:
            def started():
                dirs = os.listdir(log_dir) if os.path.isdir(log_dir) else []
                if len(dirs) != 1:
                    return False
                f = self.rank_file(os.path.join(log_dir, dirs[0]), 0, "stdout.log")
                return os.path.exists(f) and os.path.getsize(f) > 0
            self.assertTrue(lib.wait_until(started, 30), "no output reached the log file")
            time.sleep(0.5)  # the console pipe (64 KiB) is full by now
            proc.send_signal(signal.SIGTERM)
            try:
                rc = proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                with open("/proc/%d/wchan" % proc.pid) as f:
                    rc = "still running 20 s after SIGTERM (wchan %s)" % f.read()
            self.assertEqual(rc, 143)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
            os.close(r)
        self.assertNoLeftovers()

    # -- issue 19: a slow console loses nothing silently, nothing at exit --

    NOTE = re.compile(rb"^elasticd: console too slow: (\d+) bytes \((\d+) lines\) of output "
                      rb"dropped from local ranks ([\d,]+) \(log files keep everything\)$")

    def run_slow_console(self, args, delay, chunk=65536, pause=0.0, timeout=120, merged=False):
        """Run elasticd with its stdout on a pipe read by a reader that starts
        delay s late, then reads chunk bytes every pause s; merged: its
        stderr on that pipe too (2>&1). Returns (rc, console bytes, stderr
        text)."""
        r, w = os.pipe()
        err_path = self.path("agent.stderr")
        got = []

        def reader():
            time.sleep(delay)
            while True:
                data = os.read(r, chunk)
                if not data:
                    return
                got.append(data)
                if pause:
                    time.sleep(pause)

        t = threading.Thread(target=reader)
        t.start()
        with open(err_path, "wb") as err:
            proc = subprocess.Popen([lib.ELASTICD, "--standalone", "--log-dir",
                                     self.path("logs")] + list(args),
                                    stdout=w, stderr=w if merged else err, env=self.env(),
                                    cwd=self.tmp)
        os.close(w)
        try:
            rc = proc.wait(timeout=timeout)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
            t.join(timeout)
            os.close(r)
        return rc, b"".join(got), lib.read_text(err_path)

    def console_account(self, out, line_ok):
        """Split the console into delivered lines (each must satisfy line_ok:
        no torn line) and drop announcements. Returns (lines, announced bytes,
        announced lines, ranks named)."""
        lines, nb, nl, ranks = [], 0, 0, set()
        self.assertTrue(out == b"" or out.endswith(b"\n"), out[-200:])
        for line in out.split(b"\n")[:-1]:
            m = self.NOTE.match(line)
            if m:
                nb += int(m.group(1))
                nl += int(m.group(2))
                ranks |= {int(x) for x in m.group(3).split(b",")}
                continue
            self.assertTrue(line_ok(line), "torn or foreign line: %r" % line[:200])
            lines.append(line)
        return lines, nb, nl, ranks

    def test_stalled_console_drops_are_announced(self):
        # 2 ranks x 100 000 lines of 64 bytes while the console is not read
        # for 3 s: what does not reach it is announced (count and ranks), to
        # the line, and no line is torn.
        script = self.write_py("burst.py", r"""
import os, sys
lr = int(os.environ['LOCAL_RANK'])
w = sys.stdout.buffer.write
for i in range(100000):
    w(b'%d %09d ' % (lr, i) + b'x' * 51 + b'\n')
""")
        n = 100000
        rc, out, err = self.run_slow_console(["--nproc-per-node", "2", "-t", "3", script], 3.0)
        self.assertEqual(rc, 0, err)
        pat = re.compile(rb"^\[default([01])\]:([01]) (\d{9}) x{51}$")

        def ok(line):
            m = pat.match(line)
            return bool(m) and m.group(1) == m.group(2)

        lines, nb, nl, ranks = self.console_account(out, ok)
        sys.stderr.write("stalled burst: %d of %d lines delivered, %d lines (%d bytes) "
                         "announced, ranks %r\n" % (len(lines), 2 * n, nl, nb, sorted(ranks)))
        self.assertEqual(len(lines) + nl, 2 * n)
        self.assertEqual(nb, nl * (len(b"[default0]:") + 64))
        self.assertGreater(nl, 0, "nothing dropped: the console was not slow enough")
        self.assertLessEqual(ranks, {0, 1})
        for lr in range(2):
            seq = [int(x.split(b" ")[1]) for x in lines if x.startswith(b"[default%d]" % lr)]
            self.assertEqual(seq, sorted(seq))

    def test_agent_lines_survive_a_flooded_console(self):
        # 2>&1 on a pipe read 3 s late while 2 ranks flood it, then rank 1
        # exits 7: worker lines are dropped (announced), but elasticd's own
        # lines (the failure, its root cause table, the exit line) are not:
        # they are the only copy (the log files hold the workers' lines).
        script = self.write_py("flood_fail.py", r"""
import os, sys
lr = int(os.environ['LOCAL_RANK'])
w = sys.stdout.buffer.write
for i in range(100000):
    w(b'%d %09d ' % (lr, i) + b'x' * 51 + b'\n')
sys.stdout.flush()
sys.exit(7 if lr == 1 else 0)
""")
        rc, out, _ = self.run_slow_console(["--nproc-per-node", "2", "-t", "3", script], 3.0,
                                           merged=True)
        self.assertEqual(rc, 1)
        # the agent's lines only: the workers' would drown any message
        text = "\n".join(l for l in out.decode(errors="replace").split("\n")
                         if not l.startswith("[default"))
        for want in (r"console too slow: \d+ bytes", r"failed \(exitcode: 7\) local_rank: 1",
                     r"Root Cause \(first observed failure\):", r"exitcode  : 7",
                     r"elasticd exits with status 1 after"):
            self.assertRegex(text, want)
        self.assertNotIn("elasticd's own lines", text)

    def test_late_console_gets_every_line_at_exit(self):
        # The console's reader starts 1 s late; the rank prints 50 000 lines
        # and exits 0 at once: every line reaches the console before elasticd
        # exits, and its final status line comes after them.
        rc, out, err = self.run_slow_console(
            ["-t", "3", "--no-python", "/bin/sh", "-c", "seq 1 50000"], 1.0, chunk=4096)
        self.assertEqual(rc, 0, err)
        lines, nb, nl, _ = self.console_account(out, lambda l: l.startswith(b"[default0]:"))
        sys.stderr.write("late console: %d of 50000 lines delivered, %d announced\n"
                         % (len(lines), nl))
        self.assertEqual(lines, [b"[default0]:%d" % i for i in range(1, 50001)])
        self.assertEqual(nl, 0)

    def test_huge_line_on_slow_console(self):
        # A 10 MiB line without a newline, then exit 0, on a console read
        # 64 KiB every 20 ms: it arrives in whole prefixed pieces, and every
        # byte is either on the console or announced as dropped.
        size = 10 << 20
        rc, out, err = self.run_slow_console(
            ["-t", "3", "--no-python", "/bin/sh", "-c",
             "head -c %d /dev/zero | tr '\\0' x" % size], 0.5, pause=0.02)
        self.assertEqual(rc, 0, err)
        lines, nb, nl, ranks = self.console_account(
            out, lambda l: re.match(rb"^\[default0\]:x+$", l) is not None)
        delivered = sum(len(l) - len(b"[default0]:") for l in lines)
        dropped = nb - nl * (len(b"[default0]:") + 1)
        sys.stderr.write("huge line: %d of %d bytes delivered in %d pieces, %d bytes in %d "
                         "pieces announced\n" % (delivered, size, len(lines), dropped, nl))
        self.assertEqual(delivered + dropped, size)
        run = self.only_run_dir(self.path("logs"))
        self.assertEqual(os.path.getsize(self.rank_file(run, 0, "stdout.log")), size)

    def test_last_line_of_crashing_rank_reaches_console(self):
        # A rank that dies right after printing (SIGKILL, SIGSEGV after an
        # unterminated line, os._exit), its console read 0.5 s late: the last
        # line is on the console every time.
        crashes = {
            "sigkill": "import os, signal, sys\nsys.stdout.write("
                       "'\\n'.join('l%d' % i for i in range(20000)) + '\\nLAST-LINE\\n')\n"
                       "sys.stdout.flush()\nos.kill(os.getpid(), signal.SIGKILL)\n",
            "sigsegv": "import ctypes, sys\nsys.stdout.write('\\n'.join('l%d' % i for i in "
                       "range(20000)) + '\\nLAST-LINE')\nsys.stdout.flush()\n"
                       "ctypes.string_at(0)\n",
            "os_exit": "import os, sys\nsys.stdout.write('\\n'.join('l%d' % i for i in "
                       "range(20000)) + '\\nLAST-LINE\\n')\nsys.stdout.flush()\nos._exit(3)\n",
        }
        lost = []
        for name, code in crashes.items():
            script = self.write_py("crash_%s.py" % name, code)
            for trial in range(4):
                rc, out, err = self.run_slow_console(["-t", "3", script], 0.5, chunk=4096)
                self.assertEqual(rc, 1, err)
                if not re.search(rb"^\[default0\]:LAST-LINE$", out, re.M):
                    lost.append((name, trial, out[-200:]))
        sys.stderr.write("crashing rank: last line lost in %d of 12 runs\n" % len(lost))
        self.assertEqual(lost, [])

    # -- layout --

    def test_attempt_layout(self):
        script = self.write_py("fail_once.py", r"""
import os, sys, time
print('attempt', os.environ['TORCHELASTIC_RESTART_COUNT'], 'rank', os.environ['LOCAL_RANK'])
print('ef', os.environ['TORCHELASTIC_ERROR_FILE'], file=sys.stderr)
sys.stdout.flush()
sys.stderr.flush()
open(os.path.join(sys.argv[1], 'done_%s_%s' % (os.environ['TORCHELASTIC_RESTART_COUNT'],
                                             os.environ['LOCAL_RANK'])), 'w').close()
if os.environ['TORCHELASTIC_RESTART_COUNT'] == '0' and os.environ['LOCAL_RANK'] == '0':
    # Fail only once rank 1 has written its logs.
    while not os.path.exists(os.path.join(sys.argv[1], 'done_0_1')):
        time.sleep(0.02)
    sys.exit(1)
""")
        log_dir = self.path("logs")
        res = self.run_elasticd("--standalone", "--nproc-per-node", "2", "--rdzv-id", "job7",
                                "--max-restarts", "1", "--log-dir", log_dir, "-r", "3", script,
                                self.tmp)
        self.assertRc(res, 0)
        run = self.only_run_dir(log_dir, "job7")
        self.assertEqual(os.stat(run).st_mode & 0o777, 0o700)
        self.assertEqual(self.attempts(run), ["attempt_0", "attempt_1"])
        for attempt in range(2):
            adir = os.path.join(run, "attempt_%d" % attempt)
            self.assertEqual(sorted(os.listdir(adir)), ["0", "1"])
            for lr in range(2):
                self.assertEqual(sorted(os.listdir(os.path.join(adir, str(lr)))),
                                 ["stderr.log", "stdout.log"])
                self.assertEqual(lib.read_text(self.rank_file(run, lr, "stdout.log", attempt)),
                                 "attempt %d rank %d\n" % (attempt, lr))
                self.assertEqual(lib.read_text(self.rank_file(run, lr, "stderr.log", attempt)),
                                 "ef %s\n" % self.rank_file(run, lr, "error.json", attempt))

    def test_log_dir_relative(self):
        script = self.write_py("ef.py", r"""
import os
print(os.environ['TORCHELASTIC_ERROR_FILE'])
""")
        res = self.run_elasticd("--standalone", "--rdzv-id", "rel", "--log-dir", "rel/logs",
                                "-r", "3", script)
        self.assertRc(res, 0)
        run = self.only_run_dir(self.path("rel", "logs"), "rel")
        out = lib.read_text(self.rank_file(run, 0, "stdout.log")).strip()
        # Relative, like torchrun, and valid from the worker's (= elasticd's) cwd.
        self.assertFalse(os.path.isabs(out), out)
        self.assertRegex(out, r"^rel/logs/rel_[a-z0-9_]{8}/attempt_0/0/error\.json$")
        self.assertEqual(os.path.join(self.tmp, out), self.rank_file(run, 0, "error.json"))

    def test_log_dir_created_and_reused(self):
        log_dir = self.path("a", "b", "c")
        script = self.write_py("speaker.py", SPEAKER)
        for _ in range(2):
            res = self.run_elasticd("--standalone", "--rdzv-id", "same", "--log-dir", log_dir,
                                    "-r", "3", script)
            self.assertRc(res, 0)
        dirs = self.run_dirs(log_dir)
        self.assertEqual(len(dirs), 2)
        for d in dirs:
            self.assertRegex(os.path.basename(d), r"^same_[a-z0-9_]{8}$")

    def test_log_dir_is_a_file(self):
        f = self.write_script("afile", "x")
        res = self.run_elasticd("--standalone", "--log-dir", f, "--no-python", "/bin/true")
        self.assertNotEqual(res.rc, 0)
        self.assertIn(f, res.err)

    def test_default_log_dir_under_tmpdir(self):
        tmpdir = self.path("tmpdir")
        os.makedirs(tmpdir)
        script = self.write_py("speaker.py", SPEAKER)
        res = self.run_elasticd("--standalone", "--rdzv-id", "deflt", "-r", "3", script,
                                env=self.env(TMPDIR=tmpdir))
        self.assertRc(res, 0)
        bases = os.listdir(tmpdir)
        self.assertEqual(len(bases), 1)
        self.assertRegex(bases[0], r"^torchelastic_[a-z0-9_]{8}$")
        run = self.only_run_dir(os.path.join(tmpdir, bases[0]), "deflt")
        self.assertEqual(lib.read_text(self.rank_file(run, 0, "stdout.log")),
                         expected_lines("out", 0))

    def test_log_dir_dev_null(self):
        script = self.write_py("ef.py", r"""
import os
print('EF=[%s]' % os.environ['TORCHELASTIC_ERROR_FILE'])
""")
        res = self.run_elasticd("--standalone", "--log-dir", "/dev/null", "-t", "3", script)
        self.assertRc(res, 0)
        # No files, no echo (tee sources are /dev/null), error files disabled.
        self.assertNotIn("EF=", res.out)

    def test_untouched_output_inherited(self):
        res, run = self.speak()
        for lr in range(2):
            self.assertRawLines(res.out, "out", lr)
            self.assertRawLines(res.err, "err", lr)
            self.assertEqual(os.listdir(os.path.join(run, "attempt_0", str(lr))), [])


if __name__ == "__main__":
    lib.main()
