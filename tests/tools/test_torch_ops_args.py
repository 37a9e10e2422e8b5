# SPDX-License-Identifier: Apache-2.0
"""bench/torch_ops.py's argument checks (tester report item 4): every bad
argument exits 2 with a message naming the option, before torch is
imported; --models is an exact membership test; a run that measures nothing
(no PyTorch) says "not run" and exits 3, not 0; --tokens is the spelling
torchrun's parser does not mistake for a prefix. CPU only: torch is hidden
by a stub on PYTHONPATH whose import fails, so the result does not depend on
whether this machine has PyTorch (label cpu)."""
import os
import subprocess
import sys
import tempfile
import unittest

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

    def run_it(self, *args):
        env = dict(os.environ, PYTHONPATH=self.stub.name)
        p = subprocess.run([sys.executable, os.path.join(BENCH, "torch_ops.py")] + list(args),
                           capture_output=True, text=True, timeout=30, env=env)
        return p.returncode, p.stdout, p.stderr

    def refused(self, args, *words):
        rc, out, err = self.run_it(*args)
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
        a = torch_ops.parse_args(["ag_gemm", "--models", "llama3.1-70b", "--m", "1K,8192"])
        cases = torch_ops.shapes(a, 8)
        self.assertEqual([(c[0], c[1]) for c in cases],
                         [("llama3.1-70b", 1024), ("llama3.1-70b", 8192), ("check 4091xR", 4091 * 8)])
        self.assertEqual(cases[0][2:4], torch_ops.MODELS["llama3.1-70b"])
        a = torch_ops.parse_args(["ag_gemm", "--models", "all", "--tokens", "512", "--no-check"])
        self.assertEqual([c[0] for c in torch_ops.shapes(a, 2)], list(torch_ops.MODELS))
        a = torch_ops.parse_args(["all_reduce", "--sizes", "8K,2M,100B"])
        self.assertEqual([c[4] for c in torch_ops.shapes(a, 2)], [8 << 10, 2 << 20, 100])

    def test_m_and_tokens(self):
        for bad in ("abc", "0", "0,-5", "-5", "1,,2", "8X", "2M"):
            self.refused(["ag_gemm", "--m", bad], "--tokens/--m", "'%s'" % bad)
            self.refused(["ag_gemm", "--tokens", bad], "--tokens/--m")
        self.refused(["ag_gemm", "--m", "512,512"], "names 512 twice")
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
