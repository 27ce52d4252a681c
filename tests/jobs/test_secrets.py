"""A password in a database URI (user-info or query string) is never printed nor logged."""

from __future__ import annotations

import contextlib
import socket

import pytest

SECRET = "hunter2secret"


def _closed_port() -> int:
    with contextlib.closing(socket.socket()) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.mark.parametrize("uri", [
    f"postgresql://u@127.0.0.1:{{port}}/mlflow?password={SECRET}",
    f"postgresql://u:{SECRET}@127.0.0.1:{{port}}/mlflow?sslpassword={SECRET}",
    f"http://127.0.0.1:{{port}}/?password={SECRET}",
    f"postgresql://u:{SECRET}@[::1/mlflow",
])
def test_tracking_uri_password_is_masked(cli, pulse_home, uri):
    res = cli("compare", env={"MLFLOW_TRACKING_URI": uri.format(port=_closed_port()),
                              "PULSE_TRACKING_TIMEOUT": "3"})
    assert res.returncode == 2, res.stderr
    assert SECRET not in res.stdout + res.stderr and "***" in res.stderr
    assert "Traceback" not in res.stderr and len(res.stderr.strip().splitlines()) == 1


def test_optuna_storage_password_is_masked(cli, pulse_home, small_demo):
    url = f"postgresql://u@127.0.0.1:{_closed_port()}/optuna?password={SECRET}"
    res = cli("train", f"data.path={small_demo}", "model=mean", "progress=false",
              f"tuning.storage='{url}'", env={"PULSE_TRACKING_TIMEOUT": "3"})
    assert res.returncode == 2, res.stderr
    assert SECRET not in res.stdout + res.stderr and "password=***" in res.stderr


def test_storage_password_is_not_in_mlflow_tags_or_params(cli, pulse_home, small_demo, tmp_path):
    import mlflow

    url = f"sqlite:///{tmp_path / 'optuna.db'}?password={SECRET}"
    res = cli("train", f"data.path={small_demo}", "model=mean", "progress=false",
              f"tuning.storage='{url}'")
    assert res.returncode == 0, res.stderr
    assert SECRET not in res.stdout + res.stderr
    client = mlflow.MlflowClient()
    runs = [r for e in client.search_experiments() for r in client.search_runs([e.experiment_id])]
    assert runs
    for run in runs:
        values = [*run.data.tags.values(), *run.data.params.values()]
        assert not [v for v in values if SECRET in v]
    assert any("password=***" in v for r in runs for v in r.data.tags.values())
