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
    per_file: dict[str, int] = field(default_factory=dict)  # sessions read per file


def skipped_by_file(failures: list[tuple[str, str]], per_file: dict[str, int]) -> list[str]:
    """One line per file with skipped lines/records (their line numbers) or a failed file.

    Args:
        failures: ``(file, reason)``; a reason ``"line <n>: ..."`` is one skipped line.
        per_file: Sessions read per file (files that failed as a whole are absent).

    Returns:
        Lines such as ``chat.jsonl: read 3 session(s), skipped 1 line (2): invalid JSON (...)``.
    """
    grouped: dict[str, list[str]] = {}
    for name, why in failures:
        grouped.setdefault(name, []).append(why)
    lines = []
    for name, reasons in grouped.items():
        if name not in per_file:
            lines.append(f"{name}: not read: {reasons[0]}")
            continue
        numbers = [r.split(":", 1)[0][5:] for r in reasons if r.startswith("line ")]
        shown = ", ".join(numbers[:10]) + (f" and {len(numbers) - 10} more"
                                           if len(numbers) > 10 else "")
        first = reasons[0].split(": ", 1)[-1]
        lines.append(f"{name}: read {per_file[name]} session(s), skipped {len(reasons)} "
                     f"line(s) ({shown}); first: {first[:160]}")
    return lines


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
        failures: When given, a bad line (invalid JSON) or record of a JSON Lines file is
            appended here as ``("<file>", "line <n>: <reason>")`` and skipped instead of
            failing the whole file.

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
    values: list[tuple[int, object]] = []  # (file line number, parsed value)
    bad: list[tuple[int, str]] = []
    for lineno, line in enumerate(text.splitlines(), start=1):
        if line.strip():
            try:
                values.append((lineno, json.loads(line)))
            except json.JSONDecodeError as exc:
                bad.append((lineno, f"invalid JSON ({exc.msg})"))
    if not values:
        if bad:
            more = f" (and {len(bad) - 1} more line(s))" if len(bad) > 1 else ""
            raise ValueError(f"line {bad[0][0]}: {bad[0][1]}{more}")
        raise FormatError("the file is empty")
    if bad:
        if failures is None:
            raise ValueError(f"line {bad[0][0]}: {bad[0][1]}")
        failures.extend((str(path), f"line {lineno}: {why}") for lineno, why in bad)
    if all(is_event(v) for _, v in values):  # one session, one event per line
        return sessions_from_value([v for _, v in values], stem, path.name)
    out: list[RawSession] = []
    for i, (lineno, value) in enumerate(values):
        try:
            out.extend(sessions_from_value(value, f"{stem}-{i}", path.name))
        except FormatError as exc:
            if failures is None:
                raise FormatError(f"line {lineno}: {exc}") from None
            failures.append((str(path), f"line {lineno}: {exc}"))
    if not out:
        raise FormatError("no record of the file could be read")
    return out


def read_sessions(files: list[Path], progress: bool = True) -> ReadResult:
    """Read all files; a file that fails is recorded in ``failures`` and skipped."""
    from pulse_ml.report.progress import progress_bar

    result = ReadResult()
    for path in progress_bar(files, desc="reading sessions", unit="file",
                             disable=not progress, leave=False):
        skipped: list[tuple[str, str]] = []
        try:
            found = read_file(path, skipped)
        except (ValueError, OSError, UnicodeDecodeError, RecursionError) as exc:
            result.failures.append((str(path), str(exc)[:300] or type(exc).__name__))
            continue
        result.sessions.extend(found)
        result.failures.extend(skipped)
        result.per_file[str(path)] = len(found)
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
