"""Seeded designs where real raters live: skewed 1-5 stars, users with many sessions, shift.

Each generator returns ``(arms, kw, tau)``: the two :class:`~pulse_ml.stats.arm_inputs.Arm`
(control, treatment) of :func:`pulse_ml.stats.arm_batch.compare_batch` (values (R, n), user ids
(n,) shared by the R data sets) and no further options (``kw``), like :mod:`validity_sims`.
Ratings are stars from a latent score cut at fixed thresholds so that, at the null, about 10 /
8 / 15 / 27 / 40 % of ratings are 1..5 stars (the skew of real agent ratings: mean about 3.9).
Every design is at the null (``tau = 0``, both arms drawn from one distribution), so the truth is
0 for any subpopulation and a shortfall in coverage is the interval's, not a bias of the
estimand.
"""

from __future__ import annotations

import numpy as np
from scipy.stats import norm

from pulse_ml.stats.arm_inputs import Arm

STAR_SHARES = np.array([0.10, 0.08, 0.15, 0.27, 0.40])
CUTS = norm.ppf(np.cumsum(STAR_SHARES)[:-1])  # latent N(0, 1) -> stars with those shares


def stars(latent: np.ndarray) -> np.ndarray:
    """1-5 stars of a standard-normal latent score (shares :data:`STAR_SHARES`)."""
    return 1.0 + np.searchsorted(CUTS, latent).astype(float)


def rank_biserial_shift(rb: float) -> float:
    """Mean shift s of x | labeled ~ N(s, 1) against x | unlabeled ~ N(0, 1) with rank-biserial
    ``rb`` (= 2 P(x_L > x_U) - 1 = 2 Phi(s / sqrt 2) - 1)."""
    return float(np.sqrt(2.0) * norm.ppf((1.0 + rb) / 2.0))


def _latent(rng, shape, x, user_effect, signal: float, icc: float):
    """Standard-normal latent: ``signal`` share of variance from x, ``icc`` from the user."""
    noise = np.sqrt(max(1.0 - signal - icc, 1e-9))
    return np.sqrt(signal) * x + np.sqrt(icc) * user_effect + noise * rng.normal(size=shape)


def label_shift(reps: int, seed: int, rb: float = 0.32, n: int = 150, big_n: int = 1500,
                signal: float = 0.3, pred_noise: float = 0.3, users: bool = False):
    """Raters differ from non-raters in a feature x the predictor uses (MAR given x).

    Per arm, labeled sessions have x ~ N(s, 1), unlabeled x ~ N(0, 1) with ``s`` set by the
    rank-biserial ``rb``; the rating depends on x (``signal`` share of the latent variance) and
    the honest prediction is ``E[stars | x]`` plus noise. ``users=True`` gives every arm
    Pareto-many sessions per user (ids shared by labeled and unlabeled sessions, users nested in
    arms), with an intra-user correlation of 0.15 in the latent score.
    """
    rng = np.random.default_rng(seed)
    s = rank_biserial_shift(rb)
    arms = []
    grid = np.linspace(-5, 5, 2001)  # E[stars | x] on a grid (the ideal predictor)
    for a in (0, 1):
        size = n + big_n
        if users:
            counts = np.minimum(1 + np.floor(rng.pareto(1.3, 10 * size) * 2).astype(int), 100)
            ids = np.repeat(np.arange(counts.size), counts)[:size] + a * 10 * size
            rng.shuffle(ids)
            codes = np.unique(ids, return_inverse=True)[1]
            u = rng.normal(size=(reps, codes.max() + 1))[:, codes]
            icc = 0.15
        else:
            ids, u, icc = None, 0.0, 0.0
        x = rng.normal(size=(reps, size))
        x[:, :n] += s
        z = _latent(rng, (reps, size), x, u, signal, icc)
        y = stars(z)
        sd = np.sqrt(1.0 - signal)
        means = 1.0 + norm.sf((CUTS[None, :] - np.sqrt(signal) * grid[:, None]) / sd).sum(1)
        f = np.interp(x, grid, means) + pred_noise * rng.normal(size=(reps, size))
        arms.append(Arm(y=y[:, :n], f=f[:, :n], f_unl=f[:, n:],
                        users=None if ids is None else ids[:n],
                        users_unl=None if ids is None else ids[n:]))
    return arms, {}, 0.0


def concentrated(reps: int, seed: int, users: int = 80, sessions: int = 2000, p_lab: float = 0.1,
                 tail: float = 1.1, signal: float = 0.2, icc: float = 0.2):
    """User-randomized arms where a few users give most ratings (Pareto activity).

    ``users`` users per arm with Pareto(``tail``) shares of ``sessions`` sessions, each rated with
    probability ``p_lab`` (so heavy users give most ratings); the latent score has a user effect
    (``icc``) and the prediction sees half of it.
    """
    rng = np.random.default_rng(seed)
    arms = []
    for a in (0, 1):
        share = rng.pareto(tail, users) + 1.0
        counts = np.maximum(1, np.round(sessions * share / share.sum())).astype(int)
        ids = np.repeat(np.arange(users), counts) + a * users
        lab = rng.random(ids.size) < p_lab
        lab[np.unique(ids, return_index=True)[1][:2]] = True  # at least 2 rating users
        u = rng.normal(size=(reps, users))[:, ids - a * users]
        x = rng.normal(size=(reps, ids.size))
        z = _latent(rng, (reps, ids.size), x, u, signal, icc)
        y = stars(z)
        f = 3.9 + 0.5 * np.sqrt(signal) * x + 0.3 * u + 0.3 * rng.normal(size=(reps, ids.size))
        arms.append(Arm(y=y[:, lab], f=f[:, lab], f_unl=f[:, ~lab], users=ids[lab],
                        users_unl=ids[~lab]))
    return arms, {}, 0.0


def strong_few(reps: int, seed: int, n: int = 15, big_n: int = 1000, rho_latent: float = 0.92):
    """A strong predictor (r with the stars about 0.85) and few labels per arm."""
    rng = np.random.default_rng(seed)
    arms = []
    for _ in (0, 1):
        x = rng.normal(size=(reps, n + big_n))
        z = rho_latent * x + np.sqrt(1 - rho_latent**2) * rng.normal(size=(reps, n + big_n))
        y = stars(z)
        f = 3.9 + 1.2 * x + 0.2 * rng.normal(size=(reps, n + big_n))
        arms.append(Arm(y=y[:, :n], f=f[:, :n], f_unl=f[:, n:]))
    return arms, {}, 0.0


def weighted_shift(reps: int, seed: int, rb: float = 0.32, n: int = 150, big_n: int = 1500):
    """:func:`label_shift` (i.i.d.) with the true inverse labeling propensities as weights.

    With x | labeled ~ N(s, 1) and x | unlabeled ~ N(0, 1), ``P(labeled | x) = n e^(s x - s^2/2)
    / (n e^(s x - s^2/2) + N)``; ``w = 1 / P`` makes the labeled sessions stand for all sessions
    (shift-aware PPI++: the arms' ``w``).
    """
    rng = np.random.default_rng(seed)
    s = rank_biserial_shift(rb)
    out = []
    grid = np.linspace(-5, 5, 2001)
    signal, sd = 0.3, np.sqrt(0.7)
    means = 1.0 + norm.sf((CUTS[None, :] - np.sqrt(signal) * grid[:, None]) / sd).sum(1)
    for _ in (0, 1):
        x = rng.normal(size=(reps, n + big_n))
        x[:, :n] += s
        y = stars(_latent(rng, x.shape, x, 0.0, signal, 0.0))
        f = np.interp(x, grid, means) + 0.3 * rng.normal(size=x.shape)
        odds = n * np.exp(s * x[:, :n] - s * s / 2) / big_n
        w = 1.0 + 1.0 / odds  # 1 / P(labeled | x)
        out.append(Arm(y=y[:, :n], f=f[:, :n], f_unl=f[:, n:], w=w))
    return out, {}, 0.0
