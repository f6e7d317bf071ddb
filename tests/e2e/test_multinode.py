#!/usr/bin/python3
"""End-to-end: a real PyTorch DDP job (examples/ddp.py, gloo on CPU) across two
elasticd agents x two workers (world size 4) that meet through the c10d
rendezvous, the workers using group rank 0's agent store
(TORCHELASTIC_USE_AGENT_STORE=True); and the same job surviving one node's
worker failure with --max-restarts 1 (multinode_cases.py, shared with
test_multinode_etcd.py).

Run by `meson test --suite e2e`, or by hand:
`ELASTICD=build/src/elasticd /usr/bin/python3 tests/e2e/test_multinode.py -v`.
"""

import sys
import unittest

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
from e2e_common import free_port  # noqa: E402
from multinode_cases import MultiNodeCases  # noqa: E402


class MultiNodeDDPTest(MultiNodeCases, unittest.TestCase):

    def setUp(self):
        super().setUp()
        self.port = free_port()

    def rdzv_flags(self):
        return ["--rdzv-backend", "c10d", "--rdzv-endpoint", "127.0.0.1:%d" % self.port,
                "--rdzv-id", "ddp-e2e", "--rdzv-conf",
                "keep_alive_interval=1,keep_alive_max_attempt=5"]


if __name__ == "__main__":
    unittest.main(verbosity=2)
