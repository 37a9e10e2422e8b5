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
import math
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
    except RecursionError:
        raise InputError("%s %s: JSON nested too deeply to read" % (what, path))
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


def need_num(j, key, what, path, where="", low=0.0, strict=True, unit="", about=""):
    """need(j, key, NUM) that is also finite and > low (strict) or >= low: json.load takes NaN and
    Infinity, and a zero or negative time would divide by zero or win the 'best side' pick."""
    v = need(j, key, NUM, what, path, where)
    try:  # a JSON integer may have any number of digits: too large for a float is not a time or size either
        fv = float(v)
    except OverflowError:
        raise InputError("%s %s: key '%s%s'%s is an integer of %d digits, too large for a number"
                         % (what, path, where, key, about, len(str(abs(v)))))
    if not math.isfinite(fv) or (fv <= low if strict else fv < low):
        raise InputError("%s %s: key '%s%s'%s is %r, must be a finite number %s %g%s"
                         % (what, path, where, key, about, v, ">" if strict else ">=", low, unit))
    return v


def need_list(j, key, what, path):
    """j[key] as a list: absent or null is an empty list; any other non-list an InputError."""
    v = j.get(key)
    if v is None:
        return []
    if not isinstance(v, list):
        raise InputError("%s %s: key '%s' is %s, expected list" % (what, path, key, type(v).__name__))
    return v


# What each kind of input looks like, for a file given under the wrong flag.
LOOKS = {"link": "a td_link_bench JSON (all_to_all, no operator); give it as --link",
         "tdist": "a tdist bench JSON (top-level ranks/backend, sides baseline, nccl+cublas, tdist ...); "
                  "give it as --tdist",
         "torch": "a torch_ops.py JSON (environment.torch, sides torch ...); give it as --torch"}


def kind_of(j):
    """'link', 'tdist' or 'torch' from the keys only those files have; None when it looks like none
    (the key checks then say what is missing)."""
    if "operator" not in j and any(k in j for k in ("all_to_all", "latency_8B", "nccl")):
        return "link"
    env = j.get("environment")
    if isinstance(env, dict) and "torch" in env:
        return "torch"
    if "ranks" in j or "backend" in j:
        return "tdist"
    res = j.get("results")
    names = [s.get("side") for c in (res if isinstance(res, list) else []) if isinstance(c, dict)
             for s in (c.get("sides") if isinstance(c.get("sides"), list) else []) if isinstance(s, dict)]
    names = [n for n in names if isinstance(n, str)]
    if any(n.startswith("torch ") for n in names):
        return "torch"
    if any(n in ("baseline", "nccl+cublas", "gemm only") or n.startswith("tdist") for n in names):
        return "tdist"
    return None


def check_kind(j, what, path, want):
    k = kind_of(j)
    if k is not None and k != want:
        raise InputError("%s %s: looks like %s" % (what, path, LOOKS[k]))


def load_link(path):
    """td_link_bench --json, checked for the keys the tables use."""
    j = load(path, "--link")
    check_kind(j, "--link", path, "link")
    a2a = need(j, "all_to_all", dict, "--link", path)
    need_num(a2a, "egress_per_gpu_gb_s", "--link", path, "all_to_all.", unit=" GB/s")
    summ = need(j, "summary", dict, "--link", path)
    for k in ("unidirectional_min_gb_s", "unidirectional_max_gb_s"):
        need_num(summ, k, "--link", path, "summary.", strict=False, unit=" GB/s")
    j["latency_8B"] = need_list(j, "latency_8B", "--link", path)
    for i, x in enumerate(j["latency_8B"]):
        need_num(x, "device_us", "--link", path, "latency_8B[%d]." % i, unit=" us")
    j["nccl"] = nccl = need_list(j, "nccl", "--link", path)
    for i, x in enumerate(nccl):
        if need(x, "bytes", int, "--link", path, "nccl[%d]." % i) < 1:
            raise InputError("--link %s: key 'nccl[%d].bytes' is %d, must be >= 1" % (path, i, x["bytes"]))
        need_num(x, "busbw_gb_s", "--link", path, "nccl[%d]." % i, strict=False, unit=" GB/s")
        need(x, "collective", str, "--link", path, "nccl[%d]." % i)
    return j


def load_results(path, what, tdist):
    """tdist bench --json (tdist) or torch_ops.py --json, checked for the keys the tables use."""
    j = load(path, what)
    check_kind(j, what, path, "tdist" if tdist else "torch")
    op = need(j, "operator", str, what, path)
    if op not in OPS:
        raise InputError("%s %s: operator '%s' is not one of %s" % (what, path, op, ", ".join(OPS)))
    if tdist and need(j, "ranks", int, what, path) < 1:
        raise InputError("%s %s: ranks %d, must be >= 1" % (what, path, j["ranks"]))
    if tdist and need(j, "dtype", str, what, path) not in ES:
        raise InputError("%s %s: dtype '%s' is not one of %s (the floor needs its element size)"
                         % (what, path, j["dtype"], ", ".join(sorted(ES))))
    res = need(j, "results", list, what, path)
    if not res:
        raise InputError("%s %s: 'results' is empty: no case to summarise" % (what, path))
    for i, c in enumerate(res):
        at = "results[%d]." % i
        if not isinstance(c, dict):
            raise InputError("%s %s: results[%d] is %s, expected object" % (what, path, i, type(c).__name__))
        name = need(c, "case", str, what, path, at)
        # M, N, K, bytes: required in tdist's files; torch's carry M (null for all_reduce), the lookup key.
        keys = (("bytes",) if op == "all_reduce" else ("M", "N", "K")) if tdist else \
            (("M",) if c.get("M") is not None else ())
        for k in keys:
            if need(c, k, int, what, path, at) < 1:
                raise InputError("%s %s: key '%s%s' (case '%s') is %d, must be >= 1" % (what, path, at, k, name, c[k]))
        if "error" in c:
            need(c, "error", str, what, path, at)
        for k, s in enumerate(need(c, "sides", list, what, path, at)):
            sat = "%ssides[%d]." % (at, k)
            side = need(s, "side", str, what, path, sat)
            for t in ("p50_s", "p99_s"):
                if t in s:
                    need_num(s, t, what, path, sat, unit=" s", about=" (case '%s', side '%s')" % (name, side))
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


def torch_cases(paths, seen):
    """(op, case name, M, ranks) -> the torch JSON case; ranks is environment.ranks (None when the file
    does not say, then it matches any rank count). A key in two places is refused: which one a tdist
    row would be compared with would be a matter of order."""
    out, where = {}, {}
    for p in paths:
        j = load_results(p, "--torch", False)
        distinct(p, "--torch", seen)
        env = j.get("environment")
        ranks = env.get("ranks") if isinstance(env, dict) else None
        ranks = ranks if isinstance(ranks, int) and not isinstance(ranks, bool) else None
        for c in j["results"]:
            key = (j["operator"], c["case"], c.get("M"), ranks)
            if key in out:
                raise InputError("--torch %s: %s case '%s'%s is also in --torch %s: each case once"
                                 % (p, key[0], key[1], "" if key[2] is None else " M=%d" % key[2], where[key]))
            out[key], where[key] = c, p
    return out


def distinct(path, what, seen):
    """Refuses a file named twice (under any flag): it would count twice. seen: (dev, inode) -> (flag, path)."""
    st = os.stat(path)
    key = (st.st_dev, st.st_ino)
    if key in seen:
        raise InputError("%s %s: the same file as %s %s: name each input once" % ((what, path) + seen[key]))
    seen[key] = (what, path)


def ratio(num, den):
    """num / den, or None when either is missing or den is not a finite number > 0 (no division can raise)."""
    if num is None or den is None or not math.isfinite(den) or den <= 0:
        return None
    return num / den


def size_label(b):
    """Bytes as the largest binary unit that divides them (64 MiB, 8 KiB), bytes under 1 KiB as bytes."""
    for unit, sh in (("GiB", 30), ("MiB", 20), ("KiB", 10)):
        if b >= 1 << sh and b % (1 << sh) == 0:
            return "%d %s" % (b >> sh, unit)
    return "%d B" % b if b < 1024 else "%.1f KiB" % (b / 1024.0)


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
    seen = {}
    link = None
    if a.link is not None:
        link = load_link(a.link)
        distinct(a.link, "--link", seen)
    tdist, cases = [], {}
    for path in a.tdist:
        j = load_results(path, "--tdist", True)
        distinct(path, "--tdist", seen)
        for c in j["results"]:
            key = (j["operator"], j["ranks"], c["case"])
            if key in cases:
                raise InputError("--tdist %s: %s case '%s' (%d ranks) is also in --tdist %s: each case once (it "
                                 "would count twice in the means)" % (path, key[0], key[2], key[1], cases[key]))
            cases[key] = path
        tdist.append((path, j))
    torch = torch_cases(a.torch, seen)
    if a.json and os.path.exists(a.json):
        st = os.stat(a.json)
        if (st.st_dev, st.st_ino) in seen:
            raise InputError("--json %s: is the input %s %s: it would be overwritten"
                             % ((a.json,) + seen[(st.st_dev, st.st_ino)]))
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
        print("| collective | " + " | ".join(size_label(b) for b in sizes) + " |")
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
        op, n, es = j["operator"], j["ranks"], ES[j["dtype"]]
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
            tc = torch.get((op, tname, m, n)) or torch.get((op, tname, m, None))
            tbest = side_p50(tc, lambda s: s in ("torch sequential", "torch fused", "torch all_reduce")) if tc else None
            r = {"op": op, "case": name, "ranks": n, "floor_s": floor, "comm_s": comm,
                 "gemm_s": gemm[1] if gemm else None, "nccl_cublas_s": nccl[1] if nccl else None,
                 "tdist_best_s": best[1] if best else None, "tdist_side": best[0] if best else None,
                 "torch_best_s": tbest[1] if tbest else None, "torch_side": tbest[0] if tbest else None,
                 "error": c.get("error")}
            r["tdist_vs_nccl"] = ratio(r["nccl_cublas_s"], r["tdist_best_s"])
            r["floor_over_tdist"] = ratio(floor or None, r["tdist_best_s"])  # no floor: no ratio
            r["tdist_vs_torch"] = ratio(r["torch_best_s"], r["tdist_best_s"])
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
