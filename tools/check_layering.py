#!/usr/bin/env python3
"""check_layering.py - src/ has no include circle and no call circle between its files; kernels/ keeps
its layers.

    check_layering.py --src src [--kernels kernels] OBJECT.o ...

Include graph: src/<a>.{c,h} -> src/<b>.h for every #include "b.h" (a .c and its own .h are one
node). Call graph: file a -> file b when a's object file references a symbol that b's defines
(nm). Either graph having a cycle fails, printing it. The layers this keeps honest: status/env at
the bottom, then registry, validate and the reference, the planners, the GPU runtime and entries,
the backends, dispatch, and api.c on top.

kernels/ (--kernels): every quoted #include resolves to a file of the tree, and the folders keep their
layers: common/ (portability helpers, the K/V formats, the occupancy rule) includes only common/;
target/ (the fragment layers) common/ and target/; a family folder (decode/, encoder/, generic/, ...)
common/, target/ and itself, never another family; no include circle.
"""
import argparse
import collections
import os
import re
import subprocess
import sys


def include_graph(src):
    g = collections.defaultdict(set)
    names = {os.path.splitext(f)[0] for f in os.listdir(src) if f.endswith((".c", ".h"))}
    for f in os.listdir(src):
        if not f.endswith((".c", ".h")):
            continue
        node = os.path.splitext(f)[0]
        for m in re.finditer(r'^\s*#\s*include\s+"([^"/]+)\.h"', open(os.path.join(src, f)).read(), re.M):
            dep = m.group(1)
            if dep in names and dep != node:
                g[node].add(dep)
    return g


KERNEL_LAYERS = {"common": {"common"}, "target": {"common", "target"}}


def kernel_problems(kdir):
    """Layering violations and include circles of kernels/: a list of messages."""
    problems, g = [], collections.defaultdict(set)
    for folder in sorted(os.listdir(kdir)):
        if not os.path.isdir(os.path.join(kdir, folder)):
            continue
        allowed = KERNEL_LAYERS.get(folder, {"common", "target", folder})
        for f in sorted(os.listdir(os.path.join(kdir, folder))):
            if not f.endswith((".h", ".hip")):
                continue
            node = f"{folder}/{f}"
            for m in re.finditer(r'^\s*#\s*include\s+"([^"]+)"', open(os.path.join(kdir, node)).read(), re.M):
                inc = m.group(1)
                if inc == "variants.def":   # the generated X-macro table (variants/)
                    continue
                dep = inc if "/" in inc else f"{folder}/{inc}"
                if not os.path.exists(os.path.join(kdir, dep)):
                    problems.append(f"kernels/{node} includes \"{inc}\": no kernels/{dep}")
                    continue
                if dep.split("/")[0] not in allowed:
                    problems.append(f"kernels/{node} includes {dep}: {folder}/ may include only "
                                    f"{', '.join(sorted(allowed))}")
                g[node].add(dep)
    c = find_cycle(g)
    if c:
        problems.append(f"include circle in kernels/: {' -> '.join(c)}")
    return problems, len(g)


def call_graph(objects, nm):
    defs, uses = {}, collections.defaultdict(set)
    for o in objects:
        node = os.path.basename(o).split(".")[0]
        out = subprocess.run([nm, o], capture_output=True, text=True, check=True).stdout
        for line in out.splitlines():
            p = line.split()
            if len(p) == 3 and p[1] in "TDRBC":
                defs[p[2]] = node
            elif len(p) == 2 and p[0] == "U":
                uses[node].add(p[1])
    g = collections.defaultdict(set)
    for node, syms in uses.items():
        for s in syms:
            if s in defs and defs[s] != node:
                g[node].add(defs[s])
    return g


def find_cycle(g):
    state, stack = {}, []

    def visit(v):
        state[v] = 1
        stack.append(v)
        for w in sorted(g.get(v, ())):
            if state.get(w) == 1:
                return stack[stack.index(w):] + [w]
            if w not in state:
                c = visit(w)
                if c:
                    return c
        stack.pop()
        state[v] = 2
        return None

    for v in sorted(g):
        if v not in state:
            c = visit(v)
            if c:
                return c
    return None


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--src", required=True)
    ap.add_argument("--kernels", help="the kernels/ folder, whose layers are checked too")
    ap.add_argument("--nm", default="nm")
    ap.add_argument("objects", nargs="*")
    a = ap.parse_args()
    # CMake hands $<TARGET_OBJECTS:...> over as one ';'-joined argument; only src/'s files count
    a.objects = [o for arg in a.objects for o in arg.split(";") if os.path.basename(os.path.dirname(o)) == "src"]
    failed = False
    for what, g in (("include", include_graph(a.src)), ("call", call_graph(a.objects, a.nm) if a.objects else {})):
        c = find_cycle(g)
        if c:
            print(f"{what} circle in src/: {' -> '.join(c)}")
            failed = True
        else:
            print(f"{what} graph of src/: no circle ({len(g)} files with dependencies)")
    if a.kernels:
        problems, n = kernel_problems(a.kernels)
        for p in problems:
            print(p)
        failed |= bool(problems)
        if not problems:
            print(f"kernels/: layered, no circle ({n} files with includes)")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
