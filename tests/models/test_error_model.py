"""The error model is honest: fold k's predicted errors never saw fold k's residuals."""

from __future__ import annotations

import numpy as np
import pandas as pd

from pulse_ml.models.error_model import (
    CANDIDATES,
    centred_targets,
    design,
    fit_error_model,
    oof_predictions,
    ppi_shift,
)
from pulse_ml.sessions.feature_sets import feature_set_from_mapping

FEATURES = feature_set_from_mapping({"name": "t", "columns": {
    "x": {"kind": "numeric"}, "kind": {"kind": "categorical", "values": ["easy", "hard"]}}})


def _data(seed: int, n: int = 1500, spread: float = 3.0):
    rng = np.random.default_rng(seed)
    hard = rng.random(n) < 0.3
    frame = pd.DataFrame({"x": rng.normal(size=n), "kind": np.where(hard, "hard", "easy")})
    oof = 4.0 + 0.3 * frame["x"].to_numpy()
    y = oof + rng.normal(size=n) * np.where(hard, np.sqrt(spread), 1.0) * 0.6
    folds = rng.integers(0, 5, n)
    return frame, y, oof, folds, hard


def test_fold_predictions_ignore_that_folds_residuals():
    frame, y, oof, folds, _ = _data(0)
    model = fit_error_model(frame, y, oof, folds, FEATURES)
    x = design(frame, model.columns, model.categories, oof)
    is_cat = np.array([c in model.categories for c in model.columns] + [False])
    e2 = (y - oof) ** 2
    k = folds == 2
    leaked = e2.copy()
    leaked[k] *= 100.0  # fold 2's residuals blown up
    for name, spec in CANDIDATES.items():
        honest = oof_predictions(x, e2, folds, spec, is_cat)
        again = oof_predictions(x, leaked, folds, spec, is_cat)
        np.testing.assert_array_equal(again[k], honest[k])  # fold 2 never saw them
        assert not np.allclose(again[~k], honest[~k]), name  # the other folds did
    per_fold, _ = centred_targets(y, oof, folds)
    np.testing.assert_array_equal(model.oof, oof_predictions(x, per_fold, folds,
                                                             CANDIDATES[model.choice], is_cat))
    # the centred targets: fold 2's constants (lam, m) never saw fold 2's ratings either
    y_leak = y.copy()
    y_leak[k] += 5.0
    again, _ = centred_targets(y_leak, oof, folds)
    i = list(np.unique(folds)).index(2)
    np.testing.assert_array_equal(again[i][~k], per_fold[i][~k])


def test_it_finds_the_error_spread_and_looks_no_better_than_it_is():
    frame, y, oof, folds, hard = _data(1, spread=9.0)
    model = fit_error_model(frame, y, oof, folds, FEATURES)
    assert model.choice != "constant" and model.gain_pct > 5 and model.fallback == ""
    assert model.oof[hard].mean() > 2 * model.oof[~hard].mean()
    # a model fitted on every residual (what a leak would use) scores better in sample than
    # the honest out-of-fold predictions: the honest number is the one kept
    lam, m = ppi_shift(y, oof)
    e2 = (y - lam * oof - m) ** 2
    in_sample = model.model.predict(design(frame, model.columns, model.categories, oof))
    assert np.mean((in_sample - e2) ** 2) < model.cv_mse[model.choice]
    # new sessions: the final model
    pred = model.predict(frame, oof)
    assert pred.shape == (len(frame),) and (pred > 0).all()


def test_constant_spread_falls_back_to_uniform_asking():
    frame, y, oof, folds, _ = _data(2, spread=1.0)
    model = fit_error_model(frame, y, oof, folds, FEATURES)
    assert model.gain_pct < 2  # no spread to find: the constant or a near-constant model
    pred = model.predict(frame, oof)
    assert pred.std() / pred.mean() < 0.25


def test_a_small_honest_saving_falls_back_to_the_constant_at_train_time():
    # error variance 3x in 30% of sessions: boosting wins on MSE, but asking by it saves < 10%
    # of the labels (judged on residuals it never saw), less than the weights cost at small n
    frame, y, oof, folds, hard = _data(1, spread=3.0)
    model = fit_error_model(frame, y, oof, folds, FEATURES)
    assert min(model.cv_mse, key=model.cv_mse.get) != "constant"
    assert model.choice == "constant" and "uniform asking" in model.fallback
    assert model.gain_pct == 0.0  # plan sees uniform asking: the constant, other folds' mean
    assert all(np.ptp(model.oof[folds == k]) == 0 for k in np.unique(folds))
    assert np.ptp(model.predict(frame, oof)) == 0
    candidate = model.predict(frame, oof, candidate=True)  # kept for request to re-judge
    assert candidate[hard].mean() > 1.5 * candidate[~hard].mean()
    np.testing.assert_array_equal(model.resid2, centred_targets(y, oof, folds)[1])


def test_the_target_is_the_centred_ppi_residual():
    """With a weak predictor (lam << 1) the error that PPI++ pays is (y - lam f - m)^2."""
    rng = np.random.default_rng(3)
    n = 4000
    f = rng.normal(size=n)
    y = 0.3 * f + rng.normal(size=n)  # slope 0.3: lam = 0.9 * 0.3
    lam, m = ppi_shift(y, f)
    assert abs(lam - 0.9 * np.cov(y, f, ddof=0)[0, 1] / f.var()) < 1e-12
    assert abs(m - (y.mean() - lam * f.mean())) < 1e-12
    # |f| large: the plain squared error (y - f)^2 grows with f^2, the centred one barely
    frame = pd.DataFrame({"x": f, "kind": "easy"})
    model = fit_error_model(frame, y, f, rng.integers(0, 5, n), FEATURES)
    far = np.abs(f) > 1.5
    plain = (y - f) ** 2
    assert plain[far].mean() > 2 * plain[~far].mean()
    assert model.resid2[far].mean() < 1.5 * model.resid2[~far].mean()
    assert model.lam == lam and model.shift == m
