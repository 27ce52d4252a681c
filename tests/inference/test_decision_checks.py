"""decide_study's checks on small tables: rating-rate mismatch, arms that ran apart, SRM unit."""

from __future__ import annotations

import numpy as np
import pandas as pd

from pulse_ml.inference.decisions import decide_study
from pulse_ml.sessions.case_studies import from_mapping
from pulse_ml.sessions.feature_sets import feature_set_from_mapping
from pulse_ml.sessions.table import validate_frame
from pulse_ml.stats.arm_effect import compare_arms
from pulse_ml.stats.arm_inputs import Arm

FEATURES = feature_set_from_mapping({"name": "x", "columns": {"x": {"kind": "numeric"}}})
STUDY = from_mapping({"name": "t", "control": "a", "treatment": "b"})


def _table(rate_b: float = 0.2, start_b: str = "2025-06-01", n: int = 4000, seed: int = 0):
    rng = np.random.default_rng(seed)
    arm = np.repeat(["a", "b"], n)
    rated = rng.random(2 * n) < np.where(arm == "a", 0.2, rate_b)
    start = np.where(arm == "a", pd.Timestamp("2025-06-01").value,
                     pd.Timestamp(start_b).value) + rng.integers(0, 14 * 86400, 2 * n) * 10**9
    frame = pd.DataFrame({
        "session_id": [f"s{i}" for i in range(2 * n)],
        "user_id": [f"u{i}" for i in range(2 * n)],  # one session per user: users randomized
        "case_study": "t", "condition": arm,
        "rating": np.where(rated, rng.integers(1, 6, 2 * n), np.nan),
        "x": rng.normal(size=2 * n),
        "started_at": pd.to_datetime(start, utc=True)})
    table = validate_frame(frame, "t.csv", FEATURES, {"t": STUDY})
    f = table.frame
    arms = []
    for cond in ("a", "b"):
        m = (f["condition"] == cond).to_numpy()
        lab = m & table.labeled
        arms.append(Arm(y=f["rating"].to_numpy()[lab], f=f["x"].to_numpy()[lab],
                        f_unl=f["x"].to_numpy()[m & ~table.labeled]))
    return table, compare_arms(arms[0], arms[1])


def test_rating_rate_mismatch_is_a_warning_naming_reweight():
    table, comp = _table(rate_b=0.1)
    rec = decide_study(table, STUDY, [comp], 0.05)[0]
    assert rec["decision"] != "invalid"  # sessions are balanced
    assert rec["rating_rate"]["b"] < 0.12 < 0.18 < rec["rating_rate"]["a"]
    assert any("rating-rate mismatch" in w and "reweight=true" in w for w in rec["warnings"])
    assert rec["srm_unit"] == "user"


def test_balanced_rates_and_overlapping_times_warn_nothing():
    table, comp = _table()
    rec = decide_study(table, STUDY, [comp], 0.05)[0]
    assert rec["warnings"] == [] and rec["srm_p_value"] == 1.0


def test_arms_that_ran_apart_are_named():
    table, comp = _table(start_b="2025-07-01")
    rec = decide_study(table, STUDY, [comp], 0.05)[0]
    assert any("did not run at the same time" in w for w in rec["warnings"])
