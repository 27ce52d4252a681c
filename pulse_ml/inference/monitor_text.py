"""The terminal view of ``pulse-ml monitor``: one case study's looks and its stopping sentences."""

from __future__ import annotations

import numpy as np
import pandas as pd

from pulse_ml.report.tables import ESTIMATOR_LABELS

__all__ = ["ESTIMATOR_NAMES", "printable", "stop_lines"]

ESTIMATOR_NAMES = ESTIMATOR_LABELS  # the files' estimator values -> the words people read


def _fmt(x: float, digits: int = 3) -> str:
    return "" if not np.isfinite(x) else f"{x:+.{digits}f}"


def _band(lo: float, hi: float) -> str:
    return "" if not (np.isfinite(lo) and np.isfinite(hi)) else f"{lo:+.3f},{hi:+.3f}"


def printable(frame: pd.DataFrame, case_study: str) -> pd.DataFrame:
    """One case study's looks for the terminal (fits 100 columns): both estimators side by side.

    Columns: day, labels, unlabeled, then for naive and PPI++ the effect, the fixed 95% CI and
    the confidence sequence (``lower,upper``; empty before the burn-in).
    """
    sub = frame[frame["case_study"] == case_study]
    naive = sub[sub["estimator"] == "naive"].reset_index(drop=True)
    aug = sub[sub["estimator"] == "augmented"].reset_index(drop=True)
    out = pd.DataFrame({"day": naive["day"].astype(np.int64),
                        "labels": naive["n_labeled"].astype(np.int64),
                        "unlabeled": naive["n_unlabeled"].astype(np.int64)})
    for name, part in (("naive", naive), ("PPI++", aug)):
        out[name] = [_fmt(v) for v in part["effect"]]
        out[f"{name} CI"] = [_band(lo, hi) for lo, hi in zip(part["ci_lower"], part["ci_upper"],
                                                               strict=True)]
        out[f"{name} CS"] = [_band(lo, hi) for lo, hi in zip(part["cs_lower"], part["cs_upper"],
                                                               strict=True)]
    return out


def stop_lines(stops: pd.DataFrame, frame: pd.DataFrame, case_study: str) -> list[str]:
    """Sentences on the first conclusive look of each estimator's sequence (and the peeking).

    E.g. ``PPI++ sequence: conclusive on day 9 with 212 labels (effect +0.210, sequence
    +0.012 to +0.408)``.
    """
    sub = stops[stops["case_study"] == case_study]
    last = frame[frame["case_study"] == case_study]
    last_day = int(last["day"].max())
    lines = []
    for est in ("naive", "augmented"):
        name = ESTIMATOR_NAMES[est]
        row = sub[(sub["estimator"] == est) & (sub["band"] == "sequence")].iloc[0]
        if bool(row["conclusive"]):
            lines.append(f"{name} sequence: conclusive on day {int(row['day'])} with "
                         f"{int(row['n_labeled'])} labels (effect {_fmt(row['effect'])}, "
                         f"sequence {_fmt(row['lower'])} to {_fmt(row['upper'])})")
        else:
            end = last[last["estimator"] == est].iloc[-1]
            lines.append(f"{name} sequence: not conclusive by day {last_day} "
                         f"({int(end['n_labeled'])} labels; sequence {_fmt(end['cs_lower'])} "
                         f"to {_fmt(end['cs_upper'])})")
    peek = sub[(sub["estimator"] == "naive") & (sub["band"] == "fixed")].iloc[0]
    if bool(peek["conclusive"]):
        lines.append(f"(the naive fixed 95% CI first excluded 0 on day {int(peek['day'])}: "
                     "acting on a daily-peeked fixed interval inflates false positives)")
    return lines
