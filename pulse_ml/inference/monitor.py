"""Anytime-valid monitoring of every case study: looks, arrays and results from a session table.

Pure with respect to I/O: takes a validated :class:`SessionTable` and one honest prediction per
session (:func:`pulse_ml.inference.honest.honest_data`), builds the calendar of looks and the
per-session arrays, and calls :func:`pulse_ml.stats.sequential.monitor.monitor_effect` once for
all case studies (``groups``). The ``monitor`` job writes what this returns.

The calendar of looks (day numbers, dates, cutoffs) is in :mod:`.monitor_looks`; the terminal
view in :mod:`.monitor_text`.

Notes:
    The sequence's guarantee needs predictions that did not see the monitored ratings: the
    out-of-fold prediction for sessions the model was trained on, or a model trained on other
    sessions (``pulse-ml train trained_before=... exclude_case_studies=...``). Cross-fitted
    predictions depend weakly on the other folds' labels (later days included); as for
    cross-prediction-powered inference (Zrnic & Candes 2024) this vanishes asymptotically.
    The mixture target t* (labels at which the sequence is tightest) must not depend on data
    that arrive later, or each daily re-run would move it and redraw the bands of earlier days.
    It is fixed in advance with ``target_labels``, or (default) taken from the planned length
    of the test: ``horizon_days`` (21) times the label rate up to the burn-in look (the first
    look with intervals, when each arm has ``min_units_per_arm`` labeled users), so a run on
    day 9 and a run on day 21 show the same bands for days 1-9. Before the burn-in look the
    rows have effects but no intervals (NaN): an arm without labels before the first look is
    refused only when it still has too few by the last look.

References:
    I. Waudby-Smith et al. Time-uniform central limit theory and asymptotic confidence
    sequences. Annals of Statistics, 2024. A. Kilian, S. Cortinovis, F. Caron. Anytime-valid,
    Bayes-assisted, prediction-powered inference. arXiv:2505.18000, 2025. T. Zrnic, E. Candes.
    Cross-prediction-powered inference. PNAS, 2024.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from pulse_ml.errors import PulseError
from pulse_ml.inference.monitor_active import weigh_requested
from pulse_ml.inference.monitor_looks import DAY, LookSpec, MonitorData, iso, look_cutoffs
from pulse_ml.inference.monitor_warnings import (
    few_effective_users,
    joint_lambda_not_applied,
    time_drift,
)
from pulse_ml.sessions.case_studies import CaseStudy
from pulse_ml.sessions.table import (
    TIME_COLUMN,
    SessionTable,
    study_arms,
)
from pulse_ml.sessions.time_checks import require_plausible_times
from pulse_ml.stats.sequential.monitor import MonitorResult, monitor_effect

# Options of the ``lambda_rule`` setting (value -> meaning).
LAMBDA_RULES = {"joint": "both lambdas minimize the effect's variance (users in both arms), "
                          "then shrunk to the narrowest printed interval, as infer",
                "arm": "each arm's own optimum (no shrinking)"}
FRAME_COLUMNS = [
    "case_study", "look", "day", "at", "estimator", "n_labeled", "n_unlabeled", "effect", "se",
    "df", "ci_lower", "ci_upper", "cs_lower", "cs_upper", "lambda_control", "lambda_treatment",
    "eff_units_control", "eff_units_treatment", "time_shift",
]
STOP_COLUMNS = [
    "case_study", "estimator", "band", "conclusive", "look", "day", "at", "n_labeled",
    "n_unlabeled", "effect", "lower", "upper",
]


@dataclass(frozen=True)
class MonitorSettings:
    """How to monitor (validated by the ``monitor`` job).

    Attributes:
        alpha: Error level of the fixed intervals and of the sequences.
        clusters: Cluster-robust variances by ``user_id`` (as ``infer``).
        looks: The calendar of looks.
        horizon_days: Planned length of the test in days: the sequence is tightest at the
            labels expected by then, extrapolated from the label rate up to the burn-in look.
        target_labels: t* in labeled sessions (both arms), fixed in advance; overrides
            ``horizon_days``.
        lambda_rule: 'joint' or 'arm' (clustered mode).
        min_units_per_arm: No interval before each arm has this many labeled units (users when
            clustered).
        check_id_order: Refuse integer session ids whose start times go back in time.
        seed: Seed of the cross-fitting folds of case studies asked by varying
            ``request_prob`` (:mod:`pulse_ml.inference.monitor_active`).
    """

    alpha: float = 0.05
    clusters: bool = True
    looks: LookSpec = field(default_factory=LookSpec)
    horizon_days: float = 21.0
    target_labels: float | None = None
    lambda_rule: str = "joint"
    min_units_per_arm: int = 10
    check_id_order: bool = True
    seed: int = 0


@dataclass(frozen=True)
class Monitoring:
    """Everything ``pulse-ml monitor`` reports.

    Attributes:
        frame: One row per case study x look x estimator (:data:`FRAME_COLUMNS`).
        stops: First look at which each band excludes 0, per case study x estimator x band
            (:data:`STOP_COLUMNS`; ``band`` is 'sequence' or 'fixed').
        result: The raw :class:`MonitorResult` (padded looks included).
        data: The arrays and the calendar.
        target_labels: t* per case study.
        targets: Per case study, how t* was set (a sentence for the terminal and the files).
        notes: Things the user should know.
        warnings: Results to read with care (too few effective labeled users for the checked
            validity; a PPI++ effect shifted by labels that drift in time).
    """

    frame: pd.DataFrame
    stops: pd.DataFrame
    result: MonitorResult
    data: MonitorData
    target_labels: dict[str, float]
    targets: dict[str, str]
    notes: tuple[str, ...]
    warnings: tuple[str, ...] = ()


def _now(now: pd.Timestamp | None) -> pd.Timestamp:
    ts = pd.Timestamp.now(tz="UTC") if now is None else pd.Timestamp(now)
    return ts.tz_localize("UTC") if ts.tzinfo is None else ts.tz_convert("UTC")


def monitor_data(table: SessionTable, predictions: np.ndarray,
                 studies: Iterable[CaseStudy] | None = None,
                 settings: MonitorSettings | None = None,
                 now: pd.Timestamp | None = None) -> MonitorData:
    """Build the looks and the per-session arrays of the monitored case studies.

    Args:
        table: A validated session table with ``started_at``.
        predictions: One honest prediction per row of ``table.frame``.
        studies: Case studies to monitor (default: all of ``table``).
        settings: Calendar, clusters, burn-in (defaults of :class:`MonitorSettings`).
        now: The present, UTC (default: the clock); start times and looks after it are refused.

    Returns:
        The arrays and the calendar.

    Raises:
        DataError: ``started_at`` missing, empty, in the future, against the id order or far
            before the others (``sessions/time_checks.py``).
        PulseError: looks in the future, more than 1,000 daily looks, or an arm without enough
            labels by the last look.
    """
    settings = settings or MonitorSettings()
    studies = tuple(table.case_studies if studies is None else studies)
    if not studies:
        raise PulseError(f"{table.path}: no two-arm case study to monitor. Fill case_study/"
                         "condition for the sessions of each A/B test.")
    now = _now(now)
    require_plausible_times(table, [s.name for s in studies], now, settings.check_id_order,
                            settings.looks.daily)  # no session far before the others
    frame = table.frame
    preds = np.asarray(predictions, dtype=np.float64)
    if preds.shape != (len(frame),):
        raise ValueError(f"predictions have shape {preds.shape}, the table {len(frame)} rows")
    group_of, arm_of = study_arms(frame, studies)
    rows = np.flatnonzero(group_of >= 0)
    rows = rows[np.argsort(group_of[rows], kind="stable")]  # by case study, file order within
    times = pd.DatetimeIndex(frame[TIME_COLUMN].iloc[rows]).as_unit("us")
    micros = times.asi8
    bounds = np.searchsorted(group_of[rows], np.arange(len(studies) + 1))
    look = np.empty(rows.size, dtype=np.int64)
    firsts, cutoffs, dropped = [], [], []
    for g, study in enumerate(studies):
        lo, hi = bounds[g], bounds[g + 1]
        first = times[lo:hi].min().floor("D")
        cut = look_cutoffs(settings.looks, first, times[lo:hi].max(), now, study.name)
        look[lo:hi] = np.searchsorted(cut.as_unit("us").asi8, micros[lo:hi], side="right")
        n_out = int((look[lo:hi] >= len(cut)).sum())
        if n_out == hi - lo:
            raise PulseError(f"{table.path}: case study '{study.name}' has no session before "
                             f"its last look ({iso(cut[-1])}). Choose later looks.")
        firsts.append(first)
        cutoffs.append(cut)
        dropped.append(n_out)
    lengths = np.array([len(c) for c in cutoffs])
    keep = look < lengths[group_of[rows]]
    rows, look = rows[keep], look[keep]
    labeled = table.labeled[rows]
    user_codes = pd.factorize(frame["user_id"])[0] if settings.clusters else None
    data = MonitorData(
        arm=arm_of[rows], labeled=labeled,
        rating=np.where(labeled, frame["rating"].to_numpy(float)[rows], np.nan),
        prediction=preds[rows], look=look,
        users=None if user_codes is None else user_codes[rows].astype(np.int64),
        group=group_of[rows], rows=rows, studies=studies, first_day=tuple(firsts),
        cutoffs=tuple(cutoffs), dropped=tuple(dropped))
    _check_arms(table.path, data, settings)
    return data


def _check_arms(path: str, data: MonitorData, settings: MonitorSettings) -> None:
    """Refuse arms that cannot be monitored, naming the case study, arm and fix."""
    unit = "labeled users" if settings.clusters else "labeled sessions"
    problems = []
    for g, study in enumerate(data.studies):
        last_day = int(math.ceil((data.cutoffs[g][-1] - data.first_day[g]) / DAY))
        for role, a, cond in (("control", 0, study.control), ("treatment", 1, study.treatment)):
            m = (data.group == g) & (data.arm == a) & data.labeled
            units = (np.unique(data.users[m]).size if data.users is not None
                     else int(m.sum()))
            where = f"case study '{study.name}', {role} arm '{cond}'"
            if not m.any():
                problems.append(f"{where} has no labeled session by the last look (day "
                                f"{last_day}): there is nothing to monitor. Collect ratings, "
                                "choose later looks, or leave the case study out "
                                "(case_study=NAME).")
            elif units < settings.min_units_per_arm:
                problems.append(f"{where} has {units} {unit} by the last look (day {last_day}); "
                                f"intervals start at min_units_per_arm="
                                f"{settings.min_units_per_arm} per arm. Monitor later, or "
                                "lower min_units_per_arm (the asymptotics need tens).")
    if problems:
        raise PulseError(f"{path}: " + "\n  ".join(problems))


def look_days(data: MonitorData) -> np.ndarray:
    """Days from each case study's day 1 (midnight) to each look's cutoff, (studies, looks).

    Padded looks of shorter calendars continue by one day per look (never used: the burn-in
    look lies within each case study's own looks).
    """
    out = np.empty((len(data.studies), data.n_looks))
    for g, cut in enumerate(data.cutoffs):
        days = np.asarray((cut - data.first_day[g]) / DAY, dtype=np.float64)
        out[g, :days.size] = days
        out[g, days.size:] = days[-1] + np.arange(1, data.n_looks - days.size + 1)
    return out


def monitor(table: SessionTable, predictions: np.ndarray,
            settings: MonitorSettings | None = None,
            studies: Iterable[CaseStudy] | None = None,
            now: pd.Timestamp | None = None) -> Monitoring:
    """Naive and PPI++ effect, fixed interval and confidence sequence at every look.

    Args:
        table: A validated session table with ``started_at``.
        predictions: One honest prediction per row of ``table.frame``.
        settings: How to monitor.
        studies: Case studies (default: all of ``table``).
        now: The present (default: the clock).

    Returns:
        The per-look frame, the first conclusive looks, and the raw result.

    Raises:
        DataError: see :func:`monitor_data`.
        PulseError: see :func:`monitor_data`.

    Notes:
        All case studies in one :func:`monitor_effect` call (``groups``): cumulative sums, one
        pass over the sessions. Shorter calendars are padded to the longest and trimmed after:
        a padded look adds no session, so its numbers repeat the case study's last look and
        cannot be a first conclusive look.
    """
    settings = settings or MonitorSettings()
    data = monitor_data(table, predictions, studies, settings, now)
    days = look_days(data)
    result = monitor_effect(
        data.arm, data.labeled, data.rating, data.prediction, data.look, data.n_looks,
        users=data.users, alpha=settings.alpha, target_labels=settings.target_labels,
        horizon=settings.horizon_days, look_times=days,
        lambda_rule=settings.lambda_rule,  # type: ignore[arg-type]
        min_units_per_arm=settings.min_units_per_arm, groups=data.group)
    # case studies asked by varying request_prob: active PPI++ with predictable weights
    result, active_notes, active_warns, weighted = weigh_requested(table, data, result,
                                                                   settings, days)
    t_star = result.target_labels
    frame = _frame(result.table, data)
    stops = _stop_frame(result.stops, data)
    notes = [f"case study '{s.name}': {n} session(s) after the last look are left out."
             for s, n in zip(data.studies, data.dropped, strict=True) if n] + list(active_notes)
    targets = {}
    for g, study in enumerate(data.studies):
        if settings.target_labels is not None:
            targets[study.name] = (f"sequence tightest at {t_star[g]:.0f} labels (target_labels, "
                                   "fixed in advance)")
            continue
        k0 = int(result.burn_in_look[g])
        clock = result.table["n_labeled"].to_numpy()[(g * data.n_looks + k0) * 2]
        targets[study.name] = (
            f"sequence tightest at {t_star[g]:.0f} labels: the planned horizon of "
            f"{settings.horizon_days:g} days at the label rate up to the burn-in look "
            f"({clock} labels in {days[g, k0]:.4g} days, by {iso(data.cutoffs[g][k0])}); later "
            "data never move it")
    if (result.burn_in_look > 0).any():
        notes.append(f"intervals start at the burn-in look, when each arm has "
                     f"min_units_per_arm={settings.min_units_per_arm} labeled "
                     f"{'users' if settings.clusters else 'sessions'}; earlier looks show the "
                     "effect without intervals (NaN), and an arm still short of them at the "
                     "last look is refused.")
    return Monitoring(frame, stops, result, data,
                      {s.name: float(t) for s, t in zip(data.studies, t_star, strict=True)},
                      targets, tuple(notes),
                      tuple(few_effective_users(result, data, settings.clusters)
                            + time_drift(result, data, weighted)
                            + joint_lambda_not_applied(data, weighted, settings.lambda_rule)
                            + list(active_warns)))


def _calendar(data: MonitorData, group: np.ndarray, look: np.ndarray) -> tuple[list, list]:
    days, at = [], []
    for g, k in zip(group, look, strict=True):
        cut = data.cutoffs[g][k]
        days.append(int(math.ceil((cut - data.first_day[g]) / DAY)))
        at.append(iso(cut))
    return days, at


def _frame(table: pd.DataFrame, data: MonitorData) -> pd.DataFrame:
    lengths = np.array([len(c) for c in data.cutoffs])
    group = table["group"].to_numpy(dtype=np.int64)
    look = table["look"].to_numpy(dtype=np.int64)
    keep = look < lengths[group]
    sub = table.loc[keep].reset_index(drop=True)
    group, look = group[keep], look[keep]
    out = pd.DataFrame({"case_study": [data.studies[g].name for g in group], "look": look + 1})
    out["day"], out["at"] = _calendar(data, group, look)
    for col in FRAME_COLUMNS[4:]:
        out[col] = sub[col].to_numpy()
    return out


def _stop_frame(stops: pd.DataFrame, data: MonitorData) -> pd.DataFrame:
    group = stops["group"].to_numpy(dtype=np.int64)
    found = stops["conclusive"].to_numpy(dtype=bool)
    look = stops["look"].fillna(0).to_numpy(dtype=np.int64)
    days, at = _calendar(data, group, look)
    out = pd.DataFrame({
        "case_study": [data.studies[g].name for g in group],
        "estimator": stops["estimator"].to_numpy(), "band": stops["band"].to_numpy(),
        "conclusive": found,
        "look": pd.array(np.where(found, look + 1, 0), dtype="Int64"),
        "day": pd.array(np.where(found, days, 0), dtype="Int64"),
        "at": [a if f else None for a, f in zip(at, found, strict=True)],
    })
    out.loc[~found, ["look", "day"]] = pd.NA
    for col in ("n_labeled", "n_unlabeled", "effect", "lower", "upper"):
        out[col] = stops[col].to_numpy()
    return out


