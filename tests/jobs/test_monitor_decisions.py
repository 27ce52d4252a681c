"""``monitor`` gives the decision at every look: superiority and non-inferiority on the PPI++
confidence sequence, and the sample-ratio check per look."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
from model_home import model_home

from pulse_ml.config import compose
from pulse_ml.errors import PulseError
from pulse_ml.jobs import monitor, train


@pytest.fixture(scope="module")
def home(tmp_path_factory, mlflow_template, small_demo):
    """A project root with a champion trained on the small demo table (once per module)."""
    with model_home(tmp_path_factory.mktemp("monitor-decisions-home"), mlflow_template) as root:
        train.run(compose("train", [f"data.path={small_demo}", "tuning.n_trials=1",
                                    "progress=false", "model=lightgbm"]))
        yield root


def _run(data, out, *overrides) -> tuple[pd.DataFrame, pd.DataFrame]:
    monitor.run(compose("monitor", [f"data.path={data}", f"output={out}", "log_mlflow=false",
                                    *overrides]))
    meta = json.loads((out / "monitor.json").read_text())
    return pd.DataFrame(meta["decisions"]), pd.read_csv(out / "monitor.csv")


def test_decision_at_every_look_follows_the_sequence(home, small_demo, tmp_path, capsys):
    """plan under non-inferiority with a 2-star margin ships once its sequence is above -2;
    claude4_vs_gpt5 (superiority) keeps collecting while its sequence includes 0."""
    decisions, frame = _run(small_demo, tmp_path / "out",
                            "declare.plan.decision={rule: non_inferiority, margin: 2}")
    printed = capsys.readouterr().out
    assert "decision at each look (non-inferiority, PPI++ sequence)" in printed
    aug = frame[frame["estimator"] == "augmented"].merge(decisions, on=["case_study", "look"])
    assert len(aug) == len(decisions) == 2 * 21  # every look of both case studies
    bound = np.where(aug["case_study"] == "plan", -2.0, 0.0)
    want = np.select([aug["cs_lower"] > bound, aug["cs_upper"] < bound],
                     ["ship", "do_not_ship"], "keep_collecting")
    assert (aug["decision"] == want).all()
    plan = aug[aug["case_study"] == "plan"]
    assert plan["decision"].iloc[-1] == "ship" and (plan["decision"] == "ship").sum() > 10
    assert (plan.loc[plan["cs_lower"].isna(), "decision"] == "keep_collecting").all()


def test_sample_ratio_mismatch_makes_looks_invalid(home, small_demo, tmp_path):
    """Half of gpt-5's sessions from day 8 on are lost: the looks after are invalid."""
    frame = pd.read_parquet(small_demo)
    late = pd.to_datetime(frame["started_at"], utc=True) >= pd.Timestamp("2025-06-09", tz="UTC")
    arm = (frame["case_study"] == "claude4_vs_gpt5") & (frame["condition"] == "gpt-5")
    lost = frame[arm & late & frame["rating"].isna()].sample(frac=0.6, random_state=1).index
    path = tmp_path / "lost.parquet"
    frame.drop(index=lost).to_parquet(path)
    decisions, _ = _run(path, tmp_path / "out")
    gpt = decisions[decisions["case_study"] == "claude4_vs_gpt5"].set_index("day")
    assert (gpt.loc[:7, "decision"] != "invalid").all()
    assert gpt.loc[21, "decision"] == "invalid" and gpt.loc[21, "srm_p_value"] < 0.001 / 21
    assert (decisions[decisions["case_study"] == "plan"]["decision"] != "invalid").all()


def _plan_rows(frame: pd.DataFrame) -> pd.DataFrame:
    return frame[(frame["case_study"] == "plan") & (frame["estimator"] == "augmented")]


@pytest.mark.parametrize("better", ["lower", "higher"])
def test_guardrails_take_part_in_the_decision_at_every_look(home, small_demo, tmp_path,
                                                            better):
    """show-plan costs ~30% less than no-plan. With cost 'lower is better' (margin 5%) the
    guardrail's sequence ends non-inferior and plan ships only at looks where both the rating
    sequence is above -2 and the cost sequence clears its margin; with 'higher is better' the
    cost is 30% worse, so plan is never shipped and ends do_not_ship on the guardrail."""
    out = tmp_path / "out"
    decisions, frame = _run(small_demo, out, "declare.plan.decision={rule: non_inferiority, "
                            "margin: 2}", "case_study=plan",
                            f"declare.plan.guardrails={{cost_usd: {{better: {better}, "
                            "margin: 0.05, relative: true}}")
    plan = _plan_rows(frame).merge(decisions, on=["case_study", "look"])
    assert len(plan) == 21
    rating_ok = plan["cs_lower"] > -2.0
    reasons = plan["reason"]
    if better == "lower":
        shipped = plan["decision"] == "ship"
        assert shipped.iloc[-1] and (shipped <= rating_ok).all()
        assert reasons[shipped].str.contains("guardrail\\(s\\) non-inferior: cost_usd").all()
        # early looks: the rating clears -2 before the cost sequence clears its margin
        waiting = rating_ok & ~shipped
        assert waiting.any()
        assert reasons[waiting].str.contains("not yet shown non-inferior: cost_usd").all()
    else:
        assert (plan["decision"] != "ship").all()
        assert plan["decision"].iloc[-1] == "do_not_ship"
        assert "beyond their margin: cost_usd" in reasons.iloc[-1]


def test_several_treatments_are_refused_with_one_message(home, small_demo, tmp_path):
    frame = pd.read_parquet(small_demo)
    rows = frame.index[(frame["case_study"] == "plan") & (frame["condition"] == "show-plan")]
    frame.loc[rows[::2], "condition"] = "show-plan-2"
    path = tmp_path / "three.parquet"
    frame.to_parquet(path)
    with pytest.raises(PulseError) as err:
        _run(path, tmp_path / "out", "declare.plan.treatment=[show-plan, show-plan-2]",
             "declare.plan.split=null")
    text = str(err.value)
    assert "case study 'plan' declares 2 treatments" in text and "declare.plan.treatment" in text
    assert not (tmp_path / "out").exists()  # nothing written


def test_a_guardrail_column_missing_from_the_table_is_refused(home, small_demo, tmp_path):
    with pytest.raises(PulseError, match="guardrails.latency_s: no column 'latency_s'"):
        _run(small_demo, tmp_path / "out", "case_study=plan",
             "declare.plan.guardrails={latency_s: {better: lower, margin: 1}}")
