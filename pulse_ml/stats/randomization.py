"""Randomization inference for the naive and PPI++ effects: exact test and inverted interval.

When the randomized units are users (every session of a user in one arm) or sessions, Fisher's
randomization test compares the observed statistic with its values under re-randomizations of
the same units (complete randomization: the observed number of treated units), recomputing the
whole analysis, joint PPI++ lambdas included, for each. Under the sharp null

    H0(tau): every rated session's rating in treatment = its rating in control + tau,

the ratings ``y - tau z`` (``z`` = observed arm, 1 = treatment) are fixed numbers whatever the
assignment, so the test is exact for any number of units, any skew and any activity: with R
random re-randomizations ``p = (1 + #{|T_r| >= |T_obs|}) / (R + 1)`` satisfies
``P(p <= a) <= a``, and when all assignments are few enough they are all enumerated. The
interval is ``{tau: p(tau) > alpha}``, found by search from the estimate outwards (reported ends
are the first rejected values, within 0.01
standard errors, well below the Monte-Carlo error of the permutation quantile).

Predictions are kept as they are, not shifted with tau: they are functions of the session's
features, and H0 is about ratings. The PPI++ effect uses predictions only through within-arm
differences (unlabeled minus labeled mean) and within-arm (co)variances, so a treatment that
moves every prediction of its arm by a constant leaves the observed statistic unchanged; if the
treatment changes predictions, permuted arms mix predictions of both regimes, which adds noise
to the permuted rectifiers (a wider reference distribution), not a bias. Which sessions are rated
is a unit attribute too (labels missing independently of the arm).

The default statistic is studentized (effect / its s.e., the engine's cluster-robust s.e. with
the randomized units as clusters, in its additive CR1 form without the lambda-noise term, so a
re-randomization is one mask product): exact under H0 like any statistic, and, unlike the raw
effect, asymptotically valid for the weak null of equal mean ratings when the sharp null is
false (arms of different variance; Chung & Romano 2013). Assignments under which an arm has
fewer than 2 labeled units give no statistic and count as extreme (conservative).

When sessions are randomized (``units`` not given) each session is a unit and its own variance
cluster: the design-based variance of a session-randomized experiment.

References:
    G. W. Imbens, D. B. Rubin. Causal Inference for Statistics, Social, and Biomedical
    Sciences, ch. 5. Cambridge University Press, 2015.
    E. Chung, J. P. Romano. Exact and asymptotically robust permutation tests. Annals of
    Statistics 41(2), 2013.
    L. Kish. Survey Sampling. Wiley, 1965 (effective sample size).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike, NDArray

from pulse_ml.stats import cluster_moments as cm
from pulse_ml.stats import effect_engine as engine
from pulse_ml.stats.arm_inputs import Arm
from pulse_ml.stats.ppi import z_two_sided
from pulse_ml.stats.randomization_design import Prepared, prepare

__all__ = [
    "STATISTICS",
    "Prepared",
    "RandomizationEstimate",
    "RandomizationResult",
    "kish_effective_units",
    "prepare",
    "pvalues_batch",
    "randomization_inference",
]

STATISTICS = ("studentized", "effect")
_MAX_STEPS = 40  # search steps per interval end
_TOL = 1e-2  # interval ends to this share of a standard error


@dataclass(frozen=True)
class RandomizationEstimate:
    """Randomization p-value of "no effect" and the interval of constant effects not rejected.

    Attributes:
        effect: The observed effect (the same number as the asymptotic analysis prints).
        p_value: Randomization p-value of H0(0).
        ci_lower: Lowest constant effect not rejected at ``alpha`` (``-inf``: none rejected).
        ci_upper: Highest constant effect not rejected at ``alpha``.
    """

    effect: float
    p_value: float
    ci_lower: float
    ci_upper: float


@dataclass(frozen=True)
class RandomizationResult:
    """Randomization inference of one comparison.

    Attributes:
        naive: Difference of labeled means.
        augmented: PPI++ effect (joint lambdas recomputed under every assignment).
        unit: ``"user"`` (units given) or ``"session"``.
        n_units_control: Units observed in control.
        n_units_treatment: Units observed in treatment.
        n_assignments: Assignments the observed one is compared with (R).
        exhaustive: True when those are all other assignments (exact p-values).
        statistic: ``"studentized"`` or ``"effect"``.
        alpha: Error level of the intervals.
    """

    naive: RandomizationEstimate
    augmented: RandomizationEstimate
    unit: str
    n_units_control: int
    n_units_treatment: int
    n_assignments: int
    exhaustive: bool
    statistic: str
    alpha: float


def kish_effective_units(units: ArrayLike) -> float:
    """Kish effective number of units behind a mean of sessions: ``(sum n_g)^2 / sum n_g^2``.

    Args:
        units: Unit (user) id of each labeled session, shape (n,).

    Returns:
        The effective number (= number of units when they rate equally often; 0 when empty).
    """
    arr = np.asarray(units)
    if arr.size == 0:
        return 0.0
    counts = np.unique(arr, return_counts=True)[1].astype(float)
    return float(counts.sum() ** 2 / np.square(counts).sum())


def _statistics(res: engine.EngineResult, studentized: bool) -> NDArray[np.float64]:
    """Statistics (rows, 2: naive, augmented); +inf where an arm has < 2 labeled units."""
    out = []
    for eff, se in ((res.naive_effect, res.naive_se), (res.aug_effect, res.aug_se)):
        if studentized:
            stat = np.divide(eff, se, out=np.full_like(se, np.inf), where=se > 0)
        else:
            stat = eff.copy()
        out.append(stat)
    stats = np.abs(np.stack(out, axis=1))
    bad = (res.g_lab.min(axis=1) < 2) | ~np.isfinite(stats).all(axis=1)
    stats[bad] = np.inf
    return stats


def _solve(flat: NDArray[np.float64], clustered: bool, alpha: float) -> engine.EngineResult:
    return engine.solve(cm.Moments.unflat(flat), weighted=False, small_sample=True,
                        lam_mode="joint", clustered=clustered, alpha=alpha)


def _pvalues_and_margins(stats: NDArray[np.float64], alpha: float
                         ) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """From statistics (k, R + 1, 2), observed first: p-values and margins |T_obs| - crit.

    ``p = (1 + #{|T_r| >= |T_obs|}) / (R + 1)``; p <= alpha iff at most ``m = floor(alpha (R +
    1)) - 1`` permuted statistics reach the observed one, i.e. iff the observed statistic
    exceeds the (m+1)-th largest permuted one (``crit``).
    """
    r = stats.shape[1] - 1
    obs, perm = stats[:, :1, :], stats[:, 1:, :]
    extreme = (perm >= obs * (1 - 1e-9) - 1e-12).sum(axis=1)
    p = (1.0 + extreme) / (r + 1.0)
    m = int(np.floor(alpha * (r + 1) - 1 + 1e-9))
    if m < 0:
        crit = np.full(p.shape, np.inf)
    else:
        crit = -np.partition(-perm, m, axis=1)[:, m, :]
    return p, obs[:, 0, :] - crit


class _Evaluator:
    """P-values and margins of one prepared case study at hypothesized effects."""

    def __init__(self, prep: Prepared, alpha: float, studentized: bool):
        self.prep, self.alpha, self.studentized = prep, alpha, studentized

    def __call__(self, taus: NDArray[np.float64]) -> tuple[NDArray[np.float64], ...]:
        """``(p, margin)`` at each tau, each of shape (k, 2) (naive, augmented)."""
        flat = self.prep.design.flat_moments(self.prep.products, taus)
        k, rows = flat.shape[:2]
        res = _solve(flat.reshape(k * rows, -1), self.prep.clustered, self.alpha)
        stats = _statistics(res, self.studentized).reshape(k, rows, 2)
        return _pvalues_and_margins(stats, self.alpha)


def pvalues_batch(preps: list[Prepared], taus: ArrayLike, alpha: float = 0.05,
                  statistic: str = "studentized") -> NDArray[np.float64]:
    """Randomization p-values of H0(tau_d) for many prepared case studies in one engine pass.

    Meant for simulations (coverage = share of data sets whose true effect is not rejected).

    Args:
        preps: Prepared case studies (:func:`prepare`), all with the same number of
            assignments R and the same unit kind.
        taus: One hypothesized constant effect per case study, shape (D,).
        alpha: Error level (enters the engine's choice of lambda share).
        statistic: ``"studentized"`` or ``"effect"``.

    Returns:
        P-values, shape (D, 2) (naive, augmented).
    """
    taus = np.asarray(taus, float)
    flats = [p.design.flat_moments(p.products, taus[i : i + 1])[0] for i, p in enumerate(preps)]
    rows = flats[0].shape[0]
    res = _solve(np.concatenate(flats), preps[0].clustered, alpha)
    stats = _statistics(res, statistic == "studentized").reshape(len(preps), rows, 2)
    return _pvalues_and_margins(stats, alpha)[0]


def _search(evaluate: _Evaluator, est: NDArray[np.float64], scale: NDArray[np.float64],
            start: NDArray[np.float64]) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """Interval ends (2 estimators x lower/upper) of ``{tau: p(tau) > alpha}``, p-values at 0.

    Works on distances d > 0 from the estimate with the margin ``g(d) = |T_obs| - crit``
    (reject iff g > 0): ``a`` = farthest accepted distance below ``b`` = nearest rejected one,
    until ``b - a`` is within tolerance; the rejected ``b`` is reported. Until both sides are
    known the fixed point ``d = scale * crit`` (the observed statistic is ``|est - tau| /
    scale``) is tried, then regula falsi on g with the Illinois rule, kept inside the bracket.
    """
    ends = [(e, s) for e in (0, 1) for s in (-1.0, 1.0)]
    a, b = np.zeros(4), np.full(4, np.inf)
    ga, gb = np.full(4, np.nan), np.full(4, np.nan)
    last = np.zeros(4)  # +1: b moved last, -1: a moved last
    unbounded = np.zeros(4, bool)
    tol = _TOL * np.array([scale[e] for e, _ in ends])
    d = np.array([start[e] for e, _ in ends])
    p_zero = None
    for _ in range(_MAX_STEPS):
        active = np.flatnonzero(~unbounded & ((b - a) > tol))
        if not active.size:
            break
        taus = np.array([est[ends[i][0]] + ends[i][1] * d[i] for i in active])
        if p_zero is None:  # the p-value of no effect rides along with the first batch
            p, margin = evaluate(np.r_[taus, 0.0])
            p_zero, margin = p[-1], margin[:-1]
        else:
            _, margin = evaluate(taus)
        for j, i in enumerate(active):
            e = ends[i][0]
            g = margin[j, e]
            if g > 0:
                b[i], gb[i] = d[i], g
                if last[i] > 0:
                    ga[i] /= 2  # Illinois: the same end moved twice
                last[i] = 1
            else:
                a[i], ga[i] = d[i], g
                if last[i] < 0:
                    gb[i] /= 2
                last[i] = -1
            prop = scale[e] * (abs(taus[j] - est[e]) / scale[e] - g)  # fixed point
            if not np.isfinite(b[i]):  # look for a rejection
                d[i] = prop + tol[i] / 2 if np.isfinite(prop) and prop > a[i] else 2 * d[i]
                if d[i] > 1e6 * scale[e]:
                    unbounded[i], b[i] = True, np.inf  # nothing rejected
                continue
            if np.isfinite(ga[i]) and np.isfinite(gb[i]) and gb[i] > ga[i]:
                d[i] = a[i] + (b[i] - a[i]) * (-ga[i]) / (gb[i] - ga[i])
            else:
                d[i] = prop - tol[i] / 2
            guard = min(tol[i] / 4, (b[i] - a[i]) / 4)
            d[i] = float(np.clip(d[i], a[i] + guard, b[i] - guard))
    out = np.array([est[e] + s * b[i] for i, (e, s) in enumerate(ends)])
    if p_zero is None:
        p_zero = evaluate(np.zeros(1))[0][0]
    return out.reshape(2, 2), p_zero


def randomization_inference(
    control: Arm,
    treatment: Arm,
    *,
    alpha: float = 0.05,
    n_permutations: int = 2000,
    seed: int = 0,
    statistic: str = "studentized",
    max_exhaustive: int | None = None,
) -> RandomizationResult:
    """Randomization p-values and intervals of the naive and PPI++ effects.

    The statistic is computed by :func:`pulse_ml.stats.effect_engine.solve` exactly as
    :func:`~pulse_ml.stats.arm_effect.compare_arms` computes it (small-sample rules, joint
    lambdas), with the randomized units as variance clusters; see the module docstring.

    Args:
        control: The control arm; its ``users`` / ``users_unl`` are the randomized units
            (users) of its labeled / unlabeled sessions. Without user ids in both arms,
            sessions were randomized. Weights are not used.
        treatment: The treatment arm.
        alpha: Error level of the intervals.
        n_permutations: Random re-randomizations R (``R + 1 >= 1 / alpha`` for a finite
            interval).
        seed: Seed of the re-randomizations.
        statistic: ``"studentized"`` (effect / s.e., default) or ``"effect"``.
        max_exhaustive: Enumerate all assignments when there are at most this many others
            (default ``n_permutations``).

    Returns:
        The result (effects are treatment - control).

    Raises:
        PulseError: A unit with sessions in both arms, or an arm with fewer than 2 labeled
            units.
        ValueError: Unknown statistic or bad shapes.
    """
    if statistic not in STATISTICS:
        raise ValueError(f"statistic must be one of {STATISTICS}, got {statistic!r}")
    z_two_sided(alpha)
    prep = prepare(control, treatment, n_permutations=n_permutations, seed=seed,
                   max_exhaustive=max_exhaustive)
    evaluate = _Evaluator(prep, alpha, statistic == "studentized")
    # Observed row: effects and s.e. do not depend on tau (a constant shift within an arm).
    obs = _solve(prep.design.flat_moments(prep.products[:1], np.zeros(1))[0], prep.clustered,
                 alpha)
    est = np.array([obs.naive_effect[0], obs.aug_effect[0]])
    se = np.array([obs.naive_se[0], obs.aug_se[0]])
    scale = np.where(se > 0, se, 1.0) if statistic == "studentized" else np.ones(2)
    q = engine.quantile(alpha, np.array([obs.naive_df[0], obs.aug_df[0]]))
    start = np.where(se > 0, q * se, np.maximum(np.abs(est), 1e-3))
    ci, p0 = _search(evaluate, est, scale, start)
    out = [RandomizationEstimate(float(est[e]), float(p0[e]), float(ci[e, 0]), float(ci[e, 1]))
           for e in (0, 1)]
    return RandomizationResult(
        naive=out[0], augmented=out[1], unit="user" if prep.clustered else "session",
        n_units_control=prep.n_units[0], n_units_treatment=prep.n_units[1],
        n_assignments=int(prep.products.shape[0] - 1), exhaustive=prep.exhaustive,
        statistic=statistic, alpha=float(alpha))
