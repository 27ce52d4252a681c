"""How ``pulse-ml compare`` shows its tables: the terminal view, the ablation view and notes.

Pure formatting of the comparison table (``registry.run_table.comparison_frame``) and the
ablation table (``training.comparison.ablation_frame``).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from pulse_ml import keys

EXPECTED = "expected_ci_red_%"  # the printed name: an expectation from r, not a measurement


def expected_ref(ci_ratio: float) -> str:
    """The printed name of the expected CI reduction at ``N/n = ci_ratio``."""
    return f"at_N/n={ci_ratio:g}"


def terminal_view(shown: pd.DataFrame, ci_ratio: float = 20.0) -> pd.DataFrame:
    """The columns that fit 100 columns: name, features, scores, both CI reductions, ΔMSE.

    The paired intervals follow in their own table; MSE's ± std is in comparison.md. The
    expected CI reductions are named :data:`EXPECTED` and :func:`expected_ref` (the files'
    ``ci_red_%`` and ``ci_red_ref_%``): infer's ``ci_red_%`` is a measured one. ``features``
    only when the rows differ in it (:func:`shared_values` names it otherwise).
    """
    view = pd.DataFrame({"name": shown["name"]})
    if shown["features"].astype(str).nunique() > 1:
        view["features"] = shown["features"]
    view["mse"] = shown["mse"]
    view["r"] = [f"{m:.3f}±{s:.3f}" if pd.notna(s) else f"{m:.3f}"
                 for m, s in zip(shown["r"], shown["r_std"], strict=True)]
    for col, label in (("ci_red_%", EXPECTED), ("ci_red_ref_%", expected_ref(ci_ratio)),
                       ("version", "version")):
        if col in shown:
            view[label] = shown[col]
    models_only = shown["kind"] == "model"
    if keys.CV_GROUP_BY in shown and shown.loc[models_only, keys.CV_GROUP_BY].nunique() > 1:
        view["folds"] = shown[keys.CV_GROUP_BY]  # runs that differ only in cv.group_by
    if "d_mse" in shown:
        view["d_mse"] = ["reference" if ci == "reference" else
                         (f"{d:+.3f}" if pd.notna(d) else "")
                         for d, ci in zip(shown["d_mse"], shown["d_mse_ci"], strict=True)]
    return view


def paired_view(paired: pd.DataFrame, significant: list[str], level: int) -> pd.DataFrame:
    """The printed paired table (fits 100 columns).

    Each difference with its interval in one cell, 3 decimals (4, and the interval ends in
    their own columns: paired.csv); ``features`` and ``seed`` only when the rows differ in them
    (:func:`shared_values` names them otherwise), ``version`` when one is registered.
    """

    def cell(d, lo, hi):
        return f"{d:+.3f} [{lo:+.3f}, {hi:+.3f}]" if pd.notna(d) else ""

    view = paired[["name"]].copy()
    for col in ("features", "seed"):
        if col in paired and paired[col].astype(str).nunique() > 1:
            view[col] = paired[col]
    if (paired["version"].astype(str) != "-").any():  # else none is registered
        view["version"] = paired["version"]
    view[f"ΔMSE [{level}% CI]"] = [cell(*v) for v in zip(
        paired["delta_mse"], paired["mse_ci_lower"], paired["mse_ci_upper"], strict=True)]
    view[f"Δr [{level}% CI]"] = [cell(*v) for v in zip(
        paired["delta_r"], paired["r_ci_lower"], paired["r_ci_upper"], strict=True)]
    view["significant"] = significant
    return view


def shared_values(paired: pd.DataFrame) -> str:
    """``features 'all', seed 42``: what every row of :func:`paired_view` shares ("" if none)."""
    parts = []
    for col, show in (("features", "features '{}'"), ("seed", "seed {}")):
        values = paired[col].astype(str) if col in paired else pd.Series(dtype=str)
        if len(values) and values.nunique() == 1 and values.iloc[0]:
            parts.append(show.format(values.iloc[0]))
    return ", ".join(parts)


def ablation_view(ablation: pd.DataFrame, group_by: list[str], ci_ratio: float = 20.0,
                  terminal: bool = False) -> pd.DataFrame:
    """The ablation table for people: ``mean ± sd`` strings.

    Args:
        ablation: ``training.comparison.ablation_frame``'s table.
        group_by: Its keys.
        ci_ratio: The reference N/n of the second expected CI reduction.
        terminal: The printed view (fits 100 columns: no MAE, CI reductions with one decimal
            as :func:`terminal_view`'s); else the ablation_<keys>.md view (everything).
    """
    def pm(mean, sd, digits):
        return (f"{mean:.{digits}f}" if not np.isfinite(sd) else
                f"{mean:.{digits}f} ± {sd:.{digits}f}") if np.isfinite(mean) else "-"

    view = ablation[[*group_by, "runs", "seeds"]].copy()
    ref = expected_ref(ci_ratio) if terminal else "expected_ci_red_ref_%"
    for key, label, digits in (("mse", "mse", 4), ("mae", "mae", 4), ("r", "r", 4),
                               ("ci_red", EXPECTED, 1 if terminal else 2),
                               ("ci_red_ref", ref, 1 if terminal else 2)):
        if terminal and key == "mae":
            continue
        view[label] = [pm(m, s, digits) for m, s in zip(ablation[f"{key}_mean"],
                                                        ablation[f"{key}_sd"], strict=True)]
    return view


def ablation_notes(ablation: pd.DataFrame, group_by: list[str]) -> list[str]:
    """What the rows pool: several families, feature sets or data fingerprints (pure)."""
    notes = []
    pooled = [k for k, c in (("family", "families"), ("features", "feature_sets"))
              if k not in group_by and (ablation[c] > 1).any()]
    if pooled:
        notes.append(f"note: rows pool runs of several {' and '.join(pooled)}; add them to "
                     f"group_by (e.g. group_by=[{','.join([*pooled, *group_by])}]) to "
                     "separate them.")
    if "datasets" in ablation and (ablation["datasets"] > 1).any():
        notes.append(f"note: rows pool runs on {int(ablation['datasets'].max())} different "
                     "training data (data fingerprints): their sd mixes data changes with "
                     "seeds; pass data_fingerprint=<prefix> to keep one.")
    notes.append("note: the sd over seeds measures tuning/estimator randomness on fixed folds; "
                 "the paired interval of `pulse-ml compare` measures the data's noise.")
    return notes


def plot_subtitle(table: pd.DataFrame, reference_label: str | None) -> str:
    """The chart's second title line: which data (fingerprints) and which reference model."""
    data = sorted({str(d)[:10] for d in table["data"] if str(d)}) or ["unrecorded"]
    return (f"data fingerprint {', '.join(data[:3])}{' …' if len(data) > 3 else ''}; "
            f"reference {reference_label or 'none'}")
