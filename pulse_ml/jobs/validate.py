"""Check a session table against the contract and print a summary.

Reads ``data.path`` (Parquet, CSV or JSONL), checks every column of the chosen feature set
(``features=all|user|agent|progression|no_llm`` or a YAML path), ratings, ids and case studies,
and prints either a summary (sessions, labeled share, mean rating, labeled/unlabeled sessions per
arm of each case study) or every problem found (exit code 2).

Example:
    pulse-ml validate data.path=data/demo/sessions.parquet features=no_llm
"""

from __future__ import annotations

import pandas as pd

from pulse_ml import settings
from pulse_ml.report.tables import say, text_table
from pulse_ml.sessions.table import SessionTable


def summary_frame(table: SessionTable) -> pd.DataFrame:
    """Labeled/unlabeled counts per arm of each case study."""
    rows = []
    for study in table.case_studies:
        control, treatment = table.arm_counts(study)
        for role, arm in (("control", control), ("treatment", treatment)):
            rows.append({"case_study": study.name, "arm": role, "condition": arm.condition,
                         "labeled": arm.n_labeled, "unlabeled": arm.n_unlabeled})
    return pd.DataFrame(rows, columns=["case_study", "arm", "condition", "labeled", "unlabeled"])


def describe(table: SessionTable) -> str:
    """A human summary of a validated table."""
    frame = table.frame
    labeled = table.labeled
    lines = [
        f"{table.path}: OK — {len(frame):,} sessions, {int(labeled.sum()):,} labeled "
        f"({labeled.mean():.1%}), mean rating {frame.loc[labeled, 'rating'].mean():.3f}, "
        f"{frame['user_id'].nunique():,} users, feature set '{table.features.name}' "
        f"({len(table.features.columns)} features)",
    ]
    if table.case_studies:
        lines += ["", "case studies:", text_table(summary_frame(table))]
    else:
        lines.append("no case studies in the data (column case_study is empty)")
    lines += [f"note: {n}" for n in table.notes]
    return "\n".join(lines)


def run(cfg) -> None:
    """Validate ``cfg.data.path`` and print its summary."""
    table = settings.load_table(cfg)
    say(describe(table))
