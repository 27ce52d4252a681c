"""Seeded designs of the audit tests: 1-5 star ratings, heavy-tailed users, strong predictors.

Ratings are a latent normal cut into stars with P(1..5) about .10, .08, .15, .27, .40; users
have Pareto-many sessions and a random effect; the honest prediction is the calibrated
expectation of the stars given what the model sees (a session feature and part of the user
effect), so its correlation with the rating is set by ``noise``.
"""

from __future__ import annotations

import numpy as np
from scipy.stats import norm

from pulse_ml.stats.arm_inputs import Arm

SKEW = np.array([0.10, 0.08, 0.15, 0.27, 0.40])
CUTS = norm.ppf(np.cumsum(SKEW)[:-1])  # latent cut points of a standard normal


def stars(latent: np.ndarray) -> np.ndarray:
    """1-5 stars of a latent value (cut points :data:`CUTS`)."""
    return 1.0 + (latent[..., None] > CUTS).sum(axis=-1)


def expected_stars(signal: np.ndarray, noise_sd: float) -> np.ndarray:
    """E[stars(signal + e)] for e ~ N(0, noise_sd^2): the calibrated prediction."""
    return 1.0 + norm.sf((CUTS - signal[..., None]) / noise_sd).sum(axis=-1)


def strong_predictor(seed: int, n_users: int = 120, rate_users: float = 0.5,
                     rate_sessions: float = 0.35, noise: float = 0.45, tau: float = 0.3,
                     sd_u: float = 0.5, by_user: bool = True, leak: float = 0.0,
                     iid_f: bool = False, tail: float = 1.3, cap: int = 80):
    """One audit data set with a strong honest predictor (r about 0.85 at ``noise=0.45``).

    ``rate_users`` of the users rate, each of their sessions with probability ``rate_sessions``;
    sessions per user are ``1 + floor(3 Pareto(1.3))`` (at most 80). ``leak`` > 0 makes the
    labeled sessions' predictions memorize that share of their residual (in-sample fit).

    Returns:
        ``((control, treatment) Arm, true effect on the latent-star scale)``; the true
        effect is the difference of the arms' expected stars.
    """
    rng = np.random.default_rng(seed)
    sizes = np.minimum(1 + np.floor(3 * rng.pareto(tail, n_users)).astype(int), cap)
    user = np.repeat(np.arange(n_users), sizes)
    arm = rng.integers(0, 2, n_users)[user] if by_user else rng.integers(0, 2, user.size)
    rater = (rng.random(n_users) < rate_users)[user]
    lab = rater & (rng.random(user.size) < rate_sessions)
    u = rng.normal(0, sd_u, n_users)[user]
    x = rng.normal(0, np.sqrt(max(1 - sd_u**2, 0.05)), user.size)
    shift = tau_shift(tau)
    signal = x + u + shift * arm
    y = stars(signal + noise * rng.normal(size=user.size))
    f = expected_stars(x + u, noise)  # arm-blind, as a model without the design
    if iid_f:
        f = expected_stars(x, np.hypot(noise, sd_u))
    f = np.where(lab, f + leak * (y - f), f)
    pair = []
    for a in (0, 1):
        m_l, m_u = (arm == a) & lab, (arm == a) & ~lab
        pair.append(Arm(y=y[m_l], f=f[m_l], f_unl=f[m_u], users=user[m_l], users_unl=user[m_u]))
    return pair, true_effect(shift, noise, sd_u)


def tau_shift(tau: float) -> float:
    """Latent shift of the treatment (the true star effect is about ``tau``)."""
    return tau / 1.0


def true_effect(shift: float, noise: float, sd_u: float) -> float:
    """Difference of expected stars between the arms (latent s.d. sqrt(1 + noise^2))."""
    scale = np.sqrt(1 + noise**2)
    return float(norm.sf((CUTS - shift) / scale).sum() - norm.sf(CUTS / scale).sum())
