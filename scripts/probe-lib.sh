# SPDX-License-Identifier: Apache-2.0
# Sourced by the GPU machine's probe scripts (scripts/probe-ag3.sh, probe-ag4.sh) after they set TGZ (the
# archive's name): the environment of a bench or test run on one shared GPU, and the step/bench helpers.
# step NAME TIMEOUT CMD...: runs CMD under TIMEOUT s into $L/NAME.log unless the call's budget (PROBE_BUDGET
# s) would be passed, notes rc and seconds in $L/summary.txt, and re-archives the logs as $OUT/$TGZ, so a
# killed call still returns them. bench NAME OP TIMEOUT ARGS...: `tdist bench OP` on 8 ranks as a step
# (TDIST: another binary; ITERS: timed calls, 20).
set -uo pipefail
BIN=${TD_GPU_BIN:-.gpubin}
L=$OUT/logs; mkdir -p "$L"
export TD_CACHE_DIR=/tmp/tdist-cache TD_TIMEOUT_MS=${TD_TIMEOUT_MS:-20000} TD_CUDA_DEVICE=0 TD_SYMM_HEAP_SIZE=2G
export TD_TDRUN=$BIN/tdrun TD_BIN_DIR=$BIN TD_TEST_DIR=$BIN TD_SOURCE_DIR=$PWD
export TD_GIT_REV=$(cat "$BIN/REVISION" 2>/dev/null || echo unknown)
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
BUDGET=${PROBE_BUDGET:-540}
T0=$(date +%s)
S=$L/summary.txt
nvidia-smi --query-gpu=name,driver_version,clocks.sm,temperature.gpu --format=csv,noheader > "$S"
step() { local name=$1 to=$2; shift 2
  local t=$(date +%s)
  if (( t - T0 + to > BUDGET )); then echo "$name skipped (budget)" >> "$S"; return; fi
  timeout "$to" "$@" >"$L/$name.log" 2>&1
  echo "$name rc=$? $(( $(date +%s) - t ))s" >> "$S"
  tar -C "$OUT" -czf "$OUT/$TGZ.tmp" logs && mv "$OUT/$TGZ.tmp" "$OUT/$TGZ"; }
bench() { local name=$1 op=$2 to=$3; shift 3
  step "$name" "$to" "${TDIST:-$BIN/tdist}" bench "$op" --backend cuda --ranks 8 --variants none --iters ${ITERS:-20} --warmup 3 \
    --json "$L/$name.json" "$@"; }
ALL="--models all --m 1024,4096,8192"
