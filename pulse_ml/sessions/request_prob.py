"""The optional ``request_prob`` column: the probability with which a session was asked to rate.

Written by ``pulse-ml request`` (``requests.csv``) and joined by the user into the session
table. A session with ``request_prob`` and a rating was asked and answered; with
``request_prob`` and no rating it was not asked, or asked and not answered. Rules (checked by
:func:`check_request_prob`, every problem into the table's one error):

* values are numbers in (0, 1]; a rating on a session with ``request_prob`` = 0 (never asked) is
  named on its own;
* a case study that uses the column gives it for every one of its sessions (the inverse-
  probability weights need the probability of every session that could have been asked).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from pulse_ml.sessions.bad_rows import bad_values, numeric_column, where_rows

__all__ = ["REQUEST_PROB", "check_request_prob", "uses_request_prob"]

REQUEST_PROB = "request_prob"

_FIX = ("Write the probability actually used to ask each session (requests.csv of "
        "`pulse-ml request`, column request_prob), or drop the column to analyse the table as "
        "uniformly rated.")


def check_request_prob(frame: pd.DataFrame, out: pd.DataFrame, problems: list[str]) -> pd.Series:
    """Check the raw ``request_prob`` column; return it as float (NaN = not given).

    Args:
        frame: The raw table (has the column).
        out: The typed table so far (``case_study`` and ``rating`` filled).
        problems: Where each problem sentence is appended.
    """
    prob = numeric_column(frame, REQUEST_PROB, problems, fix=_FIX)
    raw = frame[REQUEST_PROB].reset_index(drop=True)
    vals = prob.to_numpy(dtype=float)
    given = ~np.isnan(vals)
    rated = out["rating"].notna().to_numpy()
    zero_rated = given & (vals == 0) & rated
    if zero_rated.any():
        problems.append(f"column '{REQUEST_PROB}': a rating on a session with "
                        f"{REQUEST_PROB} = 0 (never asked) in {where_rows(frame, zero_rated)}. "
                        "A rated session was asked with a positive probability: write that "
                        "probability.")
    outside = given & ~((vals > 0) & (vals <= 1)) & ~zero_rated
    if outside.any():
        problems.append(f"column '{REQUEST_PROB}': values outside (0, 1] "
                        f"({bad_values(raw, outside)}) in {where_rows(frame, outside)}. "
                        "Every session of a case study that is asked by probability needs a "
                        "positive probability (a session that can never be asked cannot be "
                        "represented by the weights; `pulse-ml request` clips to request.min_prob "
                        f"> 0). {_FIX}")
    studies = out["case_study"].to_numpy()
    using = pd.unique(studies[given])
    gaps = ~given & np.isin(studies, using)
    if gaps.any():
        names = ", ".join(repr(s or "(no case study)") for s in pd.unique(studies[gaps])[:5])
        problems.append(f"column '{REQUEST_PROB}': missing for some sessions of case "
                        f"stud{'ies' if len(pd.unique(studies[gaps])) > 1 else 'y'} {names} that "
                        f"use it, in {where_rows(frame, gaps)}. A case study asked by "
                        "probability needs the probability of every session (also the ones not "
                        f"asked). {_FIX}")
    return pd.Series(vals, index=out.index)


def uses_request_prob(frame: pd.DataFrame, rows: np.ndarray) -> bool:
    """Whether any of the sessions ``rows`` (a boolean mask) carries a ``request_prob`` value."""
    if REQUEST_PROB not in frame.columns:
        return False
    return bool(np.isfinite(frame[REQUEST_PROB].to_numpy(dtype=float)[rows]).any())

