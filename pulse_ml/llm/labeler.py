"""LLM-labeled session features (the paper's two labeling prompts over the user messages)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd

from pulse_ml.llm.cache import DiskCache
from pulse_ml.llm.client import CallResult, Usage, run_batch
from pulse_ml.llm.config import LLMConfig
from pulse_ml.llm.parse import FAILURE_MODES, parse_failure_modes, parse_sentiment_task
from pulse_ml.llm.prompts import FAILURE_MODES as FAILURE_PROMPT
from pulse_ml.llm.prompts import SENTIMENT_TASK, combine_user_messages, messages

LABEL_COLUMNS = ["user_sentiment", "task_category", *FAILURE_MODES]


def label_requests(transcripts: Sequence[str], max_chars: int) -> list:
    """Two requests per session: (sentiment + task) then (failure modes)."""
    reqs = []
    for tr in transcripts:
        combined = combine_user_messages(tr, max_chars)
        reqs.append((messages(SENTIMENT_TASK.format(combined_messages=combined)),
                     parse_sentiment_task))
        reqs.append((messages(FAILURE_PROMPT.format(combined_messages=combined)),
                     parse_failure_modes))
    return reqs


def labels_frame(results: list[CallResult]) -> pd.DataFrame:
    """Assemble per-session label columns (+ ``label_errors``) from paired results.

    Missing answers give None (categories) / NaN (flags); flags are int64 when none is missing.
    """
    first, second = results[0::2], results[1::2]
    frame = pd.DataFrame({
        "user_sentiment": [r.value["user_sentiment"] if r.value else None for r in first],
        "task_category": [r.value["task_category"] if r.value else None for r in first],
    })
    for col in FAILURE_MODES:
        values = np.array([r.value[col] if r.value else np.nan for r in second], dtype=float)
        frame[col] = values.astype(np.int64) if not np.isnan(values).any() else values
    errors = []
    for a, b in zip(first, second, strict=True):
        parts = [f"sentiment_task: {a.error}"] if a.error else []
        parts += [f"failure_modes: {b.error}"] if b.error else []
        errors.append("; ".join(parts))
    frame["label_errors"] = errors
    return frame


def label_sessions(transcripts: Sequence[str], cfg: LLMConfig, cache: DiskCache | None,
                   progress: bool = True,
                   stop_after: int | None = None) -> tuple[pd.DataFrame, Usage]:
    """Label sessions with the LLM features.

    Args:
        transcripts: JSON transcripts (``[{role, text}]``), one per session.
        cfg: The labeler endpoint.
        cache: Answer cache (reruns and resumed runs do not pay again).
        progress: Show a progress bar with live cost.
        stop_after: Stop after this many answers (to simulate an interruption).

    Returns:
        (frame with :data:`LABEL_COLUMNS` + ``label_errors`` in the input order, usage totals).
    """
    reqs = label_requests(transcripts, max_chars=4 * cfg.max_input_tokens)
    results, usage = run_batch(cfg, reqs, cache, desc=f"labeling ({cfg.name})",
                               progress=progress, stop_after=stop_after)
    return labels_frame(results), usage
