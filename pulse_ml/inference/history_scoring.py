"""The ``user_history`` columns of a streamed table, chunk by chunk (``score history.path=``).

The past is read once, chunk by chunk and only its ``user_id``, ``rating`` and ``started_at``,
into a :class:`~pulse_ml.sessions.user_history.HistoryIndex` (four numbers per past session);
each scored chunk then asks the index for its sessions' history. Without ``history.path`` the
scored table is its own past, and the columns equal those of the whole table
(:func:`pulse_ml.sessions.user_history.history_frame`) chunk for chunk. With a separate history
table (``history.path``) the past is both tables, as if they were one (history rows first):
ordered by ``started_at`` when both have one for every session, else by row.
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

__all__ = ["ChunkHistory", "check_past_columns", "mixed_times_error", "overlap_error",
           "pair_note", "read_history"]


@dataclass(frozen=True)
class ChunkHistory:
    """The past of a scoring run and how chunks are placed in it.

    Attributes:
        index: The past sessions.
        features: The model's feature set (its ``user_history`` features).
        offset: Row position of the scored table's first row in the index (without times).
        notes: What the user should know (the order used), said once.
    """

    index: HistoryIndex
    features: FeatureSet
    offset: int
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
        else:
            start = self.offset + first_row
            times = np.arange(start, start + len(chunk), dtype=np.int64)
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


def check_past_columns(path: str, present: list[str], features: FeatureSet, what: str) -> None:
    """Refuse a past table without ``user_id`` or ``rating`` (one message naming both)."""
    absent = [c for c in ("user_id", "rating") if c not in present]
    if absent:
        raise DataError(path, [f"column(s) {', '.join(absent)}: missing. The model's feature "
                               f"'{features.history[0].name}' (kind user_history) averages each "
                               f"user's earlier ratings: {what} needs user_id and rating (empty "
                               "when unrated)."])


def overlap_error(path: str, n: int, first: object) -> DataError:
    """History and scored tables that share ``n`` session ids (``first`` is the smallest)."""
    return DataError(path, [
        f"history.path and the scored table share {n:,} session id(s) (e.g. {first!r}): the "
        "history table holds past sessions only. Leave history.path unset when the scored "
        "table is its own past."])


def mixed_times_error(without: str, with_t: str) -> DataError:
    """One table with complete ``started_at`` and the other without (paths of both)."""
    name_w, name_t = _name(without), _name(with_t)
    return DataError(without, [
        f"column '{TIME}': {name_w} has no complete {TIME} but {name_t} has one, so their "
        "sessions cannot be ordered together for the user_history feature. Give every session "
        f"of both tables a {TIME}, or drop it from both (then every history row counts as "
        "earlier)."])


def pair_note(history: str, timed: bool) -> str:
    """How a scored table and a history table are ordered together (the note)."""
    if timed:
        return (f"user_history: the history of a scored session is the earlier sessions (by "
                f"{TIME}) of {_name(history)} and of the scored table.")
    return (f"user_history: no {TIME} in either table, so sessions are ordered by row: "
            f"{_name(history)} first, then the scored table (days since the first session "
            "is 0).")


def _name(path: str) -> str:
    return Path(str(path).rstrip("/")).name or str(path)


def _read_past(path: Path, features: FeatureSet, chunk_size: int, what: str):
    """Users, times (None when not every session has one) and ratings of one table."""
    present = input_columns(path)
    check_past_columns(str(path), present, features, what)
    cols = ["user_id", "rating", *[c for c in ("session_id", TIME) if c in present]]
    users, times, ratings, ids = [], [], [], []
    timed, n = TIME in present, 0
    for chunk in iter_chunks(path, cols, chunk_size):
        ratings.append(_ratings(chunk, path, n))
        if "session_id" in chunk:
            ids.append(chunk["session_id"].astype(str).to_numpy())
        users.append(user_keys(chunk))
        t = _chunk_times(chunk, path, n) if timed else None
        timed = timed and t is not None
        times.append(t)
        n += len(chunk)
    return (np.concatenate(users) if users else np.empty(0, object),
            np.concatenate(times) if timed and times else None,
            np.concatenate(ratings) if ratings else np.empty(0), TIME in present,
            np.concatenate(ids) if ids else np.empty(0, object))


def read_history(path: str | Path, features: FeatureSet, chunk_size: int,
                 scored: str | Path | None = None) -> ChunkHistory:
    """Index the past of a scoring run, read chunk by chunk (three columns).

    The past is the scored table itself (``path`` alone), or the history table ``path`` and
    the scored table's own sessions (``scored``): a scored session's history holds the
    earlier sessions of both, exactly as if the two tables were one (history rows first).

    Args:
        path: The history table (``.parquet`` or ``.csv``; ``user_id``, ``rating``, optional
            ``started_at``), or the scored table when ``scored`` is None.
        features: The model's feature set.
        chunk_size: Rows per chunk.
        scored: The scored table, when it differs from ``path``.

    Raises:
        DataError: missing columns, bad ratings, unparseable times, or one of two tables
            with times and the other without (file and rows named).
    """
    path = Path(path)
    tables = [(path, "the history table" if scored is not None else "the scored table")]
    if scored is not None:
        tables.append((Path(scored), "the scored table"))
    read = [_read_past(p, features, chunk_size, what) for p, what in tables]
    timed = all(r[1] is not None for r in read)
    if len(read) == 2:
        both = np.intersect1d(read[0][4], read[1][4])
        if len(both):
            raise overlap_error(str(path), len(both), both[0])
    if len(read) == 2 and (read[0][1] is None) != (read[1][1] is None):
        with_t, without = (tables[0][0], tables[1][0]) if read[0][1] is not None else (
            tables[1][0], tables[0][0])
        raise mixed_times_error(str(without), str(with_t))
    users = np.concatenate([r[0] for r in read])
    ratings = np.concatenate([r[2] for r in read])
    times = (np.concatenate([r[1] for r in read]) if timed
             else np.arange(len(users), dtype=np.int64))
    index = HistoryIndex.from_arrays(users, times, ratings, timed)
    offset = len(read[0][0]) if scored is not None else 0
    if scored is None:
        note = time_note(timed, read[0][3])
    else:
        note = pair_note(str(path), timed)
    return ChunkHistory(index=index, features=features, offset=offset, notes=(note,),
                        path=Path(scored) if scored is not None else path)


def _chunk_times(chunk: pd.DataFrame, path: Path, first_row: int) -> np.ndarray | None:
    try:
        return session_times(chunk)
    except Exception as exc:
        raise DataError(str(path), [f"{exc} (rows {first_row + 1}-{first_row + len(chunk)})"]
                        ) from None
