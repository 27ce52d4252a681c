"""Optuna study storages (``tuning.storage``): journal files and databases, with bounded waits.

A journal file (``*.journal``, ``*.log``, ``*.jsonl`` or any path without ``://``) is a
:class:`optuna.storages.JournalStorage`; a database URL (``sqlite:///…``, ``postgresql://…``,
``mysql+pymysql://…``) is an :class:`optuna.storages.RDBStorage` whose connection waits at most
``PULSE_TRACKING_TIMEOUT`` seconds (default 10), opened by the one database probe
(:mod:`pulse_ml.env.dbprobe`): a server host/port is probed first (a dead or black-holed server
fails fast instead of hanging on the TCP connect), the driver gets a ``connect_timeout`` where
it takes one and a bounding thread (an accepting server that never answers), and SQLite a busy
timeout (two workers retry "database is locked" instead of failing). Every failure is one
:class:`~pulse_ml.errors.PulseError` naming the storage (password redacted).
"""

from __future__ import annotations

from pathlib import Path

from pulse_ml.env import dbprobe
from pulse_ml.env.dbprobe import TIMEOUT_ENV
from pulse_ml.env.faults import shorten
from pulse_ml.errors import PulseError
from pulse_ml.redact import redact_uri

JOURNAL_SUFFIXES = (".log", ".journal", ".jsonl")


def is_journal(url: str) -> bool:
    """Whether ``tuning.storage`` names a journal file rather than a database URL."""
    return url.endswith(JOURNAL_SUFFIXES) or "://" not in url


def check_journal(path: Path, url: str) -> None:
    """Refuse a journal file that is not one: not text, a line that is no record, or cut off.

    Optuna reads a journal as one JSON record per line; garbage raised a UnicodeDecodeError
    and a truncated file an ``AssertionError("Should not reach.")`` deep inside Optuna.

    Raises:
        PulseError: naming the journal, the line and what to do.
    """
    import json

    if not path.is_file() or path.stat().st_size == 0:
        return
    fix = ("Restore it from a backup, or start a new study (another tuning.storage, or "
           "tuning.storage=auto).")
    try:
        text = path.read_bytes().decode("utf-8")
    except UnicodeDecodeError:
        raise PulseError(f"tuning.storage={url}: {path} is not an Optuna journal (it is not "
                         f"text). {fix}") from None
    except OSError as exc:
        raise PulseError(f"tuning.storage={url}: cannot read the journal {path} "
                         f"({exc.strerror or exc}).") from None
    lines = text.split("\n")
    last = max((i for i, line in enumerate(lines, start=1) if line.strip()), default=0)
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except (ValueError, RecursionError):
            record = None
        if isinstance(record, dict) and "op_code" in record:
            continue
        if number == last:  # the last record is cut off: the write was cut short
            raise PulseError(f"tuning.storage={url}: the Optuna journal {path} is truncated "
                             f"(its last line, {number}, is cut off). {fix}")
        raise PulseError(f"tuning.storage={url}: {path} is not an Optuna journal (line "
                         f"{number} is not a journal record). {fix}")


def _journal(url: str):
    from optuna.storages import JournalStorage
    from optuna.storages.journal import JournalFileBackend

    path = Path(url).expanduser().resolve()
    check_journal(path, url)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        return JournalStorage(JournalFileBackend(str(path)))
    except OSError as exc:
        raise PulseError(f"tuning.storage={url}: cannot open the journal file {path} "
                         f"({exc.strerror or exc}). Use a writable path.") from None


def open_storage(url: str | None, timeout: float | None = None):
    """Open the Optuna storage named by ``tuning.storage`` (None = in memory).

    Args:
        url: A journal file path or a database URL.
        timeout: Seconds to wait for a database (default ``PULSE_TRACKING_TIMEOUT`` or 10).

    Returns:
        None, a ``JournalStorage`` or an ``RDBStorage``.

    Raises:
        PulseError: bad URL, missing folder or driver, a server that does not answer in time,
            or a database that refuses the connection.
    """
    if not url:
        return None
    if is_journal(url):
        return _journal(url)
    import optuna

    shown = redact_uri(url)
    timeout = timeout or dbprobe.timeout_s()
    try:
        found = dbprobe.target(url)
    except dbprobe.DbProblem:
        raise PulseError(f"tuning.storage={shown}: not a database URL (e.g. "
                         "sqlite:///mlruns/optuna.db, postgresql://user@host/db) nor a journal "
                         "file (*.journal).") from None
    if found.backend == "sqlite" and found.database and found.database != ":memory:":
        folder = Path(found.database).expanduser().resolve().parent
        if not folder.is_dir():
            raise PulseError(f"tuning.storage={shown}: the folder {folder} does not exist "
                             "(a typo?). Create it first, or fix the URL.")

    def create(connect_args):
        # Two processes creating a fresh study database race on its schema (PostgreSQL:
        # UniqueViolation on pg_type); the loser retries once the winner has made it.
        import time

        from sqlalchemy.exc import IntegrityError, ProgrammingError

        for attempt in range(5):
            try:
                return optuna.storages.RDBStorage(
                    url, engine_kwargs={"connect_args": connect_args})
            except (IntegrityError, ProgrammingError):
                if attempt == 4:
                    raise
                time.sleep(0.5 * (attempt + 1))
        return None

    try:
        storage = dbprobe.open_bounded(found, timeout, create, "open-optuna-storage")
    except dbprobe.DbProblem as problem:
        if problem.kind == "unreachable":
            raise PulseError(f"tuning.storage={shown}: the database server {found.host}:"
                             f"{found.port} does not answer ({problem.reason}). Start it or "
                             f"fix the URL; {TIMEOUT_ENV} sets how long to wait (now "
                             f"{timeout:g} s).") from None
        if problem.kind == "silent":
            raise PulseError(f"tuning.storage={shown}: the database accepts connections but "
                             f"does not answer within {timeout:g} s. Check the server (and "
                             "that the URL names a database server, not another service); "
                             f"{TIMEOUT_ENV} sets how long to wait.") from None
        if problem.kind == "driver":
            raise PulseError(f"tuning.storage={shown}: the {found.backend} driver is not "
                             f"installed ({shorten(problem.reason)}); pip install "
                             f"{problem.driver}.") from None
        exc = problem.reason
        text = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise PulseError(f"tuning.storage={shown}: cannot open the study database "
                         f"({type(exc).__name__}: {shorten(text, 200)}). Check the server, the "
                         f"credentials and the URL; {TIMEOUT_ENV} sets how long to wait "
                         f"(now {timeout:g} s).") from None
    return storage


