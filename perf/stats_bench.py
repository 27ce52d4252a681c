"""Benchmark: compare_arms against the memory-bandwidth floor and a per-arm ppi_py loop.

Run: python perf/stats_bench.py [--sizes 10000,100000,1000000]

For N unlabeled sessions per arm (n = 500 labeled per arm), best / median of 7 runs of

* ``compare_arms`` (defaults: small-sample corrections, joint lambda);
* the floor: two numpy mean + variance passes (``fu.mean()``, ``fu.var()`` for each arm's
  unlabeled predictions), the least any estimator must read;
* ``ppi_py.ppi_mean_ci`` + ``ppi_mean_pointestimate`` per arm (the reference library).

Targets (issue 14): compare_arms within 2x of the floor and >= 10x faster than the ppi_py loop
at N = 10^6. With ``small_sample=False, lam_mode="per_arm"`` compare_arms reproduces ppi_py's
interval (checked here to 1e-10 before timing).
"""

from __future__ import annotations

import argparse
import importlib
import time
import warnings

import numpy as np

from pulse_ml.stats.arm_effect import compare_arms

N_LABELED = 500
REPEATS = 7


def _ppi_py():
    with warnings.catch_warnings():  # ppi_py silences every warning on import
        warnings.simplefilter("ignore")
        return importlib.import_module("ppi_py")


def _arm(rng, mu, big_n):
    x = rng.normal(size=N_LABELED + big_n)
    y = mu + x + rng.normal(size=N_LABELED + big_n)
    f = x + 0.3 * rng.normal(size=N_LABELED + big_n)
    return y[:N_LABELED], f[:N_LABELED], f[N_LABELED:]


def _best_time(fn):
    fn()  # warm-up (numba/scipy first calls)
    times = []
    for _ in range(REPEATS):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return min(times), float(np.median(times))


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="10000,100000,1000000")
    args = parser.parse_args()
    ppi_py = _ppi_py()
    rng = np.random.default_rng(0)
    print(f"n labeled per arm = {N_LABELED}; best / median of {REPEATS} runs (ms)")
    print(f"{'N unlabeled/arm':>16} | {'compare_arms':>17} | {'floor (2x mean+var)':>19} | "
          f"{'ppi_py loop':>17} | {'/ floor':>7} | {'vs ppi_py':>9}")
    print("-" * 101)
    for big_n in (int(s) for s in args.sizes.split(",")):
        arms = (_arm(rng, 3.0, big_n), _arm(rng, 3.2, big_n))

        def ours(arms=arms):
            return compare_arms(*arms[0], *arms[1], alpha=0.05)

        def floor(arms=arms):
            return [(fu.mean(), fu.var()) for _, _, fu in arms]

        def reference(arms=arms):
            out = []
            for y, f, fu in arms:
                out.append(ppi_py.ppi_mean_ci(y, f, fu, alpha=0.05))
                out.append(ppi_py.ppi_mean_pointestimate(y, f, fu))
            return out

        ref = reference()
        large = compare_arms(*arms[0], *arms[1], alpha=0.05, small_sample=False,
                             lam_mode="per_arm")
        half = np.hypot(*[(np.ravel(ref[i])[1] - np.ravel(ref[i])[0]) / 2 for i in (0, 2)])
        assert abs(large.augmented.width / 2 - half) < 1e-10, (large.augmented.width / 2, half)
        (b1, m1), (b0, m0), (b2, m2) = _best_time(ours), _best_time(floor), _best_time(reference)
        print(f"{big_n:>16,} | {1e3 * b1:7.2f} / {1e3 * m1:7.2f} | {1e3 * b0:8.2f} / "
              f"{1e3 * m0:8.2f} | {1e3 * b2:7.2f} / {1e3 * m2:7.2f} | {b1 / b0:6.2f}x | "
              f"{b2 / b1:8.1f}x")


if __name__ == "__main__":
    main()
