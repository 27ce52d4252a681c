"""Label planner: how many ratings per arm an effect needs, naive and with PPI.

Two arms, two-sided level-alpha test of the effect ``delta``. With per-arm variance ``v(n)`` of
an arm's estimate the effect has standard error ``s(n) = sqrt(2 v(n))`` and power

    P(n) = F(|delta|/s(n) - q) + F(-|delta|/s(n) - q),

F the t(df) distribution and q its ``1 - alpha/2`` quantile (normal with
``small_sample=False``; the shifted central t approximates the noncentral one).

* Naive: ``v(n) = deff sd^2 / n`` (textbook ``n ~ 2 (z_{1-alpha/2} + z_power)^2 sd^2 deff /
  delta^2``); ``deff = 1 + (m - 1) icc`` is the users' design effect (m labels per user), given
  or estimated by :func:`design_effect`.
* PPI++ with N unlabeled sessions per arm, predictions of correlation rho and s.d. ``sd_f``:
  ``v(n) = deff [(sd^2 - 2 lam rho sd sd_f + lam^2 sd_f^2) / n + lam^2 sd_f^2 / N]`` at
  ``lam = clip(rho (sd / sd_f) N / (n + N), 0, 1)`` -- lambda is capped at 1, which binds for
  predictions less spread than calibrated ones (sd_f < rho sd). Calibrated predictions
  (``sd_f = rho sd``, the default) give ``sd^2 / n (1 - rho^2 N / (n + N))``.
* Users in both arms (sessions randomized, not users): the arms' estimates share users, so the
  effect's variance is ``v_c + v_t - 2 Cov = 2 v(n) (1 - kappa)`` with ``kappa`` the correlation
  of the two arms' estimates, ``icc_x sum_g n_gc n_gt / sqrt(n_c n_t deff_c deff_t)`` (icc_x:
  correlation of one user's ratings across the arms): a user's own level cancels in the
  difference. ``deff`` and ``m`` are then per arm (a user's labels IN ONE ARM);
  :func:`arm_design` estimates all three from labeled sessions with their arm. The pooled
  design effect of :func:`design_effect` (all of a user's labels, no covariance) asked for up to
  twice the labels needed.
* Small-sample rules of :func:`pulse_ml.stats.arm_effect.compare_arms` (default): G = n / m
  labeled users per arm, df ``2 (G - 1)`` naive and ``2 (G - 2)`` with PPI, capped at
  ``G_union - 2`` (``- 4`` with PPI) when a share ``s`` of the users is in both arms
  (``G_union = G (2 - s)``), and the tuned-lambda inflation ``(G - 1) / (G - 3)`` of the PPI
  variance.

``P(n) = power`` is solved for a real n (brentq; P increases with n) and rounded up.
Negative rho is refused: PPI++ clips lambda at 0, so such a predictor saves nothing.

References:
    A. N. Angelopoulos, J. C. Duchi, T. Zrnic. PPI++: Efficient prediction-powered inference.
    arXiv:2311.01453, 2023.
    L. Kish. Survey Sampling. Wiley, 1965 (design effect 1 + (m - 1) icc).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pandas as pd
from numpy.typing import ArrayLike
from scipy.optimize import brentq
from scipy.stats import t as student_t

from pulse_ml.errors import PulseError

__all__ = ["ArmDesign", "DesignEffect", "LabelPlan", "arm_design", "design_effect", "labels_needed",
           "planned_power"]


@dataclass(frozen=True)
class LabelPlan:
    """Labels per arm for a target power.

    Attributes:
        n_naive: Labels per arm for the difference of labeled means.
        n_ppi: Labels per arm with PPI++ (optimal lambda, capped at 1) and ``n_unlabeled``
            predictions.
        saving: ``n_naive - n_ppi`` labels per arm.
        saving_pct: ``100 * saving / n_naive``.
        n_naive_exact: The real-valued solution behind ``n_naive``.
        n_ppi_exact: The real-valued solution behind ``n_ppi``.
        design_effect: The design effect used.
        arm_correlation: The correlation of the arms' estimates used (users in both arms).
    """

    n_naive: int
    n_ppi: int
    saving: int
    saving_pct: float
    n_naive_exact: float
    n_ppi_exact: float
    design_effect: float = 1.0
    arm_correlation: float = 0.0


@dataclass(frozen=True)
class DesignEffect:
    """Design effect of users' repeated ratings (see :func:`design_effect`).

    Attributes:
        deff: ``1 + (m - 1) icc`` with m the size-weighted mean labels per user.
        icc: Intra-user correlation of the ratings (one-way ANOVA estimator, clipped to [0, 1]).
        labels_per_user: ``m = sum_g m_g^2 / sum_g m_g``.
        n_users: Users with a rating.
        n_labels: Ratings.
    """

    deff: float
    icc: float
    labels_per_user: float
    n_users: int
    n_labels: int


def design_effect(ratings: ArrayLike, users: ArrayLike) -> DesignEffect:
    """Estimate the users' design effect from labeled sessions (ratings and their user ids).

    Args:
        ratings: Ratings of the labeled sessions, shape (n,).
        users: User id of each, shape (n,).

    Returns:
        The design effect; ``deff = 1`` when every user has one rating.

    Raises:
        PulseError: Fewer than 2 users, or ratings that do not vary.
    """
    y = np.asarray(ratings, dtype=np.float64)
    codes, uniques = pd.factorize(np.asarray(users))
    if y.shape != codes.shape or (codes < 0).any():
        raise PulseError("design_effect: need one non-missing user id per rating")
    g, n = len(uniques), y.size
    if g < 2 or np.ptp(y) == 0:
        raise PulseError(f"design_effect: need ratings that vary, from at least 2 users (got "
                         f"{n} ratings from {g} users)")
    m = np.bincount(codes, minlength=g).astype(float)
    sums = np.bincount(codes, weights=y, minlength=g)
    ss_total = float(((y - y.mean()) ** 2).sum())
    ss_between = float((sums**2 / m).sum() - y.sum() ** 2 / n)
    icc = 0.0
    if n > g:
        ms_b, ms_w = ss_between / (g - 1), (ss_total - ss_between) / (n - g)
        n0 = (n - (m**2).sum() / n) / (g - 1)
        sigma_b = max((ms_b - ms_w) / n0, 0.0)
        icc = float(np.clip(sigma_b / (sigma_b + ms_w), 0.0, 1.0)) if sigma_b + ms_w > 0 else 0.0
    m_bar = float((m**2).sum() / n)
    return DesignEffect(1.0 + (m_bar - 1.0) * icc, icc, m_bar, g, n)


@dataclass(frozen=True)
class ArmDesign:
    """Per-arm design effect and the arms' covariance of an A/B test (see :func:`arm_design`).

    Attributes:
        deff: Per-arm design effect ``1 + (m - 1) icc`` (mean of the two arms).
        icc: Intra-user correlation of the ratings within an arm (mean of the arms).
        labels_per_user: Size-weighted labels per user within an arm (mean of the arms).
        arm_correlation: Correlation ``kappa`` of the two arms' means through shared users.
        cross_icc: Correlation of one user's ratings across the two arms (clipped to [0, 1]).
        shared_users: Share of each arm's labeled users who also rate in the other arm.
        n_users: Users with a rating.
        n_labels: Ratings.
    """

    deff: float
    icc: float
    labels_per_user: float
    arm_correlation: float
    cross_icc: float
    shared_users: float
    n_users: int
    n_labels: int

    @property
    def effect_deff(self) -> float:
        """Design effect of the effect (difference of the arms): ``deff (1 - kappa)``."""
        return self.deff * (1.0 - self.arm_correlation)


def arm_design(ratings: ArrayLike, users: ArrayLike, treated: ArrayLike) -> ArmDesign:
    """Estimate per-arm design effects and the arms' correlation from labeled sessions.

    ``cross_icc = sum_g r_gc r_gt / (s_c s_t sum_g n_gc n_gt)`` with ``r_ga`` a user's sum of
    centred ratings in arm a (the pairwise moment estimator of the correlation of two ratings
    of one user in different arms); ``kappa = cross_icc sum_g n_gc n_gt / sqrt(n_c n_t deff_c
    deff_t)``, clipped to [0, 0.95].

    Args:
        ratings: Ratings of the labeled sessions, shape (n,).
        users: User id of each, shape (n,).
        treated: Arm of each (True / 1 = treatment), shape (n,).

    Returns:
        The design; ``arm_correlation = 0`` when no user rates in both arms.

    Raises:
        PulseError: An arm with fewer than 2 users or ratings that do not vary.
    """
    y = np.asarray(ratings, dtype=np.float64)
    codes, uniques = pd.factorize(np.asarray(users))
    arm = np.asarray(treated).astype(bool)
    if not (y.shape == codes.shape == arm.shape) or (codes < 0).any():
        raise PulseError("arm_design: need one non-missing user id and arm per rating")
    g = len(uniques)
    per_arm, sums, counts, sds = [], [], [], []
    for a in (False, True):
        m = arm == a
        per_arm.append(design_effect(y[m], codes[m]))
        sums.append(np.bincount(codes[m], weights=y[m] - y[m].mean(), minlength=g))
        counts.append(np.bincount(codes[m], minlength=g).astype(float))
        sds.append(float(np.std(y[m], ddof=1)))
    pairs = float((counts[0] * counts[1]).sum())
    cross = 0.0
    if pairs > 0 and sds[0] * sds[1] > 0:
        cross = float(np.clip((sums[0] * sums[1]).sum() / (sds[0] * sds[1] * pairs), 0.0, 1.0))
    n_c, n_t = counts[0].sum(), counts[1].sum()
    kappa = cross * pairs / math.sqrt(n_c * n_t * per_arm[0].deff * per_arm[1].deff)
    in_arm = [(c > 0).sum() for c in counts]
    both = float(((counts[0] > 0) & (counts[1] > 0)).sum())
    return ArmDesign(
        deff=float(np.mean([d.deff for d in per_arm])),
        icc=float(np.mean([d.icc for d in per_arm])),
        labels_per_user=float(np.mean([d.labels_per_user for d in per_arm])),
        arm_correlation=float(np.clip(kappa, 0.0, 0.95)), cross_icc=cross,
        shared_users=both / float(np.mean(in_arm)), n_users=g, n_labels=int(y.size))


def _variance(n: float, sd: float, rho: float, sd_f: float, n_unl: int, deff: float) -> float:
    """Per-arm variance of the PPI++ mean at the best lambda in [0, 1] (rho = 0: naive)."""
    if rho == 0 or n_unl == 0:
        return deff * sd**2 / n
    lam = min(1.0, rho * (sd / sd_f) * n_unl / (n + n_unl))
    cov = rho * sd * sd_f
    return deff * ((sd**2 - 2 * lam * cov + lam**2 * sd_f**2) / n + lam**2 * sd_f**2 / n_unl)


def planned_power(
    n: float,
    effect: float,
    sd: float,
    rho: float = 0.0,
    n_unlabeled: int = 0,
    alpha: float = 0.05,
    *,
    design_effect: float = 1.0,
    labels_per_user: float = 1.0,
    sd_pred: float | None = None,
    small_sample: bool = True,
    arm_correlation: float = 0.0,
    shared_users: float = 0.0,
) -> float:
    """Power of the two-sided test with ``n`` labels per arm (see module docstring).

    Args:
        n: Labels per arm.
        effect: Effect on the rating scale.
        sd: Standard deviation of a rating within an arm.
        rho: Correlation of rating and honest prediction (0 = naive test).
        n_unlabeled: Unlabeled sessions per arm.
        alpha: Level.
        design_effect: Variance inflation of a mean from users' repeated ratings.
        labels_per_user: Labels per user (sets the labeled user count n / m behind the df).
        sd_pred: Standard deviation of the predictions (default: calibrated, ``rho sd``).
        small_sample: Use compare_arms' t quantiles and tuned-lambda inflation.
        arm_correlation: Correlation ``kappa`` of the arms' estimates through users in both
            arms (:func:`arm_design`); the effect's variance is ``2 v (1 - kappa)``.
        shared_users: Share of each arm's labeled users also labeled in the other arm (caps
            the df at the union of users).

    Returns:
        The power in [0, 1].
    """
    sd_f = abs(rho) * sd if sd_pred is None else float(sd_pred)
    ppi = rho != 0 and n_unlabeled > 0 and sd_f > 0
    v = _variance(n, sd, rho if ppi else 0.0, sd_f, n_unlabeled, design_effect)
    v *= 1.0 - arm_correlation
    df = math.inf
    if small_sample:
        users = n / labels_per_user
        lost = 2.0 if ppi else 1.0
        union = users * (2.0 - shared_users)
        df = max(min(2.0 * (users - lost), union - 2.0 * lost), 1.0)
        if ppi:
            v *= (users - 1.0) / (users - 3.0) if users > 3.5 else math.inf
    if not math.isfinite(v):
        return 0.0
    shift = abs(effect) / math.sqrt(2.0 * v)
    q = float(student_t.ppf(1.0 - alpha / 2.0, df))
    return float(student_t.cdf(shift - q, df) + student_t.cdf(-shift - q, df))


def _solve(power: float, floor: float, **kw) -> float:
    def gap(n: float) -> float:
        return planned_power(n, **kw) - power

    lo, hi = floor, max(2.0 * floor, 8.0)
    while gap(hi) < 0.0:
        lo, hi = hi, hi * 2.0
        if hi > 1e15:
            raise PulseError("labels_needed: the effect is too small to reach the power")
    if gap(lo) >= 0.0:
        return lo
    return float(brentq(gap, lo, hi, xtol=1e-10, rtol=1e-14))


def effect_sd_rho_problems(effect: float, sd: float, rho: float) -> list[str]:
    """The range checks every planner shares: a non-zero effect, sd > 0, rho in [-1, 1]."""
    problems = []
    if not np.isfinite(effect) or effect == 0:
        problems.append(f"effect must be a non-zero number, got {effect}")
    if not np.isfinite(sd) or sd <= 0:
        problems.append(f"sd must be > 0, got {sd}")
    if not -1.0 <= rho <= 1.0:
        problems.append(f"rho must be in [-1, 1], got {rho}")
    return problems


def labels_needed(
    effect: float,
    sd: float,
    rho: float = 0.0,
    n_unlabeled: int = 0,
    alpha: float = 0.05,
    power: float = 0.8,
    *,
    design_effect: float = 1.0,
    labels_per_user: float = 1.0,
    sd_pred: float | None = None,
    small_sample: bool = True,
    arm_correlation: float = 0.0,
    shared_users: float = 0.0,
) -> LabelPlan:
    """Labels per arm to detect ``effect`` with the given power, without and with PPI.

    Args:
        effect: Effect size on the rating scale (treatment - control), non-zero.
        sd: Standard deviation of a rating within an arm (> 0).
        rho: Correlation of the rating with the (honest) prediction, in [0, 1].
        n_unlabeled: Unlabeled sessions per arm (N >= 0).
        alpha: Level of the two-sided test.
        power: Target power, in (alpha/2, 1).
        design_effect: Users' design effect (>= 1 typical), e.g. ``design_effect(...).deff``.
        labels_per_user: Labels per user, e.g. ``design_effect(...).labels_per_user``.
        sd_pred: Standard deviation of the predictions (default calibrated: ``rho * sd``); a
            smaller one makes the lambda <= 1 cap bind.
        small_sample: Plan for compare_arms' small-sample rules (t quantiles, tuned-lambda
            inflation); ``False`` gives the normal-quantile textbook formula.
        arm_correlation: Correlation of the arms' estimates through users in both arms, in
            [0, 1) (:func:`arm_design`; 0 = users nested in arms).
        shared_users: Share of each arm's labeled users in both arms, in [0, 1] (df only).

    Returns:
        The plan; ``n_ppi == n_naive`` when ``rho == 0`` or ``n_unlabeled == 0``.

    Raises:
        PulseError: If an argument is out of range (including a negative rho).
    """
    problems = effect_sd_rho_problems(effect, sd, rho)
    if -1.0 <= rho < 0:
        problems.append(f"rho = {rho} < 0: PPI++ clips lambda at 0, so a predictor anti-"
                        "correlated with the ratings saves nothing; plan with rho=0 or fix the "
                        "model")
    if n_unlabeled < 0:
        problems.append(f"n_unlabeled must be >= 0, got {n_unlabeled}")
    if not 0.0 < alpha < 1.0:
        problems.append(f"alpha must be in (0, 1), got {alpha}")
    if not alpha / 2.0 < power < 1.0:
        problems.append(f"power must be in (alpha/2, 1), got {power}")
    if not np.isfinite(design_effect) or design_effect <= 0:
        problems.append(f"design_effect must be > 0, got {design_effect}")
    if not np.isfinite(labels_per_user) or labels_per_user < 1:
        problems.append(f"labels_per_user must be >= 1, got {labels_per_user}")
    if sd_pred is not None and not (np.isfinite(sd_pred) and sd_pred > 0):
        problems.append(f"sd_pred must be > 0, got {sd_pred}")
    if not (np.isfinite(arm_correlation) and 0.0 <= arm_correlation < 1.0):
        problems.append(f"arm_correlation must be in [0, 1), got {arm_correlation}")
    if not (np.isfinite(shared_users) and 0.0 <= shared_users <= 1.0):
        problems.append(f"shared_users must be in [0, 1], got {shared_users}")
    if problems:
        raise PulseError("labels_needed: " + "; ".join(problems))
    kw = {"effect": effect, "sd": sd, "alpha": alpha, "design_effect": design_effect,
          "labels_per_user": labels_per_user, "sd_pred": sd_pred, "small_sample": small_sample,
          "arm_correlation": arm_correlation, "shared_users": shared_users}
    # a variance needs two labels; small-sample rules need 2 users (naive), 4 (tuned lambda)
    floor_naive = max(2.0, 2.0 * labels_per_user) if small_sample else 1e-9
    floor_ppi = max(2.0, 4.0 * labels_per_user) if small_sample else 1e-9
    n_naive = _solve(power, floor_naive, **kw)
    n_ppi = n_naive
    if rho != 0 and n_unlabeled > 0:
        n_ppi = min(n_naive, _solve(power, floor_ppi, rho=rho, n_unlabeled=int(n_unlabeled),
                                    **kw))
    naive_int = max(2, math.ceil(n_naive - 1e-9))
    ppi_int = max(2, math.ceil(n_ppi - 1e-9))
    return LabelPlan(
        n_naive=naive_int,
        n_ppi=ppi_int,
        saving=naive_int - ppi_int,
        saving_pct=100.0 * (naive_int - ppi_int) / naive_int,
        n_naive_exact=n_naive,
        n_ppi_exact=n_ppi,
        design_effect=float(design_effect),
        arm_correlation=float(arm_correlation),
    )
