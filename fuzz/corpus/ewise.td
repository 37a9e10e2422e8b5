dim M = 6, H = 8
input x : f32[M, H] shard(0)
input r : f32[M, H]
weight g : f32[H]
u = mul(silu(add(x, r)), scale(x, 0.5))
output y = rmsnorm(all_gather(u), g, 1e-5)
