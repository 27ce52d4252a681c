"""Scoring on Spark: ``mlflow.pyfunc.spark_udf`` plus the out-of-fold join for honest rows.

This is section 4 of ``docs/scale-out.md`` as a tested function: the registered pyfunc predicts
the fold-model mean for every session (in Spark's Python workers, Arrow batches), and sessions
that were in the model's training data take their out-of-fold prediction, shipped inside the
model, through a broadcast join. Without a running cluster it uses Spark local mode
(``local[*]``); point ``master`` (or ``spark.master`` / ``SPARK_MASTER``) at a cluster
(``spark://host:7077``, ``yarn``, ``k8s://...``) to run on one, with ``pulse-ml`` installed on
every node (``env_manager="local"``).
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from pulse_ml import keys
from pulse_ml.errors import PulseError

SPARK_MISSING = ("engine=spark needs pyspark (and Java 17): pip install 'pulse-ml[scale]', "
                 "or score on this machine with engine=local (the default).")


@dataclass(frozen=True)
class SparkScoreResult:
    """What one Spark scoring pass produced."""

    path: str
    out: str
    n_rows: int
    n_honest: int
    seconds: float
    n_mismatched: int = 0
    notes: tuple[str, ...] = ()


def require_pyspark() -> None:
    """Raise the one-line install hint when pyspark is not importable."""
    try:
        import pyspark  # noqa: F401
    except ImportError:
        raise PulseError(SPARK_MISSING) from None


# pyspark 4 warns, once per Python process (the driver and every worker), that pandas 3 is not
# fully supported; scoring uses Arrow batches of plain float columns, which it supports.
PANDAS_WARNING = "PySpark does not yet fully support pandas"
LOG4J2 = Path(__file__).with_name("spark_log4j2.properties")


def quiet_settings() -> dict[str, str]:
    """Spark settings that keep its start-up chatter and the pandas warning off stderr.

    The JVM logs errors only (``spark_log4j2.properties``, unless ``SPARK_CONF_DIR`` names the
    user's own logging), no console progress bar, and the Python workers inherit a
    ``PYTHONWARNINGS`` filter for the pandas-version warning (the driver filters it itself).
    """
    ignore = f"ignore:{PANDAS_WARNING}:FutureWarning"
    own = os.environ.get("PYTHONWARNINGS")
    conf = {"spark.ui.showConsoleProgress": "false",
            "spark.executorEnv.PYTHONWARNINGS": f"{own},{ignore}" if own else ignore}
    if not os.environ.get("SPARK_CONF_DIR") and LOG4J2.is_file():
        conf["spark.driver.extraJavaOptions"] = f"-Dlog4j2.configurationFile={LOG4J2.as_uri()}"
    return conf


def spark_session(master: str | None = None, app_name: str = "pulse-ml score"):
    """A Spark session: ``master`` or ``$SPARK_MASTER``, else local mode on every core."""
    require_pyspark()
    import warnings

    from pyspark.sql import SparkSession

    warnings.filterwarnings("ignore", message=PANDAS_WARNING, category=FutureWarning)
    master = master or os.environ.get("SPARK_MASTER") or "local[*]"
    if master.startswith("local"):  # local workers run this Python (a venv not on PATH too)
        os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    builder = (SparkSession.builder.master(master).appName(app_name)
               .config("spark.sql.execution.arrow.pyspark.enabled", "true")
               .config("spark.ui.enabled", "false")
               .config("spark.sql.shuffle.partitions", "4")
               # one Python worker per core already: one native thread per fold predict
               .config("spark.executorEnv.PULSE_PREDICT_THREADS", "1"))
    for key, value in quiet_settings().items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")  # also when the session existed already
    return spark


def _refuse_csv(path: str) -> None:
    name = path.rstrip("/").lower()
    if name.endswith((".csv", ".csv.gz", ".tsv", ".txt")):
        raise PulseError(f"{path}: engine=spark reads Parquet (a file, a directory or an "
                         "s3a:// / hdfs:// location), not CSV. Convert it (pulse-ml convert or "
                         "pandas.read_csv(...).to_parquet(...)), or score it with engine=local.")


def check_spark_paths(path: str, out: str) -> None:
    """Refuse bad paths before Spark starts (see :mod:`pulse_ml.inference.spark_output`).

    CSV input, an ``out`` that equals, contains or lies inside the input, and an existing
    ``out`` that pulse-ml did not write.
    """
    from pulse_ml.inference.spark_output import check_out

    _refuse_csv(path)
    check_out(path, out)


def _first_line(exc: Exception) -> str:
    """The first line of a library's error message (its class name when it has none)."""
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


def _local_path(path: str) -> str | None:
    """The filesystem path of a local location (no scheme or ``file:``), else None."""
    if "://" not in path and not path.startswith("file:"):
        return path
    return path[len("file://"):] if path.startswith("file://") else None


def preflight_local(path: str, needed: list[str], model_uri: str) -> None:
    """Refuse a local input that is missing, not Parquet or lacks columns, before Spark starts.

    Reads only the Parquet footer(s) (pyarrow), so these mistakes cost a second, not a JVM
    start-up; remote locations (``s3a://``, ``hdfs://``) are left to Spark.
    """
    import pyarrow.dataset as pads

    from pulse_ml.inference.scoring import check_columns

    local = _local_path(path)
    if local is None:
        return
    if not os.path.exists(local):
        raise PulseError(f"{path}: no such file or directory. Give the Parquet file or directory "
                         "of sessions to score (engine=spark), or a remote location (s3a://, "
                         "hdfs://).")
    try:
        names = pads.dataset(local, format="parquet", partitioning="hive").schema.names
    except Exception as exc:  # pyarrow's ArrowInvalid / OSError: not Parquet
        first = _first_line(exc)
        raise PulseError(f"{path}: not readable as Parquet ({first[:300]}). Give a Parquet file "
                         "or directory, or score a local file with engine=local.") from None
    check_columns(path, names, needed, model_uri)


def read_sessions(spark, path: str):
    """``spark.read.parquet(path)``; an unreadable location is one ``PulseError`` line."""
    _refuse_csv(path)
    try:
        return spark.read.parquet(path)
    except Exception as exc:  # pyspark's AnalysisException (path missing, not Parquet)
        first = _first_line(exc)
        raise PulseError(f"{path}: Spark cannot read it as Parquet ({first[:300]}). Give a "
                         "Parquet file or directory that exists, or score a local file with "
                         "engine=local.") from None


def _examples(frame, condition, n: int = 3) -> str:
    rows = frame.filter(condition).select("session_id").limit(n).collect()
    ids = ", ".join(str(r[0]) for r in rows)
    return f" (e.g. session_id={ids})" if ids else ""


def checked_columns(sessions, features, path: str) -> list:
    """Check the model's columns on Spark like the local contract; return the typed columns.

    One aggregation counts, per column, the values the local path refuses (missing ids,
    missing/NaN values, non-numbers, infinite values, flags other than 0/1, negative or
    fractional counts, unknown categories, text columns that are not strings); only when
    something is wrong, a few example session ids per problem are fetched.

    Returns:
        Spark column expressions in ``features.columns`` order, typed like the model's training
        data (categorical values spelled canonically, ``Fix Bugs`` -> ``fix_bugs``).

    Raises:
        DataError: every problem found, each naming the column and how many rows.
    """
    from pyspark.sql import functions as F
    from pyspark.sql import types as T

    from pulse_ml.errors import DataError

    schema = {f.name: f.dataType for f in sessions.schema.fields}
    checks: list[tuple[str, object]] = []  # (message stem, condition of a bad row)
    sid = F.col("session_id").cast("string")
    checks.append(("column 'session_id': empty values. Every session needs an id.",
                   sid.isNull() | (F.trim(sid) == "")))
    typed = []
    for spec in features.columns:
        if spec.kind == "user_history":  # no table column: spark_history.py computes it
            continue
        name, kind, raw = spec.name, spec.kind, F.col(spec.name)
        dtype = schema[name]
        if kind == "text":
            if not isinstance(dtype, (T.StringType, T.NullType)):
                checks.append((f"column '{name}': values that are not text ({dtype.simpleString()}"
                               "). A text feature holds the session's messages as strings "
                               "(missing = empty text): write the text itself, or give the "
                               "column another kind in the feature set.", raw.isNotNull()))
            typed.append(F.coalesce(raw.cast("string"), F.lit("")).alias(name))
            continue
        missing = raw.isNull()
        if isinstance(dtype, (T.FloatType, T.DoubleType)):
            missing = missing | F.isnan(raw)
        checks.append((f"column '{name}': empty/NaN values. Every session needs a value for "
                       f"{kind} feature '{name}' (impute or drop those rows).", missing))
        if kind == "categorical":
            text = raw.cast("string")
            if spec.values:
                pairs = [F.lit(x) for kv in spec.canonical().items() for x in kv]
                key = F.regexp_replace(F.lower(text), r"[\s_\-]+", "")
                canon = F.element_at(F.create_map(*pairs), key)
                allowed = ", ".join(spec.values)
                checks.append((f"column '{name}': unknown category values. Allowed: {allowed}; "
                               "case, spaces, '-' and '_' do not matter.",
                               ~missing & canon.isNull()))
                text = F.coalesce(canon, text)
            typed.append(text.alias(name))
            continue
        num = raw.try_cast("double")  # ANSI mode: a bad string is NULL, not an error
        checks.append((f"column '{name}': non-numeric values. Use numbers only.",
                       ~missing & num.isNull()))
        finite = ~F.isnan(num) & (F.abs(num) != F.lit(float("inf")))
        checks.append((f"column '{name}': infinite values. Use finite numbers.",
                       num.isNotNull() & ~F.isnan(num) & ~finite))
        if kind == "flag":
            checks.append((f"column '{name}': a 0/1 flag has other values. Use 0 or 1.",
                           num.isNotNull() & finite & ~num.isin(0.0, 1.0)))
        elif kind == "count":
            checks.append((f"column '{name}': negative counts. Counts are integers >= 0.",
                           num.isNotNull() & finite & (num < 0)))
            checks.append((f"column '{name}': non-integer counts. Counts are integers >= 0.",
                           num.isNotNull() & finite & (num != F.floor(num))))
        typed.append((num if kind == "numeric" else num.cast("long")).alias(name))
    counts = sessions.agg(*[F.sum(c.cast("long")).alias(f"c{i}")
                            for i, (_, c) in enumerate(checks)]).collect()[0]
    problems = []
    for i, (stem, cond) in enumerate(checks):
        n = int(counts[f"c{i}"] or 0)
        if n:
            head, _, fix = stem.partition(". ")
            problems.append(f"{head} in {n:,} row(s){_examples(sessions, cond)}. {fix}")
    if problems:
        problems.append("(checked on Spark before scoring; nothing was written. Fix the rows and "
                        "run again.)")
        raise DataError(path, problems)
    return typed


def score_spark(ensemble, model_uri: str, predict_udf: Callable, path: str | os.PathLike[str],
                out: str | os.PathLike[str], honest: bool = True, spark=None,
                master: str | None = None, history_path: str | None = None
                ) -> SparkScoreResult:
    """Score a Parquet session table with ``mlflow.pyfunc.spark_udf``; write Parquet ``out``.

    Before any scoring, the input's columns are checked against the model
    (``spark.read.parquet(path).columns``) and its values against the contract
    (:func:`checked_columns`, Spark aggregations). Honest rows go through the one out-of-fold
    lookup (:class:`~pulse_ml.models.honest_lookup.HonestLookup`): a broadcast join on
    ``session_id``, then a pandas UDF compares the feature fingerprint of the id-matched rows
    with the training session's, so a session of another table under a reused id keeps the
    ensemble mean (``honest`` = 0).

    Args:
        ensemble: The loaded :class:`~pulse_ml.models.crossfit.CrossFitEnsemble` of
            ``model_uri`` (its feature set and out-of-fold table).
        model_uri: The MLflow model URI the UDF loads (``models:/pulse-satisfaction@champion``),
            named in messages and in the output's marker file.
        predict_udf: ``predict_udf(spark)`` -> the model as a Spark UDF returning a double
            (the job passes :func:`pulse_ml.registry.models.spark_udf` for ``model_uri``;
            inference never loads models itself).
        path: Input Parquet file or directory, any Spark-readable location (kept as a string:
            ``s3a://bucket/sessions/``, ``hdfs://...``, a local directory).
        out: Output Parquet directory (Spark writes one file per partition): columns
            ``session_id``, ``prediction``, ``honest``. Row order is Spark's, not the input's.
        honest: Training sessions take their out-of-fold prediction (``honest`` = 1).
        spark: An existing SparkSession (default: :func:`spark_session` with ``master``).
        master: Spark master URL when no session is given.
        history_path: A ``user_history`` model's past (Parquet; None: the scored table is its
            own past). The history columns are computed on Spark
            (:mod:`pulse_ml.inference.spark_history`) and handed to the UDF with the features.

    Returns:
        A :class:`SparkScoreResult`.

    Raises:
        PulseError: pyspark missing, CSV input, an unreadable location, a missing model column
            or bad values (before any scoring), no OOF table; for a ``user_history`` model
            also what local scoring refuses in the past (no ``user_id``/``rating``, ratings
            outside 1-5, unparseable ``started_at``, session ids shared with ``history_path``).
    """
    require_pyspark()
    from pyspark.sql import functions as F

    from pulse_ml.inference.scoring import check_columns
    from pulse_ml.models.honest_lookup import HonestLookup, mismatch_note, same_fingerprint

    path, out = os.fspath(path), os.fspath(out)
    check_spark_paths(path, out)
    features = ensemble.features
    needed = ["session_id", *[c for c in features.input_names if c != "session_id"]]
    oof = getattr(ensemble, "oof", None)
    if honest and (oof is None or len(oof) == 0):
        raise PulseError(f"{model_uri} has no out-of-fold predictions, and honest=true needs "
                         "them. Re-register it with `pulse-ml train`, or use honest=false.")
    lookup = HonestLookup(oof, features) if honest else None
    preflight_local(path, needed, model_uri)
    spark = spark or spark_session(master)
    sessions = read_sessions(spark, path)
    check_columns(path, sessions.columns, needed, model_uri)
    start = time.perf_counter()
    raw, extra, history_notes = sessions, [], ()
    if features.history:  # computed here: the per-batch UDF never sees a user's past
        from pulse_ml.inference.spark_history import with_history

        sessions, extra, history_notes = with_history(
            raw, features, path, history_path, lambda p: read_sessions(spark, p))
    cols = [*checked_columns(raw, features, path), *extra]
    predict = predict_udf(spark)
    sid = F.col("session_id").cast("string").alias("session_id")
    if lookup is None:
        scored = sessions.select(sid, predict(F.struct(*cols)).alias("prediction"),
                                 F.lit(0).cast("tinyint").alias("honest"))
        mismatched = 0
    else:
        table = spark.createDataFrame(lookup.broadcast_table())
        joined = (sessions.select(sid, *cols)
                  .join(F.broadcast(table), on="session_id", how="left"))
        feats = F.struct(*[F.col(n) for n in joined.columns if n != "session_id"
                           and not n.startswith("oof_")])
        if lookup.checked:
            from pyspark.sql.functions import pandas_udf

            @pandas_udf("boolean")
            def same(frame, stored, has):  # runs in the workers: hashes only id-matched rows
                return same_fingerprint(frame, stored, has, features)

            match = same(feats, F.coalesce(F.col("oof_fingerprint"), F.lit(0).cast("long")),
                         F.col("oof_prediction").isNotNull())
        else:
            match = F.col("oof_prediction").isNotNull()
        scored = joined.select(
            "session_id", predict(feats).alias("model_prediction"),
            F.col("oof_prediction"), match.alias("same"))
        use = F.col("oof_prediction").isNotNull() & F.col("same")
        scored = scored.select(
            "session_id",
            F.when(use, F.col("oof_prediction")).otherwise(F.col("model_prediction"))
            .alias("prediction"),
            use.cast("tinyint").alias("honest"))
    from pulse_ml.inference.spark_output import spark_output

    # staged and put in place complete; an existing out only replaced when pulse-ml wrote it
    with spark_output(spark, out, {keys.MODEL_URI: model_uri, "input": path}) as (target, mode):
        scored.write.mode(mode).parquet(target)
        written = spark.read.parquet(target)
        counts = written.agg(F.count("*").alias("n"), F.sum("honest").alias("h")).collect()[0]
        if lookup is not None:  # id-matched rows that kept the ensemble mean (features differ)
            mismatched = (written.filter(F.col("honest") == 0).select("session_id")
                          .join(F.broadcast(table.select("session_id")), on="session_id")
                          .count())
    notes = [*(lookup.notes if lookup is not None else ()), *history_notes]
    if mismatched:
        notes.append(mismatch_note(mismatched))
    return SparkScoreResult(path, out, int(counts["n"]), int(counts["h"] or 0),
                            time.perf_counter() - start, mismatched, tuple(notes))
