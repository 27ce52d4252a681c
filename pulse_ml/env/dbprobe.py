"""Where a store URI points, and does its database answer in time? (one probe for every caller).

The tracking store check (:mod:`pulse_ml.registry.guard`) and the Optuna storages
(:mod:`pulse_ml.training.storage`) both read URIs and open databases; they share this module,
so a URI means the same thing to both and a server gets the same bounded waits:

* :func:`sqlite_file` and :func:`local_dir` read the local file behind ``sqlite:///…`` and
  the folder behind a file store (``file:///…`` or a plain path);
* :data:`BACKENDS` is the one table of database servers: default port, the driver to install,
  whether the driver takes ``connect_timeout``, whether MLflow tracking stores use it;
* :func:`open_bounded` probes the server's port (a dead or black-holed host fails fast instead
  of hanging on the TCP connect), then opens the connection with the driver's
  ``connect_timeout`` (SQLite: a busy timeout) inside a thread bounded by the timeout (a server
  that accepts and never answers). Each failure is one :class:`DbProblem`; the caller words
  the message (it knows which setting named the URI).

Nothing here imports SQLAlchemy before a database is opened, nor any pulse_ml stage.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from pulse_ml.env.faults import probe_tcp, seconds_from_env, within
from pulse_ml.env.locations import local_path

T = TypeVar("T")

TIMEOUT_ENV = "PULSE_TRACKING_TIMEOUT"
DEFAULT_TIMEOUT_S = 10.0


@dataclass(frozen=True)
class Backend:
    """A database server SQLAlchemy opens.

    Attributes:
        port: Its default port (probed when the URI names none).
        driver: What to ``pip install`` when its driver is missing.
        connect_timeout: The driver takes ``connect_timeout`` (seconds); other drivers are
            bounded by the thread alone.
        tracking: An MLflow tracking URI of this backend is probed as a database store.
    """

    port: int
    driver: str
    connect_timeout: bool = True
    tracking: bool = True


# SQLAlchemy's backend name (the URI scheme before any ``+driver``) -> what it needs.
BACKENDS = {
    "postgresql": Backend(5432, "psycopg2-binary"),
    "mysql": Backend(3306, "pymysql (mysql+pymysql://…)"),
    "mariadb": Backend(3306, "pymysql (mariadb+pymysql://…)"),
    "mssql": Backend(1433, "pyodbc", connect_timeout=False),
    "oracle": Backend(1521, "oracledb", connect_timeout=False, tracking=False),
}


@dataclass(frozen=True)
class Target:
    """A parsed database URL.

    Attributes:
        backend: SQLAlchemy's backend name (``sqlite``, ``postgresql``, …).
        host: The server (``localhost`` when the URL names none); unused for SQLite.
        port: The port to probe (the URL's, else the backend's default; None: not probed).
        database: The URL's database part (an SQLite file name, a database name).
    """

    backend: str
    host: str
    port: int | None
    database: str


class DbProblem(Exception):
    """Why a database could not be opened; the caller turns it into its one-line message.

    Attributes:
        kind: ``url`` (not a database URL), ``unreachable`` (the port does not answer),
            ``silent`` (accepts connections, no answer in time), ``driver`` (not installed)
            or ``refused`` (any other failure of the driver: credentials, database name, …).
        target: The parsed URL (None for ``url``).
        reason: The probe's reason (``unreachable``) or the driver's exception.
    """

    def __init__(self, kind: str, target: Target | None = None, reason: object = None):
        super().__init__(kind)
        self.kind = kind
        self.target = target
        self.reason = reason

    @property
    def driver(self) -> str:
        """What to ``pip install`` for the target's backend."""
        backend = BACKENDS.get(self.target.backend if self.target else "")
        return backend.driver if backend else "the database driver"


def timeout_s() -> float:
    """Seconds to wait for a server (``PULSE_TRACKING_TIMEOUT``, default 10)."""
    return seconds_from_env(TIMEOUT_ENV, DEFAULT_TIMEOUT_S)


def sqlite_file(uri: str) -> Path | None:
    """The database file of an ``sqlite:///`` URI (None for other URIs and in-memory ones)."""
    if not uri.startswith("sqlite:///"):
        return None
    rest = uri[len("sqlite:///"):].split("?", 1)[0]
    if rest in ("", ":memory:"):
        return None
    return Path(rest).expanduser()


def local_dir(uri: str) -> Path | None:
    """The folder of a local file store URI (``file:///…`` or a plain path), else None."""
    if not uri.startswith("file:") and uri.startswith(("databricks", "sqlite:")):
        return None
    return local_path(uri)


def backend(uri: str) -> str | None:
    """The backend of a database server URI in :data:`BACKENDS` (``postgresql``, …), else None."""
    scheme = uri.split("://", 1)[0] if "://" in uri else ""
    name = scheme.split("+", 1)[0].lower()
    return name if name in BACKENDS else None


def target(url: str) -> Target:
    """Parse a database URL (SQLAlchemy's form).

    Raises:
        DbProblem: ``url``: it is not a database URL (or a bad port, an IPv6 bracket).
    """
    from sqlalchemy.engine import make_url
    from sqlalchemy.exc import ArgumentError

    try:
        parsed = make_url(url)
    except (ArgumentError, ValueError):  # ValueError: a bad port or IPv6 bracket
        raise DbProblem("url") from None
    name = parsed.get_backend_name()
    known = BACKENDS.get(name)
    port = parsed.port or (known.port if known else None)
    return Target(name, parsed.host or "localhost", None if name == "sqlite" else port,
                  parsed.database or "")


def connect_args(backend_name: str, timeout: float) -> dict[str, Any]:
    """The driver arguments that bound a connect by ``timeout`` seconds.

    SQLite gets its busy timeout; a driver that takes ``connect_timeout`` gets it rounded up
    (never shorter than asked); others none (the thread of :func:`open_bounded` bounds them).
    """
    if backend_name == "sqlite":
        return {"timeout": timeout}
    known = BACKENDS.get(backend_name)
    if known is not None and not known.connect_timeout:
        return {}
    return {"connect_timeout": max(1, math.ceil(timeout))}


def open_bounded(found: Target, timeout: float, open_: Callable[[dict[str, Any]], T],
                 name: str = "open-database") -> T:
    """Probe the server's port, then run ``open_(connect_args)`` within ``timeout`` seconds.

    Args:
        found: The parsed URL (:func:`target`).
        timeout: Seconds for the port probe and, again, for the connection.
        open_: Opens the database with the given driver arguments; returns what it opened.
        name: The bounding thread's name.

    Returns:
        What ``open_`` returns.

    Raises:
        DbProblem: ``unreachable``, ``silent``, ``driver`` or ``refused``.
    """
    if found.port is not None:
        reason = probe_tcp(found.host, int(found.port), timeout)
        if reason is not None:
            raise DbProblem("unreachable", found, reason)
    args = connect_args(found.backend, timeout)
    try:
        return within(timeout, lambda: open_(args), name)
    except TimeoutError:
        raise DbProblem("silent", found) from None
    except ImportError as exc:
        raise DbProblem("driver", found, exc) from None
    except Exception as exc:  # noqa: BLE001 - any driver failure is the user's setup
        raise DbProblem("refused", found, exc) from None
