"""Confidence sequences of guardrails (fully observed session metrics) and anytime p-values."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from pulse_ml.stats.decision_stats import cluster_mean_diff
from pulse_ml.stats.sequential.boundary import cs_multiplier
from pulse_ml.stats.sequential.guardrail_cs import guardrail_sequence
from pulse_ml.stats.sequential.simulation import simulate_monitoring
from pulse_ml.stats.sequential.small_sample import t_multiplier

ALPHA = 0.05


def _cost(data: dict, margin: float, relative: bool, seed: int) -> np.ndarray:
    """Skewed per-session cost with a user effect; the treatment is worse by exactly margin."""
    rng = np.random.default_rng(seed)
    users = data["users"]
    n_users = int(users.max()) + 1
    user_effect = rng.normal(0.0, 0.4, n_users)[users]
    cost = np.exp(-1.2 + user_effect + rng.normal(0.0, 0.8, users.size))
    cost = cost / np.exp(0.4 ** 2 / 2 + 0.8 ** 2 / 2) * 0.4  # control mean 0.40
    arm = data["arm"] == 1
    if relative:
        return np.where(arm, cost * (1 + margin), cost)
    return np.where(arm, cost + margin, cost)


def test_each_look_is_the_cluster_robust_difference_of_the_sessions_seen():
    data, _ = simulate_monitoring(1, n_days=6, labeled_per_day=5, unlabeled_per_day=30,
                                  n_users=40, activity=1.1, seed=3)
    cost = _cost(data, 0.05, True, 4)
    cost[::17] = np.nan  # sessions without a value are left out
    seq = guardrail_sequence(cost, data["arm"], data["look"], data["users"], 6,
                             t_star=300.0, relative=True)
    for k in (0, 3, 5):
        seen = (data["look"] <= k) & np.isfinite(cost)
        c, t = seen & (data["arm"] == 0), seen & (data["arm"] == 1)
        d = cluster_mean_diff(cost[c], data["users"][c], cost[t], data["users"][t],
                              relative=True)
        assert seq.effect[k] == pytest.approx(d.effect, rel=1e-12)
        assert seq.se[k] == pytest.approx(d.se, rel=1e-12)
        assert seq.sessions[k] == seen.sum()
        m = t_multiplier(cs_multiplier(seen.sum(), 300.0, ALPHA),
                         np.unique(data["users"][seen]).size - 1.0)
        ratio = 1 + d.effect  # relative: the log-ratio sequence mapped back
        assert seq.lower[k] == pytest.approx(ratio * np.exp(-m * d.se / ratio) - 1)
        assert seq.upper[k] == pytest.approx(ratio * np.exp(m * d.se / ratio) - 1)
        lo, hi = d.interval(ALPHA)  # the fixed interval at the same look lies inside
        assert seq.lower[k] < lo and seq.upper[k] > hi


@pytest.mark.slow
@pytest.mark.parametrize("relative", [False, True])
def test_false_ship_rate_over_looks_with_a_guardrail_at_its_margin(relative):
    """A guardrail exactly at its margin (cost worse by 0.04 $ or by 10%): the monitor's rule
    ships (every guardrail's sequence on the good side) at some of 21 daily looks in at most
    5% of 1,000 seeded experiments (theory: <= 2.5%, one-sided; measured 2.1% absolute, 3.5%
    relative). Users come back with Pareto (1.1) activity and appear in both arms. Monte-Carlo
    s.e. of a 3% rate: 0.5 points. The relative change on the ratio scale with the normal
    multiplier gave 8.0%, and the fixed 95% interval read at every look crosses far more often
    (asserted: the test can fail)."""
    reps, days = 1000, 21
    data, _ = simulate_monitoring(reps, n_days=days, labeled_per_day=2, unlabeled_per_day=20,
                                  n_users=60, activity=1.1, seed=11)
    margin = 0.10 if relative else 0.04
    cost = _cost(data, margin, relative, 12)
    t_star = 2 * 22 * days  # planned sessions by the last day, fixed in advance
    shipped, peeked = 0, 0
    bounds = np.searchsorted(data["group"], np.arange(reps + 1))
    q = stats.norm.ppf(1 - ALPHA / 2)
    for r in range(reps):
        s = slice(bounds[r], bounds[r + 1])
        seq = guardrail_sequence(cost[s], data["arm"][s], data["look"][s], data["users"][s],
                                 days, t_star, ALPHA, relative)
        # lower is better: non-inferior when the upper end is below +margin
        shipped += bool(np.nanmin(seq.upper) < margin)
        peeked += bool(np.nanmin(seq.effect + q * seq.se) < margin)
    rate, peek_rate = shipped / reps, peeked / reps
    assert rate <= 0.05, rate
    assert peek_rate > rate + 0.03, (peek_rate, rate)
