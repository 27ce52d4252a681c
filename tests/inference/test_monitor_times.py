"""Implausible session times: one session at 1970-01-01, a calendar of thousands of days."""

from __future__ import annotations

import time

import numpy as np
import pandas as pd
import pytest

from pulse_ml.errors import DataError, PulseError
from pulse_ml.inference.monitor import MonitorSettings, monitor
from pulse_ml.inference.monitor_looks import parse_looks
from pulse_ml.sessions.time_checks import MAX_LOOKS
from pulse_ml.stats.sequential.simulation import simulate_monitoring
from tests.inference.test_monitor import NOW, _frame, _table


def _data():
    return simulate_monitoring(1, n_days=8, labeled_per_day=6, unlabeled_per_day=20, effect=0.0,
                               n_users=40, seed=1)[0]


def test_a_session_at_1970_is_refused_with_its_row():
    """Before: 20,000+ daily looks, a sequence target of 0 labels, exit 0 without a word."""
    frame = _frame(_data())
    frame.loc[5, "started_at"] = pd.Timestamp("1970-01-01", tz="UTC")
    start = time.perf_counter()
    with pytest.raises(DataError, match=r"far before the others .* 1 row\(s\): row 6 "
                                        r"\(session_id=s5\).*1970-01-01"):
        monitor(_table(frame), frame["x"].to_numpy(), now=NOW)
    assert time.perf_counter() - start < 5


def test_ordinary_spread_is_accepted():
    frame = _frame(_data())
    frame.loc[5, "started_at"] -= pd.Timedelta(days=20)  # early, but within reason (8-day test)
    out = monitor(_table(frame), frame["x"].to_numpy(), now=NOW)
    assert out.frame["day"].max() == 28


def test_daily_looks_are_capped():
    frame = _frame(_data())
    spread = np.linspace(0, 1, len(frame)) * (MAX_LOOKS + 200) * 86_400
    frame["started_at"] = (pd.Timestamp("2022-01-01", tz="UTC")
                           + pd.to_timedelta(spread, unit="s"))
    with pytest.raises(PulseError, match=r"'cs0' spans 1,201 days: more than 1,000 daily looks"):
        monitor(_table(frame), frame["x"].to_numpy(), now=NOW)
    out = monitor(_table(frame), frame["x"].to_numpy(),
                  MonitorSettings(looks=parse_looks([400, 800, 1200])), now=NOW)
    assert len(out.frame) > 0
