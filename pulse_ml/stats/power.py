"""Label planner: how many ratings per arm an effect needs, naive and with PPI.

Two arms, two-sided level-alpha Wald test of the effect ``delta``. With per-arm variance ``v(n)``
of an arm's estimate the test statistic has standard error ``s(n) = sqrt(2 v(n))`` and power

    P(n) = Phi(|delta|/s(n) - z_{1-alpha/2}) + Phi(-|delta|/s(n) - z_{1-alpha/2}).

Naive: ``v(n) = sd^2 / n`` (textbook ``n ~ 2 (z_{1-alpha/2} + z_power)^2 sd^2 / delta^2``).
PPI with the optimal lambda and N unlabeled sessions per arm (PPI++, Angelopoulos, Duchi, Zrnic
2023): ``v(n) = sd^2 / n * (1 - rho^2 N / (n + N))`` where rho is the correlation of the rating
with the honest prediction. ``P(n) = power`` is solved exactly for a real n (brentq; P is
increasing in n) and rounded up (at least 2 labels per arm).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy.optimize import brentq
from scipy.stats import norm

from pulse_ml.errors import PulseError

__all__ = ["LabelPlan", "labels_needed"]


@dataclass(frozen=True)
class LabelPlan:
    """Labels per arm for a target power.

    Attributes:
        n_naive: Labels per arm for the difference of labeled means.
        n_ppi: Labels per arm with PPI++ (optimal lambda) and ``n_unlabeled`` predictions.
        saving: ``n_naive - n_ppi`` labels per arm.
        saving_pct: ``100 * saving / n_naive``.
        n_naive_exact: The real-valued solution behind ``n_naive``.
        n_ppi_exact: The real-valued solution behind ``n_ppi``.
    """

    n_naive: int
    n_ppi: int
    saving: int
    saving_pct: float
    n_naive_exact: float
    n_ppi_exact: float


def _power(n: float, effect: float, sd: float, rho: float, n_unl: int, z_a: float) -> float:
    factor = 1.0 - rho**2 * n_unl / (n + n_unl) if n_unl > 0 else 1.0
    se = math.sqrt(2.0 * sd**2 / n * factor)
    shift = abs(effect) / se
    return float(norm.cdf(shift - z_a) + norm.cdf(-shift - z_a))


def _solve(effect: float, sd: float, rho: float, n_unl: int, z_a: float, power: float) -> float:
    def gap(n: float) -> float:
        return _power(n, effect, sd, rho, n_unl, z_a) - power

    lo, hi = 1e-9, 1.0
    while gap(hi) < 0.0:
        lo, hi = hi, hi * 2.0
        if hi > 1e15:
            raise PulseError("labels_needed: the effect is too small to reach the power")
    if gap(lo) >= 0.0:
        return lo
    return float(brentq(gap, lo, hi, xtol=1e-10, rtol=1e-14))


def labels_needed(
    effect: float,
    sd: float,
    rho: float = 0.0,
    n_unlabeled: int = 0,
    alpha: float = 0.05,
    power: float = 0.8,
) -> LabelPlan:
    """Labels per arm to detect ``effect`` with the given power, without and with PPI.

    Args:
        effect: Effect size on the rating scale (treatment - control), non-zero.
        sd: Standard deviation of a rating within an arm (> 0).
        rho: Correlation of the rating with the (honest) prediction, in [-1, 1].
        n_unlabeled: Unlabeled sessions per arm (N >= 0).
        alpha: Level of the two-sided test.
        power: Target power, in (alpha/2, 1).

    Returns:
        The plan; ``n_ppi == n_naive`` when ``rho == 0`` or ``n_unlabeled == 0``.

    Raises:
        PulseError: If an argument is out of range.
    """
    problems = []
    if not np.isfinite(effect) or effect == 0:
        problems.append(f"effect must be a non-zero number, got {effect}")
    if not np.isfinite(sd) or sd <= 0:
        problems.append(f"sd must be > 0, got {sd}")
    if not -1.0 <= rho <= 1.0:
        problems.append(f"rho must be in [-1, 1], got {rho}")
    if n_unlabeled < 0:
        problems.append(f"n_unlabeled must be >= 0, got {n_unlabeled}")
    if not 0.0 < alpha < 1.0:
        problems.append(f"alpha must be in (0, 1), got {alpha}")
    if not alpha / 2.0 < power < 1.0:
        problems.append(f"power must be in (alpha/2, 1), got {power}")
    if problems:
        raise PulseError("labels_needed: " + "; ".join(problems))
    z_a = float(norm.ppf(1.0 - alpha / 2.0))
    n_naive = _solve(effect, sd, 0.0, 0, z_a, power)
    n_ppi = _solve(effect, sd, rho, int(n_unlabeled), z_a, power) if rho != 0 else n_naive
    naive_int = max(2, math.ceil(n_naive - 1e-9))  # a variance needs two labels
    ppi_int = max(2, math.ceil(n_ppi - 1e-9))
    return LabelPlan(
        n_naive=naive_int,
        n_ppi=ppi_int,
        saving=naive_int - ppi_int,
        saving_pct=100.0 * (naive_int - ppi_int) / naive_int,
        n_naive_exact=n_naive,
        n_ppi_exact=n_ppi,
    )
