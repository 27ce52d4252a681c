"""The optional ``started_at`` column: ISO 8601 or epoch seconds, read as UTC; bad values named."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from pulse_ml.errors import DataError
from pulse_ml.sessions.feature_sets import FeatureSet, FeatureSpec
from pulse_ml.sessions.readers import read_frame
from pulse_ml.sessions.table import parse_started_at, validate_frame

FEATURES = FeatureSet("x", (FeatureSpec("x", "numeric"),))


def _frame(times) -> pd.DataFrame:
    n = len(times)
    return pd.DataFrame({"session_id": [f"s{i}" for i in range(n)], "condition": "default",
                         "rating": np.where(np.arange(n) % 2 == 0, 4.0, np.nan),
                         "x": np.arange(n, dtype=float), "started_at": times})


def test_iso_with_offsets_epoch_seconds_and_datetimes_agree():
    same = ["2025-06-02T14:03:00Z", "2025-06-02 16:03:00+02:00", "2025-06-02T14:03:00",
            "1748872980", 1748872980]
    parsed, bad, out = parse_started_at(pd.Series(same, dtype=object))
    assert not bad.any() and not out.any()
    assert (parsed == pd.Timestamp("2025-06-02T14:03:00", tz="UTC")).all()
    assert str(parsed.dtype) == "datetime64[us, UTC]"
    naive = parse_started_at(pd.Series(pd.to_datetime(["2025-06-02T14:03:00"])))[0]
    aware = parse_started_at(pd.Series(pd.to_datetime(["2025-06-02T16:03:00+02:00"])))[0]
    assert naive[0] == aware[0] == parsed[0]


def test_missing_values_are_allowed_in_the_contract():
    table = validate_frame(_frame(["2025-06-02", None, "", np.nan]), "t.csv", FEATURES)
    assert table.frame["started_at"].isna().tolist() == [False, True, True, True]


@pytest.mark.parametrize("values, expected", [
    (["2025-06-02", "yesterday", "2025-13-40"],
     ["column 'started_at': unparseable values ('yesterday', '2025-13-40')",
      "2 row(s): row 2 (session_id=s1), row 3 (session_id=s2)", "ISO 8601"]),
    ([1748872980, 1748872980000, 1748872981],
     ["column 'started_at': epoch values outside 1970-2286", "row 2 (session_id=s1)",
      "milliseconds: divide them by 1000"]),
])
def test_bad_times_are_one_clear_message(values, expected):
    with pytest.raises(DataError) as info:
        validate_frame(_frame(values), "t.csv", FEATURES)
    for text in expected:
        assert text in str(info.value)


@pytest.mark.parametrize("name", ["t.csv", "t.parquet", "t.jsonl"])
def test_round_trip_through_every_format(name, tmp_path):
    times = pd.Series(pd.to_datetime(["2025-06-02T14:03:05Z", "2025-06-03T00:00:00Z"],
                                     utc=True))
    frame = _frame(times)
    path = tmp_path / name
    if name.endswith(".csv"):
        frame.to_csv(path, index=False)
    elif name.endswith(".parquet"):
        frame.to_parquet(path, index=False)
    else:
        frame.to_json(path, orient="records", lines=True, date_format="iso")
    table = validate_frame(read_frame(path), name, FEATURES)
    assert (table.frame["started_at"] == times).all()


def test_jsonl_writer_keeps_started_at_as_iso_8601(tmp_path):
    """pandas' default JSON dates are epoch milliseconds, which the contract refuses."""
    import json

    from pulse_ml.sessions.readers import read_frame
    from pulse_ml.sessions.writers import write_table

    times = pd.to_datetime(["2026-03-01T09:00:00Z", "2026-03-02T10:30:05Z"])
    frame = pd.DataFrame({"session_id": ["a", "b"], "started_at": times})
    out = tmp_path / "t.jsonl"
    write_table(frame, out, "auto")
    raw = [json.loads(line) for line in out.read_text().splitlines()]
    assert [r["started_at"] for r in raw] == ["2026-03-01T09:00:00Z", "2026-03-02T10:30:05Z"]
    back = pd.to_datetime(read_frame(out)["started_at"], utc=True)
    assert (back == times).all()


@pytest.mark.parametrize("index", ["shuffled", "offset"])
def test_a_callers_index_changes_no_row_and_no_monitor_number(index):
    """Python API: a frame whose index is not 0..n-1 (rows sampled, or labels from 100)
    validates to the same table as its reset-index copy, so monitor()'s looks are the same
    (the checked columns were aligned by label and started_at by position)."""
    from pulse_ml.inference.monitor import MonitorSettings, monitor
    from pulse_ml.stats.sequential.simulation import simulate_monitoring

    data = simulate_monitoring(1, n_days=6, labeled_per_day=8, unlabeled_per_day=20,
                               effect=0.4, n_users=30, seed=5)[0]
    n = data["arm"].size
    start = pd.Timestamp("2025-06-02", tz="UTC")
    seconds = data["look"] * 86_400 + np.random.default_rng(5).integers(0, 86_400, n)
    frame = pd.DataFrame({
        "session_id": [f"s{i}" for i in range(n)], "user_id": [f"u{u}" for u in data["users"]],
        "case_study": "cs", "condition": np.where(data["arm"] == 1, "b", "a"),
        "rating": data["rating"], "x": data["prediction"],
        "started_at": start + pd.to_timedelta(seconds, unit="s"), "extra": np.arange(n)})
    if index == "shuffled":
        frame = frame.sample(frac=1.0, random_state=3)
    else:
        frame.index = pd.RangeIndex(100, 100 + n)
    reset = frame.reset_index(drop=True)
    got, want = (validate_frame(f, "s.csv", FEATURES, {}) for f in (frame, reset))
    pd.testing.assert_frame_equal(got.frame, want.frame)
    now = pd.Timestamp("2026-01-01", tz="UTC")
    settings = MonitorSettings(lambda_rule="arm")
    looks = [monitor(t, t.frame["x"].to_numpy(), settings, now=now).frame for t in (got, want)]
    assert looks[1]["effect"].notna().any()
    pd.testing.assert_frame_equal(looks[0], looks[1])
