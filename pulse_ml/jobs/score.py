"""Predict satisfaction for every session of a large table, chunk by chunk (bounded memory).

Loads the registered cross-fit ensemble (``model_uri``, default the ``champion``), streams
``data.path`` (Parquet or CSV) in chunks of ``chunk_size`` rows reading only ``session_id`` and
the model's feature columns, checks each chunk against the contract, and appends the predictions
to ``out`` (Parquet: ``session_id``, ``prediction``, ``honest``; same row order as the input).
With ``honest=true`` sessions that were in the model's training data get their out-of-fold
prediction (``honest`` = 1), all others the mean of the fold models. Peak memory depends on
``chunk_size``, not on the number of sessions; the output appears only when every chunk passed.

Examples:
    pulse-ml score data.path=big_sessions.parquet out=predictions.parquet
    pulse-ml score data.path=sessions.csv chunk_size=50000 honest=false
    pulse-ml score model_uri=models:/pulse-satisfaction/3 data.path=s.parquet
    pulse-ml score data.path=new.parquet history.path=past.parquet   # user_history models
    pulse-ml score engine=spark data.path=sessions.parquet out=scores.parquet   # pulse-ml[scale]

``engine=spark`` scores a Parquet table with ``mlflow.pyfunc.spark_udf`` (Spark local mode, or
``spark_master=spark://host:7077`` / ``$SPARK_MASTER`` for a cluster) and writes ``out`` as a
Parquet directory (Spark's row order); predictions and ``honest`` flags equal engine=local.
An existing ``out`` folder is replaced only when pulse-ml wrote it (marker file
``_pulse_ml_output.json``); ``out`` never equals, contains or lies inside the input.
Its ``data.path`` is any Parquet location Spark reads (a file, a directory such as Spark's own
output, ``s3a://bucket/sessions/``, ``hdfs://...``); CSV is refused (convert it to Parquet).
A session gets its out-of-fold prediction only when its ``session_id`` and its feature values
equal a training session's; sessions of another table under a reused id get the fold-model mean.

A model with a ``user_history`` feature reads ``user_id``, ``rating`` and ``started_at``: each
session's history comes from ``history.path`` (the past: user_id, rating, started_at; read
once into a compact index) or, when unset, from the scored table itself. ``engine=spark``
computes the same columns with window functions over each user's sessions (Parquet
``history.path``) and hands them to the UDF.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from pulse_ml.inference.scoring import ScoreResult, ScoreSettings, preflight, score_file
from pulse_ml.report.tables import say


@dataclass(frozen=True)
class ScoreJob:
    """Typed settings of ``pulse-ml score``."""

    model_uri: str
    data_path: str  # a string: engine=spark reads s3a://, hdfs:// or directories
    out: str
    settings: ScoreSettings
    engine: str = "local"
    spark_master: str | None = None


def settings_from_config(cfg) -> ScoreJob:
    """Read the composed config once."""
    from pulse_ml.config import choice, flag, is_missing, number

    chunk_size = number(cfg, "chunk_size", "score", 1, None, integer=True)
    honest = flag(cfg, "honest", "score")
    threads = number(cfg, "threads", "score", 0, None, integer=True, optional=True)
    cache_rows = number(cfg, "cache_rows", "score", 0, None, integer=True)
    history = None if is_missing(cfg, "history.path") else str(cfg.select("history.path"))
    engine = choice(cfg, "engine", "score", {
        "local": "stream the table on this machine (chunks, bounded memory)",
        "spark": "mlflow.pyfunc.spark_udf on Spark (local mode or spark_master)"})
    master = None if is_missing(cfg, "spark_master") else str(cfg.select("spark_master"))
    return ScoreJob(model_uri=str(cfg.model_uri), data_path=str(cfg.data.path),
                    out=str(cfg.out),
                    settings=ScoreSettings(chunk_size=chunk_size, honest=honest,
                                           progress=flag(cfg, "progress", "score", True),
                                           threads=int(threads or 0),
                                           cache_rows=int(cache_rows),
                                           history_path=history),
                    engine=str(engine),
                    spark_master=master)


def run(cfg) -> ScoreResult:
    """Entry point of ``pulse-ml score``."""
    from pulse_ml.env.locations import check_outputs
    from pulse_ml.registry.analysis import open_model
    from pulse_ml.registry.store import store_locations

    job = settings_from_config(cfg)
    check_outputs("score", [("out", job.out, "folder" if job.engine == "spark" else "file")],
                  [("data.path", job.data_path)], store_locations())
    if job.engine == "spark":  # no local preflight: the input may be s3a:// or a directory
        return _run_spark(job)
    preflight(Path(job.data_path), Path(job.out), job.settings)  # fail fast, before the model
    model = open_model(job.model_uri, fast=True)  # no MLflow import on a local store
    ensemble = model.ensemble
    label = job.model_uri + (f" (version {model.version_number})"
                             if model.version is not None else "")
    mode = ("honest (out-of-fold for training sessions)" if job.settings.honest
            else "fold-model mean for every session")
    say(f"scoring {job.data_path} with {label}, {ensemble.family}, features "
          f"'{ensemble.features.name}', chunks of {job.settings.chunk_size} rows, {mode}")
    result = score_file(ensemble, job.data_path, job.out, job.settings, model_name=job.model_uri)
    rate = result.n_rows / result.seconds if result.seconds > 0 else float("inf")
    say(f"scored {result.n_rows} sessions in {result.n_chunks} chunk(s), {result.seconds:.1f} s "
          f"({rate:,.0f} rows/s); {result.n_honest} got their out-of-fold prediction")
    for note in result.notes:
        say(f"note: {note}")
    say(f"written to {result.out}")
    return result


def _run_spark(job: ScoreJob):
    """``engine=spark``: :func:`pulse_ml.inference.spark_scoring.score_spark`."""
    from functools import partial

    from pulse_ml.inference.spark_scoring import check_spark_paths, require_pyspark, score_spark
    from pulse_ml.registry import models
    from pulse_ml.registry.analysis import open_model
    from pulse_ml.sessions.user_history import derived_columns

    require_pyspark()  # before loading anything
    check_spark_paths(job.data_path, job.out)
    ensemble = open_model(job.model_uri).ensemble
    say(f"scoring {job.data_path} on Spark ({job.spark_master or 'local[*]'}) with "
          f"{job.model_uri} through mlflow.pyfunc.spark_udf")
    history = tuple(c for s in ensemble.features.history for c in derived_columns(s.name))
    result = score_spark(ensemble, job.model_uri, partial(models.spark_udf,
                                                           model_uri=job.model_uri,
                                                           extra_inputs=history),
                         job.data_path, job.out, honest=job.settings.honest,
                         master=job.spark_master, history_path=job.settings.history_path)
    say(f"scored {result.n_rows} sessions in {result.seconds:.1f} s; {result.n_honest} got "
          "their out-of-fold prediction")
    for note in result.notes:
        say(f"note: {note}")
    say(f"written to {result.out} (a Parquet directory)")
    return result
