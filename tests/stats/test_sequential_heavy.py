"""Monitoring with heavy-tailed rater activity and with labels that drift in time (issue 19).

Data: :func:`simulate_monitoring` with 1-5 stars skewed like real ones (control P = .10, .08,
.15, .27, .40), users whose activity is Pareto(1.1) (a few users give most sessions and ratings)
and, for the drift check, a labeling rate falling from 20 to 2 labels per arm and day while the
treatment arm's predictions drift by +0.6 stars (the ratings do not).

Monte-Carlo error. A rejection rate over R replications has sd sqrt(p (1 - p) / R): with
R = 2000, 0.49 points at p = 5%. Measured on these seeds (before -> after this change, naive /
PPI++, ± MC sd): users in both arms, 60 looks: 6.4 / 5.9 (± 0.5) -> 0.6 / 0.5 (± 0.2)%;
randomized by user, 21 looks: 8.3 / 9.7 (± 0.6-0.7) -> 1.5 / 1.7 (± 0.3)%. The old rates sit
1.8-6.7 sd above the 5% bound (so the seeded test fails on the old boundary), the new ones > 7 sd
below it.
"""

from __future__ import annotations

import numpy as np
import pytest

from pulse_ml.stats import cluster_moments as cm
from pulse_ml.stats.sequential.boundary import cs_multiplier
from pulse_ml.stats.sequential.engine import look_moments
from pulse_ml.stats.sequential.monitor import monitor_effect
from pulse_ml.stats.sequential.simulation import simulate_monitoring
from pulse_ml.stats.sequential.small_sample import (
    DRIFT_WARN_SE,
    MIN_EFFECTIVE_UNITS,
    effective_units,
    t_multiplier,
)

STARS = (0.10, 0.08, 0.15, 0.27, 0.40)
REPS = 2000


def _monitor(data, n_looks):
    return monitor_effect(data["arm"], data["labeled"], data["rating"], data["prediction"],
                          data["look"], n_looks, users=data["users"], groups=data["group"],
                          horizon=n_looks)


def _keep_monitorable(data, reps, n_users, min_units=10):
    """Drop replications with an arm under ``min_units`` labeled users (the job refuses them)."""
    g, u, arm, lab = data["group"], data["users"] % n_users, data["arm"], data["labeled"]
    per_arm = []
    for a in (0, 1):
        m = lab & (arm == a)
        cnt = np.bincount(g[m] * n_users + u[m], minlength=reps * n_users)
        per_arm.append((cnt.reshape(reps, n_users) > 0).sum(axis=1))
    labeled_users = np.minimum(*per_arm)
    keep = labeled_users >= min_units
    rows = keep[g]
    out = {k: (v[rows] if v is not None else None) for k, v in data.items()}
    out["group"] = (np.cumsum(keep) - 1)[out["group"]]
    return out, int(keep.sum()), labeled_users[keep]


@pytest.mark.slow
@pytest.mark.parametrize(
    "randomize,n_looks,labeled,unlabeled,seed",
    [("session", 60, 4, 40, 5), ("user", 21, 10, 100, 1)],
    ids=["users-in-both-arms-60-looks", "randomized-by-user-21-looks"],
)
def test_heavy_tailed_activity_null_stays_under_alpha(randomize, n_looks, labeled, unlabeled,
                                                      seed):
    """150 users of Pareto(1.1) activity, >= 40 labeled users per arm: sequences <= 5%.

    The asymptotic boundary on CR1 se's rejected 5.9-9.7% here (few effective users: the
    studentized effect has t tails, and randomized by user its variance was 1.3-1.9 times the
    mean CR1 variance); the boundary on the t scale of the engine's df keeps it under alpha.
    """
    data, _ = simulate_monitoring(REPS, n_days=n_looks, labeled_per_day=labeled,
                                  unlabeled_per_day=unlabeled, n_users=150, randomize=randomize,
                                  activity=1.1, star_probs=STARS, seed=seed)
    data, reps, labeled_users = _keep_monitorable(data, REPS, 150)
    assert reps >= 0.99 * REPS
    assert np.median(labeled_users) >= 40  # the setting: >= 40 labeled users per arm
    tab = _monitor(data, n_looks).table
    last = tab[(tab.look == n_looks - 1) & (tab.estimator == "naive")]
    kish = np.minimum(last.eff_units_control, last.eff_units_treatment)
    assert np.median(kish) < MIN_EFFECTIVE_UNITS  # ... but few effective ones: warned
    for est in ("naive", "augmented"):
        sub = tab[tab.estimator == est]
        ever = ((sub.cs_lower > 0) | (sub.cs_upper < 0)).to_numpy().reshape(reps, -1).any(1)
        assert ever.mean() <= 0.05, (est, ever.mean())


def test_effective_units_is_kish_and_the_t_boundary_widens_only_with_few():
    data, _ = simulate_monitoring(1, n_days=5, labeled_per_day=6, unlabeled_per_day=10,
                                  n_users=12, activity=1.1, seed=3)
    y = np.where(data["labeled"], data["rating"], 0.0)
    mom = look_moments(data["group"], data["users"], data["look"], data["arm"], data["labeled"],
                       y, data["prediction"], 1, 5)
    kish = effective_units(mom)
    for k in range(5):
        for a in (0, 1):
            m = data["labeled"] & (data["arm"] == a) & (data["look"] <= k)
            counts = np.bincount(data["users"][m]).astype(float)
            assert kish[k, a] == pytest.approx(counts.sum() ** 2 / (counts**2).sum())
            assert kish[k, a] <= mom.tot[k, a, cm.RAW_INDEX["m"]]
    m = cs_multiplier(np.array([10.0, 100.0, 400.0]), 400.0)
    assert np.array_equal(t_multiplier(m, np.full(3, np.inf)), m)
    wide = t_multiplier(m, np.full(3, 7.0))
    assert (wide > 1.3 * m).all()  # 7 df: far wider
    assert np.allclose(t_multiplier(m, np.full(3, 1e4)), m, rtol=1e-3)  # many users: unchanged


@pytest.mark.slow
@pytest.mark.parametrize("users", [None, 150], ids=["iid", "users"])
def test_labels_that_drift_in_time_are_detected(users):
    """Falling labeling rate + treatment-only predictor drift: the PPI++ bias is measured.

    1000 replications, 21 daily looks. Measured (i.i.d. / users): PPI++ bias at the last look
    +0.079 / +0.055 (MC sd 0.003), the within-window effect -0.009 / -0.005; ``time_shift``
    has mean +0.95 / +0.68 se and exceeds DRIFT_WARN_SE = 0.5 se in 100% / 72% of data sets.
    Without the drift (same falling rate) it stays within +/-0.2 se (5-95%), and with a constant
    rate it is exactly 0.
    """
    reps, days = 1000, 21
    falling = np.round(np.linspace(20, 2, days)).astype(int)
    kw = {"n_days": days, "labeled_per_day": falling, "unlabeled_per_day": 100,
          "n_users": users, "activity": 1.5 if users else None, "star_probs": STARS, "seed": 11}
    for drift in (0.6, 0.0):
        data, true_effect = simulate_monitoring(reps, drift=drift, **kw)
        assert true_effect == 0.0
        tab = _monitor(data, days).table
        last = tab[(tab.look == days - 1) & (tab.estimator == "augmented")]
        mc = last.effect.std() / np.sqrt(reps)
        shift_se = (last.time_shift / last.se).to_numpy()
        warned = np.abs(shift_se) >= DRIFT_WARN_SE
        if drift:
            assert last.effect.mean() > 0.04 + 3 * mc  # the bias the issue reports
            # time_shift measures it: equal means within 0.015 (MC sd of the difference < .004)
            assert abs(last.time_shift.mean() - last.effect.mean()) < 0.015
            assert abs(last.window_effect.mean()) < 0.015  # within windows: no bias
            assert warned.mean() >= (0.95 if users is None else 0.6)
        else:
            assert abs(last.effect.mean()) < 4 * mc
            assert warned.mean() <= 0.01
    data, _ = simulate_monitoring(200, **{**kw, "labeled_per_day": 10}, drift=0.6)
    tab = _monitor(data, days).table
    assert np.abs(tab.time_shift.dropna()).max() < 1e-9  # constant rate: nothing to detect
