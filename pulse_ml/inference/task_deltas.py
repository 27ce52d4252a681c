"""Human effect per task type (Delta_H) against benchmark deltas (Delta_B), paper Section 7.

A *benchmark comparison* (``conf/catalog/task_benchmarks/<name>.yaml``) lists, for one two-arm
case study,
rows of (task type, benchmark, Delta_H printed in the paper, Delta_B, session-table categories).
Delta_H is computed here per row as the PPI++ effect (treatment - control) on the sessions whose
category is one of the row's ``categories``, in stars and in % of the control arm's PPI++ mean.
The correlation between Delta_H and Delta_B across rows is Pearson's r with a percentile
bootstrap interval over rows (seeded, vectorized resampling).

The relative interval is the absolute interval divided by the control mean; it equals the
delta-method interval of ``mu_t / mu_c - 1`` up to a factor ``(mu_t / mu_c)^2`` (about 1) on the
control-variance term.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace

import numpy as np
import pandas as pd

from pulse_ml.errors import PulseError
from pulse_ml.inference.arm_data import arm_data
from pulse_ml.inference.effects import InferenceSettings, compare
from pulse_ml.inference.task_catalogue import (  # noqa: F401 - re-exported
    BenchmarkComparison,
    BenchmarkRow,
    comparison_from_mapping,
    load_comparisons,
)
from pulse_ml.sessions.case_studies import CaseStudy
from pulse_ml.sessions.table import SessionTable
from pulse_ml.stats.correlation import Correlation, pearson, pearson_bootstrap  # noqa: F401


@dataclass(frozen=True)
class SubsetEffect:
    """PPI++ effect on a subset of a case study's sessions (or why it was skipped)."""

    n_labeled_control: int
    n_labeled_treatment: int
    n_unlabeled_control: int
    n_unlabeled_treatment: int
    effect: float = math.nan
    ci_lower: float = math.nan
    ci_upper: float = math.nan
    control_mean: float = math.nan
    relative_pct: float = math.nan
    relative_ci_lower: float = math.nan
    relative_ci_upper: float = math.nan
    naive_effect: float = math.nan
    skipped: str = ""


def subset_effect(table: SessionTable, preds: np.ndarray, study: CaseStudy, mask: np.ndarray,
                  min_labeled: int, settings: InferenceSettings) -> SubsetEffect:
    """Naive and PPI++ effect of ``study`` restricted to the sessions in ``mask``.

    Args:
        table: Validated session table.
        preds: Honest prediction per session of ``table``.
        study: The case study (control, treatment).
        mask: Boolean mask over the table's rows (e.g. one task category).
        min_labeled: Minimum labeled sessions per arm; below it the subset is skipped.
        settings: Interval settings (alpha, clustering by user).

    Returns:
        The effect, or a :class:`SubsetEffect` whose ``skipped`` says why there is none.
    """
    frame = table.frame.loc[mask].reset_index(drop=True)
    sub = replace(table, frame=frame)
    f = preds[mask]
    in_study = (frame["case_study"] == study.name).to_numpy()
    lab = frame["rating"].notna().to_numpy()
    counts = []
    for cond in (study.control, study.treatment):
        arm = in_study & (frame["condition"] == cond).to_numpy()
        counts += [int((arm & lab).sum()), int((arm & ~lab).sum())]
    n_c, big_n_c, n_t, big_n_t = counts
    base = {"n_labeled_control": n_c, "n_labeled_treatment": n_t,
            "n_unlabeled_control": big_n_c, "n_unlabeled_treatment": big_n_t}
    if min(n_c, n_t) < min_labeled:
        return SubsetEffect(**base, skipped=f"fewer than {min_labeled} labeled sessions in an "
                            f"arm ({n_c} control, {n_t} treatment)")
    if min(big_n_c, big_n_t) < 1:
        return SubsetEffect(**base, skipped="an arm has no unlabeled session to predict")
    codes = pd.factorize(frame["user_id"])[0]
    try:
        c = compare(arm_data(sub, f, study, study.control, codes),
                    arm_data(sub, f, study, study.treatment, codes), settings)
    except PulseError as exc:
        return SubsetEffect(**base, skipped=str(exc))
    mu_c = c.mean_control_augmented
    scale = 100.0 / mu_c if mu_c > 0 else math.nan
    aug = c.augmented
    return SubsetEffect(**base, effect=aug.effect, ci_lower=aug.ci_lower, ci_upper=aug.ci_upper,
                        control_mean=mu_c, relative_pct=aug.effect * scale,
                        relative_ci_lower=aug.ci_lower * scale,
                        relative_ci_upper=aug.ci_upper * scale, naive_effect=c.naive.effect)


def category_effects(table: SessionTable, preds: np.ndarray, study: CaseStudy, column: str,
                     min_labeled: int, settings: InferenceSettings) -> pd.DataFrame:
    """One :func:`subset_effect` row per value of ``column`` among the study's sessions."""
    values = table.frame[column].astype(str)
    in_study = (table.frame["case_study"] == study.name).to_numpy()
    rows = []
    for value in sorted(values[in_study].unique()):
        eff = subset_effect(table, preds, study, (values == value).to_numpy(), min_labeled,
                            settings)
        rows.append({"comparison_case_study": study.name, "category": value, **eff.__dict__})
    return pd.DataFrame(rows)


def human_deltas(comparison: BenchmarkComparison, table: SessionTable, preds: np.ndarray,
                 study: CaseStudy, column: str, min_labeled: int,
                 settings: InferenceSettings) -> pd.DataFrame:
    """Computed Delta_H per row of ``comparison`` beside the paper's Delta_H and Delta_B.

    Returns:
        One row per task type with ``delta_h`` (relative %, NaN when skipped), its interval,
        the absolute effect, counts, ``used`` and a ``note`` for skipped rows.
    """
    values = table.frame[column].astype(str)
    present = set(values.unique())
    rows = []
    for row in comparison.rows:
        out = _row_base(comparison, row)
        unknown = [c for c in row.categories if c not in present]
        if not row.categories:
            out["note"] = f"no {column} value maps to this task type"
        elif len(unknown) == len(row.categories):
            out["note"] = f"{column} value(s) {', '.join(unknown)} not in the data"
        else:
            eff = subset_effect(table, preds, study, values.isin(row.categories).to_numpy(),
                                min_labeled, settings)
            out.update({"delta_h": eff.relative_pct, "delta_h_ci_lower": eff.relative_ci_lower,
                        "delta_h_ci_upper": eff.relative_ci_upper, "effect": eff.effect,
                        "effect_ci_lower": eff.ci_lower, "effect_ci_upper": eff.ci_upper,
                        "n_labeled_control": eff.n_labeled_control,
                        "n_labeled_treatment": eff.n_labeled_treatment,
                        "n_unlabeled_control": eff.n_unlabeled_control,
                        "n_unlabeled_treatment": eff.n_unlabeled_treatment,
                        "used": not eff.skipped, "note": eff.skipped})
        rows.append(out)
    return pd.DataFrame(rows)


def paper_deltas(comparison: BenchmarkComparison) -> pd.DataFrame:
    """The comparison's own columns: Delta_H = the paper's printed value for every row."""
    rows = []
    for row in comparison.rows:
        out = _row_base(comparison, row)
        out["delta_h"] = row.delta_h_paper
        out["used"] = not math.isnan(row.delta_h_paper)
        out["note"] = "" if out["used"] else "no Delta_H in the paper"
        rows.append(out)
    return pd.DataFrame(rows)


def _row_base(comparison: BenchmarkComparison, row: BenchmarkRow) -> dict:
    return {"comparison": comparison.name, "task_type": row.task_type,
            "benchmark": row.benchmark, "categories": ",".join(row.categories),
            "delta_h_paper": row.delta_h_paper, "delta_b": row.delta_b, "delta_h": math.nan,
            "delta_h_ci_lower": math.nan, "delta_h_ci_upper": math.nan, "effect": math.nan,
            "effect_ci_lower": math.nan, "effect_ci_upper": math.nan,
            "n_labeled_control": 0, "n_labeled_treatment": 0, "n_unlabeled_control": 0,
            "n_unlabeled_treatment": 0, "used": False, "note": ""}


def correlate(deltas: pd.DataFrame, comparison: BenchmarkComparison, source: str,
              n_boot: int, alpha: float, seed: int) -> dict:
    """Pearson r (bootstrap CI) of the used rows, beside the paper's printed value(s)."""
    used = deltas[deltas["used"].astype(bool)]
    corr = pearson_bootstrap(used["delta_h"].to_numpy(float), used["delta_b"].to_numpy(float),
                             n_boot=n_boot, alpha=alpha, seed=seed)
    printed = comparison.paper_pearson_printed
    return {"comparison": comparison.name, "source": source, "n_points": corr.n_points,
            "pearson_r": corr.r, "ci_lower": corr.ci_lower, "ci_upper": corr.ci_upper,
            "n_boot_valid": corr.n_boot_valid, "paper_printed_r": printed,
            "paper_text_r": comparison.paper_pearson_text,
            "differs_from_printed": bool(printed is not None and math.isfinite(corr.r)
                                         and round(corr.r, 2) != round(printed, 2))}


def correlation_sentences(corr: Iterable[Mapping]) -> list[str]:
    """Plain-language lines comparing each computed r with the paper's printed value."""
    lines = []
    for c in corr:
        r = c["pearson_r"]
        what = ("Table 3's own columns" if c["source"] == "paper" else
                "Delta_H computed from the session table")
        head = (f"{c['comparison']}: Pearson r from {what} = {r:.3f} "
                f"(95% bootstrap CI [{c['ci_lower']:.3f}, {c['ci_upper']:.3f}], "
                f"{c['n_points']} task types)" if math.isfinite(r) else
                f"{c['comparison']}: Pearson r from {what} is undefined ({c['n_points']} task "
                "type(s) usable; 3 with spread in both columns are needed)")
        if 3 <= c["n_points"] < 6:
            head += " — too few task types for an informative interval"
        printed, text = c["paper_printed_r"], c["paper_text_r"]
        if printed is not None and c["source"] == "paper" and math.isfinite(r):
            quoted = f"; the text says {text:+.2f}" if text is not None else ""
            verdict = ("they DIFFER" if c["differs_from_printed"] else "they agree")
            head += (f"; the paper prints rho = {printed:+.2f} under the table{quoted} — "
                     f"{verdict}")
            if c["differs_from_printed"]:
                head += " (the printed value does not follow from the table's own numbers)"
        elif printed is not None:
            head += f"; paper prints rho = {printed:+.2f}"
        lines.append(head + ".")
    return lines
