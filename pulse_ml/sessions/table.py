"""Validate a session table against the contract and return it typed.

The contract (the project's design card): one row per session with ``session_id`` (unique),
``condition``, ``rating`` (mean segment rating in [1, 5], empty = unlabeled), optional
``user_id``, ``case_study``, ``n_ratings``, ``started_at`` (when the session started: ISO
8601 or epoch seconds, read as UTC) and ``request_prob`` (the probability the session was asked
to rate: :mod:`pulse_ml.sessions.request_prob`), and the feature columns of the chosen feature set.
Every problem is collected first and reported in one message (file, column, first rows, fix).
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from pulse_ml.env.faults import shorten
from pulse_ml.errors import DataError, PulseError
from pulse_ml.sessions.bad_rows import bad_values, numeric_column, where_rows
from pulse_ml.sessions.case_studies import (  # noqa: F401 - MIN_LABELED_PER_ARM re-exported
    MIN_LABELED_PER_ARM,
    CaseStudy,
    check_case_studies,
)
from pulse_ml.sessions.column_checks import check_feature
from pulse_ml.sessions.feature_sets import FeatureSet
from pulse_ml.sessions.readers import read_frame
from pulse_ml.sessions.request_prob import REQUEST_PROB, check_request_prob
from pulse_ml.sessions.text_column import missing_text_note
from pulse_ml.sessions.user_history import KIND as HISTORY
from pulse_ml.sessions.user_history import with_history

REQUIRED = ("session_id", "condition", "rating")
TIME_COLUMN = "started_at"
_EPOCH_MAX = 1e10  # epoch seconds up to the year 2286; larger numbers look like milliseconds
TIME_FIX = "Use ISO 8601 (e.g. 2025-06-02T14:03:00Z; no offset = UTC) or epoch seconds."


def _check_columns(frame: pd.DataFrame, features: FeatureSet) -> list[str]:
    problems = []
    present = [str(c) for c in frame.columns]
    needed = list(dict.fromkeys((*REQUIRED, *features.input_names)))
    for col in needed:
        if col in frame.columns:
            continue
        close = difflib.get_close_matches(col, present, n=1, cutoff=0.6)
        hint = (f" A column '{shorten(close[0])}' exists: rename it to '{col}'." if close else
                f" Add it (columns found: {', '.join(shorten(c, 40) for c in present[:12])}"
                f"{' …' if len(present) > 12 else ''}).")
        what = ("required column" if col in REQUIRED else
                f"needed by feature '{features.history[0].name}' of set '{features.name}': the "
                "user of each session, whose earlier ratings it reads" if col == "user_id"
                and features.history else f"feature column of set '{features.name}'")
        problems.append(f"column '{col}': missing ({what}).{hint}")
    return problems


def _check_rating(frame: pd.DataFrame, problems: list[str]) -> pd.Series:
    rating = numeric_column(frame, "rating", problems)
    out = rating.notna() & ((rating < 1) | (rating > 5))
    if out.any():
        problems.append(f"column 'rating': values outside [1, 5] ({bad_values(rating, out)}) in "
                        f"{where_rows(frame, out)}. Ratings are mean 1–5 star ratings; leave "
                        "unrated sessions empty.")
    return rating


def parse_started_at(raw: pd.Series) -> tuple[pd.Series, np.ndarray, np.ndarray]:
    """Parse a ``started_at`` column to UTC timestamps.

    Accepts datetimes (naive ones are UTC), ISO 8601 strings (with or without an offset; no
    offset = UTC) and epoch seconds (numbers or digit strings).

    Args:
        raw: The column as read.

    Returns:
        ``(parsed, unparseable, out_of_range)``: the column as ``datetime64[us, UTC]`` (NaT where
        missing or bad), a mask of values that are not timestamps, and a mask of epoch numbers
        outside [0, 1e10] s (most likely milliseconds).
    """
    n = len(raw)
    values = raw.reset_index(drop=True)
    out_of_range = np.zeros(n, dtype=bool)
    if isinstance(values.dtype, pd.DatetimeTZDtype):
        parsed = values.dt.tz_convert("UTC")
        return parsed.dt.as_unit("us"), np.zeros(n, dtype=bool), out_of_range
    if pd.api.types.is_datetime64_dtype(values.dtype):
        return values.dt.tz_localize("UTC").dt.as_unit("us"), np.zeros(n, dtype=bool), out_of_range
    if pd.api.types.is_bool_dtype(values.dtype):
        return (pd.Series(pd.NaT, index=values.index, dtype="datetime64[us, UTC]"),
                values.notna().to_numpy(), out_of_range)
    text = values.astype("string").str.strip()
    empty = (text.isna() | (text == "")).to_numpy()
    number = pd.to_numeric(text.where(~empty), errors="coerce").to_numpy(dtype=float)
    is_num = ~empty & np.isfinite(number)
    out_of_range = is_num & ((number < 0) | (number > _EPOCH_MAX))
    epoch = np.where(is_num & ~out_of_range, number, np.nan)
    from_epoch = pd.to_datetime(pd.Series(epoch), unit="s", utc=True, errors="coerce")
    iso = pd.to_datetime(text.where(~empty & ~is_num), utc=True, format="ISO8601",
                         errors="coerce")
    parsed = iso.where(~is_num, from_epoch).dt.as_unit("us")
    unparseable = ~empty & ~is_num & parsed.isna().to_numpy()
    return parsed, unparseable, out_of_range


def _check_started_at(frame: pd.DataFrame, problems: list[str]) -> pd.Series:
    parsed, bad, out_of_range = parse_started_at(frame[TIME_COLUMN])
    raw = frame[TIME_COLUMN].reset_index(drop=True)
    if bad.any():
        problems.append(f"column '{TIME_COLUMN}': unparseable values ({bad_values(raw, bad)}) "
                        f"in {where_rows(frame, bad)}. {TIME_FIX}")
    if out_of_range.any():
        problems.append(f"column '{TIME_COLUMN}': epoch values outside 1970-2286 "
                        f"({bad_values(raw, out_of_range)}) in {where_rows(frame, out_of_range)}. "
                        "Epoch times are in seconds (values above 1e10 look like "
                        "milliseconds: divide them by 1000).")
    return parsed.where(~(bad | out_of_range))


def study_arms(frame: pd.DataFrame,
               studies: Iterable[CaseStudy]) -> tuple[np.ndarray, np.ndarray]:
    """Per row: index of its case study in ``studies`` (-1 = none of their arms) and its arm.

    One hash lookup of (case_study, condition) per row, whatever the number of case studies.

    Returns:
        ``(group, arm)``: int64 arrays; ``arm`` is 1 for the treatment, 0 otherwise.
    """
    pairs, codes = [], []
    for g, study in enumerate(studies):
        pairs += [(study.name, study.control), (study.name, study.treatment)]
        codes += [(g, 0), (g, 1)]
    if not pairs:
        return np.full(len(frame), -1, dtype=np.int64), np.zeros(len(frame), dtype=np.int64)
    index = pd.MultiIndex.from_tuples(pairs)
    pos = index.get_indexer(pd.MultiIndex.from_arrays(
        [frame["case_study"].astype(str), frame["condition"].astype(str)]))
    table = np.asarray(codes, dtype=np.int64)
    found = pos >= 0
    return (np.where(found, table[pos, 0], -1).astype(np.int64),
            np.where(found, table[pos, 1], 0).astype(np.int64))


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
        DataError: listing every problem found: the missing columns and the bad values of the
            columns present (a missing column does not hide the others' problems).
    """
    # Positions, not labels: a caller's index (shuffled, filtered, 100..) would otherwise align
    # the checked columns by label and the rest (started_at, extra columns) by position.
    frame = frame.reset_index(drop=True)  # copy-on-write: no data copied
    problems = _check_columns(frame, features)
    # A missing column is a problem (the table is never returned): a stand-in lets the
    # columns present be checked too, so one message lists every problem of the file.
    lacks = {c for c in REQUIRED if c not in frame.columns}
    out = pd.DataFrame(index=pd.RangeIndex(len(frame)))
    stand_in = pd.Series(np.arange(len(frame)), index=frame.index)  # unique, never empty
    ids = frame["session_id"] if "session_id" in frame else stand_in
    sid = ids.astype("string").str.strip()
    empty = (sid.isna() | (sid == "")).to_numpy()
    if empty.any():
        problems.append(f"column 'session_id': empty values in {where_rows(frame, empty)}. "
                        "Every session needs an id.")
    sid = sid.fillna("").astype(str)
    dup = sid.duplicated(keep=False).to_numpy() & (sid != "").to_numpy()
    if dup.any():
        problems.append(f"column 'session_id': duplicate ids ({bad_values(sid, dup)}) in "
                        f"{where_rows(frame, dup)}. Each session must appear once; aggregate "
                        "segment ratings per session "
                        "(pulse_ml.sessions.ratings.aggregate_ratings).")
    out["session_id"] = sid
    user = frame["user_id"] if "user_id" in frame else pd.Series([None] * len(frame))
    user = user.astype("string")
    out["user_id"] = user.where(user.notna() & (user != ""), "session:" + sid).astype(str)
    cs = frame["case_study"] if "case_study" in frame else pd.Series([""] * len(frame))
    out["case_study"] = cs.astype("string").fillna("").astype(str).str.strip()
    cond = (frame["condition"] if "condition" in frame else stand_in).astype("string")
    if cond.isna().any():
        problems.append(f"column 'condition': empty values in {where_rows(frame, cond.isna())}. "
                        "Use e.g. 'default' for sessions in no test.")
    out["condition"] = cond.fillna("").astype(str).str.strip()
    out["rating"] = _check_rating(frame, problems) if "rating" in frame else np.nan
    if "n_ratings" in frame:
        n_r = numeric_column(frame, "n_ratings", problems)
        neg = n_r.notna() & (n_r < 0)
        if neg.any():
            problems.append(f"column 'n_ratings': negative values in {where_rows(frame, neg)}.")
        inf = n_r.notna() & ~np.isfinite(n_r)
        if inf.any():
            problems.append(f"column 'n_ratings': infinite values in {where_rows(frame, inf)}. "
                            "Use the number of segment ratings (an integer >= 0).")
        out["n_ratings"] = n_r.where(~inf, 0).fillna(0).clip(lower=0).astype("int64")
    else:
        out["n_ratings"] = out["rating"].notna().astype("int64")
    text_notes: list[str] = []
    for spec in features.columns:
        if spec.name in frame.columns and spec.kind != HISTORY:
            out[spec.name] = check_feature(frame, spec, problems, notes=text_notes)
    if TIME_COLUMN in frame.columns:
        out[TIME_COLUMN] = _check_started_at(frame, problems)
    if REQUEST_PROB in frame.columns:
        out[REQUEST_PROB] = check_request_prob(frame, out, problems)
    for col in frame.columns:
        if col not in out.columns:  # the array as it is (to_numpy: strings via Python objects)
            out[col] = frame[col].array

    studies, notes = (([], []) if lacks & {"condition", "rating"}  # the arms need both
                      else check_case_studies(out, configured or {}, only, problems))
    notes = text_notes + list(notes)
    if "user_id" not in frame.columns and studies:
        notes.append("no user_id column: every session counts as its own user (sessions of one "
                     "user are correlated; add user_id for cluster-robust intervals).")
    if problems:
        raise DataError(path, problems)
    if features.history:
        out, history_notes = with_history(out, features.history)
        notes += history_notes
    return SessionTable(frame=out, path=path, features=features,
                        case_studies=tuple(studies), notes=tuple(notes))


def load_sessions(
    path: str | Path,
    features: FeatureSet,
    configured: Mapping[str, CaseStudy] | None = None,
    only: Iterable[str] | None = None,
) -> SessionTable:
    """Read and validate a session table (see :func:`validate_frame`).

    The feature set's ``text`` columns are read from CSV as strings.
    """
    frame = read_frame(path, features.of_kind("text"))
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
                   first_row: int, chunk_no: int,
                   missing_text: dict[str, int] | None = None) -> pd.DataFrame:
    """Check one chunk of a streamed table (ids and the model's feature columns).

    The same column rules as :func:`validate_frame`, with file row numbers. Missing values of a
    ``text`` column are no problem (they count as empty text): their number is added to
    ``missing_text`` so the caller can sum them over the chunks and say how many
    (:func:`chunk_notes`).

    Returns:
        The chunk with categorical values spelled canonically (``Fix Bugs`` -> ``fix_bugs``),
        as the model was trained on them.

    Args:
        chunk: The rows read from the file.
        features: The model's feature set.
        path: The input file (for the message).
        first_row: 0-based position of the chunk's first row in the file.
        chunk_no: 1-based chunk number (for the message).
        missing_text: Per text column, missing values so far; this chunk's are added in place.

    Raises:
        DataError: listing every problem of the chunk.
    """
    problems: list[str] = []
    ids = chunk["session_id"]
    empty = (ids.isna() | (ids.astype(str).str.strip() == "")).to_numpy()
    if empty.any():
        problems.append(f"column 'session_id': empty values in "
                        f"{where_rows(chunk, empty, first_row)}. Every session needs an id.")
    canonical = {}
    for spec in features.columns:
        if spec.kind == HISTORY:  # no column of its own: inference/history_scoring.py
            continue
        typed = check_feature(chunk, spec, problems, first_row)
        if spec.kind == "categorical" and spec.values:
            canonical[spec.name] = typed.to_numpy()
        if spec.kind == "text" and missing_text is not None:
            missing_text[spec.name] = (missing_text.get(spec.name, 0)
                                       + int(chunk[spec.name].isna().sum()))
    if problems:
        last = first_row + len(chunk)
        problems.append(f"(found in chunk {chunk_no}, rows {first_row + 1}-{last}; nothing was "
                        "written. Fix the rows and run again.)")
        raise DataError(str(path), problems)
    return chunk.assign(**canonical) if canonical else chunk


def chunk_notes(missing_text: dict[str, int], n_rows: int) -> tuple[str, ...]:
    """The notes of a streamed table: how many sessions of each text column had no text.

    Args:
        missing_text: Missing values per text column, summed over the chunks by
            :func:`validate_chunk`.
        n_rows: Rows read in all.

    Returns:
        One sentence per text column with missing values (the wording of
        :attr:`SessionTable.notes`), in the feature set's order.
    """
    if not missing_text:
        return ()
    notes = (missing_text_note(col, n, n_rows) for col, n in missing_text.items())
    return tuple(note for note in notes if note)


def note_lines(notes: Sequence[str]) -> str:
    """``notes`` as ``note: ...`` lines, each ending in a newline ("" when there are none).

    For the jobs: ``say(note_lines(table.notes), end="")`` prints nothing without notes.
    """
    return "".join(f"note: {note}\n" for note in notes)
