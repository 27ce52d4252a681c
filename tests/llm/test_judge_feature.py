"""The judge's score as a feature column: fill-in, flag, settings and unlabeled tables."""

import json

import numpy as np
import pandas as pd
import pytest

from pulse_ml.config import compose
from pulse_ml.errors import PulseError
from pulse_ml.llm.judge import judge_feature


def test_judge_feature_fills_failed_and_unjudged_sessions_with_the_mean_score():
    table = pd.DataFrame({"session_id": ["a", "b", "c", "d"], "rating": [5.0, np.nan, 1.0, 2.0],
                          "x": [1, 2, 3, 4]})
    judgments = pd.DataFrame({"session_id": ["a", "b", "c"],
                              "likert_score": [4.0, 2.0, np.nan]})  # c failed, d not judged
    f = judge_feature(table, judgments, "judge_j")
    assert f.fallback == pytest.approx(3.0) and f.n_filled == 2  # mean of 4 and 2, not ratings
    assert f.table["judge_j"].tolist() == [4.0, 2.0, 3.0, 3.0]
    assert f.table["judge_j_missing"].tolist() == [0, 0, 1, 1]
    assert list(f.table.columns) == ["session_id", "rating", "x", "judge_j", "judge_j_missing"]
    assert "judge_j" not in table  # the input is unchanged


@pytest.mark.parametrize(("override", "message"), [
    ("table_out=out.xlsx", r"table_out=out.xlsx must end in .parquet, .csv or .jsonl"),
    ("column=rating", r"column=rating is a column of the session table contract"),
    ("sessions=some", r"sessions=some is not an option"),
])
def test_judge_feature_settings_are_checked_before_any_call(override, message, tmp_path):
    from pulse_ml.jobs.judge import settings_from_config

    path = tmp_path / "t.csv"
    path.write_text("session_id,rating,transcript\na,3,[]\n")
    with pytest.raises(PulseError, match=message):
        settings_from_config(compose("judge", [f"data.path={path}", override]))


@pytest.mark.slow
def test_sessions_all_judges_an_unlabeled_table(stub_server, make_cfg, mlflow_store, tmp_path):
    from pulse_ml.jobs.judge import JudgeSettings, judge

    tr = json.dumps([{"role": "user", "text": "hi"}])
    frame = pd.DataFrame({"session_id": ["u1", "u2"], "transcript": [tr, tr], "n": [1, 2]})
    path = tmp_path / "unlabeled.jsonl"
    frame.to_json(path, orient="records", lines=True)
    s = JudgeSettings(data_path=path, judge=make_cfg(name="stubjudge"), output=tmp_path / "o",
                      progress=False, sessions="labeled")
    with pytest.raises(PulseError, match=r"missing column\(s\) rating"):
        judge(s)
    out = tmp_path / "judged.jsonl"
    s = JudgeSettings(data_path=path, judge=make_cfg(name="stubjudge"), output=tmp_path / "o",
                      progress=False, sessions="all", table_out=out, column="llm_score")
    result = judge(s)
    assert stub_server.calls == 2 and result.metrics["n_sessions"] == 0
    written = pd.read_json(out, lines=True)
    assert written["llm_score"].tolist() == [4.0, 4.0]  # the stub's canned likert score
    assert written["llm_score_missing"].tolist() == [0, 0] and "rating" not in written
