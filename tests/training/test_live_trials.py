"""run_study hands every trial of any worker to on_trial once, in the main process."""

from __future__ import annotations

import os

import pandas as pd
import pytest

from pulse_ml import settings
from pulse_ml.config import compose
from pulse_ml.jobs.train import model_spec
from pulse_ml.training.family import training_data
from pulse_ml.training.folds import make_folds
from pulse_ml.training.tuning import (
    CVObjective,
    TuningSettings,
    own_trials,
    run_study,
    study_report,
)


def _objective(small_demo, family="ordinal_logit"):
    from pulse_ml.sessions.table import load_sessions

    cfg = compose("train", [f"model={family}", f"data.path={small_demo}"])
    table = load_sessions(str(small_demo), settings.feature_set(cfg), {}, only=[])
    labeled, y = training_data(table)
    folds = make_folds(len(y), 5, 42, labeled["user_id"].to_numpy())
    return CVObjective(labeled, y, folds, model_spec(cfg), table.features)


@pytest.mark.slow
def test_two_workers_every_trial_reaches_the_main_process_once(small_demo, tmp_path):
    seen = []
    tuning = TuningSettings(n_trials=6, workers=2, storage=str(tmp_path / "s.journal"))
    study, first = run_study(tuning, "live", _objective(small_demo), progress=False,
                             on_trial=lambda t: seen.append((t.number, os.getpid(),
                                                             t.state.name)))
    assert first == 0 and len(study.trials) == 6
    assert sorted(n for n, _, _ in seen) == list(range(6))  # each trial once, workers' too
    assert {pid for _, pid, _ in seen} == {os.getpid()}
    assert {s for _, _, s in seen} <= {"COMPLETE", "PRUNED"}
    # resumed: only the new trials are handed over
    again = []
    study, first = run_study(TuningSettings(n_trials=2, storage=str(tmp_path / "s.journal")),
                             "live", _objective(small_demo), progress=False,
                             on_trial=lambda t: again.append(t.number))
    assert first == 6 and again == [6, 7]
    history, importances = study_report(study, first, seed=0)
    assert list(history["number"]) == list(range(8))
    assert list(history["this_invocation"]) == [False] * 6 + [True] * 2
    done = history[history["state"] == "COMPLETE"]
    assert (done["best_so_far"].diff().dropna() <= 0).all()  # minimizing: never worse
    assert pd.Series(history["duration_s"]).gt(0).all()
    assert set(importances) <= set(study.best_params) and abs(sum(importances.values()) - 1) < 1e-6


@pytest.mark.slow
def test_two_invocations_on_one_sqlite_study_each_log_only_their_own(small_demo, tmp_path):
    """A second run_study on the same study (another `train`) starts while the first runs.

    The second one is started from the first one's trial hook, so the two interleave in the
    same way every time: the first invocation's later scans see the second one's trials
    (higher numbers) in the study; before invocation ids they were logged by both.
    """
    storage = f"sqlite:///{tmp_path / 'optuna.db'}"
    objective = _objective(small_demo)
    first_seen, second_seen = [], []

    def on_first(trial):
        first_seen.append(trial.number)
        if len(first_seen) == 1:  # another invocation joins the study now
            run_study(TuningSettings(n_trials=2, storage=storage, prune=False), "shared",
                      objective, progress=False, on_trial=lambda t: second_seen.append(t.number),
                      invocation="second")

    study, first = run_study(TuningSettings(n_trials=3, storage=storage, prune=False), "shared",
                             objective, progress=False, on_trial=on_first, invocation="first")
    assert first == 0 and len(study.trials) == 5
    assert len(first_seen) == 3 and len(second_seen) == 2
    assert not set(first_seen) & set(second_seen)  # no trial logged twice
    assert sorted(first_seen + second_seen) == list(range(5))
    by_invocation = {t.number: t.user_attrs["invocation"] for t in study.trials}
    assert {by_invocation[n] for n in first_seen} == {"first"}
    assert [t.number for t in own_trials(study, "first")] == sorted(first_seen)
    history, _ = study_report(study, first, seed=0, invocation="first")
    assert sorted(history.loc[history["this_invocation"], "number"]) == sorted(first_seen)
