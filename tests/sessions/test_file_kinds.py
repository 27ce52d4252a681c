"""Inputs that are not the table file they should be are named for what they are."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

pytestmark = pytest.mark.slow  # each test runs `pulse-ml validate` in a subprocess


def _validate(path):
    res = subprocess.run([sys.executable, "-m", "pulse_ml", "validate", f"data.path={path}"],
                         capture_output=True, text=True, timeout=120)
    assert res.returncode == 2, res.stdout + res.stderr
    assert "Traceback" not in res.stderr and "unexpectedly" not in res.stderr
    return res.stderr


@pytest.fixture(scope="module")
def frame(tmp_path_factory):
    from pulse_ml.simulate.generator import simulate
    from pulse_ml.simulate.spec import CaseStudySpec, SimulateSettings

    return simulate(SimulateSettings(
        seed=3, n_labeled=100, unlabeled_ratio=1.0, labeled_per_arm=20, min_labeled_per_arm=10,
        mc_sessions=10_000, signal=2.0,
        case_studies=(CaseStudySpec("plan", "no-plan", "show-plan", 0.03),))).sessions


def test_fifo_is_named_a_fifo(tmp_path):
    path = tmp_path / "pipe.parquet"
    os.mkfifo(path)
    assert "is a named pipe (FIFO), not a regular file" in _validate(path)


def test_parquet_folder_is_named_a_dataset(tmp_path, frame):
    folder = tmp_path / "sessions.parquet"
    folder.mkdir()
    frame.iloc[:50].to_parquet(folder / "part-0.parquet")
    frame.iloc[50:].to_parquet(folder / "part-1.parquet")
    assert "is a folder of 2 Parquet part file(s)" in _validate(folder)


def test_csv_with_a_column_named_twice_is_refused(tmp_path, frame):
    path = tmp_path / "dup.csv"
    frame.rename(columns={"user_message_count": "rating"}).to_csv(path, index=False)
    text = _validate(path)
    assert "names 1 column(s) more than once: 'rating' (columns" in text
    assert len(text.strip().splitlines()) == 2  # the file line and the one problem


def test_jsonl_names_its_bad_line(tmp_path, frame):
    path = tmp_path / "bad.jsonl"
    lines = frame.iloc[:20].to_json(orient="records", lines=True,
                                     date_format="iso").splitlines()
    lines[11] = '{"session_id": "s11", broken'
    path.write_text("\n".join(lines) + "\n")
    assert "line 12 is not JSON" in _validate(path)


def test_reader_is_unchanged_for_good_files(tmp_path, frame):
    from pulse_ml.sessions.readers import read_frame

    path = tmp_path / "ok.csv"
    frame.to_csv(path, index=False)
    assert list(read_frame(path).columns) == list(frame.columns)
