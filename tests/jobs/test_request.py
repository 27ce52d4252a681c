"""`pulse-ml request` end to end on a real MLflow store, and `infer` on the asked sessions."""

from __future__ import annotations

import json

import mlflow
import numpy as np
import pandas as pd
import pytest

from pulse_ml import keys
from pulse_ml.registry import models as mlflow_io
from pulse_ml.registry import store as tracking

FAST = ("model=lightgbm", "tuning.n_trials=1", "progress=false")  # test_score's champion


@pytest.fixture
def champion(trained_home):
    return trained_home(*FAST)


def _request(cli, small_demo, out, *extra):
    return cli("request", f"data.path={small_demo}", f"out={out}", "progress=false", *extra)


def test_request_writes_probabilities_at_the_budget_and_logs_a_linked_run(
        small_demo, pulse_home, champion, cli):
    out = pulse_home / "req" / "requests.csv"
    # the demo's error spread is too small for the gate (see test_request_falls_back...): the
    # error model's asking is forced here to test its mechanics
    active = "request.asking=active"
    res = _request(cli, small_demo, out, "budget=0.2", "seed=3", active)
    assert res.returncode == 0, res.stderr
    assert "expected PPI++ width vs uniform" in res.stdout and "to ask" in res.stdout
    assert "asking by sqrt(expected squared error)" in res.stdout
    assert "why: request.asking=active" in res.stdout
    got = pd.read_csv(out)
    frame = pd.read_parquet(small_demo)
    assert got.columns.tolist() == ["session_id", "request_prob", "ask"]
    assert got["session_id"].astype(str).tolist() == frame["session_id"].astype(str).tolist()
    pi = got["request_prob"].to_numpy()
    assert ((pi > 0) & (pi <= 1)).all()
    arms = frame["case_study"].astype(str) + "/" + frame["condition"].astype(str)
    per_arm = pd.Series(pi).groupby(arms.to_numpy()).mean()
    np.testing.assert_allclose(per_arm.to_numpy(), 0.2, rtol=1e-6)  # every arm: the budget
    assert pi.min() >= 0.05 - 1e-12  # min_prob = budget / 4
    assert pi.std() > 0  # the error model varies
    # the same seed draws the same asks, another seed others; the probabilities do not move
    again = pulse_home / "req" / "again.csv"
    assert _request(cli, small_demo, again, "budget=0.2", "seed=3", active).returncode == 0
    pd.testing.assert_frame_equal(pd.read_csv(again), got)
    other = pulse_home / "req" / "other.csv"
    assert _request(cli, small_demo, other, "budget=0.2", "seed=4", active).returncode == 0
    other_frame = pd.read_csv(other)
    np.testing.assert_allclose(other_frame["request_prob"], pi)
    assert (other_frame["ask"] != got["ask"]).any()

    daily = pulse_home / "req" / "daily.csv"  # per_day: ~K asks a day over all arms
    res = _request(cli, small_demo, daily, "budget=null", "per_day=40", "log_mlflow=false",
                   active)
    assert res.returncode == 0, res.stderr
    day = pd.to_datetime(frame["started_at"], utc=True).dt.floor("D").to_numpy()
    per_day = pd.Series(pd.read_csv(daily)["request_prob"].to_numpy()).groupby(day).sum()
    size = pd.Series(1, index=range(len(frame))).groupby(day).sum()
    np.testing.assert_allclose(per_day.to_numpy(), np.minimum(40, size.to_numpy()), rtol=1e-6)

    tracking.setup(keys.INFER_EXPERIMENT)
    runs = mlflow.search_runs(experiment_names=[keys.INFER_EXPERIMENT],
                              filter_string=f"tags.{keys.KIND} = '{keys.KIND_REQUEST}'")
    assert len(runs) == 3
    assert set(runs[f"tags.{keys.MODEL_VERSION}"]) == {champion.version}
    assert (runs["metrics.n_sessions"] == len(frame)).all()
    assert set(runs["params.asking"]) == {"active"}


def test_request_falls_back_to_uniform_asking_unless_the_honest_gain_clears_the_gate(
        small_demo, pulse_home, champion, cli):
    """The demo's errors barely vary: the honest saving is far below 10%, so `request` asks
    every session with the budget and says why; `request.asking=uniform` does so by choice."""
    from pulse_ml.inference.requests import asking_gate

    tracking.setup(keys.TRAIN_EXPERIMENT)
    err = mlflow_io.load_registered("models:/pulse-satisfaction@champion")[0].error_model
    gate = asking_gate(err, 0.2)
    assert not gate.active and (gate.saved < 0.10 or gate.lower <= 0)
    for how in ("request.asking=auto", "request.asking=uniform"):
        out = pulse_home / "req" / f"{how[-4:]}.csv"
        res = _request(cli, small_demo, out, "budget=0.2", "seed=3", how)
        assert res.returncode == 0, res.stderr
        assert "uniform asking, budget=0.2" in res.stdout and "why: " in res.stdout
        pi = pd.read_csv(out)["request_prob"].to_numpy()
        assert (pi == 0.2).all()  # exactly the budget (no bisection residue): no weights
        assert "uniform asking at the same budget: 1.000" in res.stdout
    auto = _request(cli, small_demo, pulse_home / "req" / "a.csv", "budget=0.2",
                    "log_mlflow=false")
    assert "needs >= 10%" in auto.stdout or "no error spread" in auto.stdout
    plan = cli("plan", "effect=0.2")
    assert plan.returncode == 0 and "active requests:" in plan.stdout
    if err.fallback:  # the train-time gate replaced a boosting model: plan says so
        assert "uniform asking: at train time" in plan.stdout
    bad = _request(cli, small_demo, pulse_home / "req" / "b.csv", "request.asking=always")
    assert bad.returncode == 2 and "request.asking" in bad.stderr and "auto" in bad.stderr


def test_request_refuses_bad_budget_and_old_models_writing_nothing(small_demo, pulse_home,
                                                                  champion, cli):
    out = pulse_home / "req" / "requests.csv"
    for bad in ("budget=1.5", "budget=0", "budget=-0.1"):
        res = _request(cli, small_demo, out, bad)
        assert res.returncode == 2, (bad, res.stderr)
        assert "Traceback" not in res.stderr and "budget" in res.stderr
    both = _request(cli, small_demo, out, "budget=null")
    assert both.returncode == 2 and "per_day" in both.stderr
    # a version registered before error models existed: `request` says retrain
    tracking.setup(keys.TRAIN_EXPERIMENT)
    ensemble, _ = mlflow_io.load_registered("models:/pulse-satisfaction@champion")
    ensemble.error_model = None
    with mlflow.start_run():
        logged = mlflow_io.log_model(ensemble, pd.read_parquet(small_demo))
    old = mlflow_io.register_version(logged, {})
    res = _request(cli, small_demo, out, f"model_uri=models:/pulse-satisfaction/{old}")
    assert res.returncode == 2 and "Traceback" not in res.stderr
    assert "no error model" in res.stderr and "Retrain" in res.stderr
    assert not out.exists()
    plan_old = cli("plan", "effect=0.2", f"model_uri=models:/pulse-satisfaction/{old}")
    assert plan_old.returncode == 0 and "no error model (retrain it" in plan_old.stdout
    plan = cli("plan", "effect=0.2")
    assert plan.returncode == 0 and "active requests:" in plan.stdout
    assert "judged on out-of-fold residuals it never saw" in plan.stdout


def test_infer_uses_request_prob_and_says_who_answered(small_demo, pulse_home, champion, cli):
    out = pulse_home / "req" / "requests.csv"
    assert _request(cli, small_demo, out, "budget=0.3", "seed=1",
                    "request.asking=active").returncode == 0
    req = pd.read_csv(out)
    frame = pd.read_parquet(small_demo)
    asked = req["ask"].to_numpy() == 1
    table = frame.assign(request_prob=req["request_prob"].to_numpy())
    table.loc[~asked, "rating"] = np.nan  # only asked sessions may carry a rating
    path = pulse_home / "asked.parquet"
    table.to_parquet(path, index=False)
    res = cli("infer", f"data.path={path}", "permutations=200", f"output={pulse_home / 'inf'}")
    assert res.returncode == 0, res.stderr
    assert "asked by request_prob" in res.stdout and "expected asked" in res.stdout
    effects = pd.read_csv(pulse_home / "inf" / "effects.csv")
    assert np.isfinite(effects["ci_lower"]).all() and (effects["ci_width"] > 0).all()
    # audit: infer's weights in every half (tests/inference/test_audit_active.py: the checks
    # keep their rate under weights), asked and answered per arm in the output and the JSON
    res = cli("audit", f"data.path={path}", f"output={pulse_home / 'audit'}", "case_study=plan",
              "replications=20", "split_half.replications=100")
    assert res.returncode == 0, res.stderr
    assert "note: control arm" in res.stdout and "asked by request_prob" in res.stdout
    audit = json.loads((pulse_home / "audit" / "audit_plan.json").read_text())
    assert len(audit["request_prob"]) == 2 and audit["verdict"] in ("valid", "inconclusive")
    # monitor weights by request_prob (predictable response model), logged with its seed
    res = cli("monitor", f"data.path={path}", "case_study=plan", "seed=4",
              f"output={pulse_home / 'monitor'}")
    assert res.returncode == 0, res.stderr
    assert res.stdout.count("asked by varying request_prob") == 2  # one note per arm
    rows = pd.read_csv(pulse_home / "monitor" / "monitor.csv")
    last = rows[rows["day"] == rows["day"].max()]
    assert np.isfinite(last[["cs_lower", "cs_upper"]].to_numpy()).all()
    tracking.setup(keys.INFER_EXPERIMENT)
    run = mlflow.search_runs(experiment_names=[keys.INFER_EXPERIMENT],
                             filter_string=f"tags.{keys.KIND} = '{keys.KIND_MONITOR}'")
    assert run["params.seed"].tolist() == ["4"]

    # a rated session with request_prob = 0: one message naming the row, exit 2
    bad = table.copy()
    first = int(np.flatnonzero(bad["rating"].notna().to_numpy())[0])
    bad.loc[first, "request_prob"] = 0.0
    bad_path = pulse_home / "bad.parquet"
    bad.to_parquet(bad_path, index=False)
    res = cli("infer", f"data.path={bad_path}", f"output={pulse_home / 'inf2'}")
    assert res.returncode == 2 and "Traceback" not in res.stderr
    assert "request_prob = 0" in res.stderr and f"row {first + 1}" in res.stderr
    assert not (pulse_home / "inf2").exists()
