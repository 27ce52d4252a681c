"""Addresses of runs, versions and experiments in the MLflow UI (printed by the jobs).

The UI is a single-page app with hash routes: ``<base>/#/experiments/<id>/runs/<run id>``. The
base is ``PULSE_MLFLOW_UI`` when set, the tracking server itself when the tracking URI is an
``http(s)://`` address, and otherwise ``http://127.0.0.1:5000`` — where ``pulse-ml ui
port=5000`` (:mod:`pulse_ml.registry.ui`) serves a local store. ``?workflowType=machine_learning``
opens MLflow 3's machine-learning layout (runs table with metric columns) instead of its GenAI
overview.
"""

from __future__ import annotations

import os
from urllib.parse import quote

DEFAULT_UI = "http://127.0.0.1:5000"
_VIEW = "?workflowType=machine_learning"
_hinted = False


def ui_base() -> str:
    """Base address of the MLflow UI for this store (no trailing slash)."""
    from pulse_ml.registry.store import tracking_uri

    env = os.environ.get("PULSE_MLFLOW_UI")
    if env:
        return env.rstrip("/")
    uri = tracking_uri()
    if uri.startswith(("http://", "https://")):
        return uri.rstrip("/")
    return DEFAULT_UI


def run_url(experiment_id: str, run_id: str) -> str:
    """Address of one run's page."""
    return f"{ui_base()}/#/experiments/{experiment_id}/runs/{run_id}{_VIEW}"


def model_version_url(name: str, version: str) -> str:
    """Address of a registered model version's page."""
    return f"{ui_base()}/#/models/{quote(name)}/versions/{version}"


def ui_hint_once() -> str | None:
    """How to start the UI for a local store; returned once per process (None afterwards)."""
    global _hinted
    from pulse_ml.registry.store import tracking_uri, ui_command

    if _hinted or os.environ.get("PULSE_MLFLOW_UI") or tracking_uri().startswith(
            ("http://", "https://")):
        return None
    _hinted = True
    return f"(start the UI with: {ui_command()})"
