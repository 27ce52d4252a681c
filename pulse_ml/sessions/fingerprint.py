"""A content hash of the training data, so metrics are compared only on the same data."""

from __future__ import annotations

import hashlib
from collections.abc import Iterable

import pandas as pd


def data_fingerprint(frame: pd.DataFrame, columns: list[str]) -> str:
    """SHA-256 over the given columns' values (row order matters, index does not)."""
    cols = [c for c in columns if c in frame.columns]
    hashed = pd.util.hash_pandas_object(frame[cols].reset_index(drop=True), index=False)
    digest = hashlib.sha256(hashed.to_numpy().tobytes())
    digest.update(",".join(cols).encode())
    return digest.hexdigest()


# Columns the table contract reads (sessions/table.py): part of every analysis fingerprint.
CONTRACT_COLUMNS = ("session_id", "user_id", "case_study", "condition", "rating", "started_at")


def analysis_columns(frame: pd.DataFrame, used: Iterable[str] = ()) -> list[str]:
    """The columns an analysis of ``frame`` can depend on, in table order.

    Every non-string column (flags, counts, weights: cheap to hash) and the string columns
    that the table contract or the model reads (``used``: the model's feature names). Other
    string columns, free text above all, cannot change a result and are left out: hashing a
    column of transcripts costs more than the analysis of its table.
    """
    keep = {*CONTRACT_COLUMNS, *used}
    return [c for c in frame.columns
            if c in keep or not (pd.api.types.is_object_dtype(frame[c])
                                 or pd.api.types.is_string_dtype(frame[c]))]
