"""The tuning bar of a real study: the terminal's width on a pty, <= 100 columns into a file.

Issue 24 measured 148 columns with ``COLUMNS=100`` once the bar's postfix (best cv_mse)
appeared; a fixed ``ncols=100`` overflowed an 80-column terminal.
"""

from __future__ import annotations

import fcntl
import io
import os
import pty
import re
import struct
import sys
import termios

import pytest

from pulse_ml import settings
from pulse_ml.config import compose
from pulse_ml.jobs.train import model_spec
from pulse_ml.training.family import training_data
from pulse_ml.training.folds import make_folds
from pulse_ml.training.tuning import CVObjective, TuningSettings, run_study


def _objective(small_demo):
    from pulse_ml.sessions.table import load_sessions

    cfg = compose("train", ["model=ordinal_logit", f"data.path={small_demo}"])
    table = load_sessions(str(small_demo), settings.feature_set(cfg), {}, only=[])
    labeled, y = training_data(table)
    folds = make_folds(len(y), 3, 42, labeled["user_id"].to_numpy())
    return CVObjective(labeled, y, folds, model_spec(cfg), table.features)


def _widths(text: str) -> list[int]:
    plain = re.sub(r"\x1b\[[0-9;]*[A-Za-z]", "", text)
    return [len(p.rstrip()) for p in re.split(r"[\r\n]", plain) if p.strip()]


def _read_all(fd: int) -> str:
    os.set_blocking(fd, False)
    chunks = []
    while True:
        try:
            data = os.read(fd, 65536)
        except OSError:
            break
        if not data:
            break
        chunks.append(data)
    return b"".join(chunks).decode("utf-8", "replace")


@pytest.fixture(scope="module")
def objective(small_demo):
    return _objective(small_demo)


def test_the_tuning_bar_fits_100_columns_into_a_file(objective, monkeypatch):
    monkeypatch.setenv("COLUMNS", "100")
    err = io.StringIO()
    monkeypatch.setattr(sys, "stderr", err)
    run_study(TuningSettings(n_trials=3, n_splits=3), "bar-file", objective, progress=True)
    widths = _widths(err.getvalue())
    assert "best cv_mse=" in err.getvalue() and widths and max(widths) <= 100


def test_the_tuning_bar_fits_an_80_column_terminal(objective, monkeypatch):
    monkeypatch.setenv("COLUMNS", "100")  # the terminal's own size wins
    master, slave = pty.openpty()
    try:
        fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 80, 0, 0))
        tty = os.fdopen(slave, "w", encoding="utf-8", closefd=False)
        monkeypatch.setattr(sys, "stderr", tty)
        run_study(TuningSettings(n_trials=3, n_splits=3), "bar-tty", objective, progress=True)
        tty.flush()
        text = _read_all(master)
    finally:
        os.close(slave)
        os.close(master)
    widths = _widths(text)
    assert "tuning ordinal_logit" in text and widths and max(widths) <= 80
