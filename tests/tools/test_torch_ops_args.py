# SPDX-License-Identifier: Apache-2.0
"""bench/torch_ops.py's argument checks (tester report item 4): every bad
argument exits 2 with a message naming the option, before torch is
imported; --models is an exact membership test; a run that measures nothing
(no PyTorch) says "not run" and exits 3, not 0; --tokens is the spelling
torchrun's parser does not mistake for a prefix. CPU only: torch is hidden
by a stub on PYTHONPATH whose import fails, so the result does not depend on
whether this machine has PyTorch (label cpu). Also (tester report breaker4
D10, C6): options that do not apply to the op, repeated options, --ranks
outside 1..64 and a --ranks that differs from torchrun's WORLD_SIZE are
refused; --m takes whole numbers only; the default rank count is tdist
bench's."""
import os
import re
import subprocess
import sys
import tempfile
import unittest
from unittest import mock

SRC = os.environ.get("TD_SOURCE_DIR", os.path.join(os.path.dirname(__file__), "..", ".."))
BENCH = os.path.join(SRC, "bench")
sys.path.insert(0, BENCH)
import torch_ops  # noqa: E402  (imports no torch at module level)


class TorchOpsArgs(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.stub = tempfile.TemporaryDirectory()
        with open(os.path.join(cls.stub.name, "torch.py"), "w") as f:
            f.write("raise ImportError('torch hidden by test_torch_ops_args')\n")

    @classmethod
    def tearDownClass(cls):
        cls.stub.cleanup()

    def run_it(self, *args, world=None):
        env = dict(os.environ, PYTHONPATH=self.stub.name)
        env.pop("WORLD_SIZE", None)
        if world is not None:
            env["WORLD_SIZE"] = world
        p = subprocess.run([sys.executable, os.path.join(BENCH, "torch_ops.py")] + list(args),
                           capture_output=True, text=True, timeout=30, env=env)
        return p.returncode, p.stdout, p.stderr

    def refused(self, args, *words, world=None):
        rc, out, err = self.run_it(*args, world=world)
        self.assertEqual(rc, 2, "args %s: %s" % (args, err))
        self.assertNotIn("Traceback", err)
        self.assertNotIn("not run", err + out, "checked before the import of torch")
        last = err.strip().splitlines()[-1]
        for w in words:
            self.assertIn(w, last)

    def test_models_exact_membership(self):
        self.refused(["ag_gemm", "--models", "bogus"], "--models", "'bogus'", "llama3.1-8b")
        self.refused(["ag_gemm", "--models", "llama3.1-8b,llama3.1-70b-typo"], "'llama3.1-70b-typo'")
        self.refused(["ag_gemm", "--models", "b"], "--models", "'b'")
        self.refused(["ag_gemm", "--models", ""], "--models", "''")
        self.refused(["ag_gemm", "--models", "llama3.1-8b,llama3.1-8b"], "names llama3.1-8b twice")
        self.refused(["ag_gemm", "--models", "check", "--no-check"], "selects no case")

    def test_models_selection(self):
        a = torch_ops.parse_args(["ag_gemm", "--models", "llama3.1-70b", "--m", "1024,8192"])
        cases = torch_ops.shapes(a, 8)
        self.assertEqual([(c[0], c[1]) for c in cases],
                         [("llama3.1-70b", 1024), ("llama3.1-70b", 8192), ("check 4091xR", 4091 * 8)])
        self.assertEqual(cases[0][2:4], torch_ops.MODELS["llama3.1-70b"])
        a = torch_ops.parse_args(["ag_gemm", "--models", "all", "--tokens", "512", "--no-check"])
        self.assertEqual([c[0] for c in torch_ops.shapes(a, 2)], list(torch_ops.MODELS))
        a = torch_ops.parse_args(["all_reduce", "--sizes", "8K,2M,100B"])
        self.assertEqual([c[4] for c in torch_ops.shapes(a, 2)], [8 << 10, 2 << 20, 100])

    def test_m_and_tokens(self):
        # whole numbers only, as tdist bench's --m (C6: '1K' was taken here and refused there)
        for bad in ("abc", "0", "0,-5", "-5", "1,,2", "8X", "2M", "1K", "1k", "1024B", "1e3", " 64"):
            self.refused(["ag_gemm", "--m", bad], "--tokens/--m", "'%s'" % bad)
            self.refused(["ag_gemm", "--tokens", bad], "--tokens/--m")
        self.refused(["ag_gemm", "--m", "512,512"], "names 512 twice")
        self.refused(["ag_gemm", "--m", ",".join(str(m) for m in range(1, 34))], "--tokens/--m gives 33 values; "
                     "at most 32")
        # no abbreviations: --tok is not --tokens (torchrun-style prefix confusion is what --tokens avoids)
        self.refused(["ag_gemm", "--tok", "8"], "unrecognized arguments: --tok")

    def test_sizes(self):
        for bad in ("8X", "0,-4K", "0", ",8K", "8K,", "1.5K"):
            self.refused(["all_reduce", "--sizes", bad], "--sizes", "'%s'" % bad)
        self.refused(["all_reduce", "--sizes", "6", "--dtype", "f32"], "--sizes", "not a whole number of f32")
        self.refused(["all_reduce", "--sizes", "8K,8K"], "names 8192 twice")

    def test_counts(self):
        self.refused(["ag_gemm", "--iters", "0"], "--iters must be >= 1, got 0")
        self.refused(["ag_gemm", "--ranks", "0"], "--ranks must be >= 1, got 0")
        self.refused(["ag_gemm", "--warmup", "-1"], "--warmup must be >= 0, got -1")
        self.refused(["ag_gemm", "--iters", "x"], "--iters", "invalid int value")

    def test_ranges_as_tdist_bench(self):
        self.refused(["ag_gemm", "--ranks", "999"], "--ranks must be <= 64, got 999")
        self.refused(["ag_gemm", "--ranks", "65"], "--ranks must be <= 64, got 65")
        self.refused(["ag_gemm", "--iters", "100001"], "--iters must be <= 100000, got 100001")
        self.refused(["ag_gemm", "--warmup", "10001"], "--warmup must be <= 10000, got 10001")
        with mock.patch.dict(os.environ, {"WORLD_SIZE": "1"}):
            self.assertEqual(torch_ops.parse_args(["ag_gemm", "--ranks", "64"]).ranks, 64)

    def test_default_ranks_as_tdist_bench(self):
        # tdist bench's default rank count, read from its option defaults (tools/tdist/bench_ops.c)
        with open(os.path.join(SRC, "tools", "tdist", "bench_ops.c")) as f:
            m = re.search(r"bo_opts o = \{[^}]*\.ranks = (\d+)", f.read())
        self.assertIsNotNone(m, "tdist bench's default --ranks not found in bench_ops.c")
        with mock.patch.dict(os.environ, {"WORLD_SIZE": "1"}):
            a = torch_ops.parse_args(["ag_gemm", "--models", "check"])
        self.assertEqual(a.ranks, int(m.group(1)))
        self.assertEqual(torch_ops.shapes(a, a.ranks)[-1][1], 4091 * int(m.group(1)))

    def test_ranks_and_world_size(self):
        self.refused(["ag_gemm", "--ranks", "8"], "--ranks 8 differs from WORLD_SIZE 4", "leave --ranks out or give 4",
                     world="4")
        for bad in ("abc", "0", "-2"):
            self.refused(["ag_gemm"], "WORLD_SIZE '%s' is not a rank count" % bad, world=bad)
        # breaker5 C8: an empty WORLD_SIZE reads as unset (one-GPU mode), as tdist's variables do
        with mock.patch.dict(os.environ, {"WORLD_SIZE": ""}):
            self.assertEqual(torch_ops.parse_args(["ag_gemm", "--ranks", "3"]).world, 1)
        # --sizes up to 512G, as tdist bench
        self.assertEqual(torch_ops.parse_args(["all_reduce", "--sizes", "512G"]).ranks, 2)
        self.refused(["all_reduce", "--sizes", "513G"], "--sizes")
        rc, _, err = self.run_it("ag_gemm", "--ranks", "4", "--models", "check", world="4")
        self.assertEqual(rc, torch_ops.NOT_RUN, "the same count is accepted: %s" % err)
        with mock.patch.dict(os.environ, {"WORLD_SIZE": "4"}):
            self.assertEqual(torch_ops.parse_args(["gemm_rs"]).ranks, 4, "under torchrun the default is WORLD_SIZE")
        with mock.patch.dict(os.environ, {"WORLD_SIZE": "1"}):
            self.assertEqual(torch_ops.parse_args(["gemm_rs", "--ranks", "8"]).ranks, 8, "one-GPU mode emulates")

    def test_options_that_do_not_apply(self):
        for op in ("ag_gemm", "gemm_rs", "gemm_ar"):
            self.refused([op, "--sizes", "8K"], "--sizes applies to all_reduce only")
        for opt, val in (("--tokens", "64"), ("--m", "64"), ("--models", "llama3.1-8b")):
            self.refused(["all_reduce", opt, val], "%s applies to the GEMM operators only; all_reduce takes --sizes"
                         % opt)
        self.refused(["all_reduce", "--no-check"], "--no-check applies to the GEMM operators only")
        with mock.patch.dict(os.environ, {"WORLD_SIZE": "1"}):
            self.assertEqual(len(torch_ops.shapes(torch_ops.parse_args(["all_reduce"]), 2)),
                             len(torch_ops.SIZES.split(",")), "the defaults of the other ops are no options given")

    def test_repeated_options(self):
        for opt, a, b in (("--iters", "1", "2"), ("--warmup", "1", "1"), ("--ranks", "2", "4"), ("--json", "a", "b"),
                          ("--dtype", "bf16", "f32"), ("--models", "check", "all"), ("--tokens", "64", "128"),
                          ("--m", "64", "64")):
            self.refused(["ag_gemm", opt, a, opt, b], "%s given twice" % opt)
        self.refused(["ag_gemm", "--iters=1", "--iters", "2"], "--iters given twice")
        self.refused(["ag_gemm", "--m", "64", "--tokens", "128"], "--tokens given twice (also as --m)")
        self.refused(["ag_gemm", "--no-check", "--no-check"], "--no-check given twice")
        self.refused(["all_reduce", "--sizes", "8K", "--sizes", "8K"], "--sizes given twice")
        self.refused(["ag_gemm", "--models", "all,llama3.1-8b"], "--models: all already includes llama3.1-8b")

    def test_json(self):
        self.refused(["ag_gemm", "--json", "/nonexistent/x.json"], "--json", "directory /nonexistent does not exist")
        self.refused(["ag_gemm", "--json", tempfile.gettempdir()], "--json", "not a file name")

    def test_not_run_without_torch(self):
        with tempfile.TemporaryDirectory() as d:
            out = os.path.join(d, "t.json")
            rc, so, err = self.run_it("ag_gemm", "--models", "llama3.1-8b", "--json", out)
            self.assertEqual(rc, torch_ops.NOT_RUN)
            self.assertEqual(rc, 3)
            self.assertIn("PyTorch is not installed: not run", err)
            self.assertFalse(os.path.exists(out), "no JSON when nothing was measured")


if __name__ == "__main__":
    unittest.main()
