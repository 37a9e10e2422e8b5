#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# GPU machine of several GPUs (device tool), one rank per GPU, from
# .gpubin-mg: the schedule choices of the fused operators side by side in one
# run each -- gemm_ar two-shot vs all-push (TD_OPS_FUSED_AR), ag_gemm one
# GEMM launch vs one per source (TD_OPS_FUSED_AG_GEMMS 1 / 8) at small parts.
# Logs and JSON under $OUT/cmp (one archive); prints one line per side.
set -uo pipefail
BIN=${TD_GPU_BIN:-.gpubin-mg}
OUT=${OUT:-out}; W=/tmp/cmp; rm -rf "$W"; mkdir -p "$W" "$OUT"
. scripts/gpu-env.sh >/dev/null 2>&1
export TD_CACHE_DIR=${TD_CACHE_DIR:-/tmp/tdist-cache} TD_TIMEOUT_MS=${TD_TIMEOUT_MS:-20000}
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
NG=$(nvidia-smi -L | grep -c '^GPU')
brief() { grep -E "^\| " "$1" | grep -v -E -- "---|^\| case|gemm only|baseline" | awk -F'|' '{printf "%s|%s|%s|%s\n", $2, $3, $5, $9}' | sed 's/  */ /g'; }
b() { local name=$1; shift
  timeout 150 "$BIN/tdist" bench "$@" --backend cuda --ranks "$NG" --warmup 3 --iters 20 --json "$W/$name.json" > "$W/$name.log" 2>&1
  echo "== $name rc=$?"; brief "$W/$name.log"; }
for ar in two-shot all-push; do
  TD_OPS_FUSED_AR=$ar b "gemm_ar_$ar" gemm_ar --models all --m 1024,4096,8192 --variants none
done
for g in 1 8; do
  TD_OPS_FUSED_AG_GEMMS=$g b "ag_gemm_g$g" ag_gemm --models all --m 1024,2048 --variants none
done
tar czf "$OUT/cmp.tgz" -C "$W" .
