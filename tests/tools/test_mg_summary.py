# SPDX-License-Identifier: Apache-2.0
"""bench/mg_summary.py's input checks (tester report item 3): every named
input that is missing, not JSON, or of the wrong shape, and a --json that
cannot be written, fail with rc 1 and one line naming the file and what is
wrong, before any table is printed; a well-formed input still gives the
tables with rc 0. CPU only, no GPU, no torch (label cpu)."""
import json
import os
import subprocess
import sys
import tempfile
import unittest

SRC = os.environ.get("TD_SOURCE_DIR", os.path.join(os.path.dirname(__file__), "..", ".."))
SCRIPT = os.path.join(SRC, "bench", "mg_summary.py")

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
        self.refused(["--tdist", t, "--link", zero], "egress_per_gpu_gb_s must be > 0")
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


if __name__ == "__main__":
    unittest.main()
