"""Tracking store setup: the URI, experiments and their artifact location."""

from __future__ import annotations

import os
from pathlib import Path

from pulse_ml.env import dbprobe
from pulse_ml.env.locations import local_path
from pulse_ml.env.paths import project_root
from pulse_ml.errors import PulseError
from pulse_ml.registry import guard

_DEFAULTS: set[str] = set()  # default store URIs this process chose (and exported) itself


def tracking_uri() -> str:
    """Return ``MLFLOW_TRACKING_URI`` if set, else ``sqlite:///<root>/mlruns/mlflow.db``."""
    env = os.environ.get("MLFLOW_TRACKING_URI")
    if env:
        return env
    uri = f"sqlite:///{project_root() / 'mlruns' / 'mlflow.db'}"
    _DEFAULTS.add(uri)
    return uri


def artifact_root() -> str:
    """Return where new experiments put their artifacts.

    ``PULSE_ARTIFACT_ROOT`` wins; a local SQLite store keeps them beside its database
    (``<db folder>/artifacts``, so a store is one folder to copy or delete); otherwise
    ``<root>/mlruns/artifacts``.
    """
    env = os.environ.get("PULSE_ARTIFACT_ROOT")
    if env:
        return env
    db = dbprobe.sqlite_file(tracking_uri())
    if db is not None:
        return (db.expanduser().resolve().parent / "artifacts").as_uri()
    return (project_root() / "mlruns" / "artifacts").as_uri()


def store_locations() -> list[tuple[str, Path]]:
    """The local files and folders of the tracking store (its database and its artifacts).

    For :func:`pulse_ml.env.locations.check_outputs`: no output goes over, into or around them.
    """
    uri = tracking_uri()
    found: list[tuple[str, Path]] = []
    db = dbprobe.sqlite_file(uri)
    if db is not None:
        # the default store is the folder mlruns/ (database and artifacts)
        found.append(("the MLflow store", db.parent if db.parent.name == "mlruns" else db))
    folder = dbprobe.local_dir(uri)
    if folder is not None:
        found.append(("the MLflow store", folder))
    artifacts = local_path(artifact_root())
    if artifacts is not None:
        found.append(("the MLflow artifact store", artifacts))
    return found


_CONNECTED: dict[tuple[str, bool], guard.StoreCheck] = {}


def connect(write: bool = True) -> guard.StoreCheck:
    """Check the tracking store (see :mod:`pulse_ml.registry.guard`) and point MLflow at it.

    Runs the checks and MLflow's store initialization once per URI and process.

    Args:
        write: The command will write runs, models or aliases (a read-only store is refused).

    Returns:
        The :class:`~pulse_ml.registry.guard.StoreCheck` of the store.

    Raises:
        PulseError: a foreign, damaged or read-only store, a missing folder, a dead server, or
            a store MLflow cannot open (e.g. an old schema).
    """
    import logging

    import mlflow
    from mlflow.exceptions import MlflowException

    if not os.environ.get("PULSE_VERBOSE"):  # our errors are one line; MLflow's are tracebacks
        logging.getLogger("mlflow").setLevel(logging.CRITICAL)
    uri = tracking_uri()
    # Read before set_tracking_uri, which exports MLFLOW_TRACKING_URI for subprocesses.
    explicit = _explicit(uri)
    mlflow.set_tracking_uri(uri)
    mlflow.set_registry_uri(uri)
    if dbprobe.sqlite_file(uri) is not None:
        guard.wait_for_locks()  # before MLflow builds its engine: concurrent writers queue
    key = (uri, write)
    if key in _CONNECTED:
        return _CONNECTED[key]
    check = guard.check_store(uri, explicit=explicit, write=write)

    def touch() -> None:  # building the client opens the store (and creates a fresh schema)
        client = mlflow.MlflowClient()
        client.search_experiments(max_results=1)
        client.search_registered_models(max_results=1)

    try:
        guard.initialize(check, touch)
    except MlflowException as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise PulseError(f"MLflow store {guard.redact(uri)} cannot be opened: "
                         f"{first[:300]}") from exc
    _CONNECTED[key] = check
    if write:
        _CONNECTED[(uri, False)] = check
    return check


def _explicit(uri: str) -> bool:
    """Whether the user named ``uri`` (``MLFLOW_TRACKING_URI``) rather than this process."""
    return bool(os.environ.get("MLFLOW_TRACKING_URI")) and uri not in _DEFAULTS


def check_sqlite() -> guard.StoreCheck | None:
    """The read-only checks :func:`connect` runs, for a local SQLite store, without MLflow.

    Returns:
        The :class:`~pulse_ml.registry.guard.StoreCheck`, or None when the store is not a
        local SQLite file (only :func:`connect` checks those).

    Raises:
        PulseError: as :func:`connect` (a foreign, damaged or truncated database, ...).
    """
    uri = tracking_uri()
    if dbprobe.sqlite_file(uri) is None:
        return None
    known = _CONNECTED.get((uri, False))
    return known if known is not None else guard.check_store(uri, explicit=_explicit(uri),
                                                              write=False)


def setup(experiment: str) -> str:
    """Point MLflow at the tracking store and make sure ``experiment`` exists.

    Args:
        experiment: Experiment name (``pulse-train``, ``pulse-judge``, ``pulse-infer``).

    Returns:
        The experiment id.
    """
    import mlflow
    from mlflow.exceptions import MlflowException

    check = connect(write=True)
    client = mlflow.MlflowClient()

    def existing() -> str | None:
        exp = client.get_experiment_by_name(experiment)
        return None if exp is None else exp.experiment_id

    def create() -> str:
        found = existing()
        if found is not None:
            return found
        location = None if check.kind == "http" or check.uri.startswith("databricks") \
            else artifact_root()
        try:
            return client.create_experiment(experiment, artifact_location=location)
        except MlflowException:
            found = existing()  # another process created it meanwhile
            if found is None:
                raise
            return found

    exp_id = guard.retry_locked(existing) or guard.locked(check, create)
    mlflow.set_experiment(experiment_id=exp_id)
    return exp_id


def ui_command() -> str:
    """Return the command that shows this store in the MLflow UI where run addresses point.

    ``pulse-ml ui port=5000`` (one worker; ``mlflow ui``'s four crash-looped on two cores): run
    with the same environment, it opens this store (and prints its URI); ``open <uri>`` for a
    tracking server.
    """
    uri = tracking_uri()
    if uri.startswith(("http://", "https://")):
        return f"open {uri}"
    return "pulse-ml ui port=5000"


def git_commit() -> str | None:
    """Return the git commit of the project checkout the code runs from, or None (not one)."""
    from pulse_ml.env.git_checkout import checkout_commit

    return checkout_commit()


def source_tags() -> dict[str, str]:
    """MLflow's standard source tag of a run: ``mlflow.source.git.commit`` from a checkout.

    Empty when the code does not run from a git checkout of the project (an installed package).
    """
    from pulse_ml import keys

    commit = git_commit()
    return {keys.SOURCE_COMMIT: commit} if commit else {}
