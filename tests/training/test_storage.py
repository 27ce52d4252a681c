"""Optuna storages (training.storage) through the one database probe: real Optuna, real sockets."""

from __future__ import annotations

import socket
import time

import optuna
import pytest

from pulse_ml.errors import PulseError
from pulse_ml.training.storage import open_storage


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_sqlite_storage_opens_and_holds_a_study(tmp_path):
    url = f"sqlite:///{tmp_path / 'optuna.db'}"
    storage = open_storage(url, timeout=5)
    assert isinstance(storage, optuna.storages.RDBStorage)
    optuna.create_study(study_name="s", storage=storage)
    assert optuna.load_study(study_name="s", storage=url).study_name == "s"
    assert open_storage(None) is None


def test_bad_urls_and_missing_folders_are_one_line(tmp_path):
    with pytest.raises(PulseError, match=r"^tuning.storage=postgresql://u:\*\*\*@h:x/db: not a "
                       r"database URL \(e\.g\. sqlite:///mlruns/optuna\.db"):
        open_storage("postgresql://u:secret@h:x/db", timeout=1)
    missing = tmp_path / "no" / "such"
    with pytest.raises(PulseError, match=f"the folder {missing} does not exist"):
        open_storage(f"sqlite:///{missing / 'o.db'}", timeout=1)


def test_dead_server_fails_fast_with_the_default_port_probed():
    port = _closed_port()
    start = time.perf_counter()
    with pytest.raises(PulseError) as info:
        open_storage(f"postgresql://u:secret@127.0.0.1:{port}/optuna", timeout=2)
    assert str(info.value) == (
        f"tuning.storage=postgresql://u:***@127.0.0.1:{port}/optuna: the database server "
        f"127.0.0.1:{port} does not answer (Connection refused). Start it or fix the URL; "
        "PULSE_TRACKING_TIMEOUT sets how long to wait (now 2 s).")
    assert time.perf_counter() - start < 3


def test_silent_server_is_bounded_by_the_timeout():
    pytest.importorskip("psycopg2", reason="psycopg2-binary comes with .[dev]")
    with socket.socket() as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen(8)
        url = f"postgresql://u@127.0.0.1:{silent.getsockname()[1]}/optuna"
        start = time.perf_counter()
        with pytest.raises(PulseError, match=r"^tuning\.storage=postgresql://u@127\.0\.0\.1"):
            open_storage(url, timeout=1)
        assert time.perf_counter() - start < 4
