"""Which sessions a model is trained on: leave out case studies, or sessions from a date on.

A model trained on sessions before an A/B test (or without its case study) predicts the test's
sessions without having seen any of their ratings, which is what anytime-valid monitoring
needs (``pulse-ml monitor``); out-of-fold predictions are the other honest route.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

import numpy as np
import pandas as pd

from pulse_ml.errors import DataError, PulseError
from pulse_ml.sessions.bad_rows import where_rows as _where
from pulse_ml.sessions.table import TIME_COLUMN, SessionTable

ALL = "all"


@dataclass(frozen=True)
class TrainingSelection:
    """Sessions to leave out of training.

    Attributes:
        exclude_case_studies: Case-study names to leave out; ``("all",)`` = every session in a
            case study (train on sessions in no test).
        trained_before: Keep only sessions that started before this instant (UTC).
    """

    exclude_case_studies: tuple[str, ...] = ()
    trained_before: pd.Timestamp | None = None

    @property
    def active(self) -> bool:
        """Whether anything is left out."""
        return bool(self.exclude_case_studies) or self.trained_before is not None

    def describe(self) -> str:
        """The selection in words (for messages and run tags)."""
        parts = []
        if self.exclude_case_studies:
            parts.append("without case studies " + ", ".join(self.exclude_case_studies))
        if self.trained_before is not None:
            parts.append(f"started before {self.trained_before.isoformat()}")
        return "; ".join(parts) or "all sessions"


def parse_trained_before(value: object, verb: str = "train") -> pd.Timestamp | None:
    """Read ``trained_before``: ``YYYY-MM-DD`` (midnight UTC) or an ISO 8601 instant.

    Raises:
        PulseError: naming the key when the value is not a date.
    """
    if value is None or str(value).strip().lower() in ("", "none", "null"):
        return None
    try:
        ts = pd.Timestamp(str(value).strip())
    except (TypeError, ValueError):
        ts = None
    if ts is None or ts is pd.NaT:
        raise PulseError(f"pulse-ml {verb}: trained_before={value!r} is not a date; use "
                         "YYYY-MM-DD (midnight UTC) or an ISO 8601 time, e.g. "
                         "trained_before=2025-06-02.")
    return ts.tz_localize("UTC") if ts.tzinfo is None else ts.tz_convert("UTC")


def select_training(table: SessionTable, selection: TrainingSelection) -> SessionTable:
    """The table without the left-out sessions.

    Args:
        table: A validated session table.
        selection: What to leave out.

    Returns:
        The same table restricted to the kept rows (index reset).

    Raises:
        PulseError: an unknown case-study name, or no labeled session left.
        DataError: ``trained_before`` on a table whose labeled sessions lack ``started_at``.
    """
    if not selection.active:
        return table
    frame = table.frame
    keep = np.ones(len(frame), dtype=bool)
    names: Sequence[str] = selection.exclude_case_studies
    if names:
        present = sorted(set(frame["case_study"]) - {""})
        if ALL in names:
            keep &= (frame["case_study"] == "").to_numpy()
        else:
            absent = [n for n in names if n not in present]
            if absent:
                raise PulseError(f"pulse-ml train: exclude_case_studies: "
                                 f"{', '.join(map(repr, absent))} not in {table.path} "
                                 f"(present: {', '.join(present) or 'none'}).")
            keep &= ~frame["case_study"].isin(list(names)).to_numpy()
    if selection.trained_before is not None:
        if TIME_COLUMN not in frame.columns:
            raise DataError(table.path, [
                f"column '{TIME_COLUMN}': missing, and trained_before needs when each session "
                "started. Add it (ISO 8601 or epoch seconds) or drop trained_before."])
        times = frame[TIME_COLUMN]
        missing = table.labeled & keep & times.isna().to_numpy()
        if missing.any():
            raise DataError(table.path, [
                f"column '{TIME_COLUMN}': empty values for labeled sessions in "
                f"{_where(frame, missing)}; trained_before cannot tell whether they came "
                "before the date. Fill them, or leave them out with exclude_case_studies."])
        keep &= (times < selection.trained_before).fillna(False).to_numpy()
    if not (table.labeled & keep).any():
        raise PulseError(f"pulse-ml train: no labeled session is left to train on "
                         f"({selection.describe()}). Choose a later trained_before or exclude "
                         "fewer case studies.")
    return replace(table, frame=frame.loc[keep].reset_index(drop=True))
