# SPDX-License-Identifier: Apache-2.0
"""PyTorch baseline of the tensor-parallel operators (`tdist bench ag_gemm|
gemm_rs|gemm_ar|all_reduce`): the same shapes, sharded the same way, timed
the same way (CUDA events, warm-up, median and p99 of the slowest rank).

Sides per case:
  sequential   all_gather_into_tensor + matmul (ag_gemm); matmul +
               reduce_scatter_tensor (gemm_rs); matmul + all_reduce (gemm_ar);
               all_reduce (all_reduce)
  fused        torch.distributed._symmetric_memory.fused_all_gather_matmul /
               fused_matmul_reduce_scatter where the installed PyTorch has them

It needs one GPU per rank (NCCL refuses two ranks on one GPU), so on the
one-GPU machine it reports "not run" and exits 0. Launch:
    torchrun --nproc-per-node 8 bench/torch_ops.py ag_gemm --json out.json
Shapes: (N, K) of LLaMA-3.1-8B/70B/405B, Qwen2-72B, GPT-3-175B with
M in {1024, 4096, 8192}, the correctness case M = 4091 x ranks, N = 5120,
K = 1024; all_reduce sizes 8 KiB .. 64 MiB. M is padded up to a multiple of
the rank count here (PyTorch's collectives need equal parts); the JSON says so.
"""
import argparse
import json
import os
import statistics
import sys

MODELS = {
    "llama3.1-8b": (14336, 4096),
    "llama3.1-70b": (28672, 8192),
    "llama3.1-405b": (53248, 16384),
    "qwen2-72b": (29568, 8192),
    "gpt3-175b": (49152, 12288),
}
SIZES = [8 << 10, 64 << 10, 512 << 10, 4 << 20, 64 << 20]


def parse_args():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("op", choices=["ag_gemm", "gemm_rs", "gemm_ar", "all_reduce"])
    p.add_argument("--m", default="1024,4096,8192")
    p.add_argument("--models", default="all")
    p.add_argument("--iters", type=int, default=50)
    p.add_argument("--warmup", type=int, default=5)
    p.add_argument("--dtype", default="bf16", choices=["bf16", "f16", "f32"])
    p.add_argument("--json")
    return p.parse_args()


def time_it(torch, dist, fn, iters, warmup):
    """Per call: barrier, CUDA events around fn; the slowest rank's time."""
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(iters):
        dist.barrier()
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        end.synchronize()
        t = torch.tensor([start.elapsed_time(end) / 1e3], device="cuda")
        dist.all_reduce(t, op=dist.ReduceOp.MAX)
        times.append(t.item())
    times.sort()
    return statistics.median(times), times[min(len(times) - 1, int(0.99 * (len(times) - 1) + 0.999))]


def shapes(args, world):
    if args.op == "all_reduce":
        return [("%d B" % s, None, None, None, s) for s in SIZES]
    out = []
    for name, (n, k) in MODELS.items():
        if args.models != "all" and name not in args.models:
            continue
        for m in (int(x) for x in args.m.split(",")):
            out.append((name, m, n, k, None))
    out.append(("check 4091xR", 4091 * world, 5120, 1024, None))
    return out


def main():
    args = parse_args()
    env = {"note": ""}
    try:
        import torch
        import torch.distributed as dist
    except ImportError:
        print("torch_ops.py: PyTorch is not installed: not run")
        return 0
    world = int(os.environ.get("WORLD_SIZE", "1"))
    if not torch.cuda.is_available() or torch.cuda.device_count() < world or world < 2:
        print("torch_ops.py: needs one GPU per rank and >= 2 ranks (NCCL refuses two ranks on one GPU): "
              "not run (%d GPU(s), WORLD_SIZE %d)" % (torch.cuda.device_count() if torch.cuda.is_available() else 0,
                                                      world))
        return 0
    rank = int(os.environ["RANK"])
    torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", rank)))
    dist.init_process_group("nccl")
    dt = {"bf16": torch.bfloat16, "f16": torch.float16, "f32": torch.float32}[args.dtype]
    env.update(torch=torch.__version__, cuda=torch.version.cuda, nccl=".".join(map(str, torch.cuda.nccl.version())),
               gpu=torch.cuda.get_device_name(), ranks=world)
    symm = None
    try:
        import torch.distributed._symmetric_memory as symm  # noqa: F811
        group_name = dist.group.WORLD.group_name
        symm.enable_symm_mem_for_group(group_name)
    except Exception as e:  # older PyTorch: no fused ops
        env["note"] = "no symmetric-memory fused ops: %s" % e
        symm = None
    results = []
    for name, m, n, k, size in shapes(args, world):
        case = {"case": name, "M": m, "N": n, "K": k, "bytes": size, "sides": []}
        if args.op == "all_reduce":
            x = torch.randn(size // torch.tensor([], dtype=dt).element_size(), device="cuda", dtype=dt)
            p50, p99 = time_it(torch, dist, lambda: dist.all_reduce(x), args.iters, args.warmup)
            case["sides"].append({"side": "torch all_reduce", "p50_s": p50, "p99_s": p99})
            results.append(case)
            continue
        mp = (m + world - 1) // world * world
        case["M_padded"] = mp
        if args.op == "ag_gemm":
            a = torch.randn(mp // world, k, device="cuda", dtype=dt)
            b = torch.randn(k, n // world, device="cuda", dtype=dt) / k ** 0.5
            g = torch.empty(mp, k, device="cuda", dtype=dt)

            def seq():
                dist.all_gather_into_tensor(g, a)
                return g @ b
            fused = (lambda: symm.fused_all_gather_matmul(a, [b], gather_dim=0, group_name=group_name)) \
                if symm is not None and hasattr(symm, "fused_all_gather_matmul") else None
        else:
            a = torch.randn(mp, k // world, device="cuda", dtype=dt)
            b = torch.randn(k // world, n, device="cuda", dtype=dt) / k ** 0.5
            if args.op == "gemm_rs":
                out = torch.empty(mp // world, n, device="cuda", dtype=dt)

                def seq():
                    dist.reduce_scatter_tensor(out, a @ b)
                fused = (lambda: symm.fused_matmul_reduce_scatter(a, b, "sum", scatter_dim=0,
                                                                  group_name=group_name)) \
                    if symm is not None and hasattr(symm, "fused_matmul_reduce_scatter") else None
            else:
                def seq():
                    c = a @ b
                    dist.all_reduce(c)
                fused = None
        gemm_only = (lambda: g @ b) if args.op == "ag_gemm" else (lambda: a @ b)
        for side, fn in (("torch sequential", seq), ("torch gemm only", gemm_only), ("torch fused", fused)):
            if fn is None:
                continue
            try:
                p50, p99 = time_it(torch, dist, fn, args.iters, args.warmup)
                case["sides"].append({"side": side, "p50_s": p50, "p99_s": p99})
            except Exception as e:
                case["sides"].append({"side": side, "error": str(e)})
        results.append(case)
        if rank == 0:
            for s in case["sides"]:
                print("| %s M=%s | %s | %s | %s |" % (name, m, s["side"],
                                                      "%.3f" % (s["p50_s"] * 1e3) if "p50_s" in s else "n/a",
                                                      "%.3f" % (s["p99_s"] * 1e3) if "p99_s" in s else s.get("error")))
            sys.stdout.flush()
    if rank == 0 and args.json:
        with open(args.json, "w") as f:
            json.dump({"operator": args.op, "environment": env, "results": results}, f, indent=1)
    dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())
