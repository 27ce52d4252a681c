"""Request probabilities: each group's mean is its budget, clipped, ~ sqrt(error) inside."""

from __future__ import annotations

import numpy as np

from pulse_ml.stats.active_design import labels_saved, scale_to_budget, width_ratio


def test_scale_to_budget_per_group_with_clipping():
    rng = np.random.default_rng(1)
    err2 = rng.lognormal(0.0, 1.2, 20_000)
    groups = rng.integers(0, 3, err2.size)
    budgets = np.array([0.05, 0.2, 0.6])
    pi = scale_to_budget(err2, groups, budgets, budgets / 4)
    for g, b in enumerate(budgets):
        m = groups == g
        assert abs(pi[m].mean() - b) < 1e-9
        assert pi[m].min() >= b / 4 - 1e-15 and pi[m].max() <= 1.0
        inside = m & (pi > b / 4 + 1e-12) & (pi < 1.0)
        ratio = pi[inside] / np.sqrt(err2[inside])
        assert np.ptp(ratio) < 1e-9 * ratio.max()  # proportional to sqrt(error) where unclipped
    assert (pi[groups == 2] == 1.0).any()  # a large budget saturates the largest errors


def test_uniform_error_gives_uniform_probabilities_and_no_gain():
    err2 = np.ones(1000)
    pi = scale_to_budget(err2, np.zeros(1000, int), np.array([0.1]), 0.025)
    np.testing.assert_allclose(pi, 0.1)
    assert abs(width_ratio(err2, pi, 0.1) - 1.0) < 1e-9


def test_width_ratio_matches_the_ipw_variance_by_simulation():
    """The label part of the IPW mean's variance, simulated, against the formula's ratio."""
    rng = np.random.default_rng(2)
    n, b, reps = 4000, 0.1, 4000
    sd = np.where(rng.random(n) < 0.3, 2.0, 0.5)  # residual s.d. per session (known)
    e = rng.normal(0, 1, n) * sd
    pi = scale_to_budget(sd**2, np.zeros(n, int), np.array([b]), b / 4)

    def var_of(p):
        draws = rng.random((reps, n)) < p
        return np.var((draws * (e / p)).sum(axis=1) / n)

    simulated = np.sqrt(var_of(pi) / var_of(np.full(n, b)))
    formula = width_ratio(e**2, pi, b)
    assert formula < 0.9  # a real gain with this spread
    assert abs(simulated - formula) < 0.03
    assert abs(labels_saved(formula) - (1 - formula**2)) < 1e-12
