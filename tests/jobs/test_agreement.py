"""``pulse-ml agreement`` end to end: score columns, a registered model, bad input."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from pulse_ml.config import compose
from pulse_ml.errors import PulseError
from pulse_ml.jobs import agreement


def _files(tmp_path):
    sessions = pd.DataFrame({"session_id": [f"s{i}" for i in range(6)],
                             "judge_1": [5, 4, 3, 2, 1, 3],
                             "judge_2": [1, 4, 3, 2, 5, 3]})
    pairs = pd.DataFrame({"pair_id": ["p1", "p2", "p3", "p4", "p5"],
                          "session_a": ["s0", "s1", "s2", "s3", "s5"],
                          "session_b": ["s4", "s3", "s1", "s4", "s2"],
                          "preference": ["a", "a", "b", "tie", "tie"],
                          "category": ["web", "web", "game", "game", "game"]})
    s_path, p_path = tmp_path / "sessions.csv", tmp_path / "pairs.csv"
    sessions.to_csv(s_path, index=False)
    pairs.to_csv(p_path, index=False)
    return s_path, p_path, pairs


def test_two_score_columns_as_seeds_per_category(tmp_path, capsys):
    s_path, p_path, _ = _files(tmp_path)
    out = tmp_path / "out"
    agreement.run(compose("agreement", [
        f"pairs.path={p_path}", f"data.path={s_path}", f"output={out}",
        "predictors={judge:[column:judge_1,column:judge_2]}", "ties=half"]))
    stdout = capsys.readouterr().out
    for name in ("agreement.csv", "agreement.md", "agreement.json", "per_source.csv",
                 "agreement.png"):
        assert (out / name).is_file(), name
    # judge_1 predicts a, a, b, a, tie -> credits 1, 1, 1, 1/2, 1   (human a, a, b, tie, tie)
    # judge_2 predicts b, a, b, b, tie -> credits 0, 1, 1, 1/2, 1
    per = pd.read_csv(out / "per_source.csv").set_index(["source", "category"])
    assert per.loc[("column:judge_1", "(all)"), "agreement_pct"] == pytest.approx(90.0)
    assert per.loc[("column:judge_2", "(all)"), "agreement_pct"] == pytest.approx(70.0)
    assert per.loc[("column:judge_2", "web"), "agreement_pct"] == pytest.approx(50.0)
    summary = pd.read_csv(out / "agreement.csv").set_index("category")
    assert summary.loc["(all)", "agreement_pct"] == pytest.approx(80.0)
    assert summary.loc["(all)", "sd_pct"] == pytest.approx(np.std([90, 70], ddof=1))
    assert summary.loc["game", "n_pairs"] == 3 and summary.loc["web", "n_sources"] == 2
    assert "2 human tie(s) kept" in stdout


def test_cli_bad_inputs_one_clear_message(tmp_path, cli):
    s_path, p_path, pairs = _files(tmp_path)
    no_col = tmp_path / "no_pref.csv"
    pairs.drop(columns="preference").to_csv(no_col, index=False)
    res = cli("agreement", f"pairs.path={no_col}", f"data.path={s_path}",
              "predictors={j:[column:judge_1]}", f"output={tmp_path / 'o'}")
    assert res.returncode == 2 and "Traceback" not in res.stderr
    assert "no_pref.csv" in res.stderr and "column 'preference': missing" in res.stderr

    bad = pairs.copy()
    bad.loc[1, "preference"] = "B>A"
    bad.loc[3, "session_b"] = "s99"
    bad_path = tmp_path / "bad_pairs.csv"
    bad.to_csv(bad_path, index=False)
    res = cli("agreement", f"pairs.path={bad_path}", f"data.path={s_path}",
              "predictors={j:[column:judge_1]}", f"output={tmp_path / 'o'}")
    assert res.returncode == 2 and "Traceback" not in res.stderr
    err = res.stderr
    assert "bad_pairs.csv: 2 problem(s)" in err
    assert "column 'preference': values 'B>A' in 1 row(s): row 2 (pair_id=p2)" in err
    assert "Use a (session_a preferred), b (session_b preferred) or tie" in err
    assert "column 'session_b': session id(s) 's99' not in" in err and "row 4 (pair_id=p4)" in err
    assert not (tmp_path / "o").exists()


def test_missing_pairs_path_and_bad_score_column(tmp_path):
    with pytest.raises(PulseError, match="pairs.path` is required"):
        agreement.run(compose("agreement", []))
    s_path, p_path, _ = _files(tmp_path)
    frame = pd.read_csv(s_path).assign(judge_1=["5", "x", "3", "2", "1", "3"])
    frame.to_csv(s_path, index=False)
    with pytest.raises(PulseError, match=r"column 'judge_1': non-numeric values \('x'\) in 1 row"):
        agreement.run(compose("agreement", [f"pairs.path={p_path}", f"data.path={s_path}",
                                            "predictors={j:[column:judge_1]}",
                                            f"output={tmp_path / 'o'}"]))
    with pytest.raises(PulseError, match="ties=never"):
        agreement.run(compose("agreement", [f"pairs.path={p_path}", "ties=never"]))


def test_registered_model_as_predictor(small_demo, pulse_home, tmp_path, trained_home):
    trained_home("tuning.n_trials=1", "progress=false", "model=mean")
    sessions = pd.read_parquet(small_demo)
    rng = np.random.default_rng(0)
    lab = sessions[sessions["rating"].notna()].reset_index(drop=True)
    a, b = rng.choice(len(lab), size=(2, 60), replace=False)
    diff = lab["rating"].to_numpy()[a] - lab["rating"].to_numpy()[b]
    pairs = pd.DataFrame({"pair_id": [f"p{i}" for i in range(60)],
                          "session_a": lab["session_id"].to_numpy()[a],
                          "session_b": lab["session_id"].to_numpy()[b],
                          "preference": np.where(diff > 0, "a", np.where(diff < 0, "b", "tie")),
                          "category": lab["task_category"].to_numpy()[a]})
    p_path = tmp_path / "pairs.parquet"
    pairs.to_parquet(p_path, index=False)
    summary = agreement.run(compose("agreement", [
        f"pairs.path={p_path}", f"data.path={small_demo}", f"output={tmp_path / 'out'}"]))
    overall = summary[summary["category"] == "(all)"].iloc[0]
    assert overall["predictor"] == "model"
    assert overall["n_pairs"] == int((pairs["preference"] != "tie").sum())
    assert 0 <= overall["ci_lower_pct"] <= overall["agreement_pct"] <= overall["ci_upper_pct"]
    assert (tmp_path / "out" / "agreement.png").stat().st_size > 5000
