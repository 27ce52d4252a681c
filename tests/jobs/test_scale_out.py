"""Scale-out for real: Optuna on PostgreSQL, an MLflow tracking server, unreachable servers.

Uses the throw-away PostgreSQL and ``mlflow server`` of ``tests/jobs/conftest.py``.
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import subprocess
import sys
import textwrap
import time

import pandas as pd
import pytest

FAST = ["progress=false", "model=lightgbm"]


def free_port() -> int:
    with contextlib.closing(socket.socket()) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _env(home, tracking_uri: str) -> dict[str, str]:
    return {"PULSE_HOME": str(home), "MLFLOW_TRACKING_URI": tracking_uri,
            "MLFLOW_REGISTRY_URI": tracking_uri, "MLFLOW_DISABLE_TELEMETRY": "true"}


def _popen(args, env):
    return subprocess.Popen([sys.executable, "-m", "pulse_ml", *args], env={**os.environ, **env},
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def test_two_trainers_share_a_postgresql_study_then_n_trials_0_registers_best(
        small_demo, postgres, pulse_home, cli):
    import optuna

    storage = postgres.createdb("optuna_shared")
    db = f"sqlite:///{pulse_home / 'mlruns' / 'mlflow.db'}"  # migrated once: no start-up race
    env = _env(pulse_home, db)
    common = [f"data.path={small_demo}", *FAST, f"tuning.storage={storage}",
              "tuning.study_name=shared", "tuning.n_trials=3"]
    # two machines at once, each with its own sampler seed (docs/scale-out.md, section 1)
    procs = [_popen(["train", *common, f"tuning.sampler_seed={s}", "register=false"], env)
             for s in (0, 1000)]
    for proc in procs:
        out, err = proc.communicate(timeout=300)
        assert proc.returncode == 0, out + err
    study = optuna.load_study(study_name="shared", storage=storage)
    done = [t for t in study.trials if t.state == optuna.trial.TrialState.COMPLETE]
    assert len(done) == 6
    params = [tuple(sorted(t.params.items())) for t in done]
    assert len(set(params)) == 6, "the two trainers drew the same start-up trials"

    res = cli("train", *common[:-1], "tuning.n_trials=0", env=env)
    assert res.returncode == 0, res.stdout + res.stderr
    import mlflow

    client = mlflow.MlflowClient(db)
    mv = client.get_model_version_by_alias("pulse-satisfaction", "champion")
    run = client.get_run(mv.run_id)
    best = study.best_trial
    assert int(run.data.tags["best_trial"]) == best.number
    assert int(run.data.tags["n_trials"]) == 6
    assert float(run.data.params["best.num_leaves"]) == best.params["num_leaves"]
    assert run.data.params["n_trials_requested"] == "0"
    assert len(optuna.load_study(study_name="shared", storage=storage).trials) == 6


def test_train_infer_compare_and_load_through_an_mlflow_server(small_demo, mlflow_server,
                                                               tmp_path, cli):
    env = _env(tmp_path, mlflow_server.uri)
    res = cli("train", f"data.path={small_demo}", *FAST, "tuning.n_trials=2", env=env)
    assert res.returncode == 0, res.stdout + res.stderr
    assert not (tmp_path / "mlruns").exists() or not any((tmp_path / "mlruns").iterdir())
    res = cli("infer", f"data.path={small_demo}", "permutations=200", env=env)
    assert res.returncode == 0, res.stdout + res.stderr
    effects = json.loads((tmp_path / "results" / "infer" / "effects.json").read_text())
    assert effects["model_version"] == "1"
    res = cli("compare", env=env)
    assert res.returncode == 0, res.stdout + res.stderr
    assert "lightgbm" in res.stdout
    # artifacts went through the server to its --artifacts-destination
    assert any(p.name == "MLmodel" for p in mlflow_server.artifacts.rglob("MLmodel"))

    code = textwrap.dedent(f"""
        import json, mlflow, pandas as pd
        m = mlflow.pyfunc.load_model("models:/pulse-satisfaction@champion")
        pred = m.predict(pd.read_parquet({str(small_demo)!r}))
        print(json.dumps({{"n": len(pred), "uri": mlflow.get_tracking_uri(),
                           "oof": len(m.unwrap_python_model().ensemble.oof)}}))
    """)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=120, env={**os.environ, **env})
    assert out.returncode == 0, out.stderr
    got = json.loads(out.stdout.strip().splitlines()[-1])
    frame = pd.read_parquet(small_demo)
    assert got["uri"] == mlflow_server.uri and got["n"] == len(frame)
    assert got["oof"] == int(frame["rating"].notna().sum())


def test_unreachable_postgresql_storage_is_one_line_exit_2(small_demo, pulse_home, cli):
    url = f"postgresql+psycopg2://pulse@127.0.0.1:{free_port()}/optuna"
    start = time.monotonic()
    res = cli("train", f"data.path={small_demo}", *FAST, f"tuning.storage={url}",
                  "tuning.n_trials=1",
              env=_env(pulse_home, f"sqlite:///{pulse_home / 'mlruns' / 'mlflow.db'}"))
    assert time.monotonic() - start < 30
    assert res.returncode == 2, res.stdout + res.stderr
    assert "127.0.0.1" in res.stderr and "tuning.storage" in res.stderr
    assert "Traceback" not in res.stderr


def test_unreachable_mlflow_server_is_exit_2_within_30_s(small_demo, tmp_path, cli):
    uri = f"http://127.0.0.1:{free_port()}"
    start = time.monotonic()
    res = cli("train", f"data.path={small_demo}", *FAST, "tuning.n_trials=1",
                  env=_env(tmp_path, uri), timeout=120)
    assert time.monotonic() - start < 30, "retried for too long"
    assert res.returncode == 2, res.stdout + res.stderr
    assert uri in res.stderr
    assert "Traceback" not in res.stderr


@pytest.fixture(autouse=True)
def _no_inherited_tracking(monkeypatch):
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
