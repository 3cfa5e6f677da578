#!/usr/bin/env python3
"""Static checks of one built AMDGPU code object (one kernel family for one arch).

Usage:
    check_code_objects.py --arch gfx1151 --family decode --variants variants/variants.def \\
        [--readelf llvm-readelf-19] [--objdump llvm-objdump-19] build/gpu/gfx1151/decode.co

What it checks, from `llvm-readelf --notes` (the AMDGPU metadata) and `llvm-objdump -d`:
  - the code object's target is amdgcn-amd-amdhsa--<arch>, wave32;
  - it holds exactly the kernels variants.def lists for this family and the tuning table the arch
    runs (R35A_GPU_ARCH rows, from variants/archs.tsv; one per entry);
  - every kernel has no scratch (.private_segment_fixed_size == 0, no VGPR spills, no dynamic
    stack); SGPR spills only into VGPR lanes (v_writelane/v_readlane, no memory: scratch stays 0)
    and at most SGPR_SPILL_MAX of them, each listed as a note (no decode variant has any since the
    single-split epilogue reads its arguments where it uses them, decode/softmax.h args_here);
  - occupancy: the VGPRs and the LDS of each kernel both allow at least the waves per SIMD its
    variant states (variants.def's `waves` column, stated for a 1536-entry VGPR file as gfx1151's,
    allocated in granules of 24 in wave32; an arch with a 1024-entry file (archs.tsv `vgprs`) is held
    to the same per-wave budget, 2/3 of the waves; 128 KiB of LDS per WGP of 4 SIMDs); kernels with no stated
    occupancy (the generic family) are held to the defaults VGPRs <= 128 and LDS <= 32 KiB;
    LDS never above the 64 KiB a workgroup can have;
  - the decode and encoder (WMMA) variants contain v_wmma_f32_16x16x16_<dtype> and global_load_b128;
    the rows-4 decode variants (kernels/decode/rows4_gfx11.h) v_dot2 products of <dtype> instead
    of WMMA, and 128-bit loads only with a 16-bit cache (their 8-bit K and V rows load 8 bytes a lane);
    decode variants with bf16 queries and an 8-bit cache have f16 products and no bf16 ones
    (device.h kv8_f16_products);
  - each kernel takes one by-value argument struct of the size the host gives it (--abi), and
    allows the workgroup size the host launches it with.
It prints one row per kernel (VGPRs, SGPRs, LDS, scratch, occupancy, WMMA and 128-bit load counts)
and exits 1 if any check fails, naming the kernel and the check.
"""
import argparse
import os
import re
import shutil
import subprocess
import sys

# gfx11 (RDNA3/3.5) resources. gfx1151, like gfx1100/gfx1101, has the 1.5x register file.
# wave32 VGPR allocation granule: 24 on the 1536-entry file, 8 on the 1024-entry one (LLVM's AMDGPU target)
VGPR_GRANULE_WAVE32 = {1536: 24, 1024: 8}
STATED_VGPR_FILE = 1536       # a tuning row's `waves` is stated for this file (variants/archs.tsv)
LDS_PER_WGP = 128 * 1024
LDS_PER_WORKGROUP_MAX = 64 * 1024
SGPR_SPILL_MAX = 4   # SGPRs a kernel may spill into VGPR lanes (no memory traffic; listed as notes)
LDS_GRANULE = 1024            # allocation granularity assumed for the occupancy estimate (conservative)
SIMDS_PER_WGP = 4
MAX_WAVES_PER_SIMD = 16

DEFAULT_MAX_VGPRS = 128       # kernels whose table row states no occupancy
DEFAULT_MAX_LDS = 32 * 1024

B128_LOADS = ("global_load_b128", "global_load_dwordx4", "buffer_load_b128", "buffer_load_dwordx4")


def fail_usage(msg):
    sys.exit(f"check_code_objects: {msg}")


# ---- variants.def ----

def parse_variants(path):
    """Every X-macro entry of variants.def as (macro, [args])."""
    entries = []
    pattern = re.compile(r"^\s*(R35A_[A-Z0-9_]+)\s*\((.*)\)\s*$")
    with open(path, encoding="utf-8") as f:
        for line in f:
            if line.lstrip().startswith("#"):
                continue
            m = pattern.match(line)
            if m:
                entries.append((m.group(1), [a.strip() for a in m.group(2).split(",")]))
    return entries


def arch_row(entries, arch):
    """The R35A_GPU_ARCH row of an arch (variants/archs.tsv): tuning, unit, cus_per_unit, default_cus, vgprs."""
    for macro, args in entries:
        if macro == "R35A_GPU_ARCH" and args[0] == arch:
            return {"tuning": args[1], "vgprs": int(args[5])}
    raise SystemExit(f"{arch} is not an arch of variants/archs.tsv")


def tuning_of(entries, arch):
    return arch_row(entries, arch)["tuning"]


def waves_on(stated, vgpr_file):
    """The occupancy a row's stated `waves` means on an arch: the same VGPR budget per wave."""
    return max(1, stated * vgpr_file // STATED_VGPR_FILE)


def expected_kernels(entries, family, arch):
    """{kernel name: {"dtype", "waves", "waves_per_wg", "wmma"}} for this family and arch."""
    out = {}
    tuning = tuning_of(entries, arch)
    for macro, args in entries:
        if macro in ("R35A_GPU_ARCH", "R35A_ENCODER_SHAPE"):
            continue   # not kernels
        if macro == "R35A_DECODE_VARIANT":
            fam = "decode"
            v_arch, name, dtype, kv, head, rows, kw, dw, rw, waves, layer, pipe, stages, q = args
            dot = layer == "dot4"   # the 4-row layer: v_dot2 products, no WMMA
            # the products' element type: bf16 queries with an 8-bit cache run f16 products on gfx11
            # (kernels/common/device.h kv8_f16_products: Q scaled per row into f16, K and V converted to f16)
            product = "f16" if dtype == "bf16" and kv != "kv16" else dtype
            info = {"dtype": dtype, "product": product, "waves": int(waves), "waves_per_wg": int(kw) * int(dw) * int(rw),
                    "wmma": not dot, "dot2": dot, "b128": not (dot and kv != "kv16")}
        elif macro == "R35A_ENCODER_VARIANT":
            # kernels/encoder/encoder.hip: R35A_ENCODER_VARIANT(arch, name, dtype, D, rows, KB, NW, WAVES, MAXLEN)
            fam = "encoder"
            v_arch, name, dtype, head, rows, kb, nw, waves, maxlen = args
            info = {"dtype": dtype, "waves": int(waves), "waves_per_wg": int(nw), "wmma": True, "b128": True}
        elif macro == "R35A_ENCODER_TAIL":
            # kernels/encoder/encoder.hip: the tail kernel of a workgroup-wide variant, the same occupancy contract
            fam = "encoder"
            v_arch, name, variant, dtype, head, rows, kb, nw, waves = args
            info = {"dtype": dtype, "waves": int(waves), "waves_per_wg": int(nw), "wmma": True, "b128": True}
        elif macro == "R35A_ENCODER_PAGED":
            # kernels/encoder/encoder.hip: the paged sibling (prefill) of a workgroup-wide variant, the same
            # tiling and occupancy contract, kernels/encoder/prefill_args.h's argument
            fam = "encoder"
            v_arch, name, variant, dtype, head, rows, kb, nw, waves = args
            info = {"dtype": dtype, "waves": int(waves), "waves_per_wg": int(nw), "wmma": True, "b128": True}
        elif macro == "R35A_GENERIC_KERNEL":
            fam = "generic"
            v_arch, name = args[0], args[1]
            info = {"dtype": args[3], "waves": None, "waves_per_wg": None, "wmma": False, "b128": False}
        else:
            # A later family's macro, e.g. R35A_ENCODER_VARIANT(arch, name, dtype, ...): the family is
            # the macro's first word; no occupancy stated unless it has a waves column we know of.
            fam = macro[len("R35A_"):].split("_")[0].lower()
            v_arch, name = args[0], args[1]
            info = {"dtype": args[2] if len(args) > 2 else "", "waves": None, "waves_per_wg": None,
                    "wmma": False, "b128": False}
        if fam == family and v_arch == tuning:
            out[name] = info
    # kernels/decode/decode.hip: every decode code object also holds the split merge of each dtype, launched
    # after a decode variant with splits (128 threads, at least 4 waves per SIMD stated, no LDS).
    if family == "decode" and out:
        for dtype in ("f16", "bf16"):
            out[f"decode_merge_{dtype}"] = {"dtype": dtype, "waves": 4, "waves_per_wg": 4, "wmma": False,
                                            "b128": True}
    return out


# ---- the code object ----

def run_tool(tool, args):
    proc = subprocess.run([tool] + args, capture_output=True, text=True)
    if proc.returncode != 0:
        fail_usage(f"{os.path.basename(tool)} {' '.join(args)} failed: {proc.stderr.strip()}")
    return proc.stdout


def parse_notes(text):
    """(target, [kernel metadata dicts]) from llvm-readelf --notes: the amdhsa YAML, read line by
    line (kernel keys sit at indent 4 under '  - ', nested lists deeper)."""
    target = None
    kernels = []
    current = None
    in_kernels = False
    for line in text.splitlines():
        m = re.match(r"^amdhsa\.target:\s*(\S+)", line)
        if m:
            target = m.group(1).strip("'\"")
            in_kernels = False
            continue
        if re.match(r"^amdhsa\.kernels:", line):
            in_kernels = True
            continue
        if re.match(r"^\S", line):
            in_kernels = False
            continue
        if not in_kernels:
            continue
        m = re.match(r"^  - \.([\w.]+):\s*(.*)$", line)
        if m:
            current = {}
            kernels.append(current)
            current[m.group(1)] = m.group(2).strip()
            continue
        m = re.match(r"^    \.([\w.]+):\s*(.*)$", line)
        if m and current is not None:
            current[m.group(1)] = m.group(2).strip()
            continue
        m = re.match(r"^      - \.([\w.]+):\s*(.*)$", line)      # a new entry of .args
        if m and current is not None:
            current.setdefault("_args", []).append({m.group(1): m.group(2).strip()})
            continue
        m = re.match(r"^        \.([\w.]+):\s*(.*)$", line)
        if m and current is not None and current.get("_args"):
            current["_args"][-1][m.group(1)] = m.group(2).strip()
    return target, kernels


def parse_disassembly(text):
    """{function label: {mnemonic: count}} from llvm-objdump -d --no-show-raw-insn --no-leading-addr."""
    funcs = {}
    current = None
    for line in text.splitlines():
        m = re.match(r"^<([^>]+)>:\s*$", line)
        if m:
            current = funcs.setdefault(m.group(1), {})
            continue
        if current is None or not line.startswith("\t"):
            continue
        code = line.split("//", 1)[0].strip()
        if not code:
            continue
        # VOPD dual issue: "v_dual_x ... :: v_dual_y ..." counts both halves.
        for part in code.split("::"):
            mnemonic = part.split()[0] if part.split() else ""
            if mnemonic:
                current[mnemonic] = current.get(mnemonic, 0) + 1
    return funcs


# ---- occupancy ----

def round_up(x, g):
    return (x + g - 1) // g * g


def waves_by_vgprs(vgprs, file_size):
    granule = VGPR_GRANULE_WAVE32[file_size]
    if vgprs <= 0:
        return MAX_WAVES_PER_SIMD
    return min(MAX_WAVES_PER_SIMD, file_size // round_up(vgprs, granule))


def waves_by_lds(lds, waves_per_wg):
    if lds <= 0:
        return MAX_WAVES_PER_SIMD
    groups = LDS_PER_WGP // round_up(lds, LDS_GRANULE)
    return min(MAX_WAVES_PER_SIMD, groups * waves_per_wg // SIMDS_PER_WGP)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("code_objects", nargs="+", metavar="code_object",
                    help="the family's code objects of the arch (one per compile unit)")
    ap.add_argument("--arch", required=True)
    ap.add_argument("--family", required=True)
    ap.add_argument("--variants", required=True, help="variants/variants.def")
    ap.add_argument("--readelf", default=shutil.which("llvm-readelf-19") or "llvm-readelf")
    ap.add_argument("--objdump", default=shutil.which("llvm-objdump-19") or "llvm-objdump")
    ap.add_argument("--abi", help="a program printing the host's view of the kernel interface "
                    "(tests/hip/kernel_abi.c): args.<name prefix>=<bytes>, threads.<name prefix>=<n>; a "
                    "prefix may be <prefix>*<suffix>")
    args = ap.parse_args()

    abi = {}
    if args.abi:
        for line in subprocess.run([args.abi], capture_output=True, text=True, check=True).stdout.splitlines():
            key, _, value = line.partition("=")
            abi[key.strip()] = int(value)

    def abi_for(kind, name):
        """The host's value of `kind` for kernel `name` (longest matching name prefix, or pattern
        `prefix*suffix`), or None."""
        best = None
        for key, value in abi.items():
            k, _, prefix = key.partition(".")
            head, star, tail = prefix.partition("*")
            match = name.startswith(head) and (not star or (name.endswith(tail) and len(name) >= len(head) + len(tail)))
            if k == kind and match and (best is None or len(prefix) > len(best[0])):
                best = (prefix, value)
        return best[1] if best else None

    entries = parse_variants(args.variants)
    vgpr_file = arch_row(entries, args.arch)["vgprs"]
    expected = expected_kernels(entries, args.family, args.arch)
    failures = []
    notes = []
    want_target = f"amdgcn-amd-amdhsa--{args.arch}"
    kernels, funcs, where = [], {}, {}
    for path in args.code_objects:
        target, unit_kernels = parse_notes(run_tool(args.readelf, ["--notes", path]))
        if target != want_target:
            failures.append(f"{path}: target is {target!r}, expected {want_target!r}")
        for k in unit_kernels:
            if k.get("name") in where:
                failures.append(f"{k.get('name')}: in two code objects ({where[k.get('name')]} and {path})")
            where[k.get("name")] = path
        kernels += unit_kernels
        funcs.update(parse_disassembly(run_tool(args.objdump, ["-d", "--no-show-raw-insn", "--no-leading-addr", path])))

    by_name = {k.get("name"): k for k in kernels}
    if not expected:
        failures.append(f"variants.def lists no {args.family} kernel for {args.arch}")
    for name in sorted(set(expected) - set(by_name)):
        failures.append(f"{name}: in variants.def but not in the code object")
    for name in sorted(set(by_name) - set(expected)):
        failures.append(f"{name}: in the code object but not in variants.def ({args.family}, {args.arch})")
    helpers = sorted(set(funcs) - set(by_name))

    header = ("kernel", "VGPR", "SGPR", "LDS", "scratch", "occ(v/l/want)", "wmma", "b128 ld")
    rows = []
    order = list(expected) + sorted(set(by_name) - set(expected))  # variants.def order, then extras
    for name in (n for n in order if n in by_name):
        k = by_name[name]
        info = expected.get(name, {"dtype": "", "waves": None, "waves_per_wg": None, "wmma": False, "b128": False})
        vgprs = int(k.get("vgpr_count", "0"))
        sgprs = int(k.get("sgpr_count", "0"))
        lds = int(k.get("group_segment_fixed_size", "0"))
        scratch = int(k.get("private_segment_fixed_size", "0"))
        wg = int(k.get("max_flat_workgroup_size", "0"))
        waves_per_wg = info["waves_per_wg"] or max(1, wg // 32)
        counts = funcs.get(name, {})
        wmma = {m: c for m, c in counts.items() if m.startswith("v_wmma_")}
        wmma_total = sum(wmma.values())
        b128 = sum(c for m, c in counts.items() if m in B128_LOADS)
        occ_v = waves_by_vgprs(vgprs, vgpr_file)
        occ_l = waves_by_lds(lds, waves_per_wg)

        def bad(what):
            failures.append(f"{name}: {what}")

        if scratch != 0:
            bad(f"private_segment_fixed_size {scratch} (scratch: register spills or a stack array)")
        if int(k.get("vgpr_spill_count", "0")) != 0:
            bad(f"vgpr_spill_count {k['vgpr_spill_count']}")
        sgpr_spills = int(k.get("sgpr_spill_count", "0"))
        if sgpr_spills > SGPR_SPILL_MAX or (sgpr_spills and scratch != 0):
            bad(f"sgpr_spill_count {sgpr_spills} (at most {SGPR_SPILL_MAX}, into VGPR lanes: scratch 0)")
        elif sgpr_spills:
            notes.append(f"{name}: {sgpr_spills} SGPR(s) spilled into VGPR lanes (no scratch)")
        if k.get("uses_dynamic_stack", "false") != "false":
            bad("uses a dynamic stack")
        if k.get("wavefront_size", "32") != "32":
            bad(f"wavefront_size {k.get('wavefront_size')}, expected 32")
        if lds > LDS_PER_WORKGROUP_MAX:
            bad(f"LDS {lds} bytes above the {LDS_PER_WORKGROUP_MAX} a workgroup can have")
        want = waves_on(info["waves"], vgpr_file) if info["waves"] is not None else None
        if want is not None:
            if occ_v < want:
                bad(f"{vgprs} VGPRs allow {occ_v} waves per SIMD, the variant states {want}")
            if occ_l < want:
                bad(f"LDS {lds} bytes with {waves_per_wg} waves per workgroup allows {occ_l} waves per SIMD, "
                    f"the variant states {want}")
        else:
            if vgprs > DEFAULT_MAX_VGPRS:
                bad(f"{vgprs} VGPRs above the default limit {DEFAULT_MAX_VGPRS} (no occupancy stated)")
            if lds > DEFAULT_MAX_LDS:
                bad(f"LDS {lds} bytes above the default limit {DEFAULT_MAX_LDS} (no occupancy stated)")
        # The host passes one struct by value (hipModuleLaunchKernel kernelParams = {&args}): the
        # kernel must take exactly that, laid out the same (kernels/common/<family>_args.h on both sides).
        kargs = k.get("_args", [])
        host_size = abi_for("args", name)
        if len(kargs) != 1 or kargs[0].get("value_kind") != "by_value" or kargs[0].get("offset") != "0":
            bad(f"kernel arguments {kargs}: expected one by-value struct at offset 0")
        elif host_size is not None and int(kargs[0].get("size", "-1")) != host_size:
            bad(f"argument struct is {kargs[0].get('size')} bytes on the device, {host_size} on the host")
        # The host launches 32 * kw * dw * rw threads (decode) or the generic kernel's fixed count.
        launch_threads = 32 * waves_per_wg if info["waves_per_wg"] else abi_for("threads", name)
        if launch_threads is not None and launch_threads > wg:
            bad(f"launched with {launch_threads} threads but max_flat_workgroup_size is {wg}")
        product = info.get("product", info["dtype"])
        if info["wmma"]:
            want_wmma = f"v_wmma_f32_16x16x16_{product}"
            if wmma.get(want_wmma, 0) == 0:
                bad(f"no {want_wmma} (found {wmma or 'no WMMA'})")
        if info.get("dot2"):
            dot2 = re.compile(rf"v_(dual_)?dot2(acc)?_f32_{product}$")
            if not any(dot2.match(m) for m in counts):
                bad(f"no v_dot2_f32_{product} product (the rows-4 layer)")
            if wmma_total:
                bad(f"{wmma_total} WMMA in a rows-4 kernel (its products are v_dot2)")
        if product != info["dtype"]:   # none of the queries' own type is left
            other = re.compile(rf"v_wmma_f32_16x16x16_{info['dtype']}$|v_(dual_)?dot2(acc)?_f32_{info['dtype']}$")
            left = sorted(m for m in counts if other.match(m))
            if left:
                bad(f"{', '.join(left)} in a kernel whose products are {product}")
        if info["b128"] and b128 == 0:
            bad("no global_load_b128: the KV cache is not read with 128-bit loads")
        rows.append((name, str(vgprs), str(sgprs), str(lds), str(scratch),
                     f"{occ_v}/{occ_l}/{want if want is not None else '-'}", str(wmma_total), str(b128)))

    widths = [max(len(r[i]) for r in rows + [header]) for i in range(len(header))]
    print(f"{len(args.code_objects)} code object(s): {want_target}, {len(by_name)} kernels ({args.family}, {args.arch})")
    print("  ".join(h.ljust(w) if i == 0 else h.rjust(w) for i, (h, w) in enumerate(zip(header, widths))))
    for r in rows:
        print("  ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(r, widths))))
    print("occ = waves per SIMD the VGPRs / the LDS allow, and the variant's stated minimum ('-': none "
          f"stated, defaults VGPR <= {DEFAULT_MAX_VGPRS}, LDS <= {DEFAULT_MAX_LDS})")
    if helpers:
        print(f"non-kernel functions (calls, not inlined): {', '.join(helpers)}")

    for n in notes:
        print(f"note: {n}")
    if failures:
        print(f"\nFAILED: {len(failures)} check(s)")
        for f in failures:
            print(f"  {f}")
        return 1
    print("all checks passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
