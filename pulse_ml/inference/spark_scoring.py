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
import time
from dataclasses import dataclass
from pathlib import Path

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


def require_pyspark() -> None:
    """Raise the one-line install hint when pyspark is not importable."""
    try:
        import pyspark  # noqa: F401
    except ImportError:
        raise PulseError(SPARK_MISSING) from None


def spark_session(master: str | None = None, app_name: str = "pulse-ml score"):
    """A Spark session: ``master`` or ``$SPARK_MASTER``, else local mode on every core."""
    require_pyspark()
    from pyspark.sql import SparkSession

    master = master or os.environ.get("SPARK_MASTER") or "local[*]"
    builder = (SparkSession.builder.master(master).appName(app_name)
               .config("spark.sql.execution.arrow.pyspark.enabled", "true")
               .config("spark.ui.enabled", "false")
               .config("spark.sql.shuffle.partitions", "4")
               # one Python worker per core already: one native thread per fold predict
               .config("spark.executorEnv.PULSE_PREDICT_THREADS", "1"))
    return builder.getOrCreate()


def score_spark(ensemble, model_uri: str, path: str | os.PathLike[str],
                out: str | os.PathLike[str], honest: bool = True, spark=None,
                master: str | None = None) -> SparkScoreResult:
    """Score a Parquet session table with ``mlflow.pyfunc.spark_udf``; write Parquet ``out``.

    Args:
        ensemble: The loaded :class:`~pulse_ml.models.crossfit.CrossFitEnsemble` of
            ``model_uri`` (its feature set and out-of-fold table).
        model_uri: The MLflow model URI the UDF loads (``models:/pulse-satisfaction@champion``).
        path: Input Parquet file or directory (any Spark-readable Parquet location).
        out: Output Parquet directory (Spark writes one file per partition): columns
            ``session_id``, ``prediction``, ``honest``. Row order is Spark's, not the input's.
        honest: Training sessions take their out-of-fold prediction (``honest`` = 1).
        spark: An existing SparkSession (default: :func:`spark_session` with ``master``).
        master: Spark master URL when no session is given.

    Returns:
        A :class:`SparkScoreResult`.

    Raises:
        PulseError: pyspark missing, a missing model column (before any work), no OOF table.
    """
    require_pyspark()
    from pyspark.sql import functions as F

    from pulse_ml.inference.scoring import check_columns
    from pulse_ml.registry.models import spark_udf
    from pulse_ml.sessions.readers import input_columns

    path, out = Path(path), Path(out)
    features = ensemble.features
    needed = ["session_id", *[c for c in features.names if c != "session_id"]]
    check_columns(path, input_columns(path), needed, model_uri)
    oof = getattr(ensemble, "oof", None)
    if honest and (oof is None or len(oof) == 0):
        raise PulseError(f"{model_uri} has no out-of-fold predictions, and honest=true needs "
                         "them. Re-register it with `pulse-ml train`, or use honest=false.")
    spark = spark or spark_session(master)
    start = time.perf_counter()
    predict = spark_udf(spark, model_uri)
    cast = {"categorical": "string", "count": "long", "flag": "long", "numeric": "double",
            "text": "string"}
    sessions = spark.read.parquet(str(path))
    cols = [F.col(c.name).cast(cast[c.kind]).alias(c.name) for c in features.columns]
    scored = sessions.select(F.col("session_id").cast("string").alias("session_id"),
                             predict(F.struct(*cols)).alias("prediction"))
    if honest:
        table = spark.createDataFrame(
            oof[["session_id", "prediction"]].astype({"session_id": str})
            .rename(columns={"prediction": "oof_prediction"}))
        scored = (scored.join(F.broadcast(table), on="session_id", how="left")
                  .withColumn("honest", F.col("oof_prediction").isNotNull().cast("tinyint"))
                  .withColumn("prediction", F.coalesce("oof_prediction", "prediction")))
    else:
        scored = scored.withColumn("honest", F.lit(0).cast("tinyint"))
    scored = scored.select("session_id", "prediction", "honest")
    scored.write.mode("overwrite").parquet(str(out))
    written = spark.read.parquet(str(out))
    counts = written.agg(F.count("*").alias("n"), F.sum("honest").alias("h")).collect()[0]
    return SparkScoreResult(str(path), str(out), int(counts["n"]), int(counts["h"] or 0),
                            time.perf_counter() - start)
