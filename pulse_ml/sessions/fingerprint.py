"""A content hash of the training data, so metrics are compared only on the same data."""

from __future__ import annotations

import hashlib

import pandas as pd


def data_fingerprint(frame: pd.DataFrame, columns: list[str]) -> str:
    """SHA-256 over the given columns' values (row order matters, index does not)."""
    cols = [c for c in columns if c in frame.columns]
    hashed = pd.util.hash_pandas_object(frame[cols].reset_index(drop=True), index=False)
    digest = hashlib.sha256(hashed.to_numpy().tobytes())
    digest.update(",".join(cols).encode())
    return digest.hexdigest()
