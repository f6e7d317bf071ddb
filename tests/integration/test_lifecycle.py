#!/usr/bin/python3
"""What a worker receives (argv, env, ranks) and how the group ends: success,
failure table, restarts, early exits, signal deaths, exec failures, error files."""

import os
import re
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import lib  # noqa: E402

# Dumps exactly what execve gave it (not os.environ, which Python may touch).
DUMP_PY = r"""
import json, os, sys
with open('/proc/self/environ', 'rb') as f:
    raw = f.read()
env = dict(e.decode().split('=', 1) for e in raw.split(b'\0') if e)
out = sys.argv[1]
import socket
try:
    socket.create_connection((env['MASTER_ADDR'], int(env['MASTER_PORT'])), timeout=5).close()
    reachable = True
except (OSError, ValueError, KeyError):
    reachable = False
info = {'env': env, 'orig_argv': sys.orig_argv, 'argv': sys.argv, 'cwd': os.getcwd(),
        'pid': os.getpid(), 'ppid': os.getppid(), 'master_reachable': reachable}
tmp = os.path.join(out, 'dump_%s.json.tmp' % env['LOCAL_RANK'])
with open(tmp, 'w') as f:
    json.dump(info, f)
os.rename(tmp, os.path.join(out, 'dump_%s.json' % env['LOCAL_RANK']))
"""

TABLE_HEAD = "torch.distributed.elastic.multiprocessing.errors.ChildFailedError:"

# Variables elasticd sets in every worker (reference §2.2/§2.3).
CONTRACT = ["LOCAL_RANK", "RANK", "GROUP_RANK", "ROLE_RANK", "ROLE_NAME", "LOCAL_WORLD_SIZE",
            "WORLD_SIZE", "GROUP_WORLD_SIZE", "ROLE_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT",
            "TORCHELASTIC_RESTART_COUNT", "TORCHELASTIC_MAX_RESTARTS", "TORCHELASTIC_RUN_ID",
            "TORCHELASTIC_USE_AGENT_STORE", "TORCHELASTIC_ERROR_FILE",
            "TORCH_NCCL_ASYNC_ERROR_HANDLING", "NCCL_ASYNC_ERROR_HANDLING"]


class LifecycleTest(lib.ElasticdTestCase):

    def dump_run(self, nproc, *extra, env=None, script_args=(), expect_rc=0):
        out = self.path("dumps")
        os.makedirs(out, exist_ok=True)
        script = self.write_py("dump.py", DUMP_PY)
        res = self.run_elasticd("--nproc-per-node", str(nproc), *extra, script, out,
                                *script_args, env=env)
        self.assertRc(res, expect_rc)
        dumps = []
        for lr in range(nproc):
            dumps.append(lib.read_json(os.path.join(out, "dump_%d.json" % lr)))
        return res, script, dumps

    # -- success --

    def test_true_workers_succeed(self):
        res = self.run_elasticd("--standalone", "--nproc-per-node", "2", "--no-python",
                                "/bin/true")
        self.assertRc(res, 0)
        self.assertNotIn(TABLE_HEAD, res.err)
        self.assertNoLeftovers()

    def test_single_worker_default_settings(self):
        res = self.run_elasticd("--no-python", "true")
        self.assertRc(res, 0)

    # -- environment --

    def test_worker_env_contract(self):
        log_dir = self.path("logs")
        base = self.env(NOTIFY_SOCKET="/run/systemd/notify", WATCHDOG_USEC="1000000",
                        WATCHDOG_PID="1", LISTEN_FDS="2", LISTEN_PID="1",
                        LISTEN_FDNAMES="a:b", MY_INHERITED_VAR="kept value = 1",
                        PET_SOMETHING_UNRELATED="inherited")
        res, script, dumps = self.dump_run(2, "--standalone", "--rdzv-id", "myrun",
                                           "--max-restarts", "4", "--log-dir", log_dir,
                                           env=base)
        run_dir = self.only_run_dir(log_dir, "myrun")
        ports = set()
        for lr, d in enumerate(dumps):
            env = d["env"]
            expected = {k: v for k, v in base.items()
                        if k not in ("NOTIFY_SOCKET", "WATCHDOG_USEC", "WATCHDOG_PID",
                                     "LISTEN_FDS", "LISTEN_PID", "LISTEN_FDNAMES")}
            expected.update({
                "LOCAL_RANK": str(lr),
                "RANK": str(lr),
                "GROUP_RANK": "0",
                "ROLE_RANK": str(lr),
                "ROLE_NAME": "default",
                "LOCAL_WORLD_SIZE": "2",
                "WORLD_SIZE": "2",
                "GROUP_WORLD_SIZE": "1",
                "ROLE_WORLD_SIZE": "2",
                "TORCHELASTIC_RESTART_COUNT": "0",
                # The job-wide round: equal on every node of a round.
                "ELASTICD_ROUND": "0",
                "TORCHELASTIC_MAX_RESTARTS": "4",
                "TORCHELASTIC_RUN_ID": "myrun",
                # --standalone is c10d with the agent store (torch 2.x).
                "TORCHELASTIC_USE_AGENT_STORE": "True",
                "TORCHELASTIC_ERROR_FILE": os.path.join(run_dir, "attempt_0", str(lr),
                                                        "error.json"),
                "TORCH_NCCL_ASYNC_ERROR_HANDLING": "1",
                "NCCL_ASYNC_ERROR_HANDLING": "1",
                # NOTIFY_SOCKET makes it a service: SIGHUP re-opens the logs.
                "TORCHELASTIC_SIGNALS_TO_HANDLE": "SIGTERM,SIGINT,SIGQUIT",
                "OMP_NUM_THREADS": "1",
                "MASTER_ADDR": env.get("MASTER_ADDR", "<missing>"),
                "MASTER_PORT": env.get("MASTER_PORT", "<missing>"),
                # The worker's own control socket (elasticd-ctl(7)), next to
                # the agent's default one (/run/elasticd/<run_id>.sock as root).
                "TORCH_WORKER_SERVER_SOCKET":
                    "/run/elasticd/myrun.workers/rank%d.sock" % lr if os.geteuid() == 0
                    else env.get("TORCH_WORKER_SERVER_SOCKET", "<missing>"),
                # The agent's own, so that a worker can ask for its node's
                # exclusion (elasticd-ctl(7), exclude).
                "ELASTICD_CONTROL_SOCKET":
                    "/run/elasticd/myrun.sock" if os.geteuid() == 0
                    else env.get("ELASTICD_CONTROL_SOCKET", "<missing>"),
            })
            self.assertEqual(env, expected)
            if env["TORCHELASTIC_USE_AGENT_STORE"] == "True":
                # The agent's store was listening there while the worker ran.
                self.assertTrue(d["master_reachable"], "USE_AGENT_STORE=True but nothing "
                                "listens on MASTER_ADDR:MASTER_PORT")
            self.assertTrue(env["MASTER_ADDR"])
            self.assertRegex(env["MASTER_PORT"], r"^[1-9][0-9]*$")
            self.assertLess(int(env["MASTER_PORT"]), 65536)
            ports.add((env["MASTER_ADDR"], env["MASTER_PORT"]))
            self.assertTrue(os.path.isdir(os.path.dirname(env["TORCHELASTIC_ERROR_FILE"])))
            # The worker is a direct child of elasticd and runs in elasticd's cwd.
            self.assertEqual(d["cwd"], self.tmp)
        self.assertEqual(len(ports), 1, "ranks disagree on the master: %r" % ports)

    def test_standalone_generates_uuid_run_id(self):
        res, script, dumps = self.dump_run(1, "--standalone")
        rid = dumps[0]["env"]["TORCHELASTIC_RUN_ID"]
        self.assertRegex(rid, r"^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-"
                              r"[0-9a-f]{12}$")

    def test_run_id_alias_and_default(self):
        res, script, dumps = self.dump_run(1, "--run-id", "aliased")
        self.assertEqual(dumps[0]["env"]["TORCHELASTIC_RUN_ID"], "aliased")
        # Default with a --master-port (static, no id): the literal "none".
        res, script, dumps = self.dump_run(1)
        env = dumps[0]["env"]
        self.assertEqual(env["TORCHELASTIC_RUN_ID"], "none")
        self.assertEqual((env["MASTER_ADDR"], env["MASTER_PORT"]), ("127.0.0.1", lib.MASTER_PORT))

    def test_one_node_without_master_port_is_local_c10d(self):
        # torch PR 175699: no --master-port on one node is c10d on
        # localhost:0 with a fresh run id, not 29500 for every such job.
        res, script, dumps = self.dump_run(1, env=self.env(PET_MASTER_PORT=None))
        env = dumps[0]["env"]
        self.assertRegex(env["TORCHELASTIC_RUN_ID"], r"^[0-9a-f]{8}-[0-9a-f]{4}-4")
        self.assertNotEqual(env["MASTER_PORT"], "29500")
        self.assertEqual(env["TORCHELASTIC_USE_AGENT_STORE"], "True")

    def test_two_one_node_jobs_at_once(self):
        # pytorch#126510: both used to bind 29500; the second one failed.
        env = self.env(PET_MASTER_PORT=None)
        jobs = [self.start("--nproc-per-node", "1", "--no-python", "/bin/sh", "-c",
                           "sleep 1.5", env=env) for _ in range(2)]
        for job in jobs:
            self.assertRc(job.wait(), 0)

    def test_omp_num_threads_rules(self):
        # One worker: not set.
        res, script, dumps = self.dump_run(1, "--standalone")
        self.assertNotIn("OMP_NUM_THREADS", dumps[0]["env"])
        self.assertNotIn("OMP_NUM_THREADS", res.err)
        # Several workers but the caller set it: kept as is.
        res, script, dumps = self.dump_run(2, "--standalone", env=self.env(OMP_NUM_THREADS="7"))
        for d in dumps:
            self.assertEqual(d["env"]["OMP_NUM_THREADS"], "7")
        # Several workers, unset: "1", with torchrun's banner.
        res, script, dumps = self.dump_run(3, "--standalone")
        for d in dumps:
            self.assertEqual(d["env"]["OMP_NUM_THREADS"], "1")
        self.assertIn("Setting OMP_NUM_THREADS environment variable for each process to be 1",
                      res.err)

    def test_nccl_values_inherited(self):
        res, script, dumps = self.dump_run(
            1, "--standalone",
            env=self.env(TORCH_NCCL_ASYNC_ERROR_HANDLING="3", NCCL_ASYNC_ERROR_HANDLING="0"))
        env = dumps[0]["env"]
        self.assertEqual(env["TORCH_NCCL_ASYNC_ERROR_HANDLING"], "3")
        self.assertEqual(env["NCCL_ASYNC_ERROR_HANDLING"], "0")

    def test_nccl_both_names_by_default(self):
        # torchrun 2.x sets TORCH_NCCL_ASYNC_ERROR_HANDLING, torchrun 1.13
        # NCCL_ASYNC_ERROR_HANDLING (the only one torch 1.13 reads): both.
        res, script, dumps = self.dump_run(1, "--standalone")
        env = dumps[0]["env"]
        self.assertEqual(env["TORCH_NCCL_ASYNC_ERROR_HANDLING"], "1")
        self.assertEqual(env["NCCL_ASYNC_ERROR_HANDLING"], "1")

    def test_signals_to_handle_in_worker_env(self):
        res, script, dumps = self.dump_run(1, "--standalone")
        self.assertEqual(dumps[0]["env"]["TORCHELASTIC_SIGNALS_TO_HANDLE"],
                         "SIGTERM,SIGINT,SIGHUP,SIGQUIT")
        # The agent's list, by name, replaces a caller's.
        res, script, dumps = self.dump_run(
            1, "--standalone", "--signals-to-handle", "TERM,SIGUSR1,2",
            env=self.env(TORCHELASTIC_SIGNALS_TO_HANDLE="SIGHUP"))
        self.assertEqual(dumps[0]["env"]["TORCHELASTIC_SIGNALS_TO_HANDLE"],
                         "SIGTERM,SIGUSR1,SIGINT")

    def test_agent_env_cannot_override_contract(self):
        # Stale values in the caller's environment are replaced per worker.
        res, script, dumps = self.dump_run(
            2, "--standalone", env=self.env(RANK="99", LOCAL_RANK="99", WORLD_SIZE="99",
                                            TORCHELASTIC_RESTART_COUNT="5",
                                            TORCHELASTIC_ERROR_FILE=self.path("agent.json")))
        for lr, d in enumerate(dumps):
            env = d["env"]
            self.assertEqual((env["RANK"], env["LOCAL_RANK"], env["WORLD_SIZE"]),
                             (str(lr), str(lr), "2"))
            self.assertEqual(env["TORCHELASTIC_RESTART_COUNT"], "0")
            self.assertNotEqual(env["TORCHELASTIC_ERROR_FILE"], self.path("agent.json"))

    def test_role(self):
        res, script, dumps = self.dump_run(2, "--standalone", "--role", "trainer")
        for d in dumps:
            self.assertEqual(d["env"]["ROLE_NAME"], "trainer")

    def test_static_two_nodes_node_rank_1(self):
        res, script, dumps = self.dump_run(2, "--nnodes", "2", "--node-rank", "1",
                                           "--master-addr", "10.11.12.13",
                                           "--master-port", "23456")
        for lr, d in enumerate(dumps):
            env = d["env"]
            got = {k: env[k] for k in ("LOCAL_RANK", "RANK", "GROUP_RANK", "ROLE_RANK",
                                       "LOCAL_WORLD_SIZE", "WORLD_SIZE", "GROUP_WORLD_SIZE",
                                       "ROLE_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT")}
            self.assertEqual(got, {
                "LOCAL_RANK": str(lr), "RANK": str(2 + lr), "GROUP_RANK": "1",
                "ROLE_RANK": str(2 + lr), "LOCAL_WORLD_SIZE": "2", "WORLD_SIZE": "4",
                "GROUP_WORLD_SIZE": "2", "ROLE_WORLD_SIZE": "4",
                "MASTER_ADDR": "10.11.12.13", "MASTER_PORT": "23456"})

    def test_static_rdzv_endpoint(self):
        res, script, dumps = self.dump_run(1, "--nnodes", "3", "--node-rank", "2",
                                           "--rdzv-backend", "static",
                                           "--rdzv-endpoint", "10.0.0.9:4321")
        env = dumps[0]["env"]
        self.assertEqual((env["MASTER_ADDR"], env["MASTER_PORT"], env["RANK"],
                          env["WORLD_SIZE"]), ("10.0.0.9", "4321", "2", "3"))

    def test_static_node_rank_out_of_range(self):
        res = self.run_elasticd("--nnodes", "2", "--node-rank", "2", "--no-python", "/bin/true")
        self.assertRc(res, 2)
        self.assertIn("--node-rank", res.err)

    # -- argv --

    def test_python_argv(self):
        res, script, dumps = self.dump_run(2, "--standalone",
                                           script_args=("--lr=${local_rank}", "x y",
                                                        "$HOME", "${other}", "$$"))
        for lr, d in enumerate(dumps):
            out = self.path("dumps")
            args = [out, "--lr=%d" % lr, "x y", "$HOME", "${other}", "$"]
            self.assertEqual(d["orig_argv"], [lib.PYTHON_EXEC, "-u", script] + args)
            self.assertEqual(d["argv"], [script] + args)

    def test_python_exec_from_env(self):
        # PYTHON_EXEC names the interpreter (looked up in the workers' PATH when bare).
        bindir = self.path("bin")
        os.makedirs(bindir)
        os.symlink(lib.PYTHON_EXEC, os.path.join(bindir, "py-it"))
        env = self.env(PYTHON_EXEC="py-it")
        env["PATH"] = bindir + ":" + env.get("PATH", "/usr/bin:/bin")
        res, script, dumps = self.dump_run(1, "--standalone", env=env)
        self.assertEqual(dumps[0]["orig_argv"][:3], ["py-it", "-u", script])
        env = self.env(PYTHON_EXEC=os.path.join(bindir, "py-it"))
        res, script, dumps = self.dump_run(1, "--standalone", env=env)
        self.assertEqual(dumps[0]["orig_argv"][:3], [os.path.join(bindir, "py-it"), "-u", script])

    def test_dollar_dollar_in_args_is_substituted(self):
        # torchrun runs every argument through Template.safe_substitute: "$$" -> "$".
        out = self.path("args.txt")
        res = self.run_elasticd("--no-python", "/bin/sh", "-c", 'printf "%s\\n" "$@" > "$0"', out,
                                "a$$b", "${local_rank}$local_rank", "$$$$", "${LOCAL_RANK}")
        self.assertRc(res, 0)
        self.assertEqual(lib.read_text(out).splitlines(), ["a$b", "00", "$$", "${LOCAL_RANK}"])

    def test_module_argv(self):
        pkg = self.path("mods")
        os.makedirs(pkg)
        with open(os.path.join(pkg, "dumpmod.py"), "w") as f:
            f.write(DUMP_PY)
        out = self.path("dumps")
        os.makedirs(out)
        res = self.run_elasticd("--standalone", "-m", "dumpmod", out, "a${local_rank}",
                                env=self.env(PYTHONPATH=pkg))
        self.assertRc(res, 0)
        d = lib.read_json(os.path.join(out, "dump_0.json"))
        self.assertEqual(d["orig_argv"], [lib.PYTHON_EXEC, "-u", "-m", "dumpmod", out, "a0"])

    def test_no_python_argv(self):
        bindir = self.path("bin")
        os.makedirs(bindir)
        prog = os.path.join(bindir, "dumpprog")
        with open(prog, "w") as f:
            f.write("#!" + lib.PYTHON_EXEC + "\n" + DUMP_PY)
        os.chmod(prog, 0o755)
        out = self.path("dumps")
        os.makedirs(out)
        env = self.env()
        env["PATH"] = bindir + ":" + env.get("PATH", "/usr/bin:/bin")
        # Bare name: found through the workers' PATH.
        res = self.run_elasticd("--standalone", "--nproc-per-node", "2", "--no-python",
                                "dumpprog", out, "r${local_rank}", "-u", env=env)
        self.assertRc(res, 0)
        for lr in range(2):
            d = lib.read_json(os.path.join(out, "dump_%d.json" % lr))
            # Shebang: the kernel runs python3 <path> <args>.
            self.assertEqual(d["argv"], [prog, out, "r%d" % lr, "-u"])
            self.assertEqual(d["orig_argv"][-4:], [prog, out, "r%d" % lr, "-u"])
            self.assertNotIn("-u", d["orig_argv"][:-1])

    # -- failures --

    def test_failure_without_restarts(self):
        pidf = self.path("rank0.pid")
        res_args = ["--standalone", "--nproc-per-node", "2", "--no-python", "/bin/sh", "-c",
                    'if [ "$LOCAL_RANK" = 0 ]; then echo $$$$ > "$0"; exec sleep 1000; fi;'
                    ' while [ ! -s "$0" ]; do sleep 0.05; done; echo $$$$ > "$0.r1"; exit 3', pidf]
        res = self.run_elasticd(*res_args)
        self.assertRc(res, 1)
        table = lib.failure_table(res.err)
        self.assertIsNotNone(table, res)
        r1 = int(lib.read_text(pidf + ".r1"))
        self.assertIn("/bin/sh FAILED", table)
        self.assertIn("Failures:", table)
        self.assertIn("  <NO_OTHER_FAILURES>", table)
        self.assertIn("Root Cause (first observed failure):", table)
        self.assertIn("  rank      : 1 (local_rank: 1)", table)
        self.assertIn("  exitcode  : 3 (pid: %d)" % r1, table)
        self.assertIn("  error_file: <N/A>", table)
        self.assertIn("  traceback : To enable traceback see: "
                      "https://pytorch.org/docs/stable/elastic/errors.html", table)
        self.assertRegex(table, r"  time      : \d{4}-\d\d-\d\d_\d\d:\d\d:\d\d")
        self.assertRegex(table, r"\n  host      : \S+")
        # Rank 0 (still running) was stopped, not reported.
        r0 = int(lib.read_text(pidf))
        self.assertFalse(lib.pid_alive(r0))
        self.assertNotIn("(pid: %d)" % r0, table)
        self.assertEqual(res.err.count(TABLE_HEAD), 1)
        self.assertNotIn("ChildFailedError", res.out)
        self.assertNoLeftovers()

    def test_table_title_is_script_name(self):
        script = self.write_py("boom.py", "import sys\nsys.exit(5)\n")
        res = self.run_elasticd("--standalone", script)
        self.assertRc(res, 1)
        table = lib.failure_table(res.err)
        self.assertIn("%s FAILED" % script, table)
        self.assertIn("exitcode  : 5", table)

    def test_restart_after_first_attempt_failure(self):
        log_dir = self.path("logs")
        rec = self.path("record")
        script = self.write_py("flaky.py", r"""
import os, sys
rc = os.environ['TORCHELASTIC_RESTART_COUNT']
with open(sys.argv[1], 'a') as f:
    f.write('%s %s %s\n' % (rc, os.environ['LOCAL_RANK'], os.environ['TORCHELASTIC_MAX_RESTARTS']))
if rc == '0' and os.environ['LOCAL_RANK'] == '1':
    sys.exit(1)
""")
        res = self.run_elasticd("--standalone", "--nproc-per-node", "2", "--max-restarts", "2",
                                "--log-dir", log_dir, "-r", "3", script, rec)
        self.assertRc(res, 0)
        self.assertNotIn(TABLE_HEAD, res.err)
        run_dir = self.only_run_dir(log_dir)
        self.assertEqual(self.attempts(run_dir), ["attempt_0", "attempt_1"])
        lines = lib.read_text(rec).split("\n")
        self.assertIn("1 0 2", lines)
        self.assertIn("1 1 2", lines)
        self.assertIn("0 1 2", lines)
        self.assertFalse(any(line.startswith("2 ") for line in lines))
        self.assertIn("Worker group FAILED. 2/2 attempts left", res.err)

    def test_always_failing_exhausts_restarts(self):
        log_dir = self.path("logs")
        rec = self.path("record")
        res = self.run_elasticd("--standalone", "--nproc-per-node", "2", "--max-restarts", "2",
                                "--log-dir", log_dir, "--no-python", "/bin/sh", "-c",
                                'echo "$TORCHELASTIC_RESTART_COUNT $LOCAL_RANK" >> "$0";'
                                ' up="$0.up$TORCHELASTIC_RESTART_COUNT";'
                                ' if [ "$LOCAL_RANK" = 1 ]; then'
                                '  while [ ! -e "$up" ]; do sleep 0.05; done; exit 2; fi;'
                                ' touch "$up"; exec sleep 1000', rec, timeout=30)
        self.assertRc(res, 1)
        run_dir = self.only_run_dir(log_dir)
        self.assertEqual(self.attempts(run_dir), ["attempt_0", "attempt_1", "attempt_2"])
        attempts = sorted(set(line.split()[0] for line in lib.read_text(rec).splitlines()
                              if line.endswith(" 1")))
        self.assertEqual(attempts, ["0", "1", "2"])
        self.assertEqual(res.err.count(TABLE_HEAD), 1)
        self.assertIn("exitcode  : 2", lib.failure_table(res.err))
        self.assertNoLeftovers()

    def test_start_failure_stops_workers_not_yet_in_their_session(self):
        # Worker k cannot be started (its log file hits RLIMIT_NOFILE) right
        # after workers 0..k-1 were forked. Those may not have reached setsid()
        # yet: their process group does not exist, but they do, and the agent
        # must still stop them (it once took ESRCH from kill(-pgid) as "group
        # empty" and waited for them forever). To make that window certain the
        # agent runs on one CPU as SCHED_FIFO with SCHED_OTHER children, so no
        # child runs before the agent blocks; without CAP_SYS_NICE it is a race.
        cpu = {min(os.sched_getaffinity(0))}
        log_dir = self.path("logs")
        for nofile in range(24, 200, 16):
            a = self.start("--standalone", "--nproc-per-node", "16", "-t", "3", "--log-dir",
                           log_dir, "--shutdown-timeout", "2", "--no-python", "/bin/sh", "-c",
                           "exec sleep 1000", cpus=cpu, rt=True, nofile=nofile)
            res = a.wait(timeout=30)
            self.assertRc(res, 1)
            m = re.search(r"cannot start local_rank (\d+)", res.err)
            self.assertIsNotNone(m, res)
            table = lib.failure_table(res.err)
            self.assertIsNotNone(table, res)
            self.assertIn("rank      : %s (local_rank: %s)" % (m.group(1), m.group(1)), table)
            self.assertNoLeftovers()
            if int(m.group(1)) >= 2:
                break
        else:
            self.fail("never got a worker started before the failing one")

    def test_restart_starts_clean(self):
        # A background child left by attempt 0 is gone before attempt 1 starts.
        rec = self.path("rec")
        os.makedirs(rec)
        res = self.run_elasticd(
            "--standalone", "--nproc-per-node", "2", "--max-restarts", "1", "--no-python",
            "/bin/sh", "-c",
            'a=$TORCHELASTIC_RESTART_COUNT;'
            ' if [ "$a" = 0 ]; then'
            '  if [ "$LOCAL_RANK" = 0 ]; then sleep 1000 & echo $! > "$0/bg"; wait; fi;'
            '  while [ ! -s "$0/bg" ]; do sleep 0.05; done; exit 1;'
            ' fi;'
            ' if kill -0 "$(cat "$0/bg")" 2>/dev/null; then echo alive; else echo gone; fi'
            ' > "$0/seen_$LOCAL_RANK"', rec, timeout=30)
        self.assertRc(res, 0)
        for lr in range(2):
            self.assertEqual(lib.read_text(os.path.join(rec, "seen_%d" % lr)), "gone\n")

    def test_early_success_does_not_stop_peers(self):
        done = self.path("rank1.done")
        res = self.run_elasticd("--standalone", "--nproc-per-node", "2", "--no-python",
                                "/bin/sh", "-c",
                                '[ "$LOCAL_RANK" = 0 ] && exit 0; sleep 2;'
                                ' trap "" TERM; echo finished > "$0"; exit 0', done)
        self.assertRc(res, 0)
        self.assertEqual(lib.read_text(done), "finished\n")
        self.assertGreater(res.elapsed, 1.5)

    def test_worker_killed_by_sigkill(self):
        pidf = self.path("victim.pid")
        res = self.run_elasticd("--standalone", "--nproc-per-node", "2", "--no-python",
                                "/bin/sh", "-c",
                                '[ "$LOCAL_RANK" = 1 ] && { touch "$0.up"; exec sleep 1000; };'
                                ' while [ ! -e "$0.up" ]; do sleep 0.05; done;'
                                ' echo $$$$ > "$0"; kill -9 $$$$', pidf)
        self.assertRc(res, 1)
        pid = int(lib.read_text(pidf))
        table = lib.failure_table(res.err)
        self.assertIsNotNone(table, res)
        self.assertIn("  exitcode  : -9 (pid: %d)" % pid, table)
        self.assertIn("  traceback : Signal 9 (SIGKILL) received by PID %d" % pid, table)
        self.assertIn("  rank      : 0 (local_rank: 0)", table)
        self.assertIn("  error_file: <N/A>", table)

    def test_worker_killed_by_sigsegv(self):
        res = self.run_elasticd("--standalone", "--no-python", "/bin/sh", "-c", "kill -SEGV $$$$")
        self.assertRc(res, 1)
        self.assertIn("Signal 11 (SIGSEGV) received by PID", lib.failure_table(res.err))

    def test_exec_failure_not_found(self):
        res = self.run_elasticd("--standalone", "--nproc-per-node", "2", "--no-python",
                                "/nonexistent/prog", "arg")
        self.assertRc(res, 1)
        self.assertIn("/nonexistent/prog", res.err)
        table = lib.failure_table(res.err)
        self.assertIsNotNone(table, res)
        self.assertIn("exitcode  : 127", table)
        self.assertNoLeftovers()

    def test_exec_failure_with_tee(self):
        log_dir = self.path("logs")
        res = self.run_elasticd("--standalone", "--nproc-per-node", "2", "-t", "3", "--log-dir",
                                log_dir, "--no-python", "/nonexistent/prog")
        self.assertRc(res, 1)
        self.assertIn("exitcode  : 127", lib.failure_table(res.err))
        self.assertNoLeftovers()

    def test_missing_python_exec(self):
        script = self.write_py("ok.py", "pass\n")
        res = self.run_elasticd("--standalone", script,
                                env=self.env(PYTHON_EXEC="/nonexistent/python9"))
        self.assertRc(res, 1)
        self.assertIn("/nonexistent/python9", res.err)
        self.assertIn("exitcode  : 127", lib.failure_table(res.err))

    def test_exec_failure_not_in_path(self):
        res = self.run_elasticd("--standalone", "--no-python", "no-such-program-elasticd-it")
        self.assertRc(res, 1)
        self.assertIn("no-such-program-elasticd-it", res.err)
        self.assertIn("exitcode  : 127", lib.failure_table(res.err))

    def test_exec_failure_not_executable(self):
        prog = self.write_script("notexec.sh", "#!/bin/sh\nexit 0\n", executable=False)
        res = self.run_elasticd("--standalone", "--no-python", prog)
        self.assertRc(res, 1)
        self.assertIn(prog, res.err)
        self.assertIn("exitcode  : 126", lib.failure_table(res.err))

    def test_exec_failure_then_restart(self):
        # An exec failure consumes a restart like any failure, and the next attempt runs.
        res = self.run_elasticd("--standalone", "--max-restarts", "1", "--no-python",
                                "/nonexistent/prog")
        self.assertRc(res, 1)
        self.assertIn("1/1 attempts left", res.err)

    # -- error files --

    ERR_WRITER = r"""
import json, os, sys, time
form = sys.argv[1]
path = os.environ['TORCHELASTIC_ERROR_FILE']
if os.environ['LOCAL_RANK'] != '0':
    time.sleep(1000)
if form == 'nested':
    data = {"message": {"message": "ValueError: boom-7f3a",
                        "extraInfo": {"py_callstack": "Traceback (most recent call last):\n  File \"w.py\", line 3, in <module>\n    main()\nValueError: boom-7f3a\n",
                                      "timestamp": "1700000000"}}}
    text = json.dumps(data)
elif form == 'flat':
    text = json.dumps({"message": "flat message 9c1d", "timestamp": 1700000001})
else:
    text = '{"message": {"message": "truncated'
with open(path, 'w') as f:
    f.write(text)
sys.exit(int(sys.argv[2]))
"""

    def test_error_file_nested(self):
        script = self.write_py("errw.py", self.ERR_WRITER)
        log_dir = self.path("logs")
        res = self.run_elasticd("--standalone", "--nproc-per-node", "2", "--log-dir", log_dir,
                                script, "nested", "1")
        self.assertRc(res, 1)
        table = lib.failure_table(res.err)
        self.assertIsNotNone(table, res)
        run_dir = self.only_run_dir(log_dir)
        ef = os.path.join(run_dir, "attempt_0", "0", "error.json")
        self.assertIn("  error_file: %s" % ef, table)
        self.assertIn("  traceback : Traceback (most recent call last):\n"
                      "    File \"w.py\", line 3, in <module>\n"
                      "      main()\n"
                      "  ValueError: boom-7f3a\n", table)
        self.assertIn("  exitcode  : 1 (pid:", table)

    def test_error_file_flat(self):
        script = self.write_py("errw.py", self.ERR_WRITER)
        res = self.run_elasticd("--standalone", script, "flat", "4")
        self.assertRc(res, 1)
        table = lib.failure_table(res.err)
        self.assertIn("  traceback : flat message 9c1d", table)
        self.assertIn("  exitcode  : 4 (pid:", table)

    def test_error_file_malformed(self):
        script = self.write_py("errw.py", self.ERR_WRITER)
        log_dir = self.path("logs")
        res = self.run_elasticd("--standalone", "--log-dir", log_dir, script, "bad", "6")
        self.assertRc(res, 1)
        ef = os.path.join(self.only_run_dir(log_dir), "attempt_0", "0", "error.json")
        # Reported (naming the file), not fatal: the table still comes out.
        before = res.err[:res.err.find(TABLE_HEAD)]
        self.assertIn(ef, before)
        table = lib.failure_table(res.err)
        self.assertIsNotNone(table, res)
        self.assertIn("  exitcode  : 6 (pid:", table)
        # The table names the file and says what is wrong with it.
        self.assertIn("  error_file: %s\n" % ef, table)
        self.assertIn("  traceback : error file %s is not valid JSON: " % ef, table)

    def test_error_file_huge(self):
        # An error file over elasticd's limit is reported, not read; the job
        # still ends with the table.
        script = self.write_py("huge.py", r"""
import os, sys
with open(os.environ['TORCHELASTIC_ERROR_FILE'], 'w') as f:
    f.write('{"message": "' + 'x' * (5 << 20) + '"}')
sys.exit(2)
""")
        res = self.run_elasticd("--standalone", script)
        self.assertRc(res, 1)
        table = lib.failure_table(res.err)
        self.assertIsNotNone(table, res)
        self.assertIn("exitcode  : 2", table)
        self.assertNotIn("x" * 1000, res.err)

    def test_agent_error_file_gets_root_cause(self):
        script = self.write_py("errw.py", self.ERR_WRITER)
        own = self.path("agent_error.json")
        with open(own, "w") as f:
            f.write("stale contents")
        res = self.run_elasticd("--standalone", "--nproc-per-node", "2", script, "nested", "3",
                                env=self.env(TORCHELASTIC_ERROR_FILE=own))
        self.assertRc(res, 1)
        data = lib.read_json(own)
        self.assertEqual(data["message"]["message"], "ValueError: boom-7f3a")
        self.assertEqual(data["message"]["errorCode"], 3)
        self.assertEqual(data["message"]["extraInfo"]["timestamp"], "1700000000")
        self.assertIn("ValueError: boom-7f3a\n", data["message"]["extraInfo"]["py_callstack"])

    def test_agent_error_file_flat_form(self):
        # Flat form: copied as is ("errorCode" only goes inside a "message" object).
        script = self.write_py("errw.py", self.ERR_WRITER)
        own = self.path("agent_error.json")
        res = self.run_elasticd("--standalone", script, "flat", "3",
                                env=self.env(TORCHELASTIC_ERROR_FILE=own))
        self.assertRc(res, 1)
        self.assertEqual(lib.read_json(own), {"message": "flat message 9c1d",
                                              "timestamp": 1700000001})

    # A worker without an error file: test_report.py.


if __name__ == "__main__":
    lib.main()
