"""Optuna tuning of one model family under k-fold cross-validation.

The data are loaded once into a :class:`CVObjective`; each trial samples hyper-parameters,
fits one pipeline per fold, reports the running score per fold (median pruning) and stores its
fold metrics as user attributes. Several worker processes can share one study through a journal
file or a database URL (``storage``).
"""

from __future__ import annotations

import multiprocessing as mp
from dataclasses import dataclass

import numpy as np
import pandas as pd

from pulse_ml.errors import PulseError
from pulse_ml.models.factory import ModelSpec, build_pipeline, suggest
from pulse_ml.models.preprocess import feature_frame
from pulse_ml.sessions.feature_sets import FeatureSet
from pulse_ml.training.folds import make_folds  # noqa: F401 - re-exported
from pulse_ml.training.metrics import cv_metrics, pearson

OBJECTIVES = {"cv_mse": "minimize", "cv_pearson": "maximize"}


@dataclass(frozen=True)
class TuningSettings:
    """How to tune: trials, time, storage, parallel workers, objective and seeds."""

    n_trials: int = 30
    timeout_s: float | None = None
    storage: str | None = None
    study_name: str | None = None
    workers: int = 1
    objective: str = "cv_mse"
    seed: int = 42
    n_splits: int = 5
    cv_seed: int = 42
    group_by_user: bool = True
    prune: bool = True
    sampler_seed: int | None = None

    @property
    def tpe_seed(self) -> int:
        """Seed of the TPE sampler: ``sampler_seed`` when set (one per machine), else ``seed``."""
        return self.seed if self.sampler_seed is None else self.sampler_seed


class CVObjective:
    """Optuna objective holding the preloaded training data.

    Args:
        frame: Labeled sessions.
        y: Ratings.
        folds: Fold index per row.
        spec: Model family.
        features: Feature set.
        objective: ``cv_mse`` (minimize) or ``cv_pearson`` (maximize).
        prune: Report per-fold values so a pruner can stop bad trials early.
    """

    def __init__(self, frame: pd.DataFrame, y: np.ndarray, folds: np.ndarray, spec: ModelSpec,
                 features: FeatureSet, objective: str = "cv_mse", prune: bool = True):
        self.X = feature_frame(frame, features)
        self.y = np.asarray(y, float)
        self.folds = folds
        self.spec = spec
        self.features = features
        self.objective = objective
        self.prune = prune
        self._masks = [folds == k for k in np.unique(folds)]

    def __call__(self, trial) -> float:
        """Cross-validate one hyper-parameter sample; returns the objective value.

        OpenMP/BLAS run single-threaded inside the folds: parallelism comes from
        ``tuning.workers`` processes (multi-threaded fits stall when the other core is busy).
        """
        from threadpoolctl import threadpool_limits

        with threadpool_limits(limits=1):
            return self._cross_validate(trial)

    def _cross_validate(self, trial) -> float:
        import optuna

        params = suggest(trial, self.spec.search_space)
        oof = np.empty_like(self.y)
        for k, test in enumerate(self._masks):
            model = build_pipeline(self.spec, self.features, params)
            model.fit(self.X[~test], self.y[~test])
            oof[test] = model.predict(self.X[test])
            if self.prune:
                seen = np.logical_or.reduce(self._masks[: k + 1])
                running = (float(np.mean((oof[seen] - self.y[seen]) ** 2))
                           if self.objective == "cv_mse" else pearson(self.y[seen], oof[seen]))
                trial.report(running, k)
                if trial.should_prune():
                    raise optuna.TrialPruned()
        metrics = cv_metrics(self.y, oof, self.folds)
        trial.set_user_attr("metrics", metrics.as_dict())
        trial.set_user_attr("fold_mse", list(metrics.fold_mse))
        trial.set_user_attr("fold_mae", list(metrics.fold_mae))
        trial.set_user_attr("fold_pearson", list(metrics.fold_pearson))
        return metrics.mse if self.objective == "cv_mse" else metrics.pearson


def _storage(url: str | None):
    """The Optuna storage of ``tuning.storage`` (bounded waits: see ``training.storage``)."""
    from pulse_ml.training.storage import open_storage

    return open_storage(url)


def open_study(settings: TuningSettings, study_name: str, worker: int = 0):
    """Create or load the study (seeded TPE, median pruner) — resumable with a storage."""
    import optuna

    sampler = optuna.samplers.TPESampler(seed=settings.tpe_seed + worker)
    pruner = (optuna.pruners.MedianPruner(n_startup_trials=5, n_warmup_steps=1)
              if settings.prune else optuna.pruners.NopPruner())
    return optuna.create_study(study_name=study_name, storage=_storage(settings.storage),
                               sampler=sampler, pruner=pruner,
                               direction=OBJECTIVES[settings.objective], load_if_exists=True)


def _worker(settings: TuningSettings, study_name: str, worker: int, objective: CVObjective,
            n_trials: int) -> None:
    import optuna

    optuna.logging.set_verbosity(optuna.logging.ERROR)
    study = open_study(settings, study_name, worker)
    study.optimize(objective, n_trials=n_trials, timeout=settings.timeout_s)


def run_study(settings: TuningSettings, study_name: str, objective: CVObjective,
              progress: bool = True, on_trial=None):
    """Run the trials of this invocation; returns ``(study, first_new_trial_number)``.

    With ``workers > 1`` the extra workers run in spawned processes on the same storage; the
    trials are split between them. ``on_trial(trial)`` is called in this process for each
    trial it finished.
    """
    import optuna
    from tqdm.auto import tqdm

    if settings.objective not in OBJECTIVES:
        raise PulseError(f"objective={settings.objective}: use one of {', '.join(OBJECTIVES)}.")
    if settings.workers > 1 and not settings.storage:
        raise PulseError("tuning.workers > 1 needs a shared study: set tuning.storage to a "
                         "journal file (e.g. tuning.storage=mlruns/optuna.journal) or a "
                         "database URL.")
    optuna.logging.set_verbosity(optuna.logging.ERROR)
    study = open_study(settings, study_name, 0)
    start = len(study.trials)
    n_trials = settings.n_trials if objective.spec.search_space else min(settings.n_trials, 1)
    shares = [n_trials // settings.workers + (i < n_trials % settings.workers)
              for i in range(settings.workers)]
    procs = []
    ctx = mp.get_context("spawn")
    for i in range(1, settings.workers):
        if shares[i]:
            p = ctx.Process(target=_worker,
                            args=(settings, study_name, i, objective, shares[i]))
            p.start()
            procs.append(p)
    bar = tqdm(total=shares[0], desc=f"tuning {objective.spec.name}", unit="trial",
               disable=not progress, leave=True)

    def _update(study, trial):
        bar.update(1)
        if on_trial is not None:
            on_trial(trial)
        try:
            bar.set_postfix({f"best {settings.objective}": f"{study.best_value:.4f}"})
        except ValueError:
            pass

    try:
        study.optimize(objective, n_trials=shares[0], timeout=settings.timeout_s,
                       callbacks=[_update])
    except BaseException:  # Ctrl-C, SIGTERM or an error: stop the other workers too
        for p in procs:
            p.terminate()
        raise
    finally:
        bar.close()
        for p in procs:
            p.join()
    failed = [p.exitcode for p in procs if p.exitcode != 0]
    if failed:
        raise PulseError(f"a tuning worker process failed (exit code {failed[0]}); the trials "
                         f"it finished are kept in {settings.storage}.")
    return study, start
