"""Optuna tuning of one model family under k-fold cross-validation.

The data are loaded once into a :class:`CVObjective`; each trial samples hyper-parameters,
fits one pipeline per fold, reports the running score per fold (for the pruner,
``training/samplers.py``) and stores its fold metrics as user attributes. Several worker
processes can share one study through a journal file or a database URL (``storage``).
"""

from __future__ import annotations

import multiprocessing as mp
from dataclasses import dataclass

import numpy as np
import pandas as pd

from pulse_ml import keys
from pulse_ml.errors import PulseError
from pulse_ml.models.factory import ModelSpec, build_pipeline, suggest
from pulse_ml.models.preprocess import feature_frame
from pulse_ml.sessions.feature_sets import FeatureSet
from pulse_ml.training.folds import make_folds  # noqa: F401 - re-exported
from pulse_ml.training.metrics import cv_metrics, pearson
from pulse_ml.training.nested import PREDICTIONS_ATTR, pack_predictions
from pulse_ml.training.samplers import make_pruner, make_sampler

OBJECTIVES = {keys.CV_MSE: "minimize", keys.CV_PEARSON: "maximize"}


@dataclass(frozen=True)
class TuningSettings:
    """How to tune: trials, time, storage, parallel workers, objective, sampler, pruner, seeds.

    ``plots``: also draw the optimization history and the importances as PNG files of the
    family run (their CSV/JSON and the run's per-trial step series are always logged).

    ``sampler``/``pruner`` are keys of :data:`~pulse_ml.training.samplers.SAMPLERS` and
    :data:`~pulse_ml.training.samplers.PRUNERS`; ``prune=False`` turns pruning off whatever
    ``pruner`` says (:attr:`pruner_used`).
    """

    n_trials: int = 30
    timeout_s: float | None = None
    storage: str | None = None
    study_name: str | None = None
    workers: int = 1
    objective: str = keys.CV_MSE
    seed: int = 42
    n_splits: int = 5
    cv_seed: int = 42
    group_by_user: bool = True
    prune: bool = True
    sampler_seed: int | None = None
    sampler: str = "tpe"
    pruner: str = "median"
    plots: bool = False  # draw the study's PNG plots (matplotlib, ~0.5 s CPU per family)

    @property
    def tpe_seed(self) -> int:
        """The sampler's seed (any sampler): ``sampler_seed`` if set, else ``seed`` (+ worker)."""
        return self.seed if self.sampler_seed is None else self.sampler_seed

    @property
    def pruner_used(self) -> str:
        """The pruner the study uses: ``pruner``, or ``none`` when ``prune`` is off."""
        return self.pruner if self.prune else "none"


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
                 features: FeatureSet, objective: str = keys.CV_MSE, prune: bool = True):
        self.X = feature_frame(frame, features)
        self.y = np.asarray(y, float)
        self.folds = folds
        self.spec = spec
        self.features = features
        self.objective = objective
        self.prune = prune
        self._masks = [folds == k for k in np.unique(folds)]
        self._best: tuple[float, int, list] | None = None  # (value, trial number, fold models)

    def __getstate__(self) -> dict:
        """Pickled for worker processes without the kept fold models (each keeps its own)."""
        return {**self.__dict__, "_best": None}

    def best_models(self, number: int) -> list | None:
        """The fold models of trial ``number`` if this process ran it and it was its best.

        The train job refits the study's best trial from them without fitting again (the
        same fits: same data, folds, parameters and single-threaded run); None when another
        worker or an earlier invocation ran it (then it is refit).
        """
        return self._best[2] if self._best is not None and self._best[1] == number else None

    def _keep(self, number: int, value: float, models: list) -> None:
        """Keep ``models`` when ``value`` is strictly better than this process's best so far.

        Strictly: on a tie Optuna's best trial is the earlier one, whose models are kept.
        """
        if not np.isfinite(value):
            return
        better = self._best is None or (value < self._best[0] if self.objective == keys.CV_MSE
                                        else value > self._best[0])
        if better:
            self._best = (value, number, models)

    def __call__(self, trial) -> float:
        """Cross-validate one hyper-parameter sample; returns the objective value.

        OpenMP/BLAS run single-threaded inside the folds: parallelism comes from
        ``tuning.workers`` processes (multi-threaded fits stall when the other core is busy).
        """
        import optuna
        from threadpoolctl import threadpool_limits

        with threadpool_limits(limits=1):
            try:
                return self._cross_validate(trial)
            except optuna.TrialPruned:
                raise
            except Exception as exc:  # kept on the trial, so its MLflow run says why it failed
                trial.set_user_attr("error", f"{type(exc).__name__}: {exc}"[:500])
                raise

    def _cross_validate(self, trial) -> float:
        import optuna

        params = suggest(trial, self.spec.search_space)
        oof = np.empty_like(self.y)
        models = []
        for k, test in enumerate(self._masks):
            model = build_pipeline(self.spec, self.features, params)
            model.fit(self.X[~test], self.y[~test])
            oof[test] = model.predict(self.X[test])
            models.append(model)
            if self.prune:
                seen = np.logical_or.reduce(self._masks[: k + 1])
                running = (float(np.mean((oof[seen] - self.y[seen]) ** 2))
                           if self.objective == keys.CV_MSE else pearson(self.y[seen], oof[seen]))
                trial.report(running, k)
                if trial.should_prune():
                    raise optuna.TrialPruned()
        metrics = cv_metrics(self.y, oof, self.folds)
        trial.set_user_attr("metrics", metrics.as_dict())
        trial.set_user_attr(keys.FOLD_MSE, list(metrics.fold_mse))
        trial.set_user_attr(keys.FOLD_MAE, list(metrics.fold_mae))
        trial.set_user_attr(keys.FOLD_PEARSON, list(metrics.fold_pearson))
        trial.set_user_attr(PREDICTIONS_ATTR, pack_predictions(oof))  # training/nested.py
        value = metrics.mse if self.objective == keys.CV_MSE else metrics.pearson
        self._keep(trial.number, value, models)
        return value


def _storage(url: str | None):
    """The Optuna storage of ``tuning.storage`` (bounded waits: see ``training.storage``)."""
    if url == "auto":
        raise PulseError("tuning.storage=auto is resolved by the train job (a journal file "
                         "under the tracking store); pass a journal path or a database URL "
                         "when tuning without it.")
    from pulse_ml.training.storage import open_storage

    return open_storage(url)


def open_study(settings: TuningSettings, study_name: str, worker: int = 0):
    """Create or load the study — resumable with a storage.

    The sampler (seeded ``tpe_seed + worker``) and the pruner are the ones of ``settings``,
    also for a study that exists already (Optuna does not store them).
    """
    import optuna

    sampler = make_sampler(settings.sampler, settings.tpe_seed, worker)
    pruner = make_pruner(settings.pruner_used, settings.n_splits)
    return optuna.create_study(study_name=study_name, storage=_storage(settings.storage),
                               sampler=sampler, pruner=pruner,
                               direction=OBJECTIVES[settings.objective], load_if_exists=True)


def _worker(settings: TuningSettings, study_name: str, worker: int, objective,
            n_trials: int) -> None:
    import optuna

    optuna.logging.set_verbosity(optuna.logging.ERROR)
    study = open_study(settings, study_name, worker)
    study.optimize(objective, n_trials=n_trials, timeout=settings.timeout_s)


INVOCATION_ATTR = "invocation"  # trial user attribute: the id of the run_study call that ran it


class _OwnTrials:
    """The objective, tagging each trial with the invocation that runs it (picklable)."""

    def __init__(self, objective: CVObjective, invocation: str):
        self.objective = objective
        self.invocation = invocation
        self.spec = objective.spec

    def __call__(self, trial) -> float:
        trial.set_user_attr(INVOCATION_ATTR, self.invocation)
        return self.objective(trial)


def own_trials(study, invocation: str, first: int = 0) -> list:
    """The trials of ``study`` that invocation ``invocation`` ran (numbered >= ``first``).

    Another invocation on the same study (a second ``train`` on a shared storage) adds trials
    with higher numbers too; the invocation attribute tells them apart.
    """
    return [t for t in study.get_trials(deepcopy=False)
            if t.number >= first and t.user_attrs.get(INVOCATION_ATTR) == invocation]


class _TrialFeed:
    """Hands each finished trial of this invocation to ``on_trial`` once, in this process.

    Other worker processes write their trials to the study storage only; scanning the study
    here (after each local trial, while the workers run, and once at the end) lets the caller
    log every trial as it finishes without a second writer on the tracking store. Trials of
    another invocation on the same study (their ``invocation`` user attribute differs) are
    never handed over, so two ``train`` calls sharing a study each log their own trials.
    """

    def __init__(self, first: int, on_trial, invocation: str):
        self.first = first
        self.on_trial = on_trial
        self.invocation = invocation
        self.seen: set[int] = set()

    def scan(self, study) -> None:
        if self.on_trial is None:
            return
        import optuna

        done = (optuna.trial.TrialState.COMPLETE, optuna.trial.TrialState.PRUNED,
                optuna.trial.TrialState.FAIL)
        for trial in sorted(study.get_trials(deepcopy=False, states=done),
                            key=lambda t: t.number):
            if (trial.number >= self.first and trial.number not in self.seen
                    and trial.user_attrs.get(INVOCATION_ATTR) == self.invocation):
                self.seen.add(trial.number)
                self.on_trial(trial)


def run_study(settings: TuningSettings, study_name: str, objective: CVObjective,
              progress: bool = True, on_trial=None, poll_s: float = 0.5,
              invocation: str | None = None):
    """Run the trials of this invocation; returns ``(study, first_new_trial_number)``.

    Each trial it runs carries the user attribute ``invocation`` (default: a fresh id; the
    train job passes its MLflow run id); :func:`own_trials` lists them.

    With ``workers > 1`` the extra workers run in spawned processes on the same storage; the
    trials are split between them. ``on_trial(trial)`` is called in this process, once for
    every trial of this invocation that finished (complete, pruned or failed) in any worker,
    soon after it finished: after each local trial, every ``poll_s`` seconds while other
    workers still run, and a last time at the end (also when tuning stops with an error).
    """
    import time

    import optuna

    from pulse_ml.report.progress import progress_bar

    if settings.objective not in OBJECTIVES:
        raise PulseError(f"objective={settings.objective}: use one of {', '.join(OBJECTIVES)}.")
    if settings.workers > 1 and not settings.storage:
        raise PulseError("tuning.workers > 1 needs a shared study: keep the default "
                         "tuning.storage=auto (a journal file under the store) or set a "
                         "journal file (e.g. tuning.storage=mlruns/optuna.journal) or a "
                         "database URL.")
    optuna.logging.set_verbosity(optuna.logging.ERROR)
    study = open_study(settings, study_name, 0)
    start = len(study.trials)
    if invocation is None:
        import uuid

        invocation = uuid.uuid4().hex  # an id, not a statistical choice: no seed needed
    feed = _TrialFeed(start, on_trial, invocation)
    tagged = _OwnTrials(objective, invocation)
    n_trials = settings.n_trials if objective.spec.search_space else min(settings.n_trials, 1)
    shares = [n_trials // settings.workers + (i < n_trials % settings.workers)
              for i in range(settings.workers)]
    procs = []
    ctx = mp.get_context("spawn")
    for i in range(1, settings.workers):
        if shares[i]:
            p = ctx.Process(target=_worker,
                            args=(settings, study_name, i, tagged, shares[i]))
            p.start()
            procs.append(p)
    bar = progress_bar(total=shares[0], desc=f"tuning {objective.spec.name}", unit="trial",
                       disable=not progress, leave=True)

    def _update(study, trial):
        bar.update(1)
        feed.scan(study)
        try:
            bar.set_postfix({f"best {settings.objective}": f"{study.best_value:.4f}"})
        except ValueError:
            pass

    try:
        study.optimize(tagged, n_trials=shares[0], timeout=settings.timeout_s,
                       callbacks=[_update])
        while any(p.is_alive() for p in procs):
            feed.scan(study)
            time.sleep(poll_s)
    except BaseException:  # Ctrl-C, SIGTERM or an error: stop the other workers too
        for p in procs:
            p.terminate()
        raise
    finally:
        bar.close()
        for p in procs:
            p.join()
        feed.scan(study)
    failed = [p.exitcode for p in procs if p.exitcode != 0]
    if failed:
        raise PulseError(f"a tuning worker process failed (exit code {failed[0]}); the trials "
                         f"it finished are kept in {settings.storage}.")
    return study, start


def study_report(study, first: int = 0, seed: int = 0,
                 invocation: str | None = None) -> tuple[pd.DataFrame, dict[str, float]]:
    """The optimization history and the parameter importances of a study (for the parent run).

    Args:
        study: An Optuna study.
        first: Trials numbered below this came from earlier invocations (``this_invocation``).
        seed: Seed of the fANOVA importance evaluator.
        invocation: When given, ``this_invocation`` also needs the trial's ``invocation``
            attribute to match (trials of a concurrent invocation are not this one's).

    Returns:
        ``(history, importances)``: one row per trial (number, state, value, best value so far,
        start, end, duration, params) and ``param -> importance`` (fANOVA, summing to 1; empty
        with fewer than 2 completed trials or no parameter that varies).
    """
    import optuna

    direction = study.direction == optuna.study.StudyDirection.MINIMIZE
    rows, best = [], None
    for t in study.get_trials(deepcopy=False):
        value = t.value if t.state == optuna.trial.TrialState.COMPLETE else None
        if value is not None:
            best = value if best is None else (min(best, value) if direction else max(best, value))
        end = t.datetime_complete
        rows.append({"number": t.number, "state": t.state.name, "value": value,
                     "best_so_far": best, "datetime_start": t.datetime_start,
                     "datetime_complete": end,
                     "duration_s": (end - t.datetime_start).total_seconds()
                     if end and t.datetime_start else None,
                     "this_invocation": t.number >= first and (
                         invocation is None or t.user_attrs.get(INVOCATION_ATTR) == invocation),
                     **{f"params.{k}": v for k, v in t.params.items()}})
    history = pd.DataFrame(rows)
    complete = [t for t in study.get_trials(deepcopy=False)
                if t.state == optuna.trial.TrialState.COMPLETE]
    importances: dict[str, float] = {}
    if len(complete) >= 2 and any(len({str(t.params.get(k)) for t in complete}) > 1
                                  for k in complete[0].params):
        try:
            evaluator = optuna.importance.FanovaImportanceEvaluator(seed=seed)
            importances = {k: float(v) for k, v in optuna.importance.get_param_importances(
                study, evaluator=evaluator).items()}
        except (RuntimeError, ValueError):  # e.g. a dynamic search space
            importances = {}
    return history, importances
