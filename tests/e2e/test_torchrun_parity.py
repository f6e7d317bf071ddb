#!/usr/bin/python3
"""End-to-end parity tests for places where a worker, or the caller, once saw
something different under elasticd than under the real torchrun of the same
torch (1.13; 2.6 as e2e_torchrun_parity_torch2). Each test's docstring names
the source of the old difference in src/. They reuse test_ddp.py's Harness (same environment,
same torchrun wrapper).

Run by `meson test --suite e2e` (e2e_torchrun_parity), or by hand:
`ELASTICD=build/src/elasticd /usr/bin/python3 tests/e2e/test_torchrun_parity.py -v`.
"""

import os
import signal
import sys
import unittest

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
from test_ddp import Harness  # noqa: E402
from e2e_common import label  # noqa: E402


class TorchrunParity(Harness):
    def test_static_backend_agent_store(self):
        """The default static backend, one node. torchrun's static rendezvous
        hosts a TCPStore at MASTER_ADDR:MASTER_PORT in the agent (node rank 0)
        and tells the workers TORCHELASTIC_USE_AGENT_STORE=True, so
        init_process_group(env://) connects to it as a client (reference §2.4,
        checklist §10.3). elasticd (src/rdzv/rdzv_static.c static_done_cb) hosts
        nothing and sets use_agent_store = false: worker RANK 0 binds the port
        instead. Everything else in the contract matches."""
        results, base = self.dump_both("static")
        problems, report = self.compare_contract(results, base, "static")
        if problems or os.environ.get("E2E_SHOW_CONTRACT"):
            self.fail(f"worker contract (static backend) differs from torchrun ({label()}):\n  "
                      + "\n  ".join(problems) + "\n\n" + "\n".join(report))

    def test_worker_signals_when_agent_started_with_sigint_ignored(self):
        """An agent started from a non-interactive shell with `&` (or by a batch
        script) begins with SIGINT and SIGQUIT ignored. torchrun installs its
        handlers for SIGTERM/SIGINT/SIGHUP/SIGQUIT anyway, so its workers start
        with every handled signal at SIG_DFL (Python then installs its
        KeyboardInterrupt handler). elasticd (src/agent/agent.c agent_setup_signals)
        leaves a signal that was ignored at start ignored and unhandled, and
        the child (src/worker/spawn.c child_main) resets only SIGPIPE and SIGXFSZ, so
        its workers inherit SIG_IGN for SIGINT and SIGQUIT: Python installs no
        KeyboardInterrupt handler, and `kill -INT <elasticd>` stops nothing
        (torchrun forwards it and exits 1)."""
        results, _ = self.dump_both("standalone", ignore_signals=(signal.SIGINT, signal.SIGQUIT))
        problems = []
        for lr in (0, 1):
            e, t = results["elasticd"][0][lr], results["torchrun"][0][lr]
            if e["signals"] != t["signals"]:
                problems.append(f"rank {lr}: signal dispositions: elasticd {e['signals']}, "
                                f"torchrun {t['signals']}")
            if e["status"]["SigIgn"] != t["status"]["SigIgn"]:
                problems.append(f"rank {lr}: SigIgn: elasticd {e['status']['SigIgn']}, "
                                f"torchrun {t['status']['SigIgn']}")
        if problems:
            self.fail("workers of an agent started with SIGINT and SIGQUIT ignored:\n  "
                      + "\n  ".join(problems))


if __name__ == "__main__":
    unittest.main(verbosity=2)
