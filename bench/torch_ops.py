# SPDX-License-Identifier: Apache-2.0
"""PyTorch baseline of the tensor-parallel operators (`tdist bench ag_gemm|
gemm_rs|gemm_ar|all_reduce`): the same shapes, sharded the same way, timed
the same way (CUDA events, warm-up, median and p99 of the slowest rank).

Sides per case:
  sequential   all_gather_into_tensor + matmul (ag_gemm); matmul +
               reduce_scatter_tensor (gemm_rs); matmul + all_reduce (gemm_ar);
               all_reduce (all_reduce)
  fused        torch.ops.symm_mem.fused_all_gather_matmul /
               fused_matmul_reduce_scatter (symmetric memory, registered by
               torch.distributed._symmetric_memory) where the installed
               PyTorch has them

With one GPU per rank (NCCL refuses two ranks on one GPU) launch it with
    torchrun --nproc-per-node 4 bench/torch_ops.py ag_gemm --json out.json
(NCCL_NVLS_ENABLE=0 and TORCH_SYMM_MEM_DISABLE_MULTICAST=1 are set here
unless given: NVLink multicast stays off). Each case is timed as in `tdist
bench`: a barrier, CUDA events around the call, the slowest rank's time
(all_reduce MAX of the per-rank times), p50 and p99 over --iters calls.
On one GPU (no torchrun, or WORLD_SIZE 1) it runs the same per-rank work of
--ranks ranks from one process instead, which is what `tdist bench --backend
cuda` measures there (ranks sharing the GPU); per case, timed as one step
(CUDA events around all ranks' work, p50 and p99 over --iters steps):
  1proc sequential  rank after rank on one stream: ag_gemm: torch.cat of every
                    rank's A rows (the gather's copies) then matmul with that
                    rank's B; gemm_rs: every rank's partial matmul, then per
                    rank the sum of its rows of every partial (torch.stack +
                    sum: the reduce-scatter); gemm_ar: the same sums into one
                    full C, then a copy of it per rank (RS + AG); all_reduce:
                    the same on vectors.
  1proc streams     the same work, rank r's on CUDA stream r (collective steps
                    after every rank's GEMM, as the data dependencies need).
  gemm only         the ranks' matmuls alone (the GEMM time the operators are
                    held to).
Shapes: (N, K) of LLaMA-3.1-8B/70B/405B, Qwen2-72B, GPT-3-175B with
M in {1024, 4096, 8192}, the correctness case M = 4091 x ranks, N = 5120,
K = 1024; all_reduce sizes 8 KiB .. 64 MiB. M is padded up to a multiple of
the rank count here (PyTorch's collectives need equal parts); the JSON says so.
Under torchrun give M as --tokens (torchrun's own parser takes --m as an
ambiguous prefix of its options); --m is the same option for one-GPU use.
Options follow `tdist bench`: each given once; --tokens/--m (whole numbers,
no K suffix), --models and --no-check apply to the GEMM operators only,
--sizes to all_reduce only; --ranks 1..64, default 2 as `tdist bench` (so a
side-by-side run on defaults compares the same rank count); under torchrun
the rank count is WORLD_SIZE, and a --ranks that differs is refused.
Every argument is checked before torch is imported. Exit status: 0 measured;
2 a bad argument (one line naming the option and what it allows); 3 "not
run": nothing measured (PyTorch not installed, or the GPUs the mode needs
are not there), so a scripted run does not count it as a measurement; any
other non-zero: a failure during the run.
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
SIZES = "8K,64K,512K,4M,64M"  # tdist bench all_reduce's default


NOT_RUN = 3  # exit status when nothing was measured (no PyTorch, or not the GPUs the mode needs)


def parse_size(text):
    """'64K' -> 65536 (K, M, G suffixes and an optional B, as tdist's --sizes); None when malformed or < 1."""
    t = text.strip()
    if t[-1:] in ("B", "b"):
        t = t[:-1]
    mul = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}.get(t[-1:].upper(), 1)
    digits = t[:-1] if mul > 1 else t
    if not digits.isdigit() or not digits.isascii():
        return None
    v = int(digits) * mul
    return v if v >= 1 else None


def int_list(p, opt, text, lo, hi, what, suffixes=True, most=None):
    """A comma-separated list of whole numbers in [lo, hi] (K/M/G suffixes where `suffixes`, as tdist's
    --sizes; plain digits otherwise, as tdist's --m), none twice, at most `most`; p.error (exit 2) otherwise."""
    items = text.split(",")
    if most is not None and len(items) > most:
        p.error("%s gives %d values; at most %d ('%s')" % (opt, len(items), most, text))
    out = []
    for t in items:
        if suffixes:
            v = parse_size(t) if t else None
        else:
            v = int(t) if t.isdigit() and t.isascii() else None
        if v is None or v < lo or v > hi:
            p.error("%s expects a comma-separated list of %s (%d..%d, %s), got '%s' in '%s'"
                    % (opt, what, lo, hi, "K/M suffixes allowed" if suffixes else "whole numbers, no suffix",
                       t, text))
        if v in out:
            p.error("%s names %d twice ('%s')" % (opt, v, text))
        out.append(v)
    return out


class Once(argparse.Action):
    """Stores the option's value, refusing a second use under any of its spellings (as `tdist bench`: a
    repeated option is an error, not a silent last-one-wins). nargs=0 makes it a flag (store True)."""

    def __call__(self, parser, ns, values, option_string=None):
        given = ns.__dict__.setdefault("given", {})
        if self.dest in given:
            first = given[self.dest]
            also = "" if first == option_string else " (also as %s)" % first
            parser.error("%s given twice%s" % (option_string, also))
        given[self.dest] = option_string
        setattr(ns, self.dest, True if self.nargs == 0 else values)


def check_args(p, args):
    """Every argument checked before torch is imported: exit 2 with one line naming the option and what it allows."""
    given = getattr(args, "given", {})
    if args.op == "all_reduce":
        for dest in ("m", "models", "no_check"):
            if dest in given:
                p.error("%s applies to the GEMM operators only; all_reduce takes --sizes" % given[dest])
    elif "sizes" in given:
        p.error("--sizes applies to all_reduce only; the GEMM operators take --tokens/--m, --models or --no-check")
    names = args.models.split(",")
    allowed = ["all", "check"] + list(MODELS)
    for name in names:
        if name not in allowed:
            p.error("--models expects a comma-separated list of %s; got '%s' in '%s'"
                    % (", ".join(allowed), name, args.models))
        if names.count(name) > 1:
            p.error("--models names %s twice ('%s')" % (name, args.models))
    if "all" in names and len(names) > 1:
        p.error("--models: all already includes %s; give one or the other ('%s')"
                % ([n for n in names if n != "all"][0], args.models))
    args.model_list = list(MODELS) if "all" in names else [n for n in names if n in MODELS]
    if names == ["check"] and args.no_check:
        p.error("--models check with --no-check selects no case")
    # --m as tdist bench's: plain integers, at most 32 of them.
    args.m_list = int_list(p, "--tokens/--m", args.m, 1, 1 << 20, "token counts M", suffixes=False, most=32)
    size_list = int_list(p, "--sizes", args.sizes, 1, 512 << 30, "byte sizes")  # 512G, as tdist bench
    es = {"bf16": 2, "f16": 2, "f32": 4}[args.dtype]
    for b in size_list:
        if b % es:
            p.error("--sizes: %d bytes is not a whole number of %s elements (%d bytes each)" % (b, args.dtype, es))
    args.size_list = size_list
    # the ranges of tdist bench
    for opt, v, lo, hi in (("--iters", args.iters, 1, 100000), ("--warmup", args.warmup, 0, 10000),
                           ("--ranks", args.ranks, 1, 64)):
        if v is not None and v < lo:
            p.error("%s must be >= %d, got %d" % (opt, lo, v))
        if v is not None and v > hi:
            p.error("%s must be <= %d, got %d" % (opt, hi, v))
    # torchrun's WORLD_SIZE is the rank count of the multi-GPU mode; 1 (or unset) is the one-GPU mode,
    # where --ranks is the number of ranks emulated.
    ws = os.environ.get("WORLD_SIZE") or "1"  # empty reads as unset, as tdist's variables do
    if not (ws.isdigit() and ws.isascii()) or not 1 <= int(ws) <= 1 << 20:
        p.error("WORLD_SIZE '%s' is not a rank count (a whole number >= 1, as torchrun sets it)" % ws)
    args.world = int(ws)
    if args.world > 1 and args.ranks is not None and args.ranks != args.world:
        p.error("--ranks %d differs from WORLD_SIZE %d: under torchrun the rank count is the number of processes "
                "(--nproc-per-node); leave --ranks out or give %d" % (args.ranks, args.world, args.world))
    if args.ranks is None:
        args.ranks = args.world if args.world > 1 else 2
    if args.json is not None:
        d = os.path.dirname(args.json) or "."
        if not args.json or os.path.isdir(args.json):
            p.error("--json '%s' is not a file name" % args.json)
        if not os.path.isdir(d):
            p.error("--json %s: directory %s does not exist" % (args.json, d))
        if not os.access(d, os.W_OK) or (os.path.exists(args.json) and not os.access(args.json, os.W_OK)):
            p.error("--json %s: not writable" % args.json)
    return args


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter,
                                allow_abbrev=False)
    p.add_argument("op", choices=["ag_gemm", "gemm_rs", "gemm_ar", "all_reduce"])
    # --tokens: the spelling for torchrun, whose own parser takes --m as an ambiguous prefix of its options.
    # Every option at most once (Once): a repeated one is refused, as tdist bench does.
    p.add_argument("--tokens", "--m", dest="m", default="1024,4096,8192", action=Once,
                   help="GEMM operators: M (tokens) of the model rows, whole numbers 1..1048576, e.g. 1024,4096 "
                   "(--m is the same; under torchrun use --tokens)")
    p.add_argument("--models", default="all", action=Once,
                   help="GEMM operators: all, check or model names: " + ", ".join(MODELS))
    p.add_argument("--iters", type=int, default=50, action=Once, help="1..100000")
    p.add_argument("--warmup", type=int, default=5, action=Once, help="0..10000")
    p.add_argument("--dtype", default="bf16", choices=["bf16", "f16", "f32"], action=Once)
    p.add_argument("--sizes", default=SIZES, action=Once, help="all_reduce only: byte sizes, e.g. 8K,64K,4M")
    p.add_argument("--no-check", action=Once, nargs=0, default=False,
                   help="GEMM operators: leave out the correctness case M = 4091 x ranks")
    p.add_argument("--json", action=Once)
    p.add_argument("--ranks", type=int, default=None, action=Once,
                   help="ranks emulated on one GPU (one-GPU mode), 1..64; default 2, as tdist bench. Under "
                   "torchrun the rank count is WORLD_SIZE: leave it out or give the same")
    return check_args(p, p.parse_args(argv))


def split(total, parts, i):
    """tdist's td_chunk_range: the first total % parts parts get one more."""
    base, extra = divmod(total, parts)
    off = i * base + min(i, extra)
    return off, base + (1 if i < extra else 0)


def time_steps(torch, fn, iters, warmup):
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(iters):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        torch.cuda.synchronize()
        times.append(start.elapsed_time(end) / 1e3)
    times.sort()
    return statistics.median(times), times[min(len(times) - 1, int(0.99 * (len(times) - 1) + 0.999))]


def one_gpu_sides(torch, args, dt, m, n, k, size):
    """The per-rank work of args.ranks ranks issued from this one process: (name, fn) pairs."""
    R = args.ranks
    streams = [torch.cuda.Stream() for _ in range(R)]

    def on_streams(phases):
        """Runs phase(r) for every r on stream r, phase after phase (each phase waits for the previous one)."""
        cur = torch.cuda.current_stream()
        for phase in phases:
            ev = torch.cuda.Event()
            ev.record(cur)
            for r in range(R):
                streams[r].wait_event(ev)
                with torch.cuda.stream(streams[r]):
                    phase(r)
            for r in range(R):
                cur.wait_stream(streams[r])

    def sequential(phases):
        for phase in phases:
            for r in range(R):
                phase(r)

    if args.op == "all_reduce":
        count = size // torch.tensor([], dtype=dt).element_size()
        x = [torch.randn(count, device="cuda", dtype=dt) for _ in range(R)]
        y = [torch.empty(count, device="cuda", dtype=dt) for _ in range(R)]
        t = torch.empty(count, device="cuda", dtype=dt)
        parts = [split(count, R, r) for r in range(R)]

        def rs(r):
            o, l = parts[r]
            torch.sum(torch.stack([v[o:o + l] for v in x]), 0, out=t[o:o + l])

        def ag(r):
            y[r].copy_(t)
        phases, gemm = [rs, ag], None
    elif args.op == "ag_gemm":
        rows = [split(m, R, r) for r in range(R)]
        cols = [split(n, R, r) for r in range(R)]
        a = [torch.randn(rows[r][1], k, device="cuda", dtype=dt) for r in range(R)]
        b = [torch.randn(k, cols[r][1], device="cuda", dtype=dt) / k ** 0.5 for r in range(R)]
        g = [torch.empty(m, k, device="cuda", dtype=dt) for _ in range(R)]
        c = [torch.empty(m, cols[r][1], device="cuda", dtype=dt) for r in range(R)]

        def gather(r):
            torch.cat(a, 0, out=g[r])

        def mm(r):
            torch.matmul(g[r], b[r], out=c[r])
        phases = [lambda r: (gather(r), mm(r))]
        gemm = [mm]
    else:
        ks = [split(k, R, r) for r in range(R)]
        rows = [split(m, R, r) for r in range(R)]
        a = [torch.randn(m, ks[r][1], device="cuda", dtype=dt) for r in range(R)]
        b = [torch.randn(ks[r][1], n, device="cuda", dtype=dt) / k ** 0.5 for r in range(R)]
        part = [torch.empty(m, n, device="cuda", dtype=dt) for _ in range(R)]
        full = torch.empty(m, n, device="cuda", dtype=dt)
        c = [torch.empty(rows[r][1] if args.op == "gemm_rs" else m, n, device="cuda", dtype=dt) for r in range(R)]

        def mm(r):
            torch.matmul(a[r], b[r], out=part[r])

        def rs(r):
            o, l = rows[r]
            dst = c[r] if args.op == "gemm_rs" else full[o:o + l]
            torch.sum(torch.stack([p[o:o + l] for p in part]), 0, out=dst)

        def ag(r):
            c[r].copy_(full)
        phases = [mm, rs] + ([ag] if args.op == "gemm_ar" else [])
        gemm = [mm]
    sides = [("torch 1proc sequential", lambda: sequential(phases)),
             ("torch 1proc streams", lambda: on_streams(phases))]
    if gemm:
        sides.append(("torch gemm only", lambda: sequential(gemm)))
    return sides


def one_gpu(torch, args):
    dt = {"bf16": torch.bfloat16, "f16": torch.float16, "f32": torch.float32}[args.dtype]
    env = {"torch": torch.__version__, "cuda": torch.version.cuda, "gpu": torch.cuda.get_device_name(),
           "ranks": args.ranks, "mode": "one GPU: the per-rank work of every rank issued from one process "
           "(no torch.distributed, no NCCL); M split as tdist (first M %% ranks ranks one row more)"}
    results = []
    print("| case | side | p50 ms | p99 ms |")
    print("| --- | --- | ---: | ---: |")
    for name, m, n, k, size in shapes(args, args.ranks):
        case = {"case": name, "M": m, "N": n, "K": k, "bytes": size, "sides": []}
        try:
            sides = one_gpu_sides(torch, args, dt, m, n, k, size)
        except Exception as e:  # out of memory on the largest shapes
            case["error"] = str(e)
            sides = []
        for side, fn in sides:
            try:
                p50, p99 = time_steps(torch, fn, args.iters, args.warmup)
                case["sides"].append({"side": side, "p50_s": p50, "p99_s": p99})
            except Exception as e:
                case["sides"].append({"side": side, "error": str(e)})
        del sides
        torch.cuda.empty_cache()
        results.append(case)
        for s in case["sides"]:
            print("| %s%s | %s | %s | %s |" % (name, "" if m is None else " M=%d" % m, s["side"],
                                              "%.3f" % (s["p50_s"] * 1e3) if "p50_s" in s else "n/a",
                                              "%.3f" % (s["p99_s"] * 1e3) if "p99_s" in s else s.get("error")))
        sys.stdout.flush()
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"operator": args.op, "environment": env, "results": results}, f, indent=1)
    return 0


def symm_op(torch, symm, name):
    """PyTorch's fused operator `name` (A, Bs|B, ..., dim, group_name), or None.
    Recent versions register it as torch.ops.symm_mem.<name> when
    torch.distributed._symmetric_memory is imported; older ones had it as a
    function of that module."""
    if symm is None:
        return None
    try:
        return getattr(torch.ops.symm_mem, name)
    except (AttributeError, RuntimeError):
        return getattr(symm, name, None)


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
    """(name, M, N, K, bytes) of every case, from the lists check_args validated."""
    if args.op == "all_reduce":
        return [(t, None, None, None, b) for t, b in zip(args.sizes.split(","), args.size_list)]
    out = [(name, m, MODELS[name][0], MODELS[name][1], None) for name in args.model_list for m in args.m_list]
    if not args.no_check:
        out.append(("check 4091xR", 4091 * world, 5120, 1024, None))
    return out


def main():
    args = parse_args()
    # NVLink multicast can take a shared host's GPUs out of service: off unless the caller set it.
    os.environ.setdefault("NCCL_NVLS_ENABLE", "0")
    os.environ.setdefault("TORCH_SYMM_MEM_DISABLE_MULTICAST", "1")
    os.environ.setdefault("NVSHMEM_DISABLE_NVLS", "1")
    env = {"note": ""}
    try:
        import torch
        import torch.distributed as dist
    except ImportError:
        print("torch_ops.py: PyTorch is not installed: not run", file=sys.stderr)
        return NOT_RUN
    world = args.world
    if torch.cuda.is_available() and world == 1:
        return one_gpu(torch, args)
    if not torch.cuda.is_available() or torch.cuda.device_count() < world or world < 2:
        print("torch_ops.py: needs one GPU per rank and >= 2 ranks (NCCL refuses two ranks on one GPU): "
              "not run (%d GPU(s), WORLD_SIZE %d)" % (torch.cuda.device_count() if torch.cuda.is_available() else 0,
                                                      world), file=sys.stderr)
        return NOT_RUN
    rank = int(os.environ["RANK"])
    torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", rank)))
    dist.init_process_group("nccl")
    dt = {"bf16": torch.bfloat16, "f16": torch.float16, "f32": torch.float32}[args.dtype]
    env.update(torch=torch.__version__, cuda=torch.version.cuda, nccl=".".join(map(str, torch.cuda.nccl.version())),
               gpu=torch.cuda.get_device_name(), ranks=world, gpu_count=torch.cuda.device_count(),
               NCCL_NVLS_ENABLE=os.environ.get("NCCL_NVLS_ENABLE"),
               TORCH_SYMM_MEM_DISABLE_MULTICAST=os.environ.get("TORCH_SYMM_MEM_DISABLE_MULTICAST"),
               timing="barrier, CUDA events around the call, max over ranks, p50/p99 of --iters",
               git_revision=os.environ.get("TD_GIT_REV", "unknown"))
    symm = None
    try:
        import torch.distributed._symmetric_memory as symm  # noqa: F811
        group_name = dist.group.WORLD.group_name
        symm.enable_symm_mem_for_group(group_name)
    except Exception as e:  # older PyTorch: no fused ops
        env["note"] = "no symmetric-memory fused ops: %s" % e
        symm = None
    results = []
    if rank == 0:
        print("# torch_ops.py %s: %d ranks (one GPU each), %s, torch %s, NCCL %s, %d iters" %
              (args.op, world, args.dtype, env["torch"], env["nccl"], args.iters))
        print("| case | side | p50 ms | p99 ms |")
        print("| --- | --- | ---: | ---: |")
    for name, m, n, k, size in shapes(args, world):
        case = {"case": name, "M": m, "N": n, "K": k, "bytes": size, "sides": []}
        if args.op == "all_reduce":
            x = torch.randn(size // torch.tensor([], dtype=dt).element_size(), device="cuda", dtype=dt)
            p50, p99 = time_it(torch, dist, lambda: dist.all_reduce(x), args.iters, args.warmup)
            case["sides"].append({"side": "torch all_reduce", "p50_s": p50, "p99_s": p99,
                                  "algbw_gb_s": size / p50 * 1e-9})
            results.append(case)
            if rank == 0:
                print("| %s | torch all_reduce | %.3f | %.3f |" % (name, p50 * 1e3, p99 * 1e3))
                sys.stdout.flush()
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
            op = symm_op(torch, symm, "fused_all_gather_matmul")
            fused = (lambda: op(a, [b], 0, group_name)) if op else None
        else:
            a = torch.randn(mp, k // world, device="cuda", dtype=dt)
            b = torch.randn(k // world, n, device="cuda", dtype=dt) / k ** 0.5
            if args.op == "gemm_rs":
                out = torch.empty(mp // world, n, device="cuda", dtype=dt)

                def seq():
                    dist.reduce_scatter_tensor(out, a @ b)
                op = symm_op(torch, symm, "fused_matmul_reduce_scatter")
                fused = (lambda: op(a, b, "sum", 0, group_name)) if op else None
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
        del a, b
        if args.op == "ag_gemm":
            del g
        torch.cuda.empty_cache()
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
