"""Turn raw agent sessions into a session table (one row per session).

Reads OpenHands V0 event streams (``action``/``args`` or ``extras``), V1 SDK events (``kind``),
eval records (``history``), feedback-dataset records (``trajectory`` + ``feedback``) and generic
chat transcripts (``[{role, text, feedback?}]`` + ``rating``; ConvAI2 dialogues work as is).
Computes ``user_message_count``, the git flags from EXECUTED shell commands only, the mean of the
segment ratings, the user's messages joined in ``user_text`` (a ``text`` feature; capped at
``text_max_chars`` per session, with a note), and keeps the conversation in a ``transcript``
column for labelers and judges.
With ``labeler=<name>`` the paper's two labeling prompts add ``user_sentiment``,
``task_category`` and the 7 failure-mode flags (missing answers are NaN with the reason in
``label_errors``); calls are cached on disk, tokens and cost go to MLflow (``pulse-judge``).
A file that cannot be parsed is reported and skipped, and so is each unparseable line or record
of a JSON Lines file (with its line number); the command fails only when nothing could be read.
``out`` must end in ``.parquet``, ``.csv`` or ``.jsonl`` and is written in that format
(atomically: a failure leaves no half-written file and keeps an earlier one).

Examples:
    pulse-ml extract input=data/demo/events ratings=data/demo/ratings.csv
    pulse-ml extract input='logs/*.jsonl' labeler=gpt5_mini out=data/sessions.parquet
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from pulse_ml import keys
from pulse_ml.errors import PulseError
from pulse_ml.extract.readers import find_files, read_sessions, skipped_by_file
from pulse_ml.extract.table import (
    GIT_COLUMNS,
    TEXT_MAX_CHARS,
    assemble,
    ratings_outside_sessions,
    read_ratings,
)
from pulse_ml.llm.config import LLMConfig
from pulse_ml.settings import llm_config_from_mapping

# out= suffix -> format (every one `pulse-ml validate` reads back).


@dataclass(frozen=True)
class ExtractSettings:
    """Everything ``pulse-ml extract`` needs (built once from the config)."""

    input: str
    out: Path
    ratings: Path | None = None
    case_study: str = ""
    condition: str = "default"
    labeler: LLMConfig | None = None
    cache_dir: Path | None = None
    progress: bool = True
    text_max_chars: int = TEXT_MAX_CHARS


@dataclass
class ExtractResult:
    """The session table and what happened on the way."""

    frame: pd.DataFrame
    out: Path
    failures: list[tuple[str, str]] = field(default_factory=list)
    unknown_rated: list[str] = field(default_factory=list)
    usage: object | None = None
    run_id: str | None = None
    per_file: dict[str, int] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)


def settings_from_config(cfg) -> ExtractSettings:
    """Convert the composed config to :class:`ExtractSettings`."""
    from pulse_ml.config import flag, mapping, number, require

    labeler = None
    if cfg.get("labeler") is not None:
        labeler = llm_config_from_mapping(mapping(cfg, "labeler"), "labeler", "extract")
    out = Path(str(cfg.out)).expanduser()
    out_format(out)
    return ExtractSettings(
        input=str(require(cfg, "input", "extract")),
        out=out,
        ratings=Path(str(cfg.ratings)).expanduser() if cfg.get("ratings") else None,
        case_study=str(cfg.get("case_study") or ""),
        condition=str(cfg.get("condition") or "default"),
        labeler=labeler,
        cache_dir=Path(str(cfg.cache_dir)).expanduser() if cfg.get("cache_dir") else None,
        progress=flag(cfg, "progress", "extract", True),
        text_max_chars=(number(cfg, "text_max_chars", "extract", 1, None, integer=True)
                        if cfg.get("text_max_chars") is not None else TEXT_MAX_CHARS),
    )


def out_format(out: Path) -> str:
    """The format ``out`` is written in, by its suffix (``parquet``, ``csv``, ``jsonl``).

    Raises:
        PulseError: any other suffix (or none): the file would not be readable by its name.
    """
    from pulse_ml.sessions.writers import table_format

    return table_format(out, "pulse-ml extract: out")


def write_table(frame: pd.DataFrame, out: Path) -> None:
    """Write the table atomically in the format of ``out``'s suffix (Parquet, CSV or JSONL)."""
    from pulse_ml.sessions.writers import write_table as write

    write(frame, out, "pulse-ml extract: out")


def label(frame: pd.DataFrame, s: ExtractSettings) -> tuple[pd.DataFrame, object, float]:
    """Add the LLM features to ``frame``; returns the table, the usage and the seconds taken.

    Raises:
        PulseError: no labeler configured, or every LLM call failed.
    """
    from pulse_ml.llm.cache import DiskCache
    from pulse_ml.llm.client import all_failed_error
    from pulse_ml.llm.labeler import label_sessions

    if s.labeler is None:
        raise PulseError("extract: no labeler configured (labeler=<name>).")
    cache = DiskCache(s.cache_dir) if s.cache_dir else None
    start = time.perf_counter()
    labels, usage = label_sessions(frame["transcript"].tolist(), s.labeler, cache,
                                   progress=s.progress)
    failed = all_failed_error(f"pulse-ml extract labeler={s.labeler.name}", s.labeler, usage,
                              2 * len(frame))
    if failed is not None:
        raise failed
    labels.index = frame.index
    out = pd.concat([frame.drop(columns=[c for c in labels.columns if c in frame.columns]),
                     labels], axis=1)
    return out, usage, time.perf_counter() - start


def log_labels(out: pd.DataFrame, s: ExtractSettings, usage, wall_s: float) -> str:
    """Log the labeling batch to MLflow (``pulse-judge``); returns the run id.

    Called once the table is written, so a failed write never leaves a logged run without
    its table.
    """
    from pulse_ml.registry.llm_runs import llm_params, log_run

    assert s.labeler is not None
    errors = out.loc[out["label_errors"] != "", ["session_id", "label_errors"]]
    return log_run(
        keys.JUDGE_EXPERIMENT, f"label-{s.labeler.name}",
        tags={keys.KIND: keys.KIND_LABELER, keys.LABELER: s.labeler.name},
        params={**llm_params(s.labeler), "input": s.input, "n_sessions": len(out)},
        metrics={**usage.metrics(), "n_sessions": len(out),
                 "n_sessions_with_errors": len(errors), "wall_time_s": wall_s},
        tables={"label_errors.csv": errors} if len(errors) else None)


def extract(s: ExtractSettings) -> ExtractResult:
    """Read, assemble, optionally label, and write the session table.

    Raises:
        PulseError: no file matched, or not one session could be read.
    """
    from pulse_ml.env.locations import check_outputs
    from pulse_ml.registry.store import store_locations

    out_format(s.out)  # before any work
    check_outputs("extract", [("out", s.out, "file")], [("input", s.input),
                                                        ("ratings", s.ratings)],
                  store_locations())
    files = find_files(s.input)
    read = read_sessions(files, progress=s.progress)
    if not read.sessions:
        shown = "\n".join(f"  - {f}: {r}" for f, r in read.failures[:10])
        raise PulseError(f"input={s.input}: none of {len(files)} file(s) could be read as "
                         f"sessions:\n{shown}\nExpected OpenHands events, eval/feedback "
                         f"records or chat transcripts (see `pulse-ml extract --help`).")
    ratings = read_ratings(s.ratings) if s.ratings else None
    frame = assemble(read.sessions, ratings, s.case_study, s.condition, s.text_max_chars)
    notes = list(frame.attrs.get("notes", []))
    unknown = ratings_outside_sessions(ratings, frame) if ratings is not None else []
    usage = run_id = None
    wall_s = 0.0
    if s.labeler is not None:
        frame, usage, wall_s = label(frame, s)
    write_table(frame, s.out)  # atomically, before the MLflow run that describes it
    if s.labeler is not None:
        run_id = log_labels(frame, s, usage, wall_s)
    return ExtractResult(frame, s.out, read.failures, unknown, usage, run_id, read.per_file,
                         notes)


def summary(r: ExtractResult) -> str:
    """Human summary of an extraction."""
    f = r.frame
    lines = [f"extracted {len(f)} session(s) -> {r.out}",
             f"  labeled (rating present): {int(f['rating'].notna().sum())}; "
             f"user messages median {f['user_message_count'].median():.0f}",
             "  git flags: " + ", ".join(f"{c[4:]} {int(f[c].sum())}" for c in GIT_COLUMNS)]
    if r.failures:
        per_file = skipped_by_file(r.failures, r.per_file)
        lines.append(f"  warning: skipped {len(r.failures)} unreadable line(s)/record(s)/"
                     f"file(s) in {len(per_file)} file(s):")
        lines += [f"    - {line}" for line in per_file[:10]]
        if len(per_file) > 10:
            lines.append(f"    ... and {len(per_file) - 10} more file(s)")
    if r.unknown_rated:
        lines.append(f"  {len(r.unknown_rated)} rated session id(s) have no session file, e.g. "
                     f"{', '.join(r.unknown_rated[:3])}")
    lines += [f"  note: {n}" for n in r.notes]
    if r.usage is not None:
        u = r.usage
        n_err = int((f["label_errors"] != "").sum())
        lines.append(f"  LLM labels: {u.calls} call(s), {u.cached} cached, {n_err} session(s) "
                     f"with missing labels, {u.tokens_in}+{u.tokens_out} tokens, "
                     f"${u.cost_usd:.4f} (MLflow run {r.run_id})")
    return "\n".join(lines)


def run(cfg) -> ExtractResult:
    """Entry point of ``pulse-ml extract``."""
    result = extract(settings_from_config(cfg))
    print(summary(result))
    return result
