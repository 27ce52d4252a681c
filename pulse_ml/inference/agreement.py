"""Agreement of a predictor with human pairwise preferences (Interaction-as-a-Judge style).

A *pair* is two sessions (a, b) and the human's preference: ``a``, ``b`` or ``tie``. A predictor
(the registered model's honest prediction, or any numeric score column such as an LLM judge's)
gives each session a score s; its preference is ``a`` if s_a - s_b > tie_margin, ``b`` if
s_a - s_b < -tie_margin, else ``tie``.

Credit of one pair (human h, predicted p), coding a = +1, b = -1, tie = 0:
``credit = 1 - |h - p| / 2`` — 1 when they agree (including tie = tie), 0 when they pick
opposite sides, 1/2 when exactly one of them is a tie (a coin flip would break the tie the right
way half the time). ``ties="exclude"`` drops pairs the human called a tie (the usual arena
accuracy; a predicted tie on a decisive pair still earns 1/2); ``ties="half"`` keeps them, so a
predicted tie within ``tie_margin`` of a human tie counts as full agreement and a decisive
prediction on a human tie as half. Agreement = mean credit over the kept pairs.

Several sources of one predictor (training seeds, model versions) are summarised as mean and
sample sd across sources; the 95% Wilson interval is computed for the mean agreement with n =
number of pairs (``interval_n="pairs"``, default), or over pooled seed x pair outcomes
(``"pooled"``, as Interaction-as-a-Judge's Figs. 9-10; narrower, because it treats repeated
seeds of one pair as independent).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import pandas as pd
from numpy.typing import ArrayLike, NDArray
from scipy.stats import norm

from pulse_ml.errors import DataError
from pulse_ml.sessions.bad_rows import bad_values, where_rows

PREFERENCES = {"a": 1, "b": -1, "tie": 0}
PAIR_COLUMNS = ("pair_id", "session_a", "session_b", "preference")
ALL = "(all)"


def wilson_interval(successes: ArrayLike, n: ArrayLike, alpha: float = 0.05) -> \
        tuple[NDArray[np.float64], NDArray[np.float64]]:
    """Wilson score interval for a binomial proportion (vectorized).

    ``center = (p + z^2/2n) / (1 + z^2/n)``,
    ``half = z / (1 + z^2/n) * sqrt(p (1 - p) / n + z^2 / 4n^2)`` with p = successes / n.
    Fractional successes (half credits) are allowed. n = 0 gives NaN.

    Args:
        successes: Number (or credit sum) of successes, any shape.
        n: Number of trials, broadcastable to ``successes``.
        alpha: Error level of the two-sided interval (0.05 -> 95%).

    Returns:
        ``(lower, upper)`` arrays in [0, 1].

    Notes:
        E. B. Wilson, Probable inference, the law of succession, and statistical inference.
        JASA 22(158), 1927.
    """
    x = np.asarray(successes, float)
    nn = np.asarray(n, float)
    z = norm.ppf(1.0 - alpha / 2.0)
    with np.errstate(invalid="ignore", divide="ignore"):
        p = x / nn
        denom = 1.0 + z * z / nn
        center = (p + z * z / (2.0 * nn)) / denom
        half = z / denom * np.sqrt(p * (1.0 - p) / nn + z * z / (4.0 * nn * nn))
    lo = np.where(nn > 0, np.clip(center - half, 0.0, 1.0), np.nan)
    hi = np.where(nn > 0, np.clip(center + half, 0.0, 1.0), np.nan)
    return lo, hi


def predicted_preference(score_a: ArrayLike, score_b: ArrayLike, tie_margin: float = 0.0) -> \
        NDArray[np.float64]:
    """Predicted preference code per pair: +1 (a), -1 (b), 0 (tie); NaN if a score is missing."""
    d = np.asarray(score_a, float) - np.asarray(score_b, float)
    code = np.where(d > tie_margin, 1.0, np.where(d < -tie_margin, -1.0, 0.0))
    return np.where(np.isnan(d), np.nan, code)


def pair_credit(human: ArrayLike, predicted: ArrayLike) -> NDArray[np.float64]:
    """Credit per pair: 1 same, 0 opposite sides, 1/2 when exactly one is a tie."""
    return 1.0 - np.abs(np.asarray(human, float) - np.asarray(predicted, float)) / 2.0


def agreement_outcomes(human: ArrayLike, score_a: ArrayLike, score_b: ArrayLike,
                       ties: str = "exclude", tie_margin: float = 0.0) -> NDArray[np.float64]:
    """Credit per pair under the tie rule; NaN for pairs that do not count.

    Args:
        human: Human preference codes (+1 a, -1 b, 0 tie).
        score_a: Predictor score of session a per pair.
        score_b: Predictor score of session b per pair.
        ties: ``"exclude"`` (drop human ties) or ``"half"`` (keep them, see module docstring).
        tie_margin: |s_a - s_b| <= tie_margin is a predicted tie.

    Returns:
        Credit in {0, 0.5, 1} per pair, NaN for excluded pairs or missing scores.
    """
    if ties not in ("exclude", "half"):
        raise ValueError(f"ties must be 'exclude' or 'half', got {ties!r}")
    h = np.asarray(human, float)
    credit = pair_credit(h, predicted_preference(score_a, score_b, tie_margin))
    if ties == "exclude":
        credit = np.where(h == 0, np.nan, credit)
    return credit


def agreement_table(categories: ArrayLike, outcomes: Mapping[str, Mapping[str, ArrayLike]],
                    alpha: float = 0.05, interval_n: str = "pairs") -> \
        tuple[pd.DataFrame, pd.DataFrame]:
    """Agreement per predictor and category (plus ``(all)``), mean ± sd over sources.

    Args:
        categories: Category per pair, shape (P,).
        outcomes: ``{predictor: {source: credit per pair (NaN = not counted)}}``.
        alpha: Error level of the Wilson intervals.
        interval_n: ``"pairs"`` (n = counted pairs, mean agreement) or ``"pooled"`` (n = all
            seed x pair outcomes).

    Returns:
        ``(summary, per_source)``: summary has one row per predictor x category with
        ``n_pairs``, ``n_sources``, ``agreement_pct`` (mean), ``sd_pct``, ``ci_lower_pct``,
        ``ci_upper_pct``; per_source one row per predictor x source x category.
    """
    if interval_n not in ("pairs", "pooled"):
        raise ValueError(f"interval_n must be 'pairs' or 'pooled', got {interval_n!r}")
    cats = pd.Series(np.asarray(categories).astype(str))
    codes, names = pd.factorize(cats, sort=True)
    k = len(names)
    per_source, summary = [], []
    for predictor, sources in outcomes.items():
        xs, ns = [], []
        for source, credit in sources.items():
            c = np.asarray(credit, float)
            ok = ~np.isnan(c)
            x = np.append(np.bincount(codes[ok], weights=c[ok], minlength=k), c[ok].sum())
            n = np.append(np.bincount(codes[ok], minlength=k), ok.sum()).astype(float)
            xs.append(x)
            ns.append(n)
            with np.errstate(invalid="ignore", divide="ignore"):
                lo, hi = wilson_interval(x, n, alpha)
                per_source.append(pd.DataFrame({
                    "predictor": predictor, "source": source, "category": [*names, ALL],
                    "n_pairs": n.astype(int), "agreement_pct": 100 * x / n,
                    "ci_lower_pct": 100 * lo, "ci_upper_pct": 100 * hi}))
        x_all, n_all = np.vstack(xs), np.vstack(ns)
        with np.errstate(invalid="ignore", divide="ignore"):
            props = x_all / n_all
        valid = np.isfinite(props)
        n_valid = valid.sum(axis=0)
        mean = np.where(n_valid > 0, np.nansum(np.where(valid, props, 0.0), axis=0)
                        / np.maximum(n_valid, 1), np.nan)
        sd = pd.DataFrame(props).std(axis=0, ddof=1).to_numpy() if len(xs) > 1 else \
            np.full(k + 1, np.nan)
        if interval_n == "pooled":
            lo, hi = wilson_interval(x_all.sum(axis=0), n_all.sum(axis=0), alpha)
        else:
            n_pairs = n_all.mean(axis=0)
            lo, hi = wilson_interval(mean * n_pairs, n_pairs, alpha)
        summary.append(pd.DataFrame({
            "predictor": predictor, "category": [*names, ALL],
            "n_pairs": np.rint(n_all.mean(axis=0)).astype(int), "n_sources": n_valid,
            "agreement_pct": 100 * mean, "sd_pct": 100 * sd, "ci_lower_pct": 100 * lo,
            "ci_upper_pct": 100 * hi}))
    summary_frame = pd.concat(summary, ignore_index=True)
    per_source_frame = pd.concat(per_source, ignore_index=True)
    if list(names) == [ALL]:  # no categories: keep the single overall row
        summary_frame = summary_frame.drop_duplicates(["predictor", "category"], keep="last")
        per_source_frame = per_source_frame.drop_duplicates(["predictor", "source", "category"],
                                                            keep="last")
    return summary_frame.reset_index(drop=True), per_source_frame.reset_index(drop=True)


def _rows(frame: pd.DataFrame, mask: ArrayLike) -> str:
    return where_rows(frame, mask, id_column="pair_id")


def validate_pairs(frame: pd.DataFrame, path: str, session_ids: Sequence[str],
                   category_column: str | None = "category",
                   sessions_path: str = "the session table") -> pd.DataFrame:
    """Check a pairs table and return it typed (preference as a code, category as str).

    Args:
        frame: Raw pairs table.
        path: Its file name (for messages).
        session_ids: Every session_id of the session table.
        category_column: Column with the pair's category (None = one category ``(all)``).
        sessions_path: The session table's file name (for messages).

    Returns:
        Frame with ``pair_id``, ``session_a``, ``session_b``, ``preference`` (a/b/tie),
        ``human`` (+1/-1/0) and ``category``.

    Raises:
        DataError: listing every problem (column, rows, how to fix).
    """
    needed = [*PAIR_COLUMNS, *([category_column] if category_column else [])]
    missing = [c for c in needed if c not in frame.columns]
    if missing:
        found = ", ".join(map(str, frame.columns[:12]))
        raise DataError(path, [f"column '{c}': missing (columns found: {found}). A pairs table "
                               "needs pair_id, session_a, session_b, preference (a, b or tie)"
                               + (f" and {category_column}" if category_column else "")
                               + "; set pairs.category_column=null for no categories."
                               for c in missing])
    problems: list[str] = []
    out = pd.DataFrame({c: frame[c].astype("string").str.strip() for c in PAIR_COLUMNS})
    for col in PAIR_COLUMNS:
        empty = (out[col].isna() | (out[col] == "")).to_numpy()
        if empty.any():
            problems.append(f"column '{col}': empty values in {_rows(frame, empty)}. Fill them "
                            "or drop those rows.")
    dup = out["pair_id"].duplicated(keep=False).to_numpy() & out["pair_id"].notna().to_numpy()
    if dup.any():
        problems.append(f"column 'pair_id': duplicate ids ({bad_values(out['pair_id'], dup)}) in "
                        f"{_rows(frame, dup)}. Each pair must appear once.")
    pref = out["preference"].str.lower()
    bad = (pref.notna() & (pref != "") & ~pref.isin(list(PREFERENCES))).to_numpy()
    if bad.any():
        problems.append(f"column 'preference': values {bad_values(out['preference'], bad)} in "
                        f"{_rows(frame, bad)}. Use a (session_a preferred), b (session_b "
                        "preferred) or tie.")
    known = pd.Index(pd.Series(session_ids).astype(str))
    for col in ("session_a", "session_b"):
        unknown = (out[col].notna() & (out[col] != "") & ~out[col].isin(known)).to_numpy()
        if unknown.any():
            problems.append(f"column '{col}': session id(s) {bad_values(out[col], unknown)} not "
                            f"in {sessions_path} in {_rows(frame, unknown)}. Fix the ids or "
                            "pass the session table that holds them (data.path=...).")
    same = (out["session_a"] == out["session_b"]).fillna(False).to_numpy()
    if same.any():
        problems.append(f"columns 'session_a'/'session_b': a session compared with itself in "
                        f"{_rows(frame, same)}. A pair needs two different sessions.")
    if problems:
        raise DataError(path, problems)
    out["preference"] = pref
    out["human"] = pref.map(PREFERENCES).astype(int)
    if category_column:
        cat = frame[category_column].astype("string").fillna("(none)").str.strip()
        out["category"] = cat.where(cat != "", "(none)").astype(str)
    else:
        out["category"] = ALL
    return out.astype({c: str for c in PAIR_COLUMNS})
