"""``analyse`` with a single unlabeled session in an arm (issue 15: 1-5 unlabeled per arm)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from pulse_ml.inference.effects import InferenceSettings, analyse
from pulse_ml.sessions.case_studies import CaseStudy
from pulse_ml.sessions.feature_sets import feature_set_from_mapping
from pulse_ml.sessions.table import validate_frame
from pulse_ml.stats.arm_effect import compare_arms
from pulse_ml.stats.arm_inputs import Arm

FEATURES = feature_set_from_mapping({"name": "t", "columns": {"n": {"kind": "count"}}})


def _table(n_unl_control: int, seed: int = 0):
    rng = np.random.default_rng(seed)
    per_arm = 120  # 40 users x 3 labeled sessions, as tests/stats/validity_sims.few_unlabeled
    rows = []
    for a, cond in enumerate(("a", "b")):
        users = np.repeat(np.arange(40), 3) + 100 * a
        n_unl = n_unl_control if a == 0 else 300
        users = np.concatenate([users, rng.choice(40, n_unl) + 100 * a])
        labeled = np.arange(users.size) < per_arm
        x = rng.normal(size=users.size)
        rating = np.where(labeled, np.clip(np.round(3 + 0.3 * a + x), 1, 5), np.nan)
        rows.append(pd.DataFrame({"user_id": [f"u{u}" for u in users], "condition": cond,
                                  "rating": rating, "n": rng.poisson(3, users.size),
                                  "x": x}))
    frame = pd.concat(rows, ignore_index=True)
    frame["session_id"] = [f"s{i}" for i in range(len(frame))]
    frame["case_study"] = "cs"
    preds = 3 + frame.pop("x").to_numpy() + rng.normal(0, 0.5, len(frame))
    study = CaseStudy("cs", "a", "b")
    return validate_frame(frame, "t.parquet", FEATURES, {"cs": study}), study, preds


@pytest.mark.parametrize("big_n", [1, 2])
def test_one_unlabeled_session_is_analysed_and_the_shift_check_is_skipped(big_n):
    table, study, preds = _table(big_n)
    res = analyse(table, preds, study, InferenceSettings(n_permutations=200))
    shift = res.prediction_shift.set_index("arm")
    assert shift.loc["control", "n_unlabeled"] == big_n
    if big_n == 1:
        assert np.isnan(shift.loc["control", "smd"])
        assert "skipped" in shift.loc["control", "note"]
        assert any("prediction-shift diagnostic skipped" in w for w in res.comparison.warnings)
    else:
        assert np.isfinite(shift.loc["control", "smd"]) and shift.loc["control", "note"] == ""
    assert np.isfinite(shift.loc["treatment", "smd"])
    # the printed interval is compare_arms' clustered one, whose coverage at N = 1..5 is the
    # seeded simulation tests/stats/test_arm_effect_coverage.py (>= 0.94, floor on)
    f, frame = preds, table.frame
    codes = pd.factorize(frame["user_id"])[0]
    lab = table.labeled
    arms = []
    for cond in ("a", "b"):
        m = (frame["condition"] == cond).to_numpy()
        arms.append((frame["rating"].to_numpy(float)[m & lab], f[m & lab], f[m & ~lab],
                     codes[m & lab], codes[m & ~lab]))
    (yc, fc, uc, cc, cuc), (yt, ft, ut, ct, cut) = arms
    ref = compare_arms(Arm(yc, fc, uc, users=cc, users_unl=cuc),
                       Arm(yt, ft, ut, users=ct, users_unl=cut))
    assert res.comparison.augmented.ci_lower == pytest.approx(ref.augmented.ci_lower, rel=1e-12)
    assert res.comparison.augmented.ci_upper == pytest.approx(ref.augmented.ci_upper, rel=1e-12)
    assert res.comparison.n_unlabeled_control == big_n


def test_terminal_header_follows_alpha():
    from pulse_ml.inference.effects import effects_frame
    from pulse_ml.jobs.infer import printable

    table, study, preds = _table(300)
    res = analyse(table, preds, study, InferenceSettings(alpha=0.1, n_permutations=100))
    view = printable(effects_frame([res]), {})
    assert "effect [90% CI]" in view.columns and not any("95%" in c for c in view.columns)
