import json
import subprocess
import sys

import numpy as np
import pandas as pd
import pytest

from pulse_ml.errors import PulseError
from pulse_ml.extract.readers import find_files, read_sessions
from pulse_ml.extract.table import assemble, read_ratings
from pulse_ml.jobs.extract import ExtractSettings, extract


def _user(i, text):
    return {"id": i, "source": "user", "action": "message",
            "args": {"content": text, "wait_for_response": False}, "message": text}


def _run(i, cmd):
    return [{"id": i, "source": "agent", "action": "run", "args": {"command": cmd},
             "message": f"Running command: {cmd}"},
            {"id": i + 1, "source": "agent", "observation": "run", "content": "ok", "cause": i,
             "extras": {"command": cmd, "metadata": {"exit_code": 0}}}]


def _demo_folder(tmp_path):
    events = tmp_path / "events"
    events.mkdir()
    s1 = [_user(0, "add a --verbose flag"), *_run(1, "pytest -q"),
          _user(3, "great, commit and push it"), *_run(4, "cd repo && git commit -am x"),
          *_run(6, "git push origin main"),
          {"id": 8, "source": "agent", "action": "message", "args": {"content": "Pushed."}}]
    s2 = [{"id": 0, "source": "agent", "action": "system",
           "args": {"content": "You may run `git push` and `git rebase`."}},
          _user(1, "why does the build fail?"), {"id": 2, "source": "user", "action": "recall",
                                                 "args": {"query": "x"}},
          *_run(3, "echo 'git pull' && make")]
    (events / "sess-1.json").write_text(json.dumps(s1))
    (events / "sess-2.json").write_text(json.dumps(s2))
    (events / "broken.json").write_text('[{"id": 0, "source": "user", "action": ')
    pd.DataFrame({"session_id": ["sess-1", "sess-1", "sess-2", "ghost"], "segment": [1, 2, 1, 1],
                  "rating": [4, 5, 2, 3]}).to_csv(tmp_path / "ratings.csv", index=False)
    return events


def test_demo_folder_ratings_and_broken_file(tmp_path):
    events = _demo_folder(tmp_path)
    res = extract(ExtractSettings(input=str(events), out=tmp_path / "t.parquet",
                                  ratings=tmp_path / "ratings.csv", progress=False))
    assert [f.endswith("broken.json") for f, _ in res.failures] == [True]
    assert res.unknown_rated == ["ghost"]
    t = pd.read_parquet(tmp_path / "t.parquet").set_index("session_id")
    assert t.loc["sess-1", "rating"] == 4.5 and t.loc["sess-1", "n_ratings"] == 2
    assert t.loc["sess-2", "rating"] == 2.0
    assert t.loc["sess-1", "user_message_count"] == 2 and t.loc["sess-2", "user_message_count"] == 1
    assert t.loc["sess-1", ["git_commit", "git_push"]].tolist() == [1, 1]
    assert t.loc["sess-2", ["git_commit", "git_push", "git_pull", "git_rebase"]].sum() == 0
    assert t.loc["sess-1", "condition"] == "default" and t.loc["sess-1", "case_study"] == ""
    turns = json.loads(t.loc["sess-1", "transcript"])
    assert turns[0] == {"role": "user", "text": "add a --verbose flag"}
    assert {"role": "agent", "text": "$ git push origin main"} in turns
    assert t["git_push"].dtype == np.int64
    assert t.loc["sess-1", "user_text"] == "add a --verbose flag\ngreat, commit and push it"
    assert t.loc["sess-2", "user_text"] == "why does the build fail?"  # a recall is no message
    assert res.notes == []


def test_other_formats(tmp_path):
    old = {"id": "r1", "feedback": "negative", "trajectory": [
        {"id": 0, "source": "user", "action": "message", "extras": {"content": "deploy it"},
         "observation": None},
        {"id": 1, "source": "agent", "action": "run", "extras": {"command": "git pull"},
         "observation": None}]}
    flattened = {"instance_id": "i1", "history": [
        [{"action": "message", "content": "fix the issue"},
         {"observation": "null", "content": ""}],
        {"action": "run", "command": "git rebase main", "thought": "t"}]}
    v1 = {"instance_id": "v1", "instruction": "do the task", "history": [
        {"kind": "ActionEvent", "source": "agent", "tool_name": "terminal",
         "action": {"kind": "TerminalAction", "command": "git -C r reset --hard"}},
        {"kind": "MessageEvent", "source": "agent",
         "llm_message": {"role": "assistant", "content": [{"type": "text", "text": "Done"}]}}]}
    chat = {"session_id": "c1", "rating": 3, "user_id": "u9", "condition": "B", "messages": [
        {"role": "user", "text": "hi"}, {"role": "assistant", "text": "hello", "feedback": 1},
        {"role": "user", "text": "bye"}]}
    (tmp_path / "recs.jsonl").write_text("\n".join(json.dumps(r) for r in
                                                   (old, flattened, v1, chat)) + "\n")
    (tmp_path / "plain_chat.json").write_text(json.dumps(
        [{"role": "user", "text": "q"}, {"role": "agent", "text": "a"}]))
    read = read_sessions(find_files(str(tmp_path)), progress=False)
    t = assemble(read.sessions, None, "cs", "A").set_index("session_id")
    assert not read.failures
    assert t.loc["r1", "git_pull"] == 1 and t.loc["r1", "feedback"] == "negative"
    assert t.loc["i1", "git_rebase"] == 1 and t.loc["i1", "user_message_count"] == 1
    assert t.loc["v1", "git_reset"] == 1 and t.loc["v1", "user_message_count"] == 1
    assert t.loc["c1", ["rating", "n_ratings", "user_message_count"]].tolist() == [3.0, 1, 2]
    assert t.loc["c1", "user_id"] == "u9" and t.loc["c1", "condition"] == "B"
    assert t.loc["r1", "condition"] == "A" and t.loc["r1", "case_study"] == "cs"
    assert json.loads(t.loc["c1", "transcript"])[1]["feedback"] == 1
    assert t.loc["plain_chat", "user_message_count"] == 1
    # every format writes user_text: the user's messages joined by newlines
    assert t["user_text"].to_dict() == {"r1": "deploy it", "i1": "fix the issue",
                                        "v1": "do the task", "c1": "hi\nbye", "plain_chat": "q"}


def test_user_text_is_capped_with_a_note(tmp_path):
    chat = [{"session_id": f"c{i}", "messages": [{"role": "user", "text": "a" * 30},
                                                  {"role": "assistant", "text": "ok"},
                                                  {"role": "user", "text": "b" * n}]}
            for i, n in enumerate((5, 40))]
    (tmp_path / "c.jsonl").write_text("\n".join(json.dumps(r) for r in chat) + "\n")
    res = extract(ExtractSettings(input=str(tmp_path / "c.jsonl"), out=tmp_path / "t.csv",
                                  progress=False, text_max_chars=50))
    t = pd.read_csv(tmp_path / "t.csv", dtype={"user_text": str}).set_index("session_id")
    assert t.loc["c0", "user_text"] == "a" * 30 + "\n" + "b" * 5  # 36 chars: kept whole
    assert t.loc["c1", "user_text"] == "a" * 25 + "\n…\n" + "b" * 25  # head and tail kept
    assert res.notes == ["user_text: 1 of 2 session(s) have more than 50 characters of user "
                         "messages; kept their first 25 and last 25 characters (raise "
                         "text_max_chars to keep more)."]


def test_simulated_event_streams_carry_the_tables_user_text(tmp_path):
    from dataclasses import replace

    from pulse_ml.simulate.events import write_events
    from pulse_ml.simulate.generator import simulate
    from pulse_ml.simulate.spec import SimulateSettings

    settings = replace(SimulateSettings(), n_labeled=200, labeled_per_arm=40,
                       min_labeled_per_arm=30, mc_sessions=20_000, unlabeled_ratio=1.0)
    sessions = simulate(settings).sessions
    write_events(sessions, tmp_path / "events", seed=3, limit=25)
    res = extract(ExtractSettings(input=str(tmp_path / "events"), out=tmp_path / "t.parquet",
                                  progress=False))
    got = res.frame.set_index("session_id")["user_text"]
    want = sessions.set_index("session_id")["user_text"].loc[got.index]
    assert len(got) == 25 and (got == want).all()


def test_nothing_readable_and_bad_ratings(tmp_path):
    (tmp_path / "in").mkdir()
    (tmp_path / "in" / "a.json").write_text("not json at all")
    with pytest.raises(PulseError, match="none of 1 file"):  # (an output inside the input
        extract(ExtractSettings(input=str(tmp_path / "in"),  # folder is refused first)
                                out=tmp_path / "out" / "t.parquet", progress=False))
    with pytest.raises(PulseError, match="no session files"):
        find_files(str(tmp_path / "nothing" / "*.json"))
    pd.DataFrame({"session_id": ["a"], "segment": [1], "rating": [7]}).to_csv(
        tmp_path / "r.csv", index=False)
    with pytest.raises(PulseError, match=r"rating.*\[1, 5\]"):
        read_ratings(tmp_path / "r.csv")


@pytest.mark.slow
def test_cli_subprocess(tmp_path):
    events = _demo_folder(tmp_path)
    out = tmp_path / "sessions.csv"
    cmd = [sys.executable, "-m", "pulse_ml", "extract", f"input={events}",
           f"ratings={tmp_path / 'ratings.csv'}", f"out={out}", "progress=false",
           "case_study=plan", "condition=show-plan"]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=120,
                          env={**__import__("os").environ, "PULSE_HOME": str(tmp_path)})
    assert proc.returncode == 0, proc.stderr
    assert "extracted 2 session(s)" in proc.stdout and "broken.json" in proc.stdout
    t = pd.read_csv(out)
    assert set(t["case_study"]) == {"plan"} and set(t["condition"]) == {"show-plan"}
    bad = subprocess.run([sys.executable, "-m", "pulse_ml", "extract",
                          f"input={tmp_path / 'nope'}", f"out={out}"],
                         capture_output=True, text=True, timeout=120,
                         env={**__import__("os").environ, "PULSE_HOME": str(tmp_path)})
    assert bad.returncode == 2 and "no session files" in bad.stderr
    assert "Traceback" not in bad.stderr


def test_bad_lines_are_skipped_with_their_line_numbers(tmp_path):
    from pulse_ml.extract.readers import read_file, skipped_by_file

    rec = {"messages": [{"role": "user", "text": "hi"}, {"role": "assistant", "text": "ok"}]}
    lines = [json.dumps({**rec, "id": "a"}), "", "{oops", json.dumps({**rec, "id": "b"}),
             json.dumps({"id": "c", "nothing": 1}), json.dumps({**rec, "id": "d"})]
    path = tmp_path / "chat.jsonl"
    path.write_text("\n".join(lines) + "\n")
    read = read_sessions([path], progress=False)
    assert [s.session_id for s in read.sessions] == ["a", "b", "d"]
    assert [why.split(":")[0] for _, why in read.failures] == ["line 3", "line 5"]
    assert read.per_file == {str(path): 3}
    (line,) = skipped_by_file(read.failures, read.per_file)
    assert line.startswith(f"{path}: read 3 session(s), skipped 2 line(s) (3, 5); first: "
                           "invalid JSON")
    with pytest.raises(ValueError, match="line 3: invalid JSON"):
        read_file(path)  # strict mode (no failures list) still names the line
    only_bad = tmp_path / "bad.jsonl"
    only_bad.write_text("{x\n{y\n")
    read = read_sessions([only_bad], progress=False)
    assert not read.sessions
    assert read.failures == [(str(only_bad), "line 1: invalid JSON (Expecting property name "
                              "enclosed in double quotes) (and 1 more line(s))")]


def test_started_at_is_the_first_event_timestamp_in_utc(tmp_path):
    """V0 and V1 event streams get their earliest event time (UTC); a chat gets none."""
    folder = tmp_path / "in"
    folder.mkdir()
    v0 = [{**_user(0, "hello"), "timestamp": "2025-04-30T16:32:54.707474"},  # no offset: UTC
          {**_run(1, "ls")[0], "timestamp": "2025-04-30T16:33:10"},
          {**_user(2, "an event written out of order"), "timestamp": "2025-04-30T16:30:00"}]
    v1 = [{"kind": "MessageEvent", "source": "user", "timestamp": "2025-06-02T09:15:00+02:00",
           "llm_message": {"role": "user", "content": [{"type": "text", "text": "fix it"}]}},
          {"kind": "ActionEvent", "source": "agent", "timestamp": "not a time",
           "action": {"kind": "ExecuteBashAction", "command": "make"}, "tool_name": "bash"}]
    chat = [{"role": "user", "text": "hi"}, {"role": "assistant", "text": "hello"}]
    (folder / "v0.json").write_text(json.dumps(v0))
    (folder / "v1.json").write_text(json.dumps(v1))
    (folder / "chat.json").write_text(json.dumps(chat))
    res = extract(ExtractSettings(input=str(folder), out=tmp_path / "t.csv", progress=False))
    got = res.frame.set_index("session_id")["started_at"]
    assert str(got.dtype) == "datetime64[us, UTC]"
    assert got["v0"] == pd.Timestamp("2025-04-30T16:30:00Z")  # the earliest, not the first line
    assert got["v1"] == pd.Timestamp("2025-06-02T07:15:00Z")  # converted to UTC
    assert pd.isna(got["chat"])
    # the written table reads back through the session-table contract with the same instants
    from pulse_ml.sessions.table import parse_started_at

    written = pd.read_csv(tmp_path / "t.csv")
    back, bad, _ = parse_started_at(written["started_at"])
    assert not bad.any()
    back.index = written["session_id"]
    assert back.dropna().to_dict() == got.dropna().to_dict() and pd.isna(back["chat"])
    # chats alone: no column at all (nothing to say when sessions started)
    only = tmp_path / "chats"
    only.mkdir()
    (only / "chat.json").write_text(json.dumps(chat))
    res = extract(ExtractSettings(input=str(only), out=tmp_path / "c.csv", progress=False))
    assert "started_at" not in res.frame.columns
