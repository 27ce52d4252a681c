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


# A tracking server that stops answering must fail a command in seconds, not after MLflow's
# default 7 retries with exponential back-off (minutes): defaults, the user's env wins.
HTTP_DEFAULTS = {"MLFLOW_HTTP_REQUEST_MAX_RETRIES": "2",
                 "MLFLOW_HTTP_REQUEST_BACKOFF_FACTOR": "1",
                 "MLFLOW_HTTP_REQUEST_TIMEOUT": "20"}


def check_server(uri: str, timeout: float = 5.0) -> None:
    """Fail at once, naming ``uri``, when an ``http(s)://`` tracking server does not answer.

    Raises:
        PulseError: the server's ``/health`` endpoint is unreachable or not healthy.
    """
    import urllib.error
    import urllib.request

    from pulse_ml.errors import PulseError

    for key, value in HTTP_DEFAULTS.items():
        os.environ.setdefault(key, value)
    try:
        with urllib.request.urlopen(uri.rstrip("/") + "/health", timeout=timeout) as resp:
            if resp.status == 200:
                return
            reason = f"HTTP {resp.status}"
    except urllib.error.HTTPError as exc:
        reason = f"HTTP {exc.code}"
    except (OSError, ValueError) as exc:
        reason = str(getattr(exc, "reason", exc))
    raise PulseError(f"cannot reach the MLflow tracking server at {uri} ({reason}): check that "
                     "`mlflow server` runs there and is reachable from this machine, or fix "
                     "MLFLOW_TRACKING_URI (unset it to use the local store).")


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
    if uri.startswith(("http://", "https://")):
        check_server(uri)
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
