"""Normalized sessions: the turns and executed commands of one conversation, format-free.

Every reader (OpenHands V0/V1 events, eval/feedback records, generic chat) produces a
:class:`RawSession`; feature assembly only ever sees this type.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime


@dataclass
class Turn:
    """One visible message of the conversation.

    Attributes:
        role: ``user`` or ``agent``.
        text: The message text (agent shell commands appear as ``$ <command>``).
        segment: Work segment number (1-based: the k-th user message starts segment k, matching
            ``ratings.csv``; agent activity before any user message is segment 0).
        feedback: Optional per-turn feedback (thumbs 1/0) when the source has it.
    """

    role: str
    text: str
    segment: int = 0
    feedback: float | None = None


@dataclass
class RawSession:
    """One session as read from a raw file, before feature assembly.

    Attributes:
        session_id: Unique id (from the record, else derived from the file name).
        source: The file it came from (for messages).
        fmt: The detected format (``openhands_v0``, ``openhands_v1``, ``chat``).
        turns: User and agent turns in order.
        commands: Shell commands the agent executed, in order.
        user_id: The user, when the source says (else empty).
        case_study: Case study from the record, if any.
        condition: Condition (agent variant) from the record, if any.
        rating: Inline session rating (1-5) from the record, if any.
        feedback: Inline session feedback (``positive`` / ``negative``), if any.
        started_at: When the session started (UTC): the earliest event timestamp of an
            OpenHands event stream; ``None`` when the source has no timestamps (chats).
    """

    session_id: str
    source: str
    fmt: str
    turns: list[Turn] = field(default_factory=list)
    commands: list[str] = field(default_factory=list)
    user_id: str = ""
    case_study: str | None = None
    condition: str | None = None
    rating: float | None = None
    feedback: str | None = None
    started_at: datetime | None = None

    @property
    def user_message_count(self) -> int:
        """Number of messages sourced from the user."""
        return sum(1 for t in self.turns if t.role == "user")

    @property
    def user_text(self) -> str:
        """The user's messages joined by newlines (the ``user_text`` column)."""
        return "\n".join(t.text for t in self.turns if t.role == "user")

    @property
    def n_segments(self) -> int:
        """Number of work segments (one per user message; at least one if anything happened)."""
        return max(self.user_message_count, 1 if self.turns or self.commands else 0)

    def transcript(self) -> list[dict]:
        """The conversation as ``[{"role", "text"(, "feedback")}]`` (JSON-ready)."""
        out = []
        for t in self.turns:
            item: dict = {"role": t.role, "text": t.text}
            if t.feedback is not None:
                item["feedback"] = t.feedback
            out.append(item)
        return out


class SessionBuilder:
    """Accumulate turns and commands while walking an event stream (tracks segments)."""

    def __init__(self, session: RawSession):
        self.session = session
        self._users = 0

    def user(self, text: str, feedback: float | None = None) -> None:
        """Add a user message (starts a new work segment)."""
        self._users += 1
        self.session.turns.append(Turn("user", text, self._users, feedback))

    def agent(self, text: str, feedback: float | None = None) -> None:
        """Add an agent message to the current segment."""
        if text:
            self.session.turns.append(Turn("agent", text, self._users, feedback))

    def command(self, command: str) -> None:
        """Record an executed shell command (also shown to judges as ``$ command``)."""
        if command:
            self.session.commands.append(command)
            self.agent(f"$ {command}")
