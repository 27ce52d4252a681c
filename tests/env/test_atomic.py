"""Atomic outputs: complete files or none; earlier results survive any failure."""

from __future__ import annotations

import errno

import pytest

from pulse_ml.env.atomic import atomic_file, staged_outputs, write_text
from pulse_ml.errors import PulseError


def test_atomic_file_replaces_only_when_complete(tmp_path):
    target = tmp_path / "table.csv"
    write_text(target, "old\n")
    with pytest.raises(RuntimeError):
        with atomic_file(target) as tmp:
            assert tmp.parent.parent == tmp_path and tmp.name == "table.csv"
            tmp.write_text("half")
            raise RuntimeError("interrupted")
    assert target.read_text() == "old\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["table.csv"]
    with atomic_file(target) as tmp:
        tmp.write_text("new\n")
    assert target.read_text() == "new\n"


def test_disk_fault_becomes_one_user_error_and_created_folders_go(tmp_path):
    target = tmp_path / "a" / "b" / "out.parquet"
    with pytest.raises(PulseError, match=r"cannot write .*out.parquet: no space left"):
        with atomic_file(target) as tmp:
            tmp.write_bytes(b"x")
            raise OSError(errno.ENOSPC, "No space left on device")
    assert not (tmp_path / "a").exists()


def test_staged_outputs_publish_all_or_nothing(tmp_path):
    out = tmp_path / "results"
    with staged_outputs(out) as stage:
        (stage / "effects.json").write_text("{}")
        (stage / "forest.png").write_bytes(b"png")
    assert sorted(p.name for p in out.iterdir()) == ["effects.json", "forest.png"]
    with pytest.raises(KeyboardInterrupt):
        with staged_outputs(out) as stage:
            (stage / "effects.json").write_text('{"new": 1}')
            raise KeyboardInterrupt  # Ctrl-C or SIGTERM between two files
    assert (out / "effects.json").read_text() == "{}"
    assert sorted(p.name for p in out.iterdir()) == ["effects.json", "forest.png"]
    fresh = tmp_path / "new" / "folder"
    with pytest.raises(PulseError, match="file too large"):
        with staged_outputs(fresh) as stage:
            raise OSError(errno.EFBIG, "File too large")
    assert not (tmp_path / "new").exists()
