r"""Agreement of predictors with human pairwise preferences, overall and per category.

Input: a pairs table (``pairs.path``: pair_id, session_a, session_b, preference in a/b/tie and
the category column ``pairs.category_column``) and the session table (``data.path``) that holds
every session of the pairs. Each predictor scores sessions (higher = better) and prefers the
session with the higher score; a score difference within ``tie_margin`` is a predicted tie.

``predictors`` maps a name to one or more sources; several sources are seeds (training seeds,
model versions, repeated judge runs) summarised as mean ± sd. A source is a model URI (the
registered model's honest predictions: out-of-fold for its training sessions) or
``column:<name>``, a numeric column of the session table (e.g. an LLM judge's score).

Tie rule (``ties``): credit 1 when predictor and human agree (tie = tie included), 0 when they
pick opposite sessions, 1/2 when exactly one of them says tie. ``exclude`` drops the pairs the
human called a tie; ``half`` keeps them. Intervals are 95% Wilson intervals (``interval_n``:
pairs = n counted pairs; pooled = seed x pair outcomes as Interaction-as-a-Judge, narrower).
Writes agreement.{csv,md,json}, per_source.csv and agreement.png to ``output``.

Examples:
    pulse-ml agreement pairs.path=pairs.csv
    pulse-ml agreement pairs.path=pairs.csv 'predictors={judge:[column:judge_o3]}' ties=half
    pulse-ml agreement pairs.path=pairs.csv ties=half \
        'predictors={m:[models:/pulse-satisfaction/1,models:/pulse-satisfaction/2]}'
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from pulse_ml.config import Node, choice, is_missing, mapping, number
from pulse_ml.errors import DataError, PulseError
from pulse_ml.inference.agreement import agreement_outcomes, agreement_table, validate_pairs
from pulse_ml.names import write_csv
from pulse_ml.report.plots import agreement_chart
from pulse_ml.report.tables import markdown_table, say, text_table
from pulse_ml.sessions.bad_rows import bad_values, numeric_column, where_rows

COLUMN_PREFIX = "column:"


@dataclass(frozen=True)
class AgreementJob:
    """Typed settings of ``pulse-ml agreement``."""

    pairs_path: str
    category_column: str | None
    data_path: str
    predictors: dict[str, tuple[str, ...]]
    ties: str
    tie_margin: float
    alpha: float
    interval_n: str
    output: Path


def settings_from_config(cfg: Node) -> AgreementJob:
    """Read the composed config once."""
    if is_missing(cfg, "pairs.path") or not cfg.pairs.get("path"):
        raise PulseError("pulse-ml agreement: `pairs.path` is required: a table with pair_id, "
                         "session_a, session_b, preference (a, b or tie) and category, e.g. "
                         "`pulse-ml agreement pairs.path=pairs.csv`.")
    pairs_path = str(cfg.pairs.path)
    ties = choice(cfg, "ties", "agreement",
                  {"exclude": "drop human ties", "half": "keep them; one-sided ties earn 1/2"})
    interval_n = choice(cfg, "interval_n", "agreement",
                        {"pairs": "n = pairs", "pooled": "n = seeds x pairs"})
    tie_margin = number(cfg, "tie_margin", "agreement", 0, None)
    raw = mapping(cfg, "predictors") if cfg.get("predictors") else \
        {"model": [str(cfg.model_uri)]}
    if not isinstance(raw, dict) or not raw:
        raise PulseError("predictors: give at least one, e.g. "
                         "'predictors={model:[models:/pulse-satisfaction@champion]}' or "
                         "'predictors={judge:[column:judge_score]}'.")
    predictors = {}
    for name, sources in raw.items():
        items = [sources] if isinstance(sources, str) else list(sources or [])
        if not items:
            raise PulseError(f"predictors.{name}: no source. List model URIs or column:<name>.")
        predictors[str(name)] = tuple(str(s) for s in items)
    cat = cfg.pairs.get("category_column")
    return AgreementJob(pairs_path=pairs_path, category_column=None if cat in (None, "") else
                        str(cat), data_path=str(cfg.data.path), predictors=predictors,
                        ties=ties, tie_margin=tie_margin,
                        alpha=number(cfg, "alpha", "agreement", 0, 1, open_interval=True),
                        interval_n=interval_n, output=Path(str(cfg.output)))


def _session_ids(sessions: pd.DataFrame, path: str) -> pd.Series:
    if "session_id" not in sessions.columns:
        raise DataError(path, ["column 'session_id': missing. The session table needs one id per "
                               "session (the ids the pairs refer to)."])
    ids = sessions["session_id"].astype("string").str.strip()
    dup = ids.duplicated(keep=False) & ids.notna()
    if dup.any():
        raise DataError(path, [f"column 'session_id': duplicate ids ({bad_values(ids, dup)}) in "
                               f"{where_rows(sessions, dup)}. Each session must appear once."])
    return ids.astype(str)


def _column_scores(sessions: pd.DataFrame, path: str, column: str) -> np.ndarray:
    if column not in sessions.columns:
        raise DataError(path, [f"column '{column}': missing (predictor source column:{column}). "
                               f"Columns: {', '.join(map(str, sessions.columns[:15]))}."])
    problems: list[str] = []
    num = numeric_column(sessions, column, problems,
                         fix="A predictor column holds numbers (higher = better).")
    if problems:
        raise DataError(path, problems)
    return num.to_numpy(float)


def _model_scores(sessions: pd.DataFrame, path: str, uri: str, cache: dict) -> np.ndarray:
    from pulse_ml.inference.honest import honest_data
    from pulse_ml.registry.analysis import open_model

    if uri not in cache:
        data = honest_data(sessions, path, open_model(uri).ensemble, {}, only=[])
        for note in data.notes:  # e.g. reused session ids that keep the fold-model mean
            say(f"note: {uri}: {note}")
        cache[uri] = data.predictions
    return cache[uri]


def run(cfg) -> pd.DataFrame:
    """Entry point of ``pulse-ml agreement``; returns the summary table."""
    from pulse_ml.sessions.readers import read_frame

    job = settings_from_config(cfg)
    pairs_raw = read_frame(job.pairs_path)
    sessions = read_frame(job.data_path)
    ids = _session_ids(sessions, job.data_path)
    pairs = validate_pairs(pairs_raw, job.pairs_path, ids, job.category_column, job.data_path)
    pos = pd.Series(np.arange(len(ids)), index=ids.to_numpy())
    ia, ib = pos[pairs["session_a"]].to_numpy(), pos[pairs["session_b"]].to_numpy()
    outcomes: dict[str, dict[str, np.ndarray]] = {}
    notes, cache = [], {}
    for name, sources in job.predictors.items():
        outcomes[name] = {}
        for src in sources:
            if src.startswith(COLUMN_PREFIX):
                scores = _column_scores(sessions, job.data_path, src[len(COLUMN_PREFIX):])
            else:
                scores = _model_scores(sessions, job.data_path, src, cache)
            sa, sb = scores[ia], scores[ib]
            missing = int((np.isnan(sa) | np.isnan(sb)).sum())
            if missing:
                notes.append(f"{name} / {src}: {missing} pair(s) skipped (a session has no "
                             "score).")
            outcomes[name][src] = agreement_outcomes(pairs["human"].to_numpy(), sa, sb,
                                                     job.ties, job.tie_margin)
    summary, per_source = agreement_table(pairs["category"].to_numpy(), outcomes, job.alpha,
                                          job.interval_n)
    n_ties = int((pairs["human"] == 0).sum())
    rule = (f"{n_ties} human tie(s) {'excluded' if job.ties == 'exclude' else 'kept'}; "
            f"predicted tie if |score_a - score_b| <= {job.tie_margin:g}; credit 1 agree, 0 "
            "opposite, 1/2 when exactly one side is a tie")
    from pulse_ml.env.atomic import staged_outputs

    out = job.output
    with staged_outputs(out) as stage:  # every file complete, or none (earlier ones kept)
        write_csv(summary, stage / "agreement.csv")
        write_csv(per_source, stage / "per_source.csv")
        (stage / "agreement.json").write_text(json.dumps(
            {"pairs": job.pairs_path, "sessions": job.data_path, "ties": job.ties,
             "tie_margin": job.tie_margin, "interval_n": job.interval_n, "rule": rule,
             "notes": notes, "predictors": {k: list(v) for k, v in job.predictors.items()},
             "summary": summary.to_dict(orient="records")}, indent=2, default=str))
        (stage / "agreement.md").write_text(
            f"# Agreement with human pairwise preferences ({len(pairs)} pairs)\n\n{rule}.\n\n"
            + markdown_table(summary, 1) + "\n" + "".join(f"\n> note: {n}" for n in notes)
            + "\n")
        agreement_chart(summary, stage / "agreement.png", job.ties, job.alpha, subtitle=(
            f"pairs {Path(job.pairs_path).name}, sessions {Path(job.data_path).name}; "
            + "; ".join(f"{k}: {', '.join(v)}" for k, v in job.predictors.items())))
    print(f"{len(pairs)} pairs; {rule}.")
    print(text_table(summary, digits=1))
    for note in notes:
        print(f"note: {note}")
    print(f"\nwritten to {out}: agreement.csv, agreement.md, agreement.json, per_source.csv, "
          "agreement.png")
    return summary
