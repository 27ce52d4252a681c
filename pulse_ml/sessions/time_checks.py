"""Plausible session times for monitoring: no session far before the others, a bounded calendar.

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
from pulse_ml.sessions.table import (
    TIME_COLUMN,
    SessionTable,
    require_started_at,
    study_arms,
    where_rows,
)

MAX_LOOKS = 1_000
FAR_FACTOR = 10
_DAY_US = 86_400_000_000


def require_plausible_times(table: SessionTable, case_studies: Iterable[str],
                            now: pd.Timestamp | None = None, check_id_order: bool = True,
                            daily: bool = True) -> None:
    """:func:`~pulse_ml.sessions.table.require_started_at`, then the two checks above.

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
