#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Checks that every sm_90 GEMM kernel issues its TMA loads from uniform
registers. A UTMALDG whose operands ptxas could not prove warp-uniform is
wrapped in an ELECT loop that moves them over with predicated R2URs (the
"waterfall"). GATHER | NSPLIT's loader ran that way in every k-block, with an
integer division beside it, and the one launch on 128x128 tiles was 1.29x of
the GEMM alone instead of 1.12-1.15x (H200, 2026-12-03, docs/perf.md
"Fourteenth session"). Nothing at run time shows it, so CI reads the SASS.

usage: sass_tma_uniform.py CUOBJDUMP LIBRARY [MIN_KERNELS]
Exit 0 when at least MIN_KERNELS (default 20) kernels issue UTMALDG and none
of their UTMALDGs sits behind a waterfall; 1 otherwise, naming each kernel.
"""
import os
import re
import shutil
import subprocess
import sys

INSTR = re.compile(r"/\*[0-9a-f]{4,}\*/\s+(.*?);")
WATERFALL = re.compile(r"^@!?U?P\d+\s+R2UR\b")


def kernels(sass):
    """(name, [instruction text]) for each function in cuobjdump -sass output."""
    for part in re.split(r"\n\s*Function : ", sass)[1:]:
        name, body = part.split("\n", 1)
        yield name.strip(), [m.group(1).strip() for m in INSTR.finditer(body)]


def non_uniform_loads(instrs):
    """UTMALDGs with a predicated R2UR between them and the ELECT that opens their loop."""
    bad = 0
    for i, ins in enumerate(instrs):
        if not ins.startswith("UTMALDG"):
            continue
        j = i - 1
        while j >= 0 and "ELECT" not in instrs[j] and i - j < 24:
            j -= 1
        if any(WATERFALL.match(x) for x in instrs[max(j, 0):i]):
            bad += 1
    return bad


def main(argv):
    if len(argv) < 3:
        print(__doc__.strip(), file=sys.stderr)
        return 2
    tool, lib = argv[1], argv[2]
    need = int(argv[3]) if len(argv) > 3 else 20
    if not tool or not (shutil.which(tool) or tool.startswith("/")):
        print("sass_tma_uniform: cuobjdump not found (CMake's TD_CUOBJDUMP is empty). "
              "scripts/deps.sh installs it (pip wheel nvidia-cuda-cuobjdump into .tools/); "
              "or put the CUDA toolkit's cuobjdump on PATH and re-run cmake.", file=sys.stderr)
        return 1
    env = dict(os.environ)
    here = os.path.dirname(shutil.which(tool) or tool)
    if os.path.exists(os.path.join(here, "nvdisasm")):  # cuobjdump -sass runs nvdisasm: the one beside it
        env["NVDISASM_PATH"] = here
    r = subprocess.run([tool, "-sass", lib], capture_output=True, text=True, env=env)
    if r.returncode != 0:
        print(f"sass_tma_uniform: {tool} -sass {lib} failed (exit {r.returncode}): {r.stderr.strip()[-400:]}",
              file=sys.stderr)
        return 1
    out = r.stdout
    checked, failed = 0, []
    for name, instrs in kernels(out):
        loads = sum(1 for x in instrs if x.startswith("UTMALDG"))
        if not loads:
            continue
        checked += 1
        bad = non_uniform_loads(instrs)
        if bad:
            failed.append(f"{name}: {bad} of {loads} UTMALDG behind an ELECT/R2UR waterfall")
    print(f"sass_tma_uniform: {checked} kernels with TMA loads checked in {lib}")
    for f in failed:
        print("  non-uniform TMA loads: " + f)
    if checked < need:
        print(f"sass_tma_uniform: expected at least {need} sm_90 kernels with UTMALDG, found {checked}",
              file=sys.stderr)
        return 1
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
