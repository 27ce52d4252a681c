"""Readers of the raw session formats, from parsed JSON values to :class:`RawSession`.

Formats:

* OpenHands V0 events: ``action`` + ``args`` (or the older style with the arguments in
  ``extras`` or flattened into the event), ``observation`` + ``content`` + ``extras``.
* OpenHands V1 SDK events: ``kind`` = ``MessageEvent`` / ``ActionEvent`` / ``ObservationEvent``.
* Records wrapping an event list: eval outputs (``history``), feedback-dataset records
  (``trajectory`` + ``feedback``), or ``events``.
* Generic chat: ``[{role, text, feedback?}]`` (also ``dialog`` / ``messages`` / ``turns``
  records with a ``rating``; ConvAI2's ``sender_class`` / ``eval_score`` are understood).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from datetime import UTC, datetime
from typing import Any

from pulse_ml.extract.sessions import RawSession, SessionBuilder, Turn

EVENT_LIST_KEYS = ("history", "trajectory", "events")
CHAT_LIST_KEYS = ("dialog", "messages", "turns", "transcript", "conversation")
_SHELL_TOOLS = frozenset({"terminal", "execute_bash", "bash", "execute_command", "shell"})
_SHELL_ACTION_KINDS = frozenset({"ExecuteBashAction", "TerminalAction", "BashAction",
                                 "CmdRunAction"})
_USER_ROLES = frozenset({"user", "human", "customer", "participant"})
_AGENT_ROLES = frozenset({"agent", "assistant", "bot", "model", "ai", "system_bot"})


class FormatError(ValueError):
    """The value is not any known session format."""


def is_event(obj: Any) -> bool:
    """Whether ``obj`` looks like one OpenHands event (V0 or V1)."""
    if not isinstance(obj, dict) or any(k in obj for k in EVENT_LIST_KEYS + CHAT_LIST_KEYS):
        return False
    kind = obj.get("kind")
    return bool(obj.get("action") or obj.get("observation")
                or (isinstance(kind, str) and kind.endswith("Event")))


def is_chat_turn(obj: Any) -> bool:
    """Whether ``obj`` looks like one generic chat turn."""
    return (isinstance(obj, dict) and not is_event(obj)
            and any(k in obj for k in ("role", "sender_class", "speaker", "sender", "from"))
            and any(k in obj for k in ("text", "content", "value")))


def _text(value: Any) -> str:
    """Flatten message content (string or a list of ``{type: text, text}`` blocks)."""
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    if isinstance(value, list):
        return "\n".join(_text(v) for v in value if v is not None).strip()
    if isinstance(value, dict):
        return _text(value.get("text", value.get("content", "")))
    return str(value)


def _flatten(events: list) -> Iterator[dict]:
    for e in events:
        if isinstance(e, list):  # very old format: [action, observation] pairs
            yield from _flatten(e)
        elif isinstance(e, dict):
            yield e


def _v0_event(b: SessionBuilder, e: dict) -> None:
    action = e.get("action")
    if not action or not isinstance(action, str):
        return  # observations are not shown to labelers/judges
    args = e.get("args")
    if not isinstance(args, dict):
        args = e.get("extras") if isinstance(e.get("extras"), dict) else e
    source = e.get("source")
    if action == "message":
        text = _text(args.get("content")) or _text(e.get("message"))
        if source == "agent":
            b.agent(text)
        elif source in (None, "user"):
            b.user(text)
    elif action == "run" and source in (None, "agent"):
        b.command(str(args.get("command") or ""))
    elif action == "finish":
        b.agent(_text(args.get("final_thought")) or _text(args.get("thought")))


def _v1_event(b: SessionBuilder, e: dict) -> None:
    kind = e.get("kind")
    source = e.get("source")
    if kind == "MessageEvent":
        msg = e.get("llm_message") or {}
        text = _text(msg.get("content") if isinstance(msg, dict) else msg)
        role = msg.get("role") if isinstance(msg, dict) else None
        if source == "user" or (source is None and role == "user"):
            b.user(text)
        elif source == "agent" or role == "assistant":
            b.agent(text)
    elif kind == "ActionEvent" and source in (None, "agent"):
        action = e.get("action") or {}
        if not isinstance(action, dict):
            return
        akind = str(action.get("kind") or "")
        if akind in _SHELL_ACTION_KINDS or (e.get("tool_name") in _SHELL_TOOLS
                                            and "command" in action):
            b.command(str(action.get("command") or ""))
        elif akind == "FinishAction":
            b.agent(_text(action.get("message")))


def parse_timestamp(value: Any) -> datetime | None:
    """An event's ``timestamp`` as an aware UTC datetime (None if absent or unreadable).

    ISO 8601 strings (OpenHands writes ``2025-04-30T16:32:54.707474``; no offset = UTC, the
    session-table rule) or epoch seconds.
    """
    if isinstance(value, bool) or value is None or value == "":
        return None
    try:
        if isinstance(value, (int, float)):
            return datetime.fromtimestamp(float(value), tz=UTC)
        if not isinstance(value, str):
            return None
        ts = datetime.fromisoformat(value.strip().replace("Z", "+00:00"))
    except (ValueError, OverflowError, OSError):
        return None
    return ts.replace(tzinfo=UTC) if ts.tzinfo is None else ts.astimezone(UTC)


def first_timestamp(events: Iterable[dict]) -> datetime | None:
    """The earliest readable ``timestamp`` of the events (the session's start), or None."""
    times = [t for t in (parse_timestamp(e.get("timestamp")) for e in events) if t is not None]
    return min(times) if times else None


def session_from_events(events: list, session_id: str, source: str,
                        instruction: str | None = None) -> RawSession:
    """Build a session from an OpenHands V0 or V1 event list.

    Args:
        events: The events (dicts; nested ``[action, observation]`` pairs are flattened).
        session_id: Id to give the session.
        source: The file name (for messages).
        instruction: Task text of an eval record, used as the first user message when the
            history itself contains none.

    Raises:
        FormatError: if no element is a recognizable event.
    """
    flat = list(_flatten(events))
    if flat and not any(is_event(e) or "action" in e for e in flat):
        raise FormatError("no OpenHands events (objects with `action`, `observation` or "
                          "`kind: ...Event`)")
    v1 = any(isinstance(e.get("kind"), str) and e["kind"].endswith("Event") for e in flat)
    session = RawSession(session_id=session_id, source=source,
                         fmt="openhands_v1" if v1 else "openhands_v0")
    builder = SessionBuilder(session)
    handler = _v1_event if v1 else _v0_event
    for e in flat:
        handler(builder, e)
    session.started_at = first_timestamp(flat)
    if instruction and session.user_message_count == 0:
        session.turns.insert(0, Turn("user", instruction, 1))
        for turn in session.turns[1:]:
            turn.segment = 1
    return session


def _feedback(value: Any) -> float | None:
    if isinstance(value, str):
        return {"positive": 1.0, "up": 1.0, "negative": 0.0, "down": 0.0}.get(value.lower())
    if isinstance(value, (bool, int, float)):
        return float(value)
    return None


def _role(turn: dict) -> str | None:
    raw = turn.get("role", turn.get("sender_class", turn.get("speaker", turn.get("from"))))
    raw = str(raw or "").strip().lower()
    if raw in _USER_ROLES:
        return "user"
    if raw in _AGENT_ROLES:
        return "agent"
    return None


def session_from_chat(turns: list, session_id: str, source: str) -> RawSession:
    """Build a session from generic chat turns ``[{role, text, feedback?}]``.

    Raises:
        FormatError: if no turn has a known role and a text.
    """
    session = RawSession(session_id=session_id, source=source, fmt="chat")
    builder = SessionBuilder(session)
    known = 0
    for turn in turns:
        if not isinstance(turn, dict):
            continue
        role = _role(turn)
        if role is None:
            continue
        known += 1
        text = _text(turn.get("text", turn.get("content", turn.get("value"))))
        fb = _feedback(turn.get("feedback", turn.get("evaluation_score")))
        if role == "user":
            builder.user(text, fb)
        else:
            builder.agent(text, fb)
    if turns and known == 0:
        raise FormatError("chat turns have no known `role` (user/assistant/agent/bot)")
    return session


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or value is None:
        return None
    try:
        out = float(value)
    except (TypeError, ValueError):
        return None
    return out if out == out else None


def _record_user_id(rec: dict) -> str:
    if rec.get("user_id") not in (None, ""):
        return str(rec["user_id"])
    for key in ("participant1_id", "participant2_id"):
        p = rec.get(key)
        if isinstance(p, dict) and str(p.get("class", "")).lower() == "user":
            return str(p.get("user_id", ""))
    return ""


def _record_bot(rec: dict) -> str | None:
    for key in ("participant1_id", "participant2_id"):
        p = rec.get(key)
        if isinstance(p, dict) and str(p.get("class", "")).lower() == "bot":
            return str(p.get("user_id", "")) or None
    return None


START_KEYS = ("started_at", "start_time", "created_at", "timestamp")


def session_from_record(rec: dict, default_id: str, source: str) -> RawSession:
    """Build a session from a record wrapping events or chat turns.

    Event lists: ``history`` / ``trajectory`` / ``events``; chat turns: ``dialog`` /
    ``messages`` / ``turns`` / ``transcript`` / ``conversation``.

    Raises:
        FormatError: if the record wraps nothing recognizable.
    """
    sid = next((str(rec[k]) for k in ("session_id", "id", "instance_id", "conversation_id")
                if rec.get(k) not in (None, "")), default_id)
    events_key = next((k for k in EVENT_LIST_KEYS if isinstance(rec.get(k), list)), None)
    chat_key = next((k for k in CHAT_LIST_KEYS if isinstance(rec.get(k), list)), None)
    if events_key and (rec[events_key] == [] or any(is_event(e) or isinstance(e, list)
                                                    for e in rec[events_key])):
        instruction = rec.get("instruction") if isinstance(rec.get("instruction"), str) else None
        session = session_from_events(rec[events_key], sid, source, instruction)
    elif chat_key:
        session = session_from_chat(rec[chat_key], sid, source)
    else:
        raise FormatError("a record needs `history`, `trajectory` or `events` (event lists) "
                          "or `dialog` / `messages` / `turns` (chat turns)")
    session.user_id = _record_user_id(rec)
    for key in ("case_study", "condition"):
        if rec.get(key) not in (None, ""):
            setattr(session, key, str(rec[key]))
    if session.condition is None:
        session.condition = _record_bot(rec)
    session.rating = _number(rec.get("rating", rec.get("eval_score")))
    if session.started_at is None:  # chats: the record's own start (ConvAI2's start_time)
        session.started_at = next((t for t in (parse_timestamp(rec.get(k)) for k in START_KEYS)
                                   if t is not None), None)
    fb = rec.get("feedback")
    if isinstance(fb, str) and fb:
        session.feedback = fb.lower()
    return session


def sessions_from_value(value: Any, stem: str, source: str) -> list[RawSession]:
    """Turn one parsed JSON value (a whole file or one JSONL line) into sessions.

    Args:
        value: The parsed JSON.
        stem: Base id for sessions without an id of their own.
        source: The file name (for messages).

    Raises:
        FormatError: when the value is no known format.
    """
    if isinstance(value, dict):
        if is_event(value):
            return [session_from_events([value], stem, source)]
        return [session_from_record(value, stem, source)]
    if isinstance(value, list):
        if not value:
            raise FormatError("empty list")
        if any(is_event(v) or isinstance(v, list) for v in value[:50]):
            return [session_from_events(value, stem, source)]
        if any(is_chat_turn(v) for v in value[:50]):
            return [session_from_chat(value, stem, source)]
        if all(isinstance(v, dict) for v in value):
            return [session_from_record(v, f"{stem}-{i}", source) for i, v in enumerate(value)]
    raise FormatError(f"not a session format (top-level {type(value).__name__})")
