"""Power of non-inferiority (margin 0.15) for an equal-quality model at the demo's size.

The NI test ships when the 95% interval's lower end is above -margin; with a true effect of 0
and a standard error se its power is ``Phi(margin / se - z_0.975)`` (normal approximation).
This script measures the standard errors of the naive and PPI++ effects on the seeded arms of
tests/inference/decision_sims.py (175 rated + 3,500 unrated sessions per arm, heavy-tailed
users), turns them into the power the test can have in principle, and the rated sessions per
arm that 80% needs (se shrinking as 1/sqrt(n) at the same unrated share). Also with a perfect
predictor (every session-level signal predicted, no noise): the ceiling of PPI++ at this size.

Run: nice -n 10 python perf/ni_power.py
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
from scipy.stats import norm

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "inference"))
from decision_sims import ICC, arm  # noqa: E402

from pulse_ml.stats.arm_batch import compare_batch  # noqa: E402

MARGIN, Z, Z80 = 0.15, float(norm.ppf(0.975)), float(norm.ppf(0.8))


def main(reps: int = 300, n: int = 175, big_n: int = 3500) -> None:
    print(f"NI margin {MARGIN}, true effect 0, {n} rated + {big_n} unrated per arm, "
          f"{reps} seeded experiments")
    print(f"{'predictor':26s} {'estimator':9s} {'mean se':>8s} {'power':>6s} "
          f"{'rated/arm for 80%':>18s}")
    for label, kw in (("as in the simulations", {}),
                      ("perfect (in principle)", {"signal": 1.0 - ICC, "pred_noise": 0.0})):
        rng = np.random.default_rng(22)
        ctl, _, _ = arm(rng, reps, n, big_n, **kw)
        trt, _, _ = arm(rng, reps, n, big_n, offset=10**7, **kw)
        batch = compare_batch(ctl, trt)
        for name, se in (("naive", batch.naive_se), ("PPI++", batch.aug_se)):
            s = float(np.mean(se))
            power = float(norm.cdf(MARGIN / s - Z))
            need = n * (s / (MARGIN / (Z + Z80))) ** 2
            print(f"{label:26s} {name:9s} {s:8.4f} {power:6.3f} {need:18,.0f}")


if __name__ == "__main__":
    main()
