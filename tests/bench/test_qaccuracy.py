#!/usr/bin/env python3
"""Unit test of bench/qaccuracy.py, the INT8 rows' accuracy figures, on
synthetic arrays whose answers are known by construction.

Usage: test_qaccuracy.py [BENCH_DIR]   (default: ../../bench from here)
"""
import json
import os
import sys
import tempfile
import unittest

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, sys.argv.pop(1) if len(sys.argv) > 1 else os.path.join(HERE, "..", "..", "bench"))
import qaccuracy  # noqa: E402


def grid(rng, n, step, zp=128):
    """Dequantized u8 values: (q - zp) * step, in float32 as DequantizeLinear gives them."""
    q = rng.integers(0, 256, size=n)
    return ((q - zp).astype(np.float32) * np.float32(step)), q


class WithinOneStep(unittest.TestCase):
    def test_counts_whole_steps(self):
        rng = np.random.default_rng(1)
        step = 0.0436200313270092   # MobileNetV2-QDQ's output step: not a power of two
        exp, q = grid(rng, 1000, step)
        # 600 equal, 250 one step off (either way), 100 two steps, 50 ten steps
        shift = np.array([0] * 600 + [1, -1] * 125 + [2] * 50 + [-2] * 50 + [10] * 50)
        rng.shuffle(shift)
        act = ((q + shift - 128).astype(np.float32) * np.float32(step))
        self.assertAlmostEqual(qaccuracy.within_one_step(act, exp, step), 85.0, places=9)

    def test_large_values_on_the_grid_count_as_one_step(self):
        # float32 rounding of (q - zp) * scale at |q - zp| ~ 127 must not push a
        # one-step difference over the line
        step = np.float32(0.1)
        exp = np.arange(-128, 127, dtype=np.float32) * step
        act = np.arange(-127, 128, dtype=np.float32) * step
        self.assertEqual(qaccuracy.within_one_step(act, exp, float(step)), 100.0)

    def test_just_over_one_step_is_outside(self):
        exp = np.zeros(4, np.float32)
        act = np.array([0.0, 0.5, 1.0, 1.01], np.float32)
        self.assertEqual(qaccuracy.within_one_step(act, exp, 1.0), 75.0)

    def test_nan_is_never_within(self):
        exp = np.zeros(4, np.float32)
        act = np.array([0, np.nan, 0, np.inf], np.float32)
        self.assertEqual(qaccuracy.within_one_step(act, exp, 1.0), 50.0)

    def test_rejects_bad_input(self):
        with self.assertRaises(ValueError):
            qaccuracy.within_one_step(np.zeros(3), np.zeros(4), 1.0)
        for bad in (0, -1.0, None, float("nan")):
            with self.assertRaises(ValueError):
                qaccuracy.within_one_step(np.zeros(3), np.zeros(3), bad)


class Cosine(unittest.TestCase):
    def test_known_values(self):
        rng = np.random.default_rng(2)
        a = rng.standard_normal((2, 128, 768)).astype(np.float32)
        self.assertAlmostEqual(qaccuracy.cosine(a, a), 1.0, places=12)
        self.assertAlmostEqual(qaccuracy.cosine(a, 3 * a), 1.0, places=12)
        self.assertAlmostEqual(qaccuracy.cosine(a, -a), -1.0, places=12)
        self.assertAlmostEqual(qaccuracy.cosine(np.array([1.0, 0]), np.array([0, 2.0])), 0.0, places=12)
        self.assertAlmostEqual(qaccuracy.cosine(np.array([1.0, 1.0]), np.array([1.0, 0])), np.sqrt(0.5), places=12)

    def test_noise_lowers_it_as_expected(self):
        # b = a + e with e independent of a, var(e) = 0.01 var(a): cos ~ 1/sqrt(1.01)
        rng = np.random.default_rng(3)
        a = rng.standard_normal(200_000)
        b = a + 0.1 * rng.standard_normal(a.size)
        self.assertAlmostEqual(qaccuracy.cosine(a, b), 1 / np.sqrt(1.01), places=3)

    def test_float32_accumulation_is_not_used(self):
        # 10M elements of 1: in float32 the dot product would stall at 2^24
        a = np.ones(10_000_000, np.float32)
        self.assertAlmostEqual(qaccuracy.cosine(a, a), 1.0, places=9)

    def test_zero_and_shape(self):
        self.assertEqual(qaccuracy.cosine(np.zeros(3), np.zeros(3)), 1.0)
        self.assertEqual(qaccuracy.cosine(np.zeros(3), np.ones(3)), 0.0)
        with self.assertRaises(ValueError):
            qaccuracy.cosine(np.zeros(3), np.zeros((3, 1)))


class ModelAccuracy(unittest.TestCase):
    def write(self, d, outputs):
        info = {"outputs": {}}
        for name, (step, exp, ort, fp32) in outputs.items():
            info["outputs"][name] = {"step": step}
            np.save(os.path.join(d, f"expected_{name}.npy"), exp)
            np.save(os.path.join(d, f"ort_opt_{name}.npy"), ort)
            np.save(os.path.join(d, f"fp32_{name}.npy"), fp32)
        with open(os.path.join(d, "quant.json"), "w") as f:
            json.dump(info, f)

    def test_step_outputs(self):
        with tempfile.TemporaryDirectory() as d:
            exp = np.arange(10, dtype=np.float32) * 0.5
            ort = exp.copy()
            ort[:3] += 1.0        # two steps off: 70% within
            self.write(d, {"logits": (0.5, exp, ort, exp)})
            act = exp.copy()
            act[0] += 0.5         # one step: within
            act[1] -= 1.5         # three steps: not
            got = qaccuracy.model_accuracy(d, {"logits": act})
            self.assertEqual(got["kind"], "within_one_step")
            self.assertAlmostEqual(got["value"], 90.0)
            self.assertAlmostEqual(got["ort_value"], 70.0)
            self.assertEqual(qaccuracy.fmt(got["kind"], got["value"]), "90.0% in 1 step")

    def test_float_outputs_use_cosine_vs_fp32(self):
        with tempfile.TemporaryDirectory() as d:
            fp32 = np.array([1.0, 2.0, 3.0], np.float32)
            self.write(d, {"h": (None, fp32 * 1.1, -fp32, fp32)})
            got = qaccuracy.model_accuracy(d, {"h": np.array([1.0, 2.0, 0.0], np.float32)})
            self.assertEqual(got["kind"], "cosine_vs_fp32")
            self.assertAlmostEqual(got["value"], 5 / np.sqrt(5 * 14))
            self.assertAlmostEqual(got["ort_value"], -1.0)
            self.assertTrue(qaccuracy.fmt(got["kind"], got["value"]).startswith("cos 0.597"))

    def test_missing_output_is_an_error(self):
        with tempfile.TemporaryDirectory() as d:
            self.write(d, {"a": (1.0, np.zeros(2), np.zeros(2), np.zeros(2))})
            with self.assertRaises(KeyError):
                qaccuracy.model_accuracy(d, {"b": np.zeros(2)})


class Int8Row(unittest.TestCase):
    """run_bench.py's INT8 table rows, complete and n/a."""

    def setUp(self):
        import run_bench
        self.rb = run_bench

    def cells(self, line):
        return [c.strip() for c in line.strip().strip("|").split("|")]

    def test_complete_row(self):
        r = {"model": "resnet50-qdq", "batch": 1, "threads": 2, "median_ms": 10.0, "ort_median_ms": 12.5,
             "ratio": 0.8, "fp32_median_ms": 30.0, "speedup": 3.0, "size_ratio": 0.25,
             "accuracy_kind": "within_one_step", "accuracy": 99.84, "ort_accuracy": 99.9}
        cells = self.cells(self.rb.fmt_int8_row(r))
        self.assertEqual(len(cells), len(self.cells(self.rb.INT8_HEADER)))
        self.assertEqual(cells[:11], ["resnet50-qdq", "1", "2", "10.00", "12.50", "0.80", "30.00", "3.00", "0.25",
                                      "99.8% in 1 step", "99.9% in 1 step"])

    def test_na_row_names_kilns_error(self):
        r = {"model": "bert-dynk", "batch": 1, "threads": 1, "ort_median_ms": 140.0, "fp32_median_ms": 240.0,
             "kiln_error": "kiln compile: unexpected argument '--quantize'",
             "accuracy_kind": "cosine_vs_fp32", "ort_accuracy": 0.99862}
        cells = self.cells(self.rb.fmt_int8_row(r))
        self.assertEqual(len(cells), len(self.cells(self.rb.INT8_HEADER)))
        self.assertEqual(cells[3], "n/a")
        self.assertEqual(cells[4], "140.00")
        self.assertEqual(cells[9], "n/a")
        self.assertEqual(cells[10], "cos 0.99862")
        self.assertEqual(cells[11], "kiln compile: unexpected argument '--quantize'")


if __name__ == "__main__":
    unittest.main(verbosity=2)
