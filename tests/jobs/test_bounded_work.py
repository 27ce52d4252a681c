"""Bounded work end to end: one session dated 1970 does not make `monitor` run 20,000 looks."""

from __future__ import annotations

import time

import pandas as pd
import pytest


@pytest.fixture
def registered(trained_home):
    return trained_home("progress=false", "model=mean")


def test_monitor_refuses_a_session_far_before_the_others(small_demo, registered, cli, tmp_path):
    """Before: 20,000+ daily looks (517 kB of output), a sequence target of 0 labels, exit 0."""
    frame = pd.read_parquet(small_demo)
    row = frame.index[frame["case_study"] == "plan"][3]
    frame.loc[row, "started_at"] = pd.Timestamp("1970-01-01", tz="UTC")
    path = tmp_path / "epoch.parquet"
    frame.to_parquet(path, index=False)
    start = time.perf_counter()
    res = cli("monitor", f"data.path={path}", f"output={tmp_path / 'out'}")
    assert res.returncode == 2, res.stdout[-2000:]
    assert "far before the others" in res.stderr and "1970-01-01" in res.stderr
    assert "Traceback" not in res.stderr and len(res.stdout) < 5000
    assert time.perf_counter() - start < 120
