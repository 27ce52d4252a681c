"""MLflow metrics that mean what they say: per-fold scores, counts as tags, pruned trials without
an ``objective``, the standard git tag, at most 12 tags per model version (issue 24)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import mlflow
import optuna
import pytest

from pulse_ml import keys
from pulse_ml.env.git_checkout import checkout_commit
from pulse_ml.registry import models, promotion, runs
from pulse_ml.registry.analysis import AnalysisModel
from pulse_ml.registry.trials import TrialLogger

ROOT = Path(__file__).resolve().parents[2]
TRAINED = ("tuning.n_trials=3", "progress=false", "model=lightgbm")  # shared with test_infer


@pytest.fixture
def trained(trained_home):
    return trained_home(*TRAINED)


def test_family_run_has_one_metric_per_fold_and_counts_as_tags(trained):
    client = mlflow.MlflowClient()
    run = client.get_run(trained.run_id)
    metrics, tags, params = run.data.metrics, run.data.tags, run.data.params
    for score, values in ((keys.FOLD_MSE, trained.metrics.fold_mse),
                          (keys.FOLD_PEARSON, trained.metrics.fold_pearson)):
        assert [metrics[keys.fold_metric(score, k)] for k in range(5)] == pytest.approx(values)
        assert score not in metrics  # a step series showed its last fold beside cv_mse
        assert keys.fold_metric(score, 5) not in metrics
    assert metrics[keys.CV_MSE] == pytest.approx(trained.metrics.mse)
    # indices and counts are tags or params, never metrics (best_trial was the first chart)
    assert not {keys.BEST_TRIAL, keys.N_TRIALS, keys.N_TRIALS_COMPLETE, keys.N_LABELED,
                keys.N_UNLABELED} & set(metrics)
    assert tags[keys.N_TRIALS] == "3" and tags[keys.BEST_TRIAL].isdigit()
    assert int(tags[keys.N_TRIALS_COMPLETE]) >= 1
    assert int(params[keys.N_LABELED]) == trained.n_labeled
    assert int(params[keys.N_UNLABELED]) == trained.n_unlabeled
    trials = client.search_runs([run.info.experiment_id], f"tags.{keys.KIND} = '{keys.KIND_TRIAL}'")
    assert len(trials) == 3
    for t in trials:
        assert keys.FOLD_MSE not in t.data.metrics
        if t.info.status == "FINISHED":
            assert keys.TRIAL_OBJECTIVE in t.data.metrics
            assert keys.fold_metric(keys.FOLD_MSE, 4) in t.data.metrics


def test_runs_carry_the_git_commit_of_the_checkout(trained):
    """Run from the project checkout (a worktree too), runs get the standard MLflow tag."""
    if not (ROOT / ".git").exists():
        pytest.skip("not run from a git checkout")
    head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True,
                          text=True, timeout=30)
    commit = checkout_commit()
    assert commit is not None and commit == head.stdout.strip()  # read without git itself
    client = mlflow.MlflowClient()
    run = client.get_run(trained.run_id)
    assert run.data.tags[keys.SOURCE_COMMIT] == commit
    assert keys.GIT_COMMIT not in run.data.tags  # the old name, also a session feature's
    (trial, *_) = client.search_runs([run.info.experiment_id],
                                     f"tags.{keys.KIND} = '{keys.KIND_TRIAL}'")
    assert trial.data.tags[keys.SOURCE_COMMIT] == commit


def test_git_commit_is_read_from_dot_git_and_skipped_outside_a_checkout(tmp_path):
    """A worktree's ``.git`` file and packed refs resolve; a folder without ``.git`` is None."""
    sha = "0123456789abcdef0123456789abcdef01234567"
    (tmp_path / "pyproject.toml").write_text("")
    assert checkout_commit(tmp_path) is None
    main = tmp_path / "main.git"
    (main / "worktrees" / "w").mkdir(parents=True)
    (main / "packed-refs").write_text(f"# pack-refs with: peeled\n{sha} refs/heads/w\n")
    (main / "worktrees" / "w" / "HEAD").write_text("ref: refs/heads/w\n")
    (main / "worktrees" / "w" / "commondir").write_text("../..\n")
    (tmp_path / ".git").write_text(f"gitdir: {main / 'worktrees' / 'w'}\n")
    assert checkout_commit(tmp_path) == sha
    (main / "worktrees" / "w" / "HEAD").write_text("ref: refs/heads/unborn\n")
    assert checkout_commit(tmp_path) is None


def test_a_version_has_at_most_12_tags_and_the_readers_still_find_theirs(trained):
    client = mlflow.MlflowClient()
    mv = client.get_model_version(keys.REGISTERED_MODEL, trained.version)
    assert len(mv.tags) <= 12 and set(mv.tags) <= set(keys.VERSION_TAGS)
    first, _, rest = mv.description.partition("\n")
    assert "**" not in first and "`" not in first and first.startswith("lightgbm on feature")
    assert f"- {keys.N_UNLABELED}: {trained.n_unlabeled}" in rest
    assert (f"- {keys.GIT_COMMIT}: {checkout_commit()}" in rest) == bool(checkout_commit())
    assert "Promotion: " in rest
    champ = promotion.current_champion()  # what the promotion rule reads back
    assert champ.fingerprint == trained.data_fingerprint and champ.cv_group_by == "user_id"
    assert champ.values[keys.CV_MSE] == pytest.approx(trained.metrics.mse, abs=1e-6)
    assert champ.label_fingerprint and champ.family == "lightgbm"
    (listed,) = models.list_versions()  # what `promote` lists
    assert listed.cv_mse == pytest.approx(trained.metrics.mse, abs=1e-6)
    assert models.reference_version("champion")[2] == trained.data_fingerprint  # compare
    model = AnalysisModel("models:/any", ensemble=None, version=mv)
    assert model.git_commit == checkout_commit()  # infer's lineage: from the training run
    # versions registered before kept the commit as a tag: still read first
    client.set_model_version_tag(keys.REGISTERED_MODEL, trained.version, keys.GIT_COMMIT, "f" * 40)
    mv = client.get_model_version(keys.REGISTERED_MODEL, trained.version)
    assert AnalysisModel("models:/any", ensemble=None, version=mv).git_commit == "f" * 40


def _pruning_objective(trial) -> float:
    """Trial 0 completes with its per-fold scores; trial 1 is pruned after two folds."""
    folds = [1.2, 1.5, 1.1, 1.4, 1.3]
    for k, value in enumerate(folds[:2] if trial.number else folds):
        trial.report(2.5 + k if trial.number else value, k)
        if trial.number and k == 1:
            raise optuna.TrialPruned()
    trial.set_user_attr(keys.FOLD_MSE, folds)
    return sum(folds) / len(folds)


def test_a_pruned_trial_has_its_running_series_but_no_objective(pulse_home):
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    study = optuna.create_study(sampler=optuna.samplers.RandomSampler(seed=0))
    study.optimize(_pruning_objective, n_trials=2)
    complete, pruned = study.trials
    assert pruned.state.name == "PRUNED" and pruned.value is not None  # Optuna's partial value
    with runs.family_run("mean", "all", "f" * 64, keys.CV_MSE) as run_id:
        logger = TrialLogger(run_id, runs.experiment_id(keys.TRAIN_EXPERIMENT), "mean",
                             keys.CV_MSE)
        ids = [logger(t) for t in study.trials]
    client = mlflow.MlflowClient()
    done, cut = (client.get_run(i) for i in ids)
    assert done.data.metrics[keys.TRIAL_OBJECTIVE] == pytest.approx(complete.value)
    assert done.data.metrics[keys.fold_metric(keys.FOLD_MSE, 4)] == pytest.approx(1.3)
    assert cut.info.status == "KILLED" and keys.TRIAL_OBJECTIVE not in cut.data.metrics
    running = client.get_metric_history(ids[1], keys.RUNNING_PREFIX + keys.CV_MSE)
    assert [(m.step, m.value) for m in sorted(running, key=lambda m: m.step)] == [(0, 2.5),
                                                                                  (1, 3.5)]
    assert {done.data.tags.get(keys.SOURCE_COMMIT), cut.data.tags.get(keys.SOURCE_COMMIT)} == {
        checkout_commit()}  # the parent's source tags (None outside a checkout)
