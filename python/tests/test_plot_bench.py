"""lab/plot_bench.py: renders bench JSON into a PNG, or says it skipped without matplotlib.

Uses synthetic runs shaped like r35a_bench --json, and real ones when $R35A_BENCH names the bench
binary (ctest sets it when the bench is built)."""
import importlib.util
import json
import os
import subprocess
import sys
import tempfile
import unittest

TOOL = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "lab", "plot_bench.py")
HAVE_MATPLOTLIB = importlib.util.find_spec("matplotlib") is not None


def synthetic_run(head_size, contexts):
    return {
        "problem": {"op": "paged", "dtype": "f16", "head_size": head_size, "num_q_heads": 32, "num_kv_heads": 8,
                    "page_size": 16, "batch": 1, "query_len": 1, "window": 0},
        "machine": {"cpu": "Test CPU", "cpus": 2, "backend": "reference", "arch": "x86_64",
                    "library_version": "0.1.0"},
        "peak": {"gbs": 200.0, "source": "given", "method": "--peak-gbs"},
        "rows": [{"implementation": "reference", "context": c, "gbs": 10.0 + c / 100.0,
                  "roofline_pct": 5.0 + c / 200.0, "median_us": 1.0} for c in contexts],
    }


class PlotBenchTest(unittest.TestCase):
    def render(self, inputs):
        with tempfile.TemporaryDirectory() as tmp:
            paths = []
            for i, text in enumerate(inputs):
                paths.append(os.path.join(tmp, "run%d.json" % i))
                with open(paths[-1], "w") as f:
                    f.write(text)
            png = os.path.join(tmp, "plot.png")
            done = subprocess.run([sys.executable, TOOL, "-o", png] + paths, capture_output=True, text=True,
                                  timeout=120)
            self.assertEqual(done.returncode, 0, done.stderr)
            if not HAVE_MATPLOTLIB:
                self.assertIn("matplotlib is not installed", done.stderr)
                self.assertFalse(os.path.exists(png))
                self.skipTest("matplotlib is not installed; checked that the tool says it skipped the plot")
            with open(png, "rb") as f:
                data = f.read()
            self.assertTrue(data.startswith(b"\x89PNG\r\n\x1a\n"), "not a PNG")
            self.assertGreater(len(data), 10000)
            return data

    def test_synthetic_runs(self):
        # Two files, and one of them holding two concatenated runs.
        self.render([json.dumps(synthetic_run(64, [128, 1024, 8192])),
                     json.dumps(synthetic_run(128, [128, 1024])) + "\n" + json.dumps(synthetic_run(256, [512]))])

    def test_real_bench_output(self):
        bench = os.environ.get("R35A_BENCH")
        if not bench or not os.path.exists(bench):
            self.skipTest("R35A_BENCH does not name the bench binary")
        outputs = []
        for head_size in ("64", "128"):
            done = subprocess.run([bench, "--head-size", head_size, "--contexts", "64,256", "--iters", "2",
                                   "--peak-gbs", "100", "--json"], capture_output=True, text=True, timeout=120)
            self.assertEqual(done.returncode, 0, done.stderr)
            outputs.append(done.stdout)
        self.render(outputs)

    def test_rejects_other_json(self):
        with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
            f.write('{"not": "bench"}')
        try:
            done = subprocess.run([sys.executable, TOOL, "-o", os.devnull, f.name], capture_output=True, text=True,
                                  timeout=60)
        finally:
            os.unlink(f.name)
        self.assertNotEqual(done.returncode, 0)
        self.assertIn("problem", done.stderr)


if __name__ == "__main__":
    unittest.main()
