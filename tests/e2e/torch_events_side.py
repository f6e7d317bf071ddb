"""The torch side of test_events_compat.py: run under the torch being tested
(TORCH_PYTHON, see e2e_common.py), since the test process itself imports no torch.

  torch_events_side.py readback FILE
      every line of FILE read by torch's Event.deserialize (a line with
      "source") or RdzvEvent.deserialize, then serialised again; prints a JSON
      list with one object per line: kind ("Event" or "RdzvEvent"), typed
      (source / node_state came back as torch's enum), same (serialize() gave
      the line's very bytes, else "again" holds what it gave), name, and
      source + metadata or node_state + rank
  torch_events_side.py build FILE
      writes hand-built events to FILE: Event and RdzvEvent objects with odd
      values, one RdzvEvent per NodeState, and one recorded through torch's
      own construct_and_record_rdzv_event with a handler that writes
"""

import json
import logging
import sys

from torch.distributed.elastic import events as torch_events
from torch.distributed.elastic.events import handlers
from torch.distributed.elastic.events.api import Event, EventSource, NodeState, RdzvEvent


def readback(path):
    out = []
    with open(path, encoding="utf-8") as f:
        for line in f:
            line = line.rstrip("\n")
            if "source" in json.loads(line):
                ev = Event.deserialize(line)
                d = {"kind": "Event", "typed": isinstance(ev.source, EventSource),
                     "source": ev.source.value if isinstance(ev.source, EventSource) else None,
                     "metadata": ev.metadata}
            else:
                ev = RdzvEvent.deserialize(line)
                d = {"kind": "RdzvEvent", "typed": isinstance(ev.node_state, NodeState),
                     "node_state": getattr(ev.node_state, "name", None), "rank": ev.rank}
            again = ev.serialize()
            d.update(name=ev.name, same=again == line)
            if again != line:
                d["again"] = again
            out.append(d)
    json.dump(out, sys.stdout)


def build(path):
    lines = [
        Event("x", EventSource.AGENT).serialize(),
        Event("y", EventSource.WORKER, 1700000000123, {
            "s": "a\"b\\c/d \u00e9 \u2603 \U0001F600 \x7f\x01\t", "i": -2**63, "j": 2**63 - 1,
            "f": 0.1, "g": 1e-7, "h": 1e22, "k": -0.0, "t": True, "n": None}).serialize(),
        RdzvEvent("dynamic_rendezvous.py:DynamicRendezvousHandler.next_rendezvous", "job",
                  "The node 'h_1_0' attempts to join", "h.example.com", 1,
                  NodeState.RUNNING).serialize(),
        RdzvEvent("n", "r", "m", "h", 2, NodeState.FAILED, "ep:29400", 0, 3,
                  "Traceback (most recent call last):\n  ...").serialize(),
    ]
    for state in NodeState:
        lines.append(RdzvEvent("n", "r", "m", "h", 3, state, local_id=0).serialize())
    with open(path, "w", encoding="utf-8") as f:
        f.write("".join(ln + "\n" for ln in lines))
    # construct_and_record_rdzv_event itself, through a handler that appends.
    h = logging.FileHandler(path)
    h.setFormatter(logging.Formatter("%(message)s"))
    handlers._log_handlers["dynamic_rendezvous"] = h
    torch_events._events_loggers.pop("dynamic_rendezvous", None)
    torch_events.construct_and_record_rdzv_event(
        run_id="job", message="m \u2603", node_state=NodeState.SUCCEEDED, rank=2)
    h.close()


if __name__ == "__main__":
    {"readback": readback, "build": build}[sys.argv[1]](sys.argv[2])
