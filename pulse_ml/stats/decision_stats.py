"""The statistics behind a ship decision: SRM, rate and guardrail differences, NI, Holm.

Pure functions on arrays (numpy/scipy only):

* :func:`srm_test`: Pearson chi-square of the sessions per arm against the planned split.
* :func:`cluster_mean_diff`: treatment - control difference of means (or relative change
  ``mean_t / mean_c - 1``, delta method) of a fully observed session metric, with a
  cluster-robust (by user) standard error; a user seen in both arms adds the covariance term.
  The same function gives the rating-rate check (the metric is "rated", 0/1).
* :func:`one_sided_p`: p-value of ``H0: effect <= bound`` (or ``>=``), the non-inferiority
  (bound = -margin) and superiority (bound = 0) tests.
* :func:`holm`: Holm's step-down adjustment and the per-hypothesis levels that make each
  interval agree with its decision.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike
from scipy import stats

SRM_ALPHA = 0.001  # the SRM check's level: industry practice (Fabijan et al., KDD 2019)


@dataclass(frozen=True)
class SrmResult:
    """Sample-ratio check of one experiment.

    Attributes:
        counts: Sessions per arm.
        expected_shares: Planned share per arm.
        chi2: Pearson chi-square statistic.
        p_value: Its p-value (``k - 1`` degrees of freedom).
        flagged: ``p_value < alpha``: the split is not what was planned.
    """

    counts: tuple[int, ...]
    expected_shares: tuple[float, ...]
    chi2: float
    p_value: float
    flagged: bool


def srm_test(counts: ArrayLike, shares: ArrayLike | None = None,
             alpha: float = SRM_ALPHA) -> SrmResult:
    """Chi-square goodness of fit of the sessions per arm against the planned shares.

    Args:
        counts: Sessions per arm (k >= 2).
        shares: Planned shares (sum 1); ``None`` = equal shares.
        alpha: Level below which the experiment is flagged.
    """
    n = np.asarray(counts, dtype=float)
    k = n.size
    p = np.full(k, 1.0 / k) if shares is None else np.asarray(shares, dtype=float)
    p = p / p.sum()
    chi2, pval = srm_statistics(n[None, :], p)
    chi2, pval = float(chi2[0]), float(pval[0])
    return SrmResult(tuple(int(c) for c in n), tuple(float(s) for s in p), chi2, pval,
                     bool(pval < alpha))


def srm_statistics(counts: ArrayLike, shares: ArrayLike) -> tuple[np.ndarray, np.ndarray]:
    """Chi-square statistics and p-values of many experiments at once.

    Args:
        counts: ``(r, k)`` units per arm of r experiments.
        shares: ``(k,)`` planned shares (sum 1).

    Returns:
        ``(chi2, p_value)``, each ``(r,)``; an experiment without units has p = 1.
    """
    n = np.asarray(counts, dtype=float)
    p = np.asarray(shares, dtype=float)
    expected = n.sum(axis=1, keepdims=True) * p[None, :]
    with np.errstate(divide="ignore", invalid="ignore"):
        chi2 = np.where(expected > 0, (n - expected) ** 2 / expected, 0.0).sum(axis=1)
    pval = np.where(n.sum(axis=1) > 0, stats.chi2.sf(chi2, n.shape[1] - 1), 1.0)
    return chi2, pval


@dataclass(frozen=True)
class Difference:
    """A difference of two arms' means of a session metric.

    Attributes:
        mean_control: Control mean.
        mean_treatment: Treatment mean.
        effect: ``mean_t - mean_c`` (absolute) or ``mean_t / mean_c - 1`` (relative).
        se: Cluster-robust standard error of ``effect``.
        relative: Whether ``effect`` is a relative change.
        n_control: Sessions with a value in the control arm.
        n_treatment: Same, treatment arm.
    """

    mean_control: float
    mean_treatment: float
    effect: float
    se: float
    relative: bool
    n_control: int
    n_treatment: int

    def interval(self, alpha: float) -> tuple[float, float]:
        """Two-sided ``1 - alpha`` interval (normal quantile)."""
        q = float(stats.norm.ppf(1 - alpha / 2))
        return self.effect - q * self.se, self.effect + q * self.se

    def p_value(self) -> float:
        """Two-sided p-value of no difference."""
        if not self.se > 0:
            return 1.0 if self.effect == 0 else 0.0
        return float(2 * stats.norm.sf(abs(self.effect) / self.se))


def cluster_mean_diff(x_c: ArrayLike, users_c: ArrayLike | None, x_t: ArrayLike,
                      users_t: ArrayLike | None, relative: bool = False) -> Difference:
    """Treatment - control difference of means with a cluster-robust (CR1) standard error.

    Each session's influence on its arm's mean is ``(x - mean) / n``; the effect's influence
    per user is the treatment sum minus the control sum (a user in both arms contributes
    both), and ``var = G / (G - 1) * sum_g psi_g^2`` over the G users. Relative: the delta
    method on ``mean_t / mean_c - 1``.

    Args:
        x_c: Control values (no NaN).
        users_c: Control user codes (integers, one id space with ``users_t``); ``None`` = one
            user per session.
        x_t: Treatment values.
        users_t: Treatment user codes.
        relative: Report ``mean_t / mean_c - 1`` instead of ``mean_t - mean_c``.
    """
    xc, xt = np.asarray(x_c, dtype=float), np.asarray(x_t, dtype=float)
    nc, nt = xc.size, xt.size
    if nc == 0 or nt == 0:
        raise ValueError("both arms need at least one value")
    mc, mt = float(xc.mean()), float(xt.mean())
    if users_c is None or users_t is None:
        gc = np.arange(nc)
        gt = np.arange(nc, nc + nt)
    else:
        gc, gt = np.asarray(users_c), np.asarray(users_t)
    codes, inv = np.unique(np.concatenate([gc, gt]), return_inverse=True)
    g = codes.size
    psi_c = np.bincount(inv[:nc], weights=(xc - mc) / nc, minlength=g)
    psi_t = np.bincount(inv[nc:], weights=(xt - mt) / nt, minlength=g)
    if relative:
        if mc == 0:
            raise ValueError("relative change of a metric whose control mean is 0")
        psi = psi_t / mc - (mt / mc ** 2) * psi_c
        effect = mt / mc - 1.0
    else:
        psi = psi_t - psi_c
        effect = mt - mc
    factor = g / (g - 1) if g > 1 else float("nan")
    se = float(np.sqrt(factor * np.sum(psi ** 2)))
    return Difference(mc, mt, float(effect), se, relative, nc, nt)


def one_sided_p(effect: float, se: float, bound: float, greater: bool = True) -> float:
    """p-value of ``H0: effect <= bound`` (``greater``) or ``H0: effect >= bound``."""
    if not se > 0:
        return 0.0 if (effect > bound if greater else effect < bound) else 1.0
    z = (effect - bound) / se
    return float(stats.norm.sf(z if greater else -z))


def holm(p_values: ArrayLike, alpha: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Holm's step-down procedure over k hypotheses.

    Args:
        p_values: One p-value per hypothesis.
        alpha: Family-wise error level.

    Returns:
        ``(adjusted_p, rejected, levels)``: Holm-adjusted p-values, the rejections at
        ``alpha``, and per hypothesis the level of an interval consistent with its decision:
        ``alpha / (k - r + 1)`` where ``r`` is its rank, or the rank of the first hypothesis not
        rejected when that comes earlier (so an interval excludes the null bound exactly when
        the hypothesis is rejected).
    """
    p = np.asarray(p_values, dtype=float)
    k = p.size
    order = np.argsort(p, kind="stable")
    steps = (k - np.arange(k)) * p[order]
    adjusted_sorted = np.minimum(np.maximum.accumulate(steps), 1.0)
    adjusted = np.empty(k)
    adjusted[order] = adjusted_sorted
    rejected = adjusted <= alpha
    first_kept = int(np.argmax(~rejected[order])) if (~rejected).any() else k
    rank = np.empty(k, dtype=int)
    rank[order] = np.arange(k)
    levels = alpha / (k - np.minimum(rank, first_kept))
    return adjusted, rejected, levels
