"""Validity targets of compare_arms' defaults: seeded simulations with known truth.

Each case runs R data sets of one design through ``compare_batch`` (the vectorized twin of
compare_arms, checked equal to it in test_effect_engine.py). Monte-Carlo error: a coverage
estimate from R replications has s.d. sqrt(0.95 * 0.05 / R): 0.0022 at R = 10,000, 0.0034 at
4,000, 0.0040 at 3,000. Intervals with true coverage 0.95 clear the 0.94 bar by 2.5-4.5 s.d.;
the legacy formulas (ddof 0, z, per-arm lambda) that the issue measured at 0.89 (n = 10) and
0.13 (N = 1) fail the same assertions by far more, so the tests can fail. perf/validity_bench.py
runs the same designs with more replications.
"""

import numpy as np
import pytest
import validity_sims as sims

from pulse_ml.stats.arm_batch import compare_batch

LEGACY = {"small_sample": False, "lam_mode": "per_arm"}
pytestmark = pytest.mark.slow  # 3,000-10,000 replications per design: seconds each


@pytest.mark.parametrize("n", [10, 20, 30])
def test_stats_coverage_small_samples_naive_and_augmented(n):
    reps = 10_000
    arms, kw, tau = sims.iid(reps, n, 10 * n, rho=0.5, seed=n)
    b = compare_batch(*arms, **kw)
    naive, aug = sims.coverage(b, tau)
    print(f"n={n}: naive {naive:.4f} augmented {aug:.4f}")
    assert naive >= 0.94 and aug >= 0.94
    # the reported reduction is not inflated: at most the real one (spread of the estimates;
    # its MC error is about 1 point at this R) -- the legacy formulas report 16% vs 8% real
    real = 100 * (1 - b.aug_effect.std() / b.naive_effect.std())
    assert np.mean(b.ci_reduction_pct) <= real + 1.0
    if n == 10:
        legacy = compare_batch(*arms, **kw, **LEGACY)
        assert sims.coverage(legacy, tau)[1] < 0.91  # what the defaults fix
        assert np.mean(legacy.ci_reduction_pct) > real + 5


@pytest.mark.parametrize("n", [10, 20, 30])
def test_stats_useless_predictor_costs_about_nothing_and_is_never_wider(n):
    reps = 10_000
    arms, kw, tau = sims.iid(reps, n, 10 * n, rho=0.0, seed=100 + n)
    b = compare_batch(*arms, **kw)
    # lambda minimizes the printed width (inflation and df loss included), so the augmented
    # interval is never wider than the naive one; the old in-sample lambda printed it 4.4%
    # wider on average at n = 10 (legacy formulas: a fake +1.2% gain at n = 20)
    assert np.all(b.ci_reduction_pct >= -1e-9)
    real = 100 * (1 - b.aug_effect.std() / b.naive_effect.std())
    # the width-minimizing shrinkage is a data-driven choice: measured reported +0.2..+0.6%,
    # real -0.3..-0.5% at n = 10..30 (MC s.e. of each about 0.05 and 0.3 points)
    assert np.mean(b.ci_reduction_pct) <= 1.0 and real >= -1.5
    assert min(sims.coverage(b, tau)) >= 0.94
    assert np.mean(compare_batch(*arms, **kw, **LEGACY).ci_reduction_pct) > 0.5


@pytest.mark.parametrize("n", [10, 20, 40])
def test_stats_weak_predictor_augmented_never_wider_and_covers(n):
    # the reviewer's case: r ~ 0.2; the in-sample lambda printed a wider interval in ~46% of
    # data sets at n = 40. MC s.d. of the coverage 0.0022 (R = 10,000)
    arms, kw, tau = sims.iid(10_000, n, 10 * n, rho=0.2, seed=200 + n)
    b = compare_batch(*arms, **kw)
    assert np.all(b.ci_reduction_pct >= -1e-9)
    naive, aug = sims.coverage(b, tau)
    assert naive >= 0.94 and aug >= 0.94
    real = 100 * (1 - b.aug_effect.std() / b.naive_effect.std())
    assert np.mean(b.ci_reduction_pct) <= real + 2.0  # measured overstatement 1.0-1.6 points


@pytest.mark.parametrize("big_n", [1, 2, 3, 5])
def test_stats_coverage_few_unlabeled_sessions_clustered(big_n):
    reps = 4_000
    arms, kw, tau = sims.few_unlabeled(reps, big_n, seed=big_n)
    naive, aug = sims.coverage(compare_batch(*arms, **kw), tau)
    legacy = sims.coverage(compare_batch(*arms, **kw, **LEGACY), tau)[1]
    print(f"N={big_n}: naive {naive:.4f} augmented {aug:.4f} (legacy {legacy:.3f})")
    assert naive >= 0.94 and aug >= 0.94
    assert legacy < {1: 0.3, 2: 0.8, 3: 0.9, 5: 0.93}[big_n]  # issue: 0.13, 0.68, 0.84, 0.91


def test_stats_coverage_heavy_tailed_users_in_both_arms_and_joint_lambda_never_wider():
    reps = 3_000
    arms, kw, tau = sims.heavy_tailed(reps, seed=0)
    b = compare_batch(*arms, **kw)
    naive, aug = sims.coverage(b, tau)
    print(f"heavy-tailed: naive {naive:.4f} augmented {aug:.4f}")
    assert naive >= 0.94 and aug >= 0.94
    # joint lambda: the in-sample augmented variance is never above the naive one
    assert np.all(b.aug_se_in_sample <= b.naive_se * (1 + 1e-12))
    per_arm = compare_batch(*arms, **kw, lam_mode="per_arm")
    assert np.any(per_arm.aug_se_in_sample > per_arm.naive_se * (1 + 1e-9))
    assert np.mean(b.ci_reduction_pct) > np.mean(per_arm.ci_reduction_pct)


def test_stats_coverage_paper_scale_star_ratings():
    reps = 3_000
    arms, kw, tau = sims.paper_scale(reps, seed=1)
    b = compare_batch(*arms, **kw)
    naive, aug = sims.coverage(b, tau)
    print(f"paper scale: naive {naive:.4f} augmented {aug:.4f}")
    assert naive >= 0.94 and aug >= 0.94
    assert np.mean(b.ci_reduction_pct) > 2  # still narrower with r ~ 0.3
