"""Assemble the session table from normalized sessions and segment ratings."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd

from pulse_ml.errors import DataError
from pulse_ml.extract.gitcmd import GIT_FLAGS, git_flag_frame
from pulse_ml.extract.sessions import RawSession

GIT_COLUMNS = [f"git_{f}" for f in GIT_FLAGS]
TEXT_MAX_CHARS = 20_000  # user_text per session (the head and tail are kept beyond it)
BASE_COLUMNS = ["session_id", "user_id", "case_study", "condition", "rating", "n_ratings",
                "user_message_count", *GIT_COLUMNS]


def read_ratings(path: str | Path) -> pd.DataFrame:
    """Read segment ratings (CSV or Parquet with ``session_id``, ``segment``, ``rating``).

    Raises:
        DataError: missing file or column, or a rating outside [1, 5].
    """
    path = Path(path)
    if not path.is_file():
        raise DataError(str(path), ["no such ratings file. Pass `ratings=<csv|parquet>` with "
                                    "columns session_id, segment, rating, or `ratings=null`."])
    try:
        if path.suffix.lower() in (".parquet", ".pq"):
            frame = pd.read_parquet(path)
        else:
            frame = pd.read_csv(path, dtype={"session_id": str})
    except Exception as exc:  # noqa: BLE001 - any parser failure is the user's file
        raise DataError(str(path), [f"cannot be read: {str(exc)[:200]}"]) from None
    missing = [c for c in ("session_id", "rating") if c not in frame.columns]
    if missing:
        raise DataError(str(path), [f"missing column(s) {', '.join(missing)}; expected "
                                    f"session_id, segment, rating (found "
                                    f"{', '.join(map(str, frame.columns))})."])
    if "segment" not in frame.columns:
        frame["segment"] = np.arange(len(frame))
    rating = pd.to_numeric(frame["rating"], errors="coerce")
    bad = frame.index[rating.notna() & ~rating.between(1, 5) | (rating.isna()
                                                              & frame["rating"].notna())]
    if len(bad):
        rows = ", ".join(str(i + 2) for i in bad[:5])
        raise DataError(str(path), [f"column rating: values must be numbers in [1, 5]; bad "
                                    f"rows (file line) {rows}. Fix or delete those rows."])
    out = frame[["session_id", "segment"]].copy()
    out["session_id"] = out["session_id"].astype(str)
    out["rating"] = rating.astype(float)
    return out.dropna(subset=["rating"])


def user_texts(sessions: list[RawSession],
               max_chars: int = TEXT_MAX_CHARS) -> tuple[list[str], str | None]:
    """The ``user_text`` column: each session's user messages joined by newlines, capped.

    A text longer than ``max_chars`` keeps its first and last ``max_chars // 2`` characters
    (the opening request and how the session ended) around a line holding ``…``.

    Args:
        sessions: Normalized sessions.
        max_chars: Cap on the characters kept per session.

    Returns:
        ``(texts, note)``: the texts and a sentence saying how many were capped (None if none).
    """
    texts = [s.user_text for s in sessions]
    head = max_chars // 2
    tail = max_chars - head
    capped = 0
    for i, text in enumerate(texts):
        if len(text) > max_chars:
            texts[i] = text[:head] + "\n…\n" + text[len(text) - tail:]
            capped += 1
    note = None
    if capped:
        note = (f"user_text: {capped} of {len(texts)} session(s) have more than {max_chars} "
                f"characters of user messages; kept their first {head} and last {tail} "
                "characters (raise text_max_chars to keep more).")
    return texts, note


def assemble(sessions: list[RawSession], ratings: pd.DataFrame | None, case_study: str,
             condition: str, text_max_chars: int = TEXT_MAX_CHARS) -> pd.DataFrame:
    """Build the session table (without LLM features).

    Args:
        sessions: Normalized sessions (unique ids).
        ratings: Segment ratings (``session_id``, ``segment``, ``rating``) or None.
        case_study: Default case study for sessions whose source has none.
        condition: Default condition for sessions whose source has none.

        text_max_chars: Cap on each session's ``user_text`` (see :func:`user_texts`).

    Returns:
        One row per session with the contract's columns, ``n_segments``, ``user_text``,
        ``transcript``, ``feedback`` when any session has one and ``started_at`` (UTC, the
        first event's timestamp; empty for sessions without timestamps) when any has one.
        Segment ratings win over inline ratings. ``frame.attrs["notes"]`` lists what the user
        should know (capped texts).
    """
    ids = [s.session_id for s in sessions]
    frame = pd.DataFrame({
        "session_id": ids,
        "user_id": [s.user_id or "" for s in sessions],
        "case_study": [s.case_study if s.case_study is not None else case_study
                       for s in sessions],
        "condition": [s.condition if s.condition is not None else condition for s in sessions],
        "user_message_count": np.fromiter((s.user_message_count for s in sessions),
                                          dtype=np.int64, count=len(sessions)),
        "n_segments": np.fromiter((s.n_segments for s in sessions), dtype=np.int64,
                                  count=len(sessions)),
    })
    inline = pd.Series([s.rating for s in sessions], index=ids, dtype=float)
    if ratings is not None and len(ratings):
        agg = ratings.groupby("session_id")["rating"].agg(["mean", "count"])
        frame["rating"] = frame["session_id"].map(agg["mean"]).astype(float)
        frame["n_ratings"] = frame["session_id"].map(agg["count"]).fillna(0).astype(np.int64)
    else:
        frame["rating"] = np.nan
        frame["n_ratings"] = np.int64(0)
    use_inline = frame["rating"].isna().to_numpy() & inline.notna().to_numpy()
    frame.loc[use_inline, "rating"] = inline.to_numpy()[use_inline]
    frame.loc[use_inline, "n_ratings"] = 1
    frame["n_ratings"] = frame["n_ratings"].astype(np.int64)

    lengths = np.fromiter((len(s.commands) for s in sessions), dtype=np.int64,
                          count=len(sessions))
    cmd_sessions = pd.Series(np.repeat(np.asarray(ids, dtype=object), lengths))
    cmds = pd.Series([c for s in sessions for c in s.commands], dtype=object)
    flags = git_flag_frame(cmd_sessions, cmds)
    for col in GIT_COLUMNS:
        frame[col] = frame["session_id"].map(flags[col]).fillna(0).astype(np.int64)
    if any(s.feedback for s in sessions):
        frame["feedback"] = [s.feedback or "" for s in sessions]
    if any(s.started_at is not None for s in sessions):  # event streams with timestamps
        frame["started_at"] = pd.to_datetime(
            pd.Series([s.started_at for s in sessions], index=frame.index, dtype=object),
            utc=True)
    texts, note = user_texts(sessions, text_max_chars)
    frame["user_text"] = pd.Series(texts, index=frame.index, dtype=object)
    frame["transcript"] = [json.dumps(s.transcript(), ensure_ascii=False) for s in sessions]
    extra = [c for c in frame.columns if c not in BASE_COLUMNS]
    out = frame[BASE_COLUMNS + extra]
    out.attrs["notes"] = [note] if note else []
    return out


def ratings_outside_sessions(ratings: pd.DataFrame, frame: pd.DataFrame) -> list[str]:
    """Session ids that have ratings but no session (reported, not fatal)."""
    known = set(frame["session_id"])
    return sorted({sid for sid in ratings["session_id"].unique() if sid not in known})
