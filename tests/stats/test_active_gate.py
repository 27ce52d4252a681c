"""The gate between active and uniform asking: honest saving, bootstrap lower bound by user."""

from __future__ import annotations

import numpy as np

from pulse_ml.stats.active_gate import active_gate


def _users(rng, n_users: int) -> np.ndarray:
    """Heavy-tailed activity: most users one or two sessions, a few many."""
    sizes = np.minimum(1 + rng.zipf(2.0, n_users), 40)
    return np.repeat(np.arange(n_users), sizes)


def _sample(rng, n_users: int, spread: float, informative: bool):
    users = _users(rng, n_users)
    n = users.size
    sd = np.exp(spread * rng.normal(size=n))  # the error scale varies across sessions
    user_effect = rng.normal(size=n_users)[users] * 0.5  # residuals correlate within a user
    resid2 = (sd * rng.normal(size=n) + user_effect) ** 2
    err = sd**2 + 0.25 if informative else rng.permutation(sd**2 + 0.25)
    return err, resid2, users


def test_uninformative_error_model_falls_back_and_a_good_one_is_used():
    rng = np.random.default_rng(0)
    err, resid2, users = _sample(rng, 400, 0.8, informative=False)
    gate = active_gate(err, resid2, users, 0.1)
    assert not gate.active and gate.saved < 0.05 and "uniform asking" in gate.reason
    err, resid2, users = _sample(rng, 400, 0.8, informative=True)
    gate = active_gate(err, resid2, users, 0.1)
    assert gate.active and gate.saved >= 0.10 and 0 < gate.lower < gate.saved
    assert "asking by the error model" in gate.reason
    # no spread, or every session asked: uniform, nothing to judge
    assert not active_gate(np.ones(50), resid2[:50], users[:50], 0.1).active
    assert not active_gate(err, resid2, users, 1.0).active


def test_the_same_saving_below_ten_percent_is_refused():
    rng = np.random.default_rng(1)
    err, resid2, users = _sample(rng, 2000, 0.25, informative=True)
    gate = active_gate(err, resid2, users, 0.1)
    assert 0 < gate.saved < 0.10 and not gate.active


def test_lower_bound_is_below_the_population_saving_95_percent_of_the_time():
    """One-sided 95% bootstrap bound over users, checked against a large population."""
    rng = np.random.default_rng(2)
    err, resid2, users = _sample(rng, 200_000, 0.4, informative=True)
    truth = active_gate(err, resid2, users, 0.1, n_boot=2).saved
    reps = 400
    below = np.array([active_gate(*_sample(np.random.default_rng(100 + r), 300, 0.4, True),
                                  0.1, seed=r).lower <= truth for r in range(reps)])
    rate = below.mean()
    assert rate >= 0.95 - 3 * np.sqrt(0.95 * 0.05 / reps), rate  # MC s.e. 0.011
