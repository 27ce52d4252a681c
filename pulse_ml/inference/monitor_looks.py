"""The calendar of looks of ``pulse-ml monitor``: the ``looks`` setting and cutoff instants.

A look has a cutoff instant: the sessions that started before it are visible
(their ratings arrive with them). Day d of a case study is the UTC calendar day d counted from
the day of its first session (day 1); the look "on day d" has its cutoff at the end of that
day. Looks are, per case study, every day from day 1 to the day of its last session (default),
the given day numbers (``looks=[1, 7, 14, 21]``), or given dates (``looks=[2025-06-08, ...]``,
the same calendar for every case study; a date means the end of that day, a time of day the
instant itself). Sessions after the last look are left out.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

from pulse_ml.errors import PulseError
from pulse_ml.sessions.case_studies import CaseStudy

__all__ = ["DAY", "LookSpec", "iso", "look_cutoffs", "parse_looks"]

DAY = pd.Timedelta(days=1)


@dataclass(frozen=True)
class LookSpec:
    """Which looks to take: daily (both empty), day numbers, or cutoff instants.

    Attributes:
        days: 1-based day numbers of each case study (the look at the end of day d).
        cutoffs: Cutoff instants (UTC) shared by every case study.
        day_like: Per cutoff, whether it was given as a date (its day begins a day earlier).
    """

    days: tuple[int, ...] = ()
    cutoffs: tuple[pd.Timestamp, ...] = ()
    day_like: tuple[bool, ...] = ()

    @property
    def daily(self) -> bool:
        """True for the default calendar (every day of each case study)."""
        return not self.days and not self.cutoffs

    def describe(self) -> str:
        """The calendar in words (for logs and files)."""
        if self.days:
            return "days " + ", ".join(str(d) for d in self.days)
        if self.cutoffs:
            return "cutoffs " + ", ".join(iso(c) for c in self.cutoffs)
        return "daily"


def parse_looks(value: object) -> LookSpec:
    """Read the ``looks`` setting: ``daily``, increasing day numbers, or increasing dates.

    Args:
        value: ``None``/``"daily"``, or a list (or comma-separated string) of positive day
            numbers or of ISO 8601 dates/instants (no offset = UTC).

    Returns:
        The calendar.

    Raises:
        PulseError: a value that is neither, a mix of both, or values that do not increase.
    """
    if value is None or (isinstance(value, str) and value.strip().lower() in ("", "daily")):
        return LookSpec()
    items = value.split(",") if isinstance(value, str) else list(value)  # type: ignore[arg-type]
    items = [str(v).strip() for v in items if str(v).strip()]
    if not items:
        return LookSpec()
    hint = ("Use looks=daily, day numbers (looks=[1,7,14,21]) or dates "
            "(looks=[2025-06-08,2025-06-15]).")
    if all(v.isdigit() for v in items):
        days = tuple(int(v) for v in items)
        if days[0] < 1:
            raise PulseError(f"pulse-ml monitor: looks={_show(items)}: day numbers start at 1 "
                             f"(the case study's first day). {hint}")
        _increasing(days, items, hint)
        return LookSpec(days=days)
    cutoffs, day_like = [], []
    for v in items:
        if v.isdigit():
            raise PulseError(f"pulse-ml monitor: looks={_show(items)} mixes day numbers and "
                             f"dates. {hint}")
        try:
            ts = pd.Timestamp(v)
        except (TypeError, ValueError):
            raise PulseError(f"pulse-ml monitor: looks: {v!r} is neither a day number nor a "
                             f"date. {hint}") from None
        if ts is pd.NaT:
            raise PulseError(f"pulse-ml monitor: looks: {v!r} is not a date. {hint}")
        ts = ts.tz_localize("UTC") if ts.tzinfo is None else ts.tz_convert("UTC")
        date_only = len(v) <= 10
        cutoffs.append(ts + DAY if date_only else ts)
        day_like.append(date_only)
    _increasing(cutoffs, items, hint)
    return LookSpec(cutoffs=tuple(cutoffs), day_like=tuple(day_like))


def _show(items: Sequence[str]) -> str:
    return "[" + ",".join(items) + "]"


def _increasing(values: Sequence, items: Sequence[str], hint: str) -> None:
    for k in range(1, len(values)):
        if not values[k] > values[k - 1]:
            raise PulseError(f"pulse-ml monitor: looks={_show(items)} must be increasing, but "
                             f"{items[k]!r} comes after {items[k - 1]!r}. {hint}")


def iso(ts: pd.Timestamp) -> str:
    """An instant as ``YYYY-MM-DDTHH:MM:SSZ`` (UTC)."""
    return ts.tz_convert("UTC").strftime("%Y-%m-%dT%H:%M:%SZ")



def look_cutoffs(spec: LookSpec, first: pd.Timestamp, last: pd.Timestamp, now: pd.Timestamp,
                 name: str) -> pd.DatetimeIndex:
    """Cutoff instants of one case study's looks (refusing looks that begin after ``now``)."""
    if spec.daily:
        n_days = int((last - first) // DAY) + 1
        return pd.DatetimeIndex([first + (d + 1) * DAY for d in range(n_days)])
    if spec.days:
        cut = pd.DatetimeIndex([first + d * DAY for d in spec.days])
        begins = cut - DAY
        labels = [f"day {d}" for d in spec.days]
    else:
        cut = pd.DatetimeIndex(list(spec.cutoffs))
        begins = pd.DatetimeIndex([c - DAY if dl else c for c, dl in
                                   zip(spec.cutoffs, spec.day_like, strict=True)])
        labels = [iso(c) for c in spec.cutoffs]
    late = np.flatnonzero(begins > now)
    if late.size:
        shown = ", ".join(labels[i] for i in late[:3])
        raise PulseError(f"pulse-ml monitor: looks in the future for case study '{name}' "
                         f"({shown}; now is {iso(now)}): a look needs data that exists. Drop "
                         "them, and set horizon_days to the planned length of the test "
                         "instead (e.g. horizon_days=28).")
    return cut


@dataclass(frozen=True)
class MonitorData:
    """The arrays :func:`monitor_effect` takes, and the calendar they were built on.

    Attributes:
        arm: 1 for treatment, 0 for control, per kept session.
        labeled: Rated sessions.
        rating: Ratings (NaN when unlabeled).
        prediction: Honest predictions.
        look: 0-based first look at which each session is visible.
        users: Integer user codes (None when not clustered).
        group: Index of the case study in ``studies``.
        rows: Row of each kept session in ``table.frame``.
        studies: The monitored case studies.
        first_day: Per case study, UTC midnight of its first session's day (day 1).
        cutoffs: Per case study, the cutoff instant of each of its looks.
        dropped: Per case study, sessions left out because they started after the last look.
    """

    arm: np.ndarray
    labeled: np.ndarray
    rating: np.ndarray
    prediction: np.ndarray
    look: np.ndarray
    users: np.ndarray | None
    group: np.ndarray
    rows: np.ndarray
    studies: tuple[CaseStudy, ...]
    first_day: tuple[pd.Timestamp, ...]
    cutoffs: tuple[pd.DatetimeIndex, ...]
    dropped: tuple[int, ...]

    @property
    def n_looks(self) -> int:
        """Looks of the longest calendar (the others are padded, then trimmed)."""
        return max(len(c) for c in self.cutoffs)
