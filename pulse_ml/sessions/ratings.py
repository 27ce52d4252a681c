"""Turn a long table of segment ratings into per-session ``rating`` and ``n_ratings``."""

from __future__ import annotations

import pandas as pd

from pulse_ml.errors import DataError


def aggregate_ratings(segments: pd.DataFrame, path: str = "<ratings>") -> pd.DataFrame:
    """Average segment ratings per session.

    Args:
        segments: Long table with columns ``session_id``, ``segment``, ``rating`` (1–5; empty
            ratings are ignored).
        path: File name for error messages.

    Returns:
        Frame with ``session_id``, ``rating`` (mean of the session's segment ratings) and
        ``n_ratings`` (how many were averaged), one row per session with at least one rating.

    Raises:
        DataError: missing columns, non-numeric ratings or ratings outside [1, 5].
    """
    missing = [c for c in ("session_id", "segment", "rating") if c not in segments.columns]
    if missing:
        raise DataError(path, [f"column '{c}': missing. A ratings table has session_id, "
                               "segment, rating." for c in missing])
    rating = pd.to_numeric(segments["rating"], errors="coerce")
    bad = (rating.isna() & segments["rating"].notna()) | (rating < 1) | (rating > 5)
    if bad.any():
        rows = ", ".join(str(i + 1) for i in bad.to_numpy().nonzero()[0][:5])
        raise DataError(path, [f"column 'rating': {int(bad.sum())} value(s) not a number in "
                               f"[1, 5] (rows {rows}). Segment ratings are 1–5 stars."])
    frame = pd.DataFrame({"session_id": segments["session_id"].astype(str), "rating": rating})
    frame = frame.dropna(subset=["rating"])
    agg = frame.groupby("session_id", sort=True)["rating"].agg(["mean", "size"]).reset_index()
    return agg.rename(columns={"mean": "rating", "size": "n_ratings"}).astype(
        {"n_ratings": "int64"})
