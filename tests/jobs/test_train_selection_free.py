"""``train`` compares a candidate with the champion on selection-free out-of-fold predictions.

Real sqlite MLflow store, real Optuna: the paired comparison uses each run's
``selection_free_oof.csv`` (each fold predicted by the trial best on the other folds), never the
best trial's own out-of-fold table, and a genuinely better model is still promoted.
"""

from __future__ import annotations

from pathlib import Path
from urllib.parse import unquote, urlparse

import mlflow
import numpy as np
import optuna
import pandas as pd
import pytest

from pulse_ml import keys
from pulse_ml.config import compose
from pulse_ml.jobs import train
from pulse_ml.training.nested import PREDICTIONS_ATTR, unpack_predictions
from pulse_ml.training.storage import open_storage

FAST = ["progress=false"]


def _train(small_demo, *overrides):
    return train.run(compose("train", [f"data.path={small_demo}", *FAST, *overrides]))


def _artifact(run_id: str, name: str, tmp_path: Path) -> pd.DataFrame:
    path = mlflow.MlflowClient().download_artifacts(run_id, name, str(tmp_path))
    return pd.read_csv(path, dtype={"session_id": str, "user_id": str})


def test_the_paired_comparison_uses_selection_free_tables_and_promotes_a_better_model(
        small_demo, pulse_home, tmp_path):
    champ = _train(small_demo, "model=mean")
    better = _train(small_demo, "model=lightgbm", "tuning.n_trials=6")
    assert champ.promoted and better.promoted and better.paired is not None
    assert better.paired.mse_ci_upper < 0 and "significantly better" in better.promotion_reason
    client = mlflow.MlflowClient()
    run = client.get_run(better.run_id)
    assert run.data.tags[keys.PAIRED_EVALUATION] == "selection_free vs selection_free"
    version = client.get_model_version(keys.REGISTERED_MODEL, better.version)
    # a version keeps 12 tags at most: the rest is in its description
    assert f"- {keys.PAIRED_EVALUATION}: selection_free vs selection_free" in version.description
    sf_mse = run.data.metrics["selection_free_cv_mse"]
    assert f"- selection_free_cv_mse: {sf_mse:.6f}" in version.description

    new = _artifact(better.run_id, keys.SELECTION_FREE_OOF, tmp_path / "new")
    ref = _artifact(champ.run_id, keys.SELECTION_FREE_OOF, tmp_path / "ref").set_index(
        "session_id").loc[new["session_id"]]
    mse = float(np.mean((new["prediction"] - new["rating"]) ** 2))
    assert mse == pytest.approx(run.data.metrics["selection_free_cv_mse"], abs=1e-9)
    assert better.paired.delta_mse == pytest.approx(
        mse - float(np.mean((ref["prediction"].to_numpy() - new["rating"].to_numpy()) ** 2)),
        abs=1e-9)

    # each fold is predicted by the trial best on the other folds, from that trial's stored
    # out-of-fold predictions (the study's journal): no refit
    chosen = [int(t) for t in run.data.tags[keys.SELECTION_FREE_TRIALS].split(",")]
    best = int(run.data.tags[keys.BEST_TRIAL])
    study = optuna.load_study(study_name=run.data.tags[keys.STUDY_NAME],
                              storage=open_storage(run.data.tags[keys.STUDY_STORAGE]))
    complete = {t.number: t for t in study.trials if t.state.name == "COMPLETE"}
    assert run.data.metrics[keys.SELECTION_FREE_CANDIDATES] == len(complete) >= 2
    oof = _artifact(better.run_id, "oof_predictions.csv", tmp_path / "oof")
    assert len(chosen) == 5 and best in complete
    for fold, trial in enumerate(chosen):
        rows = new["fold"].to_numpy() == fold
        assert set(new.loc[rows, "trial"]) == {trial}
        stored = unpack_predictions(complete[trial].user_attrs[PREDICTIONS_ATTR], len(new))
        assert np.allclose(new.loc[rows, "prediction"], stored[rows], atol=1e-5)
        if trial == best:
            assert np.allclose(new.loc[rows, "prediction"], oof.loc[rows, "prediction"])


def test_a_champion_without_a_selection_free_table_is_compared_on_its_own_with_a_note(
        small_demo, pulse_home):
    """A champion trained before selection-free tables: its best trial's OOF (favours it)."""
    champ = _train(small_demo, "model=mean")
    root = urlparse(mlflow.MlflowClient().get_run(champ.run_id).info.artifact_uri)
    (Path(unquote(root.path)) / keys.SELECTION_FREE_OOF).unlink()
    better = _train(small_demo, "model=lightgbm", "tuning.n_trials=3")
    assert better.paired is not None and better.promoted
    run = mlflow.MlflowClient().get_run(better.run_id)
    assert run.data.tags[keys.PAIRED_EVALUATION] == "selection_free vs best_trial"
    assert "favours the champion" in better.promotion_reason
