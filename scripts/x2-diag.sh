. scripts/gpu-env.sh >/dev/null 2>&1
export TD_CACHE_DIR=/tmp/tdc TD_TIMEOUT_MS=8000 TD_GPU_TEST_VERBOSE=1 TD_GPU_TEST_FILTER=test_fused_gpus2
timeout -s INT ${TD_DIAG_TIMEOUT:-100} .gpubin-fusedmg/ops_gpu_test > $OUT/gpus2.out 2> $OUT/gpus2.err; echo rc=$?
tail -5 $OUT/gpus2.err; tail -20 $OUT/gpus2.out
