"""``analyse`` with a text feature: the text enters the feature tests as its word count."""

from __future__ import annotations

import numpy as np
import pandas as pd

from pulse_ml.inference.effects import InferenceSettings, analyse, feature_test_columns
from pulse_ml.sessions.case_studies import CaseStudy
from pulse_ml.sessions.feature_sets import feature_set_from_mapping
from pulse_ml.sessions.table import validate_frame

FEATURES = feature_set_from_mapping({"name": "t", "columns": {
    "user_text": {"kind": "text"}, "n": {"kind": "count"}}})


def _table(seed: int = 0):
    rng = np.random.default_rng(seed)
    n = 400
    arm = np.repeat(["a", "b"], n // 2)
    # treatment users write 3 more words on average: the word-count test must see it
    words = rng.poisson(5, n) + np.where(arm == "b", 3, 0)
    text = np.array([" ".join(["ok"] * k) for k in words], dtype=object)
    labeled = rng.random(n) < 0.3
    rating = np.where(labeled, np.clip(np.round(rng.normal(3.5, 1, n)), 1, 5), np.nan)
    frame = pd.DataFrame({"session_id": [f"s{i}" for i in range(n)], "case_study": "cs",
                          "condition": arm, "rating": rating, "user_text": text,
                          "n": rng.poisson(3, n)})
    study = CaseStudy("cs", "a", "b")
    return validate_frame(frame, "t.parquet", FEATURES, {"cs": study}), study, words


def test_text_is_tested_as_word_count():
    table, study, words = _table()
    preds = np.full(len(table.frame), 3.5) + np.random.default_rng(1).normal(0, 0.1, 400)
    result = analyse(table, preds, study, InferenceSettings(n_permutations=200))
    row = result.features.set_index("feature").loc["user_text (words)"]
    assert row["kind"] == "count"
    lab = table.labeled
    arm_b = (table.frame["condition"] == "b").to_numpy()
    assert np.isclose(row["mean_treatment"], words[lab & arm_b].mean())
    assert row["p_value"] < 1e-3  # 3 extra words on ~60 sessions per arm: z >~ 6
    assert "user_text (words)" in set(result.shift["feature"])
    assert "user_text" not in set(result.features["feature"])


def test_columns_count_words_of_missing_as_zero():
    rows = pd.DataFrame({"user_text": ["a b\nc", "", None], "n": [1, 2, 3]})
    out = feature_test_columns(rows, {"user_text": "text", "n": "count"})
    assert out["user_text (words)"].tolist() == [3, 0, 0] and out["n"].tolist() == [1, 2, 3]
