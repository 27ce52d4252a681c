"""SRM, Holm, one-sided p-values and cluster-robust mean differences (stats/decision_stats)."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from pulse_ml.stats.decision_stats import (
    SRM_ALPHA,
    cluster_mean_diff,
    holm,
    one_sided_p,
    srm_statistics,
    srm_test,
)


def test_srm_flags_a_52_48_split_at_20k_sessions_per_arm():
    """Issue 22's target: flagged in >= 95% of such experiments (here: all 20,000)."""
    reps, per_arm = 20_000, 20_000
    rng = np.random.default_rng(2210)
    n_t = rng.binomial(2 * per_arm, 0.52, reps)
    _, p = srm_statistics(np.column_stack([2 * per_arm - n_t, n_t]), np.array([0.5, 0.5]))
    power = float(np.mean(p < SRM_ALPHA))
    assert power >= 0.95, power


@pytest.mark.parametrize("shares", [(0.5, 0.5), (0.2, 0.3, 0.5)])
def test_srm_false_flags_at_most_one_in_a_thousand(shares):
    """Correct experiments (users randomized, heavy-tailed sessions per user; the check counts
    users, the randomized unit) are flagged in <= 0.1% of 200,000, within 3 MC s.e."""
    reps, users = 200_000, 40_000
    rng = np.random.default_rng(2211)
    counts = rng.multinomial(users, shares, size=reps)
    _, p = srm_statistics(counts, np.array(shares))
    rate = float(np.mean(p < SRM_ALPHA))
    se = np.sqrt(SRM_ALPHA * (1 - SRM_ALPHA) / reps)
    assert rate <= SRM_ALPHA + 3 * se, rate
    assert rate >= SRM_ALPHA - 3 * se, rate  # not a check that never fires


def test_counting_sessions_of_randomized_users_would_false_flag():
    """Why the check counts users when users were randomized: sessions per user are heavy
    tailed, so session counts of a correct 50/50 user split are flagged far above 0.1%."""
    reps, users = 2_000, 4_000
    rng = np.random.default_rng(2212)
    sessions = np.minimum(1 + np.floor(rng.pareto(1.3, (reps, users)) * 2), 100)
    arm = rng.random((reps, users)) < 0.5
    counts = np.column_stack([(sessions * ~arm).sum(1), (sessions * arm).sum(1)])
    _, p = srm_statistics(counts, np.array([0.5, 0.5]))
    assert np.mean(p < SRM_ALPHA) > 0.2
    user_counts = np.column_stack([(~arm).sum(1), arm.sum(1)])
    assert np.mean(srm_statistics(user_counts, np.array([0.5, 0.5]))[1] < SRM_ALPHA) < 0.01


def test_srm_test_matches_scipy_chisquare():
    res = srm_test([5_100, 4_900, 10_300], [0.25, 0.25, 0.5])
    ref = stats.chisquare([5_100, 4_900, 10_300], [5_075, 5_075, 10_150])
    assert res.chi2 == pytest.approx(ref.statistic) and res.p_value == pytest.approx(ref.pvalue)
    assert srm_test([100, 100]).flagged is False and srm_test([1_000, 1_300]).flagged is True


def test_holm_matches_the_step_down_definition():
    rng = np.random.default_rng(5)
    for _ in range(200):
        p = rng.uniform(0, 0.06, size=rng.integers(1, 6))
        adjusted, rejected, levels = holm(p, 0.05)
        order = np.argsort(p)
        expected = np.zeros(p.size, dtype=bool)
        for rank, i in enumerate(order):  # reject while p_(r) <= alpha / (k - r)
            if p[i] > 0.05 / (p.size - rank):
                break
            expected[i] = True
        assert (rejected == expected).all()
        assert (adjusted >= p - 1e-15).all() and (adjusted <= 1).all()
        # each interval's level agrees with its decision: p <= level exactly when rejected
        assert ((p <= levels) == rejected).all()


def test_one_sided_p():
    assert one_sided_p(0.0, 1.0, -1.96) == pytest.approx(0.025, abs=1e-4)
    assert one_sided_p(0.0, 1.0, 1.96, greater=False) == pytest.approx(0.025, abs=1e-4)


def test_cluster_mean_diff_without_users_is_welch_unpooled():
    rng = np.random.default_rng(3)
    xc, xt = rng.exponential(1.0, 400), rng.exponential(1.2, 300)
    d = cluster_mean_diff(xc, None, xt, None)
    nc, nt = xc.size, xt.size
    se = np.sqrt(xc.var() / nc + xt.var() / nt)  # ddof 0, then the CR1 factor G / (G - 1)
    g = nc + nt
    assert d.effect == pytest.approx(xt.mean() - xc.mean())
    assert d.se == pytest.approx(se * np.sqrt(g / (g - 1)))


def test_cluster_mean_diff_covers_with_users_and_relative_change():
    """Users with many correlated sessions: the CR1 interval of a relative change covers the
    truth (0) in ~95% of 2,000 experiments; ignoring users would not."""
    reps, size = 2_000, 3_000
    rng = np.random.default_rng(4)
    cover, cover_iid = [], []
    for _ in range(reps):
        ids = [np.repeat(np.arange(600), rng.multinomial(size - 600, np.ones(600) / 600) + 1)
               for _ in (0, 1)]
        x = [np.exp(rng.normal(size=600)[i] * 0.7 + rng.normal(size=size) * 0.5) for i in ids]
        d = cluster_mean_diff(x[0], ids[0], x[1], ids[1] + 600, relative=True)
        lo, hi = d.interval(0.05)
        cover.append(lo <= 0 <= hi)
        di = cluster_mean_diff(x[0], None, x[1], None, relative=True)
        lo, hi = di.interval(0.05)
        cover_iid.append(lo <= 0 <= hi)
    se = np.sqrt(0.05 * 0.95 / reps)
    assert abs(np.mean(cover) - 0.95) <= 3 * se + 0.005, np.mean(cover)
    assert np.mean(cover_iid) < 0.90
