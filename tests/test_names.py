"""Names are data: file-name slugs, MLflow metric keys and CSV cells (pulse_ml/names.py)."""

from __future__ import annotations

import csv

import pandas as pd
import pytest

from pulse_ml.names import file_part, metric_key, neutralize_csv, write_csv

HOSTILE = ["../../etc/passwd", "a (b) c", "🎉🚀", "שלום \u202eevil", "é" * 300, "$x^2$", "..",
           "CON", "a/../b", ".hidden", "x" * 61]


@pytest.mark.parametrize("name", HOSTILE)
def test_file_part_is_one_short_plain_component(name):
    part = file_part(name)
    assert "/" not in part and "\\" not in part and part not in (".", "..")
    assert len(part.encode()) <= 60 and part.isascii() and not part.startswith(".")


def test_file_part_keeps_plain_names_and_separates_lookalikes():
    assert file_part("plan") == "plan" and file_part("claude4_vs_gpt5") == "claude4_vs_gpt5"
    assert file_part("a b") != file_part("a_b") and file_part("a b") != file_part("a  b")


@pytest.mark.parametrize("name", [*HOSTILE, '=HYPERLINK("http://x")', "plan"])
def test_metric_key_is_accepted_by_mlflow(name):
    from mlflow.utils.validation import _validate_metric_name

    key = metric_key(f"{name}.naive.effect")
    _validate_metric_name(key)  # raises MlflowException on a key MLflow refuses
    if name == "plan":
        assert key == "plan.naive.effect"


def _rows(path):
    """The CSV as a spreadsheet reads it: rows of text cells."""
    with open(path, newline="", encoding="utf-8") as fh:
        return list(csv.reader(fh))


def test_write_csv_neutralizes_formulas_and_keeps_numbers(tmp_path):
    frame = pd.DataFrame({"=name": ["=HYPERLINK(\"http://x\")", "+cmd|' /C calc'!A0", "@SUM(1)",
                                    "-2+3", "\tx", "\rx", "plain", None],
                          "effect": [-0.5, 0.1, -3.0, 1.0, 2.0, 3.0, 4.0, 5.0],
                          "text_number": ["-0.5", "+3", "1e-3", "x", "y", "z", "w", "v"]})
    frame["cat"] = pd.Categorical(["=a", "b", "b", "b", "b", "b", "b", "b"])
    path = tmp_path / "t.csv"
    write_csv(frame, path)
    rows = _rows(path)
    assert len(rows) == 1 + len(frame) and all(len(r) == 4 for r in rows)
    for cell in (c for r in rows for c in r):
        if cell and cell[0] in "=+-@\t\r":
            float(cell)  # a spreadsheet can only read it as a number
    header, first = rows[0], rows[1]
    assert [float(r[1]) for r in rows[1:]] == frame["effect"].tolist()  # numbers stay numbers
    assert header[0] == "'=name" and first[0] == "'=HYPERLINK(\"http://x\")"
    assert first[2] == "-0.5" and first[3] == "'=a" and rows[4][0] == "'-2+3"
    assert frame.iloc[0, 0].startswith("=")  # the caller's frame is not changed


def test_neutralize_leaves_safe_frames_alone():
    frame = pd.DataFrame({"a": ["x", "y"], "b": [1, -2]})
    pd.testing.assert_frame_equal(neutralize_csv(frame), frame)
