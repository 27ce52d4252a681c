"""A registered model opened from a local SQLite store without importing MLflow (read-only).

``pulse-ml score`` at 10^4 rows spent ~1.25 s of its ~3.6 s CPU importing MLflow and its
SQLAlchemy stores only to resolve ``models:/pulse-satisfaction@champion`` and unpickle the
pyfunc wrapper around ``ensemble.joblib`` (issue 25). For a local ``sqlite:///`` store this
module does the same in milliseconds: one read transaction on the registry tables (the
version behind the alias or number, its tags), then the ``MLmodel`` file's artifact path and
``joblib.load`` of the ensemble in place.

It is guarded, and answers None (the caller then goes through MLflow's API, which gives every
error message) whenever anything is not exactly what it was checked against:

* the store's schema revision (``alembic_version``) is not one in :data:`KNOWN_REVISIONS`
  (``tests/registry/test_sqlite_registry.py`` holds it equal to the installed MLflow's head);
* MLflow workspaces are enabled, the alias is ``latest`` (MLflow resolves it specially), the
  URI is not ``models:/name@alias`` or ``models:/name/N``, or no live version matches;
* the version is not ``READY``, its files are not local, its ``MLmodel`` is not a pyfunc
  ``python_model`` (whose file is there) with an ``ensemble`` artifact, or that artifact is
  not a loadable :class:`~pulse_ml.models.crossfit.CrossFitEnsemble`.

The database is opened with ``mode=ro``; nothing is written.
"""

from __future__ import annotations

import os
import sqlite3
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import quote

from pulse_ml.keys import ENSEMBLE_ARTIFACT

KNOWN_REVISIONS = frozenset({"dc11669786a5"})  # MLflow 3.17's schema head
WORKSPACE = "default"  # MLflow's single-tenant workspace (workspaces disabled)
DELETED = "Deleted_Internal"  # MLflow's stage of a deleted version
PYFUNC_LOADER = "mlflow.pyfunc.model"


@dataclass(frozen=True)
class StoredVersion:
    """A registered model version read from the store (what pulse reads of a ``ModelVersion``).

    Attributes:
        name: The registered model's name.
        version: The version number (``"3"``).
        run_id: The run that logged it (None when absent).
        source: Its source URI (``models:/m-...`` for MLflow 3 logged models).
        storage_location: Where its files are (``file:///...``), else None.
        status: ``READY`` once registered.
        tags: The version's tags.
    """

    name: str
    version: str
    run_id: str | None
    source: str
    storage_location: str | None
    status: str
    tags: dict[str, str] = field(default_factory=dict)


def parse_uri(model_uri: str) -> tuple[str, str | None, int | None] | None:
    """``(name, alias, None)`` or ``(name, None, version)`` of a ``models:/`` URI, else None."""
    if not model_uri.startswith("models:/"):
        return None
    rest = model_uri[len("models:/"):]
    if "@" in rest:
        name, alias = rest.split("@", 1)
        if not name or not alias or "/" in name or alias.lower() == "latest":
            return None
        return name, alias, None
    name, _, ver = rest.partition("/")
    if not name or not ver.isdigit():
        return None
    return name, None, int(ver)


def _workspaces_on() -> bool:
    flag = os.environ.get("MLFLOW_ENABLE_WORKSPACES", "").strip().lower()
    return flag in ("1", "true", "yes", "on") or bool(os.environ.get("MLFLOW_WORKSPACE"))


def find_version(db: Path, model_uri: str, timeout: float = 5.0) -> StoredVersion | None:
    """The live version ``model_uri`` names in the SQLite store ``db``, or None (ask MLflow).

    One read transaction: the schema revision, the version (through its alias) and its tags.
    """
    parsed = parse_uri(model_uri)
    if parsed is None or _workspaces_on():
        return None
    name, alias, number = parsed
    select = ("SELECT v.version, v.run_id, v.source, v.storage_location, v.status "
              "FROM model_versions v ")
    if alias is not None:
        query = select + (
            "JOIN registered_model_aliases a ON a.workspace = v.workspace "
            "AND a.name = v.name AND a.version = v.version "
            "WHERE v.workspace = ? AND v.name = ? AND a.alias = ? AND v.current_stage != ?")
        args: tuple = (WORKSPACE, name, alias, DELETED)
    else:
        query = select + ("WHERE v.workspace = ? AND v.name = ? AND v.version = ? "
                          "AND v.current_stage != ?")
        args = (WORKSPACE, name, number, DELETED)
    try:
        con = sqlite3.connect(f"file:{quote(str(db.resolve()))}?mode=ro", uri=True,
                              timeout=timeout, isolation_level=None)
        try:
            con.execute("BEGIN")  # one snapshot for the three reads
            revision = con.execute("SELECT version_num FROM alembic_version").fetchall()
            if len(revision) != 1 or revision[0][0] not in KNOWN_REVISIONS:
                return None
            rows = con.execute(query, args).fetchall()
            if len(rows) != 1:
                return None
            version, run_id, source, location, status = rows[0]
            tags = dict(con.execute(
                "SELECT key, value FROM model_version_tags WHERE workspace = ? AND name = ? "
                "AND version = ?", (WORKSPACE, name, version)).fetchall())
            con.execute("COMMIT")
        finally:
            con.close()
    except (sqlite3.Error, OSError, ValueError):
        return None
    return StoredVersion(name=name, version=str(version), run_id=run_id or None,
                         source=str(source or ""), storage_location=location or None,
                         status=str(status or ""), tags={str(k): str(v) for k, v in tags.items()})


def model_folder(version: StoredVersion) -> Path | None:
    """The local folder of the version's files (MLflow's download URI), or None (not local)."""
    location = version.storage_location or version.source
    if location.startswith("file:"):
        from pulse_ml.env.locations import local_path

        folder = local_path(location)
    elif location.startswith("/"):
        folder = Path(location)
    else:
        return None
    return folder if folder is not None and (folder / "MLmodel").is_file() else None


def ensemble_path(folder: Path) -> Path | None:
    """The ``ensemble`` artifact named by ``folder/MLmodel`` (a pulse pyfunc model), or None."""
    from pulse_ml.yaml_limits import load_yaml_text

    try:
        meta = load_yaml_text(folder / "MLmodel", (folder / "MLmodel").read_text())
        flavor = meta["flavors"]["python_function"]
        if flavor.get("loader_module") != PYFUNC_LOADER or not flavor.get("python_model"):
            return None
        wrapper = Path(str(flavor["python_model"]))
        rel = Path(str(flavor["artifacts"][ENSEMBLE_ARTIFACT]["path"]))
    except Exception:  # noqa: BLE001 - any other shape: MLflow's loader decides
        return None
    if any(p.is_absolute() or ".." in p.parts for p in (rel, wrapper)):
        return None
    if not (folder / wrapper).is_file():  # the pyfunc wrapper is gone: MLflow names it
        return None
    path = folder / rel
    return path if path.is_file() else None


def open_version(db: Path, model_uri: str) -> tuple[Any, StoredVersion] | None:
    """``(ensemble, version)`` of ``model_uri`` read from the SQLite store ``db``, or None.

    None whenever MLflow's own path should decide (see the module docstring); the store must
    already have passed :func:`pulse_ml.registry.guard.check_store`.
    """
    import joblib

    from pulse_ml.models.crossfit import CrossFitEnsemble
    from pulse_ml.registry.guard import busy_timeout_s

    version = find_version(db, model_uri, timeout=busy_timeout_s())
    if version is None or version.status != "READY":
        return None
    folder = model_folder(version)
    path = None if folder is None else ensemble_path(folder)
    if path is None:
        return None
    try:
        ensemble = joblib.load(path)
    except Exception:  # noqa: BLE001 - a damaged artifact: MLflow's path names it
        return None
    if not isinstance(ensemble, CrossFitEnsemble):
        return None
    return ensemble, version
