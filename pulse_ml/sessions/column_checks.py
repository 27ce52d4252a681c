"""Per-feature column checks: one feature column of a session table, checked by its kind.

``categorical`` (allowed values and aliases, spelled canonically), ``count`` (integers >= 0),
``flag`` (0/1), ``numeric`` (finite numbers) and ``text`` (the text-column rule of
:mod:`pulse_ml.sessions.text_column`). Used for the whole table
(:func:`pulse_ml.sessions.table.validate_frame`) and chunk by chunk when streaming
(:func:`pulse_ml.sessions.table.validate_chunk`); every problem is appended to one list so the
caller reports them all in one error.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from pulse_ml.sessions.bad_rows import bad_values, numeric_column, where_rows
from pulse_ml.sessions.feature_sets import FeatureSpec
from pulse_ml.sessions.text_column import check_text_feature

__all__ = ["check_feature"]


def check_feature(frame: pd.DataFrame, spec: FeatureSpec, problems: list[str],
                   first_row: int = 0, notes: list[str] | None = None) -> pd.Series:
    """Check one feature column by its kind, append problems, return the typed column.

    A ``text`` column's missing values are not a problem: they count as empty text and a
    sentence saying how many is appended to ``notes``.
    """
    col, kind = spec.name, spec.kind
    if kind == "text":
        return check_text_feature(frame, col, problems, notes, first_row)
    raw = frame[col]
    missing = raw.isna()

    def where(mask) -> str:
        return where_rows(frame, mask, first_row)

    if missing.any():
        problems.append(f"column '{col}': empty/NaN values in {where(missing)}. Every "
                        f"session needs a value for {kind} feature '{col}' (impute or drop those "
                        "rows).")
    if kind == "categorical":
        values = raw.astype("string")
        if spec.values:
            # Case, spaces, '-' and '_' do not matter, and declared aliases count: the table
            # gets the canonical value ('Fix Bugs' -> fix_bugs).
            # the regex runs once per distinct value (a few), not once per row
            codes, uniques = pd.factorize(values)
            keys = pd.Series(uniques, dtype="string").str.casefold().str.replace(
                r"[\s_\-]+", "", regex=True)
            mapped = keys.map(spec.canonical()).to_numpy(dtype=object, na_value=None)
            canonical = pd.Series(np.append(mapped, None)[codes], index=values.index,
                                  dtype="string")
            unknown = (~missing & canonical.isna()).to_numpy()
            if unknown.any():
                aliases = getattr(spec, "aliases", ())
                extra = (f" (also their aliases, e.g. '{aliases[0][0]}')" if aliases else "")
                problems.append(f"column '{col}': unknown category value(s) "
                                f"{bad_values(raw, unknown)} in {where(unknown)}. "
                                f"Allowed: {', '.join(spec.values)}{extra}; case, spaces, "
                                "'-' and '_' do not matter.")
            values = canonical.where(canonical.notna(), values)
        return values.fillna("").astype(str)
    num = numeric_column(frame, col, problems, first_row)
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
                            f"({bad_values(raw, bad)}) in {where(bad)}. Use 0 or 1.")
        return num.fillna(0).astype("int64")
    if kind == "count":
        neg = ok & (num < 0)
        if neg.any():
            problems.append(f"column '{col}': negative counts ({bad_values(raw, neg)}) in "
                            f"{where(neg)}. Counts are integers >= 0.")
        frac = ok & (num != np.floor(num))
        if frac.any():
            problems.append(f"column '{col}': non-integer counts ({bad_values(raw, frac)}) in "
                            f"{where(frac)}. Counts are integers >= 0.")
        return num.fillna(0).astype("int64")
    inf = ok & ~np.isfinite(num)
    if inf.any():
        problems.append(f"column '{col}': infinite values in {where(inf)}. Use finite "
                        "numbers.")
    return num
