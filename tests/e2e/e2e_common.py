"""What every end-to-end test shares: which torch it runs against, where
elasticd is, and a caller environment without what the agents set.

TORCH_PYTHON names the interpreter whose torch the workers, torchrun and the
event readers use: /usr/bin/python3 (Debian 12's python3-torch 1.13, the
default) or tests/torch2/python3 (Debian 13's python3-torch 2.6 in the root
that tests/torch2/torch2-root.sh builds). tests/meson.build runs each e2e test
once per version (e2e_<name> and e2e_<name>_torch2). The test process itself
always runs under /usr/bin/python3 and imports no torch.

A torch that cannot be imported is a failure, never a skip: .ci/run installs
and builds what these tests need.
"""

import os
import subprocess
import sys

PY = os.environ.get("TORCH_PYTHON") or "/usr/bin/python3"
HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "integration"))

import lib  # noqa: E402

free_port = lib.free_port  # the one copy, in the integration tests' library
SOURCE_ROOT = os.environ.get("SOURCE_ROOT") or os.path.dirname(os.path.dirname(HERE))
ELASTICD = os.path.abspath(os.environ.get("ELASTICD")
                           or os.path.join(SOURCE_ROOT, "build", "src", "elasticd"))
EVENTS_TOOL = os.path.abspath(os.environ.get("EVENTS_TOOL")
                              or os.path.join(SOURCE_ROOT, "build", "tests", "events_tool"))
# Set by an agent for its workers: never inherited from whoever runs the tests.
AGENT_SET = ("LOCAL_RANK", "RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT", "LOGLEVEL",
             "OMP_NUM_THREADS", "CUDA_VISIBLE_DEVICES", "TORCH_WORKER_SERVER_SOCKET")


def clean_env(**extra):
    """This process's environment without PET_*, TORCHELASTIC_* and what an
    agent sets (AGENT_SET), with PYTHON_EXEC=PY, plus extra."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("PET_", "TORCHELASTIC_", "TORCH_ELASTIC_"))
           and k not in AGENT_SET}
    env["PYTHON_EXEC"] = PY
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    env.update(extra)
    return env


# The interpreter as a worker sees itself (sys.executable, sys.orig_argv[0]):
# /usr/bin/python3 on this machine and inside the torch 2.x root alike
# (tests/torch2/python3 execs the root's /usr/bin/python3).
WORKER_PY = "/usr/bin/python3"

_version = None


def torch_version():
    """torch.__version__ of PY as a tuple of ints, e.g. (2, 6); raises
    RuntimeError naming PY when torch cannot be imported."""
    global _version
    if _version is None:
        r = subprocess.run([PY, "-c", "import torch; print(torch.__version__)"],
                           capture_output=True, text=True, cwd="/tmp")
        if r.returncode != 0:
            raise RuntimeError(f"{PY} cannot import torch (install python3-torch, or for "
                               f"torch 2.x run tests/torch2/torch2-root.sh setup): "
                               f"{r.stderr.strip()[-2000:]}")
        _version = tuple(int(x) for x in r.stdout.strip().split("+")[0].split(".")[:2])
    return _version


def torch2():
    """Whether PY's torch is 2.x or later."""
    return torch_version() >= (2, 0)


def label():
    """"torch 1.13", "torch 2.6": for messages."""
    return "torch %d.%d" % torch_version()
