"""`infer inference=randomization`: output beside the asymptotic interval, the few-users
suggestion, and every bad input refused with one message naming the case study (exit 2)."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest


@pytest.fixture
def registered(trained_home):
    """A champion trained on the small demo table."""
    return trained_home("tuning.n_trials=2", "progress=false", "model=lightgbm")


def _catalogue(tmp_path, unit: str):
    folder = tmp_path / "studies"
    folder.mkdir(exist_ok=True)
    (folder / "plan.yaml").write_text(
        f"name: plan\ncontrol: no-plan\ntreatment: show-plan\nrandomization_unit: {unit}\n")
    return folder


def _by_user(small_demo, tmp_path, name="by_user.parquet", concentrate: int = 0):
    """The demo with every plan user's sessions moved to the arm of their first session.

    ``concentrate`` > 0: only that many users per arm keep (or get) ratings.
    """
    frame = pd.read_parquet(small_demo)
    plan = frame["case_study"] == "plan"
    first = frame[plan].groupby("user_id")["condition"].first()
    frame.loc[plan, "condition"] = frame.loc[plan, "user_id"].map(first)
    if concentrate:
        rng = np.random.default_rng(0)
        keep = [u for cond in ("no-plan", "show-plan")
                for u in first[first == cond].index[:concentrate]]
        rated = plan & frame["user_id"].isin(keep)
        stars = rng.choice([1, 2, 3, 4, 5], rated.sum(), p=[.10, .08, .15, .27, .40])
        frame.loc[plan, "rating"] = np.nan
        frame.loc[plan, "n_ratings"] = 0
        frame.loc[rated, "rating"] = stars.astype(float)
        frame.loc[rated, "n_ratings"] = 1
    path = tmp_path / name
    frame.to_parquet(path)
    return path


def test_unknown_randomization_unit_is_refused(small_demo, pulse_home, cli, tmp_path):
    folder = _catalogue(tmp_path, "household")
    res = cli("infer", f"data.path={small_demo}", f"case_study_dirs=[{folder}]")
    assert res.returncode == 2, res.stderr
    assert "case study 'plan': randomization_unit='household'" in res.stderr
    assert "'user' if" in res.stderr and "Traceback" not in res.stderr


def test_randomization_inference_end_to_end_and_its_refusals(small_demo, pulse_home, registered,
                                                             cli, tmp_path):
    by_user = _by_user(small_demo, tmp_path)
    users = _catalogue(tmp_path, "user")
    out = tmp_path / "out"
    res = cli("infer", f"data.path={by_user}", f"case_study_dirs=[{users}]",
              "case_studies=[plan]", "inference=randomization", "randomization.n_permutations=999",
              "permutations=500", f"output={out}")
    assert res.returncode == 0, res.stderr
    assert "randomization 95% CI" in res.stdout and "p_rand" in res.stdout
    assert "users re-randomized (declared randomization_unit: user)" in " ".join(
        res.stdout.split())
    meta = json.loads((out / "effects.json").read_text())
    assert meta["inference"] == "randomization"
    assert meta["randomization"]["plan"]["unit"] == "user"
    assert meta["randomization"]["plan"]["n_assignments"] == 999
    for row in meta["effects"]:
        assert 0 < row["p_value_randomization"] <= 1
        assert row["ci_lower_randomization"] < row["effect"] < row["ci_upper_randomization"]
        # the same data, another reference distribution: the two intervals are alike
        width = row["ci_upper"] - row["ci_lower"]
        rand_width = row["ci_upper_randomization"] - row["ci_lower_randomization"]
        assert 0.7 < rand_width / width < 1.5
    csv = pd.read_csv(out / "effects.csv")
    assert csv["p_value_randomization"].notna().all()
    assert "p_value_randomization" in (out / "report.html").read_text()

    # declared user-randomized, but the demo's users have sessions in both arms
    shared = cli("infer", f"data.path={small_demo}", f"case_study_dirs=[{users}]",
                 "case_studies=[plan]", "inference=randomization",
                 "randomization.n_permutations=99", "permutations=100", f"output={out}")
    assert shared.returncode == 2
    assert "case study 'plan' is declared randomization_unit: user, but" in shared.stderr
    assert "randomization_unit: session" in shared.stderr and "Traceback" not in shared.stderr

    # one labeled user in the treatment arm: every rated treatment session is hers
    frame = pd.read_parquet(by_user)
    arm = (frame["case_study"] == "plan") & (frame["condition"] == "show-plan")
    rated = arm & frame["rating"].notna()
    frame.loc[rated, "user_id"] = frame.loc[rated, "user_id"].iloc[0]
    lone = tmp_path / "lone.parquet"
    frame.to_parquet(lone)
    few = cli("infer", f"data.path={lone}", f"case_study_dirs=[{users}]", "case_studies=[plan]",
              "inference=randomization", "randomization.n_permutations=99",
              "permutations=100", "clusters=none", f"output={out}")
    assert few.returncode == 2
    assert ("case study 'plan', treatment arm 'show-plan': 1 labeled user(s)"
            in few.stderr), few.stderr
    assert "at least 2 users per arm" in few.stderr and "Traceback" not in few.stderr

    # a few users carry all labels: infer suggests randomization inference
    conc = _by_user(small_demo, tmp_path, "conc.parquet", concentrate=6)
    warned = cli("infer", f"data.path={conc}", "case_studies=[plan]", "permutations=100",
                 f"output={out}")
    assert warned.returncode == 0, warned.stderr
    said = " ".join(warned.stdout.split())  # lines are wrapped at 100 columns
    assert "effective labeled users (Kish;" in said
    assert "run `pulse-ml infer inference=randomization` for an exact test" in said
