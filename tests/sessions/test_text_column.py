"""The contract for ``text`` feature columns: strings pass, missing = empty text, others refused."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from pulse_ml.errors import DataError
from pulse_ml.sessions.feature_sets import feature_set_from_mapping
from pulse_ml.sessions.readers import read_frame, with_text_columns
from pulse_ml.sessions.table import load_sessions, validate_chunk, validate_frame

FEATURES = feature_set_from_mapping(
    {"name": "t", "columns": {"user_text": {"kind": "text"}, "n": {"kind": "count"}}})


def _frame(text) -> pd.DataFrame:
    return pd.DataFrame({"session_id": ["a", "b", "c", "d"], "condition": "x",
                         "rating": [1.0, 2.0, np.nan, 4.0],
                         "user_text": pd.Series(text, dtype=object), "n": [1, 2, 3, 4]})


def test_missing_text_is_empty_text_with_a_note():
    table = validate_frame(_frame(["hi there", None, np.nan, "ok"]), "t.csv", FEATURES)
    assert table.frame["user_text"].tolist() == ["hi there", "", "", "ok"]
    assert any("'user_text': 2 of 4 session(s) have no text" in n for n in table.notes)


def test_complete_text_gives_no_note():
    table = validate_frame(_frame(["a", "b", "c", "d"]), "t.csv", FEATURES)
    assert not any("user_text" in n for n in table.notes)


@pytest.mark.parametrize("bad, types", [([5, "b", 2.5, "d"], "float, int"),
                                        (["a", ["x", "y"], "c", "d"], "list")])
def test_non_text_values_are_one_data_error_naming_rows(bad, types):
    frame = _frame(bad).assign(n=[1, 2, -1, 4])  # a second problem is reported in the same error
    with pytest.raises(DataError) as err:
        validate_frame(frame, "t.csv", FEATURES)
    msg = str(err.value)
    assert f"column 'user_text': values that are not text ({types}" in msg
    rows = [i + 1 for i, v in enumerate(bad) if not isinstance(v, str)]
    for r in rows:
        assert f"row {r} (session_id={'abcd'[r - 1]})" in msg
    assert "column 'n': negative counts" in msg


def test_chunk_validation_numbers_rows_from_the_file():
    with pytest.raises(DataError) as err:
        validate_chunk(_frame(["a", 7, "c", "d"]), FEATURES, "t.csv", first_row=200, chunk_no=3)
    assert "row 202 (session_id=b)" in str(err.value) and "chunk 3" in str(err.value)


def test_csv_text_that_looks_like_numbers_stays_text(tmp_path):
    path = tmp_path / "t.csv"
    _frame(["5", "12", "", "3"]).assign(notes=["7", "8", "9", "1"]).to_csv(path, index=False)
    table = load_sessions(path, FEATURES)
    assert table.frame["user_text"].tolist() == ["5", "12", "", "3"]
    custom = feature_set_from_mapping({"name": "c", "columns": {"notes": {"kind": "text"}}})
    assert load_sessions(path, custom).frame["notes"].tolist() == ["7", "8", "9", "1"]
    raw = read_frame(path)  # a job that reads before it knows the model: re-read its text columns
    assert raw["notes"].dtype != object
    assert with_text_columns(raw, path, ["notes"])["notes"].tolist() == ["7", "8", "9", "1"]
