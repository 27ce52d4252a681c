"""Seeded returning users whose ratings are partly a habit of the rater (user_history tests).

Every user has a Pareto-many sessions (heavy-tailed activity: most come once or twice, a few
dozens of times), spread over 60 days in time order, and a rating offset ``u ~ N(0, sd_user)``;
a session's rating is ``mean + u + e`` with ``e ~ N(0, sd_noise)``: pure habit plus noise, no
session feature carries signal. ``stars=True`` cuts a standard-normal latent with the intra-user
correlation ``icc`` into skewed 1-5 stars (the shares of ``tests/stats/realistic_sims.py``).
"""

from __future__ import annotations

import numpy as np
import pandas as pd
from scipy.stats import norm

STAR_SHARES = np.array([0.10, 0.08, 0.15, 0.27, 0.40])
CUTS = norm.ppf(np.cumsum(STAR_SHARES)[:-1])
SET = {"name": "habit", "columns": {"x": {"kind": "numeric"},
                                    "hist": {"kind": "user_history"}}}


def sessions_per_user(rng: np.random.Generator, n_users: int, cap: int = 40) -> np.ndarray:
    """Heavy-tailed sessions per user (1 + floor(2 Pareto(1.3)), at most ``cap``)."""
    return np.minimum(1 + np.floor(rng.pareto(1.3, n_users) * 2).astype(int), cap)


def returning_users(n_users: int, seed: int, sd_user: float = 0.3, sd_noise: float = 0.64,
                    mean: float = 3.0, rated: float = 1.0, stars: bool = False,
                    icc: float = 0.18) -> pd.DataFrame:
    """A session table (session_id, user_id, condition, rating, started_at, x) in time order.

    Args:
        n_users: Users.
        seed: Seed of everything.
        sd_user: S.d. of the users' offsets (continuous ratings).
        sd_noise: S.d. of the session noise (continuous ratings).
        mean: Mean rating (continuous ratings).
        rated: Share of sessions with a rating (the others are unlabeled, rating NaN).
        stars: Skewed 1-5 stars from a latent with intra-user correlation ``icc`` instead.
        icc: Intra-user correlation of the stars' latent score.
    """
    rng = np.random.default_rng(seed)
    counts = sessions_per_user(rng, n_users)
    user = np.repeat(np.arange(n_users), counts)
    n = user.size
    start = rng.uniform(0, 30, n_users)[user] + rng.uniform(0, 30, n)
    if stars:
        latent = np.sqrt(icc) * rng.normal(size=n_users)[user] + np.sqrt(1 - icc) * rng.normal(
            size=n)
        rating = 1.0 + np.searchsorted(CUTS, latent).astype(float)
    else:
        rating = np.clip(mean + rng.normal(0, sd_user, n_users)[user]
                         + rng.normal(0, sd_noise, n), 1, 5)
    rating = np.where(rng.random(n) < rated, rating, np.nan)
    frame = pd.DataFrame({
        "session_id": [f"s{i}" for i in range(n)],
        "user_id": [f"u{u}" for u in user],
        "condition": np.where(user % 2 == 0, "a", "b"),
        "rating": rating,
        "started_at": pd.Timestamp("2025-03-01", tz="UTC") + pd.to_timedelta(start, unit="D"),
        "x": rng.normal(size=n),
    })
    return frame.sort_values("started_at", kind="stable").reset_index(drop=True)


def theoretical_r(n_prior: np.ndarray, sd_user: float, sd_noise: float) -> float:
    """r of the best predictor E[rating | mean of k earlier ratings] with habit + noise.

    E[Y | mean_k] is shrunk toward the mean by ``s_u^2 / (s_u^2 + s_e^2 / k)``; its variance
    ``s_u^4 / (s_u^2 + s_e^2 / k)`` (0 without history) over the rating's variance, square-rooted
    (Cov(Y, E[Y | X]) = Var(E[Y | X])), averaged over the sessions' ``k``.
    """
    k = np.asarray(n_prior, float)
    vu, ve = sd_user**2, sd_noise**2
    explained = np.where(k > 0, vu**2 / (vu + ve / np.maximum(k, 1)), 0.0)
    return float(np.sqrt(explained.mean() / (vu + ve)))
