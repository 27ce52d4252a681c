"""stats.paired: the user-resampling bootstrap of paired differences, and the expected CI gain."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from pulse_ml.stats.arm_effect import theoretical_width_ratio
from pulse_ml.stats.paired import (
    expected_ci_reduction,
    expected_ci_reduction_at_ratio,
    paired_bootstrap,
    paired_bootstrap_many,
)
from pulse_ml.stats.ppi import classical_mean_ci, ppi_mean_ci
from pulse_ml.training.metrics import pearson

# A tiny table: 3 users with 2, 1 and 3 rated sessions.
USERS = np.array(["u1", "u1", "u2", "u3", "u3", "u3"])
Y = np.array([5.0, 4.0, 2.0, 3.0, 4.0, 5.0])
NEW = np.array([4.5, 4.0, 3.0, 3.5, 4.0, 4.0])
REF = np.array([4.0, 4.0, 4.0, 4.0, 4.0, 4.0]) + np.array([0.2, -0.1, 0.0, 0.1, 0.3, -0.2])


def test_point_values_are_the_plain_metrics():
    res = paired_bootstrap(Y, NEW, REF, USERS, n_boot=50, seed=1)
    mse_new, mse_ref = np.mean((NEW - Y) ** 2), np.mean((REF - Y) ** 2)
    assert res.mse_new == pytest.approx(mse_new, abs=1e-12)
    assert res.delta_mse == pytest.approx(mse_new - mse_ref, abs=1e-12)
    assert res.delta_mae == pytest.approx(np.mean(abs(NEW - Y)) - np.mean(abs(REF - Y)), abs=1e-12)
    assert res.delta_r == pytest.approx(pearson(Y, NEW) - pearson(Y, REF), abs=1e-12)
    assert (res.n_sessions, res.n_groups) == (6, 3)


def test_interval_equals_the_exact_bootstrap_by_hand():
    """With 3 users a resample is one of 27 equally likely ordered draws; by hand.

    Each draw of one user three times has probability 1/27 = 3.7% > 2.5%, and the resampled
    ΔMSE is a session-weighted mean of the per-user ΔMSE, so the exact 95% percentile interval
    is [min, max] of the three users' own ΔMSE. 20,000 resamples put ~740 (sd 27) on each of
    those atoms, far above the 500 needed to place the 2.5% quantile there.
    """
    per_user = []
    for u in ("u1", "u2", "u3"):
        m = USERS == u
        per_user.append(np.mean((NEW[m] - Y[m]) ** 2) - np.mean((REF[m] - Y[m]) ** 2))
    # the exact bootstrap distribution: all 27 ordered draws, each 1/27
    atoms = []
    for draw in itertools.product(range(3), repeat=3):
        rows = np.concatenate([np.flatnonzero(USERS == f"u{g + 1}") for g in draw])
        atoms.append(np.mean((NEW[rows] - Y[rows]) ** 2) - np.mean((REF[rows] - Y[rows]) ** 2))
    atoms = np.sort(atoms)
    assert atoms[0] == pytest.approx(min(per_user)) and atoms[-1] == pytest.approx(max(per_user))
    res = paired_bootstrap(Y, NEW, REF, USERS, n_boot=20_000, seed=3)
    assert res.mse_ci_lower == pytest.approx(min(per_user), abs=1e-12)
    assert res.mse_ci_upper == pytest.approx(max(per_user), abs=1e-12)
    # sessions of a user stay together: resampling sessions gives another interval
    by_session = paired_bootstrap(Y, NEW, REF, None, n_boot=20_000, seed=3)
    assert by_session.mse_ci_lower != pytest.approx(res.mse_ci_lower, abs=1e-3)


def test_vectorized_resamples_equal_rebuilt_tables():
    """The documented draws, rebuilt as explicit resampled tables (a loop, by hand)."""
    rng = np.random.default_rng(0)
    users = np.repeat([f"u{i:02d}" for i in range(12)], rng.integers(1, 5, 12))
    n = users.size
    y = rng.integers(1, 6, n).astype(float)
    new = y + rng.normal(0, 0.8, n)
    ref = y + rng.normal(0, 1.0, n)
    n_boot, seed = 300, 11
    res = paired_bootstrap(y, new, ref, users, n_boot=n_boot, seed=seed)
    names = np.unique(users)
    drawn = np.random.default_rng(seed).integers(0, names.size, size=(1, n_boot, names.size))[0]
    d_mse, d_r = [], []
    for b in range(n_boot):
        rows = np.concatenate([np.flatnonzero(users == names[g]) for g in drawn[b]])
        yy, aa, rr = y[rows], new[rows], ref[rows]
        d_mse.append(np.mean((aa - yy) ** 2) - np.mean((rr - yy) ** 2))
        d_r.append(pearson(yy, aa) - pearson(yy, rr))
    assert [res.mse_ci_lower, res.mse_ci_upper] == pytest.approx(
        np.quantile(d_mse, [0.025, 0.975]), abs=1e-10)
    assert [res.r_ci_lower, res.r_ci_upper] == pytest.approx(
        np.quantile(d_r, [0.025, 0.975]), abs=1e-10)
    # memory blocks follow one row-major draw: a tiny block size changes nothing
    import pulse_ml.stats.paired as paired

    old = paired._MAX_CELLS
    try:
        paired._MAX_CELLS = 25
        again = paired_bootstrap(y, new, ref, users, n_boot=n_boot, seed=seed)
    finally:
        paired._MAX_CELLS = old
    assert again == res


def test_same_seed_same_interval_and_bad_inputs():
    a = paired_bootstrap(Y, NEW, REF, USERS, n_boot=200, seed=5)
    assert a == paired_bootstrap(Y, NEW, REF, USERS, n_boot=200, seed=5)
    assert a != paired_bootstrap(Y, NEW, REF, USERS, n_boot=200, seed=6)
    with pytest.raises(ValueError, match="shape"):
        paired_bootstrap(Y, NEW[:-1], REF, USERS)
    with pytest.raises(ValueError, match="2 users"):
        paired_bootstrap(Y, NEW, REF, np.zeros(6))
    with pytest.raises(ValueError, match="missing"):
        paired_bootstrap(np.r_[Y[:-1], np.nan], NEW, REF, USERS)


def _clustered(rng, users, R, new_sd, user_sd=0.5):
    """R data sets of rated sessions: a shared signal, user effects in ratings and errors."""
    n, n_users = users.size, users.max() + 1
    x = rng.normal(size=(R, n))
    y = 3.8 + 0.5 * x + rng.normal(0, 0.5, (R, n_users))[:, users] + rng.normal(0, 0.8, (R, n))
    new = (3.8 + 0.5 * x + rng.normal(0, user_sd, (R, n_users))[:, users]
           + rng.normal(0, new_sd, (R, n)))
    ref = 3.8 + 0.5 * x + rng.normal(0, 0.5, (R, n_users))[:, users] + rng.normal(0, 0.5, (R, n))
    return y, new, ref


@pytest.mark.slow
def test_coverage_and_false_promotions_under_user_clustering():
    """Two equally good predictors (true ΔMSE = Δr = 0), errors correlated within users.

    800 seeded data sets of 100 users (1-8 sessions each, ~450 sessions), 800 resamples each.
    Monte-Carlo error: coverage sd = sqrt(.95 * .05 / 800) = 0.008, so the user bootstrap's
    coverage (nominal 0.95; measured 0.941 for ΔMSE, 0.940 for Δr) must exceed 0.92 (a small-
    cluster shortfall of ~0.01 plus > 2 sd of slack); "significantly better" (upper end < 0,
    nominal 2.5%, measured 2.1%) must stay under 4.5% (sd 0.0055, > 4 sd above nominal).
    Resampling sessions instead of users ignores the clustering and covers 0.84 here (< 0.90):
    the test fails if the groups are dropped.
    """
    rng = np.random.default_rng(2024)
    users = np.repeat(np.arange(100), rng.integers(1, 9, 100))
    y, new, ref = _clustered(rng, users, 800, new_sd=0.5)
    res = paired_bootstrap_many(y, new, ref, users, n_boot=800, seed=1)
    covers = (res.mse_ci_lower <= 0) & (0 <= res.mse_ci_upper)
    covers_r = (res.r_ci_lower <= 0) & (0 <= res.r_ci_upper)
    assert covers.mean() > 0.92 and covers_r.mean() > 0.92
    assert (res.mse_ci_upper < 0).mean() < 0.045
    naive = paired_bootstrap_many(y, new, ref, None, n_boot=800, seed=1)
    assert ((naive.mse_ci_lower <= 0) & (0 <= naive.mse_ci_upper)).mean() < 0.90


def test_a_real_improvement_is_detected():
    """A better new predictor (true ΔMSE = 0.3² - 0.5² - 0.5² = -0.41): detected in > 90%."""
    rng = np.random.default_rng(7)
    users = np.repeat(np.arange(100), rng.integers(1, 9, 100))
    y, new, ref = _clustered(rng, users, 400, new_sd=0.3, user_sd=0.0)
    res = paired_bootstrap_many(y, new, ref, users, n_boot=500, seed=1)
    assert res.delta_mse.mean() == pytest.approx(-0.41, abs=0.03)
    assert (res.mse_ci_upper < 0).mean() > 0.9


def test_expected_ci_reduction_formula():
    assert expected_ci_reduction(0.0, 100, 2000) == 0.0
    assert expected_ci_reduction(-0.4, 100, 2000) == 0.0  # lambda clipped at 0: no gain
    assert expected_ci_reduction(0.5, 100, 0) == 0.0
    r = np.array([0.1, 0.3, 0.7])
    assert expected_ci_reduction(r, 200, 4000) == pytest.approx(
        1 - theoretical_width_ratio(r, 200, 4000), abs=1e-15)
    assert expected_ci_reduction_at_ratio(0.32, 20) == pytest.approx(
        1 - np.sqrt(1 - 0.32**2 * 20 / 21), abs=1e-15)
    with pytest.raises(ValueError):
        expected_ci_reduction(0.3, 0, 10)


def test_expected_ci_reduction_is_what_ppi_delivers():
    """Honest predictions of correlation 0.6, n = 2,000 labeled, N = 20,000 unlabeled.

    The PPI++ width over the naive width concentrates (its sd over data sets is ~0.005 here),
    so 40 seeded data sets pin the mean reduction to ~0.001; it must match the formula
    (1 - sqrt(1 - 0.36 * 20000/22000) = 18.0%) within 0.01 — a formula without the N/(n+N)
    factor (20.0%) or with r instead of r² (32.6%) would fail.
    """
    rng = np.random.default_rng(3)
    rho, n, big_n = 0.6, 2000, 20_000
    reductions = []
    for _ in range(40):  # 40 calls of the package's own (vectorized) PPI++ interval
        x = rng.normal(size=n + big_n)
        y = 4 + rho * x + np.sqrt(1 - rho**2) * rng.normal(size=n + big_n)
        f = 4 + rho * x  # calibrated: E[Y | f] = f, corr(Y, f) = rho
        lo, hi = ppi_mean_ci(y[:n], f[:n], f[n:], alpha=0.05)
        nlo, nhi = classical_mean_ci(y[:n], alpha=0.05)
        reductions.append(1 - (hi - lo) / (nhi - nlo))
    assert np.mean(reductions) == pytest.approx(expected_ci_reduction(rho, n, big_n), abs=0.01)
