"""``infer``'s decisions end to end: each decision kind, several variants, bad declarations."""

from __future__ import annotations

import json

import mlflow
import pandas as pd
import pytest

from pulse_ml import keys

NI_WIDE = "declare.claude4_vs_gpt5.decision={rule: non_inferiority, margin: 3}"
COST_GUARD = "declare.plan.guardrails.cost_usd={better: lower, margin: 0.05, relative: true}"


@pytest.fixture
def registered(trained_home):
    return trained_home("tuning.n_trials=2", "progress=false", "model=lightgbm")


def _decisions(home) -> dict[tuple[str, str], dict]:
    data = json.loads((home / "results" / "infer" / "decisions.json").read_text())
    assert "Holm" in data["rule"]
    return {(d["case_study"], d["treatment"]): d for d in data["decisions"]}


def test_ship_and_do_not_ship(small_demo, registered, cli, pulse_home, tmp_path):
    """gpt-5 is non-inferior at a 3-star margin: ship; show-plan costs twice as much with a
    5% cost guardrail: do_not_ship. Printed first, in decisions.json and as run tags."""
    frame = pd.read_parquet(small_demo)
    treated = (frame["case_study"] == "plan") & (frame["condition"] == "show-plan")
    frame.loc[treated, "cost_usd"] *= 2
    path = tmp_path / "costly.parquet"
    frame.to_parquet(path)
    res = cli("infer", f"data.path={path}", "permutations=200", NI_WIDE, COST_GUARD)
    assert res.returncode == 0, res.stderr
    out = res.stdout.splitlines()
    assert out[0].startswith("decisions")
    assert max(len(line) for line in out if not line.startswith("http")) <= 100
    got = _decisions(pulse_home)
    ship, stop = got[("claude4_vs_gpt5", "gpt-5")], got[("plan", "show-plan")]
    assert ship["decision"] == "ship" and ship["ci_lower"] > -3
    assert stop["decision"] == "do_not_ship"
    assert any("cost_usd" in r and "worse" in r for r in stop["reasons"])
    guard = stop["guardrails"][0]
    assert guard["column"] == "cost_usd" and guard["passed"] is False
    plan = frame[frame["case_study"] == "plan"].groupby("condition")["cost_usd"].mean()
    assert guard["effect"] == pytest.approx(plan["show-plan"] / plan["no-plan"] - 1)
    assert guard["ci_lower"] > 0.05
    assert ship["srm_p_value"] > 0.001 and set(ship["rating_rate"]) == {"claude-4-sonnet",
                                                                         "gpt-5"}
    exp = mlflow.MlflowClient().get_experiment_by_name("pulse-infer")
    run = mlflow.search_runs([exp.experiment_id]).iloc[0]
    assert run[f"tags.{keys.DECISION}.claude4_vs_gpt5"] == "ship"
    assert run[f"tags.{keys.DECISION}.plan"] == "do_not_ship"


def test_invalid_and_keep_collecting(small_demo, registered, cli, pulse_home, tmp_path):
    """A third of gpt-5's unrated sessions lost (logging failure): invalid, no decision;
    plan, undecided at 80 ratings per arm: keep_collecting with the days more it needs."""
    frame = pd.read_parquet(small_demo)
    arm = (frame["case_study"] == "claude4_vs_gpt5") & (frame["condition"] == "gpt-5")
    lost = frame[arm & frame["rating"].isna()].sample(frac=0.35, random_state=0).index
    path = tmp_path / "srm.parquet"
    frame.drop(index=lost).to_parquet(path)
    res = cli("infer", f"data.path={path}", "permutations=200", "log_mlflow=false",
              "declare.claude4_vs_gpt5.randomization_unit=session")
    assert res.returncode == 0, res.stderr
    got = _decisions(pulse_home)
    bad, wait = got[("claude4_vs_gpt5", "gpt-5")], got[("plan", "show-plan")]
    assert bad["decision"] == "invalid" and bad["srm_p_value"] < 0.001
    assert bad["srm_unit"] == "session"
    assert "sample-ratio mismatch" in bad["reasons"][0]
    assert wait["decision"] == "keep_collecting"
    assert wait["ci_lower"] < 0 < wait["ci_upper"]
    assert "invalid" in res.stdout.splitlines()[2] + res.stdout.splitlines()[3]


def test_several_variants_are_holm_adjusted(small_demo, registered, cli, pulse_home, tmp_path):
    """plan with two treatments: each vs the control, intervals at Holm's levels."""
    frame = pd.read_parquet(small_demo)
    treated = frame.index[(frame["case_study"] == "plan") & (frame["condition"] == "show-plan")]
    frame.loc[treated[::2], "condition"] = "show-plan-v2"
    path = tmp_path / "three_arms.parquet"
    frame.to_parquet(path)
    res = cli("infer", f"data.path={path}", "permutations=200", "case_studies=[plan]",
              "declare.plan.treatment=[show-plan,show-plan-v2]",
              "declare.plan.split={no-plan: 0.5, show-plan: 0.25, show-plan-v2: 0.25}")
    assert res.returncode == 0, res.stderr
    got = _decisions(pulse_home)
    assert set(got) == {("plan", "show-plan"), ("plan", "show-plan-v2")}
    levels = sorted(d["ci_level"] for d in got.values())
    assert levels[0] == pytest.approx(0.975)  # nothing rejected: both at alpha / 2 (Holm's
    assert all(d["n_treatments"] == 2 for d in got.values())  # first step), wider than 95%
    effects = pd.read_csv(pulse_home / "results" / "infer" / "effects.csv")
    assert set(effects["treatment"]) == {"show-plan", "show-plan-v2"}
    exp = mlflow.MlflowClient().get_experiment_by_name("pulse-infer")
    run = mlflow.search_runs([exp.experiment_id]).iloc[0]
    assert f"tags.{keys.DECISION}.plan.show-plan-v2" in run.index
    assert "metrics.plan.show-plan-v2.augmented.effect" in run.index


@pytest.mark.parametrize(("overrides", "text"), [
    (("declare.plan.guardrails.latency_s={margin: 1}",), "guardrails.latency_s: no column"),
    (("declare.plan.guardrails.user_sentiment={margin: 1}",), "is not numeric"),
    (("declare.plan.split={no-plan: 0.5, show-plan: 0.6}",), "split shares sum to 1.1"),
    (("declare.plan.split={no-plan: 0.5, shw-plan: 0.5}",), "split names 'shw-plan'"),
    (("declare.plan.decision={rule: non_inferiority, margin: 0}",), "decision.margin=0"),
    (("declare.plan.decision={rule: non_inferiority}",), "needs decision.margin"),
    (("declare.plan.treatment=[show-plan,gone]",), "split lacks 'gone'"),
    (("declare.plan.treatment=[show-plan,gone]", "declare.plan.split=null"),
     "treatment condition 'gone'"),
])
def test_bad_declarations_exit_2(small_demo, registered, cli, pulse_home, overrides, text):
    res = cli("infer", f"data.path={small_demo}", "permutations=200", *overrides)
    assert res.returncode == 2, res.stdout
    assert text in res.stderr and "case study 'plan'" in res.stderr, res.stderr
    assert "Traceback" not in res.stderr
    assert not (pulse_home / "results" / "infer" / "decisions.json").exists()
