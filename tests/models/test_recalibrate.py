"""Cross-fitted isotonic recalibration: helps a miscalibrated model, invents nothing on noise."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from pulse_ml.errors import PulseError
from pulse_ml.models.crossfit import fit_crossfit
from pulse_ml.models.factory import build_pipeline, model_spec_from_mapping
from pulse_ml.models.fast_predict import FastPredictor
from pulse_ml.sessions.feature_sets import feature_set_from_mapping
from pulse_ml.training.folds import make_folds
from pulse_ml.training.metrics import pearson

FS = feature_set_from_mapping({"name": "x", "columns": {"x": {"kind": "numeric"}}})
RIDGE = model_spec_from_mapping({"name": "ridge", "estimator": {
    "_target_": "sklearn.linear_model.Ridge", "alpha": 1.0}})


def _oof(frame: pd.DataFrame, recalibrate: str):
    y = frame["rating"].to_numpy()
    folds = make_folds(len(y), 5, 42)
    ens = fit_crossfit(lambda: build_pipeline(RIDGE, FS, {"recalibrate": recalibrate}), frame,
                       y, folds, FS, "ridge")
    pred = ens.oof["prediction"].to_numpy()
    return pearson(y, pred), float(np.mean((y - pred) ** 2)), ens


def _frame(seed: int, n: int = 3000, signal: bool = True) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    x = rng.normal(size=n)
    # a saturating (monotone, non-linear) satisfaction curve: a line fits it badly
    mean = 3.0 + 1.6 * np.tanh(3 * x) if signal else np.full(n, 3.5)
    y = np.clip(np.round(mean + rng.normal(0, 0.7, n)), 1, 5)
    return pd.DataFrame({"session_id": [f"s{i}" for i in range(n)], "x": x, "rating": y})


def test_isotonic_raises_r_and_lowers_mse_of_a_miscalibrated_model():
    frame = _frame(1)
    r0, mse0, _ = _oof(frame, "none")
    r1, mse1, ens = _oof(frame, "isotonic")
    print(f"ridge: r {r0:.3f} mse {mse0:.3f}; + isotonic: r {r1:.3f} mse {mse1:.3f}")
    assert r1 > r0 + 0.02 and mse1 < mse0 - 0.03
    # the fast path and the ensemble agree with the wrapped estimator
    np.testing.assert_allclose(FastPredictor(ens, threads=1).predict(frame),
                               ens.predict(frame), rtol=1e-12)


def test_isotonic_on_noise_invents_no_signal():
    r, _, _ = _oof(_frame(2, signal=False), "isotonic")
    print(f"noise + isotonic: OOF r {r:.3f}")
    assert abs(r) < 0.06  # s.e. ~0.018 at n = 3,000


def test_unknown_recalibration_is_refused():
    with pytest.raises(PulseError, match="recalibrate"):
        build_pipeline(RIDGE, FS, {"recalibrate": "platt"})
