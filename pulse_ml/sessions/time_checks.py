"""Session times for monitoring: present, not in the future, none far before the others.

Monitoring needs every monitored session's ``started_at`` (:func:`require_started_at`: present,
not in the future, not going back in time as integer ids go up).

One session dated 1970-01-01 among sessions of last month made ``monitor`` take 20,000+ daily
looks (and a sequence target of 0 labels) without a word. Before any look is computed:

* a monitored session that starts far before the others of its case study is refused with its
  rows named: "far" means more than :data:`FAR_FACTOR` times the middle half of the case
  study's start times (its interquartile range, at least one day) before their first quartile
  (a 21-day test: > ~100 days before; a year-long one: years before);
* daily looks are capped at :data:`MAX_LOOKS` per case study (~2.7 years of days): a longer
  calendar is refused with its span, and how to choose fewer looks.
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np
import pandas as pd

from pulse_ml.errors import DataError, PulseError
from pulse_ml.sessions.bad_rows import where_rows
from pulse_ml.sessions.table import TIME_COLUMN, TIME_FIX, SessionTable, study_arms

MAX_LOOKS = 1_000
FAR_FACTOR = 10
_DAY_US = 86_400_000_000


def require_started_at(table: SessionTable, case_studies: Iterable[str],
                       now: pd.Timestamp | None = None, check_id_order: bool = True) -> None:
    """Check that every session of the given case studies has a usable ``started_at``.

    Monitoring (``pulse-ml monitor``) needs the start time of every session it monitors:
    present, not in the future, and (when the session ids are integers, i.e. a sequence)
    not going back in time as the ids go up.

    Args:
        table: A validated table (``started_at`` already parsed by :func:`validate_frame`).
        case_studies: Names of the monitored case studies (sessions of their two arms are
            checked).
        now: The present (default: the clock, UTC).
        check_id_order: Check the order of integer session ids against ``started_at``.

    Raises:
        DataError: naming the column, the first offending rows and the fix.
    """
    names = list(case_studies)
    frame = table.frame
    listed = ", ".join(repr(n) for n in names)
    if TIME_COLUMN not in frame.columns:
        raise DataError(table.path, [
            f"column '{TIME_COLUMN}': missing. Monitoring needs when each session started (ISO "
            f"8601 or epoch seconds) for the case studies it monitors ({listed}). Add the "
            "column: the simulator writes it, and extract writes it for OpenHands event "
            "streams (their first event's timestamp); chats and records without timestamps "
            "have none, so fill it from your own logs."])
    monitored = study_arms(frame, [table.case_study(n) for n in names])[0] >= 0
    times = frame[TIME_COLUMN]
    problems = []
    missing = monitored & times.isna().to_numpy()
    if missing.any():
        studies = ", ".join(repr(s) for s in pd.unique(frame.loc[missing, "case_study"]))
        problems.append(f"column '{TIME_COLUMN}': empty values in monitored case study "
                        f"{studies} in {where_rows(frame, missing)}. Every monitored session needs "
                        f"its start time. {TIME_FIX}")
    now = pd.Timestamp.now(tz="UTC") if now is None else pd.Timestamp(now)
    now = now.tz_localize("UTC") if now.tzinfo is None else now.tz_convert("UTC")
    future = monitored & (times > now).fillna(False).to_numpy()
    if future.any():
        problems.append(f"column '{TIME_COLUMN}': start times in the future (after "
                        f"{now.isoformat(timespec='seconds')}) in {where_rows(frame, future)}. Fix "
                        "the dates or their time zone (values without an offset are read as "
                        "UTC).")
    if check_id_order and monitored.any() and not missing.any():
        ids = frame["session_id"].to_numpy()[monitored].astype(str)
        if np.char.isdigit(ids).all() and all(len(i) <= 18 for i in ids):
            rows = np.flatnonzero(monitored)
            order = np.argsort(ids.astype(np.int64), kind="stable")
            t = times.to_numpy()[rows[order]]
            back = np.zeros(len(t), dtype=bool)
            back[1:] = t[1:] < t[:-1]  # earlier than the session with the id before it
            if back.any():
                mask = np.zeros(len(frame), dtype=bool)
                mask[rows[order][back]] = True
                problems.append(f"column '{TIME_COLUMN}': the session ids are integers (a "
                                "sequence) but the start times go back in time as the ids go "
                                f"up in {where_rows(frame, mask)} (each starts before the "
                                "session with the id before it). Fix the dates, or set "
                                "check_id_order=false if the ids are not given in time order.")
    if problems:
        raise DataError(table.path, problems)


def require_plausible_times(table: SessionTable, case_studies: Iterable[str],
                            now: pd.Timestamp | None = None, check_id_order: bool = True,
                            daily: bool = True) -> None:
    """:func:`require_started_at`, then the two checks above.

    Args:
        table: A validated table.
        case_studies: Names of the monitored case studies.
        now: The present (default: the clock, UTC).
        check_id_order: Check the order of integer session ids against ``started_at``.
        daily: Whether the looks are daily (the cap on their number applies).

    Raises:
        DataError: sessions far before the others, rows named.
        PulseError: more than :data:`MAX_LOOKS` daily looks.
    """
    names = list(case_studies)
    require_started_at(table, names, now, check_id_order)
    frame = table.frame
    micros = pd.DatetimeIndex(frame[TIME_COLUMN]).as_unit("us").asi8
    group = study_arms(frame, [table.case_study(n) for n in names])[0]
    problems, spans = [], []
    for g, name in enumerate(names):
        mask = group == g
        if not mask.any():
            continue
        t = micros[mask]
        q1, q3 = np.percentile(t, [25, 75])
        limit = q1 - FAR_FACTOR * max(q3 - q1, _DAY_US)
        early = mask & (micros < limit)
        if early.any():
            first_quartile = pd.Timestamp(int(q1), unit="us", tz="UTC").date().isoformat()
            problems.append(
                f"column '{TIME_COLUMN}': case study '{name}' has sessions that start far "
                f"before the others (before {pd.Timestamp(int(limit), unit='us').date()}, "
                f"while a quarter of them start by {first_quartile}) in "
                f"{where_rows(frame, early)}. A date such as 1970-01-01 is usually a missing "
                "time written as 0: fix or drop these rows.")
            continue
        days = (int(t.max()) - int(t.min()) // _DAY_US * _DAY_US) // _DAY_US + 1
        if daily and days > MAX_LOOKS:
            spans.append(f"'{name}' spans {days:,} days")
    if problems:
        raise DataError(table.path, problems)
    if spans:
        raise PulseError(f"{table.path}: {'; '.join(spans)}: more than {MAX_LOOKS:,} daily looks "
                         "(one per day from its first session). Check started_at, or choose "
                         "the looks (looks=[7,14,21] or dates).")
