import json
import re
from pathlib import Path

import pandas as pd
import pytest

from pulse_ml.simulate.events import write_events

GIT_RE = re.compile(r"\bgit (commit|push|pull|reset|rebase)\b")
FLAGS = ("git_commit", "git_push", "git_pull", "git_reset", "git_rebase")


def _sessions() -> pd.DataFrame:
    rows = [
        dict(session_id="s000001", user_message_count=1, user_sentiment="positive",
             task_category="fix_bugs", git_commit=1, git_push=1, git_pull=1, git_reset=1,
             git_rebase=1),
        dict(session_id="s000002", user_message_count=12, user_sentiment="negative",
             task_category="fix_merge_conflicts", git_commit=0, git_push=0, git_pull=0,
             git_reset=0, git_rebase=0),
        dict(session_id="s000003", user_message_count=5, user_sentiment="neutral",
             task_category="perform_deployments", git_commit=1, git_push=0, git_pull=0,
             git_reset=1, git_rebase=0),
        dict(session_id="s000004", user_message_count=3, user_sentiment="neutral",
             task_category="fix_failing_ci", git_commit=0, git_push=1, git_pull=0,
             git_reset=0, git_rebase=1),
    ]
    return pd.DataFrame(rows)


def _load(directory: Path, session_id: str) -> list[dict]:
    return json.loads((directory / f"{session_id}.json").read_text())


def test_events_match_the_table(tmp_path):
    sessions = _sessions()
    assert write_events(sessions, tmp_path, seed=0) == len(sessions)
    for row in sessions.to_dict("records"):
        events = _load(tmp_path, row["session_id"])
        users = [e for e in events if e.get("source") == "user" and e.get("action") == "message"]
        assert len(users) == row["user_message_count"]
        commands = [e["args"]["command"] for e in events if e.get("action") == "run"]
        seen = {m.group(1) for c in commands for m in GIT_RE.finditer(c)}
        expected = {f[4:] for f in FLAGS if row[f]}
        assert seen == expected, row["session_id"]
        if not expected:  # nothing git-like anywhere in the stream
            assert "git" not in json.dumps(events).lower()
        ids = [e["id"] for e in events]
        assert ids == list(range(len(events)))
        by_id = {e["id"]: e for e in events}
        for e in events:
            if e.get("observation") == "run":
                action = by_id[e["cause"]]
                assert action["action"] == "run"
                assert e["extras"]["command"] == action["args"]["command"]
                assert e["extras"]["metadata"]["exit_code"] == 0
        stamps = [e["timestamp"] for e in events]
        assert stamps == sorted(stamps)


def test_events_limit_and_seeded_output(tmp_path):
    sessions = _sessions()
    assert write_events(sessions, tmp_path / "a", seed=3, limit=2) == 2
    assert sorted(p.name for p in (tmp_path / "a").iterdir()) == ["s000001.json", "s000002.json"]
    write_events(sessions, tmp_path / "b", seed=3, limit=2)
    assert (tmp_path / "a" / "s000002.json").read_bytes() == \
        (tmp_path / "b" / "s000002.json").read_bytes()


def test_event_keys_match_a_real_openhands_stream(tmp_path, shared_data):
    real_file = shared_data(
        "data/real/openhands-v0-event-streams/runtime_trajs/basic_gui_mode.json")
    real = json.loads(real_file.read_text())
    write_events(_sessions(), tmp_path, seed=0)
    ours = _load(tmp_path, "s000001")

    def keys(events, **match):
        for e in events:
            if all(e.get(k) == v for k, v in match.items()):
                return set(e)
        raise AssertionError(match)

    for match in ({"action": "run"}, {"observation": "run"}, {"source": "user",
                                                               "action": "message"}):
        assert keys(ours, **match) <= keys(real, **match) | {"timeout"}, match
        assert keys(ours, **match) >= {"id", "timestamp", "source", "message"}
    real_obs = next(e for e in real if e.get("observation") == "run")
    our_obs = next(e for e in ours if e.get("observation") == "run")
    assert set(our_obs["extras"]) <= set(real_obs["extras"])
    assert set(our_obs["extras"]["metadata"]) <= set(real_obs["extras"]["metadata"])


def test_a_failed_write_leaves_the_earlier_event_files(tmp_path):
    """Every file or none: a row failing midway (here an unknown sentiment, third of four)
    leaves no partial file and the earlier run's files as they were."""
    write_events(_sessions(), tmp_path, seed=0)
    before = {p.name: p.read_bytes() for p in tmp_path.iterdir()}
    bad = _sessions()
    bad.loc[2, "user_sentiment"] = "furious"
    with pytest.raises(KeyError):
        write_events(bad, tmp_path, seed=1)
    assert {p.name: p.read_bytes() for p in tmp_path.iterdir()} == before
    fresh = tmp_path / "new"
    with pytest.raises(KeyError):
        write_events(bad, fresh, seed=1)
    assert not fresh.exists()  # the folder this call created is removed again


def test_event_streams_start_at_the_tables_started_at(tmp_path):
    """simulate -> extract -> monitor keeps the calendar: the first event is started_at."""
    from pulse_ml.extract.formats import first_timestamp

    sessions = _sessions().assign(started_at=pd.to_datetime(
        ["2026-03-01T09:00:00Z", "2026-03-02T10:30:00Z", None, "2026-03-05T23:59:59Z"]))
    write_events(sessions, tmp_path, seed=0)
    for row in sessions.to_dict("records"):
        first = first_timestamp(_load(tmp_path, row["session_id"]))
        if pd.isna(row["started_at"]):  # no time in the table: a seeded time of the demo window
            assert first.year == 2025
        else:
            assert pd.Timestamp(first).tz_convert("UTC") == row["started_at"]
