"""Anytime-valid monitoring of an A/B effect at every look: the tidy table and stopping looks."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import numpy as np
import pandas as pd
from numpy.typing import ArrayLike, NDArray

from pulse_ml.errors import PulseError
from pulse_ml.stats import effect_engine
from pulse_ml.stats.ppi import z_two_sided
from pulse_ml.stats.sequential.boundary import _mixture_c
from pulse_ml.stats.sequential.engine import look_moments
from pulse_ml.stats.sequential.small_sample import (
    effective_units,
    t_multiplier,
    within_window_effects,
)
from pulse_ml.stats.sequential.stops import ESTIMATORS, stops_table

F64 = NDArray[np.float64]


TABLE_COLUMNS = [
    "look",
    "estimator",
    "n_labeled",
    "n_unlabeled",
    "units_control",
    "units_treatment",
    "effect",
    "se",
    "df",
    "ci_lower",
    "ci_upper",
    "cs_lower",
    "cs_upper",
    "lambda_control",
    "lambda_treatment",
    "eff_units_control",
    "eff_units_treatment",
    "window_effect",
    "time_shift",
]


@dataclass(frozen=True)
class MonitorResult:
    """Every look of one (or several) A/B tests, naive and PPI++.

    Attributes:
        table: One row per (group x) look x estimator, in that order. Columns: ``group`` (only
            when groups were given), ``look`` (0-based), ``estimator`` ('naive'/'augmented'),
            ``n_labeled``, ``n_unlabeled`` (sessions visible at the look, both arms;
            ``n_labeled`` is the sequence's clock t), ``units_control``, ``units_treatment``
            (labeled users per arm, or labeled sessions without users), ``effect`` (treatment -
            control), ``se``, ``df`` (of the t quantile), ``ci_lower``/``ci_upper``
            (fixed-horizon interval, exactly ``infer``'s on the data so far),
            ``cs_lower``/``cs_upper`` (anytime-valid sequence), ``lambda_control``,
            ``lambda_treatment`` (0 for naive), ``eff_units_control``, ``eff_units_treatment``
            (Kish effective labeled users per arm), ``window_effect`` (the effect with look
            windows weighted by their sessions) and ``time_shift`` (PPI++: the part of the
            effect from labeled and unlabeled sessions in different windows; 0 for naive; see
            :mod:`~pulse_ml.stats.sequential.small_sample`). NaN where undefined (an arm with
            < 2 labels or, clustered, < 2 users); intervals NaN before ``min_units_per_arm``.
        stops: One row per (group x) estimator x band ('sequence' or 'fixed'): the first look
            at which the band excludes 0. Columns ``conclusive`` (bool), ``look``,
            ``n_labeled``, ``n_unlabeled`` (Int64, NA when never), ``effect``, ``lower``,
            ``upper`` at that look (NaN when never).
        alpha: Error level of intervals and sequences.
        target_labels: t* per group (labeled sessions at which the sequence is tightest).
        clustered: Whether variances are cluster-robust by user.
        lambda_rule: 'arm' or 'joint'.
        burn_in_look: Per group, the first look (0-based) with intervals (each arm has
            ``min_units_per_arm`` labeled units).
    """

    table: pd.DataFrame
    stops: pd.DataFrame
    alpha: float
    target_labels: F64
    clustered: bool
    lambda_rule: str
    burn_in_look: NDArray[np.int64]


def _fail(msg: str) -> PulseError:
    return PulseError(f"monitor: {msg}")


def look_table(cols: dict[str, list], group_values: NDArray | None, n_groups: int,
               n_looks: int) -> pd.DataFrame:
    """The per-look table: one row per (group, look, estimator) from per-estimator columns.

    Args:
        cols: Column name -> one (n_groups * n_looks,) array per estimator (in ESTIMATORS order).
        group_values: Group labels (None: no ``group`` column).
        n_groups: Number of groups.
        n_looks: Number of looks.

    Returns:
        The table, counts as int64.
    """
    data: dict[str, object] = {}
    if group_values is not None:
        data["group"] = np.repeat(group_values, n_looks * 2)
    data["look"] = np.tile(np.repeat(np.arange(n_looks), 2), n_groups)
    data["estimator"] = np.tile(np.array(ESTIMATORS, dtype=object), n_groups * n_looks)
    for k, parts in cols.items():
        data[k] = np.column_stack(parts).reshape(-1)
    table = pd.DataFrame(data)
    for k in ("n_labeled", "n_unlabeled", "units_control", "units_treatment"):
        table[k] = table[k].round().astype(np.int64)
    return table


def refuse_unready(ready: NDArray, shape: tuple[int, int], group_values: NDArray | None,
                   clustered: bool, min_units_per_arm: int) -> None:
    """Refuse when a group's arms lack ``min_units_per_arm`` labeled units at its last look."""
    last_ok = ready.reshape(shape)[:, -1]
    if not last_ok.all():
        bad = np.flatnonzero(~last_ok)[:5]
        names = bad.tolist() if group_values is None else group_values[bad].tolist()
        where = "" if group_values is None else f" (groups {names})"
        raise _fail(f"each arm needs at least {min_units_per_arm} labeled "
                    f"{'users' if clustered else 'sessions'} by the last look{where}; "
                    "monitor later, or lower min_units_per_arm")


def _int_codes(x: ArrayLike, name: str, n: int) -> tuple[NDArray[np.int64], NDArray]:
    arr = np.asarray(x)
    if arr.ndim != 1 or arr.size != n:
        raise ValueError(f"{name} has shape {arr.shape} but there are {n} sessions")
    if pd.isna(arr).any():
        bad = np.flatnonzero(pd.isna(arr))[:5].tolist()
        raise _fail(f"{name} must not be missing (rows {bad})")
    codes, uniques = pd.factorize(arr, sort=True)
    return codes.astype(np.int64), np.asarray(uniques)


def _prepare(
    arm: ArrayLike,
    labeled: ArrayLike,
    rating: ArrayLike,
    prediction: ArrayLike,
    look: ArrayLike,
    n_looks: int,
) -> tuple[NDArray[np.int64], NDArray[np.bool_], F64, F64, NDArray[np.int64]]:
    if isinstance(n_looks, bool) or not isinstance(n_looks, int | np.integer) or n_looks < 1:
        raise _fail(f"n_looks must be a positive integer, got {n_looks!r}")
    a = np.asarray(arm)
    n = a.size
    if a.ndim != 1 or n == 0:
        raise _fail(f"arm must be a non-empty 1-D array, got shape {a.shape}")
    arrays = {"labeled": labeled, "rating": rating, "prediction": prediction, "look": look}
    for name, v in arrays.items():
        shape = np.shape(v)
        if shape != (n,):
            raise ValueError(f"{name} has shape {shape} but arm has {n} sessions")
    if a.dtype == bool:
        a = a.astype(np.int64)
    bad = np.flatnonzero(~np.isin(a, (0, 1)))
    if bad.size:
        raise _fail(f"arm must be 0 (control) or 1 (treatment); rows {bad[:5].tolist()} are not")
    lab = np.asarray(labeled)
    if lab.dtype != bool:
        if not np.isin(lab, (0, 1)).all():
            raise _fail("labeled must be a boolean mask")
        lab = lab.astype(bool)
    y = np.asarray(rating, dtype=np.float64)
    bad = np.flatnonzero(lab & ~np.isfinite(y))
    if bad.size:
        raise _fail(f"labeled sessions need a finite rating; rows {bad[:5].tolist()} have none")
    f = np.array(prediction, dtype=np.float64)  # a copy: it is shifted in place later
    bad = np.flatnonzero(~np.isfinite(f))
    if bad.size:
        raise _fail(f"predictions must be finite; rows {bad[:5].tolist()} are not")
    lk = np.asarray(look)
    if lk.dtype.kind not in "iu":
        if lk.dtype.kind != "f" or not np.all(np.isfinite(lk)) or np.any(lk != np.round(lk)):
            raise _fail("look must hold integer look indices")
    lk = lk.astype(np.int64)
    bad = np.flatnonzero((lk < 0) | (lk >= n_looks))
    if bad.size:
        raise _fail(
            f"look indices must be in [0, {n_looks - 1}]; rows {bad[:5].tolist()} are outside"
        )
    return a.astype(np.int64), lab, np.where(lab, y, 0.0), f, lk


def monitor_effect(
    arm: ArrayLike,
    labeled: ArrayLike,
    rating: ArrayLike,
    prediction: ArrayLike,
    look: ArrayLike,
    n_looks: int,
    users: ArrayLike | None = None,
    alpha: float = 0.05,
    target_look: int | None = None,
    target_labels: float | ArrayLike | None = None,
    lambda_rule: Literal["joint", "arm"] = "joint",
    min_units_per_arm: int = 10,
    groups: ArrayLike | None = None,
    horizon: float | None = None,
    look_times: ArrayLike | None = None,
) -> MonitorResult:
    """Naive and PPI++ effect, fixed interval and anytime-valid sequence at every look at once.

    Every look's numbers come from :func:`pulse_ml.stats.effect_engine.solve` (the engine of
    ``infer``) on the moments of the sessions visible by then (:func:`look_moments`): the fixed
    interval is ``infer``'s small-sample interval (t quantile with df from the labeled
    clusters, ddof 1 / CR1, lambda-tuning inflation); the sequence is ``effect -/+ m(t) se``
    with the same se and the Gaussian-mixture multiplier on the t scale of the look's df
    (:func:`~pulse_ml.stats.sequential.small_sample.t_multiplier`; module Notes). Cost: one
    sort and a few bincounts over the sessions plus one pair of 10-column matrix products per
    look; 10^6 sessions x 30 looks take about a second (``perf/monitor_bench.py``). Sessions
    may come in any order.

    Args:
        arm: Per session 0 (control) or 1 (treatment), shape (n,).
        labeled: Boolean mask of rated sessions.
        rating: Rating of labeled sessions (ignored, e.g. NaN, for unlabeled ones).
        prediction: Honest prediction for every session (out-of-fold for sessions the model was
            trained on, or from a model trained before the test). In-sample predictions make
            the sequence invalid.
        look: First look (0-based) at which the session is visible.
        n_looks: Number of looks K so far; looks are ``0 .. K-1``.
        users: Optional cluster (user) ids, any hashable values (integer codes are fastest).
            Given, variances are cluster-robust (CR1).
        alpha: Error level of the fixed intervals and of the sequence (uniformly over looks).
        target_look: Look at which the sequence should be tightest (default: the last look,
            ``K-1``). It may lie beyond the data (a planned calendar): t* is then extrapolated
            as ``labels at K-1 * (target_look + 1) / K``.
        target_labels: t* in labeled sessions (both arms), fixed in advance; overrides
            ``target_look`` and ``horizon``. A scalar, or one value per group (sorted order).
        lambda_rule: 'joint' minimizes the effect's variance over both lambdas (cross term of
            users in both arms; ``compare_arms``'s default), 'arm' takes each arm's own
            optimum (``lam_mode='per_arm'``); they agree when no user is in both arms.
        min_units_per_arm: Intervals and sequences start at the first look at which each arm has
            this many labeled units (labeled users when clustered, labeled sessions otherwise);
            the asymptotics do not hold before (module Notes). At least 2.
        groups: Optional case-study (or replication) ids: every group is monitored on its own,
            in the same pass; the table and stops gain a ``group`` column.
        horizon: Planned length of the test in the units of ``look_times`` (used when neither
            ``target_labels`` nor ``target_look`` is given): t* = labels at the burn-in look
            (the first look with intervals) / its time x horizon. It depends only on the data
            up to the burn-in look, so a re-run with more data keeps every earlier band.
        look_times: Time of each look since the start of the test (e.g. days), shape
            (n_looks,) or (n_groups, n_looks); default ``1..K``.

    Returns:
        The per-look table and the first conclusive look per estimator and band.

    Raises:
        PulseError: If an input is invalid, or if at the last look an arm of a group has fewer
            than ``min_units_per_arm`` labeled units (nothing can be monitored).

    Notes:
        Numbers at look k equal :func:`pulse_ml.stats.arm_effect.compare_arms` on the sessions
        with ``look <= k`` (``lam_mode`` from ``lambda_rule``); see the module
        docstring for the formulas, the clock t and the references (Waudby-Smith et al. 2024;
        Kilian, Cortinovis & Caron 2025).
    """
    z_two_sided(alpha)  # validates alpha
    arm_v, lab, y, f, lk = _prepare(arm, labeled, rating, prediction, look, n_looks)
    n = arm_v.size
    if lambda_rule not in ("joint", "arm"):
        raise _fail(f"lambda_rule must be 'joint' or 'arm', got {lambda_rule!r}")
    if (
        isinstance(min_units_per_arm, bool)
        or not isinstance(min_units_per_arm, int | np.integer)
        or min_units_per_arm < 2
    ):
        raise _fail(f"min_units_per_arm must be an integer >= 2, got {min_units_per_arm!r}")
    if groups is None:
        grp, group_values = np.zeros(n, dtype=np.int64), None
    else:
        grp, group_values = _int_codes(groups, "groups", n)
    n_groups = int(grp.max()) + 1
    # Shift ratings and predictions by constants per group: every estimate is invariant and the
    # sums of squares lose less precision.
    for v, mask in ((y, lab), (f, np.ones(n, dtype=bool))):
        cnt = np.bincount(grp[mask], minlength=n_groups)
        ref = np.bincount(grp[mask], weights=v[mask], minlength=n_groups) / np.maximum(cnt, 1)
        v -= np.where(mask, ref[grp], 0.0)
    codes = None if users is None else _int_codes(users, "users", n)[0]
    mom = look_moments(grp, codes, lk, arm_v, lab, y, f, n_groups, n_looks)
    res = effect_engine.solve(mom, small_sample=True, clustered=users is not None,
                              lam_mode="joint" if lambda_rule == "joint" else "per_arm",
                              alpha=alpha)  # the lambda share minimizes this level's width
    shape = (n_groups, n_looks)
    arm_units = res.g_lab
    valid = (res.n_lab.min(axis=1) >= 2) & (arm_units.min(axis=1) >= 2)
    ready = valid & (arm_units.min(axis=1) >= min_units_per_arm)
    refuse_unready(ready, shape, group_values, users is not None, min_units_per_arm)
    n_lab = res.n_lab.sum(axis=1)
    n_unl = res.n_unl.sum(axis=1)
    clock = n_lab.reshape(shape)
    t_star, k0 = _target(clock, ready.reshape(shape), n_looks, target_look, target_labels,
                         horizon, look_times)
    c = _mixture_c(alpha)
    tr = c * clock / t_star[:, None]
    with np.errstate(divide="ignore", invalid="ignore"):
        mult = np.sqrt(2.0 * (tr + 1.0) / tr * np.log(np.sqrt(tr + 1.0) / alpha)).reshape(-1)
    eff_units = effective_units(mom)
    *window_eff, time_shift = within_window_effects(mom, n_groups, n_looks, res.lam)
    window = dict(zip(ESTIMATORS, window_eff, strict=True))
    shifts = {"naive": np.zeros_like(time_shift), "augmented": time_shift}
    names_out = TABLE_COLUMNS[2:]
    cols: dict[str, list[F64]] = {k: [] for k in names_out}
    for name in ESTIMATORS:
        key = "naive" if name == "naive" else "aug"
        se = np.where(valid, getattr(res, f"{key}_se"), np.nan)
        se = np.where(se > 0, se, np.nan)
        df = np.where(np.isfinite(se), getattr(res, f"{key}_df"), np.nan)
        q = effect_engine.quantile(alpha, np.where(np.isfinite(df), df, np.inf))
        eff = np.where(valid, getattr(res, f"{key}_effect"), np.nan)
        lam = res.lam if name == "augmented" else np.zeros_like(res.lam)
        lam = np.where(valid[:, None], lam, np.nan)
        se_i = np.where(ready, se, np.nan)
        m_t = t_multiplier(mult, np.where(np.isfinite(df), df, np.inf))  # small_sample.py
        for k, v in (
            ("n_labeled", n_lab),
            ("n_unlabeled", n_unl),
            ("units_control", arm_units[:, 0]),
            ("units_treatment", arm_units[:, 1]),
            ("effect", eff),
            ("se", se),
            ("df", df),
            ("ci_lower", eff - q * se_i),
            ("ci_upper", eff + q * se_i),
            ("cs_lower", eff - m_t * se_i),
            ("cs_upper", eff + m_t * se_i),
            ("lambda_control", lam[:, 0]),
            ("lambda_treatment", lam[:, 1]),
            ("eff_units_control", eff_units[:, 0]),
            ("eff_units_treatment", eff_units[:, 1]),
            ("window_effect", np.where(valid, window[name], np.nan)),
            ("time_shift", np.where(valid, shifts[name], np.nan)),
        ):
            cols[k].append(v)
    table = look_table(cols, group_values, n_groups, n_looks)
    return MonitorResult(
        table=table,
        stops=stops_table(table, group_values, n_groups, n_looks),
        alpha=float(alpha),
        target_labels=t_star,
        clustered=users is not None,
        lambda_rule=lambda_rule,
        burn_in_look=k0,
    )


def _target(
    clock: F64,
    ready: NDArray[np.bool_],
    n_looks: int,
    target_look: int | None,
    target_labels: float | ArrayLike | None,
    horizon: float | None,
    look_times: ArrayLike | None,
) -> tuple[F64, NDArray[np.int64]]:
    """t* per group and the burn-in look (first look with intervals) per group.

    Given ``target_labels``; else the labels at ``target_look`` (extrapolated beyond the data);
    else, with a ``horizon``, the label rate up to the burn-in look times the horizon (data
    after the burn-in look never move it); else the labels at the last look.
    """
    n_groups = clock.shape[0]
    k0 = np.argmax(ready, axis=1).astype(np.int64)
    if target_labels is not None:
        given = np.asarray(target_labels, dtype=np.float64)
        if given.ndim > 1 or given.size not in (1, n_groups):
            raise _fail(f"target_labels needs one value or one per group ({n_groups})")
        t_star = np.broadcast_to(given.reshape(-1), (n_groups,)).copy()
    elif target_look is not None or horizon is None:
        tl = n_looks - 1 if target_look is None else target_look
        if isinstance(tl, bool) or not isinstance(tl, int | np.integer) or tl < 0:
            raise _fail(f"target_look must be a look index >= 0, got {target_look!r}")
        if tl < n_looks:
            t_star = clock[:, tl].astype(np.float64)
        else:
            t_star = clock[:, -1] * (tl + 1.0) / n_looks
    else:
        if not np.isfinite(horizon) or horizon <= 0:
            raise _fail(f"horizon must be > 0, got {horizon!r}")
        times = (np.arange(1.0, n_looks + 1.0) if look_times is None
                 else np.asarray(look_times, dtype=np.float64))
        times = np.broadcast_to(times, clock.shape)
        at = times[np.arange(n_groups), k0]
        if not (np.isfinite(at) & (at > 0)).all():
            raise _fail("look_times must be positive (time since the start of each test)")
        t_star = clock[np.arange(n_groups), k0] * float(horizon) / at
    if not (np.isfinite(t_star) & (t_star > 0)).all():
        raise _fail("the target has no labeled session; choose a later target_look")
    return t_star, k0
