"""The MLflow UI of this project's tracking store: the server command and the runs view.

``pulse-ml ui`` (:mod:`pulse_ml.jobs.ui`) runs the command built here as a subprocess, so this
process never imports mlflow; it then reads the experiment over the server's REST API.

* :func:`server_command`: ``python -m mlflow server`` on the store the other verbs use
  (:func:`pulse_ml.registry.store.tracking_uri`), one worker (four uvicorn workers on two cores
  took minutes to answer and then crash-looped), bound to 127.0.0.1. The store URI goes in the
  environment, never on the command line (a password would show in ``ps``). The server runs
  without MLflow's job runner (a second process for GenAI scorer jobs, which pulse-ml never
  queues) and with LiteLLM's bundled cost map (offline, fetching the remote one printed three
  warnings).
* :func:`runs_view`: the experiment's id and the address of its runs table. MLflow 3's UI
  chooses its layout from the browser's "workflow type" (GenAI by default), not from the
  experiment's ``mlflow.experimentKind`` tag, so the address carries
  ``workflowType=machine_learning``; and it names a saved view (the UI's "share view" state,
  an experiment tag ``mlflow.sharedViewState.<key>``) with the metric columns cv_mse and
  cv_pearson, sorted by cv_mse.
"""

from __future__ import annotations

import json
import os
import sys
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass

from pulse_ml import keys
from pulse_ml.errors import PulseError
from pulse_ml.redact import redact_uri
from pulse_ml.registry import guard, store

HOST = "127.0.0.1"
VIEW_KEY = "pulse-ml-metrics"  # the saved view's share key (any name the UI's router accepts)
VIEW_METRICS = (keys.CV_MSE, keys.CV_PEARSON)


@dataclass(frozen=True)
class ServerCommand:
    """How to start the MLflow UI server for the store.

    Attributes:
        argv: The command (``python -m mlflow server ...``), without the store URI.
        env: The environment to run it in (the store URI is ``MLFLOW_BACKEND_STORE_URI``).
        base: The UI's address, ``http://127.0.0.1:<port>``.
        shown_uri: The store URI with any password masked (to print).
    """

    argv: list[str]
    env: dict[str, str]
    base: str
    shown_uri: str


def remote_ui() -> str | None:
    """The store's own address when the tracking store is an MLflow server (its UI), else None."""
    uri = store.tracking_uri()
    return redact_uri(uri).rstrip("/") if uri.startswith(("http://", "https://")) else None


def server_command(port: int) -> ServerCommand:
    """Check the tracking store (read-only, nothing created) and build the server command.

    Args:
        port: The port on 127.0.0.1 to serve on.

    Raises:
        PulseError: a foreign, damaged or unreachable store, or a missing folder named by
            ``MLFLOW_TRACKING_URI`` (see :func:`pulse_ml.registry.guard.check_store`).
    """
    uri = store.tracking_uri()
    explicit = bool(os.environ.get("MLFLOW_TRACKING_URI"))
    guard.check_store(uri, explicit=explicit, write=False)
    argv = [sys.executable, "-m", "mlflow", "server", "--host", HOST, "--port", str(port),
            "--workers", "1", "--no-serve-artifacts"]
    env = {**os.environ,
           "MLFLOW_BACKEND_STORE_URI": uri,
           "LITELLM_LOCAL_MODEL_COST_MAP": "True",
           "MLFLOW_DISABLE_TELEMETRY": "true",
           "MLFLOW_SERVER_ENABLE_JOB_EXECUTION": "false"}
    argv += ["--default-artifact-root", store.artifact_root()]  # as store.setup gives them
    return ServerCommand(argv, env, f"http://{HOST}:{port}", redact_uri(uri))


def _call(base: str, path: str, body: dict | None = None, timeout: float = 30.0) -> dict:
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(base + path, data=data,
                                     headers={"Content-Type": "application/json"},
                                     method="GET" if body is None else "POST")
    with urllib.request.urlopen(request, timeout=timeout) as resp:
        return json.loads(resp.read() or b"{}")


def answers(base: str, timeout: float = 2.0) -> bool:
    """Does the server at ``base`` answer ``/health`` with 200?"""
    try:
        with urllib.request.urlopen(base + "/health", timeout=timeout) as resp:
            return resp.status == 200
    except (OSError, ValueError):
        return False


def view_state() -> str:
    """The saved runs view (JSON the UI reads from its share tag): metric columns, sort order."""
    def column(group: str, name: str) -> str:  # the UI's canonical column key
        return f"{group}.`{name}`"

    columns = [column("attributes", "Source"), column("attributes", "Models"),
               column("attributes", "Dataset"),
               *(column("metrics", m) for m in VIEW_METRICS)]
    return json.dumps({"selectedColumns": columns, "orderByKey": column("metrics", keys.CV_MSE),
                       "orderByAsc": True})


@dataclass(frozen=True)
class RunsView:
    """Where the UI shows an experiment's runs.

    Attributes:
        experiment_id: The experiment's id, or None when it does not exist yet.
        url: The runs table (the experiments list when the experiment does not exist).
        columns: Whether the saved view with the metric columns is in place.
    """

    experiment_id: str | None
    url: str
    columns: bool


def runs_view(base: str, experiment: str = keys.TRAIN_EXPERIMENT) -> RunsView:
    """Look ``experiment`` up on the running UI server and give its runs table's address.

    Saves the metric-column view on the experiment (one experiment tag) when it is missing;
    a store that refuses the write (read-only) gets the address without it.

    Args:
        base: The server's address, ``http://127.0.0.1:<port>``.
        experiment: The experiment's name.
    """
    ml = "workflowType=machine_learning"
    query = urllib.parse.urlencode({"experiment_name": experiment})
    try:
        found = _call(base, f"/api/2.0/mlflow/experiments/get-by-name?{query}")["experiment"]
    except urllib.error.HTTPError as exc:
        if exc.code != 404:
            raise PulseError(f"the MLflow UI server could not read experiment '{experiment}' "
                             f"(HTTP {exc.code})") from exc
        return RunsView(None, f"{base}/#/experiments?{ml}", False)
    except (OSError, ValueError, KeyError) as exc:
        raise PulseError(f"the MLflow UI server at {base} stopped answering while pulse-ml "
                         f"read experiment '{experiment}': {exc}") from exc
    exp_id = str(found["experiment_id"])
    tag = keys.SHARED_VIEW_PREFIX + VIEW_KEY
    tags = {t.get("key"): t.get("value") for t in found.get("tags", [])}
    has_view = tags.get(tag) == view_state()
    if not has_view:
        try:
            _call(base, "/api/2.0/mlflow/experiments/set-experiment-tag",
                  {"experiment_id": exp_id, "key": tag, "value": view_state()})
            has_view = True
        except (OSError, ValueError):  # e.g. a read-only store: the plain runs table
            has_view = False
    view = f"&viewStateShareKey={VIEW_KEY}" if has_view else ""
    return RunsView(exp_id, f"{base}/#/experiments/{exp_id}/runs?{ml}{view}", has_view)
