"""Is one predictor really better than another on the same sessions? Paired, user-resampled.

Two predictors scored on the same labeled sessions (their out-of-fold predictions) differ in MSE
and Pearson r by an amount that is partly the data's noise. :func:`paired_bootstrap` gives the
difference (new - reference) with a percentile interval from a bootstrap that resamples *users*
(every session of a drawn user comes along), because sessions of one user share a rating style
and are not independent. The resampling is vectorized: each resample is a vector of multinomial
counts per user, and every statistic is a ratio of count-weighted per-user sums, so ``n_boot``
resamples cost one ``(n_boot, users) @ (users, k)`` product instead of ``n_boot`` rebuilt
tables.

:func:`expected_ci_reduction` says what a predictor buys: the best relative narrowing of a
PPI++ interval with honest predictions of correlation r, ``1 - sqrt(1 - r^2 N / (n + N))``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike, NDArray

__all__ = [
    "PairedBatch",
    "PairedComparison",
    "expected_ci_reduction",
    "expected_ci_reduction_at_ratio",
    "paired_bootstrap",
    "paired_bootstrap_many",
]

# Per-group sums: count, y, y^2, then for each predictor p: p, p^2, y*p, (p-y)^2, |p-y|.
_N, _Y, _YY = 0, 1, 2
_NEW, _REF = 3, 8  # offsets of the two predictors' 5 sums
_MAX_CELLS = 4_000_000  # resamples x groups per block (bounds memory for many users)


@dataclass(frozen=True)
class PairedComparison:
    """Difference between two predictors on the same sessions (new - reference).

    Attributes:
        n_sessions: Sessions compared.
        n_groups: Resampling units (users; sessions when no groups were given).
        mse_new, mse_ref: Mean squared error of each predictor.
        delta_mse: ``mse_new - mse_ref`` (negative = the new predictor is better).
        mse_ci_lower, mse_ci_upper: Percentile bootstrap interval of ``delta_mse``.
        mae_new, mae_ref, delta_mae, mae_ci_lower, mae_ci_upper: The same for the MAE.
        r_new, r_ref: Pearson r of each predictor with the ratings (0 for a constant one).
        delta_r: ``r_new - r_ref`` (positive = the new predictor is better).
        r_ci_lower, r_ci_upper: Percentile bootstrap interval of ``delta_r``.
        alpha: Error level of the two-sided intervals.
        n_boot: Resamples drawn.
        seed: Seed of the resampling.
    """

    n_sessions: int
    n_groups: int
    mse_new: float
    mse_ref: float
    delta_mse: float
    mse_ci_lower: float
    mse_ci_upper: float
    mae_new: float
    mae_ref: float
    delta_mae: float
    mae_ci_lower: float
    mae_ci_upper: float
    r_new: float
    r_ref: float
    delta_r: float
    r_ci_lower: float
    r_ci_upper: float
    alpha: float
    n_boot: int
    seed: int

    def as_dict(self) -> dict[str, float]:
        """Flat ``name -> number`` mapping (metric and tag names of the registry)."""
        return {k: float(v) for k, v in self.__dict__.items()}


@dataclass(frozen=True)
class PairedBatch:
    """:func:`paired_bootstrap_many` results: each field an array over the R data sets.

    Attributes:
        delta_mse, mse_ci_lower, mse_ci_upper: Difference in MSE and its interval, shape (R,).
        delta_mae, mae_ci_lower, mae_ci_upper: Difference in MAE and its interval, shape (R,).
        delta_r, r_ci_lower, r_ci_upper: Difference in Pearson r and its interval, shape (R,).
        mse_new, mse_ref, mae_new, mae_ref, r_new, r_ref: Each predictor's value, shape (R,).
    """

    delta_mse: NDArray[np.float64]
    mse_ci_lower: NDArray[np.float64]
    mse_ci_upper: NDArray[np.float64]
    delta_mae: NDArray[np.float64]
    mae_ci_lower: NDArray[np.float64]
    mae_ci_upper: NDArray[np.float64]
    delta_r: NDArray[np.float64]
    r_ci_lower: NDArray[np.float64]
    r_ci_upper: NDArray[np.float64]
    mse_new: NDArray[np.float64]
    mse_ref: NDArray[np.float64]
    mae_new: NDArray[np.float64]
    mae_ref: NDArray[np.float64]
    r_new: NDArray[np.float64]
    r_ref: NDArray[np.float64]


def _as_matrix(x: ArrayLike, name: str) -> NDArray[np.float64]:
    arr = np.asarray(x, dtype=float)
    if arr.ndim == 1:
        arr = arr[None, :]
    if arr.ndim != 2:
        raise ValueError(f"{name} must be a vector (n,) or a matrix (R, n), got shape {arr.shape}")
    if not np.isfinite(arr).all():
        raise ValueError(f"{name} has missing or infinite values")
    return arr


def _group_sums(y: NDArray[np.float64], new: NDArray[np.float64], ref: NDArray[np.float64],
                order: NDArray[np.intp], starts: NDArray[np.intp]) -> NDArray[np.float64]:
    """Per-group sufficient statistics, shape (R, G, 13).

    Ratings and predictions are centred on the overall rating mean first, so second moments
    do not lose digits to a large common offset (Pearson r and errors are shift-invariant).
    """
    centre = y.mean(axis=1, keepdims=True)
    yc, a, b = y - centre, new - centre, ref - centre
    cols = [np.ones_like(yc), yc, yc * yc]
    for p in (a, b):
        err = p - yc
        cols += [p, p * p, yc * p, err * err, np.abs(err)]
    stacked = np.stack(cols, axis=-1)[:, order, :]  # (R, n, 13) sorted by group
    return np.add.reduceat(stacked, starts, axis=1)


def _stats(t: NDArray[np.float64]) -> dict[str, NDArray[np.float64]]:
    """MSE, MAE and Pearson r of both predictors from (count-weighted) sums ``t[..., 13]``."""
    n = t[..., _N]
    my, myy = t[..., _Y] / n, t[..., _YY] / n
    vy = np.maximum(myy - my * my, 0.0)
    out = {}
    for label, o in (("new", _NEW), ("ref", _REF)):
        mp, mpp, myp = t[..., o] / n, t[..., o + 1] / n, t[..., o + 2] / n
        vp = np.maximum(mpp - mp * mp, 0.0)
        cov = myp - my * mp
        den = np.sqrt(vy * vp)
        tiny = 1e-12 * np.maximum(1.0, np.sqrt(myy * mpp))
        with np.errstate(invalid="ignore", divide="ignore"):
            r = np.where(den > tiny, cov / np.where(den > 0, den, 1.0), 0.0)
        out[f"r_{label}"] = np.clip(r, -1.0, 1.0)
        out[f"mse_{label}"] = t[..., o + 3] / n
        out[f"mae_{label}"] = t[..., o + 4] / n
    return out


def _blocks(n_sets: int, n_boot: int, n_groups: int) -> list[tuple[slice, slice]]:
    """(data sets, resamples) blocks of at most ``_MAX_CELLS`` counts, in row-major order."""
    if n_boot * n_groups <= _MAX_CELLS:
        step = max(1, _MAX_CELLS // (n_boot * n_groups))
        return [(slice(r, min(r + step, n_sets)), slice(0, n_boot))
                for r in range(0, n_sets, step)]
    step = max(1, _MAX_CELLS // n_groups)
    return [(slice(r, r + 1), slice(b, min(b + step, n_boot)))
            for r in range(n_sets) for b in range(0, n_boot, step)]


def paired_bootstrap_many(
    y: ArrayLike,
    pred_new: ArrayLike,
    pred_ref: ArrayLike,
    groups: ArrayLike | None = None,
    n_boot: int = 2000,
    alpha: float = 0.05,
    seed: int = 0,
) -> PairedBatch:
    """:func:`paired_bootstrap` for R data sets at once (rows of ``y``), one shared grouping.

    Each data set gets its own resamples: resample b of data set r is the users
    ``drawn[r, b, :]`` of ``drawn = rng.integers(0, G, size=(R, n_boot, G))`` with
    ``rng = np.random.default_rng(seed)`` and users numbered in sorted order of ``groups`` (G
    users drawn with replacement; a user drawn twice brings their sessions twice).

    Args:
        y: Ratings, shape (R, n) (or (n,) for one data set).
        pred_new: Predictions of the new predictor, same shape.
        pred_ref: Predictions of the reference predictor (e.g. the champion), same shape.
        groups: Resampling unit per session, shape (n,) (user ids); None = each session alone.
        n_boot: Bootstrap resamples.
        alpha: Error level of the two-sided percentile intervals.
        seed: Seed of the resampling.

    Returns:
        A :class:`PairedBatch` of arrays of shape (R,).

    Raises:
        ValueError: mismatched shapes, fewer than 2 groups, missing values, or bad settings.
    """
    yv = _as_matrix(y, "y")
    a = _as_matrix(pred_new, "pred_new")
    b = _as_matrix(pred_ref, "pred_ref")
    if not yv.shape == a.shape == b.shape:
        raise ValueError(f"y, pred_new and pred_ref differ in shape: {yv.shape}, {a.shape}, "
                         f"{b.shape}")
    if not 0 < alpha < 1:
        raise ValueError(f"alpha must be in (0, 1), got {alpha}")
    if n_boot < 1:
        raise ValueError(f"n_boot must be at least 1, got {n_boot}")
    n = yv.shape[1]
    g = np.arange(n) if groups is None else np.asarray(groups)
    if g.shape != (n,):
        raise ValueError(f"groups must have one entry per session ({n}), got shape {g.shape}")
    _, inverse = np.unique(g, return_inverse=True)
    order = np.argsort(inverse, kind="stable")
    sizes = np.bincount(inverse)
    n_groups = sizes.size
    if n_groups < 2:
        raise ValueError("need at least 2 users (resampling units) to bootstrap a difference")
    starts = np.concatenate([[0], np.cumsum(sizes)[:-1]]).astype(np.intp)
    sums = _group_sums(yv, a, b, order, starts)  # (R, G, 13)
    point = _stats(sums.sum(axis=1))
    rng = np.random.default_rng(seed)
    boot = {k: np.empty((yv.shape[0], n_boot)) for k in point}
    for rows, cols in _blocks(yv.shape[0], n_boot, n_groups):
        # Blocks follow the row-major order of one (R, n_boot) draw: same stream, same counts.
        shape = (rows.stop - rows.start, cols.stop - cols.start)
        drawn = rng.integers(0, n_groups, size=(*shape, n_groups))
        offset = np.arange(shape[0] * shape[1]).reshape(*shape, 1) * n_groups
        counts = np.bincount((drawn + offset).ravel(), minlength=shape[0] * shape[1] * n_groups)
        # every resample draws G users, each with >= 1 session: the weighted count is never 0
        t = np.matmul(counts.reshape(*shape, n_groups).astype(float), sums[rows])
        for key, value in _stats(t).items():
            boot[key][rows, cols] = value
    q = [alpha / 2, 1 - alpha / 2]
    out: dict[str, NDArray[np.float64]] = {}
    for m in ("mse", "mae", "r"):
        diff = boot[f"{m}_new"] - boot[f"{m}_ref"]
        lo_q, hi_q = np.quantile(diff, q, axis=1)
        out[f"delta_{m}"] = point[f"{m}_new"] - point[f"{m}_ref"]
        out[f"{m}_ci_lower"], out[f"{m}_ci_upper"] = lo_q, hi_q
        out[f"{m}_new"], out[f"{m}_ref"] = point[f"{m}_new"], point[f"{m}_ref"]
    return PairedBatch(**out)


def paired_bootstrap(
    y: ArrayLike,
    pred_new: ArrayLike,
    pred_ref: ArrayLike,
    groups: ArrayLike | None = None,
    n_boot: int = 2000,
    alpha: float = 0.05,
    seed: int = 0,
) -> PairedComparison:
    """Difference in MSE, MAE and Pearson r of two predictors on the same sessions.

    Both predictors must predict the *same* sessions (e.g. the out-of-fold predictions of two
    model versions trained on one data fingerprint, aligned by session id). Resampling users
    keeps the pairing (a drawn session brings both predictions) and the dependence between a
    user's sessions; ``groups=None`` resamples sessions, which is too optimistic when users
    rate several sessions alike.

    Args:
        y: Ratings, shape (n,).
        pred_new: Predictions of the new predictor, shape (n,).
        pred_ref: Predictions of the reference predictor, shape (n,).
        groups: User id per session, shape (n,); None = sessions are independent.
        n_boot: Bootstrap resamples (2000 gives interval ends to about +-0.1 of their sd).
        alpha: Error level of the two-sided percentile intervals (0.05 = 95%).
        seed: Seed of the resampling (same inputs and seed -> same interval).

    Returns:
        The :class:`PairedComparison` (new - reference; negative ``delta_mse`` = new is better).

    Raises:
        ValueError: mismatched lengths, fewer than 2 users, missing values, bad settings.

    Notes:
        The interval is the percentile interval of the cluster (user) bootstrap of the
        difference (Davison & Hinkley 1997, section 3.8; Field & Welsh 2007 for resampling
        clusters). It treats both predictors as fixed functions of the sessions: it measures
        how much the difference would move with other users rated, not how much it would move
        if the models were re-tuned (seed-to-seed variation; see the ablation tables of
        ``pulse-ml compare group_by=seed``), nor the optimism of choosing the best of several
        families on the same data. Its error is about 1/users; with a few dozen users it can be
        a little too narrow. The resamples are drawn as in :func:`paired_bootstrap_many` with
        R = 1.

    References:
        B. Efron, R. Tibshirani. An Introduction to the Bootstrap. Chapman & Hall, 1993.
        A. C. Davison, D. V. Hinkley. Bootstrap Methods and their Application. CUP, 1997.
        C. A. Field, A. H. Welsh. Bootstrapping clustered data. JRSS B 69(3), 2007.
    """
    yv = np.asarray(y, dtype=float)
    if yv.ndim != 1:
        raise ValueError(f"y must be a vector, got shape {yv.shape}")
    batch = paired_bootstrap_many(yv, pred_new, pred_ref, groups, n_boot, alpha, seed)
    n_groups = yv.size if groups is None else int(np.unique(np.asarray(groups)).size)
    values = {k: float(v[0]) for k, v in batch.__dict__.items()}
    return PairedComparison(n_sessions=int(yv.size), n_groups=n_groups, alpha=float(alpha),
                            n_boot=int(n_boot), seed=int(seed), **values)


def expected_ci_reduction_at_ratio(r: float | ArrayLike, unlabeled_per_labeled: float
                                   ) -> float | NDArray[np.float64]:
    """Expected CI reduction ``1 - sqrt(1 - r_+^2 * k / (1 + k))`` at ``k = N / n``.

    Args:
        r: Correlation of honest predictions with the ratings (scalar or array); negative
            values count as 0 (power-tuned PPI++ clips lambda at 0, giving the naive interval).
        unlabeled_per_labeled: ``k = N / n`` unlabeled sessions per labeled one (>= 0).

    Returns:
        The reduction in [0, 1) (0.05 = intervals 5% narrower than the naive ones).

    Raises:
        ValueError: negative ratio.

    Notes:
        With the optimal lambda the PPI++ variance of a mean is
        ``Var(Y)/n * (1 - r^2 N / (n + N))`` (Angelopoulos, Duchi & Zrnic 2023, PPI++, section
        on power tuning), so the width ratio to the naive interval is the square root and the
        reduction one minus it. It is the limit for this predictor: finite-sample lambda
        estimation gives a little less.

    References:
        A. N. Angelopoulos, J. C. Duchi, T. Zrnic. PPI++: Efficient prediction-powered
        inference. arXiv:2311.01453, 2023.
    """
    if np.any(np.asarray(unlabeled_per_labeled) < 0):
        raise ValueError(f"unlabeled_per_labeled must be >= 0, got {unlabeled_per_labeled}")
    k = np.asarray(unlabeled_per_labeled, dtype=float)
    rp = np.clip(np.asarray(r, dtype=float), 0.0, 1.0)
    out = 1.0 - np.sqrt(1.0 - rp * rp * k / (1.0 + k))
    return float(out) if np.ndim(out) == 0 else out


def expected_ci_reduction(r: float | ArrayLike, n_labeled: int, n_unlabeled: int
                          ) -> float | NDArray[np.float64]:
    """Expected CI reduction ``1 - sqrt(1 - r_+^2 N / (n + N))`` for n labeled, N unlabeled.

    Args:
        r: Correlation of honest predictions with the ratings; negative values count as 0.
        n_labeled: Labeled sessions n (> 0).
        n_unlabeled: Unlabeled sessions N (>= 0).

    Returns:
        The reduction in [0, 1); see :func:`expected_ci_reduction_at_ratio`.

    Raises:
        ValueError: n_labeled <= 0 or n_unlabeled < 0.
    """
    if n_labeled <= 0 or n_unlabeled < 0:
        raise ValueError(f"need n_labeled > 0 and n_unlabeled >= 0, got {n_labeled}, "
                         f"{n_unlabeled}")
    return expected_ci_reduction_at_ratio(r, n_unlabeled / n_labeled)
