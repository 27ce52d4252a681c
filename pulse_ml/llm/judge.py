"""LLM-as-a-judge baseline: the paper's judge prompt on the raw conversation."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from pulse_ml.llm.cache import DiskCache
from pulse_ml.llm.client import Usage, run_batch
from pulse_ml.llm.config import LLMConfig
from pulse_ml.llm.metrics import cv_judge_metrics
from pulse_ml.llm.parse import parse_judge
from pulse_ml.llm.prompts import JUDGE, fit_conversation, messages
from pulse_ml.training.folds import FoldSettings


def judge_sessions(frame: pd.DataFrame, cfg: LLMConfig, cache: DiskCache | None,
                   progress: bool = True, sessions: str = "labeled",
                   ) -> tuple[pd.DataFrame, Usage]:
    """Judge the labeled (or all) sessions of a session table.

    The first ``cfg.max_sessions`` selected sessions (table order) are judged; the other
    selected sessions count as missing.

    Args:
        frame: Session table with ``session_id``, ``rating`` and ``transcript``.
        cfg: The judge endpoint.
        cache: Answer cache.
        progress: Show a progress bar.
        sessions: ``labeled`` (sessions with a rating) or ``all`` (every session; ``rating`` is
            NaN in the unlabeled rows).

    Returns:
        (one row per selected session: ``session_id``, ``rating``, ``likert_score`` (NaN when
        missing), ``binary_satisfied``, ``explanation``, ``error``, ``cached``, usage totals).
    """
    keep = frame["rating"].notna() if sessions == "labeled" else pd.Series(True, frame.index)
    chosen = frame.loc[keep, ["session_id", "rating", "transcript"]].reset_index(drop=True)
    n_judge = len(chosen) if cfg.max_sessions is None else min(cfg.max_sessions, len(chosen))
    reqs = [(messages(fit_conversation(tr, JUDGE, cfg.max_input_tokens)), parse_judge)
            for tr in chosen["transcript"].iloc[:n_judge]]
    results, usage = run_batch(cfg, reqs, cache, desc=f"judging ({cfg.name})", progress=progress)
    out = chosen[["session_id", "rating"]].copy()
    if "user_id" in frame:  # folds keep a user's sessions together, as in training
        out["user_id"] = frame.loc[keep, "user_id"].astype(str).to_numpy()
    score = np.full(len(out), np.nan)
    score[:n_judge] = [r.value["likert_score"] if r.value else np.nan for r in results]
    out["likert_score"] = score
    pad = [None] * (len(out) - n_judge)
    out["binary_satisfied"] = [r.value["binary_satisfied"] if r.value else None
                               for r in results] + pad
    out["explanation"] = [r.value["explanation"] if r.value else "" for r in results] + \
        [""] * len(pad)
    out["error"] = [r.error or "" for r in results] + ["not judged (max_sessions)"] * len(pad)
    out["cached"] = [r.cached for r in results] + [False] * len(pad)
    return out, usage


@dataclass(frozen=True)
class JudgeFeature:
    """A session table with the judge's score as a feature column.

    Attributes:
        table: The input table plus ``column`` (float) and ``flag`` (0/1) columns.
        column: Name of the score column. ``flag``: name of its 0/1 missing-flag column.
        fallback: The value given to sessions without a score (mean score of the judged ones).
        n_filled: Sessions that got the fallback (failed call, not judged, or not selected).
    """

    table: pd.DataFrame
    column: str
    flag: str
    fallback: float
    n_filled: int


def judge_feature(table: pd.DataFrame, judgments: pd.DataFrame, column: str) -> JudgeFeature:
    """Add a judge's likert score to a session table as a numeric feature.

    Each session gets its score from ``judgments`` (matched by ``session_id``). Sessions
    without one (their call failed, ``max_sessions`` stopped before them, or they were not
    selected) get the mean score of the judged sessions and ``<column>_missing = 1``, so a
    model can tell a filled value from a real one. The fallback uses only the judge's own
    scores, never the ratings, so the column stays honest as a feature.

    Args:
        table: The session table (any columns; ``session_id`` unique).
        judgments: Output of :func:`judge_sessions` (``session_id``, ``likert_score``).
        column: Name of the new score column (its flag is ``<column>_missing``).

    Returns:
        A :class:`JudgeFeature` (the input ``table`` is unchanged).

    Notes:
        Mean imputation plus a missing indicator keeps every session usable by every model
        family (the trees and the ordinal logit alike) without inventing a label-based value;
        see e.g. Le Morvan et al., "What's a good imputation to predict with missing values?",
        NeurIPS 2021, on imputation + indicator for prediction.
    """
    scores = judgments.set_index(judgments["session_id"].astype(str))["likert_score"]
    value = table["session_id"].astype(str).map(scores).to_numpy(float)
    judged = value[~np.isnan(value)]
    fallback = float(judged.mean()) if judged.size else float("nan")
    missing = np.isnan(value)
    flag = f"{column}_missing"
    out = table.copy()
    out[column] = np.where(missing, fallback, value)
    out[flag] = missing.astype(np.int64)
    return JudgeFeature(out, column, flag, fallback, int(missing.sum()))


def judge_metrics(judgments: pd.DataFrame, usage: Usage,
                  folds: FoldSettings | None = None) -> dict[str, float]:
    """The metrics logged for a judge run (keys and folds match the trainer's).

    Only labeled judgments are scored (``sessions=all`` adds unlabeled rows); with none, only
    ``n_sessions = 0``, ``n_missing = 0`` and the usage totals are returned.
    """
    judgments = judgments[judgments["rating"].notna()]  # scored against the labeled ones
    if judgments.empty:  # sessions=all on an unlabeled table: nothing to score against
        metrics = {"n_sessions": 0.0, "n_missing": 0.0}
    else:
        groups = judgments["user_id"].to_numpy() if "user_id" in judgments else None
        metrics = cv_judge_metrics(judgments["rating"].to_numpy(float),
                                   judgments["likert_score"].to_numpy(float), folds, groups)
    metrics.update({"cost_usd": usage.cost_usd, "tokens_in": float(usage.tokens_in),
                    "tokens_out": float(usage.tokens_out)})
    return metrics
