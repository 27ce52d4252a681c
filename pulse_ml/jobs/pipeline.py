"""The main job, end to end: demo data if none, tune every family, register/promote, infer.

1. ``data.path`` (default: the demo table; created with ``pulse-ml simulate`` when absent),
2. ``pulse-ml train`` for each of ``families`` (Optuna, 5-fold CV, MLflow; the best model
   that beats the champion is promoted),
3. ``pulse-ml infer`` with the champion: naive vs PPI++ effect per case study,
4. a final summary: the families' out-of-fold metrics and the effects table (with the true
   effects beside them when the data came from ``pulse-ml simulate``).

Examples:
    pulse-ml pipeline
    pulse-ml pipeline families=[lightgbm] tuning.n_trials=10
    pulse-ml pipeline data.path=my_sessions.parquet features=no_llm
"""

from __future__ import annotations

import time

import pandas as pd

from pulse_ml.errors import PulseError
from pulse_ml.report.tables import text_table
from pulse_ml.simulate.demo import ensure_demo_data


def _train_overrides(cfg, family: str) -> list[str]:
    t = cfg.tuning
    out = [f"model={family}", f"data.path={cfg.data.path}", f"tuning.n_trials={t.n_trials}",
           f"tuning.workers={t.workers}", f"objective={cfg.objective}", f"seed={cfg.seed}",
           f"cv.n_splits={cfg.cv.n_splits}", f"cv.seed={cfg.cv.seed}",
           f"cv.group_by={cfg.cv.get('group_by', 'user_id')}",
           f"progress={str(bool(cfg.progress)).lower()}", "data.simulate_if_missing=false"]
    if t.timeout_s is not None:
        out.append(f"tuning.timeout_s={t.timeout_s}")
    if t.storage:
        out.append(f"tuning.storage={t.storage}")
    return out


def run(cfg) -> dict:
    """Entry point of ``pulse-ml pipeline``."""
    from pulse_ml.config import compose
    from pulse_ml.jobs import infer, train

    start = time.perf_counter()
    families = list(cfg.families)
    if not families:
        raise PulseError("families is empty: list at least one of conf/model/, e.g. "
                         "families=[lightgbm].")
    ensure_demo_data(cfg.data.path, bool(cfg.data.simulate_if_missing))
    results = []
    for i, family in enumerate(families, 1):
        print(f"\n== [{i}/{len(families)}] train {family}")
        tcfg = compose("train", _train_overrides(cfg, family))
        tcfg.features = cfg.features  # the pipeline's feature set (name or YAML path)
        results.append(train.run(tcfg))
    print("\n== infer with the champion")
    icfg = compose("infer", [f"data.path={cfg.data.path}", f"alpha={cfg.infer.alpha}",
                             f"ppi.predictions={cfg.infer.predictions}",
                             f"clusters={cfg.infer.clusters}", f"output={cfg.infer.output}"])
    icfg.case_study_dirs = list(cfg.get("case_study_dirs") or [])
    effects = infer.run(icfg)
    fams = pd.DataFrame([{
        "family": r.family, "features": r.feature_set, "trials": r.n_trials,
        "cv_mse": r.metrics.mse, "cv_mae": r.metrics.mae, "cv_pearson": r.metrics.pearson,
        "version": r.version or "-", "promoted": r.promoted} for r in results])
    truth = infer.load_ground_truth(str(cfg.data.path))
    print("\n== summary")
    print(text_table(fams))
    print()
    print(text_table(infer.printable(effects, truth)))
    aug = effects[effects["estimator"] == "augmented"]
    print(f"\nmean CI reduction {aug['ci_reduction_pct'].mean():.1f}% over "
          f"{len(aug)} case studies; results in {cfg.infer.output}; "
          f"{time.perf_counter() - start:.0f} s in all")
    return {"families": fams, "effects": effects}
