input x : bf16[10, 7] shard(1)
t = all_to_all(x, 0)
p = matmul(t, x, transpose_b)
output y = all_reduce(matmul(gelu(t), p, transpose_a))
