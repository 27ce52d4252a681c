"""The comparison table of ``pulse-ml compare``, read from the runs of experiment pulse-train.

One pure function turns ``mlflow.search_runs`` output (columns ``tags.<key>``,
``metrics.<key>``, ``params.<key>`` named by :mod:`pulse_ml.keys`) into one row per
model-family or LLM-judge run: scores, expected CI reductions, grouping and registered version.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from pulse_ml import keys
from pulse_ml.stats.paired import expected_ci_reduction_at_ratio

COLUMNS = ["name", "kind", "features", "seed", "mse", "mse_std", "mae", "mae_std", "r", "r_std",
           "ci_red_%", "ci_red_ref_%", "trials", "time_s", "objective", keys.CV_GROUP_BY, "version",
           "run_id"]
HIDDEN = ["data", "labels"]  # fingerprints: used for pairing, not printed
KINDS = {keys.KIND_FAMILY: "model", keys.KIND_JUDGE: "llm judge"}


def tag_column(key: str) -> str:
    """The ``search_runs`` column of a run tag."""
    return f"tags.{key}"


def _metric(key: str) -> str:
    return f"metrics.{key}"


def comparison_frame(runs: pd.DataFrame, latest_only: bool = True,
                     ci_ratio: float = 20.0, keep: tuple[str, ...] = ()) -> pd.DataFrame:
    """Turn ``mlflow.search_runs`` output into the comparison table (pure).

    ``ci_red_%`` is the expected CI reduction at the run's own training data (N/n of its table;
    empty when unknown, e.g. for judges), ``ci_red_ref_%`` at ``N/n = ci_ratio`` for every row.
    ``latest_only`` keeps the latest run per (name, kind, features, seed, data, objective, CV
    grouping) and every run in ``keep`` (the reference's run, so an older version can still be
    paired).
    """
    def col(name):
        return runs[name] if name in runs else pd.Series([None] * len(runs), index=runs.index)

    kind = col(tag_column(keys.KIND))
    family = kind == keys.KIND_FAMILY
    name = col(tag_column(keys.FAMILY)).where(family, col(tag_column(keys.JUDGE)))
    r = pd.to_numeric(col(_metric(keys.CV_PEARSON)), errors="coerce")
    n_lab = pd.to_numeric(col(_metric(keys.N_LABELED)), errors="coerce")
    n_unl = pd.to_numeric(col(_metric(keys.N_UNLABELED)), errors="coerce")
    ratio = (n_unl / n_lab).where(n_lab > 0)
    own = pd.Series(np.where(ratio.notna() & r.notna(), 100 * expected_ci_reduction_at_ratio(
        r.fillna(0).to_numpy(float), ratio.fillna(0).to_numpy(float)), np.nan),
        index=runs.index)
    seed = col(tag_column(keys.SEED)).fillna(col(f"params.{keys.SEED}")).fillna("")
    # runs tagged since the grouping decides pairing; older family runs have the param
    grouping = col(tag_column(keys.CV_GROUP_BY)).fillna(col(f"params.{keys.CV_GROUP_BY_PARAM}"))
    out = pd.DataFrame({
        "name": name, "kind": kind.map(KINDS),
        "features": col(tag_column(keys.FEATURE_SET)).fillna("raw conversation"),
        "seed": seed.astype(str).where(family, ""),
        "mse": col(_metric(keys.CV_MSE)), "mse_std": col(_metric(f"{keys.CV_MSE}_std")),
        "mae": col(_metric(keys.CV_MAE)), "mae_std": col(_metric(f"{keys.CV_MAE}_std")),
        "r": r, "r_std": col(_metric(f"{keys.CV_PEARSON}_std")),
        "ci_red_%": own,
        "ci_red_ref_%": 100 * expected_ci_reduction_at_ratio(r.fillna(0).to_numpy(float),
                                                             ci_ratio),
        "trials": col(_metric(keys.N_TRIALS)).astype("Int64"),
        "time_s": col(_metric(keys.TUNING_TIME)),
        "objective": col(tag_column(keys.OBJECTIVE)).where(family, None).fillna(""),
        keys.CV_GROUP_BY: grouping.where(family, None).fillna(""),
        "version": col(tag_column(keys.REGISTERED_VERSION)).fillna("-").replace("", "-"),
        "run_id": runs["run_id"], "start": runs["start_time"],
        "data": col(tag_column(keys.DATA_FINGERPRINT)).fillna(""),
        "labels": col(tag_column(keys.LABEL_FINGERPRINT)).fillna(""),
    })
    out = out.sort_values("start", ascending=False)
    if latest_only:
        first = ~out.duplicated(["name", "kind", "features", "seed", "data", "objective",
                                 keys.CV_GROUP_BY])
        out = out[first | out["run_id"].isin(keep)]
    out = out.sort_values(["kind", "mse"], ascending=[False, True])
    return out[[*COLUMNS, *HIDDEN]].reset_index(drop=True)
