input p : f16[6, 5] partial(sum)
output y = reduce_scatter(scale(p, 2), 1)
