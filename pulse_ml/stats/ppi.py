"""Prediction-powered inference (PPI / PPI++) for one mean — pure, vectorized numpy.

The functions reproduce ``ppi_py`` 0.2.3 (``classical_mean_ci``, ``ppi_mean_pointestimate``,
``ppi_mean_ci``; two-sided intervals) to floating-point precision, including its optional sample
weights, but without importing it (importing ``ppi_py`` silences every warning process-wide).

For n labeled points (Y_i, f_i = Yhat_i) and N unlabeled predictions f~_j = Yhat_unlabeled_j:

* PPI++ estimate: ``mu(lam) = mean(w~ * lam * f~) + mean(w * (Y - lam * f))``
  (weights default to 1 and are normalized to sum to their sample size).
* Standard error: ``se^2 = Var0(w * (Y - lam f)) / n + Var0(w~ * lam f~) / N`` (ddof = 0).
* Power tuning (``lam=None``): ``lam = Cov0(g, g_hat) / ((1 + n/N) * Var1(pooled g_hat))``
  with the "gradients" ``g = w (Y - theta)``, ``g_hat = w (f - theta)`` and
  ``g~_hat = w~ (f~ - theta)`` evaluated at the plain-PPI estimate ``theta = mu(1)``; the
  result is clipped to [0, 1]. ``lam = 1`` is plain PPI, ``lam = 0`` the classical mean.

References:
    A. N. Angelopoulos, S. Bates, C. Fannjiang, M. I. Jordan, T. Zrnic. Prediction-powered
    inference. Science 382(6671), 2023.
    A. N. Angelopoulos, J. C. Duchi, T. Zrnic. PPI++: Efficient prediction-powered inference.
    arXiv:2311.01453, 2023.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike, NDArray
from scipy.special import ndtri

from pulse_ml.errors import PulseError

__all__ = [
    "PPIMean",
    "as_vector",
    "classical_mean_ci",
    "normalize_weights",
    "ppi_mean",
    "ppi_mean_ci",
    "ppi_mean_pointestimate",
    "ppi_power_tuned_lambda",
    "z_two_sided",
]


@dataclass(frozen=True)
class PPIMean:
    """A PPI++ mean estimate of one sample.

    Attributes:
        estimate: Point estimate ``mu(lam)``.
        se: Standard error (Wald, ddof = 0 variances as in ppi_py).
        lam: The lambda used (power-tuned and clipped when it was not given).
        n: Number of labeled points.
        n_unlabeled: Number of unlabeled predictions.
    """

    estimate: float
    se: float
    lam: float
    n: int
    n_unlabeled: int


def as_vector(x: ArrayLike, name: str, min_size: int = 1) -> NDArray[np.float64]:
    """Return ``x`` as a finite 1-D float array.

    Args:
        x: Array-like input; a column vector of shape (n, 1) is accepted and flattened.
        name: Argument name used in error messages.
        min_size: Smallest allowed length.

    Returns:
        The values as a contiguous float64 vector.

    Raises:
        ValueError: If ``x`` is not one-dimensional.
        PulseError: If it has fewer than ``min_size`` values or contains NaN/inf.
    """
    arr = np.asarray(x, dtype=np.float64)
    if arr.ndim == 2 and arr.shape[1] == 1:
        arr = arr[:, 0]
    if arr.ndim != 1:
        raise ValueError(f"{name} must be one-dimensional, got shape {arr.shape}")
    if arr.size < min_size:
        raise PulseError(f"{name}: need at least {min_size} value(s), got {arr.size}")
    if not np.logical_and.reduce(np.isfinite(arr)):  # = .all(), no wrapper
        bad = np.flatnonzero(~np.isfinite(arr))[:5].tolist()
        raise PulseError(f"{name}: contains NaN or infinite values (positions {bad}, ...)")
    return arr


def normalize_weights(w: ArrayLike | None, size: int, name: str) -> NDArray[np.float64] | None:
    """Normalize sample weights to sum to ``size`` (as ppi_py does); ``None`` stays ``None``.

    Args:
        w: Non-negative weights or ``None`` (all ones).
        size: Length of the sample the weights belong to.
        name: Argument name used in error messages.

    Returns:
        ``w / sum(w) * size`` or ``None``.

    Raises:
        ValueError: If the length does not match ``size``.
        PulseError: If a weight is negative or all are zero.
    """
    if w is None:
        return None
    arr = as_vector(w, name)
    if arr.size != size:
        raise ValueError(f"{name} has {arr.size} values but its sample has {size}")
    if np.logical_or.reduce(arr < 0) or np.add.reduce(arr) <= 0:
        raise PulseError(f"{name}: weights must be non-negative with a positive sum")
    return arr / arr.sum() * size


def z_two_sided(alpha: float) -> float:
    """Return the normal quantile ``z_{1 - alpha/2}`` of a two-sided level-``alpha`` interval.

    Raises:
        ValueError: If ``alpha`` is not in (0, 1).
    """
    if not 0.0 < alpha < 1.0:
        raise ValueError(f"alpha must be in (0, 1), got {alpha}")
    return float(ndtri(1.0 - alpha / 2.0))  # norm.ppf without importing scipy.stats


def _weighted(x: NDArray[np.float64], w: NDArray[np.float64] | None) -> NDArray[np.float64]:
    return x if w is None else w * x


def _check_inputs(
    Y: ArrayLike, Yhat: ArrayLike, Yhat_unlabeled: ArrayLike
) -> tuple[NDArray[np.float64], NDArray[np.float64], NDArray[np.float64]]:
    y = as_vector(Y, "Y", min_size=2)
    f = as_vector(Yhat, "Yhat", min_size=2)
    fu = as_vector(Yhat_unlabeled, "Yhat_unlabeled", min_size=1)
    if y.size != f.size:
        raise ValueError(f"Y has {y.size} values but Yhat has {f.size}")
    return y, f, fu


def ppi_power_tuned_lambda(
    Y: ArrayLike,
    Yhat: ArrayLike,
    Yhat_unlabeled: ArrayLike,
    w: ArrayLike | None = None,
    w_unlabeled: ArrayLike | None = None,
) -> float:
    """Power-tuned PPI++ lambda for the mean, clipped to [0, 1] (as ``ppi_py`` with ``lam=None``).

    ``lam = Cov0(g, g_hat) / ((1 + n/N) * Var1([g_hat, g~_hat]))`` with ``g = w (Y - theta)``,
    ``g_hat = w (Yhat - theta)``, ``g~_hat = w~ (Yhat_unlabeled - theta)`` and ``theta`` the
    plain-PPI (lam = 1) estimate. Without weights this is ``Cov(Y, f) / ((1 + n/N) Var(f_all))``.
    A degenerate case (all predictions equal) returns 0, the classical estimate.

    Args:
        Y: Labels, shape (n,).
        Yhat: Predictions for the labeled points, shape (n,).
        Yhat_unlabeled: Predictions for the unlabeled points, shape (N,).
        w: Optional labeled sample weights.
        w_unlabeled: Optional unlabeled sample weights.

    Returns:
        Lambda in [0, 1].
    """
    y, f, fu = _check_inputs(Y, Yhat, Yhat_unlabeled)
    wl = normalize_weights(w, y.size, "w")
    wu = normalize_weights(w_unlabeled, fu.size, "w_unlabeled")
    return _tuned_lambda(y, f, fu, wl, wu)


def _tuned_lambda(
    y: NDArray[np.float64],
    f: NDArray[np.float64],
    fu: NDArray[np.float64],
    wl: NDArray[np.float64] | None,
    wu: NDArray[np.float64] | None,
) -> float:
    n, big_n = y.size, fu.size
    theta = _weighted(fu, wu).mean() + _weighted(y - f, wl).mean()
    g = _weighted(y - theta, wl)
    g_hat = _weighted(f - theta, wl)
    g_hat_unl = _weighted(fu - theta, wu)
    cov = np.mean((g - g.mean()) * (g_hat - g_hat.mean()))
    pooled_mean = (g_hat.sum() + g_hat_unl.sum()) / (n + big_n)
    ss = np.sum((g_hat - pooled_mean) ** 2) + np.sum((g_hat_unl - pooled_mean) ** 2)
    var_pooled = ss / (n + big_n - 1)
    if not var_pooled > 0.0:
        return 0.0
    lam = cov / ((1.0 + n / big_n) * var_pooled)
    return float(np.clip(lam, 0.0, 1.0))


def ppi_mean(
    Y: ArrayLike,
    Yhat: ArrayLike,
    Yhat_unlabeled: ArrayLike,
    lam: float | None = None,
    w: ArrayLike | None = None,
    w_unlabeled: ArrayLike | None = None,
) -> PPIMean:
    """PPI++ point estimate, standard error and lambda of a mean in one pass.

    Args:
        Y: Labels, shape (n,), n >= 2.
        Yhat: Predictions for the labeled points, shape (n,).
        Yhat_unlabeled: Predictions for the unlabeled points, shape (N,), N >= 1.
        lam: Lambda; ``None`` = power tuning (clipped to [0, 1]), 1 = PPI, 0 = classical.
        w: Optional labeled sample weights (shift-aware variant; normalized to sum to n).
        w_unlabeled: Optional unlabeled sample weights (normalized to sum to N).

    Returns:
        The estimate with ``se^2 = Var0(w (Y - lam f))/n + Var0(w~ lam f~)/N``.
    """
    y, f, fu = _check_inputs(Y, Yhat, Yhat_unlabeled)
    wl = normalize_weights(w, y.size, "w")
    wu = normalize_weights(w_unlabeled, fu.size, "w_unlabeled")
    lam_used = _tuned_lambda(y, f, fu, wl, wu) if lam is None else float(lam)
    rect = _weighted(y - lam_used * f, wl)
    imputed = _weighted(fu, wu)
    estimate = lam_used * imputed.mean() + rect.mean()
    var = rect.var() / y.size + (lam_used**2) * imputed.var() / fu.size
    return PPIMean(float(estimate), float(np.sqrt(var)), lam_used, int(y.size), int(fu.size))


def ppi_mean_pointestimate(
    Y: ArrayLike,
    Yhat: ArrayLike,
    Yhat_unlabeled: ArrayLike,
    lam: float | None = None,
    w: ArrayLike | None = None,
    w_unlabeled: ArrayLike | None = None,
) -> float:
    """PPI++ point estimate of a mean (equals ``ppi_py.ppi_mean_pointestimate``).

    Args:
        Y: Labels, shape (n,).
        Yhat: Predictions for the labeled points, shape (n,).
        Yhat_unlabeled: Predictions for the unlabeled points, shape (N,).
        lam: Lambda; ``None`` = power tuning (clipped to [0, 1]).
        w: Optional labeled sample weights.
        w_unlabeled: Optional unlabeled sample weights.

    Returns:
        ``mean(w~ lam f~) + mean(w (Y - lam f))``.
    """
    return ppi_mean(Y, Yhat, Yhat_unlabeled, lam=lam, w=w, w_unlabeled=w_unlabeled).estimate


def ppi_mean_ci(
    Y: ArrayLike,
    Yhat: ArrayLike,
    Yhat_unlabeled: ArrayLike,
    alpha: float = 0.05,
    lam: float | None = None,
    w: ArrayLike | None = None,
    w_unlabeled: ArrayLike | None = None,
) -> tuple[float, float]:
    """Two-sided PPI++ Wald interval for a mean (equals ``ppi_py.ppi_mean_ci``).

    Note ppi_py's default ``alpha`` is 0.1; pulse_ml's is 0.05.

    Args:
        Y: Labels, shape (n,).
        Yhat: Predictions for the labeled points, shape (n,).
        Yhat_unlabeled: Predictions for the unlabeled points, shape (N,).
        alpha: Error level; the interval targets coverage 1 - alpha.
        lam: Lambda; ``None`` = power tuning (clipped to [0, 1]).
        w: Optional labeled sample weights.
        w_unlabeled: Optional unlabeled sample weights.

    Returns:
        ``(estimate - z se, estimate + z se)`` with ``z = z_{1 - alpha/2}``.
    """
    z = z_two_sided(alpha)
    res = ppi_mean(Y, Yhat, Yhat_unlabeled, lam=lam, w=w, w_unlabeled=w_unlabeled)
    return res.estimate - z * res.se, res.estimate + z * res.se


def classical_mean_ci(
    Y: ArrayLike, alpha: float = 0.05, w: ArrayLike | None = None
) -> tuple[float, float]:
    """Two-sided CLT interval for a mean (equals ``ppi_py.classical_mean_ci``).

    Args:
        Y: Observations, shape (n,), n >= 2.
        alpha: Error level; the interval targets coverage 1 - alpha.
        w: Optional sample weights (normalized to sum to n).

    Returns:
        ``mean(w Y) -/+ z_{1-alpha/2} * std0(w Y) / sqrt(n)``.
    """
    z = z_two_sided(alpha)
    y = as_vector(Y, "Y", min_size=2)
    wy = _weighted(y, normalize_weights(w, y.size, "w"))
    mean, se = wy.mean(), wy.std() / np.sqrt(y.size)
    return float(mean - z * se), float(mean + z * se)
