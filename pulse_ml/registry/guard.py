"""Checks before the first MLflow call: never touch a foreign store, never hang on a dead one.

MLflow, handed an SQLite file, creates or migrates its tables in it; handed an HTTP URI, it
retries for minutes. So before :mod:`pulse_ml.registry.store` points MLflow anywhere,
:func:`check_store` looks at the target itself, read-only:

* an SQLite file that is not a database, is truncated, or holds another application's tables
  is refused untouched (opened with ``mode=ro``; its header and ``PRAGMA quick_check`` read);
* an explicit tracking URI whose folder does not exist (a typo) is refused instead of silently
  becoming a new, empty store (for a file store, the folder itself must exist unless it is
  MLflow's default ``./mlruns``);
* a store the command must write to but cannot (read-only file or folder) is refused in one
  line, before any run is started;
* an HTTP(S) tracking server is probed with a timeout (``PULSE_TRACKING_TIMEOUT``, default
  10 s), and MLflow's own HTTP retries and timeouts are bounded for the rest of the command;
* a database tracking store (``postgresql://``, ``mysql://``, …) is probed the same way: its
  port first, then one real connection with the driver's ``connect_timeout`` (a server that
  accepts and never answers fails in time, too).

:func:`initialize` then lets MLflow create a fresh SQLite store's schema while holding a file
lock beside the database (two commands started at once on a new store both succeed), retrying
"database is locked" with backoff. :func:`wait_for_locks` makes MLflow's SQLite sessions wait
longer for another process's write (``PULSE_SQLITE_BUSY_TIMEOUT``, default 60 s, instead of
MLflow's fixed 20 s), so two commands logging or registering into one store at once queue behind
each other's short transactions instead of one failing with "database is locked".
"""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar
from urllib.parse import quote

from pulse_ml.env import dbprobe
from pulse_ml.env.dbprobe import TIMEOUT_ENV, timeout_s
from pulse_ml.env.faults import (
    BUSY_TIMEOUT_ENV,
    file_lock,
    retry_locked,
    seconds_from_env,
    shorten,
)
from pulse_ml.errors import PulseError
from pulse_ml.registry.http_probe import probe_http  # noqa: F401 - re-exported

T = TypeVar("T")

SQLITE_MAX_PATH = 512  # SQLite's SQLITE_MAX_PATHNAME (unix VFS), in bytes
DEFAULT_BUSY_TIMEOUT_S = 60.0  # BUSY_TIMEOUT_ENV (faults.py) overrides it
QUICK_CHECK_MAX_BYTES = 256 * 2**20  # larger stores get the O(1) header check only
_SQLITE_MAGIC = b"SQLite format 3\x00"
_MLFLOW_TABLES = {"alembic_version", "experiments", "runs"}


@dataclass(frozen=True)
class StoreCheck:
    """What :func:`check_store` found.

    Attributes:
        uri: The tracking URI.
        kind: ``sqlite``, ``http``, ``database`` (PostgreSQL, MySQL, …), ``file`` or
            ``other``.
        db: The SQLite file (``kind == "sqlite"``), else None.
        fresh: No MLflow schema yet (MLflow will create it).
    """

    uri: str
    kind: str
    db: Path | None = None
    fresh: bool = False


def busy_timeout_s() -> float:
    """Seconds an SQLite statement waits for another process's lock (default 60)."""
    return seconds_from_env(BUSY_TIMEOUT_ENV, DEFAULT_BUSY_TIMEOUT_S)


_BUSY_MS: dict[str, int] = {}  # {"ms": busy timeout} once wait_for_locks ran in this process


def _busy_pragma(conn, _cursor, statement, parameters, _context, _executemany):
    """SQLAlchemy ``before_cursor_execute`` hook: MLflow's busy-timeout pragma, made ours."""
    if "ms" in _BUSY_MS and statement[:30].lower().lstrip().startswith("pragma busy_timeout") \
            and conn.dialect.name == "sqlite":
        statement = f"PRAGMA busy_timeout = {_BUSY_MS['ms']};"
    return statement, parameters


def _busy_on_connect(dbapi_connection, _record) -> None:
    """SQLAlchemy ``connect`` hook: the same timeout for statements outside MLflow's sessions."""
    if "ms" in _BUSY_MS and isinstance(dbapi_connection, sqlite3.Connection):
        dbapi_connection.execute(f"PRAGMA busy_timeout = {_BUSY_MS['ms']}")


def wait_for_locks() -> None:
    """Let SQLite statements of this process wait :func:`busy_timeout_s` for another's lock.

    MLflow starts every session on an SQLite store with ``PRAGMA busy_timeout = 20000``: two
    commands writing to one store (trial runs, metrics, model versions) then fail with
    "database is locked" whenever one waits more than 20 s for the other's write transaction
    (a loaded machine). SQLAlchemy's event API replaces that value (and sets it on new
    connections); SQLite's busy handler then keeps retrying the lock, so no statement runs
    twice. Call before the first MLflow call; a later call re-reads the setting.

    Raises:
        PulseError: ``PULSE_SQLITE_BUSY_TIMEOUT`` is not a positive number of seconds.
    """
    from sqlalchemy import event
    from sqlalchemy.engine import Engine

    ms = round(1000 * busy_timeout_s())
    if "ms" not in _BUSY_MS:
        event.listen(Engine, "before_cursor_execute", _busy_pragma, retval=True)
        event.listen(Engine, "connect", _busy_on_connect)
    _BUSY_MS["ms"] = ms


def redact(uri: str) -> str:
    """The URI without a password, in its user-info or query string (safe to print)."""
    from pulse_ml.redact import redact_uri

    return redact_uri(uri)


def _default_file_store(folder: Path) -> bool:
    """Whether ``folder`` is where MLflow itself puts a file store (``./mlruns``)."""
    from pulse_ml.env.paths import project_root

    here = folder.expanduser().absolute()
    return here in (Path.cwd() / "mlruns", project_root().absolute() / "mlruns")


def _refuse(uri: str, problem: str, fix: str, untouched: bool = True) -> PulseError:
    done = "; pulse-ml left it untouched." if untouched else "; nothing was created."
    return PulseError(f"MLflow store {redact(uri)}: {problem}{done} {fix}")


def _damaged(uri: str, path: Path, why: str) -> PulseError:
    return _refuse(uri, f"{path} is not a usable SQLite database ({why})",
                   "Restore it from a backup, or point MLFLOW_TRACKING_URI at another file "
                   "(unset it to use ./mlruns/mlflow.db).")


def _header_problem(path: Path, size: int) -> str | None:
    """Check the 100-byte SQLite header: magic string and the page count vs the file size."""
    with open(path, "rb") as fh:
        head = fh.read(100)
    if len(head) < 100 or not head.startswith(_SQLITE_MAGIC):
        return "no SQLite header: it is not a database"
    page_size = int.from_bytes(head[16:18], "big")
    page_size = 65536 if page_size == 1 else page_size
    pages = int.from_bytes(head[28:32], "big")
    counter_ok = head[24:28] == head[92:96]  # the in-header size is valid only then
    if counter_ok and pages and size < pages * page_size:
        return (f"truncated: the header says {pages * page_size} bytes, the file has {size}")
    return None


def inspect_sqlite(uri: str, path: Path) -> bool:
    """Look at an SQLite store file read-only; returns True when it has no schema yet.

    Raises:
        PulseError: not a database, damaged/truncated, or another application's database.
    """
    if not path.exists():
        return True
    if not path.is_file():
        raise _refuse(uri, f"{path} is a folder, not a database file",
                      "Point MLFLOW_TRACKING_URI at a file inside it, e.g. "
                      f"sqlite:///{path / 'mlflow.db'}.")
    size = path.stat().st_size
    if size == 0:
        return True
    problem = _header_problem(path, size)
    if problem is not None:
        raise _damaged(uri, path, problem)
    try:
        con = sqlite3.connect(f"file:{quote(str(path.resolve()))}?mode=ro", uri=True,
                              timeout=timeout_s())
        try:
            tables = {row[0] for row in con.execute(
                "SELECT name FROM sqlite_master WHERE type = 'table'")}
            if size <= QUICK_CHECK_MAX_BYTES:
                verdict = con.execute("PRAGMA quick_check").fetchone()[0]
                if verdict != "ok":
                    raise _damaged(uri, path, f"damaged: {shorten(verdict)}")
        finally:
            con.close()
    except sqlite3.DatabaseError as exc:
        raise _damaged(uri, path, shorten(exc)) from None
    if not tables:
        return True
    if not _MLFLOW_TABLES <= tables:
        shown = ", ".join(sorted(tables)[:6]) + (" …" if len(tables) > 6 else "")
        raise _refuse(uri, f"{path} is another application's SQLite database (tables: "
                      f"{shorten(shown)}), not an MLflow store",
                      "Point MLFLOW_TRACKING_URI at an MLflow database, or at a new file name "
                      "in an existing folder to start a new store.")
    return False


def _write_problem(path: Path) -> str | None:
    """Why ``path`` (an SQLite file, maybe absent) and its folder cannot be written, or None."""
    folder = path.parent
    if not os.access(folder, os.W_OK):
        return f"its folder {folder} is not writable"
    if path.exists():
        try:
            fd = os.open(path, os.O_WRONLY | os.O_APPEND)  # opens only: no byte changes
        except OSError as exc:
            return f"{path} cannot be opened for writing ({exc.strerror})"
        os.close(fd)
    return None


def probe_database(uri: str, timeout: float) -> None:
    """Make sure a database tracking store answers within ``timeout`` seconds.

    The host's port is tried first (refused, unknown host or black hole fail fast), then one
    connection is opened and ``SELECT 1`` run with the driver's ``connect_timeout`` and a
    thread bound around it (:func:`pulse_ml.env.dbprobe.open_bounded`). Nothing is created or
    changed.

    Raises:
        PulseError: one line naming the (redacted) URI: no answer in time, refused, driver
            missing, or the connection refused (credentials, database name).
    """
    from sqlalchemy import create_engine, text
    from sqlalchemy.pool import NullPool

    shown = redact(uri)
    fix = (f"Start it or fix MLFLOW_TRACKING_URI (unset it to use the local store "
           f"./mlruns/mlflow.db); {TIMEOUT_ENV} sets how long to wait (now {timeout:g} s).")
    silent = (f"MLflow tracking database {shown} does not answer (it accepts connections but "
              f"sent no answer within {timeout:g} s: is it a database server?). {fix}")

    def connect(connect_args: dict) -> None:
        engine = create_engine(uri, poolclass=NullPool, connect_args=connect_args)
        try:
            with engine.connect() as con:
                con.execute(text("SELECT 1"))
        finally:
            engine.dispose()

    try:
        dbprobe.open_bounded(dbprobe.target(uri), timeout, connect, "probe-tracking-database")
    except dbprobe.DbProblem as problem:
        if problem.kind == "url":
            raise PulseError(f"MLFLOW_TRACKING_URI={shown} is not a database URL (e.g. "
                             "postgresql://user@host:5432/mlflow).") from None
        if problem.kind == "unreachable":
            raise PulseError(f"MLflow tracking database {shown} does not answer "
                             f"({problem.reason}). {fix}") from None
        if problem.kind == "silent":
            raise PulseError(silent) from None
        if problem.kind == "driver":
            raise PulseError(f"MLflow tracking database {shown}: the "
                             f"{problem.target.backend} driver is not installed "
                             f"({shorten(problem.reason)}); pip install {problem.driver}.") \
                from None
        exc = problem.reason
        text_ = str(getattr(exc, "orig", None) or exc).strip()
        first = text_.splitlines()[0] if text_ else type(exc).__name__
        if "timeout expired" in first or "timed out" in first.lower():
            raise PulseError(silent) from None
        raise PulseError(f"MLflow tracking database {shown} refused the connection "
                         f"({shorten(first, 200)}). Check the server, the credentials and the "
                         "database name in MLFLOW_TRACKING_URI.") from None


def bound_http_env(timeout: float) -> None:
    """Bound MLflow's own HTTP waits for this process (unless the user set them).

    MLflow's defaults (7 retries with backoff factor 2, 120 s per request) turn a server that
    dies mid-command into minutes of silence; these keep it under a minute.
    """
    os.environ.setdefault("MLFLOW_HTTP_REQUEST_TIMEOUT", str(max(1, round(3 * timeout))))
    os.environ.setdefault("MLFLOW_HTTP_REQUEST_MAX_RETRIES", "2")
    os.environ.setdefault("MLFLOW_HTTP_REQUEST_BACKOFF_FACTOR", "1")


def check_store(uri: str, explicit: bool, write: bool) -> StoreCheck:
    """Check the tracking store before MLflow sees it (nothing is created or changed).

    Args:
        uri: The tracking URI.
        explicit: The user named it (``MLFLOW_TRACKING_URI``): a missing folder is then a
            typo, not a place to create.
        write: The command will write to the store (runs, models, aliases).

    Returns:
        A :class:`StoreCheck`.

    Raises:
        PulseError: foreign, damaged or read-only store, missing folder, dead server.
    """
    db = dbprobe.sqlite_file(uri)
    if db is not None:
        size = len(str(db.expanduser().absolute()).encode()) + len("-journal")
        if size > SQLITE_MAX_PATH:  # SQLite cannot open it; MLflow would retry for minutes
            raise _refuse(uri, f"its path is {size - 8:,} bytes long, and SQLite opens no "
                          f"database whose path (with '-journal') exceeds {SQLITE_MAX_PATH}",
                          "Choose a shorter PULSE_HOME (or MLFLOW_TRACKING_URI).")
        if not db.parent.is_dir():
            if explicit:
                raise _refuse(uri, f"the folder {db.parent} does not exist, so this would be a "
                              "new, empty store (a typo?)",
                              "Fix MLFLOW_TRACKING_URI, or create the folder first if you "
                              "mean to start a new store there.", untouched=False)
            db.parent.mkdir(parents=True, exist_ok=True)
        fresh = inspect_sqlite(uri, db)
        if write:
            problem = _write_problem(db)
            if problem is not None:
                raise _refuse(uri, f"the store is read-only: {problem}",
                              "This command records runs or models there: make the file and "
                              "its folder writable, or point MLFLOW_TRACKING_URI at a writable "
                              "store (e.g. a copy).")
        return StoreCheck(uri, "sqlite", db, fresh)
    if uri.startswith(("http://", "https://")):
        timeout = timeout_s()
        probe_http(uri, timeout)
        bound_http_env(timeout)
        return StoreCheck(uri, "http")
    known = dbprobe.backend(uri)
    if known is not None and dbprobe.BACKENDS[known].tracking:
        probe_database(uri, timeout_s())
        return StoreCheck(uri, "database")
    folder = dbprobe.local_dir(uri)
    if folder is not None:
        if explicit and not folder.exists() and not _default_file_store(folder):
            raise _refuse(uri, f"the folder {folder} does not exist, so this would be a new, "
                          "empty store (a typo?)",
                          "Fix MLFLOW_TRACKING_URI, or create the folder first (mkdir -p "
                          f"{folder}) if you mean to start a new store there.",
                          untouched=False)
        return StoreCheck(uri, "file")
    return StoreCheck(uri, "other")


def initialize(check: StoreCheck, touch: Callable[[], T]) -> T:
    """Run MLflow's first calls on the store (which create a fresh schema) safely.

    For a fresh SQLite store the calls run under an exclusive lock on ``<db>.lock`` beside
    the database, so a second process waits and then finds the schema complete instead of
    racing to create the same tables; "database is locked" is retried with backoff.

    Args:
        check: The result of :func:`check_store`.
        touch: The first MLflow calls (safe to repeat).

    Returns:
        What ``touch`` returns.
    """
    if check.kind == "sqlite" and check.fresh and check.db is not None \
            and os.access(check.db.parent, os.W_OK):
        lock = check.db.with_name(check.db.name + ".lock")
        with file_lock(lock, what=f"the new MLflow store {check.db}"):
            return retry_locked(touch)
    return retry_locked(touch)


def locked(check: StoreCheck, fn: Callable[[], T]) -> T:
    """Run ``fn`` under the store's lock file when it is a local SQLite store (else as is).

    For short create-if-missing steps (an experiment) that two processes could race on.
    """
    if check.kind == "sqlite" and check.db is not None and os.access(check.db.parent, os.W_OK):
        with file_lock(check.db.with_name(check.db.name + ".lock"),
                       what=f"the MLflow store {check.db}"):
            return retry_locked(fn)
    return retry_locked(fn)
