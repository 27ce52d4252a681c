"""The split-half audit on the user's own data: a check that can fail, and its verdict.

**Split-half audit** (:func:`split_half_audit`). Each replication splits the units -- users
when intervals are cluster-robust (never single sessions: a user's sessions stay together),
sessions otherwise -- at random into two halves A and B, balanced within strata (where a user
has labels: control, treatment, both, none). On A the method under audit runs on A's labels
plus the unlabeled sessions; on B an independent naive estimate (difference of labeled means,
cluster-robust when ``clusters``) runs on B's labels. The halves share no user, so if both
standard errors are right ``Var(D_A - D_B) = se_A^2 + se_B^2`` and

    |D_A - D_B| <= t_{1 - alpha/2, df} * sqrt(se_A^2 + se_B^2)

holds in about 1 - alpha of the splits (df: Welch-Satterthwaite of the halves' dfs). Intervals
that are too narrow (i.i.d. intervals on clustered data) or biased (predictions fitted on the
labels they rectify pull D_A toward the predictions) fail more often. By default A gets the
unlabeled sessions of its own users (``unlabeled="same_half"``; users without labels are split
too), which keeps the halves independent. ``unlabeled="all"`` gives A every unlabeled session,
as the analysis itself uses them; that correlates A with B through B's users' unlabeled
sessions and makes the check lenient: in the benchmark it flagged i.i.d. augmented intervals on
clustered data (true coverage 0.74) in 12% of data sets instead of 98%.

The verdict is a one-sided binomial test of the pass rate against ``1 - alpha - tolerance``
(:func:`verdict`). The rate varies between data sets even for valid methods -- it depends on how
far the augmented and naive estimates happen to disagree on those data -- and the tolerance
(default 0.02) absorbs that only for weak predictors (valid strong-predictor analyses, r ~ 0.85:
flagged in ~25% of data sets; ``pulse-ml audit`` therefore uses :mod:`.half_checks`). In the
designs of ``tests/stats/test_split_half.py`` (100 data sets x 1000 splits) valid ones are
flagged in 0-3%, i.i.d. intervals on clustered data (true coverage 0.72-0.77) in 98-100%. It
sees bias only when that is comparable to the naive half's standard error: predictions that memorize
80% of their labeled residual (true coverage 0.05) are flagged in 94% of data sets, a milder
leak (true coverage 0.70) in 45-57%. ``share`` < 0.5 (a smaller half A) weighs A's variance more
and sees too-narrow intervals better (i.i.d. intervals at true coverage 0.83: 95-97% instead of
62-70%) but bias worse (that leak: 35%).

The labeled-vs-unlabeled consistency check (formerly "calibrated coverage") is in
:mod:`~pulse_ml.stats.consistency`; the moments of random halves in
:mod:`~pulse_ml.stats.half_moments`.

References:
    C. J. Clopper, E. S. Pearson. The use of confidence or fiducial limits illustrated in the
    case of the binomial. Biometrika 26(4), 1934.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import pandas as pd
from scipy.stats import beta, binom
from scipy.stats import t as student_t

from pulse_ml.stats import effect_engine as engine
from pulse_ml.stats.arm_inputs import Arm
from pulse_ml.stats.half_moments import (
    masked,
    prepare_arms,
    random_halves,
    split_units,
    unit_diffs,
)
from pulse_ml.stats.ppi import z_two_sided

__all__ = [
    "METHODS",
    "SplitHalfAudit",
    "split_half_audit",
    "verdict",
]

METHODS = {
    "augmented": (True, None), "naive": (False, None),
    "augmented_clustered": (True, True), "naive_clustered": (False, True),
    "augmented_iid": (True, False), "naive_iid": (False, False),
}
Method = str | Callable[[Arm, Arm], tuple[float, ...]]
_LEVEL = 0.05  # level of the binomial tests behind the verdict



@dataclass(frozen=True)
class SplitHalfAudit:
    """Result of :func:`split_half_audit`.

    Attributes:
        method: Name of the method under audit (``"callable"`` for a function).
        clusters: Whether users (True) or sessions were split.
        rate: Share of valid replications with ``|D_A - D_B| <= t sqrt(se_A^2 + se_B^2)``.
        mc_se: Monte-Carlo standard error of ``rate`` (binomial, given the data).
        verdict: ``"valid"``, ``"too narrow"`` or ``"inconclusive"``.
        reason: One sentence behind the verdict.
        target: ``1 - alpha - tolerance``.
        p_value: One-sided binomial p-value of "rate >= target".
        replications: Replications with two usable halves.
        requested: Replications asked for.
        units_per_half: Labeled units per half, per arm (control, treatment), smallest over
            replications.
        alpha: Level of the intervals.
        tolerance: Tolerance below 1 - alpha.
        per_replication: Columns delta_a, se_a, df_a, delta_b, se_b, df_b, passed.
        share: Share of the units in half A (the method under audit).
        level: Level of the binomial test behind the verdict.
    """

    method: str
    clusters: bool
    rate: float
    mc_se: float
    verdict: str
    reason: str
    target: float
    p_value: float
    replications: int
    requested: int
    units_per_half: tuple[int, int]
    alpha: float
    tolerance: float
    per_replication: pd.DataFrame
    share: float = 0.5
    level: float = 0.05



def verdict(
    passed: int, total: int, alpha: float, tolerance: float, level: float = _LEVEL
) -> tuple[str, float, str]:
    """Verdict on a pass count of the split-half check.

    * ``"too narrow"``: the one-sided binomial test rejects "rate >= 1 - alpha - tolerance" at
      ``level``;
    * ``"valid"``: not rejected and the one-sided ``1 - level`` Clopper-Pearson lower bound of
      the rate is at least ``1 - alpha - 2 tolerance`` (enough replications to tell);
    * ``"inconclusive"``: neither (too few replications for the observed rate).

    Args:
        passed: Replications that passed.
        total: Usable replications.
        alpha: Level of the audited intervals.
        tolerance: Allowed shortfall below 1 - alpha.
        level: Level of the binomial tests.

    Returns:
        ``(verdict, p-value of "rate >= target", reason)``.
    """
    target = 1.0 - alpha - tolerance
    if total == 0:
        return "inconclusive", float("nan"), "no replication had two usable halves"
    p = float(binom.cdf(passed, total, target))
    rate = passed / total
    lower = float(beta.ppf(level, passed, total - passed + 1)) if passed > 0 else 0.0
    if p < level:
        return ("too narrow", p, f"pass rate {rate:.3f} is below {target:.3f} "
                f"(binomial p = {p:.2g}): intervals are too narrow or biased")
    if lower >= target - tolerance:
        return "valid", p, f"pass rate {rate:.3f} is consistent with {1 - alpha:.2f}"
    return ("inconclusive", p, f"pass rate {rate:.3f} over {total} replications cannot tell; "
            "run more replications")


def builtin_half(arms, clustered, augmented, mask, units, mode, opts):
    base, diff = unit_diffs(arms, clustered, units[0], units[1], mask.shape[1], mode)
    res = engine.solve(masked(base, diff, mask), clustered=clustered, **opts)
    ok = (res.g_lab >= 2).all(axis=1) & (res.rating_var > 0).all(axis=1)
    if augmented:
        return res.aug_effect, res.aug_se, res.aug_df, ok
    return res.naive_effect, res.naive_se, res.naive_df, ok


def callable_half(method, arms, shift, mask, units, same_half):
    cy, cf = shift
    out = np.full((mask.shape[0], 3), np.nan)
    for r in range(mask.shape[0]):
        halves = []
        for a, arm in enumerate(arms):
            keep = mask[r, units[0][a]]
            keep_u = mask[r, units[1][a]] if same_half else np.ones(arm["fu"].size, bool)
            halves.append(Arm(y=arm["y"][keep] + cy, f=arm["f"][keep] + cf,
                              f_unl=arm["fu"][keep_u] + cf, users=arm["user"][keep],
                              users_unl=arm["user_unl"][keep_u], w=arm["w"][keep]))
        values = tuple(method(*halves))
        out[r, : len(values)] = values[:3]
    df = np.where(np.isnan(out[:, 2]), np.inf, out[:, 2])
    return out[:, 0], out[:, 1], df, np.isfinite(out[:, 1]) & (out[:, 1] > 0)


def split_half_audit(
    control: Arm,
    treatment: Arm,
    *,
    clusters: bool = True,
    method: Method = "augmented",
    alpha: float = 0.05,
    replications: int = 1000,
    seed: int = 0,
    tolerance: float = 0.02,
    small_sample: bool = True,
    lam_mode: str = "joint",
    min_units: int = 10,
    unlabeled: str = "same_half",
    share: float = 0.5,
    level: float = _LEVEL,
) -> SplitHalfAudit:
    """Split-half audit of an analysis (see module docstring).

    Args:
        control: Control arm (:class:`~pulse_ml.stats.arm_inputs.Arm`, user ids required). Labeled
            weights ``w``, if present, apply to both halves (half B's naive estimate is then
            the weighted mean).
        treatment: Treatment arm; user ids are shared with the control arm.
        clusters: Split users (True) or sessions (False, claims sessions are independent).
        method: The analysis under audit: a name of :data:`METHODS` (``"augmented"`` /
            ``"naive"`` are cluster-robust iff ``clusters``; ``*_iid`` ignore users) or a
            callable ``method(control_half, treatment_half) -> (effect, se[, df])`` receiving
            :class:`~pulse_ml.stats.arm_inputs.Arm` halves (half A's labels and unlabeled
            sessions, see ``unlabeled``; user ids as integer codes).
        alpha: Level of the intervals.
        replications: Random splits.
        seed: Seed of the splits.
        tolerance: Allowed shortfall of the pass rate below 1 - alpha (see :func:`verdict`).
        small_sample: Small-sample rules of the built-in methods
            (:func:`~pulse_ml.stats.arm_effect.compare_arms`).
        lam_mode: Lambda choice of the built-in augmented methods.
        min_units: Fewest labeled units per arm and half for a conclusive verdict.
        unlabeled: ``"same_half"`` (default): half A uses the unlabeled sessions of its own
            users (users without labels are split too), so the halves are independent and the
            variances add exactly; ``"all"``: every unlabeled session goes to half A, which
            correlates the halves through users' unlabeled sessions (lenient: misses too-narrow
            augmented intervals). Without clusters every unlabeled session is used.
        share: Share of each stratum's units in half A (the method under audit), in (0, 1);
            0.5 = equal halves. A smaller A (0.3) weighs A's variance more in ``D_A - D_B``
            and so sees too-narrow intervals better (i.i.d. intervals on clustered data at
            true coverage 0.83: flagged in 95-97% of data sets instead of 62-70%), not bias.
        level: Level of the binomial test of the verdict (see :func:`verdict`).

    Returns:
        The audit.

    Raises:
        ValueError: Unknown method, or a cluster-robust method with ``clusters=False`` (a
            session split cannot keep a user's labels together).
    """
    z_two_sided(alpha)
    if isinstance(method, str) and method not in METHODS:
        raise ValueError(f"method must be one of {sorted(METHODS)} or a callable, got {method!r}")
    if unlabeled not in ("same_half", "all"):
        raise ValueError(f"unlabeled must be 'same_half' or 'all', got {unlabeled!r}")
    if not 0.0 < share < 1.0:
        raise ValueError(f"share must be in (0, 1), got {share}")
    arms, shift = prepare_arms(control, treatment)
    weighted = any(not np.all(arm["w"] == 1.0) for arm in arms)
    unit_l, unit_u, strata = split_units(arms, clusters)
    same_half = clusters and unlabeled == "same_half"
    mask = random_halves(np.random.default_rng(seed), strata, replications, share)
    if callable(method):
        name = getattr(method, "__name__", "callable")
        d_a, se_a, df_a, ok_a = callable_half(method, arms, shift, mask, (unit_l, unit_u),
                                              same_half)
    else:
        name = method
        augmented, clustered = METHODS[method]
        clustered = clusters if clustered is None else clustered
        if clustered and not clusters:
            raise ValueError(f"method {method!r} is cluster-robust: audit it with clusters=True "
                             "(a session split would put one user's labels in both halves)")
        opts = {"weighted": weighted, "small_sample": small_sample, "lam_mode": lam_mode,
                "alpha": alpha}
        d_a, se_a, df_a, ok_a = builtin_half(arms, clustered, augmented, mask, (unit_l, unit_u),
                                         "sessions" if same_half else "labels", opts)
    d_b, se_b, df_b, ok_b = builtin_half(arms, clusters, False, ~mask, (unit_l, unit_u), "labels",
                                     {"small_sample": True})
    ok = ok_a & ok_b & (se_a > 0) & (se_b > 0)
    var = se_a**2 + se_b**2
    den = np.divide(se_a**4, df_a, out=np.zeros_like(se_a), where=np.isfinite(df_a)) + \
        np.divide(se_b**4, df_b, out=np.zeros_like(se_b), where=np.isfinite(df_b))
    df = np.divide(var**2, den, out=np.full_like(var, np.inf), where=den > 0)
    passed = np.abs(d_a - d_b) <= student_t.ppf(1 - alpha / 2, df) * np.sqrt(var)
    passed &= ok
    total, k = int(ok.sum()), int(passed.sum())
    units_half = tuple(
        int(min(mask[:, np.unique(u)].sum(axis=1).min(),
                (~mask[:, np.unique(u)]).sum(axis=1).min()))
        for u in unit_l)
    label, p, reason = verdict(k, total, alpha, tolerance, level)
    if min(units_half) < min_units:
        label = "inconclusive"
        reason = (f"only {min(units_half)} labeled {'users' if clusters else 'sessions'} per arm "
                  f"in a half (< {min_units}): too few for the check to tell")
    rate = k / total if total else float("nan")
    return SplitHalfAudit(
        method=name, clusters=clusters, rate=rate,
        mc_se=float(np.sqrt(rate * (1 - rate) / total)) if total else float("nan"),
        verdict=label, reason=reason, target=1.0 - alpha - tolerance, p_value=p,
        replications=total, requested=replications, units_per_half=units_half, alpha=alpha,
        tolerance=tolerance,
        per_replication=pd.DataFrame({"delta_a": d_a, "se_a": se_a, "df_a": df_a,
                                      "delta_b": d_b, "se_b": se_b, "df_b": df_b,
                                      "passed": passed}),
        share=float(share), level=float(level),
    )
