#!/usr/bin/python3
"""No orphaned processes: workers' background children die with their group,
a SIGKILLed agent takes its workers and their children with it (PDEATHSIG and
the sentinel), and workers start with a clean process shape (own session,
fds > 2 closed)."""

import concurrent.futures
import json
import os
import signal
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import lib  # noqa: E402
import orphan_trials  # noqa: E402
from test_ctl import curl  # noqa: E402

# A worker that starts a background grandchild, records both pids, and waits.
WITH_GRANDCHILD = ('sleep 1000 & echo $! > "$0/g_$LOCAL_RANK";'
                   ' echo $$$$ > "$0/w_$LOCAL_RANK"; wait')


class OrphansTest(lib.ElasticdTestCase):

    def out_dir(self):
        d = self.path("out")
        os.makedirs(d, exist_ok=True)
        return d

    def pids(self, out, prefix, n):
        pids = [lib.read_pid_file(os.path.join(out, "%s_%d" % (prefix, lr))) for lr in range(n)]
        self.assertTrue(all(pids), "pid files %s_* missing" % prefix)
        return pids

    def test_background_child_of_successful_worker(self):
        for extra in ((), ("-t", "3"), ("-r", "3")):
            with self.subTest(extra=extra):
                out = self.path("out" + "".join(extra))
                os.makedirs(out)
                res = self.run_elasticd("--standalone", "--log-dir", self.path("logs"), *extra,
                                        "--no-python", "/bin/sh", "-c",
                                        'sleep 1000 & echo $! > "$0/bg"; exit 0', out,
                                        timeout=30)
                self.assertRc(res, 0)
                bg = lib.read_pid_file(os.path.join(out, "bg"), timeout=1)
                self.assertTrue(bg)
                self.assertTrue(lib.wait_dead([bg], 5), "background sleep survived")
        self.assertNoLeftovers()

    def test_background_child_killed_when_peer_fails(self):
        out = self.out_dir()
        res = self.run_elasticd("--standalone", "--nproc-per-node", "2", "--no-python",
                                "/bin/sh", "-c",
                                'if [ "$LOCAL_RANK" = 0 ]; then sleep 1000 & echo $! > "$0/bg";'
                                ' wait; fi; while [ ! -s "$0/bg" ]; do sleep 0.05; done; exit 1',
                                out, timeout=30)
        self.assertRc(res, 1)
        bg = lib.read_pid_file(os.path.join(out, "bg"), timeout=1)
        self.assertTrue(lib.wait_dead([bg], 5), "rank 0's background child survived")
        self.assertNoLeftovers()

    def test_background_child_of_early_exited_rank_when_peer_fails(self):
        # Rank 0 exits 0 leaving a child in its process group; rank 1 then fails:
        # the group of rank 0 (leader gone) is still stopped.
        out = self.out_dir()
        res = self.run_elasticd("--standalone", "--nproc-per-node", "2", "--no-python",
                                "/bin/sh", "-c",
                                'if [ "$LOCAL_RANK" = 0 ]; then sleep 1000 & echo $! > "$0/bg";'
                                ' exit 0; fi; while [ ! -s "$0/bg" ]; do sleep 0.05; done;'
                                ' sleep 0.3; exit 1', out, timeout=30)
        self.assertRc(res, 1)
        bg = lib.read_pid_file(os.path.join(out, "bg"), timeout=1)
        self.assertTrue(lib.wait_dead([bg], 5))
        self.assertNoLeftovers()

    def test_escaped_descendant_does_not_outlive_the_agent(self):
        # A descendant that left the worker's process group (setsid) is
        # re-parented to elasticd (child subreaper) when the worker exits;
        # DESIGN.md promises "no orphaned processes ever", so it must not
        # survive the job. (torchrun 2.x misses these too.)
        out = self.out_dir()
        res = self.run_elasticd("--standalone", "--shutdown-timeout", "2", "--no-python",
                                "/bin/sh", "-c",
                                'setsid sleep 1000 & echo $! > "$0/esc"; sleep 0.3; exit 0', out,
                                timeout=60)
        self.assertRc(res, 0)
        esc = lib.read_pid_file(os.path.join(out, "esc"), timeout=1)
        self.assertTrue(esc)
        self.assertTrue(lib.wait_dead([esc], 5), "setsid'd descendant survived elasticd")

    def test_escaped_descendant_holding_tee_pipe(self):
        # Same, with the escaped process holding the worker's tee pipe: the job
        # succeeded, so elasticd should finish promptly (not after
        # --shutdown-timeout plus a drain grace) and leave nothing behind.
        out = self.out_dir()
        res = self.run_elasticd("--standalone", "-t", "3", "--log-dir", self.path("logs"),
                                "--shutdown-timeout", "6", "--no-python", "/bin/sh", "-c",
                                'setsid sleep 1000 & echo $! > "$0/esc"; sleep 0.3;'
                                ' echo bye; exit 0', out, timeout=60)
        self.assertRc(res, 0)
        self.assertIn("[default0]:bye\n", res.out)
        esc = lib.read_pid_file(os.path.join(out, "esc"), timeout=1)
        self.assertLess(res.elapsed, 5, "a successful job waited for --shutdown-timeout")
        self.assertTrue(lib.wait_dead([esc], 5), "setsid'd descendant survived elasticd")

    def test_agent_sigkill_takes_everything_down(self):
        out = self.out_dir()
        a = self.start("--standalone", "--nproc-per-node", "2", "-t", "3", "--log-dir",
                       self.path("logs"), "--no-python", "/bin/sh", "-c", WITH_GRANDCHILD, out)
        workers = self.pids(out, "w", 2)
        grandchildren = self.pids(out, "g", 2)
        sentinel = lib.wait_until(a.sentinel_pid, 5)
        self.assertTrue(sentinel, "no elasticd-sentin child of the agent")
        for p in workers:
            self.assertEqual(lib.proc_stat(p)[1], a.pid)
        self.assertTrue(all(lib.pid_alive(p) for p in workers + grandchildren + [sentinel]))
        a.signal(signal.SIGKILL)
        res = a.wait(timeout=10)
        self.assertEqual(res.rc, -signal.SIGKILL)
        self.assertTrue(lib.wait_dead(workers, 10), "workers survived the agent")
        self.assertTrue(lib.wait_dead(grandchildren, 10), "grandchildren survived the agent")
        self.assertTrue(lib.wait_dead([sentinel], 10), "the sentinel survived the agent")
        self.assertNoLeftovers()

    def test_agent_sigkill_takes_escaped_descendants(self):
        # setsid(1) forks: its child, in a session of its own, is re-parented
        # to the agent at once. The agent tells the sentinel its process
        # group within a second, so a SIGKILLed agent takes it down too.
        out = self.out_dir()
        a = self.start("--standalone", "--nproc-per-node", "2", "--no-python", "/bin/sh", "-c",
                       'setsid -f sh -c \'echo $$$$ > "$0/e_$1"; exec sleep 1000\' "$0" "$LOCAL_RANK";'
                       ' exec sleep 1000', out)
        escaped = self.pids(out, "e", 2)
        for p in escaped:
            self.assertTrue(lib.wait_until(lambda: lib.proc_stat(p)[1] == a.pid, 5))
        time.sleep(4)  # several scans, even on a loaded machine
        a.signal(signal.SIGKILL)
        a.wait(timeout=10)
        self.assertTrue(lib.wait_dead(escaped, 10), "setsid'd descendants survived the agent")
        self.assertNoLeftovers()

    def test_agent_sigkill_after_leader_exited(self):
        # Rank 0's leader is gone but its background child lives on in its group.
        out = self.out_dir()
        a = self.start("--standalone", "--nproc-per-node", "2", "--no-python", "/bin/sh", "-c",
                       'sleep 1000 & echo $! > "$0/g_$LOCAL_RANK";'
                       ' [ "$LOCAL_RANK" = 0 ] && exit 0; echo $$$$ > "$0/w_$LOCAL_RANK"; wait',
                       out)
        gs = self.pids(out, "g", 2)
        w1 = lib.read_pid_file(os.path.join(out, "w_1"))
        self.assertTrue(w1)
        time.sleep(0.3)
        self.assertTrue(lib.pid_alive(gs[0]))
        a.signal(signal.SIGKILL)
        a.wait(timeout=10)
        self.assertTrue(lib.wait_dead(gs + [w1], 10))
        self.assertNoLeftovers()

    def test_agent_sigkill_with_python_workers(self):
        out = self.out_dir()
        script = self.write_py("w.py", r"""
import os, subprocess, sys, time
out = sys.argv[1]
lr = os.environ['LOCAL_RANK']
child = subprocess.Popen(['sleep', '1000'])
for name, pid in (('g', child.pid), ('w', os.getpid())):
    with open(os.path.join(out, '%s_%s.tmp' % (name, lr)), 'w') as f:
        f.write('%d\n' % pid)
    os.rename(os.path.join(out, '%s_%s.tmp' % (name, lr)), os.path.join(out, '%s_%s' % (name, lr)))
time.sleep(1000)
""")
        a = self.start("--standalone", "--nproc-per-node", "2", script, out)
        pids = self.pids(out, "w", 2) + self.pids(out, "g", 2)
        a.signal(signal.SIGKILL)
        a.wait(timeout=10)
        self.assertTrue(lib.wait_dead(pids, 10))
        self.assertNoLeftovers()

    def test_sentinel_exits_with_agent(self):
        a = self.start("--standalone", "--no-python", "/bin/sh", "-c", "sleep 1")
        sentinel = lib.wait_until(a.sentinel_pid, 5)
        self.assertTrue(sentinel)
        self.assertRc(a.wait(30), 0)
        self.assertTrue(lib.wait_dead([sentinel], 10))
        self.assertNoLeftovers()

    def test_killed_sentinel_is_respawned(self):
        # Someone kills the sentinel while workers run: the agent starts a new
        # one holding what the old one held, so a SIGKILLed agent still takes
        # the escaped (setsid'd) descendants down, which only the sentinel can.
        for guard in ("sentinel", "auto"):
            with self.subTest(guard=guard):
                out = self.path("out-" + guard)
                os.makedirs(out)
                sock, ev = self.path("ctl-%s.sock" % guard), self.path("ev-%s.jsonl" % guard)
                a = self.start("--standalone", "--nproc-per-node", "2", "--orphan-guard", guard,
                               "--control-socket", sock, "--event-log-file", ev,
                               "--no-python", "/bin/sh", "-c",
                               'setsid -f sh -c \'echo $$$$ > "$0/e_$1"; exec sleep 1000\''
                               ' "$0" "$LOCAL_RANK"; exec sleep 1000', out)
                escaped = self.pids(out, "e", 2)
                for p in escaped:
                    self.assertTrue(lib.wait_until(lambda: lib.proc_stat(p)[1] == a.pid, 5))
                time.sleep(2)  # handed to the sentinel (ancestry mode scans)
                old = lib.wait_until(a.sentinel_pid, 5)
                self.assertTrue(old)
                os.kill(old, signal.SIGKILL)
                new = lib.wait_until(lambda: (a.sentinel_pid() or old) != old and a.sentinel_pid(),
                                     10)
                self.assertTrue(new, "no new sentinel: %s" % a.stderr_text())
                self.assertTrue(a.wait_stderr("the sentinel process %d exited (killed by SIGKILL);"
                                              " started a new one (pid %d)" % (old, new), 5),
                                a.stderr_text())
                st = curl(sock, "/handler/status").json()
                self.assertEqual((st["sentinel_pid"], st["sentinel_respawns"]), (new, 1), st)
                self.assertIn("elasticd_sentinel_respawns_total 1\n",
                              curl(sock, "/handler/metrics").body)
                evs = [json.loads(x) for x in lib.read_text(ev).splitlines()]
                got = [e["metadata"] for e in evs if e["name"] == "elasticd.sentinel.exited"]
                self.assertEqual(len(got), 1, evs)
                self.assertEqual((got[0]["pid"], got[0]["new_pid"], got[0]["status"]),
                                 (old, new, "killed by SIGKILL"))
                a.signal(signal.SIGKILL)
                a.wait(timeout=10)
                self.assertTrue(lib.wait_dead(escaped, 10),
                                "setsid'd descendants survived the agent and a respawned sentinel")
                self.assertTrue(lib.wait_dead([new], 10), "the new sentinel survived the agent")
                self.assertNoLeftovers()

    def test_sentinel_killed_too_often_is_not_replaced(self):
        # Three respawns within a minute; the fourth death is final.
        sock = self.path("ctl.sock")
        a = self.start("--standalone", "--orphan-guard", "sentinel", "--control-socket", sock,
                       "--no-python", "/bin/sh", "-c", "exec sleep 1000")
        for n in range(4):
            pid = lib.wait_until(a.sentinel_pid, 10)
            self.assertTrue(pid, "no sentinel before death %d: %s" % (n + 1, a.stderr_text()))
            os.kill(pid, signal.SIGKILL)
            self.assertTrue(lib.wait_until(lambda: a.sentinel_pid() != pid, 10))
        self.assertTrue(a.wait_stderr("and no new one runs (it died too often)", 10),
                        a.stderr_text())
        st = curl(sock, "/handler/status").json()
        self.assertEqual((st["sentinel_pid"], st["sentinel_respawns"], st["orphan_guard"]),
                         (0, 3, "none"), st)
        a.signal(signal.SIGTERM)
        self.assertRc(a.wait(30), 128 + signal.SIGTERM)

    def test_orphaned_grandchild_is_reaped(self):
        # A worker's child that outlives its parent (double fork) is re-parented
        # to elasticd (child subreaper), which reaps it: no zombie stays behind
        # while the job is still running.
        out = self.out_dir()
        a = self.start("--standalone", "--no-python", "/bin/sh", "-c",
                       '(sleep 0.3 & echo $! > "$0/orphan"); sleep 3', out)
        orphan = lib.read_pid_file(os.path.join(out, "orphan"))
        self.assertTrue(orphan)
        # Re-parented to the agent once its parent subshell exits ...
        self.assertTrue(lib.wait_until(
            lambda: (lib.proc_stat(orphan) or (None, None))[1] in (a.pid, None), 5))
        # ... and reaped by it once it exits (no zombie).
        self.assertTrue(lib.wait_until(lambda: lib.proc_stat(orphan) is None, 5),
                        "orphan left as a zombie: %r" % (lib.proc_stat(orphan),))
        self.assertRc(a.wait(30), 0)

    def test_process_shape(self):
        out = self.out_dir()
        script = self.write_py("shape.py", r"""
import ctypes, json, os, sys
libc = ctypes.CDLL(None, use_errno=True)
sig = ctypes.c_int(-1)
libc.prctl(2, ctypes.byref(sig), 0, 0, 0)  # PR_GET_PDEATHSIG
info = {'pid': os.getpid(), 'ppid': os.getppid(), 'pgid': os.getpgid(0), 'sid': os.getsid(0),
        'pdeathsig': sig.value}
with open(os.path.join(sys.argv[1], 'shape_%s' % os.environ['LOCAL_RANK']), 'w') as f:
    json.dump(info, f)
""")
        a = self.start("--standalone", "--nproc-per-node", "2", script, out)
        res = a.wait(30)
        self.assertRc(res, 0)
        for lr in range(2):
            info = lib.read_json(os.path.join(out, "shape_%d" % lr))
            self.assertEqual(info["ppid"], a.pid)
            self.assertEqual(info["pgid"], info["pid"])
            self.assertEqual(info["sid"], info["pid"])
            self.assertEqual(info["pdeathsig"], signal.SIGKILL)

    FD_LISTER = r"""
import os, sys
fds = sorted(int(x) for x in os.listdir('/proc/self/fd'))
# The directory fd used for the listing is closed again by now.
extra = []
for fd in fds:
    if fd > 2:
        try:
            os.fstat(fd)
            extra.append((fd, os.readlink('/proc/self/fd/%d' % fd)))
        except OSError:
            pass
with open(sys.argv[1], 'w') as f:
    f.write(repr((fds[:3], extra)))
"""

    def test_fds_closed_in_workers(self):
        script = self.write_py("fds.py", self.FD_LISTER)
        # Hand elasticd an inheritable fd (as a careless parent would).
        r, w = os.pipe()
        leak = os.open(self.path("leak"), os.O_CREAT | os.O_WRONLY, 0o644)
        try:
            os.set_inheritable(leak, True)
            for extra in ((), ("-t", "3"), ("-r", "1", "-t", "2")):
                with self.subTest(extra=extra):
                    res_file = self.path("fds%d" % len(extra))
                    res = self.run_elasticd("--standalone", "--log-dir", self.path("logs"),
                                            *extra, script, res_file, pass_fds=(leak, w))
                    self.assertRc(res, 0)
                    self.assertEqual(lib.read_text(res_file), repr(([0, 1, 2], [])))
        finally:
            os.close(leak)
            os.close(r)
            os.close(w)

    def test_fds_closed_in_no_python_worker(self):
        res_file = self.path("fds")
        leak = os.open(self.path("leak"), os.O_CREAT | os.O_WRONLY, 0o644)
        try:
            os.set_inheritable(leak, True)
            # exec'd ls lists its own fds: what it inherited plus the directory it opened.
            res = self.run_elasticd("--standalone", "-t", "3", "--log-dir", self.path("logs"),
                                    "--no-python", "/bin/sh", "-c",
                                    'exec 1> "$0"; exec ls -l /proc/self/fd', res_file,
                                    pass_fds=(leak,))
            self.assertRc(res, 0)
            fds = {}
            for line in lib.read_text(res_file).splitlines():
                if " -> " in line:
                    name, target = line.split(" -> ", 1)
                    fds[int(name.split()[-1])] = target
            self.assertEqual(sorted(fds)[:3], [0, 1, 2], fds)
            self.assertEqual(fds[1], res_file)
            for fd, target in fds.items():
                if fd > 2:
                    self.assertRegex(target, r"^/proc/\d+/fd$", "fd %d leaked: %r" % (fd, fds))
        finally:
            os.close(leak)

    # -- issue 19: no orphans after an agent SIGKILL, every kind, many trials --

    def orphan_trials(self, guard_args, n, immediate_every=2, parallel=4):
        """n trials (every immediate_every-th one immediate, the rest settled),
        parallel at a time. Returns [(settled, survivors, n_descendants)] and
        the guard line of the first agent's log."""
        worker = orphan_trials.write_worker(self.path("trial_worker.py"))
        agents = []

        def start(*args):
            a = self.start(*guard_args, *args)
            agents.append(a)
            return a

        def one(i):
            settled = i % immediate_every != 0
            tag = "%d%03d" % (os.getpid() % 1000, i)
            s, total = orphan_trials.run_trial(start, self.path("trial_%d" % i), worker, tag,
                                               settled)
            return settled, s, total

        with concurrent.futures.ThreadPoolExecutor(parallel) as ex:
            results = list(ex.map(one, range(n)))
        guard = [ln for ln in agents[0].stderr_text().splitlines() if "orphan guard:" in ln]
        return results, guard[0] if guard else ""

    def report_trials(self, label, results):
        for settled in (False, True):
            rs = [r for r in results if r[0] == settled]
            survivors = sum(sum(s.values()) for _, s, _ in rs)
            kinds = {}
            for _, s, _ in rs:
                for k, v in s.items():
                    kinds[k] = kinds.get(k, 0) + v
            sys.stderr.write("%s %s: %d trials, %d descendants, %d survivors %r, "
                             "%d trials with survivors\n"
                             % (label, "settled" if settled else "immediate", len(rs),
                                sum(t for _, _, t in rs), survivors, kinds,
                                sum(1 for _, s, _ in rs if s)))

    def test_agent_sigkill_trials_leave_no_orphan(self):
        # 50 trials, the default guard (cgroup where elasticd may create one):
        # each of 2 workers starts a plain child, a setsid'd Python
        # grandchild, a `setsid -f` child and a double-forked daemon; the agent
        # is SIGKILLed once all are up (at once, or 1.5 s later).
        results, guard = self.orphan_trials((), 50)
        self.report_trials("default guard", results)
        self.assertTrue(all(total == 8 for _, _, total in results), results)
        if "cgroup" not in guard:
            sys.stderr.write("immediate trials not asserted: the agent runs the ancestry "
                             "guard here (%s)\n" % guard)
            results = [r for r in results if r[0]]
        self.assertEqual([s for _, s, _ in results if s], [])
        self.assertNoLeftovers()

    def test_agent_sigkill_trials_ancestry_guard(self):
        # Where no cgroup may be made: the sentinel tracks descendants by
        # ancestry. Settled trials leave nothing; immediate ones are only
        # reported (a process created and re-parented within the last scan
        # may escape: the documented limit of this mode).
        results, guard = self.orphan_trials(("--orphan-guard", "sentinel"), 16)
        self.assertIn("orphan guard: the sentinel, by ancestry", guard)
        self.report_trials("ancestry guard", results)
        self.assertEqual([s for settled, s, _ in results if settled and s], [])
        self.assertNoLeftovers()

    def test_cgroup_guard_runs_workers_in_a_cgroup(self):
        # --orphan-guard cgroup where it is possible runs in a cgroup of its
        # own, removed once the agent is gone.
        out = self.out_dir()
        a = self.start("--standalone", "--orphan-guard", "cgroup", "--no-python", "/bin/sh",
                       "-c", 'cat /proc/self/cgroup > "$0/cg"; exec sleep 1000', out)
        if not lib.wait_until(lambda: os.path.exists(os.path.join(out, "cg")) or
                              a.proc.poll() is not None, 20):
            self.fail("worker never started")
        if a.proc.poll() is not None:
            err = a.stderr_text()
            self.assertIn("--orphan-guard cgroup:", err)
            self.skipTest("no writable cgroup v2 here: " + err.strip().splitlines()[-1])
        path = lib.wait_until(lambda: lib.read_text(os.path.join(out, "cg")).strip(), 5)
        self.assertRegex(path, r"0::/.*elasticd\.%d/group0$" % a.pid)
        guard = [ln for ln in a.stderr_text().splitlines() if "orphan guard:" in ln]
        self.assertIn("cgroup v2 subtree", guard[0])
        subtree = guard[0].split("subtree ")[1].split(";")[0]
        self.assertTrue(os.path.isdir(subtree))
        a.signal(signal.SIGKILL)
        a.wait(10)
        self.assertTrue(lib.wait_until(lambda: not os.path.exists(subtree), 10),
                        "the sentinel did not remove " + subtree)
        self.assertNoLeftovers()

    def test_guard_without_writable_cgroup(self):
        # cgroup2 read-only (a private mount namespace, as in many
        # containers): auto falls back to the sentinel and says why; asking
        # for cgroup is a clear error at start.
        ro = ('mount --bind /sys/fs/cgroup/unified /sys/fs/cgroup/unified 2>/dev/null ||'
              ' mount --bind /sys/fs/cgroup /sys/fs/cgroup || exit 99;'
              ' for m in /sys/fs/cgroup/unified /sys/fs/cgroup; do'
              ' mount -o remount,bind,ro $m 2>/dev/null && break; done; exec "$@"')
        probe = subprocess.run(["unshare", "-m", "sh", "-c", ro, "sh", "true"],
                               capture_output=True)
        if probe.returncode != 0:
            self.skipTest("cannot make cgroup2 read-only here (needs root and unshare -m): %r"
                          % probe.stderr)
        for guard, rc, text in ((("--orphan-guard", "auto"), 0,
                                 "orphan guard: the sentinel, by ancestry (cannot create "),
                                (("--orphan-guard", "cgroup"), 1,
                                 "elasticd: error: --orphan-guard cgroup: cannot create ")):
            p = subprocess.run(["unshare", "-m", "sh", "-c", ro, "sh", lib.ELASTICD,
                                "--standalone", *guard, "--no-python", "/bin/true"],
                               capture_output=True, env=self.env(), cwd=self.tmp, timeout=60)
            self.assertEqual(p.returncode, rc, p.stderr)
            self.assertIn(text, p.stderr.decode())
        self.assertNoLeftovers()


if __name__ == "__main__":
    lib.main()
