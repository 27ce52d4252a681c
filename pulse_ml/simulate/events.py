"""OpenHands V0-style event streams for simulated sessions (one JSON list per session).

The format follows the real streams in ``shared/data/real/openhands-v0-event-streams``: every event
has ``id``, ``timestamp``, ``source``, ``message``; actions carry ``action`` + ``args``,
observations ``observation`` + ``content`` + ``extras`` + ``cause`` (the id of the action they
answer); ``run`` observations keep the exit code in ``extras.metadata.exit_code``.

Per work segment: the user message, one ordinary shell command (never git) with its observation,
the git commands this session's flags imply (``git pull`` in the first segment, ``git reset`` in the
middle one, ``git commit`` / ``git rebase`` / ``git push`` in the last one), the agent's reply and
the ``awaiting_user_input`` state change. The number of user messages equals
``user_message_count``; a 0 flag produces nothing git-like anywhere in the stream. Events are built
from pre-escaped string templates (no per-event ``json.dumps``) so ~37k sessions take seconds.
"""

from __future__ import annotations

import functools
import json
from pathlib import Path

import numpy as np
import pandas as pd

_REPOS = ("webapp", "api-server", "data-tools", "cli", "dashboard", "backend")
_BRANCHES = ("main", "feature/update", "fix/issue-42", "dev")
_TASKS = {
    "fix_bugs": "There is a bug: the form crashes when the date field is empty. Can you fix it?",
    "implement_features": "Please add an export-to-CSV button to the reports page.",
    "create_programs_from_scratch": "Create a small Flask app with a todo list and tests.",
    "fix_failing_ci": "The CI checks fail on the lint step since yesterday, please make them pass.",
    "fix_merge_conflicts": "The feature branch has conflicts with main, please resolve them.",
    "write_documentation": "Write a README section explaining how to configure the service.",
    "perform_deployments": "Deploy the app to the staging server and check the health endpoint.",
    "perform_data_analysis": "Load sales.csv and summarize revenue per month in a chart.",
}
_FOLLOW_UPS = {
    "positive": ("Great, thanks! Can you also handle the edge case with empty input?",
                 "Perfect, that works. Next, please tidy up the error messages.",
                 "Nice work. Could you add a short test for this?"),
    "neutral": ("Ok. Now please update the config loader as well.",
                "Continue with the next step.",
                "Can you show me what changed in the settings module?"),
    "negative": ("This is still broken, the same error shows up again.",
                 "No, that is not what I asked for. Please read my first message again.",
                 "It still fails. Why does this keep happening?"),
}
_AGENT_REPLIES = ("I made the changes and ran the checks; everything passes now.",
                  "Done. I updated the code and verified it with the test suite.",
                  "I looked into it and applied a fix. Let me know if you want anything else.")
_WORK = ("cd /workspace/{repo} && python -m pytest -q",
         "ls -la /workspace/{repo}",
         "cd /workspace/{repo} && npm run build",
         "cat /workspace/{repo}/README.md")
_WORK_OUT = "Command finished."
_GIT = {
    "git_pull": ("cd /workspace/{repo} && git pull origin main", "Already up to date."),
    "git_reset": ("cd /workspace/{repo} && git reset --hard HEAD~1",
                  "HEAD is now at 3f2a1c9 previous version"),
    "git_commit": ('cd /workspace/{repo} && git add -A && git commit -m "Apply requested changes"',
                   "[{branch} 9c1e2d4] Apply requested changes\n 2 files changed"),
    "git_rebase": ("cd /workspace/{repo} && git rebase origin/main",
                   "Successfully rebased and updated refs/heads/{branch}."),
    "git_push": ("cd /workspace/{repo} && git push origin {branch}",
                 "To https://example.com/acme/{repo}.git\n"
                 "   3f2a1c9..9c1e2d4  {branch} -> {branch}"),
}
_LAST_SEGMENT_GIT = ("git_commit", "git_rebase", "git_push")


@functools.lru_cache(maxsize=8192)
def _q(text: str) -> str:
    return json.dumps(text)  # the texts come from a few templates: escape each once


def _user(i: int, ts: str, text: str) -> str:
    return (f'{{"id": {i}, "timestamp": "{ts}", "source": "user", "message": {text}, '
            f'"action": "message", "args": {{"content": {text}, "image_urls": null, '
            f'"wait_for_response": false}}}}')


def _agent(i: int, ts: str, text: str) -> str:
    return (f'{{"id": {i}, "timestamp": "{ts}", "source": "agent", "message": {text}, '
            f'"action": "message", "args": {{"content": {text}, "image_urls": null, '
            f'"wait_for_response": true}}}}')


def _run(i: int, ts: str, ts2: str, command: str, output: str) -> tuple[str, str]:
    cmd = _q(command)
    action = (f'{{"id": {i}, "timestamp": "{ts}", "source": "agent", '
              f'"message": {_q("Running command: " + command)}, "action": "run", '
              f'"args": {{"command": {cmd}, "is_input": false, "thought": "", "blocking": false, '
              f'"hidden": false, "confirmation_state": "confirmed"}}}}')
    observation = (f'{{"id": {i + 1}, "timestamp": "{ts2}", "source": "agent", '
                   f'"message": {_q(f"Command `{command}` executed with exit code 0.")}, '
                   f'"cause": {i}, "observation": "run", "content": {_q(output)}, '
                   f'"extras": {{"command": {cmd}, "metadata": {{"exit_code": 0, "pid": -1, '
                   f'"username": "openhands", "working_dir": "/workspace", '
                   f'"suffix": "\\n[The command completed with exit code 0.]"}}, '
                   f'"hidden": false}}, "success": true}}')
    return action, observation


def _state(i: int, ts: str) -> str:
    return (f'{{"id": {i}, "timestamp": "{ts}", "source": "environment", "message": "", '
            f'"observation": "agent_state_changed", "content": "", '
            f'"extras": {{"agent_state": "awaiting_user_input"}}}}')


def session_events(row: dict, variant: int, start: np.datetime64) -> str:
    """Serialize one session's event stream as a JSON list (a string).

    Args:
        row: One session-table row (needs ``user_message_count``, ``user_sentiment``,
            ``task_category`` and the five git flags; with ``user_text`` its lines are the
            user messages).
        variant: Integer picking the repository, branch and message templates.
        start: Timestamp of the first event.

    Returns:
        The JSON text of the event list.
    """
    repo, branch = _REPOS[variant % len(_REPOS)], _BRANCHES[variant % len(_BRANCHES)]
    n_msgs = int(row["user_message_count"])
    git_by_segment: dict[int, list[str]] = {}
    if row["git_pull"]:
        git_by_segment.setdefault(0, []).append("git_pull")
    if row["git_reset"]:
        git_by_segment.setdefault(n_msgs // 2, []).append("git_reset")
    for flag in _LAST_SEGMENT_GIT:
        if row[flag]:
            git_by_segment.setdefault(n_msgs - 1, []).append(flag)
    n_events = n_msgs * 5 + 2 * sum(len(v) for v in git_by_segment.values())
    stamps = (start + np.arange(n_events) * np.timedelta64(7, "s")).astype(str)
    follow = _FOLLOW_UPS[row["user_sentiment"]]
    written = row.get("user_text")
    lines = written.split("\n") if isinstance(written, str) and written else []
    out: list[str] = []
    i = 0
    for seg in range(n_msgs):
        if seg < len(lines):  # the table's templated user text, message by message
            text = lines[seg]
        else:
            text = (_TASKS[row["task_category"]] if seg == 0
                    else follow[(variant + seg) % len(follow)])
        out.append(_user(i, stamps[i], _q(text)))
        i += 1
        work = _WORK[(variant + seg) % len(_WORK)].format(repo=repo)
        out.extend(_run(i, stamps[i], stamps[i + 1], work, _WORK_OUT))
        i += 2
        for flag in git_by_segment.get(seg, ()):
            command, output = _GIT[flag]
            out.extend(_run(i, stamps[i], stamps[i + 1], command.format(repo=repo, branch=branch),
                            output.format(repo=repo, branch=branch)))
            i += 2
        reply = _AGENT_REPLIES[(variant + seg) % len(_AGENT_REPLIES)]
        out.append(_agent(i, stamps[i], _q(reply)))
        out.append(_state(i + 1, stamps[i + 1]))
        i += 2
    return "[\n" + ",\n".join(out) + "\n]\n"


def write_events(sessions: pd.DataFrame, directory: Path, seed: int,
                 limit: int | None = None) -> int:
    """Write ``<directory>/<session_id>.json`` for the first ``limit`` sessions (all if None).

    Args:
        sessions: The session table.
        directory: Output directory (created if needed). The files are written into a
            hidden staging folder and renamed into place together: a failure (full disk,
            Ctrl-C) leaves no partial file and the folder's earlier files unchanged.
        seed: Seed of the template choices and start times.
        limit: Write only the first ``limit`` sessions.

    Returns:
        The number of files written.
    """
    from pulse_ml.env.atomic import staged_outputs

    rows = sessions if limit is None else sessions.iloc[: max(int(limit), 0)]
    rng = np.random.default_rng(seed)
    variants = rng.integers(0, 1_000_000, size=len(rows))
    starts = (np.datetime64("2025-06-01T08:00:00")
              + rng.integers(0, 90 * 24 * 3600, size=len(rows)) * np.timedelta64(1, "s"))
    if "started_at" in rows.columns:  # the table's calendar, so extract gives it back
        known = pd.to_datetime(rows["started_at"], utc=True, errors="coerce")
        ok = known.notna().to_numpy()
        starts = np.where(ok, known.dt.tz_localize(None).to_numpy("datetime64[s]"),
                          starts.astype("datetime64[s]"))
    columns = ["session_id", "user_message_count", "user_sentiment", "task_category",
               "git_commit", "git_push", "git_pull", "git_reset", "git_rebase"]
    columns += [c for c in ("user_text",) if c in rows.columns]
    records = rows[columns].to_dict("records")
    with staged_outputs(directory) as stage:  # every file or none; earlier ones stay otherwise
        for record, variant, start in zip(records, variants, starts, strict=True):
            text = session_events(record, int(variant), start)
            (stage / f"{record['session_id']}.json").write_text(text, encoding="utf-8")
    return len(records)
