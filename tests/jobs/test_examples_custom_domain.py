"""A custom, non-coding domain end to end: own features, own case studies, train and infer.

A travel-booking agent: its sessions have none of the 15 coding-agent features. The feature set
and the case studies live in tmp_path (YAML files given by path), the commands run as the real
`pulse-ml` CLI in a subprocess, and the MLflow store is a fresh sqlite DB (``pulse_home``).
"""

from __future__ import annotations

import json

import mlflow
import numpy as np
import pandas as pd
import pytest
import yaml

from pulse_ml.env.paths import conf_dir

FEATURES = {
    "name": "travel",
    "columns": {
        "n_searches": {"kind": "count"},
        "booked": {"kind": "flag"},
        "destination_type": {"kind": "categorical", "values": ["beach", "city", "mountain"]},
        "avg_latency_s": {"kind": "numeric"},
    },
}


def travel_sessions(seed: int = 3, n: int = 480) -> pd.DataFrame:
    """Sessions of a travel agent: a latency case study, a booking-flow one, and untested ones."""
    rng = np.random.default_rng(seed)
    study = rng.choice(["search_cache", "booking_flow", ""], size=n, p=[0.4, 0.4, 0.2])
    arm = rng.integers(0, 2, size=n)
    condition = np.select(
        [study == "search_cache", study == "booking_flow"],
        [np.where(arm == 1, "cached", "uncached"), np.where(arm == 1, "one-page", "multi-page")],
        "default")
    latency = rng.gamma(2.0, 1.5, size=n) * np.where(condition == "cached", 0.5, 1.0)
    booked = rng.binomial(1, np.where(condition == "one-page", 0.6, 0.4))
    searches = rng.poisson(3 + 2 * (1 - booked))
    destination = rng.choice(["beach", "city", "mountain"], size=n)
    mean = 3.0 + 1.2 * booked - 0.25 * latency + 0.3 * (destination == "beach")
    rating = np.clip(np.rint(mean + rng.normal(0, 0.7, size=n)), 1, 5)
    labeled = rng.random(n) < 0.45
    return pd.DataFrame({
        "session_id": [f"trip-{i:04d}" for i in range(n)],
        "user_id": [f"traveller-{u:03d}" for u in rng.integers(0, 200, size=n)],
        "case_study": study,
        "condition": condition,
        "rating": np.where(labeled, rating, np.nan),
        "n_searches": searches,
        "booked": booked,
        "destination_type": destination,
        "avg_latency_s": latency.round(3),
    })


def coding_feature_names() -> set[str]:
    """The shipped coding-agent feature columns (the paper's 15)."""
    node = yaml.safe_load((conf_dir() / "features" / "all.yaml").read_text())
    return set(node["columns"])


@pytest.fixture
def travel_setup(tmp_path):
    """Table, feature-set YAML and a case-study folder, all in tmp_path."""
    table = tmp_path / "travel_sessions.csv"
    travel_sessions().to_csv(table, index=False)
    features = tmp_path / "travel_features.yaml"
    features.write_text(yaml.safe_dump(FEATURES))
    studies = tmp_path / "travel_case_studies"
    studies.mkdir()
    # control is the alphabetically LAST condition: only the YAML can make it the control
    (studies / "search_cache.yaml").write_text(yaml.safe_dump({
        "name": "search_cache", "control": "uncached", "treatment": "cached",
        "description": "cache search results (lower latency)"}))
    (studies / "booking_flow.yaml").write_text(yaml.safe_dump({
        "name": "booking_flow", "control": "multi-page", "treatment": "one-page"}))
    return table, features, studies


def test_custom_domain_train_and_infer_end_to_end(pulse_home, cli, travel_setup):
    table, features, studies = travel_setup
    assert not coding_feature_names() & set(pd.read_csv(table).columns)

    res = cli("train", f"data.path={table}", f"features={features}", "model=lightgbm",
              "tuning.n_trials=2", "progress=false")
    assert res.returncode == 0, res.stderr
    assert "features 'travel'" in res.stdout and "lightgbm" in res.stdout
    model = mlflow.MlflowClient().get_model_version_by_alias("pulse-satisfaction", "champion")
    assert model.tags["feature_set"] == "travel" and model.tags["family"] == "lightgbm"

    res = cli("infer", f"data.path={table}", f"case_study_dirs=['{studies}']",
              "permutations=500")
    assert res.returncode == 0, res.stderr
    assert "Traceback" not in res.stderr
    out = pulse_home / "results" / "infer"
    meta = json.loads((out / "effects.json").read_text())
    assert meta["feature_set"] == "travel" and meta["valid_intervals"]
    assert meta["n_labeled_with_oof"] == int(pd.read_csv(table)["rating"].notna().sum())
    effects = pd.DataFrame(meta["effects"])
    assert set(effects["case_study"]) == {"search_cache", "booking_flow"}
    assert set(effects["estimator"]) == {"naive", "augmented"}
    cache = effects[effects["case_study"] == "search_cache"].iloc[0]
    assert (cache["control"], cache["treatment"]) == ("uncached", "cached")
    flow = effects[effects["case_study"] == "booking_flow"].iloc[0]
    assert (flow["control"], flow["treatment"]) == ("multi-page", "one-page")
    num = effects[["effect", "ci_lower", "ci_upper"]].to_numpy(float)
    assert np.isfinite(num).all() and (num[:, 1] <= num[:, 0]).all() and (
        num[:, 0] <= num[:, 2]).all()
    # both designs raise satisfaction in the simulation; the augmented effect sees it
    aug = effects[effects["estimator"] == "augmented"].set_index("case_study")
    assert (aug["effect"] > 0).all()
    # per-feature outputs name the travel features only
    feats = pd.read_csv(out / "features.csv")
    shift = pd.read_csv(out / "label_shift.csv")
    for frame in (feats, shift):
        names = set(frame["feature"])
        assert names <= set(FEATURES["columns"]) and names
        assert not names & coding_feature_names()
