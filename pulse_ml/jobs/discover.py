"""Ask LLMs to propose satisfaction features (paper Appendix A.2, Table 4).

Samples ``n_conversations`` conversations (seeded) from a session table with a ``transcript``
column, sends the paper's feature-proposal prompt to each model in ``models``, and aggregates
the proposals into a ranked list (normalized name, definition, value type, polarity, how many
conversations / models proposed it) written as Markdown and JSON to ``output`` and logged to
MLflow (experiment ``pulse-judge``). Answers are cached on disk.

Example:
    pulse-ml discover data.path=data/sessions.parquet n_conversations=10
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from pulse_ml import keys
from pulse_ml.errors import PulseError
from pulse_ml.llm.config import LLMConfig
from pulse_ml.settings import llm_config_from_mapping


@dataclass(frozen=True)
class DiscoverSettings:
    """Everything ``pulse-ml discover`` needs."""

    data_path: Path
    models: tuple[LLMConfig, ...]
    n_conversations: int
    seed: int
    output: Path
    cache_dir: Path | None = None
    progress: bool = True


@dataclass
class DiscoverResult:
    """Ranked features, raw proposals and where they were written."""

    ranked: pd.DataFrame
    proposals: pd.DataFrame
    markdown_path: Path
    json_path: Path
    run_id: str


def settings_from_config(cfg) -> DiscoverSettings:
    """Convert the composed config to :class:`DiscoverSettings`."""
    from pulse_ml.config import flag, number, require_data_path

    data_path = require_data_path(cfg, "discover")
    models = list(cfg.get("models") or [])
    if not models:
        raise PulseError("pulse-ml discover: `models` is empty; list at least one model "
                         "(keys as in conf/labeler/*.yaml).")
    return DiscoverSettings(
        data_path=data_path,
        models=tuple(llm_config_from_mapping(m, f"model{i}", "discover")
                     for i, m in enumerate(models)),
        n_conversations=number(cfg, "n_conversations", "discover", 1, None, integer=True),
        seed=number(cfg, "seed", "discover", integer=True),
        output=Path(str(cfg.output)).expanduser(),
        cache_dir=Path(str(cfg.cache_dir)).expanduser() if cfg.get("cache_dir") else None,
        progress=flag(cfg, "progress", "discover", True))


def discover(s: DiscoverSettings) -> DiscoverResult:
    """Propose, aggregate, write and log features."""
    from pulse_ml.llm.cache import DiskCache
    from pulse_ml.llm.discovery import aggregate, propose, sample_conversations, to_markdown
    from pulse_ml.registry.llm_runs import log_run
    from pulse_ml.sessions.readers import read_transcript_table

    frame = read_transcript_table(s.data_path, need_rating=False)
    sample = sample_conversations(frame, s.n_conversations, s.seed)
    if sample.empty:
        raise PulseError(f"{s.data_path}: no session has a non-empty transcript.")
    start = time.perf_counter()
    proposals, usage = propose(sample, s.models, DiskCache(s.cache_dir) if s.cache_dir
                               else None, progress=s.progress)
    ranked = aggregate(proposals)
    names = [m.name for m in s.models]
    markdown = to_markdown(ranked, len(sample), names)
    payload = json.dumps({"n_conversations": len(sample), "models": names,
                          "features": ranked.to_dict("records")}, indent=2)
    from pulse_ml.env.atomic import staged_outputs

    md_path, json_path = s.output / "features.md", s.output / "features.json"
    with staged_outputs(s.output) as stage:  # both files complete, or neither
        (stage / md_path.name).write_text(markdown, encoding="utf-8")
        (stage / json_path.name).write_text(payload, encoding="utf-8")
    run_id = log_run(
        keys.JUDGE_EXPERIMENT, f"discover-{'+'.join(names)}",
        tags={keys.KIND: keys.KIND_DISCOVERY},
        params={"models": ",".join(m.model for m in s.models), "n_conversations": len(sample),
                "seed": s.seed, "data_path": str(s.data_path)},
        metrics={**usage.metrics(), "n_features": len(ranked), "n_proposals": len(proposals),
                 "wall_time_s": time.perf_counter() - start},
        tables={"proposals.csv": proposals},
        texts={"features.md": markdown, "features.json": payload})
    return DiscoverResult(ranked, proposals, md_path, json_path, run_id)


def run(cfg) -> DiscoverResult:
    """Entry point of ``pulse-ml discover``."""
    result = discover(settings_from_config(cfg))
    print(f"{len(result.ranked)} distinct feature(s) from {len(result.proposals)} proposal(s) "
          f"-> {result.markdown_path}, {result.json_path} (MLflow run {result.run_id})")
    if len(result.ranked):
        print(result.ranked.head(15)[["key", "n_conversations", "n_models", "value_type",
                                      "polarity"]].to_string(index=False))
    return result
