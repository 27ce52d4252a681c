"""Score sessions with an LLM-as-a-judge baseline (the paper's judge prompt, Table 2).

Sends the raw conversation of every labeled session (long ones cut to ``max_input_tokens``,
keeping start and end) to the judge model through litellm, parses the 1-5 likert score, and
compares it with the ratings: MSE, MAE, Pearson r, Spearman, plus their std over the same
folds the trainer uses (``cv``: ``cv.n_splits`` shuffled folds with ``cv.seed``, default 5 and
42, over the labeled sessions in table order; ``cv.group_by=user_id``, the default, keeps a
user's sessions in one fold). The run lands in experiment
``pulse-train`` (tag ``kind=llm_judge``) so ``pulse-ml compare`` lists it next to the model
families; per-session judgments are a CSV artifact. Answers are cached on disk (a rerun costs
nothing); failures end as missing values.

The judge's score as a feature: ``sessions=all table_out=PATH`` judges every session (labeled or
not) and writes the input table plus ``judge_<name>`` (``column=`` renames it; the likert score)
and ``judge_<name>_missing`` (1 where the call failed or the session was not judged: those get
the mean score of the judged sessions). The judge never saw the ratings, so the column is an
honest feature: add it to a feature set (``conf/features/all_judge.yaml``) and train on
``table_out``. Metrics are still computed on the labeled sessions only.

Examples:
    pulse-ml judge data.path=data/sessions.parquet                 # local server on :8000
    pulse-ml judge judge=o3 data.path=data/sessions.parquet judge.max_sessions=200
    pulse-ml judge data.path=data/sessions.parquet sessions=all table_out=data/judged.parquet
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import pandas as pd

from pulse_ml import keys
from pulse_ml.errors import PulseError
from pulse_ml.llm.config import LLMConfig
from pulse_ml.names import file_part, write_csv
from pulse_ml.settings import llm_config_from_mapping
from pulse_ml.training.folds import FoldSettings

if TYPE_CHECKING:
    from pulse_ml.llm.judge import JudgeFeature


@dataclass(frozen=True)
class JudgeSettings:
    """Everything ``pulse-ml judge`` needs."""

    data_path: Path
    judge: LLMConfig
    output: Path
    cache_dir: Path | None = None
    progress: bool = True
    folds: FoldSettings = field(default_factory=FoldSettings)
    sessions: str = "labeled"
    table_out: Path | None = None
    column: str | None = None

    @property
    def feature_column(self) -> str:
        """Name of the score column of ``table_out`` (``column``, default ``judge_<name>``)."""
        return self.column or f"judge_{self.judge.name}"


@dataclass
class JudgeResult:
    """Judgments, metrics, the MLflow run id and (with ``table_out``) the feature table."""

    judgments: pd.DataFrame
    metrics: dict[str, float]
    run_id: str
    csv_path: Path
    feature: JudgeFeature | None = None
    table_path: Path | None = None


# Columns of the table contract a judge column must not overwrite.
RESERVED = ("session_id", "user_id", "case_study", "condition", "rating", "n_ratings",
            "transcript", "started_at")


def settings_from_config(cfg) -> JudgeSettings:
    """Convert the composed config to :class:`JudgeSettings`."""
    from pulse_ml.config import (
        choice,
        flag,
        mapping,
        number,
        require,
        require_data_path,
        text,
    )
    from pulse_ml.sessions.writers import table_format

    data_path = require_data_path(cfg, "judge")
    require(cfg, "judge", "judge")
    sessions = choice(cfg, "sessions", "judge",
                      {"labeled": "judge the sessions with a rating (the baseline)",
                       "all": "judge every session (for the score as a feature)"})
    table_out = text(cfg, "table_out")
    table_out = Path(table_out).expanduser() if table_out else None
    if table_out is not None:
        table_format(table_out, "pulse-ml judge: table_out")
    column = text(cfg, "column")
    if column is not None and (column in RESERVED or column.endswith("_missing")):
        raise PulseError(f"pulse-ml judge: column={column} is a column of the session table "
                         "contract or ends in _missing (the flag's suffix); choose another "
                         "name, e.g. column=judge_score.")
    return JudgeSettings(
        sessions=sessions, table_out=table_out, column=column,
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
    from pulse_ml.env.atomic import atomic_file
    from pulse_ml.env.locations import check_outputs
    from pulse_ml.llm.cache import DiskCache
    from pulse_ml.llm.client import all_failed_error
    from pulse_ml.llm.judge import judge_feature, judge_metrics, judge_sessions
    from pulse_ml.registry.llm_runs import config_json, llm_params, log_run
    from pulse_ml.registry.store import store_locations
    from pulse_ml.sessions.readers import check_transcript_table, read_frame
    from pulse_ml.sessions.writers import write_table

    check_outputs("judge", [("output", s.output, "folder"), ("table_out", s.table_out, "file")],
                  [("data.path", s.data_path)], store_locations())
    raw = read_frame(s.data_path)
    if "rating" not in raw.columns and s.sessions == "all":
        raw_for_llm = raw.assign(rating=float("nan"))
    else:
        raw_for_llm = raw
    frame = check_transcript_table(raw_for_llm, s.data_path, need_rating=True)
    if s.sessions == "labeled" and frame["rating"].notna().sum() == 0:
        raise PulseError(f"{s.data_path}: no labeled session (column rating is empty "
                         f"everywhere); a judge is scored against the ratings. To judge "
                         f"unlabeled sessions for the score as a feature, pass sessions=all "
                         f"table_out=PATH.")
    if s.table_out is not None and frame["session_id"].duplicated().any():
        raise PulseError(f"{s.data_path}: session_id is not unique; the judge column is "
                         f"matched by session_id. Run `pulse-ml validate` on the table.")
    start = time.perf_counter()
    judgments, usage = judge_sessions(frame, s.judge, DiskCache(s.cache_dir) if s.cache_dir
                                      else None, progress=s.progress, sessions=s.sessions)
    judged = int((judgments["error"] != "not judged (max_sessions)").sum())
    failed = all_failed_error("pulse-ml judge", s.judge, usage, judged)
    if failed is not None:
        raise failed
    metrics = judge_metrics(judgments, usage, s.folds)
    metrics["wall_time_s"] = time.perf_counter() - start
    feature = None
    if s.table_out is not None:
        feature = judge_feature(raw, judgments, s.feature_column)
        metrics["n_filled"] = float(feature.n_filled)
    csv_path = s.output / f"judgments_{file_part(s.judge.name)}.csv"
    with atomic_file(csv_path) as tmp:
        write_csv(judgments, tmp)
    if feature is not None:
        write_table(feature.table, s.table_out, "pulse-ml judge: table_out")
    run_id = log_run(
        keys.TRAIN_EXPERIMENT, f"judge-{s.judge.name}",
        tags={keys.KIND: keys.KIND_JUDGE, keys.JUDGE: s.judge.name,
              keys.DATA_PATH: str(s.data_path)},
        params={**llm_params(s.judge), "n_splits": s.folds.n_splits, "cv_seed": s.folds.seed,
                keys.CV_GROUP_BY: (keys.GROUPED_BY_USER if s.folds.group_by_user
                                   else keys.NOT_GROUPED),
                "sessions": s.sessions,
                "table_out": str(s.table_out) if s.table_out else "none"},
        metrics=metrics, tables={"judgments.csv": judgments},
        texts={"judge_config.json": config_json(s.judge)})
    return JudgeResult(judgments, metrics, run_id, csv_path, feature, s.table_out)


def run(cfg) -> JudgeResult:
    """Entry point of ``pulse-ml judge``."""
    result = judge(settings_from_config(cfg))
    m = result.metrics
    n_judged = result.judgments.shape[0]
    if m["n_sessions"] > 0:
        scored = (f"{int(m['n_sessions'])} labeled, {int(m['n_missing'])} missing: "
                  f"MSE {m[keys.CV_MSE]:.3f} ± {m['cv_mse_std']:.3f}, MAE {m[keys.CV_MAE]:.3f}, "
                  f"r {m[keys.CV_PEARSON]:.3f}, Spearman {m[keys.CV_SPEARMAN]:.3f}")
    else:
        scored = "no labeled session: no metrics"
    print(f"judge {n_judged} session(s) ({scored}); "
          f"{int(m['tokens_in'])}+{int(m['tokens_out'])} tokens, ${m['cost_usd']:.4f}\n"
          f"judgments -> {result.csv_path} (MLflow run {result.run_id}, experiment pulse-train)")
    f = result.feature
    if f is not None:
        print(f"table with the judge's score as a feature -> {result.table_path}: column "
              f"{f.column}, flag {f.flag}; filled {f.n_filled} of {f.table.shape[0]} "
              f"session(s) without a score with {f.fallback:.3f} (the mean judged score)")
    return result
