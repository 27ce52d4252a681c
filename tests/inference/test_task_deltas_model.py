"""End to end: Delta_H per task category from a registered model on the small demo table."""

from __future__ import annotations

import json

import pandas as pd
import pytest

from pulse_ml.config import compose
from pulse_ml.jobs import benchmarks


@pytest.fixture
def registered(small_demo, trained_home):
    trained_home("tuning.n_trials=3", "progress=false", "model=lightgbm")
    return small_demo


@pytest.mark.slow
def test_model_deltas_per_category_written(registered, pulse_home, capsys):
    out = pulse_home / "bench"
    corr = benchmarks.run(compose("benchmarks", [
        f"data.path={registered}", "min_labeled=3", f"output={out}", "bootstrap.n=500"]))
    printed = capsys.readouterr().out
    for name in ("deltas.csv", "categories.csv", "correlation.csv", "correlation.json",
                 "benchmarks.md", "scatter.png"):
        assert (out / name).is_file(), name
    assert (out / "scatter.png").stat().st_size > 5000
    # claude37_vs_claude4 is not in the small demo: skipped with a note, not an error
    assert "comparison 'claude37_vs_claude4' skipped" in printed
    deltas = pd.read_csv(out / "deltas.csv")
    mine = deltas[deltas["comparison"] == "claude4_vs_gpt5"].set_index("task_type")
    assert set(deltas["comparison"]) == {"claude4_vs_gpt5"}
    # rows with no category mapping are skipped with that reason
    assert not mine.loc["Testing code", "used"]
    assert "no task_category value maps" in mine.loc["Testing code", "note"]
    used = mine[mine["used"]]
    # An arm whose ratings are all equal has no interval (issue 15: refused, with the reason).
    zero_var = mine["note"].fillna("").str.contains("variance is 0")
    assert len(used) + int(zero_var.sum()) >= 3 and len(used) >= 2
    assert (used["n_labeled_control"] >= 3).all() and (used["n_labeled_treatment"] >= 3).all()
    assert (used["delta_h_ci_lower"] <= used["delta_h"]).all()
    assert (used["delta_h"] <= used["delta_h_ci_upper"]).all()
    # relative effect = absolute effect in % of the control mean (ratings are 1-5 stars)
    ratio = used["delta_h"] / used["effect"]
    assert ((ratio > 100 / 5.01) & (ratio < 100 / 0.99)).all()
    # the categories table holds every task category of the case study, small ones skipped
    cats = pd.read_csv(out / "categories.csv")
    assert set(cats["category"]) >= {"fix_bugs", "fix_failing_ci"}
    ci_row = cats[cats["category"] == "fix_failing_ci"].iloc[0]
    assert isinstance(ci_row["skipped"], str) and "fewer than 3 labeled" in ci_row["skipped"]
    row = corr[(corr["comparison"] == "claude4_vs_gpt5") & (corr["source"] == "model")].iloc[0]
    assert row["n_points"] == len(used)
    if len(used) >= 3:
        assert -1 <= row["pearson_r"] <= 1
    else:  # two points have no correlation: reported as missing, not as a number
        assert pd.isna(row["pearson_r"])
    summary = json.loads((out / "correlation.json").read_text())
    assert summary["model_family"] == "lightgbm"

    # the paper's 35-label minimum leaves too few task types on 600 labeled sessions
    strict = benchmarks.run(compose("benchmarks", [
        f"data.path={registered}", f"output={out / 'strict'}", "bootstrap.n=200",
        "comparisons=[claude4_vs_gpt5]"]))
    model_row = strict[strict["source"] == "model"].iloc[0]
    assert model_row["n_points"] < 3 and pd.isna(model_row["pearson_r"])
    assert "fewer than 35 labeled" in capsys.readouterr().out
