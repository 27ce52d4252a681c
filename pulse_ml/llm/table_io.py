"""Read a session table that LLM jobs need (with ``transcript``), with clear errors."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from pulse_ml.errors import DataError


def read_transcript_table(path: str | Path, need_rating: bool) -> pd.DataFrame:
    """Read a session table and check the columns LLM jobs use.

    Raises:
        DataError: unreadable file, missing ``session_id`` / ``transcript`` (/ ``rating``).
    """
    from pulse_ml.sessions.readers import read_frame

    frame = read_frame(path)
    need = ["session_id", "transcript"] + (["rating"] if need_rating else [])
    missing = [c for c in need if c not in frame.columns]
    if missing:
        raise DataError(str(path), [
            f"missing column(s) {', '.join(missing)}. LLM judges and discovery read the raw "
            f"conversation: build the table with `pulse-ml extract` (it keeps a `transcript` "
            f"column)."])
    frame = frame.copy()
    frame["session_id"] = frame["session_id"].astype(str)
    frame["transcript"] = frame["transcript"].fillna("[]").astype(str)
    if need_rating:
        frame["rating"] = pd.to_numeric(frame["rating"], errors="coerce")
    return frame
