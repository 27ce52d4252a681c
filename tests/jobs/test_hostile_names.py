"""Names are data, end to end: hostile case-study and condition names through infer and audit.

Each name reaches a file name, an MLflow metric key, a CSV cell and a plot label. The CSVs are
read as a spreadsheet reads them (the first character of each cell decides whether it runs).
"""

from __future__ import annotations

import csv
import json

import pandas as pd
import pytest

LONG = "Ünïcödé " * 38 + "!"  # 305 characters, 343 bytes: longer than a file name may be
CASES = {"plan": f"../../etc/x (y) $\\foo$ 🎉 {LONG}", "claude4_vs_gpt5": '=HYPERLINK("http://x")'}
ARMS = {"no-plan": "$x^2$ (control) 🚀", "show-plan": "שלום \u202eevil",
        "claude-4-sonnet": "+cmd|' /C calc'!A0", "gpt-5": "@SUM(1)"}


@pytest.fixture
def registered(trained_home):
    return trained_home("progress=false", "model=mean")


@pytest.fixture
def hostile(small_demo, tmp_path):
    frame = pd.read_parquet(small_demo)
    frame["case_study"] = frame["case_study"].map(lambda v: CASES.get(v, v))
    frame["condition"] = frame["condition"].map(lambda v: ARMS.get(v, v))
    path = tmp_path / "hostile.parquet"
    frame.to_parquet(path, index=False)
    return path


def spreadsheet_cells(path):
    """Every cell of a CSV as a spreadsheet reads it."""
    with open(path, newline="", encoding="utf-8") as fh:
        return [cell for row in csv.reader(fh) for cell in row]


def assert_no_formula(path):
    for cell in spreadsheet_cells(path):
        if cell[:1] in ("=", "+", "-", "@", "\t", "\r"):
            float(cell)  # only a plain number may start so (a spreadsheet cannot run it)


def test_infer_with_hostile_names_works_and_writes_inert_csv(registered, hostile, cli, tmp_path):
    out = tmp_path / "results" / "infer"
    res = cli("infer", f"data.path={hostile}", "permutations=200", f"output={out}")
    assert res.returncode == 0, res.stderr[-2000:]
    assert "Traceback" not in res.stderr
    for name in ("effects.csv", "features.csv", "label_shift.csv", "prediction_shift.csv"):
        if (out / name).stat().st_size > 1:
            assert_no_formula(out / name)
    cells = spreadsheet_cells(out / "effects.csv")
    assert "'" + CASES["claude4_vs_gpt5"] in cells and "'" + ARMS["gpt-5"] in cells
    assert CASES["plan"] in cells and ARMS["show-plan"] in cells  # kept verbatim otherwise
    doc = json.loads((out / "effects.json").read_text())
    assert {r["case_study"] for r in doc["effects"]} == set(CASES.values())
    assert (out / "forest.png").stat().st_size > 0 and (out / "report.html").is_file()
    assert sorted(p.name for p in (tmp_path / "results").iterdir()) == ["infer"]


def test_audit_of_a_path_like_name_stays_in_its_output(registered, hostile, cli, tmp_path):
    out = tmp_path / "results" / "audit"
    name = CASES["plan"]
    res = cli("audit", f"data.path={hostile}", f"case_study='{name}'",
              "split_half.replications=40", "replications=10", f"output={out}")
    assert res.returncode == 0, res.stderr[-2000:]
    files = sorted(p.name for p in out.iterdir())
    assert len(files) == 2 and all(f.startswith("audit_etc_x_y_foo") for f in files), files
    assert json.loads((out / files[1]).read_text())["case_study"] == name
    assert_no_formula(out / files[0])
    assert sorted(p.name for p in (tmp_path / "results").iterdir()) == ["audit"]
