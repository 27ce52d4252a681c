"""Every table reader, with clear errors.

Whole files (Parquet, CSV, JSONL by extension), streamed chunks for scoring, transcript tables
for the LLM jobs, and the simulator's ground truth.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from pathlib import Path

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from pulse_ml.errors import DataError
from pulse_ml.sessions.file_kinds import first_bad_json_line, not_a_file, require_unique_header

PARQUET = (".parquet", ".pq")
CSV = (".csv",)
READERS = {".parquet": "parquet", ".pq": "parquet", ".csv": "csv", ".jsonl": "jsonl",
           ".ndjson": "jsonl"}
# Columns always read from CSV as strings: ids and the usual text columns (a text "5" must not
# arrive as a number). Feature sets with other text columns pass them as ``text_columns``.
CSV_STRINGS = ("session_id", "user_id", "case_study", "condition", "user_text", "bot_text",
               "transcript")
# Free-text columns: most of a table's bytes (user_text is ~70% of the demo's Parquet), read by
# an analysis only when the model has them as text features (:func:`with_free_text`).
FREE_TEXT = ("user_text", "bot_text", "transcript")


def csv_dtypes(text_columns: Iterable[str] = ()) -> dict[str, type]:
    """``dtype=`` of ``pd.read_csv``: ids, the usual text columns and ``text_columns`` as str."""
    return dict.fromkeys((*CSV_STRINGS, *text_columns), str)


def read_frame(path: str | Path, text_columns: Iterable[str] = (),
               skip: Iterable[str] = ()) -> pd.DataFrame:
    """Read a table file into a DataFrame.

    Args:
        path: A ``.parquet``, ``.csv`` or ``.jsonl`` file.
        text_columns: More columns to read from CSV as strings (a feature set's ``text``
            columns); ``user_text``, ``bot_text`` and ``transcript`` always are.
        skip: Columns not to read (Parquet and CSV; e.g. :data:`FREE_TEXT` before the model's
            features are known, see :func:`with_free_text`).

    Returns:
        The raw frame (no validation beyond "it is a non-empty table").

    Raises:
        DataError: missing file, unsupported extension, empty or unreadable file.
    """
    path = Path(path)
    kind = READERS.get(path.suffix.lower())
    if kind is None:
        raise DataError(str(path), [
            f"unsupported extension '{path.suffix or '(none)'}'. "
            f"Use one of {', '.join(sorted(READERS))} (Parquet, CSV or JSON Lines)."])
    if not path.is_file():
        raise DataError(str(path), [not_a_file(path, kind)])
    if path.stat().st_size == 0:
        raise DataError(str(path), ["the file is empty. Expected a header and one row per "
                                    "session."])
    try:
        skip = set(skip)
        if kind == "parquet":
            names = pq.ParquetFile(path).schema_arrow.names if skip else None
            frame = pd.read_parquet(path, columns=None if names is None else
                                    [c for c in names if c not in skip])
        elif kind == "csv":
            require_unique_header(path)
            frame = pd.read_csv(path, dtype=csv_dtypes(text_columns), keep_default_na=True,
                                usecols=(lambda c: c not in skip) if skip else None)
        else:
            frame = pd.read_json(path, lines=True, dtype={"session_id": str, "user_id": str})
    except DataError:
        raise
    except Exception as exc:  # noqa: BLE001 - any parser failure is the user's file
        reason = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        line = first_bad_json_line(path) if kind == "jsonl" else None
        where = f"line {line[0]} is not JSON ({line[1]}); " if line else ""
        raise DataError(str(path), [f"cannot be read as {kind}: {where}{reason[:200]}. Is the "
                                    f"file complete and really {kind}?"]) from None
    if frame.shape[0] == 0:
        raise DataError(str(path), ["the table has no rows. Expected one row per session."])
    return frame


def with_text_columns(frame: pd.DataFrame, path: str | Path,
                      text_columns: Iterable[str]) -> pd.DataFrame:
    """Re-read from a CSV file the text columns that pandas parsed as numbers.

    A job that reads the table before it knows the model's feature set gets ``user_text`` ...
    as strings already; a model with other text columns calls this once it knows them.

    Args:
        frame: The table as read by :func:`read_frame` from ``path``.
        path: Its file.
        text_columns: The model's ``text`` columns.

    Returns:
        ``frame`` (a copy when a column was re-read as strings).
    """
    path = Path(path)
    redo = [c for c in text_columns if c in frame.columns
            and not (frame[c].dtype == object or pd.api.types.is_string_dtype(frame[c].dtype))]
    if not redo or READERS.get(path.suffix.lower()) != "csv" or not path.is_file():
        return frame
    text = pd.read_csv(path, usecols=redo, dtype=dict.fromkeys(redo, str))
    return frame.assign(**{c: text[c].to_numpy() for c in redo})


def with_free_text(frame: pd.DataFrame, path: str | Path,
                   text_columns: Iterable[str]) -> pd.DataFrame:
    """Add the model's text columns that ``read_frame(path, skip=FREE_TEXT)`` left out.

    Reads only those columns of the file (as strings from CSV); columns the file lacks stay
    absent (the model-column check names them).

    Returns:
        ``frame`` (a copy with the columns appended when some were read).
    """
    path = Path(path)
    kind = READERS.get(path.suffix.lower())
    add = [c for c in text_columns if c not in frame.columns]
    if not add or kind not in ("parquet", "csv"):
        return frame
    present = set(input_columns(path))
    add = [c for c in add if c in present]
    if not add:
        return frame
    if kind == "parquet":
        text = pd.read_parquet(path, columns=add)
    else:
        text = pd.read_csv(path, usecols=add, dtype=dict.fromkeys(add, str))
    return frame.assign(**{c: text[c].array for c in add})


def ground_truth_path(data_path: str) -> Path | None:
    """The true-effects file of a table: ``<stem>.ground_truth.json``, else ``ground_truth.json``.

    The simulator writes ``ground_truth.json`` in its own folder; example scripts that know the
    truth of real data (USS hidden labels) write ``<stem>.ground_truth.json`` so that another
    table in the same folder never picks it up.
    """
    path = Path(data_path)
    for candidate in (path.with_name(f"{path.stem}.ground_truth.json"),
                      path.with_name("ground_truth.json")):
        if candidate.is_file():
            return candidate
    return None


def _ground_truth_json(data_path: str) -> dict:
    path = ground_truth_path(data_path)
    if path is None:
        return {}
    try:
        data = json.loads(path.read_text())
    except ValueError:
        return {}
    return data if isinstance(data, dict) else {}


def load_ground_truth(data_path: str) -> dict[str, float]:
    """True effects per case study from the table's ground-truth file (else empty)."""
    try:
        effects = _ground_truth_json(data_path).get("effects", {})
        return {k: float(v["effect"]) for k, v in effects.items()}
    except (ValueError, KeyError, TypeError, AttributeError):
        return {}


def is_simulated(data_path: str) -> bool:
    """Whether the table's ground truth comes from the simulator (it records ``bayes_rho``)."""
    return "bayes_rho" in _ground_truth_json(data_path)


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
        raise DataError(str(path), [not_a_file(path, "parquet" if suffix in PARQUET else "csv")])
    if path.stat().st_size == 0:
        raise DataError(str(path), ["the file is empty. Expected a header and one row per "
                                    "session."])
    if suffix in CSV:
        require_unique_header(path)  # pandas would read a second 'x' as 'x.1'
    try:
        if suffix in PARQUET:
            return list(pq.ParquetFile(path).schema_arrow.names)
        return [str(c) for c in pd.read_csv(path, nrows=0).columns]
    except Exception as exc:  # noqa: BLE001 - any parser failure is the user's file
        reason = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise DataError(str(path), [f"cannot read the header: {reason[:200]}. Is the file "
                                    "complete and really Parquet/CSV?"]) from None


def count_rows(path: Path) -> int | None:
    """Number of rows of a Parquet file from its footer (None for CSV: unknown up front)."""
    if path.suffix.lower() in PARQUET:
        return int(pq.ParquetFile(path).metadata.num_rows)
    return None


def iter_chunks(path: Path, columns: list[str], chunk_size: int,
                text_columns: Iterable[str] = ()) -> Iterator[pd.DataFrame]:
    """Yield the chosen columns of the file in chunks of at most ``chunk_size`` rows.

    CSV text columns (``user_text`` ... and ``text_columns``) are read as strings.

    Raises:
        DataError: when the file cannot be parsed (truncated Parquet, malformed CSV line).
    """
    try:
        yield from _read_chunks(path, columns, chunk_size, tuple(text_columns))
    except (pa.ArrowException, pd.errors.ParserError, UnicodeDecodeError, OSError) as exc:
        reason = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise DataError(str(path), [f"cannot be read: {reason[:200]}. Is the file complete and "
                                    "well-formed?"]) from None


def _read_chunks(path: Path, columns: list[str], chunk_size: int,
                 text_columns: tuple[str, ...] = ()) -> Iterator[pd.DataFrame]:
    if path.suffix.lower() in PARQUET:
        pf = pq.ParquetFile(path)
        try:
            for batch in pf.iter_batches(batch_size=chunk_size, columns=columns):
                yield batch.to_pandas()
        finally:
            pf.close()
        return
    dtypes = {k: v for k, v in csv_dtypes(text_columns).items() if k in columns}
    with pd.read_csv(path, usecols=columns, chunksize=chunk_size, dtype=dtypes) as reader:
        yield from reader


def read_transcript_table(path: str | Path, need_rating: bool) -> pd.DataFrame:
    """Read a session table and check the columns LLM jobs use.

    Raises:
        DataError: unreadable file, missing ``session_id`` / ``transcript`` (/ ``rating``).
    """
    return check_transcript_table(read_frame(path), path, need_rating)


def check_transcript_table(frame: pd.DataFrame, path: str | Path,
                           need_rating: bool) -> pd.DataFrame:
    """Check and normalise the columns LLM jobs use in a table read from ``path``.

    Returns:
        A copy with ``session_id`` and ``transcript`` as strings (missing transcript = ``[]``)
        and a numeric ``rating`` (when ``need_rating``); ``frame`` itself is unchanged.

    Raises:
        DataError: missing ``session_id`` / ``transcript`` (/ ``rating``).
    """
    need = ["session_id", "transcript"] + (["rating"] if need_rating else [])
    missing = [c for c in need if c not in frame.columns]
    if missing:
        raise DataError(str(path), [
            f"missing column(s) {', '.join(missing)}. LLM judges and discovery read the raw "
            f"conversation: build the table with `pulse-ml extract` (it keeps a `transcript` "
            f"column)."])
    frame = frame.copy()
    frame["session_id"] = frame["session_id"].astype(str)
    frame["transcript"] = frame["transcript"].fillna("[]").astype(str)
    if need_rating:
        frame["rating"] = pd.to_numeric(frame["rating"], errors="coerce")
    return frame
