#!/usr/bin/python3
"""End-to-end: a real PyTorch DDP job (examples/ddp.py, gloo on CPU) across two
elasticd agents x two workers (world size 4) that meet through the etcd
rendezvous backend on a throwaway single-member etcd; the workers meet on
their own TCPStore at group rank 0's MASTER_ADDR:MASTER_PORT
(TORCHELASTIC_USE_AGENT_STORE=False, as torch's etcd backends); and the same
job surviving one node's worker failure with --max-restarts 1
(multinode_cases.py, shared with test_multinode.py).

Run by `meson test --suite e2e`, or by hand:
`ELASTICD=build/src/elasticd /usr/bin/python3 tests/e2e/test_multinode_etcd.py -v`.
"""

import os
import sys
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "integration"))

from etcd_cluster import Etcd  # noqa: E402

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
from multinode_cases import MultiNodeCases  # noqa: E402


class MultiNodeEtcdDDPTest(MultiNodeCases, unittest.TestCase):

    TMP_PREFIX = "elasticd-e2e-etcd-"
    RUN_TIMEOUT = 180

    def setUp(self):
        super().setUp()
        self.etcd = Etcd(1)

    def tearDown(self):
        super().tearDown()
        self.etcd.stop()

    def rdzv_flags(self):
        return ["--rdzv-backend", "etcd", "--rdzv-endpoint", self.etcd.endpoints,
                "--rdzv-id", "ddp-e2e-etcd", "--rdzv-conf",
                "keep_alive_interval=1,keep_alive_max_attempt=5", "--local-addr", "127.0.0.1"]

    def test_ddp_two_agents_two_workers(self):
        super().test_ddp_two_agents_two_workers()
        # The job's keys are gone from etcd.
        self.assertEqual(self.etcd.keys("/elasticd/"), [])


if __name__ == "__main__":
    unittest.main(verbosity=2)
