#!/usr/bin/env python3
"""compare_code_objects.py - are two builds' gfx11 kernels the same machine code?

    python3 lab/compare_code_objects.py BEFORE.co[,BEFORE2.co...] AFTER.co[,AFTER2.co...] [--rename MAP]

Disassembles every kernel of both sets (llvm-objdump -d) and compares them instruction by instruction,
ignoring addresses, encodings, branch-target labels and the padding after each kernel (s_nop up to the
next kernel's alignment, s_code_end at the end of a code object). MAP (optional) holds "old_name new_name" lines
for kernels renamed between the two builds. Prints the counts and every kernel that is missing or
differs; exits 1 when any does. Used to show that a re-layout of the kernel sources changed no code.
"""
import argparse
import re
import shutil
import subprocess
import sys


def objdump():
    for name in ("llvm-objdump-19", "llvm-objdump"):
        if shutil.which(name):
            return name
    sys.exit("compare_code_objects: llvm-objdump(-19) not found (Debian package llvm-19)")


def kernels(paths):
    out = {}
    tool = objdump()
    for path in paths:
        text = subprocess.check_output([tool, "-d", "--no-show-raw-insn", "--no-leading-addr", path], text=True)
        name = None
        for line in text.splitlines():
            m = re.match(r"^(?:[0-9a-f]+ )?<([^>]+)>:$", line)
            if m:
                name = m.group(1)
                out.setdefault(name, [])
                continue
            if name and line.strip() and not line.startswith("Disassembly"):
                ins = re.sub(r"<[^>]+>", "", re.sub(r"//.*", "", line)).strip()
                if ins:
                    out[name].append(ins)
    for ins in out.values():   # the padding after a kernel's code (to the next kernel or the end of the object)
        while ins and (ins[-1] == "s_code_end" or ins[-1].startswith("s_nop")):
            ins.pop()
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("before")
    ap.add_argument("after")
    ap.add_argument("--rename", help="file of 'old new' kernel-name lines")
    args = ap.parse_args()
    a = kernels(args.before.split(","))
    b = kernels(args.after.split(","))
    if args.rename:
        with open(args.rename) as f:
            for line in f:
                parts = line.split()
                if len(parts) == 2 and parts[0] in a:
                    a[parts[1]] = a.pop(parts[0])
    only_a, only_b = sorted(set(a) - set(b)), sorted(set(b) - set(a))
    common = sorted(set(a) & set(b))
    diff = [k for k in common if a[k] != b[k]]
    print(f"{len(a)} kernels before, {len(b)} after: {len(common) - len(diff)} the same, {len(diff)} differ, "
          f"{len(only_a)} only before, {len(only_b)} only after")
    for k in only_a:
        print("  only before:", k)
    for k in only_b:
        print("  only after:", k)
    for k in diff:
        print(f"  differs: {k} ({len(a[k])} -> {len(b[k])} instructions)")
    return 1 if diff or only_a or only_b else 0


if __name__ == "__main__":
    sys.exit(main())
