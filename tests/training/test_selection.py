"""Leaving sessions out of training: case studies, or sessions from a date on."""

from __future__ import annotations

import pandas as pd
import pytest

from pulse_ml.config import compose
from pulse_ml.errors import DataError, PulseError
from pulse_ml.jobs.train import training_selection
from pulse_ml.sessions.table import validate_frame
from pulse_ml.settings import feature_set
from pulse_ml.training.selection import TrainingSelection, parse_trained_before, select_training


@pytest.fixture(scope="module")
def table(small_demo):
    return validate_frame(pd.read_parquet(small_demo), str(small_demo),
                          feature_set(compose("train")), {}, only=[])


def test_exclude_case_studies_and_all(table):
    out = select_training(table, TrainingSelection(("plan",)))
    assert "plan" not in set(out.frame["case_study"])
    assert len(out.frame) == int((table.frame["case_study"] != "plan").sum())
    none = select_training(table, TrainingSelection(("all",)))
    assert set(none.frame["case_study"]) == {""}
    assert select_training(table, TrainingSelection()) is table


def test_trained_before_keeps_earlier_sessions_only(table):
    cut = pd.Timestamp("2025-06-09", tz="UTC")
    out = select_training(table, TrainingSelection((), cut))
    assert (out.frame["started_at"] < cut).all()
    assert len(out.frame) == int((table.frame["started_at"] < cut).sum())
    both = select_training(table, TrainingSelection(("claude4_vs_gpt5",), cut))
    assert len(both.frame) == int(((table.frame["started_at"] < cut)
                                   & (table.frame["case_study"] != "claude4_vs_gpt5")).sum())


def test_refusals(table):
    with pytest.raises(PulseError, match="'memory' not in"):
        select_training(table, TrainingSelection(("memory",)))
    with pytest.raises(PulseError, match="no labeled session is left"):
        select_training(table, TrainingSelection((), pd.Timestamp("2020-01-01", tz="UTC")))
    frame = table.frame.copy()
    frame.loc[frame["rating"].notna().idxmax(), "started_at"] = pd.NaT
    holed = validate_frame(frame, "t.parquet", table.features, {}, only=[])
    with pytest.raises(DataError, match="empty values for labeled sessions in 1 row"):
        select_training(holed, TrainingSelection((), pd.Timestamp("2025-06-09", tz="UTC")))
    with pytest.raises(DataError, match="column 'started_at': missing"):
        select_training(validate_frame(frame.drop(columns="started_at"), "t", table.features,
                                       {}, only=[]),
                        TrainingSelection((), pd.Timestamp("2025-06-09", tz="UTC")))


def test_settings_from_config():
    cfg = compose("train", ["exclude_case_studies=[plan,memory]", "trained_before=2025-06-09"])
    sel = training_selection(cfg)
    assert sel.exclude_case_studies == ("plan", "memory")
    assert sel.trained_before == pd.Timestamp("2025-06-09", tz="UTC")
    assert training_selection(compose("train", ["exclude_case_studies=all"])
                              ).exclude_case_studies == ("all",)
    assert not training_selection(compose("train")).active
    assert parse_trained_before("2025-06-09T12:00:00+02:00") == pd.Timestamp(
        "2025-06-09T10:00", tz="UTC")
    with pytest.raises(PulseError, match="trained_before='soon' is not a date"):
        training_selection(compose("train", ["trained_before=soon"]))
