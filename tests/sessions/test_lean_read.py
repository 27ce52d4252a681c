"""Analyses read a table without its free text, and add back the text columns a model reads."""

from __future__ import annotations

import pandas as pd
import pytest

from pulse_ml.sessions.readers import FREE_TEXT, read_frame, with_free_text


@pytest.mark.parametrize("suffix", [".parquet", ".csv"])
def test_free_text_is_skipped_and_added_back_on_demand(small_demo, tmp_path, suffix):
    full = pd.read_parquet(small_demo)
    full.loc[4, "user_text"] = "5"  # a text that looks like a number stays a string
    path = tmp_path / f"t{suffix}"
    if suffix == ".csv":
        full.to_csv(path, index=False)
    else:
        full.to_parquet(path, index=False)
    lean = read_frame(path, skip=FREE_TEXT)
    assert "user_text" not in lean.columns
    assert list(lean.columns) == [c for c in full.columns if c != "user_text"]
    assert with_free_text(lean, path, []) is lean  # a model without text: nothing read
    back = with_free_text(lean, path, ["user_text", "bot_text"])  # bot_text: not in the file
    assert list(back.columns) == [*lean.columns, "user_text"]
    expected = read_frame(path)["user_text"]
    assert back["user_text"].tolist() == expected.tolist()
    assert back.loc[4, "user_text"] == "5"
