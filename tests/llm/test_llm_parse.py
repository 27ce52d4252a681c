import json

import pytest
from llm_stub import DISCOVERY_ANSWER, FAILURE_ANSWER, JUDGE_ANSWER, SENTIMENT_ANSWER

from pulse_ml.llm.parse import (
    FAILURE_MODES,
    AnswerError,
    extract_json,
    parse_discovery,
    parse_failure_modes,
    parse_judge,
    parse_sentiment_task,
)


def test_extract_json_plain_fenced_and_with_prose():
    assert extract_json('{"a": 1}') == {"a": 1}
    assert extract_json('Here you go:\n```json\n{"a": 2}\n```\nThanks!') == {"a": 2}
    assert extract_json('Sure. {"a": {"b": [1, 2]}} -- hope this helps {not json}') == {
        "a": {"b": [1, 2]}}
    with pytest.raises(AnswerError):
        extract_json("I cannot help with that.")
    with pytest.raises(AnswerError):
        extract_json("")


@pytest.mark.parametrize("task,expected", [
    ("Fix Bugs", "fix_bugs"), ("Implement Features", "implement_features"),
    ("Create Programs from Scratch", "create_programs_from_scratch"),
    ("Fix Failing Continuous Integration", "fix_failing_ci"),
    ("fix merge conflicts", "fix_merge_conflicts"), ("Write Documentation", "write_documentation"),
    ("Perform Deployments", "perform_deployments"), ("Perform Data Analysis.",
                                                     "perform_data_analysis"),
])
def test_sentiment_task_maps_all_8_categories(task, expected):
    text = json.dumps({"sentiment": {"classification": "Negative"}, "task_type": task})
    assert parse_sentiment_task(f"```json\n{text}\n```") == {"user_sentiment": "negative",
                                                           "task_category": expected}


def test_sentiment_task_canned_and_invalid():
    assert parse_sentiment_task(SENTIMENT_ANSWER) == {"user_sentiment": "positive",
                                                      "task_category": "implement_features"}
    with pytest.raises(AnswerError, match="sentiment"):
        parse_sentiment_task('{"sentiment": {"classification": "Angry"}, "task_type": "Fix Bugs"}')
    with pytest.raises(AnswerError, match="task_type"):
        parse_sentiment_task('{"sentiment": "Positive", "task_type": "Bake a cake"}')


def test_failure_modes_formats():
    assert parse_failure_modes(FAILURE_ANSWER) == {**{k: 0 for k in FAILURE_MODES},
                                                   "scope_creep": 1}
    flat = {k: ("YES - clearly" if i % 2 else "NO") for i, k in enumerate(FAILURE_MODES)}
    got = parse_failure_modes("Analysis follows.\n" + json.dumps(flat) + "\nDone.")
    assert got == {k: i % 2 for i, k in enumerate(FAILURE_MODES)}
    nested = {"issues": {k: {"answer": True} for k in FAILURE_MODES}}
    assert set(parse_failure_modes(json.dumps(nested)).values()) == {1}
    broken = dict(flat)
    del broken["scope_creep"]
    with pytest.raises(AnswerError, match="scope_creep"):
        parse_failure_modes(json.dumps(broken))
    with pytest.raises(AnswerError, match="YES or NO"):
        parse_failure_modes(json.dumps({**flat, "scope_creep": "maybe"}))


def test_judge_and_discovery():
    assert parse_judge(JUDGE_ANSWER)["likert_score"] == 4
    got = parse_judge('```\n{"binary_satisfied": "false", "likert_score": "2", '
                      '"explanation": "meh"}\n```')
    assert got == {"likert_score": 2, "binary_satisfied": False, "explanation": "meh"}
    for bad in ('{"likert_score": 7}', '{"likert_score": 3.5}', '{"explanation": "x"}'):
        with pytest.raises(AnswerError):
            parse_judge(bad)
    feats = parse_discovery(DISCOVERY_ANSWER)
    assert [f["name"] for f in feats] == ["User frustration", "git_push"]
    assert feats[0]["value_type"] == "binary" and feats[0]["polarity"] == "dissatisfaction"
    with pytest.raises(AnswerError):
        parse_discovery('{"features": []}')
