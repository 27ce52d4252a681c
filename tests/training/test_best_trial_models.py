"""The best trial's fold models are reused as the ensemble, identical to fitting them again.

Issue 25: ``train`` no longer refits the best trial when this process ran it. Real Optuna
study (seeded TPE, median pruner), real LightGBM pipelines on the small demo.
"""

from __future__ import annotations

import numpy as np
import optuna

from pulse_ml import keys, settings
from pulse_ml.config import compose
from pulse_ml.jobs.train import model_spec
from pulse_ml.models.crossfit import fit_crossfit
from pulse_ml.models.factory import build_pipeline
from pulse_ml.sessions.table import load_sessions
from pulse_ml.training.family import training_data, with_text_search_space
from pulse_ml.training.folds import make_folds
from pulse_ml.training.tuning import CVObjective, TuningSettings, open_study


def _study(small_demo, objective_key: str, n_trials: int = 5):
    cfg = compose("train", ["model=lightgbm", f"data.path={small_demo}"])
    table = load_sessions(str(small_demo), settings.feature_set(cfg), {}, only=[])
    labeled, y = training_data(table)
    folds = make_folds(len(y), 5, 42, labeled["user_id"].to_numpy())
    spec = with_text_search_space(model_spec(cfg), table.features)
    objective = CVObjective(labeled, y, folds, spec, table.features, objective_key)
    optuna.logging.set_verbosity(optuna.logging.ERROR)
    study = open_study(TuningSettings(objective=objective_key), "reuse", 0)
    study.optimize(objective, n_trials=n_trials)
    return study, objective, labeled, y, folds, spec, table.features


def test_reused_fold_models_equal_a_refit_of_the_best_trial(small_demo):
    study, objective, labeled, y, folds, spec, features = _study(small_demo, keys.CV_MSE)
    best = study.best_trial
    kept = objective.best_models(best.number)
    assert kept is not None and len(kept) == 5
    others = [t.number for t in study.trials if t.number != best.number]
    assert all(objective.best_models(n) is None for n in others)  # only the best is kept

    def factory():
        return build_pipeline(spec, features, best.params)

    reused = fit_crossfit(factory, labeled, y, folds, features, "lightgbm", fitted=kept)
    refit = fit_crossfit(factory, labeled, y, folds, features, "lightgbm")
    assert all(a is b for a, b in zip(reused.models, kept, strict=True))
    np.testing.assert_array_equal(reused.oof["prediction"], refit.oof["prediction"])
    head = labeled.head(50)
    np.testing.assert_array_equal(reused.predict(head), refit.predict(head))
    assert reused.error_model.choice == refit.error_model.choice
    # the kept models are the best trial's: their out-of-fold MSE is the trial's value
    mse = float(np.mean((reused.oof["prediction"].to_numpy() - y) ** 2))
    assert abs(mse - best.value) < 1e-12


def test_maximized_objective_keeps_the_highest_trial_and_pickles_without_models(small_demo):
    import pickle

    study, objective, *_ = _study(small_demo, keys.CV_PEARSON, n_trials=4)
    assert objective.best_models(study.best_trial.number) is not None
    worst = min((t for t in study.trials if t.value is not None), key=lambda t: t.value)
    assert worst.number == study.best_trial.number or objective.best_models(worst.number) is None
    clone = pickle.loads(pickle.dumps(objective))  # what a tuning worker process receives
    assert clone.best_models(study.best_trial.number) is None
