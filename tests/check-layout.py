#!/usr/bin/env python3
"""check-layout.py -- the house rules of src/README.md, checked.

Every `#include "x.h"` in src/ must name a header of the same folder or of a
folder on a lower layer (the table in src/README.md); src/main.c sits above
every layer. Every source file is at most 1000 lines and every function at
most 80 (from the line with its name at column 0 to its closing brace). Prints each violation and
exits 1 when there is one; exits 2 when the table cannot be read."""
import pathlib
import re
import sys

MAX_LINES = 1000
MAX_FUNCTION = 80
# Made at build time: version.h by meson, etcd_rpc.pb-c.h by protoc-c from
# src/etcd/etcd_rpc.proto.
GENERATED = {"version.h", "etcd_rpc.pb-c.h"}
# Files or functions allowed over the limits (none).
KNOWN_LONG = set()


def layers(readme):
    table = {}
    for line in readme.read_text().splitlines():
        m = re.match(r"\|\s*(\d+)\s*\|\s*`([a-z_]+)/`\s*\|", line)
        if m:
            table[m.group(2)] = int(m.group(1))
    return table


def main():
    src = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else pathlib.Path(__file__).parent.parent / "src")
    table = layers(src / "README.md")
    if not table:
        print(f"check-layout: no layer table in {src / 'README.md'}")
        return 2
    top = max(table.values()) + 1
    files = sorted(p for p in src.rglob("*") if p.suffix in (".c", ".h"))
    where = {}
    bad = []
    for p in files:
        folder = p.parent.name if p.parent != src else ""
        if folder and folder not in table:
            bad.append(f"{p}: folder {folder}/ is not in src/README.md's layer table")
        where.setdefault(p.name, folder)
    for p in files:
        folder = p.parent.name if p.parent != src else ""
        own = table.get(folder, top)
        text = p.read_text()
        n = text.count("\n")
        if n > MAX_LINES and p.name not in KNOWN_LONG:
            bad.append(f"{p}: {n} lines (at most {MAX_LINES})")
        start = None
        for i, line in enumerate(text.splitlines(), 1):
            f = re.match(r"([a-z_][a-z0-9_]*)\(", line)
            if f and p.suffix == ".c":
                start = (f.group(1), i)
            elif line.startswith("}") and start:
                if i - start[1] > MAX_FUNCTION and start[0] not in KNOWN_LONG:
                    bad.append(f"{p}:{start[1]}: {start[0]}() is {i - start[1]} lines (at most {MAX_FUNCTION})")
                start = None
            m = re.match(r'#include "([^"]+)"', line)
            if not m or m.group(1) in GENERATED:
                continue
            name = m.group(1)
            if name not in where:
                bad.append(f"{p}:{i}: {name} is not a header of src/")
                continue
            target = where[name]
            if target == folder:
                continue
            if table.get(target, top) >= own:
                bad.append(f"{p}:{i}: {folder or 'src'}/ (layer {own}) includes {target}/{name} "
                           f"(layer {table.get(target, top)}): arrows point down only")
    for b in bad:
        print(b)
    print(f"check-layout: {len(files)} files, {len(bad)} violations")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
