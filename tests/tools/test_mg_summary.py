# SPDX-License-Identifier: Apache-2.0
"""bench/mg_summary.py's input checks (tester report item 3): every named
input that is missing, not JSON, or of the wrong shape, and a --json that
cannot be written, fail with rc 1 and one line naming the file and what is
wrong, before any table is printed; a well-formed input still gives the
tables with rc 0. Also (tester report breaker4 D1, D11): times that are not
finite or not > 0 (no ZeroDivisionError, no negative "best"), a file under
the wrong flag, a file or a case given twice, empty results, an unknown
dtype, sizes below 1; link sizes under 1 KiB print in bytes; torch cases
match tdist rows of the same rank count. CPU only, no GPU, no torch (label
cpu)."""
import json
import os
import subprocess
import sys
import tempfile
import unittest

SRC = os.environ.get("TD_SOURCE_DIR", os.path.join(os.path.dirname(__file__), "..", ".."))
SCRIPT = os.path.join(SRC, "bench", "mg_summary.py")
sys.path.insert(0, os.path.join(SRC, "bench"))
import mg_summary  # noqa: E402  (main() runs only as a script)

CASE = {"case": "llama3.1-8b M=1024", "M": 1024, "N": 1792, "K": 4096,
        "sides": [{"side": "nccl+cublas", "p50_s": 2e-3}, {"side": "gemm only", "p50_s": 1e-3},
                  {"side": "tdist auto", "p50_s": 1.5e-3}]}
TDIST = {"operator": "ag_gemm", "ranks": 8, "dtype": "bf16", "results": [CASE]}
LINK = {"all_to_all": {"egress_per_gpu_gb_s": 300.0}, "latency_8B": [{"device_us": 2.0}],
        "summary": {"unidirectional_min_gb_s": 100.0, "unidirectional_max_gb_s": 200.0}}
TORCH = {"operator": "ag_gemm", "results": [{"case": "llama3.1-8b", "M": 1024,
                                             "sides": [{"side": "torch sequential", "p50_s": 3e-3}]}]}


class MgSummaryInputs(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.TemporaryDirectory()
        self.addCleanup(self.dir.cleanup)

    def file(self, name, content):
        path = os.path.join(self.dir.name, name)
        with open(path, "w") as f:
            f.write(content if isinstance(content, str) else json.dumps(content))
        return path

    def run_it(self, *args):
        p = subprocess.run([sys.executable, SCRIPT] + list(args), capture_output=True, text=True, timeout=30)
        return p.returncode, p.stdout, p.stderr

    def refused(self, args, *words):
        rc, out, err = self.run_it(*args)
        self.assertEqual(rc, 1, err)
        self.assertNotIn("Traceback", err)
        self.assertEqual(out, "", "no table before the inputs are checked")
        lines = err.strip().splitlines()
        self.assertEqual(len(lines), 1, err)
        for w in words:
            self.assertIn(w, lines[0])
        return lines[0]

    def test_good_inputs_give_the_tables(self):
        t, l, o = self.file("t.json", TDIST), self.file("l.json", LINK), self.file("o.json", TORCH)
        out = os.path.join(self.dir.name, "s.json")
        rc, text, err = self.run_it("--link", l, "--tdist", t, "--torch", o, "--json", out)
        self.assertEqual(rc, 0, err)
        self.assertIn("| ag_gemm | llama3.1-8b M=1024 |", text)
        with open(out) as f:
            rows = json.load(f)["rows"]
        self.assertEqual(rows[0]["tdist_side"], "tdist auto")
        self.assertAlmostEqual(rows[0]["tdist_vs_nccl"], 2e-3 / 1.5e-3)
        self.assertAlmostEqual(rows[0]["torch_best_s"], 3e-3)

    def test_no_tdist_file(self):
        self.refused([], "no --tdist file")
        self.refused(["--tdist"], "no --tdist file")

    def test_missing_file(self):
        for opt in ("--tdist", "--link", "--torch"):
            args = ["--tdist", self.file("t.json", TDIST)] if opt != "--tdist" else []
            self.refused(args + [opt, "/nonexistent/x.json"], opt, "/nonexistent/x.json", "cannot read")

    def test_not_json(self):
        bad = self.file("bad.json", "not json {")
        self.refused(["--tdist", bad], "--tdist", bad, "not JSON")
        self.refused(["--tdist", self.file("t.json", TDIST), "--link", bad], "--link", bad, "not JSON")

    def test_not_an_object(self):
        lst = self.file("list.json", [1, 2])
        self.refused(["--tdist", lst], "--tdist", lst, "expected a JSON object, found list")
        self.refused(["--tdist", self.file("t.json", TDIST), "--torch", lst], "--torch", lst, "found list")

    def test_link_missing_keys(self):
        t = self.file("t.json", TDIST)
        empty = self.file("empty.json", {})
        self.refused(["--tdist", t, "--link", empty], "--link", empty, "missing key 'all_to_all'")
        x = self.file("x.json", {"x": 1})
        self.refused(["--tdist", t, "--link", x], "missing key 'all_to_all'")
        nosum = self.file("nosum.json", {"all_to_all": {"egress_per_gpu_gb_s": 1.0}})
        self.refused(["--tdist", t, "--link", nosum], "missing key 'summary'")
        zero = self.file("zero.json", dict(LINK, all_to_all={"egress_per_gpu_gb_s": 0}))
        self.refused(["--tdist", t, "--link", zero],
                     "'all_to_all.egress_per_gpu_gb_s' is 0, must be a finite number > 0")
        s = self.file("s.json", dict(LINK, all_to_all={"egress_per_gpu_gb_s": "fast"}))
        self.refused(["--tdist", t, "--link", s], "'all_to_all.egress_per_gpu_gb_s' is str, expected int or float")

    def test_tdist_wrong_shape(self):
        r0 = self.file("r0.json", dict(TDIST, ranks=0))
        self.refused(["--tdist", r0], r0, "ranks 0, must be >= 1")
        noop = self.file("noop.json", {k: v for k, v in TDIST.items() if k != "operator"})
        self.refused(["--tdist", noop], noop, "missing key 'operator'")
        badop = self.file("badop.json", dict(TDIST, operator="gemm"))
        self.refused(["--tdist", badop], "operator 'gemm' is not one of ag_gemm")
        nores = self.file("nores.json", dict(TDIST, results={}))
        self.refused(["--tdist", nores], "'results' is dict, expected list")
        nok = self.file("nok.json", dict(TDIST, results=[{k: v for k, v in CASE.items() if k != "K"}]))
        self.refused(["--tdist", nok], nok, "missing key 'results[0].K'")
        ar = self.file("ar.json", dict(TDIST, operator="all_reduce"))
        self.refused(["--tdist", ar], "missing key 'results[0].bytes'")
        noside = self.file("noside.json", dict(TDIST, results=[dict(CASE, sides=[{"p50_s": 1.0}])]))
        self.refused(["--tdist", noside], "missing key 'results[0].sides[0].side'")

    def test_json_checked_first(self):
        t = self.file("t.json", TDIST)
        self.refused(["--tdist", t, "--json", "/nonexistent/x.json"], "--json /nonexistent/x.json",
                     "directory /nonexistent does not exist")
        self.refused(["--tdist", t, "--json", self.dir.name], "is a directory")
        # --json is checked before the inputs: a bad input after a bad --json names --json.
        self.refused(["--tdist", "/nonexistent/t.json", "--json", "/nonexistent/x.json"], "--json")


    def case(self, p50, side="tdist auto"):
        """TDIST with the side named `side` of its one case at p50_s = p50."""
        sides = [dict(s, p50_s=p50) if s["side"] == side else s for s in CASE["sides"]]
        return dict(TDIST, results=[dict(CASE, sides=sides)])

    def test_times_must_be_finite_and_positive(self):
        # D1: p50_s 0 beside an nccl+cublas side divided by zero after the header was printed.
        l = self.file("l.json", LINK)
        for i, v in enumerate((0, 0.0, -1, -1e-3, float("nan"), float("inf"), float("-inf"))):
            t = self.file("t%d.json" % i, self.case(v))
            for extra in ([], ["--link", l]):
                line = self.refused(["--tdist", t] + extra, "--tdist", t, "'results[0].sides[2].p50_s'",
                                    "case 'llama3.1-8b M=1024'", "side 'tdist auto'", "must be a finite number > 0")
                self.assertIn(repr(float(v)) if isinstance(v, float) else str(v), line)
        t = self.file("t.json", TDIST)
        for side in ("nccl+cublas", "gemm only"):
            self.refused(["--tdist", self.file("z.json", self.case(0, side))], "side '%s'" % side, "is 0")
        p99 = dict(TDIST, results=[dict(CASE, sides=[dict(CASE["sides"][0], p99_s=float("nan"))])])
        self.refused(["--tdist", self.file("p99.json", p99)], "'results[0].sides[0].p99_s'", "is nan")
        tz = dict(TORCH, results=[dict(TORCH["results"][0], sides=[{"side": "torch sequential", "p50_s": -2.0}])])
        self.refused(["--tdist", t, "--torch", self.file("tz.json", tz)], "--torch", "side 'torch sequential'",
                     "is -2.0")
        for bad, words in (({"egress_per_gpu_gb_s": float("nan")}, "'all_to_all.egress_per_gpu_gb_s' is nan"),
                           ({"egress_per_gpu_gb_s": float("inf")}, "'all_to_all.egress_per_gpu_gb_s' is inf")):
            self.refused(["--tdist", t, "--link", self.file("e.json", dict(LINK, all_to_all=bad))], "--link", words)
        for v in (0, -2.0, float("nan")):
            lat = self.file("lat.json", dict(LINK, latency_8B=[{"device_us": 2.0}, {"device_us": v}]))
            self.refused(["--tdist", t, "--link", lat], "'latency_8B[1].device_us'", "must be a finite number > 0")
        sm = self.file("sm.json", dict(LINK, summary=dict(LINK["summary"], unidirectional_max_gb_s=float("inf"))))
        self.refused(["--tdist", t, "--link", sm], "'summary.unidirectional_max_gb_s' is inf")
        self.refused(["--tdist", t, "--link", self.file("lt.json", dict(LINK, latency_8B={"device_us": 1}))],
                     "'latency_8B' is dict, expected list")

    def test_huge_integers_and_deep_nesting(self):
        # breaker5 B3: a 400-digit time raised OverflowError, 100000 nested lists RecursionError (tracebacks).
        big = json.dumps(TDIST).replace('"p50_s": 0.0015', '"p50_s": 1' + "0" * 400)
        self.refused(["--tdist", self.file("big.json", big)], "'results[0].sides[2].p50_s'", "401 digits")
        for i, text in enumerate(("[" * 100000 + "]" * 100000, '{"a": ' + "[" * 100000 + "]" * 100000 + "}")):
            self.refused(["--tdist", self.file("deep%d.json" % i, text)], "nested too deeply")

    def test_ratios_never_divide_by_zero(self):
        self.assertIsNone(mg_summary.ratio(1.0, 0.0))
        self.assertIsNone(mg_summary.ratio(1.0, -1.0))
        self.assertIsNone(mg_summary.ratio(1.0, float("nan")))
        self.assertIsNone(mg_summary.ratio(None, 1.0))
        self.assertIsNone(mg_summary.ratio(1.0, None))
        self.assertAlmostEqual(mg_summary.ratio(3.0, 2.0), 1.5)

    def test_wrong_flag(self):
        t, l, o = self.file("t.json", TDIST), self.file("l.json", LINK), self.file("o.json", TORCH)
        self.refused(["--tdist", t, "--torch", t], "--torch", t, "looks like a tdist bench JSON", "as --tdist")
        bare = {k: v for k, v in TDIST.items() if k not in ("ranks",)}  # no ranks: known by its sides
        b = self.file("b.json", bare)
        self.refused(["--tdist", t, "--torch", b], "--torch", b, "looks like a tdist bench JSON")
        self.refused(["--tdist", o], "--tdist", o, "looks like a torch_ops.py JSON", "as --torch")
        oe = self.file("oe.json", dict(TORCH, environment={"torch": "2.9", "ranks": 8}, results=[
            dict(TORCH["results"][0], sides=[{"side": "x", "p50_s": 1.0}])]))
        self.refused(["--tdist", oe], "--tdist", oe, "looks like a torch_ops.py JSON")
        self.refused(["--tdist", l], "--tdist", l, "looks like a td_link_bench JSON", "as --link")
        self.refused(["--tdist", t, "--torch", l], "--torch", l, "looks like a td_link_bench JSON")
        self.refused(["--tdist", t, "--link", t], "--link", t, "looks like a tdist bench JSON")
        self.refused(["--tdist", t, "--link", o], "--link", o, "looks like a torch_ops.py JSON")

    def test_same_file_or_case_twice(self):
        t, l, o = self.file("t.json", TDIST), self.file("l.json", LINK), self.file("o.json", TORCH)
        self.refused(["--tdist", t, t], "--tdist %s: the same file as --tdist %s" % (t, t))
        ln = os.path.join(self.dir.name, "ln.json")
        os.symlink(t, ln)
        self.refused(["--tdist", t, ln], "--tdist %s: the same file as --tdist %s" % (ln, t))
        self.refused(["--tdist", t, "--torch", o, o], "--torch %s: the same file as --torch %s" % (o, o))
        self.refused(["--link", l, "--tdist", t, "--json", t], "--json %s: is the input --tdist %s" % (t, t),
                     "overwritten")
        self.refused(["--link", l, "--tdist", t, "--json", l], "--json %s: is the input --link" % l)
        # a copy is another file, but its cases would still count twice in the means
        t2 = self.file("t2.json", TDIST)
        self.refused(["--tdist", t, t2], "--tdist %s: ag_gemm case 'llama3.1-8b M=1024' (8 ranks) is also in "
                     "--tdist %s" % (t2, t))
        o2 = self.file("o2.json", TORCH)
        self.refused(["--tdist", t, "--torch", o, o2], "--torch %s: ag_gemm case 'llama3.1-8b' M=1024 is also in "
                     "--torch %s" % (o2, o))
        # the same case at another rank count is another row
        rc, text, err = self.run_it("--tdist", t, self.file("t4.json", dict(TDIST, ranks=4)))
        self.assertEqual(rc, 0, err)
        self.assertEqual(text.count("| ag_gemm | llama3.1-8b M=1024 |"), 2)

    def test_torch_matches_rank_count(self):
        t = self.file("t.json", TDIST)
        out = os.path.join(self.dir.name, "s.json")
        for ranks, want in ((8, 3e-3), (4, None)):
            o = self.file("o%d.json" % ranks, dict(TORCH, environment={"torch": "2.9", "ranks": ranks}))
            rc, _, err = self.run_it("--tdist", t, "--torch", o, "--json", out)
            self.assertEqual(rc, 0, err)
            with open(out) as f:
                row = json.load(f)["rows"][0]
            self.assertEqual(row["torch_best_s"], want, "torch at %d ranks vs tdist at 8" % ranks)

    def test_empty_results(self):
        t = self.file("t.json", TDIST)
        e = self.file("e.json", dict(TDIST, results=[]))
        self.refused(["--tdist", e], "--tdist", e, "'results' is empty")
        oe = self.file("oe.json", dict(TORCH, results=[]))
        self.refused(["--tdist", t, "--torch", oe], "--torch", oe, "'results' is empty")

    def test_dtype(self):
        d = self.file("d.json", dict(TDIST, dtype="f64"))
        self.refused(["--tdist", d], "--tdist", d, "dtype 'f64' is not one of bf16, f16, f32")
        nod = self.file("nod.json", {k: v for k, v in TDIST.items() if k != "dtype"})
        self.refused(["--tdist", nod], "--tdist", nod, "missing key 'dtype'")
        # the floor uses the dtype's size: f32 doubles ag_gemm's bytes and so its comm time
        l, out = self.file("l.json", LINK), os.path.join(self.dir.name, "s.json")
        comm = {}
        for dt in ("bf16", "f32"):
            rc, _, err = self.run_it("--link", l, "--tdist", self.file(dt + ".json", dict(TDIST, dtype=dt)),
                                     "--json", out)
            self.assertEqual(rc, 0, err)
            with open(out) as f:
                comm[dt] = json.load(f)["rows"][0]["comm_s"]
        self.assertAlmostEqual(comm["f32"], 2 * comm["bf16"])
        self.assertAlmostEqual(comm["bf16"], 7 / 8 * 1024 * 4096 * 2 / 300e9)

    def test_sizes_below_one(self):
        for k in ("M", "N", "K"):
            for v in (0, -5):
                b = self.file("b.json", dict(TDIST, results=[dict(CASE, **{k: v})]))
                self.refused(["--tdist", b], "'results[0].%s' (case 'llama3.1-8b M=1024') is %d, must be >= 1" % (k, v))
        ar = dict(TDIST, operator="all_reduce", results=[{"case": "8K", "bytes": -8192, "sides": []}])
        self.refused(["--tdist", self.file("ar.json", ar)], "'results[0].bytes' (case '8K') is -8192")
        t = self.file("t.json", TDIST)
        om = self.file("om.json", dict(TORCH, results=[dict(TORCH["results"][0], M=0)]))
        self.refused(["--tdist", t, "--torch", om], "--torch", "'results[0].M'", "is 0, must be >= 1")
        er = self.file("er.json", dict(TDIST, results=[dict(CASE, error=5)]))
        self.refused(["--tdist", er], "'results[0].error' is int, expected str")
        for v in (-1024, 0):
            nb = self.file("nb.json", dict(LINK, nccl=[{"collective": "all_reduce", "bytes": v, "busbw_gb_s": 1.0}]))
            self.refused(["--tdist", t, "--link", nb], "--link", "'nccl[0].bytes' is %d, must be >= 1" % v)
        bw = self.file("bw.json", dict(LINK, nccl=[{"collective": "all_reduce", "bytes": 8, "busbw_gb_s": -1.0}]))
        self.refused(["--tdist", t, "--link", bw], "'nccl[0].busbw_gb_s' is -1.0, must be a finite number >= 0")

    def test_link_sizes_under_1k_in_bytes(self):
        sizes = [8, 512, 1024, 1536, 64 << 10, 64 << 20]
        nccl = [{"collective": "all_reduce", "bytes": b, "busbw_gb_s": 1.0 + i} for i, b in enumerate(sizes)]
        l = self.file("l.json", dict(LINK, nccl=nccl))
        rc, text, err = self.run_it("--link", l, "--tdist", self.file("t.json", TDIST))
        self.assertEqual(rc, 0, err)
        header = [x for x in text.splitlines() if x.startswith("| collective |")]
        self.assertEqual(header, ["| collective | " + " | ".join(mg_summary.size_label(b) for b in sizes) + " |"])
        self.assertEqual([mg_summary.size_label(b) for b in sizes], ["8 B", "512 B", "1 KiB", "1.5 KiB", "64 KiB",
                                                                     "64 MiB"])
        self.assertNotIn("0 KiB", header[0])


if __name__ == "__main__":
    unittest.main()
