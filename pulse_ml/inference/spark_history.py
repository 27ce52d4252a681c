"""The ``user_history`` columns on Spark: window functions over each user's sessions.

The rule is the one of :mod:`pulse_ml.sessions.user_history` (and of local chunked scoring,
:mod:`pulse_ml.inference.history_scoring`): the past of a scored session is the earlier
sessions of the same user in the history table (``history.path``) and in the scored table, as
if the two were one table with the history rows first. "Earlier" is by ``started_at`` when
every session of both tables has one (sessions at the same instant do not see each other: a
range window ending one microsecond before), else by row order (history table first, then
each table's files and rows in order: Parquet's ``_metadata.file_path`` and ``row_index``).
``window_days`` bounds the ratings that count, ``min_prior`` sets the ``missing`` flag.

Both tables are unioned (three columns from the history table), one window pass gives the
five columns of every ``user_history`` feature, and the scored rows keep them: the per-batch
model UDF then reads them and never needs a user's past.
"""

from __future__ import annotations

from dataclasses import dataclass

from pulse_ml.errors import DataError
from pulse_ml.inference.history_scoring import (
    check_past_columns,
    mixed_times_error,
    overlap_error,
    pair_note,
)
from pulse_ml.sessions.feature_sets import FeatureSet
from pulse_ml.sessions.user_history import (
    TIME,
    derived_columns,
    parse_times,
    time_note,
    to_micros,
    unparseable_message,
)

SRC, USER, T, RATING = "__pulse_src", "__pulse_user", "__pulse_t", "__pulse_rating"
FILE, ROW = "__pulse_file", "__pulse_row"
_DAY_US = 86_400_000_000


@dataclass(frozen=True)
class _Table:
    """One table of the past, prepared: helper columns added, timed when complete."""

    frame: object  # pyspark DataFrame with SRC, USER, T, RATING (and FILE, ROW)
    path: str
    timed: bool
    has_time: bool


def _micros_udf():
    """A pandas UDF: ``started_at`` text / epoch seconds / naive datetimes -> int64 micros."""
    import pandas as pd
    from pyspark.sql.functions import pandas_udf

    @pandas_udf("long")
    def micros(raw):  # no type hints: they are strings here (postponed annotations)
        parsed = parse_times(raw)
        out = pd.array([None] * len(raw), dtype="Int64")
        ok = parsed.notna().to_numpy()
        if ok.any():
            out[ok] = to_micros(parsed[ok])
        return pd.Series(out)

    return micros


def _examples(frame, condition, n: int = 3) -> str:
    if "session_id" not in frame.columns:
        return ""
    rows = frame.filter(condition).select("session_id").limit(n).collect()
    ids = ", ".join(str(r[0]) for r in rows)
    return f" (e.g. session_id={ids})" if ids else ""


def _prepare(frame, path: str, src: int, features: FeatureSet, what: str) -> _Table:
    """Check one table's ratings and times (one aggregation) and add the helper columns."""
    from pyspark.sql import functions as F
    from pyspark.sql import types as T_

    check_past_columns(path, frame.columns, features, what)
    types = {f.name: f.dataType for f in frame.schema.fields}
    floats = (T_.FloatType, T_.DoubleType)
    raw = F.col("rating")
    num = raw.try_cast("double")
    missing = raw.isNull() | (F.isnan(num) if isinstance(types["rating"], floats) else F.lit(False))
    rating = F.when(missing, F.lit(None).cast("double")).otherwise(num)
    bad_rating = ~missing & (num.isNull() | (num < 1) | (num > 5))
    has_time = TIME in frame.columns
    if has_time:
        traw = F.col(TIME)
        if isinstance(types[TIME], T_.TimestampType):
            t = F.unix_micros(traw)
        else:
            t = _micros_udf()(traw)
        tmissing = traw.isNull()
        if isinstance(types[TIME], floats):
            tmissing = tmissing | F.isnan(traw)
        bad_time = ~tmissing & t.isNull()
    else:
        t, bad_time, tmissing = F.lit(None).cast("long"), F.lit(False), F.lit(True)
    counts = frame.agg(F.sum(bad_rating.cast("long")).alias("r"),
                       F.sum(bad_time.cast("long")).alias("t"),
                       F.sum(tmissing.cast("long")).alias("m")).collect()[0]
    if counts["r"]:
        raise DataError(path, [f"column 'rating': values that are not 1-5 ratings in "
                               f"{int(counts['r']):,} row(s){_examples(frame, bad_rating)}. The "
                               "user_history feature averages earlier ratings; leave unrated "
                               "sessions empty."])
    if counts["t"]:
        first = frame.filter(bad_time).select(TIME).limit(1).collect()[0][0]
        raise DataError(path, [unparseable_message(int(counts["t"]), first)
                               + _examples(frame, bad_time)])
    user = F.col("user_id").cast("string")
    sid = (F.col("session_id").cast("string") if "session_id" in frame.columns
           else F.concat(F.lit(f"{src}:"), F.monotonically_increasing_id().cast("string")))
    user = F.when(user.isNull() | (user == ""), F.concat(F.lit("session:"), sid)).otherwise(user)
    out = frame.withColumns({SRC: F.lit(src), USER: user, T: t, RATING: rating,
                             FILE: F.col("_metadata.file_path"),
                             ROW: F.col("_metadata.row_index")})
    return _Table(out, path, has_time and not counts["m"], has_time)


def _check_overlap(scored, past, path: str) -> None:
    from pyspark.sql import functions as F

    if "session_id" not in past.columns:
        return
    ids = lambda f: f.select(F.col("session_id").cast("string").alias("i")).distinct()  # noqa: E731
    both = ids(past).join(ids(scored), on="i").agg(F.count("*").alias("n"),
                                                   F.min("i").alias("first")).collect()[0]
    if both["n"]:
        raise overlap_error(path, int(both["n"]), both["first"])


def with_history(sessions, features: FeatureSet, path: str, history_path: str | None,
                 read) -> tuple[object, list, tuple[str, ...]]:
    """The scored table with the columns of every ``user_history`` feature.

    Args:
        sessions: The scored table (``spark.read.parquet(path)``, with ``user_id``, ``rating``
            and optional ``started_at``).
        features: The model's feature set.
        path: The scored table's location (for messages).
        history_path: The history table's location, or None (the scored table is its past).
        read: ``read(location)`` -> a Spark DataFrame (one clear message when unreadable).

    Returns:
        ``(frame, columns, notes)``: ``sessions`` with helper columns and the derived ones,
        the Spark columns to hand to the model (``user_id`` as text, ``rating`` as double,
        then each feature's five columns), and the note on the order used.

    Raises:
        DataError: missing ``user_id``/``rating``, ratings outside 1-5, unparseable
            ``started_at``, shared session ids, or one table with times and the other without
            (the messages of local scoring).
    """
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    scored_what = "the scored table"
    if history_path is None:
        table = _prepare(sessions, path, 1, features, scored_what)
        union, timed = table.frame, table.timed
        notes = (time_note(timed, table.has_time),)
    else:
        past = _prepare(read(history_path), history_path, 0, features, "the history table")
        table = _prepare(sessions, path, 1, features, scored_what)
        _check_overlap(sessions, past.frame, history_path)
        if past.timed != table.timed:
            without, with_t = (path, history_path) if past.timed else (history_path, path)
            raise mixed_times_error(without, with_t)
        timed = table.timed
        union = table.frame.unionByName(past.frame.select(SRC, USER, T, RATING, FILE, ROW),
                                        allowMissingColumns=True)
        notes = (pair_note(history_path, timed),)
    by_user = Window.partitionBy(USER)
    if timed:
        ordered = by_user.orderBy(T)
        earlier = ordered.rangeBetween(Window.unboundedPreceding, -1)
    else:  # row order: history rows first, then files and rows in order; no ties
        earlier = by_user.orderBy(SRC, FILE, ROW).rowsBetween(Window.unboundedPreceding, -1)
    n_sessions = F.count(F.lit(1)).over(earlier)
    days = (F.when(n_sessions > 0, (F.col(T) - F.min(T).over(by_user)) / F.lit(_DAY_US))
            .otherwise(F.lit(0.0)) if timed else F.lit(0.0))
    derived = {}
    for spec in features.history:
        window = spec.options.get("window_days")
        span = earlier
        if window is not None and timed:
            span = ordered.rangeBetween(-int(round(float(window) * _DAY_US)), -1)
        n_ratings = F.count(RATING).over(span)
        total = F.coalesce(F.sum(RATING).over(span), F.lit(0.0))
        missing = n_ratings < int(spec.options.get("min_prior", 1))
        mean, n_r, n_s, d, flag = derived_columns(spec.name)
        derived.update({mean: F.when(missing, F.lit(0.0)).otherwise(total / n_ratings),
                        n_r: n_ratings.cast("double"), n_s: n_sessions.cast("double"),
                        d: days.cast("double"), flag: missing.cast("double")})
    frame = union.withColumns(derived).filter(F.col(SRC) == 1)
    cols = [F.col(USER).alias("user_id"), F.col(RATING).alias("rating"),
            *[F.col(c) for c in derived]]
    return frame, cols, notes
