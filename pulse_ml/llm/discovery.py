"""Feature discovery: ask LLMs to propose satisfaction features, aggregate the proposals."""

from __future__ import annotations

import re
from collections.abc import Sequence

import numpy as np
import pandas as pd

from pulse_ml.llm.cache import DiskCache
from pulse_ml.llm.client import Usage, run_batch
from pulse_ml.llm.config import LLMConfig
from pulse_ml.llm.parse import parse_discovery
from pulse_ml.llm.prompts import DISCOVERY, fit_conversation, messages

_STOP = {"the", "a", "an", "of", "to", "rate", "count", "number", "flag", "indicator", "score",
         "level", "presence", "user", "agent", "s"}


def normalize_name(name: str) -> str:
    """Canonical snake_case key of a proposed feature name.

    ``"User Frustration Signals"`` -> ``frustration_signal``; ``"git_push"`` -> ``git_push``.
    """
    words = re.findall(r"[a-z0-9]+", name.lower().replace("-", " "))
    kept = [w[:-1] if len(w) > 3 and w.endswith("s") and not w.endswith("ss") else w
            for w in words if w not in _STOP]
    return "_".join(kept or words) or "unnamed"


def sample_conversations(frame: pd.DataFrame, n: int, seed: int) -> pd.DataFrame:
    """Seeded sample of ``n`` sessions with a non-empty transcript (table order kept)."""
    pool = frame[frame["transcript"].astype(str).str.len() > 2]
    if len(pool) <= n:
        return pool
    rng = np.random.default_rng(seed)
    idx = np.sort(rng.choice(len(pool), size=n, replace=False))
    return pool.iloc[idx]


def propose(conversations: pd.DataFrame, models: Sequence[LLMConfig],
            cache: DiskCache | None, progress: bool = True) -> tuple[pd.DataFrame, Usage]:
    """Run the discovery prompt for every (model, conversation).

    Returns:
        (one row per proposed feature: ``model``, ``session_id``, ``name``, ``key``,
        ``definition``, ``value_type``, ``polarity``; total usage over all models).
    """
    rows: list[dict] = []
    total = Usage()
    for cfg in models:
        reqs = [(messages(fit_conversation(tr, DISCOVERY, cfg.max_input_tokens)),
                 parse_discovery) for tr in conversations["transcript"]]
        results, usage = run_batch(cfg, reqs, cache, desc=f"discovery ({cfg.name})",
                                   progress=progress)
        for field_name in ("calls", "cached", "retries", "missing", "tokens_in", "tokens_out",
                           "cost_usd"):
            setattr(total, field_name, getattr(total, field_name) + getattr(usage, field_name))
        for sid, res in zip(conversations["session_id"], results, strict=True):
            for feat in res.value or []:
                rows.append({"model": cfg.name, "session_id": sid, **feat,
                             "key": normalize_name(feat["name"])})
    cols = ["model", "session_id", "name", "key", "definition", "value_type", "polarity"]
    return pd.DataFrame(rows, columns=cols), total


def _mode(s: pd.Series) -> str:
    counts = s[s != ""].value_counts()
    return str(counts.index[0]) if len(counts) else ""


def aggregate(proposals: pd.DataFrame) -> pd.DataFrame:
    """Rank proposed features by how many conversations and models proposed them.

    Returns:
        One row per normalized key: ``key``, ``name`` (most common spelling), ``definition``,
        ``value_type``, ``polarity`` (most common), ``n_conversations``, ``n_models``,
        ``n_proposals``, ``models``; sorted by n_conversations, n_models, key.
    """
    if proposals.empty:
        return pd.DataFrame(columns=["key", "name", "definition", "value_type", "polarity",
                                     "n_conversations", "n_models", "n_proposals", "models"])
    g = proposals.groupby("key", sort=False)
    out = pd.DataFrame({
        "name": g["name"].agg(_mode),
        "definition": g["definition"].agg(_mode),
        "value_type": g["value_type"].agg(_mode),
        "polarity": g["polarity"].agg(_mode),
        "n_conversations": g["session_id"].nunique(),
        "n_models": g["model"].nunique(),
        "n_proposals": g.size(),
        "models": g["model"].agg(lambda s: ",".join(sorted(set(s)))),
    }).reset_index()
    return out.sort_values(["n_conversations", "n_models", "key"],
                           ascending=[False, False, True]).reset_index(drop=True)


def to_markdown(ranked: pd.DataFrame, n_conversations: int, models: Sequence[str]) -> str:
    """Render the ranked list as a Markdown report."""
    lines = ["# Proposed satisfaction features", "",
             f"{n_conversations} conversation(s) x {len(models)} model(s) "
             f"({', '.join(models)}); ranked by how many conversations proposed each feature.",
             "", "| rank | feature | definition | type | polarity | conversations | models |",
             "|---:|---|---|---|---|---:|---:|"]
    for i, row in enumerate(ranked.itertuples(index=False), start=1):
        definition = str(row.definition).replace("|", "/").replace("\n", " ")[:160]
        lines.append(f"| {i} | `{row.key}` ({row.name}) | {definition} | {row.value_type} | "
                     f"{row.polarity} | {row.n_conversations} | {row.n_models} |")
    return "\n".join(lines) + "\n"
