"""A table without a two-arm case study is refused right after it is read (issue 25).

The proof that nothing heavier ran: the model's artifact is damaged, so loading the model
would fail with another message; the verbs must name the missing two-arm case study instead.
"""

from __future__ import annotations

import pandas as pd
import pytest


@pytest.fixture
def damaged_model(trained_home, pulse_home):
    trained_home("model=mean", "progress=false")
    files = list(pulse_home.rglob("ensemble.joblib"))
    assert files
    for f in files:
        f.write_bytes(b"garbage\n")


@pytest.mark.parametrize(("verb", "args", "edit"), [
    ("infer", ["permutations=100"], "no_case_study"),
    ("monitor", [], "no_case_study"),
    ("infer", ["case_studies=[plan]"], "one_condition"),
    ("audit", ["case_study=plan"], "one_condition"),
])
def test_no_two_arm_case_study_is_refused_before_the_model_loads(
        verb, args, edit, damaged_model, small_demo, tmp_path, cli):
    table = pd.read_parquet(small_demo)
    if edit == "no_case_study":
        table["case_study"] = ""
    else:  # plan's treatment sessions relabeled: one condition left
        plan = table["case_study"] == "plan"
        control = sorted(table.loc[plan, "condition"].unique())[0]
        table.loc[plan, "condition"] = control
    path = tmp_path / "t.parquet"
    table.to_parquet(path, index=False)
    res = cli(verb, f"data.path={path}", *args, "log_mlflow=false")
    assert res.returncode == 2, res.stdout + res.stderr[-2000:]
    assert "no two-arm case study in column 'case_study'" in res.stderr, res.stderr[-2000:]
    assert "corrupt" not in res.stderr and "Traceback" not in res.stderr
