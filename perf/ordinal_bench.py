"""Benchmark: OrdinalLogitRegressor fit on 10,000 x 30 proportional-odds data.

Run: python perf/ordinal_bench.py [--n 10000] [--p 30]

Target: under one second for the fit (best of 5), converged before ``max_iter``.
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from pulse_ml.models.ordinal import OrdinalLogitRegressor

THRESHOLDS = np.array([-2.0, -0.5, 0.5, 2.0])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=10_000)
    parser.add_argument("--p", type=int, default=30)
    args = parser.parse_args()
    rng = np.random.default_rng(13)
    X = rng.normal(size=(args.n, args.p))
    y = 1.0 + np.searchsorted(THRESHOLDS, X @ (0.3 * rng.normal(size=args.p))
                              + rng.logistic(size=args.n))
    times = []
    for _ in range(5):
        model = OrdinalLogitRegressor(C=2.0, class_weight="balanced")
        start = time.perf_counter()
        model.fit(X, y)
        times.append(time.perf_counter() - start)
    print(f"fit {args.n} x {args.p}: best {min(times):.3f} s, median {np.median(times):.3f} s, "
          f"{model.n_iter_} iterations (max {model.max_iter}); target < 1 s")


if __name__ == "__main__":
    main()
