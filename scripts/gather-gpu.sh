#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# GPU machine, ONE call: the zero-copy ag_gemm (GATHER hook) checked and
# measured, and the GPU tests of the changes not yet run on a GPU (the
# executor's root-cause agreement, exec_gemm_queue_test). Lanes not in the
# default list: rs (gemm_rs AUTO against pull), kg (gemm_rs and gemm_ar as
# AUTO runs them, kgather where it pays), kgtile (kgather's tile and store
# policy knobs), kgtests (the routed KGATHER tile tests and the operators'
# kgather cases), optests (the fused operators' GPU tests). Binaries from
# scripts/gpu-final-prep.sh (.gpubin); carry .gpubin and .debs:
#   . scripts/gpu-env.sh >/dev/null 2>&1; scripts/gather-gpu.sh
# Lanes (each a list of steps under `timeout`): on a machine of >= 4 GPUs
# they run at once, each lane on its own GPU (CUDA_VISIBLE_DEVICES), the
# bench lane alone on its GPU so its timings see no other work; with fewer
# GPUs one after the other on GPU 0. Logs and JSON to $OUT.
set -uo pipefail
OUT=${OUT:-out/gather}
BIN=${TD_GPU_BIN:-.gpubin}
mkdir -p "$OUT"
export TD_CACHE_DIR=${TD_CACHE_DIR:-/tmp/tdist-cache} TD_TIMEOUT_MS=${TD_TIMEOUT_MS:-20000}
export TD_TDRUN=$BIN/tdrun TD_BIN_DIR=$BIN TD_TEST_DIR=$BIN TD_SOURCE_DIR=$PWD
export TD_GIT_REV=$(cat "$BIN/REVISION" 2>/dev/null || echo unknown)
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
NG=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU')
t0=$(date +%s)
nvidia-smi --query-gpu=index,name,driver_version,clocks.sm,temperature.gpu --format=csv,noheader
run() { # name timeout cmd...: one step, its rc and seconds appended to the lane's summary
  local name=$1 to=$2; shift 2
  local s=$(date +%s)
  timeout "$to" "$@" >"$OUT/$name.log" 2>&1
  local rc=$?
  echo "$(printf '%-28s rc=%-4s %4ss' "$name" "$rc" "$(( $(date +%s) - s ))")" >> "$OUT/summary.$LANE"
}
bench() { # name op args...: tdist bench with 8 ranks sharing this lane's GPU 0
  local name=$1 op=$2; shift 2
  TD_CUDA_DEVICE=0 TD_SYMM_HEAP_SIZE=${TD_SYMM_HEAP_SIZE:-2G} run "$name" "${TD_BENCH_TIMEOUT:-150}" "${BIN_TDIST:-$BIN/tdist}" bench "$op" \
    --backend cuda --ranks 8 --iters ${TD_ITERS:-10} --warmup 3 --json "$OUT/$name.json" "$@"
}
lane_bench() {
  # AUTO (gather where the parts are equal multiples of 128 rows) against the baseline, every model
  bench ag_auto ag_gemm --variants none --models all --m 1024,4096,8192
  # the previous choices at the same shapes, for the comparison: copy + one GEMM at M = 1024, batched above
  [ "${TD_GATHER_COMPARE:-1}" = 1 ] || return 0 # TD_GATHER_COMPARE=0 skips them
  TD_OPS_FUSED_AG=copy bench ag_copy1024 ag_gemm --variants none --models all --m 1024
  TD_OPS_FUSED_AG=batched bench ag_batched ag_gemm --variants none --models all --m 4096,8192
}
lane_rs() { # gemm_rs on a shared GPU: AUTO (kgather where it pays) against pull, every model
  bench rs_auto gemm_rs --variants none --models all --m 1024,4096,8192
  TD_OPS_FUSED_RS=pull bench rs_pull gemm_rs --variants none --models all --m 1024,4096,8192
}
lane_kg() { # gemm_rs and gemm_ar on a shared GPU as AUTO runs them (kgather, one launch for every rank)
  bench kg_rs gemm_rs --variants none --models all --m 1024,4096,8192
  bench kg_ar gemm_ar --variants none --models all --m 1024,4096,8192
}
lane_kgtile() { # the two gemm_rs cases AUTO runs on 128x128 (1.10x and 1.21x of GEMM only), on 128x256 instead
  TD_OPS_FUSED_TILE=128x256 bench kg_rs256 gemm_rs --variants none --models llama3.1-8b,qwen2-72b --m 1024
  TD_OPS_FUSED_TILE=128x256 bench kg_ar256 gemm_ar --variants none --models llama3.1-8b,qwen2-72b --m 1024
  # gemm_ar's n copies stored with an L2 evict-first policy, against lane kg's kg_ar (no hint)
  TD_OPS_FUSED_BCAST_HINT=evict_first bench kg_ar_ef gemm_ar --variants none --models all --m 1024,4096,8192
}
lane_ag1() { # ag_gemm on a shared GPU: AUTO (gather, one launch for every rank) against each rank's gather launch
  bench ag1_auto ag_gemm --variants none --models all --m 1024,4096,8192
  TD_OPS_FUSED_AG=gather bench ag1_rank ag_gemm --variants none --models all --m 1024,4096,8192
  # gemm_rs's two M = 1024 cases under the kgather tile rule that now prefers 128x256
  bench kg_rs1024 gemm_rs --variants none --models llama3.1-8b,qwen2-72b --m 1024
}
lane_ag1r() { # lane ag1's two ag_gemm benches in the other order (each rank's launch first)
  TD_OPS_FUSED_AG=gather bench ag1_rank ag_gemm --variants none --models all --m 1024,4096,8192
  bench ag1_auto ag_gemm --variants none --models all --m 1024,4096,8192
}
lane_ar4() { # BCAST with half the tile staged (128x256 at 4 stages): its tile tests, gemm_ar AUTO, the operator tests
  run gemm_hooks_test 120 "$BIN/gemm_hooks_test"
  bench kg_ar4 gemm_ar --variants none --models all --m 1024,4096,8192
  TD_GPU_TEST_FILTER='test_fused_kgather' TD_GPU_TEST_VERBOSE=1 run ops_gpu_kgather 160 "$BIN/ops_gpu_test"
}
lane_fin() { # the session's last state: the operator tests it changed, AUTO's M = 1024 tile picks, ag_gemm's 8b tile
  TD_GPU_TEST_FILTER='test_fused_ag_one' TD_GPU_TEST_VERBOSE=1 run ops_gpu_ag_one 60 "$BIN/ops_gpu_test"
  TD_GPU_TEST_FILTER='test_fused_kgather' TD_GPU_TEST_VERBOSE=1 run ops_gpu_kgather 150 "$BIN/ops_gpu_test"
  bench fin_rs gemm_rs --variants none --models llama3.1-8b,qwen2-72b --m 1024
  bench fin_ar gemm_ar --variants none --models llama3.1-8b,qwen2-72b --m 1024
  bench fin_ag ag_gemm --variants none --models llama3.1-8b --m 1024
  TD_OPS_FUSED_TILE=128x256 bench fin_ag256 ag_gemm --variants none --models llama3.1-8b --m 1024
}
lane_agtests() { # the GATHER | NSPLIT tile and the operator's one launch for every rank
  run gemm_args_test 60 "$BIN/gemm_args_test"
  run gemm_hooks_test 120 "$BIN/gemm_hooks_test"
  TD_GPU_TEST_FILTER='test_fused_ag_one' TD_GPU_TEST_VERBOSE=1 run ops_gpu_ag_one 150 "$BIN/ops_gpu_test"
  TD_GPU_TEST_FILTER='test_fused_direct' TD_GPU_TEST_VERBOSE=1 run ops_gpu_direct 200 "$BIN/ops_gpu_test"
}
lane_optests() { # the fused operators' GPU tests, the two groups at once (two processes on the GPU)
  TD_GPU_TEST_FILTER='test_fused_direct' TD_GPU_TEST_VERBOSE=1 run ops_gpu_direct 300 "$BIN/ops_gpu_test" &
  TD_GPU_TEST_FILTER='test_fused' TD_GPU_TEST_VERBOSE=1 run ops_gpu_fused 300 "$BIN/ops_gpu_test" &
  run gemm_args_test 60 "$BIN/gemm_args_test"
  run gemm_hooks_test 120 "$BIN/gemm_hooks_test"
  wait
}
lane_kgtests() { # the tile's routed KGATHER and the operators' kgather cases
  run gemm_args_test 60 "$BIN/gemm_args_test"
  run gemm_hooks_test 120 "$BIN/gemm_hooks_test"
  TD_GPU_TEST_FILTER='test_fused_kgather' TD_GPU_TEST_VERBOSE=1 run ops_gpu_kgather 200 "$BIN/ops_gpu_test"
}
lane_split() { # kgather's split tail: its tile tests, then gemm_rs and gemm_ar (AUTO: split) against TD_OPS_FUSED_TAIL=none
  run gemm_args_test 60 "$BIN/gemm_args_test"
  run gemm_hooks_test 120 "$BIN/gemm_hooks_test"
  grep -q "FAILED" "$OUT/gemm_hooks_test.log" && return 0 # a broken split: no benches
  bench sp_rs gemm_rs --variants none --models all --m 1024,4096,8192
  TD_OPS_FUSED_TAIL=none bench sp_rs_none gemm_rs --variants none --models all --m 1024,4096,8192
  bench sp_ar gemm_ar --variants none --models all --m 1024,4096,8192
}
lane_ab() { # the split tail against none, alternating (A B A B), where it splits most: M = 1024 of 8b and qwen2
  for rep in 1 2; do
    for op in gemm_rs gemm_ar; do
      TD_ITERS=50 bench ab_${op}_split$rep $op --variants none --models llama3.1-8b,qwen2-72b --m 1024
      TD_ITERS=50 TD_OPS_FUSED_TAIL=none bench ab_${op}_none$rep $op --variants none --models llama3.1-8b,qwen2-72b --m 1024
    done
  done
}
lane_defer() { # gemm_ar's deferred second half against the default (wait), alternating, where 128x256 runs
  for rep in 1 2; do
    TD_ITERS=30 bench df_wait$rep gemm_ar --variants none --models llama3.1-8b,qwen2-72b,llama3.1-70b --m 1024,4096
    TD_ITERS=30 TD_OPS_FUSED_BCAST_HALF=defer bench df_defer$rep gemm_ar --variants none \
      --models llama3.1-8b,qwen2-72b,llama3.1-70b --m 1024,4096
  done
}
lane_pace() { # gemm_ar's paced copies against wait and defer, alternating (A B C A B C), where 128x256 runs
  for rep in 1 2; do
    for half in wait defer pace; do
      TD_ITERS=30 TD_OPS_FUSED_BCAST_HALF=$half bench pc_${half}$rep gemm_ar --variants none \
        --models llama3.1-8b,qwen2-72b,llama3.1-70b,gpt3-175b --m 1024,4096,8192
    done
  done
}
lane_waves() { # the split over two waves (TD_OPS_FUSED_TAIL=split2) against the last wave's (split), alternating,
  # where the last wave holds more than half the SMs' tiles (405b, 70b, gpt3 at M = 1024; 8b at M = 4096) or split2
  # plans otherwise (8b M = 1024)
  for rep in 1 2; do
    for op in gemm_rs gemm_ar; do
      TD_ITERS=30 bench wv_${op}_split$rep $op --variants none --models llama3.1-8b,llama3.1-70b,llama3.1-405b,gpt3-175b --m 1024
      TD_ITERS=30 TD_OPS_FUSED_TAIL=split2 bench wv_${op}_split2_$rep $op --variants none \
        --models llama3.1-8b,llama3.1-70b,llama3.1-405b,gpt3-175b --m 1024
    done
  done
  TD_ITERS=20 bench wv_rs_4096 gemm_rs --variants none --models llama3.1-8b --m 4096
  TD_ITERS=20 TD_OPS_FUSED_TAIL=split2 bench wv_rs2_4096 gemm_rs --variants none --models llama3.1-8b --m 4096
}
lane_gap() { # the paced copies' gap: the previous build (.gpubin-prev: 3 k-blocks, no closing in short units)
  # against this one at 3 (closing to fit), 2 and 4, alternating, gemm_ar where it misses (M = 1024, 4096);
  # the tile tests first
  run gemm_args_test 60 "$BIN/gemm_args_test"
  run gemm_hooks_test 120 "$BIN/gemm_hooks_test"
  grep -q "FAILED" "$OUT/gemm_hooks_test.log" && return 0
  for rep in 1 2; do
    [ -x .gpubin-prev/tdist ] && (BIN=.gpubin-prev; TD_ITERS=30 bench gp_prev$rep gemm_ar --variants none \
      --models llama3.1-8b,qwen2-72b,llama3.1-70b,gpt3-175b --m 1024,4096)
    for g in 3 2 4; do
      TD_ITERS=30 TD_OPS_FUSED_BCAST_PACE=$g bench gp_g$g$rep gemm_ar --variants none \
        --models llama3.1-8b,qwen2-72b,llama3.1-70b,gpt3-175b --m 1024,4096
    done
  done
}
lane_fin10() { # the tenth session's last state: the operators' kgather tests, gemm_ar (paced, closing gap) and
  # ag_gemm on every model
  TD_GPU_TEST_FILTER='test_fused_kgather' TD_GPU_TEST_VERBOSE=1 run ops_gpu_kgather 260 "$BIN/ops_gpu_test"
  TD_ITERS=20 bench f10_ar gemm_ar --variants none --models all --m 1024,4096,8192
  bench f10_ag ag_gemm --variants none --models all --m 1024,4096,8192
}
lane_fin10b() { # a second round at the tenth session's last revision: gemm_rs and gemm_ar AUTO, the GPU main job
  TD_ITERS=20 bench f10_rs gemm_rs --variants none --models all --m 1024,4096,8192
  TD_ITERS=20 bench f10_ar2 gemm_ar --variants none --models all --m 1024,4096,8192
  run main_job_cuda 90 "$BIN/tdist" run examples/tp_mlp.td --ranks 4 --backend cuda --check --iters 5 \
    --json "$OUT/main_cuda.json"
}
lane_agtile() { # ag_gemm's gather tile at M = 1024 where it misses: AUTO's pick against 128x128 and 128x256, twice
  for rep in 1 2; do
    for t in auto 128x128 128x256; do
      if [ "$t" = auto ]; then
        TD_ITERS=20 bench at_auto$rep ag_gemm --variants none --models llama3.1-8b,qwen2-72b,gpt3-175b,llama3.1-70b --m 1024
      else
        TD_ITERS=20 TD_OPS_FUSED_TILE=$t bench at_$t$rep ag_gemm --variants none \
          --models llama3.1-8b,qwen2-72b,gpt3-175b,llama3.1-70b --m 1024
      fi
    done
  done
}
lane_agvar() { # ag_gemm's variants at M = 1024 where gather misses: AUTO against batched, direct and copy, twice
  for rep in 1 2; do
    for v in auto batched direct gather-one; do
      TD_ITERS=20 TD_OPS_FUSED_AG=$v bench av_$v$rep ag_gemm --variants none \
        --models llama3.1-8b,qwen2-72b,gpt3-175b --m 1024
    done
  done
}
lane_tilescan() { # the plain tile against cuBLAS at ag_gemm's per-rank shapes, 8 at once (the ranks sharing the
  # GPU: gemm_bench --streams 8), then the one-launch shapes of every rank's columns alone; cuBLASLt's pick per shape
  run tile_streams8 200 "$BIN/gemm_bench" --layout kn --streams 8 --iters 30 --json "$OUT/tile_streams8.json" \
    --shapes 1024x1792x4096,1024x3696x8192,1024x6144x12288,1024x3584x8192,4096x3696x8192,8192x1792x4096
  run tile_one 120 "$BIN/gemm_bench" --layout kn --iters 30 --json "$OUT/tile_one.json" \
    --shapes 1024x14336x4096,1024x29568x8192,1024x1792x4096,1024x3696x8192
}
variants() { # prefix models ms variant...: ag_gemm under each variant (TD_OPS_FUSED_AG, and after a colon
  # TD_OPS_FUSED_TILE), 20 iterations, alternating twice; logs <prefix>_<variant><round>
  local prefix=$1 models=$2 ms=$3; shift 3
  for rep in 1 2; do
    for v in "$@"; do
      local mode=${v%%:*} name="${prefix}_${v/:/_}$rep"
      ( # a tile only where named: an empty TD_OPS_FUSED_TILE is not "unset"
        if [ "$mode" != "$v" ]; then export TD_OPS_FUSED_TILE=${v#*:}; else unset TD_OPS_FUSED_TILE; fi
        TD_ITERS=20 TD_OPS_FUSED_AG=$mode bench "$name" ag_gemm --variants none --models "$models" --m "$ms"
      )
    done
  done
}
lane_t256() { # the 256x128 tiles (cuBLASLt's pick at M = 1024, N = 29568): the tile tests (GATHER's halves from
  # two sources), the operators' gather cases, the plain tile at the one-launch shapes, then ag_gemm forced onto it
  run gemm_args_test 60 "$BIN/gemm_args_test"
  run gemm_hooks_test 150 "$BIN/gemm_hooks_test"
  TD_GPU_TEST_FILTER='test_fused_ag_one,test_fused_ag_share' TD_GPU_TEST_VERBOSE=1 run ops_gpu_t256 240 \
    "$BIN/ops_gpu_test"
  run t256_one 150 "$BIN/gemm_bench" --layout kn --iters 50 --json "$OUT/t256_one.json" \
    --shapes 1024x14336x4096,1024x28672x8192,1024x29568x8192,1024x49152x12288,8192x3584x8192,4096x3584x8192
  variants t256 llama3.1-8b,qwen2-72b,gpt3-175b,llama3.1-70b ${TD_AGSB_M:-1024} auto gather-one:256x128 gather:256x128 gather-one:128x128
}
lane_fin12() { # the twelfth session's AUTO (parts of 128 rows: one launch of 256x128 tiles): the operator tests,
  # then ag_gemm on every model twice, against the previous AUTO (each rank's launch: gather) at M = 1024 between
  TD_GPU_TEST_FILTER='test_fused_ag_one,test_fused_ag_share' TD_GPU_TEST_VERBOSE=1 run ops_gpu_fin12 240 \
    "$BIN/ops_gpu_test"
  bench f12_ag1 ag_gemm --variants none --models all --m 1024,4096,8192
  TD_OPS_FUSED_AG=gather bench f12_prev ag_gemm --variants none --models all --m 1024
  bench f12_ag2 ag_gemm --variants none --models all --m 1024,4096,8192
}
lane_g1big() { # the one launch (gather-one) at parts of 512 and 1024 rows on 256x128 and 128x256 tiles against
  # AUTO (each rank's launch, or batched), alternating twice; then M = 1024's one launch without its split tail
  run lt_names 60 "$BIN/gemm_bench" --layout kn --iters 10 --shapes 1024x14336x4096,4096x3696x8192 # cuBLASLt's names
  variants g1b llama3.1-8b,llama3.1-70b,llama3.1-405b,qwen2-72b,gpt3-175b 4096,8192 auto gather-one:256x128 gather-one:128x256
  for rep in 1 2; do
    for t in split none; do
      TD_ITERS=20 TD_OPS_FUSED_TAIL=$t bench "g1t_$t$rep" ag_gemm --variants none --models llama3.1-8b,gpt3-175b \
        --m 1024
      TD_ITERS=20 TD_OPS_FUSED_TAIL=$t TD_OPS_FUSED_AG=gather-one TD_OPS_FUSED_TILE=128x128 bench "g1t128_$t$rep" \
        ag_gemm --variants none --models llama3.1-8b --m 1024
    done
  done
}
lane_fin13a() { # the thirteenth session's AUTO (one launch of 256x128 tiles on every part of a multiple of 128
  # rows) and GATHER's maps fenced once: the tile tests, the operators' one-launch tests, ag_gemm on every model
  run gemm_hooks_test 150 "$BIN/gemm_hooks_test"
  TD_GPU_TEST_FILTER='test_fused_ag_one,test_fused_ag_share,test_fused_auto' TD_GPU_TEST_VERBOSE=1 \
    run ops_gpu_fin13 240 "$BIN/ops_gpu_test"
  bench f13_ag1 ag_gemm --variants none --models all --m 1024,2048,4096,8192
}
lane_fin13b() { # the direct / gather operator tests, each rank's launch at M = 2048 (the previous AUTO there) and
  # the one launch on 128x128 tiles at 8b M = 1024 (1.18-1.21x of the GEMM alone with a fence per tile), then the
  # second full ag_gemm run
  TD_GPU_TEST_FILTER='test_fused_direct' TD_GPU_TEST_VERBOSE=1 run ops_gpu_direct 220 "$BIN/ops_gpu_test"
  TD_OPS_FUSED_AG=gather bench f13_prev ag_gemm --variants none --models all --m 2048
  TD_ITERS=20 TD_OPS_FUSED_AG=gather-one TD_OPS_FUSED_TILE=128x128 bench f13_one128 ag_gemm --variants none \
    --models llama3.1-8b,qwen2-72b --m 1024
  bench f13_ag2 ag_gemm --variants none --models all --m 1024,2048,4096,8192
}
lane_fence() { # GATHER's A maps fenced once at the start (start, the new default) against before each tile (tile,
  # the code before), alternating twice in one run: AUTO on every model, and the one launch on 128x128 tiles
  run gemm_args_test 60 "$BIN/gemm_args_test"
  TD_GPU_TEST_FILTER='test_fused_ag_one' TD_GPU_TEST_VERBOSE=1 run ops_gpu_fence 120 "$BIN/ops_gpu_test"
  for rep in 1 2; do
    for fe in tile start; do
      TD_ITERS=20 TD_OPS_FUSED_MAP_FENCE=$fe bench "fe_$fe$rep" ag_gemm --variants none --models all \
        --m 1024,2048,4096,8192
      TD_ITERS=20 TD_OPS_FUSED_MAP_FENCE=$fe TD_OPS_FUSED_AG=gather-one TD_OPS_FUSED_TILE=128x128 \
        bench "fe128_$fe$rep" ag_gemm --variants none --models llama3.1-8b,qwen2-72b --m 1024
    done
  done
}
lane_c2() { # 256x128 tiles in clusters of 2 in the one launch (B multicast to the pair): the tile tests, the
  # operators' one-launch tests, the plain tiles at the one launch's shapes, then ag_gemm AUTO against it
  run gemm_hooks_test 150 "$BIN/gemm_hooks_test"
  TD_GPU_TEST_FILTER='test_fused_ag_one' TD_GPU_TEST_VERBOSE=1 run ops_gpu_c2 150 "$BIN/ops_gpu_test"
  run c2_plain 200 "$BIN/gemm_bench" --layout kn --iters 20 --configs 256x128x4,128x256x4 --json "$OUT/c2_plain.json" \
    --shapes 4096x49152x12288,1024x49152x12288,8192x28672x8192,4096x14336x4096,2048x29568x8192,8192x29568x8192
  variants c2 all 1024,2048,4096,8192 auto gather-one:256x128c2
}
lane_fin13c() { # the one launch in clusters of 2 on parts of >= 256 rows (AUTO), KGATHER's unused fields not read:
  # the tile tests, the operators' tests, then ag_gemm on every model twice
  run gemm_hooks_test 150 "$BIN/gemm_hooks_test"
  TD_GPU_TEST_FILTER='test_fused_direct,test_fused_ag_one,test_fused_auto' TD_GPU_TEST_VERBOSE=1 \
    run ops_gpu_fin13c 300 "$BIN/ops_gpu_test"
  TD_ITERS=20 bench f13c_ag1 ag_gemm --variants none --models all --m 1024,2048,4096,8192
  TD_ITERS=20 bench f13c_ag2 ag_gemm --variants none --models all --m 1024,2048,4096,8192
}
lane_x256() { # 128x256 tiles in clusters of 2 in the one launch against AUTO (256x128, c2 on parts of >= 256 rows)
  run gemm_hooks_test 150 "$BIN/gemm_hooks_test"
  TD_GPU_TEST_FILTER='test_fused_ag_one' TD_GPU_TEST_VERBOSE=1 run ops_gpu_x256 150 "$BIN/ops_gpu_test"
  variants x256 all 1024,2048,4096,8192 auto gather-one:128x256c2
}
lane_fin14() { # the fourteenth session: the tile tests (GATHER / NSPLIT's loader with the B source and A rows once
  # a tile), the operators' one-launch and AUTO tests (128x256 c2 at a long K), then ag_gemm at M = 1024 and 2048:
  # AUTO against the old tile forced (256x128 c1 at 1024, c2 at 2048) on the models it changes and against the
  # previous build's AUTO ($BIN/tdist-old, rev c1a7e2b, if carried), alternating twice; the 128x128 one launch old
  # and new; then the direct / gather operator tests
  run gemm_hooks_test 150 "$BIN/gemm_hooks_test"
  TD_GPU_TEST_FILTER='test_fused_ag_one,test_fused_auto' TD_GPU_TEST_VERBOSE=1 run ops_gpu_fin14 240 "$BIN/ops_gpu_test"
  for rep in 1 2; do
    TD_ITERS=20 bench "f14_auto$rep" ag_gemm --variants none --models all --m 1024,2048
    TD_ITERS=20 TD_OPS_FUSED_AG=gather-one TD_OPS_FUSED_TILE=256x128c1 bench "f14_old1024_$rep" ag_gemm \
      --variants none --models llama3.1-70b,llama3.1-405b,gpt3-175b --m 1024
    TD_ITERS=20 TD_OPS_FUSED_AG=gather-one TD_OPS_FUSED_TILE=256x128c2 bench "f14_old2048_$rep" ag_gemm \
      --variants none --models llama3.1-405b,gpt3-175b --m 2048
    [ -x "$BIN/tdist-old" ] && TD_ITERS=20 BIN_TDIST=$BIN/tdist-old bench "f14_prev$rep" ag_gemm --variants none \
      --models all --m 1024,2048
    for b in tdist tdist-old; do
      [ -x "$BIN/$b" ] && TD_ITERS=20 TD_OPS_FUSED_AG=gather-one TD_OPS_FUSED_TILE=128x128 BIN_TDIST=$BIN/$b \
        bench "f14_one128_${b#tdist}$rep" ag_gemm --variants none --models llama3.1-8b,qwen2-72b --m 1024
    done
  done
  TD_GPU_TEST_FILTER='test_fused_direct' TD_GPU_TEST_VERBOSE=1 run ops_gpu_direct 220 "$BIN/ops_gpu_test"
}
lane_fin14b() { # the split tile's k-range warp-uniform too: the tile and operator tests it touches (GATHER's and
  # KGATHER's split tails), then ag_gemm / gemm_rs / gemm_ar against the builds before ($BIN/tdist-mid, rev 89ad47b:
  # the B source once a tile; $BIN/tdist-old, rev c1a7e2b), alternating twice
  run gemm_args_test 60 "$BIN/gemm_args_test"
  run gemm_hooks_test 150 "$BIN/gemm_hooks_test"
  TD_GPU_TEST_FILTER='test_fused_ag_one,test_fused_auto,test_fused_kgather' TD_GPU_TEST_VERBOSE=1 \
    run ops_gpu_fin14b 330 "$BIN/ops_gpu_test"
  for rep in 1 2; do
    for b in tdist tdist-mid tdist-old; do
      [ -x "$BIN/$b" ] || continue
      TD_ITERS=20 BIN_TDIST=$BIN/$b bench "g14_ag_${b#tdist}$rep" ag_gemm --variants none --models all \
        --m 1024,2048,4096,8192
    done
    for b in tdist tdist-old; do
      for op in gemm_rs gemm_ar; do
        TD_ITERS=20 BIN_TDIST=$BIN/$b bench "g14_${op}_${b#tdist}$rep" $op --variants none --models all \
          --m 1024,4096,8192
      done
    done
  done
}
lane_t14() { # lane fin14b's tests alone (its bench run outlived the call and its test logs did not come back)
  run gemm_args_test 40 "$BIN/gemm_args_test"
  run gemm_hooks_test 60 "$BIN/gemm_hooks_test"
  TD_GPU_TEST_FILTER='test_fused_ag_one,test_fused_kgather' TD_GPU_TEST_VERBOSE=1 run ops_gpu_t14 200 "$BIN/ops_gpu_test"
}
lane_agsplit() { # GATHER's split tail: the tile tests, the operator's gather-one / gather-share tests
  run gemm_args_test 60 "$BIN/gemm_args_test"
  run gemm_hooks_test 150 "$BIN/gemm_hooks_test"
  TD_GPU_TEST_FILTER='test_fused_ag_one,test_fused_ag_share' TD_GPU_TEST_VERBOSE=1 run ops_gpu_agsplit 240 \
    "$BIN/ops_gpu_test"
}
lane_agsb() { # ag_gemm at M = 1024 where gather misses: AUTO against gather-one and gather-share (their last wave
  # split), each on AUTO's tile and on 128x256, alternating twice
  variants asb llama3.1-8b,qwen2-72b,gpt3-175b,llama3.1-70b ${TD_AGSB_M:-1024} auto gather-one gather-one:128x256 gather-share gather-share:128x256
}
lane_split2() { # the tile tests (the split tail's, the deferred half's), then the operators' kgather tests
  run gemm_args_test 60 "$BIN/gemm_args_test"
  run gemm_hooks_test 120 "$BIN/gemm_hooks_test"
  TD_GPU_TEST_FILTER='test_fused_kgather' TD_GPU_TEST_VERBOSE=1 run ops_gpu_kgather 300 "$BIN/ops_gpu_test"
}
lane_direct() { # the direct / gather operator tests (passed on rev ef39d93; ~170 s)
  TD_GPU_TEST_FILTER='test_fused_direct' TD_GPU_TEST_VERBOSE=1 run ops_gpu_direct 220 "$BIN/ops_gpu_test"
}
lane_tests() {
  run gemm_args_test 60 "$BIN/gemm_args_test"
  run gemm_hooks_test 120 "$BIN/gemm_hooks_test"
  TD_GPU_TEST_FILTER='test_fused_direct,test_fused' TD_GPU_TEST_VERBOSE=1 run ops_gpu_fused 240 "$BIN/ops_gpu_test"
}
lane_exec() {
  for t in exec_gemm_queue_test exec_random_test exec_deadline_test exec_copy_engine_test; do run "$t" 150 "$BIN/$t"; done
}
lane_more() {
  run gemm_tile_test 200 "$BIN/gemm_tile_test"
  run dev_gpu_test 120 "$BIN/dev_gpu_test"
  run main_job_cuda 90 "$BIN/tdist" run examples/tp_mlp.td --ranks 4 --backend cuda --check --iters 5 \
    --json "$OUT/main_cuda.json"
}
LANES=${TD_GATHER_LANES:-bench tests exec more}
if [ "$NG" -ge 4 ]; then
  i=0
  for l in $LANES; do
    ( export CUDA_VISIBLE_DEVICES=$i LANE=$l; "lane_$l" ) &
    i=$((i + 1))
  done
  wait
else
  for l in $LANES; do ( export LANE=$l; "lane_$l" ); done
fi
# Then, on a machine of >= 4 GPUs and within TD_GATHER_TOTAL seconds (default
# 570), the fused operators across GPUs: test_fused_gpus4 on all four and,
# beside it, test_fused_gpus2 on GPUs 2 and 3 (correctness only; each names
# every case as it starts, so a stall shows where).
left=$(( ${TD_GATHER_TOTAL:-570} - ($(date +%s) - t0) ))
if [ "$NG" -ge 4 ] && [ "$left" -gt 40 ] && [ -z "${TD_GATHER_NO_MULTI:-}" ]; then
  ( export LANE=multi TD_GPU_TEST_VERBOSE=1
    TD_GPU_TEST_FILTER=test_fused_gpus4 run fused_gpus4 $((left - 10)) "$BIN/ops_gpu_test" &
    CUDA_VISIBLE_DEVICES=2,3 TD_GPU_TEST_FILTER=test_fused_gpus2 run fused_gpus2 $((left - 10)) "$BIN/ops_gpu_test" &
    wait )
  LANES="$LANES multi"
fi
# Then, with what is left, the GEMM operators with one rank per GPU against
# NCCL + cuBLAS (TD_GATHER_MG_OPS, default none).
for op in ${TD_GATHER_MG_OPS:-}; do
  left=$(( ${TD_GATHER_TOTAL:-570} - ($(date +%s) - t0) ))
  [ "$NG" -ge 2 ] && [ "$left" -gt 40 ] || break
  LANE=mg TD_SYMM_HEAP_SIZE=${TD_SYMM_HEAP_SIZE:-16G} run "mg_$op" $((left - 15)) "$BIN/tdist" bench "$op" \
    --backend cuda --ranks "$NG" --iters 20 --warmup 3 --variants none --models all --m 1024,4096,8192 \
    --json "$OUT/mg_$op.json"
  case " $LANES " in *" mg "*) ;; *) LANES="$LANES mg";; esac
done
for l in $LANES; do echo "== lane $l"; cat "$OUT/summary.$l" 2>/dev/null; done
for f in "$OUT"/*.log; do # the failures' tails
  n=$(basename "$f" .log)
  grep -q "rc=0 " <(grep -h "^$n " "$OUT"/summary.* 2>/dev/null) || { echo "--- $n:"; tail -n 12 "$f"; }
done
for b in av_auto1 av_batched1 av_direct1 av_gather-one1 av_auto2 av_batched2 av_direct2 av_gather-one2 at_auto1 at_128x1281 at_128x2561 at_auto2 at_128x1282 at_128x2562 f10_rs f10_ar2 f10_ar f10_ag gp_prev1 gp_g31 gp_g21 gp_g41 gp_prev2 gp_g32 gp_g22 gp_g42 pc_wait1 pc_defer1 pc_pace1 pc_wait2 pc_defer2 pc_pace2 wv_gemm_rs_split1 wv_gemm_rs_split2_1 wv_gemm_ar_split1 wv_gemm_ar_split2_1 wv_gemm_rs_split2 wv_gemm_rs_split2_2 wv_gemm_ar_split2 wv_gemm_ar_split2_2 wv_rs_4096 wv_rs2_4096 df_wait1 df_defer1 df_wait2 df_defer2 ab_gemm_rs_split1 ab_gemm_rs_none1 ab_gemm_ar_split1 ab_gemm_ar_none1 ab_gemm_rs_split2 ab_gemm_rs_none2 ab_gemm_ar_split2 ab_gemm_ar_none2 sp_rs sp_rs_none sp_ar sp_ar_none fin_rs fin_ar fin_ag fin_ag256 kg_ar4 ag1_auto ag1_rank kg_rs1024 ag_auto ag_copy1024 ag_batched rs_auto rs_pull kg_rs kg_ar kg_rs256 kg_ar256 kg_ar_ef mg_ag_gemm mg_gemm_rs mg_gemm_ar; do
  echo "== $b"; grep -E "^\| " "$OUT/$b.log" 2>/dev/null | grep -v -- "---" | cut -c1-150
done
grep -E "^\[  (PASSED|FAILED) |^\[  FAILED  \]|^\[       OK \]|^\[  SKIPPED \]|schedule \"" "$OUT"/*.log | head -60
for f in fused_gpus4 fused_gpus2; do [ -f "$OUT/$f.log" ] && { echo "-- $f last cases:"; grep -E "^case " "$OUT/$f.log" | tail -n 3; }; done
# the device tool returns only a few files: one archive of everything
tar czf /tmp/gather-logs.tgz -C "$OUT" . && rm -rf "${OUT:?}"/* && mv /tmp/gather-logs.tgz "$OUT/logs.tgz"
echo "== $(( $(date +%s) - t0 )) s, rev $TD_GIT_REV"
