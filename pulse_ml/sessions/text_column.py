"""The rule of a ``text`` feature column: strings pass, missing = empty text, others refused.

One rule (:func:`text_cells`) for every place a text column is read: the table check
(:func:`pulse_ml.sessions.table.validate_frame`, chunk by chunk when streaming) and the
model's own input (:func:`pulse_ml.models.preprocess.feature_frame`, which also serves a
registered model's ``predict``). Missing values are no problem: they count as empty text and a
note says how many (:func:`missing_text_note`).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from pulse_ml.errors import PulseError
from pulse_ml.sessions.bad_rows import bad_values, where_rows

__all__ = ["TextColumnCheck", "check_text_column", "check_text_feature", "missing_text_note",
           "text_cells"]

_SHOW = 5


@dataclass(frozen=True)
class TextColumnCheck:
    """A text column made model-ready by :func:`check_text_column`.

    Attributes:
        column: Column name.
        texts: The texts (``str``), missing values replaced by ``""``; same index as the input.
        n_missing: How many values were missing (NaN/None) and count as empty text.
    """

    column: str
    texts: pd.Series
    n_missing: int

    @property
    def note(self) -> str | None:
        """A sentence for the user when values were missing, else None."""
        return missing_text_note(self.column, self.n_missing, len(self.texts))


def missing_text_note(column: str, n_missing: int, n_rows: int) -> str | None:
    """The note for ``n_missing`` of ``n_rows`` sessions without text (None when there are none).

    Shared by the whole-table check and the chunked one (summed over the chunks).
    """
    if not n_missing:
        return None
    return (f"column '{column}': {n_missing} of {n_rows} session(s) have no text; they count "
            "as empty text (no words).")


def text_cells(values: pd.Series) -> tuple[pd.Series, np.ndarray, np.ndarray]:
    """Which values of a text column are missing and which are not text.

    Args:
        values: The column.

    Returns:
        ``(series, missing, bad)``: the column as a Series (categoricals as objects), the mask
        of missing values (NaN/None: empty text) and the mask of values that are neither text
        nor missing (numbers, booleans, lists, bytes ...).
    """
    s = pd.Series(values)
    if isinstance(s.dtype, pd.CategoricalDtype):
        s = s.astype(object)
    missing = s.isna().to_numpy(dtype=bool)
    if pd.api.types.is_string_dtype(s.dtype) and s.dtype != object:
        bad = np.zeros(len(s), dtype=bool)
    elif s.dtype == object:
        kind = pd.api.types.infer_dtype(s, skipna=True)
        bad = (np.zeros(len(s), dtype=bool) if kind in ("string", "empty")
               else ~missing & ~s.map(lambda v: isinstance(v, str)).to_numpy(dtype=bool))
    else:  # numbers, booleans, datetimes: every non-missing value is not text
        bad = ~missing
    return s, missing, bad


def check_text_column(values: pd.Series, column: str,
                      ids: pd.Series | None = None) -> TextColumnCheck:
    """Check a text feature column: strings pass, missing values become ``""``, others refused.

    Args:
        values: The column.
        column: Its name (for messages).
        ids: Optional ``session_id`` per row, named in the message next to the row number.

    Returns:
        The texts and the number of missing values (see :class:`TextColumnCheck`).

    Raises:
        PulseError: if a value is neither text nor missing (numbers, lists, bytes ...), naming
            the column, the first offending rows and their types.
    """
    s, missing, bad = text_cells(values)
    if bad.any():
        idx = np.flatnonzero(bad)
        rows = []
        for i in idx[:_SHOW]:
            where = f"row {i + 1}"
            if ids is not None:
                where += f" (session_id={pd.Series(ids).iloc[i]})"
            rows.append(f"{where}: {type(s.iloc[i]).__name__} {s.iloc[i]!r:.40}")
        more = f" and {len(idx) - _SHOW} more" if len(idx) > _SHOW else ""
        raise PulseError(
            f"column '{column}' (a text feature): {len(idx)} value(s) are not text — "
            f"{'; '.join(rows)}{more}. A text column holds the session's messages as strings "
            "(missing = empty text); write the text itself, quote numbers in CSV files, or "
            "give the column another kind in the feature set.")
    return _checked(column, s, missing)


def check_text_feature(frame: pd.DataFrame, col: str, problems: list[str],
                       notes: list[str] | None, first_row: int = 0) -> pd.Series:
    """A ``text`` feature of a table: strings pass, missing = empty text (a note), others refused.

    The table's wording of :func:`check_text_column`'s rule: a value that is not text is one
    problem among the table's (types, values and rows named), not an error of its own.

    Args:
        frame: The table (or one chunk of it).
        col: The text column.
        problems: Where the problem sentence is appended.
        notes: Where the note on missing values is appended (None = no note).
        first_row: 0-based file position of ``frame``'s first row (chunked reads).

    Returns:
        The texts (``str``; missing values as ``""``), indexed from 0.
    """
    raw = frame[col].reset_index(drop=True)
    s, missing, bad = text_cells(raw)
    if bad.any():
        types = ", ".join(sorted({type(v).__name__ for v in raw[bad].iloc[:50]}))
        problems.append(f"column '{col}': values that are not text ({types}: "
                        f"{bad_values(raw, bad)}) in {where_rows(frame, bad, first_row)}. A text "
                        "feature holds the session's messages as strings (missing = empty "
                        "text): write the text itself, or give the column another kind in the "
                        "feature set.")
        return raw.where(~missing, "").astype(str)
    check = _checked(col, s, missing)
    if check.note and notes is not None:
        notes.append(check.note)
    return check.texts


def _checked(column: str, s: pd.Series, missing: np.ndarray) -> TextColumnCheck:
    """The texts of a column without bad values: missing ones as ``""``."""
    texts = s.where(~missing, "").astype(object).astype(str)
    return TextColumnCheck(column=str(column), texts=texts, n_missing=int(missing.sum()))
