"""LLM-as-a-judge baseline: the paper's judge prompt on the raw conversation."""

from __future__ import annotations

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
                   progress: bool = True) -> tuple[pd.DataFrame, Usage]:
    """Judge the labeled sessions of a session table.

    The first ``cfg.max_sessions`` labeled sessions (table order) are judged; the others of the
    labeled set count as missing.

    Args:
        frame: Session table with ``session_id``, ``rating`` and ``transcript``.
        cfg: The judge endpoint.
        cache: Answer cache.
        progress: Show a progress bar.

    Returns:
        (one row per labeled session: ``session_id``, ``rating``, ``likert_score`` (NaN when
        missing), ``binary_satisfied``, ``explanation``, ``error``, ``cached``, usage totals).
    """
    labeled = frame.loc[frame["rating"].notna(), ["session_id", "rating", "transcript"]]
    labeled = labeled.reset_index(drop=True)
    n_judge = len(labeled) if cfg.max_sessions is None else min(cfg.max_sessions, len(labeled))
    reqs = [(messages(fit_conversation(tr, JUDGE, cfg.max_input_tokens)), parse_judge)
            for tr in labeled["transcript"].iloc[:n_judge]]
    results, usage = run_batch(cfg, reqs, cache, desc=f"judging ({cfg.name})", progress=progress)
    out = labeled[["session_id", "rating"]].copy()
    if "user_id" in frame:  # folds keep a user's sessions together, as in training
        out["user_id"] = frame.loc[frame["rating"].notna(), "user_id"].astype(str).to_numpy()
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


def judge_metrics(judgments: pd.DataFrame, usage: Usage,
                  folds: FoldSettings | None = None) -> dict[str, float]:
    """The metrics logged for a judge run (keys and folds match the trainer's)."""
    groups = judgments["user_id"].to_numpy() if "user_id" in judgments else None
    metrics = cv_judge_metrics(judgments["rating"].to_numpy(float),
                               judgments["likert_score"].to_numpy(float), folds, groups)
    metrics.update({"cost_usd": usage.cost_usd, "tokens_in": float(usage.tokens_in),
                    "tokens_out": float(usage.tokens_out)})
    return metrics
