#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# GPU machine, one call (eighteenth session): the floor of the GEMM hooks' cost
# on a one-wave launch (bench/gemm/hook_floor.cu: satisfied wait before the
# first dependent load, release raise after the last store, no GEMM) beside
# the M = 128 tile's own hook overheads and phase stamps (gemm_bench), so the
# issue's 2% goal at M = 128 can be set against what any kernel pays.
#   . scripts/gpu-env.sh >/dev/null 2>&1; scripts/floor-gpu.sh
# Second call: the relaxed early read (XV 512 = the old acquire front, timed beside it), its tests first:
#   PROBE_STEPS="hooks tile front128 stamps front_big" scripts/floor-gpu.sh
# The warp-3 front's stall (docs/perf.md, eighteenth session, call 6), with binaries built by
# `TD_FINAL_W3=1 sh scripts/gpu-final-prep.sh` (.gpubin-w3: the warp-3 front the default) carried too:
#   PROBE_STEPS="w3diag w3hooks" scripts/floor-gpu.sh
# w3diag runs each hooked shape / configuration alone under a 25 s limit, line-buffered, so a stall names its case.
W3=${TD_W3_BIN:-.gpubin-w3}
set -uo pipefail
OUT=${OUT:-out/floor}
TGZ=floor.tgz
. "$(dirname "$0")/probe-lib.sh"
for s in ${PROBE_STEPS:-floor26 gemm128 floor26b stamps floor80}; do
  case $s in
    floor26*) step $s 60 "$BIN/hook_floor" --us 26 --pairs 200 --json "$L/$s.json" ;;
    floor80) step $s 60 "$BIN/hook_floor" --us 80 --pairs 100 --json "$L/$s.json" ;;
    gemm128) step $s 120 "$BIN/gemm_bench" --hooks --iters 200 --shapes 128x3584x8192 --configs 64x64x8 \
      --hook-modes wait,raise,both,wait_gpu,raise_gpu,both_gpu --json "$L/$s.json" ;;
    hooks) step $s 170 "$BIN/gemm_hooks_test" ;;
    tile) step $s 120 "$BIN/gemm_tile_test" ;;
    front128) step $s 120 "$BIN/gemm_bench" --iters 200 --shapes 128x3584x8192 --configs 64x64x8 \
      --hook-modes both,wait,raise,wait_gpu,both_gpu --hook-variants 0,512 --json "$L/$s.json" ;;
    front_big) step $s 120 "$BIN/gemm_bench" --hooks --iters 100 --shapes 8192x3584x8192,1024x3584x8192 \
      --configs 128x256x4,128x224x5 --hook-modes both,wait --json "$L/$s.json" ;;
    w3diag) step $s 200 bash -c 'for c in "8192x3584x8192 128x256x4" "1024x3584x8192 128x224x5" \
        "1024x3584x8192 128x128x6" "128x3584x8192 128x256x4" "128x3584x8192 64x64x8"; do set -- $c
        echo "== $1 $2"; timeout 25 stdbuf -oL '"$W3"'/gemm_bench --hooks --iters 10 --shapes $1 --configs $2 \
          --hook-modes both 2>&1 | grep -v "^|"; echo "rc=${PIPESTATUS[0]}"; done' ;;
    w3hooks) step $s 170 "$W3/gemm_hooks_test" ;;
    stamps) step $s 60 "$BIN/gemm_bench" --shapes 128x3584x8192 --configs 64x64x8 --stamps 30 ;;
    *) echo "unknown step $s" >> "$S" ;;
  esac
done
nvidia-smi --query-gpu=clocks.sm,temperature.gpu --format=csv,noheader >> "$S"
cat "$S"
