"""A DataError with thousands of problems prints one screen, not one line per problem."""

from __future__ import annotations

import subprocess
import sys

import pytest

from pulse_ml.errors import MAX_PROBLEMS_SHOWN, DataError


def test_many_problems_are_counted_not_listed():
    err = DataError("t.csv", [f"column 'c{i}': missing" for i in range(10_000)])
    lines = str(err).splitlines()
    assert len(lines) == 1 + MAX_PROBLEMS_SHOWN + 1 and len(err.problems) == 10_000
    assert lines[-1] == "  - ... and 9,980 more problem(s) (the first 20 are shown; fix these " \
                        "and run again)"
    assert str(DataError("t.csv", ["one"])) == "t.csv: 1 problem(s) found\n  - one"


@pytest.mark.slow
def test_a_feature_set_of_10000_missing_columns_is_one_screen(small_demo, tmp_path):
    path = tmp_path / "wide.yaml"
    path.write_text("name: wide\ncolumns:\n" + "".join(f"  c{i}: {{kind: numeric}}\n"
                                                      for i in range(10_000)))
    res = subprocess.run([sys.executable, "-m", "pulse_ml", "validate", f"data.path={small_demo}",
                          f"features={path}"], capture_output=True, text=True, timeout=300)
    assert res.returncode == 2, res.stderr[-500:]
    assert len(res.stderr.strip().splitlines()) <= MAX_PROBLEMS_SHOWN + 2
    assert "10000 problem(s) found" in res.stderr and "9,980 more problem(s)" in res.stderr
