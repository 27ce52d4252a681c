"""Benchmark: randomization inference (test + both intervals) of a 100k-session case study.

Run: python perf/randomization_bench.py [--sessions 100000] [--permutations 2000]

Two designs of ``--sessions`` sessions, ~5% rated (1-5 stars skewed like real ones, honest
predictions of correlation ~0.5):

* user-randomized: users with heavy-tailed (Pareto) activity, every session of a user in one arm
  (~7,000 users);
* session-randomized: every session its own unit (100,000 units).

Each timing is one full :func:`randomization_inference` call (per-unit moments, the
re-randomization products, the p-value of no effect and the inverted naive and PPI++ intervals,
lambdas recomputed under every assignment), best of ``--repeats``. Target (issue 19): <= 10 s
for 2,000 permutations of a 100k-session case study.
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from pulse_ml.stats.arm_inputs import Arm
from pulse_ml.stats.randomization import randomization_inference

THRESHOLDS = [-1.3, -0.9, -0.4, 0.25]  # latent N(0, 1.1) -> P(1..5) ~ .10,.08,.15,.27,.40


def case_study(n_sessions: int, by_user: bool, seed: int = 0) -> tuple[Arm, Arm]:
    """The two arms for :func:`randomization_inference` (units: users, or sessions)."""
    rng = np.random.default_rng(seed)
    sizes = 1 + np.minimum((rng.pareto(1.3, n_sessions) * 4).astype(int), 500)
    n_users = int(np.searchsorted(np.cumsum(sizes), n_sessions)) + 1
    users = np.repeat(np.arange(n_users), sizes[:n_users])[:n_sessions]
    unit_arm = rng.permutation(n_users) < n_users // 2
    arm = unit_arm[users] if by_user else rng.random(n_sessions) < 0.5
    lat = rng.normal(0, 0.45, n_users)[users] + rng.normal(0, 1, n_sessions)
    y = np.digitize(lat, THRESHOLDS) + 1.0
    f = 3.9 + 0.45 * (lat + rng.normal(0, 1.2, n_sessions))
    lab = rng.random(n_sessions) < 0.05
    parts = [(arm == a) & (lab == lv) for a, lv in ((0, 1), (0, 0), (1, 1), (1, 0))]
    units = [users[p] if by_user else None for p in parts]
    return (Arm(y[parts[0]], f[parts[0]], f[parts[1]], users=units[0], users_unl=units[1]),
            Arm(y[parts[2]], f[parts[2]], f[parts[3]], users=units[2], users_unl=units[3]))


def main() -> None:
    """Print the timings."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sessions", type=int, default=100_000)
    ap.add_argument("--permutations", type=int, default=2000)
    ap.add_argument("--repeats", type=int, default=2)
    args = ap.parse_args()
    for by_user in (True, False):
        data = case_study(args.sessions, by_user)
        best, res = np.inf, None
        for _ in range(args.repeats):
            t0 = time.perf_counter()
            res = randomization_inference(*data, n_permutations=args.permutations, seed=1)
            best = min(best, time.perf_counter() - t0)
        units = res.n_units_control + res.n_units_treatment
        a = res.augmented
        print(f"{'user' if by_user else 'session'}-randomized: {args.sessions} sessions, "
              f"{units} units, {args.permutations} permutations: {best:.2f} s "
              f"(augmented {a.effect:+.3f}, randomization CI [{a.ci_lower:+.3f}, "
              f"{a.ci_upper:+.3f}], p {a.p_value:.3f})")


if __name__ == "__main__":
    main()
