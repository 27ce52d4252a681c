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
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np
import pandas as pd
import yaml
from numpy.typing import ArrayLike

from pulse_ml.errors import PulseError
from pulse_ml.inference.effects import InferenceSettings, arm_data, compare
from pulse_ml.paths import catalog_dir
from pulse_ml.sessions.case_studies import CaseStudy
from pulse_ml.sessions.table import SessionTable

ROW_KEYS = ("task_type", "benchmark", "delta_h_paper", "delta_b")


@dataclass(frozen=True)
class BenchmarkRow:
    """One task type of a comparison.

    Attributes:
        task_type: Human-readable task type (e.g. "Fix Codebase Issues").
        benchmark: Benchmark standing for that task type (e.g. "SWE-Bench").
        delta_h_paper: Delta_H printed in the paper, % (NaN when unknown).
        delta_b: Benchmark delta, % (treatment - control).
        categories: Session-table category values forming the human subset (empty = none fits).
    """

    task_type: str
    benchmark: str
    delta_h_paper: float
    delta_b: float
    categories: tuple[str, ...] = ()


@dataclass(frozen=True)
class BenchmarkComparison:
    """Benchmark deltas of one case study (one YAML file of ``conf/catalog/task_benchmarks/``).

    Attributes:
        name: Comparison name (file stem by default).
        case_study: Case study (``case_study`` column value) whose arms are compared.
        rows: Task-type rows.
        description: One line for humans.
        paper_pearson_printed: Correlation printed under the paper's table (or None).
        paper_pearson_text: Correlation quoted in the paper's text, when different (or None).
    """

    name: str
    case_study: str
    rows: tuple[BenchmarkRow, ...]
    description: str = ""
    paper_pearson_printed: float | None = None
    paper_pearson_text: float | None = None


@dataclass(frozen=True)
class Correlation:
    """Pearson r between Delta_H and Delta_B with a percentile bootstrap interval.

    Attributes:
        r: Pearson correlation of the rows (NaN with fewer than 3 rows or no variance).
        ci_lower: Lower end of the bootstrap interval.
        ci_upper: Upper end of the bootstrap interval.
        n_points: Rows used.
        n_boot: Resamples drawn.
        n_boot_valid: Resamples with variance in both columns (others have no r).
    """

    r: float
    ci_lower: float
    ci_upper: float
    n_points: int
    n_boot: int
    n_boot_valid: int


def _float_or_none(value, where: str) -> float | None:
    if value is None:
        return None
    try:
        return float(value)
    except (TypeError, ValueError):
        raise PulseError(f"{where}: '{value}' is not a number.") from None


def comparison_from_mapping(node: Mapping, source: str, default_name: str = "") -> \
        BenchmarkComparison:
    """Build a :class:`BenchmarkComparison` from a parsed YAML mapping.

    Args:
        node: The mapping (keys ``name``, ``case_study``, ``rows``, optional ``description``,
            ``paper_pearson_printed``, ``paper_pearson_text``).
        source: File name used in error messages.
        default_name: Name when the mapping has none.

    Raises:
        PulseError: naming the file, row and key that are wrong.
    """
    name = str(node.get("name") or default_name)
    rows_node = node.get("rows")
    if not name or not isinstance(rows_node, list) or not rows_node:
        raise PulseError(f"{source}: a benchmark comparison needs `name` and a non-empty list "
                         "`rows` (task_type, benchmark, delta_h_paper, delta_b, categories).")
    rows = []
    for i, row in enumerate(rows_node, start=1):
        missing = [k for k in ROW_KEYS if not isinstance(row, Mapping) or k not in row]
        if missing:
            raise PulseError(f"{source}: rows[{i}] lacks key(s) {', '.join(missing)}. Each row "
                             "needs task_type, benchmark, delta_h_paper (null if unknown), "
                             "delta_b and optionally categories.")
        d_h = _float_or_none(row["delta_h_paper"], f"{source}: rows[{i}].delta_h_paper")
        d_b = _float_or_none(row["delta_b"], f"{source}: rows[{i}].delta_b")
        if d_b is None:
            raise PulseError(f"{source}: rows[{i}].delta_b is empty; give the benchmark delta "
                             "in %.")
        cats = row.get("categories") or []
        if isinstance(cats, str):
            cats = [cats]
        rows.append(BenchmarkRow(str(row["task_type"]), str(row["benchmark"]),
                                 math.nan if d_h is None else d_h, d_b,
                                 tuple(str(c) for c in cats)))
    return BenchmarkComparison(
        name=name, case_study=str(node.get("case_study") or name), rows=tuple(rows),
        description=str(node.get("description") or ""),
        paper_pearson_printed=_float_or_none(node.get("paper_pearson_printed"),
                                             f"{source}: paper_pearson_printed"),
        paper_pearson_text=_float_or_none(node.get("paper_pearson_text"),
                                          f"{source}: paper_pearson_text"))


def load_comparisons(selected: Sequence[str] | None = None) -> list[BenchmarkComparison]:
    """Read comparisons: shipped catalogue files by name, or YAML files by path.

    Args:
        selected: Names of shipped comparisons or paths to YAML files; ``None`` = every shipped
            comparison.

    Raises:
        PulseError: unknown name, missing file or malformed YAML.
    """
    folder = catalog_dir("task_benchmarks")
    shipped = {p.stem: p for p in sorted(folder.glob("*.y*ml"))}
    if selected is None:
        paths = list(shipped.values())
    else:
        paths = []
        for item in selected:
            if item in shipped:
                paths.append(shipped[item])
            elif Path(item).expanduser().is_file():
                paths.append(Path(item).expanduser())
            else:
                raise PulseError(f"comparisons: '{item}' is neither a shipped comparison "
                                 f"({', '.join(shipped) or 'none'}) nor an existing YAML file.")
    out = []
    for path in paths:
        try:
            node = yaml.safe_load(path.read_text()) or {}
        except yaml.YAMLError as exc:
            raise PulseError(f"{path}: not valid YAML ({str(exc).splitlines()[0]}).") from None
        if not isinstance(node, Mapping):
            raise PulseError(f"{path}: expected a mapping with name, case_study and rows.")
        out.append(comparison_from_mapping(node, str(path), default_name=path.stem))
    return out


def pearson(x: ArrayLike, y: ArrayLike) -> float:
    """Pearson correlation of two equal-length vectors (NaN if either has no variance)."""
    r = _pearson_rows(np.asarray(x, float)[None, :], np.asarray(y, float)[None, :])
    return float(r[0])


def _pearson_rows(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Row-wise Pearson r of two (B, k) arrays; NaN where a row has no variance."""
    xc = x - x.mean(axis=1, keepdims=True)
    yc = y - y.mean(axis=1, keepdims=True)
    sxx = np.einsum("ij,ij->i", xc, xc)
    syy = np.einsum("ij,ij->i", yc, yc)
    sxy = np.einsum("ij,ij->i", xc, yc)
    den = np.sqrt(sxx * syy)
    tiny = 1e-12 * np.maximum(1.0, np.sqrt(np.einsum("ij,ij->i", x, x) * np.einsum(
        "ij,ij->i", y, y)))
    with np.errstate(invalid="ignore", divide="ignore"):
        r = np.where(den > tiny, sxy / np.where(den > 0, den, 1.0), np.nan)
    return np.clip(r, -1.0, 1.0)


def pearson_bootstrap(x: ArrayLike, y: ArrayLike, n_boot: int = 10_000, alpha: float = 0.05,
                      seed: int = 0) -> Correlation:
    """Pearson r with a percentile bootstrap interval over the (x, y) pairs.

    All ``n_boot`` resamples are drawn at once (a ``(n_boot, k)`` index array); resamples in
    which x or y has no variance (e.g. one row drawn k times) have no r and are left out
    (``n_boot_valid`` says how many remain).

    Args:
        x: Delta_H per row, shape (k,).
        y: Delta_B per row, shape (k,).
        n_boot: Number of resamples.
        alpha: Error level of the two-sided interval.
        seed: Seed of the resampling (same seed -> same interval).

    Returns:
        The :class:`Correlation`; NaNs when fewer than 3 rows.
    """
    xv, yv = np.asarray(x, float), np.asarray(y, float)
    if xv.shape != yv.shape or xv.ndim != 1:
        raise ValueError(f"x and y must be vectors of equal length, got {xv.shape}, {yv.shape}")
    k = xv.size
    if k < 3:
        return Correlation(math.nan, math.nan, math.nan, k, 0, 0)
    r = pearson(xv, yv)
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, k, size=(n_boot, k))
    rs = _pearson_rows(xv[idx], yv[idx])
    rs = rs[np.isfinite(rs)]
    if rs.size == 0:
        return Correlation(r, math.nan, math.nan, k, n_boot, 0)
    lo, hi = np.quantile(rs, [alpha / 2, 1 - alpha / 2])
    return Correlation(r, float(lo), float(hi), k, n_boot, int(rs.size))


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
