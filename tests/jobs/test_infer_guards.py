"""Guards found in review: renamed training sessions, degenerate arms, bad settings."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from pulse_ml.config import compose


@pytest.fixture
def registered(trained_home):
    return trained_home("tuning.n_trials=2", "progress=false", "model=lightgbm")


def test_renamed_training_sessions_are_refused(small_demo, registered, cli, tmp_path):
    """Same sessions under new ids would get leaky ensemble predictions: refuse, exit 2."""
    frame = pd.read_parquet(small_demo)
    frame["session_id"] = "batch1/" + frame["session_id"]
    path = tmp_path / "renamed.parquet"
    frame.to_parquet(path)
    res = cli("infer", f"data.path={path}", "permutations=200")
    assert res.returncode == 2, res.stdout
    assert "look like training sessions under new ids" in res.stderr
    assert "Traceback" not in res.stderr


def test_new_labeled_sessions_are_honest_and_noted(small_demo, registered, cli, tmp_path):
    """Genuinely new sessions (other features) are predicted by the ensemble, with a note."""
    frame = pd.read_parquet(small_demo)
    frame["session_id"] = "new/" + frame["session_id"]
    frame["user_message_count"] = frame["user_message_count"] + 1000  # other content
    path = tmp_path / "new.parquet"
    frame.to_parquet(path)
    res = cli("infer", f"data.path={path}", "permutations=200", "log_mlflow=false")
    assert res.returncode == 0, res.stderr
    assert "none of the model's" in res.stdout


def test_empty_session_ids_are_refused(small_demo, cli, tmp_path):
    frame = pd.read_parquet(small_demo)
    frame.loc[[1, 2], "session_id"] = "  "
    path = tmp_path / "empty_ids.parquet"
    frame.to_parquet(path)
    res = cli("validate", f"data.path={path}")
    assert res.returncode == 2 and "column 'session_id': empty values" in res.stderr


def test_arm_without_unlabeled_sessions(small_demo, registered, cli, tmp_path):
    frame = pd.read_parquet(small_demo)
    arm = (frame["case_study"] == "plan") & (frame["condition"] == "no-plan")
    frame = frame[~(arm & frame["rating"].isna())]
    path = tmp_path / "all_rated.parquet"
    frame.to_parquet(path)
    res = cli("infer", f"data.path={path}", "case_studies=[plan]")
    assert res.returncode == 2
    assert "control arm 'no-plan' has no unlabeled session" in res.stderr


@pytest.mark.parametrize("override,text", [
    ("alpha=1.5", "alpha=1.5 is out of range"),
    ("alpha=abc", "alpha='abc' is not a number"),
    ("permutations=0", "permutations=0 is out of range"),
])
def test_bad_settings_exit_2(small_demo, registered, cli, override, text):
    res = cli("infer", f"data.path={small_demo}", override)
    assert res.returncode == 2 and text in res.stderr and "Traceback" not in res.stderr


def test_clustered_naive_p_value_agrees_with_its_interval(small_demo, registered):
    from pulse_ml.jobs import infer

    effects = infer.run(compose("infer", [f"data.path={small_demo}", "permutations=500",
                                          "log_mlflow=false"]))
    for row in effects.itertuples():
        assert row.significant == (row.p_value < 0.05)
    naive = effects[effects.estimator == "naive"]
    assert naive["p_value_permutation"].between(0, 1).all()


def test_audit_verdict_is_split_half_and_consistency_is_not_called_coverage(
        small_demo, registered, cli, pulse_home):
    res = cli("audit", "case_study=plan", f"data.path={small_demo}", "replications=80",
              "split_half.replications=200", "progress=false")
    assert res.returncode == 0, res.stderr
    report = json.loads((pulse_home / "results" / "audit" / "audit_plan.json").read_text())
    assert report["verdict"] in ("valid", "inconclusive")
    for key in ("augmented", "naive"):  # variance checks: the same method on both halves
        split = report["split_half"][key]
        assert split["share"] == 0.5 and split["verdict"] in ("valid", "inconclusive")
        assert 0.85 <= split["rate"] <= 1.0 and 0 < split["mc_se"] < 0.05
    bias = report["split_half"]["bias"]  # augmented vs naive on the same halves
    assert bias is None or not bias["flagged"]
    assert report["split_half"]["checks"] and "variance check" in res.stdout
    cons = report["consistency"]
    assert cons["replications"] == 80 and 0 <= cons["consistency_rate_augmented"] <= 1
    assert cons["consistency_gap"] == pytest.approx(
        cons["consistency_rate_naive"] - cons["consistency_rate_augmented"])
    text = json.dumps(report) + res.stdout
    assert "coverage_" not in text and "calibrated" not in text  # the old names are gone
    assert "split-half audit" in res.stdout and "not a coverage check" in res.stdout
    assert "(nominal" not in res.stdout  # the consistency rates are not held against 0.95


def test_plan_with_a_useless_predictor_promises_nothing(small_demo, registered, cli):
    res = cli("plan", "effect=0.2", "rho=-0.4", "sd=1.2")
    assert res.returncode == 0, res.stderr
    assert "saving         :       0" in res.stdout and "lambda to 0" in res.stdout


def test_content_hash_is_stable_across_formats(small_demo, tmp_path):
    from pulse_ml.models.crossfit import content_hash
    from pulse_ml.settings import feature_set

    fs = feature_set(compose("validate"))
    frame = pd.read_parquet(small_demo)
    path = tmp_path / "t.csv"
    frame.to_csv(path, index=False)
    from pulse_ml.sessions.table import load_sessions

    a = content_hash(load_sessions(small_demo, fs).frame, fs)
    b = content_hash(load_sessions(path, fs).frame, fs)
    assert np.array_equal(a, b)


@pytest.mark.parametrize("override", ["clusters=users", "ppi.predictions=oof"])
def test_audit_refuses_unknown_options(small_demo, registered, cli, override):
    res = cli("audit", "case_study=plan", f"data.path={small_demo}", override)
    key = override.split("=")[0]
    assert res.returncode == 2 and f"{override} is not an option" in res.stderr, res.stderr
    assert key in res.stderr and "Traceback" not in res.stderr


def test_degenerate_paired_variance_is_refused(small_demo, registered, cli, tmp_path):
    """Two users, each rating both arms one star higher in treatment: the cluster-robust
    variance of the effect is 0. The old rules printed CI [1.000, 1.000] and 'significant'."""
    frame = pd.read_parquet(small_demo)
    plan = frame["case_study"] == "plan"
    rated = frame.index[plan & frame["rating"].notna()]
    frame.loc[rated, "rating"] = np.nan
    picks = []
    for cond in ("no-plan", "show-plan"):
        picks += list(frame.index[plan & (frame["condition"] == cond)][:2])
    frame.loc[picks, "user_id"] = ["uA", "uB", "uA", "uB"]
    frame.loc[picks, "rating"] = [3.0, 4.0, 4.0, 5.0]
    path = tmp_path / "paired.parquet"
    frame.to_parquet(path)
    res = cli("infer", f"data.path={path}", "case_studies=[plan]", "permutations=200",
              "log_mlflow=false")
    assert res.returncode == 2, res.stdout + res.stderr
    assert "case study 'plan'" in res.stderr and "within-user difference" in res.stderr
    assert "Traceback" not in res.stderr
