"""A model is logged to MLflow only when it is registered (issue 25: fixed cost of ``train``).

Real MLflow sqlite store, real Optuna study (``model=mean``: one trial, cheap).
"""

from __future__ import annotations

import mlflow

from pulse_ml import keys
from pulse_ml.config import compose
from pulse_ml.jobs import train

FAST = ["tuning.n_trials=1", "progress=false", "model=mean"]


def _train(small_demo, *overrides):
    return train.run(compose("train", [f"data.path={small_demo}", *FAST, *overrides]))


def _logged_models(run_id: str) -> list:
    client = mlflow.MlflowClient()
    run = client.get_run(run_id)
    return [m for m in client.search_logged_models([run.info.experiment_id])
            if m.source_run_id == run_id]


def test_unregistered_run_logs_no_model_but_keeps_its_predictions(small_demo, pulse_home):
    res = _train(small_demo, "register=never")
    assert res.version is None
    run = mlflow.MlflowClient().get_run(res.run_id)
    assert keys.MODEL_ID not in run.data.tags
    assert _logged_models(res.run_id) == []
    assert "no model logged" in run.data.tags[keys.NOTE]
    assert "cv_mse" in run.data.metrics  # the run itself is complete
    arts = {a.path for a in mlflow.MlflowClient().list_artifacts(res.run_id)}
    assert any("oof" in a for a in arts), arts  # out-of-fold predictions stay in the run
    study = {a.path for a in mlflow.MlflowClient().list_artifacts(res.run_id, "study")}
    assert study == {"study/optimization_history.csv"}  # tuning.plots=false: no PNG drawn
    series = mlflow.MlflowClient().get_metric_history(res.run_id, "best_so_far_cv_mse")
    assert [(m.step, m.value) for m in series] == [(0, run.data.metrics["cv_mse"])]


def test_registered_run_logs_its_model(small_demo, pulse_home):
    res = _train(small_demo, "register=always")
    assert res.version == "1"
    run = mlflow.MlflowClient().get_run(res.run_id)
    (logged,) = _logged_models(res.run_id)
    assert run.data.tags[keys.MODEL_ID] == logged.model_id and logged.name == "mean"
    mv = mlflow.MlflowClient().get_model_version(keys.REGISTERED_MODEL, res.version)
    assert mv.source.endswith(logged.model_id) or logged.model_id in (mv.model_id or "")
