"""Faults of the environment (full disk, permissions, locked databases, dead endpoints).

They are not bugs of pulse_ml, so they must never reach the CLI's "failed unexpectedly" path:
:func:`explain` turns an exception that escaped a job into one line saying what is wrong and
how to fix it, and the helpers below (:func:`probe_tcp`, :func:`retry_locked`,
:func:`file_lock`, :func:`seconds_from_env`) bound the waits and serialize the races that caused
them. Nothing here imports a heavy library.
"""

from __future__ import annotations

import errno
import os
import random
import socket
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TypeVar

from pulse_ml.errors import PulseError

T = TypeVar("T")

# errno -> what it means for the user. Disk: the write cannot complete; access: not allowed.
DISK_ERRNOS = {errno.ENOSPC: "no space left on device", errno.EFBIG: "file too large (a "
               "file-size limit)", errno.EDQUOT: "disk quota exceeded"}
ACCESS_ERRNOS = {errno.EROFS: "read-only file system", errno.EACCES: "permission denied",
                 errno.EPERM: "operation not permitted (read-only or immutable)"}
# The same faults as some libraries (pyarrow, sqlite) word them without an errno.
_DISK_TEXT = (("no space left on device", "no space left on device"),
              ("file too large", "file too large (a file-size limit)"),
              ("disk quota exceeded", "disk quota exceeded"),
              ("database or disk is full", "no space left on device"))
_SQLITE_MARKERS = (
    ("attempt to write a readonly database", "the store is read-only"),
    ("database is locked", "the database stayed locked by another process"),
    ("database disk image is malformed", "the database file is damaged (truncated?)"),
    ("file is not a database", "the file is not an SQLite database"),
    ("disk i/o error", "a disk I/O error"),
    ("unable to open database file", "the database file cannot be opened"),
)
ECHO_LIMIT = 80
BUSY_TIMEOUT_ENV = "PULSE_SQLITE_BUSY_TIMEOUT"  # how long SQLite waits for another writer


def shorten(value: object, limit: int = ECHO_LIMIT) -> str:
    """``str(value)`` cut to ``limit`` characters (with the full length) for messages."""
    text = str(value)
    if len(text) <= limit:
        return text
    return f"{text[:limit - 1]}… ({len(text)} characters)"


def causes(exc: BaseException) -> Iterator[BaseException]:
    """``exc`` and its ``__cause__`` / ``__context__`` chain (each once)."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        yield current
        current = current.__cause__ or current.__context__


def disk_reason(exc: BaseException) -> str | None:
    """Why a write failed when it is the disk's fault (full, size limit, quota), else None."""
    for e in causes(exc):
        if isinstance(e, OSError) and e.errno in DISK_ERRNOS:
            return DISK_ERRNOS[e.errno]
        text = str(e).lower()
        for marker, reason in _DISK_TEXT:
            if marker in text:
                return reason
    return None


def access_reason(exc: BaseException) -> str | None:
    """Why a write failed when it is not allowed (permissions, read-only), else None."""
    for e in causes(exc):
        if isinstance(e, OSError) and e.errno in ACCESS_ERRNOS:
            return ACCESS_ERRNOS[e.errno]
        if "read-only file system" in str(e).lower():
            return "read-only file system"
    return None


def sqlite_reason(exc: BaseException) -> str | None:
    """A short reason when ``exc`` comes from an SQLite database fault, else None."""
    for e in causes(exc):
        text = str(e).lower()
        for marker, reason in _SQLITE_MARKERS:
            if marker in text:
                return reason
    return None


def _filename(exc: BaseException) -> str | None:
    for e in causes(exc):
        name = getattr(e, "filename", None)
        if isinstance(e, OSError) and name:
            return str(name)
    return None


def java_missing(exc: BaseException) -> bool:
    """Whether ``exc`` (or its cause) is PySpark's "Java gateway process exited" error."""
    seen = 0
    while exc is not None and seen < 10:
        error_class = getattr(exc, "getErrorClass", None)
        text = str(exc)
        if (callable(error_class) and error_class() == "JAVA_GATEWAY_EXITED") \
                or "JAVA_GATEWAY_EXITED" in text or "Java gateway process exited" in text:
            return True
        exc, seen = exc.__cause__ or exc.__context__, seen + 1
    return False


def explain(exc: BaseException) -> str | None:
    """One-line message for an environment fault that escaped a job, or None for a real bug.

    Args:
        exc: The exception that reached the CLI.

    Returns:
        The message (without the ``error:`` prefix), or None when ``exc`` is not a fault of the
        disk, the permissions or a database file.
    """
    if java_missing(exc):
        return ("Spark could not start Java (JAVA_GATEWAY_EXITED: no Java, or one too old for "
                "this Spark). Install Java 17 (Debian/Ubuntu: apt-get install "
                "openjdk-17-jre-headless; or point JAVA_HOME at one), or score without Spark: "
                "engine=local.")
    target = _filename(exc)
    where = f"cannot write {target}" if target else "a write failed"
    reason = disk_reason(exc)
    if reason is not None:
        return (f"{where}: {reason}. Free some space (or write to another disk) and run "
                "again; pulse-ml writes its outputs under temporary names, so no half-written "
                "file was left and earlier results are unchanged.")
    reason = sqlite_reason(exc)
    if reason is not None:
        from pulse_ml.env.paths import project_root

        uri = os.environ.get("MLFLOW_TRACKING_URI") or f"{project_root() / 'mlruns'}"
        if is_locked(exc):
            return (f"database error ({reason}): the MLflow store is {uri}. Another command "
                    f"kept writing to it for longer than {BUSY_TIMEOUT_ENV} allows (now "
                    f"{os.environ.get(BUSY_TIMEOUT_ENV) or '60'} s): run again when it is "
                    "done, or raise it.")
        return (f"database error ({reason}): the MLflow store is {uri}. Fix or restore that "
                "file, or point MLFLOW_TRACKING_URI at another store.")
    reason = access_reason(exc)
    if reason is not None:
        return (f"{where}: {reason}. Make the folder writable, or point the output (out=, "
                "output=, PULSE_HOME) somewhere writable.")
    return None


def seconds_from_env(name: str, default: float) -> float:
    """A positive number of seconds from environment variable ``name`` (else ``default``).

    Raises:
        PulseError: when the variable is set but is not a positive number.
    """
    raw = os.environ.get(name)
    if raw is None or not raw.strip():
        return default
    try:
        value = float(raw)
    except ValueError:
        value = float("nan")
    if not (value > 0 and value != float("inf")):
        raise PulseError(f"{name}={shorten(raw)} is not a number of seconds > 0; unset it "
                         f"(default {default:g} s) or use e.g. {name}=20.")
    return value


def probe_tcp(host: str, port: int, timeout: float) -> str | None:
    """Try to open a TCP connection; returns None when it opens, else the reason.

    Waits at most ``timeout`` seconds (a black-holed address does not hang).
    """
    try:
        with socket.create_connection((host, port), timeout=timeout):
            return None
    except TimeoutError:
        return f"no answer within {timeout:g} s"
    except OSError as exc:
        return exc.strerror or type(exc).__name__


def within(timeout: float, fn: Callable[[], T], name: str = "bounded-call") -> T:
    """Run ``fn`` in a daemon thread; raise ``TimeoutError`` if it has not returned in time.

    For a database connect: drivers bound the TCP connect, not always the handshake after it;
    a thread bounds every driver the same way. A thread still waiting is abandoned (the
    command is about to exit with the error).
    """
    import threading

    box: dict[str, object] = {}

    def target() -> None:
        try:
            box["value"] = fn()
        except BaseException as exc:  # noqa: BLE001 - re-raised in the caller's thread
            box["error"] = exc

    thread = threading.Thread(target=target, name=name, daemon=True)
    thread.start()
    thread.join(timeout + 2.0)  # the driver's own connect_timeout usually fires first
    if thread.is_alive():
        raise TimeoutError
    if "error" in box:
        raise box["error"]  # type: ignore[misc]
    return box["value"]  # type: ignore[return-value]


def is_locked(exc: BaseException) -> bool:
    """Whether ``exc`` (or its cause) is SQLite's "database is locked" (or a schema race)."""
    for e in causes(exc):
        text = str(e).lower()
        if "database is locked" in text or "database table is locked" in text:
            return True
    return False


def retry_locked(fn: Callable[[], T], attempts: int = 10, base_s: float = 0.05,
                 cap_s: float = 2.0, seed: int | None = None) -> T:
    """Call ``fn``; retry with jittered exponential backoff while the database is locked.

    Args:
        fn: The database operation (must be safe to repeat).
        attempts: Calls in all (the total wait is below ``attempts * cap_s``).
        base_s: First backoff in seconds; doubles per retry up to ``cap_s``.
        cap_s: Longest single backoff.
        seed: Seed of the jitter (default: the process id, so two processes that collided do
            not retry in lock step).

    Returns:
        What ``fn`` returns.

    Raises:
        The last exception when every attempt found the database locked, or the first
        exception that is not a lock.
    """
    rng = random.Random(os.getpid() if seed is None else seed)
    for attempt in range(attempts):
        try:
            return fn()
        except Exception as exc:
            if not is_locked(exc) or attempt == attempts - 1:
                raise
            time.sleep(min(cap_s, base_s * 2 ** attempt) * (0.5 + rng.random()))
    raise AssertionError("unreachable")  # pragma: no cover


@contextmanager
def file_lock(path: Path, timeout_s: float = 300.0, what: str = "the store") -> Iterator[None]:
    """Hold an exclusive ``flock`` on ``path`` (created if missing) while the block runs.

    Raises:
        PulseError: when another process held the lock for ``timeout_s`` seconds.
    """
    import fcntl

    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        deadline = time.monotonic() + timeout_s
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() > deadline:
                    raise PulseError(f"another process has held the lock {path} on {what} for "
                                     f"{timeout_s:g} s; wait for it to finish, or remove the "
                                     "lock file if no pulse-ml command is running.") from None
                time.sleep(0.05)
        try:
            yield
        finally:
            fcntl.flock(fd, fcntl.LOCK_UN)
    finally:
        os.close(fd)
