"""Audits on the user's own data: a split-half check that can fail, and a consistency check.

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

**Consistency check** (:func:`labeled_unlabeled_consistency`), formerly called "calibrated
coverage": hide a share of the labeled units, let their predictions join the unlabeled pool and
compare the nested estimates, ``|D_sub - D_all| <= z sqrt(se_sub^2 - se_all^2)`` (Hausman). For
the naive estimator this is nearly a tautology whatever variance formula is used: nested
estimates share their labels, so it cannot see dependence between users. What it does react to
is a shift between the predictions of labeled and unlabeled sessions (hidden labeled sessions
then do not look like the unlabeled ones) -- including the shift that predictions fitted on the
labels create when the hidden sessions keep them.

Both audits switch whole clusters between two states, so every replication's statistics are
``state0 + mask @ (state1 - state0)`` (:mod:`pulse_ml.stats.cluster_moments`) and all
replications are solved in one vectorized pass.

References:
    J. A. Hausman. Specification tests in econometrics. Econometrica 46(6), 1978.
    C. J. Clopper, E. S. Pearson. The use of confidence or fiducial limits illustrated in the
    case of the binomial. Biometrika 26(4), 1934.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import pandas as pd
from numpy.typing import ArrayLike, NDArray
from scipy.stats import beta, binom
from scipy.stats import t as student_t

from pulse_ml.stats import cluster_moments as cm
from pulse_ml.stats import effect_engine as engine
from pulse_ml.stats.arm_inputs import cluster_codes
from pulse_ml.stats.ppi import z_two_sided

__all__ = [
    "METHODS",
    "ArmArrays",
    "ConsistencyCheck",
    "SplitHalfAudit",
    "labeled_unlabeled_consistency",
    "split_half_audit",
    "verdict",
]

# method name -> (augmented?, clustered? None = follow the audit's ``clusters``)
METHODS = {
    "augmented": (True, None), "naive": (False, None),
    "augmented_clustered": (True, True), "naive_clustered": (False, True),
    "augmented_iid": (True, False), "naive_iid": (False, False),
}
Method = str | Callable[["ArmArrays", "ArmArrays"], tuple[float, ...]]
_LEVEL = 0.05  # level of the binomial tests behind the verdict


@dataclass(frozen=True)
class ArmArrays:
    """One arm: labeled ratings/predictions/users and unlabeled predictions/users.

    Any object with these attributes works (e.g. ``pulse_ml.inference.ArmData``).

    Attributes:
        y: Ratings of the labeled sessions, shape (n,).
        f: Honest predictions of the labeled sessions, shape (n,).
        users: User ids of the labeled sessions, shape (n,).
        f_unl: Predictions of the unlabeled sessions, shape (N,).
        users_unl: User ids of the unlabeled sessions, shape (N,).
        w: Optional weights of the labeled sessions (shift-aware PPI++).
    """

    y: ArrayLike
    f: ArrayLike
    users: ArrayLike
    f_unl: ArrayLike
    users_unl: ArrayLike
    w: ArrayLike | None = None


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


@dataclass(frozen=True)
class ConsistencyCheck:
    """Result of :func:`labeled_unlabeled_consistency`.

    Attributes:
        rate_naive: Share of replications with ``|D_sub - D_all| <= q sqrt(se_sub^2 - se_all^2)``
            for the naive estimator (close to 1 - alpha almost whatever its variance formula).
        rate_augmented: The same for the augmented estimator; clearly below 1 - alpha when
            hidden labeled sessions' predictions do not behave like the unlabeled ones.
        mc_se_augmented: Monte-Carlo standard error of ``rate_augmented``.
        hide_share: Share of labeled units hidden per replication.
        replications: Replications run.
        per_replication: Columns naive_effect, naive_se, aug_effect, aug_se.
    """

    rate_naive: float
    rate_augmented: float
    mc_se_augmented: float
    hide_share: float
    replications: int
    per_replication: pd.DataFrame


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


def _arrays(arm: object, name: str) -> tuple:
    y, f = np.asarray(arm.y, float), np.asarray(arm.f, float)
    f_unl = np.asarray(arm.f_unl, float)
    w = getattr(arm, "w", None)
    w = np.ones(y.size) if w is None else np.asarray(w, float)
    if not (y.size == f.size == w.size == np.asarray(arm.users).size):
        raise ValueError(f"{name}: y, f, users (and w) must have the same length")
    return y, f, w, np.asarray(arm.users), f_unl, np.asarray(arm.users_unl)


def _prepare(control: object, treatment: object) -> tuple[list[dict], tuple[float, float]]:
    arms = [_arrays(control, "control"), _arrays(treatment, "treatment")]
    keys = [arms[0][3], arms[0][5], arms[1][3], arms[1][5]]
    names = ["control.users", "control.users_unl", "treatment.users", "treatment.users_unl"]
    codes, n_users = cluster_codes(keys, [k.size for k in keys], names)
    cy = float(np.concatenate([arms[0][0], arms[1][0]]).mean())
    cf = float(np.concatenate([arms[0][1], arms[1][1]]).mean())
    out = []
    for a, (y, f, w, _, fu, _) in enumerate(arms):
        out.append({"y": y - cy, "f": f - cf, "w": w, "fu": fu - cf,
                    "user": codes[2 * a], "user_unl": codes[2 * a + 1]})
    del n_users
    return out, (cy, cf)


def _variance_codes(arms: list[dict], clustered: bool) -> tuple[list, list, int]:
    """Cluster codes of the labeled and unlabeled sessions: users, or one per session."""
    if clustered:
        lab, unl = [arm["user"] for arm in arms], [arm["user_unl"] for arm in arms]
        return lab, unl, int(max(c.max(initial=-1) for c in lab + unl) + 1)
    sizes = [arms[0]["y"].size, arms[1]["y"].size, arms[0]["fu"].size, arms[1]["fu"].size]
    starts = np.concatenate([[0], np.cumsum(sizes)])
    codes = [starts[i] + np.arange(sizes[i]) for i in range(4)]
    return codes[:2], codes[2:], int(starts[-1])


def _unit_diffs(arms: list[dict], clustered: bool, unit_l: list, unit_u: list | None,
                n_units: int, mode: str) -> tuple[cm.Moments, NDArray[np.float64]]:
    """Moments with every unit in state 0, and per-unit flat differences state 1 - state 0.

    Modes (state 1 = the unit is "in"): ``"labels"``: the unit's labels are in, unlabeled
    sessions always count; ``"sessions"``: the unit's labeled and unlabeled sessions are in;
    ``"hide"``: labels in, or hidden (their predictions join the unlabeled pool).

    Returns:
        ``(base, diff)`` with diff of shape (n_units, FLAT_SIZE): a replication with 0/1 unit mask M
        has moments ``base + M @ diff``.

    Raises:
        ValueError: If a variance cluster holds sessions of two units.
    """
    lab_codes, unl_codes, n_codes = _variance_codes(arms, clustered)
    pairs = list(zip(lab_codes, unit_l, strict=True))
    if mode == "sessions":
        pairs += list(zip(unl_codes, unit_u, strict=True))
    codes = np.concatenate([c for c, _ in pairs])
    units = np.concatenate([u for _, u in pairs])
    varying, first = np.unique(codes, return_index=True)
    unit_of = np.full(n_codes, -1)
    unit_of[codes] = units
    if np.any(unit_of[codes] != units):
        raise ValueError("a variance cluster (user) has sessions in two split units: a "
                         "cluster-robust method needs the user split (clusters=True)")
    del first
    empty, none = np.zeros((1, 0)), np.zeros(0, np.intp)
    lab = np.stack([cm.cluster_sums(cl, arm["y"][None], arm["f"][None], arm["w"][None], none,
                                    empty, n_codes)[:, varying]
                    for arm, cl in zip(arms, lab_codes, strict=True)], axis=2)
    unl = np.stack([cm.cluster_sums(none, empty, empty, empty, cu, arm["fu"][None],
                                    n_codes)[:, varying]
                    for arm, cu in zip(arms, unl_codes, strict=True)], axis=2)
    state1 = lab + unl
    state0 = np.zeros_like(unl) if mode == "sessions" else unl.copy()
    base_unl = []
    for arm, cl, cu in zip(arms, lab_codes, unl_codes, strict=True):
        fu, cu_all = arm["fu"], cu
        if mode == "hide":
            fu, cu_all = np.concatenate([arm["fu"], arm["f"]]), np.concatenate([cu, cl])
        elif mode == "sessions":
            fu, cu_all = fu[:0], cu[:0]
        base_unl.append((none, empty, empty, empty, cu_all, fu[None]))
    if mode == "hide":
        for raw_l, raw_u in (("m", "mu"), ("sf", "su"), ("sff", "suu")):
            state0[..., cm.RAW_INDEX[raw_u]] += lab[..., cm.RAW_INDEX[raw_l]]
    order = np.argsort(unit_of[varying], kind="stable")
    sorted_units = unit_of[varying][order]
    diff = np.zeros((n_units, cm.FLAT_SIZE))
    step = max(1, 20_000)
    for i in range(0, varying.size, step):
        idx = order[i : i + step]
        part = cm.per_cluster(state1[:, idx]).flat()[0] - cm.per_cluster(state0[:, idx]).flat()[0]
        u = sorted_units[i : i + step]
        starts = np.flatnonzero(np.r_[True, u[1:] != u[:-1]])
        diff[u[starts]] += np.add.reduceat(part, starts, axis=0)
    return cm.session_moments(base_unl, n_codes), diff


def _masked(base: cm.Moments, diff: NDArray[np.float64], mask: NDArray[np.bool_],
            chunk: int = 4096) -> cm.Moments:
    """Moments of each replication: ``base + mask @ diff`` (mask: (R, units), True = in)."""
    flat = base.flat()
    parts = [flat + mask[i : i + chunk].astype(float) @ diff
             for i in range(0, mask.shape[0], chunk)]
    return cm.Moments.unflat(np.concatenate(parts))


def _builtin(arms, clustered, augmented, mask, units, mode, opts):
    base, diff = _unit_diffs(arms, clustered, units[0], units[1], mask.shape[1], mode)
    res = engine.solve(_masked(base, diff, mask), clustered=clustered, **opts)
    ok = (res.g_lab >= 2).all(axis=1) & (res.rating_var > 0).all(axis=1)
    if augmented:
        return res.aug_effect, res.aug_se, res.aug_df, ok
    return res.naive_effect, res.naive_se, res.naive_df, ok


def _callable(method, arms, shift, mask, units, same_half):
    cy, cf = shift
    out = np.full((mask.shape[0], 3), np.nan)
    for r in range(mask.shape[0]):
        halves = []
        for a, arm in enumerate(arms):
            keep = mask[r, units[0][a]]
            keep_u = mask[r, units[1][a]] if same_half else np.ones(arm["fu"].size, bool)
            halves.append(ArmArrays(arm["y"][keep] + cy, arm["f"][keep] + cf,
                                    arm["user"][keep], arm["fu"][keep_u] + cf,
                                    arm["user_unl"][keep_u], arm["w"][keep]))
        values = tuple(method(*halves))
        out[r, : len(values)] = values[:3]
    df = np.where(np.isnan(out[:, 2]), np.inf, out[:, 2])
    return out[:, 0], out[:, 1], df, np.isfinite(out[:, 1]) & (out[:, 1] > 0)


def _halves(rng: np.random.Generator, strata: NDArray[np.intp], replications: int,
            share: float = 0.5) -> NDArray[np.bool_]:
    """Random halves of the units, balanced within each stratum: (R, units), True = half A.

    Half A gets ``floor(share * units)`` of each stratum (``share = 0.5``: equal halves).
    """
    mask = np.zeros((replications, strata.size), dtype=bool)
    for s in np.unique(strata):
        idx = np.flatnonzero(strata == s)
        ranks = rng.random((replications, idx.size)).argsort(axis=1).argsort(axis=1)
        mask[:, idx] = ranks < int(share * idx.size)
    return mask


def _units(arms: list[dict], clusters: bool) -> tuple[list, list, NDArray[np.intp]]:
    """Split units of the labeled / unlabeled sessions per arm and their strata.

    Users (codes shared by the arms) stratified by where they have labels (none, control only,
    treatment only, both), so each half gets half of each arm's labeled users; or, without
    clusters, labeled sessions stratified by arm (unlabeled sessions belong to no unit).
    """
    if clusters:
        unit_l, unit_u = [arm["user"] for arm in arms], [arm["user_unl"] for arm in arms]
        n_units = int(max(c.max(initial=-1) for c in unit_l + unit_u) + 1)
        strata = np.zeros(n_units, dtype=np.intp)
        strata[unit_l[0]] = 1
        strata[unit_l[1]] |= 2
        return unit_l, unit_u, strata
    n_c, n_t = arms[0]["y"].size, arms[1]["y"].size
    strata = np.repeat(np.array([1, 2], dtype=np.intp), [n_c, n_t])
    return [np.arange(n_c), n_c + np.arange(n_t)], [None, None], strata


def split_half_audit(
    control: object,
    treatment: object,
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
        control: Control arm (:class:`ArmArrays` or any object with its attributes). Labeled
            weights ``w``, if present, apply to both halves (half B's naive estimate is then
            the weighted mean).
        treatment: Treatment arm; user ids are shared with the control arm.
        clusters: Split users (True) or sessions (False, claims sessions are independent).
        method: The analysis under audit: a name of :data:`METHODS` (``"augmented"`` /
            ``"naive"`` are cluster-robust iff ``clusters``; ``*_iid`` ignore users) or a
            callable ``method(control_half, treatment_half) -> (effect, se[, df])`` receiving
            :class:`ArmArrays` halves (half A's labels and unlabeled sessions, see
            ``unlabeled``; user ids as integer codes).
        alpha: Level of the intervals.
        replications: Random splits.
        seed: Seed of the splits.
        tolerance: Allowed shortfall of the pass rate below 1 - alpha (see :func:`verdict`).
        small_sample: Small-sample rules of the built-in methods (:func:`compare_arms`).
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
    arms, shift = _prepare(control, treatment)
    weighted = any(not np.all(arm["w"] == 1.0) for arm in arms)
    unit_l, unit_u, strata = _units(arms, clusters)
    same_half = clusters and unlabeled == "same_half"
    mask = _halves(np.random.default_rng(seed), strata, replications, share)
    if callable(method):
        name = getattr(method, "__name__", "callable")
        d_a, se_a, df_a, ok_a = _callable(method, arms, shift, mask, (unit_l, unit_u), same_half)
    else:
        name = method
        augmented, clustered = METHODS[method]
        clustered = clusters if clustered is None else clustered
        if clustered and not clusters:
            raise ValueError(f"method {method!r} is cluster-robust: audit it with clusters=True "
                             "(a session split would put one user's labels in both halves)")
        opts = {"weighted": weighted, "small_sample": small_sample, "lam_mode": lam_mode,
                "alpha": alpha}
        d_a, se_a, df_a, ok_a = _builtin(arms, clustered, augmented, mask, (unit_l, unit_u),
                                         "sessions" if same_half else "labels", opts)
    d_b, se_b, df_b, ok_b = _builtin(arms, clusters, False, ~mask, (unit_l, unit_u), "labels",
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


def labeled_unlabeled_consistency(
    control: object,
    treatment: object,
    *,
    clusters: bool = True,
    alpha: float = 0.05,
    replications: int = 200,
    hide_share: float = 0.5,
    seed: int = 0,
    small_sample: bool = True,
    lam_mode: str = "joint",
) -> ConsistencyCheck:
    """Labeled-vs-unlabeled consistency check (the former "calibrated coverage").

    Args:
        control: Control arm (:class:`ArmArrays` or any object with its attributes).
        treatment: Treatment arm.
        clusters: Hide whole users (True) or single sessions.
        alpha: Level of the intervals.
        replications: Random hidings.
        hide_share: Share of labeled units hidden per replication, in (0, 1).
        seed: Seed of the hidings.
        small_sample: As in :func:`compare_arms`.
        lam_mode: As in :func:`compare_arms`.

    Returns:
        The pass rates of the nested (Hausman-type) comparison; see the module docstring for
        what they can and cannot detect.
    """
    if not 0.0 < hide_share < 1.0:
        raise ValueError(f"hide_share must be in (0, 1), got {hide_share}")
    arms, _ = _prepare(control, treatment)
    weighted = any(not np.all(arm["w"] == 1.0) for arm in arms)
    unit_l, _, strata = _units(arms, clusters)
    base, diff = _unit_diffs(arms, clusters, unit_l, None, strata.size, "hide")
    rng = np.random.default_rng(seed)
    labeled = np.flatnonzero(strata > 0)
    n_hide = int(round(hide_share * labeled.size))
    kept = np.ones((replications, strata.size), dtype=bool)
    ranks = rng.random((replications, labeled.size)).argsort(axis=1).argsort(axis=1)
    kept[:, labeled] = ranks >= n_hide
    kw = {"weighted": weighted, "small_sample": small_sample, "lam_mode": lam_mode,
          "clustered": clusters, "alpha": alpha}
    full = engine.solve(_masked(base, diff, np.ones((1, strata.size), dtype=bool)), **kw)
    sub = engine.solve(_masked(base, diff, kept), **kw)
    rates = {}
    for key, eff, se, df in (("naive", "naive_effect", "naive_se", "naive_df"),
                             ("aug", "aug_effect", "aug_se", "aug_df")):
        spread = np.sqrt(np.clip(getattr(sub, se) ** 2 - getattr(full, se)[0] ** 2, 0, None))
        q = engine.quantile(alpha, getattr(sub, df))
        rates[key] = np.abs(getattr(sub, eff) - getattr(full, eff)[0]) <= q * spread
    rate_a = float(rates["aug"].mean())
    return ConsistencyCheck(
        rate_naive=float(rates["naive"].mean()), rate_augmented=rate_a,
        mc_se_augmented=float(np.sqrt(rate_a * (1 - rate_a) / replications)),
        hide_share=hide_share, replications=replications,
        per_replication=pd.DataFrame({"naive_effect": sub.naive_effect,
                                      "naive_se": sub.naive_se, "aug_effect": sub.aug_effect,
                                      "aug_se": sub.aug_se}),
    )
