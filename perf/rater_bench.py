"""Benchmark: coverage where real raters live (issue 19), for the before/after table.

Run: PYTHONPATH=. python perf/rater_bench.py [--scale 1.0]
(to measure another checkout's rules, put it first: PYTHONPATH=/path/to/old:. ...; the designs
come from this checkout's tests/stats/realistic_sims.py either way).

Every design is at the null (truth 0 for any subpopulation), seeded; each row prints naive and
augmented coverage of the default 95% intervals with the Monte-Carlo s.e. sqrt(p (1 - p) / R),
the mean printed CI reduction and the median Kish effective labeled users per arm.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "stats"))
import realistic_sims as rs  # noqa: E402

from pulse_ml.stats.arm_batch import compare_batch  # noqa: E402

DESIGNS = {
    "label shift rb 0.17 (i.i.d., n 150, N 1500)": lambda r: rs.label_shift(r, 1, rb=0.17),
    "label shift rb 0.32": lambda r: rs.label_shift(r, 1, rb=0.32),
    "label shift rb 0.50": lambda r: rs.label_shift(r, 1, rb=0.5),
    "no shift (same design)": lambda r: rs.label_shift(r, 3, rb=0.0),
    "label shift rb 0.32, Pareto users": lambda r: rs.label_shift(r, 12, rb=0.32, users=True),
    "no shift, Pareto users": lambda r: rs.label_shift(r, 12, rb=0.0, users=True),
    "concentrated: a few of 35-50 raters, Pareto 1.1": lambda r: rs.concentrated(r, 4),
    "concentrated: 60 raters, Pareto 1.1": lambda r: rs.concentrated(r, 5),
    "concentrated: 60 raters, Pareto 1.5": lambda r: rs.concentrated(r, 7, tail=1.5),
    "strong predictor r~0.85, n 10": lambda r: rs.strong_few(r, 15, n=10),
    "strong predictor r~0.85, n 20": lambda r: rs.strong_few(r, 25, n=20),
    "strong predictor r~0.85, n 30": lambda r: rs.strong_few(r, 35, n=30),
}


def main() -> None:
    """Print one row per design."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scale", type=float, default=1.0, help="replications x 10,000")
    args = parser.parse_args()
    reps = max(200, int(10_000 * args.scale))
    print(f"{'design':45s} | {'naive':>15s} | {'augmented':>15s} | reduction | G*/arm |  s")
    for name, make in DESIGNS.items():
        start = time.perf_counter()
        arms, kw, tau = make(reps)
        b = compare_batch(*arms, **kw)
        cov = [np.mean((lo <= tau) & (tau <= hi))
               for lo, hi in ((b.naive_lower, b.naive_upper), (b.aug_lower, b.aug_upper))]
        mc = [np.sqrt(c * (1 - c) / reps) for c in cov]
        g_eff = getattr(b.result, "g_eff", None)
        g = f"{np.median(g_eff):6.1f}" if g_eff is not None else "     -"
        print(f"{name:45s} | {cov[0]:.4f} ± {mc[0]:.4f} | {cov[1]:.4f} ± {mc[1]:.4f} | "
              f"{np.mean(b.ci_reduction_pct):8.1f}% | {g} | {time.perf_counter() - start:.0f}",
              flush=True)


if __name__ == "__main__":
    main()
