"""A registered model read from a local SQLite store without MLflow equals MLflow's own load.

Real stores: ``trained_home`` (``pulse-ml train`` on the small demo), a second version logged and
registered through ``registry.models``, the alias moved and a version deleted with MLflow's
client. Every case the reader does not handle must answer None (MLflow's path then decides).
"""

from __future__ import annotations

import dataclasses
import hashlib
import os
import shutil
import sqlite3
import subprocess
import sys

import joblib
import pandas as pd
import pytest

from pulse_ml.errors import PulseError
from pulse_ml.keys import REGISTERED_MODEL
from pulse_ml.registry import analysis, sqlite_registry
from pulse_ml.registry.models import client, load_model, log_model, register_version

CHAMPION = f"models:/{REGISTERED_MODEL}@champion"
TRAIN = ("model=mean", "progress=false")


def _db(home):
    return home / "mlruns" / "mlflow.db"


def _sha(path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_known_revision_is_the_installed_mlflow_head():
    """Upgrading MLflow fails here until the reader's queries are checked against its schema."""
    from mlflow.store.db.utils import _get_latest_schema_revision

    assert _get_latest_schema_revision() in sqlite_registry.KNOWN_REVISIONS


def test_fast_open_equals_mlflow_and_writes_nothing(pulse_home, trained_home):
    trained_home(*TRAIN)
    before = _sha(_db(pulse_home))
    for uri in (CHAMPION, f"models:/{REGISTERED_MODEL}/1"):
        fast = analysis.open_model(uri, fast=True)
        assert isinstance(fast.version, sqlite_registry.StoredVersion)
        ensemble, version = load_model(uri)  # MLflow's pyfunc path
        assert fast.version_number == str(version.version) == "1"
        assert fast.version_tags == dict(version.tags) and fast.version_tags
        assert fast.version.run_id == version.run_id
        assert fast.version.source == version.source
        assert fast.version.storage_location == client().get_model_version_download_uri(
            REGISTERED_MODEL, version.version)
        assert joblib.hash(fast.ensemble) == joblib.hash(ensemble)
        assert fast.meta() == analysis.AnalysisModel(uri, ensemble, version).meta()
    assert _sha(_db(pulse_home)) == before


def test_fast_open_imports_no_mlflow(pulse_home, trained_home):
    trained_home(*TRAIN)
    code = ("import sys; from pulse_ml.registry.analysis import open_model; "
            f"m = open_model({CHAMPION!r}, fast=True); "
            "print(m.version_number, type(m.version).__name__, 'mlflow' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], env={**os.environ}, capture_output=True,
                         text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["1", "StoredVersion", "False"]


def test_moved_alias_and_deleted_version(pulse_home, trained_home, small_demo):
    import mlflow

    trained_home(*TRAIN)
    first, _ = load_model(CHAMPION)
    oof = first.oof.assign(prediction=first.oof["prediction"] + 0.5)  # a distinct version 2
    second = dataclasses.replace(first, oof=oof)
    example = pd.read_parquet(small_demo).head(20)
    with mlflow.start_run():
        v2 = register_version(log_model(second, example), {"note": "second"})
    assert v2 == "2"
    db = _db(pulse_home)
    assert analysis.open_model(CHAMPION, fast=True).version_number == "1"
    client().set_registered_model_alias(REGISTERED_MODEL, "champion", v2)
    moved = analysis.open_model(CHAMPION, fast=True)
    assert moved.version_number == "2" and moved.version_tags["note"] == "second"
    assert joblib.hash(moved.ensemble) == joblib.hash(second) != joblib.hash(first)

    client().delete_model_version(REGISTERED_MODEL, v2)  # MLflow drops its aliases too
    assert sqlite_registry.find_version(db, CHAMPION) is None
    assert sqlite_registry.find_version(db, f"models:/{REGISTERED_MODEL}/2") is None
    with pytest.raises(PulseError) as fast_error:
        analysis.open_model(CHAMPION, fast=True)
    with pytest.raises(PulseError) as mlflow_error:
        analysis.open_model(CHAMPION)
    assert str(fast_error.value) == str(mlflow_error.value)
    kept = analysis.open_model(f"models:/{REGISTERED_MODEL}/1", fast=True)
    assert kept.version_number == "1" and joblib.hash(kept.ensemble) == joblib.hash(first)


def test_unknown_schema_workspaces_and_other_stores_fall_back(pulse_home, trained_home,
                                                              tmp_path, monkeypatch):
    trained_home(*TRAIN)
    db = _db(pulse_home)
    assert sqlite_registry.find_version(db, CHAMPION) is not None
    for sql in ("UPDATE alembic_version SET version_num = 'ffffffffffff'",
                "UPDATE model_versions SET status = 'PENDING_REGISTRATION'"):
        copy = tmp_path / "copy.db"
        shutil.copy(db, copy)
        with sqlite3.connect(copy) as con:
            con.execute(sql)
        con.close()
        assert sqlite_registry.open_version(copy, CHAMPION) is None, sql
    for uri in (f"models:/{REGISTERED_MODEL}@latest", f"models:/{REGISTERED_MODEL}/latest",
                "runs:/abc/model", "/some/path"):
        assert sqlite_registry.find_version(db, uri) is None, uri
    monkeypatch.setenv("MLFLOW_ENABLE_WORKSPACES", "true")
    assert sqlite_registry.find_version(db, CHAMPION) is None
    monkeypatch.delenv("MLFLOW_ENABLE_WORKSPACES")
    monkeypatch.setenv("MLFLOW_TRACKING_URI", (tmp_path / "file_store").as_uri())
    assert analysis._open_sqlite(CHAMPION) is None  # not sqlite: MLflow's API answers


def test_missing_files_give_mlflows_message(pulse_home, trained_home):
    trained_home(*TRAIN)
    version = sqlite_registry.find_version(_db(pulse_home), CHAMPION)
    folder = sqlite_registry.model_folder(version)
    assert folder is not None and sqlite_registry.ensemble_path(folder) is not None
    shutil.rmtree(folder)
    assert sqlite_registry.open_version(_db(pulse_home), CHAMPION) is None
    with pytest.raises(PulseError, match="files are missing") as fast_error:
        analysis.open_model(CHAMPION, fast=True)
    with pytest.raises(PulseError) as mlflow_error:
        analysis.open_model(CHAMPION)
    assert str(fast_error.value) == str(mlflow_error.value)


@pytest.mark.parametrize("damage", [b"garbage\n", None])
def test_corrupt_artifact_gives_mlflows_message(pulse_home, trained_home, damage):
    trained_home(*TRAIN)
    version = sqlite_registry.find_version(_db(pulse_home), CHAMPION)
    path = sqlite_registry.ensemble_path(sqlite_registry.model_folder(version))
    path.write_bytes(damage if damage is not None else path.read_bytes()[:200])
    assert sqlite_registry.open_version(_db(pulse_home), CHAMPION) is None
    with pytest.raises(PulseError, match=r"ensemble.joblib\) is corrupt") as fast_error:
        analysis.open_model(CHAMPION, fast=True)
    with pytest.raises(PulseError) as mlflow_error:
        analysis.open_model(CHAMPION)
    assert str(fast_error.value) == str(mlflow_error.value)
