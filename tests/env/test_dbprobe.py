"""The one database probe (env.dbprobe): URIs, the backend table, bounded opens."""

from __future__ import annotations

import socket
import sqlite3
import time
from pathlib import Path

import pytest

from pulse_ml.env import dbprobe
from pulse_ml.errors import PulseError


def test_sqlite_file_of_uris():
    assert str(dbprobe.sqlite_file("sqlite:////abs/mlflow.db")) == "/abs/mlflow.db"
    assert str(dbprobe.sqlite_file("sqlite:///rel/m.db?timeout=5")) == "rel/m.db"
    assert dbprobe.sqlite_file("sqlite:///:memory:") is None
    assert dbprobe.sqlite_file("http://host:5000") is None


def test_local_dir_of_file_stores():
    assert dbprobe.local_dir("file:///tmp/my%20runs") == Path("/tmp/my runs")
    assert dbprobe.local_dir("./mlruns") == Path("mlruns")
    assert dbprobe.local_dir("~/runs") == Path("~/runs").expanduser()
    for other in ("databricks", "databricks-uc", "sqlite:///m.db", "http://h:5000",
                  "postgresql://u@h/db"):
        assert dbprobe.local_dir(other) is None, other


def test_seconds_from_env(monkeypatch):
    monkeypatch.delenv("PULSE_TRACKING_TIMEOUT", raising=False)
    assert dbprobe.timeout_s() == 10.0
    monkeypatch.setenv("PULSE_TRACKING_TIMEOUT", "2.5")
    assert dbprobe.timeout_s() == 2.5
    for bad in ("0", "-1", "inf", "soon"):
        monkeypatch.setenv("PULSE_TRACKING_TIMEOUT", bad)
        with pytest.raises(PulseError, match="not a number of seconds"):
            dbprobe.timeout_s()


def test_one_backend_table():
    """The tracking check's and the Optuna storage's tables, reconciled into one."""
    ports = {name: b.port for name, b in dbprobe.BACKENDS.items()}
    assert ports == {"postgresql": 5432, "mysql": 3306, "mariadb": 3306, "mssql": 1433,
                     "oracle": 1521}
    assert dbprobe.BACKENDS["mysql"].driver == "pymysql (mysql+pymysql://…)"
    assert dbprobe.BACKENDS["mssql"].driver == "pyodbc"
    tracking = {name for name, b in dbprobe.BACKENDS.items() if b.tracking}
    assert tracking == {"postgresql", "mysql", "mariadb", "mssql"}
    assert dbprobe.backend("postgresql+psycopg2://u@h/db") == "postgresql"
    assert dbprobe.backend("MySQL+pymysql://u@h/db") == "mysql"
    assert dbprobe.backend("sqlite:///m.db") is None
    assert dbprobe.backend("http://h:5000") is None
    assert dbprobe.connect_args("sqlite", 2.5) == {"timeout": 2.5}
    assert dbprobe.connect_args("postgresql", 2.5) == {"connect_timeout": 3}
    assert dbprobe.connect_args("postgresql", 0.2) == {"connect_timeout": 1}
    assert dbprobe.connect_args("cockroachdb", 4) == {"connect_timeout": 4}
    assert dbprobe.connect_args("mssql", 4) == {}


def test_target_fills_in_the_default_port():
    assert dbprobe.target("postgresql://u@db.example/x") == dbprobe.Target(
        "postgresql", "db.example", 5432, "x")
    assert dbprobe.target("mysql+pymysql://u@h:3307/x").port == 3307
    assert dbprobe.target("postgresql:///x").host == "localhost"
    assert dbprobe.target("sqlite:///a/b.db") == dbprobe.Target("sqlite", "localhost", None,
                                                                "a/b.db")
    assert dbprobe.target("firebird://u@h/x").port is None  # not in the table: no probe
    with pytest.raises(dbprobe.DbProblem) as info:
        dbprobe.target("postgresql://u@h:notaport/x")
    assert info.value.kind == "url"


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_open_bounded_sqlite_and_each_failure(tmp_path):
    db = tmp_path / "s.db"
    found = dbprobe.target(f"sqlite:///{db}")
    con = dbprobe.open_bounded(
        found, 2.0, lambda args: sqlite3.connect(db, check_same_thread=False, **args))
    con.close()
    assert db.is_file()

    dead = dbprobe.target(f"postgresql://u@127.0.0.1:{_closed_port()}/x")
    with pytest.raises(dbprobe.DbProblem) as info:
        dbprobe.open_bounded(dead, 1.0, lambda args: pytest.fail("opened"))
    assert info.value.kind == "unreachable" and "refused" in str(info.value.reason).lower()

    with socket.socket() as silent:  # accepts, never answers: the thread bound ends the wait
        silent.bind(("127.0.0.1", 0))
        silent.listen(8)
        mute = dbprobe.target(f"postgresql://u@127.0.0.1:{silent.getsockname()[1]}/x")

        def never(args):
            assert args == {"connect_timeout": 1}
            with socket.create_connection((mute.host, mute.port)) as conn:
                conn.recv(1)

        start = time.perf_counter()
        with pytest.raises(dbprobe.DbProblem) as info:
            dbprobe.open_bounded(mute, 0.5, never)
        assert info.value.kind == "silent" and time.perf_counter() - start < 3

        def no_driver(args):
            import pulse_ml_no_such_driver  # noqa: F401

        with pytest.raises(dbprobe.DbProblem) as info:
            dbprobe.open_bounded(mute, 1.0, no_driver)
        assert info.value.kind == "driver" and info.value.driver == "psycopg2-binary"

        def refused(args):
            raise RuntimeError('database "x" does not exist')

        with pytest.raises(dbprobe.DbProblem) as info:
            dbprobe.open_bounded(mute, 1.0, refused)
        assert info.value.kind == "refused" and "does not exist" in str(info.value.reason)
