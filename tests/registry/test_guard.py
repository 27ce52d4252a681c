"""Store checks before any MLflow call (registry.guard) and the fault helpers (faults)."""

from __future__ import annotations

import errno
import hashlib
import socket
import sqlite3
import time

import pytest

from pulse_ml.env import faults
from pulse_ml.errors import PulseError
from pulse_ml.registry import guard


def _sha(path):
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_redact_uri():
    assert guard.redact("http://u:pw@host:5000/x") == "http://u:***@host:5000/x"


def test_only_mlflow_database_backends_are_probed_as_tracking_stores():
    """oracle:// is in the probe's table (Optuna storages) but no MLflow tracking store."""
    assert guard.check_store("oracle://u@127.0.0.1:1/x", explicit=True, write=True).kind \
        == "other"


def test_inspect_sqlite_tells_fresh_mlflow_foreign_and_damaged(tmp_path, mlflow_template):
    uri = "sqlite:///x"
    assert guard.inspect_sqlite(uri, tmp_path / "absent.db") is True
    (tmp_path / "empty.db").write_bytes(b"")
    assert guard.inspect_sqlite(uri, tmp_path / "empty.db") is True
    assert guard.inspect_sqlite(uri, mlflow_template) is False
    foreign = tmp_path / "foreign.db"
    con = sqlite3.connect(foreign)
    con.execute("CREATE TABLE experiments (x)")  # one MLflow-like name is not enough
    con.commit()
    con.close()
    before = _sha(foreign)
    with pytest.raises(PulseError, match=r"another application's .*tables: experiments"):
        guard.inspect_sqlite(uri, foreign)
    assert _sha(foreign) == before
    truncated = tmp_path / "cut.db"
    data = mlflow_template.read_bytes()
    truncated.write_bytes(data[: len(data) // 2])
    with pytest.raises(PulseError, match="truncated"):
        guard.inspect_sqlite(uri, truncated)
    junk = tmp_path / "junk.db"
    junk.write_text("hello, not a database" * 20)
    with pytest.raises(PulseError, match="no SQLite header"):
        guard.inspect_sqlite(uri, junk)


def test_damaged_page_behind_a_valid_header_is_found(tmp_path, mlflow_template):
    """Same size, valid header, a zeroed page in the middle: PRAGMA quick_check sees it."""
    db = tmp_path / "bad.db"
    data = bytearray(mlflow_template.read_bytes())
    page = int.from_bytes(data[16:18], "big")
    start = page * 3  # the fourth page: a table or index b-tree page of the schema
    data[start:start + page] = b"\xff" * page
    db.write_bytes(bytes(data))
    with pytest.raises(PulseError, match="not a usable SQLite database"):
        guard.inspect_sqlite("sqlite:///bad", db)


def test_explicit_missing_folder_is_refused_default_is_created(tmp_path):
    uri = f"sqlite:///{tmp_path / 'typo' / 'mlflow.db'}"
    with pytest.raises(PulseError, match="does not exist"):
        guard.check_store(uri, explicit=True, write=True)
    assert not (tmp_path / "typo").exists()
    check = guard.check_store(uri, explicit=False, write=True)
    assert check.fresh and (tmp_path / "typo").is_dir()


def test_probe_http_is_bounded_by_its_timeout():
    with socket.socket() as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen(8)
        uri = f"http://127.0.0.1:{silent.getsockname()[1]}"
        start = time.perf_counter()
        with pytest.raises(PulseError, match=r"does not answer \(no answer within 0.5 s\)"):
            guard.probe_http(uri, 0.5)
        assert time.perf_counter() - start < 3


def test_retry_locked_retries_only_locks():
    calls = []

    def flaky():
        calls.append(1)
        if len(calls) < 3:
            raise sqlite3.OperationalError("database is locked")
        return "ok"

    assert faults.retry_locked(flaky, base_s=0.001, seed=0) == "ok" and len(calls) == 3
    calls.clear()

    def broken():
        calls.append(1)
        raise ValueError("not a lock")

    with pytest.raises(ValueError):
        faults.retry_locked(broken, base_s=0.001, seed=0)
    assert len(calls) == 1

    def always_locked():
        raise sqlite3.OperationalError("database is locked")

    with pytest.raises(sqlite3.OperationalError):
        faults.retry_locked(always_locked, attempts=3, base_s=0.001, seed=0)


def test_file_lock_excludes_a_second_holder(tmp_path):
    lock = tmp_path / "store.lock"
    with faults.file_lock(lock):
        with pytest.raises(PulseError, match="held the lock"):
            with faults.file_lock(lock, timeout_s=0.2):
                pass
    with faults.file_lock(lock, timeout_s=0.2):  # released: free again
        pass


def test_explain_environment_faults_only():
    full = OSError(errno.ENOSPC, "No space left on device", "/x/out.parquet")
    assert faults.explain(full).startswith("cannot write /x/out.parquet: no space left")
    wrapped = RuntimeError("write failed")
    wrapped.__cause__ = OSError(errno.EFBIG, "File too large")
    assert "file too large" in faults.explain(wrapped)
    assert "read-only" in faults.explain(
        RuntimeError("(sqlite3.OperationalError) attempt to write a readonly database"))
    assert faults.explain(ValueError("a real bug")) is None
    assert faults.explain(KeyError("x")) is None


def _hold_write_lock(db, seconds: float):
    """Another process's write transaction on ``db`` for ``seconds`` (a started Timer)."""
    import threading

    holder = sqlite3.connect(db, isolation_level=None, check_same_thread=False)
    holder.execute("BEGIN EXCLUSIVE")

    def release() -> None:
        holder.execute("COMMIT")
        holder.close()

    timer = threading.Timer(seconds, release)
    timer.start()
    return timer


def test_mlflow_sessions_wait_as_long_as_pulse_says(pulse_home, monkeypatch):
    """MLflow fixes ``PRAGMA busy_timeout = 20000`` per session; guard.wait_for_locks sets ours.

    With PULSE_SQLITE_BUSY_TIMEOUT=1 a write behind a 3 s lock fails after ~1 s (MLflow's own
    20 s would have waited and succeeded): the value reaches MLflow's sessions. The default
    (60 s) is then read back from a real MLflow session.
    """
    import mlflow
    from mlflow.exceptions import MlflowException
    from sqlalchemy import text

    from pulse_ml.registry import store

    db = pulse_home / "mlruns" / "mlflow.db"
    monkeypatch.setenv("PULSE_SQLITE_BUSY_TIMEOUT", "1")
    exp_id = store.setup("pulse-lock-test")
    client = mlflow.MlflowClient()
    run_id = client.create_run(exp_id).info.run_id
    timer = _hold_write_lock(db, 3.0)
    start = time.perf_counter()
    try:
        with pytest.raises(MlflowException, match="database is locked") as info:
            client.log_metric(run_id, "m", 1.5)
        failed_after = time.perf_counter() - start
        assert "longer than PULSE_SQLITE_BUSY_TIMEOUT allows (now 1 s)" in faults.explain(
            info.value)
    finally:
        timer.join()
    assert 0.8 < failed_after < 2.9, failed_after
    monkeypatch.delenv("PULSE_SQLITE_BUSY_TIMEOUT")
    store.connect()  # re-reads the setting
    timer = _hold_write_lock(db, 2.0)
    try:
        client.log_metric(run_id, "m", 2.5)  # waits for the lock, then succeeds
    finally:
        timer.join()
    assert client.get_run(run_id).data.metrics == {"m": 2.5}
    from mlflow.tracking._tracking_service.utils import _get_store

    with _get_store().ManagedSessionMaker() as session:
        assert session.execute(text("PRAGMA busy_timeout")).scalar() == 60_000


def test_file_store_typo_is_refused_unless_it_is_the_default(tmp_path, monkeypatch):
    """``MLFLOW_TRACKING_URI=./mlrnus`` (or file:…) whose parent exists used to become a store."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("PULSE_HOME", str(tmp_path))
    for uri in ("./mlrnus", str(tmp_path / "mlrnus"), (tmp_path / "mlrnus").as_uri()):
        with pytest.raises(PulseError, match=r"mlrnus does not exist.*mkdir -p .*mlrnus"):
            guard.check_store(uri, explicit=True, write=True)
        assert not (tmp_path / "mlrnus").exists()
    assert guard.check_store("./mlruns", explicit=True, write=True).kind == "file"  # MLflow's
    (tmp_path / "made").mkdir()  # created on purpose first: accepted
    assert guard.check_store((tmp_path / "made").as_uri(), explicit=True, write=True).kind \
        == "file"
    assert guard.check_store("./elsewhere", explicit=False, write=True).kind == "file"


@pytest.mark.parametrize("scheme", ["postgresql", "postgresql+psycopg2"])
def test_database_tracking_store_that_never_answers_fails_in_time(scheme, monkeypatch):
    """A database URI was kind "other": neither probed nor bounded (MLflow waited forever)."""
    pytest.importorskip("psycopg2", reason="psycopg2-binary comes with .[dev] (the scale extra)")
    monkeypatch.setenv("PULSE_TRACKING_TIMEOUT", "1")
    with socket.socket() as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen(8)
        uri = f"{scheme}://u:secret@127.0.0.1:{silent.getsockname()[1]}/mlflow"
        start = time.perf_counter()
        with pytest.raises(PulseError, match=r"accepts connections but sent no answer within "
                           r"1 s") as info:
            guard.check_store(uri, explicit=True, write=True)
        assert time.perf_counter() - start < 4
    assert "secret" not in str(info.value) and "u:***@127.0.0.1" in str(info.value)
    with socket.socket() as s:  # nothing listens there any more
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with pytest.raises(PulseError, match=r"does not answer \(Connection refused\)"):
        guard.check_store(f"{scheme}://u@127.0.0.1:{port}/mlflow", explicit=True, write=True)

