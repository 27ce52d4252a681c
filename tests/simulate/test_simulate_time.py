"""Simulated sessions over days: even daily volume per arm, labels with their session, seeded."""

from __future__ import annotations

from dataclasses import replace

import pandas as pd
import pytest

from pulse_ml.config import compose
from pulse_ml.errors import PulseError
from pulse_ml.settings import simulator_settings as settings_from_config
from pulse_ml.simulate.generator import simulate

SMALL = dict(n_labeled=400, labeled_per_arm=40, min_labeled_per_arm=30, mc_sessions=20_000)


@pytest.fixture(scope="module")
def small():
    return replace(settings_from_config(compose("simulate", [])), **SMALL)


def test_every_arm_runs_over_the_days_with_even_daily_volume(small):
    df = simulate(replace(small, days=10, start_date="2025-03-03")).sessions
    start = pd.Timestamp("2025-03-03", tz="UTC")
    assert str(df["started_at"].dtype) == "datetime64[us, UTC]"
    day = (df["started_at"] - start) // pd.Timedelta(days=1)
    assert day.min() == 0 and day.max() == 9
    counts = df.assign(day=day, labeled=df["rating"].notna()).groupby(
        ["case_study", "condition", "labeled", "day"]).size().unstack("day")
    # Each stratum (arm x labeled) is split evenly over the days: counts differ by at most one.
    assert counts.notna().all().all()
    assert ((counts.max(axis=1) - counts.min(axis=1)) <= 1).all()
    labeled_plan = counts.loc[("plan", "show-plan", True)]
    assert labeled_plan.sum() == 40 and set(labeled_plan) == {4}


@pytest.mark.slow
def test_same_seed_same_times_and_days_setting(small):
    a = simulate(small).sessions["started_at"]
    b = simulate(small).sessions["started_at"]
    assert a.equals(b)
    c = simulate(replace(small, seed=1)).sessions["started_at"]
    assert not a.equals(c)
    default = (a - pd.Timestamp("2025-06-02", tz="UTC")) // pd.Timedelta(days=1)
    assert default.max() == 20  # 21 days by default
    assert compose("simulate", []).days == 21


@pytest.mark.parametrize("change, key", [(dict(days=0), "days=0"),
                                         (dict(start_date="someday"), "start_date")])
def test_bad_time_settings_name_the_key(small, change, key):
    with pytest.raises(PulseError, match=key):
        simulate(replace(small, **change))
