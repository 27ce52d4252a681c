"""Helpers shared by the benchmark scripts: a throw-away PULSE_HOME with demo data."""

from __future__ import annotations

import os
import resource
import tempfile
from pathlib import Path


def fresh_home(prefix: str) -> Path:
    """Point PULSE_HOME and MLflow at a new temporary directory and return it."""
    home = Path(tempfile.mkdtemp(prefix=prefix))
    os.environ["PULSE_HOME"] = str(home)
    os.environ["MLFLOW_TRACKING_URI"] = f"sqlite:///{home / 'mlruns' / 'mlflow.db'}"
    os.environ.setdefault("MLFLOW_DISABLE_TELEMETRY", "true")
    os.environ.setdefault("MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR", "false")
    (home / "mlruns").mkdir(parents=True, exist_ok=True)
    return home


def demo_data(home: Path, *overrides: str) -> Path:
    """Simulate the default demo data into ``home/data/demo``; returns the table path."""
    from pulse_ml.config import compose
    from pulse_ml.jobs import simulate

    out = home / "data" / "demo"
    simulate.run(compose("simulate", [f"out={out}", *overrides]))
    return out / "sessions.parquet"


def peak_rss_mb() -> float:
    """Peak resident memory of this process (MB)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
