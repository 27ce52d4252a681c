"""The ``user_history`` feature kind: what a user's earlier sessions say about the next one.

For each session: the mean of the same user's ratings strictly before it (``mean``), how many
such ratings (``n_ratings``) and earlier sessions (``n_sessions``) there are, the days since
the user's first session (``days``) and a 0/1 flag ``missing`` when fewer than ``min_prior``
earlier ratings exist (``mean`` is then 0: a flag, never an imputed rating). With
``window_days`` only ratings of the last ``window_days`` days count.

"Before" is by ``started_at`` when every session has one (sessions at the same instant do not
see each other), else by the table's row order. A session's own rating, or a later one, never
enters its features, so the features are known alike for rated and unrated sessions (honest
for prediction-powered inference: Angelopoulos et al. 2023 only ask that the predictor does
not depend on the rating it predicts). With folds grouped by user every session's history lies
in its own fold, so computing the columns once on the whole table equals computing them inside
each fold (tested).

:class:`HistoryIndex` holds the past in four numeric arrays per rated/unrated session (sorted
by user and time, with running sums), so chunked scoring asks it about each chunk without
keeping the past table in memory.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from pulse_ml.errors import PulseError

KIND = "user_history"
PARTS = ("mean", "n_ratings", "n_sessions", "days", "missing")
HISTORY_DEFAULTS: Mapping[str, Any] = {"window_days": None, "min_prior": 1}
INPUTS = ("user_id", "rating")  # table columns the kind reads (started_at when present)
TIME = "started_at"
_DAY_US = 86_400_000_000

__all__ = ["HISTORY_DEFAULTS", "KIND", "PARTS", "HistoryIndex", "derived_columns",
           "history_frame", "history_options", "order_note", "parse_times", "session_times",
           "time_note", "to_micros", "unparseable_message", "user_keys", "with_history"]


def derived_columns(name: str) -> list[str]:
    """The model columns of a ``user_history`` feature called ``name`` (``name__mean``, ...)."""
    return [f"{name}__{part}" for part in PARTS]


def history_options(set_name: str, col: str, raw: Mapping[str, Any]) -> dict[str, Any]:
    """Check the options of a ``user_history`` feature (``window_days``, ``min_prior``).

    Raises:
        PulseError: an unknown option or a value out of range, naming the fix.
    """
    where = f"feature set '{set_name}', feature '{col}' (kind user_history)"
    unknown = sorted(set(raw) - set(HISTORY_DEFAULTS) - {"kind"})
    if unknown:
        raise PulseError(f"{where}: unknown option(s) {', '.join(unknown)}. Use window_days "
                         "(days of earlier ratings that count; null = all) and min_prior "
                         "(earlier ratings needed for a mean; default 1).")
    out = dict(HISTORY_DEFAULTS)
    window = raw.get("window_days")
    if window is not None:
        try:
            window = float(window)
        except (TypeError, ValueError):
            window = float("nan")
        if not np.isfinite(window) or window <= 0:
            raise PulseError(f"{where}: window_days={raw.get('window_days')!r} must be a number "
                             "of days > 0, or null for all earlier ratings.")
        out["window_days"] = window
    prior = raw.get("min_prior", 1)
    if isinstance(prior, bool) or not isinstance(prior, (int, np.integer)) or prior < 1:
        raise PulseError(f"{where}: min_prior={prior!r} must be an integer >= 1.")
    out["min_prior"] = int(prior)
    return out


def parse_times(raw: pd.Series) -> pd.Series:
    """``started_at`` values as UTC datetimes (NaT when missing or unparseable).

    Datetimes stay as they are (naive ones count as UTC), numbers are epoch seconds, text is
    ISO 8601. Spark scoring parses its text and numbers with this very function.
    """
    if isinstance(raw.dtype, pd.DatetimeTZDtype) or pd.api.types.is_datetime64_dtype(raw):
        return raw
    if pd.api.types.is_numeric_dtype(raw):
        return pd.to_datetime(raw, unit="s", utc=True, errors="coerce")
    return pd.to_datetime(raw.astype("string"), utc=True, format="ISO8601", errors="coerce")


def unparseable_message(n: int, first: object) -> str:
    """The message for ``n`` unparseable ``started_at`` values (``first`` is one of them)."""
    return (f"column '{TIME}': unparseable values in {n} row(s) (first: {first!r}); the "
            "user_history feature orders sessions by it. Use ISO 8601 or epoch seconds.")


def to_micros(col: pd.Series) -> np.ndarray:
    """Parsed times (:func:`parse_times`, no NaT) as int64 microseconds since the epoch (UTC)."""
    if isinstance(col.dtype, pd.DatetimeTZDtype):
        col = col.dt.tz_convert("UTC").dt.tz_localize(None)
    return col.to_numpy(dtype="datetime64[us]").astype(np.int64)


def session_times(frame: pd.DataFrame) -> np.ndarray | None:
    """``started_at`` as int64 microseconds, or None when absent or not complete.

    Raises:
        PulseError: unparseable values (a validated table has none).
    """
    if TIME not in frame.columns:
        return None
    raw = frame[TIME]
    col = parse_times(raw)
    bad = col.isna() & raw.notna()
    if bad.any():
        raise PulseError(unparseable_message(int(bad.sum()), raw[bad].iloc[0]))
    if col.isna().any():
        return None
    return to_micros(col)


def user_keys(frame: pd.DataFrame) -> np.ndarray:
    """Each session's user as text; no user = its own user ``session:<id>`` (as the table)."""
    user = frame["user_id"].astype("string")
    missing = user.isna() | (user == "")
    if missing.any():
        sid = (frame["session_id"].astype("string") if "session_id" in frame
               else pd.Series(frame.index.astype(str), index=frame.index, dtype="string"))
        user = user.where(~missing, "session:" + sid)
    return user.astype(str).to_numpy()


def order_note(frame: pd.DataFrame) -> str:
    """The one sentence saying how sessions are ordered for the history (for the notes)."""
    return time_note(session_times(frame) is not None, TIME in frame.columns)


def time_note(timed: bool, has_column: bool) -> str:
    """:func:`order_note` from whether every session has a time and the column exists."""
    if timed:
        return ("user_history: sessions are ordered by started_at (sessions at the same instant "
                "do not count as earlier).")
    why = "has sessions without a started_at" if has_column else "has no started_at column"
    return (f"user_history: the table {why}, so sessions are ordered by the table's row order "
            "(days since the first session is 0).")


@dataclass(frozen=True)
class HistoryIndex:
    """The past sessions, sorted by (user, time), with running sums for fast queries.

    Attributes:
        users: Sorted distinct user ids of the past.
        keys: Per past session (sorted): ``user_code * (len(times) + 1) + time rank``.
        times: Sorted distinct times (microseconds, or row positions) of the past.
        first: Per user code, the user's first time.
        starts: Per user code, the position of the user's first session in ``keys``.
        cum_sum: Each user's running sum of ratings (0 for unrated), inclusive, reset per user.
        cum_cnt: Running count of ratings with a leading 0.
        timed: True when times are microseconds (``days`` is then computed).
    """

    users: pd.Index
    keys: np.ndarray
    times: np.ndarray
    first: np.ndarray
    starts: np.ndarray
    cum_sum: np.ndarray
    cum_cnt: np.ndarray
    timed: bool

    @classmethod
    def from_arrays(cls, users: np.ndarray, times: np.ndarray, ratings: np.ndarray,
                    timed: bool) -> HistoryIndex:
        """Index past sessions given as user ids, int64 times and ratings (NaN = unrated)."""
        codes, uniques = pd.factorize(pd.Series(users, dtype=object).astype(str), sort=True)
        grid = np.unique(times)
        rank = np.searchsorted(grid, times)
        keys = codes.astype(np.int64) * (len(grid) + 1) + rank
        order = np.argsort(keys, kind="stable")
        keys = keys[order]
        rated = ~np.isnan(ratings[order])
        sorted_codes = codes[order]
        # within-user running sums (reset per user): a user's numbers never depend on the
        # users sorted before it, so any subset of whole users gives the same bits
        cum_sum = pd.Series(np.where(rated, ratings[order], 0.0)).groupby(
            sorted_codes).cumsum().to_numpy()
        cum_cnt = np.concatenate([[0], np.cumsum(rated)])
        starts = np.searchsorted(sorted_codes, np.arange(len(uniques)), side="left")
        first = times[order][starts] if len(order) else np.empty(0, np.int64)
        return cls(pd.Index(uniques), keys, grid, first, starts, cum_sum, cum_cnt, timed)

    @classmethod
    def from_frame(cls, frame: pd.DataFrame) -> HistoryIndex:
        """Index a session table (``user_id``, ``rating``, optional ``started_at``)."""
        times = session_times(frame)
        timed = times is not None
        if times is None:
            times = np.arange(len(frame), dtype=np.int64)
        return cls.from_arrays(user_keys(frame), times,
                               frame["rating"].to_numpy(dtype=float), timed)

    def query(self, users: np.ndarray, times: np.ndarray | None, name: str,
              window_days: float | None = None, min_prior: int = 1) -> pd.DataFrame:
        """The history columns of sessions (``derived_columns(name)``), from this past only.

        Args:
            users: User id per session.
            times: int64 time per session on this index's scale (None: after all the past).
            name: The feature's name (prefix of the columns).
            window_days: Only ratings within this many days before the session count.
            min_prior: Fewer earlier ratings than this: ``missing`` = 1 and ``mean`` = 0.
        """
        n = len(users)
        if len(self.keys) == 0:  # no past at all: every session is flagged
            users, times = np.array(["\0"] * n, dtype=object), None
            return HistoryIndex.from_arrays(np.array(["\0"]), np.zeros(1, np.int64),
                                            np.array([np.nan]), False).query(
                users, None, name, window_days, min_prior)
        code = self.users.get_indexer(pd.Series(users, dtype=object).astype(str))
        known = code >= 0
        c = np.where(known, code, 0).astype(np.int64)
        if times is None:
            times = np.full(n, np.iinfo(np.int64).max // 4, dtype=np.int64)
        span = len(self.times) + 1
        hi = np.searchsorted(self.keys, c * span + np.searchsorted(self.times, times), "left")
        start = self.starts[c] if len(self.starts) else np.zeros(n, np.int64)
        lo = start
        if window_days is not None and self.timed:
            since = times - np.int64(round(window_days * _DAY_US))
            lo = np.maximum(start, np.searchsorted(
                self.keys, c * span + np.searchsorted(self.times, since), "left"))
        lo = np.minimum(lo, hi)
        n_sessions = np.where(known, hi - start, 0)
        n_ratings = np.where(known, self.cum_cnt[hi] - self.cum_cnt[lo], 0)
        upto = np.where(hi > start, self.cum_sum[np.maximum(hi - 1, 0)], 0.0)
        below = np.where(lo > start, self.cum_sum[np.maximum(lo - 1, 0)], 0.0)
        total = np.where(known, upto - below, 0.0)
        missing = n_ratings < min_prior
        mean = np.where(missing, 0.0, total / np.maximum(n_ratings, 1))
        days = np.zeros(n)
        if self.timed and len(self.first):
            seen = known & (n_sessions > 0)
            days = np.where(seen, (times - self.first[c]) / _DAY_US, 0.0)
        cols = derived_columns(name)
        return pd.DataFrame({cols[0]: mean, cols[1]: n_ratings.astype(float),
                             cols[2]: n_sessions.astype(float), cols[3]: days,
                             cols[4]: missing.astype(float)})


def history_frame(frame: pd.DataFrame, name: str, options: Mapping[str, Any]) -> pd.DataFrame:
    """The history columns of every session of ``frame``, from ``frame`` itself.

    Raises:
        PulseError: when ``user_id`` or ``rating`` is missing.
    """
    absent = [c for c in INPUTS if c not in frame.columns]
    if absent:
        raise PulseError(f"feature '{name}' (kind user_history) needs column(s) "
                         f"{', '.join(absent)}: each session's user and its rating (empty when "
                         "unrated). Add them to the table.")
    index = HistoryIndex.from_frame(frame)
    times = session_times(frame)
    if times is None:
        times = np.arange(len(frame), dtype=np.int64)
    out = index.query(user_keys(frame), times, name,
                      options.get("window_days"), int(options.get("min_prior", 1)))
    out.index = frame.index
    return out


def with_history(frame: pd.DataFrame, specs: Sequence) -> tuple[pd.DataFrame, list[str]]:
    """The table with the columns of its ``user_history`` features (``specs``) and notes.

    The notes say once how sessions are ordered, and that the feature is constant when no
    user has a second session (not an error: the model then learns nothing from it).
    """
    parts = [history_frame(frame, spec.name, spec.options) for spec in specs]
    notes = [order_note(frame)]
    if frame["user_id"].nunique() == len(frame):
        notes.append(f"user_history: every user has one session in {len(frame):,} sessions, so "
                     f"feature '{specs[0].name}' is constant (no earlier sessions); it helps "
                     "once users return.")
    return pd.concat([frame, *parts], axis=1), notes
