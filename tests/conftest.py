"""Shared fixtures: a real MLflow sqlite store per test (copied from a template) and demo data."""

from __future__ import annotations

import dataclasses
import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest

os.environ.setdefault("MLFLOW_DISABLE_TELEMETRY", "true")
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
os.environ.setdefault("MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR", "false")
# libgomp spins idle threads by default; with 2 cores and parallel work that stalls fits.
os.environ.setdefault("OMP_WAIT_POLICY", "passive")
# Two xdist workers share the 2 cores: a multi-threaded BLAS in each oversubscribes them (a
# 20 s response-model simulation took 300 s, the randomization coverage 4x its time). One BLAS
# thread per worker, and per CLI process a test starts (read when numpy loads).
for _var in ("OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")
try:
    from threadpoolctl import threadpool_limits

    threadpool_limits(limits=1, user_api="blas")  # numpy may be loaded already
except ImportError:  # pragma: no cover - scikit-learn brings it
    pass
# A shell without job control starts background commands (`pytest &`, `nohup ... &` in a
# script) with SIGINT ignored, and every child inherits that: Python then installs no
# KeyboardInterrupt handler, so the Ctrl-C tests would test nothing. Run as in a terminal.
if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)

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

# Helpers shared by test folders (the stub LLM server, `llm_stub`): importable by name.
sys.path.insert(0, str(REPO / "tests" / "support"))


SLOW_FOLDERS = ("jobs",)  # CLI and end-to-end tests: subprocesses, real stores, minutes in all
# ``cli``: a subprocess per call; ``stub_server``: calls through litellm, whose first import
# costs ~5 s of CPU in each worker.
SLOW_FIXTURES = ("cli", "stub_server")


def pytest_collection_modifyitems(config, items):
    """Mark tests under ``tests/jobs/`` (and any test using a ``SLOW_FIXTURES`` one) as slow.

    ``pytest -m "not slow"`` is the inner loop: unit tests that import modules directly.
    """
    root = Path(__file__).resolve().parent
    for item in items:
        parts = Path(str(item.fspath)).resolve().relative_to(root).parts
        if parts[0] in SLOW_FOLDERS or set(SLOW_FIXTURES) & set(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.slow)


def _made_once(tmp_path_factory, folder: str, name: str, make) -> Path:
    """``make(path)`` once per test run (the xdist workers share the result, under a file lock),
    then a copy in this worker's own ``<folder>``: tests may write beside it."""
    import fcntl

    base = tmp_path_factory.getbasetemp()
    shared = base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base
    made = shared / f"once-{folder}-{name}"
    with open(shared / f"once-{folder}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not made.exists():
            part = shared / f"once-{folder}.part"
            part.unlink(missing_ok=True)  # an interrupted attempt
            make(part)
            part.rename(made)
    own = tmp_path_factory.mktemp(folder) / name
    shutil.copy(made, own)
    return own


def _mlflow_schema(path: Path) -> None:
    import mlflow

    client = mlflow.MlflowClient(tracking_uri=f"sqlite:///{path}",
                                 registry_uri=f"sqlite:///{path}")
    client.search_experiments()
    client.search_registered_models()


@pytest.fixture(scope="session")
def mlflow_template(tmp_path_factory) -> Path:
    """An MLflow sqlite DB with the schema created once per run (migrations take seconds)."""
    return _made_once(tmp_path_factory, "mlflow-template", "mlflow.db", _mlflow_schema)


@pytest.fixture
def pulse_home(tmp_path, monkeypatch, mlflow_template):
    """A fresh project root with its own MLflow store (real sqlite, copied from the template)."""
    home = tmp_path / "home"
    (home / "mlruns").mkdir(parents=True)
    shutil.copy(mlflow_template, home / "mlruns" / "mlflow.db")
    monkeypatch.setenv("PULSE_HOME", str(home))
    monkeypatch.setenv("MLFLOW_TRACKING_URI", f"sqlite:///{home / 'mlruns' / 'mlflow.db'}")
    # mlflow.set_registry_uri also exports MLFLOW_REGISTRY_URI (and never unsets it): through
    # monkeypatch it is restored at teardown, so no later test's subprocess inherits this store.
    monkeypatch.setenv("MLFLOW_REGISTRY_URI", f"sqlite:///{home / 'mlruns' / 'mlflow.db'}")
    monkeypatch.delenv("PULSE_ARTIFACT_ROOT", raising=False)
    # In-process MLflow keeps the URI set by an earlier test's job: point it here too.
    import mlflow

    uri = f"sqlite:///{home / 'mlruns' / 'mlflow.db'}"
    mlflow.set_tracking_uri(uri)
    mlflow.set_registry_uri(uri)
    yield home
    mlflow.set_tracking_uri(None)
    mlflow.set_registry_uri(None)


def _point_mlflow(home: Path) -> None:
    """Point in-process MLflow (tracking and registry) at ``home``'s sqlite store."""
    import mlflow

    uri = f"sqlite:///{home / 'mlruns' / 'mlflow.db'}"
    mlflow.set_tracking_uri(uri)
    mlflow.set_registry_uri(uri)


def _relocate_store(src: Path, dst: Path) -> None:
    """Copy the project root ``src``'s ``mlruns`` (sqlite store, artifacts, Optuna journals)
    into ``dst``, rewriting the absolute paths MLflow keeps (runs, experiments, models, MLmodel
    files, the Optuna storage param) from ``src`` to ``dst``: the copy is the store ``train``
    would have written in ``dst``."""
    import sqlite3

    shutil.rmtree(dst / "mlruns", ignore_errors=True)
    shutil.copytree(src / "mlruns", dst / "mlruns")
    old, new = f"{src}/", f"{dst}/"
    with sqlite3.connect(dst / "mlruns" / "mlflow.db") as con:
        tables = [r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type='table'")]
        for table in tables:
            for col in con.execute(f'PRAGMA table_info("{table}")').fetchall():
                if "CHAR" in col[2].upper() or "TEXT" in col[2].upper():
                    con.execute(f'UPDATE "{table}" SET "{col[1]}" = replace("{col[1]}", ?, ?) '
                                f'WHERE instr("{col[1]}", ?) > 0', (old, new, old))
    con.close()
    for mlmodel in (dst / "mlruns").rglob("MLmodel"):
        mlmodel.write_text(mlmodel.read_text().replace(old, new))


@pytest.fixture(scope="session")
def trained_templates(tmp_path_factory, mlflow_template, small_demo):
    """``get(*overrides)``: a project root where ``train`` ran on the small demo table with those
    overrides, trained once per session and worker; returns ``(root, TrainResult)``. Read only:
    tests get a relocated copy through ``trained_home``."""
    from pulse_ml.config import compose
    from pulse_ml.jobs import train

    cache: dict[tuple[str, ...], tuple[Path, object]] = {}

    def get(*overrides: str):
        key = tuple(sorted(overrides))  # Hydra overrides of distinct keys commute
        if key not in cache:
            root = tmp_path_factory.mktemp("trained") / "home"
            (root / "mlruns").mkdir(parents=True)
            shutil.copy(mlflow_template, root / "mlruns" / "mlflow.db")
            with pytest.MonkeyPatch.context() as mp:
                mp.setenv("PULSE_HOME", str(root))
                mp.setenv("MLFLOW_TRACKING_URI", f"sqlite:///{root / 'mlruns' / 'mlflow.db'}")
                mp.setenv("MLFLOW_REGISTRY_URI", f"sqlite:///{root / 'mlruns' / 'mlflow.db'}")
                mp.delenv("PULSE_ARTIFACT_ROOT", raising=False)
                _point_mlflow(root)
                result = train.run(compose("train", [f"data.path={small_demo}", *overrides]))
            cache[key] = (root, result)
        return cache[key]

    return get


@pytest.fixture
def trained_home(pulse_home, trained_templates):
    """``trained_home(*overrides)``: this test's ``pulse_home`` as ``train`` with those overrides
    on the small demo table leaves it (a relocated copy of a session template: the test may
    write to it freely); returns the ``TrainResult``."""

    def get(*overrides: str):
        root, result = trained_templates(*overrides)
        _point_mlflow(pulse_home)  # training the template pointed MLflow elsewhere
        _relocate_store(root, pulse_home)
        storage = result.storage
        if storage and storage.startswith(f"{root}/"):
            storage = f"{pulse_home}/" + storage[len(f"{root}/"):]
        return dataclasses.replace(result, storage=storage)

    return get

def _small_simulation(seed: int):
    """The small demo design (2 case studies, 600 labeled) simulated with ``seed``."""
    from pulse_ml.simulate.generator import simulate
    from pulse_ml.simulate.spec import CaseStudySpec, SimulateSettings

    return simulate(SimulateSettings(
        seed=seed, n_labeled=600, unlabeled_ratio=4.0, labeled_per_arm=80,
        min_labeled_per_arm=40, mc_sessions=20_000, signal=2.0,
        case_studies=(CaseStudySpec("plan", "no-plan", "show-plan", 0.031),
                      CaseStudySpec("claude4_vs_gpt5", "claude-4-sonnet", "gpt-5", -0.069))))


@pytest.fixture(scope="session")
def small_demo(tmp_path_factory) -> Path:
    """A small simulated session table (2 case studies, 600 labeled), simulated once per run."""
    return _made_once(tmp_path_factory, "demo", "sessions.parquet",
                      lambda path: _small_simulation(7).sessions.to_parquet(path, index=False))


@pytest.fixture(scope="session")
def colliding_table():
    """Another simulation (seed 8): its ids restart at s000000, so they collide with training."""
    return _small_simulation(8).sessions


def run_cli(*args: str, env: dict | None = None, cwd: Path | None = None,
            timeout: float = 300) -> subprocess.CompletedProcess:
    """Run ``pulse-ml <args>`` in its own process and capture its output.

    The process is forked from a warm interpreter that has imported the heavy libraries
    (``tests/support/forkcli.py``): the real entry point with this environment, minus ~3 s of
    imports per command. ``PULSE_TEST_FRESH=1`` runs ``python -m pulse_ml`` instead.
    """
    from forkcli import run

    return run(list(args), {**os.environ, **(env or {})}, cwd=cwd, timeout=timeout)


@pytest.fixture
def cli():
    """The ``pulse-ml`` command as a subprocess: ``cli("train", "model=mean")``."""
    return run_cli
