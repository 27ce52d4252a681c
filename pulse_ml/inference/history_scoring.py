"""The ``user_history`` columns of a streamed table, chunk by chunk (``score history.path=``).

The past is read once, chunk by chunk and only its ``user_id``, ``rating`` and ``started_at``,
into a :class:`~pulse_ml.sessions.user_history.HistoryIndex` (four numbers per past session);
each scored chunk then asks the index for its sessions' history. Without ``history.path`` the
scored table is its own past, and the columns equal those of the whole table
(:func:`pulse_ml.sessions.user_history.history_frame`) chunk for chunk. With a separate history
table, sessions are compared by ``started_at`` when both tables have one for every session;
otherwise every session of the history table counts as earlier (said in a note).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from pulse_ml.errors import DataError
from pulse_ml.sessions.bad_rows import where_rows
from pulse_ml.sessions.feature_sets import FeatureSet
from pulse_ml.sessions.readers import input_columns, iter_chunks
from pulse_ml.sessions.user_history import (
    TIME,
    HistoryIndex,
    session_times,
    time_note,
    user_keys,
)

__all__ = ["ChunkHistory", "read_history"]


@dataclass(frozen=True)
class ChunkHistory:
    """The past of a scoring run and how chunks are placed in it.

    Attributes:
        index: The past sessions.
        features: The model's feature set (its ``user_history`` features).
        own: True when the past is the scored table itself (row positions are comparable).
        notes: What the user should know (the order used), said once.
    """

    index: HistoryIndex
    features: FeatureSet
    own: bool
    notes: tuple[str, ...]
    path: Path = Path("")

    def add_columns(self, chunk: pd.DataFrame, first_row: int) -> pd.DataFrame:
        """``chunk`` with the history columns of each ``user_history`` feature."""
        times = None
        if self.index.timed:
            times = _chunk_times(chunk, self.path, first_row)
            if times is None:
                raise DataError(str(self.path), [
                    f"column '{TIME}': empty values in rows {first_row + 1}-"
                    f"{first_row + len(chunk)}. The model's user_history feature compares "
                    "each session's start with the history's: every scored session needs one."])
        elif self.own:
            times = np.arange(first_row, first_row + len(chunk), dtype=np.int64)
        parts = [self.index.query(user_keys(chunk), times, spec.name,
                                  spec.options.get("window_days"),
                                  int(spec.options.get("min_prior", 1)))
                 for spec in self.features.history]
        for part in parts:
            part.index = chunk.index
        return pd.concat([chunk, *parts], axis=1)


def _ratings(chunk: pd.DataFrame, path: Path, first_row: int) -> np.ndarray:
    raw = chunk["rating"]
    num = pd.to_numeric(raw, errors="coerce")
    bad = (num.isna() & raw.notna()) | (num.notna() & ((num < 1) | (num > 5)))
    if bad.any():
        raise DataError(str(path), [f"column 'rating': values that are not 1-5 ratings in "
                                    f"{where_rows(chunk, bad.to_numpy(), first_row)}. The "
                                    "user_history feature averages earlier ratings; leave "
                                    "unrated sessions empty."])
    return num.to_numpy(dtype=float)


def read_history(path: str | Path, features: FeatureSet, chunk_size: int,
                 scored: str | Path | None = None) -> ChunkHistory:
    """Index the past of a scoring run (``path``), read chunk by chunk.

    Args:
        path: The history table (``.parquet`` or ``.csv``; ``user_id``, ``rating``, optional
            ``started_at``).
        features: The model's feature set.
        chunk_size: Rows per chunk.
        scored: The scored table, when it differs from ``path`` (None: the same file).

    Raises:
        DataError: missing columns, bad ratings or unparseable times (file and rows named).
    """
    path = Path(path)
    present = input_columns(path)
    absent = [c for c in ("user_id", "rating") if c not in present]
    if absent:
        raise DataError(str(path), [f"column(s) {', '.join(absent)}: missing. The model's "
                                    f"feature '{features.history[0].name}' (kind user_history) "
                                    "averages each user's earlier ratings: the history table "
                                    "needs user_id and rating (empty when unrated)."])
    cols = ["user_id", "rating", *[c for c in ("session_id", TIME) if c in present]]
    users, times, ratings = [], [], []
    timed = TIME in present
    n = 0
    for chunk in iter_chunks(path, cols, chunk_size):
        ratings.append(_ratings(chunk, path, n))
        users.append(user_keys(chunk))
        t = _chunk_times(chunk, path, n) if timed else None
        timed = timed and t is not None
        times.append(t if t is not None else np.arange(n, n + len(chunk), dtype=np.int64))
        n += len(chunk)
    if not timed:  # positions throughout (a chunk without complete times switches all)
        times = [np.arange(n, dtype=np.int64)]
    index = HistoryIndex.from_arrays(np.concatenate(users) if users else np.empty(0, str),
                                     np.concatenate(times) if times else np.empty(0, np.int64),
                                     np.concatenate(ratings) if ratings else np.empty(0), timed)
    own = scored is None
    if own:
        note = time_note(timed, TIME in present)
    else:
        scored_timed = TIME in input_columns(Path(scored))
        if timed and scored_timed:
            note = (f"user_history: sessions of {path.name} count as earlier when they started "
                    "before the scored session (started_at).")
        else:
            index = HistoryIndex(index.users, index.keys, index.times, index.first,
                                 index.starts, index.cum_sum, index.cum_cnt, False)
            note = (f"user_history: {path.name if not timed else Path(scored).name} has no "
                    f"complete started_at, so every session of {path.name} counts as earlier "
                    "than the scored ones (days since the first session is 0).")
    return ChunkHistory(index=index, features=features, own=own, notes=(note,),
                        path=Path(scored) if scored is not None else path)


def _chunk_times(chunk: pd.DataFrame, path: Path, first_row: int) -> np.ndarray | None:
    try:
        return session_times(chunk)
    except Exception as exc:
        raise DataError(str(path), [f"{exc} (rows {first_row + 1}-{first_row + len(chunk)})"]
                        ) from None
