# Tensor-parallel attention projections (the attention itself is left out):
# QKV projection as AllGather + GEMM on the sequence-sharded input (heads
# sharded over ranks: wqkv column-sharded), and the output projection as
# GEMM + AllReduce (wo row-sharded, partial sums all-reduced).
# Dims: Llama-2-7B attention (H = 4096, QKV = 3H) scaled by 1/4 for CPU.
dim M = 512, H = 1024, QKV = 3072
input  x    : bf16[M, H]    shard(0)
weight wqkv : bf16[H, QKV]  shard(1)
weight wo   : bf16[QKV, H]  shard(0)
qkv = matmul(all_gather(x), wqkv)
output out = all_reduce(matmul(qkv, wo))
