"""Names are data: user-given names made safe where they become file names, MLflow keys or CSV.

Case-study, condition, feature, model and judge names and LLM text come from the user's
tables and configs. They are kept verbatim inside every file (JSON, CSV cells, HTML, plot
labels) and transformed only where a name would otherwise act as code:

* **File names** (:func:`file_part`): a name that is already a plain ASCII word
  (``[A-Za-z0-9][A-Za-z0-9._-]*``, at most 60 characters) is used as it is, so
  ``audit_plan.json`` stays ``audit_plan.json``; any other name (``/``, ``..``, spaces,
  parentheses, emoji, right-to-left text, 300 characters) becomes an ASCII slug of at most 40
  characters plus ``-`` and the first 8 hex digits of the SHA-256 of the name, e.g.
  ``../x (y)`` -> ``x_y-1d5f0c9e``: never a path separator, never too long for the file
  system, and two names that slug alike still get different files.
* **MLflow metric keys** (:func:`metric_key`): MLflow accepts only letters, digits and
  ``_ - . space : /`` in a key of at most 250 characters that is a clean path; other
  characters (parentheses, ``=``, emoji; ``/`` too in a key that is no clean path) become
  ``_`` and such a key gets the same 8-digit hash, so the run keeps one metric per case
  study (the names themselves are in the run's JSON artifact).
* **CSV cells** (:func:`neutralize_csv`, :func:`write_csv`): as OWASP recommends against CSV
  (formula) injection, a text cell that starts with ``=``, ``+``, ``-``, ``@``, a tab or a
  carriage return is written with a leading ``'`` so a spreadsheet shows it as text instead of
  running it. Numbers stay numbers: numeric columns are never touched, nor a text cell that
  is a plain number (``-0.5``, ``+3``), which a spreadsheet cannot run. Column names are
  treated like cells. Every CSV report pulse-ml writes goes through :func:`write_csv`; session
  tables written for pulse-ml to read back (``sessions/writers.py``) are data, not reports, and
  are written verbatim (a ``'`` there would change ids and texts).
"""

from __future__ import annotations

import hashlib
import posixpath
import re
import unicodedata
from pathlib import Path
from typing import Any

import pandas as pd

_PLAIN = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,59}")
_NOT_SLUG = re.compile(r"[^A-Za-z0-9._-]+")
MAX_METRIC_KEY = 250
_METRIC_OK = re.compile(r"[\w.\- :/]*")  # MLflow's own rule for metric names
_NOT_METRIC = re.compile(r"[^\w.\- :]+")
FORMULA_START = ("=", "+", "-", "@", "\t", "\r")
_FORMULA = r"^[=+\-@\t\r]"
_NUMBER = r"^[+-]?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?$"


def short_hash(name: str) -> str:
    """The first 8 hex digits of the SHA-256 of ``name`` (UTF-8)."""
    return hashlib.sha256(name.encode("utf-8", "surrogatepass")).hexdigest()[:8]


def slug(name: str, width: int = 40) -> str:
    """An ASCII slug of ``name``: accents dropped, other runs of characters as ``_``."""
    ascii_text = unicodedata.normalize("NFKD", name).encode("ascii", "ignore").decode()
    return _NOT_SLUG.sub("_", ascii_text).strip("._-")[:width].rstrip("._-") or "name"


def file_part(name: object) -> str:
    """``name`` as a safe part of a file name (see the module docstring).

    Args:
        name: A case-study, condition, feature, model or judge name.

    Returns:
        ``name`` itself when it is a plain ASCII word of at most 60 characters, else
        ``<slug>-<8 hex digits>``.
    """
    text = str(name)
    if _PLAIN.fullmatch(text):
        return text
    return f"{slug(text)}-{short_hash(text)}"


def metric_key(key: str) -> str:
    """``key`` as a valid MLflow metric key (unchanged when it already is one).

    MLflow also treats a key as a path: it must not change under ``normpath`` (``a//b``,
    ``a/../b``) nor start with ``/`` or ``..``; such keys lose their slashes here.
    """
    norm = posixpath.normpath(key)
    if (len(key) <= MAX_METRIC_KEY and _METRIC_OK.fullmatch(key) and norm == key
            and not key.startswith(("..", "/"))):
        return key
    suffix = f"-{short_hash(key)}"
    clean = _NOT_METRIC.sub("_", key)
    if clean.startswith("."):
        clean = "_" + clean
    return clean[:MAX_METRIC_KEY - len(suffix)] + suffix


def _formula_starts(text: pd.Series) -> pd.Series:
    """Which cells of an all-text column start with a formula character (vectorized).

    Large columns go through Arrow's compute kernel (one C pass; the character class is ASCII,
    so it agrees with Python's ``re`` cell by cell); small ones through pandas.
    """
    if len(text) < 10_000:
        return text.str.match(_FORMULA, na=False).astype(bool)
    import pyarrow as pa
    import pyarrow.compute as pc

    hit = pc.match_substring_regex(pa.array(text.to_numpy(), type=pa.large_string(),
                                            from_pandas=True), _FORMULA)
    return pd.Series(hit.fill_null(False).to_numpy(zero_copy_only=False), index=text.index)


def _neutral_text(values: pd.Series) -> pd.Series:
    """``values`` with a ``'`` before each text that a spreadsheet would run as a formula.

    Text columns are handled with vectorized string matching; columns of other objects
    (dates, lists) are left alone; a column mixing texts with other values is checked cell by
    cell (rare: the cells are few).
    """
    kind = pd.api.types.infer_dtype(values, skipna=True)
    if kind not in ("string", "mixed", "mixed-integer", "empty"):
        return values
    text = values.astype(object)
    if kind == "string":
        starts = _formula_starts(text)
        numbers = pd.Series(False, index=text.index)
        if starts.any():  # the slow, exact number check only on the few cells it can matter
            numbers[starts] = text[starts].str.match(_NUMBER, na=False).astype(bool)
    else:
        is_text = text.map(lambda v: isinstance(v, str)).astype(bool)
        as_text = text.where(is_text, "")
        starts = is_text & as_text.str.match(_FORMULA).astype(bool)
        numbers = as_text.str.match(_NUMBER).astype(bool)
    hit = starts & ~numbers
    if not hit.any():
        return values
    out = text.copy()
    out[hit] = "'" + text[hit].astype(str)
    return out


def neutralize_csv(frame: pd.DataFrame) -> pd.DataFrame:
    """A copy of ``frame`` whose text cells and column names cannot run in a spreadsheet.

    Args:
        frame: Any table about to be written as CSV.

    Returns:
        The same table; text cells starting with ``= + - @``, tab or carriage return (and not
        a plain number) get a leading ``'``; numeric columns are unchanged.
    """
    out = frame.copy()
    for i in range(out.shape[1]):
        col = out.iloc[:, i]
        if pd.api.types.is_numeric_dtype(col) or pd.api.types.is_bool_dtype(col) \
                or pd.api.types.is_datetime64_any_dtype(col):
            continue
        if isinstance(col.dtype, pd.CategoricalDtype):
            col = col.astype(object)
        fixed = _neutral_text(col)
        if fixed is not col or isinstance(out.iloc[:, i].dtype, pd.CategoricalDtype):
            out.isetitem(i, fixed)
    names = _neutral_text(pd.Series([str(c) for c in out.columns], dtype=object))
    if any(str(a) != str(b) for a, b in zip(out.columns, names, strict=True)):
        out.columns = list(names)
    return out


def _has_cr(col: pd.Series) -> bool:
    """Whether any cell of an all-text column holds a carriage return."""
    if len(col) < 10_000:
        return bool(col.astype(object).str.contains("\r", regex=False, na=False).any())
    import pyarrow as pa
    import pyarrow.compute as pc

    arr = pa.array(col.astype(object).to_numpy(), type=pa.large_string(), from_pandas=True)
    return bool(pc.any(pc.match_substring(arr, "\r")).as_py())


def write_csv(frame: pd.DataFrame, path: str | Path) -> None:
    """Write ``frame`` as a CSV report (no index) after :func:`neutralize_csv`.

    The one CSV writer of pulse-ml's reports (effects, features, judgments, audits, monitor,
    comparisons, agreement, benchmarks, MLflow artifacts). Python's CSV writer quotes a cell
    holding a line feed but not one holding a bare carriage return, which spreadsheets read as
    a row break: a table with such a cell is written with CRLF line ends (RFC 4180), which
    makes the writer quote it.
    """
    safe = neutralize_csv(frame)
    has_cr = any("\r" in str(c) for c in safe.columns)
    for i in range(safe.shape[1]):
        col = safe.iloc[:, i]
        if not has_cr and pd.api.types.infer_dtype(col, skipna=True) == "string":
            has_cr = _has_cr(col)
    if has_cr or not _write_arrow(safe, path):
        safe.to_csv(path, index=False, lineterminator="\r\n" if has_cr else "\n")


ARROW_ROWS = 100_000  # from this size a plain table goes through Arrow's CSV writer
_PLAIN_NAME = re.compile(r"[A-Za-z0-9_.]+")


def _write_arrow(safe: pd.DataFrame, path: str | Path) -> bool:
    """Write a large plain table with Arrow's CSV writer (~10x pandas'); False: not plain.

    Plain: at least :data:`ARROW_ROWS` rows and two columns, plain column names, numpy
    integer or finite-or-NaN float columns, and text columns none of whose cells holds a
    comma, a quote or a line break (so neither writer quotes anything). The cells read back
    equal to pandas' output (NaN and None as empty cells, integers alike, a float column a
    float column: :func:`_float_cells`); a float may be spelled differently (``0.0000045``
    instead of ``4.5e-06``, ``1`` in a column with a fraction), the same double either way.
    """
    if (len(safe) < ARROW_ROWS or safe.shape[1] < 2
            or not all(isinstance(c, str) and _PLAIN_NAME.fullmatch(c) for c in safe.columns)):
        return False
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.csv as pcsv

    arrays = []
    for i in range(safe.shape[1]):
        col = safe.iloc[:, i]
        kind = col.dtype.kind if isinstance(col.dtype, np.dtype) else ""
        if kind and kind in "iu":
            arrays.append(pa.array(col.to_numpy()))
        elif kind == "f":
            arr = _float_cells(col.to_numpy())
            if arr is None:
                return False
            arrays.append(arr)
        elif pd.api.types.infer_dtype(col, skipna=True) == "string":
            arr = pa.array(col.astype(object).to_numpy(), type=pa.large_string(),
                           from_pandas=True)
            if pc.any(pc.match_substring_regex(arr, '[,"\\n\\r]')).as_py():
                return False
            arrays.append(arr)
        else:
            return False
    table = pa.Table.from_arrays(arrays, names=list(safe.columns))
    with open(path, "wb") as fh:
        fh.write((",".join(safe.columns) + "\n").encode())
        pcsv.write_csv(table, fh, pcsv.WriteOptions(include_header=False, quoting_style="none"))
    return True


def _float_cells(values: Any) -> Any:
    """A float column for Arrow's CSV writer that reads back as float (None: leave to pandas).

    Arrow writes ``1.0`` as ``1``: a column of whole numbers alone would read back as int64. A
    column with an empty (NaN) or fractional cell reads as float anyway; a whole one is written
    ``1.0``, ``-3.0`` as pandas writes it. Infinities, whole values from 2**53 (Arrow may write
    them as integers) and ``-0.0`` (its sign) go to pandas' writer.
    """
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc

    if np.isinf(values).any():
        return None
    if np.isnan(values).any() or not np.array_equal(values, np.trunc(values)):
        return pa.array(values, from_pandas=True)  # NaN: an empty cell
    if (np.abs(values) >= 2.0 ** 53).any() or np.signbit(values[values == 0]).any():
        return None
    whole = pc.cast(pa.array(values.astype(np.int64)), pa.string())
    return pc.binary_join_element_wise(whole, ".0", "")
