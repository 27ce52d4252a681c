"""The Gaussian-mixture boundary of the asymptotic confidence sequence (Waudby-Smith et al.)."""

from __future__ import annotations

import math

import numpy as np
from numpy.typing import ArrayLike, NDArray

from pulse_ml.errors import PulseError
from pulse_ml.stats.ppi import z_two_sided

F64 = NDArray[np.float64]


def _mixture_c(alpha: float) -> float:
    z_two_sided(alpha)  # validates alpha
    two_log = 2.0 * math.log(1.0 / alpha)
    return two_log + math.log(1.0 + two_log)


def mixture_rho(t_star: float, alpha: float = 0.05) -> float:
    """Mixture parameter that makes the Gaussian-mixture boundary tightest near ``t_star``.

    ``rho = sqrt((-2 log alpha + log(1 - 2 log alpha)) / t_star)`` (Waudby-Smith et al. 2024,
    Sec. 2.4, the closed-form approximation of the exact Lambert-W optimum).

    Args:
        t_star: Target effective sample size (> 0).
        alpha: Error level of the sequence, in (0, 1).

    Returns:
        rho > 0.

    Raises:
        PulseError: If ``t_star`` is not positive.
    """
    if not np.isfinite(t_star) or t_star <= 0:
        raise PulseError(f"the target sample size must be > 0, got {t_star}")
    return math.sqrt(_mixture_c(alpha) / t_star)


def cs_multiplier(t: ArrayLike, t_star: float, alpha: float = 0.05) -> F64:
    """Half-width of the asymptotic confidence sequence in units of the standard error.

    ``m(t) = sqrt(2 (t rho^2 + 1)/(t rho^2) log(sqrt(t rho^2 + 1)/alpha))`` with
    ``rho = mixture_rho(t_star, alpha)``, so that the sequence is ``effect -/+ m(t) se_t``
    (``se_t^2 = sigma_hat_t^2 / t``). ``t <= 0`` gives NaN.

    Args:
        t: Effective sample sizes (scalar or array).
        t_star: Target effective sample size at which the boundary is tightest.
        alpha: Error level (two-sided, uniformly over time).

    Returns:
        Multipliers, same shape as ``t`` (always > ``z_{1-alpha/2}``).

    Notes:
        Waudby-Smith et al. (2024), Theorem 2.2, with ``sigma_hat_t = sqrt(t) se_t``.
    """
    rho2 = mixture_rho(t_star, alpha) ** 2
    tr = np.asarray(t, dtype=np.float64) * rho2
    with np.errstate(divide="ignore", invalid="ignore"):
        out = np.sqrt(2.0 * (tr + 1.0) / tr * np.log(np.sqrt(tr + 1.0) / alpha))
    return np.where(tr > 0, out, np.nan)
