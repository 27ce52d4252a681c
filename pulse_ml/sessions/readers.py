"""Read a table from Parquet, CSV or JSONL (by extension) with clear errors."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd

from pulse_ml.errors import DataError

READERS = {".parquet": "parquet", ".pq": "parquet", ".csv": "csv", ".jsonl": "jsonl",
           ".ndjson": "jsonl"}


def read_frame(path: str | Path) -> pd.DataFrame:
    """Read a table file into a DataFrame.

    Args:
        path: A ``.parquet``, ``.csv`` or ``.jsonl`` file.

    Returns:
        The raw frame (no validation beyond "it is a non-empty table").

    Raises:
        DataError: missing file, unsupported extension, empty or unreadable file.
    """
    path = Path(path)
    kind = READERS.get(path.suffix.lower())
    if kind is None:
        raise DataError(str(path), [
            f"unsupported extension '{path.suffix or '(none)'}'. "
            f"Use one of {', '.join(sorted(READERS))} (Parquet, CSV or JSON Lines)."])
    if not path.is_file():
        raise DataError(str(path), ["no such file. Check the path, or create demo data with "
                                    "`pulse-ml simulate`."])
    if path.stat().st_size == 0:
        raise DataError(str(path), ["the file is empty. Expected a header and one row per "
                                    "session."])
    try:
        if kind == "parquet":
            frame = pd.read_parquet(path)
        elif kind == "csv":
            frame = pd.read_csv(path, dtype={"session_id": str, "user_id": str,
                                             "case_study": str, "condition": str},
                                keep_default_na=True)
        else:
            frame = pd.read_json(path, lines=True, dtype={"session_id": str, "user_id": str})
    except Exception as exc:  # noqa: BLE001 - any parser failure is the user's file
        reason = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise DataError(str(path), [f"cannot be read as {kind}: {reason[:200]}. Is the file "
                                    f"complete and really {kind}?"]) from None
    if frame.shape[0] == 0:
        raise DataError(str(path), ["the table has no rows. Expected one row per session."])
    return frame


def load_ground_truth(data_path: str) -> dict[str, float]:
    """True effects from ``ground_truth.json`` next to simulated data (else empty)."""
    path = Path(data_path).with_name("ground_truth.json")
    if not path.is_file():
        return {}
    try:
        effects = json.loads(path.read_text()).get("effects", {})
        return {k: float(v["effect"]) for k, v in effects.items()}
    except (ValueError, KeyError, TypeError):
        return {}
