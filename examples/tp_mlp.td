# Megatron-style sequence-parallel MLP: all_gather the sequence-sharded
# activations, up-projection with column-sharded w1, GELU, down-projection
# with row-sharded w2, reduce_scatter back to sequence shards.
#
# Dims: Llama-2-7B's MLP has H = 4096 and F = 11008. For `make run` on a CPU
# both are scaled by 1/4 (H = 1024, F = 2752) and the tokens M = 512 (one
# short sequence), so one launch on 4 CPU ranks takes tens of milliseconds.
# 2752 = 11008 / 4 does not divide into tiles of powers of two, as in the
# real model. Override with --dims M=...,H=...,F=...
dim M = 512, H = 1024, F = 2752
input  x  : bf16[M, H]  shard(0)
weight w1 : bf16[H, F]  shard(1)
weight w2 : bf16[F, H]  shard(0)
y = reduce_scatter(matmul(gelu(matmul(all_gather(x), w1)), w2))
output y
