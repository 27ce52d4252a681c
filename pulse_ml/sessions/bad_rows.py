"""Naming the offending rows and values: one wording of bad rows for every table's checks.

The session table (:mod:`pulse_ml.sessions.table`), its feature columns
(:mod:`pulse_ml.sessions.column_checks`), the pairs of ``agreement`` and the predictor columns
all describe a problem the same way: the column, the first offending values (each cut to ~80
characters), the number of rows and the first few by 1-based file row and session id.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from pulse_ml.env.faults import ECHO_LIMIT, shorten

__all__ = ["bad_values", "numeric_column", "where_rows"]

_SHOW = 5


def where_rows(frame: pd.DataFrame, mask: np.ndarray | pd.Series, first_row: int = 0,
               id_column: str = "session_id") -> str:
    """Describe the first offending rows: 1-based file row number and ``id_column``.

    ``first_row`` is the 0-based file position of ``frame``'s first row (chunked reads).
    """
    idx = np.flatnonzero(np.asarray(mask))
    parts = []
    for i in idx[:_SHOW]:
        sid = frame[id_column].iloc[i] if id_column in frame else None
        part = f"row {first_row + i + 1}"
        if sid is not None and not pd.isna(sid):
            part += f" ({id_column}={shorten(sid)})"
        parts.append(part)
    more = f" and {len(idx) - _SHOW} more" if len(idx) > _SHOW else ""
    return f"{len(idx)} row(s): {', '.join(parts)}{more}"


def bad_values(series: pd.Series, mask: np.ndarray | pd.Series) -> str:
    """The first distinct offending values, each cut to ~80 characters."""
    vals = pd.unique(series[np.asarray(mask)].astype(str))[:_SHOW]
    return ", ".join(repr(v) if len(v) <= ECHO_LIMIT else f"{v[:ECHO_LIMIT - 1]!r}… "
                     f"({len(v)} characters)" for v in vals)


def numeric_column(frame: pd.DataFrame, col: str, problems: list[str],
                   first_row: int = 0, fix: str = "Use numbers only.") -> pd.Series:
    """A column as floats; non-numeric values (blank strings are missing) become a problem.

    Args:
        frame: The table.
        col: The column.
        problems: Where the problem sentence is appended (with the rows and values named).
        first_row: 0-based file position of ``frame``'s first row (chunked reads).
        fix: The last sentence of the problem (what to do).

    Returns:
        The column as float, NaN where missing or not a number.
    """
    raw = frame[col]
    num = pd.to_numeric(raw, errors="coerce") if raw.dtype != bool else raw.astype(float)
    bad = np.array(num.isna() & raw.notna(), dtype=bool)  # a writable copy
    if bad.any():  # blank strings count as missing, not as non-numeric (checked on few cells)
        bad[bad] = (raw[bad].astype(str).str.strip() != "").to_numpy()
    if bad.any():
        problems.append(f"column '{col}': non-numeric values ({bad_values(raw, bad)}) in "
                        f"{where_rows(frame, bad, first_row)}. {fix}")
    return num.astype(float)
