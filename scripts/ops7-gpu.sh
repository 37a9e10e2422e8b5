#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# GPU machine (device tool), issue 7: the tensor-parallel operators' GPU test
# and benches from binaries prebuilt on the dev box (scripts/ops7-prep.sh;
# carry .gpubin-ops7 and .debs):
#   . scripts/gpu-env.sh >/dev/null 2>&1; scripts/ops7-gpu.sh explore|full
# explore: test_fused*, then ag_gemm / gemm_rs with each GEMM split and tile
#          (TD_OPS_FUSED_AG_GEMMS, TD_OPS_FUSED_TILE) on a few shapes, and
#          all_reduce: to choose the defaults.
# full:    the whole ops_gpu_test, `tdist bench ag_gemm|gemm_rs|gemm_ar` over
#          every model x M in {1024,4096,8192} + the check case, all_reduce
#          8K..64M, all with --json, and bench/torch_ops.py's one-GPU sides.
# Logs and JSON go to $OUT; the last lines are a compact summary.
set -uo pipefail
MODE=${1:-full}
OUT=${OUT:-out/ops7}
BIN=${TD_GPU_BIN:-.gpubin-ops7}
mkdir -p "$OUT"
export TD_CACHE_DIR=${TD_CACHE_DIR:-/tmp/tdist-cache} TD_TIMEOUT_MS=${TD_TIMEOUT_MS:-20000}
export TD_GIT_REV=$(cat "$BIN/REVISION" 2>/dev/null || echo unknown)
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
ITERS=${TD_ITERS:-20} WARM=${TD_WARMUP:-5}
nvidia-smi --query-gpu=name,driver_version,clocks.sm,temperature.gpu --format=csv,noheader
# one line per side: case | side | variant | p50 ms | speedup
brief() { grep -E "^\| " "$1" | grep -v -E -- "---|^\| case" | awk -F'|' '{printf "%s|%s|%s|%s|%s\n", $2, $3, $4, $5, $8}' | sed 's/  */ /g'; }
bench() { # name op args...
  local name=$1 op=$2; shift 2
  timeout ${TD_BENCH_TIMEOUT:-120} "$BIN/tdist" bench "$op" --backend cuda --ranks 8 --iters "$ITERS" --warmup "$WARM" \
    --json "$OUT/$name.json" "$@" > "$OUT/$name.log" 2>&1
  echo "== $name rc=$?"; brief "$OUT/$name.log"
}
if [ "$MODE" = explore ]; then
  timeout 240 env TD_GPU_TEST_FILTER='test_fused*' "$BIN/ops_gpu_test" > "$OUT/test_fused.log" 2>&1
  echo "== test_fused* rc=$?"; grep -E "^\[  |FAIL|rror|off by" "$OUT/test_fused.log" | head -20
  ITERS=10 WARM=3
  S="--variants none --models llama3.1-8b,llama3.1-405b --m 1024,8192"
  for g in 1 3 8; do TD_OPS_FUSED_AG_GEMMS=$g bench ag_g$g ag_gemm $S; done
  for t in 128x256 128x128; do TD_OPS_FUSED_TILE=$t bench ag_g3_$t ag_gemm $S; done
  for t in auto 128x256 128x128c2; do
    [ $t = auto ] && unset TD_OPS_FUSED_TILE || export TD_OPS_FUSED_TILE=$t
    bench rs_$t gemm_rs $S
  done
  unset TD_OPS_FUSED_TILE
  ITERS=20 bench ar all_reduce --variants none --sizes 8K,64K,512K,1M,2M,4M,64M
else
timeout ${TD_TEST_TIMEOUT:-420} env TD_GPU_TEST_FILTER="${TD_GPU_TEST_FILTER:-}" "$BIN/ops_gpu_test" > "$OUT/ops_gpu_test.log" 2>&1
echo "== ops_gpu_test ${TD_GPU_TEST_FILTER:-} rc=$?"; grep -E "^\[  |FAIL|rror|off by" "$OUT/ops_gpu_test.log" | head -20
for op in ag_gemm gemm_rs gemm_ar; do bench bench_$op $op --variants none --models all; done
ITERS=20 WARM=5 bench bench_all_reduce all_reduce --sizes 8K,64K,512K,4M,64M
if [ -x /opt/torch/.venv/bin/python3 ]; then
  for op in ag_gemm gemm_rs gemm_ar all_reduce; do
    timeout ${TD_TORCH_TIMEOUT:-200} /opt/torch/.venv/bin/python3 bench/torch_ops.py $op --ranks 8 \
      --iters "${TD_TORCH_ITERS:-$ITERS}" --warmup 2 --json "$OUT/torch_$op.json" > "$OUT/torch_$op.log" 2>&1
    echo "== torch $op rc=$?"; grep -E "^\| " "$OUT/torch_$op.log" | grep -v -E -- "---|^\| case" | sed 's/  */ /g' | tail -60
  done
fi
fi
# one archive: the device tool brings back only a few files
tar czf /tmp/ops7-all.tgz -C "$OUT" . && rm -rf "${OUT:?}"/* && mv /tmp/ops7-all.tgz "$OUT/ops7-all.tgz"
