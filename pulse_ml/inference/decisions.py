"""From a case study's effects to its decision: checks, guardrails and the rule, per treatment.

:func:`decide_study` runs the checks before any effect is read (sample-ratio mismatch against
the declared ``split``, rating rate and rated users per arm, overlapping ``started_at`` ranges),
the guardrails (cluster-robust intervals of fully observed session columns) and the rule of
:mod:`pulse_ml.inference.decision_rule`; :func:`decision_lines` is the terminal view.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd

from pulse_ml import keys
from pulse_ml.errors import PulseError
from pulse_ml.inference.decision_rule import (
    RULE_TEXT,
    GuardrailCheck,
    Success,
    Verdict,
    decide,
)
from pulse_ml.sessions.case_studies import CaseStudy
from pulse_ml.sessions.declarations import Guardrail
from pulse_ml.sessions.table import TIME_COLUMN, SessionTable
from pulse_ml.stats.arm_effect import ArmComparison
from pulse_ml.stats.decision_stats import SRM_ALPHA, cluster_mean_diff, srm_test

__all__ = ["RULE_TEXT", "check_guardrail_columns", "decide_all", "decide_study",
           "decision_lines", "decision_tags", "json_safe"]


def check_guardrail_columns(table: SessionTable, studies: Sequence[CaseStudy]) -> None:
    """Refuse a guardrail column that the table lacks or that is not numeric (or 0/1).

    Raises:
        PulseError: naming the file, the case study, the key and the fix.
    """
    frame = table.frame
    for study in studies:
        for g in study.guardrails:
            key = f"case study '{study.name}': guardrails.{g.column}"
            fix = (f"Fix the column name in conf/catalog/case_studies/{study.name}.yaml (or "
                   f"declare.{study.name}.guardrails) or add the column to the data.")
            if g.column not in frame.columns:
                raise PulseError(f"{table.path}: {key}: no column '{g.column}' in the session "
                                 f"table. {fix}")
            col = frame[g.column]
            if not (pd.api.types.is_numeric_dtype(col) or pd.api.types.is_bool_dtype(col)):
                raise PulseError(f"{table.path}: {key}: column '{g.column}' is not numeric "
                                 f"(dtype {col.dtype}); a guardrail is a number or 0/1 per "
                                 f"session. {fix}")


def _kind(values: np.ndarray) -> str:
    return "0/1" if np.isin(values, (0.0, 1.0)).all() else "numeric"


def _guardrail(frame: pd.DataFrame, masks: tuple[np.ndarray, np.ndarray], codes: np.ndarray,
               g: Guardrail, alpha: float) -> tuple[dict, GuardrailCheck | None]:
    col = pd.to_numeric(frame[g.column], errors="coerce").to_numpy(float)
    ok = np.isfinite(col)
    (mc, mt) = masks
    row = {"column": g.column, "better": g.better, "margin": g.margin, "relative": g.relative}
    if not (mc & ok).any() or not (mt & ok).any():
        return {**row, "kind": None, "passed": None,
                "note": "no value in an arm: the guardrail cannot be checked"}, None
    try:
        d = cluster_mean_diff(col[mc & ok], codes[mc & ok], col[mt & ok], codes[mt & ok],
                              relative=g.relative)
    except ValueError as exc:  # relative change of a control mean of 0
        return {**row, "kind": None, "passed": None, "note": str(exc)}, None
    lo, hi = d.interval(alpha)
    missing = int((mc & ~ok).sum() + (mt & ~ok).sum())
    sign = -1.0 if g.better == "lower" else 1.0
    row.update(kind=_kind(col[(mc | mt) & ok]), mean_control=d.mean_control,
               mean_treatment=d.mean_treatment, effect=d.effect, ci_lower=lo, ci_upper=hi,
               n_missing=missing, note=f"{missing} session(s) without a value left out"
               if missing else "")
    return row, GuardrailCheck(g.column, sign * d.effect, d.se, -g.margin)


def _rates(frame: pd.DataFrame, arms: dict[str, np.ndarray], labeled: np.ndarray,
           codes: np.ndarray, control: str) -> tuple[dict, dict, list[str]]:
    """Share of sessions rated and of users who rated, per arm; mismatches vs the control."""
    rate, users, warnings = {}, {}, []
    per_user = {}
    for cond, mask in arms.items():
        rate[cond] = float(labeled[mask].mean()) if mask.any() else float("nan")
        u = pd.Series(labeled[mask]).groupby(codes[mask]).any()
        per_user[cond] = u.to_numpy(float)
        users[cond] = float(u.mean()) if len(u) else float("nan")
    mc = arms[control]
    for cond, mask in arms.items():
        if cond == control or not mask.any() or not mc.any():
            continue
        d = cluster_mean_diff(labeled[mc].astype(float), codes[mc], labeled[mask].astype(float),
                              codes[mask])
        du = cluster_mean_diff(per_user[control], None, per_user[cond], None)
        if min(d.p_value(), du.p_value()) < SRM_ALPHA:
            warnings.append(
                f"rating-rate mismatch: {rate[cond]:.1%} of '{cond}' sessions were rated vs "
                f"{rate[control]:.1%} of '{control}' (p = {d.p_value():.2g}); users who rated: "
                f"{users[cond]:.1%} vs {users[control]:.1%} (p = {du.p_value():.2g}). Who stays "
                "to rate differs between arms, so raters may not represent the arm: the "
                "effect is about raters unless reweight=true (weights raters by 1 / P(rated | "
                "features)) corrects it, or rating requests are made actively at random.")
    return rate, users, warnings


def _time_checks(frame: pd.DataFrame, arms: dict[str, np.ndarray],
                 control: str) -> tuple[list[str], float | None]:
    """Warnings for arms whose ``started_at`` ranges do not overlap, and the days elapsed."""
    if TIME_COLUMN not in frame.columns:
        return [], None
    t = frame[TIME_COLUMN]
    spans = {c: (t[m].min(), t[m].max()) for c, m in arms.items() if m.any()}
    spans = {c: s for c, s in spans.items() if not (pd.isna(s[0]) or pd.isna(s[1]))}
    if control not in spans:
        return [], None
    warnings = []
    c0, c1 = spans[control]
    for cond, (a, b) in spans.items():
        if cond != control and (b < c0 or a > c1):
            warnings.append(f"'{cond}' ran {a:%Y-%m-%d}..{b:%Y-%m-%d} and '{control}' "
                            f"{c0:%Y-%m-%d}..{c1:%Y-%m-%d}: the arms did not run at the same "
                            "time, so the effect mixes the change with the calendar.")
    lo = min(s[0] for s in spans.values())
    hi = max(s[1] for s in spans.values())
    return warnings, max((hi - lo).total_seconds() / 86400.0, 1.0)


def _srm_unit(study: CaseStudy, arms: dict[str, np.ndarray], codes: np.ndarray) -> str:
    """What the SRM check counts: the randomized unit (declared, else inferred).

    Users when declared (``randomization_unit: user``) or when no user has sessions in two
    arms (then users were most likely assigned: counting their sessions would flag the
    natural spread of sessions per user); sessions otherwise.
    """
    if study.randomization_unit == "session":
        return "session"
    seen = np.zeros(int(codes.max()) + 1 if codes.size else 0, dtype=np.int64)
    for mask in arms.values():
        seen[np.unique(codes[mask])] += 1
    return "session" if (seen > 1).any() else "user"  # a declared user unit needs it too


def decide_study(table: SessionTable, study: CaseStudy, comparisons: Sequence[ArmComparison],
                 alpha: float, valid: bool = True, codes: np.ndarray | None = None) -> list[dict]:
    """Checks, guardrails and the decision of each treatment of one case study.

    Args:
        table: The validated session table.
        study: The case study (all its treatments).
        comparisons: The rating comparison of each treatment vs control (in
            ``study.all_treatments`` order).
        alpha: Error level of the intervals.
        valid: Whether the intervals are valid (``False`` for in-sample predictions).
        codes: User codes of the table's rows (default: factorized ``user_id``).

    Returns:
        One record per treatment (the items of ``decisions.json``).
    """
    frame = table.frame
    if codes is None:
        codes = pd.factorize(frame["user_id"])[0]
    in_study = (frame["case_study"] == study.name).to_numpy()
    cond = frame["condition"].to_numpy()
    arms = {c: in_study & (cond == c) for c in study.arms}
    split = study.split
    unit = _srm_unit(study, arms, codes)
    units = ([int(m.sum()) for m in arms.values()] if unit == "session"
             else [int(np.unique(codes[m]).size) for m in arms.values()])
    srm = srm_test(units, None if split is None else [split[c] for c in arms])
    labeled = table.labeled
    rate, rated_users, rate_warnings = _rates(frame, arms, labeled, codes, study.control)
    time_warnings, days = _time_checks(frame, arms, study.control)
    invalid = []
    if srm.flagged:
        planned = "the declared split" if split else "equal shares (no split declared)"
        invalid.append(
            f"sample-ratio mismatch: {unit}s per arm "
            f"{', '.join(f'{c} {n:,}' for c, n in zip(arms, srm.counts, strict=True))} differ "
            f"from {planned} (chi-square p = {srm.p_value:.2g} < {SRM_ALPHA:g}); find why "
            "(assignment, logging, crashes) before reading any effect")
    if not valid:
        invalid.append("the intervals are not valid (in-sample predictions)")
    bound = 0.0 if study.rule == "superiority" else -float(study.margin or 0.0)
    successes = [Success(c.augmented.effect, c.augmented.se, c.augmented.df, bound)
                 for c in comparisons]
    rows, checks = [], []
    for t in study.all_treatments:
        pairs = [_guardrail(frame, (arms[study.control], arms[t]), codes, g, alpha)
                 for g in study.guardrails]
        rows.append([p[0] for p in pairs])
        nan = float("nan")  # a guardrail that cannot be checked blocks ship (decision_rule)
        checks.append([p[1] or GuardrailCheck(g.column, nan, nan, -g.margin)
                       for p, g in zip(pairs, study.guardrails, strict=True)])
    verdicts = decide(successes, checks, alpha, days, invalid)
    out = []
    for t, c, v, g_rows in zip(study.all_treatments, comparisons, verdicts, rows, strict=True):
        for row in g_rows:
            row["passed"] = v.guardrail_passed.get(row["column"], row.get("passed"))
        rec = _record(study, t, c, v, g_rows, srm, rate, rated_users,
                      [*rate_warnings, *time_warnings])
        out.append({**rec, "srm_unit": unit})
    return out


def _record(study: CaseStudy, treatment: str, c: ArmComparison, v: Verdict, guardrails: list,
            srm, rate: dict, rated_users: dict, warnings: list[str]) -> dict:
    return {
        "case_study": study.name, "control": study.control, "treatment": treatment,
        "decision": v.decision, "reasons": v.reasons, "warnings": warnings,
        "rule": study.rule, "margin": study.margin, "estimator": "augmented",
        "effect": c.augmented.effect, "ci_lower": v.ci[0], "ci_upper": v.ci[1],
        "ci_level": 1.0 - v.level, "holm_p_value": v.holm_p,
        "n_treatments": len(study.all_treatments),
        "srm_p_value": srm.p_value, "sessions": dict(zip(study.arms, srm.counts, strict=True)),
        "split": dict(study.split) if study.split else None,
        "rating_rate": rate, "rated_users": rated_users, "guardrails": guardrails,
        "expected_days": v.expected_days,
    }


def decision_lines(records: Sequence[dict]) -> list[str]:
    """The terminal view: one line per treatment (<= 100 columns), then its reasons."""
    if not records:
        return []
    lines = []
    level = records[0]["ci_level"]
    head = f"{'case_study':<20} {'treatment':<18} {'decision':<15} PPI++ effect [CI]"
    lines.append(f"decisions (rule per case study; {100 * level:g}% CI unless Holm-adjusted):")
    lines.append(head)
    for r in records:
        rule = "NI" if r["rule"] == "non_inferiority" else "sup"
        lines.append(f"{r['case_study'][:20]:<20} {r['treatment'][:18]:<18} "
                     f"{r['decision']:<15} {r['effect']:+.3f} [{r['ci_lower']:+.3f}, "
                     f"{r['ci_upper']:+.3f}] {rule}"[:100])
    for r in records:
        for reason in (*r["reasons"], *r["warnings"]):
            lines.append(f"  {r['case_study']}/{r['treatment']}: {reason}")
    return lines


def decide_all(table: SessionTable, comparisons: Sequence[tuple[CaseStudy, ArmComparison]],
               alpha: float, valid: bool = True) -> list[dict]:
    """:func:`decide_study` for every case study of ``table`` (variants in declared order).

    Args:
        table: The validated session table.
        comparisons: ``(two-arm variant, its comparison)`` per analysed treatment.
        alpha: Error level of the intervals.
        valid: Whether the intervals are valid.
    """
    codes = pd.factorize(table.frame["user_id"])[0]
    out = []
    for study in table.case_studies:
        mine = {v.treatment: c for v, c in comparisons if v.name == study.name}
        if set(mine) != set(study.all_treatments):
            continue  # not analysed (not selected)
        out += decide_study(table, study, [mine[t] for t in study.all_treatments], alpha,
                            valid, codes)
    return out


def decision_tags(records: Sequence[dict]) -> dict[str, str]:
    """MLflow tags ``decision.<case_study>`` (``.<treatment>`` with several treatments).

    Names MLflow refuses in a key are made safe as metric keys are
    (:func:`pulse_ml.names.metric_key`); ``decisions.json`` keeps them verbatim.
    """
    from pulse_ml.names import metric_key

    out = {}
    for r in records:
        name = f"{keys.DECISION}.{r['case_study']}"
        name += f".{r['treatment']}" if r["n_treatments"] > 1 else ""
        out[metric_key(name)] = r["decision"]
    return out


def json_safe(value):
    """``value`` with NaN floats as ``None`` and numpy scalars as Python ones (for JSON)."""
    if isinstance(value, dict):
        return {str(k): json_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [json_safe(v) for v in value]
    if isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, float) and not np.isfinite(value):
        return None
    return value
