import hashlib
from dataclasses import replace

import numpy as np
import pandas as pd
import pytest

from pulse_ml.config import compose
from pulse_ml.errors import PulseError
from pulse_ml.settings import simulator_settings as settings_from_config
from pulse_ml.simulate.generator import (
    FEATURE_COLUMNS,
    GUARDRAIL_COLUMNS,
    ID_COLUMNS,
    TEXT_COLUMN,
    simulate,
)
from pulse_ml.simulate.model import CATEGORIES, SENTIMENTS
from pulse_ml.simulate.summary import calibration_figures, rank_biserial

SMALL = dict(n_labeled=400, labeled_per_arm=40, min_labeled_per_arm=30, mc_sessions=40_000)


@pytest.fixture(scope="module")
def default_settings():
    return settings_from_config(compose("simulate", []))


@pytest.fixture(scope="module")
def default_result(default_settings):
    return simulate(default_settings)


def _parquet_hash(frame: pd.DataFrame, path) -> str:
    frame.to_parquet(path, index=False)
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_default_settings_match_the_paper_defaults(default_settings):
    s = default_settings
    assert (s.seed, s.n_labeled, s.unlabeled_ratio, s.signal) == (0, 1747, 20, 1.0)
    effects = {c.name: c.effect for c in s.case_studies}
    assert effects == {"claude37_vs_claude4": 0.050, "claude4_vs_gpt5": -0.069, "plan": 0.031,
                       "memory": 0.058}
    conditions = {c.name: (c.control, c.treatment) for c in s.case_studies}
    assert conditions["plan"] == ("no-plan", "show-plan")
    assert conditions["memory"] == ("max_step_120", "max_step_80")


def test_schema_and_dtypes(default_result):
    df = default_result.sessions
    assert list(df.columns) == list(ID_COLUMNS + FEATURE_COLUMNS + (TEXT_COLUMN,)
                                    + GUARDRAIL_COLUMNS)
    assert df["session_id"].is_unique
    assert df["session_id"].iloc[0] == "s000001" and df["user_id"].str.match(r"^u\d{5}$").all()
    for col in ("n_ratings", "user_message_count") + FEATURE_COLUMNS[3:]:
        assert df[col].dtype == np.int64, col
    for col in ("session_id", "user_id", "case_study", "condition", "user_sentiment",
                "task_category"):
        assert pd.api.types.is_string_dtype(df[col]), col
    assert set(df["user_sentiment"]) == set(SENTIMENTS)
    assert set(df["task_category"]) <= set(CATEGORIES)
    assert set(df[list(FEATURE_COLUMNS[3:])].to_numpy().ravel()) == {0, 1}
    labeled = df["rating"].notna()
    assert df.loc[labeled, "rating"].between(1, 5).all()
    assert df.loc[labeled, "n_ratings"].between(1, 3).all()
    assert (df.loc[~labeled, "n_ratings"] == 0).all()
    assert (df.loc[df["case_study"] == "", "condition"] == "default").all()


def test_calibration_against_the_paper(default_result):
    f = calibration_figures(default_result.sessions)
    assert f["n_labeled"] == 1747
    assert f["mean_rating"] == pytest.approx(4.07, abs=0.08)
    assert f["median_user_messages"] == pytest.approx(10, abs=2)
    assert f["rank_biserial_messages"] == pytest.approx(0.3, abs=0.1)
    assert f["unlabeled_per_labeled"] == pytest.approx(20, abs=0.5)
    assert f["share_raters_multiple_sessions"] == pytest.approx(0.1275, abs=0.05)
    assert f["share_users_multiple_sessions"] < 0.5  # most users have one session
    arms = {k: v for k, v in f.items() if k.startswith("labeled[")}
    assert len(arms) == 8 and min(arms.values()) >= 150
    assert 0.53 - 0.04 <= f["git_commit"] <= 0.66 + 0.04
    assert 0.45 - 0.04 <= f["git_push"] <= 0.61 + 0.04
    assert f["git_pull"] == pytest.approx(0.08, abs=0.025)
    assert f["git_reset"] == pytest.approx(0.07, abs=0.025)
    assert f["git_rebase"] == pytest.approx(0.015, abs=0.012)
    for flag in ("misunderstood_intention", "did_not_follow_instruction", "insufficient_analysis",
                 "insufficient_testing", "insufficient_debugging", "incomplete_implementation",
                 "scope_creep"):
        assert 0.05 <= f[flag] <= 0.5, flag


def test_rating_structure(default_result):
    df = default_result.sessions
    lab = df[df["rating"].notna()]
    # ratings are means of integer segment ratings
    assert np.allclose((lab["rating"] * lab["n_ratings"]) % 1, 0)
    sentiment = lab["user_sentiment"].map({"positive": 1, "neutral": 0, "negative": -1})
    r_sent = np.corrcoef(sentiment, lab["rating"])[0, 1]
    r_push = np.corrcoef(lab["git_push"], lab["rating"])[0, 1]
    r_pull = np.corrcoef(lab["git_pull"], lab["rating"])[0, 1]
    assert r_sent > r_push > 0.05 and abs(r_pull) < 0.06
    seg = default_result.segment_ratings
    means = seg.groupby("session_id")["rating"].agg(["mean", "size"])
    joined = lab.set_index("session_id").join(means)
    assert np.allclose(joined["mean"], joined["rating"])
    assert (joined["size"] == joined["n_ratings"]).all()
    assert (seg["segment"] >= 1).all()


def test_labeled_sessions_have_more_messages_in_every_arm(default_result):
    df = default_result.sessions
    for _, arm in df.groupby(["case_study", "condition"]):
        lab = arm["rating"].notna().to_numpy()
        assert rank_biserial(arm["user_message_count"][lab], arm["user_message_count"][~lab]) > 0.1


def test_ground_truth_effects_and_rho(default_result):
    truth = default_result.ground_truth
    for name, eff in truth.effects.items():
        assert eff["effect"] == pytest.approx(eff["target"], abs=max(4 * eff["mc_se"], 0.003)), name
        assert eff["mediated"] != 0.0  # partly through the features
    # gpt-5 pushes less (Table 6): the arm shift shows in the data
    df = default_result.sessions
    cs = df[df["case_study"] == "claude4_vs_gpt5"]
    push = cs.groupby("condition")["git_push"].mean()
    msgs = cs.groupby("condition")["user_message_count"].mean()
    assert push["gpt-5"] < push["claude-4-sonnet"] - 0.05
    assert msgs["gpt-5"] < 0.85 * msgs["claude-4-sonnet"]
    assert truth.bayes_rho == pytest.approx(0.33, abs=0.04)
    assert truth.mc_sessions["rho_labeled"] > 15_000


@pytest.mark.slow
def test_signal_moves_bayes_rho(default_settings):
    small = replace(default_settings, mc_sessions=120_000, **{k: v for k, v in SMALL.items()
                                                              if k != "mc_sessions"})
    weak = simulate(replace(small, signal=1.0)).ground_truth.bayes_rho
    strong = simulate(replace(small, signal=2.0)).ground_truth.bayes_rho
    none = simulate(replace(small, signal=0.0)).ground_truth.bayes_rho
    assert strong > weak + 0.15
    assert abs(none) < 0.05


@pytest.mark.slow
def test_same_seed_same_bytes_and_other_seed_differs(default_settings, tmp_path):
    small = replace(default_settings, **SMALL)
    a = _parquet_hash(simulate(small).sessions, tmp_path / "a.parquet")
    b = _parquet_hash(simulate(small).sessions, tmp_path / "b.parquet")
    c = _parquet_hash(simulate(replace(small, seed=1)).sessions, tmp_path / "c.parquet")
    assert a == b
    assert a != c


def test_effects_follow_the_settings(default_settings):
    small = replace(default_settings, **SMALL)
    cases = tuple(replace(c, effect=0.2 if c.name == "plan" else 0.0)
                  for c in small.case_studies)
    truth = simulate(replace(small, case_studies=cases)).ground_truth
    assert truth.effects["plan"]["effect"] == pytest.approx(0.2, abs=0.005)
    assert truth.effects["memory"]["effect"] == pytest.approx(0.0, abs=0.005)


@pytest.mark.parametrize("change, key", [
    (dict(labeled_per_arm=100), "labeled_per_arm=100"),
    (dict(n_labeled=1000), "n_labeled=1000"),
    (dict(signal=-1.0), "signal"),
    (dict(mean_rating=5.5), "mean_rating"),
])
def test_bad_settings_name_the_key(default_settings, change, key):
    with pytest.raises(PulseError, match=key.split("=")[0]) as info:
        simulate(replace(default_settings, **change))
    assert key in str(info.value)
