"""Damaged files named as such: a corrupt model artifact, a garbage or truncated Optuna journal."""

from __future__ import annotations

import pytest


@pytest.fixture
def registered(trained_home):
    return trained_home("model=mean", "progress=false")


@pytest.mark.parametrize("damage", [b"garbage\n", None])
def test_corrupt_model_artifact_is_named(registered, small_demo, pulse_home, cli, damage):
    files = list(pulse_home.rglob("ensemble.joblib"))
    assert files
    for f in files:
        f.write_bytes(damage if damage is not None else f.read_bytes()[:200])
    res = cli("infer", f"data.path={small_demo}", "permutations=100", "log_mlflow=false")
    assert res.returncode == 2, res.stdout + res.stderr[-1500:]
    assert "artifact (ensemble.joblib) is corrupt or unreadable" in res.stderr
    assert "Traceback" not in res.stderr and len(res.stderr.strip().splitlines()) == 1


@pytest.mark.parametrize("kind", ["garbage", "truncated"])
def test_bad_optuna_journal_is_named(registered, small_demo, pulse_home, cli, tmp_path, kind):
    journals = list(pulse_home.rglob("*.journal"))
    assert journals
    path = tmp_path / "study.journal"
    good = journals[0].read_bytes()
    path.write_bytes(b"\x00\xffgarbage\n" if kind == "garbage" else good[:len(good) // 2])
    res = cli("train", f"data.path={small_demo}", "model=mean", "progress=false",
              f"tuning.storage={path}", "tuning.study_name=again")
    assert res.returncode == 2, res.stdout + res.stderr[-1500:]
    expected = "is not an Optuna journal" if kind == "garbage" else "journal"
    assert expected in res.stderr and str(path) in res.stderr
    if kind == "truncated":
        assert "is truncated" in res.stderr
    assert "Traceback" not in res.stderr and "unexpectedly" not in res.stderr
