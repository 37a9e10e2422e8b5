#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# GPU machine with several GPUs (nvidia-h200-x4): a short probe of what runs
# there today from prebuilt binaries (scripts/gpu-final-prep.sh into
# $TD_GPU_BIN): the topology, a quick peer-copy bandwidth through PyTorch,
# the kernel queue's test on the last GPU in the background (with its own
# timing), `tdist bench` with 2 ranks on 2 GPUs, the nccl transport with one
# process per GPU under tdrun, and PyTorch's NCCL operators under torchrun.
#   . scripts/gpu-env.sh && scripts/gpu-multi-probe.sh
set -uo pipefail
OUT=${OUT:-out/probe}
BIN=${TD_GPU_BIN:-.gpubin-x}
mkdir -p "$OUT"
export TD_CACHE_DIR=/tmp/tdist-cache TD_TIMEOUT_MS=20000 LD_LIBRARY_PATH=/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
export NCCL_NVLS_ENABLE=0 NVSHMEM_DISABLE_NVLS=1 TORCH_SYMM_MEM_DISABLE_MULTICAST=1
echo "rev $(cat $BIN/REVISION)"; t0=$(date +%s)
NG=$(nvidia-smi -L | wc -l); LAST=$((NG - 1))
nvidia-smi topo -m 2>&1 | tee "$OUT/topo.txt" | head -12
nvidia-smi --query-gpu=index,name,driver_version,clocks.max.sm,power.limit --format=csv,noheader
python3 -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda, "nccl", torch.cuda.nccl.version())'
# the queue test alone on the last GPU, meanwhile the rest uses GPUs 0..1
( CUDA_VISIBLE_DEVICES=$LAST timeout 200 stdbuf -oL "$BIN/exec_gemm_queue_test" 2>&1 | while IFS= read -r l; do echo "$(( $(date +%s) - t0 ))s $l"; done > "$OUT/queue_test.log" ) &
QPID=$!
python3 - <<'PY' 2>&1 | tee "$OUT/p2p_torch.txt"
import torch, statistics
n = torch.cuda.device_count()
nb = 256 << 20
def bw(src, dst, reps=10):
    a = torch.empty(nb, dtype=torch.uint8, device=f"cuda:{src}")
    b = torch.empty(nb, dtype=torch.uint8, device=f"cuda:{dst}")
    for _ in range(3): b.copy_(a, non_blocking=True)
    torch.cuda.synchronize(src); torch.cuda.synchronize(dst)
    ts = []
    with torch.cuda.device(src):
        for _ in range(reps):
            e0 = torch.cuda.Event(enable_timing=True); e1 = torch.cuda.Event(enable_timing=True)
            e0.record(); b.copy_(a, non_blocking=True); e1.record(); e1.synchronize()
            ts.append(e0.elapsed_time(e1) / 1e3)
    return nb / statistics.median(ts) / 1e9
for s in range(n):
    print("src %d: " % s + " ".join("->%d %.0f GB/s" % (d, bw(s, d)) for d in range(n) if d != s), flush=True)
PY
echo "== tdist bench, 2 ranks on GPUs 0,1 ($(( $(date +%s) - t0 )) s)"
for op in ag_gemm gemm_rs; do
  CUDA_VISIBLE_DEVICES=0,1 timeout 90 "$BIN/tdist" bench $op --backend cuda --ranks 2 --iters 5 --warmup 2 \
    --models llama3.1-70b --m 8192 --json "$OUT/bench2_$op.json" > "$OUT/bench2_$op.log" 2>&1
  echo "-- $op rc=$?"; grep -E "^\||rror" "$OUT/bench2_$op.log" | grep -v -- "---" | cut -c1-200 | head -14
done
echo "== nccl transport, tdrun -n 2, one process per GPU ($(( $(date +%s) - t0 )) s)"
CUDA_VISIBLE_DEVICES=0,1 timeout 90 "$BIN/tdrun" -n 2 --timeout 80 "$BIN/dev_nccl_test" > "$OUT/nccl2.log" 2>&1
echo "rc=$?"; grep -E "PASSED|FAILED|OK|rror" "$OUT/nccl2.log" | head -20
echo "== torchrun 2 GPUs ($(( $(date +%s) - t0 )) s)"
for op in ag_gemm gemm_rs; do
  CUDA_VISIBLE_DEVICES=0,1 timeout 90 python3 -m torch.distributed.run --nproc-per-node 2 bench/torch_ops.py $op --models llama3.1-70b --tokens 8192 \
    --iters 10 --json "$OUT/torch2_$op.json" > "$OUT/torch2_$op.log" 2>&1
  echo "-- $op rc=$?"; tail -8 "$OUT/torch2_$op.log" | cut -c1-200
done
wait $QPID
echo "== queue test ($(( $(date +%s) - t0 )) s):"; grep -E "RUN|OK|FAIL|PASS|rror" "$OUT/queue_test.log" | tail -25
