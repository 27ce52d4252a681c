"""Validate a session table against the contract and return it typed.

The contract (see ``design.md``): one row per session with ``session_id`` (unique),
``condition``, ``rating`` (mean segment rating in [1, 5], empty = unlabeled), optional
``user_id``, ``case_study`` and ``n_ratings``, and the feature columns of the chosen feature set.
Every problem is collected first and reported in one message (file, column, first rows, fix).
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from pulse_ml.errors import DataError, PulseError
from pulse_ml.faults import ECHO_LIMIT, shorten
from pulse_ml.sessions.case_studies import (  # noqa: F401 - MIN_LABELED_PER_ARM re-exported
    MIN_LABELED_PER_ARM,
    CaseStudy,
    check_case_studies,
)
from pulse_ml.sessions.feature_sets import FeatureSet
from pulse_ml.sessions.readers import read_frame

REQUIRED = ("session_id", "condition", "rating")
_SHOW = 5


def _where(frame: pd.DataFrame, mask: np.ndarray | pd.Series, first_row: int = 0) -> str:
    """Describe the first offending rows: 1-based file row number and session_id.

    ``first_row`` is the 0-based file position of ``frame``'s first row (chunked reads).
    """
    idx = np.flatnonzero(np.asarray(mask))
    parts = []
    for i in idx[:_SHOW]:
        sid = frame["session_id"].iloc[i] if "session_id" in frame else None
        part = f"row {first_row + i + 1}"
        if sid is not None and not pd.isna(sid):
            part += f" (session_id={shorten(sid)})"
        parts.append(part)
    more = f" and {len(idx) - _SHOW} more" if len(idx) > _SHOW else ""
    return f"{len(idx)} row(s): {', '.join(parts)}{more}"


def _bad_values(series: pd.Series, mask: np.ndarray | pd.Series) -> str:
    """The first distinct offending values, each cut to ~80 characters."""
    vals = pd.unique(series[np.asarray(mask)].astype(str))[:_SHOW]
    return ", ".join(repr(v) if len(v) <= ECHO_LIMIT else f"{v[:ECHO_LIMIT - 1]!r}… "
                     f"({len(v)} characters)" for v in vals)


def _check_columns(frame: pd.DataFrame, features: FeatureSet) -> list[str]:
    problems = []
    present = [str(c) for c in frame.columns]
    for col in (*REQUIRED, *features.names):
        if col in frame.columns:
            continue
        close = difflib.get_close_matches(col, present, n=1, cutoff=0.6)
        hint = (f" A column '{shorten(close[0])}' exists: rename it to '{col}'." if close else
                f" Add it (columns found: {', '.join(shorten(c, 40) for c in present[:12])}"
                f"{' …' if len(present) > 12 else ''}).")
        what = "required column" if col in REQUIRED else f"feature column of set '{features.name}'"
        problems.append(f"column '{col}': missing ({what}).{hint}")
    return problems


def _numeric(frame: pd.DataFrame, col: str, problems: list[str],
             first_row: int = 0) -> pd.Series:
    raw = frame[col]
    num = pd.to_numeric(raw, errors="coerce") if raw.dtype != bool else raw.astype(float)
    bad = num.isna() & raw.notna() & (raw.astype(str).str.strip() != "")
    if bad.any():
        problems.append(f"column '{col}': non-numeric values ({_bad_values(raw, bad)}) in "
                        f"{_where(frame, bad, first_row)}. Use numbers only.")
    return num.astype(float)


def _check_rating(frame: pd.DataFrame, problems: list[str]) -> pd.Series:
    rating = _numeric(frame, "rating", problems)
    out = rating.notna() & ((rating < 1) | (rating > 5))
    if out.any():
        problems.append(f"column 'rating': values outside [1, 5] ({_bad_values(rating, out)}) in "
                        f"{_where(frame, out)}. Ratings are mean 1–5 star ratings; leave unrated "
                        "sessions empty.")
    return rating


def _check_feature(frame: pd.DataFrame, spec, problems: list[str],
                   first_row: int = 0) -> pd.Series:
    """Check one feature column by its kind, append problems, return the typed column."""
    col, kind = spec.name, spec.kind
    raw = frame[col]
    missing = raw.isna()

    def where(mask) -> str:
        return _where(frame, mask, first_row)

    if missing.any():
        problems.append(f"column '{col}': empty/NaN values in {where(missing)}. Every "
                        f"session needs a value for {kind} feature '{col}' (impute or drop those "
                        "rows).")
    if kind == "categorical":
        values = raw.astype("string")
        if spec.values:
            # Case, spaces, '-' and '_' do not matter, and declared aliases count: the table
            # gets the canonical value ('Fix Bugs' -> fix_bugs).
            keys = values.str.casefold().str.replace(r"[\s_\-]+", "", regex=True)
            canonical = keys.map(spec.canonical())
            unknown = (~missing & canonical.isna()).to_numpy()
            if unknown.any():
                aliases = getattr(spec, "aliases", ())
                extra = (f" (also their aliases, e.g. '{aliases[0][0]}')" if aliases else "")
                problems.append(f"column '{col}': unknown category value(s) "
                                f"{_bad_values(raw, unknown)} in {where(unknown)}. "
                                f"Allowed: {', '.join(spec.values)}{extra}; case, spaces, "
                                "'-' and '_' do not matter.")
            values = canonical.where(canonical.notna(), values)
        return values.fillna("").astype(str)
    num = _numeric(frame, col, problems, first_row)
    ok = num.notna()
    if kind in ("flag", "count"):
        inf = ok & ~np.isfinite(num)
        if inf.any():
            problems.append(f"column '{col}': infinite values in {where(inf)}. A {kind} "
                            f"needs {'0 or 1' if kind == 'flag' else 'integers >= 0'}.")
            ok = ok & ~inf
            num = num.where(~inf, np.nan)
    if kind == "flag":
        bad = ok & ~num.isin([0.0, 1.0])
        if bad.any():
            problems.append(f"column '{col}': a 0/1 flag has other values "
                            f"({_bad_values(raw, bad)}) in {where(bad)}. Use 0 or 1.")
        return num.fillna(0).astype("int64")
    if kind == "count":
        neg = ok & (num < 0)
        if neg.any():
            problems.append(f"column '{col}': negative counts ({_bad_values(raw, neg)}) in "
                            f"{where(neg)}. Counts are integers >= 0.")
        frac = ok & (num != np.floor(num))
        if frac.any():
            problems.append(f"column '{col}': non-integer counts ({_bad_values(raw, frac)}) in "
                            f"{where(frac)}. Counts are integers >= 0.")
        return num.fillna(0).astype("int64")
    inf = ok & ~np.isfinite(num)
    if inf.any():
        problems.append(f"column '{col}': infinite values in {where(inf)}. Use finite "
                        "numbers.")
    return num


@dataclass(frozen=True)
class ArmCounts:
    """Labeled and unlabeled sessions of one arm."""

    condition: str
    n_labeled: int
    n_unlabeled: int


@dataclass(frozen=True)
class SessionTable:
    """A validated session table.

    Attributes:
        frame: Typed frame (ratings float with NaN for unlabeled, flags/counts int64,
            categoricals str, ``case_study`` "" for sessions in no test, ``user_id`` filled).
        path: Where it was read from.
        features: The feature set it was validated against.
        case_studies: The two-arm case studies present in the data.
        notes: Things the user should know (guessed controls, skipped case studies).
    """

    frame: pd.DataFrame
    path: str
    features: FeatureSet
    case_studies: tuple[CaseStudy, ...] = ()
    notes: tuple[str, ...] = field(default_factory=tuple)

    @property
    def labeled(self) -> np.ndarray:
        """Boolean mask of rated sessions."""
        return self.frame["rating"].notna().to_numpy()

    def case_study(self, name: str) -> CaseStudy:
        """Return the case study called ``name``."""
        for study in self.case_studies:
            if study.name == name:
                return study
        raise KeyError(name)

    def arm_counts(self, study: CaseStudy) -> tuple[ArmCounts, ArmCounts]:
        """Labeled/unlabeled counts of the control and treatment arm."""
        in_study = self.frame["case_study"] == study.name
        out = []
        for cond in (study.control, study.treatment):
            arm = (in_study & (self.frame["condition"] == cond)).to_numpy()
            n_lab = int((arm & self.labeled).sum())
            out.append(ArmCounts(cond, n_lab, int(arm.sum()) - n_lab))
        return out[0], out[1]


def validate_frame(
    frame: pd.DataFrame,
    path: str,
    features: FeatureSet,
    configured: Mapping[str, CaseStudy] | None = None,
    only: Iterable[str] | None = None,
) -> SessionTable:
    """Check a raw frame against the contract and return the typed table.

    Args:
        frame: The raw table.
        path: File name used in messages.
        features: Feature set whose columns must be present and valid.
        configured: Configured case studies by name.
        only: Restrict case-study checks to these names (each must be present in the data).

    Returns:
        The validated :class:`SessionTable`.

    Raises:
        DataError: listing every problem found.
    """
    problems = _check_columns(frame, features)
    if problems:
        raise DataError(path, problems)
    out = pd.DataFrame(index=pd.RangeIndex(len(frame)))
    sid = frame["session_id"].astype("string").str.strip()
    empty = (sid.isna() | (sid == "")).to_numpy()
    if empty.any():
        problems.append(f"column 'session_id': empty values in {_where(frame, empty)}. "
                        "Every session needs an id.")
    sid = sid.fillna("").astype(str)
    dup = sid.duplicated(keep=False).to_numpy() & (sid != "").to_numpy()
    if dup.any():
        problems.append(f"column 'session_id': duplicate ids ({_bad_values(sid, dup)}) in "
                        f"{_where(frame, dup)}. Each session must appear once; aggregate "
                        "segment ratings per session "
                        "(pulse_ml.sessions.ratings.aggregate_ratings).")
    out["session_id"] = sid
    user = frame["user_id"] if "user_id" in frame else pd.Series([None] * len(frame))
    user = user.astype("string")
    out["user_id"] = user.where(user.notna() & (user != ""), "session:" + sid).astype(str)
    cs = frame["case_study"] if "case_study" in frame else pd.Series([""] * len(frame))
    out["case_study"] = cs.astype("string").fillna("").astype(str).str.strip()
    cond = frame["condition"].astype("string")
    if cond.isna().any():
        problems.append(f"column 'condition': empty values in {_where(frame, cond.isna())}. "
                        "Use e.g. 'default' for sessions in no test.")
    out["condition"] = cond.fillna("").astype(str).str.strip()
    out["rating"] = _check_rating(frame, problems)
    if "n_ratings" in frame:
        n_r = _numeric(frame, "n_ratings", problems)
        neg = n_r.notna() & (n_r < 0)
        if neg.any():
            problems.append(f"column 'n_ratings': negative values in {_where(frame, neg)}.")
        inf = n_r.notna() & ~np.isfinite(n_r)
        if inf.any():
            problems.append(f"column 'n_ratings': infinite values in {_where(frame, inf)}. "
                            "Use the number of segment ratings (an integer >= 0).")
        out["n_ratings"] = n_r.where(~inf, 0).fillna(0).clip(lower=0).astype("int64")
    else:
        out["n_ratings"] = out["rating"].notna().astype("int64")
    for spec in features.columns:
        out[spec.name] = _check_feature(frame, spec, problems)
    for col in frame.columns:
        if col not in out.columns:
            out[col] = frame[col].to_numpy()

    studies, notes = check_case_studies(out, configured or {}, only, problems)
    if "user_id" not in frame.columns and studies:
        notes.append("no user_id column: every session counts as its own user (sessions of one "
                     "user are correlated; add user_id for cluster-robust intervals).")
    if problems:
        raise DataError(path, problems)
    return SessionTable(frame=out, path=path, features=features,
                        case_studies=tuple(studies), notes=tuple(notes))


def read_table(path: str | Path) -> pd.DataFrame:
    """Read a session-table file without validating it (Parquet, CSV or JSONL)."""
    return read_frame(path)


def load_sessions(
    path: str | Path,
    features: FeatureSet,
    configured: Mapping[str, CaseStudy] | None = None,
    only: Iterable[str] | None = None,
) -> SessionTable:
    """Read and validate a session table (see :func:`validate_frame`)."""
    frame = read_frame(path)
    return validate_frame(frame, str(Path(path)), features, configured, only)


def missing_columns_error(path: str | Path, present: Iterable[str], needed: Iterable[str],
                          model: str) -> PulseError | None:
    """One error naming every column a model needs that the table lacks (None if complete)."""
    present = [str(c) for c in present]
    missing = [c for c in needed if c not in present]
    if not missing:
        return None
    shown = ", ".join(present[:12]) + (" …" if len(present) > 12 else "")
    return PulseError(
        f"{path}: missing column(s) {', '.join(repr(c) for c in missing)} that {model} needs, "
        "which the table lacks. Add them to the table (pulse-ml extract computes the standard "
        "features) or "
        f"rename the columns to these names, or use a model trained on another feature set; "
        f"columns found: {shown or 'none'}.")


def validate_chunk(chunk: pd.DataFrame, features: FeatureSet, path: str | Path,
                   first_row: int, chunk_no: int) -> pd.DataFrame:
    """Check one chunk of a streamed table (ids and the model's feature columns).

    The same column rules as :func:`validate_frame`, with file row numbers.

    Returns:
        The chunk with categorical values spelled canonically (``Fix Bugs`` -> ``fix_bugs``),
        as the model was trained on them.

    Args:
        chunk: The rows read from the file.
        features: The model's feature set.
        path: The input file (for the message).
        first_row: 0-based position of the chunk's first row in the file.
        chunk_no: 1-based chunk number (for the message).

    Raises:
        DataError: listing every problem of the chunk.
    """
    problems: list[str] = []
    ids = chunk["session_id"]
    empty = (ids.isna() | (ids.astype(str).str.strip() == "")).to_numpy()
    if empty.any():
        problems.append(f"column 'session_id': empty values in "
                        f"{_where(chunk, empty, first_row)}. Every session needs an id.")
    canonical = {}
    for spec in features.columns:
        typed = _check_feature(chunk, spec, problems, first_row)
        if spec.kind == "categorical" and spec.values:
            canonical[spec.name] = typed.to_numpy()
    if problems:
        last = first_row + len(chunk)
        problems.append(f"(found in chunk {chunk_no}, rows {first_row + 1}-{last}; nothing was "
                        "written. Fix the rows and run again.)")
        raise DataError(str(path), problems)
    return chunk.assign(**canonical) if canonical else chunk
