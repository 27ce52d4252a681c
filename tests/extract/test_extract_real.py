"""Extraction on the real trajectories in <repo>/../shared/data/real."""

import json

import pandas as pd

from pulse_ml.extract.readers import find_files, read_sessions
from pulse_ml.extract.table import GIT_COLUMNS, assemble
from tests.conftest import needs_shared, shared_path

REAL = shared_path("data/real")
pytestmark = needs_shared("data/real")


def _table(sub):
    read = read_sessions(find_files(str(REAL / sub)), progress=False)
    return assemble(read.sessions, None, "", "default"), read


def test_feedback_session_user_messages_and_git_flags():
    frame, read = _table("openhands-feedback-sample")
    assert not read.failures and len(frame) == 1
    row = frame.iloc[0]
    assert row["session_id"] == "16"
    assert row["user_message_count"] == 7
    assert row["git_commit"] == 1 and row["git_push"] == 1
    assert row["git_pull"] == 0 and row["git_reset"] == 0 and row["git_rebase"] == 0
    assert row["feedback"] == "positive"
    assert row["started_at"] == pd.Timestamp("2024-11-09T15:24:55.725784Z")  # first event


def test_v0_runtime_trajectories_git_only_in_system_prompt():
    frame, read = _table("openhands-v0-event-streams")
    assert not read.failures
    assert len(frame) == 4 + 3 + 2
    assert frame[GIT_COLUMNS].to_numpy().sum() == 0
    by_id = frame.set_index("session_id")
    assert by_id.loc["basic_interactions", "user_message_count"] == 3
    assert by_id.loc["basic", "user_message_count"] == 1
    # git commands occur only in the system prompt text, which is not a user message
    sys_prompt = json.dumps(json.loads(
        (REAL / "openhands-v0-event-streams/multi_swe_bench_example_output.jsonl")
        .read_text().splitlines()[0])["history"][0])
    assert "git push" in sys_prompt or "git commit" in sys_prompt
    assert (by_id.filter(like="ponylang", axis=0)["user_message_count"] == 1).all()
    # event timestamps -> started_at (UTC); the resolver's mock history has none
    assert by_id.loc["ponylang__ponyc-4595", "started_at"] == pd.Timestamp(
        "2025-04-30T16:32:54.707474Z")
    assert by_id.loc["basic", "started_at"] == pd.Timestamp("2025-01-27T22:44:56.900854Z")
    assert by_id["started_at"].notna().sum() == 7


def test_v1_histories_parse():
    frame, read = _table("openhands-v1-openagentsafety-gpt4o")
    assert len(frame) == 45 + 2 and not read.failures  # an empty history keeps its instruction
    assert frame["user_message_count"].ge(1).all()
    assert frame[GIT_COLUMNS].to_numpy().sum() == 0
    assert frame["session_id"].is_unique
    assert frame["started_at"].notna().sum() == 45  # the 2 empty histories have no events
    sdk, _ = _table("openhands-v1-sdk-fixtures/goal_fixture_events.jsonl")
    assert len(sdk) == 1 and '"$ SESSION_URL=' in sdk["transcript"].iloc[0]


def test_generic_chat_reads_convai2():
    frame, read = _table("convai2-wild-evaluation/data_volunteers.json")
    assert not read.failures and len(frame) == 1111
    assert frame["rating"].notna().sum() == 593
    assert set(frame["condition"].unique()) >= {"Bot 002", "Bot 006", "Bot 009", "Bot 011"}
    assert frame["user_id"].str.startswith("User").all()
    assert frame["user_message_count"].median() > 1
    # each chat record's start_time (no offset = UTC): orders a user's chats (user_history)
    assert frame["started_at"].notna().all()
    assert frame["started_at"].iloc[0] == pd.Timestamp("2018-10-29T03:32:08.296Z")
