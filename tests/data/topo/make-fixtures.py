#!/usr/bin/python3
"""Write the hand-made hwloc topologies (XML, format 2.0) used by the NUMA tests.

Each fixture is described below as a small tree; this script computes the
cpusets and nodesets hwloc expects and writes <name>.xml next to itself, and
README.md with what each one is. The XML files hold no comment: hwloc's
built-in XML reader (the one in use when libhwloc-plugins, and with it the
libxml2 reader, is not installed) rejects a file with one.
Run it again after editing a description; the XML files are committed so the
tests do not depend on it. Check a fixture with:
    lstopo-no-graphics -i tests/data/topo/<name>.xml --filter io:important
"""

import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))


# ---- the tree --------------------------------------------------------------

class Obj:
    def __init__(self, type_, os_index=None, children=(), memory=(), io=(), **attrs):
        self.type = type_
        self.os_index = os_index
        self.children = list(children)
        self.memory = list(memory)
        self.io = list(io)
        self.attrs = attrs


def machine(*children, memory=(), io=(), allowed_cpus=None, allowed_nodes=None):
    m = Obj("Machine", 0, children, memory, io)
    m.allowed_cpus = allowed_cpus
    m.allowed_nodes = allowed_nodes
    return m


def package(os_index, *children, memory=(), io=()):
    return Obj("Package", os_index, children, memory, io)


def group(*children, memory=(), io=()):
    return Obj("Group", None, children, memory, io, kind="1000")


def numa(os_index, subtype=None):
    o = Obj("NUMANode", os_index, local_memory="34359738368")
    o.subtype = subtype
    return o


def cache(level, *children, memory=(), io=()):
    sizes = {1: 32768, 2: 1048576, 3: 33554432}
    return Obj("L%dCache" % level, None, children, memory, io, cache_size=str(sizes[level]),
               depth=str(level), cache_linesize="64", cache_associativity="8",
               cache_type="0" if level > 1 else "1")


def core(os_index, *pus):
    return Obj("Core", os_index, [Obj("PU", p) for p in pus])


def l2core(os_index, *pus):
    """A core with its private L2."""
    return cache(2, core(os_index, *pus))


def pci(busid, cls, vendor, device, subtype=None):
    o = Obj("PCIDev", None, pci_busid=busid,
            pci_type="%04x [%04x:%04x] [%04x:0000] a1" % (cls, vendor, device, vendor))
    o.subtype = subtype
    return o


NVIDIA, AMD, MATROX, INTEL, ASPEED = 0x10de, 0x1002, 0x102b, 0x8086, 0x1a03
GPU3D, VGA, AUDIO, OTHER_BRIDGE, ETHERNET = 0x0302, 0x0300, 0x0403, 0x0680, 0x0200
DISPLAY, ACCEL = 0x0380, 0x1200


def gpu(busid, device=0x20b0):
    return pci(busid, GPU3D, NVIDIA, device)


# ---- computing sets ---------------------------------------------------------

def pus_of(o):
    if o.type == "PU":
        return {o.os_index}
    s = set()
    for c in o.children:
        s |= pus_of(c)
    return s


def nodes_below(o):
    s = {m.os_index for m in o.memory}
    for c in o.children:
        s |= nodes_below(c)
    return s


def bitmap(bits):
    """hwloc's XML bitmap: 32-bit words, most significant first."""
    if not bits:
        return "0x0"
    words = [0] * (max(bits) // 32 + 1)
    for b in bits:
        words[b // 32] |= 1 << (b % 32)
    return ",".join("0x%08x" % w for w in reversed(words))


class Writer:
    def __init__(self):
        self.lines = []
        self.gp = 0

    def gp_index(self):
        self.gp += 1
        return self.gp

    def emit(self, depth, text):
        self.lines.append("  " * depth + text)

    def obj(self, o, depth, parent_nodes, cpus_override=None):
        cpus = pus_of(o) if cpus_override is None else cpus_override
        nodes = nodes_below(o) or parent_nodes
        if o.type == "NUMANode":
            nodes = {o.os_index}
        attrs = ['type="%s"' % o.type]
        if o.os_index is not None:
            attrs.append('os_index="%d"' % o.os_index)
        if o.type != "PCIDev":
            attrs.append('cpuset="%s" complete_cpuset="%s"' % (bitmap(cpus), bitmap(cpus)))
            if o.type == "Machine":
                allowed = cpus if o.allowed_cpus is None else set(o.allowed_cpus)
                attrs.append('allowed_cpuset="%s"' % bitmap(allowed))
            attrs.append('nodeset="%s" complete_nodeset="%s"' % (bitmap(nodes), bitmap(nodes)))
            if o.type == "Machine":
                allowed = nodes if o.allowed_nodes is None else set(o.allowed_nodes)
                attrs.append('allowed_nodeset="%s"' % bitmap(allowed))
        if getattr(o, "subtype", None):
            attrs.append('subtype="%s"' % o.subtype)
        attrs.append('gp_index="%d"' % self.gp_index())
        for k, v in o.attrs.items():
            attrs.append('%s="%s"' % (k, v))
        inner = o.memory or o.children or o.io
        if not inner:
            self.emit(depth, "<object %s/>" % " ".join(attrs))
            return
        self.emit(depth, "<object %s>" % " ".join(attrs))
        for m in o.memory:
            self.obj(m, depth + 1, nodes, cpus_override=cpus)
        for c in o.children:
            self.obj(c, depth + 1, nodes)
        for d in o.io:
            self.obj(d, depth + 1, nodes)
        self.emit(depth, "</object>")


def write(name, m):
    w = Writer()
    w.lines.append('<?xml version="1.0" encoding="UTF-8"?>')
    w.lines.append('<!DOCTYPE topology SYSTEM "hwloc2.dtd">')
    w.lines.append('<topology version="2.0">')
    w.obj(m, 1, set())
    w.lines.append("</topology>")
    with open(os.path.join(HERE, name + ".xml"), "w") as f:
        f.write("\n".join(w.lines) + "\n")


# ---- the fixtures -------------------------------------------------------------

def smt_package(os_index, first, ncores, nthreads_step, io=()):
    """A package with one NUMA node, one L3 and ncores SMT cores: core k has PUs
    first+k and first+k+nthreads_step (Linux numbering)."""
    cores = [l2core(k, first + k, first + k + nthreads_step) for k in range(ncores)]
    return package(os_index, cache(3, *cores), memory=[numa(os_index)], io=io)


def uneven_smt(allowed_cpus=None, allowed_nodes=None):
    return machine(
        smt_package(0, 0, 4, 8, io=[
            gpu("0000:17:00.0"), gpu("0000:18:00.0"), gpu("0000:3a:00.0"),
            pci("0000:3a:00.1", AUDIO, NVIDIA, 0x1aef),
            pci("0000:03:00.0", VGA, MATROX, 0x0532),
            pci("0000:19:00.0", OTHER_BRIDGE, NVIDIA, 0x1ac2, subtype="NVSwitch"),
        ]),
        smt_package(1, 4, 4, 8, io=[gpu("0000:b1:00.0")]),
        allowed_cpus=allowed_cpus, allowed_nodes=allowed_nodes)


FIXTURES = {}

FIXTURES["uneven-smt"] = (
    "2 packages, 1 NUMA node and 1 L3 each, 4 cores x 2 threads per package (core k: PUs k, "
    "k+8); 3 NVIDIA GPUs on node 0 and 1 on node 1; also an NVIDIA audio function, an "
    "NVSwitch and a Matrox BMC VGA on node 0, which are not GPUs",
    uneven_smt())

FIXTURES["cpuset-excluded"] = (
    "uneven-smt with a cgroup-like allowed set: CPUs 0-2,8,10 (core 3 and the sibling 9 "
    "of core 1 excluded, node 1 has no allowed CPU) and memory node 0 only",
    uneven_smt(allowed_cpus=[0, 1, 2, 8, 10], allowed_nodes=[0]))


def ccx(first, n):
    return cache(3, *[l2core(first + k, first + k) for k in range(n)])


FIXTURES["l3-groups"] = (
    "1 package, 2 NUMA nodes (NPS2-like), several L3 complexes, no SMT: node 0 has L3s "
    "0-3 and 4-7, node 1 has L3s 8-9 (2 cores) and 10-13 (4 cores); 3 GPUs on node 0, "
    "1 on node 1",
    machine(package(
        0,
        group(ccx(0, 4), ccx(4, 4), memory=[numa(0)],
              io=[gpu("0000:01:00.0"), gpu("0000:02:00.0"), gpu("0000:03:00.0")]),
        group(ccx(8, 2), ccx(10, 4), memory=[numa(1)], io=[gpu("0000:41:00.0")]),
    )))

FIXTURES["gpuless"] = (
    "2 packages, 2 NUMA nodes, 2 cores each, no GPU: a Matrox and an ATI ES1000 BMC VGA "
    "(1002:515e), an NVSwitch, an NVIDIA audio function and an Ethernet controller",
    machine(
        package(0, cache(3, l2core(0, 0), l2core(1, 1)), memory=[numa(0)], io=[
            pci("0000:03:00.0", VGA, MATROX, 0x0532),
            pci("0000:01:03.0", VGA, AMD, 0x515e),
            pci("0000:19:00.0", OTHER_BRIDGE, NVIDIA, 0x1ac2, subtype="NVSwitch"),
        ]),
        package(1, cache(3, l2core(2, 2), l2core(3, 3)), memory=[numa(1)], io=[
            pci("0000:81:00.1", AUDIO, NVIDIA, 0x1aef),
            pci("0000:82:00.0", ETHERNET, INTEL, 0x1521),
        ])))

FIXTURES["more-gpus-than-cores"] = (
    "1 package, 1 NUMA node, 1 L3, 2 cores x 2 threads (PUs 0,2 and 1,3), 4 GPUs",
    machine(package(0, cache(3, l2core(0, 0, 2), l2core(1, 1, 3)), memory=[numa(0)], io=[
        gpu("0000:07:00.0"), gpu("0000:08:00.0"), gpu("0000:09:00.0"), gpu("0000:0a:00.0"),
    ])))

FIXTURES["snc-gpumem"] = (
    "1 package split in 2 NUMA nodes (SNC2: PUs 0-3 and 4-7) with a GPU attached to the "
    "package (its locality spans both nodes), plus a CPU-less GPU-memory NUMA node 2 "
    "attached to the package, which must never be chosen",
    machine(package(
        0,
        group(cache(3, *[l2core(k, k) for k in range(4)]), memory=[numa(0)]),
        group(cache(3, *[l2core(k, k) for k in range(4, 8)]), memory=[numa(1)]),
        memory=[numa(2, subtype="GPUMemory")],
        io=[gpu("0009:01:00.0", device=0x2342)],
    )))

FIXTURES["cpuless-dram"] = (
    "snc-gpumem with its CPU-less node 2 given no subtype (plain memory-only DRAM, as "
    "hwloc reports a memory expander): only the tree says it has no CPUs",
    machine(package(
        0,
        group(cache(3, *[l2core(k, k) for k in range(4)]), memory=[numa(0)]),
        group(cache(3, *[l2core(k, k) for k in range(4, 8)]), memory=[numa(1)]),
        memory=[numa(2)],
        io=[gpu("0009:01:00.0", device=0x2342)],
    )))

FIXTURES["bus-order"] = (
    "2 packages, 1 NUMA node and 2 cores each; package 0 holds the higher bus ids "
    "(0000:b1:00.0, 0000:b2:00.0), package 1 the lower one (0000:17:00.0): GPU order is "
    "bus order, not tree order",
    machine(
        package(0, cache(3, l2core(0, 0), l2core(1, 1)), memory=[numa(0)],
                io=[gpu("0000:b1:00.0"), gpu("0000:b2:00.0")]),
        package(1, cache(3, l2core(2, 2), l2core(3, 3)), memory=[numa(1)],
                io=[gpu("0000:17:00.0")])))

FIXTURES["mixed-vendors"] = (
    "2 packages, 1 NUMA node each, 2 cores each: NVIDIA GPUs at 0000:83:00.0 (node 1) and "
    "0000:03:00.0 (node 0), an AMD GPU at 0000:04:00.0 (node 0) and an AMD Instinct-like "
    "processing accelerator at 0000:84:00.0 (node 1)",
    machine(
        package(0, cache(3, l2core(0, 0), l2core(1, 1)), memory=[numa(0)], io=[
            gpu("0000:03:00.0"), pci("0000:04:00.0", VGA, AMD, 0x6798)]),
        package(1, cache(3, l2core(2, 2), l2core(3, 3)), memory=[numa(1)], io=[
            gpu("0000:83:00.0"), pci("0000:84:00.0", 0x1200, AMD, 0x74a1)])))

FIXTURES["amd-only"] = (
    "2 packages, 1 NUMA node each, 2 cores each: AMD GPUs only (0000:04:00.0 VGA on node "
    "0, 0000:84:00.0 processing accelerator on node 1) and an ES1000 BMC VGA",
    machine(
        package(0, cache(3, l2core(0, 0), l2core(1, 1)), memory=[numa(0)], io=[
            pci("0000:04:00.0", VGA, AMD, 0x6798), pci("0000:01:03.0", VGA, AMD, 0x515e)]),
        package(1, cache(3, l2core(2, 2), l2core(3, 3)), memory=[numa(1)], io=[
            pci("0000:84:00.0", 0x1200, AMD, 0x74a1)])))

FIXTURES["intel-gpus"] = (
    "2 packages, 1 NUMA node each, 2 cores each: Intel GPUs only, Data Center GPU Max 1550s "
    "(8086:0bd5, display controller class 0x0380) at 0000:29:00.0 (node 0) and 0000:9a:00.0 "
    "(node 1) and an Arc A770 VGA (8086:56a0) at 0000:03:00.0 (node 0); also an Intel NPU "
    "(8086:7d1d, processing accelerator 0x1200), an ASPEED BMC VGA and an Intel Ethernet "
    "controller, which are not GPUs",
    machine(
        package(0, cache(3, l2core(0, 0), l2core(1, 1)), memory=[numa(0)], io=[
            pci("0000:29:00.0", DISPLAY, INTEL, 0x0bd5),
            pci("0000:03:00.0", VGA, INTEL, 0x56a0),
            pci("0000:00:0b.0", ACCEL, INTEL, 0x7d1d),
            pci("0000:02:00.0", VGA, ASPEED, 0x2000)]),
        package(1, cache(3, l2core(2, 2), l2core(3, 3)), memory=[numa(1)], io=[
            pci("0000:9a:00.0", DISPLAY, INTEL, 0x0bd5),
            pci("0000:98:00.0", ETHERNET, INTEL, 0x1521)])))

# CPUs 0 and 1 only, so that the integration tests can apply the plan for real
# on a 2-CPU test machine. No caches: core-complex falls back to the node.
FIXTURES["host-1node"] = (
    "CPUs 0-1 only (for integration tests on a 2-CPU machine): 1 package, 1 NUMA node, 2 "
    "cores without SMT or caches, GPUs 0000:01:00.0 and 0000:02:00.0",
    machine(package(0, core(0, 0), core(1, 1), memory=[numa(0)],
                    io=[gpu("0000:01:00.0"), gpu("0000:02:00.0")])))

FIXTURES["host-2node"] = (
    "CPUs 0-1 only (for integration tests on a 2-CPU machine): 2 packages with 1 NUMA node "
    "and 1 core each (CPU 0 on node 0, CPU 1 on node 1), GPU 0000:01:00.0 on node 0 and "
    "0000:81:00.0 on node 1",
    machine(
        package(0, core(0, 0), memory=[numa(0)], io=[gpu("0000:01:00.0")]),
        package(1, core(1, 1), memory=[numa(1)], io=[gpu("0000:81:00.0")])))

FIXTURES["mems-excluded"] = (
    "2 packages with 1 NUMA node and 2 cores each, a GPU on each node (0000:01:00.0 on node 0, "
    "0000:81:00.0 on node 1); every CPU is allowed but only memory node 0",
    machine(
        package(0, core(0, 0), core(1, 1), memory=[numa(0)], io=[gpu("0000:01:00.0")]),
        package(1, core(2, 2), core(3, 3), memory=[numa(1)], io=[gpu("0000:81:00.0")]),
        allowed_nodes=[0]))

FIXTURES["far-cpus"] = (
    "a machine no test host is: 1 package, 1 NUMA node, CPUs 4000 and 4001, GPUs "
    "0000:01:00.0 and 0000:02:00.0",
    machine(package(0, core(0, 4000), core(1, 4001), memory=[numa(0)],
                    io=[gpu("0000:01:00.0"), gpu("0000:02:00.0")])))


README_HEAD = """# NUMA test topologies

Hand-made hwloc XML topologies (format 2.0) for the NUMA unit and integration
tests, written by `make-fixtures.py` (edit the descriptions there and run it
again; it rewrites the XML files and this page). The files hold no XML comment:
hwloc's built-in XML reader, in use when `libhwloc-plugins` is not installed,
rejects one. Check a fixture with
`lstopo-no-graphics -i tests/data/topo/<name>.xml --filter io:important`.

| fixture | what it is |
|---|---|
"""


def write_readme():
    rows = ["| `%s.xml` | %s |" % (name, FIXTURES[name][0]) for name in sorted(FIXTURES)]
    with open(os.path.join(HERE, "README.md"), "w") as f:
        f.write(README_HEAD + "\n".join(rows) + "\n")


def main():
    names = sys.argv[1:] or sorted(FIXTURES)
    for name in names:
        m = FIXTURES[name][1]
        write(name, m)
        print("wrote %s.xml" % name)
    write_readme()
    print("wrote README.md")


if __name__ == "__main__":
    main()
