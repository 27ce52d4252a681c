"""Tune one model family with Optuna under k-fold CV, log it to MLflow, register and promote.

For the family chosen with ``model=<family>`` (ordinal_logit, random_forest, hist_gb, lightgbm,
mean, or a YAML path) and the feature set ``features=<set>``: a seeded TPE study runs
``tuning.n_trials`` trials of 5-fold CV (per-fold median pruning); every trial is a nested MLflow
run under one parent run per family in experiment ``pulse-train``; the best trial's 5 fold models
become one cross-fit ensemble, logged with its out-of-fold predictions and registered as
``pulse-satisfaction``. The alias ``champion`` moves to it only if it beats the current champion
on the objective on the same data.

Examples:
    pulse-ml train model=lightgbm tuning.n_trials=50
    pulse-ml train -m model=ordinal_logit,random_forest,hist_gb,lightgbm
    pulse-ml train tuning.storage=mlruns/optuna.journal tuning.workers=2
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from pulse_ml import settings as cfg_io
from pulse_ml.errors import PulseError
from pulse_ml.models.crossfit import CrossFitEnsemble, fit_crossfit
from pulse_ml.models.factory import ModelSpec, build_pipeline, model_spec_from_mapping
from pulse_ml.report.tables import text_table
from pulse_ml.sessions.feature_sets import FeatureSet
from pulse_ml.sessions.fingerprint import data_fingerprint
from pulse_ml.sessions.table import SessionTable, load_sessions
from pulse_ml.simulate.demo import ensure_demo_data
from pulse_ml.training.metrics import CVMetrics, cv_metrics
from pulse_ml.training.tuning import CVObjective, TuningSettings, make_folds, run_study


@dataclass(frozen=True)
class TrainResult:
    """What one ``train`` call produced."""

    family: str
    feature_set: str
    run_id: str
    best_params: dict
    metrics: CVMetrics
    n_trials: int
    seconds: float
    version: str | None
    promoted: bool
    promotion_reason: str
    data_fingerprint: str


def tuning_settings(cfg) -> TuningSettings:
    """Typed tuning settings from the composed config."""
    t = cfg.tuning
    return TuningSettings(
        n_trials=int(t.n_trials), timeout_s=None if t.timeout_s is None else float(t.timeout_s),
        storage=None if t.storage in (None, "", "none") else str(t.storage),
        study_name=t.study_name, workers=int(t.workers), objective=str(cfg.objective),
        seed=int(cfg.seed), n_splits=int(cfg.cv.n_splits), cv_seed=int(cfg.cv.seed),
        group_by_user=_group_by(cfg),
        prune=bool(t.prune),
        sampler_seed=None if t.get("sampler_seed") is None else int(t.sampler_seed))


def _group_by(cfg) -> bool:
    value = str(cfg.cv.get("group_by", "user_id"))
    if value not in ("user_id", "none"):
        raise PulseError(f"cv.group_by={value}: use user_id (all sessions of a user in one "
                         "fold) or none (plain shuffled KFold, as the paper).")
    return value == "user_id"


def model_spec(cfg) -> ModelSpec:
    """Typed model family from the composed ``model`` node."""
    from omegaconf import OmegaConf

    return model_spec_from_mapping(OmegaConf.to_container(cfg.model, resolve=True))


def training_data(table: SessionTable) -> tuple[pd.DataFrame, np.ndarray]:
    """Labeled sessions and their ratings."""
    labeled = table.frame.loc[table.labeled].reset_index(drop=True)
    return labeled, labeled["rating"].to_numpy(float)


def fingerprint(labeled: pd.DataFrame, features: FeatureSet) -> str:
    """Fingerprint of the training data (ids, ratings, features)."""
    return data_fingerprint(labeled, ["session_id", "rating", *features.names])


def train_family(table: SessionTable, spec: ModelSpec, tuning: TuningSettings,
                 config_yaml: str, register: bool = True, auto_promote: bool = True,
                 progress: bool = True) -> TrainResult:
    """Tune, log, register and (maybe) promote one family. The MLflow side of ``run``."""
    import mlflow
    from threadpoolctl import threadpool_limits

    from pulse_ml.registry import models as mlflow_io
    from pulse_ml.registry import store as tracking

    features = table.features
    labeled, y = training_data(table)
    groups = labeled["user_id"].to_numpy() if tuning.group_by_user else None
    folds = make_folds(len(y), tuning.n_splits, tuning.cv_seed, groups)
    fp = fingerprint(labeled, features)
    study_name = tuning.study_name or f"{spec.name}-{features.name}-{fp[:10]}"
    objective = CVObjective(labeled, y, folds, spec, features, tuning.objective, tuning.prune)
    exp_id = tracking.setup(tracking.TRAIN_EXPERIMENT)
    start = time.perf_counter()
    run = mlflow.start_run(run_name=f"{spec.name}-{features.name}")
    try:
        mlflow.set_tags({"kind": "family", "family": spec.name, "feature_set": features.name,
                         "data_fingerprint": fp, "objective": tuning.objective,
                         "study_name": study_name, "git_commit": tracking.git_commit()})
        study, first = run_study(tuning, study_name, objective, progress=progress)
        new_trials = [t for t in study.trials if t.number >= first]
        mlflow_io.log_trials(run.info.run_id, exp_id, new_trials, spec.name)
        complete = [t for t in study.trials if t.state.name == "COMPLETE"]
        if not complete:
            raise PulseError(f"model '{spec.name}': no trial completed (all pruned or failed).")
        best = study.best_trial
        with threadpool_limits(limits=1):  # same threading as the trials: same numbers
            ensemble = fit_crossfit(lambda: build_pipeline(spec, features, best.params),
                                    labeled, y, folds, features, spec.name)
        metrics = cv_metrics(y, ensemble.oof["prediction"].to_numpy(), folds)
        seconds = time.perf_counter() - start
        mlflow_io.log_family_run(
            run_name=spec.name, tags={},
            params={**{f"best.{k}": v for k, v in best.params.items()},
                    "family": spec.name, "feature_set": features.name,
                    "n_labeled": len(y), "cv.n_splits": tuning.n_splits,
                    "cv.seed": tuning.cv_seed, "seed": tuning.seed,
                    "cv.group_by": "user_id" if tuning.group_by_user else "none",
                    "objective": tuning.objective, "n_trials_requested": tuning.n_trials,
                    "storage": tuning.storage, "workers": tuning.workers},
            metrics={**metrics.as_dict(), "n_trials": len(study.trials),
                     "n_trials_complete": len(complete), "tuning_time_s": seconds,
                     "best_trial": best.number},
            fold_metrics={"fold_mse": list(metrics.fold_mse), "fold_mae": list(metrics.fold_mae),
                          "fold_pearson": list(metrics.fold_pearson)},
            config_yaml=config_yaml, oof=ensemble.oof)
        version = None
        promotion = None
        values = metrics.as_dict()
        if register:
            version = mlflow_io.log_and_register_model(ensemble, labeled, {
                "family": spec.name, "feature_set": features.name, "data_fingerprint": fp,
                "git_commit": tracking.git_commit(), "objective": tuning.objective,
                **{k: f"{v:.6f}" for k, v in values.items()}})
            promotion = mlflow_io.decide_and_promote(version, tuning.objective,
                                                     values[tuning.objective], fp, auto_promote)
            mlflow.set_tags({"registered_version": version,
                             "promotion": "promoted" if promotion.promoted else "kept",
                             "promotion_reason": promotion.reason})
        mlflow.end_run("FINISHED")
    except BaseException as exc:
        mlflow.set_tag("error", str(exc)[:500])
        mlflow.end_run("FAILED")
        if isinstance(exc, PulseError | KeyboardInterrupt):
            raise
        raise PulseError(f"training model '{spec.name}' failed: {type(exc).__name__}: "
                         f"{str(exc).splitlines()[0] if str(exc) else ''}\n  Its MLflow run "
                         f"{run.info.run_id} is marked FAILED; earlier runs and the champion "
                         "are untouched.") from None
    return TrainResult(
        family=spec.name, feature_set=features.name, run_id=run.info.run_id,
        best_params=dict(best.params), metrics=metrics, n_trials=len(study.trials),
        seconds=seconds, version=version,
        promoted=bool(promotion and promotion.promoted),
        promotion_reason=promotion.reason if promotion else "not registered (register=false)",
        data_fingerprint=fp)


def summary(result: TrainResult) -> str:
    """The end-of-run summary table."""
    from pulse_ml.registry import store as tracking

    m = result.metrics
    row = pd.DataFrame([{
        "family": result.family, "features": result.feature_set, "trials": result.n_trials,
        "cv_mse": m.mse, "cv_mae": m.mae, "cv_pearson": m.pearson,
        "r_std": float(np.std(m.fold_pearson)), "time_s": result.seconds,
        "version": result.version or "-", "champion": "yes" if result.promoted else "no",
    }])
    return "\n".join([
        text_table(row), "",
        f"run: {result.run_id}   best params: {result.best_params}",
        f"promotion: {result.promotion_reason}",
        f"look at it: {tracking.ui_command()}",
    ])


def run(cfg) -> TrainResult:
    """Entry point of ``pulse-ml train``."""
    from omegaconf import OmegaConf

    ensure_demo_data(cfg.data.path, bool(cfg.data.get("simulate_if_missing", True)))
    # Training uses every labeled session; case studies matter only to infer.
    table = load_sessions(cfg.data.path, cfg_io.feature_set(cfg), {}, only=[])
    spec = model_spec(cfg)
    tuning = tuning_settings(cfg)
    if str(cfg.promote) not in ("auto", "never"):
        raise PulseError(f"promote={cfg.promote}: use auto or never.")
    print(f"training {spec.name} on {int(table.labeled.sum())} labeled sessions of "
          f"{Path(table.path).name} (features '{table.features.name}', "
          f"{tuning.n_trials if spec.search_space else 1} trial(s) x {tuning.n_splits}-fold CV, "
          f"objective {tuning.objective})")
    result = train_family(table, spec, tuning, OmegaConf.to_yaml(cfg),
                          register=bool(cfg.register), auto_promote=str(cfg.promote) == "auto",
                          progress=bool(cfg.get("progress", True)))
    print(summary(result))
    return result


__all__ = ["CrossFitEnsemble", "TrainResult", "run", "train_family"]
