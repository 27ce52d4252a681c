"""A throw-away project root whose MLflow store is a copy of the session's template store."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import mlflow
import pytest


@contextmanager
def model_home(root: Path, mlflow_template: Path) -> Iterator[Path]:
    """Point PULSE_HOME and MLflow at ``root`` (its store copied from the template) meanwhile."""
    (root / "mlruns").mkdir()
    shutil.copy(mlflow_template, root / "mlruns" / "mlflow.db")
    uri = f"sqlite:///{root / 'mlruns' / 'mlflow.db'}"
    try:
        with pytest.MonkeyPatch.context() as mp:
            mp.setenv("PULSE_HOME", str(root))
            mp.setenv("MLFLOW_TRACKING_URI", uri)
            mlflow.set_tracking_uri(uri)
            mlflow.set_registry_uri(uri)
            yield root
    finally:
        mlflow.set_tracking_uri(None)
        mlflow.set_registry_uri(None)
