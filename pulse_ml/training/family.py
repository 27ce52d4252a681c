"""One model family's run: tune it under CV, refit the best trial as a cross-fit ensemble.

Pure of MLflow: :func:`tune_family` returns a :class:`FamilyFit` that the train job logs and
registers through :mod:`pulse_ml.registry`. A hook receives each finished trial, so the caller
can log trials while the study runs.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, replace

import numpy as np
import pandas as pd

from pulse_ml.errors import PulseError
from pulse_ml.models.crossfit import CrossFitEnsemble, fit_crossfit
from pulse_ml.models.factory import ModelSpec, build_pipeline
from pulse_ml.sessions.feature_sets import FeatureSet
from pulse_ml.sessions.fingerprint import data_fingerprint
from pulse_ml.sessions.table import SessionTable
from pulse_ml.training.folds import make_folds
from pulse_ml.training.metrics import CVMetrics, cv_metrics
from pulse_ml.training.nested import SelectionFree, selection_free
from pulse_ml.training.tuning import (
    CVObjective,
    TuningSettings,
    own_trials,
    run_study,
    study_report,
)


@dataclass(frozen=True)
class FamilyFit:
    """The outcome of tuning one family.

    Attributes:
        family: Family name.
        features: Feature set.
        labeled: The labeled sessions it was trained on.
        y: Their ratings.
        folds: Fold index per labeled session.
        fingerprint: Fingerprint of the training data (ids, ratings, features).
        study_name: The Optuna study.
        trials: Trials of this invocation (all states).
        n_trials_total: Trials in the study, earlier invocations included.
        n_complete: Completed trials in the study.
        best_params: The best trial's hyper-parameters.
        best_number: The best trial's number.
        ensemble: The best trial's fold models as a cross-fit ensemble.
        metrics: Out-of-fold metrics of the ensemble.
        seconds: Wall time of tuning and refit.
        history: One row per trial of the study (:func:`~pulse_ml.training.tuning.study_report`).
        importances: Parameter importances of the study (fANOVA; empty when not computable).
        selection_free: Out-of-fold predictions with each fold predicted by the trial best on
            the other folds (:mod:`pulse_ml.training.nested`): what the champion is compared on.
    """

    family: str
    features: FeatureSet
    labeled: pd.DataFrame
    y: np.ndarray
    folds: np.ndarray
    fingerprint: str
    study_name: str
    trials: list
    n_trials_total: int
    n_complete: int
    best_params: dict
    best_number: int
    ensemble: CrossFitEnsemble
    metrics: CVMetrics
    seconds: float
    history: pd.DataFrame | None = None
    importances: dict | None = None
    selection_free: SelectionFree | None = None


def training_data(table: SessionTable) -> tuple[pd.DataFrame, np.ndarray]:
    """Labeled sessions and their ratings."""
    labeled = table.frame.loc[table.labeled].reset_index(drop=True)
    return labeled, labeled["rating"].to_numpy(float)


def fingerprint(labeled: pd.DataFrame, features: FeatureSet) -> str:
    """Fingerprint of the training data (ids, ratings, features)."""
    return data_fingerprint(labeled, ["session_id", "rating", *features.model_names])


def label_fingerprint(labeled: pd.DataFrame) -> str:
    """Fingerprint of the sessions and their ratings only (ids, ratings; no features).

    Two models with the same label fingerprint predicted the same labeled sessions out of
    fold, whatever their feature sets: their errors can be paired session by session.
    """
    return data_fingerprint(labeled, ["session_id", "rating"])


def study_name_for(spec: ModelSpec, features: FeatureSet, fp: str,
                   tuning: TuningSettings) -> str:
    """The study name: ``tuning.study_name`` or ``<family>-<features>-<fingerprint>``."""
    return tuning.study_name or f"{spec.name}-{features.name}-{fp[:10]}"


def with_text_search_space(spec: ModelSpec, features: FeatureSet) -> ModelSpec:
    """The family's search space plus the text columns' (``features__text_<col>__<setting>``).

    Optuna then tunes text-encoder settings (e.g. the sub-model's ``stack_alpha``) together
    with the estimator's hyper-parameters; :func:`build_pipeline` routes them to the text steps.
    """
    from pulse_ml.sessions.text_options import text_search_space

    extra = tuple(p for p in text_search_space(features)
                  if p.name not in {q.name for q in spec.search_space})
    return replace(spec, search_space=spec.search_space + extra) if extra else spec


def tune_family(table: SessionTable, spec: ModelSpec, tuning: TuningSettings,
                progress: bool = True,
                on_trial: Callable[[object], None] | None = None,
                invocation: str | None = None) -> FamilyFit:
    """Tune ``spec`` on the labeled sessions of ``table`` and refit the best trial.

    Each fold is also predicted by the trial best on the other folds
    (``FamilyFit.selection_free``, :mod:`pulse_ml.training.nested`), from the trials' stored
    out-of-fold predictions: no extra fit.

    Args:
        table: Validated session table.
        spec: Model family.
        tuning: Tuning and CV settings.
        progress: Show a progress bar over trials.
        on_trial: Called in this process with each trial of this invocation (any worker,
            any final state) soon after it finishes, once per trial.
        invocation: Id tagged on this call's trials (the train job passes its run id), so
            trials that a concurrent call adds to a shared study are not counted as this one's.

    Raises:
        PulseError: no trial completed, or too few sessions/users for the folds.
    """
    from threadpoolctl import threadpool_limits

    features = table.features
    spec = with_text_search_space(spec, features)
    labeled, y = training_data(table)
    if features.history and not tuning.group_by_user:
        raise PulseError(f"feature '{features.history[0].name}' (kind user_history) needs folds "
                         "grouped by user: with cv.group_by=none a fold model learns from later "
                         "sessions whose history holds the held-out session's rating. Use "
                         "cv.group_by=user_id.")
    groups = labeled["user_id"].to_numpy() if tuning.group_by_user else None
    folds = make_folds(len(y), tuning.n_splits, tuning.cv_seed, groups)
    fp = fingerprint(labeled, features)
    name = study_name_for(spec, features, fp, tuning)
    objective = CVObjective(labeled, y, folds, spec, features, tuning.objective,
                            tuning.pruner_used != "none")
    start = time.perf_counter()
    if invocation is None:
        import uuid

        invocation = uuid.uuid4().hex
    study, first = run_study(tuning, name, objective, progress=progress, on_trial=on_trial,
                             invocation=invocation)
    new_trials = own_trials(study, invocation, first)
    complete = [t for t in study.trials if t.state.name == "COMPLETE"]
    if not complete:
        if not new_trials and tuning.n_trials == 0:
            raise PulseError(f"model '{spec.name}': tuning.n_trials=0 and the study "
                             f"'{name}' has no completed trial to use. Run at least one trial "
                             "(tuning.n_trials >= 1), or point tuning.storage at a study "
                             "that has some.")
        raise PulseError(f"model '{spec.name}': no trial completed (all pruned or failed).")
    best = study.best_trial
    with threadpool_limits(limits=1):  # same threading as the trials: same numbers
        ensemble = fit_crossfit(lambda: build_pipeline(spec, features, best.params),
                                labeled, y, folds, features, spec.name,
                                fitted=objective.best_models(best.number))
    metrics = cv_metrics(y, ensemble.oof["prediction"].to_numpy(), folds)
    free = selection_free(labeled, y, folds, complete, best, ensemble.oof, tuning.objective)
    seconds = time.perf_counter() - start
    history, importances = study_report(study, first, tuning.tpe_seed, invocation)
    return FamilyFit(
        family=spec.name, features=features, labeled=labeled, y=y, folds=folds,
        fingerprint=fp, study_name=name, trials=new_trials, n_trials_total=len(study.trials),
        n_complete=len(complete), best_params=dict(best.params), best_number=best.number,
        ensemble=ensemble, metrics=metrics, seconds=seconds,
        history=history, importances=importances, selection_free=free)
