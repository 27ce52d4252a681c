"""``analyse`` with ``request_prob``: uniform asking is today's analysis, varying asking is IPW."""

from __future__ import annotations

import numpy as np
import pandas as pd

from pulse_ml.inference.effects import InferenceSettings, analyse
from pulse_ml.sessions.case_studies import CaseStudy
from pulse_ml.sessions.feature_sets import feature_set_from_mapping
from pulse_ml.sessions.table import validate_frame

FEATURES = feature_set_from_mapping({"name": "t", "columns": {"n": {"kind": "count"}}})
STUDY = CaseStudy("s", "a", "b")


def _frame(seed: int = 0, n_users: int = 150) -> tuple[pd.DataFrame, np.ndarray, np.ndarray]:
    """Every session with a rating it would give; pi ~ sqrt(error) from ``n``; who answered."""
    rng = np.random.default_rng(seed)
    per_user = 1 + rng.poisson(3, n_users)
    users = np.repeat(np.arange(n_users), per_user)
    n = rng.poisson(3, users.size)
    cond = np.where(rng.random(users.size) < 0.5, "a", "b")  # users in both arms
    y = np.clip(np.round(4 + 0.2 * (n - 3) + rng.normal(0, 0.5 + 0.3 * n)), 1, 5)
    pi = np.clip(0.1 + 0.08 * n, 0.05, 1.0)
    rated = rng.random(users.size) < pi * 0.85
    frame = pd.DataFrame({"session_id": [f"s{i}" for i in range(users.size)],
                          "user_id": [f"u{u}" for u in users], "case_study": "s",
                          "condition": cond, "rating": np.where(rated, y, np.nan), "n": n})
    preds = 4 + 0.2 * (n - 3) + rng.normal(0, 0.2, users.size)
    return frame, preds, pi


def _analyse(frame: pd.DataFrame, preds: np.ndarray):
    table = validate_frame(frame, "t.parquet", FEATURES, {"s": STUDY})
    return analyse(table, preds, STUDY, InferenceSettings(n_permutations=200))


def test_uniform_request_prob_reproduces_todays_numbers():
    frame, preds, _ = _frame()
    today = _analyse(frame, preds)
    uniform = _analyse(frame.assign(request_prob=0.3), preds)
    pd.testing.assert_frame_equal(pd.DataFrame(uniform.rows()), pd.DataFrame(today.rows()))
    assert not any("request_prob" in w for w in uniform.comparison.warnings)


def test_varying_request_prob_weights_the_rated_sessions_and_says_who_answered():
    frame, preds, pi = _frame()
    today = _analyse(frame, preds)
    active = _analyse(frame.assign(request_prob=pi), preds)
    assert active.comparison.weighted and not today.comparison.weighted
    assert active.comparison.augmented.effect != today.comparison.augmented.effect
    notes = [w for w in active.comparison.warnings if "asked by request_prob" in w]
    assert len(notes) == 2
    rated_a = int(((frame["condition"] == "a") & frame["rating"].notna()).sum())
    assert f"control arm 'a': asked by request_prob, {rated_a} rated of ~" in notes[0]
    assert "estimated response" in notes[0]
