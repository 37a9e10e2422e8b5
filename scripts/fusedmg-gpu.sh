#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# GPU machine (device tool, kind nvidia-h200-x4), the fused operators across
# GPUs: the fused GPU tests, then `tdist bench` of ag_gemm / gemm_rs /
# gemm_ar with one rank per GPU (all GPUs, or TD_FMG_RANKS) (fused vs NCCL + cuBLAS) and ag_gemm with 8
# ranks sharing GPU 0 (direct GEMMs vs the copying baseline). Binaries from
# scripts/fusedmg-prep.sh; carry .gpubin-fusedmg and .debs:
#   . scripts/gpu-env.sh >/dev/null 2>&1; scripts/fusedmg-gpu.sh [tests,multi,shared,shareddirect,sharedcopy,ar]
# Logs and JSON go to $OUT (one archive); the output is a compact summary.
set -uo pipefail
STEPS=${1:-tests,multi,shared}
OUT=${OUT:-out/fusedmg}
BIN=${TD_GPU_BIN:-.gpubin-fusedmg}
mkdir -p "$OUT/f"
export NCCL_NVLS_ENABLE=0 NVSHMEM_DISABLE_NVLS=1
export TD_CACHE_DIR=${TD_CACHE_DIR:-/tmp/tdist-cache} TD_TIMEOUT_MS=${TD_TIMEOUT_MS:-20000}
export TD_GIT_REV=$(cat "$BIN/REVISION" 2>/dev/null || echo unknown)
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
nvidia-smi --query-gpu=index,name,clocks.sm,temperature.gpu --format=csv,noheader
has() { case ",$STEPS," in *",$1,"*) return 0;; esac; return 1; }
# one line per side: case | side | variant | p50 ms | speedup | vs nccl
brief() { grep -E "^\| " "$1" | grep -v -E -- "---|^\| case" | awk -F'|' '{printf "%s|%s|%s|%s|%s|%s\n", $2, $3, $4, $5, $8, $9}' | sed 's/  */ /g'; }
bench() { # name timeout op args...
  local name=$1 to=$2 op=$3; shift 3
  timeout "$to" "$BIN/tdist" bench "$op" --backend cuda --iters ${TD_ITERS:-10} --json "$OUT/f/$name.json" "$@" \
    > "$OUT/f/$name.log" 2>&1
  echo "== $name rc=$?"; brief "$OUT/f/$name.log"; grep -iE "error|fail" "$OUT/f/$name.log" | head -3
}
if has tests; then
  timeout ${TD_TEST_TIMEOUT:-170} env TD_GPU_TEST_FILTER="${TD_GPU_TEST_FILTER:-test_fused*}" "$BIN/ops_gpu_test" \
    > "$OUT/f/ops_gpu_test.log" 2>&1
  echo "== ops_gpu_test rc=$?"; grep -E "^\[  |FAIL|rror|off by|SKIP" "$OUT/f/ops_gpu_test.log" | head -30
fi
M="--models llama3.1-70b,check --m 8192 --variants fused"
NG=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU'); RM=${TD_FMG_RANKS:-$NG}
if has multi; then # one rank per GPU, every GPU of the machine
  for op in ag_gemm gemm_rs gemm_ar; do bench ${op}_r$RM 90 $op --ranks $RM $M; done
fi
S="--models ${TD_SHARED_MODELS:-llama3.1-8b,llama3.1-70b,check} --m ${TD_SHARED_M:-1024,8192} --variants fused"
if has shared; then # direct (zero-copy) GEMMs, the default on a shared GPU
  TD_CUDA_DEVICE=0 bench ag_gemm_r8_shared 90 ag_gemm --ranks 8 $S
fi
if has shareddirect; then # one GEMM launch per rank (no batched launch), for the comparison
  TD_CUDA_DEVICE=0 TD_OPS_FUSED_AG=direct bench ag_gemm_r8_shared_direct 90 ag_gemm --ranks 8 $S
fi
if has sharedcopy; then # the copy path on the same GPU, for the comparison
  TD_CUDA_DEVICE=0 TD_OPS_FUSED_AG=copy bench ag_gemm_r8_shared_copy 90 ag_gemm --ranks 8 $S
fi
if has ar; then
  bench all_reduce_r$RM 60 all_reduce --ranks $RM --sizes 64K,4M,64M
fi
tar czf /tmp/fusedmg.tgz -C "$OUT" f && rm -rf "${OUT:?}/f" && mv /tmp/fusedmg.tgz "$OUT/fusedmg.tgz"
