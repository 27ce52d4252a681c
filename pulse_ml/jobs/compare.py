"""Compare every tuned model family and LLM-judge baseline logged in experiment pulse-train.

Prints a table in the style of the paper's Table 2 (out-of-fold MSE / MAE / Pearson r, each
± its std over the CV folds, trials, tuning time) and writes it as Markdown, CSV and a bar chart
of r with error bars to ``output``.

Example:
    pulse-ml train -m model=ordinal_logit,random_forest,hist_gb,lightgbm && pulse-ml compare
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from pulse_ml.config import flag
from pulse_ml.errors import PulseError
from pulse_ml.report.tables import markdown_table, text_table

_COLS = ["name", "kind", "features", "mse", "mse_std", "mae", "mae_std", "r", "r_std",
         "trials", "time_s", "version", "run_id"]


def comparison_frame(runs: pd.DataFrame, latest_only: bool = True) -> pd.DataFrame:
    """Turn ``mlflow.search_runs`` output into the comparison table (pure)."""
    def col(name):
        return runs[name] if name in runs else pd.Series([None] * len(runs), index=runs.index)

    kind = col("tags.kind")
    name = col("tags.family").where(kind == "family", col("tags.judge"))
    out = pd.DataFrame({
        "name": name, "kind": kind.map({"family": "model", "llm_judge": "llm judge"}),
        "features": col("tags.feature_set").fillna("raw conversation"),
        "mse": col("metrics.cv_mse"), "mse_std": col("metrics.cv_mse_std"),
        "mae": col("metrics.cv_mae"), "mae_std": col("metrics.cv_mae_std"),
        "r": col("metrics.cv_pearson"), "r_std": col("metrics.cv_pearson_std"),
        "trials": col("metrics.n_trials").astype("Int64"), "time_s": col("metrics.tuning_time_s"),
        "version": col("tags.registered_version").fillna("-"),
        "run_id": runs["run_id"], "start": runs["start_time"],
        "data": col("tags.data_fingerprint").fillna(""),
    })
    out = out.sort_values("start", ascending=False)
    if latest_only:
        out = out.drop_duplicates(["name", "kind", "features", "data"])
    out = out.sort_values(["kind", "mse"], ascending=[False, True])
    return out[_COLS].reset_index(drop=True)


def run(cfg) -> pd.DataFrame:
    """Entry point of ``pulse-ml compare``."""
    from pulse_ml.registry import runs as registry_runs
    from pulse_ml.registry import store as tracking
    from pulse_ml.report.plots import comparison_plot

    runs = registry_runs.finished_runs()
    if cfg.get("data_fingerprint") and len(runs):
        same = runs["tags.data_fingerprint"].astype(str).str.startswith(str(cfg.data_fingerprint))
        runs = runs[same | (runs["tags.kind"] == "llm_judge")]  # judges have no feature data
    if runs.empty:
        raise PulseError(f"no finished model-family or LLM-judge runs in experiment "
                         f"'{tracking.TRAIN_EXPERIMENT}' at {tracking.tracking_uri()}. Run "
                         "`pulse-ml train` (or `pulse-ml judge`) first.")
    table = comparison_frame(runs, flag(cfg, "latest_only", "compare", True))
    from pulse_ml.report.atomic import staged_outputs

    out = Path(cfg.output)
    with staged_outputs(out) as stage:  # all three files or none
        table.to_csv(stage / "comparison.csv", index=False)
        (stage / "comparison.md").write_text(markdown_table(table.drop(columns=["run_id"]))
                                             + "\n")
        comparison_plot(table, stage / "comparison.png")
    shown = table.drop(columns=["run_id"])
    print(text_table(shown))
    print(f"\nwritten: {out / 'comparison.md'}, {out / 'comparison.csv'}, "
          f"{out / 'comparison.png'}")
    return table
