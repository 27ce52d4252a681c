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
        starts = text.str.match(_FORMULA, na=False).astype(bool)
        numbers = text.str.match(_NUMBER, na=False).astype(bool)
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
            has_cr = bool(col.astype(object).str.contains("\r", regex=False, na=False).any())
    safe.to_csv(path, index=False, lineterminator="\r\n" if has_cr else "\n")
