"""``audit`` of a case study with several treatments: each treatment against the control."""

from __future__ import annotations

import json

import pandas as pd
import pytest


@pytest.fixture
def registered(trained_home):
    return trained_home("model=mean", "progress=false")


def test_each_treatment_is_audited_against_the_control(small_demo, registered, cli,
                                                       pulse_home, tmp_path):
    """plan's show-plan sessions split into two variants: the audit reports both pairs, and
    the pair show-plan-2 vs no-plan equals the audit of the same table with show-plan-2 as the
    only treatment (same seed and users: the same splits and hidings)."""
    frame = pd.read_parquet(small_demo)
    rows = frame.index[(frame["case_study"] == "plan") & (frame["condition"] == "show-plan")]
    frame.loc[rows[::2], "condition"] = "show-plan-2"
    three = tmp_path / "three.parquet"
    frame.to_parquet(three)
    common = ("case_study=plan", "replications=40", "split_half.replications=100",
              "progress=false", "log_mlflow=false", "declare.plan.split=null")
    res = cli("audit", f"data.path={three}", f"output={tmp_path / 'a'}", *common,
              "declare.plan.treatment=[show-plan, show-plan-2]")
    assert res.returncode == 0, res.stderr
    both = json.loads((tmp_path / "a" / "audit_plan.json").read_text())
    assert list(both["treatments"]) == ["show-plan", "show-plan-2"]
    assert "split_half" not in both  # per treatment only
    assert "== show-plan vs no-plan" in res.stdout and "== show-plan-2 vs no-plan" in res.stdout
    order = ("valid", "inconclusive", "too narrow")
    worst = max((p["verdict"] for p in both["treatments"].values()), key=order.index)
    assert both["verdict"] == worst
    per = pd.read_csv(tmp_path / "a" / "audit_plan.csv")
    assert set(per["treatment"]) == {"show-plan", "show-plan-2"}

    res = cli("audit", f"data.path={three}", f"output={tmp_path / 'b'}", *common,
              "declare.plan.treatment=show-plan-2")
    assert res.returncode == 0, res.stderr
    single = json.loads((tmp_path / "b" / "audit_plan.json").read_text())
    pair = both["treatments"]["show-plan-2"]
    for method in ("augmented", "naive"):
        assert pair["split_half"][method]["rate"] == single["split_half"][method]["rate"]
        assert 0.8 <= pair["split_half"][method]["rate"] <= 1.0
    assert pair["consistency"]["consistency_rate_augmented"] == pytest.approx(
        single["consistency"]["consistency_rate_augmented"])
    assert pair["verdict"] == single["verdict"]
