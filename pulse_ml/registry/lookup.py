"""Cheap registry checks before any data is read: is there a store, is the model registered?

Imports nothing heavy (no MLflow, no pandas) on its fast path: a local sqlite store is read
with two SELECTs, so ``infer``/``audit``/``monitor`` say "no model is registered" right after
their settings are read, before MLflow is imported or the table is loaded.
"""

from __future__ import annotations

from pulse_ml.errors import PulseError


def require_store(model_uri: str) -> None:
    """Fail at once when the local store does not exist (so no model can be registered).

    Checked before any data is read and before MLflow would create an empty store (seconds of
    schema migrations) only to report that the model is missing.
    """
    from pulse_ml.env.dbprobe import sqlite_file
    from pulse_ml.registry.store import tracking_uri

    uri = tracking_uri()
    db = sqlite_file(uri)
    if db is not None and not db.is_file():
        raise PulseError(f"cannot load model '{model_uri}': there is no MLflow store at {uri} "
                         "yet, so no model is registered. Train and register one with "
                         "`pulse-ml train` (or `pulse-ml pipeline`), or point "
                         "MLFLOW_TRACKING_URI / PULSE_HOME at the store that has it.")


def require_model(model_uri: str, fallback: bool = True) -> None:
    """Fail at once when a ``models:/`` URI names no registered version (a registry lookup).

    Called before any data is read, so "no model" is said in a second, not after the table is
    loaded. Other URIs (``runs:/``, paths) are left to ``models.load_model``. ``fallback=False``
    only reads a local sqlite store directly and leaves any other store to ``load_model``.
    """
    require_store(model_uri)
    rest = model_uri[len("models:/"):] if model_uri.startswith("models:/") else ""
    if not rest or ("@" not in rest and not rest.partition("/")[2].isdigit()):
        return  # runs:/, a path or models:/name/latest: load_model resolves those
    found = _sqlite_has_version(rest)
    if found:
        return
    if found is None and not fallback:
        return
    if found is None:  # not a readable sqlite store: ask MLflow
        from mlflow.exceptions import MlflowException

        from pulse_ml.registry.store import connect

        connect(write=False)
        try:
            version_of(model_uri)
            return
        except MlflowException:
            pass
    raise PulseError(f"cannot load model '{model_uri}': no model is registered under that "
                     f"name/alias/version in {_store_name()}. Train and register one with "
                     "`pulse-ml train` (or `pulse-ml pipeline`), promote one with "
                     "`pulse-ml promote version=N`, or pass model_uri=... "
                     "(e.g. models:/pulse-satisfaction/1).")


def version_of(model_uri: str):
    """The MLflow model version a ``models:/name@alias`` or ``models:/name/N`` URI names.

    Returns:
        The ``ModelVersion``, or None for another form (``models:/name/latest``).

    Raises:
        MlflowException: no such model, alias or version.
    """
    import mlflow

    rest = model_uri[len("models:/"):]
    c = mlflow.MlflowClient()
    if "@" in rest:
        name, alias = rest.split("@", 1)
        return c.get_model_version_by_alias(name, alias)
    name, _, ver = rest.partition("/")
    return c.get_model_version(name, ver) if ver.isdigit() else None


def _sqlite_has_version(rest: str) -> bool | None:
    """Whether a local sqlite store has ``name@alias`` / ``name/N``, read without MLflow.

    Importing MLflow and opening its store take seconds; two SELECTs on the registry tables
    take milliseconds. None when the store is not sqlite or its tables cannot be read (then
    MLflow is asked).
    """
    import sqlite3

    from pulse_ml.registry.store import tracking_uri

    uri = tracking_uri()
    if not uri.startswith("sqlite:///"):
        return None
    if "@" in rest:
        name, alias = rest.split("@", 1)
        query = ("SELECT 1 FROM registered_model_aliases a JOIN model_versions v ON "
                 "v.name = a.name AND v.version = a.version WHERE a.name = ? AND a.alias = ? "
                 "AND v.current_stage != 'Deleted_Internal'")
        args: tuple = (name, alias)
    else:
        name, _, ver = rest.partition("/")
        query = ("SELECT 1 FROM model_versions WHERE name = ? AND version = ? "
                 "AND current_stage != 'Deleted_Internal'")
        args = (name, int(ver))
    try:
        from pulse_ml.env.dbprobe import sqlite_file

        path = sqlite_file(uri)
        if path is None:
            return None
        path = path.resolve()
        with sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=5) as con:
            return con.execute(query, args).fetchone() is not None
    except (sqlite3.Error, OSError, ValueError):
        return None


def _store_name() -> str:
    from pulse_ml.registry.store import tracking_uri

    return tracking_uri()
