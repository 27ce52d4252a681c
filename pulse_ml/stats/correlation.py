"""Pearson correlation across a handful of rows, with a vectorized percentile bootstrap.

Unlike :func:`pulse_ml.training.metrics.pearson` (0.0 for a constant predictor, a metric), this
``pearson`` returns NaN when either side has no variance: with a few benchmark rows a correlation
that does not exist must not read as zero.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike


@dataclass(frozen=True)
class Correlation:
    """Pearson r between Delta_H and Delta_B with a percentile bootstrap interval.

    Attributes:
        r: Pearson correlation of the rows (NaN with fewer than 3 rows or no variance).
        ci_lower: Lower end of the bootstrap interval.
        ci_upper: Upper end of the bootstrap interval.
        n_points: Rows used.
        n_boot: Resamples drawn.
        n_boot_valid: Resamples with variance in both columns (others have no r).
    """

    r: float
    ci_lower: float
    ci_upper: float
    n_points: int
    n_boot: int
    n_boot_valid: int


def pearson(x: ArrayLike, y: ArrayLike) -> float:
    """Pearson correlation of two equal-length vectors (NaN if either has no variance)."""
    r = _pearson_rows(np.asarray(x, float)[None, :], np.asarray(y, float)[None, :])
    return float(r[0])


def _pearson_rows(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Row-wise Pearson r of two (B, k) arrays; NaN where a row has no variance."""
    xc = x - x.mean(axis=1, keepdims=True)
    yc = y - y.mean(axis=1, keepdims=True)
    sxx = np.einsum("ij,ij->i", xc, xc)
    syy = np.einsum("ij,ij->i", yc, yc)
    sxy = np.einsum("ij,ij->i", xc, yc)
    den = np.sqrt(sxx * syy)
    tiny = 1e-12 * np.maximum(1.0, np.sqrt(np.einsum("ij,ij->i", x, x) * np.einsum(
        "ij,ij->i", y, y)))
    with np.errstate(invalid="ignore", divide="ignore"):
        r = np.where(den > tiny, sxy / np.where(den > 0, den, 1.0), np.nan)
    return np.clip(r, -1.0, 1.0)


def pearson_bootstrap(x: ArrayLike, y: ArrayLike, n_boot: int = 10_000, alpha: float = 0.05,
                      seed: int = 0) -> Correlation:
    """Pearson r with a percentile bootstrap interval over the (x, y) pairs.

    All ``n_boot`` resamples are drawn at once (a ``(n_boot, k)`` index array); resamples in
    which x or y has no variance (e.g. one row drawn k times) have no r and are left out
    (``n_boot_valid`` says how many remain).

    Args:
        x: Delta_H per row, shape (k,).
        y: Delta_B per row, shape (k,).
        n_boot: Number of resamples.
        alpha: Error level of the two-sided interval.
        seed: Seed of the resampling (same seed -> same interval).

    Returns:
        The :class:`Correlation`; NaNs when fewer than 3 rows.
    """
    xv, yv = np.asarray(x, float), np.asarray(y, float)
    if xv.shape != yv.shape or xv.ndim != 1:
        raise ValueError(f"x and y must be vectors of equal length, got {xv.shape}, {yv.shape}")
    k = xv.size
    if k < 3:
        return Correlation(math.nan, math.nan, math.nan, k, 0, 0)
    r = pearson(xv, yv)
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, k, size=(n_boot, k))
    rs = _pearson_rows(xv[idx], yv[idx])
    rs = rs[np.isfinite(rs)]
    if rs.size == 0:
        return Correlation(r, math.nan, math.nan, k, n_boot, 0)
    lo, hi = np.quantile(rs, [alpha / 2, 1 - alpha / 2])
    return Correlation(r, float(lo), float(hi), k, n_boot, int(rs.size))


