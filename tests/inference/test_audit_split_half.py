"""``pulse_ml.inference.audit.split_half`` on a session table: the audit's verdict.

The statistics are tested on data of known truth in tests/stats/test_half_checks.py (valid
strong-predictor analyses flagged in 5% of data sets, i.i.d. intervals on clustered data in
100%, in-sample predictions in 73%); here the table path: the verdict is the augmented audit's
(variance and bias check), the naive variance check rides along, and a small study is told what
it can still check.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from pulse_ml.inference.audit import split_half
from pulse_ml.inference.effects import InferenceSettings
from pulse_ml.sessions.case_studies import CaseStudy
from pulse_ml.sessions.feature_sets import feature_set_from_mapping
from pulse_ml.sessions.table import validate_frame

FEATURES = feature_set_from_mapping({"name": "t", "columns": {"n": {"kind": "count"}}})


def _table(users: int, leak: float = 0.0, seed: int = 0):
    """Users randomized to arms, 8 sessions each, 40% rated; honest predictions (r ~ 0.7)."""
    rng = np.random.default_rng(seed)
    user = np.repeat(np.arange(users), 8)
    arm = rng.integers(0, 2, users)[user]
    labeled = rng.random(user.size) < 0.4
    u = rng.normal(0, 0.5, users)[user]
    x = rng.normal(size=user.size)
    latent = 3.6 + 0.4 * arm + u + x + 0.6 * rng.normal(size=user.size)
    rating = np.clip(np.round(latent), 1, 5)
    preds = 3.6 + x + u
    preds = np.where(labeled, preds + leak * (rating - preds), preds)
    frame = pd.DataFrame({"user_id": [f"u{g}" for g in user],
                          "condition": np.where(arm == 1, "b", "a"),
                          "rating": np.where(labeled, rating, np.nan),
                          "n": rng.poisson(3, user.size), "case_study": "cs"})
    frame["session_id"] = [f"s{i}" for i in range(len(frame))]
    study = CaseStudy("cs", "a", "b")
    return validate_frame(frame, "t.parquet", FEATURES, {"cs": study}), study, preds


def test_split_half_verdict_on_a_table():
    table, study, preds = _table(240)
    res = split_half(table, preds, study, InferenceSettings(), replications=400)
    assert set(res.audits) == {"augmented", "naive"}
    assert res.verdict == "valid" and res.bias is not None and not res.bias.flagged
    assert all(a.share == 0.5 and a.replications == 400 for a in res.audits.values())
    assert any("variance check" in c for c in res.checks)
    table, study, preds = _table(240, leak=0.8)
    leaky = split_half(table, preds, study, InferenceSettings(), replications=400)
    assert leaky.verdict == "too narrow" and leaky.bias.flagged and "bias check" in leaky.reason


def test_split_half_tells_a_small_study_what_it_can_check():
    table, study, preds = _table(30, seed=2)
    res = split_half(table, preds, study, InferenceSettings(), replications=200)
    assert res.verdict == "inconclusive"
    assert any("not meaningful" in c and ">= 20 per arm" in c for c in res.checks)
    assert any(c.startswith("bias check") for c in res.checks)
