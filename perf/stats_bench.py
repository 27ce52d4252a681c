"""Benchmark: compare_arms against the memory-bandwidth floor and a per-arm ppi_py loop.

Run: python perf/stats_bench.py [--sizes 10000,100000,1000000]

For N unlabeled sessions per arm (n = 500 labeled per arm), best / median of 7 runs of

* ``compare_arms`` (defaults: small-sample corrections, joint lambda) without clusters;
* ``compare_arms`` clustered by user, the default ``infer`` path (``clusters: user_id``):
  integer user codes as ``infer`` passes them (``pd.factorize`` of ``user_id`` once per
  table), ~10 sessions per user, users in both arms (so lambda is joint with a cross term);
* the floor: two numpy mean + variance passes (``fu.mean()``, ``fu.var()`` for each arm's
  unlabeled predictions), the least any estimator must read;
* ``ppi_py.ppi_mean_ci`` + ``ppi_mean_pointestimate`` per arm (the reference library).

Targets (issue 14): compare_arms within 2x of the floor and >= 10x faster than the ppi_py loop
at N = 10^6. With ``small_sample=False, lam_mode="per_arm"`` compare_arms reproduces ppi_py's
interval (checked here to 1e-10 before timing). The clustered column has no target of its own;
its "/ floor" ratio says what cluster-robust variances cost on top of the i.i.d. path.
"""

from __future__ import annotations

import argparse
import importlib
import time
import warnings

import numpy as np

from pulse_ml.stats.arm_effect import compare_arms
from pulse_ml.stats.arm_inputs import Arm

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


SESSIONS_PER_USER = 10


def _users(rng, big_n):
    """Integer user codes of one arm's labeled and unlabeled sessions (shared id space)."""
    n_users = max(2, (N_LABELED + big_n) // SESSIONS_PER_USER)
    codes = rng.integers(0, n_users, size=N_LABELED + big_n)
    return codes[:N_LABELED], codes[N_LABELED:]


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
    print(f"{'N unlabeled/arm':>16} | {'compare_arms':>17} | {'clustered (infer)':>17} | "
          f"{'floor (2x mean+var)':>19} | {'ppi_py loop':>17} | {'/ floor':>7} | "
          f"{'clus/floor':>10} | {'vs ppi_py':>9}")
    print("-" * 134)
    for big_n in (int(s) for s in args.sizes.split(",")):
        arms = (_arm(rng, 3.0, big_n), _arm(rng, 3.2, big_n))
        (uc, uuc), (ut, uut) = _users(rng, big_n), _users(rng, big_n)

        def ours(arms=arms):
            return compare_arms(Arm(*arms[0]), Arm(*arms[1]), alpha=0.05)

        def clustered(arms=arms, users=(uc, uuc, ut, uut)):
            return compare_arms(Arm(*arms[0], users=users[0], users_unl=users[1]),
                                Arm(*arms[1], users=users[2], users_unl=users[3]), alpha=0.05)

        def floor(arms=arms):
            return [(fu.mean(), fu.var()) for _, _, fu in arms]

        def reference(arms=arms):
            out = []
            for y, f, fu in arms:
                out.append(ppi_py.ppi_mean_ci(y, f, fu, alpha=0.05))
                out.append(ppi_py.ppi_mean_pointestimate(y, f, fu))
            return out

        ref = reference()
        large = compare_arms(Arm(*arms[0]), Arm(*arms[1]), alpha=0.05, small_sample=False,
                             lam_mode="per_arm")
        half = np.hypot(*[(np.ravel(ref[i])[1] - np.ravel(ref[i])[0]) / 2 for i in (0, 2)])
        assert abs(large.augmented.width / 2 - half) < 1e-10, (large.augmented.width / 2, half)
        (b1, m1), (b0, m0), (b2, m2) = _best_time(ours), _best_time(floor), _best_time(reference)
        b3, m3 = _best_time(clustered)
        print(f"{big_n:>16,} | {1e3 * b1:7.2f} / {1e3 * m1:7.2f} | {1e3 * b3:7.2f} / "
              f"{1e3 * m3:7.2f} | {1e3 * b0:8.2f} / {1e3 * m0:8.2f} | {1e3 * b2:7.2f} / "
              f"{1e3 * m2:7.2f} | {b1 / b0:6.2f}x | {b3 / b0:9.2f}x | {b2 / b1:8.1f}x")


if __name__ == "__main__":
    main()
