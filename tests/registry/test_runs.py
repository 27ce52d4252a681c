"""Registry runs against a real sqlite store: trial runs, dataset inputs, experiment tags."""

from __future__ import annotations

import time

import mlflow
import optuna
import pandas as pd
import pytest

from pulse_ml import keys
from pulse_ml.registry import links, runs, trials


def _study():
    """Three real trials: one complete, one pruned after 2 folds, one failed."""
    optuna.logging.set_verbosity(optuna.logging.ERROR)
    study = optuna.create_study(pruner=optuna.pruners.ThresholdPruner(upper=1.0))
    for x in (0.5, 0.9, 0.2):
        study.enqueue_trial({"x": x})

    def objective(trial):
        x = trial.suggest_float("x", 0, 1)
        time.sleep(0.06)
        for fold in range(3):
            trial.report(x + 0.1 * fold * (x > 0.8) * 5, fold)  # 0.9 -> 1.4 at fold 1: pruned
            if trial.should_prune():
                raise optuna.TrialPruned()
        if x < 0.3:
            trial.set_user_attr("error", "ValueError: boom")
            raise ValueError("boom")
        trial.set_user_attr("fold_mse", [x, x + 0.1, x + 0.2])
        trial.set_user_attr("metrics", {"cv_mse": x + 0.1})
        return x + 0.1

    study.optimize(objective, n_trials=3, catch=(ValueError,))
    return study


def test_trials_are_runs_with_real_times_states_and_fold_steps(pulse_home):
    exp = runs.open_experiment(keys.TRAIN_EXPERIMENT)
    client = mlflow.MlflowClient()
    parent = client.create_run(exp, run_name="parent").info.run_id
    logger = trials.TrialLogger(parent, exp, "toy", "cv_mse")
    study = _study()
    for trial in study.trials:
        logger(trial)
    logger.mark_best(study.best_trial.number)
    got = {}
    for trial in study.trials:
        run = client.get_run(logger.runs[trial.number])
        got[trial.state.name] = run
        assert run.data.tags[keys.PARENT_RUN] == parent
        assert run.info.start_time == int(trial.datetime_start.timestamp() * 1000)
        assert run.info.end_time == int(trial.datetime_complete.timestamp() * 1000)
        assert run.info.end_time - run.info.start_time >= 50  # the trial's real duration
    assert {s: r.info.status for s, r in got.items()} == {
        "COMPLETE": "FINISHED", "PRUNED": "KILLED", "FAIL": "FAILED"}
    assert {r.data.tags[keys.TRIAL_STATE] for r in got.values()} == {"COMPLETE", "PRUNED", "FAIL"}
    done = got["COMPLETE"].info.run_id
    metrics = got["COMPLETE"].data.metrics  # one metric per fold, not a step series
    assert [metrics[f"fold_mse_{k}"] for k in range(3)] == pytest.approx([0.5, 0.6, 0.7])
    assert "fold_mse" not in metrics and metrics["objective"] == pytest.approx(0.6)
    assert "objective" not in got["PRUNED"].data.metrics  # Optuna's partial value: left out
    pruned = client.get_metric_history(got["PRUNED"].info.run_id, "running_cv_mse")
    assert [m.step for m in pruned] == [0, 1]
    assert "pruned after 2 fold(s)" in got["PRUNED"].data.tags[keys.NOTE]
    assert "failed: ValueError: boom" in got["FAIL"].data.tags[keys.NOTE]
    assert got["COMPLETE"].data.tags[keys.BEST_TRIAL] == "true"
    assert client.get_run(parent).data.tags["best_trial_run_id"] == done


def test_experiment_description_layout_and_dataset_input(pulse_home):
    exp = runs.open_experiment(keys.INFER_EXPERIMENT)
    tags = mlflow.MlflowClient().get_experiment(exp).tags
    assert tags[keys.EXPERIMENT_KIND] == "custom_model_development"
    assert "PPI++" in tags[keys.NOTE]
    frame = pd.DataFrame({"session_id": ["a", "b"], "rating": [4.0, None], "git_push": [0, 1]})
    fp = "0123456789abcdef" * 4
    with mlflow.start_run(experiment_id=exp) as run:
        runs.log_dataset(frame, "/data/sessions.parquet", "sessions", fp, "inference")
    got = mlflow.MlflowClient().get_run(run.info.run_id).inputs.dataset_inputs[0]
    assert (got.dataset.name, got.dataset.digest) == ("sessions", fp[:32])
    assert "/data/sessions.parquet" in got.dataset.source
    assert {t.key: t.value for t in got.tags} == {"mlflow.data.context": "inference",
                                                 keys.DATA_FINGERPRINT: fp}
    url = links.run_url(exp, run.info.run_id)
    assert url == (f"http://127.0.0.1:5000/#/experiments/{exp}/runs/{run.info.run_id}"
                   "?workflowType=machine_learning")


def test_study_journal_lives_beside_the_store(pulse_home):
    path = trials.study_storage("lightgbm-all-abc/def")
    assert path == str(pulse_home / "mlruns" / "optuna" / "lightgbm-all-abc_def.journal")


def _one_trial():
    optuna.logging.set_verbosity(optuna.logging.ERROR)
    study = optuna.create_study()
    study.optimize(lambda t: t.suggest_float("x", 0, 1), n_trials=1)
    return study.trials[0]


class _SigtermOnRead(float):
    """A metric value that sends this process a real SIGTERM when the logger reads it."""

    def __float__(self) -> float:
        import os
        import signal

        os.kill(os.getpid(), signal.SIGTERM)
        return super().__float__()


def test_a_trial_run_interrupted_while_logging_ends_killed_not_running(pulse_home):
    """A real SIGTERM between create_run and set_terminated: the trial run ends KILLED.

    The signal is sent while the logger builds the run's metrics (after create_run); with
    signals.install() it is raised there as signals.Terminated, as in ``pulse-ml train``.
    """
    import signal

    from pulse_ml.env import signals

    exp = runs.open_experiment(keys.TRAIN_EXPERIMENT)
    client = mlflow.MlflowClient()
    parent = client.create_run(exp, run_name="parent").info.run_id
    logger = trials.TrialLogger(parent, exp, "toy", "cv_mse")
    trial = _one_trial()
    trial.set_user_attr("metrics", {"cv_mse": _SigtermOnRead(0.5)})
    old = signal.getsignal(signal.SIGTERM)
    signals.install()
    try:
        with pytest.raises(signals.Terminated):
            logger(trial)
    finally:
        signal.signal(signal.SIGTERM, old)
    trial_runs = client.search_runs([exp], "tags.kind = 'trial'")
    assert [r.info.status for r in trial_runs] == ["KILLED"]  # was: RUNNING forever


def test_a_trial_run_whose_metrics_cannot_be_logged_ends_failed(pulse_home):
    """A write MLflow refuses (an invalid metric name) after create_run: FAILED, not RUNNING."""
    from mlflow.exceptions import MlflowException

    exp = runs.open_experiment(keys.TRAIN_EXPERIMENT)
    client = mlflow.MlflowClient()
    parent = client.create_run(exp, run_name="parent").info.run_id
    logger = trials.TrialLogger(parent, exp, "toy", "cv_mse")
    trial = _one_trial()
    trial.set_user_attr("metrics", {"cv mse #1?": 0.5})
    with pytest.raises(MlflowException):
        logger(trial)
    trial_runs = client.search_runs([exp], "tags.kind = 'trial'")
    assert [r.info.status for r in trial_runs] == ["FAILED"]
