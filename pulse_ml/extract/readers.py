"""Find raw session files and read them, skipping (and reporting) the ones that fail."""

from __future__ import annotations

import glob
import json
from dataclasses import dataclass, field
from pathlib import Path

from pulse_ml.errors import PulseError
from pulse_ml.extract.formats import FormatError, is_event, sessions_from_value
from pulse_ml.extract.sessions import RawSession

SUFFIXES = (".json", ".jsonl", ".ndjson")


@dataclass
class ReadResult:
    """Sessions read from the input and the files that could not be read."""

    sessions: list[RawSession] = field(default_factory=list)
    failures: list[tuple[str, str]] = field(default_factory=list)  # (file, reason)


def find_files(spec: str) -> list[Path]:
    """Expand an input spec (a folder, a file or a glob) to the session files, sorted.

    Raises:
        PulseError: if the spec matches no file.
    """
    path = Path(spec).expanduser()
    if path.is_dir():
        files = sorted(p for p in path.rglob("*") if p.is_file() and p.suffix.lower() in SUFFIXES)
    elif path.is_file():
        files = [path]
    else:
        files = sorted(Path(p) for p in glob.glob(str(path), recursive=True) if Path(p).is_file())
    if not files:
        raise PulseError(f"input={spec}: no session files found. Pass a folder of .json/.jsonl "
                         f"session files, one file, or a glob such as 'events/*.json'.")
    return files


def read_file(path: Path, failures: list[tuple[str, str]] | None = None) -> list[RawSession]:
    """Read every session of one file (JSON document or JSON Lines).

    Args:
        path: The file.
        failures: When given, a bad record of a multi-record JSONL file is appended here as
            ``("<file>:<line>", reason)`` and skipped instead of failing the whole file.

    Raises:
        ValueError: (incl. ``FormatError`` and ``json.JSONDecodeError``) when unreadable.
    """
    text = path.read_text(encoding="utf-8")
    stem = path.stem
    is_lines = path.suffix.lower() in (".jsonl", ".ndjson")
    if not is_lines:
        try:
            return sessions_from_value(json.loads(text), stem, path.name)
        except json.JSONDecodeError:
            is_lines = True  # a .json file that is really JSON Lines
    values = []
    for lineno, line in enumerate(text.splitlines(), start=1):
        if line.strip():
            try:
                values.append(json.loads(line))
            except json.JSONDecodeError as exc:
                raise ValueError(f"line {lineno}: invalid JSON ({exc.msg})") from None
    if not values:
        raise FormatError("the file is empty")
    if all(is_event(v) for v in values):  # one session, one event per line
        return sessions_from_value(values, stem, path.name)
    out: list[RawSession] = []
    for i, value in enumerate(values):
        try:
            out.extend(sessions_from_value(value, f"{stem}-{i}", path.name))
        except FormatError as exc:
            if failures is None:
                raise FormatError(f"line {i + 1}: {exc}") from None
            failures.append((f"{path}:{i + 1}", str(exc)))
    if not out:
        raise FormatError("no record of the file could be read")
    return out


def read_sessions(files: list[Path], progress: bool = True) -> ReadResult:
    """Read all files; a file that fails is recorded in ``failures`` and skipped."""
    from tqdm.auto import tqdm

    result = ReadResult()
    for path in tqdm(files, desc="reading sessions", unit="file", disable=not progress,
                     leave=False):
        try:
            result.sessions.extend(read_file(path, result.failures))
        except (ValueError, OSError, UnicodeDecodeError, RecursionError) as exc:
            result.failures.append((str(path), str(exc)[:300] or type(exc).__name__))
    _make_ids_unique(result.sessions)
    return result


def _make_ids_unique(sessions: list[RawSession]) -> None:
    """Rename clashing session ids to ``<file stem>/<id>`` (then ``#k``) so ids stay unique."""
    counts: dict[str, int] = {}
    for s in sessions:
        counts[s.session_id] = counts.get(s.session_id, 0) + 1
    seen: set[str] = set()
    for s in sessions:
        if counts[s.session_id] > 1:
            s.session_id = f"{Path(s.source).stem}/{s.session_id}"
        base, k = s.session_id, 1
        while s.session_id in seen:
            k += 1
            s.session_id = f"{base}#{k}"
        seen.add(s.session_id)
