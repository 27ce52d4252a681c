"""Chunked scoring of a large session table in bounded memory.

The input is streamed in chunks (``pyarrow.parquet.ParquetFile.iter_batches`` for Parquet,
``pandas.read_csv(chunksize=)`` for CSV) reading only ``session_id`` and the model's feature
columns; each chunk is checked against the contract, predicted by the cross-fit ensemble and
appended to one Parquet file with ``pyarrow.parquet.ParquetWriter``. Peak memory depends on the
chunk size (and the input's Parquet row-group size), not on the number of sessions.

In honest mode, sessions that were in the model's training data (same ``session_id`` and the
same feature values, :mod:`pulse_ml.models.honest_lookup`) get their out-of-fold prediction,
exactly like :meth:`CrossFitEnsemble.honest_predict`; the output column ``honest`` is 1 for
them. Score reads no ratings, so the renamed-training-session check of ``infer``
(:meth:`CrossFitEnsemble.honesty`, features *and rating* equal to a training session's) cannot
run here: features alone repeat between genuinely different sessions (they are discrete), so
refusing on them would refuse honest tables. ``infer`` computes its own predictions from the
table with ratings and runs that check there.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from pulse_ml.errors import DataError, PulseError
from pulse_ml.models.honest_lookup import HonestLookup, mismatch_note
from pulse_ml.sessions.feature_sets import FeatureSet
from pulse_ml.sessions.readers import PARQUET, count_rows, input_columns, iter_chunks
from pulse_ml.sessions.table import chunk_notes, missing_columns_error, validate_chunk

ID = "session_id"
OUTPUT_SCHEMA = pa.schema([(ID, pa.string()), ("prediction", pa.float64()),
                           ("honest", pa.int8())])


@dataclass(frozen=True)
class ScoreSettings:
    """How to score: rows per chunk, honest (out-of-fold) mode, progress bar, fast path.

    ``fast=False`` is the plain :meth:`CrossFitEnsemble.predict` (kept for the benchmark and
    the equality tests; both give the same predictions).
    """

    chunk_size: int = 100_000
    honest: bool = True
    progress: bool = True
    fast: bool = True  # FastPredictor (shared transform, distinct rows, native threads)
    threads: int = 0  # native predict threads; 0 = the cores available to this process
    cache_rows: int = 200_000  # distinct encoded rows remembered across chunks; 0 = no cache
    history_path: str | None = None  # user_history's past (None: the scored table itself)


@dataclass(frozen=True)
class ScoreResult:
    """What one scoring pass produced."""

    path: str
    out: str
    n_rows: int
    n_honest: int
    n_chunks: int
    seconds: float
    n_mismatched: int = 0
    notes: tuple[str, ...] = ()  # reused ids, missing text (summed over the chunks), ...


def check_columns(path: Path, present: list[str], needed: list[str], model: str) -> None:
    """Raise one ``PulseError`` naming every column the model needs that the file lacks."""
    error = missing_columns_error(path, present, needed, model)
    if error is not None:
        raise error


def score_chunk(ensemble, chunk: pd.DataFrame,
                lookup: HonestLookup | None) -> tuple[pa.Table, int]:
    """Predict one chunk: an Arrow table in :data:`OUTPUT_SCHEMA` and its id-only matches.

    ``ensemble`` is anything with ``predict(frame)``: a ``CrossFitEnsemble`` or a
    :class:`~pulse_ml.models.fast_predict.FastPredictor` around it. Rows whose id and feature
    fingerprint match a training session take its out-of-fold prediction
    (:class:`~pulse_ml.models.honest_lookup.HonestLookup`); the second value counts rows whose
    id matched but whose features differ (they keep the ensemble mean).
    """
    preds = np.asarray(ensemble.predict(chunk), dtype=float)
    ids = chunk[ID].astype(str)
    used = np.zeros(len(chunk), dtype=bool)
    mismatched = 0
    if lookup is not None:
        preds, match = lookup.apply(chunk, preds)
        used, mismatched = match.used, match.n_mismatched
    table = pa.Table.from_arrays(
        [pa.array(ids, type=pa.string()),
         pa.array(preds, type=pa.float64()), pa.array(used.astype(np.int8), type=pa.int8())],
        schema=OUTPUT_SCHEMA)
    return table, mismatched


def preflight(path: Path, out: Path, settings: ScoreSettings) -> list[str]:
    """Check the settings and the input header before any work; returns the input's columns.

    Raises:
        PulseError: bad chunk size, non-Parquet output, output = input, unreadable input.
    """
    if settings.chunk_size < 1:
        raise PulseError(f"chunk_size={settings.chunk_size}: must be >= 1 (rows per chunk).")
    if settings.cache_rows < 0:
        raise PulseError(f"cache_rows={settings.cache_rows}: must be >= 0 (0 = no cache).")
    if out.suffix.lower() not in PARQUET:
        raise PulseError(f"out={out}: the output is a Parquet file; use a .parquet name.")
    if out.resolve() == path.resolve():
        raise PulseError(f"out={out} is the input file: choose another output path.")
    return input_columns(path)


def score_file(ensemble, path: str | os.PathLike[str], out: str | os.PathLike[str],
               settings: ScoreSettings, model_name: str = "the model") -> ScoreResult:
    """Score every session of ``path`` chunk by chunk and write ``out`` incrementally.

    The output is staged (:func:`pulse_ml.env.atomic.atomic_file`) and put in place at the
    end, so a failure (bad rows in a late chunk, interruption) never leaves a truncated file at
    ``out``, and two commands writing the same ``out`` take turns.

    Args:
        ensemble: A :class:`~pulse_ml.models.crossfit.CrossFitEnsemble` (``predict``,
            ``features``, ``oof``).
        path: Input session table (``.parquet`` or ``.csv``).
        out: Output Parquet file (session_id, prediction, honest), rows in input order.
        settings: Chunk size, honest mode, progress bar.
        model_name: How to name the model in messages (e.g. its URI).

    Returns:
        A :class:`ScoreResult`.

    Raises:
        PulseError: missing columns, bad values (with file row numbers), bad settings, or a
            model without out-of-fold predictions in honest mode.
    """
    from pulse_ml.report.progress import progress_bar

    path, out = Path(path), Path(out)
    present = preflight(path, out, settings)
    features: FeatureSet = ensemble.features
    needed = [ID, *[c for c in features.input_names if c != ID]]
    check_columns(path, present, needed, model_name)
    history = None
    if features.history:  # history_scoring.py: the past indexed once, asked per chunk
        from pulse_ml.inference.history_scoring import read_history

        needed += ["started_at"] if "started_at" in present else []
        history = read_history(settings.history_path or path, features, settings.chunk_size,
                               scored=path if settings.history_path else None)
    lookup = None
    if settings.honest:
        oof = getattr(ensemble, "oof", None)
        if oof is None or len(oof) == 0:
            raise PulseError(f"{model_name} has no out-of-fold predictions, and honest=true "
                             "needs them. Re-register it with `pulse-ml train`, or score with "
                             "honest=false (all sessions get the fold-model mean).")
        lookup = HonestLookup(oof, features)
    predictor = ensemble
    if settings.fast:
        from pulse_ml.models.fast_predict import FastPredictor

        predictor = FastPredictor(ensemble, threads=settings.threads,
                                  cache_rows=settings.cache_rows)
    from pulse_ml.env.atomic import atomic_file

    start = time.perf_counter()
    n_rows = n_honest = n_chunks = n_mismatched = 0
    missing_text: dict[str, int] = {}
    bar = progress_bar(total=count_rows(path), desc=f"scoring {path.name}", unit="row",
                       unit_scale=True, disable=not settings.progress)
    try:  # staged, put in place when complete (serialized with other writers of out)
        with atomic_file(out) as partial, pq.ParquetWriter(
                partial, OUTPUT_SCHEMA, use_dictionary=["honest"]) as writer:
            # no dictionary for the (unique) ids and the predictions: 4x faster to write
            for chunk in iter_chunks(path, needed, settings.chunk_size,
                                     features.of_kind("text")):
                n_chunks += 1
                chunk = validate_chunk(chunk, features, path, n_rows, n_chunks, missing_text)
                if history is not None:
                    chunk = history.add_columns(chunk, n_rows)
                table, mismatched = score_chunk(predictor, chunk, lookup)
                writer.write_table(table)
                n_mismatched += mismatched
                n_honest += int(table.column("honest").to_numpy().sum())
                n_rows += len(chunk)
                bar.update(len(chunk))
            if n_rows == 0:
                raise DataError(str(path), ["the table has no rows. Expected one row per "
                                            "session."])
    finally:
        bar.close()
    notes = list(lookup.notes) if lookup is not None else []
    notes += list(history.notes) if history is not None else []
    if n_mismatched:
        notes.append(mismatch_note(n_mismatched))
    return ScoreResult(str(path), str(out), n_rows, n_honest, n_chunks,
                       time.perf_counter() - start, n_mismatched,
                       (*notes, *chunk_notes(missing_text, n_rows)))
