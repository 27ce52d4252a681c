"""The run fingerprint of infer/audit/monitor covers what an analysis reads, not free text."""

from __future__ import annotations

import pandas as pd

from pulse_ml.report.html import run_identity
from pulse_ml.sessions.fingerprint import analysis_columns


def _fp(frame, used=("user_sentiment", "task_category")):
    return run_identity(None, frame, used)["data_fingerprint"]


def test_free_text_is_left_out_and_everything_read_is_in(small_demo):
    frame = pd.read_parquet(small_demo)
    cols = analysis_columns(frame, ["user_sentiment", "task_category"])
    assert "user_text" not in cols
    assert {"session_id", "user_id", "case_study", "condition", "rating", "started_at",
            "user_message_count", "task_category"} <= set(cols)
    base = _fp(frame)
    edited = frame.assign(user_text="something else entirely")
    assert _fp(edited) == base  # free text the model does not read
    assert _fp(edited, used=("user_text",)) != _fp(frame, used=("user_text",))  # a text model
    for col, value in (("user_message_count", 99), ("task_category", "other"),
                       ("condition", "x"), ("rating", 1.0)):
        changed = frame.copy()
        changed.loc[3, col] = value
        assert _fp(changed) != base, col
