"""``analyse(reweight=True)`` on small case studies: it runs, or it says which study and why."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from pulse_ml.errors import PulseError
from pulse_ml.inference.effects import InferenceSettings, analyse
from pulse_ml.sessions.case_studies import CaseStudy
from pulse_ml.sessions.feature_sets import feature_set_from_mapping
from pulse_ml.sessions.table import validate_frame

FEATURES = feature_set_from_mapping({"name": "t", "columns": {"n": {"kind": "count"}}})


def _table(labeled_users: int, sessions_per_user: int = 4, seed: int = 0):
    rng = np.random.default_rng(seed)
    rows = []
    for a, cond in enumerate(("a", "b")):
        lab_users = np.repeat(np.arange(labeled_users), sessions_per_user) + 100 * a
        unl_users = np.repeat(np.arange(50, 60), 3) + 100 * a
        users = np.concatenate([lab_users, unl_users])
        labeled = np.arange(users.size) < lab_users.size
        count = rng.poisson(3 + labeled, users.size)
        rating = np.where(labeled, 1 + (np.arange(users.size) + a) % 5, np.nan)
        rows.append(pd.DataFrame({"user_id": [f"u{u}" for u in users], "condition": cond,
                                  "rating": rating, "n": count}))
    frame = pd.concat(rows, ignore_index=True)
    frame["session_id"] = [f"s{i}" for i in range(len(frame))]
    frame["case_study"] = "tiny"
    study = CaseStudy("tiny", "a", "b")
    preds = 3 + 0.1 * frame["n"].to_numpy(float) + rng.normal(0, 0.3, len(frame))
    return validate_frame(frame, "t.parquet", FEATURES, {"tiny": study}), study, preds


def test_small_study_reweights_with_fewer_folds():
    # 2 labeled sessions per arm (4 in the study) used to fail: 5 folds need 5 of each kind
    table, study, preds = _table(labeled_users=2, sessions_per_user=1)
    res = analyse(table, preds, study, InferenceSettings(n_permutations=100, reweight=True))
    assert res.comparison.weighted and np.isfinite(res.comparison.augmented.width)


def test_study_too_small_to_reweight_names_the_case_study():
    # one labeled user in the whole study: no propensity can be cross-fitted over users
    table, study, preds = _table(labeled_users=1)
    table.frame.loc[(table.frame["condition"] == "b") & table.labeled, "user_id"] = "u0"
    with pytest.raises(PulseError) as err:
        analyse(table, preds, study,
                InferenceSettings(n_permutations=100, reweight=True, clusters=False))
    msg = str(err.value)
    assert "t.parquet" in msg and "case study 'tiny'" in msg and "reweight=false" in msg
