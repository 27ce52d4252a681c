"""Seeded simulation designs with known truth, shared by the validity tests and the benchmark.

Each generator returns the two :class:`~pulse_ml.stats.arm_inputs.Arm` (control, treatment) of
R data sets of one design for :func:`pulse_ml.stats.arm_batch.compare_batch` (vectorized:
values (R, n), user ids (n,)) and no further options, or per-data-set arm pairs for the
audits, plus the true effect.
"""

from __future__ import annotations

import numpy as np
from scipy.stats import norm

from pulse_ml.stats.arm_batch import BatchComparison
from pulse_ml.stats.arm_inputs import Arm


def coverage(b: BatchComparison, tau: float) -> tuple[float, float]:
    """Share of naive and augmented intervals that contain ``tau``."""
    naive = np.mean((b.naive_lower <= tau) & (tau <= b.naive_upper))
    aug = np.mean((b.aug_lower <= tau) & (tau <= b.aug_upper))
    return float(naive), float(aug)


def iid(reps: int, n: int, big_n: int, rho: float, seed: int, tau: float = 0.3):
    """Independent sessions; the prediction has correlation ``rho`` with the rating."""
    rng = np.random.default_rng(seed)
    arms = []
    for mu in (0.0, tau):
        x = rng.normal(size=(reps, n + big_n))
        y = mu + rho * x + np.sqrt(1 - rho**2) * rng.normal(size=(reps, n + big_n))
        arms.append(Arm(y=y[:, :n], f=x[:, :n], f_unl=x[:, n:]))
    return arms, {}, tau


def few_unlabeled(reps: int, big_n: int, seed: int, users: int = 40, per_user: int = 3):
    """Users nested in arms, 3 labeled sessions each; ``big_n`` unlabeled sessions per arm."""
    rng = np.random.default_rng(seed)
    tau, n = 0.3, users * per_user
    lab = [np.repeat(np.arange(users), per_user) + a * users for a in (0, 1)]
    unl = [rng.choice(users, big_n) + a * users for a in (0, 1)]
    arms = []
    for a in (0, 1):
        u = rng.normal(0, 0.7, size=(reps, 2 * users))
        x = rng.normal(size=(reps, n + big_n))
        codes = np.concatenate([lab[a], unl[a]])
        y = tau * a + u[:, codes] + x + rng.normal(size=(reps, n + big_n))
        f = x + 0.8 * u[:, codes] + 0.5 * rng.normal(size=(reps, n + big_n))
        arms.append(Arm(y=y[:, :n], f=f[:, :n], f_unl=f[:, n:], users=lab[a], users_unl=unl[a]))
    return arms, {}, tau


def heavy_tailed(reps: int, seed: int, n_users: int = 300, label_p: float = 0.1):
    """Heavy-tailed sessions per user (Pareto, up to 200), each session randomized to an arm
    (users in both arms), t(3) user effects and user-specific treatment effects."""
    rng = np.random.default_rng(seed)
    tau = 0.2
    sizes = np.minimum(1 + np.floor(rng.pareto(1.2, n_users) * 2).astype(int), 200)
    user = np.repeat(np.arange(n_users), sizes)
    arm = rng.integers(0, 2, user.size)
    lab = rng.random(user.size) < label_p
    u = rng.standard_t(3, size=(reps, n_users)) * 0.7
    v = rng.normal(0, 0.3, size=(reps, n_users))
    x = rng.normal(size=(reps, user.size))
    y = tau * arm + u[:, user] + v[:, user] * arm + x + rng.normal(size=(reps, user.size))
    f = x + 0.7 * u[:, user] + 0.6 * rng.normal(size=(reps, user.size))
    arms = []
    for a in (0, 1):
        m_l, m_u = (arm == a) & lab, (arm == a) & ~lab
        arms.append(Arm(y=y[:, m_l], f=f[:, m_l], f_unl=f[:, m_u], users=user[m_l],
                        users_unl=user[m_u]))
    return arms, {}, tau


def _star_mean(center: float, scale: float) -> float:
    """E[clip(round(center + scale z), 1, 5)] for z ~ N(0, 1), exactly."""
    cuts = (np.arange(1.5, 5.0, 1.0) - center) / scale
    return float(1.0 + norm.sf(cuts).sum())


def paper_scale(reps: int, seed: int, n: int = 200, big_n: int = 4000, rho: float = 0.35):
    """1-5 star ratings (mean about 4.1), r(rating, prediction) about 0.3, 20x unlabeled."""
    rng = np.random.default_rng(seed)
    center, scale, shift = 4.1, 1.1, 0.1
    arms = []
    for a in (0, 1):
        x = rng.normal(size=(reps, n + big_n))
        z = rho * x + np.sqrt(1 - rho**2) * rng.normal(size=(reps, n + big_n))
        y = np.clip(np.round(center + shift * a + scale * z), 1, 5)
        arms.append(Arm(y=y[:, :n], f=x[:, :n], f_unl=x[:, n:]))
    tau = _star_mean(center + shift, scale) - _star_mean(center, scale)
    return arms, {}, tau


def audit_dataset(seed: int, n_users: int = 200, per_user: int = 12, p_lab: float = 0.4,
                  tau: float = 0.3, sd_u: float = 1.0, leak: float = 0.0, by_user: bool = True):
    """One data set for the audits: users with random effects, randomized by user or session.

    ``leak`` > 0 makes the labeled sessions' predictions in-sample: they memorize that share of
    their own residual ``y - f`` (as a model fitted on those labels does), unlabeled ones do not.
    """
    rng = np.random.default_rng(seed)
    user = np.repeat(np.arange(n_users), per_user)
    arm = rng.integers(0, 2, n_users)[user] if by_user else rng.integers(0, 2, user.size)
    lab = rng.random(user.size) < p_lab
    u = rng.normal(0, sd_u, n_users)[user]
    x = rng.normal(size=user.size)
    y = 3 + tau * arm + u + x + rng.normal(size=user.size)
    f = 3 + x + 0.5 * u + 0.5 * rng.normal(size=user.size)
    f = np.where(lab, f + leak * (y - f), f)
    pair = []
    for a in (0, 1):
        m_l, m_u = (arm == a) & lab, (arm == a) & ~lab
        pair.append(Arm(y=y[m_l], f=f[m_l], f_unl=f[m_u], users=user[m_l], users_unl=user[m_u]))
    return pair, tau


def shifted_labeling(seed: int, n: int = 1500, tau: float = 0.2):
    """One data set whose raters are not random: P(labeled) rises with a feature x that also
    changes the treatment's effect, so labeled sessions over-represent high-x sessions.

    Returns:
        ``(features (2n, 2), labeled (2n,), arm (2n,), y (2n,), f (2n,), true propensity,
        true effect)``; the prediction f is honest but arm-blind.
    """
    rng = np.random.default_rng(seed)
    arm = np.repeat([0, 1], n)
    x = rng.normal(size=2 * n)
    noise = rng.normal(size=2 * n)  # an irrelevant feature
    y = 3 + tau * arm + np.where(arm == 1, 0.9, 0.3) * x + rng.normal(size=2 * n)
    f = 3 + 0.6 * x + 0.3 * rng.normal(size=2 * n)
    propensity = 1 / (1 + np.exp(-(-1.2 + 1.0 * x)))
    labeled = rng.random(2 * n) < propensity
    return np.column_stack([x, noise, arm]), labeled, arm, y, f, propensity, tau
