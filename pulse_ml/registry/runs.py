"""Runs: family runs with their trials, inference runs, and searching finished runs."""

from __future__ import annotations

import tempfile
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from pulse_ml import keys
from pulse_ml.errors import PulseError
from pulse_ml.redact import redact_text, redact_values
from pulse_ml.registry.dataset_input import log_dataset
from pulse_ml.registry.models import client
from pulse_ml.registry.store import setup, source_tags

if TYPE_CHECKING:
    from pulse_ml.settings import RunLabels


def open_experiment(name: str) -> str:
    """Point MLflow at the store, create ``name`` if needed, describe it; returns its id.

    The experiment gets a description (``mlflow.note.content``) and MLflow 3's
    machine-learning layout (``mlflow.experimentKind = custom_model_development``), so the UI
    opens on the runs table with metric columns rather than on the GenAI overview.
    """
    exp_id = setup(name)
    c = client()
    tags = c.get_experiment(exp_id).tags or {}
    wanted = {keys.EXPERIMENT_KIND: keys.CLASSIC_ML,
              keys.NOTE: keys.EXPERIMENT_DESCRIPTIONS.get(name, "")}
    for key, value in wanted.items():
        if value and tags.get(key) != value:
            _set_experiment_tag(c, exp_id, key, value)
    return exp_id


def _set_experiment_tag(c, exp_id: str, key: str, value: str) -> None:
    """Set an experiment tag; a concurrent process setting it first is no error.

    Two trainers starting at once (a shared study) both see the tag missing; the SQL store's
    insert of the second fails on the unique key. The layout tags are cosmetic, so that race
    is settled by reading the tag back, not by failing the run.
    """
    from mlflow.exceptions import MlflowException

    try:
        c.set_experiment_tag(exp_id, key, value)
    except MlflowException:
        if key not in (c.get_experiment(exp_id).tags or {}):
            raise


@contextmanager
def family_run(family: str, feature_set: str, fingerprint: str, objective: str,
               study_name: str | None = None, seed: int | None = None,
               description: str | None = None,
               labels: RunLabels | None = None) -> Iterator[str]:
    """A parent run in ``pulse-train`` (or ``labels.experiment``) for one family; yields its id.

    ``labels`` (:class:`pulse_ml.settings.RunLabels`): the experiment, the run name (default
    ``<family>-<features>-<run id[:8]>``) and extra tags the user chose.

    The run ends FINISHED, or FAILED with an ``error`` tag when the body raises (KILLED when
    interrupted by Ctrl-C or SIGTERM). Errors that
    are not a :class:`PulseError` become one that names the run (the cause chain is kept, so
    ``PULSE_DEBUG=1`` shows the original traceback).
    """
    import mlflow

    run = start_named_run(keys.TRAIN_EXPERIMENT, f"{family}-{feature_set}", labels)
    try:
        tags = {keys.KIND: keys.KIND_FAMILY, keys.FAMILY: family,
                keys.FEATURE_SET: feature_set, keys.DATA_FINGERPRINT: fingerprint,
                keys.OBJECTIVE: objective, **source_tags()}
        if study_name:
            tags[keys.STUDY_NAME] = study_name
        if seed is not None:
            tags[keys.SEED] = str(seed)
        if description:
            tags[keys.NOTE] = description
        mlflow.set_tags(redact_values(tags))
        yield run.info.run_id
        mlflow.end_run("FINISHED")
    except BaseException as exc:
        interrupted = isinstance(exc, KeyboardInterrupt)  # Ctrl-C or SIGTERM (signals.py)
        mlflow.set_tag(keys.ERROR, redact_text(str(exc))[:500] or type(exc).__name__)
        mlflow.end_run("KILLED" if interrupted else "FAILED")
        if isinstance(exc, PulseError) or interrupted:
            raise
        first = str(exc).splitlines()[0] if str(exc) else ""
        raise PulseError(f"training model '{family}' failed: {type(exc).__name__}: {first}\n"
                         f"  Its MLflow run {run.info.run_id} is marked FAILED; earlier runs "
                         "and the champion are untouched.") from exc


def start_named_run(default_experiment: str, base: str, labels: RunLabels | None = None):
    """Start a run in ``labels.experiment`` (else ``default_experiment``) and name it.

    The name is ``labels.run_name`` when given, else ``<base>-<run id[:8]>``: unique, and the
    id's first characters as the UI shows them. ``labels.tags`` are set on the run (pulse-ml's
    own tags are set after them, by the caller).
    """
    import mlflow

    open_experiment(labels.experiment_or(default_experiment) if labels else default_experiment)
    chosen = labels.run_name if labels else None
    run = mlflow.start_run(run_name=chosen or base)
    try:  # the caller's `with`/`try` starts only when this returns: never leave the run open
        if not chosen:
            client().update_run(run.info.run_id, name=f"{base}-{run.info.run_id[:8]}")
        if labels and labels.tags:
            mlflow.set_tags(redact_values(dict(labels.tags)))
    except BaseException as exc:  # SIGTERM/Ctrl-C or a failed write: KILLED/FAILED, not the
        # FINISHED MLflow's exit hook would give an open run
        mlflow.end_run("KILLED" if isinstance(exc, KeyboardInterrupt) else "FAILED")
        raise
    return run


def active_experiment_id() -> str:
    """The experiment id of the active run (where its nested runs go)."""
    import mlflow

    return mlflow.active_run().info.experiment_id


def experiment_id(name: str) -> str:
    """Id of experiment ``name`` (created when missing)."""
    return setup(name)


def set_tags(tags: Mapping[str, str]) -> None:
    """Tags on the active run."""
    import mlflow

    mlflow.set_tags(redact_values({k: str(v) for k, v in tags.items()}))


def log_metrics(metrics: Mapping[str, float]) -> None:
    """Metrics on the active run (NaN values are skipped: MLflow would store them as NaN)."""
    import mlflow

    from pulse_ml.names import metric_key

    clean = {metric_key(str(k)): float(v) for k, v in metrics.items()
             if v is not None and np.isfinite(float(v))}
    if clean:
        mlflow.log_metrics(clean)


def log_family_run(*, run_name: str, tags: Mapping[str, str], params: Mapping[str, object],
                   metrics: Mapping[str, float], fold_metrics: Mapping[str, list[float]],
                   config_yaml: str, oof: pd.DataFrame,
                   files: list[Path] | None = None,
                   steps: Mapping[str, Mapping[int, float]] | None = None) -> None:
    """Log params, metrics (pooled + one per fold), config, OOF and files to the active run.

    Per-fold values are one metric per fold (``fold_mse_0`` ... ``fold_mse_<k-1>``: a step
    series would show its last fold in the runs table, beside and unlike the pooled
    ``cv_mse``) and also a ``folds.csv`` table with one row per fold. ``steps`` are step
    series (``key -> {step: value}``, e.g. the objective per trial), written in the same batch.
    """
    import mlflow
    from mlflow.entities import Metric

    run_id = mlflow.active_run().info.run_id
    mlflow.set_tags(redact_values(dict(tags)))
    mlflow.log_params(redact_values({k: ("None" if v is None else v) for k, v in params.items()}))
    log_metrics(metrics)
    now = int(time.time() * 1000)
    per_fold = [Metric(keys.fold_metric(key, fold), float(v), now, 0)
                for key, values in fold_metrics.items() for fold, v in enumerate(values)
                if np.isfinite(float(v))]
    per_fold += [Metric(key, float(v), now, int(step)) for key, series in (steps or {}).items()
                 for step, v in series.items() if v is not None and np.isfinite(float(v))]
    if per_fold:
        client().log_batch(run_id, metrics=per_fold)
    mlflow.log_text(config_yaml, "config.yaml")
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / keys.OOF_ARTIFACT
        oof.to_csv(path, index=False)
        mlflow.log_artifact(str(path))
        folds = pd.DataFrame({"fold": range(len(next(iter(fold_metrics.values()), []))),
                              **{k: list(v) for k, v in fold_metrics.items()}})
        folds.to_csv(Path(tmp) / "folds.csv", index=False)
        mlflow.log_artifact(str(Path(tmp) / "folds.csv"))
    for f in files or []:
        mlflow.log_artifact(str(f), artifact_path="study" if f.parent.name == "study" else None)
    _ = run_name


def run_oof(run_id: str) -> pd.DataFrame | None:
    """The ``oof_predictions.csv`` artifact of a family run, or None when it has none."""
    from mlflow.exceptions import MlflowException

    try:
        with tempfile.TemporaryDirectory() as tmp:
            path = client().download_artifacts(run_id, keys.OOF_ARTIFACT, tmp)
            return pd.read_csv(path, dtype={"session_id": str, "user_id": str})
    except (MlflowException, OSError):
        return None


def training_source(run_id: str) -> str | None:
    """Where the training sessions of a family run came from (its dataset input), or None."""
    import json

    from mlflow.exceptions import MlflowException

    try:
        inputs = client().get_run(run_id).inputs
    except MlflowException:
        return None
    for item in getattr(inputs, "dataset_inputs", None) or []:
        if {t.key: t.value for t in item.tags}.get(keys.DATASET_CONTEXT) != "training":
            continue
        try:
            uri = json.loads(item.dataset.source).get("uri")
        except (TypeError, ValueError, AttributeError):
            continue
        if uri:
            return str(uri)
    return None


def run_link(run_id: str) -> str:
    """The UI address of a run (see :mod:`pulse_ml.registry.links`)."""
    from pulse_ml.registry.links import run_url

    return run_url(client().get_run(run_id).info.experiment_id, run_id)


def log_inference_run(run_name: str, tags: Mapping[str, str], params: Mapping[str, object],
                      metrics: Mapping[str, float], files: list[Path], *,
                      model_version=None, dataset: Mapping[str, object] | None = None,
                      description: str | None = None, labels: RunLabels | None = None) -> str:
    """Log an inference-like run (infer, audit, monitor) to ``pulse-infer``; returns its id.

    Args:
        run_name: What the run is (``infer-crossfit``); its name is ``<run_name>-<id[:8]>``
            unless ``labels.run_name`` names it.
        tags: Run tags.
        params: Run params.
        metrics: Run metrics (NaN skipped).
        files: Artifacts.
        model_version: The registered ``ModelVersion`` the run used (from
            :func:`pulse_ml.registry.models.load_model`): tagged (``model_name``,
            ``model_version``, ``model_family``, ``model_id``) and linked as the run's model
            input, so the run page lists the model and its version.
        dataset: ``{"frame", "source", "name", "fingerprint"}`` of the session table used,
            logged as a dataset input (context ``inference``).
        description: The run's description (``mlflow.note.content``).
        labels: :class:`pulse_ml.settings.RunLabels`: experiment (default ``pulse-infer``),
            run name and extra tags the user chose.
    """
    import mlflow

    from pulse_ml.env import staging

    if model_version is not None:
        description = f"{description or ''}\n\n{_model_line(model_version)}".strip()
    with start_named_run(keys.INFER_EXPERIMENT, run_name, labels) as run:
        mlflow.set_tags(redact_values({**source_tags(), **{k: str(v) for k, v in tags.items()}}))
        if description:
            mlflow.set_tag(keys.NOTE, redact_text(description))
        if model_version is not None:
            link_model_version(model_version)
        mlflow.log_params(redact_values(dict(params)))
        log_metrics(metrics)
        if dataset is not None:
            log_dataset(dataset["frame"], str(dataset["source"]), str(dataset["name"]),
                        str(dataset["fingerprint"]), "inference")
        for f in files:  # inside a command the outputs are still staged: log the staged copy
            mlflow.log_artifact(str(staging.pending_path(f)))
        return run.info.run_id


def _model_line(version) -> str:
    """Markdown links (inside the UI) to the model version and the run that trained it."""
    from mlflow.exceptions import MlflowException

    line = (f"Model: [{version.name} v{version.version}](#/models/{version.name}/versions/"
            f"{version.version})")
    try:
        exp = client().get_run(version.run_id).info.experiment_id if version.run_id else None
    except MlflowException:
        exp = None
    if exp is not None:
        run = version.run_id
        line += f", trained in run [{run[:8]}](#/experiments/{exp}/runs/{run})"
    return line + "."


def logged_model_id(version) -> str | None:
    """The MLflow 3 logged-model id behind a model version.

    A sqlite registry does not store ``model_id``; the version's source (``models:/<id>``)
    still names it.
    """
    model_id = getattr(version, "model_id", None)
    source = str(getattr(version, "source", "") or "")
    if not model_id and source.startswith("models:/m-"):
        model_id = source[len("models:/"):].split("/")[0]
    return model_id or None


def link_model_version(version, run_id: str | None = None) -> None:
    """Tag a run with the model version it used and link its logged model as a run input."""
    import mlflow
    from mlflow.entities import LoggedModelInput

    run = run_id or mlflow.active_run().info.run_id
    c = client()
    found = {keys.MODEL_NAME: version.name, keys.MODEL_VERSION: str(version.version),
             keys.MODEL_FAMILY: (version.tags or {}).get(keys.FAMILY, "")}
    model_id = logged_model_id(version)
    if model_id:
        found[keys.MODEL_ID] = model_id
    for key, value in found.items():
        c.set_tag(run, key, redact_text(str(value)))
    if model_id:
        c.log_inputs(run, models=[LoggedModelInput(model_id)])


def finished_runs(kinds: tuple[str, ...] = (keys.KIND_FAMILY, keys.KIND_JUDGE),
                  experiment: str = keys.TRAIN_EXPERIMENT) -> pd.DataFrame:
    """Finished runs of the given kinds (``kind`` tag) in ``experiment`` (``search_runs`` frame).

    Only reads the store (a read-only store is searched too); no experiment is created.
    """
    import mlflow

    from pulse_ml.registry.store import connect

    connect(write=False)
    exp = client().get_experiment_by_name(experiment)
    if exp is None:
        return pd.DataFrame()
    found = [mlflow.search_runs([exp.experiment_id],
                                filter_string=f"tags.{keys.KIND} = '{kind}' and "
                                "attributes.status = 'FINISHED'", output_format="pandas")
             for kind in kinds]
    found = [f for f in found if len(f)]
    return pd.concat(found, ignore_index=True) if found else pd.DataFrame()
