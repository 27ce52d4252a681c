"""Seeded A/B tests for the decision rule: skewed stars, users with many sessions, a cost.

Ratings are stars from a standard-normal latent (shares 10/8/15/27/40 % at the null, as in
:mod:`tests.stats.realistic_sims`); a treatment shifts the latent by ``d``, set so that the mean
rating moves by the wanted number of stars. Every arm has users with Pareto-many sessions
(heavy-tailed activity, intra-user correlation 0.15 in the latent and 0.3 in the log-cost),
nested in the arm (users were randomized). The prediction is ``E[stars | x]`` plus noise (the
treatment's shift is not in it: the rectifier has to correct it). The demo's size is 175 rated
sessions per arm and 20 unrated per rated one.
"""

from __future__ import annotations

import numpy as np
from scipy.optimize import brentq
from scipy.stats import norm

from pulse_ml.stats.arm_inputs import Arm

STAR_SHARES = np.array([0.10, 0.08, 0.15, 0.27, 0.40])
CUTS = norm.ppf(np.cumsum(STAR_SHARES)[:-1])
ICC = 0.15
COST_ICC = 0.3
COST_SD = 0.6


def mean_stars(shift: float) -> float:
    """Population mean rating when the latent is N(shift, 1)."""
    return float(1.0 + norm.sf(CUTS - shift).sum())


def latent_shift(effect: float) -> float:
    """The latent shift that moves the mean rating by ``effect`` stars."""
    base = mean_stars(0.0)
    return float(brentq(lambda d: mean_stars(d) - base - effect, -3.0, 3.0))


def _users(rng: np.random.Generator, size: int, offset: int) -> np.ndarray:
    counts = np.minimum(1 + np.floor(rng.pareto(1.3, size) * 2).astype(int), 100)
    ids = np.repeat(np.arange(counts.size), counts)[:size] + offset
    rng.shuffle(ids)
    return ids


def arm(rng: np.random.Generator, reps: int, n: int, big_n: int, effect: float = 0.0,
        cost_ratio: float = 1.0, offset: int = 0, signal: float = 0.3,
        pred_noise: float = 0.3) -> tuple[Arm, np.ndarray, np.ndarray]:
    """One arm of ``reps`` experiments: its :class:`Arm` (values (reps, n)), its costs
    (reps, n + big_n) and user ids of all its sessions (labeled first)."""
    size = n + big_n
    ids = _users(rng, size, offset)
    codes = np.unique(ids, return_inverse=True)[1]
    g = codes.max() + 1
    u = rng.normal(size=(reps, g))[:, codes]
    x = rng.normal(size=(reps, size))
    noise = np.sqrt(1.0 - signal - ICC)
    z = np.sqrt(signal) * x + np.sqrt(ICC) * u + noise * rng.normal(size=(reps, size))
    y = 1.0 + np.searchsorted(CUTS, z + latent_shift(effect)).astype(float)
    grid = np.linspace(-5, 5, 2001)
    sd = np.sqrt(1.0 - signal)
    means = 1.0 + norm.sf((CUTS[None, :] - np.sqrt(signal) * grid[:, None]) / sd).sum(1)
    f = np.interp(x, grid, means) + pred_noise * rng.normal(size=(reps, size))
    cu = rng.normal(size=(reps, g))[:, codes]
    log_cost = (np.sqrt(COST_ICC) * cu + np.sqrt(1 - COST_ICC) * rng.normal(size=(reps, size)))
    cost = 0.4 * cost_ratio * np.exp(COST_SD * log_cost - COST_SD ** 2 / 2)
    return (Arm(y=y[:, :n], f=f[:, :n], f_unl=f[:, n:], users=ids[:n], users_unl=ids[n:]),
            cost, ids)


def mc_se(rate: float, reps: int) -> float:
    """Monte Carlo standard error of a rejection rate."""
    return float(np.sqrt(max(rate * (1 - rate), 1e-12) / reps))
