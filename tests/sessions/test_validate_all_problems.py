"""One message lists every problem of a table: a missing column no longer hides bad values.

The README promises ``validate`` lists every problem at once. Before, a missing column stopped
the checks, so the bad values of the columns present showed up only after a second run.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from pulse_ml.errors import DataError, PulseError
from pulse_ml.sessions.case_studies import CaseStudy, check_selected
from pulse_ml.sessions.feature_sets import FeatureSet, FeatureSpec
from pulse_ml.sessions.table import validate_frame

FEATURES = FeatureSet("t", (FeatureSpec("messages", "count"), FeatureSpec("solved", "flag"),
                            FeatureSpec("sentiment", "numeric")))
PLAN = {"plan": CaseStudy("plan", "a", "b")}


def _table(n: int = 40) -> pd.DataFrame:
    rng = np.random.default_rng(0)
    stars = rng.choice([1, 2, 3, 4, 5], size=n, p=[.10, .08, .15, .27, .40]).astype(float)
    stars[rng.random(n) < 0.5] = np.nan  # half unlabeled
    return pd.DataFrame({
        "session_id": [f"s{i}" for i in range(n)],
        "user_id": [f"u{i % 7}" for i in range(n)],
        "case_study": "plan", "condition": np.where(np.arange(n) % 2, "a", "b"),
        "rating": stars, "messages": rng.integers(1, 9, n), "solved": rng.integers(0, 2, n),
        "sentiment": rng.normal(size=n)})


def _problems(frame: pd.DataFrame, only=None) -> list[str]:
    with pytest.raises(DataError) as err:
        validate_frame(frame, "t.csv", FEATURES, PLAN, only)
    assert str(err.value).startswith(f"t.csv: {len(err.value.problems)} problem(s) found")
    return err.value.problems


def test_missing_required_column_does_not_hide_bad_values():
    frame = _table().drop(columns=["rating"])
    frame.loc[4, "messages"] = -3  # a count below 0
    frame.loc[6, "solved"] = 2  # a flag that is not 0/1
    frame.loc[[8, 9], "session_id"] = "s1"  # duplicate ids
    problems = _problems(frame)
    text = "\n".join(problems)
    assert len(problems) == 4, text
    assert problems[0].startswith("column 'rating': missing (required column)")
    assert "column 'messages'" in text and "row 5 (session_id=s4)" in text
    assert "column 'solved'" in text and "row 7 (session_id=s6)" in text
    assert "column 'session_id': duplicate ids ('s1') in 3 row(s)" in text


def test_missing_feature_column_does_not_hide_ratings_ids_or_case_studies():
    frame = _table().drop(columns=["sentiment"])
    frame.loc[2, "rating"] = 7.0
    frame.loc[3, "session_id"] = ""
    problems = _problems(frame, only=["plan", "plam2"])
    text = "\n".join(problems)
    assert len(problems) == 4, text
    assert problems[0].startswith("column 'sentiment': missing (feature column of set 't')")
    assert "column 'rating': values outside [1, 5] ('7.0') in 1 row(s): row 3" in text
    assert "column 'session_id': empty values in 1 row(s): row 4" in text
    assert "case study 'plam2' not in the data" in text
    assert "did you mean 'plan'?" in text


def test_every_required_column_missing_still_checks_the_features():
    frame = _table().drop(columns=["session_id", "condition", "rating"])
    frame["sentiment"] = frame["sentiment"].astype(object)
    frame.loc[0, "sentiment"] = "happy"
    problems = _problems(frame)
    assert [p.split(":")[0] for p in problems] == [
        "column 'session_id'", "column 'condition'", "column 'rating'", "column 'sentiment'"]
    assert "non-numeric values ('happy') in 1 row(s): row 1" in problems[3]


def test_only_missing_columns_are_named_when_the_values_are_fine():
    problems = _problems(_table().drop(columns=["condition", "solved"]))
    assert [p.split(":")[0] for p in problems] == ["column 'condition'", "column 'solved'"]


def test_a_complete_clean_table_still_validates():
    table = validate_frame(_table(), "t.csv", FEATURES, PLAN, ["plan"])
    assert [s.name for s in table.case_studies] == ["plan"]
    assert len(table.frame) == 40


# The check of selected case-study names right after the table is read (before the model
# loads): a name is refused only when no row has it, found case studies included.

def test_selected_case_study_found_only_in_the_data_is_accepted():
    frame = _table().assign(case_study=" my_test ")  # no catalogue entry; stripped as validated
    check_selected(frame, "t.csv", ["my_test"], PLAN)
    check_selected(frame, "t.csv", None, PLAN)  # all: nothing to check
    check_selected(frame.drop(columns=["case_study"]), "t.csv", ["x"], PLAN)  # left to validation


def test_misspelled_case_study_names_the_closest_one_in_the_data_first():
    frame = _table()
    frame.loc[:9, "case_study"] = "memory"
    with pytest.raises(PulseError) as err:
        check_selected(frame, "t.csv", ["plan", "memry", "zzz"], PLAN, "case_studies")
    msg = str(err.value)
    assert not isinstance(err.value, DataError)
    assert msg.startswith("t.csv: case study 'memry', 'zzz' not in the data (present: memory, "
                          "plan).")
    assert "'memry': did you mean 'memory'?" in msg and "'zzz'" in msg
    assert msg.endswith("Fix the name in `case_studies` or the data.")


def test_a_configured_name_absent_from_the_data_says_so():
    frame = _table().assign(case_study="other")
    with pytest.raises(PulseError, match=r"did you mean 'plan' \(configured, but not in this "
                                         r"data\)\?"):
        check_selected(frame, "t.csv", ["plam"], PLAN, "case_study")
