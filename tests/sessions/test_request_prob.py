"""The optional ``request_prob`` column: (0, 1], no rating at 0, given for a whole case study."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from pulse_ml.errors import DataError
from pulse_ml.sessions.feature_sets import FeatureSet, FeatureSpec
from pulse_ml.sessions.table import validate_frame

FS = FeatureSet("x", (FeatureSpec("a", "numeric"),))


def _frame(n: int = 40) -> pd.DataFrame:
    rng = np.random.default_rng(0)
    rating = np.where(np.arange(n) % 3 == 0, rng.integers(1, 6, n).astype(float), np.nan)
    return pd.DataFrame({
        "session_id": [f"s{i}" for i in range(n)], "user_id": [f"u{i % 10}" for i in range(n)],
        "case_study": ["t"] * (n // 2) + ["other"] * (n - n // 2),
        "condition": ["a", "b"] * (n // 2), "rating": rating, "a": rng.normal(size=n),
        "request_prob": np.r_[np.linspace(0.1, 1.0, n // 2), [np.nan] * (n - n // 2)]})


def test_valid_request_prob_is_kept_as_float():
    table = validate_frame(_frame(), "t.csv", FS)
    got = table.frame["request_prob"].to_numpy()
    np.testing.assert_allclose(got[:20], np.linspace(0.1, 1.0, 20))
    assert np.isnan(got[20:]).all()  # another case study may go without it


@pytest.mark.parametrize("value, words", [
    (1.5, "outside (0, 1]"), (-0.2, "outside (0, 1]"), ("high", "request_prob"),
])
def test_values_outside_the_unit_interval_are_named(value, words):
    frame = _frame().astype({"request_prob": object})
    frame.loc[3, "request_prob"] = value
    with pytest.raises(DataError) as err:
        validate_frame(frame, "t.csv", FS)
    text = str(err.value)
    assert words in text and "row 4 (session_id=s3)" in text and "t.csv" in text


def test_rating_on_a_never_asked_session_and_zero_without_rating():
    frame = _frame()
    frame.loc[0, "request_prob"] = 0.0  # rated (row 1)
    frame.loc[1, "request_prob"] = 0.0  # unrated (row 2)
    with pytest.raises(DataError) as err:
        validate_frame(frame, "t.csv", FS)
    text = str(err.value)
    assert "a rating on a session with request_prob = 0" in text and "row 1 (session_id=s0)" in text
    assert "outside (0, 1]" in text and "row 2 (session_id=s1)" in text


def test_missing_for_some_sessions_of_a_case_study_that_uses_it():
    frame = _frame()
    frame.loc[[5, 7], "request_prob"] = np.nan
    with pytest.raises(DataError) as err:
        validate_frame(frame, "t.csv", FS)
    text = str(err.value)
    assert "missing for some sessions of case study 't'" in text
    assert "2 row(s): row 6 (session_id=s5), row 8 (session_id=s7)" in text
