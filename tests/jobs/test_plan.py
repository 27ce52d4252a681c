"""``pulse-ml plan``: labels per user, the prediction s.d. and an estimated design effect."""

from __future__ import annotations

import numpy as np
import pandas as pd

from pulse_ml.config import compose
from pulse_ml.jobs import plan
from pulse_ml.stats.power import labels_needed

BASE = ["effect=0.2", "sd=1.0", "rho=0.5", "n_unlabeled=2000"]


def _clustered_table(path, per_user: int = 5, users: int = 60, seed: int = 0):
    rng = np.random.default_rng(seed)
    user = np.repeat(np.arange(users), per_user)
    rating = np.clip(np.round(3.5 + rng.normal(0, 0.7, users)[user]
                              + rng.normal(0, 0.8, user.size)), 1, 5)
    pd.DataFrame({"user_id": [f"u{u}" for u in user], "rating": rating}).to_csv(path,
                                                                                index=False)
    return path


def test_plan_passes_labels_per_user_and_sd_pred(capsys):
    one = plan.run(compose("plan", [*BASE, "design_effect=1.5"]))
    assert one == labels_needed(0.2, 1.0, 0.5, 2000, design_effect=1.5)
    # df from n / m users: more labels per user -> fewer users -> more labels needed
    five = plan.run(compose("plan", [*BASE, "design_effect=1.5", "labels_per_user=8"]))
    assert five == labels_needed(0.2, 1.0, 0.5, 2000, design_effect=1.5, labels_per_user=8)
    assert five.n_naive > one.n_naive
    # a prediction s.d. below the calibrated r * sd makes the lambda <= 1 cap bind
    small = plan.run(compose("plan", [*BASE, "sd_pred=0.2"]))
    assert small == labels_needed(0.2, 1.0, 0.5, 2000, sd_pred=0.2)
    assert small.n_ppi > labels_needed(0.2, 1.0, 0.5, 2000).n_ppi
    out = capsys.readouterr().out
    assert "8.00 labels per user" in out and "prediction s.d. 0.200" in out


def test_plan_estimated_design_effect_sets_labels_per_user(tmp_path, capsys):
    from pulse_ml.stats.power import design_effect

    path = _clustered_table(tmp_path / "rated.csv")
    res = plan.run(compose("plan", [*BASE, "design_effect=estimate", f"data.path={path}"]))
    frame = pd.read_csv(path)
    est = design_effect(frame["rating"].to_numpy(float), frame["user_id"])
    assert est.labels_per_user == 5.0 and est.deff > 1.5
    assert res == labels_needed(0.2, 1.0, 0.5, 2000, design_effect=est.deff,
                                labels_per_user=5.0)
    assert "5.00 labels per user" in capsys.readouterr().out


def test_plan_estimated_design_effect_with_monitoring(tmp_path, cli):
    path = _clustered_table(tmp_path / "rated.csv")
    res = cli("plan", *BASE, "design_effect=estimate", f"data.path={path}",
              "daily_labeled=10", "daily_unlabeled=200", "days=14")
    assert res.returncode == 0, res.stderr  # was exit 2: "design_effect='estimate' is not a number"
    assert "monitored daily for 14 days" in res.stdout and "design effect" in res.stdout


def _shared_users_table(path, users: int = 80, per_user: int = 6, seed: int = 1):
    """Users with sessions randomized to both arms of case study 'ab' (1-5 stars)."""
    rng = np.random.default_rng(seed)
    user = np.repeat(np.arange(users), per_user)
    arm = rng.integers(0, 2, user.size)
    rating = np.clip(np.round(3.8 + rng.normal(0, 0.8, users)[user] + 0.2 * arm
                              + rng.normal(0, 0.7, user.size)), 1, 5)
    pd.DataFrame({"user_id": [f"u{u}" for u in user], "rating": rating, "case_study": "ab",
                  "condition": np.where(arm == 1, "new", "old")}).to_csv(path, index=False)
    return path


def test_plan_estimates_the_arms_covariance_of_a_case_study(tmp_path, capsys):
    from pulse_ml.stats.power import arm_design

    path = _shared_users_table(tmp_path / "ab.csv")
    res = plan.run(compose("plan", [*BASE, "design_effect=estimate", f"data.path={path}",
                                    "case_study=ab"]))
    frame = pd.read_csv(path)
    est = arm_design(frame["rating"], frame["user_id"], frame["condition"] == "old")
    assert est.arm_correlation > 0.3 and est.shared_users > 0.9
    assert res == labels_needed(0.2, 1.0, 0.5, 2000, design_effect=est.deff,
                                labels_per_user=est.labels_per_user,
                                arm_correlation=est.arm_correlation,
                                shared_users=est.shared_users)
    pooled = plan.run(compose("plan", [*BASE, "design_effect=estimate", f"data.path={path}"]))
    assert pooled.n_naive > 1.5 * res.n_naive  # the pooled design effect ignores the cancelling
    out = capsys.readouterr().out
    assert "users in both arms (99% of the labeled users" in out and "case_study=NAME" in out
    given = plan.run(compose("plan", [*BASE, "arm_correlation=0.5", "shared_users=1"]))
    assert given == labels_needed(0.2, 1.0, 0.5, 2000, arm_correlation=0.5, shared_users=1.0)


def test_plan_refuses_a_case_study_without_two_arms(tmp_path, cli):
    path = _shared_users_table(tmp_path / "ab.csv")
    res = cli("plan", *BASE, "design_effect=estimate", f"data.path={path}", "case_study=nope")
    assert res.returncode == 2 and "case study 'nope'" in res.stderr
    assert "Traceback" not in res.stderr
    bad = cli("plan", *BASE, "arm_correlation=1")
    assert bad.returncode == 2 and "arm_correlation" in bad.stderr
