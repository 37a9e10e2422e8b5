# SPDX-License-Identifier: Apache-2.0
"""The final table of the multi-GPU run (scripts/gpu-multi.sh): per operator
and case, the floor, NCCL + cuBLAS, tdist's best side, PyTorch, and their
ratios, from the JSON files the run wrote:

  --link F        td_link_bench --json (per-GPU all-to-all egress, 8-byte latency)
  --tdist F ...   tdist bench <op> --json (sides: baseline, nccl+cublas, gemm only, tdist ...)
  --torch F ...   bench/torch_ops.py --json under torchrun (torch sequential, torch fused)

Floor of a case = max(communication time at the measured link rate, GEMM
time at the measured cuBLAS rate), as issue 8 defines it:
  communication   bytes one GPU must receive (or send) / the per-GPU egress
                  of td_link_bench's all-to-all (every GPU sending to every
                  other at once, the pattern of these collectives):
                    ag_gemm     (n-1)/n * M*K*es      (its share of the gathered A)
                    gemm_rs     (n-1)/n * M*N*es      (partials of the others' rows)
                    gemm_ar     2(n-1)/n * M*N*es     (reduce-scatter + all-gather)
                    all_reduce  2(n-1)/n * bytes, and at least one small
                                peer copy's latency (device time)
  GEMM            the 'gemm only' side of the same tdist bench run: cuBLAS
                  on one rank's GEMM with no communication (p50 of the
                  slowest rank); none for all_reduce.
Ratios: 'tdist/nccl' = speedup of tdist's best side over NCCL + cuBLAS (>1:
tdist faster); 'floor/tdist' = how close tdist is to the floor (1 = at it);
'tdist/torch' = speedup over PyTorch's best side (sequential or fused).
Writes markdown to stdout and, with --json, the same rows as JSON.
At least one --tdist file is required; --link is optional (no floor without
it). Every named file and --json are checked before anything is printed:
exit status 1 with one line on stderr naming the file and the missing or
malformed key when one is unusable (a scripted run whose step failed to
write its JSON must not "succeed"); 0 otherwise. Unusable also means: a
time (p50_s, p99_s, the 8-byte latency) that is not finite or not > 0, a
rate that is not finite (egress > 0), a size or M/N/K below 1, a dtype
other than bf16/f16/f32, no results, a file of another kind than its flag
(a tdist bench JSON as --torch, a torch_ops.py JSON as --tdist, a link
JSON as either, a results JSON as --link), one file named twice (also as
--json), or one case in two files (it would count twice in the means).
"""
import argparse
import json
import os
import sys

ES = {"bf16": 2, "f16": 2, "f32": 4}


class InputError(Exception):
    """A named input (or --json) that cannot be used: one line naming the file and what is wrong."""


def load(path, what):
    """The JSON object in path (what: the option it came from); InputError when unreadable or not an object."""
    try:
        with open(path) as f:
            j = json.load(f)
    except OSError as e:
        raise InputError("%s %s: cannot read: %s" % (what, path, e.strerror or e))
    except ValueError as e:
        raise InputError("%s %s: not JSON: %s" % (what, path, e))
    if not isinstance(j, dict):
        raise InputError("%s %s: expected a JSON object, found %s" % (what, path, type(j).__name__))
    return j


def need(j, key, kind, what, path, where=""):
    """j[key] when present and of type kind (a type or tuple); InputError naming the file and the key otherwise."""
    if not isinstance(j, dict) or key not in j:
        raise InputError("%s %s: missing key '%s%s'" % (what, path, where, key))
    v = j[key]
    if not isinstance(v, kind) or isinstance(v, bool):
        names = kind.__name__ if isinstance(kind, type) else " or ".join(t.__name__ for t in kind)
        raise InputError("%s %s: key '%s%s' is %s, expected %s" % (what, path, where, key, type(v).__name__, names))
    return v


NUM = (int, float)
OPS = ("ag_gemm", "gemm_rs", "gemm_ar", "all_reduce")


def load_link(path):
    """td_link_bench --json, checked for the keys the tables use."""
    j = load(path, "--link")
    a2a = need(j, "all_to_all", dict, "--link", path)
    if need(a2a, "egress_per_gpu_gb_s", NUM, "--link", path, "all_to_all.") <= 0:
        raise InputError("--link %s: all_to_all.egress_per_gpu_gb_s must be > 0" % path)
    summ = need(j, "summary", dict, "--link", path)
    for k in ("unidirectional_min_gb_s", "unidirectional_max_gb_s"):
        need(summ, k, NUM, "--link", path, "summary.")
    for i, x in enumerate(j.get("latency_8B") or []):
        need(x, "device_us", NUM, "--link", path, "latency_8B[%d]." % i)
    nccl = j.get("nccl") or []
    if not isinstance(nccl, list):
        raise InputError("--link %s: key 'nccl' is %s, expected list" % (path, type(nccl).__name__))
    for i, x in enumerate(nccl):
        need(x, "bytes", int, "--link", path, "nccl[%d]." % i)
        need(x, "busbw_gb_s", NUM, "--link", path, "nccl[%d]." % i)
        need(x, "collective", str, "--link", path, "nccl[%d]." % i)
    return j


def load_results(path, what, tdist):
    """tdist bench --json (tdist) or torch_ops.py --json, checked for the keys the tables use."""
    j = load(path, what)
    op = need(j, "operator", str, what, path)
    if op not in OPS:
        raise InputError("%s %s: operator '%s' is not one of %s" % (what, path, op, ", ".join(OPS)))
    if tdist and need(j, "ranks", int, what, path) < 1:
        raise InputError("%s %s: ranks %d, must be >= 1" % (what, path, j["ranks"]))
    for i, c in enumerate(need(j, "results", list, what, path)):
        at = "results[%d]." % i
        if not isinstance(c, dict):
            raise InputError("%s %s: results[%d] is %s, expected object" % (what, path, i, type(c).__name__))
        need(c, "case", str, what, path, at)
        if tdist:
            for k in (("bytes",) if op == "all_reduce" else ("M", "N", "K")):
                need(c, k, int, what, path, at)
        for k, s in enumerate(need(c, "sides", list, what, path, at)):
            need(s, "side", str, what, path, "%ssides[%d]." % (at, k))
            if "p50_s" in s:
                need(s, "p50_s", NUM, what, path, "%ssides[%d]." % (at, k))
    return j


def check_out(path):
    """--json's file must be writable: checked before any work so a run does not end in a traceback."""
    d = os.path.dirname(path) or "."
    if os.path.isdir(path):
        raise InputError("--json %s: is a directory" % path)
    if not os.path.isdir(d):
        raise InputError("--json %s: directory %s does not exist" % (path, d))
    if not os.access(d, os.W_OK) or (os.path.exists(path) and not os.access(path, os.W_OK)):
        raise InputError("--json %s: not writable" % path)


def side_p50(case, pred):
    """Smallest p50 among the sides of a case that ran and satisfy pred(name)."""
    best = None
    for s in case.get("sides", []):
        if "p50_s" in s and "error" not in s and "skipped" not in s and pred(s["side"]):
            if best is None or s["p50_s"] < best[1]:
                best = (s["side"], s["p50_s"])
    return best


def torch_cases(paths):
    """(op, case name, M) -> the torch JSON case."""
    out = {}
    for p in paths:
        j = load_results(p, "--torch", False)
        for c in j["results"]:
            out[(j["operator"], c["case"], c.get("M"))] = c
    return out


def floor_comm(op, n, es, case, egress, lat_s):
    if op == "all_reduce":
        return max(2.0 * (n - 1) / n * case["bytes"] / egress, lat_s)
    m, nn, k = case["M"], case["N"], case["K"]
    if op == "ag_gemm":
        return (n - 1) / n * m * k * es / egress
    if op == "gemm_rs":
        return (n - 1) / n * m * nn * es / egress
    return 2.0 * (n - 1) / n * m * nn * es / egress


def fmt(x, spec="%.3f"):
    return "-" if x is None else spec % x


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--link")
    p.add_argument("--tdist", nargs="*", default=[])
    p.add_argument("--torch", nargs="*", default=[])
    p.add_argument("--json")
    a = p.parse_args()
    try:
        return summarise(a)
    except InputError as e:
        print("mg_summary: %s" % e, file=sys.stderr)
        return 1


def summarise(a):
    """Checks every named input and --json first, then prints the tables (InputError on a bad input)."""
    if not a.tdist:
        raise InputError("no --tdist file given: nothing to summarise (--tdist F ... is required)")
    if a.json:
        check_out(a.json)
    link = load_link(a.link) if a.link is not None else None
    tdist = [(path, load_results(path, "--tdist", True)) for path in a.tdist]
    torch = torch_cases(a.torch)
    egress = lat_s = None
    if link is not None:
        egress = link["all_to_all"]["egress_per_gpu_gb_s"] * 1e9
        lats = [x["device_us"] for x in link.get("latency_8B", [])]
        lat_s = (sorted(lats)[len(lats) // 2] * 1e-6) if lats else 0.0
        print("link: all-to-all egress %.1f GB/s per GPU, unidirectional %.1f..%.1f GB/s, 8-byte copy %.2f us "
              "(device, median over pairs)\n" % (egress * 1e-9, link["summary"]["unidirectional_min_gb_s"],
                                                 link["summary"]["unidirectional_max_gb_s"], lat_s * 1e6))
    if link is None:
        print("link: no --link file: no floor\n")
    if link and link.get("nccl"):
        sizes = sorted({x["bytes"] for x in link["nccl"]})
        print("NCCL bus bandwidth, GB/s (td_link_bench --nccl, nccl-tests style):\n")
        print("| collective | " + " | ".join("%d KiB" % (b // 1024) for b in sizes) + " |")
        print("| --- |" + " ---: |" * len(sizes))
        for coll in ("all_reduce", "all_gather", "reduce_scatter"):
            got = {x["bytes"]: x["busbw_gb_s"] for x in link["nccl"] if x["collective"] == coll}
            print("| %s | " % coll + " | ".join(fmt(got.get(b), "%.1f") for b in sizes) + " |")
        print()
    rows = []
    print("| op | case | floor ms | comm ms | gemm ms | nccl+cublas ms | tdist best ms | tdist side | torch ms "
          "| tdist/nccl | floor/tdist | tdist/torch |")
    print("| --- | --- | ---: | ---: | ---: | ---: | ---: | --- | ---: | ---: | ---: | ---: |")
    for path, j in tdist:
        op, n, es = j["operator"], j["ranks"], ES.get(j.get("dtype"), 2)
        for c in j["results"]:
            nccl = side_p50(c, lambda s: s == "nccl+cublas")
            gemm = side_p50(c, lambda s: s == "gemm only")
            best = side_p50(c, lambda s: s.startswith("tdist"))
            comm = floor_comm(op, n, es, c, egress, lat_s) if egress else None
            floor = None
            if comm is not None and (gemm or op == "all_reduce"):
                floor = max(comm, gemm[1] if gemm else 0.0)
            name = c["case"]
            m = c.get("M")
            tname = name.split(" M=")[0] if m is not None else name
            tc = torch.get((op, tname, m))
            tbest = side_p50(tc, lambda s: s in ("torch sequential", "torch fused", "torch all_reduce")) if tc else None
            r = {"op": op, "case": name, "ranks": n, "floor_s": floor, "comm_s": comm,
                 "gemm_s": gemm[1] if gemm else None, "nccl_cublas_s": nccl[1] if nccl else None,
                 "tdist_best_s": best[1] if best else None, "tdist_side": best[0] if best else None,
                 "torch_best_s": tbest[1] if tbest else None, "torch_side": tbest[0] if tbest else None,
                 "error": c.get("error")}
            r["tdist_vs_nccl"] = r["nccl_cublas_s"] / r["tdist_best_s"] if nccl and best else None
            r["floor_over_tdist"] = floor / r["tdist_best_s"] if floor and best else None
            r["tdist_vs_torch"] = r["torch_best_s"] / r["tdist_best_s"] if tbest and best else None
            rows.append(r)
            ms = lambda x: None if x is None else x * 1e3  # noqa: E731
            print("| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |" % (
                op, name, fmt(ms(floor)), fmt(ms(comm)), fmt(ms(r["gemm_s"])), fmt(ms(r["nccl_cublas_s"])),
                fmt(ms(r["tdist_best_s"])), r["tdist_side"] or (c.get("error") or "-")[:60],
                fmt(ms(r["torch_best_s"])), fmt(r["tdist_vs_nccl"]), fmt(r["floor_over_tdist"]),
                fmt(r["tdist_vs_torch"])))
    # Averages per operator (the goals are averages over the shapes).
    print("\n| op | cases | mean tdist/nccl | min tdist/nccl | mean floor/tdist | mean tdist/torch |")
    print("| --- | ---: | ---: | ---: | ---: | ---: |")
    summary = {}
    for op in ("ag_gemm", "gemm_rs", "gemm_ar", "all_reduce"):
        sel = [r for r in rows if r["op"] == op]
        if not sel:
            continue
        def mean(key):
            v = [r[key] for r in sel if r[key] is not None]
            return (sum(v) / len(v), min(v)) if v else (None, None)
        sn, fl, tt = mean("tdist_vs_nccl"), mean("floor_over_tdist"), mean("tdist_vs_torch")
        summary[op] = {"cases": len(sel), "mean_tdist_vs_nccl": sn[0], "min_tdist_vs_nccl": sn[1],
                       "mean_floor_over_tdist": fl[0], "mean_tdist_vs_torch": tt[0]}
        print("| %s | %d | %s | %s | %s | %s |" % (op, len(sel), fmt(sn[0]), fmt(sn[1]), fmt(fl[0]), fmt(tt[0])))
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"link": link and {"summary": link.get("summary"), "all_to_all": link.get("all_to_all")},
                       "rows": rows, "per_operator": summary}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
