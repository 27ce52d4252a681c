"""Chunked scoring of a large session table in bounded memory.

The input is streamed in chunks (``pyarrow.parquet.ParquetFile.iter_batches`` for Parquet,
``pandas.read_csv(chunksize=)`` for CSV) reading only ``session_id`` and the model's feature
columns; each chunk is checked against the contract, predicted by the cross-fit ensemble and
appended to one Parquet file with ``pyarrow.parquet.ParquetWriter``. Peak memory depends on the
chunk size (and the input's Parquet row-group size), not on the number of sessions.

In honest mode, sessions that were in the model's training data get their out-of-fold
prediction (exactly like :meth:`CrossFitEnsemble.honest_predict`); the output column ``honest``
is 1 for them.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from pulse_ml.errors import DataError, PulseError
from pulse_ml.sessions.feature_sets import FeatureSet, FeatureSpec

PARQUET = (".parquet", ".pq")
CSV = (".csv",)
ID = "session_id"
OUTPUT_SCHEMA = pa.schema([(ID, pa.string()), ("prediction", pa.float64()),
                           ("honest", pa.int8())])
_SHOW = 5


@dataclass(frozen=True)
class ScoreSettings:
    """How to score: rows per chunk, honest (out-of-fold) mode and the progress bar."""

    chunk_size: int = 100_000
    honest: bool = True
    progress: bool = True


@dataclass(frozen=True)
class ScoreResult:
    """What one scoring pass produced."""

    path: str
    out: str
    n_rows: int
    n_honest: int
    n_chunks: int
    seconds: float


def input_columns(path: Path) -> list[str]:
    """Column names of a Parquet or CSV file, read from its footer or header only.

    Raises:
        DataError: missing/empty file, unsupported extension or unreadable header.
    """
    suffix = path.suffix.lower()
    if suffix not in PARQUET + CSV:
        raise DataError(str(path), [f"unsupported extension '{path.suffix or '(none)'}' for "
                                    "scoring. Use a .parquet or .csv session table."])
    if not path.is_file():
        raise DataError(str(path), ["no such file. Check data.path."])
    if path.stat().st_size == 0:
        raise DataError(str(path), ["the file is empty. Expected a header and one row per "
                                    "session."])
    try:
        if suffix in PARQUET:
            return list(pq.ParquetFile(path).schema_arrow.names)
        return [str(c) for c in pd.read_csv(path, nrows=0).columns]
    except Exception as exc:  # noqa: BLE001 - any parser failure is the user's file
        reason = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise DataError(str(path), [f"cannot read the header: {reason[:200]}. Is the file "
                                    "complete and really Parquet/CSV?"]) from None


def check_columns(path: Path, present: list[str], needed: list[str], model: str) -> None:
    """Raise one ``PulseError`` naming every column the model needs that the file lacks."""
    missing = [c for c in needed if c not in present]
    if missing:
        shown = ", ".join(present[:12]) + (" …" if len(present) > 12 else "")
        raise PulseError(
            f"{path}: missing column(s) {', '.join(repr(c) for c in missing)} needed to score "
            f"with {model}. Add them to the table (or rename the columns to these names); "
            f"columns found: {shown or 'none'}.")


def count_rows(path: Path) -> int | None:
    """Number of rows of a Parquet file from its footer (None for CSV: unknown up front)."""
    if path.suffix.lower() in PARQUET:
        return int(pq.ParquetFile(path).metadata.num_rows)
    return None


def iter_chunks(path: Path, columns: list[str], chunk_size: int) -> Iterator[pd.DataFrame]:
    """Yield the chosen columns of the file in chunks of at most ``chunk_size`` rows.

    Raises:
        DataError: when the file cannot be parsed (truncated Parquet, malformed CSV line).
    """
    try:
        yield from _read_chunks(path, columns, chunk_size)
    except (pa.ArrowException, pd.errors.ParserError, UnicodeDecodeError, OSError) as exc:
        reason = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise DataError(str(path), [f"cannot be read: {reason[:200]}. Is the file complete and "
                                    "well-formed?"]) from None


def _read_chunks(path: Path, columns: list[str], chunk_size: int) -> Iterator[pd.DataFrame]:
    if path.suffix.lower() in PARQUET:
        pf = pq.ParquetFile(path)
        try:
            for batch in pf.iter_batches(batch_size=chunk_size, columns=columns):
                yield batch.to_pandas()
        finally:
            pf.close()
        return
    with pd.read_csv(path, usecols=columns, chunksize=chunk_size,
                     dtype={ID: str}) as reader:
        yield from reader


def _rows(chunk: pd.DataFrame, mask: np.ndarray, first_row: int) -> str:
    """First offending rows as 1-based row numbers of the file (data rows, header excluded)."""
    idx = np.flatnonzero(mask)
    ids = chunk[ID].to_numpy()[idx[:_SHOW]] if ID in chunk else [None] * len(idx[:_SHOW])
    parts = [f"row {first_row + i + 1}" + (f" (session_id={s})" if isinstance(s, str) else "")
             for i, s in zip(idx[:_SHOW], ids, strict=True)]
    more = f" and {len(idx) - _SHOW} more in this chunk" if len(idx) > _SHOW else ""
    return f"{len(idx)} row(s): {', '.join(parts)}{more}"


def _values(series: pd.Series, mask: np.ndarray) -> str:
    return ", ".join(repr(v) for v in pd.unique(series[mask].astype(str))[:_SHOW])


def _feature_problems(chunk: pd.DataFrame, spec: FeatureSpec, first_row: int) -> list[str]:
    col, kind = spec.name, spec.kind
    raw = chunk[col]
    missing = raw.isna().to_numpy()
    problems = []
    if missing.any():
        problems.append(f"column '{col}': empty/NaN values in {_rows(chunk, missing, first_row)}."
                        f" Every session needs a value for {kind} feature '{col}' (impute or "
                        "drop those rows).")
    if kind == "categorical":
        if spec.values:
            unknown = ~missing & ~raw.astype(str).isin(spec.values).to_numpy()
            if unknown.any():
                problems.append(f"column '{col}': unknown value(s) {_values(raw, unknown)} in "
                                f"{_rows(chunk, unknown, first_row)}. Allowed: "
                                f"{', '.join(spec.values)}.")
        return problems
    num = pd.to_numeric(raw, errors="coerce").to_numpy(dtype=float, na_value=np.nan)
    bad = np.isnan(num) & ~missing
    if bad.any():
        problems.append(f"column '{col}': non-numeric values {_values(raw, bad)} in "
                        f"{_rows(chunk, bad, first_row)}. Use numbers only.")
    ok = ~np.isnan(num)
    with np.errstate(invalid="ignore"):
        if kind == "flag":
            wrong = ok & (num != 0) & (num != 1)
            rule = "a 0/1 flag has other values"
            fix = "Use 0 or 1."
        elif kind == "count":
            wrong = ok & ((num < 0) | (num != np.floor(num)))
            rule = "counts must be integers >= 0, found"
            fix = "Use whole numbers >= 0."
        else:
            wrong = ok & ~np.isfinite(num)
            rule = "infinite values"
            fix = "Use finite numbers."
    if wrong.any():
        problems.append(f"column '{col}': {rule} {_values(raw, wrong)} in "
                        f"{_rows(chunk, wrong, first_row)}. {fix}")
    return problems


def validate_chunk(chunk: pd.DataFrame, features: FeatureSet, path: Path, first_row: int,
                   chunk_no: int) -> None:
    """Check one chunk against the contract (ids and the model's feature columns).

    Args:
        chunk: The rows read from the file.
        features: The model's feature set.
        path: The input file (for the message).
        first_row: 0-based position of the chunk's first row in the file.
        chunk_no: 1-based chunk number (for the message).

    Raises:
        DataError: listing every problem of the chunk with file row numbers.
    """
    problems = []
    ids = chunk[ID]
    empty = (ids.isna() | (ids.astype(str).str.strip() == "")).to_numpy()
    if empty.any():
        problems.append(f"column '{ID}': empty values in {_rows(chunk, empty, first_row)}. "
                        "Every session needs an id.")
    for spec in features.columns:
        problems += _feature_problems(chunk, spec, first_row)
    if problems:
        last = first_row + len(chunk)
        problems.append(f"(found in chunk {chunk_no}, rows {first_row + 1}-{last}; nothing was "
                        "written. Fix the rows and run again.)")
        raise DataError(str(path), problems)


class OofLookup:
    """Out-of-fold prediction by session_id, built once for every chunk."""

    def __init__(self, oof: pd.DataFrame):
        self._series = pd.Series(oof["prediction"].to_numpy(dtype=float),
                                 index=pd.Index(oof[ID].astype(str).to_numpy()))

    def __len__(self) -> int:
        return len(self._series)

    def apply(self, ids: pd.Series, preds: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Replace ``preds`` of sessions with an OOF value; returns ``(preds, used)``."""
        matched = ids.astype(str).map(self._series).to_numpy(dtype=float, na_value=np.nan)
        used = ~np.isnan(matched)
        out = np.where(used, matched, preds)
        return out, used


def score_chunk(ensemble, chunk: pd.DataFrame, lookup: OofLookup | None) -> pa.Table:
    """Predict one chunk; returns an Arrow table in :data:`OUTPUT_SCHEMA`."""
    preds = np.asarray(ensemble.predict(chunk), dtype=float)
    ids = chunk[ID].astype(str)
    used = np.zeros(len(chunk), dtype=bool)
    if lookup is not None:
        preds, used = lookup.apply(ids, preds)
    return pa.Table.from_arrays(
        [pa.array(ids, type=pa.string()),
         pa.array(preds, type=pa.float64()), pa.array(used.astype(np.int8), type=pa.int8())],
        schema=OUTPUT_SCHEMA)


def preflight(path: Path, out: Path, settings: ScoreSettings) -> list[str]:
    """Check the settings and the input header before any work; returns the input's columns.

    Raises:
        PulseError: bad chunk size, non-Parquet output, output = input, unreadable input.
    """
    if settings.chunk_size < 1:
        raise PulseError(f"chunk_size={settings.chunk_size}: must be >= 1 (rows per chunk).")
    if out.suffix.lower() not in PARQUET:
        raise PulseError(f"out={out}: the output is a Parquet file; use a .parquet name.")
    if out.resolve() == path.resolve():
        raise PulseError(f"out={out} is the input file: choose another output path.")
    return input_columns(path)


def score_file(ensemble, path: str | os.PathLike[str], out: str | os.PathLike[str],
               settings: ScoreSettings, model_name: str = "the model") -> ScoreResult:
    """Score every session of ``path`` chunk by chunk and write ``out`` incrementally.

    The output is first written to ``<out>.partial`` and renamed at the end, so a failure
    (bad rows in a late chunk, interruption) never leaves a truncated file at ``out``.

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
    from tqdm.auto import tqdm

    path, out = Path(path), Path(out)
    present = preflight(path, out, settings)
    features: FeatureSet = ensemble.features
    needed = [ID, *[c for c in features.names if c != ID]]
    check_columns(path, present, needed, model_name)
    lookup = None
    if settings.honest:
        oof = getattr(ensemble, "oof", None)
        if oof is None or len(oof) == 0:
            raise PulseError(f"{model_name} has no out-of-fold predictions, and honest=true "
                             "needs them. Re-register it with `pulse-ml train`, or score with "
                             "honest=false (all sessions get the fold-model mean).")
        lookup = OofLookup(oof)
    out.parent.mkdir(parents=True, exist_ok=True)
    partial = out.with_name(out.name + ".partial")
    start = time.perf_counter()
    n_rows = n_honest = n_chunks = 0
    bar = tqdm(total=count_rows(path), desc=f"scoring {path.name}", unit="row",
               unit_scale=True, disable=not settings.progress)
    try:
        with pq.ParquetWriter(partial, OUTPUT_SCHEMA) as writer:
            for chunk in iter_chunks(path, needed, settings.chunk_size):
                n_chunks += 1
                validate_chunk(chunk, features, path, n_rows, n_chunks)
                table = score_chunk(ensemble, chunk, lookup)
                writer.write_table(table)
                n_honest += int(table.column("honest").to_numpy().sum())
                n_rows += len(chunk)
                bar.update(len(chunk))
        if n_rows == 0:
            raise DataError(str(path), ["the table has no rows. Expected one row per session."])
        partial.replace(out)
    except BaseException:
        partial.unlink(missing_ok=True)
        raise
    finally:
        bar.close()
    return ScoreResult(str(path), str(out), n_rows, n_honest, n_chunks,
                       time.perf_counter() - start)
