"""Tables of ``pulse-ml compare`` built from the comparison table (pure): ablation and pairing.

The comparison table is :func:`pulse_ml.registry.run_table.comparison_frame` output: one row per
model-family (``kind`` = ``model``) or LLM-judge run with ``name``, ``features``, ``seed``,
scores and expected CI reductions.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from pulse_ml import keys
from pulse_ml.errors import PulseError


def ablation_frame(table: pd.DataFrame, group_by: list[str]) -> pd.DataFrame:
    """Mean ± sd over the runs of each group (pure); model rows only.

    Args:
        table: The comparison table (``latest_only`` keeps one run per seed).
        group_by: Keys among ``family``, ``features``, ``seed``.

    Returns:
        One row per group: the keys, ``runs``, ``seeds``, ``families``, ``feature_sets``,
        ``datasets`` (data fingerprints pooled), then ``<metric>_mean`` and
        ``<metric>_sd`` (sample sd, ddof = 1; NaN for a single run) for mse, mae, r and the
        expected CI reductions, sorted by mean MSE.
    """
    models = table[table["kind"] == "model"].rename(columns={"name": "family"})
    if models.empty:
        raise PulseError("no model-family runs to group: run `pulse-ml train` first.")
    metrics = {"mse": "mse", "mae": "mae", "r": "r", "ci_red": "ci_red_%",
               "ci_red_ref": "ci_red_ref_%"}
    rows = []
    for key, grp in models.groupby(group_by, sort=False, dropna=False):
        values = key if isinstance(key, tuple) else (key,)
        row = dict(zip(group_by, values, strict=True))
        row.update({"runs": len(grp), "seeds": grp["seed"].nunique(),
                    "families": grp["family"].nunique(),
                    "feature_sets": grp["features"].nunique(),
                    "datasets": grp["data"].nunique() if "data" in grp else 1})
        for out, src in metrics.items():
            x = pd.to_numeric(grp[src], errors="coerce")
            row[f"{out}_mean"] = float(x.mean())
            row[f"{out}_sd"] = float(x.std(ddof=1)) if x.notna().sum() > 1 else float("nan")
        rows.append(row)
    return pd.DataFrame(rows).sort_values("mse_mean").reset_index(drop=True)


def significance(paired: pd.DataFrame) -> list[str]:
    """``better``/``worse``/``no`` per row on the row's objective: Δr for cv_pearson, else ΔMSE.

    A row whose folds are of unknown grouping gets ``no claim``.
    """
    out = []
    for row in paired.itertuples(index=False):
        if "grouping unknown" in str(getattr(row, "note", "")):
            out.append("no claim")
            continue
        if row.objective == keys.CV_PEARSON:
            verdict = ("better" if row.r_ci_lower > 0 else "worse" if row.r_ci_upper < 0
                       else "no")
            out.append(f"{verdict} (Δr)")
        else:
            verdict = ("better" if row.mse_ci_upper < 0 else "worse" if row.mse_ci_lower > 0
                       else "no")
            out.append(f"{verdict} (ΔMSE)")
    return out


def with_paired(table: pd.DataFrame, paired: pd.DataFrame, ref_run: str | None) -> pd.DataFrame:
    """Columns d_mse, d_mse_ci, d_r: the paired difference with the reference, per row."""
    out = table.copy()
    out["d_mse"], out["d_mse_ci"], out["d_r"] = np.nan, "", np.nan
    out.loc[out["run_id"] == ref_run, "d_mse_ci"] = "reference"
    if paired.empty:
        return out
    by_run = paired.set_index("run_id")
    hit = out["run_id"].isin(by_run.index)
    p = by_run.reindex(out.loc[hit, "run_id"])
    out.loc[hit, "d_mse"] = p["delta_mse"].to_numpy()
    out.loc[hit, "d_r"] = p["delta_r"].to_numpy()
    out.loc[hit, "d_mse_ci"] = [f"[{lo:+.3f}, {hi:+.3f}]" for lo, hi in zip(
        p["mse_ci_lower"], p["mse_ci_upper"], strict=True)]
    return out
