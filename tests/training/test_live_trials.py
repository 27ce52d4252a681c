"""run_study hands every trial of any worker to on_trial once, in the main process."""

from __future__ import annotations

import os

import pandas as pd

from pulse_ml import settings
from pulse_ml.config import compose
from pulse_ml.jobs.train import model_spec
from pulse_ml.training.family import training_data
from pulse_ml.training.folds import make_folds
from pulse_ml.training.tuning import CVObjective, TuningSettings, run_study, study_report


def _objective(small_demo, family="ordinal_logit"):
    from pulse_ml.sessions.table import load_sessions

    cfg = compose("train", [f"model={family}", f"data.path={small_demo}"])
    table = load_sessions(str(small_demo), settings.feature_set(cfg), {}, only=[])
    labeled, y = training_data(table)
    folds = make_folds(len(y), 5, 42, labeled["user_id"].to_numpy())
    return CVObjective(labeled, y, folds, model_spec(cfg), table.features)


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
