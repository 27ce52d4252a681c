"""Benchmark: compare_arms vs a per-arm ppi_py loop at 1e4, 1e5, 1e6 unlabeled sessions per arm.

Run: /work/venv/bin/python perf/stats_bench.py
"""

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
    ppi_py = _ppi_py()
    rng = np.random.default_rng(0)
    print(f"n labeled per arm = {N_LABELED}; best / median of {REPEATS} runs (ms)")
    print(f"{'N unlabeled/arm':>16} | {'compare_arms':>18} | {'ppi_py loop':>18} | {'speed-up':>8}")
    print("-" * 72)
    for big_n in (10**4, 10**5, 10**6):
        arms = (_arm(rng, 3.0, big_n), _arm(rng, 3.2, big_n))

        def ours(arms=arms):
            return compare_arms(*arms[0], *arms[1], alpha=0.05)

        def reference(arms=arms):
            out = []
            for y, f, fu in arms:
                out.append(ppi_py.ppi_mean_ci(y, f, fu, alpha=0.05))
                out.append(ppi_py.ppi_mean_pointestimate(y, f, fu))
            return out

        ref = reference()
        res = ours()
        half = np.hypot(*[(np.ravel(ref[i])[1] - np.ravel(ref[i])[0]) / 2 for i in (0, 2)])
        assert abs(res.augmented.width / 2 - half) < 1e-10
        (b1, m1), (b2, m2) = _best_time(ours), _best_time(reference)
        print(
            f"{big_n:>16,} | {1e3 * b1:7.2f} / {1e3 * m1:7.2f} | {1e3 * b2:7.2f} / {1e3 * m2:7.2f}"
            f" | {b2 / b1:7.1f}x"
        )


if __name__ == "__main__":
    main()
