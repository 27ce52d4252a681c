"""Tune one model family with Optuna under k-fold CV, log it to MLflow, register and promote.

For the family chosen with ``model=<family>`` (ordinal_logit, random_forest, hist_gb, lightgbm,
mean, or a YAML path) and the feature set ``features=<set>``: a seeded TPE study runs
``tuning.n_trials`` trials of 5-fold CV (per-fold median pruning); every trial is a nested MLflow
run under one parent run per family in experiment ``pulse-train``; the best trial's 5 fold models
become one cross-fit ensemble, logged with its out-of-fold predictions and registered as
``pulse-satisfaction``. The alias ``champion`` moves to it only if it beats the current champion
on the objective on the same data.

``exclude_case_studies=[plan]`` (or ``all``) and ``trained_before=YYYY-MM-DD`` leave sessions
out of training, e.g. to train on sessions before an A/B test that ``pulse-ml monitor`` watches.

Examples:
    pulse-ml train model=lightgbm tuning.n_trials=50
    pulse-ml train trained_before=2025-06-02 exclude_case_studies=all promote=never
    pulse-ml train -m model=ordinal_logit,random_forest,hist_gb,lightgbm
    pulse-ml train tuning.storage=mlruns/optuna.journal tuning.workers=2
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from pulse_ml import settings as shared
from pulse_ml.config import Node, choice, flag, mapping, number, text, to_yaml
from pulse_ml.errors import PulseError
from pulse_ml.models.factory import ModelSpec, model_spec_from_mapping
from pulse_ml.models.text_cache import cache_folder
from pulse_ml.report.tables import text_table
from pulse_ml.sessions.feature_sets import FeatureSet
from pulse_ml.sessions.table import SessionTable, load_sessions
from pulse_ml.simulate.demo import ensure_demo_data
from pulse_ml.training.family import FamilyFit, tune_family
from pulse_ml.training.metrics import CVMetrics
from pulse_ml.training.selection import (
    TrainingSelection,
    parse_trained_before,
    select_training,
)
from pulse_ml.training.tuning import OBJECTIVES, TuningSettings

PROMOTE_MODES = {"auto": "promote when it beats the champion", "never": "never promote"}
GROUP_MODES = {"user_id": "all sessions of a user in one fold",
               "none": "plain shuffled KFold, as the paper"}


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


@dataclass(frozen=True)
class TrainSettings:
    """Typed settings of ``pulse-ml train`` (also built directly by ``pipeline``)."""

    data_path: str
    simulate_if_missing: bool
    features: FeatureSet
    model: ModelSpec
    tuning: TuningSettings
    register: bool
    auto_promote: bool
    progress: bool
    config_yaml: str
    selection: TrainingSelection = TrainingSelection()
    text_cache: str | None = None  # folder of text-encoder vectors (None = memory only)


def text_cache_folder(cfg: Node) -> str | None:
    """``text_cache``: null = ``$PULSE_TEXT_CACHE`` if set, else ``<pulse_home>/.cache/text``.

    ``none`` keeps the text encoders' vectors in memory only.
    """
    import os

    from pulse_ml.models.text_cache import CACHE_ENV
    from pulse_ml.paths import project_root

    raw = cfg.select("text_cache")
    if raw is None:
        env = os.environ.get(CACHE_ENV)
        if env is not None:
            return env or None
        return str(project_root() / ".cache" / "text")
    return text(cfg, "text_cache")


def tuning_settings(cfg: Node, verb: str = "train") -> TuningSettings:
    """Typed tuning and CV settings from the composed ``tuning``/``cv`` nodes."""
    objective = choice(cfg, "objective", verb, {k: f"{v} it" for k, v in OBJECTIVES.items()})
    if cfg.select("tuning.n_trials") in (0, "0") and not text(cfg, "tuning.storage"):
        raise PulseError(f"pulse-ml {verb}: tuning.n_trials=0 runs no trial, and without "
                         "tuning.storage there is no earlier study to reuse. Use "
                         "tuning.n_trials >= 1, or tuning.storage=<the journal/database of an "
                         "earlier study> to refit its best trial.")
    return TuningSettings(
        n_trials=number(cfg, "tuning.n_trials", verb, 0, None, integer=True),
        timeout_s=number(cfg, "tuning.timeout_s", verb, 0, None, open_interval=True,
                         optional=True),
        storage=text(cfg, "tuning.storage"), study_name=text(cfg, "tuning.study_name"),
        workers=number(cfg, "tuning.workers", verb, 1, None, integer=True),
        objective=objective, seed=number(cfg, "seed", verb, integer=True),
        n_splits=number(cfg, "cv.n_splits", verb, 2, None, integer=True),
        cv_seed=number(cfg, "cv.seed", verb, integer=True),
        group_by_user=choice(cfg, "cv.group_by", verb, GROUP_MODES) == "user_id",
        prune=flag(cfg, "tuning.prune", verb, True),
        sampler_seed=number(cfg, "tuning.sampler_seed", verb, integer=True, optional=True))


def model_spec(cfg: Node) -> ModelSpec:
    """Typed model family from the composed ``model`` node."""
    return model_spec_from_mapping(mapping(cfg, "model"))


def settings_from_config(cfg: Node, verb: str = "train",
                         spec: ModelSpec | None = None) -> TrainSettings:
    """Read the composed config once (every number and choice checked here).

    ``pipeline`` passes its own config (no ``model`` key) and each family's ``spec``.
    """
    return TrainSettings(
        data_path=str(cfg.data.path),
        simulate_if_missing=flag(cfg, "data.simulate_if_missing", verb, True),
        features=shared.feature_set(cfg), model=spec or model_spec(cfg),
        tuning=tuning_settings(cfg, verb), register=flag(cfg, "register", verb, True),
        auto_promote=choice(cfg, "promote", verb, PROMOTE_MODES) == "auto",
        progress=flag(cfg, "progress", verb, True), config_yaml=to_yaml(cfg),
        selection=training_selection(cfg, verb), text_cache=text_cache_folder(cfg))


def training_selection(cfg: Node, verb: str = "train") -> TrainingSelection:
    """``exclude_case_studies`` (names, or ``all``) and ``trained_before`` (a date)."""
    raw = cfg.select("exclude_case_studies")
    if raw is None or (isinstance(raw, str) and raw.strip().lower() in ("", "none")):
        excluded: tuple[str, ...] = ()
    elif isinstance(raw, str) and raw.strip().lower() == "all":
        excluded = ("all",)
    elif isinstance(raw, str | list | tuple):
        items = raw.split(",") if isinstance(raw, str) else raw
        excluded = tuple(str(v).strip() for v in items if str(v).strip())
    else:
        raise PulseError(f"pulse-ml {verb}: exclude_case_studies={raw!r}: give a list of case "
                         "study names, e.g. exclude_case_studies=[plan,memory], or all.")
    return TrainingSelection(excluded, parse_trained_before(cfg.select("trained_before"), verb))


def train_family(table: SessionTable, spec: ModelSpec, tuning: TuningSettings,
                 config_yaml: str, register: bool = True, auto_promote: bool = True,
                 progress: bool = True) -> TrainResult:
    """Tune one family, log it to ``pulse-train``, register and (maybe) promote it."""
    from pulse_ml.registry import models, promotion, runs, store
    from pulse_ml.training.family import fingerprint, study_name_for, training_data

    labeled, _ = training_data(table)
    fp = fingerprint(labeled, table.features)
    with runs.family_run(spec.name, table.features.name, fp, tuning.objective,
                         study_name_for(spec, table.features, fp, tuning)) as run_id:
        fit = tune_family(table, spec, tuning, progress=progress)
        runs.log_trials(run_id, store.setup(store.TRAIN_EXPERIMENT), fit.trials, spec.name)
        _log_fit(fit, tuning, config_yaml)
        version, decision = None, None
        values = fit.metrics.as_dict()
        if register:
            version = models.log_and_register_model(fit.ensemble, fit.labeled, {
                "family": spec.name, "feature_set": fit.features.name,
                "data_fingerprint": fit.fingerprint, "git_commit": store.git_commit(),
                "objective": tuning.objective, **{k: f"{v:.6f}" for k, v in values.items()}})
            decision = promotion.decide_and_promote(version, tuning.objective,
                                                    values[tuning.objective], fit.fingerprint,
                                                    auto_promote)
            runs.set_tags({"registered_version": version,
                           "promotion": "promoted" if decision.promoted else "kept",
                           "promotion_reason": decision.reason})
    return TrainResult(
        family=spec.name, feature_set=fit.features.name, run_id=run_id,
        best_params=fit.best_params, metrics=fit.metrics, n_trials=fit.n_trials_total,
        seconds=fit.seconds, version=version, promoted=bool(decision and decision.promoted),
        promotion_reason=decision.reason if decision else "not registered (register=false)",
        data_fingerprint=fit.fingerprint)


def _log_fit(fit: FamilyFit, tuning: TuningSettings, config_yaml: str) -> None:
    from pulse_ml.registry import runs

    m = fit.metrics
    runs.log_family_run(
        run_name=fit.family, tags={},
        params={**{f"best.{k}": v for k, v in fit.best_params.items()},
                "family": fit.family, "feature_set": fit.features.name,
                "n_labeled": len(fit.y), "cv.n_splits": tuning.n_splits,
                "cv.seed": tuning.cv_seed, "seed": tuning.seed,
                "cv.group_by": "user_id" if tuning.group_by_user else "none",
                "objective": tuning.objective, "n_trials_requested": tuning.n_trials,
                "storage": tuning.storage, "workers": tuning.workers},
        metrics={**m.as_dict(), "n_trials": fit.n_trials_total,
                 "n_trials_complete": fit.n_complete, "tuning_time_s": fit.seconds,
                 "best_trial": fit.best_number},
        fold_metrics={"fold_mse": list(m.fold_mse), "fold_mae": list(m.fold_mae),
                      "fold_pearson": list(m.fold_pearson)},
        config_yaml=config_yaml, oof=fit.ensemble.oof)


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


def run(cfg: Node) -> TrainResult:
    """Entry point of ``pulse-ml train``."""
    return run_settings(settings_from_config(cfg))


def run_settings(job: TrainSettings) -> TrainResult:
    """Train with typed settings (``pipeline`` calls this directly)."""
    ensure_demo_data(job.data_path, job.simulate_if_missing)
    # Training uses every labeled session; case studies matter only to infer.
    table = select_training(load_sessions(job.data_path, job.features, {}, only=[]),
                            job.selection)
    spec, tuning = job.model, job.tuning
    if tuning.storage:  # a study database that does not answer fails before any MLflow run
        from pulse_ml.training.storage import open_storage

        open_storage(tuning.storage)
    chosen = f", {job.selection.describe()}" if job.selection.active else ""
    print(f"training {spec.name} on {int(table.labeled.sum())} labeled sessions of "
          f"{Path(table.path).name}{chosen} (features '{table.features.name}', "
          f"{tuning.n_trials if spec.search_space else 1} trial(s) x {tuning.n_splits}-fold CV, "
          f"objective {tuning.objective})")
    with cache_folder(job.text_cache):  # read by the text encoders (and tuning workers)
        result = train_family(table, spec, tuning, job.config_yaml, register=job.register,
                              auto_promote=job.auto_promote, progress=job.progress)
    print(summary(result))
    return result


__all__ = ["TrainResult", "TrainSettings", "run", "run_settings", "train_family"]
