"""`pulse-ml score` end to end on a real MLflow store, and Optuna workers on an RDB storage."""

from __future__ import annotations

import numpy as np
import optuna
import pandas as pd

from pulse_ml import keys
from pulse_ml.config import compose
from pulse_ml.jobs import train
from pulse_ml.models.factory import suggest
from pulse_ml.registry import models as mlflow_io
from pulse_ml.registry import store as tracking

FAST = ["tuning.n_trials=1", "progress=false"]


def test_score_cli_writes_honest_predictions_and_rejects_missing_columns(small_demo,
                                                                         pulse_home, cli,
                                                                         trained_home):
    trained = trained_home("model=lightgbm", *FAST)
    assert trained.promoted
    out = pulse_home / "scores" / "pred.parquet"
    res = cli("score", f"data.path={small_demo}", f"out={out}", "chunk_size=1000",
              "progress=false")
    assert res.returncode == 0, res.stderr
    assert "scored 3000 sessions in 3 chunk(s)" in res.stdout
    tracking.setup(keys.INFER_EXPERIMENT)
    ensemble, version = mlflow_io.load_registered("models:/pulse-satisfaction@champion")
    assert str(version.version) == trained.version
    frame = pd.read_parquet(small_demo)
    expected, used = ensemble.honest_predict(frame)
    got = pd.read_parquet(out)
    assert got["session_id"].tolist() == frame["session_id"].tolist()
    np.testing.assert_allclose(got["prediction"].to_numpy(), expected, rtol=1e-12)
    assert got["honest"].tolist() == used.astype(int).tolist()
    assert f"{int(used.sum())} got their out-of-fold prediction" in res.stdout

    broken = pulse_home / "broken.csv"
    frame.drop(columns=["task_category"]).to_csv(broken, index=False)
    bad = cli("score", f"data.path={broken}", f"out={pulse_home / 'x.parquet'}",
              "progress=false")
    assert bad.returncode == 2, bad.stderr
    assert "Traceback" not in bad.stderr
    assert str(broken) in bad.stderr and "missing column(s) 'task_category'" in bad.stderr
    assert "Add them to the table" in bad.stderr
    assert not (pulse_home / "x.parquet").exists()


def test_two_workers_share_an_rdb_sqlite_study(small_demo, pulse_home, tmp_path):
    url = f"sqlite:///{tmp_path / 'optuna.db'}"
    first = train.run(compose("train", [
        f"data.path={small_demo}", "model=ordinal_logit", "tuning.n_trials=4",
        "tuning.workers=2", f"tuning.storage={url}", "tuning.study_name=rdb-study",
        "register=false", "progress=false"]))
    assert first.n_trials == 4
    storage = optuna.storages.RDBStorage(url)
    assert optuna.get_all_study_names(storage) == ["rdb-study"]
    study = optuna.load_study(study_name="rdb-study", storage=storage)
    assert len(study.trials) == 4
    assert {t.state.name for t in study.trials} <= {"COMPLETE", "PRUNED"}
    # both processes wrote 2 trials each: worker i samples with TPESampler(seed=42 + i), whose
    # first (random start-up) samples are known from an in-memory study with the same seed
    spec = train.model_spec(compose("train", ["model=ordinal_logit"]))
    expected = set()
    for seed in (42, 43):
        mem = optuna.create_study(sampler=optuna.samplers.TPESampler(seed=seed))
        mem.optimize(lambda t: (suggest(t, spec.search_space), 0.0)[1], n_trials=2)
        expected |= {_key(t.params) for t in mem.trials}
    assert {_key(t.params) for t in study.trials} == expected
    # the pattern of docs/scale-out.md: helpers tune with register=false, then one machine
    # registers the study's best trial without running new trials (tuning.n_trials=0)
    final = train.run(compose("train", [
        f"data.path={small_demo}", "model=ordinal_logit", "tuning.n_trials=0",
        f"tuning.storage={url}", "tuning.study_name=rdb-study", "progress=false"]))
    assert final.n_trials == 4 and final.version == "1" and final.promoted
    assert final.best_params == study.best_params


def _key(params: dict) -> tuple:
    return tuple(sorted((k, round(v, 12) if isinstance(v, float) else v)
                        for k, v in params.items()))
