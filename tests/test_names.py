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


def test_large_tables_read_back_the_same_through_either_writer(tmp_path):
    """Arrow's writer (large plain tables) and pandas' give the same cells, formulas handled."""
    import numpy as np

    from pulse_ml import names

    rng = np.random.default_rng(0)
    n = names.ARROW_ROWS
    ids = np.array([f"s{i}" for i in range(n)], dtype=object)
    ids[[3, 7, 11]] = ["=cmd()", "-0.5", None]
    frame = pd.DataFrame({"session_id": ids, "p": rng.random(n) ** 9,
                          "ask": rng.integers(0, 2, n).astype(np.int8),
                          "x": np.where(rng.random(n) < 0.1, np.nan, rng.normal(size=n) * 1e9)})
    fast, slow = tmp_path / "fast.csv", tmp_path / "slow.csv"
    assert names._write_arrow(neutralize_csv(frame), fast)  # the Arrow path is the one tested
    write_csv(frame, fast)
    neutralize_csv(frame).to_csv(slow, index=False)
    read = {p: pd.read_csv(p, dtype={"session_id": str}) for p in (fast, slow)}
    pd.testing.assert_frame_equal(read[fast], read[slow])
    assert read[fast]["p"].tolist() == frame["p"].tolist()  # the same doubles
    assert read[fast].loc[3, "session_id"] == "'=cmd()"
    assert read[fast].loc[7, "session_id"] == "-0.5"
    frame.loc[5, "session_id"] = "a,b"  # a cell the plain writer would have to quote: pandas
    assert not names._write_arrow(neutralize_csv(frame), tmp_path / "no.csv")
    write_csv(frame, fast)
    assert pd.read_csv(fast, dtype={"session_id": str}).loc[5, "session_id"] == "a,b"


def test_whole_number_float_columns_read_back_as_float_through_arrow(tmp_path):
    """Arrow writes 1.0 as "1": a float column of whole numbers must still read back as float
    (as pandas' writer gives it); -0.0 and infinities go to pandas' writer."""
    import numpy as np

    from pulse_ml import names

    rng = np.random.default_rng(1)
    n = names.ARROW_ROWS
    frame = pd.DataFrame({"ask": rng.integers(0, 3, n),
                          "weight": rng.integers(-5, 6, n).astype(float),
                          "half": rng.integers(0, 4, n) / 2,  # whole and fractional cells
                          "big": rng.integers(0, 2, n) * 1e15})
    fast, slow = tmp_path / "fast.csv", tmp_path / "slow.csv"
    assert names._write_arrow(neutralize_csv(frame), fast)
    neutralize_csv(frame).to_csv(slow, index=False)
    read = {p: pd.read_csv(p) for p in (fast, slow)}
    pd.testing.assert_frame_equal(read[fast], read[slow])
    assert read[fast].dtypes.to_dict() == frame.dtypes.to_dict()
    pd.testing.assert_frame_equal(read[fast], frame)
    for odd in (-0.0, np.inf, 2.0 ** 60):
        frame.loc[0, "weight"] = odd
        assert not names._write_arrow(frame, tmp_path / "no.csv")
