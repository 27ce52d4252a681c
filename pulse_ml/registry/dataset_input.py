"""A session table as the dataset input of an MLflow run (the UI's Dataset column)."""

from __future__ import annotations

import pandas as pd

from pulse_ml import keys
from pulse_ml.env.signals import deferred
from pulse_ml.registry.guard import locked
from pulse_ml.registry.store import connect

__all__ = ["log_dataset"]


def log_dataset(frame: pd.DataFrame, source: str, name: str, fingerprint: str,
                context: str) -> None:
    """Log a session table as a dataset input of the active run (the UI's Dataset column).

    Args:
        frame: The rows the run used (training: the labeled sessions).
        source: Where they came from (the table's path).
        name: Dataset name shown in the UI.
        fingerprint: The data fingerprint; its first 32 hex digits are the dataset digest
            (MLflow keeps at most 36 characters), the whole one is a tag of the input.
        context: ``training`` or ``inference`` (the input's context tag).
    """
    import warnings

    import mlflow
    from mlflow.exceptions import MlflowException

    with warnings.catch_warnings():  # integer columns without NaN are the contract here
        warnings.filterwarnings("ignore", message="Hint: Inferred schema contains integer")
        # MLflow registers two identical local-file sources and says so; either is right
        warnings.filterwarnings("ignore", message="The specified dataset source can be")
        dataset = mlflow.data.from_pandas(frame, source=str(source), name=name,
                                          digest=fingerprint[:32])
        # MLflow infers the schema lazily, when the input is logged, by walking every value of
        # every string column in Python (seconds per 10^6 rows, most of it free text): types
        # from the first rows, "required" from a vectorized null check of each whole column
        dataset.__dict__["schema"] = _table_schema(frame)

        def once() -> None:
            # a signal must not cut MLflow's transaction in half: its session rolls back on
            # Exception only, and the run's KILLED mark would then wait on our own lock
            with deferred():
                mlflow.log_input(dataset, context=context,
                                 tags={keys.DATA_FINGERPRINT: fingerprint})

        def log() -> None:
            try:
                once()
            except MlflowException as err:  # a trainer beside this one inserted the same
                if "unique" not in str(err).lower():  # dataset between MLflow's lookup and
                    raise  # its insert: now it is there, and logging again links it
                once()

        locked(connect(write=True), log)  # one process at a time on a local SQLite store


_SCHEMA_ROWS = 1_000


def _table_schema(frame: pd.DataFrame):
    """The MLflow schema of a table, as ``mlflow.data.from_pandas`` infers it, in vector time.

    Column types are inferred from the first rows (the table contract fixes each column's
    kind); whether a column is required (no missing value) is checked on every row.
    """
    from mlflow.types.schema import ColSpec, Schema
    from mlflow.types.utils import _infer_schema

    try:
        head = _infer_schema(frame.head(_SCHEMA_ROWS))
    except Exception:  # noqa: BLE001 - MLflow logs the input without a schema then, too
        return None
    missing = frame.isna().any()
    return Schema([ColSpec(spec.type, spec.name, required=not bool(missing[spec.name]))
                   for spec in head.inputs])
