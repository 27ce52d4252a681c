"""Planning a monitored test: expected days to a conclusive result, naive vs PPI++."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike, NDArray
from scipy.optimize import brentq
from scipy.stats import norm

from pulse_ml.errors import PulseError
from pulse_ml.stats.power import effect_sd_rho_problems
from pulse_ml.stats.ppi import z_two_sided
from pulse_ml.stats.sequential.boundary import cs_multiplier

F64 = NDArray[np.float64]


def _simpson(b: float, step: float) -> tuple[F64, F64]:
    m = max(2, int(math.ceil(2.0 * b / step)))
    m += m % 2
    x = np.linspace(-b, b, m + 1)
    w = np.ones(m + 1)
    w[1:-1:2], w[2:-1:2] = 4.0, 2.0
    return x, w * (x[1] - x[0]) / 3.0


def first_crossing_probabilities(drift: float, boundary: ArrayLike, step: float = 0.05) -> F64:
    """First-passage probabilities of a Gaussian random walk through a two-sided boundary.

    ``W_d = sum_{j <= d} (drift + e_j)``, e_j i.i.d. N(0, 1); returns ``P(|W_d| >= b_d`` for the
    first time at look d) for d = 1..D by recursive numerical integration (Simpson's rule on
    the continuation region, exact normal tails for the crossing mass).

    Args:
        drift: Mean increment per look.
        boundary: Positive boundaries ``b_1..b_D`` on the scale of W (inf = no stop at a look).
        step: Grid spacing of the integration (in units of one look's standard deviation).

    Returns:
        Array of D probabilities; their sum is the probability of stopping by look D.

    Notes:
        Armitage, McPherson & Rowe (1969); Jennison & Turnbull, Group Sequential Methods with
        Applications to Clinical Trials (2000), ch. 19.
    """
    b = np.asarray(boundary, dtype=np.float64)
    if b.ndim != 1 or b.size == 0 or (b <= 0).any() or np.isnan(b).any():
        raise PulseError("first_crossing_probabilities: boundaries must be positive numbers")
    out = np.zeros(b.size)
    big = 40.0 + abs(drift) * b.size  # a finite stand-in for "no stopping"
    bb = np.where(np.isfinite(b), b, big)
    out[0] = norm.sf(bb[0] - drift) + norm.cdf(-bb[0] - drift)
    x, w = _simpson(bb[0], step)
    dens = np.exp(-0.5 * (x - drift) ** 2) / math.sqrt(2 * math.pi)
    for d in range(1, b.size):
        mean = x + drift
        mass = w * dens
        out[d] = float(mass @ (norm.sf(bb[d] - mean) + norm.cdf(-bb[d] - mean)))
        if d + 1 < b.size:
            xn, wn = _simpson(bb[d], step)
            kern = np.exp(-0.5 * (xn[:, None] - mean[None, :]) ** 2) / math.sqrt(2 * math.pi)
            dens = kern @ mass
            x, w = xn, wn
    return np.clip(out, 0.0, 1.0)


@dataclass(frozen=True)
class SequentialPlan:
    """Expected course of a monitored test for one estimator.

    Attributes:
        median_day: First day by which the sequence is conclusive with probability >= 1/2
            (``None`` if not within ``max_days``).
        power_day: First day by which it is conclusive with probability >= ``power``.
        p_conclusive: Probability that the sequence excludes 0 within ``max_days``.
        p_conclusive_by_day: Cumulative probability of a conclusive sequence, day 1..max_days.
        fixed_days: Days a fixed-horizon test needs for ``power`` (looked at once, at the end).
        fixed_labels_per_arm: Labels per arm of that fixed-horizon test.
        se_factor: Standard error relative to the naive one (1 for naive).
    """

    median_day: int | None
    power_day: int | None
    p_conclusive: float
    p_conclusive_by_day: tuple[float, ...]
    fixed_days: int
    fixed_labels_per_arm: int
    se_factor: float


@dataclass(frozen=True)
class MonitorPlan:
    """Days to a conclusive result with the naive and the PPI++ sequence.

    Attributes:
        naive: Plan for the difference of labeled means.
        augmented: Plan for PPI++ (optimal lambda).
        median_ratio: ``augmented.median_day / naive.median_day`` (``None`` if either is).
        variance_ratio: ``1 - rho^2 N/(n + N)``, the PPI++ / naive variance ratio; with a
            constant multiplier it would be the ratio of days.
        peeking_type1: Probability that the fixed Wald interval, checked every day for
            ``max_days`` days, ever excludes 0 under no effect (what peeking costs).
        sequence_type1: The same for the sequence (at most ``alpha``, asymptotically).
        target_day: Day at which the sequence is tightest (t* of :func:`monitor_effect`).
        max_days: Horizon.
        alpha: Error level.
        power: Target power.
    """

    naive: SequentialPlan
    augmented: SequentialPlan
    median_ratio: float | None
    variance_ratio: float
    peeking_type1: float
    sequence_type1: float
    target_day: int
    max_days: int
    alpha: float
    power: float


def _first_day(cum: F64, level: float) -> int | None:
    hit = np.flatnonzero(cum >= level - 1e-12)
    return int(hit[0]) + 1 if hit.size else None


def _fixed_days(theta: float, z: float, power: float) -> float:
    def gap(d: float) -> float:
        s = theta * math.sqrt(d)
        return float(norm.cdf(s - z) + norm.cdf(-s - z)) - power

    lo, hi = 1e-9, 1.0
    while gap(hi) < 0:
        lo, hi = hi, hi * 2.0
        if hi > 1e12:
            raise PulseError("plan_monitoring: the effect is too small to reach the power")
    return lo if gap(lo) >= 0 else float(brentq(gap, lo, hi, xtol=1e-10, rtol=1e-12))


def plan_monitoring(
    effect: float,
    sd: float,
    rho: float,
    labeled_per_day: float,
    unlabeled_per_day: float,
    alpha: float = 0.05,
    power: float = 0.8,
    design_effect: float = 1.0,
    max_days: int = 21,
    target_day: int | None = None,
    min_units_per_arm: int = 10,
) -> MonitorPlan:
    """Expected days to a conclusive result with the naive and the PPI++ sequence.

    Daily looks; per arm and day ``labeled_per_day`` ratings and ``unlabeled_per_day``
    predictions arrive. After d days the naive effect has variance
    ``V_d = 2 sd^2 deff / (d labeled_per_day)`` and PPI++ ``V_d (1 - rho^2 N/(n + N))``
    (optimal lambda); the stopping-day distribution of the sequence of :func:`monitor_effect`
    (clock t proportional to days, t* at ``target_day``) is computed exactly for this Gaussian
    model (:func:`first_crossing_probabilities`). The fixed-horizon rows solve the usual
    two-sided power equation for the number of days.

    Args:
        effect: Effect to detect (treatment - control, rating scale), non-zero.
        sd: Standard deviation of a rating within an arm (> 0).
        rho: Correlation of rating and honest prediction, in [-1, 1].
        labeled_per_day: Labeled sessions per arm per day (> 0).
        unlabeled_per_day: Unlabeled sessions per arm per day (>= 0).
        alpha: Error level of the sequence / test.
        power: Target power, in (alpha/2, 1).
        design_effect: Variance inflation of clustering (>= 1; 1 + (m - 1) ICC for m sessions
            per user).
        max_days: Horizon of the monitoring, in days (>= 1).
        target_day: Day at which the sequence is tightest (default ``max_days``), as
            ``target_look`` of :func:`monitor_effect`.
        min_units_per_arm: No stop before each arm has this many labels (as in
            :func:`monitor_effect`).

    Returns:
        The plan for both estimators.

    Raises:
        PulseError: If an argument is out of range, or if no day reaches ``min_units_per_arm``.

    Notes:
        Boundary of Waudby-Smith et al. (2024); PPI++ variance of Angelopoulos, Duchi & Zrnic
        (2023); numerical integration of Armitage, McPherson & Rowe (1969).
    """
    problems = effect_sd_rho_problems(effect, sd, rho)
    if not np.isfinite(labeled_per_day) or labeled_per_day <= 0:
        problems.append(f"labeled_per_day must be > 0, got {labeled_per_day}")
    if not np.isfinite(unlabeled_per_day) or unlabeled_per_day < 0:
        problems.append(f"unlabeled_per_day must be >= 0, got {unlabeled_per_day}")
    if not 0.0 < alpha < 1.0:
        problems.append(f"alpha must be in (0, 1), got {alpha}")
    if not alpha / 2.0 < power < 1.0:
        problems.append(f"power must be in (alpha/2, 1), got {power}")
    if not np.isfinite(design_effect) or design_effect <= 0:
        problems.append(f"design_effect must be > 0, got {design_effect}")
    if isinstance(max_days, bool) or not isinstance(max_days, int | np.integer) or max_days < 1:
        problems.append(f"max_days must be a positive integer, got {max_days!r}")
    target = max_days if target_day is None else target_day
    if (
        isinstance(target, bool)
        or not isinstance(target, int | np.integer)
        or not 1 <= target <= max(max_days, 1)
    ):
        problems.append(f"target_day must be an integer in [1, max_days], got {target_day!r}")
    if not problems and max_days * labeled_per_day < min_units_per_arm:
        problems.append(
            f"fewer than min_units_per_arm={min_units_per_arm} labels per arm by day {max_days}"
        )
    if problems:
        raise PulseError("plan_monitoring: " + "; ".join(problems))
    z = z_two_sided(alpha)
    days = np.arange(1, max_days + 1, dtype=np.float64)
    mult = cs_multiplier(days, float(target), alpha)
    started = days * labeled_per_day >= min_units_per_arm
    seq_b = np.where(started, mult * np.sqrt(days), np.inf)
    fix_b = np.where(started, z * np.sqrt(days), np.inf)
    factor = 1.0 - rho**2 * unlabeled_per_day / (labeled_per_day + unlabeled_per_day)
    v1 = 2.0 * sd**2 * design_effect / labeled_per_day
    plans = []
    for f in (1.0, factor):
        theta = abs(effect) / math.sqrt(v1 * f)
        cum = np.cumsum(first_crossing_probabilities(theta, seq_b))
        d_fix = _fixed_days(theta, z, power)
        plans.append(
            SequentialPlan(
                median_day=_first_day(cum, 0.5),
                power_day=_first_day(cum, power),
                p_conclusive=float(cum[-1]),
                p_conclusive_by_day=tuple(float(c) for c in cum),
                fixed_days=int(math.ceil(d_fix - 1e-9)),
                fixed_labels_per_arm=int(math.ceil(d_fix * labeled_per_day - 1e-9)),
                se_factor=math.sqrt(f),
            )
        )
    naive, aug = plans
    ratio = (
        aug.median_day / naive.median_day
        if naive.median_day is not None and aug.median_day is not None
        else None
    )
    return MonitorPlan(
        naive=naive,
        augmented=aug,
        median_ratio=ratio,
        variance_ratio=float(factor),
        peeking_type1=float(first_crossing_probabilities(0.0, fix_b).sum()),
        sequence_type1=float(first_crossing_probabilities(0.0, seq_b).sum()),
        target_day=int(target),
        max_days=int(max_days),
        alpha=float(alpha),
        power=float(power),
    )
