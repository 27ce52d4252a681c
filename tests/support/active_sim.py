"""A seeded A/B data set asked for ratings by probability, for the active PPI++ simulations.

Users with heavy-tailed session counts (Pareto), each session of a user in either arm (users in
both arms), skewed 1-5 star ratings (mostly 4-5), heteroscedastic prediction errors (the error
s.d. depends on a feature), asked with pi ~ sqrt(expected squared error) scaled to a budget and
clipped, and feature-dependent non-response among the asked (``response`` on average).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.special import expit


@dataclass(frozen=True)
class ActiveData:
    """One simulated case study: every session, its all-label rating and who rated."""

    x: np.ndarray          # (n, 3) features: numeric, 0/1 "hard" flag, numeric
    users: np.ndarray      # (n,) user codes
    treated: np.ndarray    # (n,) bool
    y: np.ndarray          # (n,) rating every session would give (all-label)
    f: np.ndarray          # (n,) honest prediction
    pi: np.ndarray         # (n,) request probability
    rated: np.ndarray      # (n,) asked and answered

    def all_label_effect(self) -> float:
        return float(self.y[self.treated].mean() - self.y[~self.treated].mean())


def request_probs(err2: np.ndarray, budget: float, min_prob: float) -> np.ndarray:
    """pi ~ sqrt(err2) with mean ``budget`` after clipping to [min_prob, 1] (bisection)."""
    s = np.sqrt(err2)
    lo, hi = 0.0, 1.0 / max(s.min(), 1e-12)
    for _ in range(60):
        mid = 0.5 * (lo + hi)
        lo, hi = (mid, hi) if np.clip(mid * s, min_prob, 1).mean() < budget else (lo, mid)
    return np.clip(0.5 * (lo + hi) * s, min_prob, 1.0)


def simulate(seed: int, n_users: int = 400, budget: float = 0.1, response: float = 0.8,
             active: bool = True, effect: float = 0.15, hetero: float = 3.0,
             user_sd: float = 0.35, by_user: bool = False, f_effect: float = 0.1,
             effect_hard: float = 0.0) -> ActiveData:
    """One data set; ``active=False`` asks uniformly with the same expected count.

    ``user_sd``: s.d. of the users' rating effect (intra-user correlation); ``by_user``: users
    (not sessions) are randomized, so every user is in one arm; ``f_effect``: the treatment
    term of the predictions (0: arm-blind, as a model trained without the design);
    ``effect_hard``: extra treatment effect on the "hard" sessions, the ones asked more often
    (a heterogeneous effect: the rated sessions' effect is then not the all-label one unless
    they are weighted).
    """
    rng = np.random.default_rng(seed)
    per_user = np.minimum(1 + rng.pareto(1.5, n_users) * 3, 200).astype(int)
    users = np.repeat(np.arange(n_users), per_user)
    n = users.size
    u_eff = rng.normal(0, user_sd, n_users)[users]
    x1 = rng.normal(0, 1, n) + 0.5 * rng.normal(0, 1, n_users)[users]
    hard = rng.random(n) < 0.3
    x3 = rng.normal(0, 1, n)  # drives answering; the predictor uses it only weakly
    treated = (rng.random(n_users) < 0.5)[users] if by_user else rng.random(n) < 0.5
    sd = np.where(hard, np.sqrt(hetero), 1.0) * 0.45
    latent = (4.0 + u_eff + 0.35 * x1 - 0.6 * hard + 0.3 * x3
              + (effect + effect_hard * hard) * treated)
    y = np.clip(np.round(latent + rng.normal(0, 1, n) * sd * 1.6), 1, 5)
    f = 4.0 + 0.3 * x1 - 0.5 * hard + 0.05 * x3 + f_effect * treated + rng.normal(0, 0.15, n)
    err2 = np.where(hard, hetero, 1.0) * np.exp(rng.normal(0, 0.3, n))  # a noisy error model
    pi = request_probs(err2, budget, budget / 4) if active else np.full(n, budget)
    asked = rng.random(n) < pi
    b = np.log(response / (1 - response))
    answers = rng.random(n) < expit(b + 1.2 * x3 - 0.5 * hard)
    return ActiveData(np.column_stack([x1, hard.astype(float), x3]), users, treated, y, f, pi,
                      asked & answers)


def weighted_arms(d: ActiveData, seed: int, *, weights: str = "active",
                  f: np.ndarray | None = None) -> list:
    """Control and treatment :class:`Arm` weighted as ``infer`` does (1 / (pi r_hat)).

    ``weights``: ``"active"`` (1 / (pi r_hat), r_hat cross-fitted by user), ``"pi"`` (1 / pi
    alone: no non-response correction) or ``"none"`` (the weights dropped); ``f``: other
    predictions (a leak).
    """
    from pulse_ml.inference.active import active_weights
    from pulse_ml.stats.arm_inputs import Arm

    x = np.column_stack([d.x, d.treated])
    w_all = np.zeros(d.y.size)
    if weights == "active":
        w_all[d.rated], _ = active_weights(x, d.rated, d.pi, d.users, seed=seed)
    else:
        w_all[d.rated] = 1.0 / d.pi[d.rated]
    f = d.f if f is None else f
    arms = []
    for t in (False, True):
        m = d.treated == t
        lab, unl = m & d.rated, m & ~d.rated
        arms.append(Arm(y=d.y[lab], f=f[lab], f_unl=f[unl], users=d.users[lab],
                        users_unl=d.users[unl], w=None if weights == "none" else w_all[lab]))
    return arms


def one_replication(seed: int, *, weights: str = "active", **kw) -> dict[str, float]:
    """Active PPI++ on one data set: interval hits of the all-label effect and arm means."""
    from pulse_ml.stats.arm_effect import compare_arms

    d = simulate(seed, **kw)
    arms = weighted_arms(d, seed, weights=weights)
    c = compare_arms(arms[0], arms[1])
    true = d.all_label_effect()
    out = {"rated": float(d.rated.sum())}
    for name, est in (("naive", c.naive), ("ppi", c.augmented)):
        out[f"{name}_covers"] = float(est.ci_lower <= true <= est.ci_upper)
        out[f"{name}_width"] = est.ci_upper - est.ci_lower
    truth_c = d.y[~d.treated].mean()
    out["ppi_control_mean_covers"] = float(
        abs(c.mean_control_augmented - truth_c) <= 1.96 * c.se_control_augmented)
    out["ppi_control_mean_error"] = c.mean_control_augmented - truth_c
    return out
