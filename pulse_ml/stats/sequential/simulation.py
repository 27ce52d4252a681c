"""Seeded 1-5 star monitoring data for tests and benchmarks (users, arms, days, predictions)."""

from __future__ import annotations

import math
from typing import Literal

import numpy as np
from numpy.typing import NDArray
from scipy.stats import norm

from pulse_ml.errors import PulseError

F64 = NDArray[np.float64]


def _star_mean(loc: F64, scale: float) -> F64:
    """E[clip(round(Z), 1, 5)] for Z ~ N(loc, scale^2)."""
    cuts = np.array([1.5, 2.5, 3.5, 4.5])
    return 1.0 + norm.sf((cuts[:, None] - np.atleast_1d(loc)[None, :]) / scale).sum(axis=0)


def simulate_monitoring(
    n_reps: int,
    n_days: int = 21,
    labeled_per_day: int = 10,
    unlabeled_per_day: int = 100,
    effect: float = 0.0,
    signal: float = 0.6,
    n_users: int | None = None,
    user_sd: float = 0.5,
    randomize: Literal["session", "user"] = "session",
    base: float = 4.0,
    seed: int = 0,
) -> tuple[dict[str, NDArray], float]:
    """Seeded A/B monitoring data with 1-5 star ratings (the validation design of the tests).

    Per replication, day and arm, ``labeled_per_day`` rated and ``unlabeled_per_day`` unrated
    sessions arrive (arm slots are exact for ``randomize='session'``; with ``'user'`` each user
    keeps one arm and the slot's arm is replaced by it). The latent rating is
    ``base + effect * arm + b_user + x + e`` with ``x ~ N(0, signal)``, ``e ~ N(0, 1 - signal)``
    and ``b_user ~ N(0, user_sd^2)``; the rating is ``clip(round(latent), 1, 5)``. The honest
    prediction is ``3.5 + x + 0.8 b_user`` (it does not see the arm). With users, 30% arrive
    on day 0 and the rest uniformly over the days; a session belongs to a uniformly drawn user
    among those already arrived, so a user's sessions spread over many looks.

    Args:
        n_reps: Replications (returned as ``group`` 0..n_reps-1).
        n_days: Days = looks.
        labeled_per_day: Labeled sessions per arm per day.
        unlabeled_per_day: Unlabeled sessions per arm per day.
        effect: Effect on the latent scale.
        signal: Share of the within-user latent variance the predictor sees, in [0, 1].
        n_users: Users per replication; ``None`` = no users (i.i.d. sessions).
        user_sd: Standard deviation of the user effect.
        randomize: 'session' (users may be in both arms) or 'user'.
        base: Latent control mean.
        seed: Seed of the generator.

    Returns:
        ``(data, true_effect)``: data has arrays ``group``, ``look``, ``arm``, ``labeled``,
        ``rating`` (NaN when unlabeled), ``prediction`` and ``users`` (``None`` without users);
        ``true_effect`` is the effect on the star scale (exact, by normal probabilities).
    """
    if randomize not in ("session", "user"):
        raise PulseError(f"randomize must be 'session' or 'user', got {randomize!r}")
    rng = np.random.default_rng(seed)
    per_day = 2 * (labeled_per_day + unlabeled_per_day)
    slot_arm = np.repeat([0, 1], labeled_per_day + unlabeled_per_day)
    slot_lab = np.tile(np.r_[np.ones(labeled_per_day, bool), np.zeros(unlabeled_per_day, bool)], 2)
    size = n_reps * n_days * per_day
    group = np.repeat(np.arange(n_reps), n_days * per_day)
    look = np.tile(np.repeat(np.arange(n_days), per_day), n_reps)
    arm = np.tile(slot_arm, n_reps * n_days)
    labeled = np.tile(slot_lab, n_reps * n_days)
    x = rng.normal(0.0, math.sqrt(signal), size)
    e = rng.normal(0.0, math.sqrt(1.0 - signal), size)
    users = None
    b = np.zeros(size)
    sd_total = 1.0
    if n_users is not None:
        n_first = max(1, int(0.3 * n_users))
        arrive = np.sort(np.r_[np.zeros(n_first), rng.uniform(0, n_days, n_users - n_first)])
        arrived = np.searchsorted(arrive, np.arange(n_days), side="right")  # users by day d
        u = np.minimum((rng.random(size) * arrived[look]).astype(np.int64), arrived[look] - 1)
        users = group * n_users + u
        b = rng.normal(0.0, user_sd, n_reps * n_users)[users]
        sd_total = math.sqrt(1.0 + user_sd**2)
        if randomize == "user":
            arm = rng.integers(0, 2, n_reps * n_users)[users]
    latent = base + effect * arm + b + x + e
    rating = np.clip(np.round(latent), 1.0, 5.0)
    prediction = 3.5 + x + 0.8 * b
    data = {
        "group": group,
        "look": look,
        "arm": arm,
        "labeled": labeled,
        "rating": np.where(labeled, rating, np.nan),
        "prediction": prediction,
        "users": users,
    }
    means = _star_mean(np.array([base, base + effect]), sd_total)
    return data, float(means[1] - means[0])
