"""pulse_ml.env.staging: a command's output sets are put in place together, or not at all."""

from __future__ import annotations

import pytest

from pulse_ml.env import staging
from pulse_ml.env.atomic import atomic_file, staged_outputs
from pulse_ml.errors import PulseError


def _files(folder):
    return {p.name: p.read_text() for p in sorted(folder.iterdir())}


def test_sets_are_put_in_place_only_when_the_command_returns(tmp_path):
    out, table = tmp_path / "results", tmp_path / "table.csv"
    with staging.command():
        with staged_outputs(out) as stage:
            (stage / "a.csv").write_text("new a")
        with atomic_file(table) as tmp:
            tmp.write_text("new table")
        assert not (out / "a.csv").exists() and not table.exists()  # still staged
        assert staging.pending_path(out / "a.csv").read_text() == "new a"
    assert _files(out) == {"a.csv": "new a"} and table.read_text() == "new table"


@pytest.mark.parametrize("fail_after", [1, 2, 3])
def test_a_failure_midway_restores_every_previous_file(fail_after, tmp_path, monkeypatch):
    out, table = tmp_path / "results", tmp_path / "table.csv"
    out.mkdir()
    (out / "a.csv").write_text("old a")
    (out / "stale.png").write_text("old stale")
    table.write_text("old table")
    monkeypatch.setenv(staging.FAIL_HOOK, str(fail_after))
    with pytest.raises(PulseError, match="failure injected"):
        with staging.command():
            with staged_outputs(out, discard=("stale.png",)) as stage:
                (stage / "a.csv").write_text("new a")
                (stage / "b.csv").write_text("new b")  # a file that did not exist before
            with atomic_file(table) as tmp:
                tmp.write_text("new table")
    assert _files(out) == {"a.csv": "old a", "stale.png": "old stale"}
    assert table.read_text() == "old table"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["results", "table.csv"]


def test_an_exception_in_the_command_leaves_nothing_and_removes_new_folders(tmp_path):
    out = tmp_path / "new" / "results"
    with pytest.raises(RuntimeError):
        with staging.command():
            with staged_outputs(out) as stage:
                (stage / "a.csv").write_text("a")
            raise RuntimeError("MLflow logging failed")
    assert list(tmp_path.iterdir()) == []


def test_a_folder_is_replaced_only_when_pulse_ml_marked_it(tmp_path):
    target = tmp_path / "scores"
    target.mkdir()
    (target / "mine.txt").write_text("mine")
    with pytest.raises(PulseError, match="pulse-ml did not write"):
        with staging.staged(tmp_path, "scores", lock_target=target, only="scores") as stage:
            (stage / "scores").mkdir()
            (stage / "scores" / "part-0.parquet").write_text("x")
    assert _files(target) == {"mine.txt": "mine"}
    (target / staging.MARKER).write_text("{}")
    with staging.staged(tmp_path, "scores", lock_target=target, only="scores") as stage:
        (stage / "scores").mkdir()
        (stage / "scores" / "part-0.parquet").write_text("x")
    assert _files(target) == {"part-0.parquet": "x"}
    assert sorted(p.name for p in tmp_path.iterdir()) == ["scores"]


def test_a_file_is_never_put_over_a_folder(tmp_path):
    out = tmp_path / "results"
    (out / "effects.csv").mkdir(parents=True)
    with pytest.raises(PulseError, match="it is a folder, and the output is a file"):
        with staged_outputs(out) as stage:
            (stage / "effects.csv").write_text("x")
    assert (out / "effects.csv").is_dir()
