"""Optuna trials as MLflow runs: one nested run per finished trial, and the study's journal."""

from __future__ import annotations

import time

from pulse_ml import keys
from pulse_ml.env.dbprobe import sqlite_file
from pulse_ml.registry.models import client


def _ms(moment) -> int | None:
    return None if moment is None else int(moment.timestamp() * 1000)


class TrialLogger:
    """Logs Optuna trials as nested runs of a family run, one call per finished trial.

    Call it from the process that owns the tracking store (the train job's main process): it
    is the ``on_trial`` hook of :func:`pulse_ml.training.tuning.run_study`, which also hands
    over the trials that other worker processes finished (they only write to the study).
    Each run has the trial's real start and end time, a status that shows its state (COMPLETE
    -> FINISHED, PRUNED -> KILLED, FAIL -> FAILED; tag ``trial_state``), its parameters, its
    per-fold scores (``fold_mse_0`` ...), the running objective per fold as a step series
    (``running_<objective>``), the parent's source tags (``mlflow.source.*``) and a one-line
    description. Only a COMPLETE trial has the metric ``objective``: Optuna gives a pruned
    trial its last running value, which is not comparable with a complete one's.

    Args:
        parent_run_id: The family run.
        experiment_id: Its experiment.
        family: Family name (run names ``<family>-trial-<n>``).
        objective: The study's objective key (``cv_mse`` or ``cv_pearson``).
    """

    STATUS = {"COMPLETE": "FINISHED", "PRUNED": "KILLED", "FAIL": "FAILED"}

    def __init__(self, parent_run_id: str, experiment_id: str, family: str, objective: str):
        self.parent_run_id = parent_run_id
        self.experiment_id = experiment_id
        self.family = family
        self.objective = objective
        self.runs: dict[int, str] = {}
        self._source: dict[str, str] | None = None

    def source(self) -> dict[str, str]:
        """The parent run's ``mlflow.source.*`` and ``mlflow.user`` tags, read once."""
        if self._source is None:
            from mlflow.exceptions import MlflowException

            try:
                tags = client().get_run(self.parent_run_id).data.tags
            except MlflowException:  # a nicety: never what fails a trial's logging
                tags = {}
            self._source = {k: v for k, v in tags.items()
                            if k.startswith(keys.SOURCE_PREFIX) or k == keys.USER}
        return self._source

    def describe(self, trial) -> str:
        """One line: state, value, folds done, duration and parameters."""
        state = trial.state.name
        secs = ((trial.datetime_complete - trial.datetime_start).total_seconds()
                if trial.datetime_complete and trial.datetime_start else float("nan"))
        params = ", ".join(f"{k}={v:.4g}" if isinstance(v, float) else f"{k}={v}"
                           for k, v in trial.params.items()) or "no parameters"
        if state == "COMPLETE":
            head = f"{self.objective} {trial.value:.4f}"
        elif state == "PRUNED":
            done = len(trial.intermediate_values)
            last = (f"; running {self.objective} {list(trial.intermediate_values.values())[-1]:.4f}"
                    if done else "")
            head = f"pruned after {done} fold(s) by the median rule{last}"
        else:
            head = f"failed: {trial.user_attrs.get('error', 'see the train output')}"
        return f"Trial {trial.number} of {self.family}: {head} ({secs:.1f} s). {params}."

    def __call__(self, trial) -> str:
        """Log one finished trial; returns its run id."""
        from mlflow.entities import Metric, Param

        c = client()
        start = _ms(trial.datetime_start) or int(time.time() * 1000)
        end = _ms(trial.datetime_complete) or start
        state = trial.state.name
        name = f"{self.family}-trial-{trial.number}"
        run = c.create_run(self.experiment_id, start_time=start, run_name=name, tags={
            **self.source(), keys.PARENT_RUN: self.parent_run_id, keys.KIND: keys.KIND_TRIAL,
            keys.FAMILY: self.family, keys.TRIAL_STATE: state,
            keys.TRIAL_NUMBER: str(trial.number), keys.NOTE: self.describe(trial)})
        try:
            metrics = [Metric(k, float(v), end, 0)
                       for k, v in (trial.user_attrs.get("metrics") or {}).items()]
            for key in keys.FOLD_METRICS:
                metrics += [Metric(keys.fold_metric(key, i), float(v), end, 0)
                            for i, v in enumerate(trial.user_attrs.get(key) or [])]
            metrics += [Metric(keys.RUNNING_PREFIX + self.objective, float(v), end, int(step))
                        for step, v in sorted(trial.intermediate_values.items())]
            if state == "COMPLETE" and trial.value is not None:
                metrics.append(Metric(keys.TRIAL_OBJECTIVE, float(trial.value), end, 0))
            params = [Param(k, str(v)) for k, v in trial.params.items()]
            params.append(Param(keys.TRIAL_NUMBER, str(trial.number)))
            c.log_batch(run.info.run_id, metrics=metrics, params=params)
        except BaseException as exc:  # SIGTERM/Ctrl-C or a failed write: never left RUNNING
            c.set_terminated(run.info.run_id, status="KILLED" if isinstance(
                exc, KeyboardInterrupt) else "FAILED", end_time=int(time.time() * 1000))
            raise
        c.set_terminated(run.info.run_id, status=self.STATUS.get(state, "FAILED"), end_time=end)
        self.runs[trial.number] = run.info.run_id
        return run.info.run_id

    def mark_best(self, number: int) -> None:
        """Tag the best trial's run (``best_trial=true``) and name it on the parent run."""
        c = client()
        if number in self.runs:
            c.set_tag(self.runs[number], keys.BEST_TRIAL, "true")
            c.set_tag(self.parent_run_id, keys.BEST_TRIAL_RUN, self.runs[number])
        c.set_tag(self.parent_run_id, keys.BEST_TRIAL, str(number))


def study_storage(study_name: str) -> str | None:
    """Journal file of an Optuna study kept beside the tracking store (``tuning.storage=auto``).

    ``<store folder>/optuna/<study>.journal`` beside a local sqlite tracking database. With a
    tracking server nothing is written on this machine: the study stays in memory (give
    ``tuning.storage`` a shared database to keep it).
    """
    from pulse_ml.registry.store import tracking_uri

    db = sqlite_file(tracking_uri())
    if db is None:
        return None
    folder = db.parent
    safe = "".join(ch if ch.isalnum() or ch in "-_." else "_" for ch in study_name)
    return str(folder / "optuna" / f"{safe}.journal")
