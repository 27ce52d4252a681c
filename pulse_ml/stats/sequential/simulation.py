"""Seeded 1-5 star monitoring data for tests and benchmarks (users, arms, days, predictions)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Literal

import numpy as np
from numpy.typing import NDArray
from scipy.stats import norm

from pulse_ml.errors import PulseError

F64 = NDArray[np.float64]


ROUND_CUTS = np.array([1.5, 2.5, 3.5, 4.5])


def _star_mean(loc: F64, scale: float, cuts: F64 = ROUND_CUTS) -> F64:
    """E[1 + #(cuts below Z)] for Z ~ N(loc, scale^2) (default cuts: clip(round(Z), 1, 5))."""
    return 1.0 + norm.sf((cuts[:, None] - np.atleast_1d(loc)[None, :]) / scale).sum(axis=0)


def _per_day(value: int | Sequence[int], n_days: int, name: str) -> NDArray[np.int64]:
    arr = np.broadcast_to(np.asarray(value, dtype=np.int64), (n_days,)) if np.ndim(value) == 0 \
        else np.asarray(value, dtype=np.int64)
    if arr.shape != (n_days,) or (arr < 0).any():
        raise PulseError(f"{name} needs one count >= 0 per day ({n_days}), got {value!r}")
    return arr


def _pick_users(rng: np.random.Generator, weight: F64, arrived: NDArray[np.int64],
                day: NDArray[np.int64], rep: NDArray[np.int64], n_users: int) -> NDArray[np.int64]:
    """A user per session, drawn with probability ~ ``weight`` among those arrived by its day.

    ``weight`` holds every replication's users (arrival order) back to back.
    """
    cum = np.cumsum(weight)
    base = np.r_[0.0, cum][rep * n_users]
    top = cum[rep * n_users + arrived[day] - 1]
    pos = np.searchsorted(cum, base + rng.random(day.size) * (top - base), side="right")
    return np.minimum(pos, rep * n_users + arrived[day] - 1)


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
    activity: float | None = None,
    star_probs: Sequence[float] | None = None,
    drift: float = 0.0,
) -> tuple[dict[str, NDArray], float]:
    """Seeded A/B monitoring data with 1-5 star ratings (the validation design of the tests).

    Per replication, day and arm, ``labeled_per_day`` rated and ``unlabeled_per_day`` unrated
    sessions arrive (arm slots are exact for ``randomize='session'``; with ``'user'`` each user
    keeps one arm and the slot's arm is replaced by it). The latent rating is
    ``base + effect * arm + b_user + x + e`` with ``x ~ N(0, signal)``, ``e ~ N(0, 1 - signal)``
    and ``b_user ~ N(0, user_sd^2)``; the rating is ``clip(round(latent), 1, 5)``. The honest
    prediction is ``3.5 + x + 0.8 b_user`` (it does not see the arm). With users, 30% arrive
    on day 0 and the rest uniformly over the days; a session belongs to a user drawn among
    those already arrived, uniformly or (``activity``) with probability proportional to the
    user's Pareto activity, so a user's sessions spread over many looks and, with heavy tails,
    a few users hold most of them. ``star_probs`` replaces the rounding by cut points at which
    the control arm's stars have these probabilities (e.g. ``(.10, .08, .15, .27, .40)``).
    ``drift`` adds ``drift * d / (n_days - 1)`` to the treatment arm's predictions on day d
    (a predictor that drifts in one arm only; the ratings do not), and per-day label counts
    (``labeled_per_day`` as a sequence) make the labeling rate change over time.

    Args:
        n_reps: Replications (returned as ``group`` 0..n_reps-1).
        n_days: Days = looks.
        labeled_per_day: Labeled sessions per arm per day (or one count per day).
        unlabeled_per_day: Unlabeled sessions per arm per day (or one count per day).
        effect: Effect on the latent scale.
        signal: Share of the within-user latent variance the predictor sees, in [0, 1].
        n_users: Users per replication; ``None`` = no users (i.i.d. sessions).
        user_sd: Standard deviation of the user effect.
        randomize: 'session' (users may be in both arms) or 'user'.
        base: Latent control mean.
        seed: Seed of the generator.
        activity: Pareto shape of the users' activity (smaller = heavier tail; e.g. 1.1);
            ``None`` = every arrived user equally likely.
        star_probs: Probabilities of 1..5 stars in the control arm (``None``: rounding).
        drift: Treatment-only prediction drift by the last day (star units).

    Returns:
        ``(data, true_effect)``: data has arrays ``group``, ``look``, ``arm``, ``labeled``,
        ``rating`` (NaN when unlabeled), ``prediction`` and ``users`` (``None`` without users);
        ``true_effect`` is the effect on the star scale (exact, by normal probabilities).
    """
    if randomize not in ("session", "user"):
        raise PulseError(f"randomize must be 'session' or 'user', got {randomize!r}")
    rng = np.random.default_rng(seed)
    n_lab = _per_day(labeled_per_day, n_days, "labeled_per_day")
    n_unl = _per_day(unlabeled_per_day, n_days, "unlabeled_per_day")
    # each day: control's labeled then unlabeled slots, then treatment's
    one_arm = np.concatenate([np.repeat([0, 1], lab + unl) for lab, unl in zip(n_lab, n_unl,
                                                                              strict=True)])
    one_lab = np.concatenate([np.tile(np.arange(lab + unl) < lab, 2) for lab, unl in
                              zip(n_lab, n_unl, strict=True)])
    one_look = np.repeat(np.arange(n_days), 2 * (n_lab + n_unl))
    per_rep = one_arm.size
    size = n_reps * per_rep
    group = np.repeat(np.arange(n_reps), per_rep)
    look = np.tile(one_look, n_reps)
    arm = np.tile(one_arm, n_reps)
    labeled = np.tile(one_lab, n_reps)
    x = rng.normal(0.0, math.sqrt(signal), size)
    e = rng.normal(0.0, math.sqrt(1.0 - signal), size)
    users = None
    b = np.zeros(size)
    sd_total = 1.0
    if n_users is not None:
        n_first = max(1, int(0.3 * n_users))
        arrive = np.sort(np.r_[np.zeros(n_first), rng.uniform(0, n_days, n_users - n_first)])
        arrived = np.searchsorted(arrive, np.arange(n_days), side="right")  # users by day d
        if activity is None:
            u = np.minimum((rng.random(size) * arrived[look]).astype(np.int64), arrived[look] - 1)
            users = group * n_users + u
        else:
            weight = rng.pareto(activity, n_reps * n_users) + 1.0
            users = _pick_users(rng, weight, arrived, look, group, n_users)
        b = rng.normal(0.0, user_sd, n_reps * n_users)[users]
        sd_total = math.sqrt(1.0 + user_sd**2)
        if randomize == "user":
            arm = rng.integers(0, 2, n_reps * n_users)[users]
    latent = base + effect * arm + b + x + e
    cuts = ROUND_CUTS
    if star_probs is not None:
        probs = np.asarray(star_probs, dtype=np.float64)
        if probs.shape != (5,) or (probs <= 0).any() or abs(probs.sum() - 1.0) > 1e-9:
            raise PulseError(f"star_probs needs 5 positive probabilities summing to 1, got "
                             f"{star_probs!r}")
        cuts = base + sd_total * norm.ppf(np.cumsum(probs)[:4])
    rating = 1.0 + (latent[:, None] > cuts[None, :]).sum(axis=1)
    prediction = 3.5 + x + 0.8 * b + drift * arm * look / max(n_days - 1, 1)
    data = {
        "group": group,
        "look": look,
        "arm": arm,
        "labeled": labeled,
        "rating": np.where(labeled, rating, np.nan),
        "prediction": prediction,
        "users": users,
    }
    means = _star_mean(np.array([base, base + effect]), sd_total, cuts)
    return data, float(means[1] - means[0])
