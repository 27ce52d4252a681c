"""Score sessions with an LLM-as-a-judge baseline (the paper's judge prompt, Table 2).

Sends the raw conversation of every labeled session (long ones cut to ``max_input_tokens``,
keeping start and end) to the judge model through litellm, parses the 1-5 likert score, and
compares it with the ratings: MSE, MAE, Pearson r, Spearman, plus their std over the same
5 folds the trainer uses (5 shuffled folds, seed 42, over the labeled sessions in table order;
a user's sessions stay in one fold when the table has user ids). The run lands in experiment
``pulse-train`` (tag ``kind=llm_judge``) so ``pulse-ml compare`` lists it next to the model
families; per-session judgments are a CSV artifact. Answers are cached on disk (a rerun costs
nothing); failures end as missing values.

Examples:
    pulse-ml judge data.path=data/sessions.parquet                 # local server on :8000
    pulse-ml judge judge=o3 data.path=data/sessions.parquet judge.max_sessions=200
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from pulse_ml.errors import PulseError
from pulse_ml.llm.config import LLMConfig, llm_config_from_mapping
from pulse_ml.training.folds import FoldSettings


@dataclass(frozen=True)
class JudgeSettings:
    """Everything ``pulse-ml judge`` needs."""

    data_path: Path
    judge: LLMConfig
    output: Path
    cache_dir: Path | None = None
    progress: bool = True
    folds: FoldSettings = field(default_factory=FoldSettings)


@dataclass
class JudgeResult:
    """Judgments, metrics and the MLflow run id."""

    judgments: pd.DataFrame
    metrics: dict[str, float]
    run_id: str
    csv_path: Path


def settings_from_config(cfg) -> JudgeSettings:
    """Convert the composed config to :class:`JudgeSettings`."""
    from pulse_ml.config import choice, flag, mapping, number, require, require_data_path

    data_path = require_data_path(cfg, "judge")
    require(cfg, "judge", "judge")
    return JudgeSettings(
        data_path=data_path,
        judge=llm_config_from_mapping(mapping(cfg, "judge"), "judge"),
        output=Path(str(cfg.output)).expanduser(),
        cache_dir=Path(str(cfg.cache_dir)).expanduser() if cfg.get("cache_dir") else None,
        progress=flag(cfg, "progress", "judge", True),
        folds=FoldSettings(
            n_splits=number(cfg, "cv.n_splits", "judge", 2, None, integer=True),
            seed=number(cfg, "cv.seed", "judge", integer=True),
            group_by_user=choice(cfg, "cv.group_by", "judge",
                                 {"user_id": "a user's sessions in one fold",
                                  "none": "plain KFold"}) == "user_id"))


def judge(s: JudgeSettings) -> JudgeResult:
    """Judge, score and log one LLM judge.

    Raises:
        DataError / PulseError: unreadable table, no transcript column, no labeled session.
    """
    from pulse_ml.llm.cache import DiskCache
    from pulse_ml.llm.client import all_failed_error
    from pulse_ml.llm.judge import judge_metrics, judge_sessions
    from pulse_ml.registry.llm_runs import config_json, llm_params, log_run
    from pulse_ml.registry.store import TRAIN_EXPERIMENT
    from pulse_ml.report.atomic import atomic_file
    from pulse_ml.sessions.readers import read_transcript_table

    frame = read_transcript_table(s.data_path, need_rating=True)
    if frame["rating"].notna().sum() == 0:
        raise PulseError(f"{s.data_path}: no labeled session (column rating is empty "
                         f"everywhere); a judge is scored against the ratings.")
    start = time.perf_counter()
    judgments, usage = judge_sessions(frame, s.judge, DiskCache(s.cache_dir) if s.cache_dir
                                      else None, progress=s.progress)
    judged = int((judgments["error"] != "not judged (max_sessions)").sum())
    failed = all_failed_error("pulse-ml judge", s.judge, usage, judged)
    if failed is not None:
        raise failed
    metrics = judge_metrics(judgments, usage, s.folds)
    metrics["wall_time_s"] = time.perf_counter() - start
    csv_path = s.output / f"judgments_{s.judge.name}.csv"
    with atomic_file(csv_path) as tmp:
        judgments.to_csv(tmp, index=False)
    run_id = log_run(
        TRAIN_EXPERIMENT, f"judge-{s.judge.name}",
        tags={"kind": "llm_judge", "judge": s.judge.name, "data_path": str(s.data_path)},
        params={**llm_params(s.judge), "n_splits": s.folds.n_splits, "cv_seed": s.folds.seed,
                "cv_group_by": "user_id" if s.folds.group_by_user else "none"},
        metrics=metrics, tables={"judgments.csv": judgments},
        texts={"judge_config.json": config_json(s.judge)})
    return JudgeResult(judgments, metrics, run_id, csv_path)


def run(cfg) -> JudgeResult:
    """Entry point of ``pulse-ml judge``."""
    result = judge(settings_from_config(cfg))
    m = result.metrics
    print(f"judge {result.judgments.shape[0]} labeled session(s), {int(m['n_missing'])} missing: "
          f"MSE {m['cv_mse']:.3f} ± {m['cv_mse_std']:.3f}, MAE {m['cv_mae']:.3f}, "
          f"r {m['cv_pearson']:.3f}, Spearman {m['cv_spearman']:.3f}; "
          f"{int(m['tokens_in'])}+{int(m['tokens_out'])} tokens, ${m['cost_usd']:.4f}\n"
          f"judgments -> {result.csv_path} (MLflow run {result.run_id}, experiment pulse-train)")
    return result
