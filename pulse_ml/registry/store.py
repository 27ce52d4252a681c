"""Tracking store setup: the URI, experiments and their artifact location."""

from __future__ import annotations

import os
from pathlib import Path

from pulse_ml.paths import project_root
from pulse_ml.registry.keys import (  # noqa: F401 - re-exported for the jobs
    CHAMPION,
    INFER_EXPERIMENT,
    JUDGE_EXPERIMENT,
    REGISTERED_MODEL,
    TRAIN_EXPERIMENT,
)


def tracking_uri() -> str:
    """Return ``MLFLOW_TRACKING_URI`` if set, else ``sqlite:///<root>/mlruns/mlflow.db``."""
    env = os.environ.get("MLFLOW_TRACKING_URI")
    if env:
        return env
    store = project_root() / "mlruns"
    store.mkdir(parents=True, exist_ok=True)
    return f"sqlite:///{store / 'mlflow.db'}"


def artifact_root() -> str:
    """Return where new experiments put their artifacts (``file://<root>/mlruns/artifacts``)."""
    env = os.environ.get("PULSE_ARTIFACT_ROOT")
    if env:
        return env
    return (project_root() / "mlruns" / "artifacts").as_uri()


def setup(experiment: str) -> str:
    """Point MLflow at the tracking store and make sure ``experiment`` exists.

    Args:
        experiment: Experiment name (``pulse-train``, ``pulse-judge``, ``pulse-infer``).

    Returns:
        The experiment id.
    """
    import logging

    import mlflow

    if not os.environ.get("PULSE_VERBOSE"):
        logging.getLogger("mlflow").setLevel(logging.ERROR)

    uri = tracking_uri()
    mlflow.set_tracking_uri(uri)
    mlflow.set_registry_uri(uri)
    client = mlflow.MlflowClient()
    exp = client.get_experiment_by_name(experiment)
    if exp is None:
        remote = uri.startswith(("http://", "https://", "databricks"))
        location = None if remote else artifact_root()
        exp_id = client.create_experiment(experiment, artifact_location=location)
    else:
        exp_id = exp.experiment_id
    mlflow.set_experiment(experiment_id=exp_id)
    return exp_id


def ui_command() -> str:
    """Return the ``mlflow ui`` command that shows this store."""
    uri = tracking_uri()
    if uri.startswith("sqlite:///"):
        return f"mlflow ui --backend-store-uri {uri}"
    return f"open {uri}"


def git_commit() -> str:
    """Return the current git commit of the project checkout, or ``unknown``."""
    head = Path(__file__).resolve().parents[2] / ".git"
    try:
        ref = (head / "HEAD").read_text().strip()
        if ref.startswith("ref: "):
            return (head / ref[5:]).read_text().strip()
        return ref
    except OSError:
        return "unknown"
