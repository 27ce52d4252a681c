"""Shared fixtures: a real MLflow sqlite store per test (copied from a template) and demo data."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

os.environ.setdefault("MLFLOW_DISABLE_TELEMETRY", "true")
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
os.environ.setdefault("MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR", "false")
# libgomp spins idle threads by default; with 2 cores and parallel work that stalls fits.
os.environ.setdefault("OMP_WAIT_POLICY", "passive")

REPO = Path(__file__).resolve().parents[1]
# The shared data folder (real data sets): beside the checkout, or $PULSE_SHARED_DIR. Resolved
# here only; tests use ``shared_path``/``needs_shared`` (module level) or ``shared_data``.
SHARED = Path(os.environ.get("PULSE_SHARED_DIR") or REPO.parent / "shared").resolve()


def shared_path(relative: str) -> Path:
    """``<shared folder>/<relative>`` (it may be absent: see ``needs_shared``)."""
    return SHARED / relative


def shared_absent(relative: str) -> str | None:
    """The skip message when ``<shared folder>/<relative>`` is absent, else ``None``."""
    path = shared_path(relative)
    if path.exists():
        return None
    return (f"shared data {path} is absent: put the shared folder beside the checkout "
            f"({REPO.parent / 'shared'}) or set PULSE_SHARED_DIR")


def needs_shared(relative: str) -> pytest.MarkDecorator:
    """A ``skipif`` mark: skip with the one message when the shared data file is absent."""
    reason = shared_absent(relative)
    return pytest.mark.skipif(reason is not None, reason=reason or "")


@pytest.fixture
def shared_data():
    """``shared_data("data/real/x")``: that path in the shared folder; skips when absent."""

    def get(relative: str) -> Path:
        reason = shared_absent(relative)
        if reason is not None:
            pytest.skip(reason)
        return shared_path(relative)

    return get


SLOW_FOLDERS = ("jobs",)  # CLI and end-to-end tests: subprocesses, real stores, minutes in all


def pytest_collection_modifyitems(config, items):
    """Mark tests under ``tests/jobs/`` (and any test using the ``cli`` fixture) as slow.

    ``pytest -m "not slow"`` is the inner loop: unit tests that import modules directly.
    """
    root = Path(__file__).resolve().parent
    for item in items:
        parts = Path(str(item.fspath)).resolve().relative_to(root).parts
        if parts[0] in SLOW_FOLDERS or "cli" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.slow)


@pytest.fixture(scope="session")
def mlflow_template(tmp_path_factory) -> Path:
    """An MLflow sqlite DB with the schema created once (migrations take seconds)."""
    import mlflow

    path = tmp_path_factory.mktemp("mlflow-template") / "mlflow.db"
    client = mlflow.MlflowClient(tracking_uri=f"sqlite:///{path}",
                                 registry_uri=f"sqlite:///{path}")
    client.search_experiments()
    client.search_registered_models()
    return path


@pytest.fixture
def pulse_home(tmp_path, monkeypatch, mlflow_template):
    """A fresh project root with its own MLflow store (real sqlite, copied from the template)."""
    home = tmp_path / "home"
    (home / "mlruns").mkdir(parents=True)
    shutil.copy(mlflow_template, home / "mlruns" / "mlflow.db")
    monkeypatch.setenv("PULSE_HOME", str(home))
    monkeypatch.setenv("MLFLOW_TRACKING_URI", f"sqlite:///{home / 'mlruns' / 'mlflow.db'}")
    monkeypatch.delenv("PULSE_ARTIFACT_ROOT", raising=False)
    # In-process MLflow keeps the URI set by an earlier test's job: point it here too.
    import mlflow

    uri = f"sqlite:///{home / 'mlruns' / 'mlflow.db'}"
    mlflow.set_tracking_uri(uri)
    mlflow.set_registry_uri(uri)
    yield home
    mlflow.set_tracking_uri(None)
    mlflow.set_registry_uri(None)


def _small_simulation(seed: int):
    """The small demo design (2 case studies, 600 labeled) simulated with ``seed``."""
    from pulse_ml.simulate.generator import CaseStudySpec, SimulateSettings, simulate

    return simulate(SimulateSettings(
        seed=seed, n_labeled=600, unlabeled_ratio=4.0, labeled_per_arm=80,
        min_labeled_per_arm=40, mc_sessions=20_000, signal=2.0,
        case_studies=(CaseStudySpec("plan", "no-plan", "show-plan", 0.031),
                      CaseStudySpec("claude4_vs_gpt5", "claude-4-sonnet", "gpt-5", -0.069))))


@pytest.fixture(scope="session")
def small_demo(tmp_path_factory) -> Path:
    """A small simulated session table (2 case studies, 600 labeled) written once per run."""
    out = tmp_path_factory.mktemp("demo") / "sessions.parquet"
    _small_simulation(7).sessions.to_parquet(out, index=False)
    return out


@pytest.fixture(scope="session")
def colliding_table():
    """Another simulation (seed 8): its ids restart at s000000, so they collide with training."""
    return _small_simulation(8).sessions


def run_cli(*args: str, env: dict | None = None, cwd: Path | None = None,
            timeout: float = 300) -> subprocess.CompletedProcess:
    """Run ``python -m pulse_ml <args>`` in a subprocess and capture its output."""
    full_env = {**os.environ, **(env or {})}
    return subprocess.run([sys.executable, "-m", "pulse_ml", *args], capture_output=True,
                          text=True, env=full_env, cwd=cwd, timeout=timeout)


@pytest.fixture
def cli():
    """The ``pulse-ml`` command as a subprocess: ``cli("train", "model=mean")``."""
    return run_cli
