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
import pandas as pd
import pytest

from pulse_ml.config import compose
from pulse_ml.jobs import train
from pulse_ml.registry import keys
from pulse_ml.training.paired import compare_oof

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
    assert version.tags[keys.PAIRED_EVALUATION] == "selection_free vs selection_free"
    assert float(version.tags["selection_free_cv_mse"]) == pytest.approx(
        run.data.metrics["selection_free_cv_mse"], abs=1e-6)

    new = _artifact(better.run_id, keys.SELECTION_FREE_OOF, tmp_path / "new")
    ref = _artifact(champ.run_id, keys.SELECTION_FREE_OOF, tmp_path / "ref")
    again = compare_oof(new, ref, settings=train.promotion_settings(
        compose("train", [])).paired)
    assert again.delta_mse == pytest.approx(better.paired.delta_mse, abs=1e-12)
    assert again.mse_ci_upper == pytest.approx(better.paired.mse_ci_upper, abs=1e-12)

    # each fold was predicted by the trial best on the other folds; folds of the best trial are
    # the ensemble's own predictions, the others were refit (one fit each)
    chosen = [int(t) for t in run.data.tags[keys.SELECTION_FREE_TRIALS].split(",")]
    best = int(run.data.metrics["best_trial"])
    assert len(chosen) == 5 and best in chosen
    assert run.data.metrics[keys.SELECTION_FREE_REFITS] == sum(t != best for t in chosen)
    oof = _artifact(better.run_id, "oof_predictions.csv", tmp_path / "oof").set_index(
        "session_id")
    for fold, trial in enumerate(chosen):
        rows = new[new["fold"] == fold]
        assert set(rows["trial"]) == {trial}
        if trial == best:
            assert np.allclose(rows["prediction"], oof.loc[rows["session_id"], "prediction"])


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
