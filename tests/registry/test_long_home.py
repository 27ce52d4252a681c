"""A PULSE_HOME too long for SQLite is said to be too long, at once (not a broken database)."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest


@pytest.mark.slow
def test_long_pulse_home_is_named_too_long(tmp_path, small_demo):
    home = tmp_path.joinpath(*["h" * 120] * 5)
    home.mkdir(parents=True)
    env = {**os.environ, "PULSE_HOME": str(home)}
    env.pop("MLFLOW_TRACKING_URI", None)
    start = time.perf_counter()
    res = subprocess.run([sys.executable, "-m", "pulse_ml", "train", f"data.path={small_demo}",
                          "model=mean", "progress=false"], capture_output=True, text=True,
                         env=env, timeout=120)
    assert res.returncode == 2, res.stderr[-800:]
    assert "SQLite opens no database whose path" in res.stderr
    assert "Choose a shorter PULSE_HOME" in res.stderr and "Traceback" not in res.stderr
    assert time.perf_counter() - start < 60
    assert not (home / "mlruns" / "mlflow.db").exists()
