"""Runs: family runs with their trials, inference runs, and searching finished runs."""

from __future__ import annotations

import tempfile
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path

import pandas as pd

from pulse_ml.errors import PulseError
from pulse_ml.registry import keys
from pulse_ml.registry.models import client
from pulse_ml.registry.store import git_commit, setup


@contextmanager
def family_run(family: str, feature_set: str, fingerprint: str, objective: str,
               study_name: str) -> Iterator[str]:
    """A parent run in ``pulse-train`` for one family; yields its run id.

    The run ends FINISHED, or FAILED with an ``error`` tag when the body raises (KILLED when
    interrupted by Ctrl-C or SIGTERM). Errors that
    are not a :class:`PulseError` become one that names the run (the cause chain is kept, so
    ``PULSE_DEBUG=1`` shows the original traceback).
    """
    import mlflow

    setup(keys.TRAIN_EXPERIMENT)
    run = mlflow.start_run(run_name=f"{family}-{feature_set}")
    try:
        mlflow.set_tags({keys.KIND: keys.KIND_FAMILY, keys.FAMILY: family,
                         keys.FEATURE_SET: feature_set, keys.DATA_FINGERPRINT: fingerprint,
                         keys.OBJECTIVE: objective, "study_name": study_name,
                         keys.GIT_COMMIT: git_commit()})
        yield run.info.run_id
        mlflow.end_run("FINISHED")
    except BaseException as exc:
        interrupted = isinstance(exc, KeyboardInterrupt)  # Ctrl-C or SIGTERM (signals.py)
        mlflow.set_tag("error", str(exc)[:500] or type(exc).__name__)
        mlflow.end_run("KILLED" if interrupted else "FAILED")
        if isinstance(exc, PulseError) or interrupted:
            raise
        first = str(exc).splitlines()[0] if str(exc) else ""
        raise PulseError(f"training model '{family}' failed: {type(exc).__name__}: {first}\n"
                         f"  Its MLflow run {run.info.run_id} is marked FAILED; earlier runs "
                         "and the champion are untouched.") from exc


def experiment_id(name: str) -> str:
    """Id of experiment ``name`` (created when missing)."""
    return setup(name)


def set_tags(tags: Mapping[str, str]) -> None:
    """Tags on the active run."""
    import mlflow

    mlflow.set_tags(dict(tags))


def log_family_run(*, run_name: str, tags: Mapping[str, str], params: Mapping[str, object],
                   metrics: Mapping[str, float], fold_metrics: Mapping[str, list[float]],
                   config_yaml: str, oof: pd.DataFrame) -> None:
    """Log params, metrics (pooled + per fold as steps), config and OOF to the active run."""
    import mlflow

    mlflow.set_tags(dict(tags))
    mlflow.log_params({k: ("None" if v is None else v) for k, v in params.items()})
    mlflow.log_metrics(dict(metrics))
    for key, values in fold_metrics.items():
        for step, value in enumerate(values):
            mlflow.log_metric(key, value, step=step)
    mlflow.log_text(config_yaml, "config.yaml")
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "oof_predictions.csv"
        oof.to_csv(path, index=False)
        mlflow.log_artifact(str(path))
    _ = run_name


def log_trials(parent_run_id: str, experiment_id: str, trials, family: str) -> None:
    """Log finished trials as nested child runs of the family run (batched)."""
    import time

    from mlflow.entities import Metric, Param, RunTag

    c = client()
    now = int(time.time() * 1000)
    for trial in trials:
        run = c.create_run(experiment_id, run_name=f"{family}-trial-{trial.number}",
                           tags={"mlflow.parentRunId": parent_run_id, "kind": "trial",
                                 "family": family, "trial_state": trial.state.name})
        metrics = [Metric(k, float(v), now, 0)
                   for k, v in (trial.user_attrs.get("metrics") or {}).items()]
        for key in ("fold_mse", "fold_mae", "fold_pearson"):
            metrics += [Metric(key, float(v), now, i)
                        for i, v in enumerate(trial.user_attrs.get(key) or [])]
        if trial.value is not None:
            metrics.append(Metric("objective", float(trial.value), now, 0))
        params = [Param(k, str(v)) for k, v in trial.params.items()]
        params.append(Param("trial_number", str(trial.number)))
        c.log_batch(run.info.run_id, metrics=metrics, params=params,
                    tags=[RunTag("mlflow.runName", f"{family}-trial-{trial.number}")])
        status = "FINISHED" if trial.state.name in ("COMPLETE", "PRUNED") else "FAILED"
        c.set_terminated(run.info.run_id, status=status)


def log_inference_run(run_name: str, tags: Mapping[str, str], params: Mapping[str, object],
                      metrics: Mapping[str, float], files: list[Path]) -> str:
    """Log an inference-like run (infer, audit, monitor) to ``pulse-infer``; returns its id."""
    import mlflow

    setup(keys.INFER_EXPERIMENT)
    with mlflow.start_run(run_name=run_name) as run:
        mlflow.set_tags(dict(tags))
        mlflow.log_params(dict(params))
        mlflow.log_metrics({k: float(v) for k, v in metrics.items()})
        for f in files:
            mlflow.log_artifact(str(f))
        return run.info.run_id


def finished_runs(kinds: tuple[str, ...] = (keys.KIND_FAMILY, keys.KIND_JUDGE)) -> pd.DataFrame:
    """Finished runs of the given kinds in ``pulse-train`` (``mlflow.search_runs`` frame)."""
    import mlflow

    exp_id = setup(keys.TRAIN_EXPERIMENT)
    found = [mlflow.search_runs([exp_id], filter_string=f"tags.{keys.KIND} = '{kind}' and "
                                "attributes.status = 'FINISHED'", output_format="pandas")
             for kind in kinds]
    found = [f for f in found if len(f)]
    return pd.concat(found, ignore_index=True) if found else pd.DataFrame()
