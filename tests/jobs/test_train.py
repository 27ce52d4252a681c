"""Training against a real MLflow sqlite store and real Optuna studies."""

from __future__ import annotations

import json
import os
import textwrap

import mlflow
import pandas as pd
import pytest

from pulse_ml import keys
from pulse_ml.config import compose
from pulse_ml.errors import PulseError
from pulse_ml.jobs import train

FAST = ["tuning.n_trials=3", "progress=false"]


def _train(small_demo, *overrides):
    return train.run(compose("train", [f"data.path={small_demo}", *FAST, *overrides]))


def test_register_promote_and_load_in_fresh_process(small_demo, pulse_home):
    first = _train(small_demo, "model=lightgbm")
    assert first.version == "1" and first.promoted
    client = mlflow.MlflowClient()
    mv = client.get_model_version_by_alias(keys.REGISTERED_MODEL, keys.CHAMPION)
    assert str(mv.version) == "1"
    assert mv.tags["family"] == "lightgbm" and mv.tags["feature_set"] == "all"
    assert mv.tags["data_fingerprint"] == first.data_fingerprint
    assert float(mv.tags["cv_mse"]) == pytest.approx(first.metrics.mse, abs=1e-6)
    run = client.get_run(first.run_id)
    assert run.data.tags["kind"] == "family" and run.info.status == "FINISHED"
    assert {"cv_mse", "cv_mae", "cv_pearson", "cv_spearman", "cv_mse_std"} <= set(
        run.data.metrics)
    folds = [client.get_metric_history(first.run_id, f"fold_mse_{k}") for k in range(5)]
    assert [len(h) for h in folds] == [1] * 5 and "fold_mse" not in run.data.metrics
    children = mlflow.search_runs([run.info.experiment_id],
                                  filter_string=f"tags.mlflow.parentRunId = '{first.run_id}'")
    assert len(children) == 3
    arts = {a.path for a in client.list_artifacts(first.run_id)}
    assert {"config.yaml", "oof_predictions.csv"} <= arts

    code = textwrap.dedent(f"""
        import json, mlflow, pandas as pd
        m = mlflow.pyfunc.load_model("models:/pulse-satisfaction@champion")
        frame = pd.read_parquet({str(small_demo)!r})
        pred = m.predict(frame)
        ensemble = m.unwrap_python_model().ensemble
        oof = ensemble.oof
        slow = ensemble.predict(frame)  # the plain fold-model mean the fast path must equal
        print(json.dumps({{"n": len(pred), "min": float(min(pred)), "max": float(max(pred)),
                           "oof": len(oof), "gap": float(abs(pred - slow).max()),
                           "threads": m.unwrap_python_model().predictor.threads}}))
    """)
    import subprocess
    import sys

    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=120, env={**os.environ, "PULSE_PREDICT_THREADS": "1"})
    assert out.returncode == 0, out.stderr
    got = json.loads(out.stdout.strip().splitlines()[-1])
    assert got["gap"] < 1e-9 and got["threads"] == 1
    frame_len = len(pd.read_parquet(small_demo))
    assert got["n"] == frame_len and 1.0 <= got["min"] <= got["max"] <= 5.0
    n_labeled = int(pd.read_parquet(small_demo)["rating"].notna().sum())
    assert got["oof"] == n_labeled


def test_worse_model_keeps_champion_and_promote_moves_it(small_demo, pulse_home, cli):
    good = _train(small_demo, "model=hist_gb")
    # the strict-improvement rule, and a version for every model (the defaults are
    # promotion.rule=significant and register=candidates: see test_promotion_rules.py)
    worse = _train(small_demo, "model=mean", "promotion.rule=better", "register=always")
    assert good.promoted and not worse.promoted
    assert "does not beat" in worse.promotion_reason
    client = mlflow.MlflowClient()
    assert str(client.get_model_version_by_alias("pulse-satisfaction", "champion").version) == "1"
    assert client.get_model_version("pulse-satisfaction", "2").tags["promotion"] == "kept"
    res = cli("promote", "version=2")
    assert res.returncode == 0, res.stderr
    assert str(client.get_model_version_by_alias("pulse-satisfaction", "champion").version) == "2"
    bad = cli("promote", "version=9")
    assert bad.returncode == 2 and "no version 9" in bad.stderr
    assert "Traceback" not in bad.stderr
    assert str(client.get_model_version_by_alias("pulse-satisfaction", "champion").version) == "2"


def test_same_seed_same_metrics_and_params(small_demo, pulse_home):
    a = _train(small_demo, "model=lightgbm", "tuning.n_trials=4")
    b = _train(small_demo, "model=lightgbm", "tuning.n_trials=4")
    assert a.best_params == b.best_params
    assert a.metrics == b.metrics
    c = _train(small_demo, "model=lightgbm", "tuning.n_trials=4", "seed=3")
    assert c.best_params != a.best_params


def test_two_workers_share_a_journal_study_and_resume(small_demo, pulse_home, tmp_path):
    journal = tmp_path / "study.journal"
    first = _train(small_demo, "model=ordinal_logit", "tuning.n_trials=6", "tuning.workers=2",
                   f"tuning.storage={journal}", "register=false")
    assert first.n_trials == 6
    second = _train(small_demo, "model=ordinal_logit", "tuning.n_trials=2",
                    f"tuning.storage={journal}", "register=false")
    assert second.n_trials == 8  # resumed: the study now holds both invocations' trials
    import optuna

    from pulse_ml.training.tuning import _storage

    names = optuna.get_all_study_names(_storage(str(journal)))
    assert len(names) == 1


def test_default_storage_leaves_nothing_in_the_working_folder(small_demo, pulse_home, tmp_path,
                                                              monkeypatch):
    """``tuning.storage=auto`` is a journal under the store, never a file ./auto."""
    cwd = tmp_path / "cwd"
    cwd.mkdir()
    monkeypatch.chdir(cwd)
    _train(small_demo, "model=mean", "register=never")
    assert sorted(p.name for p in cwd.iterdir()) == []


def test_workers_without_storage_is_a_clear_error(small_demo, pulse_home):
    with pytest.raises(PulseError, match="tuning.storage"):
        _train(small_demo, "model=mean", "tuning.workers=2", "tuning.storage=memory")


def test_failing_family_marks_run_failed_and_keeps_champion(small_demo, pulse_home, tmp_path,
                                                          cli):
    ok = _train(small_demo, "model=mean")
    broken = tmp_path / "broken.yaml"
    broken.write_text(textwrap.dedent("""
        name: broken
        estimator:
          _target_: sklearn.ensemble.RandomForestRegressor
          max_features: not-a-valid-value
        search_space: {}
    """))
    res = cli("train", f"data.path={small_demo}", f"model={broken}", *FAST)
    assert res.returncode == 2, res.stderr
    assert "training model 'broken' failed" in res.stderr and "Traceback" not in res.stderr
    client = mlflow.MlflowClient()
    exp = client.get_experiment_by_name("pulse-train")
    runs = mlflow.search_runs([exp.experiment_id], filter_string="tags.family = 'broken' and "
                              "tags.kind = 'family'")
    assert list(runs["status"]) == ["FAILED"]
    trial = mlflow.search_runs([exp.experiment_id], filter_string="tags.family = 'broken' and "
                               "tags.kind = 'trial'")
    assert list(trial["status"]) == ["FAILED"] and list(trial["tags.trial_state"]) == ["FAIL"]
    assert "max_features" in trial["tags.mlflow.note.content"][0]  # the error, in its description
    mv = client.get_model_version_by_alias("pulse-satisfaction", "champion")
    assert str(mv.version) == ok.version
    assert len(client.search_model_versions("name='pulse-satisfaction'")) == 1
    assert client.get_run(ok.run_id).info.status == "FINISHED"


def test_compare_lists_families(small_demo, pulse_home, cli):
    _train(small_demo, "model=mean")
    _train(small_demo, "model=lightgbm")
    res = cli("compare")
    assert res.returncode == 0, res.stderr
    assert "lightgbm" in res.stdout and "mean" in res.stdout
    assert (pulse_home / "results" / "compare" / "comparison.md").is_file()
    assert (pulse_home / "results" / "compare" / "comparison.png").stat().st_size > 1000


def test_pearson_objective_maximizes(small_demo, pulse_home):
    res = _train(small_demo, "model=lightgbm", "objective=cv_pearson", "tuning.n_trials=4",
                 "register=false")
    run = mlflow.get_run(res.run_id)
    assert run.data.tags["objective"] == "cv_pearson"
    trials = mlflow.search_runs([run.info.experiment_id],
                                filter_string=f"tags.mlflow.parentRunId = '{res.run_id}'")
    best = trials["metrics.objective"].max()
    assert res.metrics.pearson == pytest.approx(best, abs=1e-9)
    assert res.version is None and "not registered" in res.promotion_reason


def test_session_split_folds_are_not_paired_with_a_user_grouped_champion(small_demo, pulse_home):
    """cv.group_by=none gives leaky out-of-fold predictions: never promoted over v1."""
    champ = _train(small_demo, "model=ordinal_logit")
    leaky = _train(small_demo, "model=ordinal_logit", "cv.group_by=none",
                   "promotion.rule=better", "register=always")
    assert champ.promoted and not leaky.promoted and leaky.paired is None
    assert "grouped differently" in leaky.promotion_reason
    client = mlflow.MlflowClient()
    assert client.get_model_version("pulse-satisfaction", "1").tags["cv_group_by"] == "user_id"
    assert client.get_model_version("pulse-satisfaction", "2").tags["cv_group_by"] == "none"
    run = client.get_run(leaky.run_id)
    assert run.data.tags["cv_group_by"] == "none" and run.data.tags["promotion"] == "kept"
    assert not any(k.startswith("vs_champion_delta") for k in run.data.metrics)
